"""The exact samplers (privfit.privacy.exact_sampling) and the noise layer's releases (privfit.privacy.noise).

1. The discrete Gaussian N_Z(0, S), P(z) ∝ e^{−z²/(2S)} (Canonne, Kamath & Steinke 2020, Def. 1 with σ² = S),
   and the discrete Laplace, P(z) ∝ e^{−|z|/t} (CKS Alg. 2), follow their exact pmfs (normalised by summation
   over |z| ≤ 40s + 10, s = √S or t, where the rest of the mass is below e^{−800}): mean, variance, a tail
   probability and a χ² goodness of fit on the integer grid; and they have the law of OpenDP's samplers of the
   same distributions (``make_gaussian``/``make_laplace`` on integers: two-sample χ²). Every statistical
   assertion fails with probability ≤ 1e-6 when the sampler is right (z-scores ≤ 5, exact binomial and χ²
   p-values > 1e-6); the generators are seeded, so the suite is deterministic.
2. The exact release is the lattice mechanism of noise.py's docstring: out = 2^k·(rint(clip(x, −B, B)/2^k) + Z),
   with σ/2^k ∈ (2^19, 2^20] unless the public bound forbids so fine a lattice, and a noise parameter (S or t)
   that pays for the rounding's extra sensitivity.
3. The float sampler reproduces, bit for bit, numpy's draws on an identically seeded generator; the exact
   sampler is reproducible from the generator and leaves the generator's own stream untouched.
4. The exact background stream (:class:`~privfit.privacy.noise.NoisyReleases` with count > 1) draws exactly
   count × size values, refuses a release past its count or after close(), and its thread stops on close() or
   garbage collection. The samplers' per-draw parameters and their int64 limits are checked too.
"""

from __future__ import annotations

import gc
import math
import threading
from fractions import Fraction

import numpy as np
import opendp.prelude as dp
import pytest
from scipy import stats

from privfit.privacy import exact_comparison, exact_sampling
from privfit.privacy.exact_sampling import (
    MAX_GAUSSIAN_VARIANCE,
    MAX_LAPLACE_SCALE,
    discrete_gaussian,
    discrete_laplace,
)
from privfit.privacy.noise import (
    NOISE_BITS,
    SMOOTHING_SCALE,
    gaussian_lattice,
    gaussian_releases,
    integer_noise,
    laplace_lattice,
    laplace_releases,
    using_sampler,
)

dp.enable_features("contrib")

DRAWS = 200_000
Z_BOUND = 5.0  # two-sided normal tail at 5 is 5.7e-7 ≤ 1e-6
P_FLOOR = 1e-6
INTEGER_RANGE_BITS = 50  # the layer keeps B/2^k ≤ 2^50


def draw(kind: str, parameter: int, size: int, seed: int) -> np.ndarray:
    """``size`` exact draws: discrete Gaussian of variance S or discrete Laplace of scale t = ``parameter``."""
    rng = np.random.default_rng(seed)
    return discrete_gaussian(rng, parameter, size) if kind == "gaussian" else discrete_laplace(rng, parameter, size)


def opendp_draws(kind: str, parameter: int, size: int) -> np.ndarray:
    """``size`` draws of the same law from OpenDP's sampler (its integer mechanism applied to a zero vector)."""
    domain = dp.vector_domain(dp.atom_domain(T="i64"))
    if kind == "gaussian":
        measurement = dp.m.make_gaussian(domain, dp.l2_distance(T="i64"), math.sqrt(parameter))
    else:
        measurement = dp.m.make_laplace(domain, dp.l1_distance(T="i64"), float(parameter))
    return np.asarray(measurement([0] * size), dtype=np.int64)


def exact_pmf(kind: str, parameter: int) -> tuple[np.ndarray, np.ndarray]:
    """The support |z| ≤ 40s + 10 and the normalised pmf (s = √S for the Gaussian, t for the Laplace)."""
    scale = math.sqrt(parameter) if kind == "gaussian" else float(parameter)
    half = math.ceil(40 * scale + 10)
    support = np.arange(-half, half + 1)
    if kind == "gaussian":
        log_weight = -(support.astype(np.float64) ** 2) / (2.0 * parameter)
    else:
        log_weight = -np.abs(support).astype(np.float64) / parameter
    weight = np.exp(log_weight - log_weight.max())
    return support, weight / weight.sum()


