"""Numerical soundness of the subsampled-Gaussian curves beyond what dp_accounting checks."""

import itertools
import math

import numpy as np
import pytest
from scipy import special

from privfit.privacy import (
    DEFAULT_GRID,
    GRIDS,
    PrivacyCost,
    epsilon_at_delta,
    gaussian_rdp,
    poisson_subsampled_gaussian_rdp,
    poisson_subsampled_gaussian_rdp_replace_one,
    sampled_without_replacement_gaussian_rdp,
)
from privfit.privacy.subsampled import _forward_differences_upper_log, _poisson_log_a_integer, clear_curve_caches

mp = pytest.importorskip("mpmath", reason="mpmath (installed with dp-accounting) gives the exact reference")


def exact_log_forward_differences(sigma: float, count: int) -> list[float]:
    """log |Δ^k g(0)|, g(t) = exp((t−1)t/(2σ²)), k = 1..count, in 300-digit arithmetic."""
    mp.mp.dps = 300
    two_sigma_sq = 2 * mp.mpf(sigma) ** 2
    g = [mp.e ** (mp.mpf(t - 1) * t / two_sigma_sq) for t in range(count + 1)]
    out = []
    for k in range(1, count + 1):
        value = mp.fsum((-1) ** (k - j) * mp.binomial(k, j) * g[j] for j in range(k + 1))
        out.append(float(mp.log(abs(value))) if value != 0 else -math.inf)
    return out


@pytest.mark.parametrize("sigma", [0.7, 2.0, 13.7, 50.0])
def test_wbk_forward_differences_are_upper_bounds_of_exact_ones(sigma):
    count = 70
    points = np.arange(count + 1, dtype=np.float64)
    cgf = np.concatenate([[0.0], points * (points + 1) / (2 * sigma**2)])
    upper = _forward_differences_upper_log(cgf)[:count]
    exact = np.array(exact_log_forward_differences(sigma, count))
    assert (upper >= exact - 1e-12).all()
    if sigma <= 2.0:  # where float64 resolves the differences, the bound is tight
        finite = np.isfinite(exact)  # Δ¹g(0) = 0 exactly: its bound is the (tiny) rounding allowance
        np.testing.assert_allclose(upper[finite], exact[finite], atol=1e-6)
        assert upper[~finite].max() < -25


def test_poisson_at_q1_is_the_gaussian_and_grows_with_q():
    np.testing.assert_allclose(
        poisson_subsampled_gaussian_rdp(DEFAULT_GRID, q=1.0, noise_multiplier=2.0),
        gaussian_rdp(DEFAULT_GRID, sigma=2.0),
    )
    curves = [poisson_subsampled_gaussian_rdp(DEFAULT_GRID, q=q, noise_multiplier=1.0) for q in (0.001, 0.01, 0.1, 0.5)]
    for lower, higher in itertools.pairwise(curves):
        assert (lower <= higher + 1e-15).all()


def test_replace_one_poisson_rule_dominates_add_remove_and_is_near_exact_at_q1():
    add_remove = poisson_subsampled_gaussian_rdp(DEFAULT_GRID, q=0.01, noise_multiplier=1.1)
    replace_one = poisson_subsampled_gaussian_rdp_replace_one(DEFAULT_GRID, q=0.01, noise_multiplier=1.1)
    assert (replace_one >= add_remove).all()
    # Without sampling a replacement is a Gaussian of sensitivity 2C: the rule is capped by (and meets) it.
    at_one = poisson_subsampled_gaussian_rdp_replace_one(DEFAULT_GRID, q=1.0, noise_multiplier=1.0)
    np.testing.assert_allclose(at_one, gaussian_rdp(DEFAULT_GRID, sigma=1.0, sensitivity=2.0))


