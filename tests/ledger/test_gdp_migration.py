"""Migration 0014 (the Gaussian-DP certificate), on SQLite and PostgreSQL, with budgets, allocations and entries of
every kind: existing filters keep rule v2 with δ_G = 0, existing entries record no GDP bound (NULL), and each cached
``committed_gdp_mu_squared`` is what the ledger recomputes from the entries — 0.0 where no live reservation is
counted, NULL (+∞) where one is (a preprocessing's reservation is always live). The entries and their hash chain are
untouched. A downgrade drops the columns and names the v3 filters v2 again, and is refused while an entry records a
GDP bound (it would lose the bound and its hash). The upgrade also repairs the committed cache of a budget with a
preprocessing and a release, which the ledger's release dropped the preprocessing from before the subject fix."""

from __future__ import annotations

import math
import uuid

import pytest
from ledger_helpers import fit_cost, make_dataset
from sqlalchemy import JSON, Float, String, column, create_engine, inspect, select, table, text, update
from sqlalchemy.orm import Session
from test_allocations import analyst

from privfit.db import Budget, Database, Evaluation, LedgerEntry, make_database
from privfit.db.migrate import check, downgrade, upgrade
from privfit.db.models import Allocation
from privfit.ledger import charge, charge_evaluation, charge_preprocessing, release, reserve
from privfit.ledger.allocations import create_allocation
from privfit.ledger.ledger import _committed, committed_cost_from_entries
from privfit.privacy import (
    DEFAULT_GRID,
    FILTER_VERSION,
    FILTER_VERSION_V2,
    PrivacyCost,
    curve_to_json,
    gaussian_rdp,
    pure_epsilon_to_json,
)

NEW_COLUMNS = {
    "budgets": {"filter_gdp_delta", "committed_gdp_mu_squared"},
    "allocations": {"filter_gdp_delta", "committed_gdp_mu_squared"},
    "ledger_entries": {"gdp_mu_squared"},
}


def _columns(url: str) -> dict[str, set[str]]:
    engine = create_engine(url)
    try:
        found = inspect(engine)
        return {table: {column["name"] for column in found.get_columns(table)} for table in NEW_COLUMNS}
    finally:
        engine.dispose()


def _chain(url: str) -> dict[int, tuple[str, str]]:
    db = make_database(url)
    with db.read() as session:
        chained = {e.id: (e.previous_hash, e.entry_hash) for e in session.scalars(select(LedgerEntry))}
    db.dispose()
    return chained


def _evaluation(session: Session, dataset_id: str, key_id: str, job_id: str) -> str:
    """An evaluation row of ``key_id``'s fit ``job_id`` (its ledger entries' foreign key)."""
    evaluation_id = str(uuid.uuid4())
    session.add(Evaluation(id=evaluation_id, job_id=job_id, dataset_id=dataset_id, api_key_id=key_id,
                           request_hash="0" * 64, epsilon=0.1, confidence=0.95, metrics=["accuracy"],
                           n_validation=10, cost={}, status="running"))  # fmt: skip
    session.flush()
    return evaluation_id


def _ledgers_as_0013_knew_them(db: Database) -> tuple[dict[str, str], dict[str, tuple[str, str]]]:
    """Budgets and allocations with costs of no GDP bound (what every entry before revision 0014 is), by name: the
    budgets' dataset ids, and each allocation's (dataset id, key id)."""
    empty, _ = make_dataset(db, 5.0)
    released, (voided,) = make_dataset(db, 5.0, jobs=1)
    busy, (live, refunded) = make_dataset(db, 5.0, jobs=2)
    preprocessed, (cancelled,) = make_dataset(db, 5.0, jobs=1)
    key_live, (fit_live,) = analyst(db, busy, 1)
    key_released, (fit_released,) = analyst(db, busy, 1)
    key_evaluated, (fit_evaluated,) = analyst(db, busy, 1)
    with db.write() as session:
        for dataset_id, key_id in ((busy, key_live), (busy, key_released), (busy, key_evaluated)):
            create_allocation(session, dataset_id, key_id, 2.0, 1e-6)
        reserve(session, released, voided, fit_cost())
        release(session, released, voided)
        for job_id in (live, refunded):
            reserve(session, busy, job_id, fit_cost())
        charge(session, busy, live)
        release(session, busy, refunded)
        reserve(session, busy, fit_live, PrivacyCost.pure_dp(0.1), spender=key_live)
        reserve(session, busy, fit_released, fit_cost(), spender=key_released)
        release(session, busy, fit_released)
        evaluation = _evaluation(session, busy, key_evaluated, fit_evaluated)
        charge_evaluation(session, busy, evaluation, PrivacyCost.pure_dp(0.1), "evaluation", spender=key_evaluated)
        charge_preprocessing(session, preprocessed, fit_cost(), "private preprocessing")
        reserve(session, preprocessed, cancelled, fit_cost())
        release(session, preprocessed, cancelled)
    budgets = {"empty": empty, "released": released, "busy": busy, "preprocessed": preprocessed}
    allocations = {"live": (busy, key_live), "released": (busy, key_released), "evaluated": (busy, key_evaluated)}
    return budgets, allocations


