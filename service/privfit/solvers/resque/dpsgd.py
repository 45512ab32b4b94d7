r"""``resque_dpsgd``: DP-SGD on the Gaussian-smoothed objective with ReSQue gradients (Carmon, Jambulapati, Jin,
Lee, Liu, Sidford & Tian, "ReSQueing Parallel and Private Stochastic Convex Optimization"; the practical solver of
spec ``seed-004-resque.md`` §6.2). privfit's solver for NON-SMOOTH losses — hinge, absolute, pinball — which
``dp_otb`` cannot take.

**Objective.** The Gaussian convolution of the ERM loss, F̂_ρ(θ) = (1/n) Σ_i E_Z f_i(θ + ρZ), Z ~ N(0, I_d), over the
ball B(R), with f_i(θ) = φ(⟨θ, x_i⟩, y_i) a convex, L_φ-Lipschitz margin or residual loss defined on all of R
(:mod:`privfit.solvers.resque.estimator`): ``logistic``, ``svm`` (the hinge max(0, 1 − yz), NOT smoothed: the Gaussian
convolution smooths it), ``absolute`` (|z − y|, least absolute deviation), ``quantile`` (pinball ρ_τ(y − z), with τ)
and ``huber``. F̂_ρ is L-Lipschitz and (L/ρ)-smooth, and for these GLM losses 0 ≤ F̂_ρ − F ≤ L_φ B ρ sqrt(2/π)
(spec §2), L = L_φ·B with B the public row-norm bound (sqrt(B_x² + 1) with an intercept).

**Algorithm** (spec §6.2). θ_1 = 0. Every m steps the centre is re-set, x̄ = θ_t (m = ``block_length``; m = 1 re-centres
at every step). At step t, for the secret batch B_t (drawn exactly as the accountant of ``sampling`` assumes,
:class:`~privfit.solvers.baselines.dp_sgd.BatchSampler`) and fresh ξ_i ~ N(0, ρ² I_d) for each i ∈ B_t,

    u_i = clip_C( w(θ_t; x̄, ξ_i) · ∂f_i(x̄ + ξ_i) ),  w = exp((2⟨θ_t − x̄, ξ_i⟩ − ‖θ_t − x̄‖²)/(2ρ²))  (Def. 2)
    g_t = (Σ_{i∈B_t} u_i + N(0, σ² I_d)) / m_b,                                      (m_b: the public batch size)
    θ_{t+1} = Π(θ_t − η g_t),   Π onto B(R) (m = 1) or B(R) ∩ B_x̄(ρ/4) (m > 1).

With m = 1, θ_t = x̄ and w ≡ 1: each step queries subgradients at Gaussian perturbations of θ_t, an unbiased
estimate of ∇F̂_ρ(θ_t) (Lemma 1.1). With m > 1 the queries of a block share the centre and only their scalar
weights move with θ (the parallel structure of the paper, §3); the extra projection keeps ‖θ − x̄‖ ≤ ρ/4, where
Lemma 2 bounds the weights' moments. The release is the average of the last ⌈T/2⌉ iterates (default) or the last.

**Privacy** (replace-one neighbours, n public, DESIGN §1.1). Whatever θ_t, x̄ and the ξ_i (data-independent
randomness, and functions of earlier noisy sums), each row enters g_t through one summand u_i of norm ≤ C, so the
clipped sum has replace-one sensitivity 2C and every step is exactly the subsampled Gaussian mechanism of DP-SGD.
The cost is :func:`~privfit.solvers.baselines.dp_sgd.batch_noise_cost` — the T-fold Poisson-subsampled Gaussian curve
(``poisson``, default), the without-replacement curve (``fixed_size``) or E Gaussian mechanisms (``shuffle``), the
accountants of ``dp_sgd`` (proofs in its module docstring). ρ, m, η, the centring, the projections and the
averaging are all post-processing: the privacy proof depends on no optimisation choice (spec §6.2).

**Defaults** (spec §6.2 table, public): ρ = R·max(1/√n, sqrt(d log(1/δ))/(nε)) (the smoothing bias then matches the
private rate); m = 1; batch size m_b = clamp(√n, 64, 4096) (≤ n); E = 5 epochs (10 for n < 1e5); C = L (m = 1) or
2L (m > 1: for ‖θ − x̄‖ ≤ ρ/4, P(w > 2) ≈ 2e-3); η = R/(G√T) with G = L + σ√d/m_b (projected SGD with averaging);
R = 10 for the classification losses and Huber, 1 for absolute and quantile regression (labels in [−1, 1]).

*When privacy is cheap* (2026-11-26): where the public noise level ρ of :mod:`~privfit.solvers.baselines.dp_gd`
(its eq. (4), computed here with the gradient scale B̃ whatever the loss) is below 0.01 — ε = 50 on Adult, Telco
and HR (ρ = 0.0018 / 0.0056 / 0.0018; with dp_sgd's threshold 0.005 Telco stayed 0.43 points short), not ε = 5
(ρ ≥ 0.0116) — the theory step R/(G√T) with 5–10 epochs stops far from the optimum (logistic, ε = 50: 1.6 / 0.4 /
0.5 accuracy points below the optimum of the unsmoothed objective on Adult / Telco / HR): G is the worst-case gradient
norm, the gradients near the optimum are much smaller, and no noise needs the small step. There the defaults are
E = 100 and 16 × R/(G√T) (measured, 2 seeds: Adult 85.20 against 85.41 %, Telco 81.94 against 82.19 %; at E = 50,
HR 78.02–78.25 against 78.27 %; 8× and E = 20 stayed 0.4–1.5 points short; the smoothing radius made no
difference). Elsewhere the spec's defaults stand (at ε ≤ 5 more epochs were mixed across the three datasets).

**Data-independent observables** (DESIGN §4; issue 18). This solver **runs a public number of iterations**:
T = E·⌈n/m_b⌉ steps, the stop polled and progress reported once per step; per step the batch (as ``dp_sgd``), ξ for
each batch row (a size drawn from the noise) and one noise vector. The alternating projection onto
B(R) ∩ B_center(ρ/4) may stop before its 20 rounds, but it acts on the noisy iterate only (post-processing of
noisy sums already charged) and draws nothing.
"""

