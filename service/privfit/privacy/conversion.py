"""Conversion of RDP curves to (ε, δ)-DP, vectorised over orders and over many curves at once.

The bound is that of Balle, Barthe, Gaboardi, Hsu & Sato 2020 (Thm. 21) = Canonne, Kamath & Steinke 2020
(Prop. 12) = Asoodeh et al. 2020 (Eq. 20): a mechanism that is (α, ε_α)-RDP is (ε, δ)-DP with

    ε = ε_α + log((α − 1)/α) − (log δ + log α)/(α − 1)          (1)
    log δ = (α − 1)(ε_α − ε + log(1 − 1/α)) − log α             (2)

minimised over the grid, with dp_accounting's guards: orders α ≤ 1.01 are not used for (1)/(2) (numerically
unstable and useless there); the KL/total-variation shortcut gives ε = 0 when δ ≥ sqrt(1 − e^{−ε_α}) (and
δ ≤ sqrt(1 − e^{−ε_α}) in (2)); the result is clamped at ε ≥ 0. On negative RDP values dp_accounting silently
returns ε = 0; privfit is stricter: a value below −1e-12 (a bug upstream, never a real divergence) raises,
and round-off negatives above that are treated as 0, which yields the same ε = 0 through the KL shortcut.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .errors import PrivacyParameterError, require_non_negative, require_open_unit
from .mechanisms import Orders, as_orders

_MIN_ORDER_FOR_BOUND = 1.01
_NEGATIVE_RDP_TOLERANCE = 1e-12


@dataclass(frozen=True)
class Conversion:
    """The result of converting one RDP curve: the ε (or δ), the optimal order, and whether it is at an edge.

    ``at_grid_edge`` is true when the optimum is the smallest or the largest order of the grid, i.e. a wider
    grid might give a smaller value — worth surfacing to the user (Opacus warns in the same case).
    """

    epsilon: float
    delta: float
    optimal_order: float
    at_grid_edge: bool


def _check_curves(alphas: np.ndarray, rdp: np.ndarray) -> np.ndarray:
    curves = np.asarray(rdp, dtype=np.float64)
    if curves.shape[-1:] != alphas.shape:
        raise PrivacyParameterError(
            "rdp", f"curve length {curves.shape[-1:]} does not match the grid's {alphas.size} orders"
        )
    if np.isnan(curves).any():
        raise PrivacyParameterError("rdp", "an RDP curve must not contain NaN")
    if (curves < -_NEGATIVE_RDP_TOLERANCE).any():
        raise PrivacyParameterError("rdp", f"an RDP curve must be ≥ 0, found {curves.min()!r}")
    return np.maximum(curves, 0.0)


def epsilons_at_delta(orders: Orders, rdp: np.ndarray, delta: float) -> tuple[np.ndarray, np.ndarray]:
    """ε at ``delta`` for each curve (rows of ``rdp``, shape (..., k)) and the index of its optimal order.

    Vectorised form of bound (1) with the guards above; returns arrays with the leading shape of ``rdp``.
    """
    alphas = as_orders(orders)
    delta = require_open_unit("delta", delta)
    curves = _check_curves(alphas, rdp)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        bound = curves + np.log1p(-1.0 / alphas) - (math.log(delta) + np.log(alphas)) / (alphas - 1.0)
    eps = np.where(alphas > _MIN_ORDER_FOR_BOUND, bound, np.inf)
    eps = np.where(np.isinf(curves), np.inf, eps)
    eps = np.where(delta**2 + np.expm1(-curves) > 0.0, 0.0, eps)
    best = np.argmin(eps, axis=-1)
    value = np.take_along_axis(eps, best[..., None], axis=-1)[..., 0]
    return np.maximum(value, 0.0), best


def deltas_at_epsilon(orders: Orders, rdp: np.ndarray, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """δ at ``epsilon`` for each curve (rows of ``rdp``) and the index of its optimal order: bound (2)."""
    alphas = as_orders(orders)
    epsilon = require_non_negative("epsilon", epsilon)
    curves = _check_curves(alphas, rdp)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        kl = np.where(curves == 0.0, -np.inf, 0.5 * np.log1p(-np.exp(-curves)))
        bound = (alphas - 1.0) * (curves - epsilon + np.log1p(-1.0 / alphas)) - np.log(alphas)
    log_delta = np.where(alphas > _MIN_ORDER_FOR_BOUND, np.minimum(kl, bound), kl)
    log_delta = np.where(np.isinf(curves), 0.0, log_delta)
    best = np.argmin(log_delta, axis=-1)
    value = np.take_along_axis(log_delta, best[..., None], axis=-1)[..., 0]
    return np.minimum(np.exp(value), 1.0), best


def _single(
    batched: Callable[[Orders, np.ndarray, float], tuple[np.ndarray, np.ndarray]],
    orders: Orders,
    rdp: np.ndarray,
    value: float,
) -> tuple[float, float, bool]:
    """Apply a batched conversion to one curve: (result, optimal order, whether it is at a grid edge)."""
    alphas = as_orders(orders)
    curve = np.asarray(rdp, dtype=np.float64)
    if curve.ndim != 1:
        raise PrivacyParameterError("rdp", "expected one curve; use the batched conversions for many")
    result, best = batched(alphas, curve, value)
    index = int(best)
    return float(result), float(alphas[index]), index in (0, alphas.size - 1)


def epsilon_at_delta(orders: Orders, rdp: np.ndarray, delta: float) -> Conversion:
    """ε of one RDP curve at ``delta`` (bound (1)), with the optimal order and the grid-edge flag."""
    epsilon, order, at_edge = _single(epsilons_at_delta, orders, rdp, delta)
    return Conversion(epsilon, float(delta), order, at_edge)


def delta_at_epsilon(orders: Orders, rdp: np.ndarray, epsilon: float) -> Conversion:
    """δ of one RDP curve at ``epsilon`` (bound (2)), with the optimal order and the grid-edge flag."""
    delta, order, at_edge = _single(deltas_at_epsilon, orders, rdp, epsilon)
    return Conversion(float(epsilon), delta, order, at_edge)
