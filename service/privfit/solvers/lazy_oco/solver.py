r"""``dp_lazy_oco``: private lazy online convex optimisation, P-COMW (Agarwal, Kale, Singh & Thakurta,
"Improved Differentially Private and Lazy Online Convex Optimization"), Algorithm 1, in the exact
truncated-Gaussian variant P-COMW-TG of spec ``seed-003-lazy-oco.md`` §5.3.

**What it fits.** The rows are streamed once, in a secret uniformly random order, as the loss sequence
l_t(θ) = ℓ(θ; z_{π(t)}), t = 1..T with T = n, over the ball K = B(0, R). Each row contributes one public-bounded
vector z: the encoded features x (``z = "x"``) or the label times the design row y·x (``z = "yx"``, with a
trailing 1 when ``fit_intercept``). Two models, the families for which the Gibbs measures of Algorithm 1 are
truncated isotropic Gaussians that can be sampled and normalised EXACTLY (spec §2.6, §5.3 "Scope"):

* ``mean``: ℓ(θ; z) = ½‖θ − clip(z, C)‖² — private mean estimation (a = 1, g = −z, G = R + C). With z = y·x
  it is the isotropic-quadratic regression loss ½‖θ‖² − y⟨x, θ⟩ (+ const), whose minimiser E[yx] is the
  least-squares coefficient when the design is isotropic (E[xxᵀ] = I).
* ``linear_loss``: ℓ(θ; z) = −⟨clip(z, C), θ⟩ — online linear optimisation (a = 0, G = C), whose minimiser on
  the ball is R·z̄/‖z̄‖, the private mean direction; with z = y·x, sign⟨θ, x⟩ is the mean-difference classifier.

Any other model (logistic, linear regression, Huber, SVM) has no exact sampler and is refused with the names of
the solvers that take it (spec §5.2: approximate samplers break the proof).

**Algorithm** (:func:`~privfit.solvers.lazy_oco.pcomw.run_pcomw_tg`): x_1 ~ μ̄_1; in round t the iterate is kept with
probability (1 − p)·a_t, a_t = min{1, max{Φ^{-2}, μ̄_{t+1}(x_t)/(Φ μ̄_t(x_t))}} (the keep probability of the
rejection-sampling step, clamped), otherwise a fresh exact draw x_{t+1} ~ μ̄_{t+1} ∝ exp(−β(Σ_{τ≤t} l_τ + λ‖·‖²/2))
on K, at most B_int = ceil(3p̃T) times (p̃ = p + 1 − Φ^{-2}). The sampler and log-normalisers are in
:mod:`privfit.solvers.lazy_oco.sampling`.

**Privacy** (replace-one neighbours: one loss of the sequence differs). The charge is the paper's theorem
``thm:dp`` with the spec's corrections (:mod:`privfit.solvers.lazy_oco.accounting`, spec §3.1–3.3): the
uncollapsed bound Σ_t ε_t² ≤ 4log²Φ/p² + 2B_int log²Φ + 8u²T/p² (u = βG²/λ), ε = (3/2)Σε_t² + sqrt(6 Σε_t²
log(1/δ'')) with δ'' = δ_cal/2, and the FULL δ sum δ_total = δ_cal/2 + T(4δ' + 9δ'T + 3e^{−p̃T}),
δ' = δ_cal/(60T²) (the paper drops T·3e^{−p̃T}, issue I1). Φ is not a utility knob: log Φ = 2·(2u' +
sqrt(8u' log(2/δ'))) with u' = 9u (Lemma densityratio at 3G, Φ = Φ'²), exactly what thm:dp needs.
The guarantee covers the whole sequence x_{1:T}; the release (the average iterate, optionally the number of
switches) is post-processing. It is recorded as an (ε, δ_total) approximate-DP charge
(:meth:`PrivacyCost.approximate_dp`: the pure-ε RDP curve plus δ_total), as the spec requires for mode "paper"
(§6.4). The spec's per-history RDP curve (§3.4) is NOT used: it is not proven in the literature.

**The sampler's δ** (issue 18). The Gibbs draws use a FIXED number of proposals each
(:class:`~privfit.solvers.lazy_oco.sampling.TruncatedGaussianSampler`, planned from public bounds by
:meth:`~privfit.solvers.lazy_oco.pcomw.GibbsSamplingPlan.public`): an accepted proposal is an exact draw, and a draw
whose proposals are all rejected returns the public point 0. Couple the implemented mechanism M′ with the ideal
one M (the same proposals, M continuing until acceptance): they agree outside the event F = "some draw failed",
and P(F) ≤ η = (U + 1)·(per-draw failure bound) on EVERY dataset (U = min(B_int, T) draws after the first).
Then for every set S, P(M′(D) ∈ S) ≤ P(M(D) ∈ S) + η ≤ e^ε P(M(D′) ∈ S) + δ_total + η
≤ e^ε P(M′(D′) ∈ S) + δ_total + (1 + e^ε)η. The charge therefore adds ``sampler_delta`` = (1 + e^ε)·η to the
δ part; the proposal count is chosen so that it is ≤ 2⁻²⁰·δ_cal (and the calibration leaves that much room).

**Data-independent observables** (DESIGN §4): the pass is **padded to a public maximum** — all 2T coins are drawn
up front, every block is evaluated, and the switches' Gibbs draws and block re-evaluations are padded to U + 1
draws and U re-evaluations (:func:`~privfit.solvers.lazy_oco.pcomw.run_pcomw_tg`); each draw takes the same random
numbers whatever its target, and the log-normalisers' computation path is chosen from the same public bounds.
The stop polls (per block, and per 64 Gibbs draws) and the progress milestones are fixed.

**Calibration** (spec §4.3, recipe R3 in mode "paper", :func:`~privfit.solvers.lazy_oco.accounting.
calibrate_paper`): for each p on a log grid, the largest u whose (ε, δ_total) is within (target ε, δ_cal);
λ = G sqrt(2(T + d log T/u))/D, β = uλ/G². Here δ_cal = δ/2 for the dataset's δ (at most the allowance of its
filter's δ pot: :mod:`privfit.privacy.filter`), so δ_total ≤ δ/2 and the
ledger's conversion of the pure-ε part has at least δ/2 − 2⁻²⁰δ_cal left (the sampler's δ is reserved); the paper's
ε is calibrated to the largest value whose pure-ε RDP curve converts there to ≤ the target, so the ε the ledger
reports is ≤ the target.

**Output** (spec §6.1): the average iterate (1/T)Σ x_t (online-to-batch: E[F(x̄)] − F(θ*) ≤ Regret_T/T for
i.i.d. rows), with the THEORETICAL regret bound of thm:regret for the chosen parameters, computed from public
quantities — never an empirical regret on private rows. ``report_switches`` adds the number of switches.
Progress is reported at fixed milestones of the round index (data-independent values).

**No exact sampler** (issue 25). The Gibbs draws sample continuous truncated Gaussians and the keep/switch step
accepts with a data-dependent probability; neither can be moved to the lattice samplers of
:mod:`privfit.privacy.noise` without a new proof. A server whose sampler is ``exact`` refuses this solver at resolve
time (:data:`EXACT_SAMPLER_REFUSAL`, on the ``solver`` field); with ``float`` its draws are numpy's, and the fit's
metadata says so whatever the server's sampler when it runs.

**When to use it.** At realistic n its utility is far below one-shot solvers (spec §4.3: the average-regret
bound at T = 1e5, d = 10, ε = 1 is about 24·GD per round); it is the streaming / continual-release algorithm.
For a one-shot estimate use the Gaussian mechanism on a mean, or ``dp_otb`` / ``dp_sgd`` for GLMs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from privfit.privacy import OrderGrid, PrivacyCost, pure_epsilon_for_target
from privfit.privacy.noise import describe_sampler
from privfit.solvers.availability import suggested_solvers
from privfit.solvers.base import (
    MAX_SCALE,
    MIN_SCALE,
    FitRun,
    MetadataResolved,
    PrivacyRequest,
    PublicMetadata,
    Release,
    Solver,
    SolverParameterError,
    SolverParams,
    ball_capped,
    delta_part,
    design_matrix,
    require_float_sampler,
)
from privfit.solvers.geometry import augmented_bound
from privfit.solvers.lazy_oco.accounting import (
    calibrate_paper,
    paper_accountant,
    paper_log_phi,
    regret_bound,
    switch_budget,
)
from privfit.solvers.lazy_oco.pcomw import (
    GibbsSamplingPlan,
    PcomwConfig,
    linear_loss_stream,
    mean_estimation_loss_stream,
    run_pcomw_tg,
)

__all__ = ["EXACT_SAMPLER_REFUSAL", "LAZY_OCO_MODELS", "DPLazyOCO", "DPLazyOCOParams", "DPLazyOCOResolved"]

#: The models of spec §5.3 (exact Gibbs measures); not GLMs, so they are not in the loss registry.
LAZY_OCO_MODELS = ("mean", "linear_loss")
#: The dataset's δ is split: δ_cal = δ/2 for the paper's accountant (on a dataset, at most the allowance of its
#: filter's δ pot), the rest for the ledger's conversion.
CALIBRATION_DELTA_FRACTION = 0.5
#: The share of δ_cal the sampler's failure δ may use (module docstring, "The sampler's δ").
SAMPLER_DELTA_SHARE = 2.0**-20
#: Relative tolerance of the consistency checks on stored settings (they are recomputed, not trusted).
_CONSISTENCY_RTOL = 1e-9
#: The range in which the log ball mass and the sampler are validated (``test_lazy_oco.py`` stress grid, spec §6.3):
#: dimension, worst-case Gibbs mean norm ν/R and smallest Gibbs scale σ/R over the pass — all public.
MAX_DIMENSION = 1000
MAX_MEAN_OVER_RADIUS = 1e3
MIN_SCALE_OVER_RADIUS = 1e-3
#: Why a server with the exact sampler refuses this solver (module docstring, "No exact sampler";
#: :func:`~privfit.solvers.base.require_float_sampler` words the refusal).
EXACT_SAMPLER_REFUSAL = "samples a continuous distribution with data-dependent acceptance"


class DPLazyOCOParams(SolverParams):
    """User parameters of ``dp_lazy_oco`` (spec §6.2; mode "paper" only, calibrated to a target ε)."""

    model: Literal["mean", "linear_loss"] = Field(
        "mean",
        description="'mean': ½‖θ − z‖² (private mean estimation); 'linear_loss': −⟨z, θ⟩ on the ball (private "
        "mean direction). Other models are GLMs: use dp_otb, dp_sgd, dp_gd or the perturbation solvers.",
    )
    z: Literal["x", "yx"] | None = Field(
        None,
        description="The vector each row contributes: 'x' (encoded features) or 'yx' (label × features, the "
        "regression / classification form). Default: 'x' for mean, 'yx' for linear_loss.",
    )
    fit_intercept: bool = Field(False, description="Append a constant 1 to x (only with z = 'yx').")
    radius: float | None = Field(
        None,
        ge=MIN_SCALE,
        le=MAX_SCALE,
        description="Radius R of the ball K = B(0, R). Default: the public bound of ‖z‖.",
    )
    clip_norm: float | None = Field(
        None,
        ge=MIN_SCALE,
        le=MAX_SCALE,
        description="Rows are clipped to ‖z‖ ≤ C. Default: the public bound of ‖z‖ (clipping is then a no-op).",
    )
    report_switches: bool = Field(
        False, description="Also release the number of switches (post-processing of the released sequence)."
    )


class DPLazyOCOResolved(MetadataResolved):
    """Resolved ``dp_lazy_oco`` settings: Algorithm 1's inputs, the guarantee and the theoretical regret bound."""

    solver: Literal["dp_lazy_oco"] = "dp_lazy_oco"
    formula_version: Literal["dp_lazy_oco/paper-thm-dp-full-delta-fixed-proposals/v2"] = (
        "dp_lazy_oco/paper-thm-dp-full-delta-fixed-proposals/v2"
    )
    model: Literal["mean", "linear_loss"]
    z: Literal["x", "yx"]
    fit_intercept: bool
    dimension: int = Field(ge=1, description="Dimension of θ (d, plus 1 with an intercept).")
    z_bound: float = Field(gt=0.0, description="Public bound of ‖z‖ from the declared bounds.")
    radius: float = Field(gt=0.0, description="R; the diameter is D = 2R.")
    clip_norm: float = Field(gt=0.0, description="C: rows are clipped to ‖z‖ ≤ C.")
    lipschitz: float = Field(gt=0.0, description="G: R + C for mean, C for linear_loss.")
    calibration_delta: float = Field(gt=0.0, lt=1.0, description="δ_cal given to the paper's accountant.")
    beta: float = Field(gt=0.0, description="Inverse temperature β.")
    lam: float = Field(gt=0.0, description="Ridge λ of the Gibbs measures.")
    u: float = Field(gt=0.0, description="u = βG²/λ.")
    p: float = Field(gt=0.0, le=1.0, description="Forced-switch probability.")
    log_phi: float = Field(gt=0.0, description="log Φ (Lemma densityratio at 3G and δ' = δ_cal/(60T²), squared).")
    switch_cap: int = Field(ge=0, description="B_int = ceil(3p̃T), the switches allowed.")
    paper_epsilon: float = Field(gt=0.0, description="ε of thm:dp, uncollapsed.")
    paper_delta: float = Field(gt=0.0, lt=1.0, description="δ_total of thm:dp, the full sum.")
    sampler_path: Literal["naive", "reduction"] = Field(description="The Gibbs sampler's path (public bounds).")
    sampler_proposals: int = Field(ge=1, description="Proposals per rejection stage of every Gibbs draw.")
    sampler_delta: float = Field(ge=0.0, description="(1 + e^ε)·P(some Gibbs draw fails): the sampler's extra δ.")
    regret_bound: float = Field(description="thm:regret's expected-regret bound for these parameters.")
    average_regret_bound: float = Field(description="regret_bound / T: the excess-risk bound of x̄ (i.i.d. rows).")
    report_switches: bool


