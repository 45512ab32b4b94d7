r"""Public, data-independent mixing (gossip) matrices of ``dp_distributed`` (Li, Zhou, Chen & Jiang, spec seed-001).

Round k ≥ 1 of decentralised gradient descent mixes the learners' broadcasts with ``B_k = A_k (W + Σ)``
(spec §2.3). The matrices are public and never see data, so they affect utility only, never privacy (§6.3).

Conditions (spec §1.3, the Nedić–Ozdaglar form of Assumption 2 that Lemma 3 needs), checked by
:func:`validate_mixing` for every schedule, built-in or custom:

* A_k is m×m, finite, entrywise ≥ 0 and doubly stochastic (rows and columns sum to 1);
* a_ii(k) ≥ η for every i, and every positive entry is ≥ η (a_ij ∈ {0} ∪ [η, 1]);
* B-connectivity: every schedule here repeats with a period P, A_k = cycle[(k − 1) mod P], so the union of the
  graphs {(i, j): a_ij(k) > 0} over any P consecutive rounds is the union over the whole cycle, and B = P holds
  exactly when that union is connected.

Under them Φ(k, s) = A_k ⋯ A_{s+1} → 11ᵀ/m geometrically (Lemma 3), which §7.1 items 5–6 test.

Topologies (spec §6.3), m = n_learners:

* ``complete``: A = 11ᵀ/m (exact averaging in one round).
* ``ring``: Metropolis weights on the cycle graph; every nonzero entry is 1/3 for m ≥ 3, all entries are 1/2 for
  m = 2 (a single edge), and A = [[1]] for m = 1.
* ``star``: Metropolis weights with hub 0: hub↔leaf 1/m, leaf self-weight 1 − 1/m, hub self-weight 1/m.
* ``ring_matchings`` (time-varying, period 2): odd rounds k = 1, 3, … pair (0, 1), (2, 3), …; even rounds pair
  (1, 2), (3, 4), … plus (m − 1, 0) when m is even and m > 2. Paired nodes get a_ii = a_jj = a_ij = a_ji = 1/2,
  unpaired nodes a_ii = 1. The spec's wording ("even k pairs (0, 1), …") counts rounds from 0; rounds here count
  from 1, so the first round mixes (0, 1), (2, 3), …. Either way the union of two consecutive rounds is the path
  0–1–…–(m−1) (closed into a ring for even m > 2), which is connected.
* ``erdos_renyi``: Metropolis weights on a cycle of :data:`ERDOS_RENYI_PERIOD` graphs G(m, p), drawn from the
  *public* ``numpy.random.default_rng(seed)``: for each graph, m(m − 1)/2 uniforms in ``np.triu_indices(m, 1)``
  order, edge (i, j) iff u < p. The spec resamples every round; a fixed public cycle makes B-connectivity a
  checked fact (B = 16) rather than a high-probability event. A disconnected union is refused.
* ``custom``: a client-supplied list of m×m matrices, cycled in order, validated as above; at most
  :data:`MAX_CUSTOM_MATRICES` matrices.

For m = 1 every topology is the identity with period 1.
"""

from __future__ import annotations

import hashlib
import math
import operator
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

import numpy as np
from scipy import sparse
from scipy.sparse.csgraph import connected_components

from privfit.errors import ParameterError

__all__ = [
    "ERDOS_RENYI_PERIOD",
    "MAX_CUSTOM_MATRICES",
    "MAX_LEARNERS",
    "TOPOLOGIES",
    "MixingError",
    "MixingSchedule",
    "make_mixing",
    "metropolis_weights",
    "validate_mixing",
]

TOPOLOGIES = ("complete", "ring", "star", "ring_matchings", "erdos_renyi", "custom")
MAX_LEARNERS = 1024  # spec §6.1: 1 ≤ n_learners ≤ 1024
MAX_CUSTOM_MATRICES = 64
ERDOS_RENYI_PERIOD = 16
DEFAULT_ETA = 1e-6  # spec §6.3
DEFAULT_TOLERANCE = 1e-9  # spec §6.3: row and column sums equal 1 within 1e−9
_MAX_LISTED_COMPONENTS = 5


class MixingError(ParameterError):
    """A mixing topology or matrix violates the conditions of spec §1.3 / §6.3; ``parameter`` names the field."""


