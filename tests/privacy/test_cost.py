"""PrivacyCost: approximate-DP events, ledger totals, grid-edge flags, generators."""

import math

import numpy as np
import pytest

from privfit.privacy import (
    DEFAULT_GRID,
    PrivacyCost,
    PrivacyParameterError,
    compose_deltas,
    epsilon_at_delta,
    gaussian_rdp,
    make_generator,
    pure_dp_rdp,
    secure_generator,
    total_epsilon,
)


def test_approximate_dp_event_shares_the_target_delta_like_dp_accounting():
    gaussian = PrivacyCost(gaussian_rdp(DEFAULT_GRID, sigma=3.0))
    event = PrivacyCost.approximate_dp(0.5, 1e-7)
    total = gaussian + event
    assert total.extra_delta == pytest.approx(1e-7)
    expected_rdp_delta = 1 - (1 - 1e-5) / (1 - 1e-7)
    expected = epsilon_at_delta(DEFAULT_GRID, gaussian.rdp + pure_dp_rdp(DEFAULT_GRID, epsilon=0.5), expected_rdp_delta)
    assert total.epsilon(1e-5).epsilon == pytest.approx(expected.epsilon, rel=1e-12)
    assert total.epsilon(1e-5).delta == 1e-5


def test_extra_delta_at_or_above_target_gives_infinite_epsilon():
    cost = PrivacyCost.approximate_dp(0.1, 1e-5)
    assert math.isinf(cost.epsilon(1e-5).epsilon)
    assert math.isinf(cost.epsilon(1e-6).epsilon)


def test_pure_dp_event_converts_to_at_most_its_epsilon_plus_grid_slack():
    cost = PrivacyCost.approximate_dp(1.0, 0.0)
    converted = cost.epsilon(1e-6).epsilon
    # α = 1024 is the grid's top: log(1 − 1/α) − (log δ + log α)/(α − 1) is the conversion slack there.
    slack = math.log1p(-1 / 1024) - (math.log(1e-6) + math.log(1024)) / 1023
    assert converted > 1.0 - 1e-9
    assert converted <= 1.0 + slack


def test_delta_composition_is_one_minus_product():
    deltas = [1e-6, 2e-7, 0.0, 5e-6]
    assert compose_deltas(deltas) == pytest.approx(1 - np.prod([1 - d for d in deltas]), rel=1e-12)
    assert compose_deltas([]) == 0.0
    with pytest.raises(PrivacyParameterError):
        compose_deltas([1.5])


def test_ledger_of_ten_thousand_entries_converts_in_one_vectorised_pass():
    rng = np.random.default_rng(0)
    sigmas = rng.uniform(50, 500, size=10_000)
    curves = DEFAULT_GRID.orders[None, :] / (2 * sigmas[:, None] ** 2)
    extra = np.full(10_000, 1e-12)
    result = total_epsilon(curves, extra, 1e-5)
    rho = np.sum(1 / (2 * sigmas**2))
    expected = PrivacyCost(rho * DEFAULT_GRID.orders, extra_delta=compose_deltas(extra)).epsilon(1e-5)
    assert result.epsilon == pytest.approx(expected.epsilon, rel=1e-12)
    with pytest.raises(PrivacyParameterError, match="curves"):
        total_epsilon(curves[:, :10], None, 1e-5)


def test_grid_edge_flag():
    tiny = gaussian_rdp(DEFAULT_GRID, sigma=2000.0)  # optimum wants α > 1024
    assert epsilon_at_delta(DEFAULT_GRID, tiny, 1e-5).at_grid_edge
    assert not epsilon_at_delta(DEFAULT_GRID, gaussian_rdp(DEFAULT_GRID, sigma=1.0), 1e-5).at_grid_edge


def test_kl_shortcut_gives_zero_and_tiny_negative_roundoff_is_zero():
    assert epsilon_at_delta(DEFAULT_GRID, np.zeros(156), 1e-5).epsilon == 0.0
    assert epsilon_at_delta(DEFAULT_GRID, np.full(156, -1e-15), 1e-5).epsilon == 0.0
    assert epsilon_at_delta(DEFAULT_GRID, np.full(156, 1e-11), 1e-5).epsilon == 0.0


