"""Mironov-style low-bit attacks (Mironov, "On Significance of the Least Significant Bits for Differential
Privacy", CCS 2012): the float sampler's releases leak through their low bits; the exact sampler's do not.

Neighbouring inputs x0 = 0 and x1 = 1 (sensitivity 1), one coordinate per release (shape (n, 1): the layer's
last axis is one release's coordinates). With the float sampler y = x + noise is a floating-point sum: for x1,
every |y| < 1 is 1 + n computed exactly (Sterbenz) or rounded to the grid of [1/2, 1), so it is a multiple of
2^−53; for x0, y = n keeps its own fine grid. The event A = {|y| < 1, y·2^53 ∉ Z} has probability 0 under x1 and
≈ 0.27 under x0 — no finite ε bounds that — and B = {|y| < 2^−4, y·2^53 ∈ Z} has a likelihood ratio ≈ 9 > e.
The exact sampler releases lattice points 2^k·(v + Z): every event defined by the low bits is an event of the
integer mechanism v ↦ v + Z, whose likelihood ratios are bounded by e^ε; A is empty for both inputs, B's ratio
stays ≤ e^ε, and the residues of y/2^k mod 2^j (j = 1…8) have the same law for both inputs (χ² p > 1e-6).

All statements use one-sided Clopper–Pearson bounds (privfit.privacy.audit) at level 1e-6 each. Both samplers
draw from seeded generators (the exact one from a child of the caller's), so the file is deterministic.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from privfit.privacy import DEFAULT_GRID, PrivacyCost, gaussian_rdp
from privfit.privacy.audit import clopper_pearson_lower, clopper_pearson_upper
from privfit.privacy.noise import gaussian_releases, laplace_releases, using_sampler

LEVEL = 1e-6
FLOAT_DRAWS = 200_000
EXACT_DRAWS = {"laplace": 100_000, "gaussian": 50_000}
EPSILON_LAPLACE = 1.0  # b = 1, Δ₁ = 1
DELTA = 1e-5


def released(kind: str, sampler: str, value: float, count: int, seed: int) -> tuple[np.ndarray, int | None]:
    """``count`` independent one-coordinate releases of ``value`` (b = 1 or σ = 1, sensitivity 1, bound 4), and
    the lattice's exponent k (exact sampler)."""
    rng = np.random.default_rng(seed)
    shape = (count, 1)
    with using_sampler(sampler):
        if kind == "laplace":
            stream = laplace_releases(rng, scale=1.0, l1_sensitivity=1.0, shape=shape, count=1, bound=4.0)
        else:
            stream = gaussian_releases(rng, sigma=1.0, l2_sensitivity=1.0, shape=shape, count=1, bound=4.0)
        exponent = None if stream.lattice is None else stream.lattice.exponent
        return stream.release(np.full(shape, value)).ravel(), exponent


def below_2_53(y: np.ndarray) -> np.ndarray:
    """y has a set bit below 2^−53 (y·2^53 is not an integer)."""
    scaled = np.ldexp(y, 53)
    return scaled != np.floor(scaled)


def event_a(y: np.ndarray) -> np.ndarray:
    return (np.abs(y) < 1.0) & below_2_53(y)


def event_b(y: np.ndarray) -> np.ndarray:
    return (np.abs(y) < 2.0**-4) & ~below_2_53(y)


def ratio_lower_bound(hits_num: int, hits_den: int, trials: int) -> float:
    """A (1 − 2·LEVEL) lower bound on P_num(E)/P_den(E): CP lower over CP upper (0 when the numerator's is 0)."""
    low = float(clopper_pearson_lower(hits_num, trials, LEVEL))
    high = float(clopper_pearson_upper(hits_den, trials, LEVEL))
    return low / high


def sub_ulp_residues(y: np.ndarray, bits: int) -> np.ndarray:
    """The ``bits`` bits of y just below 2^−53, for |y| < 1 (float family of low-bit events)."""
    inside = y[np.abs(y) < 1.0]
    return np.mod(np.floor(np.ldexp(inside, 53 + bits)), 2**bits).astype(np.int64)


def same_law_pvalue(first: np.ndarray, second: np.ndarray, classes: int) -> float:
    """χ² two-sample (contingency) p-value of two samples of residues in range(classes); empty classes dropped."""
    table = np.stack([np.bincount(first, minlength=classes), np.bincount(second, minlength=classes)])
    table = table[:, table.sum(axis=0) > 0]
    if table.shape[1] < 2:
        return 1.0 if np.array_equal(table[0] > 0, table[1] > 0) else 0.0
    return float(stats.chi2_contingency(table).pvalue)


