"""The noisy-histogram release of private preprocessing (privfit.privacy.histogram).

1. Golden values: the RDP curve α·2p/(2S) = α·p/S, the symlog grid and the exact bin counts, by hand.
2. The curve and its ε against dp_accounting's Gaussian (σ/Δ = √S/√(2p)), and the calibration to a filter share.
3. An empirical audit (privfit.privacy.audit) on replace-one neighbours: the release at a variance S whose claimed
   ε at δ = 1e-5 is ≈ 1.5 must stay at or below it; broken releases (S/16, or one bin without noise) must
   exceed it. The audit draws the noise of 100k releases at once with the exact sampler; real
   release_histograms calls are shown to be exactly "true counts + that sampler's draws" and to have its law.
4. Exactness: released counts are int64 integers, and the noise has mean 0 and the discrete Gaussian's variance.

Every generator is seeded (public synthetic data), so the file is deterministic; statistical tolerances are
stated as multiples of the standard error they bound.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from privfit.datasets.preprocessing import BINS
from privfit.privacy import DEFAULT_GRID, PrivacyCost, PrivacyFilter, PrivacyParameterError, make_generator
from privfit.privacy.audit import epsilon_lower_bound
from privfit.privacy.exact_sampling import MAX_GAUSSIAN_VARIANCE, discrete_gaussian
from privfit.privacy.histogram import (
    histogram_cost,
    histogram_counts,
    histogram_release_cost,
    release_histograms,
    symlog_edges,
    variance_for_share,
)

ORDERS = DEFAULT_GRID.orders


def order_index(alpha: float) -> int:
    index = int(np.argmin(np.abs(ORDERS - alpha)))
    assert ORDERS[index] == alpha
    return index


def discrete_gaussian_moments(variance: int) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Support, pmf, variance and fourth moment of N_Z(0, S) (P(z) ∝ exp(−z²/(2S))), summed over |z| ≤ 60√S
    (the mass beyond is below e^{−1800})."""
    top = int(60 * math.sqrt(variance)) + 1
    z = np.arange(-top, top + 1)
    weights = np.exp(-(z.astype(np.float64) ** 2) / (2.0 * variance))
    pmf = weights / weights.sum()
    return z, pmf, float((pmf * z**2).sum()), float((pmf * z.astype(np.float64) ** 4).sum())


# ---------------------------------------------------------------------------------------------------------------
# 1. golden values
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("columns", "variance", "at_2", "at_10", "at_1024"),
    [
        (1, 1, 2.0, 10.0, 1024.0),  # α·1/1
        (2, 5, 0.8, 4.0, 409.6),  # α·2/5
        (3, 12, 0.5, 2.5, 256.0),  # α·3/12 = α/4
        (7, 1000, 0.014, 0.07, 7.168),  # α·7/1000
    ],
)
def test_histogram_cost_is_alpha_p_over_s_never_below_the_exact_value(columns, variance, at_2, at_10, at_1024):
    curve = histogram_cost(columns, variance, ORDERS)
    assert curve.shape == ORDERS.shape
    for alpha, expected in [(2.0, at_2), (10.0, at_10), (1024.0, at_1024)]:
        assert curve[order_index(alpha)] == pytest.approx(expected, rel=1e-14)
    # exact rational comparison at every grid order (α is the grid's float): rounded up, by a few ulps at most
    for alpha, value in zip(ORDERS, curve, strict=True):
        exact = Fraction(float(alpha)) * columns / variance
        assert Fraction(float(value)) >= exact
        assert float(value) <= float(exact) * (1 + 1e-14)


@pytest.mark.parametrize(("columns", "variance"), [(0, 1), (1, 0), (-1, 5)])
def test_histogram_cost_refuses_empty_releases_and_zero_noise(columns, variance):
    with pytest.raises(PrivacyParameterError):
        histogram_cost(columns, variance, ORDERS)


def test_symlog_edges_golden_on_0_120_with_four_bins():
    """t = log1p(x) on [0, 120] is [0, log 121]; the edges are 121^{k/4} − 1: 0, √11 − 1, 10, 11√11 − 1, 120."""
    edges = symlog_edges(0.0, 120.0, 4)
    assert edges is not None and edges.shape == (5,)
    expected = [0.0, math.sqrt(11.0) - 1.0, 10.0, 11.0 * math.sqrt(11.0) - 1.0, 120.0]
    assert edges.tolist() == pytest.approx(expected, rel=1e-14, abs=0.0)
    assert edges[0] == 0.0 and edges[-1] == 120.0  # exactly (the mapped-back formula gives 120.00000000000003)


