"""The fast calibration of the subsampled Gaussians (issue 23) is never below the generic search, nor below the
σ the previous implementation returned, and exceeds both by a relative 1.3·rtol at most.

The generic search (:func:`calibrate_noise`: bracketing and Brent's method on the whole grid) is the reference
on the same curve; the golden values were computed by privfit's calibration before the window search, the
segmented binomial sums and the caches existed (commit b803d8d).
"""

from __future__ import annotations

import numpy as np
import pytest

from privfit.privacy import DEFAULT_GRID, GRIDS, PrivacyCost, calibrate_noise
from privfit.privacy import calibration as calibration_module
from privfit.privacy.calibration import (
    DEFAULT_RTOL,
    _calibrate_by_orders,
    clear_calibration_caches,
    poisson_noise_multiplier,
    without_replacement_noise_multiplier,
)
from privfit.privacy.subsampled import (
    poisson_subsampled_gaussian_rdp_replace_one,
    sampled_without_replacement_gaussian_rdp,
)

#: (q, steps, ε, δ, σ of the replace-one Poisson calibration before issue 23)
POISSON_GOLDEN = [
    (0.0098, 1000, 0.1, 1e-06, 25.743918548964672),
    (0.0098, 1000, 1.0, 1e-06, 2.96758252959436),
    (0.0098, 1000, 8.0, 1e-06, 0.8731531292688467),
    (0.001, 20000, 0.1, 1e-06, 11.753783908557809),
    (0.001, 20000, 1.0, 1e-06, 1.5659152474103823),
    (0.001, 20000, 8.0, 1e-06, 0.6722093166782779),
    (0.02, 50, 0.1, 1e-06, 11.955612822009595),
    (0.02, 50, 8.0, 1e-06, 0.8312304627544086),
    (0.3, 50, 0.1, 1e-06, 175.97800897019724),
    (0.3, 50, 8.0, 1e-06, 3.237246944553667),
    (0.0098, 1000, 1.0, 1e-05, 2.6689228487029375),
    (0.05, 300, 0.5, 1e-08, 18.26181045843764),
    (0.5, 10, 2.0, 1e-06, 7.9122285734344695),
    (0.9, 5, 4.0, 1e-06, 5.216935453801764),
    (0.0001, 100000, 1.0, 1e-06, 1.1488876153167902),
]

#: (q, steps, ε, δ, σ of the fixed-size (WBK) calibration before issue 23)
WITHOUT_REPLACEMENT_GOLDEN = [
    (0.0098, 1000, 1.0, 1e-06, 2.958615598245787),
    (0.02, 50, 0.1, 1e-06, 12.206757820566963),
    (0.3, 50, 8.0, 1e-06, 3.0497979673513536),
    (0.001, 20000, 1.0, 1e-05, 1.3371578113693965),
]

MAX_EXCESS = (1.0 + DEFAULT_RTOL / 4.0) * (1.0 + DEFAULT_RTOL)


@pytest.fixture(autouse=True)
def _cold_caches():
    """Every case computes afresh (the calibration cache would otherwise answer repeated inputs)."""
    clear_calibration_caches()
    yield


@pytest.mark.parametrize(("q", "steps", "epsilon", "delta", "previous"), POISSON_GOLDEN)
def test_poisson_sigma_is_at_least_the_previous_and_at_most_1_001_times_it(q, steps, epsilon, delta, previous):
    result = poisson_noise_multiplier(epsilon, delta, q=q, steps=steps)
    assert previous <= result.noise <= 1.001 * previous
    curve = poisson_subsampled_gaussian_rdp_replace_one(DEFAULT_GRID, q=q, noise_multiplier=result.noise)
    assert PrivacyCost(steps * curve, DEFAULT_GRID).epsilon(delta).epsilon == result.epsilon <= epsilon


@pytest.mark.parametrize(("q", "steps", "epsilon", "delta", "previous"), WITHOUT_REPLACEMENT_GOLDEN)
def test_without_replacement_sigma_is_at_least_the_previous(q, steps, epsilon, delta, previous):
    result = without_replacement_noise_multiplier(epsilon, delta, q=q, steps=steps)
    assert previous <= result.noise <= 1.001 * previous
    curve = sampled_without_replacement_gaussian_rdp(DEFAULT_GRID, q=q, noise_multiplier=result.noise)
    assert PrivacyCost(steps * curve, DEFAULT_GRID).epsilon(delta).epsilon <= epsilon


