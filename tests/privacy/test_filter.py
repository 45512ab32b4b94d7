"""The privacy filter (privfit.privacy.filter): its pinned order, budgets, certificates, δ pot and allowance."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant

from privfit.privacy import (
    DEFAULT_GRID,
    FILTER_VERSION,
    FILTER_VERSION_V2,
    GRIDS,
    PrivacyCost,
    PrivacyFilter,
    PrivacyParameterError,
    gaussian_dp_delta,
    gaussian_rdp,
    gaussian_sigma,
)

BUDGETS = [(0.5, 1e-2), (1.0, 1e-6), (3.0, 1e-5), (8.0, 1e-8), (0.1, 1e-6)]


@pytest.mark.parametrize(("epsilon", "delta"), BUDGETS)
@pytest.mark.parametrize("grid_name", sorted(GRIDS))
def test_the_pinned_order_is_where_the_exhausting_gaussian_converts_best(epsilon, delta, grid_name):
    """α* agrees with the optimal order of privfit's Gaussian calibration at (ε_max, δ_R) — two implementations."""
    grid = GRIDS[grid_name]
    privacy_filter = PrivacyFilter.for_budget(epsilon, delta, grid)
    if privacy_filter.order_budget <= 0:
        # no order of this grid certifies ε_max at δ_R for any Gaussian (the calibration then relies on the KL
        # shortcut, which no filter proof covers): the order certificate admits no Gaussian at all
        assert grid.orders.max() < 100 and not privacy_filter.admits(PrivacyCost(gaussian_rdp(grid, sigma=1e6), grid))
        return
    calibration = gaussian_sigma(epsilon, privacy_filter.rdp_delta, grid=grid, rtol=1e-9)
    assert privacy_filter.order == calibration.optimal_order


@pytest.mark.parametrize(("epsilon", "delta"), BUDGETS)
def test_each_order_budget_converts_to_epsilon_max_by_dp_accounting(epsilon, delta):
    """ρ_j at each pinned order is exactly the RDP that dp_accounting converts to ε_max at δ_j at that one order."""
    privacy_filter = PrivacyFilter.for_budget(epsilon, delta, DEFAULT_GRID)
    split = math.fsum(privacy_filter.order_deltas) + privacy_filter.approximate_delta + privacy_filter.gdp_delta
    assert split == pytest.approx(delta)
    for order, budget, share in zip(privacy_filter.orders, privacy_filter.order_budgets, privacy_filter.order_deltas,
                                    strict=True):  # fmt: skip
        converted, optimal = rdp_privacy_accountant.compute_epsilon([order], [budget], share)
        assert optimal == order
        assert converted == pytest.approx(epsilon, rel=1e-12)


def test_golden_filter_of_the_default_budget():
    privacy_filter = PrivacyFilter.for_budget(1.0, 1e-6, DEFAULT_GRID)
    assert privacy_filter.version == FILTER_VERSION
    assert privacy_filter.gdp_delta == pytest.approx(4.5e-7)  # δ_G = δ_R/2, the GDP certificate's share
    assert privacy_filter.orders == (23.0, 256.0)  # α* at the orders' δ_O = 4.5e-7, and the order nearest 10·α*
    assert privacy_filter.order_deltas == pytest.approx((0.99 * 4.5e-7, 0.01 * 4.5e-7))
    assert privacy_filter.approximate_delta == pytest.approx(1e-7)
    assert privacy_filter.slack_delta == pytest.approx(0.5e-7)  # δ_S = δ_A/2
    # ρ_1 = 1 − log(1 − 1/23) + (log δ_1 + log 23)/22
    first = 1 - math.log(22 / 23) + (math.log(0.99 * 4.5e-7) + math.log(23)) / 22
    assert privacy_filter.order_budgets[0] == pytest.approx(first, rel=1e-12)
    assert privacy_filter.order_budgets == pytest.approx((0.5222438364750885, 0.9502903267890165), rel=1e-12)
    # μ_G: δ_μ(1) = Φ(−1/μ + μ/2) − e Φ(−1/μ − μ/2) = 4.5e-7 (tests/privacy/test_gaussian_dp.py checks it in mpmath)
    assert privacy_filter.gdp_mu == pytest.approx(0.227987434952678, rel=1e-9)
    today = PrivacyFilter.for_budget(1.0, 1e-6, DEFAULT_GRID, gdp_share=0.0)  # the v2 filter, as budgets before v3
    assert today.version == FILTER_VERSION_V2 and today.gdp_delta == 0.0 and today.gdp_mu == 0.0
    assert today.orders == (22.0, 256.0) and today.order_deltas == pytest.approx((0.99 * 9e-7, 0.01 * 9e-7))
    assert privacy_filter.slack_weight == pytest.approx(2 * (1 + math.e))


