"""The job state machine's recovery paths on SQLite and PostgreSQL: a lost or interrupted job is re-queued (same
charge, never a second one) and run again, up to its maximum number of runs, then failed (charge kept if a run read
rows, refunded otherwise); a re-queued job can be cancelled (refunded only if no run read a row); the sweeper
publishes jobs whose message was lost."""

from __future__ import annotations

from datetime import timedelta

import pytest
from ledger_helpers import DELTA, fit_cost, make_dataset
from sqlalchemy import select

from privfit.db import Database, Job, LedgerEntry
from privfit.db.models import utcnow
from privfit.jobs.states import (
    FAILED_AFTER_READING,
    NEVER_STARTED,
    cancel,
    claim,
    fail,
    hand_back_unread,
    mark_reading,
    queued_before,
    recover_lost,
    requeue_interrupted,
)
from privfit.jobs.sweeper import Sweeper
from privfit.ledger import reserve, status
from privfit.privacy import DEFAULT_GRID, PrivacyFilter
from privfit.settings import Settings


def queued_jobs(db: Database, count: int) -> tuple[str, list[str]]:
    dataset_id, job_ids = make_dataset(db, epsilon_max=50.0, jobs=count)
    with db.write() as session:
        for job_id in job_ids:
            reserve(session, dataset_id, job_id, fit_cost())
    return dataset_id, job_ids


def ledger_kinds(db: Database, job_id: str) -> list[str]:
    with db.read() as session:
        return sorted(session.execute(select(LedgerEntry.kind).where(LedgerEntry.job_id == job_id)).scalars())


def job(db: Database, job_id: str) -> Job:
    with db.read() as session:
        return session.get(Job, job_id)


def test_a_lost_job_that_read_nothing_is_requeued_and_charged_once(database: Database):
    _, (job_id,) = queued_jobs(database, 1)
    assert claim(database, job_id, "w1", lease_seconds=0.0) is not None  # lease already expired
    assert recover_lost(database, now=utcnow() + timedelta(seconds=1)) == [job_id]
    assert job(database, job_id).status == "queued" and job(database, job_id).lease_owner is None
    assert ledger_kinds(database, job_id) == ["charge", "reservation"]
    again = claim(database, job_id, "w2", lease_seconds=60.0)
    assert again is not None and again.attempt == 2
    assert ledger_kinds(database, job_id) == ["charge", "reservation"]  # no second charge


def test_a_lost_job_that_started_reading_runs_again_with_its_one_charge(database: Database):
    _, (job_id,) = queued_jobs(database, 1)
    claim(database, job_id, "w1", lease_seconds=0.0)
    assert mark_reading(database, job_id, "w1")
    assert not mark_reading(database, job_id, "someone else")
    assert recover_lost(database, now=utcnow() + timedelta(seconds=1)) == [job_id]
    row = job(database, job_id)
    assert row.status == "queued" and row.result is None and row.data_read_at is not None  # the read is remembered
    again = claim(database, job_id, "w2", lease_seconds=60.0)
    assert again is not None and again.attempt == 2
    assert ledger_kinds(database, job_id) == ["charge", "reservation"]  # no second charge


def test_a_job_lost_on_every_run_fails_with_its_charge_and_the_one_fixed_error(database: Database):
    _, (job_id,) = queued_jobs(database, 1)
    for run in range(1, 4):
        assert claim(database, job_id, f"w{run}", lease_seconds=0.0) is not None
        assert mark_reading(database, job_id, f"w{run}")
        assert recover_lost(database, now=utcnow() + timedelta(seconds=1), max_attempts=3) == [job_id]
    row = job(database, job_id)
    assert row.status == "failed" and row.error == FAILED_AFTER_READING and row.result is None
    assert ledger_kinds(database, job_id) == ["charge", "reservation"]


def test_a_job_lost_on_every_run_before_reading_fails_refunded(database: Database):
    dataset_id, (job_id,) = queued_jobs(database, 1)
    for run in range(1, 3):
        assert claim(database, job_id, f"w{run}", lease_seconds=0.0) is not None
        recover_lost(database, now=utcnow() + timedelta(seconds=1), max_attempts=2)
    row = job(database, job_id)
    assert row.status == "failed" and row.error == NEVER_STARTED
    assert ledger_kinds(database, job_id) == ["charge", "release", "reservation"]
    assert committed_epsilon(database, dataset_id) == 0.0


def test_an_interrupted_job_goes_back_to_the_queue_then_fails_past_its_runs(database: Database):
    _, (job_id,) = queued_jobs(database, 1)
    claim(database, job_id, "w1", lease_seconds=60.0)
    assert mark_reading(database, job_id, "w1")
    assert requeue_interrupted(database, job_id, "someone else", max_attempts=2) is None
    assert requeue_interrupted(database, job_id, "w1", max_attempts=2) == "queued"
    claim(database, job_id, "w2", lease_seconds=60.0)
    assert requeue_interrupted(database, job_id, "w2", max_attempts=2) == "failed"
    row = job(database, job_id)
    assert row.status == "failed" and row.error == FAILED_AFTER_READING
    assert ledger_kinds(database, job_id) == ["charge", "reservation"]