# --------------------------------------------------------------------------------------------------------------
# Schedules


class MixingSchedule:
    """A periodic schedule of public mixing matrices: A_k = cycle[(k − 1) mod period] for rounds k ≥ 1 (spec §6.3).

    This general form stores each matrix of the cycle as a ``scipy.sparse.csr_array`` and mixes with a sparse
    product, O(nnz(A_k)·n) per round (spec §6.4). :func:`make_mixing` returns faster subclasses for the complete
    graph and the static ring with m ≥ 3. Instances are read-only after construction.
    """

    def __init__(
        self,
        topology: str,
        m: int,
        cycle: Sequence[sparse.csr_array],
        *,
        eta: float,
        details: Mapping[str, object] | None = None,
        period: int | None = None,
    ) -> None:
        self.topology = topology
        self.m = int(m)
        self.period = len(cycle) if period is None else int(period)
        if self.period < 1:
            raise ValueError("a mixing schedule needs at least one matrix")
        self.eta = float(eta)
        self._cycle = tuple(cycle)
        self._details = dict(details or {})

    def _index(self, k: int) -> int:
        k = operator.index(k)
        if k < 1:
            raise ValueError(f"round index k must be ≥ 1 (A_1 mixes the first round), got {k}")
        return (k - 1) % self.period

    def _check_values(self, V: np.ndarray) -> np.ndarray:
        V = np.asarray(V)
        if V.ndim not in (1, 2) or V.shape[0] != self.m:
            raise ValueError(f"V must have shape (m, n) = ({self.m}, n) with one row per learner, got {V.shape}")
        return V

    def matrix(self, k: int) -> np.ndarray:
        """Dense A_k (m×m float64, a fresh copy) for round k ≥ 1."""
        return np.asarray(self._cycle[self._index(k)].toarray())

    def mix(self, k: int, V: np.ndarray) -> np.ndarray:
        """A_k @ V as a new array, for V of shape (m, n) (or (m,)): row i becomes Σ_j a_ij(k) V_j (spec §2.3)."""
        index = self._index(k)
        V = self._check_values(V)
        if self.m == 1:
            return np.array(V, dtype=np.float64)
        return np.asarray(self._cycle[index] @ V, dtype=np.float64)

    def matrices(self) -> list[np.ndarray]:
        """The dense matrices of one period, A_1 … A_period."""
        return [self.matrix(k) for k in range(1, self.period + 1)]

    def describe(self) -> dict[str, object]:
        """JSON-able public description (for ``resolved_params``): topology, n_learners, period, eta and the
        topology's own public parameters (edge_probability and seed for erdos_renyi, a digest for custom)."""
        return {
            "topology": self.topology,
            "n_learners": self.m,
            "period": self.period,
            "time_varying": self.period > 1,
            "eta": self.eta,
            **self._details,
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}(topology={self.topology!r}, m={self.m}, period={self.period})"


class _CompleteSchedule(MixingSchedule):
    """A = 11ᵀ/m: mixing is a mean broadcast, O(mn), and no matrix is stored."""

    def __init__(self, m: int, *, eta: float) -> None:
        super().__init__("complete", m, (), eta=eta, details={"weights": "uniform"}, period=1)

    def matrix(self, k: int) -> np.ndarray:
        self._index(k)
        return np.full((self.m, self.m), 1.0 / self.m)

    def mix(self, k: int, V: np.ndarray) -> np.ndarray:
        self._index(k)
        V = self._check_values(V)
        mean = np.mean(V, axis=0, dtype=np.float64)
        return np.array(np.broadcast_to(mean, V.shape), dtype=np.float64)


class _RingSchedule(MixingSchedule):
    """Metropolis ring with m ≥ 3: every nonzero weight is 1/3, so A V = (V + V_{i−1} + V_{i+1})/3, O(mn)."""

    def mix(self, k: int, V: np.ndarray) -> np.ndarray:
        self._index(k)
        V = np.asarray(self._check_values(V), dtype=np.float64)
        return np.asarray((V + np.roll(V, 1, axis=0) + np.roll(V, -1, axis=0)) / 3.0)


# --------------------------------------------------------------------------------------------------------------
# Weights


