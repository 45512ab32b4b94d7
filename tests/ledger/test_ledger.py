"""The ledger on real SQLite and PostgreSQL: semantics, append-only, uniqueness, races, migrations."""

from __future__ import annotations

import threading
import uuid

import numpy as np
import pytest
from ledger_helpers import DELTA, fit_cost, make_dataset
from sqlalchemy import func, select, text
from sqlalchemy.exc import DBAPIError, IntegrityError

from privfit.db import Budget, Database, Evaluation, LedgerEntry
from privfit.db.migrate import check
from privfit.ledger import (
    BudgetExceededError,
    LedgerError,
    charge,
    charge_evaluation,
    committed_cost_from_entries,
    estimate,
    release,
    reserve,
    status,
)
from privfit.privacy import DEFAULT_GRID, PrivacyCost, PrivacyFilter, gaussian_rdp


def test_reserve_charge_release_semantics(database: Database):
    dataset_id, (a, b, c) = make_dataset(database, epsilon_max=5.0, jobs=3)
    with database.write() as session:
        reserve(session, dataset_id, a, fit_cost())
        reserve(session, dataset_id, b, fit_cost())
        reserve(session, dataset_id, c, fit_cost(40.0))
    with database.write() as session:
        first = charge(session, dataset_id, a)
        assert charge(session, dataset_id, a).id == first.id  # idempotent
        release(session, dataset_id, b)
        with pytest.raises(LedgerError, match="charge is kept"):
            release(session, dataset_id, a)
    with database.read() as session:
        view = status(session, dataset_id)
        budget = session.get(Budget, dataset_id)
        recomputed = committed_cost_from_entries(session, budget)
        np.testing.assert_allclose(budget.committed_rdp, recomputed.rdp, rtol=1e-12)
        np.testing.assert_allclose(recomputed.rdp, (fit_cost() + fit_cost(40.0)).rdp, rtol=1e-12)
        measure = PrivacyFilter.for_budget(5.0, DELTA, DEFAULT_GRID).measure
        assert view.charged_epsilon == pytest.approx(measure(fit_cost()).epsilon)
        assert view.reserved_epsilon == pytest.approx(measure(fit_cost(40.0)).epsilon)
        assert view.committed_epsilon == pytest.approx(measure(fit_cost() + fit_cost(40.0)).epsilon)
        # the filter's shares add up over fits (one certificate, the pinned order, for Gaussian fits)
        assert view.committed_epsilon == pytest.approx(view.charged_epsilon + view.reserved_epsilon, rel=1e-9)
        assert view.remaining_epsilon == pytest.approx(5.0 - view.committed_epsilon)
        assert view.entries == 5
        kinds = session.execute(select(LedgerEntry.kind).order_by(LedgerEntry.id)).scalars().all()
        assert kinds == ["reservation", "reservation", "reservation", "charge", "release"]


def test_over_budget_is_refused_and_changes_nothing(database: Database):
    dataset_id, (a, b) = make_dataset(database, epsilon_max=1.0, jobs=2)
    with database.write() as session:
        reserve(session, dataset_id, a, fit_cost(5.0))
    with database.read() as session:
        before = status(session, dataset_id)
        dry = estimate(session, dataset_id, fit_cost(5.0))
        assert not dry.admissible and dry.committed_epsilon_after > 1.0
    with pytest.raises(BudgetExceededError) as refused, database.write() as session:
        reserve(session, dataset_id, b, fit_cost(5.0))
    assert refused.value.total_epsilon > refused.value.epsilon_max == 1.0
    with database.read() as session:
        assert status(session, dataset_id) == before
        assert session.scalar(select(func.count()).select_from(LedgerEntry)) == 1


def test_a_job_is_reserved_and_charged_at_most_once_by_the_database(database: Database):
    dataset_id, (a,) = make_dataset(database, epsilon_max=5.0, jobs=1)
    with database.write() as session:
        reserve(session, dataset_id, a, fit_cost())
        charge(session, dataset_id, a)
    for kind in ("reservation", "charge"):
        with pytest.raises(IntegrityError), database.write() as session:
            session.add(LedgerEntry(
                dataset_id=dataset_id, job_id=a, kind=kind, rdp=[0.0] * len(DEFAULT_GRID), extra_delta=0.0,
                grid_name=DEFAULT_GRID.name, formula_version="x", epsilon=0.0, optimal_order=2.0,
                committed_epsilon_after=0.0, budget_version=99,
            ))  # fmt: skip


