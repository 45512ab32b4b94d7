"""Noise calibration: the smallest noise whose cost converts to ε ≤ a target at δ.

Every family's ε(noise) is non-increasing in the noise (a larger σ or Laplace scale gives a pointwise smaller
RDP curve, and conversion is monotone in the curve), so the threshold is bracketed by doubling/halving
(ε(high) ≤ target < ε(low)) and located by Brent's method on log(noise) to a relative ``rtol``/4. The noise
returned is then stepped up until its ε — recomputed and returned with it — is ≤ the target: it is always on
the safe side, and it exceeds the exact threshold by a relative ``rtol`` at most.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import optimize

from .cost import PrivacyCost
from .errors import (
    PrivacyParameterError,
    require_count,
    require_open_unit,
    require_positive,
    require_sampling_rate,
)
from .mechanisms import gaussian_rdp, laplace_rdp, tree_aggregation_rdp
from .orders import DEFAULT_GRID, OrderGrid
from .subsampled import (
    poisson_subsampled_gaussian_rdp,
    poisson_subsampled_gaussian_rdp_replace_one,
    sampled_without_replacement_gaussian_rdp,
)

DEFAULT_RTOL = 1e-6
_MIN_NOISE = 1e-6
_MAX_NOISE = 1e8


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
            raise PrivacyParameterError(
                "epsilon", f"target ε = {target:g} at δ = {delta:g} is not reachable with {parameter} ≤ {_MAX_NOISE:g}"
            )
    low = high / 2.0
    while epsilon_of(low) <= target:
        high, low = low, low / 2.0
        if low < _MIN_NOISE:
            return _result(cost_of_noise, high, delta)
    # Brent's method on log(noise) locates the threshold (ε(noise) − target changes sign in [low, high]) to
    # a relative rtol/4; then step up in factors of (1 + rtol/4) until ε ≤ target holds, at most a few steps.
    root = optimize.brentq(
        lambda log_noise: epsilon_of(math.exp(log_noise)) - target,
        math.log(low),
        math.log(high),
        xtol=rtol / 4.0,
        rtol=4 * np.finfo(float).eps,
    )
    candidate = min(high, math.exp(root) * (1.0 + rtol / 4.0))
    while epsilon_of(candidate) > target:
        candidate = min(high, candidate * (1.0 + rtol / 4.0))
    return _result(cost_of_noise, candidate, delta)


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
    return _calibrate_curve(
        lambda z: curve_fn(grid, q=q, noise_multiplier=z),
        require_count("steps", steps), grid, target_epsilon, delta, rtol, "noise_multiplier",
    )  # fmt: skip


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
    return _calibrate_curve(
        lambda z: sampled_without_replacement_gaussian_rdp(grid, q=q, noise_multiplier=z),
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