def test_symlog_edges_golden_on_minus_1_1_with_two_bins():
    """t ∈ [−log 2, log 2]; the midpoint t = 0 maps to 0: the edges are exactly −1, 0, 1."""
    edges = symlog_edges(-1.0, 1.0, 2)
    assert edges is not None
    assert edges.tolist() == [-1.0, 0.0, 1.0]


def test_symlog_edges_fall_back_to_uniform_then_to_none_for_too_narrow_ranges():
    lower = 1e6
    uniform = symlog_edges(lower, lower + 3e-8, 32)  # symlog rounds edges together; uniform ones are distinct
    assert uniform is not None and np.all(np.diff(uniform) > 0)
    assert uniform[0] == lower and uniform[-1] == lower + 3e-8
    assert symlog_edges(lower, lower + 1e-9, 32) is None  # 33 distinct floats do not fit (ulp(1e6) ≈ 1.2e-10)
    with pytest.raises(PrivacyParameterError):
        symlog_edges(1.0, 1.0, 4)
    with pytest.raises(PrivacyParameterError):
        symlog_edges(0.0, 1.0, 0)


def test_histogram_counts_on_a_hand_example_with_values_on_edges_and_at_the_upper_bound():
    """Bins [0, 1), [1, 2), [2, 4] (the last closed): a value on an interior edge counts in the bin above it."""
    edges = np.array([0.0, 1.0, 2.0, 4.0])
    values = np.array([0.0, 0.5, 1.0, 1.0, 1.999, 2.0, 3.0, 4.0])
    counts = histogram_counts(values, edges)
    assert counts.dtype == np.int64
    assert counts.tolist() == [2, 3, 3]
    grid = symlog_edges(0.0, 120.0, 4)
    assert grid is not None
    on_edges = np.array([grid[0], grid[1], grid[2], grid[3], grid[4], 5.0])
    assert histogram_counts(on_edges, grid).tolist() == [1, 2, 1, 2]  # 0 | √11−1, 5 | 10 | 11√11−1, 120


# ---------------------------------------------------------------------------------------------------------------
# 2. cross-check with dp_accounting; calibration to a filter share
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("columns", [1, 2, 5, 40])
@pytest.mark.parametrize("variance", [1, 7, 64, 1234, 10**6])
def test_curve_and_epsilon_match_dp_accounting_gaussian(columns, variance):
    dpa = pytest.importorskip("dp_accounting", reason="dp-accounting is a test dependency: pip install -e '.[test]'")
    from dp_accounting.rdp import rdp_privacy_accountant as dpa_rdp

    ours = histogram_cost(columns, variance, ORDERS)
    accountant = dpa_rdp.RdpAccountant(list(ORDERS), dpa.NeighboringRelation.REPLACE_ONE)
    accountant.compose(dpa.GaussianDpEvent(math.sqrt(variance) / math.sqrt(2 * columns)))
    np.testing.assert_allclose(ours, accountant.rdp, rtol=1e-9, atol=0)
    assert (ours >= accountant.rdp).all()  # the curve is rounded up: never below dp_accounting's
    for delta in (1e-5, 1e-6, 1e-9):
        eps_ours = PrivacyCost(ours, DEFAULT_GRID).epsilon(delta).epsilon
        eps_theirs = accountant.get_epsilon(delta)
        # ≥ up to float evaluation order only: privfit's conversion (log1p(−1/α) − (log δ + log α)/(α − 1)) is
        # not rounded up, and at p = 1, S = 10⁶, δ = 1e-9 (α = 1024) it lands 1 ulp (1.3e-16 relative) below
        # dp_accounting's compute_epsilon of the same, larger curve.
        assert eps_ours >= eps_theirs * (1 - 1e-15)
        assert eps_ours <= eps_theirs * (1 + 1e-6)