def test_existing_rows_keep_rule_v2_and_a_cache_their_entries_recompute(empty_database_url: str) -> None:
    url = empty_database_url
    upgrade(url)
    db = make_database(url)
    budgets, allocations = _ledgers_as_0013_knew_them(db)
    with db.read() as session:
        assert {session.get_one(Budget, d).filter_version for d in budgets.values()} == {FILTER_VERSION}
    db.dispose()
    chained = _chain(url)

    downgrade(url, "0013")
    assert not any(NEW_COLUMNS[table] & found for table, found in _columns(url).items())
    engine = create_engine(url)
    with engine.connect() as connection:
        for table in ("budgets", "allocations"):  # the v3 filters are named v2 again
            rules = connection.execute(text(f"SELECT DISTINCT filter_version FROM {table}")).scalars().all()
            assert rules == [FILTER_VERSION_V2], table
    engine.dispose()

    upgrade(url)
    assert all(NEW_COLUMNS[table] <= found for table, found in _columns(url).items())
    check(url)  # the migrated schema is the models'
    assert _chain(url) == chained  # no entry was rewritten
    db = make_database(url)
    with db.read() as session:
        rows: list[Budget | Allocation] = [session.get_one(Budget, d) for d in budgets.values()]
        by_key = {name: session.scalars(select(Allocation).where(Allocation.dataset_id == dataset_id,
                                                                 Allocation.api_key_id == key_id)).one()
                  for name, (dataset_id, key_id) in allocations.items()}  # fmt: skip
        rows += by_key.values()
        assert {(row.filter_version, row.filter_gdp_delta) for row in rows} == {(FILTER_VERSION_V2, 0.0)}
        assert session.scalars(select(LedgerEntry.gdp_mu_squared).distinct()).all() == [None]
        cached = {name: session.get_one(Budget, d).committed_gdp_mu_squared for name, d in budgets.items()}
        # nothing live: 0.0; a live fit, or a preprocessing's reservation (never released): +∞
        assert cached == {"empty": 0.0, "released": 0.0, "busy": None, "preprocessed": None}
        allocated = {name: row.committed_gdp_mu_squared for name, row in by_key.items()}
        assert allocated == {"live": None, "released": 0.0, "evaluated": None}
        for name in ("empty", "released", "busy"):  # the cache is its recomputation from the entries
            budget = session.get_one(Budget, budgets[name])
            assert _committed(budget).gdp_mu_squared == committed_cost_from_entries(session, budget).gdp_mu_squared
        for name, (dataset_id, key_id) in allocations.items():
            recomputed = committed_cost_from_entries(session, session.get_one(Budget, dataset_id), spender=key_id)
            assert _committed(by_key[name]).gdp_mu_squared == recomputed.gdp_mu_squared, name
        assert _committed(session.get_one(Budget, budgets["preprocessed"])).gdp_mu_squared == math.inf
    db.dispose()


def test_a_downgrade_is_refused_while_an_entry_records_a_gdp_bound(empty_database_url: str) -> None:
    url = empty_database_url
    upgrade(url)
    db = make_database(url)
    dataset_id, (job,) = make_dataset(db, 5.0, jobs=1)
    gaussian = PrivacyCost.gaussian(DEFAULT_GRID, sigma=40.0, count=10, coordinates=3)
    with db.write() as session:
        reserve(session, dataset_id, job, gaussian)
    db.dispose()
    with pytest.raises(RuntimeError, match="1 ledger entries record a Gaussian-DP bound"):
        downgrade(url, "0013")
    db = make_database(url)
    with db.read() as session:  # nothing was dropped
        assert session.scalar(select(LedgerEntry.gdp_mu_squared)) == gaussian.gdp_mu_squared
        assert session.get_one(Budget, dataset_id).filter_gdp_delta > 0.0
    db.dispose()
    check(url)


_budgets_0013 = table(
    "budgets",
    column("dataset_id", String),
    column("committed_rdp", JSON),
    column("committed_extra_delta", Float),
    column("committed_approx_delta", Float),
    column("committed_pure_epsilon", Float),
)
CACHE = ("committed_rdp", "committed_extra_delta", "committed_approx_delta", "committed_pure_epsilon")


def _budget_rows(url: str) -> dict[str, dict[str, object]]:
    """Every budget row as stored, by dataset id (the columns of revision 0013 and any added later)."""
    engine = create_engine(url)
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT * FROM budgets")).mappings().all()
    engine.dispose()
    return {row["dataset_id"]: dict(row) for row in rows}


