"""``dp_lazy_oco`` numerical core: P-COMW-TG, Algorithm 1 of Agarwal, Kale, Singh & Thakurta with exact truncated
isotropic Gaussian Gibbs measures on a Euclidean ball (spec ``seed-003-lazy-oco.md`` §2.2–2.3, §5.3).

Pure functions only (numpy/scipy); the Solver class, API, ledger and audit build on top of these:

* :class:`QuadraticLossStream` and the two supported families (spec §5.3 "Scope"):
  :func:`linear_loss_stream` (``l_t(x) = ⟨g_t, x⟩``, ‖g_t‖ ≤ C_g, G = C_g) and
  :func:`mean_estimation_loss_stream` (``l_t(x) = ½‖x − z_t‖²``, ‖z_t‖ ≤ C_z, G = R + C_z);
* :func:`log_normalizers` — ``log Z_t`` for t = 1..T+1 (paper eq. 3.2), one vectorised 1-D quadrature per round;
* :func:`log_keep_probability` — Algorithm 1's clamped keep probability ``a_t = min{1, max{Φ^{-2}, r_t}}`` in log
  space, with ``log r_t = −β l_t(x_t) − (log Z_{t+1} − log Z_t) − log Φ`` (spec §2.3);
* :class:`GibbsSamplingPlan` — how a pass samples its Gibbs measures and log-normalisers, from PUBLIC bounds;
* :func:`run_pcomw_tg` — the loop (forced-switch coin, keep coin, switch cap ceil(B)), **padded to a public
  maximum**: all 2T coins are drawn up front, every block is evaluated, and the Gibbs draws (fixed proposals
  each, :class:`~privfit.solvers.lazy_oco.sampling.TruncatedGaussianSampler`) and block re-evaluations of the
  switches are padded to the cap, so the work, the random draws and the stop polls are the same on every dataset.

The solver ``dp_lazy_oco`` (:mod:`privfit.solvers.lazy_oco.solver`) calibrates, streams the rows and releases.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privfit.solvers.base import ProgressReporter, SolverParameterError
from privfit.solvers.geometry import clip_rows
from privfit.solvers.lazy_oco.accounting import LazyOcoParameters
from privfit.solvers.lazy_oco.sampling import (
    TruncatedGaussianSampler,
    log_ball_escape,
    log_ball_mass,
    log_partition,
)

__all__ = [
    "GibbsSamplingPlan",
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
_DEFAULT_BLOCK = 256
#: Stop polls during the Gibbs draws: one every this many draws (real or padding), a fixed count per pass.
_DRAWS_PER_POLL = 64
#: Failure budget of a pass when the caller gives none (tests on public data; the solver charges its own).
_DEFAULT_LOG_FAILURE_BUDGET = -40.0 * math.log(2.0)
#: The ncx2 fast path of the log ball masses is used when the public lower bound on every mass is above e^{this}.
_FAST_NORMALIZER_MIN_LOG_MASS = -500.0


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


def log_normalizer_ratios(
    losses: QuadraticLossStream, beta: float, lam: float, R: float, *, fast_path: bool = True
) -> NDArray[np.float64]:
    """``log Z_{t+1} − log Z_t`` for t = 1..T (array index t−1), without the loss constants c_t.

    Same quantity as ``np.diff(log_normalizers(...))`` for c ≡ 0, but computed term by term to avoid cancellation
    between large ``β‖S‖²/(2κ)`` values (spec §5.3): with S = S_{t−1}, κ = κ_t, κ' = κ_t + a_t,
    ``β/2·[(2⟨S, g_t⟩ + ‖g_t‖²)/κ' − ‖S‖² a_t/(κκ')] − (d/2) log1p(a_t/κ) + LBM_{t+1} − LBM_t``.
    ``fast_path`` is passed to :func:`log_ball_mass`; the solver sets it from PUBLIC bounds
    (:attr:`GibbsSamplingPlan.fast_normalizers`), so which path computes the masses does not depend on the rows.
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
    lbm = log_ball_mass(np.sqrt(norm_sq) / kappa, sigma, R, d, fast_path=fast_path)
    a = losses.a
    g_sq = np.einsum("ij,ij->i", losses.g, losses.g)
    k0, k1 = kappa[:-1], kappa[1:]
    quad = 0.5 * beta * ((2.0 * cross + g_sq) / k1 - norm_sq[:-1] * a / (k0 * k1))
    return np.asarray(quad - 0.5 * d * np.log1p(a / k0) + np.diff(lbm), dtype=np.float64)