def filter_share(columns: int, variance: int, privacy_filter: PrivacyFilter) -> float:
    cost = histogram_release_cost(columns, variance, privacy_filter.grid, bins=BINS)
    return privacy_filter.measure(cost).share


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 5.0])
def test_variance_for_share_is_the_smallest_integer_within_the_share(epsilon):
    privacy_filter = PrivacyFilter.for_budget(epsilon, 1e-6, DEFAULT_GRID)
    for columns in (1, 2, 5, 40):
        for share in (0.01, 0.05, 0.2):
            variance = variance_for_share(columns, privacy_filter, share, bins=BINS)
            assert isinstance(variance, int) and 1 <= variance <= MAX_GAUSSIAN_VARIANCE
            assert filter_share(columns, variance, privacy_filter) <= share, (columns, share)
            assert variance == 1 or filter_share(columns, variance - 1, privacy_filter) > share, (columns, share)


def test_variance_for_share_is_none_beyond_the_exact_sampler_and_refuses_bad_shares():
    privacy_filter = PrivacyFilter.for_budget(0.5, 1e-6, DEFAULT_GRID)
    assert variance_for_share(10**6, privacy_filter, 1e-7, bins=BINS) is None
    for share in (0.0, -0.1, 1.5, math.nan):
        with pytest.raises(PrivacyParameterError):
            variance_for_share(1, privacy_filter, share, bins=BINS)


# ---------------------------------------------------------------------------------------------------------------
# 3. empirical audit on replace-one neighbours
# ---------------------------------------------------------------------------------------------------------------

AUDIT_VARIANCE = 16  # claimed ε ≈ 1.48 at δ = 1e-5 for one column (sensitivity² 2, σ = 4)
AUDIT_DELTA = 1e-5
AUDIT_TRIALS = 100_000  # per dataset: 4·10⁵ exact draws per variant, ≈ 0.5 s
AUDIT_CONFIDENCE = 1 - 1e-6  # as tests/privacy/test_noise_audit.py: the passing audit holds for all but 1e-6 of seeds
AUDIT_EDGES = symlog_edges(0.0, 120.0, 4)
# D and D′ differ in one row: 5 (bin 1, [√11−1, 10)) in D is 50 (bin 3, [11√11−1, 120]) in D′.
COLUMN_D = np.array([1.0, 5.0, 5.0, 20.0, 50.0, 100.0])
COLUMN_D_PRIME = np.array([1.0, 5.0, 50.0, 20.0, 50.0, 100.0])
BIN_A, BIN_B = 1, 3


def claimed_epsilon(variance: int) -> float:
    return PrivacyCost(histogram_cost(1, variance, ORDERS), DEFAULT_GRID).epsilon(AUDIT_DELTA).epsilon


def test_neighbours_differ_by_one_unit_in_two_bins():
    """H(D) − H(D′) = e_a − e_b: ‖·‖₂² = 2 = 2p, the sensitivity the curve assumes."""
    assert AUDIT_EDGES is not None
    difference = histogram_counts(COLUMN_D, AUDIT_EDGES) - histogram_counts(COLUMN_D_PRIME, AUDIT_EDGES)
    expected = np.zeros(4, dtype=np.int64)
    expected[BIN_A], expected[BIN_B] = 1, -1
    assert difference.tolist() == expected.tolist()
    assert int((difference**2).sum()) == 2


def model_releases(column: np.ndarray, variance: int, rng: np.random.Generator, noised: tuple[int, ...]) -> np.ndarray:
    """AUDIT_TRIALS releases of bins (a, b) of ``column``: true counts plus N_Z(0, S) on the ``noised`` bins,
    drawn at once (shape (trials, 2)). With noised = (0, 1) this is release_histograms restricted to the two bins
    that differ (test_release_histograms_is_true_counts_plus_the_exact_sampler); the other bins are identically
    distributed under D and D′ and independent, so they cannot help a distinguisher."""
    assert AUDIT_EDGES is not None
    true = histogram_counts(column, AUDIT_EDGES)[[BIN_A, BIN_B]]
    noise = np.zeros((AUDIT_TRIALS, 2), dtype=np.int64)
    noise[:, list(noised)] = discrete_gaussian(rng, variance, AUDIT_TRIALS * len(noised)).reshape(-1, len(noised))
    return true + noise


