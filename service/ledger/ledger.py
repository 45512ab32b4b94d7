"""Admission, reservation, charge and release against a dataset's RDP budget, atomically.

Semantics (DESIGN §2):
- A dataset's *committed* cost is the composition (sum of RDP curves, δ parts as 1 − Π(1 − δ_i), approximate-RDP
  slacks summed; :mod:`privfit.privacy.cost`) of every
  reservation that has not been released — whether already charged or still queued. A fit is admitted only if
  committed + its own cost converts to ε ≤ ε_max at δ_max: an RDP privacy filter, valid for adaptively chosen
  fits (Feldman & Zrnic 2021; Lécuyer 2021).
- Every function here must run inside ``Database.write()``: it first locks the dataset's budget row
  (``SELECT … FOR UPDATE`` on PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` already holds the database's single write
  lock), so check and debit happen in one transaction and concurrent requests cannot overspend.
- Entries are append-only; ``UNIQUE(job_id, kind)`` makes a second reservation, charge or release of a job
  impossible at the database level. The budget row caches the committed sum; releases recompute it from the
  entries.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from privfit.db.models import Budget, LedgerEntry
from privfit.privacy import OrderGrid, PrivacyCost, compose_deltas, curve_from_json, curve_to_json, get_grid

FORMULA_VERSION = "rdp-to-dp:balle2020+dp_accounting-guards/v1"
"""Identifies the RDP → (ε, δ) conversion behind every ε the ledger records."""


class LedgerError(Exception):
    """A ledger operation that does not apply (unknown dataset, a job without reservation, …)."""


class BudgetExceededError(LedgerError):
    """The fit's cost does not fit in what remains; carries the public numbers for the 409 response."""

    def __init__(self, *, requested_epsilon: float, committed_epsilon: float, total_epsilon: float,
                 epsilon_max: float, delta_max: float) -> None:  # fmt: skip
        self.requested_epsilon = requested_epsilon
        self.committed_epsilon = committed_epsilon
        self.total_epsilon = total_epsilon
        self.epsilon_max = epsilon_max
        self.delta_max = delta_max
        super().__init__(
            f"this fit costs ε = {requested_epsilon:.6g} on its own; with the {committed_epsilon:.6g} already "
            f"committed the dataset would reach ε = {total_epsilon:.6g} > its budget ε = {epsilon_max:.6g} "
            f"(at δ = {delta_max:.3g})"
        )


@dataclass(frozen=True)
class BudgetStatus:
    """What owners and analysts see: limits, charged / reserved / committed ε, the remaining ε, the curve."""

    epsilon_max: float
    delta_max: float
    grid_name: str
    orders: list[float]
    charged_epsilon: float
    reserved_epsilon: float
    committed_epsilon: float
    committed_optimal_order: float
    remaining_epsilon: float
    committed_rdp: list[float | None]
    committed_extra_delta: float
    committed_approx_delta: float
    entries: int
    formula_version: str = FORMULA_VERSION


@dataclass(frozen=True)
class Estimate:
    """A dry run: the fit's own ε, and the dataset's committed ε before and after it; nothing is written."""

    epsilon: float
    optimal_order: float
    at_grid_edge: bool
    committed_epsilon_before: float
    committed_epsilon_after: float
    remaining_epsilon_after: float
    admissible: bool


def _lock(session: Session, dataset_id: str) -> Budget:
    budget = session.execute(
        select(Budget).where(Budget.dataset_id == dataset_id).with_for_update()
    ).scalar_one_or_none()
    if budget is None:
        raise LedgerError(f"dataset {dataset_id} has no budget")
    return budget


def _committed(budget: Budget) -> PrivacyCost:
    grid = get_grid(budget.grid_name)
    return PrivacyCost(
        curve_from_json(budget.committed_rdp), grid, budget.committed_extra_delta, budget.committed_approx_delta
    )


def _cache(budget: Budget, committed: PrivacyCost) -> None:
    """Store the committed composition in the budget row."""
    budget.committed_rdp = curve_to_json(committed.rdp)
    budget.committed_extra_delta = committed.extra_delta
    budget.committed_approx_delta = committed.approx_delta


