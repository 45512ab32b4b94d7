"""The ledger entries of a dataset's private preprocessing (issue 34; migration 0008): admitted by the filter like a
fit, a reservation and a charge written together, at most once per dataset, append-only, exactly one subject per
entry; and the migration's downgrade refuses to drop them."""

from __future__ import annotations

import pytest
from ledger_helpers import DELTA, make_dataset
from sqlalchemy import func, select, text
from sqlalchemy.exc import DBAPIError, IntegrityError

from privfit.db import Database, LedgerEntry, make_database
from privfit.db.migrate import downgrade, upgrade
from privfit.ledger import (
    BudgetExceededError,
    charge_preprocessing,
    committed_cost_from_entries,
    release,
    reserve,
    status,
)
from privfit.ledger.ledger import _committed, _get
from privfit.privacy import DEFAULT_GRID, PrivacyCost, PrivacyFilter
from privfit.privacy.histogram import histogram_release_cost, variance_for_share


def preprocessing_cost(epsilon_max: float, share: float, columns: int = 4) -> PrivacyCost:
    limit = PrivacyFilter.for_budget(epsilon_max, DELTA, DEFAULT_GRID)
    variance = variance_for_share(columns, limit, share, bins=32)
    assert variance is not None
    return histogram_release_cost(columns, variance, DEFAULT_GRID, bins=32)


def _entry(dataset_id: str, **subject: str) -> LedgerEntry:
    return LedgerEntry(
        dataset_id=dataset_id, kind="charge", rdp=[0.0] * len(DEFAULT_GRID), extra_delta=0.0,
        grid_name=DEFAULT_GRID.name, formula_version="x", epsilon=0.0, optimal_order=2.0,
        committed_epsilon_after=0.0, budget_version=99, **subject,
    )  # fmt: skip


def test_a_preprocessing_charge_is_admitted_once_and_measured_as_its_share(database: Database):
    dataset_id, (job,) = make_dataset(database, epsilon_max=2.0, jobs=1)
    cost = preprocessing_cost(2.0, 0.05)
    with database.write() as session:
        entry = charge_preprocessing(session, dataset_id, cost, "private preprocessing at upload")
        assert entry.kind == "charge" and entry.preprocessing_dataset_id == dataset_id and entry.job_id is None
    with database.read() as session:
        view = status(session, dataset_id)
        kinds = session.scalars(select(LedgerEntry.kind).where(LedgerEntry.preprocessing_dataset_id == dataset_id))
        assert sorted(kinds) == ["charge", "reservation"]
    assert 0.049 * 2.0 <= view.committed_epsilon == view.charged_epsilon <= 0.05 * 2.0 * (1 + 1e-9)
    with pytest.raises(IntegrityError), database.write() as session:  # UNIQUE(preprocessing_dataset_id, kind)
        session.add(_entry(dataset_id, preprocessing_dataset_id=dataset_id))
    with pytest.raises(IntegrityError), database.write() as session:  # exactly one subject (CHECK one_subject)
        session.add(_entry(dataset_id, job_id=job, preprocessing_dataset_id=dataset_id))
    with pytest.raises(DBAPIError), database.write() as session:  # append-only (the triggers of revision 0001)
        session.execute(text("UPDATE ledger_entries SET epsilon = 0 WHERE preprocessing_dataset_id = :id"),
                        {"id": dataset_id})  # fmt: skip


def test_a_release_keeps_the_preprocessing_in_the_committed_cost(database: Database):
    """A release recomputes the committed cost from the entries. The preprocessing's entries have no job and no
    evaluation; they once dropped out of that sum (``NULL NOT IN (…)`` is not true in SQL), so after any release
    the budget forgot the preprocessing and over-admitted. They must stay, in the cache and in the views."""
    dataset_id, (job,) = make_dataset(database, epsilon_max=2.0, jobs=1)
    cost = preprocessing_cost(2.0, 0.05)
    with database.write() as session:
        charge_preprocessing(session, dataset_id, cost, "private preprocessing at upload")
        before = _committed(_get(session, dataset_id))
        reserve(session, dataset_id, job, PrivacyCost.laplace(DEFAULT_GRID, scale=20.0))
    with database.read() as session:
        assert status(session, dataset_id).reserved_epsilon > 0.0  # the queued fit, beside the charged preprocessing
    with database.write() as session:
        release(session, dataset_id, job)
    with database.read() as session:
        budget = _get(session, dataset_id)
        after, recomputed = _committed(budget), committed_cost_from_entries(session, budget)
        view = status(session, dataset_id)
    for composed in (after, recomputed):
        assert composed.rdp.tolist() == pytest.approx(before.rdp.tolist(), rel=1e-12)
        assert composed.gdp_mu_squared == pytest.approx(cost.gdp_mu_squared, rel=1e-12)
    assert 0.049 * 2.0 <= view.committed_epsilon == view.charged_epsilon <= 0.05 * 2.0 * (1 + 1e-9)
    assert view.reserved_epsilon == 0.0


def test_a_preprocessing_charge_over_the_budget_is_refused_and_writes_nothing(database: Database):
    dataset_id, _ = make_dataset(database, epsilon_max=1.0)
    too_much = preprocessing_cost(1.0, 0.5) * 3
    with pytest.raises(BudgetExceededError), database.write() as session:
        charge_preprocessing(session, dataset_id, too_much, "private preprocessing at upload")
    with database.read() as session:
        assert session.scalar(select(func.count()).select_from(LedgerEntry)) == 0


def test_migration_0008_downgrades_only_without_preprocessing_entries(database_url: str):
    db = make_database(database_url, pool_size=1)
    try:
        downgrade(database_url, "0007")
        upgrade(database_url)
        dataset_id, _ = make_dataset(db, epsilon_max=2.0)
        without_gdp = PrivacyCost(preprocessing_cost(2.0, 0.05).rdp, DEFAULT_GRID)  # 0014 refuses GDP bounds first
        with db.write() as session:
            charge_preprocessing(session, dataset_id, without_gdp, "private preprocessing")
        with pytest.raises(RuntimeError, match="entries of preprocessing"):
            downgrade(database_url, "0007")
        with db.read() as session:  # nothing was dropped
            assert session.scalar(select(func.count()).select_from(LedgerEntry)) == 2
    finally:
        db.dispose()