def sampling_plan(
    *,
    model: str,
    dimension: int,
    radius: float,
    clip_norm: float,
    beta: float,
    lam: float,
    n: int,
    switch_cap: int,
    calibration_delta: float,
    paper_epsilon: float,
) -> tuple[GibbsSamplingPlan, float]:
    """The public Gibbs sampling plan of a fit and its ``sampler_delta`` = (1 + e^ε)·η (module docstring), the
    failure budget being 2⁻²⁰·δ_cal/(1 + e^ε)."""
    log_weight = float(np.logaddexp(0.0, paper_epsilon))  # log(1 + e^ε), without overflow
    plan = GibbsSamplingPlan.public(
        dimension=dimension, radius=radius, clip_norm=clip_norm, curvature=1.0 if model == "mean" else 0.0,
        beta=beta, lam=lam, horizon=n, switch_cap=switch_cap,
        log_failure_budget=math.log(SAMPLER_DELTA_SHARE * calibration_delta) - log_weight,
    )  # fmt: skip
    return plan, math.exp(log_weight + plan.log_failure_probability)


def _resolved_sampling_plan(r: DPLazyOCOResolved) -> tuple[GibbsSamplingPlan, float]:
    return sampling_plan(
        model=r.model, dimension=r.dimension, radius=r.radius, clip_norm=r.clip_norm, beta=r.beta, lam=r.lam,
        n=r.n, switch_cap=r.switch_cap, calibration_delta=r.calibration_delta, paper_epsilon=r.paper_epsilon,
    )  # fmt: skip


