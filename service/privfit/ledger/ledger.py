"""Admission, reservation, charge, release and refund against a dataset's privacy budget, atomically.

Semantics (DESIGN §2):

- A dataset's *committed* cost is the composition (sum of RDP curves, δ parts as 1 − Π(1 − δ_i), approximate-RDP
  slacks, pure-ε bounds and Gaussian-DP μ² summed; :mod:`privfit.privacy.cost`) of every reservation that has not
  been released — whether already charged or still queued.
- **Admission is the dataset's privacy filter** (:mod:`privfit.privacy.filter`), fixed when the dataset is
  created: a few pinned RDP orders α_j each certified at its own δ_j (α* where the budget-exhausting Gaussian
  converts best, and about 10·α*), the order-∞ (pure ε) certificate, a Gaussian-DP certificate with its own δ_G
  (filters created from rule v3 on; δ_G = 0, none, for older ones) and a pot δ_A for δ-only parts,
  Σ δ_j + δ_G + δ_A = δ_max, split publicly δ_A = δ_D + δ_S. A fit is admitted iff, with it added, (a1) D ≤ δ_D
  and (a2) k(1 + e^{ε_max})·A ≤ δ_S (D the composed δ parts, A the summed approximate-RDP slacks, k the number of
  pinned orders; holding at every admission, they give the proof's condition on the worst paths, sup D +
  k(1 + e^{ε_max}) sup A ≤ δ_A) and (b) S(α_j) ≤ ε_max − c_{α_j}(δ_j) for some j, or E_∞ ≤ ε_max, or M ≤ μ_G²
  (S the summed RDP, E_∞ the summed pure-ε bounds, M the summed GDP μ², c_α(δ) the conversion offset, μ_G the μ
  the GDP certificate allows).

  **Theorem** (proof in :mod:`privfit.privacy.filter` and ``docs/privacy.md``: Kairouz–Oh–Viswanath decomposition
  of the δ parts, the Feldman–Zrnic supermartingale at each pinned order, the Balle et al. pointwise conversion,
  fully adaptive GDP composition, a union over the certificates). If every admission obeys (a1), (a2) and (b),
  the transcript of the whole interaction — every fit chosen after seeing the results of the earlier ones,
  concurrent fits included, fits released before reading a row not counted — is (ε_max, δ_max)-DP.

  The ε shown as "committed" (in the budget, the ledger entries, the estimate and the 409) is the filter's
  measure: ε_max × the share of the budget the committed fits use (min over the certificates); admission is
  exactly "share with the fit ≤ 1". A fit's own ε (its curve converted at δ_max) is the statement for that fit
  alone.
- Every function here must run inside ``Database.write()``: it first locks the dataset's budget row
  (``SELECT … FOR UPDATE`` on PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` already holds the database's single write
  lock), so check and debit happen in one transaction and concurrent requests cannot overspend.
- An evaluation of a fit (:func:`charge_evaluation`) is admitted by the same filter and written as a reservation
  and a charge in its admission transaction (it reads rows right after); it is never released.
- Entries are append-only; ``UNIQUE(job_id, kind)`` makes a second reservation, charge or release of a job
  impossible at the database level. A release voids a reservation (cancelled while queued) or, as a *refund*,
  the charge of a job that never read a row (the job state machine checks that in the same transaction). The
  budget row caches the committed sum; releases recompute it from the entries.
- **Privacy domains.** Several datasets about the same people (a cleaned re-upload, a second table of the same
  population) may share one budget: a dataset registered into another's domain (``Dataset.budget_dataset_id``)
  has no budget row of its own, and every function here, given its id, works on the domain's budget
  (:func:`domain_of`): one filter, one committed cost, one ledger (entries carry the domain's id; a fit's entries
  name its job, whose dataset is the member it read). Every release about those people then passes one filter, so
  the theorem above holds for the union of their data — a person in two tables is protected by (ε_max, δ_max) in
  all, not twice. Allocations are per domain too.
- A budget whose ``filter_note`` is set admits nothing (a dataset moved from the previous admission rule whose
  committed fits already exceed the filter; the note says why).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
from sqlalchemy import ColumnElement, ScalarSelect, func, insert, select
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.orm import Session

from privfit.db.models import Allocation, Budget, Dataset, Evaluation, FilterColumns, Job, LedgerEntry, utcnow
from privfit.ledger.chain import entry_content, entry_hash, genesis_hash
from privfit.privacy import (
    FILTER_VERSION,
    Conversion,
    DeltaAllowance,
    FilterReading,
    OrderGrid,
    PrivacyCost,
    PrivacyFilter,
    compose_deltas,
    curve_from_json,
    curve_to_json,
    get_grid,
    pure_epsilon_from_json,
    pure_epsilon_to_json,
    unbounded_from_json,
    unbounded_to_json,
)

CONVERSION_VERSION = "balle2020|gdp;"
"""The conversion behind a fit's own ε: the RDP conversion of Balle et al. 2020 (with dp_accounting's guards) or the
exact Gaussian curve of a GDP bound, whichever is smaller (:meth:`privfit.privacy.PrivacyCost.epsilon`). Entries
written before the GDP bound say ``balle2020+guards;``."""


def formula_version(filter_version: str) -> str:
    """Identifies the conversion behind a fit's own ε and the filter (its rule ``filter_version``) behind every
    committed ε the ledger records for a budget."""
    return CONVERSION_VERSION + filter_version


FORMULA_VERSION = formula_version(FILTER_VERSION)
"""The formula version of a budget created now (rule v3)."""


class LedgerError(Exception):
    """A ledger operation that does not apply (unknown dataset, a job without reservation, …)."""


class BudgetExceededError(LedgerError):
    """The fit does not fit in the dataset's privacy filter; carries the public numbers for the 409 response.

    ``reason`` is ``"epsilon"`` (no certificate would hold), ``"delta"`` (the δ parts would overflow their part
    δ_D = approximate_delta − slack_delta of the pot, or the weighted slacks their part δ_S = slack_delta) or
    ``"closed"`` (the budget admits nothing more; ``note`` says why).

    ``scope`` is ``"dataset"`` when the dataset's filter refused, ``"allocation"`` when the caller's allocation's
    filter did (:mod:`privfit.ledger.allocations`); the numbers are then the allocation's, the caller's own.
    """

    def __init__(self, *, requested_epsilon: float, committed_epsilon: float, total_epsilon: float,
                 epsilon_max: float, delta_max: float, reason: str, delta_used_after: float,
                 approximate_delta: float, slack_delta: float, delta_parts_after: float,
                 slack_used_after: float, note: str | None = None, scope: str = "dataset") -> None:  # fmt: skip
        self.scope = scope
        self.requested_epsilon = requested_epsilon
        self.committed_epsilon = committed_epsilon
        self.total_epsilon = total_epsilon
        self.epsilon_max = epsilon_max
        self.delta_max = delta_max
        self.reason = reason
        self.delta_used_after = delta_used_after
        self.approximate_delta = approximate_delta
        self.slack_delta = slack_delta
        self.delta_parts_after = delta_parts_after
        self.slack_used_after = slack_used_after
        self.note = note
        self.max_admissible_epsilon: float | None = None
        super().__init__(self._message())

    def state_headroom(self, max_admissible_epsilon: float) -> None:
        """Add the largest target ε at which the filter would admit the same fit now (:mod:`privfit.ledger.headroom`,
        found by the API for a fit refusal) to the message and the problem document."""
        self.max_admissible_epsilon = max_admissible_epsilon
        self.args = (self._message(),)

    def _message(self) -> str:
        return self._refusal_message() + self._headroom_message()

    def _headroom_message(self) -> str:
        if self.max_admissible_epsilon is None:
            return ""
        if self.max_admissible_epsilon <= 0.0:
            return "; no target ε of this solver, model and parameters is admissible now"
        return (f"; the largest target ε this solver, model and parameters could have now is "
                f"{self.max_admissible_epsilon:.4g}")  # fmt: skip

    def _refusal_message(self) -> str:
        own = f"this fit costs ε = {self.requested_epsilon:.6g} on its own (at δ = {self.delta_max:.3g})"
        if self.scope == "allocation":
            return self._allocation_message(own)
        if self.reason == "closed":
            return f"this dataset admits no more fits: {self.note}"
        if self.reason == "delta":
            parts_pot = self.approximate_delta - self.slack_delta
            if self.delta_parts_after > parts_pot:
                overflow = (f"the δ parts of (ε, δ) charges to {self.delta_parts_after:.3g} > {parts_pot:.3g} (their "
                            "part of the pot: approximate_delta − slack_delta)")  # fmt: skip
            else:
                overflow = (f"the weighted approximate-RDP slacks to {self.slack_used_after:.3g} > "
                            f"{self.slack_delta:.3g} (their part of the pot: slack_delta)")  # fmt: skip
            return (
                f"{own}, but its δ-only part would bring {overflow}; the budget's pot for δ parts is "
                f"approximate_delta = {self.approximate_delta:.3g}, split when the dataset was created, and the rest "
                f"of δ = {self.delta_max:.3g} certifies the RDP curves"
            )
        return (
            f"{own}; the dataset's privacy filter measures the committed fits at ε = {self.committed_epsilon:.6g} "
            f"and would measure them with this fit at ε = {self.total_epsilon:.6g} > its budget "
            f"ε = {self.epsilon_max:.6g} (at δ = {self.delta_max:.3g}, valid for adaptively chosen fits)"
        )

    def _allocation_message(self, own: str) -> str:
        if self.reason == "closed":
            return f"your allocation on this dataset admits no more fits: {self.note}"
        if self.reason == "delta":
            return (f"{own}, but its δ-only part would overflow the pot of your allocation on this dataset "
                    f"(approximate_delta = {self.approximate_delta:.3g} of its δ = {self.delta_max:.3g})")  # fmt: skip
        return (
            f"{own}; your allocation's privacy filter measures your committed fits on this dataset at ε = "
            f"{self.committed_epsilon:.6g} and would measure them with this fit at ε = {self.total_epsilon:.6g} > "
            f"your allocation ε = {self.epsilon_max:.6g} (at δ = {self.delta_max:.3g}); the dataset's owner sets "
            "allocations"
        )

    def problem_fields(self) -> dict[str, Any]:
        """The public members of the 409 problem document (``max_admissible_epsilon`` once stated)."""
        fields = {
            "scope": self.scope,
            "requested_epsilon": self.requested_epsilon,
            "committed_epsilon": self.committed_epsilon,
            "epsilon_max": self.epsilon_max,
            "delta_max": self.delta_max,
            "remaining_epsilon": max(0.0, self.epsilon_max - self.committed_epsilon),
            "reason": self.reason,
            "delta_used_after": self.delta_used_after,
            "approximate_delta": self.approximate_delta,
            "slack_delta": self.slack_delta,
            "note": self.note,
        }
        if self.max_admissible_epsilon is not None:
            fields["max_admissible_epsilon"] = self.max_admissible_epsilon
        return fields


MEASURE_NOTE = (
    "committed ε = ε_max × the share of the budget the committed fits use by the dataset's privacy filter (the "
    "smallest of its pinned-order RDP share, its pure-ε share and its Gaussian-DP share); a fit is admitted iff the "
    "share with it stays ≤ 1. It is the filter's measure, not an (ε, δ) statement of its own: the budget guarantees "
    "(ε_max, δ_max)-DP for any sequence of admitted fits, chosen adaptively or concurrently"
)


@dataclass(frozen=True)
class FilterView:
    """The dataset's filter as shown in the budget view (all public)."""

    rule: str
    orders: list[float]
    order_deltas: list[float]
    order_budgets: list[float]
    approximate_delta: float
    slack_delta: float
    slack_weight: float
    gdp_delta: float
    gdp_mu: float

    @classmethod
    def of(cls, privacy_filter: PrivacyFilter) -> FilterView:
        return cls(
            rule=privacy_filter.version, orders=list(privacy_filter.orders),
            order_deltas=list(privacy_filter.order_deltas), order_budgets=list(privacy_filter.order_budgets),
            approximate_delta=privacy_filter.approximate_delta, slack_delta=privacy_filter.slack_delta,
            slack_weight=privacy_filter.slack_weight, gdp_delta=privacy_filter.gdp_delta,
            gdp_mu=privacy_filter.gdp_mu,
        )  # fmt: skip