def _metropolis_sparse(m: int, rows: np.ndarray, cols: np.ndarray) -> sparse.csr_array:
    """Metropolis weights (spec §6.3) of the undirected graph with edges {rows[e], cols[e]}, rows[e] ≠ cols[e],
    each edge listed once."""
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    degree = np.bincount(rows, minlength=m) + np.bincount(cols, minlength=m)
    weight = 1.0 / (1.0 + np.maximum(degree[rows], degree[cols]))
    off_sum = np.bincount(rows, weights=weight, minlength=m) + np.bincount(cols, weights=weight, minlength=m)
    diagonal = 1.0 - off_sum
    nodes = np.arange(m)
    all_rows = np.concatenate([rows, cols, nodes])
    all_cols = np.concatenate([cols, rows, nodes])
    values = np.concatenate([weight, weight, diagonal])
    return sparse.csr_array(sparse.coo_array((values, (all_rows, all_cols)), shape=(m, m)))


def metropolis_weights(adjacency: np.ndarray) -> np.ndarray:
    """Metropolis(–Hastings) weights of an undirected graph (spec §6.3), dense m×m float64.

    a_ij = 1/(1 + max(d_i, d_j)) on every edge, a_ii = 1 − Σ_{j≠i} a_ij, 0 elsewhere; d_i is the degree of i.
    The result is symmetric and doubly stochastic, with a_ii ≥ 1/(1 + d_i) > 0. ``adjacency`` is a symmetric
    m×m array whose nonzero off-diagonal entries are the edges; its diagonal is ignored.
    """
    adjacency = np.asarray(adjacency)
    if adjacency.ndim != 2 or adjacency.shape[0] != adjacency.shape[1]:
        raise ValueError(f"adjacency must be a square m×m array, got shape {adjacency.shape}")
    edges = adjacency != 0
    np.fill_diagonal(edges, False)
    if not np.array_equal(edges, edges.T):
        raise ValueError("adjacency must be symmetric (an undirected graph)")
    rows, cols = np.nonzero(np.triu(edges, 1))
    return np.asarray(_metropolis_sparse(adjacency.shape[0], rows, cols).toarray())


def _ring_edges(m: int) -> tuple[np.ndarray, np.ndarray]:
    if m < 2:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    if m == 2:
        return np.array([0]), np.array([1])
    nodes = np.arange(m)
    return nodes, (nodes + 1) % m


def _matching(m: int, odd_round: bool) -> sparse.csr_array:
    """One ring_matchings matrix: 1/2 on each pair's 2×2 block, 1 on the diagonal of unpaired nodes."""
    start = 0 if odd_round else 1
    pairs = [(i, i + 1) for i in range(start, m - 1, 2)]
    if not odd_round and m % 2 == 0 and m > 2:
        pairs.append((m - 1, 0))
    diagonal = np.ones(m)
    rows, cols, values = [], [], []
    for i, j in pairs:
        diagonal[i] = diagonal[j] = 0.5
        rows += [i, j]
        cols += [j, i]
        values += [0.5, 0.5]
    nodes = list(range(m))
    return sparse.csr_array((values + list(diagonal), (rows + nodes, cols + nodes)), shape=(m, m))


# --------------------------------------------------------------------------------------------------------------
# Validation


def _check_eta_tolerance(eta: float, tolerance: float) -> None:
    if not (math.isfinite(eta) and 0.0 < eta < 1.0):
        raise ValueError(f"eta must be in (0, 1) (spec §1.3), got {eta}")
    if not (math.isfinite(tolerance) and tolerance > 0.0):
        raise ValueError(f"tolerance must be finite and > 0, got {tolerance}")


