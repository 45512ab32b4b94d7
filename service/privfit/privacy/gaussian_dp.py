r"""Gaussian differential privacy (μ-GDP): the exact (ε, δ) curve of Gaussian workloads, and its numbers.

A mechanism is μ-GDP (Dong, Roth & Su, "Gaussian Differential Privacy", JRSS-B 2022, Def. 2.6) when telling
neighbours apart from its output is at least as hard as telling N(0, 1) from N(μ, 1). The Gaussian mechanism of L2
sensitivity Δ and standard deviation σ is exactly (Δ/σ)-GDP (ibid., Thm. 2.7); k of them compose, adaptively, to
√(Σ μ_i²)-GDP (ibid., Cor. 3.3), and that stays true when each μ_i is chosen from the earlier outputs, as long as
Σ μ_i² ≤ μ² on every path (Smith & Thakurta, "Fully Adaptive Composition for Gaussian Differential Privacy",
arXiv:2210.17520, 2022, Thm. 1.2: the filter version). The (ε, δ) statements of μ-GDP are exactly the curve

    δ_μ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)         (Dong, Roth & Su, Cor. 2.13),

which is the privacy profile of the Gaussian mechanism itself (Balle & Wang 2018, Thm. 8): no RDP conversion
slack. A :class:`~privfit.privacy.cost.PrivacyCost` carries Σ μ_i² of its Gaussian releases in
``gdp_mu_squared`` (+∞ when some part is not a Gaussian release), and the ledger's filter has a GDP certificate
(:mod:`privfit.privacy.filter`).

**The exact sampler.** privfit's exact Gaussian is a discrete Gaussian on a lattice, and the bare discrete
Gaussian is NOT (Δ/σ)-GDP (``tests/privacy/test_noise_domination.py`` computes a threshold test below the GDP
curve). It is within e^{±η} per coordinate, pointwise, of a post-processing of the continuous Gaussian with a
σ'' ≥ σ (:mod:`privfit.privacy.noise`, docstring b; η < 10⁻¹³⁵ = :data:`LATTICE_SLACK`). Over a path whose
Gaussian releases draw N coordinates in all, the laws of the real and of that ideal transcript are within e^{±Nη}
pointwise, so an event's (ε, δ) for the real one is at most e^{H} δ_μ(ε − 2H) with H = Nη (the ideal one is
μ-GDP). To bound N on every path without counting coordinates in the ledger, each Gaussian release of c
coordinates adds c·:data:`COORDINATE_CHARGE` to its μ² (κ = 10⁻¹⁰⁰: 10⁻⁹² for a release of 10⁸ coordinates,
nothing next to any real μ²; in floating point each stored μ² is still ≥ c·κ, since rounding a sum of positive
terms never goes below its largest term). A path with Σ μ² ≤ μ_G² then has N ≤ μ_G²/κ and H ≤ μ_G² η/κ; the
filter certifies the δ with twice that, H(μ_G) = 2μ_G² η/κ (the factor 2 covers the rounding of the ledger's
float sums), in :func:`certified_delta`.
"""

from __future__ import annotations

import functools
import math

from scipy.special import log_ndtr

from .errors import PrivacyParameterError, require_non_negative, require_open_unit, require_positive

LATTICE_SLACK = 1e-135
"""η: the per-coordinate pointwise slack of the exact sampler against the ideal continuous mechanism (an upper
bound, checked in ``tests/privacy/test_noise_domination.py``)."""

COORDINATE_CHARGE = 1e-100
"""κ: what each coordinate of a Gaussian release adds to its μ², so that a bounded Σ μ² bounds the number of
coordinates, hence the lattice slack (module docstring)."""

_MARGIN = 1e-11
"""μ is lowered, and ε raised, by this relative margin after their bisections (rounding against the user)."""

_BISECTION_TOLERANCE = 1e-13
"""Bisections stop when the bracket is this narrow (relative): far inside the rounding margins."""

_ROUND_UP = 1e-14
"""A cost's μ² is raised by this relative margin (rounding against the user)."""