def log_keep_probability(
    loss_values: ArrayLike, log_z_ratio: ArrayLike, beta: float, log_phi: float
) -> NDArray[np.float64]:
    """log a_t of Algorithm 1: ``clip(log r_t, −2 log Φ, 0)`` (spec §2.2 clamp Π, §2.3, §5.3 "Main loop").

    ``log r_t = −β l_t(x_t) − log_z_ratio − log Φ`` with ``log_z_ratio = log Z_{t+1} − log Z_t``; then
    ``r_t = μ̄_{t+1}(x_t)/(Φ μ̄_t(x_t))``.  Everything in log space, so it is stable for any T.
    """
    log_r = -beta * np.asarray(loss_values, dtype=float) - np.asarray(log_z_ratio, dtype=float) - log_phi
    return np.asarray(np.clip(log_r, -2.0 * log_phi, 0.0), dtype=np.float64)


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


@dataclass(frozen=True)
class GibbsSamplingPlan:
    r"""How a pass samples its Gibbs measures, chosen from PUBLIC bounds only (issue 18, DESIGN §4).

    Every Gibbs measure of the pass is μ̄_t = N(−S_{t−1}/κ_t, (βκ_t)^{−1} I) ∩ B(0, R) with κ_t = λ + a(t − 1)
    (a = 1 for mean estimation, 0 for linear losses) and ‖S_{t−1}‖ ≤ (t − 1)C, so its mean has norm
    ν_t ≤ ν_max = T·C/(λ + aT) and its scale σ_t ≤ σ_max = (βλ)^{−1/2}. When ν_max ≤ R, the ball mass
    Pr[‖m + σZ‖ ≤ R] is non-increasing in ‖m‖ (Anderson's theorem: a symmetric convex set and a symmetric
    unimodal law) and in σ (the set (B − m)/σ shrinks as σ grows, B − m being convex and containing 0), so the
    mass at (ν_max, σ_max) bounds every mass of the pass from below. That public bound chooses

    * the sampler (:class:`~privfit.solvers.lazy_oco.sampling.TruncatedGaussianSampler`): the naive path with M
      proposals from the escape bound (1e-6 relative slack for special-function error) when M·d is small, else the 2-D
      reduction with the log-concave acceptance bound 1/4 (also when ν_max > R: no bound), M such that each draw
      fails with probability ≤ e^{``log_failure_budget``}/(U + 1);
    * ``fast_normalizers``: the ncx2 fast path of :func:`log_ball_mass` for the keep probabilities when the mass
      bound is ≥ e^{−500} (else the robust quadrature for every round);
    * ``units`` U = min(cap, T): the most switches a pass can make; the loop pads its Gibbs draws to U + 1 and
      its block re-evaluations to U.

    ``log_failure_probability``: log of (U + 1) × the per-draw bound, the probability that any draw of the pass
    falls back to the public point 0, whatever the rows (the solver charges it as an extra δ).
    """

    sampler: TruncatedGaussianSampler
    fast_normalizers: bool
    units: int

    @property
    def log_failure_probability(self) -> float:
        """log of the public bound on P(some Gibbs draw of the pass fails): a union bound over the U + 1 draws."""
        return min(0.0, math.log(self.units + 1) + self.sampler.log_failure_probability)

    @classmethod
    def public(
        cls,
        *,
        dimension: int,
        radius: float,
        clip_norm: float,
        curvature: float,
        beta: float,
        lam: float,
        horizon: int,
        switch_cap: int | None,
        log_failure_budget: float,
    ) -> GibbsSamplingPlan:
        """The plan of the class docstring from public quantities (C: the rows' clipping norm; a: the curvature)."""
        T = int(horizon)
        nu_max = T * clip_norm / (lam + curvature * T)
        sigma_max = 1.0 / math.sqrt(beta * lam)
        if nu_max <= radius:
            log_escape = log_ball_escape(nu_max, sigma_max, radius, dimension)
            log_mass = float(log_ball_mass(nu_max, sigma_max, radius, dimension))
        else:
            log_escape, log_mass = 0.0, -math.inf
        return cls._from_bounds(dimension, radius, log_escape, log_mass, T, switch_cap, log_failure_budget)

    @classmethod
    def from_stream(cls, losses: QuadraticLossStream, config: PcomwConfig, radius: float) -> GibbsSamplingPlan:
        """The same choices from the pass's ACTUAL Gibbs means and scales — read from the rows, so for tests and
        public data only (the default of :func:`run_pcomw_tg`); per-pass failure budget 2⁻⁴⁰."""
        T, d = losses.horizon, losses.dim
        S = np.vstack([np.zeros((1, d)), np.cumsum(losses.g, axis=0)[:-1]])
        kappa = config.lam + np.concatenate([[0.0], np.cumsum(losses.a)[:-1]])
        lbm = log_ball_mass(np.linalg.norm(S, axis=1) / kappa, 1.0 / np.sqrt(config.beta * kappa), radius, d)
        log_mass = float(lbm.min())
        log_escape = math.log(-math.expm1(log_mass)) if log_mass < 0.0 else -math.inf
        return cls._from_bounds(d, radius, log_escape, log_mass, T, config.switch_cap, _DEFAULT_LOG_FAILURE_BUDGET)

    @classmethod
    def _from_bounds(
        cls, dimension: int, radius: float, log_escape: float, log_mass: float, horizon: int,
        switch_cap: int | None, log_failure_budget: float,
    ) -> GibbsSamplingPlan:  # fmt: skip
        units = horizon if switch_cap is None else min(int(switch_cap), horizon)
        # a relative 1e-6 on the escape and on the mass, against the error of the special functions behind them
        escape = min(math.exp(log_escape) * (1.0 + 1e-6), 1.0 - math.exp(log_mass) * (1.0 - 1e-6))
        log_escape = math.log(escape) if escape > 0.0 else -math.inf
        sampler = TruncatedGaussianSampler.plan(dimension, radius, log_escape, log_failure_budget - math.log(units + 1))
        return cls(sampler=sampler, fast_normalizers=log_mass >= _FAST_NORMALIZER_MIN_LOG_MASS, units=units)


