"""The RDP curve of Gaussian objective perturbation (privfit.privacy.objective_perturbation_rdp, issue 21 §3).

The curve is a bound proven in its docstring. These tests hold it against an exact computation: for a
one-dimensional logistic GLM the density of the perturbed minimiser θ_b is known in closed form,
p_D(θ) = ν(b_D(θ))·|b_D'(θ)| with b_D(θ) = −Σ_i φ'(θx_i, y_i)x_i − nλθ, so the Rényi divergence between
neighbouring datasets is a one-dimensional integral, computed on a fine grid in log space. The bound must
dominate it at every order, for the worst of several replace-one neighbours; a curve without the Jacobian term
(the Gaussian mechanism's α r²/2 alone) must be caught exceeding it, so the check has power.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate
from scipy.special import expit, logsumexp

from privfit.privacy import objective_perturbation_rdp

ORDERS = np.array([1.5, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0])
CURVATURE = 0.25  # logistic φ'' ≤ 1/4; |φ'| ≤ 1 so G = B


def _log_density(theta: np.ndarray, xs: np.ndarray, ys: np.ndarray, l2: float, sigma: float) -> np.ndarray:
    z = np.outer(theta, xs)
    dphi = -ys * expit(-ys * z)
    b = -(dphi * xs).sum(axis=1) - len(xs) * l2 * theta
    jacobian = (expit(z) * expit(-z) * xs**2).sum(axis=1) + len(xs) * l2
    return -(b**2) / (2 * sigma**2) - 0.5 * math.log(2 * math.pi * sigma**2) + np.log(jacobian)


def exact_renyi(n: int, l2: float, sigma: float, bound: float = 1.0) -> np.ndarray:
    """max over neighbours and both directions of D_α(P_D ‖ P_D'), D = n copies of (B, +1)."""
    xs, ys = np.full(n, bound), np.ones(n)
    span = (n * bound + 12 * sigma) / (n * l2) + 5
    # θ = sinh(u) on a uniform u grid: fine where φ'' varies (|θ| ≲ 10), coarse in the Gaussian tails.
    u, du = np.linspace(-math.asinh(span), math.asinh(span), 200_001, retstep=True)
    theta, log_weight = np.sinh(u), np.log(np.cosh(u) * du)
    log_p = _log_density(theta, xs, ys, l2, sigma) + log_weight
    assert math.exp(logsumexp(log_p)) == pytest.approx(1.0, abs=1e-6)
    worst = np.full(ORDERS.shape, -np.inf)
    for x_k, y_k in [(-bound, 1.0), (bound, -1.0), (0.0, 1.0), (-bound, -1.0)]:
        xs_k, ys_k = xs.copy(), ys.copy()
        xs_k[-1], ys_k[-1] = x_k, y_k
        log_q = _log_density(theta, xs_k, ys_k, l2, sigma) + log_weight
        for i, a in enumerate(ORDERS):
            for first, second in ((log_p, log_q), (log_q, log_p)):
                value = logsumexp(a * first + (1 - a) * second) / (a - 1)  # the weights enter with power 1
                worst[i] = max(worst[i], value)
    return worst


CASES = [(2, 0.01, 1.0), (2, 0.01, 20.0), (3, 0.05, 4.0), (1, 0.002, 50.0), (2, 1.0, 0.8)]


@pytest.mark.parametrize(("n", "l2", "sigma"), CASES)
def test_the_curve_dominates_the_exact_renyi_divergence(n: int, l2: float, sigma: float) -> None:
    exact = exact_renyi(n, l2, sigma)
    curve = objective_perturbation_rdp(ORDERS, noise_multiplier=sigma / 2.0, jacobian_ratio=CURVATURE / (n * l2))
    assert (exact <= curve).all(), (exact, curve)


def test_a_curve_without_the_jacobian_term_is_caught() -> None:
    """Noise-dominated, weakly regularised: the determinant ratio alone exceeds the Gaussian mechanism's curve."""
    exact = exact_renyi(1, 0.002, 50.0)
    gaussian_only = ORDERS * (2.0 / 50.0) ** 2 / 2
    assert (exact > 10 * gaussian_only).any()
    curve = objective_perturbation_rdp(ORDERS, noise_multiplier=25.0, jacobian_ratio=CURVATURE / 0.002)
    assert curve[-1] - exact[-1] < 0.2  # and the bound is nearly tight there (log(1 + κ) dominates)


@pytest.mark.parametrize("t", [0.1, 1.0, 3.0, 10.0])
def test_the_moment_generating_function_of_chi_two(t: float) -> None:
    """M(t) = E e^{tχ₂}, recovered from the curve at α = 2 with κ = 0, against numerical integration of
    M(t) = e^{t²/2} ∫₀^∞ x e^{−(x − t)²/2} dx (the χ₂ density is x e^{−x²/2})."""
    (scaled, _) = integrate.quad(lambda x: x * math.exp(-((x - t) ** 2) / 2), 0, t + 40, points=[t], epsabs=0)
    curve = objective_perturbation_rdp([2.0], noise_multiplier=1.0 / t, jacobian_ratio=0.0)[0]
    assert curve - t * t / 2 == pytest.approx(t * t / 2 + math.log(scaled), rel=1e-9)


def test_the_curve_approaches_the_gaussian_mechanism_at_high_orders_and_is_finite_near_one() -> None:
    orders = np.array([1.01, 1.1, 2.0, 256.0, 1024.0])
    curve = objective_perturbation_rdp(orders, noise_multiplier=5.0, jacobian_ratio=0.0)
    assert np.isfinite(curve).all() and (np.diff(curve) > 0).all()
    assert curve[-1] == pytest.approx(1024 * 0.2**2 / 2, rel=0.01)
    assert curve[0] == pytest.approx(0.2**2 / 2 + 0.2 * math.sqrt(math.pi / 2), rel=0.01)
