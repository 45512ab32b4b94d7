"""The job state machine (DESIGN §4): queued → running → succeeded | failed | cancelled, in the job's DB row.

Every transition is a conditional UPDATE whose WHERE clause states the expected current state, so a transition
happens at most once whatever the number of workers, redeliveries or crashes; ``rowcount`` tells the caller
whether it won. The ledger moves in the same transactions:

- ``claim``: queued → running **and** the reservation becomes a charge, in one transaction, before any row of
  the dataset is read. A job is charged at most once (``UNIQUE(job_id, kind)``).
- ``finish``: running → succeeded with the result, only by the lease owner; the result is written once.
- ``fail``: running → failed; the charge is kept (rows may have been read).
- ``cancel``: queued → cancelled with the reservation released (a re-queued job keeps its charge); running →
  ``cancel_requested`` (the solver stops at its next step and the job ends cancelled with its charge kept).
- ``mark_reading``: committed just before the worker reads the dataset (``data_read_at``).
- ``recover_lost``: running jobs whose lease expired (their worker died) → failed, charge kept, no result; or, if
  the job never started reading its dataset, back to queued with its charge (a later claim finds the charge
  and does not make a second one: ``charge`` is idempotent per job).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select, update

from privfit.db import Database, Job, LedgerEntry
from privfit.db.models import utcnow
from privfit.ledger import charge, release


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


def _end(db: Database, job_id: str, worker: str, status: str, **values: Any) -> bool:
    with db.write() as session:
        result = session.execute(
            update(Job)
            .where(Job.id == job_id, Job.status == "running", Job.lease_owner == worker)
            .values(status=status, finished_at=utcnow(), lease_expires_at=None, **values)
        )
        return result.rowcount == 1


def finish(db: Database, job_id: str, worker: str, result: dict[str, Any]) -> bool:
    """Write the result once and mark the job succeeded; False if this worker lost the job meanwhile."""
    return _end(db, job_id, worker, "succeeded", result=result, progress=1.0)


def fail(db: Database, job_id: str, worker: str, error: dict[str, Any]) -> bool:
    """Mark the job failed (charge kept). ``error`` must not contain anything computed from private rows."""
    return _end(db, job_id, worker, "failed", error=error)


def end_cancelled(db: Database, job_id: str, worker: str) -> bool:
    """A running job stopped on request: cancelled, charge kept, no result."""
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
            else:  # re-queued after its worker was lost: it was charged when first claimed, and stays charged
                job.error = {"type": "cancelled", "detail": "cancelled while re-queued; its charge is kept"}
        elif job.status == "running":
            job.cancel_requested = True
        return job.status


def mark_reading(db: Database, job_id: str, worker: str) -> bool:
    """Record that ``worker`` is about to read the job's dataset; False if it no longer owns the running job."""
    with db.write() as session:
        result = session.execute(
            update(Job)
            .where(Job.id == job_id, Job.status == "running", Job.lease_owner == worker)
            .values(data_read_at=utcnow())
        )
        return result.rowcount == 1


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
        lost = (
            session.execute(
                update(Job)
                .where(Job.status == "running", Job.lease_expires_at < now)
                .values(
                    status="failed",
                    finished_at=now,
                    lease_expires_at=None,
                    error={"type": "worker_lost", "detail": "the worker running this fit stopped; its charge is kept"},
                )
                .returning(Job.id)
            )
            .scalars()
            .all()
        )
        return [*requeued, *lost]
