"""The exact slow path of the discrete Gaussian kernel (privfit.privacy.exact_comparison): brackets of e^{−γ}
checked against mpmath at 400 digits, the comparison's conditional law on a word's cell, the geometric count by
inversion against −t·ln V in high precision, and the words running out."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from scipy import stats

from privfit.privacy.exact_comparison import below_exp_neg, exp_neg_bounds, geometric_count

DIGITS = 400  # every computation below runs in mpmath.workdps(DIGITS): other modules set mp.dps too
P_FLOOR = 1e-6


@pytest.mark.parametrize(
    ("num", "den"),
    [(0, 1), (1, 2), (1, 1), (7, 3), (2**126 - 3, 2**126), (81, 2), (7_001, 7), (2**70 + 1, 3)],
)
@pytest.mark.parametrize("bits", [0, 10, 63, 200, 1_000])
def test_exp_neg_bounds_bracket_the_true_value_tightly(num, den, bits):
    lo, hi = exp_neg_bounds(num, den, bits)
    if num // den >= 2**60:  # e^{−γ}·2^bits is below 2^{−10^18} here: only the bracket's width and sign are checked
        assert 0 <= lo <= hi <= 2
        return
    with mpmath.workdps(DIGITS):
        exact = mpmath.exp(-mpmath.mpf(num) / den) * mpmath.mpf(2) ** bits
    assert lo <= exact <= hi
    assert hi - lo <= 2


def test_exp_neg_bounds_refuses_a_negative_exponent():
    with pytest.raises(ValueError):
        exp_neg_bounds(-1, 2, 10)


def test_a_comparison_on_the_boundary_cell_has_the_fractional_probability():
    """For the cell that holds e^{−γ} (top = ⌊e^{−γ}·2^63⌋) "V < e^{−γ}" has probability frac(e^{−γ}·2^63) given the
    cell: 4,000 streams of fresh words, binomial test (p > 1e-6); the neighbouring cells are decided at once."""
    num, den = 1, 3
    with mpmath.workdps(DIGITS):
        scaled = mpmath.exp(-mpmath.mpf(num) / den) * mpmath.mpf(2) ** 63
        top = int(mpmath.floor(scaled))
        probability = float(scaled - top)
    rng = np.random.default_rng(11)
    trials = 4_000
    successes = 0
    for _ in range(trials):
        words = rng.integers(0, 2**64, size=4, dtype=np.uint64)
        decision, following = below_exp_neg(words, 0, top, num, den)
        assert following >= 1  # the cell alone cannot decide
        successes += decision
    assert stats.binomtest(successes, trials, probability).pvalue > P_FLOOR
    assert below_exp_neg(np.zeros(0, dtype=np.uint64), 0, top - 1, num, den) == (1, 0)
    assert below_exp_neg(np.zeros(0, dtype=np.uint64), 0, top + 1, num, den) == (0, 0)


def test_a_comparison_reports_words_running_out():
    num, den = 1, 3
    with mpmath.workdps(DIGITS):
        top = int(mpmath.floor(mpmath.exp(-mpmath.mpf(num) / den) * mpmath.mpf(2) ** 63))
    assert below_exp_neg(np.zeros(0, dtype=np.uint64), 0, top, num, den) == (0, 1)
    assert geometric_count(np.zeros(0, dtype=np.uint64), 0, 0, 5, 0) == (0, 1)


def reference_count(top: int, words: np.ndarray, t: int) -> int:
    """⌊−t·ln V⌋ for V = 0.(top: 63 bits)(words), in 400-digit arithmetic, checked to hold on the whole cell the
    bits fix (the test's words are chosen long enough)."""
    value, bits = top, 63
    for word in words:
        value, bits = (value << 64) | int(word), bits + 64
    with mpmath.workdps(DIGITS):
        low = mpmath.mpf(value) / mpmath.mpf(2) ** bits
        high = mpmath.mpf(value + 1) / mpmath.mpf(2) ** bits
        counts = {int(mpmath.floor(-t * mpmath.log(v))) for v in (low, high) if v > 0}
    assert len(counts) == 1
    return counts.pop()


@pytest.mark.parametrize("t", [2, 1_000, 2**21])
def test_geometric_count_is_the_inversion_count(t):
    """G = #{k ≥ 1 : V < e^{−k/t}} = ⌊−t·ln V⌋: at random cells, from a wrong guess, and at the cells that hold a
    boundary e^{−k/t} (where the fast path defers to this function)."""
    rng = np.random.default_rng(t)
    cases = [int(x) >> 1 for x in rng.integers(1, 2**64, size=25, dtype=np.uint64)]
    with mpmath.workdps(DIGITS):
        for k in (1, 3, 17, 5 * t):
            cases.append(int(mpmath.floor(mpmath.exp(-mpmath.mpf(k) / t) * mpmath.mpf(2) ** 63)))
    for top in cases:
        words = rng.integers(0, 2**64, size=3, dtype=np.uint64)
        expected = reference_count(top, words, t)
        for guess in (0, expected, expected + 7, 3 * expected + 1):
            count, following = geometric_count(words, 0, top, t, guess)
            assert count == expected, (top, guess)
            assert following <= words.size


def test_geometric_count_of_a_tiny_uniform():
    """V < 2^{−63} (top = 0): the count is found from a guess far below it."""
    words = np.array([0, 0, 2**40, 5], dtype=np.uint64)
    expected = reference_count(0, words, 1_000)
    assert expected > 1_000 * 63 * math.log(2)
    assert geometric_count(words, 0, 0, 1_000, 0)[0] == expected


def test_brackets_agree_with_fractions_at_gamma_zero_and_one():
    assert exp_neg_bounds(0, 5, 64) == (2**64, 2**64)
    lo, hi = exp_neg_bounds(1, 1, 64)
    with mpmath.workdps(DIGITS):
        exact = mpmath.exp(-1) * mpmath.mpf(2) ** 64
    assert lo <= exact <= hi and hi - lo <= 2
