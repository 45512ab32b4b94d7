r"""Noisy histograms on a public grid with exact discrete Gaussian noise: the release of private preprocessing.

**Mechanism.** For p numeric columns, each with public bounds [L_j, U_j] and a public grid of B bins
(:func:`symlog_edges`), the release is

    H̃_{j,k} = H_{j,k}(D) + Z_{j,k},    H_{j,k}(D) = #{i : bin_j(x_{ij}) = k},    Z_{j,k} ~ N_Z(0, S) i.i.d.,

where bin_j is a fixed public function of one cell (values are clipped to [L_j, U_j] first) and N_Z(0, S) is the
discrete Gaussian P(z) ∝ exp(−z²/(2S)) on the integers with an integer variance parameter S.

**Sensitivity.** Replacing one row (privfit's neighbouring relation, DESIGN §1.1) moves, in each column, at most one
unit of count from one bin to another: H(D) − H(D′) is an integer vector with ‖H(D) − H(D′)‖₂² ≤ 2p.
Under user-level privacy (a privacy unit of at most k rows, :mod:`privfit.datasets.units`) replacing one unit removes
at most k counts and adds at most k in each column; an integer vector v whose positive entries sum to ≤ k and whose
negative entries sum to ≥ −k has ‖v‖₂² ≤ k² + k² (‖v⁺‖₂ ≤ ‖v⁺‖₁), so ‖H(D) − H(D′)‖₂² ≤ 2pk²: the sensitivity is
k√(2p) (``rows_per_unit`` = k below; k = 1 is the row model).

**Privacy.** For an integer shift Δ, D_α(N_Z(0, S) ‖ N_Z(Δ, S)) ≤ αΔ²/(2S) (Canonne, Kamath & Steinke 2020,
"The Discrete Gaussian for Differential Privacy", Thm. 4 and Prop. 5: ρ = Δ²/(2S) concentrated DP), and Rényi
divergences of independent coordinates add, so the release is (α, α·2p/(2S))-RDP for every α > 1: exactly the
curve of the continuous Gaussian mechanism with σ = √S and L2 sensitivity √(2p) (:func:`histogram_cost`).

**Gaussian DP.** The bare discrete Gaussian is not (Δ/√S)-GDP (``tests/privacy/test_noise_domination.py``), but
N_Z(v, S) is within e^{±η} per coordinate, pointwise, of a post-processing of the continuous N(v, S − τ²) with
τ = 4 (:mod:`privfit.privacy.noise`, docstring b), which is (Δ/√(S − τ²))-GDP. So for S > τ² the release carries
the GDP Σ μ² = 2pk²/(S − τ²) and its p·B coordinates (:func:`histogram_release_cost`,
:mod:`privfit.privacy.gaussian_dp`); for S ≤ τ² it claims none.

**Exactness.** Counts and noise are integers drawn by :func:`privfit.privacy.exact_sampling.discrete_gaussian`
(CKS Alg. 3 in integer arithmetic): no floating-point number enters the release, whatever the noise sampler of the
server. The bin of a cell is a deterministic function of that cell and public edges.

**Calibration to a share of the budget** (:func:`variance_for_share`): the dataset's privacy filter measures a
cost as a share of the budget. Its RDP certificates' share is linear in the curve, share₁/S with share₁ the share
at S = 1; its GDP certificate's is 2pk²/((S − τ²)μ_G²). The smallest integer S whose share (the least of them) is
≤ the requested share is taken (rounding against the user).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .cost import PrivacyCost
from .errors import PrivacyParameterError
from .exact_sampling import MAX_GAUSSIAN_VARIANCE, discrete_gaussian
from .filter import PrivacyFilter
from .gaussian_dp import gaussian_mu_squared
from .mechanisms import gaussian_rdp
from .noise import SMOOTHING_SCALE
from .orders import OrderGrid

__all__ = [
    "NoisyHistograms",
    "add_histogram_noise",
    "histogram_cost",
    "histogram_counts",
    "histogram_matrix",
    "histogram_release_cost",
    "release_histograms",
    "symlog_edges",
    "symlog_grids",
    "variance_for_share",
]


def _symlog(x: np.ndarray) -> np.ndarray:
    return np.asarray(np.sign(x) * np.log1p(np.abs(x)), dtype=np.float64)


def _symexp(t: np.ndarray) -> np.ndarray:
    return np.asarray(np.sign(t) * np.expm1(np.abs(t)), dtype=np.float64)


def symlog_grids(lower: np.ndarray, upper: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """The public grids of p columns with bounds ``lower[j] < upper[j]``: a (p, ``bins`` + 1) array whose row j
    is uniform in t(x) = sign(x)·log1p(|x|) over [t(lower_j), t(upper_j)] mapped back, with the first and last
    edge exactly the bounds, and each row's scale (``"symlog"``). t is close to the identity for |x| ≲ 1 and to a
    logarithm for |x| ≫ 1, so one rule serves a score on [0, 1] (nearly uniform bins) and an amount on [0, 10⁶]
    (bins of equal ratio). A row whose edges are not strictly increasing in floating point falls back to uniform
    edges (``"uniform"``), and is NaN (``""``) if even those are not (a range too narrow for ``bins`` distinct
    floats). A function of the public bounds only."""
    lower = np.asarray(lower, dtype=np.float64).reshape(-1)
    upper = np.asarray(upper, dtype=np.float64).reshape(-1)
    if bins < 1 or lower.shape != upper.shape or not np.all(lower < upper):
        raise PrivacyParameterError("bins", f"need bins ≥ 1 and lower < upper in every column, got bins = {bins}")
    edges = _symexp(np.linspace(_symlog(lower), _symlog(upper), bins + 1, axis=1))
    edges[:, 0], edges[:, -1] = lower, upper
    scales = np.full(lower.size, "symlog", dtype=object)
    bad = np.flatnonzero(~np.all(np.diff(edges, axis=1) > 0, axis=1))
    if bad.size:
        uniform = np.linspace(lower[bad], upper[bad], bins + 1, axis=1)
        uniform[:, 0], uniform[:, -1] = lower[bad], upper[bad]
        none = ~np.all(np.diff(uniform, axis=1) > 0, axis=1)
        uniform[none] = np.nan
        edges[bad] = uniform
        scales[bad] = np.where(none, "", "uniform")
    return edges, scales


def symlog_edges(lower: float, upper: float, bins: int) -> np.ndarray | None:
    """The grid of one column (:func:`symlog_grids`), or None when it has none."""
    edges = symlog_grids(np.array([lower]), np.array([upper]), bins)[0][0]
    return None if np.isnan(edges).any() else edges


def histogram_counts(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Exact integer counts of ``values`` (already within [edges[0], edges[-1]]) in the bins
    [e_k, e_{k+1}) (the last bin closed): bin(x) = #{interior edges ≤ x}, a fixed function of one cell."""
    index = np.searchsorted(edges[1:-1], np.asarray(values, dtype=np.float64), side="right")
    return np.bincount(index, minlength=edges.size - 1).astype(np.int64)