def merged_bins(support: np.ndarray, expected_points: np.ndarray, *samples: np.ndarray) -> np.ndarray:
    """Counts of each sample on the integer grid (rows), adjacent points merged left to right until every bin
    expects ≥ 5 (``expected_points``); the right tail's remainder joins the last bin, draws beyond the support the
    end bins. The last row is the expected counts."""
    rows = [np.bincount(np.clip(s - support[0], 0, support.size - 1), minlength=support.size) for s in samples]
    rows.append(expected_points)
    merged, accumulated = [], np.zeros(len(rows))
    for point in range(support.size):
        accumulated = accumulated + np.array([row[point] for row in rows], dtype=np.float64)
        if accumulated[-1] >= 5.0:
            merged.append(accumulated)
            accumulated = np.zeros(len(rows))
    merged[-1] = merged[-1] + accumulated
    return np.array(merged).T


def rounded_continuous_variance(kind: str, parameter: int) -> float:
    """The variance of rint(X) for X ~ N(0, S) or Laplace(0, t): the naive sampler's law."""
    law = stats.norm(scale=math.sqrt(parameter)) if kind == "gaussian" else stats.laplace(scale=parameter)
    points = np.arange(-60 * parameter - 10, 60 * parameter + 11)
    mass = law.cdf(points + 0.5) - law.cdf(points - 0.5)
    return float(np.sum(points.astype(np.float64) ** 2 * mass) / mass.sum())


def continuous_variance(kind: str, parameter: int) -> float:
    return float(parameter) if kind == "gaussian" else 2.0 * parameter**2


@pytest.mark.parametrize(
    ("kind", "parameter"), [("gaussian", p) for p in (1, 2, 5, 7, 50)] + [("laplace", p) for p in (1, 2, 3, 7)]
)
def test_exact_sampler_matches_exact_pmf(kind, parameter):
    """Mean 0, the exact discrete variance, P(|Z| ≥ t) for t ≈ 2.5s, and a χ² fit on the grid (p > 1e-6)."""
    support, pmf = exact_pmf(kind, parameter)
    variance = float(np.sum(support.astype(np.float64) ** 2 * pmf))
    fourth = float(np.sum(support.astype(np.float64) ** 4 * pmf))
    if parameter == 1:
        # The variance assertion below has the power to reject the naive sampler, the continuous law rounded to
        # the nearest integer (variance ≈ s² + 1/12 for the Gaussian; 2t² + … for the Laplace): > 10 standard errors.
        assert abs(variance - rounded_continuous_variance(kind, parameter)) > 2 * Z_BOUND * math.sqrt(fourth / DRAWS)
    draws = draw(kind, parameter, DRAWS, seed=parameter)
    assert draws.dtype == np.int64 and draws.shape == (DRAWS,)

    mean_z = draws.mean() / math.sqrt(variance / DRAWS)
    assert abs(mean_z) < Z_BOUND, f"mean {draws.mean():.4f} (z = {mean_z:.2f})"
    second = draws.astype(np.float64) ** 2
    variance_z = (second.mean() - variance) / math.sqrt((fourth - variance**2) / DRAWS)
    assert abs(variance_z) < Z_BOUND, f"variance {second.mean():.4f} vs exact {variance:.4f} (z = {variance_z:.2f})"

    threshold = math.ceil(2.5 * math.sqrt(continuous_variance(kind, parameter)))
    tail = float(pmf[np.abs(support) >= threshold].sum())
    hits = int(np.count_nonzero(np.abs(draws) >= threshold))
    assert stats.binomtest(hits, DRAWS, tail).pvalue > P_FLOOR, f"P(|Z| ≥ {threshold}): {hits}/{DRAWS} vs {tail:.5f}"

    observed, expected = merged_bins(support, pmf * DRAWS, draws)
    assert observed.size >= 3
    assert stats.chisquare(observed, expected).pvalue > P_FLOOR


@pytest.mark.parametrize(
    ("kind", "parameter"),
    [("gaussian", 1), ("gaussian", 4), ("gaussian", 49), ("laplace", 1), ("laplace", 3), ("laplace", 7)],
)
def test_exact_sampler_has_the_law_of_opendps_sampler(kind, parameter):
    """privfit's compiled CKS algorithms against OpenDP's samplers of the same law (perfect-square S, so that
    OpenDP's float scale √S is exact): two-sample χ² on the merged grid, p > 1e-6."""
    count = 20_000
    support, pmf = exact_pmf(kind, parameter)
    ours = draw(kind, parameter, count, seed=100 + parameter)
    theirs = opendp_draws(kind, parameter, count)
    table = merged_bins(support, pmf * count, ours, theirs)[:2]
    assert table.shape[1] >= 3
    assert stats.chi2_contingency(table).pvalue > P_FLOOR


