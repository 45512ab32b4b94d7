"""Grouped admission (:func:`privfit.ledger.reserve_many`) writes what :func:`~privfit.ledger.reserve` writes in
turn, and SQLite's writer gate queues writers of one file across connections and processes' databases."""

from __future__ import annotations

import sqlite3
import threading

import pytest
from ledger_helpers import fit_cost, make_dataset
from sqlalchemy import select

from privfit.db import Budget, Database, LedgerEntry, make_database
from privfit.db.engine import is_transient
from privfit.ledger import BudgetExceededError, reserve, reserve_many

SIGMAS = [9.0, 30.0, 6.0, 12.0, 4.0, 50.0, 7.0, 20.0]


def _entries(db: Database, dataset_id: str) -> list[tuple]:
    with db.read() as session:
        rows = session.scalars(
            select(LedgerEntry).where(LedgerEntry.dataset_id == dataset_id).order_by(LedgerEntry.budget_version)
        ).all()
        return [(r.kind, r.rdp, r.epsilon, r.optimal_order, r.committed_epsilon_after, r.budget_version,
                 r.description) for r in rows]  # fmt: skip


def test_reserve_many_writes_what_reserve_writes_in_turn(database: Database):
    """The same costs against two identical budgets: one transaction per fit, or one for all. Same refusals at the
    same places, same entries (curves, own ε, the filter's committed ε after each, versions), same budget row."""
    costs = [fit_cost(sigma) for sigma in SIGMAS]
    alone, alone_jobs = make_dataset(database, epsilon_max=1.5, jobs=len(costs))
    grouped, grouped_jobs = make_dataset(database, epsilon_max=1.5, jobs=len(costs))
    refused_alone = []
    for i, (job_id, cost) in enumerate(zip(alone_jobs, costs, strict=True)):
        try:
            with database.write() as session:
                reserve(session, alone, job_id, cost, f"fit {i}")
        except BudgetExceededError as error:
            refused_alone.append((i, error.problem_fields()))
    written: list[str] = []
    pairs = enumerate(zip(grouped_jobs, costs, strict=True))
    requests = [(job_id, cost, f"fit {i}", None) for i, (job_id, cost) in pairs]
    with database.write() as session:
        outcomes = reserve_many(session, grouped, requests, written.extend)
    refused_grouped = [(i, o.problem_fields()) for i, o in enumerate(outcomes) if o is not None]
    assert 0 < len(refused_alone) < len(costs)  # the sequence fills the budget part-way
    assert refused_grouped == refused_alone
    assert written == [grouped_jobs[i] for i, o in enumerate(outcomes) if o is None]
    assert _entries(database, grouped) == _entries(database, alone)
    with database.read() as session:
        a, b = session.get_one(Budget, alone), session.get_one(Budget, grouped)
        assert (a.committed_rdp, a.version, a.committed_extra_delta) == (b.committed_rdp, b.version,
                                                                         b.committed_extra_delta)  # fmt: skip


def test_the_writer_gate_queues_sqlite_writers_across_databases(sqlite_url: str):
    """Two Database objects on one file (as two API processes have): while one writes, the other's writer waits at
    the gate, not in SQLite's busy handler; past its timeout it gets SQLite's transient "database is locked"."""
    first, second = make_database(sqlite_url), make_database(sqlite_url)
    second.gate.timeout = 0.2
    try:
        entered, release = threading.Event(), threading.Event()

        def hold() -> None:
            with first.write():
                entered.set()
                release.wait(10)

        holder = threading.Thread(target=hold)
        holder.start()
        assert entered.wait(10)
        with pytest.raises(sqlite3.OperationalError, match="database is locked") as refused, second.write():
            pass
        assert is_transient(refused.value)
        release.set()
        holder.join(10)
        second.gate.timeout = 10
        with second.write(), second.gate.hold():  # re-entrant within a thread
            pass
    finally:
        first.dispose()
        second.dispose()