def _evaluation(session, dataset_id: str, job_id: str) -> str:
    """An evaluation row of ``job_id`` (the ledger's foreign key needs it)."""
    evaluation_id = str(uuid.uuid4())
    key_id = session.execute(text("SELECT owner_key_id FROM datasets WHERE id = :id"), {"id": dataset_id}).scalar_one()
    session.add(Evaluation(id=evaluation_id, job_id=job_id, dataset_id=dataset_id, api_key_id=key_id,
                           request_hash="0" * 64, epsilon=1.0, confidence=0.95, metrics=["accuracy"], n_validation=10,
                           cost={}, status="running"))  # fmt: skip
    session.flush()
    return evaluation_id


def test_an_evaluation_is_admitted_by_the_filter_reserved_and_charged_once_and_never_released(database: Database):
    """Evaluations compose with fits in every sum of the ledger: committed (reservations not released), charged,
    reserved (none left), and the recomputation a release of another job triggers."""
    dataset_id, (a, b) = make_dataset(database, epsilon_max=5.0, jobs=2)
    pure = PrivacyCost.pure_dp(0.5)
    with database.write() as session:
        reserve(session, dataset_id, a, fit_cost())
        reserve(session, dataset_id, b, fit_cost())
        evaluation_id = _evaluation(session, dataset_id, a)
        charged = charge_evaluation(session, dataset_id, evaluation_id, pure, "evaluation", spender=None)
        assert (charged.kind, charged.job_id, charged.evaluation_id) == ("charge", None, evaluation_id)
    with database.write() as session:
        release(session, dataset_id, b)  # recomputes the committed cost from the entries
    with database.read() as session:
        budget = session.get_one(Budget, dataset_id)
        recomputed = committed_cost_from_entries(session, budget)
        np.testing.assert_allclose(recomputed.rdp, (fit_cost() + pure).rdp, rtol=1e-12)
        np.testing.assert_allclose(budget.committed_rdp, recomputed.rdp, rtol=1e-12)
        assert recomputed.pure_epsilon == np.inf  # the Gaussian fit has no pure bound
        view = status(session, dataset_id)
        measure = PrivacyFilter.for_budget(5.0, DELTA, DEFAULT_GRID).measure
        assert view.reserved_epsilon == pytest.approx(
            measure(fit_cost()).epsilon
        )  # fit a only; the evaluation is charged
        assert view.committed_epsilon == pytest.approx(measure(fit_cost() + pure).epsilon)
    with pytest.raises(IntegrityError), database.write() as session:  # UNIQUE(evaluation_id, kind)
        session.add(LedgerEntry(
            dataset_id=dataset_id, evaluation_id=evaluation_id, kind="charge", rdp=[0.0] * len(DEFAULT_GRID),
            extra_delta=0.0, grid_name=DEFAULT_GRID.name, formula_version="x", epsilon=0.0, optimal_order=2.0,
            committed_epsilon_after=0.0, budget_version=99,
        ))  # fmt: skip
    for subject in ({}, {"job_id": a, "evaluation_id": evaluation_id}):  # exactly one subject (CHECK one_subject)
        with pytest.raises(IntegrityError), database.write() as session:
            session.add(LedgerEntry(
                dataset_id=dataset_id, kind="release", rdp=[0.0] * len(DEFAULT_GRID), extra_delta=0.0,
                grid_name=DEFAULT_GRID.name, formula_version="x", epsilon=0.0, optimal_order=2.0,
                committed_epsilon_after=0.0, budget_version=99, **subject,
            ))  # fmt: skip


def test_an_evaluation_over_budget_is_refused_and_writes_nothing(database: Database):
    dataset_id, (a,) = make_dataset(database, epsilon_max=1.0, jobs=1)
    with pytest.raises(BudgetExceededError), database.write() as session:
        evaluation_id = _evaluation(session, dataset_id, a)
        charge_evaluation(session, dataset_id, evaluation_id, PrivacyCost.pure_dp(2.0), "evaluation", spender=None)
    with database.read() as session:
        assert session.scalar(select(func.count()).select_from(LedgerEntry)) == 0
        assert session.scalar(select(func.count()).select_from(Evaluation)) == 0


