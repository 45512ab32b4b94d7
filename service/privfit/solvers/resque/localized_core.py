r"""The faithful core of ReSQue private ERM (Carmon, Jambulapati, Jin, Lee, Liu, Sidford & Tian, "ReSQueing Parallel
and Private Stochastic Convex Optimization", Sec. 4 and App. A–B), as specified in ``seed-004-resque.md`` §3.1–3.5.

Call tree (spec §3.0); only Algorithm 4 touches the data:

* :func:`algorithm_4` — phased projected ReSQue-SGD in the ball B_x̄(r) with the regulariser (λ/2)‖y − x̄‖² and Gaussian
  output perturbation per phase (Algorithm 3 is λ = 0, r' = r, x₀ = x̄). Indices are drawn uniformly WITH
  replacement and the ξ's are fresh per step; the whole block of subgradient queries ∂f_z(x̄ + ξ) is computed in one
  vectorised call per phase (the queries do not depend on the iterates), then the O(d) weighted steps run.
  Each phase's output is projected back into B_x̄(r) (spec §3.8 item 4: post-processing).
* :func:`algorithm_5` — strongly convex restarts: ⌈log₂log₂T⌉ calls of Algorithm 4 with β_i = 2^{(k−i)/2}β,
  T_i = 2^{i−k}T and radii r_{i−1} = min(2r, sqrt(2D_{i−1}/λ)) (the seed's "x_{k+1}" return is read as x_k).
* :func:`algorithm_6` — the MLMC bias-reduced stochastic proximal estimator: j_max loops, each drawing
  J ~ Geom(1/2) (data-independent) and combining 1–3 Algorithm-5 runs.
* :func:`algorithm_7` — the high-probability line-search oracle: ⌈20 log(1/ζ)⌉ Algorithm-5 runs and
  :func:`aggregate` (Lemma 11).
* :func:`ball_acceleration` — the outer loop, Prop. 1's interface with the Monteiro–Svaiter loop body reconstructed
  from ACJ+21 Alg. 4 (spec §3.5, **recon**): a line search on λ by bisection in log λ, then O_bo (Algorithm 5),
  O_sp (Algorithm 6) and the v-update. Every count — outer iterations, line-search probes per iteration, repeats,
  J-loops — is FIXED in advance (the bisection always runs its probes), so the privacy cost is data-independent and
  known before any row is read.

Every call of Algorithm 4 goes through a :class:`CallCheck` first (the privacy preconditions P1–P5 of spec §4.2,
recomputed from the call's own β, T, r', ρ, r and δ_c); a violation raises before the call reads data. The
accounting of the tree lives in :mod:`privfit.solvers.resque.localized`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from privfit.solvers.base import SolverParameterError
from privfit.solvers.resque.estimator import MarginLoss, glm_subgradients, log_resque_weights

__all__ = [
    "C_CVX",
    "C_SC",
    "AlgorithmContext",
    "CallCheck",
    "aggregate",
    "algorithm_4",
    "algorithm_5",
    "algorithm_6",
    "algorithm_7",
    "ball_acceleration",
    "check_call",
    "phase_schedule",
    "restart_schedule",
]

FloatArray = NDArray[np.float64]

#: Lemma 4's constant, made explicit from its proof (spec §3.1): E F − F* ≤ C_cvx L r'(√d/(βT) + 1/√T).
C_CVX = 16.0
#: Prop. 8's constant 32 C_cvx² (spec §3.2). Both only set radii and the Aggregate Δ (utility), never privacy.
C_SC = 32.0 * C_CVX**2
#: P1: Lemma 6 needs T/n ≤ 1/60.
MAX_STEPS_OVER_N = 1.0 / 60.0
#: P3: τ' = 6000 β² log²(2/δ_c) ≤ P3_BOUND. The paper's Prop. 7 states τ' ≤ 1/3; spec §3.8 item 9 asks to verify it
#: against BDRS18 Thm. 12, whose tCDP amplification (as we recall it) needs ρ ≤ 0.1 — the smaller bound is enforced.
P3_CONSTANT = 6000.0
P3_BOUND = 0.1
#: P4: ρ/r ≥ 1728 log²(2 log₂T/δ_c) for Algorithm 3, twice that for Algorithm 4 (r' ≤ 2r).
P4_CONSTANT = 1728.0


@dataclass(frozen=True)
class CallCheck:
    """One Algorithm-4 call's public parameters, checked against P1–P5 (spec §4.2) by :func:`check_call`."""

    beta: float
    steps: int
    radius_prime: float