@pytest.mark.parametrize("variance", [2**40, 2**40 + 12_345, 2**42 - 1])
def test_discrete_gaussian_at_the_layers_scales(variance):
    """S near 2^40 (what the layer uses) and at the sampler's top: variance within 2 % (5 standard errors at 125k
    draws) and the 3σ and 4σ tail rates of N(0, S) (the discrete law is the continuous one to within
    e^{−2π²S} here)."""
    count = 125_000
    draws = draw("gaussian", variance, count, seed=variance % 1000).astype(np.float64) / math.sqrt(variance)
    assert abs(np.mean(draws**2) - 1.0) < 0.02
    assert abs(draws.mean()) < Z_BOUND / math.sqrt(count)
    beyond_3 = int(np.count_nonzero(np.abs(draws) >= 3.0))
    assert stats.binomtest(beyond_3, count, 2 * stats.norm.sf(3.0)).pvalue > P_FLOOR
    beyond_4 = int(np.count_nonzero(np.abs(draws) >= 4.0))
    assert beyond_4 <= stats.poisson.ppf(1 - P_FLOOR, count * 2 * stats.norm.sf(4.0))


@pytest.mark.parametrize("scale", [2**20, 2**20 + 777, MAX_LAPLACE_SCALE])
def test_discrete_laplace_at_the_layers_scales(scale):
    """E|Z| = 2r/(1 − r²), r = e^{−1/t} (≈ t) within 2 % (5 standard errors at 62.5k draws), and the tail
    P(|Z| ≥ 3t) ≈ e^{−3}."""
    count = 62_500
    draws = draw("laplace", scale, count, seed=scale % 1000).astype(np.float64)
    ratio = math.exp(-1.0 / scale)
    mean_absolute = 2 * ratio / ((1 - ratio) * (1 + ratio))
    assert abs(np.abs(draws).mean() / mean_absolute - 1.0) < 0.02
    beyond = int(np.count_nonzero(np.abs(draws) >= 3 * scale))
    assert stats.binomtest(beyond, count, math.exp(-3.0)).pvalue > P_FLOOR


@pytest.mark.parametrize(("kind", "parameters"), [("gaussian", (1, 5, 50)), ("laplace", (1, 3, 7))])
def test_per_draw_parameters_give_each_draw_its_own_law(kind, parameters):
    """One parameter per draw (the samplers' other code path: rejected elements propose again): the draws of
    each parameter, interleaved at random, fit that parameter's exact pmf (χ² p > 1e-6 each)."""
    rng = np.random.default_rng(21)
    per_value = 60_000
    values = rng.permutation(np.repeat(np.asarray(parameters, dtype=np.int64), per_value))
    sampler = discrete_gaussian if kind == "gaussian" else discrete_laplace
    draws = sampler(rng, values, values.size)
    for parameter in parameters:
        support, pmf = exact_pmf(kind, parameter)
        observed, expected = merged_bins(support, pmf * per_value, draws[values == parameter])
        assert stats.chisquare(observed, expected).pvalue > P_FLOOR / len(parameters), parameter


def test_per_draw_gaussian_variances_reach_the_maximum():
    values = np.asarray([MAX_GAUSSIAN_VARIANCE, 2**40] * 20_000, dtype=np.int64)
    draws = discrete_gaussian(np.random.default_rng(22), values, values.size).astype(np.float64)
    for variance in (MAX_GAUSSIAN_VARIANCE, 2**40):
        ratio = np.mean(draws[values == variance] ** 2) / variance
        assert abs(ratio - 1.0) < Z_BOUND * math.sqrt(2 / 20_000)


def test_exact_samplers_refuse_parameters_out_of_range():
    rng = np.random.default_rng(0)
    for variance in (0, -3, MAX_GAUSSIAN_VARIANCE + 1):
        with pytest.raises(ValueError, match="variance"):
            discrete_gaussian(rng, variance, 5)
    for scale in (0, MAX_LAPLACE_SCALE + 1):
        with pytest.raises(ValueError, match="scale"):
            discrete_laplace(rng, scale, 5)


def test_discrete_gaussian_accepts_its_documented_maximum():
    """S = MAX_GAUSSIAN_VARIANCE works: every intermediate integer fits in int64 (at S = 2^42 the acceptance
    step's denominator S·t, t = ⌊√S⌋ + 1, would be 2^63 + 2^42)."""
    draws = discrete_gaussian(np.random.default_rng(1), MAX_GAUSSIAN_VARIANCE, 10_000).astype(np.float64)
    assert abs(np.mean(draws**2) / MAX_GAUSSIAN_VARIANCE - 1.0) < Z_BOUND * math.sqrt(2 / draws.size)


class CraftedWords:
    """A stand-in for a generator whose raw words are ``words`` first, then a seeded generator's: the samplers take
    nothing from a generator but ``bit_generator.random_raw``."""

    def __init__(self, words: list[int]) -> None:
        self._words = np.asarray(words, dtype=np.uint64)
        self._rest = np.random.default_rng(0).bit_generator
        self.bit_generator = self

    def random_raw(self, size: int) -> np.ndarray:
        head, self._words = self._words[:size], self._words[size:]
        return np.concatenate((head, self._rest.random_raw(size - head.size)))


