"""The domination argument (b) of privfit.privacy.noise's docstring, checked numerically.

The exact Gaussian's integer variance is S = ⌈σ_g² + τ²⌉ = σ''² + τ² (σ'' ≥ σ_g), τ = ``SMOOTHING_SCALE``. Its
law equals, up to a pointwise factor e^{±η} per coordinate, that of a post-processing of the continuous Gaussian
mechanism — draw z ~ N_Z(y, τ²) around the continuous release y = v + N(0, σ''²) — where, with the Jacobi theta
function
Θ(u) = Σ_j e^{−(j−u)²/(2τ²)} = √(2π)τ(1 + 2Σ_{m≥1} e^{−2π²τ²m²} cos 2πmu) (Poisson summation),

    ε_τ = 2Σ_{m≥1} e^{−2π²τ²m²},     η = log((1 + ε_τ)/(1 − ε_τ)),

and an RDP curve pays (2α − 1)·d·η/(α − 1) for it. This file checks (1) that at τ = 4 those quantities are
astronomically small (mpmath at 60 digits); (2) the key identity at a scale where it is visible (τ = 0.3, 0.5):
z − v has the pmf f(w) = ∫ φ_σ(x) e^{−(w−x)²/(2τ²)}/Θ(x) dx (quadrature), and f/N_Z(0, σ² + τ²) lies within
[e^{−η}, e^{η}] — and comes within a factor 2 of that bound in log terms, so the bound is the right one;
(3) the calibrations leave a margin far above the 10⁻¹²⁵ the argument adds; (4) that a Gaussian-DP statement must take
the same route: the bare lattice Gaussian is not (Δ/s)-GDP (a vertex of its trade-off curve lies below G_{Δ/s}).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from scipy import integrate

from privfit.privacy import (
    DEFAULT_GRID,
    GRIDS,
    PrivacyCost,
    gaussian_rdp,
    gaussian_sigma,
    poisson_noise_multiplier,
    poisson_subsampled_gaussian_rdp_replace_one,
)
from privfit.privacy.noise import SMOOTHING_SCALE

MAX_DIMENSION = 10**8


def smoothing_error(tau: float) -> float:
    """ε_τ = 2Σ_{m≥1} e^{−2π²τ²m²} in double precision (the terms fall super-exponentially; 60 are plenty)."""
    return 2.0 * sum(math.exp(-2.0 * math.pi**2 * tau**2 * m * m) for m in range(1, 60))


def test_smoothing_error_at_tau_4_is_negligible():
    """ε_τ < 1e-136, η < 1e-135 and (2α − 1)·d·η/(α − 1) < 1e-125 at the smallest order of every grid (and at
    α = 1.01, the docstring's floor) for d = 1e8 coordinates."""
    smallest = min(float(grid.orders.min()) for grid in GRIDS.values())
    assert smallest >= 1.01
    with mpmath.workdps(60):
        tau = mpmath.mpf(SMOOTHING_SCALE)
        epsilon = 2 * mpmath.nsum(lambda m: mpmath.exp(-2 * mpmath.pi**2 * tau**2 * m**2), [1, mpmath.inf])
        eta = mpmath.log((1 + epsilon) / (1 - epsilon))
        assert epsilon < mpmath.mpf("1e-136")
        assert eta < mpmath.mpf("1e-135")
        for alpha in (mpmath.mpf(smallest), mpmath.mpf("1.01")):
            extra = (2 * alpha - 1) * MAX_DIMENSION * eta / (alpha - 1)
            assert extra < mpmath.mpf("1e-125")
        # The double-precision value agrees (it is far above the subnormal range).
        assert smoothing_error(SMOOTHING_SCALE) == pytest.approx(float(epsilon), rel=1e-12)


def theta(points: np.ndarray, tau: float) -> np.ndarray:
    """Θ(u) = Σ_j e^{−(j−u)²/(2τ²)}, summed over every j within 40 of the points (the rest is < e^{−800/τ²})."""
    j = np.arange(math.floor(points.min()) - 40, math.ceil(points.max()) + 41)
    return np.exp(-((j[None, :] - points[:, None]) ** 2) / (2 * tau**2)).sum(axis=1)


def smoothed_pmf(offsets: np.ndarray, sigma: float, tau: float) -> np.ndarray:
    """f(w) = ∫ φ_σ(x) e^{−(w−x)²/(2τ²)}/Θ(x) dx by Simpson's rule on the window where the integrand lives:
    x within 14 standard deviations (στ/s) of its peak wσ²/s²."""
    s = math.hypot(sigma, tau)
    spread = sigma * tau / s
    values = []
    for w in offsets:
        x = w * sigma**2 / s**2 + spread * np.linspace(-14.0, 14.0, 8_001)
        integrand = np.exp(-(x**2) / (2 * sigma**2) - (w - x) ** 2 / (2 * tau**2)) / theta(x, tau)
        values.append(integrate.simpson(integrand, x=x) / (math.sqrt(2 * math.pi) * sigma))
    return np.asarray(values)


def discrete_gaussian_pmf(offsets: np.ndarray, scale: float) -> np.ndarray:
    j = np.arange(-math.ceil(40 * scale + 10), math.ceil(40 * scale + 10) + 1)
    return np.exp(-(offsets**2) / (2 * scale**2)) / np.exp(-(j**2) / (2 * scale**2)).sum()


@pytest.mark.parametrize("tau", [0.3, 0.5])
def test_smoothed_continuous_release_is_within_the_proven_factor_of_the_discrete_gaussian(tau):
    """For τ = 0.3 (ε_τ ≈ 0.34) and 0.5 (ε_τ ≈ 0.014): f is a pmf on Z, f/φ_s ∈ [1/(1 + ε_τ), 1/(1 − ε_τ)]
    and f/N_Z(0, s²) ∈ [e^{−η}, e^{η}] at every w with |w| ≤ 8s, for σ from 0.06τ… to 10τ; the largest
    |log ratio| over the scan exceeds η/2 (the bound is not loose by orders of magnitude)."""
    epsilon = smoothing_error(tau)
    eta = math.log((1 + epsilon) / (1 - epsilon))
    worst = 0.0
    for sigma in (0.06, 0.1, 0.12, 0.15, 0.3, 1.0, 3.0):
        s = math.hypot(sigma, tau)
        offsets = np.arange(-math.ceil(8 * s), math.ceil(8 * s) + 1)
        pmf = smoothed_pmf(offsets, sigma, tau)
        assert pmf.sum() == pytest.approx(1.0, abs=1e-9)
        continuous = np.exp(-(offsets**2) / (2 * s**2)) / (math.sqrt(2 * math.pi) * s)
        assert np.all(pmf / continuous >= 1 / (1 + epsilon)) and np.all(pmf / continuous <= 1 / (1 - epsilon))
        log_ratio = np.log(pmf / discrete_gaussian_pmf(offsets, s))
        assert np.all(np.abs(log_ratio) <= eta), f"σ = {sigma}: |log ratio| up to {np.abs(log_ratio).max():.4f}"
        worst = max(worst, float(np.abs(log_ratio).max()))
    assert worst > eta / 2


def test_calibrations_leave_a_margin_far_above_the_domination_term():
    """At representative calibrated σ the charged ε is below the target by > 1e-12 (observed: ~1e-7, from the
    σ rounded up by ~rtol/4), and adding the domination term (2α − 1)dη/(α − 1) to the curve changes nothing."""
    eta = math.log((1 + smoothing_error(SMOOTHING_SCALE)) / (1 - smoothing_error(SMOOTHING_SCALE)))
    orders = DEFAULT_GRID.orders
    extra = (2 * orders - 1) * MAX_DIMENSION * eta / (orders - 1)
    target, delta = 1.0, 1e-5
    plain = gaussian_sigma(target, delta, sensitivity=2.0)
    poisson = poisson_noise_multiplier(target, delta, q=0.01, steps=1_000)
    curves = {
        "gaussian": gaussian_rdp(DEFAULT_GRID, sigma=plain.noise, sensitivity=2.0),
        "poisson": 1_000 * poisson_subsampled_gaussian_rdp_replace_one(orders, q=0.01, noise_multiplier=poisson.noise),
    }
    for name, curve in curves.items():
        charged = PrivacyCost(curve, DEFAULT_GRID).epsilon(delta).epsilon
        dominated = PrivacyCost(curve + extra, DEFAULT_GRID).epsilon(delta).epsilon
        assert target - charged > 1e-12, name
        assert dominated <= target, name


def _lattice_tradeoff_vertices(s: float, shift: int, span: float = 40.0) -> tuple[np.ndarray, np.ndarray]:
    """The vertices of the trade-off curve between N_Z(0, s²) and N_Z(shift, s²) (60 digits): for each integer
    threshold a, the test "reject when x ≥ a" has type-I error α = P[Y ≥ a] and type-II error β = P[Y ≤ a − 1 −
    shift], Y ~ N_Z(0, s²). The curve is the piecewise-linear function through them (randomised tests between)."""
    with mpmath.workdps(60):
        k_max = int(span * s) + 50
        weights = [mpmath.exp(-(mpmath.mpf(k) ** 2) / (2 * mpmath.mpf(s) ** 2)) for k in range(-k_max, k_max + 1)]
        total = mpmath.fsum(weights)
        cdf, running = [], mpmath.mpf(0)
        for weight in weights:
            running += weight
            cdf.append(running / total)
        alphas, betas = [], []
        for a in range(-int(10 * s), int(10 * s) + 1):
            index = a + k_max  # cdf[index] = P[Y ≤ a]
            alphas.append(1 - cdf[index - 1])
            betas.append(cdf[index - 1 - shift])
        return np.array(alphas, dtype=object), np.array(betas, dtype=object)


@pytest.mark.parametrize("s", [1.0, 2.0, 5.0])
def test_the_bare_lattice_gaussian_is_not_gaussian_dp_at_its_own_mu(s):
    """Why a Gaussian-DP charge of an exact release must go through the smoothing domination above, not through the
    lattice itself: N_Z(v, s²) against N_Z(v + 1, s²) is NOT (1/s)-GDP. A vertex of its trade-off curve is an
    achievable (α, β), so one vertex below G_μ(α) = Φ(Φ⁻¹(1 − α) − μ) disproves μ-GDP; at the median test the
    probit increment is (1 + 1/(24 s²))/s, above μ = 1/s. A continuous Gaussian's vertices all lie on G_μ (the
    control), and the smoothed release's continuous part is exactly μ-GDP, so the domination's route holds where
    this one fails."""
    alphas, betas = _lattice_tradeoff_vertices(s, shift=1)
    with mpmath.workdps(60):
        mu = 1 / mpmath.mpf(s)

        def g(alpha):  # G_μ(α) = Φ(Φ⁻¹(1 − α) − μ)
            return mpmath.ncdf(mpmath.sqrt(2) * mpmath.erfinv(1 - 2 * alpha) - mu)

        gaps = [(beta - g(alpha)) / g(alpha) for alpha, beta in zip(alphas, betas, strict=True)]
        assert min(gaps) < -1e-4 / s**2  # some vertex lies below G_μ: not μ-GDP
        # the median test: α = P[Y ≥ 1], β = P[Y ≤ -1]; its probit increment Φ⁻¹(1 − α) − Φ⁻¹(β) is ≈ (1 + 1/(24s²))/s
        median = int(10 * s) + 1
        increment = mpmath.sqrt(2) * (mpmath.erfinv(1 - 2 * alphas[median]) - mpmath.erfinv(2 * betas[median] - 1))
        assert increment * s > 1 + 0.9 / (24 * s**2)
        # control: the continuous Gaussian's thresholds give β = G_μ(α) exactly, so the check is not vacuous
        for a in map(mpmath.mpf, ("-2", "0", "0.5", "3")):
            alpha = 1 - mpmath.ncdf(a * mu)
            assert abs(mpmath.ncdf((a - 1) * mu) - g(alpha)) < mpmath.mpf(10) ** -50