def check_call(call: CallCheck, *, n: int, rho: float, r: float, delta_call: float, regularized: bool = True) -> None:
    """Raise :class:`SolverParameterError` unless P1–P5 hold for this call (P6 holds by construction of the code:
    with-replacement indices, deterministic globally-Lipschitz subgradients, fresh ξ, server RNG)."""
    if not (0.0 < delta_call < 1.0 / 6.0):
        raise SolverParameterError("delta", f"P2: the per-call slack δ_c = {delta_call:g} must lie in (0, 1/6)")
    if call.steps < 2 or call.steps > MAX_STEPS_OVER_N * n:
        raise SolverParameterError(
            "steps_per_call", f"P1: an Algorithm-4 call needs 2 ≤ T ≤ n/60 = {n / 60:.1f}, got T = {call.steps}"
        )
    tau_prime = P3_CONSTANT * call.beta**2 * math.log(2.0 / delta_call) ** 2
    if not (call.beta > 0.0 and tau_prime <= P3_BOUND):
        raise SolverParameterError(
            "epsilon", f"P3: 6000 β² log²(2/δ_c) = {tau_prime:.3g} > {P3_BOUND:g} (β = {call.beta:.3g})"
        )
    factor = 2.0 if regularized else 1.0
    needed = factor * P4_CONSTANT * math.log(2.0 * math.log2(call.steps) / delta_call) ** 2
    if rho / r < needed * (1.0 - 1e-12):
        raise SolverParameterError("smoothing", f"P4: ρ/r = {rho / r:.4g} < {needed:.4g}")
    if not (0.0 < call.radius_prime <= 2.0 * r * (1.0 + 1e-12)):
        raise SolverParameterError("radius", f"P5: r' = {call.radius_prime:.3g} must lie in (0, 2r = {2 * r:.3g}]")