@dataclass(frozen=True)
class BudgetStatus:
    """What owners and analysts see: limits, the filter, charged / reserved / committed ε (the filter's measure),
    the remaining ε, the committed curve and δ parts."""

    epsilon_max: float
    delta_max: float
    grid_name: str
    orders: list[float]
    filter: FilterView
    charged_epsilon: float
    reserved_epsilon: float
    committed_epsilon: float
    committed_share: float
    committed_certificate: str | None
    committed_certifying_order: float | None
    committed_order_share: float
    committed_pure_share: float
    committed_gdp_share: float
    remaining_epsilon: float
    committed_rdp: list[float | None]
    committed_extra_delta: float
    committed_approx_delta: float
    committed_pure_epsilon: float
    committed_gdp_mu_squared: float
    committed_delta_used: float
    entries: int
    closed_reason: str | None = None
    measure: str = MEASURE_NOTE
    formula_version: str = FORMULA_VERSION


@dataclass(frozen=True)
class AllocationEstimate:
    """What a fit would do to the caller's allocation (:mod:`privfit.ledger.allocations`): its filter's committed ε
    (the caller's fits only) before and after it, and whether that filter admits it."""

    epsilon_max: float
    delta_max: float
    committed_epsilon_before: float
    committed_epsilon_after: float
    remaining_epsilon_after: float
    admissible: bool


