r"""``objective_perturbation``: minimise a randomly perturbed regularised ERM objective (pure ε or (ε, δ)).

Algorithms: Chaudhuri, Monteleoni & Sarwate, JMLR 2011 (CMS), Alg. 2 (pure ε, L2-Laplace noise); Kifer, Smith &
Thakurta, COLT 2012 (KST), Alg. 1/Thm 2 (Gaussian noise, (ε, δ)); with the approximate-minimum output step of
Iyengar, Near, Song, Thakkar, Thakurta & Wang, IEEE S&P 2019 (AMP, Alg. 1), since a numerical solver never
returns the exact minimiser the first two proofs assume. With the design rows x_i (‖x_i‖ ≤ B, a trailing 1
for the intercept), a GLM loss ℓ(θ; x, y) = φ(⟨θ, x⟩, y) with |φ'| ≤ a (G = a·B) and 0 ≤ φ'' ≤ c
(smoothness β = c·B²), and public λ > 0:

    b ~ N(0, σ_b² I_d)  [gaussian]   or   density ∝ exp(−ε_b ‖b‖ / (2G))  [laplace],                      (1)
    θ_b = argmin_{θ ∈ R^d}  J(θ) = (1/n) Σ_i ℓ(θ; x_i, y_i) + (λ/2)‖θ‖² + (1/n)⟨b, θ⟩,                     (2)
    release  θ̂ + v,  ‖∇J(θ̂)‖ ≤ γ (certified),  v ~ N(0, σ_out² I) [gaussian]  or  ∝ exp(−ε_out‖v‖/Δ_out).  (3)

**Privacy of θ_b** (CMS Thm 9 / KST Thm 2, replace-one). J is λ-strongly convex and smooth, so (2) has a unique
minimiser, and the first-order condition b = −Σ_i ∇ℓ(θ_b; z_i) − nλθ_b makes b ↦ θ_b a bijection of R^d with
Jacobian A_D(θ) = Σ_i φ''_i x_i x_iᵀ + nλI. The density of θ_b at θ is p_D(θ) = ν(b_D(θ))·|det A_D(θ)|.
Replacing z_k by z'_k:

* *Jacobian part.* A_D and A_D' differ by a rank-one term each side of M = Σ_{i≠k} φ''_i x_i x_iᵀ + nλI ⪰ nλI;
  by the matrix determinant lemma det A_D/det A_D' = (1 + φ''_k x_kᵀM⁻¹x_k)/(1 + φ''_k' x'_kᵀM⁻¹x'_k), which
  lies within [1/(1 + cB²/(nλ)), 1 + cB²/(nλ)]. privfit charges CMS's (larger) bound

      ε_J = 2 log(1 + cB²/(nλ))            (CMS Alg. 2: ε' = ε − log(1 + 2c/(nλ) + c²/(n²λ²)) at B = 1). (4)

* *Noise part.* b_D'(θ) = b_D(θ) + u(θ) with u = ∇ℓ(θ; z_k) − ∇ℓ(θ; z'_k), ‖u‖ ≤ 2G. For the L2-Laplace
  density of (1) the ratio is ≤ e^{ε_b} (CMS). For the Gaussian, log ν(b)/ν(b + u) = (2⟨b, u⟩ + ‖u‖²)/(2σ_b²),
  and for a GLM u = φ'_k x_k − φ'_k' x'_k lies in the FIXED plane S = span(x_k, x'_k) (KST's rank argument), so
  ⟨b, u⟩ ≤ 2G‖P_S b‖ with ‖P_S b‖/σ_b distributed as χ with ≤ 2 degrees of freedom. Taking the moment
  generating function of that χ instead of its tail gives a Rényi-DP curve without any δ
  (:func:`~privfit.privacy.objective_perturbation_rdp`, which states and proves it):

      ε(α) = log(1 + cB²/(nλ)) + r²/2 + log M((α − 1) r)/(α − 1),   r = 2G/σ_b,  M(t) = E e^{tχ₂}.      (5)

So θ_b is (ε_J + ε_b)-DP (laplace) or has the RDP curve (5) (gaussian). (Until formula v2 the Gaussian variant
was charged as (ε_J + ε_b, δ_b)-DP with AMP's σ_b = 2G(1 + sqrt(2 log(1/δ_b)))/ε_b and δ_b = δ/2 of the dataset's
δ pot: every fit spent half of what was left of it, so a dataset admitted few such fits whatever its ε budget.)
The loss must be twice differentiable almost everywhere with bounded φ'' (the change of variables holds for the
Lipschitz map b(θ)) and globally Lipschitz: logistic, Huber and the smoothed hinge qualify; the squared loss is
NOT globally Lipschitz (‖u‖ is unbounded over R^d) and is refused — use ``output_perturbation``, ``dp_gd`` or
``dp_sgd`` for it.

**The approximate minimiser** (AMP's output step, with a conservative sensitivity). Given θ_b = t, the noise is
determined, b = −Σ_i∇ℓ(t; z_i) − nλt, so the solver's output θ̂ = g(D, t) is a function of (D, t) with
‖g(D, t) − t‖ ≤ γ/λ (strong convexity of J). For fixed t, D ↦ g(D, t) therefore has L2 sensitivity
Δ_out = 2γ/λ, and (3) adds noise calibrated to it: an adaptive composition of θ_b's mechanism with a Gaussian
(or L2-Laplace, ε_out-DP) mechanism, of which only the second output is released (post-processing).
(AMP's code uses nγ/Λ in its 1/n-normalised objective, i.e. γ/λ here: privfit's 2γ/λ is the conservative
triangle-inequality bound.) γ is tiny (default max(1e-9·G, its public floor): 1.6e-8 on Adult), so this noise is
small.

**Cost** (:meth:`ObjectivePerturbation.cost`):
* laplace: ``pure_dp_rdp(ε_J + ε_b) + pure_dp_rdp(ε_out)`` — pure DP, no δ;
* gaussian: the curve (5) ``+ gaussian_rdp(σ_out, Δ_out)`` — an RDP curve, no δ part.

**Data-independent observables** (DESIGN §4; issue 18). After b is drawn (d normals, or d normals and one
Gamma variate), θ̂ comes from :mod:`privfit.solvers.baselines.erm`, which **runs a public number of iterations**: N =
``minimiser_steps`` accelerated gradient steps from θ₀ = −b/(nλ), N from (β, λ, Δ₀ = G²/(2λ), γ) only (erm,
eq. (4); ‖∇J(θ₀)‖ ≤ G whatever b is, so N depends neither on the rows nor on the noise); then one output noise
draw. Progress, stop polls and random draws are therefore the same on every dataset. γ is at least the public
floor ``gradient_tolerance_floor`` (erm; a smaller request is refused at resolve time), so in exact arithmetic
the certificate ‖∇J(θ̂)‖ ≤ γ holds for every dataset within the declared bounds and every b. **Guard** for the
case that proof excludes (a floating-point failure of the certificate): the release is 0 + v with the same
output noise v — data-independent, with the same status, progress and metadata as a success.

**Continuous noise only** (issue 25). The proof above is a change of variables b ↦ θ_b: it needs b to have a
density. Lattice-valued b (the exact samplers of :mod:`privfit.privacy.noise`) would make θ_b take countably
many values, and a value reachable from D need not be reachable from D' — P(θ_b = θ | D) > 0 = P(θ_b = θ | D'), an
infinite privacy loss. A server whose sampler is ``exact`` therefore refuses this solver at resolve time
(:data:`EXACT_SAMPLER_REFUSAL`, on the ``solver`` field); with ``float`` its draws are numpy's, and the fit's
metadata says so whatever the server's sampler when it runs.

**Calibration** to a target (ε, δ). Laplace: ε_out = 1% of the target (AMP's split); ε_J + ε_b is the largest
pure ε whose composition with the output part converts to ≤ the target at δ; λ (default: the larger of the λ
that keeps ε_J ≤ (ε_J + ε_b)/2, CMS's choice when it adds regularisation, and the bias–noise balance of
:func:`~privfit.solvers.baselines.perturbation.default_l2_second_order`) fixes ε_J by (4), and ε_b is the rest.
Gaussian: σ_out gets 1% of the target's zCDP ρ (:func:`output_noise_multiplier`); λ defaults to the larger of
the λ that keeps the Jacobian constant log(1 + cB²/(nλ)) ≤ ε/8 and the same bias–noise balance (evaluated at
the σ_b calibrated for that minimum λ); then σ_b is the smallest noise (:func:`~privfit.privacy.calibrate_noise`)
whose curve (5) composed with the output step converts to ≤ the target at δ. A user λ too small to leave room
for the noise is refused with the minimum λ in the message.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from privfit.privacy import (
    OrderGrid,
    PrivacyCost,
    PrivacyParameterError,
    calibrate_noise,
    gaussian_rdp,
    objective_perturbation_rdp,
    pure_dp_rdp,
    pure_epsilon_for_target,
)
from privfit.privacy.noise import describe_sampler
from privfit.solvers.availability import suggested_solvers
from privfit.solvers.base import (
    FitRun,
    FloatArray,
    GLMResolved,
    PrivacyRequest,
    PublicMetadata,
    Release,
    Solver,
    SolverParameterError,
    SolverParams,
    design_bound,
    glm_loss,
    glm_resolved_fields,
    require_float_sampler,
)
from privfit.solvers.baselines.erm import Minimiser, MinimiserProblem
from privfit.solvers.baselines.perturbation import (
    MINIMISER_BEFORE_ISSUE_40,
    MINIMISER_DESCRIPTION,
    OUTPUT_SHARE,
    NoiseKind,
    PerturbationParams,
    default_l2_second_order,
    expected_noise_norm,
    noise_norm_quantile,
    resolve_gradient_tolerance,
    sample_noise,
    solve_certified,
)
from privfit.solvers.losses import make_loss

__all__ = [
    "EXACT_SAMPLER_REFUSAL",
    "ObjectivePerturbation",
    "ObjectivePerturbationParams",
    "ObjectivePerturbationResolved",
    "gaussian_objective_cost",
    "jacobian_epsilon",
    "minimum_l2",
    "objective_minimiser_problem",
    "output_noise_multiplier",
]


#: Why a server with the exact sampler refuses objective perturbation (module docstring, "Continuous noise only";
#: :func:`~privfit.solvers.base.require_float_sampler` words the refusal).
EXACT_SAMPLER_REFUSAL = (
    "needs noise with a continuous density (its privacy proof is a change of variables in the noise, which lattice "
    "noise breaks; output_perturbation and dp_gd take exact noise)"
)


class ObjectivePerturbationParams(PerturbationParams):
    """Parameters of ``objective_perturbation`` (all optional; a target ε and δ are required)."""

    model: Literal["logistic", "huber", "svm"] = Field(
        "logistic",
        description="GLM loss with bounded φ' and φ'' (objective perturbation's conditions): 'logistic', "
        "'huber' or 'svm' (smoothed hinge). The squared loss is not globally Lipschitz: use "
        "output_perturbation, dp_gd or dp_sgd for linear regression.",
    )


class ObjectivePerturbationResolved(GLMResolved):
    """Fully resolved ``objective_perturbation`` settings (public, data-independent)."""

    solver: Literal["objective_perturbation"] = "objective_perturbation"
    formula_version: Literal["objective_perturbation/cms-kst-amp-rdp/v2"] = "objective_perturbation/cms-kst-amp-rdp/v2"
    l2: float = Field(gt=0.0, description="λ of the objective (2).")
    lipschitz: float = Field(gt=0.0, description="G = a·B: global gradient bound of the loss.")
    curvature_bound: float = Field(gt=0.0, description="c: bound on φ''.")
    smoothness: float = Field(gt=0.0, description="β = c·B².")
    noise: NoiseKind
    jacobian_epsilon: float = Field(
        ge=0.0,
        description="laplace: ε_J = 2 log(1 + cB²/(nλ)), eq. (4); gaussian: the constant log(1 + cB²/(nλ)) of (5).",
    )
    noise_epsilon: float = Field(
        gt=0.0, description="laplace: ε_b of the objective noise; gaussian: 2G/σ_b (r of eq. (5))."
    )
    objective_noise_scale: float = Field(gt=0.0, description="σ_b (eq. (5)) or the L2-Laplace scale 2G/ε_b.")
    gradient_tolerance: float = Field(gt=0.0, description="γ: certified ‖∇J(θ̂)‖ bound.")
    gradient_tolerance_floor: float = Field(gt=0.0, description="The public floor on γ (erm module docstring).")
    minimiser_steps: int = Field(ge=1, description="N: accelerated gradient steps of the minimiser (public).")
    minimiser: Minimiser = Field(MINIMISER_BEFORE_ISSUE_40, description=MINIMISER_DESCRIPTION)
    output_sensitivity: float = Field(gt=0.0, description="Δ_out = 2γ/λ.")
    output_noise_scale: float = Field(gt=0.0, description="σ_out (gaussian) or Δ_out/ε_out (laplace).")
    output_epsilon: float | None = Field(None, description="ε_out of the laplace output noise (None: gaussian).")


def jacobian_epsilon(curvature_bound: float, design_norm_bound: float, n: int, l2: float) -> float:
    """ε_J = 2 log(1 + cB²/(nλ)), eq. (4) (CMS 2011, Alg. 2, step 1, with ‖x‖ ≤ B)."""
    return 2.0 * math.log1p(curvature_bound * design_norm_bound**2 / (n * l2))


def minimum_l2(curvature_bound: float, design_norm_bound: float, n: int, jacobian_budget: float) -> float:
    """The λ at which ε_J equals ``jacobian_budget``: cB²/(n(e^{budget/2} − 1)) (CMS 2011, Alg. 2, step 2)."""
    return curvature_bound * design_norm_bound**2 / (n * math.expm1(jacobian_budget / 2.0))


def output_noise_multiplier(target_epsilon: float, delta: float) -> float:
    """σ_out/Δ_out of the Gaussian output step: 1% (``OUTPUT_SHARE``) of the zCDP ρ of the target.

    ρ = (sqrt(log(1/δ) + ε) − sqrt(log(1/δ)))² is the ρ whose conversion ρ + 2 sqrt(ρ log(1/δ)) equals ε
    (Bun & Steinke 2016, Prop. 1.3); a Gaussian of noise multiplier z is 1/(2z²)-zCDP, so z = 1/sqrt(2·0.01·ρ).
    (A Gaussian calibrated to 1% of ε itself would need an enormous z: the RDP conversion of a tiny ε is
    dominated by log(1/δ)/(α − 1).) The exact cost of this step enters the calibration of ε_J + ε_b.
    """
    log_inverse_delta = math.log(1.0 / delta)
    rho = (math.sqrt(log_inverse_delta + target_epsilon) - math.sqrt(log_inverse_delta)) ** 2
    return 1.0 / math.sqrt(2.0 * OUTPUT_SHARE * rho)


def objective_minimiser_problem(
    model: str,
    loss_params: Mapping[str, float],
    n: int,
    dimension: int,
    l2: float,
    design_norm_bound: float,
    label_bound: float,
    noise: NoiseKind,
    objective_noise_scale: float,
    method: Minimiser | None = None,
) -> MinimiserProblem:
    """The public description of (2) for :mod:`privfit.solvers.baselines.erm`: start θ₀ = −b/(nλ), where ‖∇J(θ₀)‖ ≤ G
    whatever b is (the loss is globally Lipschitz), and ‖b‖ bounded at a public 1 − 2⁻⁴⁰ quantile for the floor;
    ``method`` the iteration (None: erm's public rule)."""
    return MinimiserProblem(
        n=n, dimension=dimension, loss=make_loss(model, **loss_params), l2=l2, design_norm_bound=design_norm_bound,
        label_bound=label_bound, linear_term_norm_bound=noise_norm_quantile(noise, dimension, objective_noise_scale),
        method=method,
    )  # fmt: skip


def gaussian_objective_cost(noise_multiplier: float, jacobian_ratio: float, output: PrivacyCost) -> PrivacyCost:
    """Curve (5) of θ_b for σ_b = ``noise_multiplier``·2G and κ = cB²/(nλ), composed with the output step."""
    curve = objective_perturbation_rdp(output.grid, noise_multiplier=noise_multiplier, jacobian_ratio=jacobian_ratio)
    return PrivacyCost(curve, output.grid) + output


class ObjectivePerturbation(Solver[ObjectivePerturbationParams, ObjectivePerturbationResolved]):
    """Objective perturbation (CMS 2011 pure ε; KST 2012 Gaussian) with AMP's approximate-minimum step."""

    description: ClassVar[str] = (
        "Objective perturbation (Chaudhuri et al. 2011; Kifer et al. 2012): minimise the L2-regularised ERM "
        "objective plus a random linear term ⟨b, θ⟩/n (Gaussian for (ε, δ), L2-Laplace for pure ε), to a "
        "certified gradient norm, then add the small output noise of Iyengar et al. 2019 that covers the "
        "approximate minimiser. Smooth, Lipschitz losses only (logistic, huber, svm); needs λ > 0."
    )
    target_required: ClassVar[str] = "objective perturbation is calibrated to a target: give both epsilon and delta"
    float_sampler_only: ClassVar[str | None] = EXACT_SAMPLER_REFUSAL

    def parse_params(self, params: Mapping[str, Any] | SolverParams | None = None) -> ObjectivePerturbationParams:
        """As :meth:`Solver.parse_params`; the squared loss gets a message naming the solvers that take it (those
        this server runs: :func:`~privfit.solvers.availability.suggested_solvers`)."""
        if isinstance(params, Mapping) and params.get("model") == "linear":
            raise SolverParameterError(
                "model",
                "objective perturbation needs a globally Lipschitz loss and the squared loss ('linear') is not; use "
                f"{suggested_solvers('linear')} for linear regression",
            )
        return super().parse_params(params)

    def _resolve(
        self, p: ObjectivePerturbationParams, meta: PublicMetadata, privacy: PrivacyRequest
    ) -> ObjectivePerturbationResolved:
        """The ε split (laplace) or the σ_b calibration (gaussian) of the module docstring, λ, and the noise
        scales, from public inputs only. Refused under the exact sampler (module docstring)."""
        require_float_sampler(self)
        target_epsilon, delta = privacy.required_target()
        grid = privacy.grid
        loss = glm_loss(p)
        bound = design_bound(meta, p.fit_intercept)
        dimension = meta.d + int(p.fit_intercept)
        lipschitz = loss.lipschitz(bound, meta.label_bound)
        curvature = loss.second_derivative_bound()

        if p.noise == "gaussian":
            # The output step, a noise per unit sensitivity (independent of λ): 1% of the target's zCDP ρ.
            output_multiplier = output_noise_multiplier(target_epsilon, delta)
            output = PrivacyCost(gaussian_rdp(grid, sigma=output_multiplier), grid)

            def calibrated(l2: float) -> float:  # σ_b/(2G) for this λ
                kappa = curvature * bound**2 / (meta.n * l2)
                return calibrate_noise(
                    lambda z: gaussian_objective_cost(z, kappa, output), target_epsilon=target_epsilon,
                    delta=delta, parameter="the objective noise",
                ).noise  # fmt: skip

            # log(1 + κ) ≤ ε/8 ⟺ 2·log(1 + κ) ≤ ε/4: the constant stays small beside the noise's curve, whose
            # shape is then close to a Gaussian's, so a dataset's privacy filter (orders pinned for Gaussian
            # compositions) measures the fit at about its own ε (at J ≤ ε/2 an svm fit of ε = 0.8 measured 1.03).
            minimum = minimum_l2(curvature, bound, meta.n, target_epsilon / 4.0)
            if p.l2 is None:
                # The bias–noise balance at the σ_b of the minimum λ (a larger λ only lowers σ_b).
                expected_b_norm = 2.0 * lipschitz * calibrated(minimum) * math.sqrt(dimension)
                l2 = max(minimum, default_l2_second_order(expected_b_norm / meta.n, p.effective_radius()))
            else:
                l2 = p.l2
            jacobian = math.log1p(curvature * bound**2 / (meta.n * l2))
            too_small = _l2_too_small(l2, target_epsilon, meta.n, f"log(1 + c·B²/(n·l2)) = {jacobian:.4g}", minimum)
            if not jacobian < target_epsilon:
                raise too_small
            try:
                multiplier = calibrated(l2)
            except PrivacyParameterError as error:
                raise too_small from error
            objective_scale = 2.0 * lipschitz * multiplier
            noise_epsilon = 1.0 / multiplier
        else:
            output_epsilon = OUTPUT_SHARE * target_epsilon
            output_multiplier = 1.0 / output_epsilon
            objective_epsilon = pure_epsilon_for_target(
                target_epsilon, delta, grid, PrivacyCost(pure_dp_rdp(grid, epsilon=output_epsilon), grid)
            )
            if p.l2 is None:
                half = objective_epsilon / 2.0
                expected_b_norm = dimension * 2.0 * lipschitz / half
                l2 = max(
                    minimum_l2(curvature, bound, meta.n, half),
                    default_l2_second_order(expected_b_norm / meta.n, p.effective_radius()),
                )
            else:
                l2 = p.l2
            jacobian = jacobian_epsilon(curvature, bound, meta.n, l2)
            noise_epsilon = objective_epsilon - jacobian
            if not noise_epsilon > 0.0:
                recommended = minimum_l2(curvature, bound, meta.n, objective_epsilon / 2.0)
                term = f"2·log(1 + c·B²/(n·l2)) = {jacobian:.4g}"
                raise _l2_too_small(l2, target_epsilon, meta.n, term, recommended)
            objective_scale = 2.0 * lipschitz / noise_epsilon
        problem = objective_minimiser_problem(
            p.model, p.loss_params(), meta.n, dimension, l2, bound, meta.label_bound, p.noise, objective_scale
        )
        tolerance, floor, steps = resolve_gradient_tolerance(p.gradient_tolerance, problem, lipschitz)
        output_sensitivity = 2.0 * tolerance / l2
        return ObjectivePerturbationResolved(
            **glm_resolved_fields(p, meta, privacy),
            l2=l2,
            lipschitz=lipschitz,
            curvature_bound=curvature,
            smoothness=loss.smoothness(bound),
            noise=p.noise,
            jacobian_epsilon=jacobian,
            noise_epsilon=noise_epsilon,
            objective_noise_scale=objective_scale,
            gradient_tolerance=tolerance,
            gradient_tolerance_floor=floor,
            minimiser_steps=steps,
            minimiser=problem.method,
            output_sensitivity=output_sensitivity,
            output_noise_scale=output_multiplier * output_sensitivity,
            output_epsilon=None if p.noise == "gaussian" else 1.0 / output_multiplier,
        )

    def _cost(self, r: ObjectivePerturbationResolved, meta: PublicMetadata, grid: OrderGrid) -> PrivacyCost:
        """The curve of the module docstring: θ_b's pure ε_J + ε_b (with δ_b for the Gaussian) plus the output
        step (Gaussian RDP of sensitivity Δ_out, or pure ε_out); reads no row."""
        if r.noise == "gaussian":
            output = PrivacyCost(gaussian_rdp(grid, sigma=r.output_noise_scale, sensitivity=r.output_sensitivity), grid)
            kappa = r.curvature_bound * r.design_norm_bound**2 / (r.n * r.l2)
            return gaussian_objective_cost(r.objective_noise_scale / (2.0 * r.lipschitz), kappa, output)
        objective = PrivacyCost.pure_dp(r.jacobian_epsilon + r.noise_epsilon, grid)
        return objective + PrivacyCost.pure_dp(r.output_sensitivity / r.output_noise_scale, grid)

    def _progress_steps(self, r: ObjectivePerturbationResolved) -> int:
        return r.minimiser_steps + 1

    def _noise_norm(self, r: ObjectivePerturbationResolved, meta: PublicMetadata) -> float:
        """E‖b‖/(nλ) + E‖v‖: the shift of the minimiser of (2) by the linear term plus the output noise of (3).

        J_b = J_0 + ⟨b, ·⟩/n is λ-strongly convex and ∇J_0(θ_b) = −b/n at its minimiser θ_b, so strong convexity
        gives λ‖θ_b − θ_0‖² ≤ ⟨∇J_0(θ_b) − ∇J_0(θ_0), θ_b − θ_0⟩ ≤ ‖b‖‖θ_b − θ_0‖/n, i.e. ‖θ_b − θ_0‖ ≤ ‖b‖/(nλ)
        (an upper bound: the loss's own curvature only shrinks the shift). The expectations are exact
        (:func:`~privfit.solvers.baselines.perturbation.expected_noise_norm`); the release is not projected."""
        dimension = r.d + int(r.fit_intercept)
        shift = expected_noise_norm(r.noise, dimension, r.objective_noise_scale) / (r.n * r.l2)
        return shift + expected_noise_norm(r.noise, dimension, r.output_noise_scale)

    def _outlook_radius(self, r: ObjectivePerturbationResolved) -> float:
        """R* = sqrt(2 ℓ_max(0)/λ): (λ/2)‖θ_0‖² ≤ J_0(θ_0) ≤ J_0(0) ≤ ℓ_max(0) bounds the unperturbed minimiser."""
        return math.sqrt(2.0 * make_loss(r.model, **r.loss_params).max_loss_at_zero(r.label_bound) / r.l2)

    def _fit(self, run: FitRun, r: ObjectivePerturbationResolved) -> Release:
        """Draw b, N public steps towards the minimiser of (2), the certificate, release θ̂ + output noise (3)
        (or, if the certificate failed, 0 + the same output noise: the guard of the module docstring). The draws are
        numpy's (continuous noise only): the metadata names the float sampler."""
        dimension = run.X.shape[1]
        problem = objective_minimiser_problem(
            r.model, r.loss_params, r.n, dimension, r.l2, r.design_norm_bound, r.label_bound, r.noise,
            r.objective_noise_scale, r.minimiser,
        )  # fmt: skip
        b = sample_noise(r.noise, dimension, r.objective_noise_scale, run.rng)[0]
        solution = solve_certified(
            run.X, run.y, problem, r, run.reporter, linear_term=b, one_hot_blocks=run.meta.one_hot_blocks
        )
        centre = solution.theta if solution.certified else np.zeros(dimension)
        theta: FloatArray = centre + sample_noise(r.noise, dimension, r.output_noise_scale, run.rng)[0]
        return Release(theta, metadata={"noise_sampler": describe_sampler("float")})


def _l2_too_small(l2: float, target_epsilon: float, n: int, term: str, recommended: float) -> SolverParameterError:
    return SolverParameterError(
        "l2",
        f"l2 = {l2:g} is too small for objective perturbation at epsilon = {target_epsilon:g} with n = {n}: the "
        f"Jacobian term {term} leaves no room for the noise; use l2 ≥ {recommended:.4g} (the default's minimum) "
        "or omit l2",
    )