def _check_grid(cost: PrivacyCost, budget: Budget) -> None:
    if cost.grid.name != budget.grid_name:
        raise LedgerError(f"cost is on grid {cost.grid.name!r} but the dataset's budget is on {budget.grid_name!r}")


def create_budget(session: Session, dataset_id: str, epsilon_max: float, delta_max: float, grid: OrderGrid) -> Budget:
    """Create the budget row of a new dataset (in the same transaction that creates the dataset)."""
    budget = Budget(
        dataset_id=dataset_id, epsilon_max=float(epsilon_max), delta_max=float(delta_max), grid_name=grid.name,
        committed_rdp=[0.0] * len(grid), committed_extra_delta=0.0, committed_approx_delta=0.0, version=0,
    )  # fmt: skip
    session.add(budget)
    return budget


def _entry(
    session: Session, budget: Budget, job_id: str, kind: str, cost: PrivacyCost, description: str
) -> LedgerEntry:
    own = cost.epsilon(budget.delta_max)
    committed = _committed(budget).epsilon(budget.delta_max)
    budget.version += 1
    entry = LedgerEntry(
        dataset_id=budget.dataset_id, job_id=job_id, kind=kind, rdp=curve_to_json(cost.rdp),
        extra_delta=cost.extra_delta, approx_delta=cost.approx_delta, grid_name=budget.grid_name,
        formula_version=FORMULA_VERSION,
        epsilon=own.epsilon, optimal_order=own.optimal_order, committed_epsilon_after=committed.epsilon,
        budget_version=budget.version, description=description,
    )  # fmt: skip
    session.add(entry)
    session.flush()
    return entry


def reserve(session: Session, dataset_id: str, job_id: str, cost: PrivacyCost, description: str = "") -> LedgerEntry:
    """Admit ``cost`` for ``job_id`` or raise :class:`BudgetExceededError`; on admission write the reservation."""
    budget = _lock(session, dataset_id)
    _check_grid(cost, budget)
    before = _committed(budget)
    after = before + cost
    total = after.epsilon(budget.delta_max).epsilon
    if not total <= budget.epsilon_max:
        raise BudgetExceededError(
            requested_epsilon=cost.epsilon(budget.delta_max).epsilon,
            committed_epsilon=before.epsilon(budget.delta_max).epsilon,
            total_epsilon=total, epsilon_max=budget.epsilon_max, delta_max=budget.delta_max,
        )  # fmt: skip
    _cache(budget, after)
    return _entry(session, budget, job_id, "reservation", cost, description)


def _job_entries(session: Session, job_id: str) -> dict[str, LedgerEntry]:
    rows = session.execute(select(LedgerEntry).where(LedgerEntry.job_id == job_id)).scalars()
    return {row.kind: row for row in rows}


def _entry_cost(entry: LedgerEntry) -> PrivacyCost:
    return PrivacyCost(curve_from_json(entry.rdp), get_grid(entry.grid_name), entry.extra_delta, entry.approx_delta)


def charge(session: Session, dataset_id: str, job_id: str) -> LedgerEntry:
    """Turn the job's reservation into a charge (the job is starting; no row has been read yet).

    Idempotent: a job already charged returns its existing charge (``UNIQUE(job_id, kind)`` guarantees one).
    """
    budget = _lock(session, dataset_id)
    entries = _job_entries(session, job_id)
    if "charge" in entries:
        return entries["charge"]
    if "reservation" not in entries or "release" in entries:
        raise LedgerError(f"job {job_id} has no live reservation to charge")
    return _entry(session, budget, job_id, "charge", _entry_cost(entries["reservation"]), "job started")


def release(session: Session, dataset_id: str, job_id: str) -> LedgerEntry:
    """Void the reservation of a job cancelled while queued; a charged job keeps its charge."""
    budget = _lock(session, dataset_id)
    entries = _job_entries(session, job_id)
    if "release" in entries:
        return entries["release"]
    if "charge" in entries:
        raise LedgerError(f"job {job_id} has started: its charge is kept")
    if "reservation" not in entries:
        raise LedgerError(f"job {job_id} has no reservation to release")
    committed = committed_cost_from_entries(session, budget, exclude_job=job_id)
    _cache(budget, committed)
    return _entry(session, budget, job_id, "release", _entry_cost(entries["reservation"]), "cancelled while queued")


