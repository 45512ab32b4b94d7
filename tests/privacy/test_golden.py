"""Golden values from published accountants (anchors-dp-systems.md §1.3; Opacus and dp_accounting tests)."""

import numpy as np
import pytest

from privfit.privacy import (
    DEFAULT_GRID,
    GRIDS,
    PrivacyCost,
    delta_at_epsilon,
    epsilon_at_delta,
    gaussian_rdp,
    poisson_noise_multiplier,
    poisson_subsampled_gaussian_rdp,
    tree_aggregation_rdp,
    zcdp_rdp,
)


def test_default_grid_is_dp_accountings_156_orders():
    orders = DEFAULT_GRID.orders
    assert DEFAULT_GRID.name == "dp-accounting-156/v1"
    assert orders.size == 156
    np.testing.assert_allclose(orders[:99], np.arange(11, 110) / 10.0)
    np.testing.assert_array_equal(orders[99:152], np.arange(11, 64))
    np.testing.assert_array_equal(orders[152:], [128, 256, 512, 1024])
    assert not orders.flags.writeable


@pytest.mark.parametrize(
    ("sigma", "epsilon", "order"),
    [(1.0, 4.7285, 5.4), (5.0, 0.7945, 22.0)],
)
def test_gaussian_golden(sigma, epsilon, order):
    result = epsilon_at_delta(DEFAULT_GRID, gaussian_rdp(DEFAULT_GRID, sigma=sigma), 1e-5)
    assert result.epsilon == pytest.approx(epsilon, abs=5e-5)
    assert result.optimal_order == order
    assert not result.at_grid_edge


def test_gaussian_golden_on_coarse_privatekube_grid():
    grid = GRIDS["privatekube-12/v1"]
    result = epsilon_at_delta(grid, gaussian_rdp(grid, sigma=1.0), 1e-5)
    assert result.epsilon == pytest.approx(4.7527, abs=5e-5)
    assert result.optimal_order == 5.0


def test_composed_gaussian_equals_single_gaussian_of_same_rho():
    # σ = 10 composed 100 times has ρ = 100/(2·100) = 0.5, the same as one σ = 1 Gaussian.
    composed = epsilon_at_delta(DEFAULT_GRID, 100 * gaussian_rdp(DEFAULT_GRID, sigma=10.0), 1e-5)
    assert composed.epsilon == pytest.approx(4.7285, abs=5e-5)
    assert epsilon_at_delta(DEFAULT_GRID, zcdp_rdp(DEFAULT_GRID, rho=0.5), 1e-5).epsilon == pytest.approx(
        composed.epsilon, rel=1e-12
    )


@pytest.mark.parametrize(
    ("q", "noise_multiplier", "steps", "epsilon", "order"),
    [
        (0.01, 1.1, 10_000, 5.6320, 4.7),
        (0.04, 1.5, 2250, 7.3293, 3.9),
        (256 / 60000, 1.1, 14_062, 2.5966, 8.1),
    ],
)
def test_poisson_subsampled_gaussian_golden(q, noise_multiplier, steps, epsilon, order):
    curve = steps * poisson_subsampled_gaussian_rdp(DEFAULT_GRID, q=q, noise_multiplier=noise_multiplier)
    result = epsilon_at_delta(DEFAULT_GRID, curve, 1e-5)
    assert result.epsilon == pytest.approx(epsilon, rel=1e-4)
    assert result.optimal_order == order


def test_opacus_rdp_value_for_q004_sigma15():
    # opacus/tests/accountants_test.py asserts 7.32911117143; fractional-order numerics differ by ~3e-5.
    curve = 2250 * poisson_subsampled_gaussian_rdp(DEFAULT_GRID, q=0.04, noise_multiplier=1.5)
    assert epsilon_at_delta(DEFAULT_GRID, curve, 1e-5).epsilon == pytest.approx(7.32911117143, rel=1e-4)


def test_opacus_noise_multiplier_for_eps8_q004_90_epochs():
    # Opacus get_noise_multiplier(ε=8, δ=1e-5, q=0.04, epochs=90) = 1.416 (to 4 places); 90 epochs = 2250 steps.
    result = poisson_noise_multiplier(8.0, 1e-5, q=0.04, steps=2250, relation="add_remove")
    assert result.noise == pytest.approx(1.416, abs=5e-4)
    assert result.epsilon <= 8.0


def test_dp_accounting_pure_dp_curve_value_and_inverse():
    orders = np.arange(2, 33)
    rdp = np.full(orders.shape, 1.1)
    result = epsilon_at_delta(orders, rdp, 1e-5)
    assert result.epsilon == pytest.approx(1.32783806176, rel=1e-11)
    assert result.optimal_order == 32 and result.at_grid_edge
    assert delta_at_epsilon(orders, rdp, result.epsilon).delta == pytest.approx(1e-5, rel=1e-9)


def test_dp_accounting_gaussian_noise_multiplier_gives_eps1_delta1e6_on_fine_grid():
    orders = np.linspace(1.0, 100.0, 99_001)
    curve = gaussian_rdp(orders, sigma=4.530877117)
    assert epsilon_at_delta(orders, curve, 1e-6).epsilon == pytest.approx(1.0, abs=1e-6)
    assert delta_at_epsilon(orders, curve, 1.0).delta == pytest.approx(1e-6, rel=1e-5)


def test_dp_accounting_poisson_rdp_at_selected_orders():
    orders = [1.5, 2.5, 5, 50, 100, np.inf]
    curve = 50 * poisson_subsampled_gaussian_rdp(orders, q=0.01, noise_multiplier=2.5)
    expected = [6.70579741e-04, 1.08548710e-03, 2.18075656e-03, 2.38460375e-02, 1.67416308e02, np.inf]
    np.testing.assert_allclose(curve, expected, rtol=1e-4)


@pytest.mark.parametrize(("sigma", "bound", "measured"), [(1.13, 19.74, 18.710), (8.83, 2.04, 1.773)])
def test_tree_aggregation_dp_accounting_values(sigma, bound, measured):
    curve = tree_aggregation_rdp(DEFAULT_GRID, sigma=sigma, steps=1600)
    epsilon = epsilon_at_delta(DEFAULT_GRID, curve, 1e-6).epsilon
    assert epsilon < bound
    assert epsilon == pytest.approx(measured, abs=1e-3)


def test_rdp_ledger_admits_83_jobs_of_eps_01():
    # anchors §1.3: jobs each a Gaussian calibrated to (0.1, 1e-6) alone; budget (1, 1e-6) admits 83 of them.
    from privfit.privacy import gaussian_sigma

    sigma = gaussian_sigma(0.1, 1e-6).noise
    job = PrivacyCost(gaussian_rdp(DEFAULT_GRID, sigma=sigma))
    admitted = max(k for k in range(1, 200) if (job * k).epsilon(1e-6).epsilon <= 1.0)
    assert admitted == 83
