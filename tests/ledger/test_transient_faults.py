"""Transient database faults on SQLite and PostgreSQL (issue 20): the classifier, the bounded retry, and the
idempotency of every retried job transition — including the worst case, a commit that went through but whose answer
was lost with the connection (injected after a real commit: the database is real, only the answer is dropped).

A fit that meets a transient fault before reading a row is no solver failure: it goes back to the queue with its
charge (the next claim finds it), and only after repeated faults fails ``database_unavailable``, refunded."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from ledger_helpers import fit_cost, make_dataset
from sqlalchemy import event, select
from sqlalchemy.exc import DataError, IntegrityError, OperationalError
from sqlalchemy.orm import Session
from test_runner_refunds import _outcome, _queued_fit, _run

from privfit.datasets.store import LocalDatasetStore
from privfit.db import Database, Job, LedgerEntry
from privfit.db.engine import is_transient
from privfit.jobs.runner import DATABASE_UNAVAILABLE, MAX_FAULTED_ATTEMPTS
from privfit.jobs.states import cancel, claim, finish, mark_reading, requeue_unread
from privfit.ledger import reserve


def _lost(message: str = "server closed the connection unexpectedly") -> OperationalError:
    return OperationalError("COMMIT", {}, psycopg.OperationalError(message), connection_invalidated=True)


@contextmanager
def lost_commit_answers(db: Database, times: int = 1) -> Iterator[list[int]]:
    """The next ``times`` write transactions of ``db`` commit, then raise a dropped-connection error (the client
    never learns that its commit went through). Yields the number still to drop."""
    remaining = [times]

    def after_commit(session: Session) -> None:
        if remaining[0] > 0:
            remaining[0] -= 1
            raise _lost()

    event.listen(db._writer, "after_commit", after_commit)
    try:
        yield remaining
    finally:
        event.remove(db._writer, "after_commit", after_commit)


def _kinds(db: Database, job_id: str) -> list[str]:
    with db.read() as session:
        return sorted(session.execute(select(LedgerEntry.kind).where(LedgerEntry.job_id == job_id)).scalars())


def _job(db: Database, job_id: str) -> Job:
    with db.read() as session:
        return session.get_one(Job, job_id)


def _queued(db: Database) -> str:
    dataset_id, (job_id,) = make_dataset(db, epsilon_max=50.0, jobs=1)
    with db.write() as session:
        reserve(session, dataset_id, job_id, fit_cost())
    return job_id


# --- the classifier and the retry ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (_lost(), True),
        (OperationalError("SELECT 1", {}, psycopg.errors.AdminShutdown("terminating connection")), True),
        (OperationalError("SELECT 1", {}, psycopg.errors.SerializationFailure("could not serialize")), True),
        (OperationalError("BEGIN", {}, sqlite3.OperationalError("database is locked")), True),
        (OperationalError("SELECT", {}, sqlite3.OperationalError("no such table: jobs")), False),
        (IntegrityError("INSERT", {}, psycopg.errors.UniqueViolation("duplicate key")), False),
        (DataError("SELECT", {}, psycopg.errors.StringDataRightTruncation("NUL byte")), False),
        (ValueError("not a database error"), False),
        (RuntimeError("wrapped"), False),
    ],
)
def test_transient_faults_are_told_apart(error: BaseException, transient: bool) -> None:
    assert is_transient(error) is transient


def test_a_transient_fault_wrapped_by_another_layer_is_transient() -> None:
    try:
        try:
            raise _lost()
        except OperationalError as error:
            raise RuntimeError("the store could not read") from error
    except RuntimeError as wrapped:
        assert is_transient(wrapped)


def test_retrying_is_bounded_and_only_for_transient_faults(database: Database) -> None:
    calls: list[int] = []

    def always_lost() -> None:
        calls.append(1)
        raise _lost()

    with pytest.raises(OperationalError):
        database.retrying(always_lost, attempts=3, backoff=0.0)
    assert len(calls) == 3

    calls.clear()

    def bug() -> None:
        calls.append(1)
        raise KeyError("a bug is not retried")

    with pytest.raises(KeyError):
        database.retrying(bug, attempts=3, backoff=0.0)
    assert len(calls) == 1

    outcomes = iter([_lost(), _lost(), "done"])

    def flaky() -> str:
        outcome = next(outcomes)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    assert database.retrying(flaky, attempts=3, backoff=0.0) == "done"


# --- every retried transition is idempotent, even when its commit's answer is lost ------------------------------


def test_a_claim_whose_answer_was_lost_is_found_and_charged_once(database: Database) -> None:
    job_id = _queued(database)
    with lost_commit_answers(database) as remaining:
        claimed = claim(database, job_id, "w1", lease_seconds=60.0)
    assert remaining == [0] and claimed is not None and claimed.attempt == 1
    row = _job(database, job_id)
    assert row.status == "running" and row.lease_owner == "w1"
    assert _kinds(database, job_id) == ["charge", "reservation"]


def test_a_result_whose_answer_was_lost_is_written_once_and_reported(database: Database) -> None:
    job_id = _queued(database)
    claim(database, job_id, "w1", lease_seconds=60.0)
    assert mark_reading(database, job_id, "w1")
    with lost_commit_answers(database) as remaining:
        assert finish(database, job_id, "w1", {"coefficients": [1.0]}) == "succeeded"
    assert remaining == [0]
    row = _job(database, job_id)
    assert row.status == "succeeded" and row.result == {"coefficients": [1.0]}
    assert _kinds(database, job_id) == ["charge", "reservation"]


def test_a_result_write_that_keeps_failing_is_retried_then_raised(database: Database) -> None:
    job_id = _queued(database)
    claim(database, job_id, "w1", lease_seconds=60.0)
    mark_reading(database, job_id, "w1")
    database.retry_attempts, database.retry_backoff = 2, 0.0

    def refuse(conn, cursor, statement, parameters, context, executemany) -> None:
        if statement.lstrip().upper().startswith("UPDATE JOBS"):
            raise _lost()

    event.listen(database.engine, "before_cursor_execute", refuse)
    try:
        with pytest.raises(OperationalError):
            finish(database, job_id, "w1", {"coefficients": [1.0]})
    finally:
        event.remove(database.engine, "before_cursor_execute", refuse)
    assert _job(database, job_id).status == "running"  # nothing half-written: its lease decides (recover_lost)
    assert finish(database, job_id, "w1", {"coefficients": [1.0]}) == "succeeded"


def test_a_cancel_whose_answer_was_lost_releases_once(database: Database) -> None:
    job_id = _queued(database)
    with lost_commit_answers(database):
        assert cancel(database, job_id) == "cancelled"
    assert _kinds(database, job_id) == ["release", "reservation"]


def test_a_requeued_unread_fit_keeps_its_one_charge(database: Database) -> None:
    job_id = _queued(database)
    claim(database, job_id, "w1", lease_seconds=60.0)
    with lost_commit_answers(database):
        assert requeue_unread(database, job_id, "w1") == "queued"
    assert _job(database, job_id).status == "queued"
    again = claim(database, job_id, "w2", lease_seconds=60.0)
    assert again is not None and again.attempt == 2
    assert _kinds(database, job_id) == ["charge", "reservation"]  # the first claim's charge, never a second


def test_a_requeue_of_a_cancelled_fit_ends_it_cancelled_and_refunded(database: Database) -> None:
    job_id = _queued(database)
    claim(database, job_id, "w1", lease_seconds=60.0)
    assert cancel(database, job_id) == "running"  # cancel requested
    assert requeue_unread(database, job_id, "w1") == "cancelled"
    assert _kinds(database, job_id) == ["charge", "release", "reservation"]


# --- the runner: a transient fault before reading is no solver failure ------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> LocalDatasetStore:
    return LocalDatasetStore(tmp_path / "store")


def test_a_transient_fault_before_reading_requeues_the_fit_with_its_charge(
    database: Database, store: LocalDatasetStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    dataset_id, job_id = _queued_fit(database, store)
    database.retry_backoff = 0.0
    real_read = store.read
    monkeypatch.setattr(store, "read", lambda key: (_ for _ in ()).throw(_lost()))  # the database store is down
    assert _run(database, store, job_id) == "queued"
    job, kinds, committed = _outcome(database, dataset_id, job_id)
    assert job.status == "queued" and job.error is None and job.data_read_at is None
    assert kinds == ["charge", "reservation"] and committed > 0.0  # charged once, kept for the next claim
    monkeypatch.setattr(store, "read", real_read)  # the database is back
    assert _run(database, store, job_id) == "succeeded"
    job, kinds, _ = _outcome(database, dataset_id, job_id)
    assert job.result is not None and job.attempt == 2 and kinds == ["charge", "reservation"]


def test_repeated_transient_faults_before_reading_fail_the_fit_refunded(
    database: Database, store: LocalDatasetStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    dataset_id, job_id = _queued_fit(database, store)
    database.retry_backoff = 0.0
    monkeypatch.setattr(store, "read", lambda key: (_ for _ in ()).throw(_lost()))
    outcomes = [_run(database, store, job_id) for _ in range(MAX_FAULTED_ATTEMPTS)]
    assert outcomes == ["queued"] * (MAX_FAULTED_ATTEMPTS - 1) + ["failed"]
    job, kinds, committed = _outcome(database, dataset_id, job_id)
    assert job.error == DATABASE_UNAVAILABLE and job.error["type"] != "fit_failed_before_reading"
    assert kinds == ["charge", "release", "reservation"] and committed == 0.0