def phase_schedule(steps: int) -> list[int]:
    """T_i = T̂/2^i for the k = log₂T̂ phases of Algorithm 4, T̂ = 2^⌊log₂T⌋ (Σ T_i = T̂ − 1 < T)."""
    top = 2 ** math.floor(math.log2(steps))
    return [top // 2**i for i in range(1, int(math.log2(top)) + 1)]


def restart_schedule(beta: float, steps: int) -> tuple[list[float], list[int]]:
    """Algorithm 5's (β_{i−1}, T_{i−1}) for its k = ⌈log₂log₂T⌉ calls: β_i = 2^{(k−i)/2}β, T_i = ⌊2^{i−k}T⌋."""
    k = max(1, math.ceil(math.log2(math.log2(steps))))
    betas = [2.0 ** ((k - i) / 2.0) * beta for i in range(k)]
    steps_i = [int(2.0 ** (i - k) * steps) for i in range(k)]
    return betas, steps_i


@dataclass
class AlgorithmContext:
    """The data, the loss, the public constants and the generator shared by one run of the call tree.

    ``on_call`` (if set) sees every Algorithm-4 call's :class:`CallCheck` before it runs (tests and accounting checks).
    """

    X: FloatArray
    y: FloatArray
    loss: MarginLoss
    lipschitz: float
    rho: float
    r: float
    delta_call: float
    rng: np.random.Generator
    on_call: Callable[[CallCheck], None] | None = None
    calls: int = 0
    steps_run: int = 0

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def d(self) -> int:
        return int(self.X.shape[1])


def _project(point: FloatArray, center: FloatArray, radius: float) -> FloatArray:
    offset = point - center
    norm = float(np.linalg.norm(offset))
    return point if norm <= radius else center + offset * (radius / norm)


def algorithm_4(
    ctx: AlgorithmContext,
    center: FloatArray,
    beta: float,
    lam: float,
    steps: int,
    radius_prime: float,
    start: FloatArray,
) -> FloatArray:
    """Algorithm 4 (= Algorithm 3 when λ = 0, r' = r, x₀ = x̄): spec §3.1 pseudo-code.

    η = (r'/L) min(1/√T, β/√d); phase i: T_i = T̂/2^i steps of size η_i = η/4^i of projected ReSQue-SGD on
    F + (λ/2)‖· − x̄‖² in B_x̄(r), then x_i = Π_{B_x̄(r)}(ȳ_i + N(0, σ_i² I)), σ_i = Lη_i/β.
    """
    call = CallCheck(beta=beta, steps=steps, radius_prime=radius_prime)
    check_call(call, n=ctx.n, rho=ctx.rho, r=ctx.r, delta_call=ctx.delta_call, regularized=True)
    if ctx.on_call is not None:
        ctx.on_call(call)
    ctx.calls += 1
    eta = (radius_prime / ctx.lipschitz) * min(1.0 / math.sqrt(steps), beta / math.sqrt(ctx.d))
    x = _project(np.asarray(start, dtype=np.float64), center, ctx.r)
    for i, phase_steps in enumerate(phase_schedule(steps), start=1):
        eta_i = eta / 4.0**i
        sigma_i = ctx.lipschitz * eta_i / beta
        rows = ctx.rng.integers(ctx.n, size=phase_steps)  # uniform WITH replacement (P6)
        xi = ctx.rho * ctx.rng.standard_normal((phase_steps, ctx.d))
        queries = glm_subgradients(ctx.loss, ctx.X[rows], ctx.y[rows], center + xi)  # one vectorised block
        y = x
        total = np.zeros(ctx.d)
        shrink = 1.0 / (1.0 + eta_i * lam)
        for j in range(phase_steps):
            weight = math.exp(float(log_resque_weights(y - center, xi[j : j + 1], ctx.rho)[0]))
            y = _project((y + eta_i * lam * center - eta_i * weight * queries[j]) * shrink, center, ctx.r)
            total += y
        ctx.steps_run += phase_steps
        x = _project(total / phase_steps + sigma_i * ctx.rng.standard_normal(ctx.d), center, ctx.r)
    return x


def algorithm_5(ctx: AlgorithmContext, center: FloatArray, beta: float, lam: float, steps: int) -> FloatArray:
    """Algorithm 5 (strongly convex restarts), spec §3.2: k = ⌈log₂log₂T⌉ calls of Algorithm 4."""
    betas, steps_i = restart_schedule(beta, steps)
    k = len(betas)
    lipschitz, d = ctx.lipschitz, ctx.d

    def error(i: int) -> float:  # E_i of spec §3.2 (β_i, T_i extended to i = k with β, T)
        b, t = (betas[i], steps_i[i]) if i < k else (beta, steps)
        return (2.0 * C_CVX**2 * lipschitz**2 / lam) * (math.sqrt(d) / (b * t) + 1.0 / math.sqrt(t)) ** 2

    e0 = error(0)
    x = np.asarray(center, dtype=np.float64)
    for i in range(1, k + 1):
        distance_sq = 4.0 * error(i - 1) * (2.0 * lipschitz**2 / (lam * 4.0 * e0)) ** (1.0 / 2 ** (i - 1))
        radius_prime = min(2.0 * ctx.r, math.sqrt(2.0 * distance_sq / lam))
        x = algorithm_4(ctx, center, betas[i - 1], lam, steps_i[i - 1], radius_prime, x)
    return x


def mlmc_levels(n: int, steps: int) -> int:
    """j_max = ⌊log₂(T_max/T)⌋ with T_max = ⌊n/60⌋ (Algorithm 6; C_priv replaced by P1's 60)."""
    t_max = int(MAX_STEPS_OVER_N * n)
    return math.floor(math.log2(t_max / steps)) if t_max >= steps else 0


def algorithm_6(ctx: AlgorithmContext, center: FloatArray, beta: float, lam: float, steps: int) -> FloatArray:
    """Algorithm 6 (MLMC), spec §3.3: mean over j_max loops of x₀ + 2^J (x_J − x_{J−1}) (x₀ when J > j_max)."""
    levels = mlmc_levels(ctx.n, steps)
    if levels < 1:
        raise SolverParameterError("steps_per_call", f"Algorithm 6 needs T ≤ n/120, got T = {steps}, n = {ctx.n}")
    estimates = []
    for _ in range(levels):
        level = int(ctx.rng.geometric(0.5))  # P(J = j) = 2^{-j}, j ≥ 1: data-independent
        x0 = algorithm_5(ctx, center, beta, lam, steps)
        if level <= levels:
            fine = algorithm_5(ctx, center, 2.0 ** (-level / 2.0) * beta, lam, 2**level * steps)
            coarse = algorithm_5(ctx, center, 2.0 ** (-(level - 1) / 2.0) * beta, lam, 2 ** (level - 1) * steps)
            estimates.append(x0 + 2.0**level * (fine - coarse))
        else:
            estimates.append(x0)
    return np.asarray(np.mean(estimates, axis=0), dtype=np.float64)


def aggregate(points: FloatArray, spread: float) -> FloatArray:
    """AGGREGATE (Lemma 11, KLL+22): the point with the most others within 2Δ/3 of it."""
    distances = np.linalg.norm(points[:, None, :] - points[None, :, :], axis=2)
    counts = (distances <= 2.0 * spread / 3.0).sum(axis=1)
    return np.asarray(points[int(np.argmax(counts))], dtype=np.float64)


def line_search_repeats(zeta: float) -> int:
    """⌈20 log(1/ζ)⌉ (Algorithm 7; spec §3.8 item 6: 20, not 18)."""
    return math.ceil(20.0 * math.log(1.0 / zeta))


def algorithm_7(
    ctx: AlgorithmContext, center: FloatArray, beta: float, lam: float, zeta: float, steps: int
) -> FloatArray:
    """Algorithm 7, spec §3.4: ⌈20 log(1/ζ)⌉ independent Algorithm-5 runs, then AGGREGATE with
    Δ = 9 sqrt(2 C_sc)(L/λ) sqrt(d/(β²T²) + 1/T)."""
    runs = np.array([algorithm_5(ctx, center, beta, lam, steps) for _ in range(line_search_repeats(zeta))])
    spread = 9.0 * math.sqrt(2.0 * C_SC) * (ctx.lipschitz / lam) * math.sqrt(ctx.d / (beta * steps) ** 2 + 1.0 / steps)
    return aggregate(runs, spread)


@dataclass(frozen=True)
class OuterSchedule:
    """The fixed counts and constants of :func:`ball_acceleration` (all public)."""

    iterations: int
    probes: int
    lam_low: float
    lam_high: float
    zeta: float
    steps: int
    beta: float
    radius: float


def ball_acceleration(
    ctx: AlgorithmContext, schedule: OuterSchedule, should_stop: Callable[[int], None] | None = None
) -> FloatArray:
    """The outer loop (spec §3.5, loop body **recon** from ACJ+21 Alg. 4) with fixed counts.

    Iteration k: bisection in log λ over [λ_lo, λ_hi] with exactly ``probes`` probes; each probe computes
    a(λ) = (1 + sqrt(1 + 4λA_k))/(2λ), y(λ) = (A_k x_k + a v_k)/(A_k + a) and p = O_ls(y, λ) (Algorithm 7); a move
    ‖p − y‖ > r raises λ, < r/2 lowers it, and the last probe whose move lies in [r/2, r] is kept (else the final
    midpoint). Then x_{k+1} = O_bo(y, λ) (Algorithm 5), x̂ = O_sp(y, λ) (Algorithm 6), g = λ(y − x̂),
    v_{k+1} = Π_{B(R)}(v_k − a g), A_{k+1} = A_k + a. Returns Π_{B(R)}(x_K) (post-processing).
    """
    d = ctx.d
    x = np.zeros(d)
    v = np.zeros(d)
    total_weight = 0.0
    for iteration in range(schedule.iterations):
        if should_stop is not None:
            should_stop(iteration)
        low, high = math.log(schedule.lam_low), math.log(schedule.lam_high)
        chosen: float | None = None
        for _ in range(schedule.probes):
            lam = math.exp(0.5 * (low + high))
            a = (1.0 + math.sqrt(1.0 + 4.0 * lam * total_weight)) / (2.0 * lam)
            center = (total_weight * x + a * v) / (total_weight + a)
            move = float(np.linalg.norm(algorithm_7(ctx, center, schedule.beta, lam, schedule.zeta, schedule.steps)
                                        - center))  # fmt: skip
            if move > ctx.r:
                low = math.log(lam)
            elif move < ctx.r / 2.0:
                high = math.log(lam)
            else:
                chosen = lam
        lam = chosen if chosen is not None else math.exp(0.5 * (low + high))
        a = (1.0 + math.sqrt(1.0 + 4.0 * lam * total_weight)) / (2.0 * lam)
        center = (total_weight * x + a * v) / (total_weight + a)
        x = algorithm_5(ctx, center, schedule.beta, lam, schedule.steps)
        estimate = algorithm_6(ctx, center, schedule.beta, lam, schedule.steps)
        v = _project(v - a * lam * (center - estimate), np.zeros(d), schedule.radius)
        total_weight += a
    return _project(x, np.zeros(d), schedule.radius)