from __future__ import annotations

import math
from typing import ClassVar, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field, ValidationInfo, field_validator

from privfit.privacy import OrderGrid, PrivacyCost
from privfit.privacy.noise import gaussian_stream
from privfit.solvers.base import (
    MAX_SCALE,
    MIN_SCALE,
    FitRun,
    MetadataResolved,
    PrivacyRequest,
    ProgressReporter,
    PublicMetadata,
    Solver,
    SolverParameterError,
    SolverParams,
    design_bound,
    gradient_noise_norm,
)
from privfit.solvers.baselines.dp_gd import reference_noise_level
from privfit.solvers.baselines.dp_sgd import (
    BatchSampler,
    Output,
    Sampling,
    batch_noise_cost,
    calibrate_batch_noise,
    steps_per_epoch,
)
from privfit.solvers.geometry import clip_rows, clipped_scaled_row_sum, row_norms
from privfit.solvers.resque.estimator import (
    MarginLoss,
    glm_subgradient_scales,
    log_resque_weights,
    make_margin_loss,
)

__all__ = ["ReSQueDPSGD", "ReSQueDPSGDParams", "ReSQueDPSGDResolved", "project_step", "resque_dp_sgd"]

FloatArray = NDArray[np.float64]

ReSQueModel = Literal["logistic", "svm", "absolute", "quantile", "huber"]
#: Default radius R of the parameter ball per model (module docstring).
DEFAULT_RADIUS: dict[str, float] = {"logistic": 10.0, "svm": 10.0, "huber": 10.0, "absolute": 1.0, "quantile": 1.0}
MAX_STEPS = 1_000_000
MAX_EPOCHS = 1000
#: Batch size default clamp(√n, 64, 4096) (spec §6.2).
BATCH_SIZE_RANGE = (64, 4096)
#: Below this n the default is 10 epochs, else 5 (spec §6.2).
SMALL_N = 100_000
#: When privacy is cheap (dp_gd's public noise level ρ < 0.01): E and the factor on η = R/(G√T) (module docstring).
CHEAP_PRIVACY_NOISE_LEVEL = 0.01
CHEAP_PRIVACY_EPOCHS = 100
CHEAP_PRIVACY_STEP_FACTOR = 16.0
#: Rounds of alternating projections onto B(R) ∩ B_x̄(ρ/4) (post-processing: exactness only matters for utility).
_PROJECTION_ROUNDS = 20