def test_replace_one_poisson_rule_is_conservative_against_the_exact_divergence():
    """Exact Rényi divergence between the two replace-one outputs, in 1-D, by numerical integration.

    Worst case in 1-D for clipped contributions: x ↦ +C and x' ↦ −C, i.e. (1−q)N(0,z²) + qN(1,z²) against
    (1−q)N(0,z²) + qN(−1,z²) (units of C). The rule must never be below it.
    """
    mp.mp.dps = 30
    q, z = 0.05, 1.0
    orders = np.array([1.5, 2.0, 3.0, 5.0, 8.0])
    rule = poisson_subsampled_gaussian_rdp_replace_one(orders, q=q, noise_multiplier=z)

    def density(x, mean):
        return mp.npdf(x, mean, z)

    for alpha, bound in zip(orders, rule, strict=True):
        a = mp.mpf(alpha)

        def integrand(x, a=a):
            p = (1 - q) * density(x, 0) + q * density(x, 1)
            r = (1 - q) * density(x, 0) + q * density(x, -1)
            return p**a * r ** (1 - a)

        exact = float(mp.log(mp.quad(integrand, [-mp.inf, 0, mp.inf])) / (a - 1))
        assert bound >= exact


def test_without_replacement_curve_is_monotone_in_noise_and_fraction():
    small = sampled_without_replacement_gaussian_rdp(DEFAULT_GRID, q=0.01, noise_multiplier=2.0)
    more_noise = sampled_without_replacement_gaussian_rdp(DEFAULT_GRID, q=0.01, noise_multiplier=4.0)
    bigger_batch = sampled_without_replacement_gaussian_rdp(DEFAULT_GRID, q=0.05, noise_multiplier=2.0)
    assert (more_noise <= small).all() and (bigger_batch >= small).all()
    eps = epsilon_at_delta(DEFAULT_GRID, 1000 * small, 1e-5).epsilon
    assert 0 < eps < math.inf


# ---------------------------------------------------------------------------------------------------------
# issue 35: the without-replacement curve in bounded time, never below the per-order evaluation it replaced
# ---------------------------------------------------------------------------------------------------------


def per_order_without_replacement(orders: np.ndarray, q: float, sigma: float) -> np.ndarray:
    """The WBK curve as the release before issue 35 computed it: every forward difference up to 256 levels and one
    ``scipy.special.logsumexp`` per integer order (the reference of the vectorised, early-stopping code). One
    change: log(e^x − 1) of the j = 2 term by ``expm1`` below x = 1 (the release's x + log1p(−e^{−x}) was up to
    31 % low near x = 1e-16: :func:`test_without_replacement_second_term_is_exact_near_the_largest_noise`)."""

    def log_comb(n, k):
        return special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)

    def log_a(alpha: int, deltas: np.ndarray | None) -> float:
        if alpha == 1:
            return 0.0
        two_sigma_sq = 2.0 * sigma**2
        func2 = 2.0 / two_sigma_sq
        log_f2m1 = func2 + math.log1p(-math.exp(-func2)) if func2 > 1.0 else math.log(math.expm1(func2))
        terms = [2 * math.log(q) + float(log_comb(alpha, 2)) + min(math.log(4) + log_f2m1, func2 + math.log(2))]
        if alpha >= 3:
            j = np.arange(3, alpha + 1, dtype=np.float64)
            cheap = math.log(2) + (j - 1) * j / two_sigma_sq
            if deltas is not None and alpha <= 256:
                lo = deltas[(2 * np.floor(j / 2) - 1).astype(int)]
                hi = deltas[(2 * np.ceil(j / 2) - 1).astype(int)]
                bound = np.minimum(math.log(4) + 0.5 * (lo + hi), cheap)
            else:
                bound = cheap
            terms.extend(bound + j * math.log(q) + log_comb(float(alpha), j))
        return float(special.logsumexp([0.0, *terms]))

    needed = np.concatenate([np.floor(orders), np.ceil(orders)]).astype(int)
    top = int(min(needed.max(), 256))
    points = np.arange(top + 2, dtype=np.float64)
    deltas = _forward_differences_upper_log(np.concatenate([[0.0], points * (points + 1) / (2.0 * sigma**2)]))
    cache = {int(k): log_a(int(k), deltas) for k in np.unique(needed)}
    out = np.empty(orders.shape)
    for index, alpha in enumerate(orders):
        floor, ceil = math.floor(alpha), math.ceil(alpha)
        t = alpha - floor
        out[index] = ((1 - t) * cache[floor] + t * cache[ceil]) / (alpha - 1.0)
    return np.maximum(out, 0.0)


