"""RDP curves of subsampled Gaussian mechanisms (the accountants of DP-SGD-like solvers).

Two sampling schemes, each with the neighbouring relation its analysis is valid under:

* **Poisson sampling** (each row independently with probability q): Mironov, Talwar & Zhang, "Rényi
  Differential Privacy of the Sampled Gaussian Mechanism", 2019 (MTZ), valid under **add/remove-one**. For
  privfit's replace-one relation use :func:`poisson_subsampled_gaussian_rdp_replace_one`, which applies the
  RDP weak triangle inequality (a replacement is a removal followed by an addition).
* **Sampling without replacement** of a fixed-size batch m = q·n: Wang, Balle & Kasiviswanathan, "Subsampled
  Rényi Differential Privacy and Analytical Moments Accountant", AISTATS 2019 (WBK), Thm. 27, valid under
  **replace-one** with n public — privfit's relation, no conversion needed.

The numerics follow dp_accounting's ``rdp_privacy_accountant`` (the same series and the same termination rule)
so that the two agree to floating-point precision, but are vectorised over the grid with numpy.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
from scipy import special

from .errors import require_positive, require_sampling_rate
from .mechanisms import Orders, as_orders
from .orders import OrderGrid

_MAX_TERMS_FRACTIONAL = 1000
_CURVE_CACHE_SIZE = 4096
_FRACTIONAL_TERM_BLOCKS = (32, 128, _MAX_TERMS_FRACTIONAL)
_WOR_EXACT_MAX_ORDER = 256
_LOG_SUM_ROUNDING = 2.0**-48  # relative, per unit of magnitude: 2⁻⁵³ with a 2⁵ safety factor (integer A_α)
_ROUND_UP = 2.0**-36  # round-up of a log-sum-exp summed in another order, or whose rounding was not charged


def _log_comb(n: np.ndarray | float, k: np.ndarray | float) -> np.ndarray:
    """log |C(n, k)| through log-gamma (for fractional n the generalised binomial coefficient's magnitude)."""
    return np.asarray(special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1), dtype=np.float64)


def _log_erfc(x: np.ndarray) -> np.ndarray:
    """log erfc(x), accurate in the far tail: erfc(x) = 2 Φ(−x√2)."""
    return np.asarray(math.log(2.0) + special.log_ndtr(-x * math.sqrt(2.0)), dtype=np.float64)


@functools.lru_cache(maxsize=8)
def _log_factorials(top: int) -> np.ndarray:
    """log k! for k = 0 … top (``gammaln(k + 1)``), read-only; cached, since every curve needs the same table."""
    table = np.asarray(special.gammaln(np.arange(top + 1, dtype=np.float64) + 1.0), dtype=np.float64)
    table.setflags(write=False)
    return table


def _poisson_log_a_integer(q: float, sigma: float, alphas: np.ndarray) -> np.ndarray:
    """log A_α for integer α ≥ 2 (MTZ 2019, Sec. 3.3, Eq. for integer α), by a segmented log-sum-exp.

    ``A_α = Σ_{i=0}^{α} C(α, i) (1−q)^{α−i} q^i exp((i² − i) / (2σ²))``.

    The α + 1 terms of every order are laid end to end in one flat array (Σ(α + 1) terms in all, not
    len(α) × (max α + 1) as a padded matrix would need: on the 156-order grid's doubled orders, 16k terms
    instead of 312k), and each order's log-sum-exp is a max and a sum per segment (``np.maximum.reduceat`` /
    ``np.add.reduceat``). Everything but the σ term is the same for every σ and is built once per (q, orders)
    (:func:`_integer_terms_without_noise`); a calibration evaluates many σ at the same q.

    Accurate at every σ (issue 35). The binomial weights sum to 1, so A_α = 1 + S with
    S = Σ_{i≥2} C(α, i) (1−q)^{α−i} q^i (e^{(i²−i)/(2σ²)} − 1), a sum of positive terms, and log A_α =
    log1p(S). Summing A_α itself, as before, lost S below the rounding of 1: at σ = 2²⁶ the computed log A_α
    was rounding noise, sometimes exactly 0 — below the truth, and turned into ε = 0 at every δ by the
    conversion's KL shortcut. S has no cancellation: it is computed to a relative error r of a few units of
    2⁻⁵³ times the magnitude M of what its terms are computed from (the log-factorials, the logs of q and
    1 − q, the σ term, the α + 1 summands), which moves log1p(S) by at most r·S/(1 + S) ≤ r·min(1, log1p S).
    Each value is raised by 2⁻⁴⁸·M·min(1, value), so it is at or above the exact one
    (``tests/privacy/test_subsampled.py`` checks it against 60-digit arithmetic).
    """
    starts, owner, base, quadratic, scale = _integer_terms_without_noise(q, alphas.tobytes())
    exponent = quadratic / (2.0 * sigma**2)
    with np.errstate(divide="ignore", over="ignore"):  # log(e^0 − 1) = −∞ for i = 0, 1: no term
        log_expm1 = np.where(exponent > 1.0, exponent + np.log1p(-np.exp(-exponent)), np.log(np.expm1(exponent)))
    terms = base + log_expm1
    peak = np.maximum.reduceat(terms, starts)  # finite: every order ≥ 2 has its i = 2 term
    log_s = peak + np.log(np.add.reduceat(np.exp(terms - peak[owner]), starts))
    value = np.logaddexp(0.0, log_s)
    allowance = _LOG_SUM_ROUNDING * (scale + (alphas * alphas - alphas) / (2.0 * sigma**2))
    return np.asarray(value + allowance * np.minimum(value, 1.0), dtype=np.float64)


