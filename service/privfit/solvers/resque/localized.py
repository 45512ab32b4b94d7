r"""``resque_localized``: the faithful ReSQue private-ERM algorithm (Carmon et al., Thm. 3: ball acceleration over
Algorithms 4–7, :mod:`privfit.solvers.resque.localized_core`) with its approximate-RDP accounting — spec
``seed-004-resque.md`` §6.3. EXPERIMENTAL: hidden from ``GET /v1/solvers`` and refused by the API unless the operator
sets ``PRIVFIT_EXPERIMENTAL_SOLVERS=true``; meant for tiny instances, tests and audits.

**Accounting** (spec §4.2–4.3; replace-one, n public). Each Algorithm-4 call c with (β_c, T_c), whose preconditions
P1–P5 are checked before it runs, is (α, α·τ_c, δ_c)-approximately RDP for α < α_max,c (Lemmas 5–7 with the
explicit constants of spec §4.2):

    τ_c = 112320 · β_c² · log²(2/δ_c) · (T_c/n)²,        α_max,c = min(3, log(1/s_c)/4) / τ'_c,

with τ'_c = 6000 β_c² log²(2/δ_c) and s_c = 1.2 T_c/n. The paper's Prop. 7 (its restatement of BDRS18 Thm. 12)
gives the range α < 3/τ'; spec §3.8 item 9 flags that BDRS18's own range depends on log(1/s)/ρ, which as we recall
it is ω' = log(1/s)/(4ρ) and needs ρ ≤ 0.1 — so the SMALLER of the two ranges is charged and P3 is enforced as
τ' ≤ 0.1 rather than 1/3 (conservative, pending a check against BDRS18).

Adaptive composition adds the curves and the slacks at every order (Lemma 3). Algorithm 5 = its restart calls;
Algorithm 7 = ⌈20 log(1/ζ)⌉ Algorithm-5 runs. Algorithm 6's random J (data-independent) is charged EXACTLY by the
randomized-composition formula of spec §4.3(b): releasing (J, output) jointly, each of its j_max loops costs

    ε_loop(α) = (1/(α − 1)) log Σ_j P(J = j) exp((α − 1) ε_j(α)),  P(J = j) = 2^{−j} (j ≤ j_max), 2^{−j_max} (J > j_max)

with ε_j the composed cost of the loop's Algorithm-5 runs given J = j, and the loop's slack the largest δ over j.
(Charging only the realised J would be invalid: the output is a mixture over J.) The outer loop makes a FIXED number
of oracle calls (:class:`~privfit.solvers.resque.localized_core.OuterSchedule`), so the whole cost is known before
any row is read. The ledger records it as an approximate-RDP charge: the curve (+∞ at orders ≥ min α_max) plus the
total slack, converted with Cor. 1 (:mod:`privfit.privacy.cost`).

**Parameters** (spec §3.6 and §6.4: the paper's C's are not used; r from P4, β from P3 and the budget):
ε_opt = L R (1/√n + sqrt(d log(1/δ))/(nε)), κ = LR/ε_opt, ρ = ε_opt/(L√d); per-call slack
δ_c = δ / (4 M (1 + e^ε)) for the M calls' worth of slack (so the slacks use a quarter of δ through Cor. 1; on a
dataset, at most the allowance of its filter's δ pot: :mod:`privfit.privacy.filter`);
r = ρ / (3456 log²(2 log₂T_max/δ_c)) (P4 for Algorithm 4 at the largest call); K = ⌈(R/r)^{2/3}⌉·⌈log κ⌉ outer
iterations, ⌈log₂(Rκ/r)⌉ line-search probes, ζ = 1/(κ K log κ), λ ∈ [ε_opt K² log²κ/R², L/ε_opt] (Prop. 1 with
C_ba = 1); T = 2^⌊log₂(n/240)⌋ steps per oracle call (so that T ≤ n/60 and Algorithm 6 has j_max ≥ 2 levels);
β the largest value (below the P3 cap of every call) whose total cost converts to ≤ the target ε at δ.

**Feasibility guard.** P4 makes r ≈ 1e-6·ρ, so K is astronomically large at realistic n and d (spec §6.1): the
planned number of gradient steps (worst case over J) is computed before anything runs and a request above the
operator's cap (``PRIVFIT_RESQUE_LOCALIZED_MAX_STEPS``) is refused with that number in the message. Small instances
can set ``outer_iterations``, ``line_search_probes``, ``steps_per_call`` and ``zeta`` explicitly (any values: the
cost is computed from the counts actually used).

**Data-independent observables** (DESIGN §4; issue 18). This solver **runs a public number of iterations**: the
outer schedule's counts are fixed (K iterations × line-search probes × ⌈20 log(1/ζ)⌉ Algorithm-5 runs, their
restarts and phases); Algorithm 6's level J is drawn from the noise and sets its loop's work (a function of the
noise only, charged by the randomized composition above); the line search's branches read only the outputs of
private calls (post-processing). The stop is polled and progress reported once per outer iteration.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field
from scipy.special import logsumexp

from privfit.privacy import OrderGrid, PrivacyCost
from privfit.solvers.base import (
    MAX_SCALE,
    MIN_SCALE,
    AnySolver,
    FitRun,
    MetadataResolved,
    PrivacyRequest,
    PublicMetadata,
    Solver,
    SolverParameterError,
    SolverParams,
    delta_part,
    design_bound,
    require_float_sampler,
)
from privfit.solvers.resque.dpsgd import DEFAULT_RADIUS, ReSQueModel, margin_loss
from privfit.solvers.resque.localized_core import (
    P3_BOUND,
    P3_CONSTANT,
    P4_CONSTANT,
    AlgorithmContext,
    OuterSchedule,
    ball_acceleration,
    line_search_repeats,
    mlmc_levels,
    restart_schedule,
)

__all__ = [
    "DEFAULT_MAX_PLANNED_STEPS",
    "LocalizedPlan",
    "ReSQueLocalized",
    "ReSQueLocalizedParams",
    "ReSQueLocalizedResolved",
    "TreeCost",
    "algorithm_5_cost",
    "algorithm_6_cost",
    "call_curve",
    "plan_cost",
    "schedule_cost",
]

FloatArray = NDArray[np.float64]

#: 13 · 1.2² · 6000 (Prop. 7 with s ≤ 1.2T/n and τ' = 6000 β² log²(2/δ_c); spec §4.2).
TAU_CONSTANT = 112320.0
#: s ≤ 1.2 T/n: the subsampling rate of Lemma 7.
SAMPLING_RATE_FACTOR = 1.2
#: Default operator cap on the planned gradient steps of one fit.
DEFAULT_MAX_PLANNED_STEPS = 50_000_000
#: Share of δ given to the slacks through Cor. 1 ((1 + e^ε)·Σδ_c ≤ δ/4).
SLACK_SHARE = 0.25
_MIN_STEPS = 16


# ---------------------------------------------------------------------------------------------------------
# accounting of the call tree (spec §4.2–4.3)
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TreeCost:
    """A node's cost: its approximate-RDP curve on the grid (+∞ = no bound), its slack, its worst-case gradient steps
    and its number of Algorithm-4 calls (worst case)."""

    curve: FloatArray
    slack: float
    steps: float
    calls: float

    def __add__(self, other: TreeCost) -> TreeCost:
        return TreeCost(self.curve + other.curve, self.slack + other.slack, self.steps + other.steps,
                        self.calls + other.calls)  # fmt: skip

    def times(self, count: float) -> TreeCost:
        """``count`` sequential repetitions (adaptive composition)."""
        return TreeCost(count * self.curve, count * self.slack, count * self.steps, count * self.calls)


def call_curve(beta: float, steps: int, n: int, delta_call: float, grid: OrderGrid) -> FloatArray:
    """α·τ_c below α_max,c = min(3, log(1/s)/4)/τ', +∞ from it on (spec §4.2; module docstring)."""
    log_term = math.log(2.0 / delta_call) ** 2
    tau = TAU_CONSTANT * beta**2 * log_term * (steps / n) ** 2
    tau_prime = P3_CONSTANT * beta**2 * log_term
    alpha_max = min(3.0, math.log(1.0 / (SAMPLING_RATE_FACTOR * steps / n)) / 4.0) / tau_prime
    return np.where(grid.orders < alpha_max, grid.orders * tau, np.inf)


