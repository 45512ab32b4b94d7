r"""Pieces shared by ``output_perturbation`` and ``objective_perturbation``: noise samplers, the shared
parameters, the public default λ and the pure-ε calibration.

**L2-Laplace ("Gamma") noise.** Chaudhuri, Monteleoni & Sarwate (JMLR 2011, Alg. 1 and 2) perturb with a
vector v ∈ R^d of density ∝ exp(−‖v‖₂ / s). In polar coordinates the density of ‖v‖ is ∝ r^{d−1} e^{−r/s}, a
Gamma(d, s) law, and the direction is uniform and independent, so v = r · g/‖g‖ with r ~ Gamma(d, s) and
g ~ N(0, I_d) (:func:`sample_l2_laplace`). If a map of the data moves by at most Δ in L2 between neighbours,
adding this noise with s = Δ/ε is ε-DP: the density ratio is exp((‖v + u‖ − ‖v‖)/s) ≤ exp(‖u‖/s) ≤ e^ε.
These are numpy's floating-point draws (the ``float`` sampler of :mod:`privfit.privacy.noise`): no exact lattice
sampler of this density exists, so under the ``exact`` sampler ``output_perturbation`` releases the product
discrete Laplace of the L1 sensitivity instead, and ``objective_perturbation``, whose proof needs a density, is
refused (their module docstrings).

**Default λ** (:func:`default_l2`). Both mechanisms move the non-private solution by a noise whose size
scales like K/λ (K: the expected noise norm at λ = 1, a public function of ε, δ, n, d and G), while the
regulariser biases the solution by an excess risk ≤ λR²/2 when the non-private solution has norm ≤ R. With a
G-Lipschitz loss the noise costs ≤ G·K/λ, and minimising λR²/2 + GK/λ gives λ = sqrt(2GK)/R. R is the
solver's public radius parameter (default 10 for classification, 1 for the squared loss), read as "the norm
a good model is expected to have". Objective perturbation perturbs the GRADIENT by b/n instead: its minimiser
θ_b satisfies F(θ_b) − F(θ*) ≤ ‖b/n‖²/(2λ) (second order; F is λ-strongly convex and ∇F(θ_b) = −b/n), so
λR²/2 + K²/(2λ) with K = E‖b‖/n is minimised by λ = K/R (:func:`default_l2_second_order`). Nothing is tuned
on the private rows; on Adult both rules are within a few tenths of a point of the best λ of a ×1/8…×2 scan
at ε ≥ 0.5.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field
from scipy import special

from privfit.solvers.base import (
    MAX_SCALE,
    MIN_SCALE,
    GLMParams,
    ProgressReporter,
    SolverParameterError,
    expected_gaussian_norm,
)
from privfit.solvers.baselines.erm import ERMSolution, Minimiser, MinimiserProblem, minimize_regularized_glm

__all__ = [
    "MINIMISER_BEFORE_ISSUE_40",
    "MINIMISER_DESCRIPTION",
    "OUTPUT_SHARE",
    "NoiseKind",
    "PerturbationParams",
    "default_gradient_tolerance",
    "default_l2",
    "default_l2_second_order",
    "expected_noise_norm",
    "noise_norm_quantile",
    "resolve_gradient_tolerance",
    "sample_l2_laplace",
    "sample_noise",
    "solve_certified",
]

FloatArray = NDArray[np.float64]

NoiseKind = Literal["gaussian", "laplace"]

#: The ``minimiser`` of resolved settings stored before the field existed (they were planned with (2) of
#: :mod:`privfit.solvers.baselines.erm`); new plans record erm's public rule.
MINIMISER_BEFORE_ISSUE_40: Minimiser = "nesterov"
MINIMISER_DESCRIPTION = (
    "The minimiser's iteration (erm module docstring): 'triple_momentum' (Van Scoy et al. 2018, eq. (2')) where the "
    "public rule √κ ≤ 8·d allows it, else 'nesterov' (eq. (2)); minimiser_steps is its public step count."
)
#: Share of the target ε given to the output noise that covers an approximate (not exact) minimiser in
#: objective perturbation (Iyengar et al. 2019 use the same 1%, ``eps_out_frac = 0.01``).
OUTPUT_SHARE = 0.01

_UNIT_ROUNDOFF = 2.0**-53


class PerturbationParams(GLMParams):
    """Parameters shared by output and objective perturbation (both need λ > 0: strong convexity)."""

    l2: float | None = Field(  # type: ignore[assignment]
        None,
        ge=MIN_SCALE,
        le=MAX_SCALE,
        description="L2 regularisation strength λ > 0 of the objective mean loss + (λ/2)‖θ‖² (the sensitivity "
        "of the minimiser is ∝ 1/λ). Default: sqrt(2·G·K)/R, balancing the regularisation bias against the "
        "noise (K: expected noise norm at λ = 1, R: the radius parameter, G: the loss's Lipschitz constant).",
    )
    noise: NoiseKind = Field(
        "gaussian",
        description="'gaussian': (ε, δ)-DP Gaussian noise; 'laplace': pure ε-DP noise of density "
        "∝ exp(−‖v‖/s) (Chaudhuri et al. 2011). Gaussian noise is smaller once d is more than a few.",
    )
    gradient_tolerance: float | None = Field(
        None,
        gt=0.0,
        le=1.0,
        description="γ: the solver must certify ‖∇F(θ̂)‖ ≤ γ at the point it returns; the distance γ/λ to the "
        "exact minimiser is covered by extra, accounted noise. It must be at least the fit's public floor, 64× the "
        "double-precision rounding bound of the gradient at the worst case (a smaller value is refused, and the "
        "message states the floor). Default max(1e-9·G, 2¹⁰·u·(n + d)·G, the floor) (u = 2⁻⁵³).",
    )

    def effective_l2(self, default: float) -> float:
        """``l2``, or the public default computed by the solver."""
        return default if self.l2 is None else self.l2


def default_gradient_tolerance(n: int, d: int, lipschitz: float) -> float:
    """The default γ before the floor: 1e-9·G, or 2¹⁰ times the rounding scale u·(n + d)·G of the gradient when
    that is larger (:func:`resolve_gradient_tolerance` raises it to the floor when needed)."""
    return max(1e-9 * lipschitz, 2.0**10 * _UNIT_ROUNDOFF * (n + d) * lipschitz)


def resolve_gradient_tolerance(
    requested: float | None, problem: MinimiserProblem, lipschitz: float
) -> tuple[float, float, int]:
    """(γ, its public floor, the step count N) for a request: the user's γ (refused below the floor, or when the
    work cap is exceeded, by :meth:`~privfit.solvers.baselines.erm.MinimiserProblem.check_tolerance`) or the default
    max(:func:`default_gradient_tolerance`, floor)."""
    floor = problem.tolerance_floor()
    if requested is None:
        tolerance = max(default_gradient_tolerance(problem.n, problem.dimension, lipschitz), floor)
    else:
        tolerance = requested
    return tolerance, floor, problem.check_tolerance(tolerance)


#: The public quantile level of :func:`noise_norm_quantile`: ‖v‖ exceeds it with probability ≤ 2⁻⁴⁰.
NOISE_NORM_CONFIDENCE = 2.0**-40


def noise_norm_quantile(kind: NoiseKind, dimension: int, scale: float) -> float:
    """A public bound that the norm of one :func:`sample_noise` vector exceeds with probability ≤ 2⁻⁴⁰.

    Gaussian: ‖v‖/σ is 1-Lipschitz in a standard normal, E‖v‖ ≤ σ√d, so P(‖v‖ ≥ σ(√d + t)) ≤ e^{−t²/2}
    (Gaussian concentration; Boucheron, Lugosi & Massart 2013, Thm 5.6) with t = sqrt(2·40·log 2). L2-Laplace:
    ‖v‖ ~ Gamma(d, s) exactly, whose upper quantile is s·Q⁻¹(d, p) (the inverse of the regularised upper
    incomplete gamma function; what ``scipy.stats.gamma.isf`` computes). Used only for the floor on γ
    (:class:`~privfit.solvers.baselines.erm.MinimiserProblem`); the certificate uses the drawn vector's own norm.
    """
    if kind == "gaussian":
        return scale * (math.sqrt(dimension) + math.sqrt(-2.0 * math.log(NOISE_NORM_CONFIDENCE)))
    return float(special.gammainccinv(dimension, NOISE_NORM_CONFIDENCE)) * scale


def expected_noise_norm(kind: NoiseKind, dimension: int, scale: float) -> float:
    """E‖v‖ of one :func:`sample_noise` vector, exactly: σ√2·Γ((d + 1)/2)/Γ(d/2) for N(0, σ²I_d)
    (:func:`~privfit.solvers.base.expected_gaussian_norm`); d·s for the L2-Laplace vector, whose norm is
    Gamma(d, s) (module docstring)."""
    return expected_gaussian_norm(scale, dimension) if kind == "gaussian" else dimension * scale


def default_l2(lipschitz: float, noise_norm_at_unit_l2: float, radius: float) -> float:
    """λ = sqrt(2·G·K)/R (module docstring): the minimiser of λR²/2 + G·K/λ."""
    return math.sqrt(2.0 * lipschitz * noise_norm_at_unit_l2) / radius


def default_l2_second_order(noise_norm_at_unit_l2: float, radius: float) -> float:
    """λ = K/R (module docstring): the minimiser of λR²/2 + K²/(2λ), for a gradient perturbation of norm K."""
    return noise_norm_at_unit_l2 / radius


def sample_l2_laplace(dimension: int, scale: float, rng: np.random.Generator, runs: int = 1) -> FloatArray:
    """``runs`` independent draws (shape (runs, d)) of density ∝ exp(−‖v‖₂/scale): Gamma(d, scale) radius,
    uniform direction (module docstring)."""
    directions = rng.standard_normal((runs, dimension))
    norms = np.linalg.norm(directions, axis=1, keepdims=True)
    norms[norms == 0.0] = 1.0  # probability zero; keeps the direction finite
    radii = rng.gamma(shape=dimension, scale=scale, size=(runs, 1))
    return np.asarray(directions / norms * radii, dtype=np.float64)


def sample_noise(kind: NoiseKind, dimension: int, scale: float, rng: np.random.Generator, runs: int = 1) -> FloatArray:
    """``runs`` noise vectors, shape (runs, d): N(0, scale² I) for 'gaussian', ∝ exp(−‖v‖/scale) for 'laplace'."""
    if kind == "gaussian":
        return scale * rng.standard_normal((runs, dimension))
    return sample_l2_laplace(dimension, scale, rng, runs)


def solve_certified(
    design: FloatArray,
    labels: FloatArray,
    problem: MinimiserProblem,
    resolved: Any,
    reporter: ProgressReporter,
    linear_term: FloatArray | None = None,
    one_hot_blocks: Sequence[tuple[int, int]] = (),
) -> ERMSolution:
    """The minimiser of :mod:`privfit.solvers.baselines.erm` at the resolved γ, after checking that the resolved step
    count is the one the public problem prescribes (stored settings are recomputed, not trusted). ``one_hot_blocks``:
    the public layout of the design's columns (:attr:`~privfit.solvers.base.PublicMetadata.one_hot_blocks`)."""
    if problem.check_tolerance(resolved.gradient_tolerance) != resolved.minimiser_steps:
        raise SolverParameterError("resolved", "minimiser_steps does not match the public step count of (4)")
    return minimize_regularized_glm(
        design, labels, problem, resolved.gradient_tolerance, linear_term=linear_term, reporter=reporter,
        one_hot_blocks=one_hot_blocks,
    )  # fmt: skip
