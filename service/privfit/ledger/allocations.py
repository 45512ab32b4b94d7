r"""Per-analyst allocations of a dataset's budget (issue 37, item 1; docs/privacy.md, "Allocations").

The owner gives an analyst key a share (ε_a, δ_a) of the dataset's budget. The allocation carries its own privacy
filter, built from (ε_a, δ_a) on the dataset's grid exactly as the dataset's is built from (ε_max, δ_max)
(:meth:`privfit.privacy.PrivacyFilter.for_budget`), and the cached composition of the analyst's live reservations
on the dataset (its fits and evaluations; :class:`privfit.db.models.FilterColumns`). From then on a fit or an
evaluation of that key is admitted only if **both** filters admit it, in the one transaction that holds the
dataset's budget lock (:func:`privfit.ledger.ledger._admit`); a release or refund of the analyst's fit updates both
caches from the entries.

**The dataset's guarantee is unchanged.** Every admission still passes the dataset's filter with every admitted fit
of every analyst counted; the allocation only refuses more. Any transcript the service can produce with allocations
is one the dataset's filter alone admits, so its theorem ((ε_max, δ_max)-DP against an adaptive analyst,
:mod:`privfit.ledger.ledger`) covers it, whatever the allocations (their sum may exceed the budget: the dataset's
filter then decides who comes first).

**Each analyst's spend is bounded by its allocation.** Write the transcript's privacy loss by the chain rule as the
sum over releases of each release's loss given everything released before it (by every analyst). A release of
analyst a has, given that past, an RDP curve bounded by its admitted cost, which is fixed before it runs (a public
function of the request and the ledger). The allocation's filter admits a's i-th release only if the composition
of a's admitted costs stays inside it; the filter's proof (Feldman–Zrnic at each pinned order, the Kairouz–Oh–
Viswanath decomposition of δ parts, Balle et al.'s conversion; :mod:`privfit.privacy.filter`) needs of the other
releases only that they are part of the past each cost is chosen on, so it applies to the sum of a's terms:
**a's share of the privacy loss — Σ over a's releases of their conditional losses — obeys (ε_a, δ_a)**, with a's
fits chosen adaptively on everything a and the others have seen. It is a bound on a's part of the loss, not a
separate guarantee for colluding analysts: pooled, analysts are bounded by the dataset's budget.

**Fixed once set.** A filter's proof needs its parameters fixed before the releases it governs, so an allocation
is never edited: the owner deletes it (the analyst then spends from the dataset's budget alone, still bounded by
the dataset's filter) and may set a new one, whose filter counts everything the analyst has already committed on
the dataset. An allocation set over more than it admits is created closed (``filter_note``), like a budget.

Every function here runs inside ``Database.write()`` (or ``read()`` for the views), like :mod:`privfit.ledger`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from privfit.db.models import Allocation, Budget
from privfit.privacy import PrivacyFilter, get_grid

from .ledger import (
    LedgerError,
    _committed,
    _get,
    _lock,
    _sum_entries,
    allocation_of,
    budget_filter,
    committed_cost_from_entries,
    filter_columns,
)


class AllocationError(LedgerError):
    """An allocation that cannot be set: ``field`` names the request field at fault (a 422), or ``exists`` (a 409)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class AllocationStatus:
    """What the owner (every allocation) and the analyst (its own) see of an allocation: its share, its filter's
    measure of the analyst's charged, reserved and committed fits on the dataset, and what remains."""

    api_key_id: str
    epsilon_max: float
    delta_max: float
    charged_epsilon: float
    reserved_epsilon: float
    committed_epsilon: float
    committed_share: float
    remaining_epsilon: float
    closed_reason: str | None
    created_at: datetime