def test_shares_add_up_and_admission_is_a_share_of_at_most_one():
    privacy_filter = PrivacyFilter.for_budget(1.0, 1e-6, DEFAULT_GRID)
    # a Gaussian using exactly a quarter of the RDP allowed at α*
    sigma = math.sqrt(privacy_filter.order / (2 * privacy_filter.order_budget / 4))
    quarter = PrivacyCost(gaussian_rdp(DEFAULT_GRID, sigma=sigma))
    assert privacy_filter.measure(quarter).share == pytest.approx(0.25, rel=1e-9)
    assert privacy_filter.measure(quarter * 3).epsilon == pytest.approx(0.75, rel=1e-9)
    assert privacy_filter.measure(quarter).certificate == "order"
    assert privacy_filter.admits(quarter * 3)
    assert not privacy_filter.admits(quarter * 5)
    # exactly the allowed RDP is refused by the rounding against the user; a hair below is admitted
    assert not privacy_filter.admits(quarter * 4)
    below = PrivacyCost(gaussian_rdp(DEFAULT_GRID, sigma=sigma * (1 + 1e-8)))
    assert privacy_filter.admits(below * 4)


def test_the_pure_certificate_admits_basic_composition_exactly():
    """Pure fits compose by addition; 0.125 is exact in binary, so 8 fill ε = 1 (the 9th is refused)."""
    privacy_filter = PrivacyFilter.for_budget(1.0, 1e-6, DEFAULT_GRID)
    pure = PrivacyCost.pure_dp(0.125)
    reading = privacy_filter.measure(pure * 7)
    assert reading.certificate == "pure" and reading.epsilon == pytest.approx(0.875)
    assert privacy_filter.admits(pure * 7)
    assert not privacy_filter.admits(pure * 8)  # ε = 1 exactly: refused by the rounding against the user
    assert privacy_filter.admits(PrivacyCost.pure_dp(0.125 * (1 - 1e-9)) * 8)
    assert not privacy_filter.admits(pure * 9)
    # the first pinned order alone would stop much earlier
    first = privacy_filter.order_indices[0]
    assert (pure * 7).rdp[first] > privacy_filter.order_budgets[0]


def test_a_gaussian_kills_the_pure_certificate():
    privacy_filter = PrivacyFilter.for_budget(1.0, 1e-6, DEFAULT_GRID)
    mixed = PrivacyCost.pure_dp(0.5) + PrivacyCost(gaussian_rdp(DEFAULT_GRID, sigma=100.0))
    reading = privacy_filter.measure(mixed)
    assert reading.pure_share == math.inf and reading.certificate == "order"


def test_no_bound_at_the_pinned_orders_means_no_order_certificate():
    privacy_filter = PrivacyFilter.for_budget(1.0, 1e-6, DEFAULT_GRID)
    capped = PrivacyCost.approximate_rdp(DEFAULT_GRID.orders * 1e-4, 1e-12, order_cap=privacy_filter.order)
    reading = privacy_filter.measure(capped)
    assert reading.order_share == math.inf and reading.epsilon == math.inf and not privacy_filter.admits(capped)
    above = PrivacyCost.approximate_rdp(DEFAULT_GRID.orders * 1e-4, 1e-12, order_cap=privacy_filter.order + 1)
    reading = privacy_filter.measure(above)  # finite at α* only: certified there
    assert privacy_filter.admits(above) and reading.certifying_order == privacy_filter.order


