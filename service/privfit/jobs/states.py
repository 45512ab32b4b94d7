"""The job state machine (DESIGN §4): queued → running → succeeded | failed | cancelled, in the job's DB row.

Every transition is a conditional UPDATE whose WHERE clause states the expected current state, so a transition
happens at most once whatever the number of workers, redeliveries or crashes; ``rowcount`` tells the caller
whether it won. The ledger moves in the same transactions:

- ``claim``: queued → running **and** the reservation becomes a charge, in one transaction, before any row of
  the dataset is read. A job is charged at most once (``UNIQUE(job_id, kind)``).
- ``mark_reading``: committed just before the solver is given the dataset's rows (``data_read_at``).
- ``finish``: running → succeeded with the result, only by the lease owner; the result is written once.
- ``fail`` / ``end_cancelled``: running → failed / cancelled. **Refunds**: if the job never read a row
  (``data_read_at`` is NULL, checked in the same UPDATE), its charge is released in the same transaction — it
  released nothing that depends on the data (dataset deleted while queued, store unreachable, a transient error,
  a cancel before the rows were read); a job that read rows keeps its charge.
- ``cancel``: queued → cancelled with the reservation released (a re-queued job, charged when first claimed and
  never having read a row, is refunded too); running → ``cancel_requested`` (the solver stops at its next step).
- ``recover_lost``: running jobs whose lease expired (their worker died) → failed, charge kept, no result; or, if
  the job never read its dataset, back to queued with its charge (a later claim finds the charge and does not make
  a second one: ``charge`` is idempotent per job) — or cancelled and refunded if a cancel was requested meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select, update

from privfit.db import Database, Job, LedgerEntry
from privfit.db.models import utcnow
from privfit.ledger import charge, refund, release


@dataclass(frozen=True)
class ClaimedJob:
    """What a worker needs after winning a claim (all public: ids, solver settings, its cost)."""

    id: str
    dataset_id: str
    solver: str
    model: str
    params: dict[str, Any]
    attempt: int


def claim(db: Database, job_id: str, worker: str, lease_seconds: float) -> ClaimedJob | None:
    """Move ``job_id`` from queued to running for ``worker`` and charge its reservation; None if not queued."""
    now = utcnow()
    with db.write() as session:
        claimed = session.execute(
            update(Job)
            .where(Job.id == job_id, Job.status == "queued", Job.cancel_requested.is_(False))
            .values(
                status="running",
                attempt=Job.attempt + 1,
                lease_owner=worker,
                lease_expires_at=now + timedelta(seconds=lease_seconds),
                started_at=now,
            )
            .returning(Job.id, Job.dataset_id, Job.solver, Job.model, Job.params, Job.attempt)
        ).one_or_none()
        if claimed is None:
            return None
        charge(session, claimed.dataset_id, claimed.id)
    return ClaimedJob(claimed.id, claimed.dataset_id, claimed.solver, claimed.model, claimed.params, claimed.attempt)


def next_queued(db: Database) -> list[str]:
    """Ids of the oldest queued jobs (candidates; each must still be won with :func:`claim`)."""
    with db.read() as session:
        return list(
            session.execute(
                select(Job.id).where(Job.status == "queued", Job.cancel_requested.is_(False))
                .order_by(Job.created_at).limit(16)
            ).scalars()
        )  # fmt: skip


def heartbeat(db: Database, job_id: str, worker: str, lease_seconds: float, progress: float) -> bool:
    """Renew the lease and record data-independent progress; returns whether a cancel was requested.

    Raises :class:`LeaseLostError` if the worker no longer owns the running job (it must stop without a result).
    """
    with db.write() as session:
        row = session.execute(
            update(Job)
            .where(Job.id == job_id, Job.status == "running", Job.lease_owner == worker)
            .values(lease_expires_at=utcnow() + timedelta(seconds=lease_seconds), progress=progress)
            .returning(Job.cancel_requested)
        ).one_or_none()
    if row is None:
        raise LeaseLostError(job_id)
    return bool(row.cancel_requested)


class LeaseLostError(Exception):
    """The job is no longer running under this worker (recovered as lost, or finished elsewhere)."""


REFUND_NOTE = "refunded: the fit ended before reading any row, so nothing it released depends on the data"


def _end(db: Database, job_id: str, worker: str, status: str, **values: Any) -> bool:
    """End the running job of ``worker``; a failed or cancelled job that never read a row is refunded in the same
    transaction (module docstring)."""
    with db.write() as session:
        row = session.execute(
            update(Job)
            .where(Job.id == job_id, Job.status == "running", Job.lease_owner == worker)
            .values(status=status, finished_at=utcnow(), lease_expires_at=None, **values)
            .returning(Job.dataset_id, Job.data_read_at)
        ).one_or_none()
        if row is None:
            return False
        if status != "succeeded" and row.data_read_at is None:
            refund(session, row.dataset_id, job_id, REFUND_NOTE)
        return True


def finish(db: Database, job_id: str, worker: str, result: dict[str, Any]) -> bool:
    """Write the result once and mark the job succeeded; False if this worker lost the job meanwhile."""
    return _end(db, job_id, worker, "succeeded", result=result, progress=1.0)


def fail(db: Database, job_id: str, worker: str, error: dict[str, Any]) -> bool:
    """Mark the job failed: refunded if it never read a row, charge kept otherwise. ``error`` must not contain
    anything computed from private rows, nor anything that depends on them (not even an exception's type)."""
    return _end(db, job_id, worker, "failed", error=error)


def end_cancelled(db: Database, job_id: str, worker: str) -> bool:
    """A running job stopped on request: cancelled, no result; refunded if it never read a row."""
    return _end(db, job_id, worker, "cancelled", error={"type": "cancelled", "detail": "cancelled while running"})


def cancel(db: Database, job_id: str) -> str:
    """Cancel a job: queued → cancelled with its reservation released; running → cancel requested.

    Returns the job's status after the call.
    """
    with db.write() as session:
        job = session.execute(select(Job).where(Job.id == job_id).with_for_update()).scalar_one()
        if job.status == "queued":
            job.status, job.finished_at = "cancelled", utcnow()
            charged = session.execute(
                select(LedgerEntry.id).where(LedgerEntry.job_id == job.id, LedgerEntry.kind == "charge")
            ).first()
            if charged is None:
                job.error = {"type": "cancelled", "detail": "cancelled while queued; its reservation was released"}
                release(session, job.dataset_id, job.id)
            else:  # re-queued after its worker was lost before reading a row: charged when first claimed, refunded
                job.error = {"type": "cancelled", "detail": "cancelled while re-queued; it never read a row and its "
                             "charge was refunded"}  # fmt: skip
                refund(session, job.dataset_id, job.id, REFUND_NOTE)
        elif job.status == "running":
            job.cancel_requested = True
        return job.status


def mark_reading(db: Database, job_id: str, worker: str) -> bool:
    """Record that ``worker`` is about to give the job's rows to the solver; False if it no longer owns the running
    job. From here on a failure keeps the charge."""
    with db.write() as session:
        marked = session.execute(
            update(Job)
            .where(Job.id == job_id, Job.status == "running", Job.lease_owner == worker)
            .values(data_read_at=utcnow())
            .returning(Job.id)
        ).first()
        return marked is not None


def queued_before(db: Database, cutoff: datetime, limit: int = 1000) -> list[str]:
    """Ids of jobs queued (and not being cancelled) since before ``cutoff``, oldest first."""
    with db.read() as session:
        return list(
            session.execute(
                select(Job.id).where(Job.status == "queued", Job.cancel_requested.is_(False), Job.created_at < cutoff)
                .order_by(Job.created_at).limit(limit)
            ).scalars()
        )  # fmt: skip


def recover_lost(db: Database, now: datetime | None = None) -> list[str]:
    """Running jobs whose lease has expired (their worker died): re-queued if they never started reading their
    dataset (charge kept, no second charge later), else failed with the charge kept and no result."""
    now = now or utcnow()
    with db.write() as session:
        requeued = session.execute(
            update(Job)
            .where(Job.status == "running", Job.lease_expires_at < now, Job.data_read_at.is_(None),
                   Job.cancel_requested.is_(False))
            .values(status="queued", lease_owner=None, lease_expires_at=None, started_at=None, progress=0.0)
            .returning(Job.id)
        ).scalars().all()  # fmt: skip
        lost = session.execute(
            update(Job)
            .where(Job.status == "running", Job.lease_expires_at < now, Job.data_read_at.is_not(None))
            .values(status="failed", finished_at=now, lease_expires_at=None,
                    error={"type": "worker_lost", "detail": "the worker running this fit stopped; its charge is kept"})
            .returning(Job.id)
        ).scalars().all()  # fmt: skip
        unread = session.execute(  # a cancel was requested before the lost worker read anything: refunded
            update(Job)
            .where(Job.status == "running", Job.lease_expires_at < now)
            .values(status="cancelled", finished_at=now, lease_expires_at=None,
                    error={"type": "cancelled", "detail": "cancelled; its worker stopped before reading a row and "
                           "its charge was refunded"})
            .returning(Job.id, Job.dataset_id)
        ).all()  # fmt: skip
        for job_id, dataset_id in unread:
            refund(session, dataset_id, job_id, REFUND_NOTE)
        return [*requeued, *lost, *(job_id for job_id, _ in unread)]


def refuse_queued(db: Database, job_id: str, error: dict[str, Any]) -> bool:
    """A worker that cannot serve a queued job (e.g. its dataset store is not this worker's) ends it *before*
    claiming it: queued → failed with ``error``, the reservation released in the same transaction (refunded if an
    earlier attempt had charged it — it never read a row). False if the job was no longer queued."""
    with db.write() as session:
        row = session.execute(
            update(Job)
            .where(Job.id == job_id, Job.status == "queued")
            .values(status="failed", finished_at=utcnow(), error=error)
            .returning(Job.dataset_id)
        ).one_or_none()
        if row is None:
            return False
        charged = session.execute(
            select(LedgerEntry.id).where(LedgerEntry.job_id == job_id, LedgerEntry.kind == "charge")
        ).first()
        if charged is None:
            release(session, row.dataset_id, job_id, "refused before starting: the worker cannot read the dataset")
        else:
            refund(session, row.dataset_id, job_id, REFUND_NOTE)
        return True
