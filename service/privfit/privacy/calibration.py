"""Noise calibration: the smallest noise whose cost converts to ε ≤ a target at δ.

Every family's ε(noise) is non-increasing in the noise (a larger σ or Laplace scale gives a pointwise smaller
RDP curve, and conversion is monotone in the curve), so the threshold is bracketed by doubling/halving
(ε(high) ≤ target < ε(low)) and located by Brent's method on log(noise) to a relative ``rtol``/4. The noise
returned is then stepped up until its ε — recomputed and returned with it — is ≤ the target: it is always on
the safe side, and it exceeds the exact threshold by a relative ``rtol`` at most.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import optimize

from .conversion import epsilons_at_delta
from .cost import PrivacyCost
from .errors import (
    PrivacyParameterError,
    require_count,
    require_open_unit,
    require_positive,
    require_sampling_rate,
)
from .gaussian_dp import gdp_mu_for
from .mechanisms import gaussian_rdp, laplace_rdp, tree_aggregation_rdp
from .orders import DEFAULT_GRID, OrderGrid
from .subsampled import (
    clear_curve_caches,
    poisson_subsampled_gaussian_rdp,
    poisson_subsampled_gaussian_rdp_replace_one,
    sampled_without_replacement_gaussian_rdp,
)

DEFAULT_RTOL = 1e-6
_MIN_NOISE = 1e-6
_MAX_NOISE = 1e8
_COARSE_LOG_TOLERANCE = 0.05
_WINDOW_ROUNDS = 3
#: The coarse search brackets the threshold by factors of 16 (issue 35: 5 evaluations from 1 to 1e6, not 20).
_COARSE_FACTOR = 16.0
#: The largest noise the generic search's doubling from 1 tries (2²⁶ ≤ 1e8 < 2²⁷): above the coarse search's
#: range, one whole-grid evaluation there tells an unreachable target (issue 35).
_LARGEST_TRIED = 2.0 ** math.floor(math.log2(_MAX_NOISE))
#: Bounds on the loops that only a curve non-monotone in the noise (rounding) could prolong (issue 35: a bounded
#: request cost): step-ups by (1 + rtol/4) before falling back to the proven end of the bracket, and rounds of
#: :func:`_bracket_threshold` before it returns the bracket it has (still a valid one, only wider).
_MAX_STEP_UPS = 16
_MAX_BRACKET_ROUNDS = 8
_CALIBRATION_CACHE_SIZE = 1024  # calibrations are pure functions of public inputs; estimates and admissions repeat them

CurveOnOrders = Callable[[float, np.ndarray], np.ndarray]
"""A one-step RDP curve as a function of the noise and of the orders it is evaluated at."""


@dataclass(frozen=True)
class Calibration:
    """A calibrated noise level with the ε it achieves at ``delta`` and the optimal order there."""

    noise: float
    epsilon: float
    delta: float
    optimal_order: float


def calibrate_noise(
    cost_of_noise: Callable[[float], PrivacyCost],
    *,
    target_epsilon: float,
    delta: float,
    rtol: float = DEFAULT_RTOL,
    parameter: str = "noise",
) -> Calibration:
    """Smallest noise (to relative ``rtol``, rounded up) whose ``cost_of_noise(noise)`` has ε ≤ target at δ.

    ``cost_of_noise`` must be non-increasing in its argument. Raises :class:`PrivacyParameterError` naming
    ``epsilon`` when no noise up to 1e8 reaches the target (e.g. approximate-DP parts already exceed δ).
    """
    target = require_positive("epsilon", target_epsilon)
    delta = require_open_unit("delta", delta)
    rtol = require_positive("rtol", rtol)

    def epsilon_of(noise: float) -> float:
        return cost_of_noise(noise).epsilon(delta).epsilon

    high = 1.0
    while epsilon_of(high) > target:
        high *= 2.0
        if high > _MAX_NOISE:
            raise PrivacyParameterError("epsilon", _unreachable(target, delta, parameter))
    low = high / 2.0
    while epsilon_of(low) <= target:
        high, low = low, low / 2.0
        if low < _MIN_NOISE:
            return _result(cost_of_noise, high, delta)
    # Brent's method on log(noise) locates the threshold (ε(noise) − target changes sign in [low, high]) to
    # a relative rtol/4; then step up in factors of (1 + rtol/4) until ε ≤ target holds, at most a few steps
    # (_MAX_STEP_UPS, then high itself).
    root = optimize.brentq(
        lambda log_noise: epsilon_of(math.exp(log_noise)) - target,
        math.log(low),
        math.log(high),
        xtol=rtol / 4.0,
        rtol=4 * np.finfo(float).eps,
    )
    candidate = min(high, math.exp(root) * (1.0 + rtol / 4.0))
    steps = 0
    while epsilon_of(candidate) > target:
        if steps == _MAX_STEP_UPS:  # only a curve non-monotone in the noise gets here: high meets the target
            candidate = high
            break
        candidate = min(high, candidate * (1.0 + rtol / 4.0))
        steps += 1
    return _result(cost_of_noise, candidate, delta)


def _unreachable(target: float, delta: float, parameter: str) -> str:
    return f"target ε = {target:g} at δ = {delta:g} is not reachable with {parameter} ≤ {_MAX_NOISE:g}"


def _result(cost_of_noise: Callable[[float], PrivacyCost], noise: float, delta: float) -> Calibration:
    result = cost_of_noise(noise).epsilon(delta)
    return Calibration(noise=noise, epsilon=result.epsilon, delta=delta, optimal_order=result.optimal_order)


def _calibrate_curve(
    curve_of_noise: Callable[[float], np.ndarray],
    count: int,
    grid: OrderGrid,
    target_epsilon: float,
    delta: float,
    rtol: float,
    parameter: str,
) -> Calibration:
    """Calibrate ``count``-fold composition of a mechanism whose RDP curve on ``grid`` is ``curve_of_noise``."""
    return calibrate_noise(
        lambda noise: PrivacyCost(count * curve_of_noise(noise), grid),
        target_epsilon=target_epsilon,
        delta=delta,
        rtol=rtol,
        parameter=parameter,
    )


def _calibrate_by_orders(
    curve_on: CurveOnOrders,
    count: int,
    grid: OrderGrid,
    target_epsilon: float,
    delta: float,
    rtol: float,
    parameter: str,
) -> Calibration:
    """:func:`_calibrate_curve` for curves that are expensive on the whole grid (the subsampled Gaussians): the
    search runs on a few orders, and two whole-grid evaluations prove the answer.

    Why a few orders suffice. The ε of a curve at δ is the minimum over orders α of the conversion e_α(noise)
    (:func:`~privfit.privacy.epsilons_at_delta`), each non-increasing in the noise, so the exact threshold
    ``σ* = inf{σ : ε(σ) ≤ target}`` is min_α σ*_α, and a subset W of orders has ε_W ≥ ε and σ*_W ≥ σ*, with
    equality when W holds the optimal order. The search:

    1. brackets and locates, to 5 %, the threshold on the *coarse* orders, those with 2α an integer (for the
       Poisson curve both 2α and 2α − 1 are then integers, whose binomial sums are cheap);
    2. refines on the *window*, the grid's orders between the coarse neighbours of the coarse optimum, to a
       bracket (a, b] with ε_W(a) > target ≥ ε_W(b) and b/a ≤ e^{rtol/4};
    3. proves it on the whole grid: ε(a) > target means every order's threshold exceeds a, so σ* ∈ (a, b]. If
       not, some order outside W already meets the target at a; W grows by that order's neighbourhood and
       step 2 repeats below a (the last of a few rounds takes the whole grid as the window, where the proof
       cannot fail).

    The noise returned is b·(1 + rtol), stepped up (by 1 + rtol/4) until its whole-grid ε ≤ target: it lies in
    [σ*(1 + rtol), σ*(1 + rtol/4)(1 + rtol)], so it is never below what the generic bracketing-and-Brent search
    of :func:`calibrate_noise` returns on the same curve (which is at most σ*(1 + rtol/2)) and exceeds it by a
    relative 1.3·rtol at most. Edge cases (a target met below 1e-6 or unreachable by 1e8) are left to
    :func:`calibrate_noise`, with the same answers and messages.

    Cost (issue 35: every estimate plans in ≤ 1 s of CPU). Step 1 brackets by factors of 16 from 1 (a threshold
    near 1e6, as at ε = 0.01, takes 5 evaluations instead of 20); a target still unmet at 2²⁶ — the last noise the
    generic search's doubling tries below 1e8 — is decided by one whole-grid evaluation there (unreachable: the
    generic search's error, at once; else the generic search). A non-monotone rounding wobble cannot prolong a
    loop beyond a fixed number of evaluations (:data:`_MAX_STEP_UPS`, :data:`_MAX_BRACKET_ROUNDS`).
    """
    target = require_positive("epsilon", target_epsilon)
    delta = require_open_unit("delta", delta)
    rtol = require_positive("rtol", rtol)
    orders = grid.orders

    def cost_of(noise: float) -> PrivacyCost:
        return PrivacyCost(count * curve_on(noise, orders), grid)

    def generic() -> Calibration:
        return calibrate_noise(cost_of, target_epsilon=target, delta=delta, rtol=rtol, parameter=parameter)

    def on(subset: np.ndarray) -> Callable[[float], tuple[float, int]]:
        @functools.cache  # the root finders revisit their end points
        def epsilon(noise: float) -> tuple[float, int]:
            value, best = epsilons_at_delta(orders[subset], count * curve_on(noise, orders[subset]), delta)
            return float(value), int(subset[int(best)])

        return epsilon

    coarse = np.flatnonzero(2.0 * orders == np.floor(2.0 * orders))
    if coarse.size < 3:
        return generic()
    coarse_epsilon = on(coarse)
    high = 1.0
    while coarse_epsilon(high)[0] > target:
        if high >= _LARGEST_TRIED:
            if cost_of(high).epsilon(delta).epsilon > target:  # what the generic search would conclude, at once
                raise PrivacyParameterError("epsilon", _unreachable(target, delta, parameter))
            return generic()
        high = min(high * _COARSE_FACTOR, _LARGEST_TRIED)
    low = high / _COARSE_FACTOR
    while coarse_epsilon(low)[0] <= target:
        high, low = low, low / _COARSE_FACTOR
        if low < _MIN_NOISE:
            return generic()
    low, high = _bracket_threshold(coarse_epsilon, target, low, high, _COARSE_LOG_TOLERANCE)
    optimum = int(np.searchsorted(coarse, coarse_epsilon(high)[1]))
    left = orders[coarse[optimum - 1]] if optimum > 0 else -np.inf
    right = orders[coarse[optimum + 1]] if optimum + 1 < coarse.size else np.inf
    window = np.flatnonzero((orders >= left) & (orders <= right))
    for round_ in range(_WINDOW_ROUNDS):
        if round_ == _WINDOW_ROUNDS - 1:
            window = np.arange(orders.size)
        window_epsilon = on(window)
        while window_epsilon(low)[0] <= target:
            high, low = low, low / 2.0
            if low < _MIN_NOISE:
                return generic()
        low, high = _bracket_threshold(window_epsilon, target, low, high, rtol / 4.0)
        whole = cost_of(low).epsilon(delta)
        if whole.epsilon > target:
            return _safe_above(cost_of, high, delta, target, rtol)
        found = int(np.searchsorted(orders, whole.optimal_order))
        window = np.union1d(window, np.arange(max(found - 2, 0), min(found + 3, orders.size)))
        high = low
        low = high / 2.0
    raise AssertionError("unreachable: the last round's window is the whole grid, where ε_W(a) = ε(a) > target")


def _bracket_threshold(
    epsilon_of: Callable[[float], tuple[float, int]], target: float, low: float, high: float, log_width: float
) -> tuple[float, float]:
    """Shrink a bracket ε(low) > target ≥ ε(high) of a non-increasing ε to log(high/low) ≤ ``log_width``.

    Brent's method on log(noise) locates the sign change to ``log_width``/4; the two points ``log_width``/2 on
    either side of it are checked and become the new bracket (a check that fails narrows the interval and the
    search repeats, so a non-monotone rounding wobble costs time, never correctness; after _MAX_BRACKET_ROUNDS
    repeats the bracket is returned as it is: still ε(low) > target ≥ ε(high), only wider).
    """

    log_low, log_high = math.log(low), math.log(high)
    ends = {log_low: low, log_high: high}  # exp(log(x)) need not be x: the invariant holds at the ends themselves

    def excess(log_noise: float) -> float:
        return epsilon_of(ends.get(log_noise, math.exp(log_noise)))[0] - target

    for _ in range(_MAX_BRACKET_ROUNDS):
        if log_high - log_low <= log_width:
            break
        root = optimize.brentq(excess, log_low, log_high, xtol=log_width / 4.0, rtol=4 * np.finfo(float).eps)
        below, above = max(log_low, root - log_width / 2.0), min(log_high, root + log_width / 2.0)
        if excess(below) <= 0.0:
            log_high = below
        elif excess(above) > 0.0:
            log_low = above
        else:
            log_low, log_high = below, above
        ends.setdefault(log_low, math.exp(log_low))  # the noises excess() evaluated there
        ends.setdefault(log_high, math.exp(log_high))
    return ends[log_low], ends[log_high]


def _safe_above(
    cost_of: Callable[[float], PrivacyCost], proven: float, delta: float, target: float, rtol: float
) -> Calibration:
    """``proven``·(1 + rtol), stepped up by factors (1 + rtol/4) until its cost's ε ≤ target (a guard against
    rounding: the caller proved that ``proven`` meets it), with that ε and its optimal order; after
    _MAX_STEP_UPS steps, ``proven`` itself."""
    noise = proven * (1.0 + rtol)
    result = cost_of(noise).epsilon(delta)
    steps = 0
    while result.epsilon > target:
        if steps == _MAX_STEP_UPS:  # only a curve non-monotone in the noise gets here: proven meets the target
            noise = proven
            result = cost_of(noise).epsilon(delta)
            break
        noise *= 1.0 + rtol / 4.0
        result = cost_of(noise).epsilon(delta)
        steps += 1
    return Calibration(noise=noise, epsilon=result.epsilon, delta=delta, optimal_order=result.optimal_order)


def gaussian_sigma(
    target_epsilon: float,
    delta: float,
    *,
    sensitivity: float = 1.0,
    count: int = 1,
    grid: OrderGrid = DEFAULT_GRID,
    rtol: float = DEFAULT_RTOL,
) -> Calibration:
    """σ of ``count`` Gaussian releases of L2 sensitivity ``sensitivity`` meeting (target_epsilon, delta)."""
    sensitivity = require_positive("sensitivity", sensitivity)
    return _calibrate_curve(
        lambda sigma: gaussian_rdp(grid, sigma=sigma, sensitivity=sensitivity),
        require_count("count", count), grid, target_epsilon, delta, rtol, "sigma",
    )  # fmt: skip


def gdp_gaussian_sigma(
    target_epsilon: float,
    delta: float,
    *,
    sensitivity: float = 1.0,
    count: int = 1,
    coordinates: int,
    grid: OrderGrid = DEFAULT_GRID,
    rtol: float = 1e-9,
) -> Calibration:
    """σ of ``count`` Gaussian releases of L2 sensitivity Δ (``coordinates`` each) meeting (target_epsilon, delta)
    on the exact Gaussian curve: they are (Δ√count/σ)-GDP, so σ = Δ√count/μ with μ the largest μ-GDP that is
    (ε, δ)-DP (:func:`~privfit.privacy.gaussian_dp.gdp_mu_for`; Dong, Roth & Su 2022, Cor. 2.13) — the σ a
    PLD accountant certifies, without the slack of an RDP conversion. Raised by a relative ``rtol`` and then by
    steps of ``rtol``/4 until :meth:`PrivacyCost.epsilon` of :meth:`PrivacyCost.gaussian` is ≤ the target (the
    closed form needs no search: ``rtol`` only clears the 10⁻¹¹ rounding margins of the GDP functions).
    The cost carries the RDP curve too, so a filter without a GDP certificate still measures it (by its curve)."""
    target = require_positive("epsilon", target_epsilon)
    sensitivity = require_positive("sensitivity", sensitivity)
    count = require_count("count", count)

    def cost_of(sigma: float) -> PrivacyCost:
        return PrivacyCost.gaussian(grid, sigma=sigma, sensitivity=sensitivity, count=count, coordinates=coordinates)

    proven = sensitivity * math.sqrt(count) / gdp_mu_for(target, require_open_unit("delta", delta))
    if proven > _MAX_NOISE * sensitivity:
        raise PrivacyParameterError("epsilon", _unreachable(target, delta, "sigma"))
    return _safe_above(cost_of, proven, delta, target, rtol)


def laplace_scale(
    target_epsilon: float,
    delta: float,
    *,
    sensitivity: float = 1.0,
    count: int = 1,
    grid: OrderGrid = DEFAULT_GRID,
    rtol: float = DEFAULT_RTOL,
) -> Calibration:
    """Laplace scale b of ``count`` releases of L1 sensitivity ``sensitivity``, via their exact RDP curve."""
    sensitivity = require_positive("sensitivity", sensitivity)
    return _calibrate_curve(
        lambda scale: laplace_rdp(grid, scale=scale, sensitivity=sensitivity),
        require_count("count", count), grid, target_epsilon, delta, rtol, "scale",
    )  # fmt: skip


@functools.lru_cache(maxsize=_CALIBRATION_CACHE_SIZE)
def poisson_noise_multiplier(
    target_epsilon: float,
    delta: float,
    *,
    q: float,
    steps: int,
    relation: Literal["replace_one", "add_remove"] = "replace_one",
    grid: OrderGrid = DEFAULT_GRID,
    rtol: float = DEFAULT_RTOL,
) -> Calibration:
    """Noise multiplier of ``steps`` Poisson-subsampled Gaussian steps at rate ``q`` (DP-SGD with Poisson batches).

    ``relation="replace_one"`` (privfit's) uses the weak-triangle rule of
    :func:`~privfit.privacy.subsampled.poisson_subsampled_gaussian_rdp_replace_one`; ``"add_remove"`` is the
    plain MTZ curve, for comparison with other libraries.
    """
    q = require_sampling_rate("q", q)
    curves = {"replace_one": poisson_subsampled_gaussian_rdp_replace_one, "add_remove": poisson_subsampled_gaussian_rdp}
    if relation not in curves:
        raise PrivacyParameterError("relation", f"must be 'replace_one' or 'add_remove', got {relation!r}")
    curve_fn = curves[relation]
    return _calibrate_by_orders(
        lambda z, orders: curve_fn(orders, q=q, noise_multiplier=z),
        require_count("steps", steps), grid, target_epsilon, delta, rtol, "noise_multiplier",
    )  # fmt: skip


@functools.lru_cache(maxsize=_CALIBRATION_CACHE_SIZE)
def without_replacement_noise_multiplier(
    target_epsilon: float,
    delta: float,
    *,
    q: float,
    steps: int,
    grid: OrderGrid = DEFAULT_GRID,
    rtol: float = DEFAULT_RTOL,
) -> Calibration:
    """Noise multiplier (relative to the replace-one sensitivity) of ``steps`` fixed-size-batch Gaussian steps."""
    q = require_sampling_rate("q", q)
    return _calibrate_by_orders(
        lambda z, orders: sampled_without_replacement_gaussian_rdp(orders, q=q, noise_multiplier=z),
        require_count("steps", steps), grid, target_epsilon, delta, rtol, "noise_multiplier",
    )  # fmt: skip


def tree_aggregation_sigma(
    target_epsilon: float,
    delta: float,
    *,
    steps: int,
    sensitivity: float = 1.0,
    passes: int = 1,
    grid: OrderGrid = DEFAULT_GRID,
    rtol: float = DEFAULT_RTOL,
) -> Calibration:
    """Node noise σ of ``passes`` tree-aggregation passes over ``steps`` leaves each."""
    sensitivity = require_positive("sensitivity", sensitivity)
    return _calibrate_curve(
        lambda sigma: tree_aggregation_rdp(grid, sigma=sigma, steps=steps, sensitivity=sensitivity),
        require_count("passes", passes), grid, target_epsilon, delta, rtol, "sigma",
    )  # fmt: skip


def pure_epsilon_for_target(
    target_epsilon: float, delta: float, grid: OrderGrid, other: PrivacyCost | None = None
) -> float:
    """The largest pure ε whose tight RDP curve, composed with ``other``, converts to ≤ the target at δ.

    A pure ε-DP release is (α, ε_α)-RDP with Mironov's tight ε_α ≤ ε (:func:`~privfit.privacy.pure_dp_rdp`);
    its conversion at δ is a little below ε, so the returned ε can exceed the target slightly while the
    ledger's charge (the conversion) stays within it. Calibrated as a noise 1/ε by
    :func:`calibrate_noise` (safe side: the returned ε's conversion is ≤ the target).
    """
    extra = PrivacyCost.zero(grid) if other is None else other

    def cost_of(inverse_epsilon: float) -> PrivacyCost:
        return PrivacyCost.pure_dp(1.0 / inverse_epsilon, grid) + extra

    calibration = calibrate_noise(cost_of, target_epsilon=target_epsilon, delta=delta, parameter="1/epsilon")
    return 1.0 / calibration.noise


def clear_calibration_caches() -> None:
    """Forget every cached calibration and curve: the next call computes from scratch (cold benchmarks; tests)."""
    poisson_noise_multiplier.cache_clear()
    without_replacement_noise_multiplier.cache_clear()
    clear_curve_caches()
