"""Errors and argument checks shared by the privacy-accounting modules.

Every check raises :class:`PrivacyParameterError` (a ``ValueError``) whose message names the offending
parameter, so an API layer can turn it into a 4xx response without guessing which input was wrong.
"""

from __future__ import annotations

import math

import numpy as np

from privfit.errors import ParameterError


class PrivacyParameterError(ParameterError):
    """A privacy parameter is outside its domain (σ ≤ 0, δ ∉ (0, 1), q ∉ (0, 1], NaN, …)."""


def _as_real(name: str, value: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise PrivacyParameterError(name, f"must be a real number, got {value!r}") from None
    if math.isnan(number):
        raise PrivacyParameterError(name, "must not be NaN")
    return number


def require_positive(name: str, value: float, *, allow_inf: bool = False) -> float:
    """Return ``value`` as a float if it is > 0 (and finite unless ``allow_inf``)."""
    number = _as_real(name, value)
    if not allow_inf and math.isinf(number):
        raise PrivacyParameterError(name, "must be finite")
    if number <= 0:
        raise PrivacyParameterError(name, f"must be > 0, got {number!r}")
    return number


def require_non_negative(name: str, value: float, *, allow_inf: bool = False) -> float:
    """Return ``value`` as a float if it is ≥ 0 (and finite unless ``allow_inf``)."""
    number = _as_real(name, value)
    if not allow_inf and math.isinf(number):
        raise PrivacyParameterError(name, "must be finite")
    if number < 0:
        raise PrivacyParameterError(name, f"must be ≥ 0, got {number!r}")
    return number


def require_open_unit(name: str, value: float) -> float:
    """Return ``value`` if it lies in the open interval (0, 1) (used for δ)."""
    number = _as_real(name, value)
    if not 0.0 < number < 1.0:
        raise PrivacyParameterError(name, f"must lie in (0, 1), got {number!r}")
    return number


def require_sampling_rate(name: str, value: float) -> float:
    """Return ``value`` if it lies in (0, 1] (a sampling probability or fraction)."""
    number = _as_real(name, value)
    if not 0.0 < number <= 1.0:
        raise PrivacyParameterError(name, f"must lie in (0, 1], got {number!r}")
    return number


def require_count(name: str, value: int, *, minimum: int = 1) -> int:
    """Return ``value`` if it is an integer ≥ ``minimum`` (a step, tree or composition count)."""
    number: object = value
    if isinstance(number, float) and number.is_integer():
        number = int(number)
    if isinstance(number, bool) or not isinstance(number, int | np.integer):
        raise PrivacyParameterError(name, f"must be an integer, got {value!r}")
    if number < minimum:
        raise PrivacyParameterError(name, f"must be ≥ {minimum}, got {value!r}")
    return int(number)


def require_orders(orders: object) -> np.ndarray:
    """Return RDP orders as a 1-D float array, checking they are non-empty, finite-or-inf and ≥ 1."""
    array = np.asarray(orders, dtype=np.float64)
    if array.ndim != 1:
        raise PrivacyParameterError("orders", f"must be one-dimensional, got shape {array.shape}")
    if array.size == 0:
        raise PrivacyParameterError("orders", "must not be empty")
    if np.isnan(array).any():
        raise PrivacyParameterError("orders", "must not contain NaN")
    if (array < 1).any():
        raise PrivacyParameterError("orders", f"every order must be ≥ 1, got minimum {array.min()!r}")
    return array
