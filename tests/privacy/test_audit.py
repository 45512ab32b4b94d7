"""Empirical audits of calibrated mechanisms on neighbouring datasets (seeded, public synthetic data).

Each audit runs the mechanism on D and on a replace-one neighbour D' and bounds ε from below with 95%
confidence (privfit.privacy.audit). It must stay below the claimed ε, and a broken variant (a third of the
calibrated noise, i.e. a sensitivity or calibration bug) must be detected by exceeding it.
"""

import numpy as np
import pytest

from privfit.privacy import gaussian_sigma, laplace_scale, make_generator, poisson_noise_multiplier
from privfit.privacy.audit import epsilon_lower_bound

SAMPLES = 400_000
EPSILON, DELTA = 1.0, 1e-5


def sum_query_rows(rng):
    """D and D' differ in one row: x = +1 vs x' = −1 (|x| ≤ 1), so the sum's replace-one sensitivity is 2."""
    rest = rng.uniform(-1, 1, size=99)
    return np.append(rest, 1.0).sum(), np.append(rest, -1.0).sum()


@pytest.mark.parametrize("broken", [False, True])
def test_gaussian_sum_calibrated_to_target_passes_audit(broken):
    rng = make_generator(1, data_is_public=True)
    total_d, total_d_prime = sum_query_rows(rng)
    sigma = gaussian_sigma(EPSILON, DELTA, sensitivity=2.0).noise / (3.0 if broken else 1.0)
    result = epsilon_lower_bound(
        total_d + sigma * rng.standard_normal(SAMPLES),
        total_d_prime + sigma * rng.standard_normal(SAMPLES),
        delta=DELTA,
    )
    if broken:
        assert result.epsilon_lower_bound > EPSILON
    else:
        assert 0.3 < result.epsilon_lower_bound <= EPSILON


@pytest.mark.parametrize("broken", [False, True])
def test_laplace_sum_calibrated_to_target_passes_audit(broken):
    rng = make_generator(2, data_is_public=True)
    total_d, total_d_prime = sum_query_rows(rng)
    scale = laplace_scale(EPSILON, DELTA, sensitivity=2.0).noise / (3.0 if broken else 1.0)
    result = epsilon_lower_bound(
        total_d + rng.laplace(0, scale, SAMPLES), total_d_prime + rng.laplace(0, scale, SAMPLES), delta=DELTA
    )
    if broken:
        assert result.epsilon_lower_bound > EPSILON
    else:
        assert 0.5 < result.epsilon_lower_bound <= EPSILON


@pytest.mark.parametrize("broken", [False, True])
def test_poisson_subsampled_step_under_replace_one_passes_audit(broken):
    """One DP-SGD-style step: each row joins with probability q; the clipped row is +1 in D and −1 in D'."""
    rng = make_generator(3, data_is_public=True)
    q = 0.2
    z = poisson_noise_multiplier(EPSILON, DELTA, q=q, steps=1).noise / (3.0 if broken else 1.0)
    included_d = rng.random(SAMPLES) < q
    included_d_prime = rng.random(SAMPLES) < q
    scores_d = np.where(included_d, 1.0, 0.0) + z * rng.standard_normal(SAMPLES)
    scores_d_prime = np.where(included_d_prime, -1.0, 0.0) + z * rng.standard_normal(SAMPLES)
    result = epsilon_lower_bound(scores_d, scores_d_prime, delta=DELTA)
    if broken:
        assert result.epsilon_lower_bound > EPSILON
    else:
        assert result.epsilon_lower_bound <= EPSILON


def test_audit_bound_is_zero_for_identical_distributions():
    rng = make_generator(4, data_is_public=True)
    result = epsilon_lower_bound(rng.standard_normal(50_000), rng.standard_normal(50_000), delta=DELTA)
    assert result.epsilon_lower_bound < 0.1