def _check_one(A: np.ndarray, index: int, m: int, *, eta: float, tolerance: float, parameter: str) -> None:
    """Every per-matrix condition of spec §1.3 / §6.3 on the dense matrix ``A`` (``index`` is 0-based)."""
    where = f"matrix {index} (0-based, used at rounds k ≡ {index + 1} mod period)"
    if A.ndim != 2 or A.shape != (m, m):
        raise MixingError(parameter, f"{where} has shape {A.shape}; every matrix must be square {m}×{m}")
    if not np.all(np.isfinite(A)):
        i, j = np.argwhere(~np.isfinite(A))[0]
        raise MixingError(parameter, f"{where} has a non-finite entry a[{i}][{j}] = {float(A[i, j])!r}")
    if np.any(A < 0.0):
        i, j = np.argwhere(A < 0.0)[0]
        raise MixingError(
            parameter, f"{where} has a negative entry a[{i}][{j}] = {float(A[i, j])!r}; mixing weights must be ≥ 0"
        )
    for axis, name in ((1, "row"), (0, "column")):
        sums = A.sum(axis=axis)
        bad = np.flatnonzero(np.abs(sums - 1.0) > tolerance)
        if bad.size:
            i = int(bad[0])
            raise MixingError(
                parameter,
                f"{where}: {name} {i} sums to {float(sums[i])!r}, not 1 (tolerance {tolerance:g}); "
                f"{bad.size} {name}(s) fail. A mixing matrix must be doubly stochastic: every row and every "
                "column sums to 1",
            )
    diagonal = np.diagonal(A)
    low = np.flatnonzero(diagonal < eta)
    if low.size:
        i = int(low[0])
        raise MixingError(
            parameter,
            f"{where}: diagonal entry a[{i}][{i}] = {float(diagonal[i])!r} is below eta = {eta:g}; every learner must "
            "keep a self-weight a_ii ≥ eta",
        )
    small = (A > 0.0) & np.less(A, eta)
    if np.any(small):
        i, j = np.argwhere(small)[0]
        raise MixingError(
            parameter,
            f"{where}: positive entry a[{i}][{j}] = {float(A[i, j])!r} is below eta = {eta:g}; "
            "every entry must be 0 or ≥ eta",
        )


def _union_components(union: sparse.csr_array) -> tuple[int, np.ndarray]:
    count, labels = connected_components(union, directed=True, connection="strong")
    return int(count), labels


def _describe_components(count: int, labels: np.ndarray) -> str:
    groups = [np.flatnonzero(labels == c) for c in range(min(count, _MAX_LISTED_COMPONENTS))]
    shown = "; ".join("{" + ", ".join(str(int(i)) for i in g[:8]) + (", …" if g.size > 8 else "") + "}" for g in groups)
    more = f"; … ({count - _MAX_LISTED_COMPONENTS} more)" if count > _MAX_LISTED_COMPONENTS else ""
    return f"{count} connected components (learners {shown}{more})"


def _validate_stream(
    matrices: Iterable[np.ndarray], m: int | None, *, eta: float, tolerance: float, parameter: str
) -> None:
    """Per-matrix checks one matrix at a time (memory O(m²)), then the union-graph connectivity."""
    union: sparse.csr_array | None = None
    count = 0
    for index, raw in enumerate(matrices):
        A = np.asarray(raw, dtype=np.float64)
        if m is None:
            if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] < 1:
                raise MixingError(parameter, f"matrix 0 has shape {A.shape}; every matrix must be square m×m")
            m = A.shape[0]
        _check_one(A, index, m, eta=eta, tolerance=tolerance, parameter=parameter)
        edges = sparse.csr_array((A > 0.0).astype(np.float64))
        union = edges if union is None else (union + edges)
        count += 1
    if union is None:
        raise MixingError(parameter, "at least one mixing matrix is required")
    components, labels = _union_components(union)
    if components > 1:
        raise MixingError(
            parameter,
            f"the union graph over the {count} matrices of the cycle is disconnected: "
            f"{_describe_components(components, labels)}. Learners in different components never exchange "
            "information, so they cannot reach consensus; add edges so the union over one period is "
            "connected (spec §1.3, B-connectivity)",
        )


def validate_mixing(
    matrices: Sequence[np.ndarray], *, eta: float = DEFAULT_ETA, tolerance: float = DEFAULT_TOLERANCE
) -> None:
    """Check a cycle of mixing matrices against spec §1.3 / §6.3; raise :class:`MixingError` (``mixing_matrices``).

    Every matrix must be square m×m (one m for all), finite, entrywise ≥ 0, with every row and column summing to 1
    within ``tolerance``, a_ii ≥ ``eta`` and every positive entry ≥ ``eta``. The union graph over the whole cycle
    must be connected; for a cycle repeated with period P this is B-connectivity with B = P, because the union over
    any P consecutive rounds is the union over the cycle. Directed edges a_ij > 0 are used (strong connectivity);
    for doubly stochastic matrices it coincides with plain connectivity of the union.
    """
    _check_eta_tolerance(eta, tolerance)
    _validate_stream(matrices, None, eta=eta, tolerance=tolerance, parameter="mixing_matrices")