@functools.lru_cache(maxsize=64)
def _integer_terms_without_noise(
    q: float, alphas_bytes: bytes
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The σ-free parts of the terms of :func:`_poisson_log_a_integer` for the integer orders ``alphas_bytes``
    (float64 bytes): segment starts, each term's segment, ``log C(α, i) + i log q + (α − i) log(1 − q)`` (the
    binomial coefficients from one table of log k!, ``gammaln`` at the same points as a direct evaluation),
    ``i² − i`` and, per order, the σ-free part of its rounding scale, 2 log α! + α(|log q| + |log(1 − q)|) + α + 1.
    Read-only arrays, cached by (q, orders)."""
    alphas = np.frombuffer(alphas_bytes, dtype=np.float64)
    sizes = alphas.astype(np.int64) + 1
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    owner = np.repeat(np.arange(alphas.size), sizes)
    i = np.arange(sizes.sum(), dtype=np.int64) - starts[owner]
    a = alphas.astype(np.int64)[owner]
    log_factorial = _log_factorials(int(sizes.max()))
    fi = i.astype(np.float64)
    base = log_factorial[a] - log_factorial[i] - log_factorial[a - i] + fi * math.log(q) + (a - i) * math.log1p(-q)
    quadratic = fi * fi - fi
    scale = (
        2.0 * log_factorial[alphas.astype(np.int64)] + alphas * (abs(math.log(q)) + abs(math.log1p(-q))) + alphas + 1
    )
    for array in (starts, owner, base, quadratic, scale):
        array.setflags(write=False)
    return starts, owner, base, quadratic, scale


#: A fractional order's series value below this is in its rounding regime (:func:`_poisson_fractional_log_a`).
_SERIES_ROUNDING_FLOOR = 2.0**-40
#: The series' absolute rounding there (about one unit of 2⁻⁵³ per summand, at most 1,000 summands) and its
#: relative rounding elsewhere (per unit of magnitude), both charged upwards.
_SERIES_ABSOLUTE_ROUNDING = 2.0**-43
_SERIES_RELATIVE_ROUNDING = 2.0**-40


def _poisson_fractional_log_a(q: float, sigma: float, alphas: np.ndarray) -> np.ndarray:
    """log A_α for fractional α > 1: the series of :func:`_poisson_log_a_fractional`, charged for its rounding.

    The series' terms sum to 1 + O(q²α²/σ²), so a small log A_α is computed to an absolute error of a few
    units of 2⁻⁵³ per summand: at q = 1e-6, σ = 1e4 it came out 0 at orders 17.6 to 21.8 (true ≈ 1e-19), and
    the conversion's KL shortcut turned that into ε = 0 at every δ (issue 35). Below 2⁻⁴⁰ the value is therefore
    the smaller of two upper bounds: the series plus 2⁻⁴³, and the linear interpolation between ⌊α⌋ and ⌈α⌉ of
    the integer orders' values, which are accurate (:func:`_poisson_log_a_integer`; log A_1 = 0) — an upper
    bound because α ↦ log A_α = log E[(dμ/dμ₀)^α] is convex (a log-moment generating function). Above, the
    series is used as before (as dp_accounting computes it, to which the tests compare it at 1e-4), raised by
    2⁻⁴⁰ relative for the rounding of its summands' magnitudes (it came out an ulp below the 50-digit value at
    q = 0.05, σ = 1, α = 17.6).
    """
    series = _poisson_log_a_fractional(q, sigma, alphas)
    rounding = series < _SERIES_ROUNDING_FLOOR
    out = series + _SERIES_RELATIVE_ROUNDING * series
    if rounding.any():
        a = alphas[rounding]
        floors, ceils = np.floor(a), np.ceil(a)
        integers = np.unique(np.concatenate([floors, ceils]))
        integers = integers[integers >= 2.0]
        log_a = np.zeros(int(ceils.max()) + 1)  # log A_1 = 0
        log_a[integers.astype(np.int64)] = _poisson_log_a_integer(q, sigma, integers)
        t = a - floors
        interpolated = (1.0 - t) * log_a[floors.astype(np.int64)] + t * log_a[ceils.astype(np.int64)]
        out[rounding] = np.minimum(interpolated, series[rounding] + _SERIES_ABSOLUTE_ROUNDING)
    return out


def _poisson_log_a_fractional(q: float, sigma: float, alphas: np.ndarray) -> np.ndarray:
    """log A_α for fractional α (MTZ 2019, Sec. 3.3): two convergent series split at z₀ = σ² log(1/q − 1) + ½.

    Terms are summed until both series decrease and the newest term is below e^{−30} of the total (the rule
    dp_accounting uses); an order whose series has not converged after 1000 terms gets A_α = +∞ (which the
    Gaussian cap of the caller then replaces). Most orders converge within a few dozen terms, so blocks of
    32, then 128, then all 1000 terms are tried in turn. The partial sums are running (sequential) log-sum-exps,
    so the first converged prefix, and the value, are the same whatever the block length.
    """
    out = np.full(alphas.shape, np.inf)
    pending = np.ones(alphas.shape, dtype=bool)
    for terms in _FRACTIONAL_TERM_BLOCKS:
        out[pending] = _poisson_log_a_fractional_terms(q, sigma, alphas[pending], terms)
        pending = np.isinf(out)
        if not pending.any():
            break
    return out


def _poisson_log_a_fractional_terms(q: float, sigma: float, alphas: np.ndarray, terms: int) -> np.ndarray:
    i = np.arange(terms, dtype=np.float64)[None, :]
    a = alphas[:, None]
    z0 = sigma**2 * math.log(1.0 / q - 1.0) + 0.5
    log_q, log_1mq = math.log(q), math.log1p(-q)
    log_coef = _log_comb(a, i)
    j = a - i

    def series_term(k: np.ndarray, m: np.ndarray, erfc_argument: np.ndarray) -> np.ndarray:
        """C(α, k) q^k (1−q)^m e^{(k²−k)/(2σ²)} · ½ erfc(·): the k-th term of one of the two series."""
        return np.asarray(
            log_coef + k * log_q + m * log_1mq + (k * k - k) / (2.0 * sigma**2)
            + math.log(0.5) + _log_erfc(erfc_argument / (math.sqrt(2.0) * sigma)), dtype=np.float64,
        )  # fmt: skip

    log_s0 = series_term(i, j, i - z0)
    log_s1 = series_term(j, i, z0 - j)
    total = np.logaddexp(np.logaddexp.accumulate(log_s0, axis=1), np.logaddexp.accumulate(log_s1, axis=1))
    decreasing = np.zeros_like(log_s0, dtype=bool)
    decreasing[:, 1:] = (log_s0[:, 1:] < log_s0[:, :-1]) & (log_s1[:, 1:] < log_s1[:, :-1])
    converged = decreasing & (np.maximum(log_s0, log_s1) < total - 30.0)
    out = np.full(alphas.shape, np.inf)
    has = converged.any(axis=1)
    first = converged.argmax(axis=1)
    out[has] = total[has, first[has]]
    return out


SubsampledCurve = Callable[..., np.ndarray]
_GRID_CACHES: list[Callable[[], None]] = []


def clear_curve_caches() -> None:
    """Forget every cached curve and σ-free table (benchmarks of cold computations; tests)."""
    for clear in (*_GRID_CACHES, _integer_terms_without_noise.cache_clear, _log_factorials.cache_clear):
        clear()


def _memoised_on_grids(curve: SubsampledCurve) -> SubsampledCurve:
    """``curve`` with its values on a registered :class:`OrderGrid` cached by (grid, q, noise multiplier).

    The same public inputs recur: an estimate and the admission that follows it, the fit's own cost, the last
    steps of a calibration. Cached curves are read-only and every call returns a copy, so no caller can
    change another's curve; other orders (arrays) are computed afresh.
    """

    @functools.lru_cache(maxsize=_CURVE_CACHE_SIZE)
    def on_grid(grid: OrderGrid, q: float, noise_multiplier: float) -> np.ndarray:
        values = curve(grid.orders, q=q, noise_multiplier=noise_multiplier)
        values.setflags(write=False)
        return values

    _GRID_CACHES.append(on_grid.cache_clear)

    @functools.wraps(curve)
    def memoised(orders: Orders, *, q: float, noise_multiplier: float) -> np.ndarray:
        if isinstance(orders, OrderGrid):
            q = require_sampling_rate("q", q)
            noise_multiplier = require_positive("noise_multiplier", noise_multiplier)
            return on_grid(orders, float(q), float(noise_multiplier)).copy()
        return curve(orders, q=q, noise_multiplier=noise_multiplier)

    return memoised


def poisson_subsampled_gaussian_rdp(orders: Orders, *, q: float, noise_multiplier: float) -> np.ndarray:
    """RDP of the Poisson-subsampled Gaussian mechanism (MTZ 2019), **add/remove-one** relation.

    Each row joins the batch independently with probability ``q``; the batch sum of terms clipped to norm C gets
    N(0, (zC)²) noise with z = ``noise_multiplier``. ``ε(α) = log A_α / (α−1)`` with A_α from the integer-order
    binomial sum or the fractional-order series, capped by the un-sampled Gaussian ``α / (2z²)`` (which
    q = 1 reduces to); it bounds both directions of the divergence. α = ∞ gives ∞. Not valid as such for
    replace-one: see :func:`poisson_subsampled_gaussian_rdp_replace_one`.
    """
    alphas = as_orders(orders)
    q = require_sampling_rate("q", q)
    sigma = require_positive("noise_multiplier", noise_multiplier)
    out = np.full(alphas.shape, np.inf)
    finite = np.isfinite(alphas) & (alphas > 1.0)
    if q == 1.0:
        out[finite] = alphas[finite] / (2.0 * sigma**2)
    else:
        integer = finite & (alphas == np.floor(alphas))
        fractional = finite & ~integer
        if integer.any():
            out[integer] = _poisson_log_a_integer(q, sigma, alphas[integer]) / (alphas[integer] - 1.0)
        if fractional.any():
            a = alphas[fractional]
            out[fractional] = _poisson_fractional_log_a(q, sigma, a) / (a - 1.0)
    # Subsampling never hurts: by joint quasi-convexity of Rényi divergence, a mixture (1−q)N(0) + qN(1) is at
    # most as far from N(0) — in either direction — as N(1) is, so the plain Gaussian α/(2z²) caps the curve.
    # The fractional-order series is loose for q ≥ 0.5 and would otherwise exceed it.
    out[finite] = np.minimum(out[finite], alphas[finite] / (2.0 * sigma**2))
    # α = 1 (the KL divergence) is not covered by the series; bound it by monotonicity in α (Mironov 2017,
    # Prop. 9) with the smallest finite order above 1 that was computed, or +∞ if none was.
    kl = alphas == 1.0
    if kl.any():
        above = finite & (alphas > 1.0)
        out[kl] = out[above][np.argmin(alphas[above])] if above.any() else np.inf
    return np.asarray(np.maximum(out, 0.0), dtype=np.float64)


@_memoised_on_grids
def poisson_subsampled_gaussian_rdp_replace_one(orders: Orders, *, q: float, noise_multiplier: float) -> np.ndarray:
    """RDP of the Poisson-subsampled Gaussian under **replace-one**, by a conservative, proven rule.

    Replacing row x by x' is removing x, then adding x'. With P = M(D), Q = M(D∖{x}), R = M(D∖{x}∪{x'}),
    Mironov's weak triangle inequality for Rényi divergence (Mironov 2017, Prop. 11 with p = q = 2) gives
    ``D_α(P‖R) ≤ (α − ½)/(α − 1) · D_{2α}(P‖Q) + D_{2α−1}(Q‖R)``, and both terms are bounded by the
    add/remove curve of MTZ at orders 2α and 2α − 1. The curve is further capped (pointwise minimum of two
    valid bounds) by the un-amplified Gaussian of replace-one sensitivity 2C: ``4α / (2z²)``. The noise
    multiplier z is relative to the clipping norm C (the add/remove sensitivity). At q = 1 the rule is within
    1% of exact; for small q it costs roughly a factor 2–4 in RDP over add/remove.
    """
    alphas = as_orders(orders)
    q = require_sampling_rate("q", q)
    sigma = require_positive("noise_multiplier", noise_multiplier)
    out = np.full(alphas.shape, np.inf)
    valid = np.isfinite(alphas) & (alphas > 1.0)
    a = alphas[valid]
    doubled = poisson_subsampled_gaussian_rdp(2.0 * a, q=q, noise_multiplier=sigma)
    doubled_minus_one = poisson_subsampled_gaussian_rdp(2.0 * a - 1.0, q=q, noise_multiplier=sigma)
    triangle = (a - 0.5) / (a - 1.0) * doubled + doubled_minus_one
    out[valid] = np.minimum(triangle, 4.0 * a / (2.0 * sigma**2))
    return out


_LOG_UNIT_ROUNDOFF = -48.0 * math.log(2.0)  # 2⁻⁵³ with a 2⁵ safety factor per operation


def _forward_differences_upper_log(cgf: np.ndarray, stop_above: float | None = None) -> np.ndarray:
    """Upper bounds on log |Δ^{k} exp(cgf)| at the left end, k = 1 … len−1 (WBK 2019, Thm. 27's Δ^k).

    The differences are computed as dp_accounting's ``_get_forward_diffs`` does (repeated signed differencing
    in log space), vectorised over positions per level. For large noise multipliers the true high-order
    differences are far below the rounding error of the O(1) values they are taken from, and the computed
    ones are noise — sometimes *below* the truth (checked against 400-digit arithmetic in the tests), which
    would drop positive terms from the bound. So a running bound on each entry's absolute error is carried
    through the levels (the errors of the two operands add, plus the rounding of one log-space operation,
    ≤ u·(4 + |log a| + |log b|)·(a + b) for operand magnitudes a, b) and each |Δ^k| is returned as
    ``|computed| + error``. Where the computation is accurate, the error term is negligible and the value is
    dp_accounting's; where it is not, the theorem's other branch (``2e^{(j−1)ε(j)}``) takes over.

    ``stop_above`` (issue 35: bounded request cost): once every entry's error bound at some level L is at least
    ``stop_above``, every later level's bound is too (a level's error is a log-sum-exp of two of the previous
    level's, and a computed ``logaddexp`` is never below its larger operand), so every later |Δ^k| bound is
    ≥ ``stop_above``. The levels after L + 2 are then returned as +∞ instead of computed (the caller passes a
    ``stop_above`` at which its other branch wins, so +∞ changes nothing; the two extra levels serve the odd
    orders, which pair Δ^{j−1} with Δ^{j+1}). Without it every level is computed; the levels computed are
    the same operations either way, so their values are identical.
    """
    values = cgf.astype(np.float64).copy()
    signs = np.ones_like(values, dtype=bool)
    log_error = _LOG_UNIT_ROUNDOFF + np.log(4.0 + np.abs(values)) + values
    upper = np.full(values.size - 1, np.inf)
    last = upper.size
    with np.errstate(invalid="ignore", divide="ignore"):
        for level in range(upper.size):
            left, right, s_right = values[:-1], values[1:], signs[1:]
            equal = left == right
            hi, lo = np.maximum(left, right), np.minimum(left, right)
            ratio = np.exp(lo - hi)
            diff_mag = np.where(equal, -np.inf, hi + np.log1p(-ratio))
            sum_mag = hi + np.log1p(ratio)
            scale = np.log(
                4.0 + np.abs(np.where(np.isfinite(hi), hi, 0.0)) + np.abs(np.where(np.isfinite(lo), lo, 0.0))
            )
            sum_mag[np.isneginf(hi)] = -np.inf
            rounding = _LOG_UNIT_ROUNDOFF + scale + sum_mag
            log_error = np.logaddexp(np.logaddexp(log_error[:-1], log_error[1:]), rounding)
            same = signs[:-1] == s_right
            diff_sign = np.where(equal, True, right > left)
            diff_sign = np.where(s_right, diff_sign, ~diff_sign)
            values = np.where(same, diff_mag, sum_mag)
            signs = np.where(same, diff_sign, s_right)
            upper[level] = np.logaddexp(values[0], log_error[0])
            if level == last:
                break
            if stop_above is not None and last == upper.size and log_error.min() >= stop_above:
                last = level + 2
    return upper


@functools.lru_cache(maxsize=64)
def _wor_terms_without_noise(
    q: float, alphas_bytes: bytes
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The σ-free parts of the WBK Thm. 27 terms of the integer orders ``alphas_bytes`` (float64 bytes, each
    ≥ 2), laid end to end as in :func:`_integer_terms_without_noise`: order α's segment holds the constant term
    1, then j = 2 … α. Returns the segment starts, each term's segment, each term's j (0 for the constant),
    whether its order is ≤ 256 (the exact branch), ``j log q``, ``log C(α, j)`` and, for j = 2,
    ``2 log q + log C(α, 2)``. The same floating-point operations as a per-order evaluation; read-only, cached
    by (q, orders)."""
    alphas = np.frombuffer(alphas_bytes, dtype=np.float64)
    sizes = alphas.astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    owner = np.repeat(np.arange(alphas.size), sizes)
    j = (np.arange(sizes.sum(), dtype=np.int64) - starts[owner] + 1).astype(np.float64)
    j[starts] = 0.0
    a = alphas[owner]
    j_log_q = j * math.log(q)
    log_comb = _log_comb(a, j)
    second = 2 * math.log(q) + _log_comb(alphas, 2.0)
    exact = a <= _WOR_EXACT_MAX_ORDER
    for array in (starts, owner, j, exact, j_log_q, log_comb, second):
        array.setflags(write=False)
    return starts, owner, j, exact, j_log_q, log_comb, second


def _wor_log_a_integers(q: float, sigma: float, alphas: np.ndarray, deltas: np.ndarray | None) -> np.ndarray:
    """The log of the WBK Thm. 27 bound for integer orders α ≥ 2 (``(α−1) ε(α)``), exact up to α = 256 and with
    the theorem's second, cheaper branch (``2 e^{(j−1) ε(j)}`` per term, itself a valid bound) above; all orders
    at once (issue 35: one segmented log-sum-exp instead of one per order).

    Each order's log-sum-exp is computed as :func:`scipy.special.logsumexp` computes it (the largest terms apart,
    ``log1p`` of the others' scaled sum) from the per-order evaluation's terms, bit for bit, but the others are
    summed in another order, which moves the value by at most (α + 1)·2⁻⁵³ relative (positive summands). Each
    value is rounded up by 2⁻³⁶ ≈ 1.5e-11 relative, over 100 times that, so the curve stays at or above the
    per-order one (the tests compare the two on a grid)."""
    starts, owner, j, exact, j_log_q, log_comb, second = _wor_terms_without_noise(q, alphas.tobytes())
    two_sigma_sq = 2.0 * sigma**2
    func2 = 2.0 / two_sigma_sq
    # log(e^{func2} − 1): as func2 + log1p(−e^{−func2}) it rounded e^{−func2} to 1 − 2⁻⁵³ (so up to 31 % low) for
    # func2 near 1e-16, i.e. σ near 1e8; expm1 is exact to rounding there (issue 35)
    log_f2m1 = func2 + math.log1p(-math.exp(-func2)) if func2 > 1.0 else math.log(math.expm1(func2))
    top = int(alphas.max())
    js = np.arange(top + 1, dtype=np.float64)
    bound = math.log(2) + (js - 1) * js / two_sigma_sq  # the cheap branch, by j
    if deltas is not None:  # the exact branch for j = 3 … (orders ≤ 256; deltas reach the largest of them)
        jx = js[3 : deltas.size]
        lo = deltas[(2 * np.floor(jx / 2) - 1).astype(int)]
        hi = deltas[(2 * np.ceil(jx / 2) - 1).astype(int)]
        exact_bound = bound.copy()
        exact_bound[3 : deltas.size] = np.minimum(math.log(4) + 0.5 * (lo + hi), bound[3 : deltas.size])
        index = j.astype(np.int64)
        term_bound = np.where(exact, exact_bound[index], bound[index])
    else:
        term_bound = bound[j.astype(np.int64)]
    terms = term_bound + j_log_q + log_comb
    terms[starts] = 0.0
    terms[starts + 1] = second + min(math.log(4) + log_f2m1, func2 + math.log(2))
    # scipy's logsumexp per segment: the maximal terms (m of them) apart, log1p(Σ others·e^{−max}/m) + log m + max
    peak = np.maximum.reduceat(terms, starts)
    maximal = terms == peak[owner]
    count = np.add.reduceat(maximal.astype(np.float64), starts)
    others = np.add.reduceat(np.where(maximal, 0.0, np.exp(terms - peak[owner])), starts) / count
    value = np.log1p(others) + np.log(count) + peak
    return np.asarray(value + _ROUND_UP * value, dtype=np.float64)


@_memoised_on_grids
def sampled_without_replacement_gaussian_rdp(orders: Orders, *, q: float, noise_multiplier: float) -> np.ndarray:
    """RDP of the Gaussian on a uniformly random fixed-size subset, m = q·n rows (WBK 2019, Thm. 27).

    Relation: **replace-one** with n public (privfit's relation). ``noise_multiplier`` is σ divided by the
    replace-one L2 sensitivity of the base query on the subset (2C for a sum of terms clipped to norm C).
    Integer orders use the theorem's bound (forward differences of the Gaussian's moment generating function,
    exact to α = 256); a fractional order interpolates (α−1)ε(α) linearly between ⌊α⌋ and ⌈α⌉, an upper
    bound by convexity of the cumulant generating function (WBK 2019, Cor. 10). q = 1 is the plain Gaussian.

    Cost (issue 35): the forward differences stop at the level where the theorem's cheaper branch wins for
    every order left (:func:`_forward_differences_upper_log`'s ``stop_above``: at large noise multipliers about
    50 levels instead of 258), and all integer orders are summed at once (:func:`_wor_log_a_integers`).
    """
    alphas = as_orders(orders)
    q = require_sampling_rate("q", q)
    sigma = require_positive("noise_multiplier", noise_multiplier)
    out = np.full(alphas.shape, np.inf)
    finite = np.isfinite(alphas)
    if q == 1.0:
        out[finite] = alphas[finite] / (2.0 * sigma**2)
        return out
    if not finite.any():
        return out
    floors, ceils = np.floor(alphas[finite]), np.ceil(alphas[finite])
    exact_top = int(min(max(floors.max(), ceils.max()), _WOR_EXACT_MAX_ORDER))
    deltas = None
    if exact_top >= 3:
        points = np.arange(exact_top + 2, dtype=np.float64)
        cgf = np.concatenate([[0.0], points * (points + 1) / (2.0 * sigma**2)])
        # The exact branch of the largest j it serves, log 4 + ½(lo + hi), loses to the cheap one (≤ log 2 +
        # (top − 1)·top/(2σ²)) once both differences' bounds exceed the cheap one's largest value − log 4.
        cheapest = math.log(2) + (exact_top - 1) * exact_top / (2.0 * sigma**2)
        deltas = _forward_differences_upper_log(cgf, stop_above=cheapest - math.log(4) + max(1.0, 1e-9 * cheapest))
    integers = np.unique(np.concatenate([floors, ceils, [2.0]]))
    integers = integers[integers >= 2.0]
    log_a = np.zeros(int(integers.max()) + 1)  # log A_1 = 0
    log_a[integers.astype(np.int64)] = _wor_log_a_integers(q, sigma, integers, deltas)
    a = alphas[finite]
    t = a - floors
    values = np.full(a.shape, log_a[2])  # α = 1 (the KL divergence): bounded by monotonicity by the order-2 value
    above = a > 1.0
    values[above] = (((1 - t) * log_a[floors.astype(np.int64)] + t * log_a[ceils.astype(np.int64)])[above]
                     / (a[above] - 1.0))  # fmt: skip
    out[finite] = values
    return np.asarray(np.maximum(out, 0.0), dtype=np.float64)
