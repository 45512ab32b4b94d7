"""The noise layer's samplers (privfit.privacy.noise): exact integer noise, the lattice release, the float path.

1. OpenDP's exact draws (:func:`integer_noise`) follow the target laws — the discrete Gaussian N_Z(0, s²),
   P(z) ∝ e^{−z²/(2s²)} (Canonne, Kamath & Steinke 2020, Def. 1), and the discrete Laplace, P(z) ∝ e^{−|z|/s} —
   compared with their exact pmfs (normalised by summation over |z| ≤ 40s + 10, where the rest of the mass is
   below e^{−800}): mean, variance, a tail probability and a χ² goodness of fit on the integer grid. Every
   statistical assertion fails with probability ≤ 1e-6 when the sampler is right (z-scores ≤ 5, exact binomial
   and χ² p-values > 1e-6).
2. The exact release is the lattice mechanism of the module docstring: out = 2^k·(rint(clip(x, −B, B)/2^k) + Z),
   with a lattice fine enough (√d·2^k ≤ 2^−20·Δ unless the public bound forbids it) and a noise scale inflated by
   the rounding's extra sensitivity.
3. The float sampler reproduces, bit for bit, numpy's draws on an identically seeded generator.
4. The exact background stream (:class:`~privfit.privacy.noise.NoisyReleases` with count > 1) draws exactly
   count × size values, refuses a release past its count, and its thread stops on close() or garbage collection.
"""

from __future__ import annotations

import gc
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from privfit.privacy.noise import (
    SMOOTHING_SCALE,
    gaussian_lattice,
    gaussian_releases,
    integer_noise,
    laplace_lattice,
    laplace_releases,
    using_sampler,
)

DRAWS = 20_000
Z_BOUND = 5.0  # two-sided normal tail at 5 is 5.7e-7 ≤ 1e-6
P_FLOOR = 1e-6
INTEGER_RANGE_BITS = 50  # the layer keeps lattice integers (bound and noise scale) below 2^50
PRECISION_BITS = 20  # issue 25: rounding to the lattice inflates the sensitivity by ≤ 2^−20 (relative)