class ReSQueDPSGDParams(SolverParams):
    """Parameters of ``resque_dpsgd`` (all optional; spec §6.2 defaults)."""

    model: ReSQueModel = Field(
        "logistic",
        description="'logistic', 'svm' (hinge max(0, 1 − y⟨θ, x⟩), not smoothed), 'absolute' (|⟨θ, x⟩ − y|), "
        "'quantile' (pinball loss with quantile_tau) or 'huber' (huber_delta).",
    )
    quantile_tau: float | None = Field(None, gt=0.0, lt=1.0, description="Quantile τ ∈ (0, 1) (model 'quantile'; "
                                       "default 0.5).")  # fmt: skip
    huber_delta: float | None = Field(
        None, ge=MIN_SCALE, le=MAX_SCALE, description="Huber threshold δ (model 'huber'; default 1)."
    )
    fit_intercept: bool = Field(True, description="Fit an intercept as an extra constant feature 1.")
    radius: float | None = Field(
        None, ge=MIN_SCALE, le=MAX_SCALE, description="Radius R of the parameter ball. Default 10 (logistic, svm, "
        "huber), 1 (absolute, quantile).",
    )  # fmt: skip
    smoothing: float | None = Field(
        None,
        ge=MIN_SCALE,
        le=MAX_SCALE,
        description="Gaussian smoothing radius ρ of the objective E f(θ + ρZ). Default R·max(1/√n, "
        "sqrt(d log(1/δ))/(nε)) (with an explicit noise multiplier: R/√n).",
    )
    block_length: int = Field(
        1,
        ge=1,
        le=10_000,
        description="ReSQue block length m: the query centre is re-set every m steps; within a block the queries "
        "are reweighted (m = 1: plain smoothed DP-SGD, weights ≡ 1).",
    )
    batch_size: int | None = Field(None, ge=1, le=10_000_000, description="Public batch size (expected, for "
                                   "'poisson'). Default clamp(√n, 64, 4096), at most n.")  # fmt: skip
    epochs: int | None = Field(
        None,
        ge=1,
        le=MAX_EPOCHS,
        description="Expected passes E. Default 5 (10 for n < 1e5); 100 when privacy is cheap (dp_gd's public "
        "noise level ρ < 0.01).",
    )
    sampling: Sampling = Field(
        "poisson",
        description="'poisson' (default), 'fixed_size' or 'shuffle': as for dp_sgd, each with its accountant.",
    )
    clip_norm: float | None = Field(
        None, ge=MIN_SCALE, le=1e9, description="Clipping norm C of each weighted subgradient. Default L (m = 1) or 2L."
    )
    step_size: float | None = Field(
        None,
        ge=MIN_SCALE,
        le=MAX_SCALE,
        description="Step size η. Default R/(G√T), G = L + σ√d/m_b; 16× that when privacy is cheap (ρ < 0.01).",
    )
    noise_multiplier: float | None = Field(
        None, gt=0.0, le=1e8, description="Explicit σ/C instead of a target ε (leave unset with a target ε)."
    )
    output: Output = Field("suffix_average", description="'suffix_average' (last ⌈T/2⌉ iterates) or 'last'.")

    @field_validator("quantile_tau")
    @classmethod
    def _quantile_only(cls, value: float | None, info: ValidationInfo) -> float | None:
        if value is not None and info.data.get("model") != "quantile":
            raise ValueError("applies only to model 'quantile'")
        return value

    @field_validator("huber_delta")
    @classmethod
    def _huber_only(cls, value: float | None, info: ValidationInfo) -> float | None:
        if value is not None and info.data.get("model") != "huber":
            raise ValueError("applies only to model 'huber'")
        return value


