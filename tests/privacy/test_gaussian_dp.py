"""Gaussian DP (:mod:`privfit.privacy.gaussian_dp`): the exact (ε, δ) curve of μ-GDP against 60-digit arithmetic and
dp_accounting's privacy-loss distributions, the μ a certificate allows rounded against the user, and the Σ μ² that
Gaussian costs carry."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from privfit.privacy import DEFAULT_GRID, PrivacyCost, PrivacyParameterError, gaussian_dp_delta, gdp_epsilon, gdp_mu_for
from privfit.privacy.gaussian_dp import COORDINATE_CHARGE, LATTICE_SLACK, certified_delta, lattice_slack

mpmath.mp.dps = 60


def exact_delta(mu: float, epsilon: float) -> mpmath.mpf:
    """δ_μ(ε) in 60-digit arithmetic (Dong, Roth & Su, Cor. 2.13)."""
    mu, epsilon = mpmath.mpf(mu), mpmath.mpf(epsilon)
    return mpmath.ncdf(-epsilon / mu + mu / 2) - mpmath.exp(epsilon) * mpmath.ncdf(-epsilon / mu - mu / 2)


@pytest.mark.parametrize("mu", [1e-3, 0.05, 0.3, 1.0, 2.5, 8.0])
@pytest.mark.parametrize("epsilon", [0.0, 0.1, 1.0, 3.0, 10.0])
def test_the_delta_curve_matches_60_digit_arithmetic(mu: float, epsilon: float):
    expected = exact_delta(mu, epsilon)
    if expected < mpmath.mpf("1e-300"):
        assert gaussian_dp_delta(mu, epsilon) < 1e-290
        return
    assert gaussian_dp_delta(mu, epsilon) == pytest.approx(float(expected), rel=1e-10)


def test_the_delta_curve_matches_dp_accountings_gaussian_pld():
    """One Gaussian of σ = 1/μ (sensitivity 1), and the composition of several: √(Σ μ²)-GDP is their exact curve."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    for sigmas in ([4.0], [2.0, 5.0, 7.0], [10.0] * 12):
        mechanism = pld.from_gaussian_mechanism(sigmas[0], value_discretization_interval=1e-4)
        for sigma in sigmas[1:]:
            mechanism = mechanism.compose(pld.from_gaussian_mechanism(sigma, value_discretization_interval=1e-4))
        mu = math.sqrt(sum(1.0 / s**2 for s in sigmas))
        for epsilon in (0.1, 0.5, 1.0, 2.0):
            reference = mechanism.get_delta_for_epsilon(epsilon)  # pessimistic: an upper bound on the true δ
            ours = gaussian_dp_delta(mu, epsilon)
            assert ours <= reference * (1 + 1e-9)
            assert ours == pytest.approx(reference, rel=2e-3, abs=1e-12)


@pytest.mark.parametrize(("epsilon", "delta"), [(0.1, 1e-6), (1.0, 1e-6), (1.0, 4.5e-7), (3.0, 1e-5), (8.0, 1e-9)])
def test_the_allowed_mu_is_rounded_against_the_user_and_tight(epsilon: float, delta: float):
    mu = gdp_mu_for(epsilon, delta)
    assert exact_delta(mu, epsilon) <= delta  # exact arithmetic: the certificate's μ keeps its promise
    assert certified_delta(mu, epsilon) <= delta
    assert exact_delta(mu * (1 + 1e-8), epsilon) > delta  # and gives away no more than a relative 1e-8


def test_epsilon_is_the_inverse_rounded_up():
    for mu, delta in ((0.2, 1e-6), (1.0, 1e-5), (3.0, 1e-3)):
        epsilon = gdp_epsilon(mu * mu, delta)
        assert exact_delta(mu, epsilon) <= delta
        assert exact_delta(mu, epsilon * (1 - 1e-8)) > delta
    assert gdp_epsilon(math.inf, 1e-6) == math.inf
    assert gdp_epsilon(0.0, 1e-6) == 0.0


def test_the_lattice_slack_is_negligible_and_counted():
    """A path with Σ μ² ≤ μ_G² has at most μ_G²/κ coordinates, so H ≤ 2μ_G²·η/κ: 2·10⁻³³ at μ_G = 10."""
    assert LATTICE_SLACK / COORDINATE_CHARGE <= 1e-35
    assert lattice_slack(100.0) <= 2e-33
    cost = PrivacyCost.gaussian(DEFAULT_GRID, sigma=2.0, sensitivity=1.0, count=3, coordinates=10**8)
    assert 0.75 <= cost.gdp_mu_squared <= 0.75 * (1 + 1e-13)
    # every coordinate is charged, even where (Δ/σ)² vanishes next to it: N·κ ≤ Σ μ² holds on every path
    faint = PrivacyCost.gaussian(DEFAULT_GRID, sigma=1e60, sensitivity=1.0, count=3, coordinates=10**8)
    assert faint.gdp_mu_squared >= 3 * 10**8 * COORDINATE_CHARGE


def test_gaussian_costs_compose_their_mu_squared_and_other_costs_have_none():
    gaussian = PrivacyCost.gaussian(DEFAULT_GRID, sigma=4.0, sensitivity=2.0, coordinates=5)
    np.testing.assert_allclose(gaussian.rdp, DEFAULT_GRID.orders * 4.0 / 32.0)
    assert (gaussian * 4).gdp_mu_squared == pytest.approx(4 * gaussian.gdp_mu_squared)
    assert (gaussian + gaussian).gdp_mu_squared == pytest.approx(2 * gaussian.gdp_mu_squared)
    assert PrivacyCost.zero(DEFAULT_GRID).gdp_mu_squared == 0.0
    assert (gaussian + PrivacyCost.pure_dp(0.1)).gdp_mu_squared == math.inf
    assert (gaussian + PrivacyCost.laplace(DEFAULT_GRID, scale=3.0)).gdp_mu_squared == math.inf
    assert PrivacyCost(gaussian.rdp, DEFAULT_GRID).gdp_mu_squared == math.inf  # a bare curve claims no GDP bound
    with pytest.raises(PrivacyParameterError):
        PrivacyCost(gaussian.rdp, DEFAULT_GRID, 1e-9, 0.0, math.inf, 0.25)  # δ parts are not Gaussian-DP