def test_float_laplace_low_bits_distinguish_neighbours():
    y0, _ = released("laplace", "float", 0.0, FLOAT_DRAWS, seed=1)
    y1, _ = released("laplace", "float", 1.0, FLOAT_DRAWS, seed=2)
    a0, a1 = int(event_a(y0).sum()), int(event_a(y1).sum())
    assert a1 == 0 and a0 > 0.2 * FLOAT_DRAWS, (a0, a1)
    assert ratio_lower_bound(a0, a1, FLOAT_DRAWS) > 2 * math.exp(EPSILON_LAPLACE)
    b0, b1 = int(event_b(y0).sum()), int(event_b(y1).sum())
    assert ratio_lower_bound(b1, b0, FLOAT_DRAWS) > 2 * math.exp(EPSILON_LAPLACE), (b0, b1)
    for bits in range(1, 9):
        pvalue = same_law_pvalue(sub_ulp_residues(y0, bits), sub_ulp_residues(y1, bits), 2**bits)
        assert pvalue < LEVEL, f"{bits} bits below 2^-53: p = {pvalue}"


def test_float_gaussian_low_bits_break_its_claimed_guarantee():
    """σ = Δ = 1 is charged ε ≈ 4.9 at δ = 1e-5 (privfit's curve); A has P ≈ 0.26 under x0 and 0 under x1, so
    P(A | x0) ≤ e^ε·P(A | x1) + δ fails by orders of magnitude."""
    epsilon = PrivacyCost(gaussian_rdp(DEFAULT_GRID, sigma=1.0, sensitivity=1.0), DEFAULT_GRID).epsilon(DELTA).epsilon
    y0, _ = released("gaussian", "float", 0.0, FLOAT_DRAWS, seed=3)
    y1, _ = released("gaussian", "float", 1.0, FLOAT_DRAWS, seed=4)
    a0, a1 = int(event_a(y0).sum()), int(event_a(y1).sum())
    assert a1 == 0, a1
    low0 = float(clopper_pearson_lower(a0, FLOAT_DRAWS, LEVEL))
    high1 = float(clopper_pearson_upper(a1, FLOAT_DRAWS, LEVEL))
    assert low0 > 10 * (math.exp(epsilon) * high1 + DELTA), (epsilon, a0, a1)


@pytest.mark.parametrize("kind", ["laplace", "gaussian"])
def test_exact_sampler_low_bits_carry_nothing(kind):
    count = EXACT_DRAWS[kind]
    y0, exponent = released(kind, "exact", 0.0, count, seed=5)
    y1, exponent1 = released(kind, "exact", 1.0, count, seed=6)
    assert exponent == exponent1 and exponent is not None and exponent <= -19  # both inputs are lattice points
    units0, units1 = np.ldexp(y0, -exponent), np.ldexp(y1, -exponent)
    assert np.array_equal(units0, np.rint(units0)) and np.array_equal(units1, np.rint(units1))
    assert event_a(y0).sum() == 0 and event_a(y1).sum() == 0
    # B's ratio is the mechanism's own (≈ e^{1 − 2|y|} for the Laplace): its lower bound stays ≤ e^ε.
    b0, b1 = int(event_b(y0).sum()), int(event_b(y1).sum())
    assert min(b0, b1) > 0
    # Pointwise likelihood-ratio bounds on {|y| < 2^−4}: e^ε (Laplace); e^{1/2 − y} ≤ e^{1/2 + 2^−4} for N(0, 1)
    # against N(1, 1) (the integer scale only adds smoothing).
    bound = math.exp(EPSILON_LAPLACE) if kind == "laplace" else math.exp(0.5 + 2.0**-4)
    assert ratio_lower_bound(b0, b1, count) <= bound and ratio_lower_bound(b1, b0, count) <= bound, (b0, b1)
    for bits in range(1, 9):
        modulus = 2**bits
        residues0 = np.mod(units0.astype(np.int64), modulus)
        residues1 = np.mod(units1.astype(np.int64), modulus)
        assert same_law_pvalue(residues0, residues1, modulus) > LEVEL / 8, f"residues mod 2^{bits}"
    for residue in range(256):
        hits0 = int(np.count_nonzero(np.mod(units0.astype(np.int64), 256) == residue))
        hits1 = int(np.count_nonzero(np.mod(units1.astype(np.int64), 256) == residue))
        assert ratio_lower_bound(hits0, hits1, count) <= math.e and ratio_lower_bound(hits1, hits0, count) <= math.e
