r"""``output_perturbation``: the regularised ERM minimiser plus noise calibrated to its sensitivity.

Algorithm (Chaudhuri, Monteleoni & Sarwate, "Differentially Private Empirical Risk Minimization", JMLR 2011,
Alg. 1 "output perturbation"; Gaussian form as in Wu et al., SIGMOD 2017). With the design matrix rows x_i
(a trailing 1 for the intercept), the GLM loss ℓ(θ; x, y) = φ(⟨θ, x⟩, y) and public λ > 0,

    F_D(θ) = (1/n) Σ_i ℓ(θ; x_i, y_i) + (λ/2)‖θ‖²,      θ* = argmin_{θ ∈ R^d} F_D(θ),                   (1)
    release  Π_{R*}(θ̂ + v),    v ~ N(0, σ² I_d)  or  density ∝ exp(−ε‖v‖/Δ),                           (2)

where θ̂ is the solver's approximation of θ* (:func:`~privfit.solvers.baselines.erm.minimize_regularized_glm`, certified
‖∇F_D(θ̂)‖ ≤ γ) and Π_{R*} the projection onto the ball of radius R* = sqrt(2 ℓ_max(0)/λ), which contains θ*
(``RegularizedLoss.minimizer_radius``) — post-processing.

**Sensitivity** (replace-one; CMS 2011, Cor. 8, with the approximate minimiser). Let D, D' differ in row k
and θ₁ = θ*(D), θ₂ = θ*(D'). F_D is λ-strongly convex, so λ‖θ₁ − θ₂‖² ≤ ⟨∇F_D(θ₂) − ∇F_D(θ₁), θ₂ − θ₁⟩,
with ∇F_D(θ₁) = 0 and ∇F_D(θ₂) = ∇F_D(θ₂) − ∇F_D'(θ₂) = (1/n)(∇ℓ(θ₂; z_k) − ∇ℓ(θ₂; z'_k)). Hence

    ‖θ*(D) − θ*(D')‖ ≤ 2G/(nλ),   G = sup_{‖θ‖ ≤ R*} ‖∇ℓ(θ; z)‖ = ``loss.lipschitz(B, B_y, R*)``.     (3)

(Only gradients at minimisers enter, and minimisers lie in the R* ball, so the squared loss — Lipschitz only on
bounded sets — is covered too.) λ-strong convexity also gives ‖θ̂ − θ*‖ ≤ ‖∇F(θ̂)‖/λ ≤ γ/λ for the released
approximation, so by the triangle inequality θ̂ itself, a deterministic function of the data, has sensitivity

    Δ = 2G/(nλ) + 2γ/λ.                                                                                  (4)

The Gaussian release is the Gaussian mechanism of L2 sensitivity Δ: (α, αΔ²/(2σ²))-RDP (Mironov 2017) and
exactly (Δ/σ)-GDP (Dong, Roth & Su 2022); the L2-Laplace release is ε-DP with ε = Δ/s (see
:mod:`privfit.solvers.baselines.perturbation`), whose tight RDP curve is :func:`~privfit.privacy.pure_dp_rdp`.
:meth:`OutputPerturbation.cost` returns exactly that curve (and, Gaussian, the GDP μ² = (Δ/σ)²).
Calibration: σ = :func:`~privfit.privacy.gdp_gaussian_sigma` with sensitivity Δ (the exact Gaussian curve, the σ
of a PLD accountant; :func:`~privfit.privacy.gaussian_sigma`'s RDP conversion before issue 40); the pure ε is the
largest one whose curve converts to ≤ the target at δ. An explicit ``noise_multiplier`` z gives σ = zΔ (gaussian) or
s = zΔ, ε = 1/z (laplace).

**The noise sampler** (:mod:`privfit.privacy.noise`, whose module docstring proves what follows). The resolution
records the sampler in force (``sampler``) and the fit draws with that sampler, so the fit is the mechanism that
was costed even when it runs later. ``float``: the draws above, from numpy. ``exact``: the Gaussian release is
the discrete Gaussian mechanism on the lattice 2^k·Z (:func:`~privfit.privacy.noise.gaussian_release`, L2
sensitivity Δ, public coordinate bound R* + γ/λ ≥ ‖θ̂‖); the noise module shows that the Gaussian curve charged
above holds for it. No exact lattice sampler of the L2-Laplace density exists, so ``laplace`` becomes the
product discrete Laplace on the lattice (:func:`~privfit.privacy.noise.laplace_release`) calibrated to the L1
sensitivity ‖θ̂(D) − θ̂(D')‖₁ ≤ √d·Δ: per-coordinate scale b = √d·Δ/ε, the same pure ε (the layer inflates
b by its rounding factor itself), charged as pure ε-DP. Its noise is larger: E‖v‖ ≤ √(E‖v‖²) = b√(2d) (up to the
lattice's inflation ≤ 1 + 2⁻²⁰), i.e. √2·d·Δ/ε against d·Δ/ε for the L2-Laplace vector.

Unlike gradient methods there is one noise draw, so the noise does not grow with an iteration count; but
it scales with 1/λ, so a stronger regulariser is needed than for DP-GD (default λ: module
:mod:`privfit.solvers.baselines.perturbation`).

**Data-independent observables** (DESIGN §4; issue 18). θ̂ comes from :mod:`privfit.solvers.baselines.erm`: this solver
**runs a public number of iterations** — N accelerated gradient steps from θ₀ = 0, N = ``minimiser_steps`` from
(β, λ, Δ₀ = min(ℓ_max(0), G₀²/(2λ)), γ) (erm, eq. (4)) — then one noise draw (d normals, or d normals and one
Gamma variate): the progress sequence, the stop polls and the random draws are the same on every dataset. γ is
at least the public floor (``gradient_tolerance_floor``; a smaller request is refused at resolve time), so in
exact arithmetic the certificate ‖∇F(θ̂)‖ ≤ γ holds for every dataset within the declared bounds. **Guard** for
the case that proof excludes (a floating-point failure of the certificate): the release is Π_{R*}(0 + v) with
the same v — the same noise around the public point 0, data-independent, with the same status, progress and
metadata as a success. Cost per fit: N passes over the rows, O(N·n·d), N a few hundred at the defaults on Adult.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import ClassVar, Literal

import numpy as np
from pydantic import Field

from privfit.privacy import OrderGrid, PrivacyCost, gdp_gaussian_sigma, pure_epsilon_for_target
from privfit.privacy.noise import (
    SamplerName,
    current_sampler,
    gaussian_releases,
    laplace_cost,
    laplace_releases,
    using_sampler,
)
from privfit.solvers.base import (
    FitRun,
    FloatArray,
    GLMResolved,
    PrivacyRequest,
    PublicMetadata,
    Solver,
    SolverParameterError,
    ball_capped,
    design_bound,
    glm_loss,
    glm_resolved_fields,
)
from privfit.solvers.baselines.erm import Minimiser, MinimiserProblem
from privfit.solvers.baselines.perturbation import (
    MINIMISER_BEFORE_ISSUE_40,
    MINIMISER_DESCRIPTION,
    NoiseKind,
    PerturbationParams,
    default_l2,
    expected_noise_norm,
    resolve_gradient_tolerance,
    sample_noise,
    solve_certified,
)
from privfit.solvers.geometry import clip_rows
from privfit.solvers.losses import RegularizedLoss, make_loss

__all__ = ["OutputPerturbation", "OutputPerturbationParams", "OutputPerturbationResolved", "perturb_output"]


class OutputPerturbationParams(PerturbationParams):
    """Parameters of ``output_perturbation`` (all optional)."""

    noise_multiplier: float | None = Field(
        None,
        gt=0.0,
        le=1e8,
        description="Explicit noise instead of a target ε, in units of the sensitivity Δ = 2G/(nλ) + 2γ/λ: "
        "σ = zΔ for 'gaussian' noise, s = zΔ (so ε = 1/z) for 'laplace'.",
    )


class OutputPerturbationResolved(GLMResolved):
    """Fully resolved ``output_perturbation`` settings (public, data-independent)."""

    solver: Literal["output_perturbation"] = "output_perturbation"
    formula_version: Literal["output_perturbation/sensitivity-2G-over-n-lambda/v1"] = (
        "output_perturbation/sensitivity-2G-over-n-lambda/v1"
    )
    l2: float = Field(gt=0.0, description="λ of the objective (1).")
    minimizer_radius: float = Field(gt=0.0, description="R* = sqrt(2 ℓ_max(0)/λ): θ* lies in this ball.")
    lipschitz: float = Field(gt=0.0, description="G: gradient bound of the loss on the R* ball.")
    smoothness: float = Field(ge=0.0, description="c·B² of the unregularised loss (rounding bound).")
    gradient_tolerance: float = Field(gt=0.0, description="γ: certified ‖∇F(θ̂)‖ bound.")
    gradient_tolerance_floor: float = Field(gt=0.0, description="The public floor on γ (erm module docstring).")
    minimiser_steps: int = Field(ge=1, description="N: accelerated gradient steps of the minimiser (public).")
    minimiser: Minimiser = Field(MINIMISER_BEFORE_ISSUE_40, description=MINIMISER_DESCRIPTION)
    sensitivity: float = Field(gt=0.0, description="Δ = 2G/(nλ) + 2γ/λ, eq. (4).")
    noise: NoiseKind
    noise_scale: float = Field(
        gt=0.0,
        description="σ (gaussian), s of the L2-Laplace vector (laplace, float sampler) or b of each coordinate's "
        "discrete Laplace (laplace, exact sampler) of the output noise.",
    )
    noise_multiplier: float = Field(
        gt=0.0, description="noise_scale / Δ (gaussian; laplace with the float sampler) or noise_scale / (√d·Δ)."
    )
    pure_epsilon: float | None = Field(
        None, description="ε = 1/noise_multiplier of a laplace release (None: Gaussian)."
    )
    sampler: SamplerName = Field(
        "float",
        description="The noise sampler this fit was resolved and charged for (privfit.privacy.noise); the fit draws "
        "with it. Settings stored before the sampler existed drew with 'float'.",
    )

    def laplace_l1_sensitivity(self) -> float:
        """√d·Δ: the L1 sensitivity of θ̂ (‖u‖₁ ≤ √d‖u‖₂), to which the exact sampler's discrete Laplace is
        calibrated."""
        return math.sqrt(self.d + int(self.fit_intercept)) * self.sensitivity


def output_minimiser_problem(
    model: str,
    loss_params: Mapping[str, float],
    n: int,
    dimension: int,
    l2: float,
    design_norm_bound: float,
    label_bound: float,
    minimizer_radius: float,
    method: Minimiser | None = None,
) -> MinimiserProblem:
    """The public description of (1) for :mod:`privfit.solvers.baselines.erm`: start θ₀ = 0, θ* in the R* ball, and
    the gap F(0) − F* ≤ ℓ_max(0) (φ ≥ 0); ``method`` the iteration (None: erm's public rule)."""
    loss = make_loss(model, **loss_params)
    return MinimiserProblem(
        n=n, dimension=dimension, loss=loss, l2=l2, design_norm_bound=design_norm_bound, label_bound=label_bound,
        minimizer_norm_bound=minimizer_radius, initial_gap_bound=loss.max_loss_at_zero(label_bound), method=method,
    )  # fmt: skip


def perturb_output(
    theta_hat: np.ndarray, resolved: OutputPerturbationResolved, rng: np.random.Generator, runs: int = 1
) -> np.ndarray:
    """Release (2): ``runs`` independent draws of Π_{R*}(θ̂ + v), shape (runs, d) (runs > 1: audits), with the
    resolved sampler (``resolved.sampler``; module docstring). Gaussian: :func:`~privfit.privacy.noise.
    gaussian_releases` (float: θ̂ + σ·N(0, I), the draws made before the noise layer). Laplace: the L2-Laplace
    vector (float) or the product discrete Laplace of L1 sensitivity √d·Δ (exact)."""
    dimension = theta_hat.shape[-1]
    values = np.broadcast_to(np.asarray(theta_hat, dtype=np.float64), (runs, dimension))
    # A public bound on every coordinate of θ̂: ‖θ*‖ ≤ R* and ‖θ̂ − θ*‖ ≤ γ/λ (the layer clips to it: a contraction).
    bound = resolved.minimizer_radius + resolved.gradient_tolerance / resolved.l2
    with using_sampler(resolved.sampler):
        if resolved.noise == "gaussian":
            stream = gaussian_releases(
                rng, sigma=resolved.noise_scale, l2_sensitivity=resolved.sensitivity, shape=(runs, dimension),
                count=1, bound=bound,
            )  # fmt: skip
            noisy = stream.release(values)
        elif resolved.sampler == "float":
            noisy = values + sample_noise(resolved.noise, dimension, resolved.noise_scale, rng, runs)
        else:
            stream = laplace_releases(
                rng, scale=resolved.noise_scale, l1_sensitivity=resolved.laplace_l1_sensitivity(),
                shape=(runs, dimension), count=1, bound=bound,
            )  # fmt: skip
            noisy = stream.release(values)
    return clip_rows(noisy, resolved.minimizer_radius)


class OutputPerturbation(Solver[OutputPerturbationParams, OutputPerturbationResolved]):
    """Output perturbation (Chaudhuri et al. 2011, Alg. 1): regularised minimiser + calibrated noise."""

    description: ClassVar[str] = (
        "Output perturbation (Chaudhuri et al. 2011): the L2-regularised ERM minimiser, solved to a certified "
        "gradient norm γ, plus one Gaussian (or pure-ε L2-Laplace) noise vector calibrated to its replace-one "
        "sensitivity 2G/(nλ) + 2γ/λ. One noise draw, no iterations to pay for; needs λ > 0 (default chosen "
        "from public constants). The minimiser runs a public number of accelerated gradient steps; γ has a public "
        "floor."
    )
    explicit_noise: ClassVar[str | None] = "noise_multiplier"

    def _resolve(
        self, p: OutputPerturbationParams, meta: PublicMetadata, privacy: PrivacyRequest
    ) -> OutputPerturbationResolved:
        """λ, R*, G, γ, Δ from public inputs; the noise calibrated to the target or explicit."""
        loss = glm_loss(p)
        bound = design_bound(meta, p.fit_intercept)
        dimension = meta.d + int(p.fit_intercept)

        # Noise per unit sensitivity: z = σ/Δ (gaussian) or s/Δ = 1/ε (laplace); independent of λ.
        sampler = current_sampler()
        if privacy.target is None:
            multiplier = privacy.explicit()
        elif p.noise == "gaussian":
            # calibrated on the exact Gaussian curve (GDP; :func:`~privfit.privacy.gdp_gaussian_sigma`)
            multiplier = gdp_gaussian_sigma(
                *privacy.target, sensitivity=1.0, coordinates=dimension, grid=privacy.grid
            ).noise
        else:
            multiplier = 1.0 / pure_epsilon_for_target(*privacy.target, privacy.grid)
        # Expected noise norm per unit sensitivity: z·sqrt(d) (gaussian), z·d (Gamma(d) radius; laplace, float) or
        # the bound z·√d·√(2d) of the product discrete Laplace (laplace, exact; module docstring).
        norm_per_unit = multiplier * (math.sqrt(dimension) if p.noise == "gaussian" else dimension)
        if p.noise == "laplace" and sampler == "exact":
            norm_per_unit *= math.sqrt(2.0)
        heuristic_lipschitz = loss.lipschitz(bound, meta.label_bound, p.effective_radius())
        l2 = p.effective_l2(
            default_l2(heuristic_lipschitz, norm_per_unit * 2.0 * heuristic_lipschitz / meta.n, p.effective_radius())
        )
        regularized = RegularizedLoss(make_loss(p.model, **p.loss_params()), l2)
        minimizer_radius = regularized.minimizer_radius(meta.label_bound)
        lipschitz = loss.lipschitz(bound, meta.label_bound, minimizer_radius)
        if not (lipschitz > 0.0 and math.isfinite(lipschitz)):
            raise SolverParameterError("row_norm_bound", "gives a zero or infinite Lipschitz constant")
        problem = output_minimiser_problem(
            p.model, p.loss_params(), meta.n, dimension, l2, bound, meta.label_bound, minimizer_radius
        )
        tolerance, floor, steps = resolve_gradient_tolerance(p.gradient_tolerance, problem, lipschitz)
        sensitivity = 2.0 * lipschitz / (meta.n * l2) + 2.0 * tolerance / l2
        # The exact laplace release is calibrated to the L1 sensitivity √d·Δ: b = z·√d·Δ, still ε = 1/z.
        per_unit = math.sqrt(dimension) if p.noise == "laplace" and sampler == "exact" else 1.0
        return OutputPerturbationResolved(
            **glm_resolved_fields(p, meta, privacy),
            l2=l2,
            minimizer_radius=minimizer_radius,
            lipschitz=lipschitz,
            smoothness=loss.smoothness(bound),
            gradient_tolerance=tolerance,
            gradient_tolerance_floor=floor,
            minimiser_steps=steps,
            minimiser=problem.method,
            sensitivity=sensitivity,
            noise=p.noise,
            noise_scale=multiplier * per_unit * sensitivity,
            noise_multiplier=multiplier,
            pure_epsilon=None if p.noise == "gaussian" else 1.0 / multiplier,
            sampler=sampler,
        )

    def _cost(self, r: OutputPerturbationResolved, meta: PublicMetadata, grid: OrderGrid) -> PrivacyCost:
        """Gaussian: ``PrivacyCost.gaussian(σ, Δ)``, the curve ``gaussian_rdp(σ, Δ)`` and GDP μ = Δ/σ (both samplers:
        :mod:`privfit.privacy.noise`); laplace: ``pure_dp_rdp(Δ/s)``
        (eq. (4)), or with the exact sampler the pure-DP curve of the discrete Laplace, ε = √d·Δ/b
        (:func:`~privfit.privacy.noise.laplace_cost`); reads no row."""
        if r.noise == "gaussian":
            coordinates = r.d + int(r.fit_intercept)
            return PrivacyCost.gaussian(grid, sigma=r.noise_scale, sensitivity=r.sensitivity, coordinates=coordinates)
        if r.sampler == "exact":
            return laplace_cost(grid, scale=r.noise_scale, sensitivity=r.laplace_l1_sensitivity(), sampler="exact")
        return PrivacyCost.pure_dp(r.sensitivity / r.noise_scale, grid)

    def _progress_steps(self, r: OutputPerturbationResolved) -> int:
        return r.minimiser_steps + 1

    def _fit(self, run: FitRun, r: OutputPerturbationResolved) -> FloatArray:
        """N public steps towards (1), the certificate, the calibrated noise around θ̂ (or, if the certificate
        failed, around 0: the guard of the module docstring), the projection onto the R* ball; the noise from the
        resolved sampler, which the metadata names."""
        problem = output_minimiser_problem(
            r.model, r.loss_params, r.n, run.X.shape[1], r.l2, r.design_norm_bound, r.label_bound, r.minimizer_radius,
            r.minimiser,
        )  # fmt: skip
        solution = solve_certified(run.X, run.y, problem, r, run.reporter, one_hot_blocks=run.meta.one_hot_blocks)
        centre = solution.theta if solution.certified else np.zeros(run.X.shape[1])
        theta: FloatArray = perturb_output(centre, r, run.rng)[0]
        return theta

    def _noise_norm(self, r: OutputPerturbationResolved, meta: PublicMetadata) -> float:
        """E‖v‖ of the output noise of (2), exactly (:func:`~privfit.solvers.baselines.perturbation.
        expected_noise_norm`: σ√2·Γ((d + 1)/2)/Γ(d/2) for the Gaussian, d·s for the L2-Laplace vector) or, for the
        exact sampler's product discrete Laplace, its bound b√(2d) (module docstring), capped at 2R* (the release is
        projected onto the R* ball, which contains θ*: :func:`~privfit.solvers.base.ball_capped`)."""
        dimension = r.d + int(r.fit_intercept)
        if r.noise == "laplace" and r.sampler == "exact":
            return ball_capped(r.noise_scale * math.sqrt(2.0 * dimension), r.minimizer_radius)
        norm = expected_noise_norm(r.noise, dimension, r.noise_scale)
        return ball_capped(norm, r.minimizer_radius)

    def _outlook_radius(self, r: OutputPerturbationResolved) -> float:
        """R* = sqrt(2 ℓ_max(0)/λ), the public bound on ‖θ*‖ (the solver has no other ball)."""
        return r.minimizer_radius