@pytest.mark.parametrize("variant", ["calibrated", "sixteenth variance", "one bin without noise"])
def test_audit_of_the_release_on_neighbouring_datasets(variant):
    """Score: for two noised bins the log-likelihood ratio of D vs D′ is
    [(h_a − c_a + 1)² − (h_a − c_a)² + (h_b − c_b − 1)² − (h_b − c_b)²]/(2S) = (2(h_a − h_b) + const)/(2S),
    monotone in h_b − h_a, so thresholds on h_b − h_a are the optimal tests (Neyman–Pearson). With bin a
    released exactly, h_a alone tells D from D′."""
    claimed = claimed_epsilon(AUDIT_VARIANCE)
    assert 2.0 > claimed > 1.0  # a moderate claim: the audit can resolve it from 10⁵ releases
    variance = AUDIT_VARIANCE // 16 if variant == "sixteenth variance" else AUDIT_VARIANCE
    noised = (1,) if variant == "one bin without noise" else (0, 1)
    rng = make_generator(20, data_is_public=True)
    on_d = model_releases(COLUMN_D, variance, rng, noised)
    on_d_prime = model_releases(COLUMN_D_PRIME, variance, rng, noised)

    def score(h: np.ndarray) -> np.ndarray:
        return (h[:, 1] - h[:, 0] if len(noised) == 2 else h[:, 0]).astype(np.float64)

    result = epsilon_lower_bound(score(on_d), score(on_d_prime), delta=AUDIT_DELTA, confidence=AUDIT_CONFIDENCE)
    if variant == "calibrated":
        # measured 0.60 against the claimed 1.48; > 0.3 shows the audit has power (it is not vacuously low)
        assert 0.3 < result.epsilon_lower_bound <= claimed
    else:
        # measured 3.44 (σ/4: the curve's ε at S = 1 is 7.1) and 8.70 (a count released exactly: ε = ∞)
        assert result.epsilon_lower_bound > claimed


def test_release_histograms_is_true_counts_plus_the_exact_sampler():
    """Real releases on D and D′ (300 each): the noise release_histograms adds is, draw for draw, the exact
    sampler's on an identically seeded generator (one call of p·B draws per release, as its docstring says), so
    the audit's vectorised model is the release itself; and its law is N_Z(0, S) (χ² goodness of fit)."""
    assert AUDIT_EDGES is not None
    residuals = []
    scores = {}
    for name, column, seed in [("D", COLUMN_D, 21), ("D'", COLUMN_D_PRIME, 22)]:
        release_rng = make_generator(seed, data_is_public=True)
        model_rng = make_generator(seed, data_is_public=True)
        true = histogram_counts(column, AUDIT_EDGES)
        releases = []
        for _ in range(300):
            released = release_histograms([column], [AUDIT_EDGES], AUDIT_VARIANCE, release_rng)
            assert released.variance == AUDIT_VARIANCE and np.array_equal(released.edges[0], AUDIT_EDGES)
            noise = released.counts[0] - true
            np.testing.assert_array_equal(noise, discrete_gaussian(model_rng, AUDIT_VARIANCE, true.size))
            residuals.append(noise)
            releases.append(released.counts[0])
        counts = np.array(releases)
        scores[name] = counts[:, BIN_B] - counts[:, BIN_A]
    z = np.concatenate(residuals)  # 2 × 300 × 4 = 2400 draws
    support, pmf, _, _ = discrete_gaussian_moments(AUDIT_VARIANCE)
    # χ² over the cells z ≤ −10, −9, …, 9, z ≥ 10 (the smallest expected count is 2400·P(z = 9) ≈ 19 ≥ 5)
    cells = np.clip(support, -10, 10)
    expected = np.array([pmf[cells == c].sum() for c in range(-10, 11)]) * z.size
    observed = np.array([np.count_nonzero(np.clip(z, -10, 10) == c) for c in range(-10, 11)])
    assert stats.chisquare(observed, expected).pvalue > 1e-3
    # the score's mean moves by +2 from D to D′ (true difference 2 − 2 = 0 vs 3 − 1 = 2); SE √(2S/300) ≈ 0.33
    standard_error = math.sqrt(2 * AUDIT_VARIANCE / 300)
    assert abs(scores["D"].mean() - 0.0) < 5 * standard_error
    assert abs(scores["D'"].mean() - 2.0) < 5 * standard_error