def algorithm_5_cost(beta: float, steps: int, n: int, delta_call: float, grid: OrderGrid) -> TreeCost:
    """Algorithm 5: its restart calls (β_i, T_i) composed (spec §4.3)."""
    betas, steps_i = restart_schedule(beta, steps)
    total = TreeCost(np.zeros(len(grid)), 0.0, 0.0, 0.0)
    for b, t in zip(betas, steps_i, strict=True):
        total = total + TreeCost(call_curve(b, t, n, delta_call, grid), delta_call, float(t), 1.0)
    return total


def algorithm_6_cost(beta: float, steps: int, n: int, delta_call: float, grid: OrderGrid) -> TreeCost:
    """j_max loops, each charged by the randomized-composition formula over J (spec §4.3(b))."""
    levels = mlmc_levels(n, steps)
    base = algorithm_5_cost(beta, steps, n, delta_call, grid)
    branches = [base]
    weights = []
    for j in range(1, levels + 1):
        fine = algorithm_5_cost(2.0 ** (-j / 2.0) * beta, 2**j * steps, n, delta_call, grid)
        coarse = algorithm_5_cost(2.0 ** (-(j - 1) / 2.0) * beta, 2 ** (j - 1) * steps, n, delta_call, grid)
        branches.append(base + fine + coarse)
        weights.append(2.0**-j)
    weights = [2.0**-levels, *weights]  # J > j_max first, matching branches[0]
    curves = np.array([b.curve for b in branches])
    a = grid.orders
    with np.errstate(invalid="ignore"):
        exponent = (a - 1.0) * curves  # inf stays inf
    mixed = logsumexp(exponent, axis=0, b=np.array(weights)[:, None]) / (a - 1.0)
    mixed = np.where(np.isinf(curves).any(axis=0), np.inf, mixed)
    loop = TreeCost(mixed, max(b.slack for b in branches), max(b.steps for b in branches),
                    max(b.calls for b in branches))  # fmt: skip
    return loop.times(levels)


