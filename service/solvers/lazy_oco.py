"""``dp_lazy_oco`` numerical core: P-COMW-TG, Algorithm 1 of Agarwal, Kale, Singh & Thakurta with exact truncated
isotropic Gaussian Gibbs measures on a Euclidean ball (spec ``seed-003-lazy-oco.md`` §2.2–2.3, §5.3).

Pure functions only (numpy/scipy); the Solver class, API, ledger and audit build on top of these:

* :class:`QuadraticLossStream` and the two supported families (spec §5.3 "Scope"):
  :func:`linear_loss_stream` (``l_t(x) = ⟨g_t, x⟩``, ‖g_t‖ ≤ C_g, G = C_g) and
  :func:`mean_estimation_loss_stream` (``l_t(x) = ½‖x − z_t‖²``, ‖z_t‖ ≤ C_z, G = R + C_z);
* :func:`log_normalizers` — ``log Z_t`` for t = 1..T+1 (paper eq. 3.2), one vectorised 1-D quadrature per round;
* :func:`log_keep_probability` — Algorithm 1's clamped keep probability ``a_t = min{1, max{Φ^{-2}, r_t}}`` in log
  space, with ``log r_t = −β l_t(x_t) − (log Z_{t+1} − log Z_t) − log Φ`` (spec §2.3);
* :func:`run_pcomw_tg` — the loop (forced-switch coin, keep coin, switch cap ceil(B)).

The solver ``dp_lazy_oco`` (:mod:`privfit.solvers.dp_lazy_oco`) calibrates, streams the rows and releases.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privfit.solvers.base import ProgressReporter, SolverParameterError
from privfit.solvers.geometry import clip_rows
from privfit.solvers.lazy_oco_accounting import LazyOcoParameters
from privfit.solvers.lazy_oco_sampling import log_ball_mass, log_partition, sample_truncated_gaussian

__all__ = [
    "LazyOcoRun",
    "PcomwConfig",
    "QuadraticLossStream",
    "linear_loss_stream",
    "log_keep_probability",
    "log_normalizer_ratios",
    "log_normalizers",
    "mean_estimation_loss_stream",
    "run_pcomw_tg",
]

_NORMALIZER_CHUNK = 4096
_DEFAULT_BLOCK = 1024


@dataclass(frozen=True)
class QuadraticLossStream:
    """Losses ``l_t(x) = (a_t/2)‖x‖² + ⟨g_t, x⟩ + c_t`` for t = 1..T (spec §5.3), ``a_t ≥ 0``.

    ``a`` has shape (T,), ``g`` shape (T, d), ``c`` shape (T,).  The constants c_t do not affect the algorithm
    (spec §2.3: log r_t is invariant to adding a constant to l_t) but are kept so that l_t is the true loss.
    """

    a: NDArray[np.float64]
    g: NDArray[np.float64]
    c: NDArray[np.float64]

    def __post_init__(self) -> None:
        if self.g.ndim != 2 or self.g.shape[0] < 1:
            raise SolverParameterError("rows", "must be a non-empty 2-D array (T, d)")
        T = self.g.shape[0]
        if self.a.shape != (T,) or self.c.shape != (T,):
            raise SolverParameterError("a", "a and c must have shape (T,)")
        if np.any(self.a < 0.0) or not (
            np.all(np.isfinite(self.a)) and np.all(np.isfinite(self.g)) and np.all(np.isfinite(self.c))
        ):
            raise SolverParameterError("a", "curvatures must be finite and ≥ 0; coefficients finite")

    @property
    def horizon(self) -> int:
        """T, the number of rounds."""
        return int(self.g.shape[0])

    @property
    def dim(self) -> int:
        """d, the dimension."""
        return int(self.g.shape[1])

    def values(
        self, x: NDArray[np.float64], start: int, stop: int, *, with_constant: bool = True
    ) -> NDArray[np.float64]:
        """``l_t(x)`` for 0-based rounds ``start ≤ t−1 < stop`` at one point x (c_t omitted if not wanted)."""
        v = 0.5 * self.a[start:stop] * float(x @ x) + self.g[start:stop] @ x
        return v + self.c[start:stop] if with_constant else v


def _sanitize(rows: ArrayLike) -> NDArray[np.float64]:
    """Spec §6.3: sanitize rather than reject — non-finite entries become 0 (no per-row diagnostics)."""
    X = np.array(rows, dtype=np.float64, copy=True)
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise SolverParameterError("rows", "must be a non-empty 2-D array (T, d)")
    X[~np.isfinite(X)] = 0.0
    return X


def linear_loss_stream(gradients: ArrayLike, clip_norm: float) -> QuadraticLossStream:
    """Linear losses ``l_t(x) = ⟨clip(g_t, C_g), x⟩``; G = C_g (spec §5.3 "Scope", linear instance).

    For a private mean direction pass ``g_t = −z_t`` (minimiser R·z̄/‖z̄‖).
    """
    g = clip_rows(_sanitize(gradients), clip_norm)
    T = g.shape[0]
    return QuadraticLossStream(a=np.zeros(T), g=g, c=np.zeros(T))


def mean_estimation_loss_stream(rows: ArrayLike, clip_norm: float) -> QuadraticLossStream:
    """Mean estimation ``l_t(x) = ½‖x − clip(z_t, C_z)‖²``: a = 1, g = −z, c = ½‖z‖²; G = R + C_z (spec §5.3)."""
    z = clip_rows(_sanitize(rows), clip_norm)
    T = z.shape[0]
    return QuadraticLossStream(a=np.ones(T), g=-z, c=0.5 * np.einsum("ij,ij->i", z, z))


def log_normalizers(losses: QuadraticLossStream, beta: float, lam: float, R: float) -> NDArray[np.float64]:
    """``log Z_t`` for t = 1..T+1 (array index t−1), paper eq. 3.2 with ``f = Σ_{τ<t} l_τ``.

    ``Z_t = ∫_{‖x‖≤R} exp(−β(Σ_{τ<t} l_τ(x) + (λ/2)‖x‖²)) dx`` = :func:`log_partition` with ``S = Σ_{τ<t} g_τ``,
    ``κ_t = λ + Σ_{τ<t} a_τ``, constant ``Σ_{τ<t} c_τ`` (spec §5.3 "Per-round quantities").  Processed in chunks
    so memory is O(chunk·d) beyond the stream itself.
    """
    T, d = losses.horizon, losses.dim
    out = np.empty(T + 1)
    S = np.zeros(d)
    A = 0.0
    C = 0.0
    for start in range(0, T + 1, _NORMALIZER_CHUNK):
        stop = min(start + _NORMALIZER_CHUNK, T + 1)
        # prefix sums for t−1 = start..stop−1 use losses[0 : t−1]
        g_blk = losses.g[start : min(stop - 1, T)]
        a_blk = losses.a[start : min(stop - 1, T)]
        c_blk = losses.c[start : min(stop - 1, T)]
        S_blk = S + np.vstack([np.zeros((1, d)), np.cumsum(g_blk, axis=0)])
        A_blk = A + np.concatenate([[0.0], np.cumsum(a_blk)])
        C_blk = C + np.concatenate([[0.0], np.cumsum(c_blk)])
        n = stop - start
        out[start:stop] = log_partition(S_blk[:n], lam + A_blk[:n], beta, R, d, C_blk[:n])
        if stop - 1 < T:  # carry the prefix through the loss at index stop−1
            S = S_blk[n - 1] + losses.g[stop - 1]
            A = A_blk[n - 1] + losses.a[stop - 1]
            C = C_blk[n - 1] + losses.c[stop - 1]
    return out


def log_normalizer_ratios(losses: QuadraticLossStream, beta: float, lam: float, R: float) -> NDArray[np.float64]:
    """``log Z_{t+1} − log Z_t`` for t = 1..T (array index t−1), without the loss constants c_t.

    Same quantity as ``np.diff(log_normalizers(...))`` for c ≡ 0, but computed term by term to avoid cancellation
    between large ``β‖S‖²/(2κ)`` values (spec §5.3): with S = S_{t−1}, κ = κ_t, κ' = κ_t + a_t,
    ``β/2·[(2⟨S, g_t⟩ + ‖g_t‖²)/κ' − ‖S‖² a_t/(κκ')] − (d/2) log1p(a_t/κ) + LBM_{t+1} − LBM_t``.
    """
    T, d = losses.horizon, losses.dim
    norm_sq = np.empty(T + 1)  # ‖S_{t−1}‖², t = 1..T+1
    cross = np.empty(T)  # ⟨S_{t−1}, g_t⟩
    S = np.zeros(d)
    for start in range(0, T, _NORMALIZER_CHUNK):
        stop = min(start + _NORMALIZER_CHUNK, T)
        g_blk = losses.g[start:stop]
        S_blk = S + np.vstack([np.zeros((1, d)), np.cumsum(g_blk, axis=0)[:-1]])  # S_{t−1} for t−1 in block
        norm_sq[start:stop] = np.einsum("ij,ij->i", S_blk, S_blk)
        cross[start:stop] = np.einsum("ij,ij->i", S_blk, g_blk)
        S = S_blk[-1] + g_blk[-1]
    norm_sq[T] = float(S @ S)
    kappa = lam + np.concatenate([[0.0], np.cumsum(losses.a)])
    sigma = 1.0 / np.sqrt(beta * kappa)
    lbm = log_ball_mass(np.sqrt(norm_sq) / kappa, sigma, R, d)
    a = losses.a
    g_sq = np.einsum("ij,ij->i", losses.g, losses.g)
    k0, k1 = kappa[:-1], kappa[1:]
    quad = 0.5 * beta * ((2.0 * cross + g_sq) / k1 - norm_sq[:-1] * a / (k0 * k1))
    return quad - 0.5 * d * np.log1p(a / k0) + np.diff(lbm)


def log_keep_probability(
    loss_values: ArrayLike, log_z_ratio: ArrayLike, beta: float, log_phi: float
) -> NDArray[np.float64]:
    """log a_t of Algorithm 1: ``clip(log r_t, −2 log Φ, 0)`` (spec §2.2 clamp Π, §2.3, §5.3 "Main loop").

    ``log r_t = −β l_t(x_t) − log_z_ratio − log Φ`` with ``log_z_ratio = log Z_{t+1} − log Z_t``; then
    ``r_t = μ̄_{t+1}(x_t)/(Φ μ̄_t(x_t))``.  Everything in log space, so it is stable for any T.
    """
    log_r = -beta * np.asarray(loss_values, dtype=float) - np.asarray(log_z_ratio, dtype=float) - log_phi
    return np.clip(log_r, -2.0 * log_phi, 0.0)


@dataclass(frozen=True)
class PcomwConfig:
    """Algorithm 1's inputs: β, λ, p, log Φ ≥ 0 and the integer switch cap (None = ∞, the non-private Thm 4.2)."""

    beta: float
    lam: float
    p: float
    log_phi: float
    switch_cap: int | None

    def __post_init__(self) -> None:
        for name in ("beta", "lam"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0.0):
                raise SolverParameterError(name, f"must be a finite number > 0, got {value!r}")
        if not (0.0 <= self.p <= 1.0):
            raise SolverParameterError("p", f"must be in [0, 1], got {self.p!r}")
        if not (math.isfinite(self.log_phi) and self.log_phi >= 0.0):
            raise SolverParameterError("Phi", f"log Φ must be finite and ≥ 0 (Φ ≥ 1), got {self.log_phi!r}")
        if self.switch_cap is not None and (int(self.switch_cap) != self.switch_cap or self.switch_cap < 0):
            raise SolverParameterError("B", f"must be an integer ≥ 0 or None, got {self.switch_cap!r}")

    @classmethod
    def from_parameters(cls, params: LazyOcoParameters) -> PcomwConfig:
        return cls(beta=params.beta, lam=params.lam, p=params.p, log_phi=params.log_phi, switch_cap=params.B_int)


