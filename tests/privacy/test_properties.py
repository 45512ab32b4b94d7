"""Property tests (hypothesis) for monotonicity, additivity and calibration round trips."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privfit.privacy import (
    DEFAULT_GRID,
    PrivacyCost,
    epsilon_at_delta,
    gaussian_rdp,
    gaussian_sigma,
    laplace_rdp,
    laplace_scale,
    poisson_noise_multiplier,
    poisson_subsampled_gaussian_rdp,
    tree_aggregation_rdp,
    tree_aggregation_sigma,
    without_replacement_noise_multiplier,
)

sigmas = st.floats(0.05, 200.0)
deltas = st.floats(1e-12, 0.5)
sensitivities = st.floats(1e-3, 10.0)
rates = st.floats(1e-4, 1.0)
counts = st.integers(1, 10_000)
targets = st.floats(0.05, 20.0)
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def eps(curve, delta):
    return epsilon_at_delta(DEFAULT_GRID, curve, delta).epsilon


@FAST
@given(sigma=sigmas, delta=deltas, count=counts, sensitivity=sensitivities)
def test_epsilon_non_negative_and_monotone_in_every_argument(sigma, delta, count, sensitivity):
    base = eps(count * gaussian_rdp(DEFAULT_GRID, sigma=sigma, sensitivity=sensitivity), delta)
    assert base >= 0
    assert eps(count * gaussian_rdp(DEFAULT_GRID, sigma=sigma * 1.1, sensitivity=sensitivity), delta) <= base
    assert eps(count * gaussian_rdp(DEFAULT_GRID, sigma=sigma, sensitivity=sensitivity), delta * 0.5) >= base
    assert eps((count + 1) * gaussian_rdp(DEFAULT_GRID, sigma=sigma, sensitivity=sensitivity), delta) >= base
    assert eps(count * gaussian_rdp(DEFAULT_GRID, sigma=sigma, sensitivity=sensitivity * 1.1), delta) >= base


@FAST
@given(q=rates, z=st.floats(0.3, 50.0), steps=counts, delta=deltas)
def test_poisson_epsilon_monotone_in_rate_noise_and_steps(q, z, steps, delta):
    base = eps(steps * poisson_subsampled_gaussian_rdp(DEFAULT_GRID, q=q, noise_multiplier=z), delta)
    assert base >= 0
    higher_rate = min(1.0, q * 1.5)
    assert eps(steps * poisson_subsampled_gaussian_rdp(DEFAULT_GRID, q=higher_rate, noise_multiplier=z), delta) >= base
    assert eps(steps * poisson_subsampled_gaussian_rdp(DEFAULT_GRID, q=q, noise_multiplier=z * 1.2), delta) <= base
    assert eps((steps + 7) * poisson_subsampled_gaussian_rdp(DEFAULT_GRID, q=q, noise_multiplier=z), delta) >= base


@FAST
@given(scale=st.floats(0.01, 100.0), steps=st.integers(1, 10**6), sigma=sigmas, delta=deltas)
def test_laplace_and_tree_monotone(scale, steps, sigma, delta):
    assert eps(laplace_rdp(DEFAULT_GRID, scale=scale * 1.1), delta) <= eps(
        laplace_rdp(DEFAULT_GRID, scale=scale), delta
    )
    shallow = eps(tree_aggregation_rdp(DEFAULT_GRID, sigma=sigma, steps=steps), delta)
    assert eps(tree_aggregation_rdp(DEFAULT_GRID, sigma=sigma, steps=2 * steps + 1), delta) >= shallow


@FAST
@given(a=sigmas, b=sigmas, k=st.integers(0, 50), da=st.floats(0, 0.01), db=st.floats(0, 0.01))
def test_composition_is_additive(a, b, k, da, db):
    first = PrivacyCost(gaussian_rdp(DEFAULT_GRID, sigma=a), extra_delta=da)
    second = PrivacyCost(laplace_rdp(DEFAULT_GRID, scale=b), extra_delta=db)
    total = first + second
    np.testing.assert_allclose(total.rdp, first.rdp + second.rdp, rtol=1e-15)
    assert total.extra_delta == pytest.approx(da + db - da * db, rel=1e-12, abs=1e-300)
    np.testing.assert_allclose((first * k).rdp, k * first.rdp, rtol=1e-15)
    assert (first + PrivacyCost.zero()).epsilon(1e-5) == first.epsilon(1e-5)


def assert_round_trip(calibration, epsilon_of_noise, target):
    assert calibration.epsilon <= target
    assert epsilon_of_noise(calibration.noise) <= target
    # Away from the ε = 0 clamp, 1% less noise must overshoot the target: the noise is (near-)minimal.
    assert epsilon_of_noise(calibration.noise * 0.99) > target


@FAST
@given(target=targets, delta=deltas, count=st.integers(1, 1000), sensitivity=sensitivities)
def test_gaussian_calibration_round_trips(target, delta, count, sensitivity):
    result = gaussian_sigma(target, delta, sensitivity=sensitivity, count=count)
    assert_round_trip(
        result, lambda s: eps(count * gaussian_rdp(DEFAULT_GRID, sigma=s, sensitivity=sensitivity), delta), target
    )


@FAST
@given(target=targets, delta=deltas, count=st.integers(1, 100))
def test_laplace_calibration_round_trips(target, delta, count):
    result = laplace_scale(target, delta, count=count)
    assert_round_trip(result, lambda b: eps(count * laplace_rdp(DEFAULT_GRID, scale=b), delta), target)


@settings(max_examples=15, deadline=None)
@given(target=st.floats(0.2, 10.0), q=st.floats(1e-3, 0.2), steps=st.integers(10, 5000))
def test_poisson_calibration_round_trips(target, q, steps):
    result = poisson_noise_multiplier(target, 1e-6, q=q, steps=steps, relation="add_remove")
    assert_round_trip(
        result,
        lambda z: eps(steps * poisson_subsampled_gaussian_rdp(DEFAULT_GRID, q=q, noise_multiplier=z), 1e-6),
        target,
    )


@settings(max_examples=10, deadline=None)
@given(target=st.floats(0.2, 10.0), q=st.floats(1e-3, 0.2), steps=st.integers(10, 2000))
def test_replace_one_and_without_replacement_calibrations_meet_target(target, q, steps):
    for result in (
        poisson_noise_multiplier(target, 1e-6, q=q, steps=steps),
        without_replacement_noise_multiplier(target, 1e-6, q=q, steps=steps),
    ):
        assert result.epsilon <= target
        assert result.noise > 0 and math.isfinite(result.noise)


@FAST
@given(target=targets, steps=st.integers(1, 10**6), passes=st.integers(1, 20))
def test_tree_calibration_round_trips(target, steps, passes):
    result = tree_aggregation_sigma(target, 1e-6, steps=steps, sensitivity=2.0, passes=passes)
    assert_round_trip(
        result,
        lambda s: eps(passes * tree_aggregation_rdp(DEFAULT_GRID, sigma=s, steps=steps, sensitivity=2.0), 1e-6),
        target,
    )