def _check_validated_range(beta: float, lam: float, T: int, clip_norm: float, radius: float, model: str) -> None:
    """Spec §6.3: the Gibbs means and scales of the whole pass, bounded from public quantities, must lie where the
    log ball mass and the exact sampler are validated, so that no data-dependent numerical failure is possible.

    With κ_t = λ + a(t − 1) (a = 1 for ``mean``, 0 for ``linear_loss``) and ‖S_{t−1}‖ ≤ (t − 1)C, the mean
    ν_t = ‖S_{t−1}‖/κ_t ≤ TC/(λ + aT) and the scale σ_t = (βκ_t)^{-1/2} ≥ (β(λ + aT))^{-1/2}.
    """
    curvature = 1.0 if model == "mean" else 0.0
    kappa_max = lam + curvature * T
    mean_over_radius = T * clip_norm / kappa_max / radius
    scale_over_radius = 1.0 / math.sqrt(beta * kappa_max) / radius
    if mean_over_radius > MAX_MEAN_OVER_RADIUS or scale_over_radius < MIN_SCALE_OVER_RADIUS:
        raise SolverParameterError(
            "epsilon",
            f"these settings need Gibbs measures (mean/R up to {mean_over_radius:.3g}, scale/R down to "
            f"{scale_over_radius:.3g}) outside the range where the exact sampler is validated (mean/R ≤ "
            f"{MAX_MEAN_OVER_RADIUS:g}, scale/R ≥ {MIN_SCALE_OVER_RADIUS:g}); use a smaller epsilon or fewer rows",
        )