# --------------------------------------------------------------------------------------------------------------
# Factory


def _check_m(m: object) -> int:
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)):
        raise MixingError("n_learners", f"must be an integer, got {type(m).__name__} {m!r}")
    if not 1 <= int(m) <= MAX_LEARNERS:
        raise MixingError("n_learners", f"must satisfy 1 ≤ n_learners ≤ {MAX_LEARNERS}, got {int(m)}")
    return int(m)


def _check_edge_probability(p: object) -> float:
    if p is None:
        raise MixingError("edge_probability", "topology 'erdos_renyi' requires edge_probability p in (0, 1]")
    if isinstance(p, bool) or not isinstance(p, (int, float, np.integer, np.floating)):
        raise MixingError("edge_probability", f"must be a number in (0, 1], got {type(p).__name__} {p!r}")
    value = float(p)
    if not (math.isfinite(value) and 0.0 < value <= 1.0):
        raise MixingError("edge_probability", f"must be in (0, 1], got {value!r}")
    return value


def _check_seed(seed: object) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or int(seed) < 0:
        raise MixingError("topology_seed", f"the public topology seed must be an integer ≥ 0, got {seed!r}")
    return int(seed)


def _validate_builtin(schedule: MixingSchedule, *, parameter: str) -> MixingSchedule:
    _validate_stream(
        (schedule.matrix(k) for k in range(1, schedule.period + 1)),
        schedule.m,
        eta=schedule.eta,
        tolerance=DEFAULT_TOLERANCE,
        parameter=parameter,
    )
    return schedule


def _erdos_renyi(m: int, p: float, seed: int, eta: float) -> MixingSchedule:
    details: dict[str, object] = {
        "weights": "metropolis",
        "edge_probability": p,
        "seed": seed,
        "rng": "numpy.random.default_rng(seed), m(m-1)/2 uniforms per graph in np.triu_indices(m, 1) order",
    }
    if m == 1:
        return MixingSchedule("erdos_renyi", 1, [sparse.csr_array(np.ones((1, 1)))], eta=eta, details=details)
    rng = np.random.default_rng(seed)
    upper_rows, upper_cols = np.triu_indices(m, 1)
    cycle = []
    union_rows, union_cols = [], []
    for _ in range(ERDOS_RENYI_PERIOD):
        edge = rng.random(upper_rows.size) < p
        rows, cols = upper_rows[edge], upper_cols[edge]
        cycle.append(_metropolis_sparse(m, rows, cols))
        union_rows.append(rows)
        union_cols.append(cols)
    rows, cols = np.concatenate(union_rows), np.concatenate(union_cols)
    union = sparse.csr_array((np.ones(rows.size), (rows, cols)), shape=(m, m))
    components, labels = connected_components(union, directed=False)
    if components > 1:
        raise MixingError(
            "edge_probability",
            f"with edge_probability = {p:g} and topology seed {seed}, the union of the {ERDOS_RENYI_PERIOD} "
            f"Erdős–Rényi graphs on {m} learners is disconnected: "
            f"{_describe_components(int(components), labels)}. Use a larger edge_probability "
            "(≳ ln(m)/m per round is safe) or another seed",
        )
    return MixingSchedule("erdos_renyi", m, cycle, eta=eta, details=details)