def schedule_cost(schedule: OuterSchedule, n: int, delta_call: float, grid: OrderGrid) -> TreeCost:
    """The whole outer loop: K × (probes × Algorithm 7 + Algorithm 5 + Algorithm 6)."""
    five = algorithm_5_cost(schedule.beta, schedule.steps, n, delta_call, grid)
    seven = five.times(line_search_repeats(schedule.zeta))
    six = algorithm_6_cost(schedule.beta, schedule.steps, n, delta_call, grid)
    return (seven.times(schedule.probes) + five + six).times(schedule.iterations)


# ---------------------------------------------------------------------------------------------------------
# the solver
# ---------------------------------------------------------------------------------------------------------


class ReSQueLocalizedParams(SolverParams):
    """Parameters of ``resque_localized`` (defaults: the paper's recipe, spec §3.6 / module docstring)."""

    model: ReSQueModel = Field("logistic", description="'logistic', 'svm' (hinge), 'absolute', 'quantile', 'huber'.")
    quantile_tau: float | None = Field(None, gt=0.0, lt=1.0, description="τ (model 'quantile'; default 0.5).")
    huber_delta: float | None = Field(None, ge=MIN_SCALE, le=MAX_SCALE, description="δ (model 'huber'; default 1).")
    fit_intercept: bool = Field(True, description="Fit an intercept as an extra constant feature 1.")
    radius: float | None = Field(None, ge=MIN_SCALE, le=MAX_SCALE, description="Radius R of the constraint ball.")
    smoothing: float | None = Field(None, ge=MIN_SCALE, le=MAX_SCALE, description="ρ. Default ε_opt/(L√d).")
    outer_iterations: int | None = Field(None, ge=1, description="K. Default ⌈(R/r)^{2/3}⌉·⌈log κ⌉.")
    line_search_probes: int | None = Field(None, ge=1, description="Probes per line search. Default ⌈log₂(Rκ/r)⌉.")
    steps_per_call: int | None = Field(None, ge=_MIN_STEPS, description="T of each oracle. Default 2^⌊log₂(n/240)⌋.")
    zeta: float | None = Field(None, gt=0.0, lt=1.0, description="ζ of Algorithm 7. Default 1/(κ K log κ).")