@dataclass(frozen=True)
class Estimate:
    """A dry run: the fit's own ε, and the filter's committed ε before and after it; nothing is written. With an
    allocation, ``admissible`` and ``refusal_reason`` are both filters' verdict (``"allocation"`` when only the
    allocation refuses) and ``allocation`` has the allocation's numbers."""

    epsilon: float
    optimal_order: float
    at_grid_edge: bool
    committed_epsilon_before: float
    committed_epsilon_after: float
    remaining_epsilon_after: float
    admissible: bool
    refusal_reason: str | None
    delta_used_after: float
    certificate_after: str | None
    measure: str = field(default=MEASURE_NOTE)
    allocation: AllocationEstimate | None = None


@dataclass(frozen=True)
class Gates:
    """The filters a caller's fit must pass, as read: the dataset's budget and the caller's allocation on it (None
    when it has none)."""

    budget: Budget
    allocation: Allocation | None = None

    def rows(self) -> list[FilterColumns]:
        return [self.budget] if self.allocation is None else [self.budget, self.allocation]


def _lock(session: Session, dataset_id: str) -> Budget:
    """Lock the budget row and read it as the lock found it: ``populate_existing`` overwrites a copy the session
    already holds (e.g. read before a savepoint that was rolled back, and with it its lock, while another
    transaction committed an admission), so a check never runs against a stale committed cost."""
    budget = session.execute(
        select(Budget)
        .where(Budget.dataset_id == domain_of(dataset_id))
        .with_for_update()
        .execution_options(populate_existing=True)
    ).scalar_one_or_none()
    if budget is None:
        raise LedgerError(f"dataset {dataset_id} has no budget")
    return budget


def domain_of(dataset_id: str) -> ScalarSelect[str]:
    """The id of the budget ``dataset_id`` spends, as a subquery: its privacy domain's (module docstring, "Privacy
    domains"), which is its own id unless it was registered into another dataset's domain."""
    return (
        select(func.coalesce(Dataset.budget_dataset_id, Dataset.id)).where(Dataset.id == dataset_id).scalar_subquery()
    )