def exact_pmf(kind: str, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """The support |z| ≤ 40s + 10 and the normalised pmf of the discrete Gaussian or discrete Laplace of scale s."""
    half = math.ceil(40 * scale + 10)
    support = np.arange(-half, half + 1)
    if kind == "gaussian":
        log_weight = -(support.astype(np.float64) ** 2) / (2.0 * scale**2)
    else:
        log_weight = -np.abs(support).astype(np.float64) / scale
    weight = np.exp(log_weight - log_weight.max())
    return support, weight / weight.sum()


def merged_bins(support: np.ndarray, pmf: np.ndarray, draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Observed and expected counts on the integer grid, adjacent points merged (left to right) until every bin
    expects ≥ 5; the right tail's remainder joins the last bin. Draws beyond the support join the end bins."""
    index = np.clip(draws - support[0], 0, support.size - 1)
    observed_points = np.bincount(index, minlength=support.size)
    expected_points = pmf * draws.size
    observed, expected = [], []
    acc_observed, acc_expected = 0, 0.0
    for o, e in zip(observed_points, expected_points, strict=True):
        acc_observed += int(o)
        acc_expected += float(e)
        if acc_expected >= 5.0:
            observed.append(acc_observed)
            expected.append(acc_expected)
            acc_observed, acc_expected = 0, 0.0
    observed[-1] += acc_observed
    expected[-1] += acc_expected
    return np.asarray(observed), np.asarray(expected)


def continuous_variance(kind: str, scale: float) -> float:
    return scale**2 if kind == "gaussian" else 2.0 * scale**2


@pytest.mark.parametrize("kind", ["gaussian", "laplace"])
@pytest.mark.parametrize("scale", [0.5, 0.8, 2.5, 7.0])
def test_integer_noise_matches_exact_pmf(kind, scale):
    """Mean 0, the exact discrete variance, P(|Z| ≥ t) for t ≈ 2.5s, and a χ² fit on the grid (p > 1e-6)."""
    support, pmf = exact_pmf(kind, scale)
    variance = float(np.sum(support.astype(np.float64) ** 2 * pmf))
    fourth = float(np.sum(support.astype(np.float64) ** 4 * pmf))
    if scale == 0.5:
        # At small scales the discrete variance is far from the continuous one (CKS 2020, Prop. 19: below s²):
        # the variance assertion below would reject a sampler of the continuous law rounded to integers.
        assert abs(variance - continuous_variance(kind, scale)) > 2 * Z_BOUND * math.sqrt(fourth / DRAWS)
    draws = integer_noise(kind, scale, DRAWS)
    assert draws.dtype == np.int64 and draws.shape == (DRAWS,)

    mean_z = draws.mean() / math.sqrt(variance / DRAWS)
    assert abs(mean_z) < Z_BOUND, f"mean {draws.mean():.4f} (z = {mean_z:.2f})"
    second = draws.astype(np.float64) ** 2
    variance_z = (second.mean() - variance) / math.sqrt((fourth - variance**2) / DRAWS)
    assert abs(variance_z) < Z_BOUND, f"variance {second.mean():.4f} vs exact {variance:.4f} (z = {variance_z:.2f})"

    threshold = math.ceil(2.5 * scale)
    tail = float(pmf[np.abs(support) >= threshold].sum())
    hits = int(np.count_nonzero(np.abs(draws) >= threshold))
    assert stats.binomtest(hits, DRAWS, tail).pvalue > P_FLOOR, f"P(|Z| ≥ {threshold}): {hits}/{DRAWS} vs {tail:.5f}"

    observed, expected = merged_bins(support, pmf, draws)
    assert observed.size >= 3
    assert stats.chisquare(observed, expected).pvalue > P_FLOOR


def test_integer_noise_gaussian_at_large_scale():
    """s = 2^25 lattice units (a typical σ/2^k): variance within 2 % (5 standard errors at 125k draws) and the
    3σ and 4σ tail rates of N(0, s²) (the discrete law is the continuous one to within e^{−2π²s²} here)."""
    scale, count = 2.0**25, 125_000
    draws = integer_noise("gaussian", scale, count).astype(np.float64) / scale
    assert abs(np.mean(draws**2) - 1.0) < 0.02
    assert abs(draws.mean()) < Z_BOUND / math.sqrt(count)
    beyond_3 = int(np.count_nonzero(np.abs(draws) >= 3.0))
    assert stats.binomtest(beyond_3, count, 2 * stats.norm.sf(3.0)).pvalue > P_FLOOR
    beyond_4 = int(np.count_nonzero(np.abs(draws) >= 4.0))
    assert beyond_4 <= stats.poisson.ppf(1 - P_FLOOR, count * 2 * stats.norm.sf(4.0))


def test_integer_noise_laplace_at_large_scale():
    """s = 2^25: E|Z| = 2r/(1 − r²), r = e^{−1/s} (≈ s) within 2 % (5 standard errors at 62.5k draws), and the
    tail P(|Z| ≥ 3s) ≈ e^{−3}."""
    scale, count = 2.0**25, 62_500
    draws = integer_noise("laplace", scale, count).astype(np.float64)
    ratio = math.exp(-1.0 / scale)
    mean_absolute = 2 * ratio / ((1 - ratio) * (1 + ratio))
    assert abs(np.abs(draws).mean() / mean_absolute - 1.0) < 0.02
    beyond = int(np.count_nonzero(np.abs(draws) >= 3 * scale))
    assert stats.binomtest(beyond, count, math.exp(-3.0)).pvalue > P_FLOOR


def _releases(kind: str, rng: np.random.Generator, *, scale: float, sensitivity: float, **kwargs):
    if kind == "gaussian":
        return gaussian_releases(rng, sigma=scale, l2_sensitivity=sensitivity, **kwargs)
    return laplace_releases(rng, scale=scale, l1_sensitivity=sensitivity, **kwargs)


@pytest.mark.parametrize("kind", ["gaussian", "laplace"])
def test_exact_release_is_the_lattice_mechanism(kind):
    """out = 2^k·(rint(clip(x, −B, B)/2^k) + Z): the outputs are lattice points, and out/2^k minus the rounded,
    clipped input is noise of the lattice's integer scale — also for the coordinates far outside the bound."""
    rng = np.random.default_rng(11)
    bound, shape = 3.0, (2_000, 5)
    values = rng.uniform(-10 * bound, 10 * bound, size=shape)
    with using_sampler("exact"):
        stream = _releases(kind, rng, scale=0.05, sensitivity=0.7, shape=shape, count=1, bound=bound)
    assert stream.sampler == "exact" and stream.lattice is not None
    lattice = stream.lattice
    out = stream.release(values)
    units = np.ldexp(out, -lattice.exponent)
    assert np.array_equal(units, np.rint(units)), "every output is a multiple of 2^k"
    noise = units - np.rint(np.ldexp(np.clip(values, -bound, bound), -lattice.exponent))
    scale = lattice.integer_scale
    # Without the clip, the residual of the ~70 % clipped coordinates would reach 9B/2^k ≈ 40·s.
    assert np.abs(noise).max() < (10 if kind == "gaussian" else 30) * scale
    if kind == "gaussian":
        assert abs(np.mean(noise**2) / scale**2 - 1.0) < Z_BOUND * math.sqrt(2 / noise.size)
    else:
        assert abs(np.abs(noise).mean() / scale - 1.0) < Z_BOUND / math.sqrt(noise.size)
    assert abs(noise.mean()) < Z_BOUND * scale * math.sqrt(continuous_variance(kind, 1.0) / noise.size)


@pytest.mark.parametrize("kind", ["gaussian", "laplace"])
def test_exact_release_of_lattice_values_moves_by_lattice_multiples(kind):
    rng = np.random.default_rng(12)
    with using_sampler("exact"):
        stream = _releases(kind, rng, scale=1.3, sensitivity=2.0, shape=(50, 4), count=1, bound=100.0)
    exponent = stream.lattice.exponent
    values = np.ldexp(rng.integers(-(2**20), 2**20, size=(50, 4)).astype(np.float64), exponent)
    moved = np.ldexp(stream.release(values) - values, -exponent)
    assert np.array_equal(moved, np.rint(moved))
    assert np.count_nonzero(moved) > 150  # the noise is not zero (integer scale ≈ 7·10^5)


def _sqrt_upper(count: int) -> Fraction:
    """A rational upper bound on √count (exact for perfect squares, else within 1e-15)."""
    root = math.isqrt(count * 10**30)
    return Fraction(root if root * root == count * 10**30 else root + 1, 10**15)


LATTICE_CASES = [
    # (scale, sensitivity, dimension, bound)
    (1.0, 1.0, 1, 10.0),
    (0.05, 0.7, 5, 3.0),
    (8.0, 2.0, 1_000, 1e4),
    (3.0, 1e-3, 7, 1.0),
    (1e3, 50.0, 10**6, 1e6),
    (0.5, 1.0, 3, 2.0**40),  # the bound limits the precision: 2^40/2^−22 would exceed 2^50
]


@pytest.mark.parametrize("kind", ["gaussian", "laplace"])
@pytest.mark.parametrize(("scale", "sensitivity", "dimension", "bound"), LATTICE_CASES)
def test_lattice_is_fine_inflated_and_in_range(kind, scale, sensitivity, dimension, bound):
    """√d·2^k ≤ 2^−20·Δ (L1: d·2^k) unless a finer lattice would put B/2^k above 2^50; the inflation covers the
    rounding exactly (rational check: scale'/Δ' ≥ scale/Δ with Δ' = Δ + growth·2^k); the integer scale is
    ≥ scale·inflation/2^k (Gaussian: and ≥ the smoothing τ, its square ≥ (σ·inflation/2^k)² + τ²)."""
    make = gaussian_lattice if kind == "gaussian" else laplace_lattice
    lattice = make(scale, sensitivity, dimension, bound)
    spacing = Fraction(2) ** lattice.exponent
    growth = _sqrt_upper(dimension) if kind == "gaussian" else Fraction(dimension)
    assert lattice.spacing == float(spacing) and lattice.bound == bound
    precise = growth * spacing <= Fraction(sensitivity) * Fraction(2) ** -PRECISION_BITS
    range_bound = Fraction(bound) / (spacing / 2) > 2**INTEGER_RANGE_BITS
    assert precise or range_bound, "the lattice is as fine as the precision or the 50-bit range allows"
    assert Fraction(max(bound, scale)) / spacing <= 2**INTEGER_RANGE_BITS
    # The inflation covers the rounding's sensitivity growth, in exact rational arithmetic.
    assert Fraction(lattice.inflation) * Fraction(sensitivity) >= Fraction(sensitivity) + growth * spacing
    noise_units = Fraction(scale) * Fraction(lattice.inflation) / spacing
    assert Fraction(lattice.integer_scale) >= noise_units * (1 - Fraction(1, 2**50))
    if kind == "gaussian":
        assert lattice.integer_scale >= SMOOTHING_SCALE
        smoothed = noise_units**2 + Fraction(SMOOTHING_SCALE) ** 2
        assert Fraction(lattice.integer_scale) ** 2 >= smoothed * (1 - Fraction(1, 2**50))
    else:
        assert lattice.integer_scale == pytest.approx(float(noise_units), rel=1e-15)


@pytest.mark.parametrize("kind", ["gaussian", "laplace"])
def test_huge_public_bound_forces_a_coarser_lattice_that_stays_safe(kind):
    make = gaussian_lattice if kind == "gaussian" else laplace_lattice
    fine = make(1.0, 1.0, 4, 10.0)
    coarse = make(1.0, 1.0, 4, 1e30)
    assert fine.exponent == -1 - PRECISION_BITS if kind == "gaussian" else -2 - PRECISION_BITS
    assert coarse.exponent == math.ceil(math.log2(1e30)) - INTEGER_RANGE_BITS
    growth = 2.0 if kind == "gaussian" else 4.0
    assert coarse.inflation >= 1.0 + growth * coarse.spacing and coarse.inflation > 1e15 > fine.inflation
    assert coarse.integer_scale * coarse.spacing >= coarse.inflation * 1.0  # σ' = σ·inflation
    rng = np.random.default_rng(13)
    with using_sampler("exact"):
        stream = _releases(kind, rng, scale=1.0, sensitivity=1.0, shape=(3, 4), count=1, bound=1e30)
    out = stream.release(np.array([[0.3, -1e31, 1e31, 7.0]] * 3))
    units = np.ldexp(out, -coarse.exponent)
    assert np.isfinite(out).all() and np.array_equal(units, np.rint(units))
    assert np.abs(units).max() <= 2**INTEGER_RANGE_BITS


def test_float_gaussian_releases_are_numpys_draws_bit_for_bit():
    shape = (7, 3)
    values = np.random.default_rng(0).normal(size=shape)
    with using_sampler("float"):
        stream = gaussian_releases(
            np.random.default_rng(42), sigma=1.7, l2_sensitivity=1.0, shape=shape, count=2, bound=1.0
        )
    reference = np.random.default_rng(42)
    assert stream.lattice is None
    for _ in range(2):
        expected = values + 1.7 * reference.standard_normal(shape)
        assert np.array_equal(stream.release(values), expected)


def test_float_laplace_releases_are_numpys_draws_bit_for_bit():
    shape = (5, 2)
    values = np.random.default_rng(1).normal(size=shape)
    with using_sampler("float"):
        stream = laplace_releases(
            np.random.default_rng(43), scale=0.6, l1_sensitivity=1.0, shape=shape, count=2, bound=1.0
        )
    reference = np.random.default_rng(43)
    for _ in range(2):
        expected = values + reference.laplace(0, 0.6, size=shape)
        assert np.array_equal(stream.release(values), expected)


def _exact_stream(count: int, shape: tuple[int, ...]):
    with using_sampler("exact"):
        return gaussian_releases(
            np.random.default_rng(0), sigma=1.0, l2_sensitivity=1.0, shape=shape, count=count, bound=10.0
        )


def test_background_stream_is_consumed_exactly_and_refuses_a_release_past_its_count():
    """200 releases of 3×7 = 4,200 draws (two producer blocks): all distinct lattice releases; then the producer
    has finished with nothing left over (it drew exactly count × size), and a 201st release raises."""
    shape, count = (3, 7), 200
    stream = _exact_stream(count, shape)
    draws = stream._draws
    assert draws is not None
    exponent = stream.lattice.exponent
    outs = np.stack([stream.release(np.zeros(shape)) for _ in range(count)])
    units = np.ldexp(outs, -exponent)
    assert np.array_equal(units, np.rint(units))
    assert np.unique(outs.reshape(count, -1), axis=0).shape[0] == count
    assert abs(np.mean(units**2) / stream.lattice.integer_scale**2 - 1.0) < Z_BOUND * math.sqrt(2 / units.size)
    draws._thread.join(timeout=10)
    assert not draws._thread.is_alive()
    assert draws._buffer.size == 0 and draws._queue.empty()
    with pytest.raises(RuntimeError, match="all 200 releases"):
        stream.release(np.zeros(shape))


def test_closing_a_stream_stops_its_thread():
    stream = _exact_stream(10_000, (64,))  # 640k draws: the producer would run for seconds
    stream.release(np.zeros(64))
    thread = stream._draws._thread
    stream.close()
    thread.join(timeout=10)
    assert not thread.is_alive()


def test_garbage_collecting_a_stream_stops_its_thread():
    stream = _exact_stream(10_000, (64,))
    stream.release(np.zeros(64))
    thread = stream._draws._thread
    del stream
    gc.collect()
    thread.join(timeout=10)
    assert not thread.is_alive()
