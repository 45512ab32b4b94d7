r"""The regularised GLM minimiser behind output and objective perturbation, with a CERTIFIED gradient norm.

Both perturbation mechanisms are stated for the exact minimiser of a strongly convex objective

    F(θ) = (1/n) Σ_i φ(⟨θ, x_i⟩, y_i) + (λ/2)‖θ‖² + (1/n)⟨b, θ⟩,        θ ∈ R^d, λ > 0,               (1)

(b = 0 for output perturbation; b the noise vector for objective perturbation). A numerical solver returns an
approximate θ̂ instead. Since F is λ-strongly convex, ‖θ̂ − θ*‖ ≤ ‖∇F(θ̂)‖ / λ, so a bound γ on the gradient
norm at θ̂ bounds the distance to the exact minimiser by γ/λ — which the solvers turn into an extra, accounted
sensitivity term (Iyengar et al., "Towards Practical Differentially Private Convex Optimization", IEEE S&P
2019, the approximate-minima idea). :func:`minimize_regularized_glm` therefore does not just *aim* for
‖∇F‖ ≤ γ: it recomputes the gradient at the returned point and adds a bound on that computation's own rounding
error (``gradient_rounding_bound``); only if the sum is ≤ γ is θ̂ returned. Otherwise it raises
:class:`ERMConvergenceError` and nothing is released (the job fails and keeps its charge).

The solver is scipy's trust-region Newton method with the exact Hessian (``trust-exact``, Moré–Sorensen) for
d ≤ 2000 and its Steihaug–CG variant with Hessian-vector products (``trust-ncg``) above: F is smooth and
strongly convex, so both converge superlinearly in a few dozen iterations; a few plain Newton steps then
polish the gradient below the tolerance (the trust-region tests compare objective values, which stop resolving
progress near the minimiser).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import optimize
from scipy.sparse import linalg as sparse_linalg

from .base import ProgressReporter, SolverParameterError
from .losses import GLMLoss, RegularizedLoss

__all__ = ["ERMConvergenceError", "ERMSolution", "gradient_rounding_bound", "minimize_regularized_glm"]

FloatArray = NDArray[np.float64]

_UNIT_ROUNDOFF = 2.0**-53
_EXACT_HESSIAN_MAX_DIMENSION = 2000
MAX_ITERATIONS = 500


class ERMConvergenceError(RuntimeError):
    """The minimiser could not certify ‖∇F(θ̂)‖ ≤ γ; nothing is released (the job runner records only the
    exception's type, since its message is computed from private rows)."""


@dataclass(frozen=True)
class ERMSolution:
    """θ̂ with the certified bound ‖∇F(θ̂)‖ ≤ ``gradient_bound`` (computed norm + rounding bound)."""

    theta: FloatArray
    gradient_norm: float
    gradient_bound: float
    iterations: int


def gradient_rounding_bound(
    n: int, d: int, *, lipschitz: float, smoothness: float, l2: float, theta_norm: float, linear_term_norm: float
) -> float:
    r"""A bound on |‖∇F(θ)‖ computed − ‖∇F(θ)‖ exact| for (1), in IEEE double precision.

    Each coordinate of Xᵀφ' is a sum of n products, so its rounding error is ≤ n·u·Σ_i |φ'_i||x_ij| (Higham,
    *Accuracy and Stability of Numerical Algorithms*, §3.1); in 2-norm over coordinates this is ≤ n·u·Σ_i
    |φ'_i|‖x_i‖ ≤ n·u·n·G, i.e. ≤ n·u·G after the division by n. The margins ⟨θ, x_i⟩ carry an error ≤ d·u·B‖θ‖,
    which moves φ' by ≤ c·d·u·B‖θ‖ (φ' is c-Lipschitz) and the gradient by ≤ β·d·u‖θ‖ with β = c·B². The
    regulariser and the linear term add ≤ u(λ‖θ‖ + ‖b‖/n) each. A factor 4 covers the final norm and the
    additions; the result is around 10⁻¹¹ on Adult-sized data, far below the tolerances used.
    """
    u = _UNIT_ROUNDOFF
    return 4.0 * u * ((n + d) * lipschitz + d * smoothness * theta_norm + l2 * theta_norm + linear_term_norm)


def _newton_polish(
    theta: FloatArray,
    gradient: Callable[[FloatArray], FloatArray],
    newton_direction: Callable[[FloatArray, FloatArray], FloatArray],
    target: float,
    steps: int = 8,
) -> tuple[FloatArray, float]:
    """Plain Newton steps θ ← θ − H⁻¹∇F while they reduce ‖∇F‖ and it is above ``target``.

    Trust-region methods compare objective values, which stop resolving progress once F changes by less than
    its rounding error (≈ u·|F|, reached when ‖∇F‖² / λ ≈ 10⁻¹⁶); Newton's method near the minimiser of a
    smooth strongly convex F converges quadratically in the gradient norm without comparing values.
    """
    g = gradient(theta)
    norm = float(np.linalg.norm(g))
    for _ in range(steps):
        if norm <= target:
            break
        candidate = theta - newton_direction(theta, g)
        candidate_gradient = gradient(candidate)
        candidate_norm = float(np.linalg.norm(candidate_gradient))
        if not candidate_norm < norm:
            break
        theta, g, norm = candidate, candidate_gradient, candidate_norm
    return theta, norm


def minimize_regularized_glm(
    X: FloatArray,
    y: FloatArray,
    *,
    loss: GLMLoss,
    l2: float,
    tolerance: float,
    lipschitz: float,
    smoothness: float,
    linear_term: FloatArray | None = None,
    reporter: ProgressReporter | None = None,
) -> ERMSolution:
    r"""Minimise (1) from θ = 0 and certify ``‖∇F(θ̂)‖ ≤ tolerance`` (γ), or raise :class:`ERMConvergenceError`.

    ``loss`` is the unregularised GLM loss, ``l2`` = λ > 0 the strong convexity, ``linear_term`` the vector b
    (the objective adds ⟨b, θ⟩/n), ``lipschitz`` the public bound G on ‖φ'·x‖ over the rows (it enters only
    the rounding bound, as does the public smoothness β = c·B² of φ). ``reporter`` may cancel the fit between
    iterations; it is NOT sent progress: the number of iterations depends on the data, so reporting it would
    release something the cost does not cover (the caller reports 1.0 when the fit ends).
    """
    if isinstance(loss, RegularizedLoss):
        raise SolverParameterError("loss", "pass the unregularised loss; λ is the l2 argument")
    if not (l2 > 0.0 and math.isfinite(l2)):
        raise SolverParameterError("l2", f"the objective must be strongly convex: l2 > 0, got {l2!r}")
    if not (tolerance > 0.0 and math.isfinite(tolerance)):
        raise SolverParameterError("gradient_tolerance", f"must be > 0, got {tolerance!r}")
    n, d = X.shape
    b_over_n = np.zeros(d) if linear_term is None else np.asarray(linear_term, dtype=np.float64) / n

    def value_and_gradient(theta: FloatArray) -> tuple[float, FloatArray]:
        z = X @ theta
        value = float(np.mean(loss.phi(z, y))) + 0.5 * l2 * float(theta @ theta) + float(b_over_n @ theta)
        gradient = X.T @ loss.dphi(z, y) / n + l2 * theta + b_over_n
        return value, gradient

    def hessian(theta: FloatArray) -> FloatArray:
        curvature = loss.d2phi(X @ theta, y)
        return (X.T * curvature) @ X / n + l2 * np.eye(d)

    def hessian_vector(theta: FloatArray, v: FloatArray) -> FloatArray:
        return X.T @ (loss.d2phi(X @ theta, y) * (X @ v)) / n + l2 * v

    iterations = 0

    def callback(*_: object) -> None:
        nonlocal iterations
        iterations += 1
        if reporter is not None:
            reporter.check_stop(iterations)

    exact = d <= _EXACT_HESSIAN_MAX_DIMENSION
    result = optimize.minimize(
        value_and_gradient,
        np.zeros(d),
        jac=True,
        hess=hessian if exact else None,
        hessp=None if exact else hessian_vector,
        method="trust-exact" if exact else "trust-ncg",
        callback=callback,
        options={"gtol": tolerance / 4.0, "maxiter": MAX_ITERATIONS},
    )
    theta, gradient_norm = _newton_polish(
        np.asarray(result.x, dtype=np.float64),
        lambda t: value_and_gradient(t)[1],
        (lambda t, g: np.linalg.solve(hessian(t), g))
        if exact
        else (lambda t, g: sparse_linalg.cg(sparse_linalg.LinearOperator((d, d), lambda v: hessian_vector(t, v)), g,
                                            rtol=1e-12)[0]),
        tolerance / 4.0,
    )  # fmt: skip
    rounding = gradient_rounding_bound(
        n, d, lipschitz=lipschitz, smoothness=smoothness, l2=l2, theta_norm=float(np.linalg.norm(theta)),
        linear_term_norm=float(np.linalg.norm(b_over_n)) * n,
    )  # fmt: skip
    bound = gradient_norm + rounding
    if not (bound <= tolerance):
        # The bound and the iteration count are computed from private rows: the message names neither.
        raise ERMConvergenceError(
            f"the regularised minimiser did not certify the gradient tolerance {tolerance:g}; nothing was released"
        )
    return ERMSolution(theta=theta, gradient_norm=gradient_norm, gradient_bound=bound, iterations=iterations)
