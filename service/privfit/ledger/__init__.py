"""The privacy ledger (DESIGN §2): per-dataset budgets, reservations, charges, releases and refunds, admitted by
the dataset's privacy filter (:mod:`privfit.privacy.filter`)."""

from .ledger import (
    FORMULA_VERSION,
    BudgetExceededError,
    BudgetStatus,
    Estimate,
    FilterView,
    LedgerError,
    budget_filter,
    charge,
    charge_evaluation,
    committed_cost_from_entries,
    create_budget,
    delta_allowance,
    estimate,
    refund,
    release,
    reserve,
    status,
)

__all__ = [
    "FORMULA_VERSION",
    "BudgetExceededError",
    "BudgetStatus",
    "Estimate",
    "FilterView",
    "LedgerError",
    "budget_filter",
    "charge",
    "charge_evaluation",
    "committed_cost_from_entries",
    "create_budget",
    "delta_allowance",
    "estimate",
    "refund",
    "release",
    "reserve",
    "status",
]