class ReSQueLocalizedResolved(MetadataResolved):
    """Resolved ``resque_localized`` settings: the fixed call schedule, β, r, δ_c and the planned work."""

    solver: Literal["resque_localized"] = "resque_localized"
    formula_version: Literal["resque_localized/approx-rdp-lemma7/v1"] = "resque_localized/approx-rdp-lemma7/v1"
    model: ReSQueModel
    loss_parameter: float | None
    fit_intercept: bool
    lipschitz: float = Field(gt=0.0)
    radius: float = Field(gt=0.0)
    smoothing: float = Field(gt=0.0, description="ρ.")
    ball_radius: float = Field(gt=0.0, description="r: the ReSQue ball radius fixed by P4.")
    delta_call: float = Field(gt=0.0, description="δ_c: the approximate-RDP slack of each Algorithm-4 call.")
    beta: float = Field(gt=0.0, description="β: the privacy parameter of the oracles (σ_i = Lη_i/β).")
    outer_iterations: int = Field(ge=1)
    line_search_probes: int = Field(ge=1)
    steps_per_call: int = Field(ge=_MIN_STEPS)
    zeta: float = Field(gt=0.0, lt=1.0)
    lam_low: float = Field(gt=0.0)
    lam_high: float = Field(gt=0.0)
    planned_calls: float = Field(description="Algorithm-4 calls, worst case over the J draws.")
    planned_steps: float = Field(description="Gradient steps, worst case over the J draws.")
    alpha_max: float = Field(description="The largest order below which the charged curve is finite.")
    approx_delta: float = Field(description="Σ of the slacks charged (the ledger's approximate-RDP δ).")


@dataclass(frozen=True)
class LocalizedPlan:
    """Public constants derived before calibration."""

    lipschitz: float
    radius: float
    smoothing: float
    schedule: OuterSchedule
    delta_call: float
    ball_radius: float
    beta_cap: float


def plan_cost(schedule: OuterSchedule, n: int, delta_call: float, grid: OrderGrid) -> PrivacyCost:
    """The ledger charge of a schedule: the composed curve plus the total slack (approximate RDP)."""
    tree = schedule_cost(schedule, n, delta_call, grid)
    return PrivacyCost(tree.curve, grid, 0.0, tree.slack)