def test_a_run_a_shutdown_stopped_before_reading_is_not_counted(database: Database):
    """Handed back unread, the claim is undone (attempt back to its value before it) and the charge stays; the next
    claim counts as the run it is. Without the decrement, repeated stops of a busy server could exhaust a fit."""
    _, (job_id,) = queued_jobs(database, 1)
    claim(database, job_id, "w1", lease_seconds=60.0)
    assert mark_reading(database, job_id, "w1")
    assert requeue_interrupted(database, job_id, "w1") == "queued"
    for _ in range(5):
        assert claim(database, job_id, "w2", lease_seconds=60.0).attempt == 2
        assert hand_back_unread(database, job_id, "someone else") is None
        assert hand_back_unread(database, job_id, "w2") == "queued"
    row = job(database, job_id)
    assert row.status == "queued" and row.attempt == 1 and row.data_read_at is not None
    assert ledger_kinds(database, job_id) == ["charge", "reservation"]


def test_an_interrupted_job_with_a_cancel_request_ends_cancelled(database: Database):
    _, (job_id,) = queued_jobs(database, 1)
    claim(database, job_id, "w1", lease_seconds=60.0)
    assert mark_reading(database, job_id, "w1")
    assert cancel(database, job_id) == "running"
    assert requeue_interrupted(database, job_id, "w1") == "cancelled"
    assert ledger_kinds(database, job_id) == ["charge", "reservation"]  # it read rows: charge kept


def test_a_job_requeued_after_reading_is_never_refunded(database: Database):
    """Cancelled while queued to run again, or failed before reading in its next run (e.g. its dataset deleted):
    an earlier run read rows, so the charge is kept and the error says so (not "refunded")."""
    dataset_id, (cancelled, failed) = queued_jobs(database, 2)
    for job_id in (cancelled, failed):
        claim(database, job_id, "w1", lease_seconds=0.0)
        assert mark_reading(database, job_id, "w1")
    recover_lost(database, now=utcnow() + timedelta(seconds=1))
    assert cancel(database, cancelled) == "cancelled"
    assert "kept" in job(database, cancelled).error["detail"]
    claim(database, failed, "w2", lease_seconds=60.0)
    assert fail(database, failed, "w2", {"type": "dataset_deleted", "detail": "deleted; its privacy charge was "
                                         "refunded"})  # fmt: skip
    error = job(database, failed).error
    assert error["type"] == "dataset_deleted" and "refunded" not in error["detail"] and "kept" in error["detail"]
    assert ledger_kinds(database, cancelled) == ledger_kinds(database, failed) == ["charge", "reservation"]
    assert committed_epsilon(database, dataset_id) > 0.0


def test_cancelling_a_requeued_job_refunds_its_charge(database: Database):
    dataset_id, (requeued, fresh) = queued_jobs(database, 2)
    claim(database, requeued, "w1", lease_seconds=0.0)
    recover_lost(database, now=utcnow() + timedelta(seconds=1))
    assert cancel(database, requeued) == "cancelled" and cancel(database, fresh) == "cancelled"
    assert ledger_kinds(database, requeued) == ["charge", "release", "reservation"]
    assert ledger_kinds(database, fresh) == ["release", "reservation"]
    assert "refunded" in job(database, requeued).error["detail"]
    assert committed_epsilon(database, dataset_id) == 0.0


def committed_epsilon(db: Database, dataset_id: str) -> float:
    with db.read() as session:
        return status(session, dataset_id).committed_epsilon


def test_a_lost_job_with_a_cancel_request_that_read_nothing_is_refunded(database: Database):
    dataset_id, (job_id,) = queued_jobs(database, 1)
    claim(database, job_id, "w1", lease_seconds=0.0)
    assert cancel(database, job_id) == "running"  # cancel requested; the worker dies before reading
    assert recover_lost(database, now=utcnow() + timedelta(seconds=1)) == [job_id]
    assert job(database, job_id).status == "cancelled"
    assert ledger_kinds(database, job_id) == ["charge", "release", "reservation"]
    assert committed_epsilon(database, dataset_id) == 0.0


def test_failing_before_reading_refunds_and_after_reading_keeps_the_charge(database: Database):
    dataset_id, (unread, read) = queued_jobs(database, 2)
    for job_id in (unread, read):
        claim(database, job_id, "w1", lease_seconds=60.0)
    assert mark_reading(database, read, "w1")
    assert fail(database, unread, "w1", {"type": "t", "detail": "d"})
    assert fail(database, read, "w1", {"type": "t", "detail": "d"})
    assert ledger_kinds(database, unread) == ["charge", "release", "reservation"]
    assert ledger_kinds(database, read) == ["charge", "reservation"]
    assert not fail(database, unread, "w1", {"type": "t", "detail": "again"})  # ended once, refunded once
    with database.read() as session:
        assert status(session, dataset_id).committed_epsilon == pytest.approx(
            PrivacyFilter.for_budget(50.0, DELTA, DEFAULT_GRID).measure(fit_cost()).epsilon
        )


class Recorder:
    def __init__(self) -> None:
        self.published: list[str] = []

    def job_created(self, job_id: str) -> None:
        self.published.append(job_id)


def test_the_sweeper_publishes_jobs_queued_too_long_once_per_grace_period(database: Database):
    _, job_ids = queued_jobs(database, 3)
    claim(database, job_ids[2], "w1", lease_seconds=60.0)  # running: not published again
    assert queued_before(database, utcnow() - timedelta(seconds=60)) == []
    recorder = Recorder()
    sweeper = Sweeper(database, Settings(redispatch_seconds=1e-6), recorder)
    sweeper.sweep()
    assert sorted(recorder.published) == sorted(job_ids[:2])
    sweeper.settings = Settings(redispatch_seconds=3600.0)
    sweeper.sweep()  # within the (new) grace period of the last publication: nothing more
    assert sorted(recorder.published) == sorted(job_ids[:2])