@pytest.mark.parametrize("grid_name", sorted(GRIDS))
def test_without_replacement_curve_is_the_per_order_one_or_above_by_at_most_2e_11(grid_name):
    """The vectorised sums (one segmented log-sum-exp, rounded up by 2⁻³⁶) and the forward differences that stop
    where the cheap branch wins equal the per-order evaluation to 1.5e-11 relative, and are never below it, from
    noise the exact branch resolves (0.3) to the unreachable-target range (1e8)."""
    grid = GRIDS[grid_name]
    clear_curve_caches()
    for q, sigma in itertools.product([1e-6, 0.003, 0.05, 0.5, 0.999], [0.3, 2.0, 30.0, 1e3, 5e5, 1e8]):
        ours = sampled_without_replacement_gaussian_rdp(grid, q=q, noise_multiplier=sigma)
        reference = per_order_without_replacement(grid.orders, q, sigma)
        assert (ours >= reference).all(), (q, sigma)
        assert (ours <= reference * (1 + 2e-11)).all(), (q, sigma)


@pytest.mark.parametrize("sigma", [13.7, 1e3, 5e5])
def test_forward_differences_stop_only_where_every_later_bound_is_above_the_threshold(sigma):
    """With ``stop_above`` the computed levels are bit for bit the full computation's; the levels left out (+∞)
    are, in the full computation, above the threshold — so a caller whose other branch wins there loses nothing.
    At large noise the recursion stops after about 50 of its 258 levels (issue 35)."""
    points = np.arange(258, dtype=np.float64)
    cgf = np.concatenate([[0.0], points * (points + 1) / (2 * sigma**2)])
    full = _forward_differences_upper_log(cgf)
    threshold = math.log(2) + 255 * 256 / (2 * sigma**2) - math.log(4) + 1.0
    stopped = _forward_differences_upper_log(cgf, stop_above=threshold)
    computed = np.isfinite(stopped)
    np.testing.assert_array_equal(stopped[computed], full[computed])
    assert computed[: computed.sum()].all() and (full[~computed] >= threshold).all()
    if sigma >= 1e3:
        assert computed.sum() <= 60


@pytest.mark.parametrize("q", [1e-5, 0.01, 0.3, 0.9])
def test_poisson_integer_orders_are_at_or_above_the_exact_value_at_every_noise(q):
    """log A_α of the Poisson curve's integer orders against 60-digit arithmetic: never below, at most 1e-9 above,
    from σ = 0.5 to σ = 2²⁶. Before issue 35 the sum of A_α itself was rounding noise at a large σ — exactly 0
    for q = 0.2865, σ = 2²⁶ at order 3 (true value 5.5e-17), which the KL shortcut turned into ε = 0."""
    mp.mp.dps = 60
    alphas = np.array([2.0, 3.0, 5.0, 20.0, 127.0, 300.0])
    weights = {
        int(alpha): [mp.binomial(int(alpha), i) * (1 - mp.mpf(q)) ** (int(alpha) - i) * mp.mpf(q) ** i
                     for i in range(int(alpha) + 1)]
        for alpha in alphas
    }  # fmt: skip
    for sigma in (0.5, 2.0, 30.0, 1e3, 1e6, 2.0**26):
        ours = _poisson_log_a_integer(q, sigma, alphas)
        two_sigma_sq = 2 * mp.mpf(sigma) ** 2
        for alpha, value in zip(weights, ours, strict=True):
            exact = mp.log(
                mp.fsum(w * mp.e ** (mp.mpf(i * i - i) / two_sigma_sq) for i, w in enumerate(weights[alpha]))
            )
            assert value >= exact and value <= exact * (1 + mp.mpf("1e-9")), (alpha, sigma, value, float(exact))