class ReSQueLocalized(Solver[ReSQueLocalizedParams, ReSQueLocalizedResolved]):
    """The paper's ReSQue private ERM with explicit preconditions and approximate-RDP accounting (experimental)."""

    description: ClassVar[str] = (
        "EXPERIMENTAL. The faithful ReSQue private ERM (Carmon et al., Thm. 3): ball acceleration over Algorithms "
        "4-7 with the privacy preconditions P1-P6 enforced and an approximate-RDP charge (Lemmas 5-7, exact "
        "randomized composition for Algorithm 6). Infeasible beyond tiny instances: a guard refuses requests whose "
        "planned gradient steps exceed the operator's cap."
    )
    target_required: ClassVar[str] = "resque_localized is calibrated to a target epsilon: give one"
    uses_delta_parts: ClassVar[bool] = True
    experimental: ClassVar[bool] = True
    float_sampler_only: ClassVar[str | None] = "calibrates its noise by a stability argument, not to an L2 sensitivity"

    def __init__(self, max_planned_steps: float = DEFAULT_MAX_PLANNED_STEPS) -> None:
        self.max_planned_steps = float(max_planned_steps)

    def with_operator_limits(self, limits: Mapping[str, Any]) -> AnySolver:
        """A copy with the operator's cap ``limits["resque_localized_max_steps"]`` (if given)."""
        cap = limits.get("resque_localized_max_steps")
        return self if cap is None else ReSQueLocalized(max_planned_steps=cap)

    def _plan(self, p: ReSQueLocalizedParams, meta: PublicMetadata, epsilon: float, delta: float,
              grid: OrderGrid, slack_budget: float) -> LocalizedPlan:  # fmt: skip
        """Everything but β (module docstring), with δ_c and r solved together (r depends on δ_c, K on r), the
        calls' slacks summing to at most ``slack_budget``."""
        loss = margin_loss(p.model, p.quantile_tau if p.model == "quantile" else p.huber_delta)
        bound = design_bound(meta, p.fit_intercept)
        lipschitz = loss.lipschitz * bound
        radius = p.radius or DEFAULT_RADIUS[p.model]
        d = meta.d + (1 if p.fit_intercept else 0)
        private_rate = math.sqrt(d * math.log(1.0 / delta)) / (meta.n * epsilon)
        eps_opt = lipschitz * radius * (1.0 / math.sqrt(meta.n) + private_rate)
        kappa = max(lipschitz * radius / eps_opt, math.e)
        smoothing = p.smoothing or eps_opt / (lipschitz * math.sqrt(d))
        steps = p.steps_per_call or 2 ** math.floor(math.log2(max(meta.n / 240.0, _MIN_STEPS)))
        if steps < _MIN_STEPS or mlmc_levels(meta.n, steps) < 1:
            raise SolverParameterError(
                "steps_per_call", f"needs {_MIN_STEPS} ≤ T ≤ n/120 (Algorithm 6 needs a level), got T = {steps}, "
                f"n = {meta.n}",
            )  # fmt: skip
        largest_call = 2 ** mlmc_levels(meta.n, steps) * steps
        delta_call = slack_budget  # as if there were one call
        for _ in range(60):  # δ_c ↓ ⇒ r ↓ ⇒ K ↑ ⇒ more calls ⇒ δ_c ↓: a decreasing sequence, log-slow
            ball_radius = smoothing / (2.0 * P4_CONSTANT * math.log(2.0 * math.log2(largest_call) / delta_call) ** 2)
            default_iterations = math.ceil((radius / ball_radius) ** (2.0 / 3.0)) * math.ceil(math.log(kappa))
            iterations = p.outer_iterations or default_iterations
            probes = p.line_search_probes or math.ceil(math.log2(radius * kappa / ball_radius))
            zeta = p.zeta or min(0.5, 1.0 / (kappa * iterations * math.log(kappa)))
            lam_low = eps_opt * iterations**2 * math.log(kappa) ** 2 / radius**2
            lam_high = max(lipschitz / eps_opt, 2.0 * lam_low)
            schedule = OuterSchedule(iterations, probes, lam_low, lam_high, zeta, steps, 1.0, radius)
            calls = schedule_cost(schedule, meta.n, delta_call, grid).calls
            allowed = slack_budget / calls
            if delta_call <= allowed:
                break
            delta_call = allowed
        else:  # pragma: no cover - the sequence settles within a few rounds
            raise SolverParameterError("delta", "could not fix the per-call slack δ_c")
        largest_restart = 2.0 ** (max(1, math.ceil(math.log2(math.log2(steps)))) / 2.0)
        # (1 − 1e-9): the cap must survive the rounding of 2^{k/2}·β in the calls' own P3 check
        beta_cap = (1.0 - 1e-9) * math.sqrt(P3_BOUND / P3_CONSTANT) / math.log(2.0 / delta_call) / largest_restart
        return LocalizedPlan(lipschitz, radius, smoothing, schedule, delta_call, ball_radius, beta_cap)

    def _resolve(
        self, p: ReSQueLocalizedParams, meta: PublicMetadata, privacy: PrivacyRequest
    ) -> ReSQueLocalizedResolved:
        """The schedule, δ_c, r from public inputs; the feasibility guard; β calibrated to the target. The slacks
        sum to at most (1/4)·δ/(1 + e^ε) and, for a dataset, to the allowance of its filter's δ pot. Refused on a
        server with the exact sampler: a phase's noise σ_i = Lη_i/β is calibrated through the paper's stability
        argument (Prop. 7), not to an L2 sensitivity the lattice of :mod:`privfit.privacy.noise` could be sized for."""
        require_float_sampler(self)
        target_epsilon, delta = privacy.required_target()
        grid, allowance = privacy.grid, privacy.delta_allowance
        slack_budget = delta_part(
            SLACK_SHARE * delta / (1.0 + math.exp(target_epsilon)),
            None if allowance is None else allowance.max_slack, "epsilon",
            "resque_localized's approximate-RDP slack",
        )  # fmt: skip
        plan = self._plan(p, meta, target_epsilon, delta, grid, slack_budget)
        work = schedule_cost(plan.schedule, meta.n, plan.delta_call, grid)
        if work.steps > self.max_planned_steps:
            raise SolverParameterError(
                "steps",
                f"resque_localized would run {work.steps:.3g} gradient steps ({work.calls:.3g} Algorithm-4 calls, "
                f"K = {plan.schedule.iterations} outer iterations; P4 forces r = {plan.ball_radius:.3g}), above this "
                f"server's cap of {self.max_planned_steps:.3g}; use resque_dpsgd",
            )
        beta = self._calibrate_beta(plan, meta.n, target_epsilon, delta, grid)
        schedule = replace(plan.schedule, beta=beta)
        cost = plan_cost(schedule, meta.n, plan.delta_call, grid)
        finite = grid.orders[np.isfinite(cost.rdp)]
        return ReSQueLocalizedResolved(
            **privacy.resolved_fields(meta), model=p.model,
            loss_parameter=margin_loss(p.model, p.quantile_tau if p.model == "quantile" else p.huber_delta).parameter,
            fit_intercept=p.fit_intercept, lipschitz=plan.lipschitz, radius=plan.radius, smoothing=plan.smoothing,
            ball_radius=plan.ball_radius, delta_call=plan.delta_call, beta=beta,
            outer_iterations=schedule.iterations, line_search_probes=schedule.probes,
            steps_per_call=schedule.steps, zeta=schedule.zeta, lam_low=schedule.lam_low, lam_high=schedule.lam_high,
            planned_calls=work.calls, planned_steps=work.steps,
            alpha_max=float(finite.max()) if finite.size else 1.0, approx_delta=cost.approx_delta,
        )  # fmt: skip

    @staticmethod
    def _calibrate_beta(plan: LocalizedPlan, n: int, epsilon: float, delta: float, grid: OrderGrid) -> float:
        """The largest β ≤ the P3 cap whose cost converts to ≤ ε at δ (bisection in log β; ε is increasing in β)."""

        def converts(beta: float) -> bool:
            schedule = replace(plan.schedule, beta=beta)
            return plan_cost(schedule, n, plan.delta_call, grid).epsilon(delta).epsilon <= epsilon

        high, low = plan.beta_cap, plan.beta_cap * 1e-12
        if converts(high):
            return high
        if not converts(low):
            raise SolverParameterError("epsilon", f"no β meets ε = {epsilon} at δ = {delta} for this schedule")
        for _ in range(100):
            middle = math.sqrt(low * high)
            low, high = (middle, high) if converts(middle) else (low, middle)
            if high / low < 1.0 + 1e-9:
                break
        return low

    def _cost(self, r: ReSQueLocalizedResolved, meta: PublicMetadata, grid: OrderGrid) -> PrivacyCost:
        """The approximate-RDP charge of the resolved schedule (module docstring); reads no row."""
        return plan_cost(_schedule(r), r.n, r.delta_call, grid)

    def _progress_steps(self, r: ReSQueLocalizedResolved) -> int:
        return r.outer_iterations

    def _fit(self, run: FitRun, r: ReSQueLocalizedResolved) -> FloatArray:
        """Run the fixed schedule; every Algorithm-4 call re-checks P1–P5 before it reads data."""
        context = AlgorithmContext(
            X=run.X, y=run.y, loss=margin_loss(r.model, r.loss_parameter), lipschitz=r.lipschitz, rho=r.smoothing,
            r=r.ball_radius, delta_call=r.delta_call, rng=run.rng,
        )  # fmt: skip

        def step(iteration: int) -> None:
            run.reporter.check_stop(iteration)
            run.reporter.report(iteration)

        return ball_acceleration(context, _schedule(r), should_stop=step)

    def _noise_norm(self, r: ReSQueLocalizedResolved, meta: PublicMetadata) -> float | None:
        r"""R·sqrt(d log(1/δ))/(nε): the privacy term of the rate ε_opt = LR(1/√n + sqrt(d log(1/δ))/(nε)) the
        parameters are chosen for (Thm. 3, module docstring), in parameter units (÷ L). Algorithm 4's own noise,
        σ_i√d = r'·min(√d/(β√T), 1) per call, is confined to balls of radius r ≪ R and its accumulation over the
        accelerated outer loop has no closed form, so the rate stands in for it. None without a target ε."""
        if r.target_epsilon is None or r.delta is None:
            return None
        dimension = r.d + int(r.fit_intercept)
        return r.radius * math.sqrt(dimension * math.log(1.0 / r.delta)) / (r.n * r.target_epsilon)


def _schedule(r: ReSQueLocalizedResolved) -> OuterSchedule:
    return OuterSchedule(r.outer_iterations, r.line_search_probes, r.lam_low, r.lam_high, r.zeta, r.steps_per_call,
                         r.beta, r.radius)  # fmt: skip
