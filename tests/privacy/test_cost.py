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