def run_pcomw_tg(
    losses: QuadraticLossStream,
    config: PcomwConfig,
    R: float,
    rng: np.random.Generator,
    *,
    record_diagnostics: bool = False,
    block: int = _DEFAULT_BLOCK,
    reporter: ProgressReporter | None = None,
    plan: GibbsSamplingPlan | None = None,
) -> LazyOcoRun:
    """Algorithm 1 (P-COMW) for the truncated-Gaussian family (spec §2.2 pseudo-code, §5.3 "Main loop").

    x_1 ~ μ̄_1 (spec §2.7 item 1).  In round t: a_t = exp(:func:`log_keep_probability`), S_t ~ Bern(a_t) (keep),
    S'_t ~ Bern(1 − p) (S'_t = 0: forced switch), ζ_t = 1{S'_t = 0 or S_t = 0}; if b_t < B_int and ζ_t = 1 then
    x_{t+1} ~ μ̄_{t+1} fresh and b_{t+1} = b_t + 1, else x_{t+1} = x_t (bit-for-bit). x_{T+1} is not part of the
    output (spec §6.1) and is not drawn.  Once the cap is reached the iterate is frozen (spec §2.7 item 3).

    **Padded to a public maximum** (issue 18): the 2T coins are drawn up front (``random(T)`` twice: the law of
    x_{1:T} is unchanged, each round uses its own fresh coins); the rounds run in blocks of ``block``, each
    evaluated once with the current iterate and once more after each switch inside it (fixed-size block
    evaluations); each Gibbs draw uses the plan's sampler (fixed proposals); after the pass, dummy units (one
    block evaluation and one Gibbs draw each, results discarded) pad the pass to n_blocks + U block evaluations
    and U + 1 draws, U = ``plan.units``. The stop is polled before every block and at every 64th Gibbs draw (real
    or dummy); progress advances by fixed milestones of the round index. So the work, the random draws, the polls
    and the progress sequence are functions of T, d, U and the block size only. A failed draw (probability ≤
    e^{``plan.log_failure_probability``} per pass, whatever the rows) yields the public point 0.

    ``plan`` defaults to :meth:`GibbsSamplingPlan.from_stream` — read from the rows, acceptable for tests on
    public data only; the solver passes its :meth:`GibbsSamplingPlan.public` plan.
    """
    R = float(R)
    if not (math.isfinite(R) and R > 0.0):
        raise SolverParameterError("R", f"must be a finite number > 0, got {R!r}")
    T, d = losses.horizon, losses.dim
    beta, lam, p, log_phi = config.beta, config.lam, config.p, config.log_phi
    cap = math.inf if config.switch_cap is None else int(config.switch_cap)
    if plan is None:
        plan = GibbsSamplingPlan.from_stream(losses, config, R)
    # index t−1: log Z_{t+1} − log Z_t; constants c_t are dropped on both sides (log r_t is invariant, spec §2.3)
    log_z_ratio = log_normalizer_ratios(losses, beta, lam, R, fast_path=plan.fast_normalizers)
    keep_coins = rng.random(T)
    forced_coins = rng.random(T)
    draws = 0

    def gibbs_draw(S: NDArray[np.float64], kappa: float, done: int) -> NDArray[np.float64]:
        """One draw from μ̄ ∝ exp(−β((κ/2)‖x‖² + ⟨S, x⟩)) on B(0, R) = N(−S/κ, (βκ)^{-1} I) ∩ K (spec §5.3)."""
        nonlocal draws
        if reporter is not None and draws % _DRAWS_PER_POLL == 0:
            reporter.check_stop(done)
        draws += 1
        return np.asarray(plan.sampler.draw(-S / kappa, 1.0 / math.sqrt(beta * kappa), 1, rng)[0][0], dtype=np.float64)

    def block_values(x: NDArray[np.float64], start: int, stop: int) -> NDArray[np.float64]:
        """log a_t of rounds start..stop−1 at the iterate x (one fixed-size block evaluation)."""
        values = losses.values(x, start, stop, with_constant=False)
        return log_keep_probability(values, log_z_ratio[start:stop], beta, log_phi)

    x = gibbs_draw(np.zeros(d), lam, 0)
    switch_rounds = [1]
    switch_points = [x.copy()]
    sum_x = np.zeros(d)  # Σ_t x_t / T, added per iterate (weight: its number of rounds / T)
    rounds_at_x = 0  # rounds of the current iterate not yet added to sum_x
    log_keep = np.full(T, np.nan) if record_diagnostics else None
    S_prefix = np.zeros(d)  # Σ_{τ < start} g_τ (0-based: losses[0:start])
    A_prefix = 0.0
    switches = 0
    for start in range(0, T, block):
        if reporter is not None:
            reporter.check_stop(start)
            reporter.advance(start)
        stop = min(start + block, T)
        n = stop - start
        S_after = S_prefix + np.cumsum(losses.g[start:stop], axis=0)  # S_t, t = start+1..stop (inclusive sums)
        A_after = A_prefix + np.cumsum(losses.a[start:stop])
        position = 0  # rounds start..start+position−1 are done
        while position < n:
            la = block_values(x, start, stop)
            zeta = (forced_coins[start:stop] < p) | ~(keep_coins[start:stop] < np.exp(la))
            zeta[:position] = False
            if switches >= cap:  # budget spent: x frozen for the remaining rounds
                zeta[:] = False
            hits = np.flatnonzero(zeta)
            j = int(hits[0]) if hits.size else n  # rounds position..j−1 keep; round start+j switches
            if record_diagnostics and log_keep is not None and switches < cap:
                log_keep[start + position : start + min(j + 1, n)] = la[position : min(j + 1, n)]
            rounds_at_x += min(j + 1, n) - position
            position = j + 1
            if j == n:
                break
            switches += 1
            if start + j + 1 < T:  # x_{t+1} ~ μ̄_{t+1} with S_t = Σ_{τ≤t} g_τ, κ_{t+1} = λ + Σ_{τ≤t} a_τ
                sum_x += (rounds_at_x / T) * x
                rounds_at_x = 0
                x = gibbs_draw(S_after[j], lam + float(A_after[j]), start)
                switch_rounds.append(start + j + 2)
                switch_points.append(x.copy())
        S_prefix, A_prefix = S_after[-1], float(A_after[-1])
    sum_x += (rounds_at_x / T) * x
    # padding to the public maximum: U block re-evaluations and U + 1 draws in all
    padding_block = min(block, T)
    evaluations = plan.units - switches
    while draws < plan.units + 1:
        if evaluations > 0:
            block_values(x, 0, padding_block)
            evaluations -= 1
        gibbs_draw(S_prefix, lam + A_prefix, T)
    num_switches = len(switch_rounds) - 1
    return LazyOcoRun(
        average_iterate=sum_x,
        last_iterate=x.copy(),
        num_switches=num_switches,
        switch_rounds=np.asarray(switch_rounds, dtype=np.int64),
        switch_points=np.asarray(switch_points),
        log_keep=log_keep,
    )