# ---------------------------------------------------------------------------------------------------------------
# 4. exactness
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variance", [1, 37])
def test_released_counts_are_integers_with_unbiased_discrete_gaussian_noise(variance):
    """One release of 50 columns × 2000 bins (10⁵ noise draws in one call). The residuals' mean is within 6
    standard errors √(Var/N) of 0 and their sample variance within 6·√((μ₄ − Var²)/N) of the discrete Gaussian's
    exact variance (itself within 1e-6 of S for S ≥ 1; CKS 2020, Cor. 9 bounds it by S)."""
    rng = make_generator(30 + variance, data_is_public=True)
    edges = symlog_edges(0.0, 2000.0, 2000)
    assert edges is not None
    columns = [rng.uniform(0.0, 2000.0, size=20) for _ in range(25)]
    columns += [rng.integers(0, 2001, size=20) for _ in range(25)]  # integer-valued inputs too
    released = release_histograms(columns, [edges] * 50, variance, rng)
    assert isinstance(released.variance, int) and released.variance == variance
    assert released.sigma == math.sqrt(variance)
    assert len(released.counts) == 50
    for counts in released.counts:
        assert counts.dtype == np.int64 and counts.shape == (2000,)
    noise = np.concatenate(
        [counts - histogram_counts(column, edges) for counts, column in zip(released.counts, columns, strict=True)]
    )
    _, _, exact_variance, fourth = discrete_gaussian_moments(variance)
    assert exact_variance <= variance and exact_variance == pytest.approx(variance, rel=1e-6)
    n = noise.size
    assert abs(noise.mean()) < 6 * math.sqrt(exact_variance / n)
    assert abs(noise.var() - exact_variance) < 6 * math.sqrt((fourth - exact_variance**2) / n)


def test_release_refuses_mismatched_grids():
    edges = symlog_edges(0.0, 1.0, 4)
    assert edges is not None
    rng = make_generator(40, data_is_public=True)
    with pytest.raises(PrivacyParameterError):
        release_histograms([], [], 4, rng)
    with pytest.raises(PrivacyParameterError):
        release_histograms([np.zeros(3)], [edges, edges], 4, rng)


@pytest.mark.parametrize("variance", [16.7, 0, -4, True, np.float64(16.0)])
def test_release_refuses_a_variance_that_is_not_a_positive_integer(variance):
    """The cost is computed for the integer S; noise of a truncated S (16.7 → 16) would be less than charged."""
    edges = symlog_edges(0.0, 1.0, 4)
    assert edges is not None
    with pytest.raises(PrivacyParameterError, match="variance"):
        release_histograms([np.zeros(3)], [edges], variance, make_generator(41, data_is_public=True))


def test_histogram_matrix_equals_the_counts_column_by_column():
    """The vectorised binning (a t-scale estimate, then moved to its bin) gives exactly histogram_counts' bins:
    on random values, on every edge itself, on both bounds, and on grids that fell back to uniform edges."""
    from privfit.privacy.histogram import histogram_matrix, symlog_grids

    rng = np.random.default_rng(7)
    lower = np.array([0.0, -1.0, 18.0, -1e6, 1e6, 0.0])
    upper = np.array([1e6, 1.0, 90.0, 1e6, 1e6 + 3e-8, 1e-300])
    grids, _ = symlog_grids(lower, upper, 32)
    keep = ~np.isnan(grids).any(axis=1)
    grids, lower, upper = grids[keep], lower[keep], upper[keep]
    assert grids.shape[0] >= 5  # one fell back to uniform edges; the 1e-300-wide range has none
    random = rng.uniform(lower, upper, size=(2000, lower.size))
    skewed = np.clip(np.exp(rng.normal(5.0, 3.0, size=(2000, lower.size))), lower, upper)
    edges_themselves = grids.T  # every edge of every grid, bounds included
    values = np.vstack([random, skewed, edges_themselves, np.nextafter(edges_themselves, np.inf).clip(lower, upper)])
    counts = histogram_matrix(values, grids)
    for j in range(grids.shape[0]):
        assert counts[j].tolist() == histogram_counts(values[:, j], grids[j]).tolist(), j