def _get(session: Session, dataset_id: str) -> Budget:
    budget = session.execute(select(Budget).where(Budget.dataset_id == domain_of(dataset_id))).scalar_one_or_none()
    if budget is None:
        raise LedgerError(f"dataset {dataset_id} has no budget")
    return budget


def budget_filter(budget: FilterColumns) -> PrivacyFilter:
    """The privacy filter stored with ``budget`` — a dataset's budget or an analyst's allocation (built once per
    distinct filter: it is immutable and public)."""
    return _filter(
        budget.epsilon_max, budget.delta_max, budget.grid_name, tuple(budget.filter_orders),
        tuple(budget.filter_order_deltas), budget.filter_approximate_delta, budget.filter_slack_delta,
        budget.filter_gdp_delta, budget.filter_version,
    )  # fmt: skip


@lru_cache(maxsize=256)
def _filter(epsilon_max: float, delta_max: float, grid_name: str, orders: tuple[float, ...],
            order_deltas: tuple[float, ...], approximate_delta: float, slack_delta: float, gdp_delta: float,
            version: str) -> PrivacyFilter:  # fmt: skip
    return PrivacyFilter(
        epsilon_max=epsilon_max, delta_max=delta_max, grid=get_grid(grid_name), orders=orders,
        order_deltas=order_deltas, approximate_delta=approximate_delta, slack_delta=slack_delta,
        gdp_delta=gdp_delta, version=version,
    )  # fmt: skip


def _committed(budget: FilterColumns) -> PrivacyCost:
    grid = get_grid(budget.grid_name)
    return PrivacyCost(
        curve_from_json(budget.committed_rdp), grid, budget.committed_extra_delta, budget.committed_approx_delta,
        pure_epsilon_from_json(budget.committed_pure_epsilon), unbounded_from_json(budget.committed_gdp_mu_squared),
    )  # fmt: skip


def _cache(budget: FilterColumns, committed: PrivacyCost) -> None:
    """Store the committed composition in the budget (or allocation) row."""
    budget.committed_rdp = curve_to_json(committed.rdp)
    budget.committed_extra_delta = committed.extra_delta
    budget.committed_approx_delta = committed.approx_delta
    budget.committed_pure_epsilon = pure_epsilon_to_json(committed.pure_epsilon)
    budget.committed_gdp_mu_squared = unbounded_to_json(committed.gdp_mu_squared)


def _check_grid(cost: PrivacyCost, budget: FilterColumns) -> None:
    if cost.grid.name != budget.grid_name:
        raise LedgerError(f"cost is on grid {cost.grid.name!r} but the dataset's budget is on {budget.grid_name!r}")


def create_budget(
    session: Session,
    dataset_id: str,
    epsilon_max: float,
    delta_max: float,
    grid: OrderGrid,
    approximate_delta: float | None = None,
    slack_delta: float | None = None,
) -> Budget:
    """Create the budget row of a new dataset, with its privacy filter (in the transaction that creates the
    dataset). ``approximate_delta`` is the pot for δ-only parts (default δ_max/10), ``slack_delta`` its part for
    approximate-RDP slacks (default half of it)."""
    privacy_filter = PrivacyFilter.for_budget(epsilon_max, delta_max, grid, approximate_delta, slack_delta)
    budget = Budget(dataset_id=dataset_id, version=0, chain_head=genesis_hash(dataset_id),
                    **filter_columns(privacy_filter, PrivacyCost.zero(grid)))  # fmt: skip
    session.add(budget)
    return budget


def filter_columns(privacy_filter: PrivacyFilter, committed: PrivacyCost, note: str | None = None) -> dict[str, Any]:
    """The :class:`~privfit.db.models.FilterColumns` of a new budget or allocation: ``privacy_filter``'s limits and
    parameters, ``committed`` as its cached composition, and its closing ``note`` (None: open)."""
    return {
        "epsilon_max": float(privacy_filter.epsilon_max), "delta_max": float(privacy_filter.delta_max),
        "grid_name": privacy_filter.grid.name, "committed_rdp": curve_to_json(committed.rdp),
        "committed_extra_delta": committed.extra_delta, "committed_approx_delta": committed.approx_delta,
        "committed_pure_epsilon": pure_epsilon_to_json(committed.pure_epsilon),
        "committed_gdp_mu_squared": unbounded_to_json(committed.gdp_mu_squared),
        "filter_version": privacy_filter.version, "filter_orders": list(privacy_filter.orders),
        "filter_order_deltas": list(privacy_filter.order_deltas),
        "filter_approximate_delta": privacy_filter.approximate_delta,
        "filter_slack_delta": privacy_filter.slack_delta, "filter_gdp_delta": privacy_filter.gdp_delta,
        "filter_note": note,
    }  # fmt: skip