@pytest.mark.parametrize("sigma", [1.0, 1e4, 7.9e7, 1e8])
def test_without_replacement_second_term_is_exact_near_the_largest_noise(sigma):
    """At order 2 the WBK bound is log(1 + q² min(4(e^{1/σ²} − 1), 2e^{1/σ²})) exactly; the curve is at or above it
    (by its 2⁻³⁶ round-up at most). Before issue 35, e^{−1/σ²} rounded to 1 − 2⁻⁵³ made it 31 % low at σ = 7.9e7."""
    mp.mp.dps = 50
    q = 0.3
    x = 1 / mp.mpf(sigma) ** 2
    exact = float(mp.log1p(q**2 * min(4 * mp.expm1(x), 2 * mp.e**x)))
    ours = float(sampled_without_replacement_gaussian_rdp(np.array([2.0]), q=q, noise_multiplier=sigma)[0])
    assert exact <= ours <= exact * (1 + 2e-11)


@pytest.mark.parametrize(("q", "sigma"), [(1e-6, 1e4), (1e-3, 3e5), (0.05, 1.0)])
def test_poisson_fractional_orders_are_at_or_above_the_exact_divergence(q, sigma):
    """The add/remove curve at fractional orders against the exact log A_α = log E_{N(0,σ²)}[((1−q) +
    q e^{(2x−1)/(2σ²)})^α] (50-digit quadrature): never below, never 0. Before issue 35 the series came out 0 at
    q = 1e-6, σ = 1e4 for 2α ∈ [17.6, 21.8] (true ≈ 1e-19), so a dp_sgd fit with one-row batches out of 10⁶ and
    noise multiplier 1e4 was charged ε = 0 at δ = 1e-9 (the KL shortcut on a zero); tiny values now take the
    smaller of the series plus its rounding and the integer orders' interpolation (convexity)."""
    mp.mp.dps = 50
    orders = np.array([1.2, 2.2, 5.5, 8.8, 17.6, 21.8])
    ours = poisson_subsampled_gaussian_rdp(orders, q=q, noise_multiplier=sigma)
    assert (ours > 0).all()
    for alpha, value in zip(orders, ours, strict=True):
        a, s = mp.mpf(alpha), mp.mpf(sigma)

        def integrand(u, a=a, s=s):  # x = σu under the standard normal density
            return mp.npdf(u) * ((1 - mp.mpf(q)) + mp.mpf(q) * mp.e ** ((2 * s * u - 1) / (2 * s**2))) ** a

        exact = mp.log(mp.quad(integrand, [-mp.inf, 0, mp.inf])) / (a - 1)
        assert value >= exact, (alpha, value, float(exact))


def test_a_tiny_replace_one_cost_converts_by_its_true_size_not_by_a_rounded_zero():
    """10⁶ steps of one row out of 10⁶ at noise multiplier 1e4 (dp_sgd, batch 1, 1 epoch): no order is 0, so the
    KL shortcut (ε = 0 when the curve at some order is below δ²) applies at δ = 1e-6, where the true KL is ~1e-13,
    and not at δ = 1e-9. Before issue 35 it did at every δ (ε = 0 at δ = 1e-9 from a zero at order 8.8)."""
    cost = PrivacyCost(10**6 * poisson_subsampled_gaussian_rdp_replace_one(DEFAULT_GRID, q=1e-6, noise_multiplier=1e4),
                       DEFAULT_GRID)  # fmt: skip
    assert (cost.rdp > 0).all()
    assert cost.epsilon(1e-6).epsilon == 0.0 and cost.epsilon(1e-9).epsilon > 0.01