class ReSQueDPSGDResolved(MetadataResolved):
    """Fully resolved ``resque_dpsgd`` settings (public, data-independent)."""

    solver: Literal["resque_dpsgd"] = "resque_dpsgd"
    formula_version: Literal["resque_dpsgd/sampled-gaussian-rdp/v1"] = "resque_dpsgd/sampled-gaussian-rdp/v1"
    model: ReSQueModel
    loss_parameter: float | None = Field(description="τ (quantile) or δ (huber), None otherwise.")
    fit_intercept: bool
    design_norm_bound: float = Field(gt=0.0, description="B: row-norm bound of the design matrix.")
    radius: float = Field(gt=0.0)
    smoothing: float = Field(gt=0.0, description="ρ.")
    block_length: int = Field(ge=1)
    lipschitz: float = Field(gt=0.0, description="L = L_φ·B, a bound on every subgradient's norm.")
    sampling: Sampling
    batch_size: int = Field(ge=1)
    sampling_rate: float = Field(gt=0.0, le=1.0)
    epochs: int = Field(ge=1, le=MAX_EPOCHS)
    steps_per_epoch: int = Field(ge=1)
    steps: int = Field(ge=1, le=MAX_STEPS)
    step_size: float = Field(gt=0.0)
    clip_norm: float = Field(gt=0.0)
    sigma: float = Field(gt=0.0, description="Noise standard deviation on each clipped batch sum.")
    noise_multiplier: float = Field(gt=0.0, description="σ / C.")
    output: Output
    noise_level: float | None = Field(
        None,
        description="dp_gd's public noise level ρ (gradient scale B̃) that switches to the cheap-privacy defaults "
        "below 0.01; null with an explicit noise multiplier or when ε is too small for the 200-step reference.",
    )


def margin_loss(model: str, parameter: float | None) -> MarginLoss:
    """The model's :class:`~privfit.solvers.resque.estimator.MarginLoss` with its τ (quantile) or δ (huber)."""
    if model == "quantile":
        return make_margin_loss(model, quantile_tau=parameter)
    if model == "huber":
        return make_margin_loss(model, huber_delta=parameter)
    return make_margin_loss(model)


def project_step(theta: FloatArray, radius: float, center: FloatArray | None, local_radius: float) -> FloatArray:
    """Π onto B(R), or onto B(R) ∩ B_center(ρ/4) by alternating projections (rows of ``theta``; post-processing)."""
    out = clip_rows(theta, radius)
    if center is None:
        return out
    for _ in range(_PROJECTION_ROUNDS):
        out = center + clip_rows(out - center, local_radius)
        if np.all(np.linalg.norm(out, axis=1) <= radius * (1 + 1e-12)):
            break
        out = clip_rows(out, radius)
    return out


