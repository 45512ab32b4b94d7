"""A privacy cost: an RDP curve on a named grid plus an approximate-DP δ part, and their composition.

This is the unit the ledger stores and sums (DESIGN §2). A mechanism that is only known to be (ε, δ)-DP
enters as the pure-DP curve of its ε (:func:`~privfit.privacy.mechanisms.pure_dp_rdp`) plus the δ, and the δ
parts compose as ``1 − Π(1 − δ_i)``. At conversion time the target δ is shared as dp_accounting does for its
extra δ: the RDP part must meet ``δ' = 1 − (1 − δ)/(1 − δ_extra)``, so that ``δ_extra + (1 − δ_extra) δ' = δ``
— each approximate-DP event fails with probability at most its δ_i, and outside those failures the RDP
filter holds with δ'. If δ_extra ≥ δ, no ε is achievable and ε = ∞.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from .conversion import Conversion, epsilon_at_delta
from .errors import PrivacyParameterError, require_count, require_non_negative, require_open_unit
from .mechanisms import pure_dp_rdp
from .orders import DEFAULT_GRID, OrderGrid


def compose_deltas(deltas: Iterable[float] | np.ndarray) -> float:
    """``1 − Π(1 − δ_i)`` computed stably as ``−expm1(Σ log1p(−δ_i))``."""
    values = np.asarray(list(deltas) if not isinstance(deltas, np.ndarray) else deltas, dtype=np.float64)
    if values.size == 0:
        return 0.0
    if np.isnan(values).any() or (values < 0).any() or (values > 1).any():
        raise PrivacyParameterError("delta", "every δ must lie in [0, 1]")
    return float(-np.expm1(np.sum(np.log1p(-values))))


def rdp_part_delta(delta: float, extra_delta: float) -> float:
    """The δ' left for the RDP part when approximate-DP events already used ``extra_delta`` (0 if none left)."""
    if extra_delta <= 0.0:
        return delta
    if extra_delta >= delta:
        return 0.0
    return 1.0 - (1.0 - delta) / (1.0 - extra_delta)


@dataclass(frozen=True)
class PrivacyCost:
    """An RDP curve on ``grid`` plus an approximate-DP δ; composition is ``+`` and k-fold is ``* k``."""

    rdp: np.ndarray = field(repr=False)
    grid: OrderGrid = DEFAULT_GRID
    extra_delta: float = 0.0

    def __post_init__(self) -> None:
        curve = np.array(self.rdp, dtype=np.float64)
        if curve.shape != self.grid.orders.shape:
            raise PrivacyParameterError(
                "rdp", f"curve has {curve.size} values but grid {self.grid.name!r} has {len(self.grid)} orders"
            )
        if np.isnan(curve).any() or (curve < 0).any():
            raise PrivacyParameterError("rdp", "an RDP curve must be ≥ 0 and contain no NaN")
        if not 0.0 <= self.extra_delta < 1.0 or math.isnan(self.extra_delta):
            raise PrivacyParameterError("extra_delta", f"must lie in [0, 1), got {self.extra_delta!r}")
        curve.setflags(write=False)
        object.__setattr__(self, "rdp", curve)

    @classmethod
    def zero(cls, grid: OrderGrid = DEFAULT_GRID) -> PrivacyCost:
        """The cost of releasing nothing."""
        return cls(np.zeros(len(grid)), grid)

    @classmethod
    def approximate_dp(cls, epsilon: float, delta: float, grid: OrderGrid = DEFAULT_GRID) -> PrivacyCost:
        """An (ε, δ)-DP event: ε enters as the tight pure-DP curve, δ as the approximate part."""
        epsilon = require_non_negative("epsilon", epsilon)
        delta = require_non_negative("delta", delta)
        if delta >= 1.0:
            raise PrivacyParameterError("delta", f"must lie in [0, 1), got {delta!r}")
        return cls(pure_dp_rdp(grid, epsilon=epsilon), grid, delta)

    def __add__(self, other: PrivacyCost) -> PrivacyCost:
        if not isinstance(other, PrivacyCost):
            return NotImplemented
        if other.grid != self.grid:
            raise PrivacyParameterError(
                "grid", f"cannot compose costs on grids {self.grid.name!r} and {other.grid.name!r}"
            )
        return PrivacyCost(self.rdp + other.rdp, self.grid, compose_deltas([self.extra_delta, other.extra_delta]))

    def __mul__(self, count: int) -> PrivacyCost:
        count = require_count("count", count, minimum=0)
        extra = float(-np.expm1(count * np.log1p(-self.extra_delta)))
        return PrivacyCost(count * self.rdp, self.grid, extra)

    __rmul__ = __mul__

    def epsilon(self, delta: float) -> Conversion:
        """ε at ``delta`` of this cost (RDP part at δ' = 1 − (1 − δ)/(1 − δ_extra)), with the optimal order."""
        delta = require_open_unit("delta", delta)
        rdp_delta = rdp_part_delta(delta, self.extra_delta)
        if rdp_delta <= 0.0:
            return Conversion(math.inf, delta, float(self.grid.orders[-1]), True)
        result = epsilon_at_delta(self.grid, self.rdp, rdp_delta)
        return Conversion(result.epsilon, delta, result.optimal_order, result.at_grid_edge)


def total_epsilon(
    curves: np.ndarray, extra_deltas: np.ndarray | None, delta: float, grid: OrderGrid = DEFAULT_GRID
) -> Conversion:
    """ε at ``delta`` of a whole ledger: ``curves`` (n_entries × n_orders) summed, δ parts composed.

    One vectorised pass (a column sum and one conversion), fast enough for 10⁴-entry ledgers on every debit.
    """
    matrix = np.asarray(curves, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[1] != len(grid):
        raise PrivacyParameterError("curves", f"expected shape (entries, {len(grid)}), got {matrix.shape}")
    extra = 0.0 if extra_deltas is None else compose_deltas(np.asarray(extra_deltas, dtype=np.float64))
    return PrivacyCost(matrix.sum(axis=0), grid, extra).epsilon(delta)