def create_allocation(session: Session, dataset_id: str, api_key_id: str, epsilon: float, delta: float) -> Allocation:
    """Set the allocation (ε, δ) of ``api_key_id`` on the dataset, under the budget lock (so no admission runs
    meanwhile). Its filter counts everything the key has committed on the dataset so far; if that is more than it
    admits, it is created closed. :class:`AllocationError` if one exists (``exists``) or if (ε, δ) exceeds the
    dataset's budget (``epsilon``/``delta``)."""
    budget = _lock(session, dataset_id)
    if allocation_of(session, dataset_id, api_key_id) is not None:
        raise AllocationError(
            "exists",
            "this analyst already has an allocation on this dataset; an allocation "
            "is fixed once set (its filter's proof needs that): delete it, then set a new one",
        )
    if not epsilon <= budget.epsilon_max:
        raise AllocationError("epsilon", f"must be at most the dataset's budget ε = {budget.epsilon_max:g}")
    if not delta <= budget.delta_max:
        raise AllocationError("delta", f"must be at most the dataset's budget δ = {budget.delta_max:g}")
    grid = get_grid(budget.grid_name)
    privacy_filter = PrivacyFilter.for_budget(epsilon, delta, grid)
    committed = committed_cost_from_entries(session, budget, spender=api_key_id)
    reading = privacy_filter.measure(committed)
    note = None
    if not reading.share <= 1.0:
        note = (f"set over the analyst's earlier fits on this dataset, which already use {reading.share:.4g}× this "
                "allocation's filter")  # fmt: skip
    allocation = Allocation(dataset_id=budget.dataset_id, api_key_id=api_key_id,
                            **filter_columns(privacy_filter, committed, note))  # fmt: skip
    session.add(allocation)
    session.flush()
    return allocation


def delete_allocation(session: Session, dataset_id: str, api_key_id: str) -> bool:
    """Remove the allocation of ``api_key_id`` on the dataset (under the budget lock); whether there was one. The
    analyst's fits stay in the ledger and in the dataset's committed cost."""
    _lock(session, dataset_id)
    allocation = allocation_of(session, dataset_id, api_key_id)
    if allocation is None:
        return False
    session.delete(allocation)
    session.flush()
    return True


def allocation_statuses(
    session: Session,
    dataset_id: str,
    api_key_id: str | None = None,
    *,
    page: Callable[[Select[tuple[Allocation]]], Select[tuple[Allocation]]] | None = None,
) -> list[AllocationStatus]:
    """The dataset's allocations (only ``api_key_id``'s if given), oldest first (reads only). ``page`` orders and
    bounds the query instead (one page of the API's list, :mod:`privfit.api.pagination`)."""
    budget = _get(session, dataset_id)
    query = select(Allocation).where(Allocation.dataset_id == budget.dataset_id)
    if api_key_id is not None:
        query = query.where(Allocation.api_key_id == api_key_id)
    query = query.order_by(Allocation.id) if page is None else page(query)
    return [_status(session, budget, allocation) for allocation in session.execute(query).scalars()]


def _status(session: Session, budget: Budget, allocation: Allocation) -> AllocationStatus:
    grid = get_grid(allocation.grid_name)
    privacy_filter = budget_filter(allocation)
    committed = privacy_filter.measure(_committed(allocation))
    spender = allocation.api_key_id
    charged = privacy_filter.measure(_sum_entries(session, budget.dataset_id, grid, "charge", ("release",),
                                                  spender=spender))  # fmt: skip
    reserved = privacy_filter.measure(_sum_entries(session, budget.dataset_id, grid, "reservation",
                                                   ("charge", "release"), spender=spender))  # fmt: skip
    remaining = 0.0 if allocation.filter_note else max(0.0, allocation.epsilon_max - committed.epsilon)
    return AllocationStatus(
        api_key_id=spender, epsilon_max=allocation.epsilon_max, delta_max=allocation.delta_max,
        charged_epsilon=charged.epsilon, reserved_epsilon=reserved.epsilon, committed_epsilon=committed.epsilon,
        committed_share=committed.share, remaining_epsilon=remaining, closed_reason=allocation.filter_note,
        created_at=allocation.created_at,
    )  # fmt: skip