def test_ledger_entries_are_append_only(database: Database):
    dataset_id, (a,) = make_dataset(database, epsilon_max=5.0, jobs=1)
    with database.write() as session:
        reserve(session, dataset_id, a, fit_cost())
    for statement in ("UPDATE ledger_entries SET epsilon = 0", "DELETE FROM ledger_entries"):
        with pytest.raises(DBAPIError, match="append-only"), database.write() as session:
            session.execute(text(statement))
    with database.read() as session:
        assert session.scalar(select(func.count()).select_from(LedgerEntry)) == 1


@pytest.mark.parametrize("admitted", [1, 7])
def test_concurrent_reservations_never_overspend(database: Database, admitted: int):
    """64 concurrent requests against a budget that admits exactly K of them: exactly K succeed."""
    privacy_filter = PrivacyFilter.for_budget(1.0, DELTA, DEFAULT_GRID)
    # a Gaussian whose RDP at the filter's order is the allowed RDP / (K + 1/2): K fit, K + 1 do not
    sigma = (privacy_filter.order * (admitted + 0.5) / (2.0 * privacy_filter.order_budget)) ** 0.5
    cost = PrivacyCost(gaussian_rdp(DEFAULT_GRID, sigma=sigma))
    dataset_id, job_ids = make_dataset(database, epsilon_max=1.0, jobs=64)
    outcomes: list[str] = []
    barrier = threading.Barrier(len(job_ids))

    def attempt(job_id: str) -> None:
        barrier.wait()
        try:
            with database.write() as session:
                reserve(session, dataset_id, job_id, cost)
            outcomes.append("admitted")
        except BudgetExceededError:
            outcomes.append("refused")

    threads = [threading.Thread(target=attempt, args=(job_id,)) for job_id in job_ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes.count("admitted") == admitted
    assert outcomes.count("refused") == 64 - admitted
    with database.read() as session:
        view = status(session, dataset_id)
        assert view.committed_epsilon <= view.epsilon_max
        assert session.scalar(select(func.count()).select_from(LedgerEntry)) == admitted


def test_migrations_match_the_models(database_url: str):
    check(database_url)


def test_approximate_rdp_charges_with_an_order_cap_are_stored_composed_and_recomputed(database: Database):
    """+∞ orders (JSON null) and the approximate-RDP slack survive the database; they compose with ordinary curves,
    and the cached committed cost equals the one recomputed from the entries."""
    dataset_id, (a, b) = make_dataset(database, epsilon_max=5.0, jobs=2)
    capped = PrivacyCost.approximate_rdp(DEFAULT_GRID.orders * 0.002, 1e-11, DEFAULT_GRID, order_cap=64.0)
    assert np.isinf(capped.rdp).any() and np.isfinite(capped.rdp).any()
    with database.write() as session:
        reserve(session, dataset_id, a, capped)
        reserve(session, dataset_id, b, fit_cost())
        charge(session, dataset_id, a)
    expected = capped + fit_cost()
    with database.read() as session:
        budget = session.get(Budget, dataset_id)
        recomputed = committed_cost_from_entries(session, budget)
        np.testing.assert_array_equal(np.isinf(recomputed.rdp), np.isinf(capped.rdp))
        np.testing.assert_allclose(recomputed.rdp, expected.rdp, rtol=1e-12)
        assert recomputed.approx_delta == budget.committed_approx_delta == pytest.approx(1e-11)
        assert None in budget.committed_rdp  # JSON null for +∞
        view = status(session, dataset_id)
        measure = PrivacyFilter.for_budget(5.0, DELTA, DEFAULT_GRID).measure
        assert view.committed_epsilon == pytest.approx(measure(expected).epsilon, rel=1e-12)
        assert view.charged_epsilon == pytest.approx(measure(capped).epsilon, rel=1e-12)
        entry = session.execute(select(LedgerEntry).where(LedgerEntry.job_id == a, LedgerEntry.kind == "charge"))
        assert entry.scalar_one().approx_delta == pytest.approx(1e-11)
