"""Versioned, named grids of Rényi-DP orders.

A privacy cost in privfit is an RDP curve: a float array aligned with one of these grids. A dataset stores the
name of its grid, so the meaning of every stored curve is fixed forever; a grid is never edited in place — a
changed grid is a new name/version.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import PrivacyParameterError, require_orders


@dataclass(frozen=True)
class OrderGrid:
    """An immutable grid of RDP orders α > 1, identified by ``name`` (which includes its version)."""

    name: str
    orders: np.ndarray = field(repr=False)
    description: str = ""

    def __post_init__(self) -> None:
        orders = require_orders(self.orders).copy()
        if (np.diff(orders) <= 0).any():
            raise PrivacyParameterError("orders", "must be strictly increasing")
        orders.setflags(write=False)
        object.__setattr__(self, "orders", orders)

    def __len__(self) -> int:
        return int(self.orders.size)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OrderGrid):
            return NotImplemented
        return self.name == other.name and np.array_equal(self.orders, other.orders)

    def __hash__(self) -> int:
        return hash((self.name, self.orders.tobytes()))


DP_ACCOUNTING_156_V1 = OrderGrid(
    name="dp-accounting-156/v1",
    orders=np.array(
        [1 + x / 10.0 for x in range(1, 100)] + list(range(11, 64)) + [128, 256, 512, 1024], dtype=np.float64
    ),
    description="dp_accounting.rdp.DEFAULT_RDP_ORDERS: 1.1..10.9 step 0.1, 11..63, 128, 256, 512, 1024.",
)

OPACUS_151_V1 = OrderGrid(
    name="opacus-151/v1",
    orders=np.array([1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64)), dtype=np.float64),
    description="Opacus RDPAccountant.DEFAULT_ALPHAS: 1.1..10.9 step 0.1, 12..63.",
)

PRIVATEKUBE_12_V1 = OrderGrid(
    name="privatekube-12/v1",
    orders=np.array([1.5, 1.75, 2, 2.5, 3, 4, 5, 6, 8, 16, 32, 64], dtype=np.float64),
    description="The coarse finite grid of the PrivateKube / DPack ledgers (without their α = ∞ slot).",
)

DEFAULT_GRID = DP_ACCOUNTING_156_V1
"""The grid every new dataset uses unless its owner picks another."""

GRIDS: dict[str, OrderGrid] = {grid.name: grid for grid in (DP_ACCOUNTING_156_V1, OPACUS_151_V1, PRIVATEKUBE_12_V1)}


def get_grid(name: str) -> OrderGrid:
    """Return the registered grid called ``name`` or raise a clear error listing the known names."""
    try:
        return GRIDS[name]
    except KeyError:
        known = ", ".join(sorted(GRIDS))
        raise PrivacyParameterError("grid", f"unknown order grid {name!r}; known grids: {known}") from None