def gaussian_mu_squared(*, sigma: float, sensitivity: float, count: int, coordinates: int) -> float:
    """Σ μ² of ``count`` Gaussian releases of L2 sensitivity Δ, standard deviation σ and ``coordinates``
    coordinates each: count·((Δ/σ)² + coordinates·κ) (module docstring), rounded up by a relative 10⁻¹⁴ so that
    floating-point rounding never leaves it below the exact value."""
    sigma = require_positive("sigma", sigma)
    sensitivity = require_non_negative("sensitivity", sensitivity)
    if count < 0 or coordinates < 1:
        raise PrivacyParameterError("coordinates", "count must be ≥ 0 and coordinates ≥ 1")
    return count * ((sensitivity / sigma) ** 2 + coordinates * COORDINATE_CHARGE) * (1.0 + _ROUND_UP)


def gaussian_dp_delta(mu: float, epsilon: float) -> float:
    """δ_μ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2): the least δ with μ-GDP ⇒ (ε, δ)-DP (0 for μ = 0)."""
    mu = require_non_negative("mu", mu)
    if mu == 0.0:
        return 0.0 if epsilon >= 0.0 else -math.expm1(epsilon)
    if not math.isfinite(mu):
        return 1.0
    first = float(log_ndtr(-epsilon / mu + mu / 2.0))
    second = epsilon + float(log_ndtr(-epsilon / mu - mu / 2.0))
    # Φ(a) − e^ε Φ(b) = Φ(a)(1 − e^{second − first}), with second ≤ first: no cancellation of two large terms
    return max(math.exp(first) * -math.expm1(min(second - first, 0.0)), 0.0)


def lattice_slack(mu_squared: float) -> float:
    """H: a bound on the exact sampler's total log slack on a path with Σ μ² ≤ ``mu_squared`` (module docstring)."""
    return 2.0 * mu_squared * LATTICE_SLACK / COORDINATE_CHARGE


def certified_delta(mu: float, epsilon: float) -> float:
    """The δ at ``epsilon`` of a path with Σ μ² ≤ μ² under either sampler: e^{H} δ_μ(ε − 2H), H = H(μ²)."""
    slack = lattice_slack(mu * mu)
    return math.exp(slack) * gaussian_dp_delta(mu, epsilon - 2.0 * slack)


@functools.lru_cache(maxsize=4096)
def gdp_mu_for(epsilon: float, delta: float) -> float:
    """The largest μ (rounded down) with :func:`certified_delta` (μ, ε) ≤ δ: what a GDP certificate at (ε, δ) allows.

    δ_μ(ε) increases with μ (a larger μ is a less private Gaussian), so bisection finds it; the result is lowered
    by a relative 10⁻¹¹ so that floating-point error in δ_μ (about 10⁻¹⁴ relative) cannot put it above the true root.
    """
    epsilon = require_non_negative("epsilon", epsilon)
    delta = require_open_unit("delta", delta)
    low, high = 0.0, 1.0
    while certified_delta(high, epsilon) <= delta:
        low, high = high, 2.0 * high
        if high > 1e6:
            raise PrivacyParameterError("delta", f"no finite μ bound at (ε, δ) = ({epsilon:g}, {delta:g})")
    while high - low > _BISECTION_TOLERANCE * high:
        middle = 0.5 * (low + high)
        if certified_delta(middle, epsilon) <= delta:
            low = middle
        else:
            high = middle
    return low * (1.0 - _MARGIN)


@functools.lru_cache(maxsize=4096)
def gdp_epsilon(mu_squared: float, delta: float) -> float:
    """The least ε (rounded up) with :func:`certified_delta` (√``mu_squared``, ε) ≤ δ; +∞ for no GDP bound."""
    delta = require_open_unit("delta", delta)
    if not math.isfinite(mu_squared):
        return math.inf
    mu = math.sqrt(require_non_negative("mu_squared", mu_squared))
    if certified_delta(mu, 0.0) <= delta:
        return 0.0
    low, high = 0.0, 1.0
    while certified_delta(mu, high) > delta:
        low, high = high, 2.0 * high
        if high > 1e4:
            return math.inf
    while high - low > _BISECTION_TOLERANCE * high:
        middle = 0.5 * (low + high)
        if certified_delta(mu, middle) > delta:
            low = middle
        else:
            high = middle
    return high * (1.0 + _MARGIN)