def test_the_second_order_certifies_pure_parts_with_a_small_gaussian():
    """A pure ε = 0.8 part plus a Gaussian of 1% of the budget's zCDP ρ (objective perturbation's shape) fits a
    budget of 1 only through the second pinned order."""
    privacy_filter = PrivacyFilter.for_budget(1.0, 1e-6, DEFAULT_GRID)
    shaped = PrivacyCost.pure_dp(0.8) + PrivacyCost(gaussian_rdp(DEFAULT_GRID, sigma=100.0))
    reading = privacy_filter.measure(shaped)
    assert privacy_filter.admits(shaped) and reading.certifying_order == privacy_filter.orders[1] == 256.0
    assert shaped.rdp[privacy_filter.order_indices[0]] > privacy_filter.order_budgets[0]


def test_delta_parts_use_their_part_of_the_pot_and_each_allowance_halves_what_is_left():
    """δ parts draw on δ_D = δ_A − δ_S = δ_A/2 by default (condition (a1)); each allowance is half of what is left."""
    privacy_filter = PrivacyFilter.for_budget(1.0, 1e-6, DEFAULT_GRID)
    assert privacy_filter.approximate_delta == pytest.approx(1e-7)
    assert privacy_filter.slack_delta == privacy_filter.parts_delta == 0.5e-7
    committed = PrivacyCost.zero()
    for _ in range(30):
        allowance = privacy_filter.allowance(committed)
        fit = PrivacyCost.approximate_dp(0.01, allowance.delta)
        assert privacy_filter.admits(committed + fit)
        committed = committed + fit
    assert privacy_filter.delta_parts(committed) <= privacy_filter.parts_delta
    assert privacy_filter.allowance(committed).delta == pytest.approx(0.5e-7 / 2**31, rel=1e-5, abs=0)
    assert not privacy_filter.admits(committed + PrivacyCost.approximate_dp(0.01, 1e-7))
    # the δ parts leave the slacks' part untouched
    assert privacy_filter.allowance(committed).slack == privacy_filter.allowance(PrivacyCost.zero()).slack == 0.25e-7
    # an approximate-RDP slack weighs k (1 + e^ε_max) in its part δ_S
    slack = privacy_filter.allowance(PrivacyCost.zero()).max_slack
    assert slack == pytest.approx(0.25e-7 / (2 * (1 + math.e)), rel=1e-12, abs=0)
    capped = PrivacyCost.approximate_rdp(DEFAULT_GRID.orders * 1e-4, slack * 1.5)
    assert privacy_filter.admits(capped) and not privacy_filter.admits(capped * 3)