def accepted_word(m: int, value: int) -> int:
    """The least 64-bit word that the uniform-integer routine (Lemire) accepts for modulus m and maps to ``value``:
    ⌈(value·2^64 + T)/m⌉, T = 2^64 mod m (exact integers)."""
    return -(-(value * 2**64 + 2**64 % m) // m)


def exp_minus_one_word(success: bool) -> int:
    """A word for which Bernoulli(e^{−1}) (one uniform U on [0, 18!)) gives ``success``: K = 3 (odd) for
    U = 18!/3!, K = 2 (even) for U = 18! − 1."""
    factorial = math.factorial(18)
    return accepted_word(factorial, factorial // 6 if success else factorial - 1)


def test_discrete_gaussian_refuses_a_proposal_whose_square_would_overflow():
    """A discrete Laplace proposal |Y| > 2^31 (probability below e^{−1024}) would make |Y|·t leave the range where
    the acceptance's float and integer arithmetic is exact: the sampler must raise instead. At S = 2^42 − 1
    (t = 2^21) a first word of 0 (the proposal's uniform: its top 63 bits all zero, so the exact slow path counts
    the geometric), the acceptance's word, then 23 more zero words make V = 2^{−1536}, so G = ⌊−t·ln V⌋ > 1,064·2^21
    > 2^31."""
    words = [0] * 25 + [2**63]
    with pytest.raises(OverflowError):
        discrete_gaussian(CraftedWords(words), MAX_GAUSSIAN_VARIANCE, 3)
    # one zero word fewer: V = 2^{−1472}, G = ⌊2^21·1472·ln 2⌋ < 2^31, a proposal in range, accepted or not
    words = [0] * 24 + [2**63]
    assert discrete_gaussian(CraftedWords(words), MAX_GAUSSIAN_VARIANCE, 3).shape == (3,)


@pytest.mark.parametrize("variance", [1, 3, 50, 2**20 + 7, 2**40, MAX_GAUSSIAN_VARIANCE])
def test_discrete_gaussian_is_the_same_function_of_the_words_at_any_margin(monkeypatch, variance):
    """The float fast path decides a comparison only where its error bound proves the answer, and the slow path
    settles the rest exactly on the same uniform: so the draws are one function of the word stream whatever the
    margin ρ. Draw for draw, the production margin gives the draws of ρ = 2^{−4} and ρ = 1/2, at which most
    comparisons go to the slow path (counted here); a slow path that decided one comparison wrongly would differ."""
    size = 600
    settled = []
    original = exact_sampling._SlowPath.settle

    def counting(self, words):  # type: ignore[no-untyped-def]
        settled.append(self.request[0])
        return original(self, words)

    reference = discrete_gaussian(np.random.default_rng(variance), variance, size)
    monkeypatch.setattr(exact_sampling._SlowPath, "settle", counting)
    for margin in (2.0**-4, 0.5):
        settled.clear()
        draws = exact_sampling._discrete_gaussian(np.random.default_rng(variance), variance, size, margin)
        assert np.array_equal(draws, reference)
        assert settled.count(exact_sampling._SLOW_ACCEPT) > size // 20
        assert variance == 1 or settled.count(exact_sampling._SLOW_GEOMETRIC) > size // 10


def test_a_wrong_slow_path_is_detected_by_the_margin_comparison(monkeypatch):
    """The check above has power: a slow path that flips its acceptance decisions changes the draws."""
    reference = discrete_gaussian(np.random.default_rng(5), 50, 300)

    def flipped(words, position, top, num, den):  # type: ignore[no-untyped-def]
        decision, following = exact_comparison.below_exp_neg(words, position, top, num, den)
        return 1 - decision, following

    monkeypatch.setattr(exact_sampling, "below_exp_neg", flipped)
    assert not np.array_equal(exact_sampling._discrete_gaussian(np.random.default_rng(5), 50, 300, 0.5), reference)


def test_discrete_gaussian_refuses_a_margin_below_its_proven_one():
    with pytest.raises(ValueError, match="margin"):
        exact_sampling._discrete_gaussian(np.random.default_rng(0), 5, 10, exact_sampling.GAUSSIAN_MARGIN / 2)


def test_discrete_laplace_refuses_a_run_that_would_overflow():
    """V ≥ 2^22 Bernoulli(e^{−1}) successes (probability e^{−2^22}) could carry X = U + t·V past 2^63 at t = 2^40:
    the sampler raises (here at t = 1)."""
    words = [0] + [exp_minus_one_word(True)] * 2**22 + [exp_minus_one_word(False)]
    with pytest.raises(OverflowError):
        discrete_laplace(CraftedWords(words), 1, 2)


@pytest.mark.parametrize("m", [1, 2, 3, 5, 6, 7, 12])
def test_uniform_integers_are_exactly_uniform_over_all_words(m):
    """Lemire's multiply-and-reject (exact_sampling._uniform) is unbiased, checked over all 2^64 words: with
    2^64 = Q·m + T, the words that map to j are the interval I_j = [⌈j·2^64/m⌉, ⌈(j + 1)·2^64/m⌉) and the kernel
    accepts those with x·m mod 2^64 ≥ T, which grows with x on I_j — so its decisions at the interval's ends and
    around the first accepted word fix them all; there are exactly Q accepted words for every j."""
    two64 = 2**64
    remainder, quotient = two64 % m, two64 // m
    for j in range(m):
        start, first, end = -(-(j * two64) // m), accepted_word(m, j), -(-((j + 1) * two64) // m)
        assert start <= first < end and end - first == quotient
        following = accepted_word(m, (j + 1) % m)
        for word in {start, first - 1} & set(range(start, first)):  # rejected: the next word is used
            assert exact_sampling._uniform(np.array([word, following], dtype=np.uint64), 0, m) == ((j + 1) % m, 2)
        for word in (first, first + 1, end - 1):
            assert exact_sampling._uniform(np.array([word, following], dtype=np.uint64), 0, m) == (j, 1)
        assert (first * m) % two64 >= remainder  # the rule's own first accepted word
        assert start == first or (start * m) % two64 < remainder


def test_uniform_integers_match_the_exact_rule_on_large_moduli():
    """On random and extreme words and moduli up to 2^63 − 1 (the samplers' ranges: 18!, 2S·t, t·k), the kernel
    returns ⌊x·m/2^64⌋ for the first word with x·m mod 2^64 ≥ 2^64 mod m — the rule above, in Python integers —
    so its 128-bit product is exact."""
    rng = np.random.default_rng(31)
    moduli = [2, 3, math.factorial(18), 2**21, 2**40 + 1, 2 * (2**40 + 16) * (2**20 + 1), 2**62 + 12345, 2**63 - 1]
    words = [*rng.integers(0, 2**64, size=200, dtype=np.uint64).tolist(), 0, 1, 2**63, 2**64 - 2, 2**64 - 1]
    for m in moduli:
        for position in range(0, len(words) - 1):
            expected = position
            while (words[expected] * m) % 2**64 < 2**64 % m:
                expected += 1
            buffer = np.array(words[position:], dtype=np.uint64)
            value, used = exact_sampling._uniform(buffer, 0, m)
            assert (value, used) == ((words[expected] * m) >> 64, expected - position + 1), (m, position)


@pytest.mark.parametrize(
    ("num", "den"),
    [(1, 2), (7, 7), (3, 1_000), (2**39, 2**40), (2**62 - 5, 2**62), (0, 9)],
    ids=["1/2", "1", "3/1000", "1/2 generic", "near 1 generic", "0"],
)
def test_bernoulli_exp_has_probability_exp_minus_gamma(num, den):
    """CKS Alg. 1 in the discrete Laplace's kernel (exact_sampling._bernoulli_exp_fraction, γ ≤ 1: the one-word
    path for 6·den³ < 2^63, the series otherwise): 100,000 draws, binomial test against e^{−num/den}, p > 1e-6."""
    count = 100_000
    words = np.random.default_rng(num % 97 + den % 89).bit_generator.random_raw(40 * count)
    position, successes = 0, 0
    for _ in range(count):
        success, position = exact_sampling._bernoulli_exp_fraction(words, position, num, den)
        successes += bool(success)
    assert position <= words.size
    probability = math.exp(-num / den)
    assert successes == count if num == 0 else stats.binomtest(successes, count, probability).pvalue > P_FLOOR


@pytest.mark.parametrize(("kind", "parameter"), [("gaussian", 3), ("laplace", 2)])
def test_compiled_sampler_matches_the_exact_pmf_on_many_draws(kind, parameter):
    """2,000,000 draws at a small parameter, where every point's mass is large: χ² against the exact pmf
    (p > 1e-6) has the power to detect a bias of about 1 % of a single point's mass."""
    count = 2_000_000
    support, pmf = exact_pmf(kind, parameter)
    observed, expected = merged_bins(support, pmf * count, draw(kind, parameter, count, seed=40 + parameter))
    assert observed.size >= 9
    assert stats.chisquare(observed, expected).pvalue > P_FLOOR


@pytest.mark.parametrize(
    ("kind", "parameter"),
    [("gaussian", 2**40), ("gaussian", 5), ("laplace", 2**20), ("laplace", 3), ("gaussian", "per draw")],
)
def test_refilling_the_words_gives_the_same_draws(monkeypatch, kind, parameter):
    """The words' refill path (a draw that runs out of words runs again from its start on more words): with
    blocks of one word every draw runs out, many times, yet the draws are those of one large block from the same
    seed, draw for draw — the output is a function of the generator's word stream alone."""
    size = 3_000
    if parameter == "per draw":
        parameter = np.random.default_rng(9).choice(np.array([1, 50, 2**40], dtype=np.int64), size=size)
    sampler = discrete_gaussian if kind == "gaussian" else discrete_laplace
    generators = (lambda: np.random.default_rng(7), lambda: np.random.Generator(np.random.PCG64DXSM(7)))
    references = [sampler(make(), parameter, size) for make in generators]
    monkeypatch.setattr(exact_sampling, "_BLOCK_WORDS", 1)
    monkeypatch.setattr(exact_sampling, "_SPARE_WORDS", 0)
    for make, reference in zip(generators, references, strict=True):  # random_raw words, compiled PCG64DXSM words
        assert np.array_equal(sampler(make(), parameter, size), reference)


class RawWordsOnly:
    """A generator seen only through its bit generator's ``random_raw`` (the samplers' path for any bit generator
    but PCG64DXSM)."""

    def __init__(self, source: np.random.BitGenerator) -> None:
        self._source = source
        self.bit_generator = self

    def random_raw(self, size: int) -> np.ndarray:
        return self._source.random_raw(size)


def test_compiled_pcg64dxsm_makes_numpys_raw_words():
    """exact_sampling._pcg64dxsm_fill: the words and the final state of numpy's PCG64DXSM, word for word."""
    ours, numpys = np.random.PCG64DXSM(2024), np.random.PCG64DXSM(2024)
    state, increment = ours.state["state"]["state"], ours.state["state"]["inc"]
    lcg = np.array([state >> 64, state % 2**64, increment >> 64, increment % 2**64], dtype=np.uint64)
    words = np.empty(10_000, dtype=np.uint64)
    exact_sampling._pcg64dxsm_fill(lcg, words)
    assert np.array_equal(words, numpys.random_raw(10_000))
    assert int(lcg[0]) << 64 | int(lcg[1]) == numpys.state["state"]["state"]


@pytest.mark.parametrize("kind", ["gaussian", "laplace"])
def test_a_pcg64dxsm_generator_gives_the_draws_of_its_raw_words(kind):
    """For the service's generators (PCG64DXSM) the samplers make the words in compiled code: the draws are those
    of the same generator's ``random_raw`` words, draw for draw, and the generator ends in the same state."""
    sampler, parameter = (discrete_gaussian, 2**40) if kind == "gaussian" else (discrete_laplace, 2**20)
    compiled, raw = np.random.Generator(np.random.PCG64DXSM(6)), np.random.PCG64DXSM(6)
    assert np.array_equal(sampler(compiled, parameter, 5_000), sampler(RawWordsOnly(raw), parameter, 5_000))
    assert compiled.bit_generator.state == raw.state


def test_a_large_call_draws_its_halves_from_two_child_generators():
    """From _SPLIT_DRAWS draws on, the halves come from ``rng.spawn(2)``'s children (in two threads): the result
    is those children's draws, whatever the threads' timing."""
    size = exact_sampling._SPLIT_DRAWS + 2
    draws = discrete_gaussian(np.random.default_rng(8), 2**40, size)
    children = np.random.default_rng(8).spawn(2)
    halves = [discrete_gaussian(child, 2**40, size // 2) for child in children]
    assert np.array_equal(draws, np.concatenate(halves))


def _releases(kind: str, rng: np.random.Generator, *, scale: float, sensitivity: float, **kwargs):
    if kind == "gaussian":
        return gaussian_releases(rng, sigma=scale, l2_sensitivity=sensitivity, **kwargs)
    return laplace_releases(rng, scale=scale, l1_sensitivity=sensitivity, **kwargs)


@pytest.mark.parametrize("kind", ["gaussian", "laplace"])
def test_exact_release_is_the_lattice_mechanism(kind):
    """out = 2^k·(rint(clip(x, −B, B)/2^k) + Z): the outputs are lattice points, and out/2^k minus the rounded,
    clipped input is noise of the lattice's law — also for the coordinates far outside the bound."""
    rng = np.random.default_rng(11)
    bound, shape = 3.0, (2_000, 5)
    values = rng.uniform(-10 * bound, 10 * bound, size=shape)
    with using_sampler("exact"):
        stream = _releases(kind, rng, scale=0.05, sensitivity=0.7, shape=shape, count=1, bound=bound)
    assert stream.sampler == "exact" and stream.lattice is not None and stream.lattice.kind == kind
    lattice = stream.lattice
    out = stream.release(values)
    units = np.ldexp(out, -lattice.exponent)
    assert np.array_equal(units, np.rint(units)), "every output is a multiple of 2^k"
    noise = units - np.rint(np.ldexp(np.clip(values, -bound, bound), -lattice.exponent))
    scale = math.sqrt(lattice.integer_parameter) if kind == "gaussian" else lattice.integer_parameter
    assert lattice.noise_scale == pytest.approx(scale * lattice.spacing)
    # Without the clip, the residual of the ~90 % clipped coordinates would reach 9B/2^k ≈ 2^30·s.
    assert np.abs(noise).max() < (10 if kind == "gaussian" else 30) * scale
    if kind == "gaussian":
        assert abs(np.mean(noise**2) / scale**2 - 1.0) < Z_BOUND * math.sqrt(2 / noise.size)
    else:
        assert abs(np.abs(noise).mean() / scale - 1.0) < Z_BOUND / math.sqrt(noise.size)
    assert abs(noise.mean()) < Z_BOUND * scale * math.sqrt(continuous_variance(kind, 1) / noise.size)


@pytest.mark.parametrize("kind", ["gaussian", "laplace"])
def test_exact_release_of_lattice_values_moves_by_lattice_multiples(kind):
    rng = np.random.default_rng(12)
    with using_sampler("exact"):
        stream = _releases(kind, rng, scale=1.3, sensitivity=2.0, shape=(50, 4), count=1, bound=100.0)
    exponent = stream.lattice.exponent
    values = np.ldexp(rng.integers(-(2**20), 2**20, size=(50, 4)).astype(np.float64), exponent)
    moved = np.ldexp(stream.release(values) - values, -exponent)
    assert np.array_equal(moved, np.rint(moved))
    assert np.count_nonzero(moved) > 150  # the noise is not zero (its scale is ~2^20 lattice units)


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
    (0.5, 1.0, 3, 2.0**40),  # the bound limits the lattice: σ/2^k = 2^−1/2^−10 = 2^9
    (2.0**-30, 2.0**-29, 2, 1.0),  # the noise's and the bound's limits meet at k = −50
]


@pytest.mark.parametrize("kind", ["gaussian", "laplace"])
@pytest.mark.parametrize(("scale", "sensitivity", "dimension", "bound"), LATTICE_CASES)
def test_lattice_is_fine_inflated_and_in_range(kind, scale, sensitivity, dimension, bound):
    """σ/2^k ∈ (2^19, 2^20] unless a finer lattice would put B/2^k above 2^50; B/2^k ≤ 2^50; the inflation covers
    the rounding's growth √d·2^k (L1: d·2^k) of the sensitivity, in exact rational arithmetic; the integer
    parameter is the least integer ≥ (σ·inflation/2^k)² + τ² (Gaussian variance S) or ≥ b·inflation/2^k
    (Laplace scale t), within the exact samplers' ranges."""
    make = gaussian_lattice if kind == "gaussian" else laplace_lattice
    lattice = make(scale, sensitivity, dimension, bound)
    spacing = Fraction(2) ** lattice.exponent
    growth = _sqrt_upper(dimension) if kind == "gaussian" else Fraction(dimension)
    assert lattice.spacing == float(spacing) and lattice.bound == bound and lattice.kind == kind
    in_units = Fraction(scale) / spacing
    bound_limited = Fraction(bound) / (spacing / 2) > 2**INTEGER_RANGE_BITS
    assert in_units <= 2**NOISE_BITS
    assert in_units > 2 ** (NOISE_BITS - 1) or bound_limited
    assert Fraction(bound) / spacing <= 2**INTEGER_RANGE_BITS
    # The inflation covers the rounding's sensitivity growth, in exact rational arithmetic.
    assert Fraction(lattice.inflation) * Fraction(sensitivity) >= Fraction(sensitivity) + growth * spacing
    if not bound_limited:
        assert lattice.inflation <= (1 + float(growth) * scale / sensitivity * 2.0 ** (1 - NOISE_BITS)) * (1 + 2.0**-49)
    noise_units = Fraction(scale) * Fraction(lattice.inflation) / spacing
    parameter = lattice.integer_parameter
    assert isinstance(parameter, int)
    if kind == "gaussian":
        needed = noise_units**2 + Fraction(SMOOTHING_SCALE) ** 2
        assert needed <= parameter < needed + 1 and parameter <= MAX_GAUSSIAN_VARIANCE
        assert lattice.noise_scale >= scale * lattice.inflation
    else:
        assert max(noise_units, 1) <= parameter < max(noise_units, 1) + 1 and parameter <= MAX_LAPLACE_SCALE


@pytest.mark.parametrize("kind", ["gaussian", "laplace"])
def test_huge_public_bound_forces_a_coarser_lattice_that_stays_safe(kind):
    make = gaussian_lattice if kind == "gaussian" else laplace_lattice
    fine = make(1.0, 1.0, 4, 10.0)
    coarse = make(1.0, 1.0, 4, 1e30)
    assert fine.exponent == -NOISE_BITS
    assert coarse.exponent == math.ceil(math.log2(1e30)) - INTEGER_RANGE_BITS
    growth = 2.0 if kind == "gaussian" else 4.0
    assert coarse.inflation >= 1.0 + growth * coarse.spacing and coarse.inflation > 1e15 > fine.inflation
    assert coarse.noise_scale >= coarse.inflation * 1.0  # σ' = σ·inflation
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


@pytest.mark.parametrize("count", [1, 3])
def test_exact_releases_are_reproducible_and_leave_the_generators_stream_alone(count):
    """The exact noise comes from a child of the caller's generator (``Generator.spawn``): the same seed gives
    the same releases (also when drawn ahead in a thread), and the caller's own draws are those it would make
    without the stream."""
    shape, values = (4, 3), np.linspace(-1, 1, 12).reshape(4, 3)
    outs = []
    for _ in range(2):
        rng = np.random.default_rng(77)
        with using_sampler("exact"):
            stream = gaussian_releases(rng, sigma=0.4, l2_sensitivity=1.0, shape=shape, count=count, bound=2.0)
        outs.append([stream.release(values) for _ in range(count)])
        assert np.array_equal(rng.random(5), np.random.default_rng(77).random(5))
    assert all(np.array_equal(a, b) for a, b in zip(*outs, strict=True))
    assert not np.array_equal(outs[0][0], values)


def test_integer_noise_draws_the_lattices_law():
    lattice = gaussian_lattice(1.0, 1.0, 1, 10.0)
    rng, reference = np.random.default_rng(5), np.random.default_rng(5)
    assert np.array_equal(
        integer_noise(lattice, 100, rng), discrete_gaussian(reference, lattice.integer_parameter, 100)
    )
    lattice = laplace_lattice(1.0, 1.0, 1, 10.0)
    assert np.array_equal(integer_noise(lattice, 100, rng), discrete_laplace(reference, lattice.integer_parameter, 100))


def _exact_stream(count: int, shape: tuple[int, ...]):
    with using_sampler("exact"):
        return gaussian_releases(
            np.random.default_rng(0), sigma=1.0, l2_sensitivity=1.0, shape=shape, count=count, bound=10.0
        )


def test_background_stream_is_consumed_exactly_and_refuses_a_release_past_its_count():
    """200 releases of 9×10 = 18,000 draws (two producer blocks): all distinct lattice releases; then the producer
    has finished with nothing left over (it drew exactly count × size), and a 201st release raises."""
    shape, count = (9, 10), 200
    stream = _exact_stream(count, shape)
    draws = stream._draws
    assert draws is not None
    exponent = stream.lattice.exponent
    outs = np.stack([stream.release(np.zeros(shape)) for _ in range(count)])
    units = np.ldexp(outs, -exponent)
    assert np.array_equal(units, np.rint(units))
    assert np.unique(outs.reshape(count, -1), axis=0).shape[0] == count
    variance = stream.lattice.integer_parameter
    assert abs(np.mean(units**2) / variance - 1.0) < Z_BOUND * math.sqrt(2 / units.size)
    draws._thread.join(timeout=10)
    assert not draws._thread.is_alive()
    assert draws._buffer.size == 0 and draws._queue.empty()
    with pytest.raises(RuntimeError, match="all 200 releases"):
        stream.release(np.zeros(shape))


def test_closing_a_stream_stops_its_thread():
    stream = _exact_stream(100_000, (64,))  # 6.4M draws: far more than the producer may hold ahead
    stream.release(np.zeros(64))
    thread = stream._draws._thread
    stream.close()
    thread.join(timeout=10)
    assert not thread.is_alive()


@pytest.mark.parametrize("sampler", ["exact", "float"])
def test_a_closed_stream_refuses_further_releases(sampler):
    """After close() the exact producer has stopped, so a release would wait for its draws forever: every closed
    stream raises instead."""
    with using_sampler(sampler):
        stream = gaussian_releases(
            np.random.default_rng(0), sigma=1.0, l2_sensitivity=1.0, shape=(4_096,), count=100, bound=10.0
        )
    stream.release(np.zeros(4_096))
    stream.close()
    outcome: list[BaseException | np.ndarray] = []

    def attempt() -> None:
        try:
            outcome.append(stream.release(np.zeros(4_096)))
        except RuntimeError as error:
            outcome.append(error)

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive(), "a release after close() blocks"
    assert isinstance(outcome[0], RuntimeError) and "closed" in str(outcome[0])


def test_garbage_collecting_a_stream_stops_its_thread():
    stream = _exact_stream(100_000, (64,))
    stream.release(np.zeros(64))
    thread = stream._draws._thread
    del stream
    gc.collect()
    thread.join(timeout=10)
    assert not thread.is_alive()