def _entry(
    session: Session,
    budget: Budget,
    job_id: str | None,
    kind: str,
    cost: PrivacyCost,
    description: str,
    *,
    evaluation_id: str | None = None,
    preprocessing_dataset_id: str | None = None,
    flush: bool = True,
    own: Conversion | None = None,
    committed_after: FilterReading | None = None,
) -> LedgerEntry:
    """Append one entry of ``job_id`` or, with ``job_id=None``, of ``evaluation_id`` or of the dataset's
    preprocessing (``preprocessing_dataset_id``) (``flush=False``: the caller adds and flushes it), linked to the
    budget's hash chain (:mod:`privfit.ledger.chain`; the budget row is locked, so entries chain in order).
    ``own`` (``cost.epsilon(budget.delta_max)``) and ``committed_after`` (the filter's reading of the budget's
    committed cost as it now stands) may be passed by a caller that has just computed them (:func:`reserve_many`);
    otherwise they are computed here — the same numbers."""
    own = cost.epsilon(budget.delta_max) if own is None else own
    committed = budget_filter(budget).measure(_committed(budget)) if committed_after is None else committed_after
    budget.version += 1
    entry = LedgerEntry(
        dataset_id=budget.dataset_id, job_id=job_id, evaluation_id=evaluation_id,
        preprocessing_dataset_id=preprocessing_dataset_id, kind=kind,
        rdp=curve_to_json(cost.rdp), extra_delta=cost.extra_delta, approx_delta=cost.approx_delta,
        pure_epsilon=pure_epsilon_to_json(cost.pure_epsilon), gdp_mu_squared=unbounded_to_json(cost.gdp_mu_squared),
        grid_name=budget.grid_name,
        formula_version=formula_version(budget.filter_version), epsilon=own.epsilon, optimal_order=own.optimal_order,
        committed_epsilon_after=committed.epsilon, budget_version=budget.version, description=description,
        created_at=utcnow(), previous_hash=budget.chain_head,
    )  # fmt: skip
    entry.entry_hash = budget.chain_head = entry_hash(budget.chain_head, entry_content(entry))
    if flush:
        session.add(entry)
        session.flush()
    return entry


def _refusal(
    budget: FilterColumns, cost: PrivacyCost, before: FilterReading, after: FilterReading
) -> BudgetExceededError:
    reason = "closed" if budget.filter_note else ("delta" if not after.delta_fits else "epsilon")
    return BudgetExceededError(
        requested_epsilon=cost.epsilon(budget.delta_max).epsilon, committed_epsilon=before.epsilon,
        total_epsilon=after.epsilon, epsilon_max=budget.epsilon_max, delta_max=budget.delta_max, reason=reason,
        delta_used_after=after.delta_used, approximate_delta=budget.filter_approximate_delta,
        slack_delta=budget.filter_slack_delta, delta_parts_after=after.delta_parts, slack_used_after=after.slack_used,
        note=budget.filter_note, scope="allocation" if isinstance(budget, Allocation) else "dataset",
    )  # fmt: skip


def allocation_of(session: Session, dataset_id: str, spender: str | None) -> Allocation | None:
    """The allocation of the key ``spender`` on the dataset (None for a key without one, or no key), locked like
    the budget row and read as the lock found it (:func:`_lock`). Every caller holds the budget lock already, so
    admissions of one analyst are serial anyway; the row lock keeps that true of any future caller."""
    if spender is None:
        return None
    return session.execute(
        select(Allocation)
        .where(Allocation.dataset_id == domain_of(dataset_id), Allocation.api_key_id == spender)
        .with_for_update()
        .execution_options(populate_existing=True)
    ).scalar_one_or_none()


_UNREAD: Any = object()
"""The default of :func:`_admit`'s ``allocation``: not read yet (None means "read: the key has none")."""


def _admit(session: Session, dataset_id: str, cost: PrivacyCost, spender: str | None,
           locked: Budget | None = None,
           allocation: Allocation | None = _UNREAD) -> tuple[Budget, FilterReading]:  # fmt: skip
    """Lock the budget (unless the caller passes the row it ``locked``), admit ``cost`` by the dataset's filter and,
    if the key ``spender`` has an allocation on the dataset, by the allocation's filter too (or raise
    :class:`BudgetExceededError`, having changed nothing), and add it to both cached committed costs; the caller
    writes the reservation in the same transaction. ``allocation`` is the key's allocation row when the caller
    already locked and read it in this transaction (:func:`allocation_of`; None: it has none). Returns the locked
    budget row and the dataset filter's reading of its committed cost with the fit (what the reservation records
    as ``committed_epsilon_after``)."""
    budget = _lock(session, dataset_id) if locked is None else locked
    if allocation is _UNREAD:
        allocation = allocation_of(session, dataset_id, spender)
    gates = Gates(budget, allocation).rows()
    admitted: list[PrivacyCost] = []
    readings: list[FilterReading] = []
    for gate in gates:
        _check_grid(cost, gate)
        privacy_filter = budget_filter(gate)
        before = _committed(gate)
        after = before + cost
        reading = privacy_filter.measure(after)
        if gate.filter_note or not reading.share <= 1.0:
            raise _refusal(gate, cost, privacy_filter.measure(before), reading)
        admitted.append(after)
        readings.append(reading)
    for gate, after in zip(gates, admitted, strict=True):
        _cache(gate, after)
    return budget, readings[0]


def reserve(session: Session, dataset_id: str, job_id: str, cost: PrivacyCost, description: str = "", *,
            spender: str | None = None) -> LedgerEntry:  # fmt: skip
    """Admit ``cost`` for ``job_id`` of the key ``spender`` by the dataset's filter and the key's allocation's, if
    it has one (:func:`_admit`), or raise :class:`BudgetExceededError`; on admission write the reservation. (The
    API admits fits through :func:`reserve_many`, which names every request's key.)"""
    budget, _ = _admit(session, dataset_id, cost, spender)
    return _entry(session, budget, job_id, "reservation", cost, description)