def test_admission_checks_each_part_of_the_pot_on_its_own():
    """(a1) D ≤ δ_A − δ_S and (a2) k(1 + e^ε_max)·A ≤ δ_S: a fit that the old joint rule D + k(1 + e^ε)A ≤ δ_A
    would take (one part empty, the other over its share) is refused, and each part's edge is admitted exactly."""
    privacy_filter = PrivacyFilter.for_budget(1.0, 1e-6, DEFAULT_GRID, approximate_delta=1e-7, slack_delta=3e-8)
    weight = privacy_filter.slack_weight
    assert privacy_filter.parts_delta == pytest.approx(7e-8, rel=1e-15)
    small = DEFAULT_GRID.orders * 1e-4

    def slack_fit(used: float) -> PrivacyCost:  # an approximate-RDP fit whose weighted slack is ``used``
        return PrivacyCost.approximate_rdp(small, used / weight)

    edge_parts = PrivacyCost.approximate_dp(0.01, privacy_filter.parts_delta)
    assert privacy_filter.admits(edge_parts)
    over_parts = PrivacyCost.approximate_dp(0.01, 9e-8)  # D + k(1 + e^ε)A = 9e-8 ≤ δ_A: the old rule took it
    reading = privacy_filter.measure(over_parts)
    assert reading.delta_used < privacy_filter.approximate_delta and not reading.delta_fits
    assert not privacy_filter.admits(over_parts) and reading.delta_parts == pytest.approx(9e-8)
    over_slack = slack_fit(6e-8)  # likewise: 6e-8 ≤ δ_A, but above δ_S = 3e-8
    reading = privacy_filter.measure(over_slack)
    assert reading.delta_used < privacy_filter.approximate_delta and not privacy_filter.admits(over_slack)
    assert reading.slack_used == pytest.approx(6e-8) and reading.share == math.inf
    both = edge_parts + slack_fit(2.9e-8)  # both parts near full, each within its own
    assert privacy_filter.admits(both)
    assert privacy_filter.measure(both).delta_used == pytest.approx(9.9e-8)
    assert not privacy_filter.admits(both + slack_fit(0.2e-8))
    assert not privacy_filter.admits(both + PrivacyCost.approximate_dp(0.01, 1e-9))
    allowance = privacy_filter.allowance(both)
    assert allowance.delta == 0.0 and allowance.slack == pytest.approx(0.05e-8) and allowance.max_slack > 0


def test_the_slack_part_is_a_public_parameter_within_the_pot():
    privacy_filter = PrivacyFilter.for_budget(1.0, 1e-6, DEFAULT_GRID, approximate_delta=1e-7, slack_delta=0.0)
    assert privacy_filter.parts_delta == 1e-7 and privacy_filter.allowance(PrivacyCost.zero()).max_slack == 0.0
    assert not privacy_filter.admits(PrivacyCost.approximate_rdp(DEFAULT_GRID.orders * 1e-4, 1e-20))
    assert privacy_filter.admits(PrivacyCost.approximate_dp(0.01, 1e-7))
    everything = PrivacyFilter.for_budget(1.0, 1e-6, DEFAULT_GRID, approximate_delta=1e-7, slack_delta=1e-7)
    assert everything.parts_delta == 0.0 and not everything.admits(PrivacyCost.approximate_dp(0.01, 1e-20))
    assert PrivacyFilter.for_budget(1.0, 1e-6, DEFAULT_GRID, approximate_delta=0.0).slack_delta == 0.0
    for bad in (1.0000001e-7, -1e-12, float("nan"), float("inf")):
        with pytest.raises(PrivacyParameterError) as error:
            PrivacyFilter.for_budget(1.0, 1e-6, DEFAULT_GRID, approximate_delta=1e-7, slack_delta=bad)
        assert error.value.parameter == "slack_delta"
    with pytest.raises(PrivacyParameterError) as error:  # a stored filter is checked alike
        PrivacyFilter(1.0, 1e-6, DEFAULT_GRID, everything.orders, everything.order_deltas, 1e-7, 2e-7)
    assert error.value.parameter == "slack_delta"


def test_an_empty_pot_refuses_every_delta_part():
    privacy_filter = PrivacyFilter.for_budget(1.0, 1e-6, DEFAULT_GRID, approximate_delta=0.0)
    assert privacy_filter.rdp_delta + privacy_filter.gdp_delta == 1e-6
    assert not privacy_filter.admits(PrivacyCost.approximate_dp(0.1, 1e-15))
    assert privacy_filter.admits(PrivacyCost.approximate_dp(0.1, 0.0))
    assert privacy_filter.allowance(PrivacyCost.zero()).delta == 0.0


@pytest.mark.parametrize("pot", [1e-6, 2e-6, -1e-9, float("nan")])
def test_the_pot_must_lie_below_delta(pot):
    with pytest.raises(PrivacyParameterError) as error:
        PrivacyFilter.for_budget(1.0, 1e-6, DEFAULT_GRID, approximate_delta=pot)
    assert error.value.parameter == "approximate_delta"