def test_costs_are_immutable():
    cost = PrivacyCost(gaussian_rdp(DEFAULT_GRID, sigma=1.0))
    with pytest.raises(ValueError):
        cost.rdp[0] = 0.0


def test_generators_are_os_seeded_unless_data_is_public():
    a, b = secure_generator(), secure_generator()
    assert not np.array_equal(a.standard_normal(8), b.standard_normal(8))
    with pytest.raises(PrivacyParameterError, match="seed"):
        make_generator(42)
    seeded = make_generator(42, data_is_public=True).standard_normal(4)
    np.testing.assert_array_equal(seeded, make_generator(42, data_is_public=True).standard_normal(4))
    assert isinstance(make_generator(), np.random.Generator)


# ---------------------------------------------------------------------------------------------------------
# approximate RDP: curves valid below an order cap plus a two-sided slack (Carmon et al. 2023, Lemma 3, Cor. 1)
# ---------------------------------------------------------------------------------------------------------


def _linear_curve(tau: float) -> np.ndarray:
    return DEFAULT_GRID.orders * tau


@pytest.mark.parametrize(("tau", "slack", "cap"), [(0.01, 1e-8, 50.0), (0.002, 1e-7, 1e9), (0.05, 5e-8, 8.0)])
def test_approximate_rdp_conversion_is_a_valid_fixed_point_of_corollary_1(tau: float, slack: float, cap: float):
    """The returned ε satisfies its own condition: converting the curve at δ' = δ − (1 + e^ε)δ_a gives ≤ ε, and
    it is no larger than Cor. 1's closed form ε_α + log(1/δ')/(α − 1) over the orders below the cap."""
    delta = 1e-6
    cost = PrivacyCost.approximate_rdp(_linear_curve(tau), slack, DEFAULT_GRID, order_cap=cap)
    assert np.all(np.isinf(cost.rdp[DEFAULT_GRID.orders >= cap])) and cost.approx_delta == slack
    result = cost.epsilon(delta)
    remaining = delta - (1 + math.exp(result.epsilon)) * slack
    assert remaining > 0
    assert PrivacyCost(cost.rdp, DEFAULT_GRID).epsilon(remaining).epsilon <= result.epsilon
    orders = DEFAULT_GRID.orders[(DEFAULT_GRID.orders > 1.01) & (DEFAULT_GRID.orders < cap)]
    corollary = np.min(orders * tau + math.log(1 / remaining) / (orders - 1))
    assert result.epsilon <= corollary
    # the slack costs something, and a slack that eats the whole δ leaves no finite ε
    assert result.epsilon > PrivacyCost(cost.rdp, DEFAULT_GRID).epsilon(delta).epsilon
    assert math.isinf(PrivacyCost.approximate_rdp(_linear_curve(tau), delta / 2, DEFAULT_GRID).epsilon(delta).epsilon)


def test_approximate_rdp_composes_additively_and_with_the_other_delta_kinds():
    a = PrivacyCost.approximate_rdp(_linear_curve(0.01), 1e-8, DEFAULT_GRID, order_cap=40.0)
    b = PrivacyCost.approximate_dp(0.3, 1e-8)
    total = a + a + b
    assert total.approx_delta == pytest.approx(2e-8) and total.extra_delta == pytest.approx(1e-8)
    np.testing.assert_array_equal(total.rdp, 2 * a.rdp + b.rdp)
    assert (a * 2).approx_delta == pytest.approx(2e-8) and np.array_equal((a * 2).rdp, 2 * a.rdp)
    assert (a * 0).epsilon(1e-6).epsilon == 0.0  # no NaN from 0·∞
    assert total.epsilon(1e-6).epsilon > (a + a).epsilon(1e-6).epsilon > a.epsilon(1e-6).epsilon