def _custom(m: int, matrices: object, eta: float) -> MixingSchedule:
    parameter = "mixing_matrices"
    if matrices is None:
        raise MixingError(parameter, "topology 'custom' requires mixing_matrices: a list of m×m matrices")
    if isinstance(matrices, (str, bytes)) or not hasattr(matrices, "__len__"):
        raise MixingError(parameter, "must be a list of m×m matrices (nested lists of numbers)")
    listed = cast(Sequence[Any], matrices)  # a sized, non-string container (checked just above)
    count = len(listed)
    if count == 0:
        raise MixingError(parameter, "at least one mixing matrix is required")
    if count > MAX_CUSTOM_MATRICES:
        raise MixingError(parameter, f"at most {MAX_CUSTOM_MATRICES} matrices are accepted per cycle, got {count}")
    digest = hashlib.sha256()
    cycle: list[sparse.csr_array] = []

    def converted() -> Iterable[np.ndarray]:
        for index, raw in enumerate(listed):
            where = f"matrix {index} (0-based)"
            if isinstance(raw, (str, bytes)) or not hasattr(raw, "__len__") or len(raw) != m:
                size = len(raw) if hasattr(raw, "__len__") and not isinstance(raw, (str, bytes)) else "no"
                raise MixingError(parameter, f"{where} has {size} rows; every matrix must be {m}×{m} (n_learners)")
            try:
                A = np.asarray(raw)
            except (ValueError, TypeError):
                A = None
            if A is None or A.dtype.kind not in "iuf" or A.shape != (m, m):
                shape = "ragged or non-numeric" if A is None or A.dtype.kind not in "iuf" else f"shape {A.shape}"
                raise MixingError(parameter, f"{where} is {shape}; every matrix must be {m}×{m} numbers (n_learners)")
            A = np.ascontiguousarray(A, dtype=np.float64)
            digest.update(A.tobytes())
            cycle.append(sparse.csr_array(A))
            yield A

    _validate_stream(converted(), m, eta=eta, tolerance=DEFAULT_TOLERANCE, parameter=parameter)
    details = {"weights": "custom", "matrices_sha256": digest.hexdigest()}
    return MixingSchedule("custom", m, cycle, eta=eta, details=details)


def make_mixing(
    topology: str,
    m: int,
    *,
    edge_probability: float | None = None,
    seed: int = 0,
    matrices: Sequence[Sequence[Sequence[float]]] | None = None,
    eta: float = DEFAULT_ETA,
) -> MixingSchedule:
    """Build and validate the public mixing schedule of ``topology`` for m learners (spec §6.3).

    ``edge_probability`` (p in (0, 1]) and the public ``seed`` (int ≥ 0) are used by ``erdos_renyi`` only;
    ``edge_probability`` is refused for any other topology, ``seed`` is ignored by them. ``matrices`` (at most
    :data:`MAX_CUSTOM_MATRICES` m×m nested lists, cycled in order) is required by ``custom`` and refused otherwise.
    Every schedule, built-in or custom, passes :func:`validate_mixing` with this ``eta``. Raises
    :class:`MixingError` naming ``topology``, ``n_learners``, ``edge_probability``, ``topology_seed`` or
    ``mixing_matrices``.
    """
    if topology not in TOPOLOGIES:
        raise MixingError("topology", f"unknown topology {topology!r}; choose one of {', '.join(TOPOLOGIES)}")
    m = _check_m(m)
    _check_eta_tolerance(eta, DEFAULT_TOLERANCE)
    if topology != "erdos_renyi" and edge_probability is not None:
        raise MixingError(
            "edge_probability", f"is only used by topology 'erdos_renyi'; omit it for topology {topology!r}"
        )
    if topology != "custom" and matrices is not None:
        raise MixingError("mixing_matrices", f"are only used by topology 'custom'; omit them for topology {topology!r}")

    if topology == "custom":
        return _custom(m, matrices, eta)
    if topology == "erdos_renyi":
        random_graphs = _erdos_renyi(m, _check_edge_probability(edge_probability), _check_seed(seed), eta)
        return _validate_builtin(random_graphs, parameter="edge_probability")

    schedule: MixingSchedule
    if topology == "complete":
        schedule = _CompleteSchedule(m, eta=eta)
    elif topology == "ring":
        rows, cols = _ring_edges(m)
        cls = _RingSchedule if m >= 3 else MixingSchedule
        schedule = cls("ring", m, [_metropolis_sparse(m, rows, cols)], eta=eta, details={"weights": "metropolis"})
    elif topology == "star":
        leaves = np.arange(1, m)
        cycle = [_metropolis_sparse(m, np.zeros_like(leaves), leaves)]
        schedule = MixingSchedule("star", m, cycle, eta=eta, details={"weights": "metropolis", "hub": 0})
    else:  # ring_matchings
        cycle = [_matching(m, odd_round=True)] if m == 1 else [_matching(m, True), _matching(m, False)]
        details = {"weights": "pairwise 1/2", "pairing": "odd k: (0,1),(2,3),…; even k: (1,2),(3,4),…[,(m-1,0)]"}
        schedule = MixingSchedule("ring_matchings", m, cycle, eta=eta, details=details)
    return _validate_builtin(schedule, parameter="topology")