class DPLazyOCO(Solver[DPLazyOCOParams, DPLazyOCOResolved]):
    """P-COMW-TG (Agarwal, Kale, Singh & Thakurta, Algorithm 1; spec seed-003 §5.3) with the paper's accountant.

    It streams the bounded rows itself (``appends_intercept`` is False: z = y·x gets its intercept in :meth:`_fit`).
    """

    description: ClassVar[str] = (
        "Private lazy online convex optimisation (P-COMW, Agarwal-Kale-Singh-Thakurta, Algorithm 1) with exact "
        "truncated-Gaussian Gibbs draws: one pass over the rows in a random order, releasing the average iterate "
        "and the theoretical regret bound. Models 'mean' (private mean estimation) and 'linear_loss' (mean "
        "direction); cost: the paper's (epsilon, delta) theorem with the full delta sum. A streaming algorithm: "
        "for one-shot fits other solvers are far more accurate."
    )
    target_required: ClassVar[str] = "dp_lazy_oco is calibrated to a target epsilon at the dataset's delta: give both"
    float_sampler_only: ClassVar[str | None] = EXACT_SAMPLER_REFUSAL
    uses_delta_parts: ClassVar[bool] = True
    appends_intercept: ClassVar[bool] = False

    def parse_params(self, params: Mapping[str, Any] | SolverParams | None = None) -> DPLazyOCOParams:
        """Validate; a GLM model is refused with the names of the solvers that fit it and that this server runs
        (:func:`~privfit.solvers.availability.suggested_solvers`: never one it refuses)."""
        model = params.get("model") if isinstance(params, Mapping) else None
        if isinstance(model, str) and model not in self.models:
            known = ", ".join(repr(m) for m in self.models)
            raise SolverParameterError(
                "model",
                f"solver 'dp_lazy_oco' samples its Gibbs measures exactly only for {known} (spec §5.3); "
                f"model {model!r} is fitted by {suggested_solvers(model, exclude=(self.name,))}",
            )
        return super().parse_params(params)

    def _resolve(self, p: DPLazyOCOParams, meta: PublicMetadata, privacy: PrivacyRequest) -> DPLazyOCOResolved:
        """Public bounds → G, D; (target ε, δ_cal = δ/2, T = n) → (β, λ, p, Φ, B_int) by the paper's recipe. On a
        dataset δ_cal is at most its filter's δ allowance (the charge's δ part is ≤ δ_cal(1 + 2⁻²⁰)). Refused under
        the exact sampler (module docstring)."""
        require_float_sampler(self)
        target_epsilon, delta = privacy.required_target()
        delta_allowance = privacy.delta_allowance
        z = p.z or ("x" if p.model == "mean" else "yx")
        if p.fit_intercept and z != "yx":
            raise SolverParameterError("fit_intercept", "an intercept applies only with z = 'yx'")
        if z == "yx":
            feature_bound = augmented_bound(meta.row_norm_bound) if p.fit_intercept else meta.row_norm_bound
            z_bound = feature_bound * meta.label_bound
        else:
            z_bound = meta.row_norm_bound
        if not (z_bound > 0.0 and math.isfinite(z_bound)):
            raise SolverParameterError("label_bound", "the declared bounds give a zero bound on ‖z‖")
        radius = z_bound if p.radius is None else p.radius
        clip_norm = z_bound if p.clip_norm is None else p.clip_norm
        lipschitz = radius + clip_norm if p.model == "mean" else clip_norm
        dimension = meta.d + (1 if p.fit_intercept else 0)
        if dimension > MAX_DIMENSION:
            raise SolverParameterError(
                "d", f"dp_lazy_oco is validated up to dimension {MAX_DIMENSION}, this fit has {dimension}"
            )
        calibration_delta = delta_part(
            CALIBRATION_DELTA_FRACTION * delta,
            None if delta_allowance is None else delta_allowance.delta / (1.0 + SAMPLER_DELTA_SHARE), "epsilon",
            "dp_lazy_oco's (ε, δ) accountant",
        )  # fmt: skip
        horizon_minimum = math.ceil(12.0 * math.log(1.0 / calibration_delta))
        if meta.n < horizon_minimum:
            raise SolverParameterError(
                "n", f"thm:dp needs T = n ≥ 12 log(1/δ_cal) = {horizon_minimum} rows, the dataset has {meta.n}"
            )
        # The ledger converts the charge's pure-ε curve at the δ left over by δ_total + sampler_delta ≤ δ_cal(1 +
        # 2⁻²⁰): calibrate the paper's ε to the largest value whose conversion there is within the target.
        conversion_delta = 1.0 - (1.0 - delta) / (1.0 - calibration_delta * (1.0 + SAMPLER_DELTA_SHARE))
        paper_target = min(target_epsilon, pure_epsilon_for_target(target_epsilon, conversion_delta, privacy.grid))
        chosen = calibrate_paper(paper_target, calibration_delta, meta.n, lipschitz, 2.0 * radius, dimension)
        _check_validated_range(chosen.beta, chosen.lam, meta.n, clip_norm, radius, p.model)
        bound = regret_bound(
            beta=chosen.beta,
            lam=chosen.lam,
            p=chosen.p,
            log_phi=chosen.log_phi,
            closeness_delta=chosen.closeness_delta,
            T=meta.n,
            G=lipschitz,
            D=2.0 * radius,
            d=dimension,
        )
        plan, sampler_delta = sampling_plan(
            model=p.model, dimension=dimension, radius=radius, clip_norm=clip_norm, beta=chosen.beta, lam=chosen.lam,
            n=meta.n, switch_cap=chosen.B_int, calibration_delta=calibration_delta, paper_epsilon=chosen.epsilon,
        )  # fmt: skip
        return DPLazyOCOResolved(
            **privacy.resolved_fields(meta),
            model=p.model,
            z=z,
            fit_intercept=p.fit_intercept,
            dimension=dimension,
            z_bound=z_bound,
            radius=radius,
            clip_norm=clip_norm,
            lipschitz=lipschitz,
            calibration_delta=calibration_delta,
            beta=chosen.beta,
            lam=chosen.lam,
            u=chosen.u,
            p=chosen.p,
            log_phi=chosen.log_phi,
            switch_cap=chosen.B_int,
            paper_epsilon=chosen.epsilon,
            paper_delta=chosen.delta,
            sampler_path=plan.sampler.path,
            sampler_proposals=plan.sampler.proposals,
            sampler_delta=sampler_delta,
            regret_bound=bound,
            average_regret_bound=bound / meta.n,
            report_switches=p.report_switches,
        )

    def _cost(self, r: DPLazyOCOResolved, meta: PublicMetadata, grid: OrderGrid) -> PrivacyCost:
        """(ε, δ_total + sampler_delta): thm:dp recomputed from the stored u, p, log Φ, T and δ_cal, and the sampler's
        δ recomputed from the public sampling plan (module docstring), as an approximate-DP charge.

        :meth:`load_resolved` has checked that u, log Φ, the switch cap and the sampler settings are the ones the
        theorems require for the stored β, λ, G and p (they are what the fit runs with); a mismatch is refused
        rather than charged.
        """
        account = paper_accountant(r.u, r.p, r.log_phi, r.n, r.calibration_delta)
        _, sampler_delta = _resolved_sampling_plan(r)
        return PrivacyCost.approximate_dp(account.epsilon, account.delta_total + sampler_delta, grid)

    def _verify_resolved(self, r: DPLazyOCOResolved) -> None:
        """Check that u, log Φ, the cap and the sampler plan are those thm:dp and the public sampling plan prescribe
        for β, λ, G, p, T, δ_cal (on every load, so before every cost and fit)."""
        u = r.beta * r.lipschitz**2 / r.lam
        required_log_phi = paper_log_phi(r.u, r.n, r.calibration_delta)
        _, cap = switch_budget(r.p, r.log_phi, r.n)
        plan, sampler_delta = _resolved_sampling_plan(r)
        consistent = (
            math.isclose(u, r.u, rel_tol=_CONSISTENCY_RTOL)
            and math.isclose(r.log_phi, required_log_phi, rel_tol=_CONSISTENCY_RTOL)
            and r.switch_cap == cap
            and (plan.sampler.path, plan.sampler.proposals) == (r.sampler_path, r.sampler_proposals)
            and math.isclose(sampler_delta, r.sampler_delta, rel_tol=_CONSISTENCY_RTOL)
        )
        if not consistent:
            raise SolverParameterError(
                "resolved",
                "u, log Φ, the switch cap or the sampler settings do not match thm:dp's requirements and the public "
                "sampling plan",
            )

    def _progress_steps(self, r: DPLazyOCOResolved) -> int:
        return r.n

    def _fit(self, run: FitRun, r: DPLazyOCOResolved) -> Release:
        """Stream the rows once in a random order (from ``run.rng``) through P-COMW-TG; release x̄ (and #switches)."""
        rows = design_matrix(run.X, r.fit_intercept) * run.y[:, None] if r.z == "yx" else run.X
        rows = rows[run.rng.permutation(run.meta.n)]
        if r.model == "mean":
            stream = mean_estimation_loss_stream(rows, r.clip_norm)
        else:
            stream = linear_loss_stream(-rows, r.clip_norm)
        config = PcomwConfig(beta=r.beta, lam=r.lam, p=r.p, log_phi=r.log_phi, switch_cap=r.switch_cap)
        plan, _ = _resolved_sampling_plan(r)
        outcome = run_pcomw_tg(stream, config, r.radius, run.rng, reporter=run.reporter, plan=plan)
        run.reporter.advance(run.meta.n)
        extra: dict[str, Any] = {"noise_sampler": describe_sampler("float")}  # numpy's draws (module docstring)
        if r.report_switches:
            extra["num_switches"] = outcome.num_switches
        return Release(outcome.average_iterate, metadata=extra, predictor=r.z == "yx")

    def _noise_norm(self, r: DPLazyOCOResolved, meta: PublicMetadata) -> float:
        r"""The spread of the Gibbs draws averaged into x̄, capped at 2R.

        x_t ~ μ̄_t ∝ exp(−β(Σ_{τ<t} l_τ + λ‖·‖²/2)) on K is a Gaussian of precision β(a(t − 1) + λ) truncated to the
        ball (a = 1 for ``mean``, whose losses ½‖θ − z‖² add curvature; a = 0 for ``linear_loss``), so its distance
        to its centre is at most sqrt(d/(β(a(t − 1) + λ))) in root mean square (truncation only shrinks it). By
        the triangle inequality x̄ = (1/T)Σ_t x_t is off by at most (1/T) Σ_{s<T} sqrt(d/(β(a s + λ))) ≤
        sqrt(d/β)·(λ^{−1/2} + 2(sqrt(T − 1 + λ) − √λ))/T for ``mean`` (the integral bound) and sqrt(d/(βλ)) for
        ``linear_loss`` — an upper bound: the independent redraws partly cancel.
        """
        T, lam = r.n, r.lam
        if r.model == "mean":
            mean_inverse_root = (lam**-0.5 + 2.0 * (math.sqrt(T - 1 + lam) - math.sqrt(lam))) / T
        else:
            mean_inverse_root = lam**-0.5
        return ball_capped(math.sqrt(r.dimension / r.beta) * mean_inverse_root, r.radius)