def resque_dp_sgd(
    X: FloatArray,
    y: FloatArray,
    *,
    loss: MarginLoss,
    smoothing: float,
    block_length: int,
    clip_norm: float,
    sigma: float,
    batch_size: int,
    sampling: Sampling,
    epochs: int,
    step_size: float,
    radius: float,
    rng: np.random.Generator,
    output: Output = "suffix_average",
    runs: int = 1,
    reporter: ProgressReporter | None = None,
) -> FloatArray:
    """The iterations of the module docstring for T = epochs·⌈n/m_b⌉ steps; the released θ, shape (runs, d).

    ``runs > 1`` runs independent copies (independent batches, ξ and noise) in one pass for audits on small public
    instances. ``sigma = 0`` is not private (tests of the noiseless path only; the solver never passes it).
    """
    n, d = X.shape
    if not (sigma >= 0.0 and math.isfinite(sigma)):
        raise SolverParameterError("sigma", f"must be finite and ≥ 0, got {sigma!r}")
    sampler = BatchSampler(n, batch_size, sampling, rng)
    steps = epochs * sampler.steps_per_epoch
    theta = np.zeros((runs, d))
    center = theta.copy()
    average = np.zeros((runs, d)) if output == "suffix_average" else None
    tail = math.ceil(steps / 2)
    local_radius = smoothing / 4.0
    norms = row_norms(X)
    # The noisy sums are releases (privfit.privacy.noise); the lattice is sized for the add/remove sensitivity C
    # (conservative for replace-one 2C); |coordinate| ≤ n·C.
    with gaussian_stream(
        rng, sigma=sigma, l2_sensitivity=clip_norm, shape=(runs, d), count=steps, bound=n * clip_norm
    ) as releases:
        for t in range(steps):
            if reporter is not None:
                reporter.check_stop(t)
            if t % block_length == 0:
                center = theta.copy()
            member = sampler.membership(runs) if runs > 1 else None
            g = np.zeros((runs, d))
            for r in range(runs):
                batch = sampler.indices() if member is None else np.flatnonzero(member[r])
                if batch.size == 0:
                    continue
                xi = smoothing * rng.standard_normal((batch.size, d))
                scales = glm_subgradient_scales(loss, X[batch], y[batch], center[r] + xi)
                if block_length > 1:
                    scales = scales * np.exp(log_resque_weights(theta[r] - center[r], xi, smoothing))
                g[r] = clipped_scaled_row_sum(X[batch], scales, clip_norm, norms=norms[batch])
            if releases is not None:
                g = releases.release(g)
            theta = project_step(theta - step_size * g / batch_size, radius, center if block_length > 1 else None,
                             local_radius)  # fmt: skip
            if average is not None and t >= steps - tail:
                average += theta
            if reporter is not None:
                reporter.report(t + 1)
    return average / tail if average is not None else theta