@dataclass(frozen=True)
class LazyOcoRun:
    """Outcome of :func:`run_pcomw_tg`.

    Releasable (all functions of x_{1:T}): ``average_iterate`` = (1/T)Σ_t x_t, ``last_iterate`` = x_T,
    ``num_switches`` = #{t < T : x_{t+1} ≠ x_t}, and the compact trajectory ``switch_rounds`` (1-based t_k with
    t_0 = 1) / ``switch_points`` (x_{t_k}).  ``log_keep`` (the per-round log a_t, NaN after the budget is spent) is
    an internal diagnostic for tests only and must never be released.
    """

    average_iterate: NDArray[np.float64]
    last_iterate: NDArray[np.float64]
    num_switches: int
    switch_rounds: NDArray[np.int64]
    switch_points: NDArray[np.float64]
    log_keep: NDArray[np.float64] | None = None


def _gibbs_draw(
    S: NDArray[np.float64], kappa: float, beta: float, R: float, rng: np.random.Generator
) -> NDArray[np.float64]:
    """One exact draw from μ̄ ∝ exp(−β((κ/2)‖x‖² + ⟨S, x⟩)) on B(0, R): N(−S/κ, (βκ)^{-1} I) ∩ K (spec §5.3)."""
    return sample_truncated_gaussian(-S / kappa, 1.0 / math.sqrt(beta * kappa), R, 1, rng)[0]


