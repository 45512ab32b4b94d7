"""Empirical audits (privfit.privacy.audit.epsilon_lower_bound) of the exact sampler's lattice releases.

As in tests/privacy/test_audit.py, each audit runs the mechanism on neighbouring inputs and bounds ε from below —
here at confidence 1 − 1e-6 (the generators are seeded, so the file is deterministic; the level makes the
passing audits hold for every seed but a 1e-6 fraction). The exact lattice
releases (Gaussian calibrated to (1, 1e-5), Laplace charged pure ε = Δ₁/b = 1) must stay at or below their
claimed ε, and broken variants must exceed it: the same exact mechanisms with too little noise, and the float
Laplace scored by its low bits (Mironov 2012; tests/privacy/test_noise_leak.py). 100k exact draws in all.
"""

from __future__ import annotations

import numpy as np
import pytest

from privfit.privacy import DEFAULT_GRID, gaussian_sigma, make_generator
from privfit.privacy.audit import epsilon_lower_bound
from privfit.privacy.noise import gaussian_releases, laplace_cost, laplace_releases, using_sampler

CONFIDENCE = 1 - 1e-6
EPSILON, DELTA = 1.0, 1e-5
SUM_BOUND = 100.0  # 100 rows with |x| ≤ 1: a public bound on the sum


def sum_query_totals() -> tuple[float, float]:
    """D and D' differ in one row: x = +1 vs x' = −1 (|x| ≤ 1), so the sum's replace-one sensitivity is 2."""
    rest = make_generator(1, data_is_public=True).uniform(-1, 1, size=99)
    return float(np.append(rest, 1.0).sum()), float(np.append(rest, -1.0).sum())


def exact_gaussian_scores(total: float, sigma: float, count: int, seed: int) -> np.ndarray:
    """``count`` exact lattice Gaussian releases of the sum (one coordinate each)."""
    with using_sampler("exact"):
        stream = gaussian_releases(
            np.random.default_rng(seed), sigma=sigma, l2_sensitivity=2.0, shape=(count, 1), count=1, bound=SUM_BOUND
        )
    assert stream.lattice is not None
    return stream.release(np.full((count, 1), total)).ravel()


def laplace_scores(value: float, scale: float, count: int, sampler: str, seed: int) -> np.ndarray:
    """``count`` Laplace releases (L1 sensitivity 1, bound 4) of ``value``."""
    with using_sampler(sampler):
        stream = laplace_releases(
            np.random.default_rng(seed), scale=scale, l1_sensitivity=1.0, shape=(count, 1), count=1, bound=4.0
        )
    return stream.release(np.full((count, 1), value)).ravel()


def low_bits(y: np.ndarray) -> np.ndarray:
    """1 where |y| < 1 and y has a bit below 2^−53 — impossible for 1 + n in floating point (Mironov's event)."""
    scaled = np.ldexp(y, 53)
    return ((np.abs(y) < 1.0) & (scaled != np.floor(scaled))).astype(np.float64)


@pytest.mark.parametrize(("divisor", "count"), [(1.0, 20_000), (4.0, 10_000)])
def test_exact_gaussian_sum_audit(divisor, count):
    """Calibrated σ: the bound stays in (0.1, 1]; a quarter of it (a sensitivity or calibration bug) exceeds 1."""
    total_d, total_d_prime = sum_query_totals()
    calibration = gaussian_sigma(EPSILON, DELTA, sensitivity=2.0)
    assert calibration.epsilon <= EPSILON
    sigma = calibration.noise / divisor
    result = epsilon_lower_bound(
        exact_gaussian_scores(total_d, sigma, count, seed=10),
        exact_gaussian_scores(total_d_prime, sigma, count, seed=11),
        delta=DELTA,
        confidence=CONFIDENCE,
    )
    if divisor == 1.0:
        assert 0.1 < result.epsilon_lower_bound <= EPSILON
    else:
        assert result.epsilon_lower_bound > EPSILON


def test_exact_laplace_audit_by_value_and_by_low_bits():
    """b = 1, Δ₁ = 1: charged pure ε = 1 (laplace_cost, exact). Scored by the value the bound is in (0.5, 1];
    scored by the low-bit event it is 0 (lattice outputs never have bits below 2^−53)."""
    claimed = laplace_cost(DEFAULT_GRID, scale=1.0, sensitivity=1.0, sampler="exact").pure_epsilon
    assert claimed == pytest.approx(EPSILON)
    y0 = laplace_scores(0.0, 1.0, 15_000, "exact", seed=12)
    y1 = laplace_scores(1.0, 1.0, 15_000, "exact", seed=13)
    by_value = epsilon_lower_bound(y0, y1, delta=DELTA, confidence=CONFIDENCE)
    assert 0.5 < by_value.epsilon_lower_bound <= claimed
    by_low_bits = epsilon_lower_bound(low_bits(y0), low_bits(y1), delta=DELTA, confidence=CONFIDENCE)
    assert by_low_bits.epsilon_lower_bound == 0.0


def test_exact_laplace_with_half_the_scale_is_detected():
    y0 = laplace_scores(0.0, 0.5, 5_000, "exact", seed=14)
    y1 = laplace_scores(1.0, 0.5, 5_000, "exact", seed=15)
    assert epsilon_lower_bound(y0, y1, delta=DELTA, confidence=CONFIDENCE).epsilon_lower_bound > EPSILON


def test_float_laplace_scored_by_its_low_bits_is_detected():
    """The float sampler at the same b = 1: the low-bit event alone certifies ε > 5 (seeded, no exact draws)."""
    y0 = laplace_scores(0.0, 1.0, 15_000, "float", seed=1)
    y1 = laplace_scores(1.0, 1.0, 15_000, "float", seed=2)
    result = epsilon_lower_bound(low_bits(y0), low_bits(y1), delta=DELTA, confidence=CONFIDENCE)
    assert result.epsilon_lower_bound > 5 * EPSILON