def reserve_many(
    session: Session,
    dataset_id: str,
    requests: Sequence[tuple[str, PrivacyCost, str, str | None]],
    write_jobs: Callable[[list[str]], None],
) -> list[BudgetExceededError | None]:
    """:func:`reserve` for each ``(job_id, cost, description, spender)`` in order, in this one transaction, with the
    writes grouped: the budget row is locked once, each request is admitted (or refused) by the filter against the
    committed cost with every request admitted before it included — the same checks, numbers and entries as
    calling :func:`reserve` for each in turn —, then ``write_jobs(admitted job ids)`` writes the jobs (their
    reservations reference them) and the reservations are inserted together (one bulk INSERT). Returns, per request,
    None (admitted) or its :class:`BudgetExceededError`."""
    budget = _lock(session, dataset_id)
    # Each key's allocation is locked and read once, before anything of the batch is written (a read per request
    # would autoflush the budget row's UPDATE each time); the admissions below keep these rows up to date in
    # memory (:func:`_cache`), exactly as a new read in this transaction would find them.
    allocations = {spender: allocation_of(session, dataset_id, spender) for spender in sorted(
        {spender for *_, spender in requests if spender is not None})}  # fmt: skip
    own: dict[int, Conversion] = {}  # a fit's own ε by its cost object (requests of one plan share it)
    outcomes: list[BudgetExceededError | None] = []
    entries: list[LedgerEntry] = []
    for job_id, cost, description, spender in requests:
        try:
            _, reading = _admit(session, dataset_id, cost, spender, locked=budget,
                             allocation=None if spender is None else allocations[spender])  # fmt: skip
        except BudgetExceededError as refused:
            outcomes.append(refused)
            continue
        outcomes.append(None)
        converted = own.get(id(cost))
        if converted is None:
            converted = own[id(cost)] = cost.epsilon(budget.delta_max)
        entries.append(_entry(session, budget, job_id, "reservation", cost, description, flush=False,
                              own=converted, committed_after=reading))  # fmt: skip
    if entries:
        write_jobs([entry.job_id for entry in entries if entry.job_id is not None])
        # one bulk INSERT (executemany) of the reservations, not the unit of work's per-object bookkeeping: the rows
        # are the entries' columns as built (and hashed) above; nothing reads the objects back
        session.execute(insert(LedgerEntry), [_entry_row(entry) for entry in entries])
    return outcomes


def _entry_row(entry: LedgerEntry) -> dict[str, Any]:
    """The column values of a new (not yet written) ledger entry, for a bulk INSERT (its id is the database's)."""
    return {key: getattr(entry, key) for key in _ENTRY_COLUMNS}


_ENTRY_COLUMNS = tuple(attr.key for attr in sa_inspect(LedgerEntry).column_attrs if attr.key != "id")


def charge_evaluation(
    session: Session, dataset_id: str, evaluation_id: str, cost: PrivacyCost, description: str, *, spender: str | None
) -> LedgerEntry:
    """Admit an evaluation's ``cost`` of the key ``spender`` exactly like a fit's (same filters, same lock) or raise
    :class:`BudgetExceededError`, and on admission write its reservation and its charge at once: an evaluation
    reads its rows right after this transaction commits, so there is no queued phase to release. The pair keeps
    every sum of the ledger valid (committed = reservations not released; charged = charges not released).
    ``UNIQUE(evaluation_id, kind)`` makes a second charge of the evaluation impossible."""
    return _admit_and_charge(session, dataset_id, cost, description, "evaluation started", spender=spender,
                             evaluation_id=evaluation_id)  # fmt: skip


def _admit_and_charge(
    session: Session,
    dataset_id: str,
    cost: PrivacyCost,
    reserved: str,
    charged: str,
    *,
    spender: str | None,
    evaluation_id: str | None = None,
    preprocessing_dataset_id: str | None = None,
) -> LedgerEntry:
    """Admit ``cost`` by the dataset's filter and write the reservation (``reserved`` as its description) and the
    charge (``charged``) of a subject that reads rows right after this transaction: an evaluation or a dataset's
    preprocessing."""
    budget, _ = _admit(session, dataset_id, cost, spender)
    for kind, description in (("reservation", reserved), ("charge", charged)):
        entry = _entry(session, budget, None, kind, cost, description, evaluation_id=evaluation_id,
                       preprocessing_dataset_id=preprocessing_dataset_id)  # fmt: skip
    return entry


def charge_preprocessing(session: Session, dataset_id: str, cost: PrivacyCost, description: str) -> LedgerEntry:
    """Admit the private preprocessing of a dataset (:mod:`privfit.datasets.preprocessing`) by its filter, like a
    fit, and write its reservation and charge at once, in the transaction that registers the dataset: its
    statistics are released (and its rows read) only once that transaction commits. ``UNIQUE
    (preprocessing_dataset_id, kind)`` makes a second charge impossible; it is never released."""
    return _admit_and_charge(session, dataset_id, cost, description, description, spender=None,
                             preprocessing_dataset_id=dataset_id)  # fmt: skip


def _job_entries(session: Session, job_id: str) -> dict[str, LedgerEntry]:
    rows = session.execute(select(LedgerEntry).where(LedgerEntry.job_id == job_id)).scalars()
    return {row.kind: row for row in rows}


