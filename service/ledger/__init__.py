"""The privacy ledger (DESIGN §2): per-dataset RDP budgets, reservations, charges, releases, the RDP filter."""

from .ledger import (
    FORMULA_VERSION,
    BudgetExceededError,
    BudgetStatus,
    Estimate,
    LedgerError,
    charge,
    committed_cost_from_entries,
    create_budget,
    estimate,
    release,
    reserve,
    status,
)

__all__ = [
    "FORMULA_VERSION",
    "BudgetExceededError",
    "BudgetStatus",
    "Estimate",
    "LedgerError",
    "charge",
    "committed_cost_from_entries",
    "create_budget",
    "estimate",
    "release",
    "reserve",
    "status",
]