_BLOCK_CELLS = 1 << 21
"""Cells binned at once by :func:`histogram_matrix` (bounds its temporaries to a few tens of MiB)."""


def histogram_matrix(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """The counts of every column of ``values`` (n, p) on its grid (row j of ``edges``, (p, B + 1)): a (p, B)
    int64 array equal to :func:`histogram_counts` column by column, computed for all columns at once. Each cell's
    bin is first estimated in the grid's t-scale, then moved until e_k ≤ x < e_{k+1} (the last bin closed)."""
    values = np.asarray(values, dtype=np.float64)
    columns, bins = edges.shape[0], edges.shape[1] - 1
    counts = np.zeros(columns * bins, dtype=np.int64)
    if values.shape[0] == 0:
        return counts.reshape(columns, bins)
    start, span = _symlog(edges[:, 0]), _symlog(edges[:, -1]) - _symlog(edges[:, 0])
    which = np.arange(columns)
    offsets = which * bins
    step = max(1, _BLOCK_CELLS // max(1, columns))
    for at in range(0, values.shape[0], step):
        block = values[at : at + step]
        with np.errstate(invalid="ignore"):
            guess = np.floor((_symlog(block) - start) / span * bins)
        index = np.clip(np.nan_to_num(guess), 0, bins - 1).astype(np.int64)
        for _ in range(bins + 1):  # each pass moves every cell one bin towards its own; B passes always suffice
            down = (index > 0) & (block < edges[which, index])
            up = (index < bins - 1) & (block >= edges[which, np.minimum(index + 1, bins)])
            if not (down.any() or up.any()):
                break
            index += up.astype(np.int64) - down.astype(np.int64)
        counts += np.bincount((index + offsets).ravel(), minlength=columns * bins)
    return counts.reshape(columns, bins)


def histogram_cost(columns: int, variance: int, grid_orders: np.ndarray, rows_per_unit: int = 1) -> np.ndarray:
    """The RDP curve of :func:`release_histograms` over ``columns`` columns with noise variance S: α·2pk²/(2S) on
    ``grid_orders`` (module docstring; k = ``rows_per_unit``, 1 for row-level data), i.e. the Gaussian curve with
    σ = √S and sensitivity k√(2p), each rounded so that the curve is never below the exact α·pk²/S."""
    if columns < 1 or variance < 1 or rows_per_unit < 1:
        raise PrivacyParameterError("columns", f"need columns ≥ 1, variance ≥ 1 and rows_per_unit ≥ 1, got {columns}, "
                                    f"{variance}, {rows_per_unit}")  # fmt: skip
    sensitivity = math.nextafter(rows_per_unit * math.sqrt(2.0 * columns), math.inf)
    sigma = math.nextafter(math.sqrt(float(variance)), 0.0)
    return gaussian_rdp(grid_orders, sigma=sigma, sensitivity=sensitivity)


def histogram_release_cost(
    columns: int, variance: int, grid: OrderGrid, rows_per_unit: int = 1, *, bins: int
) -> PrivacyCost:
    """The cost of :func:`release_histograms` over ``columns`` columns of ``bins`` bins with noise variance S: the
    curve of :func:`histogram_cost` and, for S > τ², the GDP Σ μ² = 2pk²/(S − τ²) (module docstring)."""
    curve = histogram_cost(columns, variance, grid.orders, rows_per_unit)
    if variance <= SMOOTHING_SCALE**2:
        return PrivacyCost(curve, grid)
    sensitivity = math.nextafter(rows_per_unit * math.sqrt(2.0 * columns), math.inf)
    sigma = math.nextafter(math.sqrt(float(variance) - SMOOTHING_SCALE**2), 0.0)
    mu_squared = gaussian_mu_squared(sigma=sigma, sensitivity=sensitivity, count=1, coordinates=columns * bins)
    return PrivacyCost(curve, grid, gdp_mu_squared=mu_squared)


def variance_for_share(
    columns: int, privacy_filter: PrivacyFilter, share: float, rows_per_unit: int = 1, *, bins: int
) -> int | None:
    """The smallest integer S such that the release over ``columns`` columns of ``bins`` bins (of units of at most
    ``rows_per_unit`` rows) uses at most ``share`` of the budget measured by ``privacy_filter`` (module docstring),
    or None if that S exceeds the exact sampler's range (2^42 − 1): too many columns for so small a share."""
    if not 0.0 < share <= 1.0:
        raise PrivacyParameterError("share", f"must lie in (0, 1], got {share!r}")

    def share_at(s: int) -> float:
        cost = histogram_release_cost(columns, s, privacy_filter.grid, rows_per_unit, bins=bins)
        return privacy_filter.measure(cost).share

    unit = share_at(1)
    if not math.isfinite(unit):
        return None
    # the RDP certificates' share is share₁/S, so S = ⌈share₁/share⌉ meets the share (stepped up against rounding);
    # the GDP certificate's, 2pk²/((S − τ²) μ_G²), may meet it lower: bisect for the least S (the share, a minimum
    # of non-increasing functions of S, is non-increasing)
    high = max(1, math.ceil(unit / share))
    while high <= MAX_GAUSSIAN_VARIANCE and share_at(high) > share:
        high += max(1, high // 10**9)
    if high > MAX_GAUSSIAN_VARIANCE:
        return None
    low = 0  # share_at(low) > share, by convention at 0
    while high - low > 1:
        middle = (low + high) // 2
        if share_at(middle) <= share:
            high = middle
        else:
            low = middle
    return high


@dataclass(frozen=True)
class NoisyHistograms:
    """A released set of noisy histograms: public once drawn (``counts[j]`` is column j's noisy counts)."""

    edges: tuple[np.ndarray, ...]
    counts: tuple[np.ndarray, ...]
    variance: int

    @property
    def sigma(self) -> float:
        """√S, the scale of the noise (the discrete Gaussian's variance is at most S: CKS 2020, Cor. 9)."""
        return math.sqrt(self.variance)


def release_histograms(
    columns: Sequence[np.ndarray] | np.ndarray,
    edges: Sequence[np.ndarray] | np.ndarray,
    variance: int,
    rng: np.random.Generator,
) -> NoisyHistograms:
    """Count each column on its grid and add N_Z(0, S) to every count (module docstring). ``columns`` is a list of
    p value arrays or an (n, p) matrix; ``edges`` a list of p grids or a (p, B + 1) array. ``rng`` is the
    caller's generator (OS-seeded for private data). All noise is drawn in one call, column by column, so the
    running time does not depend on the counts."""
    matrix = isinstance(columns, np.ndarray) and columns.ndim == 2
    count = columns.shape[1] if matrix else len(columns)  # type: ignore[union-attr]
    if count != len(edges) or count == 0:
        raise PrivacyParameterError("columns", "need one grid per column and at least one column")
    grids = [np.asarray(grid, dtype=np.float64) for grid in edges]
    if len({grid.size for grid in grids}) == 1:
        values = columns if matrix else np.column_stack([np.asarray(c, dtype=np.float64) for c in columns])
        exact = list(histogram_matrix(np.asarray(values), np.stack(grids)))
    else:
        cells = [columns[:, j] for j in range(count)] if matrix else list(columns)  # type: ignore[call-overload]
        exact = [histogram_counts(values, grid) for values, grid in zip(cells, grids, strict=True)]
    return add_histogram_noise(exact, grids, variance, rng)


def add_histogram_noise(
    exact: Sequence[np.ndarray], edges: Sequence[np.ndarray], variance: int, rng: np.random.Generator
) -> NoisyHistograms:
    """The release of :func:`release_histograms` from its exact counts (one int64 array per column, on the grids
    ``edges``): N_Z(0, S) added to every count, all drawn in one call. The counts may have been summed block by
    block (an upload stored by partitions, :mod:`privfit.datasets.partitioned_upload`): a count is a sum over rows,
    so the sum of the blocks' counts is the whole data's and the release is the same mechanism."""
    if len(exact) != len(edges) or not exact:
        raise PrivacyParameterError("columns", "need one grid per column and at least one column")
    if isinstance(variance, bool) or not isinstance(variance, int | np.integer) or variance < 1:
        raise PrivacyParameterError("variance", f"must be an integer ≥ 1 (the cost assumes it), got {variance!r}")
    grids = [np.asarray(grid, dtype=np.float64) for grid in edges]
    noise = discrete_gaussian(rng, int(variance), int(sum(c.size for c in exact)))
    noisy, start = [], 0
    for counts in exact:
        noisy.append(np.asarray(counts, dtype=np.int64) + noise[start : start + counts.size])
        start += counts.size
    return NoisyHistograms(tuple(grids), tuple(noisy), int(variance))
