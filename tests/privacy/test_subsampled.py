"""Numerical soundness of the subsampled-Gaussian curves beyond what dp_accounting checks."""

import itertools
import math

import numpy as np
import pytest

from privfit.privacy import (
    DEFAULT_GRID,
    epsilon_at_delta,
    gaussian_rdp,
    poisson_subsampled_gaussian_rdp,
    poisson_subsampled_gaussian_rdp_replace_one,
    sampled_without_replacement_gaussian_rdp,
)
from privfit.privacy.subsampled import _forward_differences_upper_log

mp = pytest.importorskip("mpmath", reason="mpmath (installed with dp-accounting) gives the exact reference")


def exact_log_forward_differences(sigma: float, count: int) -> list[float]:
    """log |Δ^k g(0)|, g(t) = exp((t−1)t/(2σ²)), k = 1..count, in 300-digit arithmetic."""
    mp.mp.dps = 300
    two_sigma_sq = 2 * mp.mpf(sigma) ** 2
    g = [mp.e ** (mp.mpf(t - 1) * t / two_sigma_sq) for t in range(count + 1)]
    out = []
    for k in range(1, count + 1):
        value = mp.fsum((-1) ** (k - j) * mp.binomial(k, j) * g[j] for j in range(k + 1))
        out.append(float(mp.log(abs(value))) if value != 0 else -math.inf)
    return out


@pytest.mark.parametrize("sigma", [0.7, 2.0, 13.7, 50.0])
def test_wbk_forward_differences_are_upper_bounds_of_exact_ones(sigma):
    count = 70
    points = np.arange(count + 1, dtype=np.float64)
    cgf = np.concatenate([[0.0], points * (points + 1) / (2 * sigma**2)])
    upper = _forward_differences_upper_log(cgf)[:count]
    exact = np.array(exact_log_forward_differences(sigma, count))
    assert (upper >= exact - 1e-12).all()
    if sigma <= 2.0:  # where float64 resolves the differences, the bound is tight
        finite = np.isfinite(exact)  # Δ¹g(0) = 0 exactly: its bound is the (tiny) rounding allowance
        np.testing.assert_allclose(upper[finite], exact[finite], atol=1e-6)
        assert upper[~finite].max() < -25


def test_poisson_at_q1_is_the_gaussian_and_grows_with_q():
    np.testing.assert_allclose(
        poisson_subsampled_gaussian_rdp(DEFAULT_GRID, q=1.0, noise_multiplier=2.0),
        gaussian_rdp(DEFAULT_GRID, sigma=2.0),
    )
    curves = [poisson_subsampled_gaussian_rdp(DEFAULT_GRID, q=q, noise_multiplier=1.0) for q in (0.001, 0.01, 0.1, 0.5)]
    for lower, higher in itertools.pairwise(curves):
        assert (lower <= higher + 1e-15).all()


def test_replace_one_poisson_rule_dominates_add_remove_and_is_near_exact_at_q1():
    add_remove = poisson_subsampled_gaussian_rdp(DEFAULT_GRID, q=0.01, noise_multiplier=1.1)
    replace_one = poisson_subsampled_gaussian_rdp_replace_one(DEFAULT_GRID, q=0.01, noise_multiplier=1.1)
    assert (replace_one >= add_remove).all()
    # Without sampling a replacement is a Gaussian of sensitivity 2C: the rule is capped by (and meets) it.
    at_one = poisson_subsampled_gaussian_rdp_replace_one(DEFAULT_GRID, q=1.0, noise_multiplier=1.0)
    np.testing.assert_allclose(at_one, gaussian_rdp(DEFAULT_GRID, sigma=1.0, sensitivity=2.0))


def test_replace_one_poisson_rule_is_conservative_against_the_exact_divergence():
    """Exact Rényi divergence between the two replace-one outputs, in 1-D, by numerical integration.

    Worst case in 1-D for clipped contributions: x ↦ +C and x' ↦ −C, i.e. (1−q)N(0,z²) + qN(1,z²) against
    (1−q)N(0,z²) + qN(−1,z²) (units of C). The rule must never be below it.
    """
    mp.mp.dps = 30
    q, z = 0.05, 1.0
    orders = np.array([1.5, 2.0, 3.0, 5.0, 8.0])
    rule = poisson_subsampled_gaussian_rdp_replace_one(orders, q=q, noise_multiplier=z)

    def density(x, mean):
        return mp.npdf(x, mean, z)

    for alpha, bound in zip(orders, rule, strict=True):
        a = mp.mpf(alpha)

        def integrand(x, a=a):
            p = (1 - q) * density(x, 0) + q * density(x, 1)
            r = (1 - q) * density(x, 0) + q * density(x, -1)
            return p**a * r ** (1 - a)

        exact = float(mp.log(mp.quad(integrand, [-mp.inf, 0, mp.inf])) / (a - 1))
        assert bound >= exact


def test_without_replacement_curve_is_monotone_in_noise_and_fraction():
    small = sampled_without_replacement_gaussian_rdp(DEFAULT_GRID, q=0.01, noise_multiplier=2.0)
    more_noise = sampled_without_replacement_gaussian_rdp(DEFAULT_GRID, q=0.01, noise_multiplier=4.0)
    bigger_batch = sampled_without_replacement_gaussian_rdp(DEFAULT_GRID, q=0.05, noise_multiplier=2.0)
    assert (more_noise <= small).all() and (bigger_batch >= small).all()
    eps = epsilon_at_delta(DEFAULT_GRID, 1000 * small, 1e-5).epsilon
    assert 0 < eps < math.inf
