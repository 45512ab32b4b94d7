r"""Exact decisions on a uniform revealed word by word: the slow path of the discrete Gaussian kernel.

:func:`privfit.privacy.exact_sampling.discrete_gaussian` decides "V < e^{−γ}" for a uniform V on [0, 1) from the
first 63 bits of a word in floating point, when a rigorous error bound settles it. When it does not (a
probability of about 2^{−40} per decision), the kernel calls this module, which settles the same comparison for
the same V exactly: V is the real number whose binary expansion is the word's 63 bits followed by the bits of
the next words of the stream, revealed 64 at a time, and e^{−γ} (γ ≥ 0 rational) is bracketed in integer
arithmetic to as many bits as the comparison needs. The decision is then the indicator of V < e^{−γ} for a
uniform V, the law the fast path assumes, and every word read is a fresh word of the stream, so the draw stays
a fixed function of the word stream (the kernel's refill rule).

**Brackets of e^{−γ}** (:func:`exp_neg_bounds`), γ = a + f with a = ⌊γ⌋ and f ∈ [0, 1): the series
Σ_k (−f)^k/k! alternates with terms that do not grow (f ≤ 1), so e^{−f} lies between any two consecutive partial
sums; e^{−a} = (e^{−1})^a from a bracket of e^{−1} (the same series at f = 1) raised to the a-th power by
repeated squaring in fixed point at Q bits, rounding down for the lower bound and up for the upper one. Every
factor is in [0, 1], so each rounded product moves its bound by at most 2^{−Q}, and with Q = bits + 2·log₂(a) +
8 the two brackets multiply to integers lo ≤ e^{−γ}·2^bits ≤ hi with hi − lo ≤ 2.

**Termination.** e^{−γ} is irrational for rational γ > 0 (Lindemann), so V ≠ e^{−γ} almost surely and each new
word halves the undecided probability 2^64 times: a comparison reads more than j extra words with probability
below 2^{2−64j}. At γ = 0 (e^{−γ} = 1) every V < 1 is decided at once.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

WORD_BITS = 64
TOP_BITS = 63
"""The fast path's uniform is the word's top 63 bits (its lowest bit is the proposal's sign)."""


def _exp_neg_fraction_bounds(f: Fraction, bits: int) -> tuple[Fraction, Fraction]:
    """(lower, upper) partial sums of Σ_k (−f)^k/k! bracketing e^{−f}, 0 ≤ f ≤ 1, within 2^{−bits}."""
    total, term, k = Fraction(1), Fraction(1), 0
    tolerance = Fraction(1, 1 << bits)
    while True:
        k += 1
        term = term * f / k
        following = total - term if k % 2 == 1 else total + term
        if term <= tolerance:
            return (following, total) if k % 2 == 1 else (total, following)
        total = following


def _power_bounds(low: int, high: int, exponent: int, q: int) -> tuple[int, int]:
    """(⌊·⌋, ⌈·⌉) bounds of (low/2^q)^exponent and (high/2^q)^exponent at q bits, by repeated squaring with the
    lower bound rounded down and the upper one up at every product (all values in [0, 1])."""
    result_low, result_high = 1 << q, 1 << q
    base_low, base_high = low, high
    while exponent:
        if exponent & 1:
            result_low = (result_low * base_low) >> q
            result_high = -((-result_high * base_high) >> q)
        exponent >>= 1
        if exponent:
            base_low = (base_low * base_low) >> q
            base_high = -((-base_high * base_high) >> q)
    return result_low, result_high


def exp_neg_bounds(num: int, den: int, bits: int) -> tuple[int, int]:
    """Integers (lo, hi) with lo ≤ e^{−num/den}·2^bits ≤ hi and hi − lo ≤ 2, for num ≥ 0, den ≥ 1 (module
    docstring)."""
    if num < 0 or den < 1 or bits < 0:
        raise ValueError("exp_neg_bounds needs num ≥ 0, den ≥ 1 and bits ≥ 0")
    whole, rest = divmod(num, den)
    q = bits + 2 * whole.bit_length() + 8
    fraction_low, fraction_high = _exp_neg_fraction_bounds(Fraction(rest, den), q + 2)
    f_low = (fraction_low.numerator << q) // fraction_low.denominator
    f_high = -((-fraction_high.numerator << q) // fraction_high.denominator)
    if whole:
        one_low, one_high = _exp_neg_fraction_bounds(Fraction(1), q + 2)
        e_low = (one_low.numerator << q) // one_low.denominator
        e_high = -((-one_high.numerator << q) // one_high.denominator)
        w_low, w_high = _power_bounds(e_low, e_high, whole, q)
    else:
        w_low = w_high = 1 << q
    shift = 2 * q - bits
    low = (max(f_low, 0) * max(w_low, 0)) >> shift
    high = -((-min(f_high, 1 << q) * min(w_high, 1 << q)) >> shift)
    return low, high


class LazyUniform:
    """A uniform V on [0, 1): ``top`` (its first ``TOP_BITS`` bits, already read by the fast path), then the bits
    of ``words[position:]``, revealed 64 at a time. V ∈ [value/2^bits, (value + 1)/2^bits)."""

    def __init__(self, words: np.ndarray, position: int, top: int) -> None:
        self.words = words
        self.position = position
        self.value = top
        self.bits = TOP_BITS

    def reveal(self) -> bool:
        """The next word's 64 bits; ``False`` when the words ran out."""
        if self.position >= self.words.shape[0]:
            return False
        self.value = (self.value << WORD_BITS) | int(self.words[self.position])
        self.bits += WORD_BITS
        self.position += 1
        return True

    def below_exp_neg(self, num: int, den: int) -> bool | None:
        """Whether V < e^{−num/den}, revealing bits until it is decided; ``None`` when the words ran out."""
        while True:
            low, high = exp_neg_bounds(num, den, self.bits)
            if self.value + 1 <= low:
                return True
            if self.value >= high:
                return False
            if not self.reveal():
                return None


def below_exp_neg(words: np.ndarray, position: int, top: int, num: int, den: int) -> tuple[int, int]:
    """(1 if V < e^{−num/den} else 0, next position) for V = 0.(``top``: 63 bits)(the words from ``position``);
    (0, len(words) + 1) when the words ran out first (the kernel then runs the draw again on more words)."""
    uniform = LazyUniform(words, position, top)
    decision = uniform.below_exp_neg(num, den)
    if decision is None:
        return 0, words.shape[0] + 1
    return int(decision), uniform.position


def geometric_count(words: np.ndarray, position: int, top: int, t: int, guess: int) -> tuple[int, int]:
    """(G, next position) with G = #{k ≥ 1 : V < e^{−k/t}} — the geometric law P(G = k) = (1 − q)q^k, q = e^{−1/t},
    by inversion — for V = 0.(``top``)(the words from ``position``), found by comparisons of the one V from
    ``guess`` on (exponential then binary search: "V < e^{−k/t}" holds exactly for k ≤ G); (0, len(words) + 1)
    when the words ran out first."""
    uniform = LazyUniform(words, position, top)

    def below(k: int) -> bool | None:
        return True if k == 0 else uniform.below_exp_neg(k, t)

    low = max(int(guess), 0)  # find low with below(low) and high with not below(high)
    step = 1
    outcome = below(low)
    if outcome is None:
        return 0, words.shape[0] + 1
    while not outcome:
        high = low
        low = max(low - step, 0)
        step *= 2
        outcome = below(low)
        if outcome is None:
            return 0, words.shape[0] + 1
        if outcome:
            break
    else:
        high = low + step
        while True:
            outcome = below(high)
            if outcome is None:
                return 0, words.shape[0] + 1
            if not outcome:
                break
            low, step = high, step * 2
            high = low + step
    while high - low > 1:
        middle = (low + high) // 2
        outcome = below(middle)
        if outcome is None:
            return 0, words.shape[0] + 1
        low, high = (middle, high) if outcome else (low, middle)
    return low, uniform.position