def run_pcomw_tg(
    losses: QuadraticLossStream,
    config: PcomwConfig,
    R: float,
    rng: np.random.Generator,
    *,
    record_diagnostics: bool = False,
    block: int = _DEFAULT_BLOCK,
    reporter: ProgressReporter | None = None,
) -> LazyOcoRun:
    """Algorithm 1 (P-COMW) for the truncated-Gaussian family (spec §2.2 pseudo-code, §5.3 "Main loop").

    x_1 ~ μ̄_1 (spec §2.7 item 1).  In round t: a_t = exp(:func:`log_keep_probability`), S_t ~ Bern(a_t) (keep),
    S'_t ~ Bern(1 − p) (S'_t = 0: forced switch), ζ_t = 1{S'_t = 0 or S_t = 0}; if b_t < B_int and ζ_t = 1 then
    x_{t+1} ~ μ̄_{t+1} fresh and b_{t+1} = b_t + 1, else x_{t+1} = x_t (bit-for-bit).

    Runs of keeps are processed in vectorised blocks (spec §5.3 "Optimisation"): with x fixed, the coins for a block
    are drawn at once and the first ζ_t = 1 is located; coins after it are discarded unused, which leaves the law of
    x_{1:T} unchanged.  x_{T+1} is not part of the output (spec §6.1) and is not drawn.  Once the cap is reached
    the iterate is frozen (the coins then have no effect, spec §2.7 item 3).

    ``reporter`` (optional) is polled for cancellation before every block and advanced by rounds done; it reports
    fixed milestones only (:meth:`ProgressReporter.advance`), so the reported values do not depend on the data.
    """
    R = float(R)
    if not (math.isfinite(R) and R > 0.0):
        raise SolverParameterError("R", f"must be a finite number > 0, got {R!r}")
    T, d = losses.horizon, losses.dim
    beta, lam, p, log_phi = config.beta, config.lam, config.p, config.log_phi
    cap = math.inf if config.switch_cap is None else int(config.switch_cap)
    # index t−1: log Z_{t+1} − log Z_t; constants c_t are dropped on both sides (log r_t is invariant, spec §2.3)
    log_z_ratio = log_normalizer_ratios(losses, beta, lam, R)

    x = _gibbs_draw(np.zeros(d), lam, beta, R, rng)
    switch_rounds = [1]
    switch_points = [x.copy()]
    sum_x = np.zeros(d)
    log_keep = np.full(T, np.nan) if record_diagnostics else None
    S_prefix = np.zeros(d)  # Σ_{τ < start} g_τ (0-based: losses[0:start])
    A_prefix = 0.0
    switches = 0
    start = 0  # 0-based index of the current round t−1
    while start < T:
        if reporter is not None:
            reporter.check_stop(start)
            reporter.advance(start)
        if switches >= cap:  # budget spent: x frozen for the remaining rounds
            sum_x += (T - start) * x
            break
        stop = min(start + block, T)
        values = losses.values(x, start, stop, with_constant=False)
        la = log_keep_probability(values, log_z_ratio[start:stop], beta, log_phi)
        n = stop - start
        keep = rng.random(n) < np.exp(la)
        forced = rng.random(n) < p
        zeta = forced | ~keep
        hits = np.flatnonzero(zeta)
        j = int(hits[0]) if hits.size else n  # rounds start..start+j−1 keep; round start+j switches
        if record_diagnostics and log_keep is not None:
            log_keep[start : start + min(j + 1, n)] = la[: min(j + 1, n)]
        if j == n:
            sum_x += n * x
            S_prefix = S_prefix + losses.g[start:stop].sum(axis=0)
            A_prefix += float(losses.a[start:stop].sum())
            start = stop
            continue
        t_idx = start + j  # 0-based round index of the switch (round t = t_idx + 1)
        sum_x += (j + 1) * x
        S_prefix = S_prefix + losses.g[start : t_idx + 1].sum(axis=0)
        A_prefix += float(losses.a[start : t_idx + 1].sum())
        start = t_idx + 1
        switches += 1
        if start < T:  # x_{t+1} ~ μ̄_{t+1} with S_t = Σ_{τ≤t} g_τ, κ_{t+1} = λ + Σ_{τ≤t} a_τ
            x = _gibbs_draw(S_prefix, lam + A_prefix, beta, R, rng)
            switch_rounds.append(start + 1)
            switch_points.append(x.copy())
    num_switches = len(switch_rounds) - 1
    return LazyOcoRun(
        average_iterate=sum_x / T,
        last_iterate=x.copy(),
        num_switches=num_switches,
        switch_rounds=np.asarray(switch_rounds, dtype=np.int64),
        switch_points=np.asarray(switch_points),
        log_keep=log_keep,
    )