def test_the_filter_measure_is_monotone_in_the_cost():
    privacy_filter = PrivacyFilter.for_budget(2.0, 1e-5, DEFAULT_GRID)
    rng = np.random.default_rng(5)
    for _ in range(50):
        base = PrivacyCost(gaussian_rdp(DEFAULT_GRID, sigma=float(rng.uniform(5, 50))))
        extra = PrivacyCost.pure_dp(float(rng.uniform(0, 0.3)))
        assert privacy_filter.measure(base + extra).epsilon >= privacy_filter.measure(base).epsilon


@pytest.mark.parametrize(("epsilon", "delta"), BUDGETS)
def test_the_gdp_certificate_admits_gaussians_up_to_its_mu_and_no_further(epsilon, delta):
    """k Gaussian fits of μ each are admitted by the GDP certificate while k·μ² ≤ μ_G², and μ_G keeps δ_G at ε_max."""
    privacy_filter = PrivacyFilter.for_budget(epsilon, delta, DEFAULT_GRID)
    mu_g = privacy_filter.gdp_mu
    assert gaussian_dp_delta(mu_g, epsilon) <= privacy_filter.gdp_delta
    assert gaussian_dp_delta(mu_g * (1 + 1e-7), epsilon) > privacy_filter.gdp_delta
    fit = PrivacyCost.gaussian(DEFAULT_GRID, sigma=10.0, sensitivity=1.0, coordinates=50)  # μ² = 0.01
    fits = math.floor(mu_g**2 / 0.01 * (1 - 1e-9))
    reading = privacy_filter.measure(fit * fits)
    assert reading.gdp_share == pytest.approx(fits * 0.01 / mu_g**2, rel=1e-9) and reading.gdp_share <= 1.0
    assert privacy_filter.admits(fit * fits)
    if reading.certificate == "gaussian":  # the orders would not have admitted as many
        assert reading.order_share > reading.gdp_share
    assert privacy_filter.measure(fit * (fits + 1)).gdp_share > 1.0


def test_the_gdp_certificate_needs_every_fit_gaussian_and_a_v3_filter():
    privacy_filter = PrivacyFilter.for_budget(1.0, 1e-6, DEFAULT_GRID)
    gaussian = PrivacyCost.gaussian(DEFAULT_GRID, sigma=20.0, sensitivity=1.0, count=30, coordinates=10)
    reading = privacy_filter.measure(gaussian)
    assert reading.certificate == "gaussian" and reading.share == reading.gdp_share < reading.order_share
    mixed = gaussian + PrivacyCost.pure_dp(0.01)
    assert privacy_filter.measure(mixed).gdp_share == math.inf  # a pure fit has no GDP bound: the orders measure it
    assert privacy_filter.measure(mixed).certificate == "order"
    bare = PrivacyCost(gaussian.rdp, DEFAULT_GRID)  # the same curve, claiming no GDP bound
    assert privacy_filter.measure(bare).gdp_share == math.inf
    today = PrivacyFilter.for_budget(1.0, 1e-6, DEFAULT_GRID, gdp_share=0.0)
    assert today.measure(gaussian).gdp_share == math.inf and today.measure(gaussian).certificate == "order"
    with pytest.raises(PrivacyParameterError) as error:  # a stored v2 filter cannot carry a GDP share
        PrivacyFilter(1.0, 1e-6, DEFAULT_GRID, today.orders, today.order_deltas, 1e-7, 5e-8, 1e-9, FILTER_VERSION_V2)
    assert error.value.parameter == "gdp_delta"
    with pytest.raises(PrivacyParameterError):  # nor can a split exceed δ_max
        PrivacyFilter(1.0, 1e-6, DEFAULT_GRID, today.orders, today.order_deltas, 1e-7, 5e-8, 1e-8)
