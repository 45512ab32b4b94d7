"""The fast calibration of the subsampled Gaussians (issue 23) is never below the generic search, nor below the
σ the previous implementation returned, and exceeds both by a relative 1.3·rtol at most; and its cost is bounded
(issue 35: counted in evaluations, never timed).

The generic search (:func:`calibrate_noise`: bracketing and Brent's method on the whole grid) is the reference
on the same curve; the golden values were computed by privfit's calibration before the window search, the
segmented binomial sums and the caches existed (commit b803d8d).
"""

from __future__ import annotations

import numpy as np
import pytest

from privfit.privacy import DEFAULT_GRID, GRIDS, PrivacyCost, calibrate_noise
from privfit.privacy import calibration as calibration_module
from privfit.privacy import subsampled as subsampled_module
from privfit.privacy.calibration import (
    _MAX_STEP_UPS,
    DEFAULT_RTOL,
    _calibrate_by_orders,
    _safe_above,
    clear_calibration_caches,
    poisson_noise_multiplier,
    without_replacement_noise_multiplier,
)
from privfit.privacy.subsampled import (
    poisson_subsampled_gaussian_rdp_replace_one,
    sampled_without_replacement_gaussian_rdp,
)
from privfit.solvers import PublicMetadata, get_solver

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


# ---------------------------------------------------------------------------------------------------------
# issue 35: bounded request cost, pinned by counting the expensive work (no timed test)
# ---------------------------------------------------------------------------------------------------------


@pytest.fixture
def forward_difference_levels(monkeypatch):
    """The forward-difference levels each without-replacement curve evaluation computes (its dominant cost)."""
    levels: list[int] = []
    original = subsampled_module._forward_differences_upper_log

    def counted(cgf, stop_above=None):
        upper = original(cgf, stop_above)
        levels.append(int(np.isfinite(upper).sum()))
        return upper

    monkeypatch.setattr(subsampled_module, "_forward_differences_upper_log", counted)
    return levels


def test_the_reported_plan_computes_a_bounded_number_of_forward_difference_levels(forward_difference_levels):
    """Issue 35's 15-second estimate: resque_dpsgd, svm, ε = 0.01, fixed-size batches (Adult's metadata). Before,
    its calibration evaluated the curve 36 times with all 258 levels of forward differences each (9,288 levels);
    the coarse search by factors of 16 and the levels that stop where the cheap branch wins leave under 2,000."""
    plan = get_solver("resque_dpsgd").plan(
        {"model": "svm", "sampling": "fixed_size"}, PublicMetadata(n=32_561, d=104, row_norm_bound=3.0),
        target_epsilon=0.01, delta=1e-6,
    )  # fmt: skip
    assert plan.cost.epsilon(1e-6).epsilon <= 0.01
    assert len(forward_difference_levels) <= 30 and sum(forward_difference_levels) <= 2000


def test_an_unreachable_target_is_refused_after_a_few_evaluations(forward_difference_levels):
    """ε = 0.01 at δ = 4e-10 is beyond every noise ≤ 1e8 for this curve: the coarse search reaches 2²⁶ in 8 steps
    and one whole-grid evaluation there decides, with the generic search's message (before: 54 evaluations)."""
    with pytest.raises(calibration_module.PrivacyParameterError, match="not reachable with noise_multiplier ≤ 1e"):
        without_replacement_noise_multiplier(0.01, 4e-10, q=0.01, steps=1000)
    assert len(forward_difference_levels) <= 10


def test_a_curve_non_monotone_in_the_noise_costs_a_bounded_number_of_evaluations():
    """ε(σ) = 1/σ but 10 on [c, 2) with c = (1 + 1e-9)/0.6, just past where 1/σ meets the target 0.6 (rounding can
    make a curve non-monotone): the generic search's step-ups from Brent's root run into the bump, and stop after
    _MAX_STEP_UPS at the bracket's end σ = 2, which meets the target. Before, they would have gone on for the
    800,000 steps of (1 + rtol/4) to 2. The same bound holds for :func:`_safe_above`, which then returns the
    noise its caller proved."""
    target, start = 0.6, (1.0 + 1e-9) / 0.6
    calls: list[float] = []

    def cost_of(noise: float) -> PrivacyCost:
        calls.append(noise)
        return PrivacyCost.pure_dp(10.0 if start <= noise < 2.0 else 1.0 / noise, DEFAULT_GRID)

    result = calibrate_noise(cost_of, target_epsilon=target, delta=1e-6)
    assert result.epsilon <= target and result.noise == 2.0
    assert len(calls) <= 60 + _MAX_STEP_UPS
    calls.clear()

    def only_at_proven(noise: float) -> PrivacyCost:
        calls.append(noise)
        return PrivacyCost.pure_dp(0.1 if noise == 1.7 else 10.0, DEFAULT_GRID)

    safe = _safe_above(only_at_proven, 1.7, 1e-6, target, DEFAULT_RTOL)
    assert safe.noise == 1.7 and safe.epsilon <= target and len(calls) == _MAX_STEP_UPS + 2


def test_a_target_met_only_by_rounding_noise_is_refused_with_a_422_not_a_500():
    """Found by ``benchmarks/request_cost.py`` (resque_dpsgd, batch 222 of n = 775, 40 steps, ε = 0.214 at
    δ = 3e-12 on the 12-order grid, whose largest order 64 cannot reach it): the Poisson curve's integer orders
    summed to exactly A = 1 at σ = 2²⁶, so ε(2²⁶) came out 0 while ε at the neighbouring float was 0.34, and
    Brent's method raised a ValueError (a 500). Now the curve is accurate there and the target is refused."""
    with pytest.raises(calibration_module.PrivacyParameterError, match="not reachable"):
        poisson_noise_multiplier(0.214, 3e-12, q=222 / 775, steps=40, grid=GRIDS["privatekube-12/v1"])