def committed_cost_from_entries(session: Session, budget: Budget, exclude_job: str | None = None) -> PrivacyCost:
    """The committed cost recomputed from the entries: reservations whose job has no release."""
    return _sum_entries(
        session, budget.dataset_id, get_grid(budget.grid_name), "reservation", ("release",), exclude_job
    )


def _sum_entries(
    session: Session,
    dataset_id: str,
    grid: OrderGrid,
    kind: str,
    exclude_kinds: tuple[str, ...],
    exclude_job: str | None = None,
) -> PrivacyCost:
    """Compose the entries of ``kind`` whose job has no entry of any of ``exclude_kinds``."""
    excluded = select(LedgerEntry.job_id).where(
        LedgerEntry.dataset_id == dataset_id, LedgerEntry.kind.in_(exclude_kinds)
    )
    query = select(LedgerEntry.rdp, LedgerEntry.extra_delta, LedgerEntry.approx_delta).where(
        LedgerEntry.dataset_id == dataset_id, LedgerEntry.kind == kind, LedgerEntry.job_id.not_in(excluded)
    )
    if exclude_job is not None:
        query = query.where(LedgerEntry.job_id != exclude_job)
    rows = session.execute(query).all()
    if not rows:
        return PrivacyCost.zero(grid)
    curves = np.asarray([curve_from_json(row.rdp) for row in rows], dtype=np.float64)
    extra = compose_deltas([row.extra_delta for row in rows])
    return PrivacyCost(curves.sum(axis=0), grid, extra, float(sum(row.approx_delta for row in rows)))


def status(session: Session, dataset_id: str) -> BudgetStatus:
    """The budget as owners and analysts see it (reads only)."""
    budget = session.get(Budget, dataset_id)
    if budget is None:
        raise LedgerError(f"dataset {dataset_id} has no budget")
    grid = get_grid(budget.grid_name)
    committed = _committed(budget).epsilon(budget.delta_max)
    charged = _sum_entries(session, dataset_id, grid, "charge", ()).epsilon(budget.delta_max).epsilon
    reserved = _sum_entries(session, dataset_id, grid, "reservation", ("charge", "release")).epsilon(budget.delta_max)
    return BudgetStatus(
        epsilon_max=budget.epsilon_max, delta_max=budget.delta_max, grid_name=budget.grid_name,
        orders=[float(a) for a in grid.orders], charged_epsilon=charged, reserved_epsilon=reserved.epsilon,
        committed_epsilon=committed.epsilon, committed_optimal_order=committed.optimal_order,
        remaining_epsilon=max(0.0, budget.epsilon_max - committed.epsilon), committed_rdp=list(budget.committed_rdp),
        committed_extra_delta=budget.committed_extra_delta, committed_approx_delta=budget.committed_approx_delta,
        entries=budget.version,
    )  # fmt: skip


def estimate(session: Session, dataset_id: str, cost: PrivacyCost) -> Estimate:
    """What admitting ``cost`` would do, without writing anything."""
    budget = session.get(Budget, dataset_id)
    if budget is None:
        raise LedgerError(f"dataset {dataset_id} has no budget")
    _check_grid(cost, budget)
    own = cost.epsilon(budget.delta_max)
    before = _committed(budget)
    after = (before + cost).epsilon(budget.delta_max).epsilon
    return Estimate(
        epsilon=own.epsilon, optimal_order=own.optimal_order, at_grid_edge=own.at_grid_edge,
        committed_epsilon_before=before.epsilon(budget.delta_max).epsilon, committed_epsilon_after=after,
        remaining_epsilon_after=max(0.0, budget.epsilon_max - after) if math.isfinite(after) else 0.0,
        admissible=after <= budget.epsilon_max,
    )  # fmt: skip