class ReSQueDPSGD(Solver[ReSQueDPSGDParams, ReSQueDPSGDResolved]):
    """ReSQue-DP-SGD (spec seed-004 §6.2): smoothed DP-SGD with ReSQue gradient queries, sampled-Gaussian cost."""

    description: ClassVar[str] = (
        "DP-SGD on the Gaussian-smoothed objective E f(θ + ρZ) with ReSQue gradient queries (Carmon et al.), for "
        "non-smooth losses: hinge ('svm'), absolute, quantile (pinball), plus logistic and Huber. Each weighted "
        "subgradient is clipped and the batch sums get Gaussian noise; cost: the subsampled Gaussian curve of the "
        "sampling mode (as dp_sgd). Defaults: ρ matched to the private rate, batch clamp(√n, 64, 4096), 5 epochs, "
        "suffix average."
    )
    explicit_noise: ClassVar[str | None] = "noise_multiplier"

    def _resolve(self, p: ReSQueDPSGDParams, meta: PublicMetadata, privacy: PrivacyRequest) -> ReSQueDPSGDResolved:
        """Defaults and noise from public inputs (module docstring); σ calibrated by the sampling mode's accountant."""
        if p.batch_size is not None and p.batch_size > meta.n:
            raise SolverParameterError("batch_size", f"must be ≤ n = {meta.n}, got {p.batch_size}")
        low, high = BATCH_SIZE_RANGE
        batch_size = p.batch_size or min(meta.n, max(low, min(high, round(math.sqrt(meta.n)))))
        per_epoch = steps_per_epoch(meta.n, batch_size)
        bound = design_bound(meta, p.fit_intercept)
        level = reference_noise_level(privacy.target, 2.0 * bound, meta, p.fit_intercept, privacy.grid)
        cheap = level is not None and level < CHEAP_PRIVACY_NOISE_LEVEL
        if p.epochs is not None:
            epochs = p.epochs
        elif cheap:
            epochs = min(CHEAP_PRIVACY_EPOCHS, max(1, MAX_STEPS // per_epoch))
        else:
            epochs = 10 if meta.n < SMALL_N else 5
        steps = epochs * per_epoch
        if steps > MAX_STEPS:
            raise SolverParameterError("epochs", f"{epochs} epochs × {per_epoch} steps = {steps} exceeds {MAX_STEPS}")
        rate = batch_size / meta.n
        parameter = p.quantile_tau if p.model == "quantile" else p.huber_delta if p.model == "huber" else None
        loss = margin_loss(p.model, parameter)
        lipschitz = loss.lipschitz * bound
        clip = p.clip_norm or (lipschitz if p.block_length == 1 else 2.0 * lipschitz)
        radius = p.radius or DEFAULT_RADIUS[p.model]
        dimension = meta.d + (1 if p.fit_intercept else 0)
        if privacy.target is not None:
            target_epsilon, delta = privacy.target
            sigma = calibrate_batch_noise(
                p.sampling, target_epsilon, delta, rate=rate, steps=steps, epochs=epochs, clip_norm=clip,
                coordinates=dimension, grid=privacy.grid,
            )  # fmt: skip
            private_rate = math.sqrt(dimension * math.log(1.0 / delta)) / (meta.n * target_epsilon)
        else:
            sigma = privacy.explicit() * clip
            private_rate = 0.0
        smoothing = p.smoothing or radius * max(1.0 / math.sqrt(meta.n), private_rate)
        gradient_scale = lipschitz + sigma * math.sqrt(dimension) / batch_size
        factor = CHEAP_PRIVACY_STEP_FACTOR if cheap else 1.0
        step_size = p.step_size or factor * radius / (gradient_scale * math.sqrt(steps))
        return ReSQueDPSGDResolved(
            **privacy.resolved_fields(meta),
            model=p.model,
            loss_parameter=loss.parameter,
            fit_intercept=p.fit_intercept,
            design_norm_bound=bound,
            radius=radius,
            smoothing=smoothing,
            block_length=p.block_length,
            lipschitz=lipschitz,
            sampling=p.sampling,
            batch_size=batch_size,
            sampling_rate=rate,
            epochs=epochs,
            steps_per_epoch=per_epoch,
            steps=steps,
            step_size=step_size,
            clip_norm=clip,
            sigma=sigma,
            noise_multiplier=sigma / clip,
            output=p.output,
            noise_level=level,
        )

    def _cost(self, r: ReSQueDPSGDResolved, meta: PublicMetadata, grid: OrderGrid) -> PrivacyCost:
        """:func:`~privfit.solvers.baselines.dp_sgd.batch_noise_cost` of the resolved sampling mode; reads no row."""
        return batch_noise_cost(
            r.sampling, rate=r.sampling_rate, steps=r.steps, epochs=r.epochs, sigma=r.sigma, clip_norm=r.clip_norm,
            coordinates=r.d + int(r.fit_intercept), grid=grid,
        )  # fmt: skip

    def _progress_steps(self, r: ReSQueDPSGDResolved) -> int:
        return r.steps

    def _fit(self, run: FitRun, r: ReSQueDPSGDResolved) -> FloatArray:
        """Run ReSQue-DP-SGD with ``r``; batches, ξ and noise from ``run.rng``."""
        theta: FloatArray = resque_dp_sgd(
            run.X,
            run.y,
            loss=margin_loss(r.model, r.loss_parameter),
            smoothing=r.smoothing,
            block_length=r.block_length,
            clip_norm=r.clip_norm,
            sigma=r.sigma,
            batch_size=r.batch_size,
            sampling=r.sampling,
            epochs=r.epochs,
            step_size=r.step_size,
            radius=r.radius,
            rng=run.rng,
            output=r.output,
            reporter=run.reporter,
        )[0]
        return theta

    def _noise_norm(self, r: ReSQueDPSGDResolved, meta: PublicMetadata) -> float:
        """The noise of T steps θ_{t+1} = Π(θ_t − η g_t): Σ_t η ξ_t/m_b, ξ_t ~ N(0, σ²I), of expected norm
        η σ √(T d)/m_b (exactly: :func:`~privfit.solvers.base.gradient_noise_norm`), capped at 2R by the
        projection. (With the default η = R/(G√T), G ≥ σ√d/m_b, this is at most about R.)"""
        dimension = r.d + int(r.fit_intercept)
        return gradient_noise_norm(r.sigma, r.batch_size, r.steps * r.step_size**2, dimension, r.radius)