def _generic(curve_on, steps, grid, epsilon, delta):
    return calibrate_noise(
        lambda noise: PrivacyCost(steps * curve_on(noise, grid.orders), grid), target_epsilon=epsilon, delta=delta
    )


@pytest.mark.parametrize("grid_name", sorted(GRIDS))
@pytest.mark.parametrize(
    ("q", "steps", "epsilon"),
    [(0.004, 5000, 0.05), (0.01, 400, 0.7), (0.08, 30, 3.0), (0.6, 4, 20.0), (1.0, 10, 1.0), (0.002, 300, 50.0)],
)
def test_window_search_brackets_the_generic_search_on_every_grid(grid_name, q, steps, epsilon):
    grid = GRIDS[grid_name]

    def curve_on(noise, orders):
        return poisson_subsampled_gaussian_rdp_replace_one(orders, q=q, noise_multiplier=noise)

    generic = _generic(curve_on, steps, grid, epsilon, 1e-6)
    fast = _calibrate_by_orders(curve_on, steps, grid, epsilon, 1e-6, DEFAULT_RTOL, "noise_multiplier")
    assert generic.noise <= fast.noise <= generic.noise * MAX_EXCESS
    assert fast.epsilon <= epsilon


def test_a_best_order_the_coarse_search_cannot_see_is_found_by_the_whole_grid_check():
    """A synthetic curve whose only useful order is 7.3 (not coarse: 2α is not an integer), far from the coarse
    optimum's window: the whole-grid proof fails, the window grows, and the answer is the generic one."""
    grid = DEFAULT_GRID
    special = np.isclose(grid.orders, 7.3)
    visited: list[np.ndarray] = []

    def curve_on(noise, orders):
        visited.append(np.asarray(orders))
        base = np.where(np.isclose(orders, 7.3), 1.0, 1000.0 + orders)
        return base / noise**2

    generic = _generic(curve_on, 1, grid, 3.0, 1e-6)
    assert generic.optimal_order == 7.3 and special.sum() == 1
    visited.clear()
    fast = _calibrate_by_orders(curve_on, 1, grid, 3.0, 1e-6, DEFAULT_RTOL, "noise")
    assert generic.noise <= fast.noise <= generic.noise * MAX_EXCESS
    assert fast.optimal_order == 7.3
    coarse = int(np.sum(2 * grid.orders == np.floor(2 * grid.orders)))
    windows = [v for v in visited if v.size not in (coarse, grid.orders.size)]
    assert windows and not np.any(np.isclose(windows[0], 7.3)), "the first window should miss 7.3"


def test_edge_cases_keep_the_generic_answers_and_messages():
    def negligible(noise, orders):
        return orders * 1e-30 / noise**2

    generic = _generic(negligible, 1, DEFAULT_GRID, 1.0, 1e-6)
    assert generic.noise < 2e-6
    assert _calibrate_by_orders(negligible, 1, DEFAULT_GRID, 1.0, 1e-6, DEFAULT_RTOL, "noise") == generic
    with pytest.raises(calibration_module.PrivacyParameterError, match="not reachable"):
        poisson_noise_multiplier(1e-12, 1e-300, q=1.0, steps=10**9)


def test_cached_curves_are_copies_and_calibrations_are_reused():
    first = poisson_subsampled_gaussian_rdp_replace_one(DEFAULT_GRID, q=0.01, noise_multiplier=1.3)
    first[:] = -1.0
    again = poisson_subsampled_gaussian_rdp_replace_one(DEFAULT_GRID, q=0.01, noise_multiplier=1.3)
    fresh = poisson_subsampled_gaussian_rdp_replace_one(DEFAULT_GRID.orders, q=0.01, noise_multiplier=1.3)
    np.testing.assert_array_equal(again, fresh)
    assert (again > 0).all()
    one = poisson_noise_multiplier(1.0, 1e-6, q=0.01, steps=100)
    assert poisson_noise_multiplier(1.0, 1e-6, q=0.01, steps=100) is one
    assert poisson_noise_multiplier.cache_info().hits >= 1