def _same_cost(cached: PrivacyCost, expected: PrivacyCost) -> None:
    assert cached.rdp == pytest.approx(expected.rdp, rel=1e-12)  # (+∞ equals +∞)
    assert cached.extra_delta == pytest.approx(expected.extra_delta, rel=1e-12)
    assert cached.approx_delta == pytest.approx(expected.approx_delta, rel=1e-12)
    assert cached.pure_epsilon == pytest.approx(expected.pure_epsilon, rel=1e-12)
    assert cached.gdp_mu_squared == expected.gdp_mu_squared


def test_the_upgrade_gives_back_the_preprocessing_a_release_dropped_from_the_cache(empty_database_url: str) -> None:
    url = empty_database_url
    upgrade(url)
    db = make_database(url)
    preprocessing = PrivacyCost.approximate_dp(0.3, 1e-8)
    charged_fit = PrivacyCost.approximate_dp(0.2, 2e-8)
    capped_fit = PrivacyCost.approximate_rdp(gaussian_rdp(DEFAULT_GRID, sigma=30.0), 1e-12, order_cap=8.0)
    short, (cancelled, charged) = make_dataset(db, 5.0, jobs=2)  # finite pure ε, δ parts
    unbounded, (withdrawn, capped) = make_dataset(db, 5.0, jobs=2)  # +∞ orders and no pure ε
    right, (live,) = make_dataset(db, 5.0, jobs=1)  # a preprocessing and no release
    released, (voided, kept) = make_dataset(db, 5.0, jobs=2)  # a release and no preprocessing
    with db.write() as session:
        charge_preprocessing(session, short, preprocessing, "private preprocessing")
        reserve(session, short, cancelled, fit_cost())
        reserve(session, short, charged, charged_fit)
        charge(session, short, charged)
        release(session, short, cancelled)
        charge_preprocessing(session, unbounded, fit_cost(), "private preprocessing")
        reserve(session, unbounded, withdrawn, charged_fit)
        reserve(session, unbounded, capped, capped_fit)
        release(session, unbounded, withdrawn)
        charge_preprocessing(session, right, preprocessing, "private preprocessing")
        reserve(session, right, live, fit_cost())
        reserve(session, released, voided, fit_cost())
        reserve(session, released, kept, charged_fit)
        release(session, released, voided)
    db.dispose()
    chained = _chain(url)

    downgrade(url, "0013")
    engine = create_engine(url)
    with engine.begin() as connection:  # what the release left before the subject fix: the live fit alone
        for dataset_id, fit in ((short, charged_fit), (unbounded, capped_fit)):
            connection.execute(update(_budgets_0013).where(_budgets_0013.c.dataset_id == dataset_id).values(
                committed_rdp=curve_to_json(fit.rdp), committed_extra_delta=fit.extra_delta,
                committed_approx_delta=fit.approx_delta, committed_pure_epsilon=pure_epsilon_to_json(fit.pure_epsilon),
            ))  # fmt: skip
    engine.dispose()
    before = _budget_rows(url)
    assert before[short]["committed_pure_epsilon"] == pytest.approx(0.2)

    upgrade(url)
    assert _chain(url) == chained  # no entry was rewritten
    after = _budget_rows(url)
    for dataset_id in (right, released):  # nothing dropped: untouched
        assert {k: after[dataset_id][k] for k in before[dataset_id]} == before[dataset_id]
    for dataset_id in (short, unbounded):  # only the cache changed
        kept_columns = set(before[dataset_id]) - set(CACHE)
        assert {k: after[dataset_id][k] for k in kept_columns} == {k: before[dataset_id][k] for k in kept_columns}
        assert after[dataset_id]["committed_gdp_mu_squared"] is None
    db = make_database(url)
    with db.read() as session:
        expected = {short: preprocessing + charged_fit, unbounded: fit_cost() + capped_fit}
        for dataset_id, cost in expected.items():
            budget = session.get_one(Budget, dataset_id)
            cached, recomputed = _committed(budget), committed_cost_from_entries(session, budget)
            _same_cost(cached, cost)
            _same_cost(cached, recomputed)
            assert budget.committed_rdp == curve_to_json(recomputed.rdp)  # JSON null where +∞
        short_cache = _committed(session.get_one(Budget, short))
        assert short_cache.pure_epsilon == pytest.approx(0.5)
        assert short_cache.extra_delta == pytest.approx(1 - (1 - 1e-8) * (1 - 2e-8), rel=1e-9)
        unbounded_budget = session.get_one(Budget, unbounded)
        assert None in unbounded_budget.committed_rdp and unbounded_budget.committed_pure_epsilon is None
        assert unbounded_budget.committed_approx_delta == pytest.approx(1e-12)
        for dataset_id in (right, released):  # their caches were already their recomputation
            budget = session.get_one(Budget, dataset_id)
            _same_cost(_committed(budget), committed_cost_from_entries(session, budget))
    db.dispose()
    check(url)