def _entry_cost(entry: LedgerEntry) -> PrivacyCost:
    return PrivacyCost(
        curve_from_json(entry.rdp), get_grid(entry.grid_name), entry.extra_delta, entry.approx_delta,
        pure_epsilon_from_json(entry.pure_epsilon), unbounded_from_json(entry.gdp_mu_squared),
    )  # fmt: skip


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


def release(session: Session, dataset_id: str, job_id: str, description: str = "cancelled while queued") -> LedgerEntry:
    """Void the reservation of a job that was never charged (cancelled while queued); a charged job keeps its
    charge here (see :func:`refund`)."""
    budget = _lock(session, dataset_id)
    entries = _job_entries(session, job_id)
    if "release" in entries:
        return entries["release"]
    if "charge" in entries:
        raise LedgerError(f"job {job_id} has started: its charge is kept")
    return _void(session, budget, job_id, entries, description)


def refund(session: Session, dataset_id: str, job_id: str, description: str) -> LedgerEntry:
    """Release the charge (or reservation) of a job that NEVER READ A ROW: it released nothing that depends on
    the data, so its cost is returned (DESIGN §2). The caller proves "never read" in the same transaction (the
    job's ``data_read_at`` is NULL under its row lock: :mod:`privfit.jobs.states`). Idempotent."""
    budget = _lock(session, dataset_id)
    entries = _job_entries(session, job_id)
    if "release" in entries:
        return entries["release"]
    return _void(session, budget, job_id, entries, description)


def _void(
    session: Session, budget: Budget, job_id: str, entries: dict[str, LedgerEntry], description: str
) -> LedgerEntry:
    if "reservation" not in entries:
        raise LedgerError(f"job {job_id} has no reservation to release")
    committed = committed_cost_from_entries(session, budget, exclude_job=job_id)
    _cache(budget, committed)
    spender = session.scalar(select(Job.api_key_id).where(Job.id == job_id))
    allocation = allocation_of(session, budget.dataset_id, spender)
    if allocation is not None:
        _cache(allocation, committed_cost_from_entries(session, budget, exclude_job=job_id, spender=spender))
    return _entry(session, budget, job_id, "release", _entry_cost(entries["reservation"]), description)


def committed_cost_from_entries(session: Session, budget: Budget, exclude_job: str | None = None,
                                spender: str | None = None) -> PrivacyCost:  # fmt: skip
    """The committed cost recomputed from the entries: reservations whose job has no release (with ``spender``,
    only those of the fits and evaluations of that key: what its allocation counts)."""
    return _sum_entries(
        session, budget.dataset_id, get_grid(budget.grid_name), "reservation", ("release",), exclude_job, spender
    )


def spent_by(spender: str) -> ColumnElement[bool]:
    """The ledger entries that the key ``spender`` caused: those of its fits and its evaluations (what its allocation
    counts, and what a granted analyst's own ledger view shows, each within one budget's entries)."""
    fits = select(Job.id).where(Job.api_key_id == spender)
    evaluations = select(Evaluation.id).where(Evaluation.api_key_id == spender)
    return LedgerEntry.job_id.in_(fits) | LedgerEntry.evaluation_id.in_(evaluations)


def _sum_entries(
    session: Session,
    dataset_id: str,
    grid: OrderGrid,
    kind: str,
    exclude_kinds: Sequence[str],
    exclude_job: str | None = None,
    spender: str | None = None,
) -> PrivacyCost:
    """Compose the entries of ``kind`` whose job (or evaluation) has no entry of any of ``exclude_kinds`` (with
    ``spender``, only the entries of that key's fits and evaluations).

    An entry's subject is its job, its evaluation or the dataset whose preprocessing it records (exactly one is set;
    all are uuid4s, so they never collide). The preprocessing's subject must not be NULL: ``NULL NOT IN (…)`` is not
    true in SQL, so an entry without a subject would silently drop out of every sum — and out of the committed
    cost that a release recomputes."""
    subject = func.coalesce(LedgerEntry.job_id, LedgerEntry.evaluation_id, LedgerEntry.preprocessing_dataset_id)
    excluded = select(subject).where(LedgerEntry.dataset_id == dataset_id, LedgerEntry.kind.in_(tuple(exclude_kinds)))
    query = select(
        LedgerEntry.rdp, LedgerEntry.extra_delta, LedgerEntry.approx_delta, LedgerEntry.pure_epsilon,
        LedgerEntry.gdp_mu_squared,
    ).where(LedgerEntry.dataset_id == dataset_id, LedgerEntry.kind == kind, subject.not_in(excluded))  # fmt: skip
    if exclude_job is not None:
        query = query.where(subject != exclude_job)
    if spender is not None:
        query = query.where(spent_by(spender))
    rows = session.execute(query).all()
    if not rows:
        return PrivacyCost.zero(grid)
    curves = np.asarray([curve_from_json(row.rdp) for row in rows], dtype=np.float64)
    extra = compose_deltas([row.extra_delta for row in rows])
    pure = math.fsum(pure_epsilon_from_json(row.pure_epsilon) for row in rows)
    gdp = math.fsum(unbounded_from_json(row.gdp_mu_squared) for row in rows)
    return PrivacyCost(curves.sum(axis=0), grid, extra, float(sum(row.approx_delta for row in rows)), pure, gdp)


