"""Bad parameters raise PrivacyParameterError naming the parameter."""

import math

import numpy as np
import pytest

from privfit.privacy import (
    DEFAULT_GRID,
    OrderGrid,
    PrivacyCost,
    PrivacyParameterError,
    delta_at_epsilon,
    epsilon_at_delta,
    gaussian_rdp,
    gaussian_sigma,
    get_grid,
    laplace_rdp,
    poisson_subsampled_gaussian_rdp,
    pure_dp_rdp,
    sampled_without_replacement_gaussian_rdp,
    tree_aggregation_rdp,
)

CURVE = gaussian_rdp(DEFAULT_GRID, sigma=1.0)


@pytest.mark.parametrize(
    ("call", "parameter"),
    [
        (lambda: gaussian_rdp(DEFAULT_GRID, sigma=0.0), "sigma"),
        (lambda: gaussian_rdp(DEFAULT_GRID, sigma=-1.0), "sigma"),
        (lambda: gaussian_rdp(DEFAULT_GRID, sigma=math.nan), "sigma"),
        (lambda: gaussian_rdp(DEFAULT_GRID, sigma=math.inf), "sigma"),
        (lambda: gaussian_rdp(DEFAULT_GRID, sigma=1.0, sensitivity=-1.0), "sensitivity"),
        (lambda: gaussian_rdp([], sigma=1.0), "orders"),
        (lambda: gaussian_rdp([0.5, 2.0], sigma=1.0), "orders"),
        (lambda: gaussian_rdp([math.nan], sigma=1.0), "orders"),
        (lambda: laplace_rdp(DEFAULT_GRID, scale=0.0), "scale"),
        (lambda: pure_dp_rdp(DEFAULT_GRID, epsilon=-0.1), "epsilon"),
        (lambda: poisson_subsampled_gaussian_rdp(DEFAULT_GRID, q=0.0, noise_multiplier=1.0), "q"),
        (lambda: poisson_subsampled_gaussian_rdp(DEFAULT_GRID, q=1.5, noise_multiplier=1.0), "q"),
        (lambda: poisson_subsampled_gaussian_rdp(DEFAULT_GRID, q=math.nan, noise_multiplier=1.0), "q"),
        (lambda: poisson_subsampled_gaussian_rdp(DEFAULT_GRID, q=0.1, noise_multiplier=0.0), "noise_multiplier"),
        (lambda: sampled_without_replacement_gaussian_rdp(DEFAULT_GRID, q=-0.1, noise_multiplier=1.0), "q"),
        (lambda: tree_aggregation_rdp(DEFAULT_GRID, sigma=1.0, steps=0), "steps"),
        (lambda: tree_aggregation_rdp(DEFAULT_GRID, sigma=1.0, steps=[]), "steps"),
        (lambda: tree_aggregation_rdp(DEFAULT_GRID, sigma=1.0, steps=2.5), "steps"),
        (lambda: epsilon_at_delta(DEFAULT_GRID, CURVE, 0.0), "delta"),
        (lambda: epsilon_at_delta(DEFAULT_GRID, CURVE, 1.0), "delta"),
        (lambda: epsilon_at_delta(DEFAULT_GRID, CURVE, math.nan), "delta"),
        (lambda: epsilon_at_delta(DEFAULT_GRID, CURVE[:-1], 1e-5), "rdp"),
        (lambda: epsilon_at_delta(DEFAULT_GRID, np.full(156, math.nan), 1e-5), "rdp"),
        (lambda: epsilon_at_delta(DEFAULT_GRID, np.full(156, -1.0), 1e-5), "rdp"),
        (lambda: delta_at_epsilon(DEFAULT_GRID, CURVE, -1.0), "epsilon"),
        (lambda: gaussian_sigma(-1.0, 1e-5), "epsilon"),
        (lambda: gaussian_sigma(1.0, 2.0), "delta"),
        (lambda: gaussian_sigma(1.0, 1e-5, count=0), "count"),
        (lambda: PrivacyCost(CURVE[:10]), "rdp"),
        (lambda: PrivacyCost(CURVE, extra_delta=1.0), "extra_delta"),
        (lambda: PrivacyCost.approximate_dp(1.0, 1.5), "delta"),
        (lambda: OrderGrid("empty/v1", np.array([])), "orders"),
        (lambda: OrderGrid("unsorted/v1", np.array([3.0, 2.0])), "orders"),
        (lambda: get_grid("nope"), "grid"),
    ],
)
def test_bad_parameter_raises_clear_error_naming_it(call, parameter):
    with pytest.raises(PrivacyParameterError) as info:
        call()
    assert info.value.parameter == parameter
    assert str(info.value).startswith(f"{parameter}:")


def test_composing_costs_on_different_grids_is_refused():
    other = get_grid("opacus-151/v1")
    with pytest.raises(PrivacyParameterError, match="grid"):
        PrivacyCost(CURVE) + PrivacyCost(gaussian_rdp(other, sigma=1.0), other)


def test_unreachable_target_is_a_clear_error():
    with pytest.raises(PrivacyParameterError, match="not reachable"):
        from privfit.privacy import calibrate_noise

        calibrate_noise(lambda s: PrivacyCost.approximate_dp(0.0, 0.5), target_epsilon=1.0, delta=1e-5)