def status(session: Session, dataset_id: str) -> BudgetStatus:
    """The budget as owners and analysts see it (reads only); every ε is the filter's measure."""
    budget = _get(session, dataset_id)
    grid = get_grid(budget.grid_name)
    privacy_filter = budget_filter(budget)
    committed_cost = _committed(budget)
    committed = privacy_filter.measure(committed_cost)
    domain = budget.dataset_id  # the budget's entries: those of every dataset of its privacy domain
    charged = privacy_filter.measure(_sum_entries(session, domain, grid, "charge", ("release",)))
    reserved = privacy_filter.measure(_sum_entries(session, domain, grid, "reservation", ("charge", "release")))
    remaining = 0.0 if budget.filter_note else max(0.0, budget.epsilon_max - committed.epsilon)
    return BudgetStatus(
        epsilon_max=budget.epsilon_max, delta_max=budget.delta_max, grid_name=budget.grid_name,
        orders=[float(a) for a in grid.orders], filter=FilterView.of(privacy_filter),
        charged_epsilon=charged.epsilon, reserved_epsilon=reserved.epsilon, committed_epsilon=committed.epsilon,
        committed_share=committed.share, committed_certificate=committed.certificate,
        committed_certifying_order=committed.certifying_order,
        committed_order_share=committed.order_share, committed_pure_share=committed.pure_share,
        committed_gdp_share=committed.gdp_share, remaining_epsilon=remaining, committed_rdp=list(budget.committed_rdp),
        committed_extra_delta=budget.committed_extra_delta, committed_approx_delta=budget.committed_approx_delta,
        committed_pure_epsilon=committed_cost.pure_epsilon, committed_gdp_mu_squared=committed_cost.gdp_mu_squared,
        committed_delta_used=committed.delta_used, entries=budget.version, closed_reason=budget.filter_note,
        formula_version=formula_version(budget.filter_version),
    )  # fmt: skip


def estimate(session: Session, dataset_id: str, cost: PrivacyCost, spender: str | None = None) -> Estimate:
    """What admitting ``cost`` of the key ``spender`` would do, without writing anything."""
    return estimate_for(_get(session, dataset_id), cost, read_allocation(session, dataset_id, spender))


def read_allocation(session: Session, dataset_id: str, spender: str | None) -> Allocation | None:
    """The allocation of ``spender`` on the dataset, read without a lock (estimates, views); None if it has none."""
    if spender is None:
        return None
    return session.execute(
        select(Allocation).where(Allocation.dataset_id == domain_of(dataset_id), Allocation.api_key_id == spender)
    ).scalar_one_or_none()


def estimate_for(budget: Budget, cost: PrivacyCost, allocation: Allocation | None = None) -> Estimate:
    """:func:`estimate` against a budget row (and the caller's allocation) already read (e.g. in the transaction
    that read the plan's inputs)."""
    _check_grid(cost, budget)
    privacy_filter = budget_filter(budget)
    own = cost.epsilon(budget.delta_max)
    before = _committed(budget)
    reading_before = privacy_filter.measure(before)
    after = privacy_filter.measure(before + cost)
    admissible = not budget.filter_note and after.share <= 1.0
    refusal = None if admissible else _refusal(budget, cost, reading_before, after).reason
    share = None if allocation is None else _allocation_estimate(allocation, cost)
    if share is not None and not share.admissible and admissible:
        admissible, refusal = False, "allocation"
    return Estimate(
        epsilon=own.epsilon, optimal_order=own.optimal_order, at_grid_edge=own.at_grid_edge,
        committed_epsilon_before=reading_before.epsilon, committed_epsilon_after=after.epsilon,
        remaining_epsilon_after=max(0.0, budget.epsilon_max - after.epsilon) if admissible else 0.0,
        admissible=admissible, refusal_reason=refusal, delta_used_after=after.delta_used,
        certificate_after=after.certificate, allocation=share,
    )  # fmt: skip


def _allocation_estimate(allocation: Allocation, cost: PrivacyCost) -> AllocationEstimate:
    _check_grid(cost, allocation)
    privacy_filter = budget_filter(allocation)
    before = _committed(allocation)
    after = privacy_filter.measure(before + cost)
    admissible = not allocation.filter_note and after.share <= 1.0
    return AllocationEstimate(
        epsilon_max=allocation.epsilon_max, delta_max=allocation.delta_max,
        committed_epsilon_before=privacy_filter.measure(before).epsilon, committed_epsilon_after=after.epsilon,
        remaining_epsilon_after=max(0.0, allocation.epsilon_max - after.epsilon) if admissible else 0.0,
        admissible=admissible,
    )  # fmt: skip


def delta_allowance(session: Session, dataset_id: str, spender: str | None) -> DeltaAllowance:
    """What the next fit of the key ``spender`` may use with its δ-only parts of the dataset's pot and of its
    allocation's (half of what is left of each part; reads only)."""
    return allowance_for(_get(session, dataset_id), read_allocation(session, dataset_id, spender))


def allowance_for(budget: Budget, allocation: Allocation | None = None) -> DeltaAllowance:
    """:func:`delta_allowance` of a budget row (and the caller's allocation) already read: the tighter of the two
    filters' allowances, part by part (the fit must fit in both)."""
    allowance = budget_filter(budget).allowance(_committed(budget))
    if allocation is None:
        return allowance
    other = budget_filter(allocation).allowance(_committed(allocation))
    slack = allowance if allowance.max_slack <= other.max_slack else other
    return DeltaAllowance(delta=min(allowance.delta, other.delta), slack=slack.slack, slack_weight=slack.slack_weight)
