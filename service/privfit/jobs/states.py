"""The job state machine (DESIGN §4): queued → running → succeeded | failed | cancelled, in the job's DB row.

Every transition is a conditional UPDATE whose WHERE clause states the expected current state, so a transition
happens at most once whatever the number of workers, redeliveries or crashes; ``rowcount`` tells the caller
whether it won. The ledger moves in the same transactions:

- ``claim``: queued → running **and** the reservation becomes a charge, in one transaction, before any row of
  the dataset is read. A job is charged at most once (``UNIQUE(job_id, kind)``).
- ``mark_reading``: committed just before the solver is given the dataset's rows (``data_read_at``).
- ``finish``: running → succeeded with the result, only by the lease owner and only if no cancel was requested
  (checked in the same UPDATE); the result is written once. A fit whose cancel committed first ends cancelled there
  (charge kept: it read rows).
- ``fail`` / ``end_cancelled``: running → failed / cancelled. **Refunds**: if the job never read a row
  (``data_read_at`` is NULL, checked in the same UPDATE), its charge is released in the same transaction — it
  released nothing that depends on the data (dataset deleted while queued, store unreachable, a transient error,
  a cancel before the rows were read); a job that read rows keeps its charge.
- ``cancel``: queued → cancelled with the reservation released (a re-queued job, charged when first claimed and
  never having read a row, is refunded too); running → ``cancel_requested`` (the solver stops at its next step:
  :mod:`privfit.jobs.cancellation`).
- ``recover_lost``: running jobs whose lease expired (their worker died) go back to queued with their charge,
  whether or not they had read rows (a later claim finds the charge and does not make a second one: ``charge`` is
  idempotent per job), and are run again from the start, up to ``max_attempts`` runs in all; past that they fail
  (:data:`FAILED_AFTER_READING`, charge kept, if a run read rows; refunded otherwise). A lost job whose cancel was
  requested ends cancelled (refunded if no run read a row).
- ``requeue_interrupted``: the same for a fit its own worker stopped — a graceful shutdown (SIGTERM) or a
  ``MemoryError`` — at a step boundary: back to queued with its charge, or failed past ``max_attempts``.
- ``requeue_unread``: running → queued with its charge, for a fit whose worker met a transient database fault before
  reading a row (as ``recover_lost`` does for a lost worker); ``hand_back_unread`` as well for a fit a shutdown
  stopped before it read a row, and that claim is not counted as a run.

**Runs again, charged once** (docs/privacy.md §10). ``data_read_at`` is kept when a job goes back to the queue, so
once any run has read rows the job is never refunded (a later cancel or failure keeps the charge). Nothing of an
interrupted run is released: the result is written only by :func:`finish`, once, by the lease owner. The events that
cause a re-run — a process killed or stopped, a machine lost, memory exhausted by the process's public-size
allocations — do not depend on the rows, so the released output is that of one run of the mechanism with fresh
randomness, and what an analyst sees of the runs (queued again, progress from 0) depends on those events only.

**Transient database faults.** Every function here runs its transaction through :meth:`Database.retrying`, and
every one is idempotent when repeated after a try whose commit went through but whose answer was lost: the
transitions are conditional UPDATEs that match once, and where the caller needs to know what the first try did it
is read back (a claim finds the job running under its worker; a result write or re-queue reads the final status).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from privfit.db import Database, Evaluation, Job, LedgerEntry
from privfit.db.models import utcnow
from privfit.ledger import charge, refund, release

from .cancellation import notify_cancel


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
    """Move ``job_id`` from queued to running for ``worker`` and charge its reservation; None if not queued.

    Retried on transient faults: a retry first looks whether an earlier try committed (the job is running under
    ``worker``: claimed and charged in one transaction) and then returns that claim, so a lost answer neither loses
    the job nor charges it twice (``charge`` is idempotent per job anyway)."""
    tries = 0

    def attempt() -> ClaimedJob | None:
        nonlocal tries
        tries += 1
        if tries > 1:
            mine = _running_under(db, job_id, worker)
            if mine is not None:
                return mine
        return _claim(db, job_id, worker, lease_seconds)

    return db.retrying(attempt, what="claim")


def _running_under(db: Database, job_id: str, worker: str) -> ClaimedJob | None:
    with db.read() as session:
        row = session.execute(
            select(Job.id, Job.dataset_id, Job.solver, Job.model, Job.params, Job.attempt)
            .where(Job.id == job_id, Job.status == "running", Job.lease_owner == worker)
        ).one_or_none()  # fmt: skip
    return None if row is None else ClaimedJob(row.id, row.dataset_id, row.solver, row.model, row.params, row.attempt)


def _claim(db: Database, job_id: str, worker: str, lease_seconds: float) -> ClaimedJob | None:
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

    def read() -> list[str]:
        with db.read() as session:
            return list(
                session.execute(
                    select(Job.id).where(Job.status == "queued", Job.cancel_requested.is_(False))
                    .order_by(Job.created_at).limit(16)
                ).scalars()
            )  # fmt: skip

    return db.retrying(read, what="next_queued")


def heartbeat(db: Database, job_id: str, worker: str, lease_seconds: float, progress: float) -> bool:
    """Renew the lease and record data-independent progress; returns whether a cancel was requested.

    Raises :class:`LeaseLostError` if the worker no longer owns the running job (it must stop without a result).
    Retried on transient faults (renewing a lease twice is harmless).
    """

    def beat() -> Any:
        with db.write() as session:
            return session.execute(
                update(Job)
                .where(Job.id == job_id, Job.status == "running", Job.lease_owner == worker)
                .values(lease_expires_at=utcnow() + timedelta(seconds=lease_seconds), progress=progress)
                .returning(Job.cancel_requested)
            ).one_or_none()

    row = db.retrying(beat, what="heartbeat")
    if row is None:
        raise LeaseLostError(job_id)
    return bool(row.cancel_requested)


class LeaseLostError(Exception):
    """The job is no longer running under this worker (recovered as lost, or finished elsewhere)."""


REFUND_NOTE = "refunded: the fit ended before reading any row, so nothing it released depends on the data"

FAILED_AFTER_READING = {
    "type": "fit_failed",
    "detail": "the fit failed after reading the data; no result was released and its privacy charge is kept",
}
"""The one error of every fit that read rows and then ended without a result (a solver error, or its runs
exhausted by lost or stopped workers): fixed, so nothing of it depends on the rows or on which cause it was."""

NEVER_STARTED = {
    "type": "fit_not_started",
    "detail": "the workers that took this fit stopped each time before it read the data; its privacy charge was "
    "refunded",
}
"""A fit whose every run was lost before it read a row (refunded)."""

#: Runs of one fit in all when ``PRIVFIT_FIT_MAX_ATTEMPTS`` is not passed (:class:`~privfit.settings.Settings`)
DEFAULT_MAX_ATTEMPTS = 3

_BACK_TO_QUEUE = {"status": "queued", "lease_owner": None, "lease_expires_at": None, "started_at": None,
                  "progress": 0.0}  # fmt: skip
"""The columns a running job gets back when it is queued again (its charge, ``attempt`` and ``data_read_at`` stay)."""


def _end_in(session: Session, job_id: str, worker: str, status: str, *conditions: Any, **values: Any) -> bool:
    """End the running job of ``worker`` in ``session``'s transaction (if ``conditions`` also hold); a failed or
    cancelled job that never read a row is refunded in the same transaction (module docstring)."""
    row = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.status == "running", Job.lease_owner == worker, *conditions)
        .values(status=status, finished_at=utcnow(), lease_expires_at=None, **values)
        .returning(Job.dataset_id, Job.data_read_at)
    ).one_or_none()
    if row is None:
        return False
    if status != "succeeded" and row.data_read_at is None:
        refund(session, row.dataset_id, job_id, REFUND_NOTE)
    elif status != "succeeded" and _claims_refund(values.get("error")):  # an earlier run read rows: charge kept
        session.execute(update(Job).where(Job.id == job_id).values(error=_as_charged(values["error"])))
    return True


def _claims_refund(error: dict[str, Any] | None) -> bool:
    detail = "" if error is None else str(error.get("detail", ""))
    return "refunded" in detail or "reservation was released" in detail


def _as_charged(error: dict[str, Any]) -> dict[str, Any]:
    """``error`` (which says the charge was refunded) for a job an earlier run of which read rows: its first clause,
    then that the charge is kept — such a job is never refunded (module docstring)."""
    head = str(error.get("detail", "")).split(";")[0]
    return {**error, "detail": f"{head}; an earlier run of this fit read the data, so its privacy charge is kept"}


def _end(db: Database, job_id: str, worker: str, status: str, **values: Any) -> bool:
    """:func:`_end_in` in a transaction of its own, retried on transient faults (a second try after a first that
    committed finds the job no longer running and changes nothing)."""

    def end() -> bool:
        with db.write() as session:
            return _end_in(session, job_id, worker, status, **values)

    return db.retrying(end, what=f"end {status}")


CANCELLED_RUNNING = {"type": "cancelled", "detail": "cancelled while running"}


def finish(db: Database, job_id: str, worker: str, result: dict[str, Any]) -> str | None:
    """Write the result once and mark the job succeeded — unless a cancel was requested: the flag is re-checked in
    the same transaction, and a fit whose cancel committed first ends ``cancelled`` without its result (charge kept:
    it read rows). Returns the final status, or None if this worker lost the job meanwhile (nothing written).

    Idempotent under retries: a second attempt after a commit whose answer was lost finds the job no longer
    running under this worker and writes nothing; :func:`final_status` then tells what the first one did."""
    tries = 0

    def write() -> str | None:
        nonlocal tries
        tries += 1
        with db.write() as session:
            if _end_in(session, job_id, worker, "succeeded", Job.cancel_requested.is_(False), result=result,
                       progress=1.0):  # fmt: skip
                return "succeeded"
            if _end_in(session, job_id, worker, "cancelled", Job.cancel_requested.is_(True), error=CANCELLED_RUNNING):
                return "cancelled"
        return final_status(db, job_id, worker) if tries > 1 else None

    # the fit has paid for its result: keep trying for longer than other writes (the lease is still renewed)
    return db.retrying(write, attempts=max(db.retry_attempts, FINISH_ATTEMPTS), what="finish")


#: Tries of the result write (:func:`finish`): with the doubling backoff capped at 2 s, about 20 s in all
FINISH_ATTEMPTS = 15


def fail(db: Database, job_id: str, worker: str, error: dict[str, Any]) -> bool:
    """Mark the job failed: refunded if it never read a row, charge kept otherwise. ``error`` must not contain
    anything computed from private rows, nor anything that depends on them (not even an exception's type)."""
    return _end(db, job_id, worker, "failed", error=error)


def end_cancelled(db: Database, job_id: str, worker: str) -> bool:
    """A running job stopped on request: cancelled, no result; refunded if it never read a row."""
    return _end(db, job_id, worker, "cancelled", error=CANCELLED_RUNNING)


def final_status(db: Database, job_id: str, worker: str) -> str | None:
    """The job's status if it has ended while ``worker`` held it (its lease owner), else None: what a retried
    transition whose first commit went through (its answer lost with the connection) reads back."""
    with db.read() as session:
        row = session.execute(select(Job.status, Job.lease_owner).where(Job.id == job_id)).one_or_none()
    if row is None or row.lease_owner != worker or row.status not in ("succeeded", "failed", "cancelled"):
        return None
    return str(row.status)


def stop_state(db: Database, job_id: str, worker: str) -> str | None:
    """What a running fit's stop callback polls (:class:`~privfit.jobs.cancellation.StopCheck`): ``"cancel"`` if
    a cancel was requested, ``"lost"`` if ``worker`` no longer runs the job, else None (one primary-key read)."""
    with db.read() as session:
        row = session.execute(
            select(Job.status, Job.lease_owner, Job.cancel_requested).where(Job.id == job_id)
        ).one_or_none()
    if row is None or row.status != "running" or row.lease_owner != worker:
        return "lost"
    return "cancel" if row.cancel_requested else None


def cancel(db: Database, job_id: str) -> str:
    """Cancel a job: queued → cancelled with its reservation released; running → cancel requested, and the runner
    of the job in this process (if any) is told at once (:func:`~privfit.jobs.cancellation.notify_cancel`); other
    processes' runners poll the flag (:class:`~privfit.jobs.cancellation.StopCheck`).

    Returns the job's status after the call. Retried on transient faults: a second try after a first that committed
    finds the job cancelled (or its cancel requested) and changes nothing.
    """
    status = db.retrying(lambda: _cancel(db, job_id), what="cancel")
    if status == "running":  # committed: tell this process's runner of the job at once (cancellation module)
        notify_cancel(job_id)
    return status


def _cancel(db: Database, job_id: str) -> str:
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
            elif job.data_read_at is not None:  # queued to run again after a run that read rows: charge kept
                job.error = {"type": "cancelled", "detail": "cancelled while queued to run again; an earlier run "
                             "read the data, so its privacy charge is kept"}  # fmt: skip
            else:  # re-queued after its worker was lost before reading a row: charged when first claimed, refunded
                job.error = {"type": "cancelled", "detail": "cancelled while re-queued; it never read a row and its "
                             "charge was refunded"}  # fmt: skip
                refund(session, job.dataset_id, job.id, REFUND_NOTE)
        elif job.status == "running":
            job.cancel_requested = True
        return str(job.status)


def mark_reading(db: Database, job_id: str, worker: str) -> bool:
    """Record that ``worker`` is about to give the job's rows to the solver; False if it no longer owns the running
    job. From here on a failure keeps the charge. Retried on transient faults (setting the mark again is harmless:
    only whether it is set matters)."""

    def mark() -> bool:
        with db.write() as session:
            marked = session.execute(
                update(Job)
                .where(Job.id == job_id, Job.status == "running", Job.lease_owner == worker)
                .values(data_read_at=utcnow())
                .returning(Job.id)
            ).first()
            return marked is not None

    return db.retrying(mark, what="mark_reading")


def requeue_unread(db: Database, job_id: str, worker: str) -> str | None:
    """Put back in the queue a running job of ``worker`` that never read a row (a transient database fault before
    its rows were given to the solver): its charge is kept and found by the next claim (``charge`` is idempotent per
    job), exactly as :func:`recover_lost` re-queues the job of a lost worker. A job whose cancel was requested
    meanwhile is cancelled instead (refunded if no run read a row, as :func:`end_cancelled`). Returns "queued",
    "cancelled", or None if the job is no longer running under ``worker``. Retried on transient faults: a second try
    after a first that committed changes nothing and reads back what the first did. (A job an earlier run of which
    read rows keeps ``data_read_at``, so it goes back with its charge and is never refunded.)"""
    return _requeue(db, job_id, worker, (), exhaust=False, what="requeue")


def hand_back_unread(db: Database, job_id: str, worker: str) -> str | None:
    """Put back in the queue a running job of ``worker`` that this process's shutdown stopped before the run read a
    row: as :func:`requeue_unread`, and the claim is not counted (``attempt`` goes back down by one), since the run
    neither read the data nor failed. Without it, two API processes stopping together could each count a run of a
    fit the first had handed back just before the second's stop began."""
    return _requeue(db, job_id, worker, (), exhaust=False, what="hand back", attempt=Job.attempt - 1)


def _requeue(db: Database, job_id: str, worker: str, conditions: tuple[Any, ...], *, exhaust: bool,
             what: str, **values: Any) -> str | None:  # fmt: skip
    """Running job of ``worker`` → queued (charge, attempt and ``data_read_at`` kept, unless ``values`` sets them)
    if ``conditions`` hold and no cancel was requested; else cancelled if one was; else, with ``exhaust``, failed
    (:data:`FAILED_AFTER_READING` if a run read rows, :data:`NEVER_STARTED` and refunded otherwise). Retried: a try
    after one that committed reads back what it did."""
    tries = 0

    def requeue() -> str | None:
        nonlocal tries
        tries += 1
        with db.write() as session:
            row = session.execute(
                update(Job)
                .where(Job.id == job_id, Job.status == "running", Job.lease_owner == worker,
                       Job.cancel_requested.is_(False), *conditions)
                .values(**_BACK_TO_QUEUE, **values)
                .returning(Job.id)
            ).first()  # fmt: skip
            if row is not None:
                return "queued"
            if _end_in(session, job_id, worker, "cancelled", Job.cancel_requested.is_(True), error=CANCELLED_RUNNING):
                return "cancelled"
            if exhaust and (
                _end_in(session, job_id, worker, "failed", Job.data_read_at.is_not(None), error=FAILED_AFTER_READING)
                or _end_in(session, job_id, worker, "failed", error=NEVER_STARTED)
            ):
                return "failed"
            if tries == 1:
                return None
            now = session.execute(select(Job.status).where(Job.id == job_id)).scalar_one_or_none()
        return "queued" if now == "queued" else final_status(db, job_id, worker)

    return db.retrying(requeue, what=what)


def queued_before(db: Database, cutoff: datetime, limit: int = 1000) -> list[str]:
    """Ids of jobs queued (and not being cancelled) since before ``cutoff``, oldest first."""

    def read() -> list[str]:
        with db.read() as session:
            return list(
                session.execute(
                    select(Job.id)
                    .where(Job.status == "queued", Job.cancel_requested.is_(False), Job.created_at < cutoff)
                    .order_by(Job.created_at).limit(limit)
                ).scalars()
            )  # fmt: skip

    return db.retrying(read, what="queued_before")


def recover_lost(db: Database, now: datetime | None = None, max_attempts: int = DEFAULT_MAX_ATTEMPTS) -> list[str]:
    """Running jobs whose lease has expired (their worker died): back to the queue with their charge (no second
    charge later) to run again from the start, whether or not they had read rows, while they have had fewer than
    ``max_attempts`` runs; past that, failed — :data:`FAILED_AFTER_READING` with the charge kept if a run read rows,
    :data:`NEVER_STARTED` and refunded otherwise. A lost job whose cancel was requested ends cancelled (refunded if
    no run read a row). Retried on transient faults (a second pass finds nothing left to recover)."""
    return db.retrying(lambda: _recover_lost(db, now or utcnow(), max_attempts), what="recover_lost")


def _recover_lost(db: Database, now: datetime, max_attempts: int) -> list[str]:
    expired = (Job.status == "running", Job.lease_expires_at < now)
    ended = {"finished_at": now, "lease_expires_at": None}
    with db.write() as session:
        requeued = session.execute(
            update(Job)
            .where(*expired, Job.cancel_requested.is_(False), Job.attempt < max_attempts)
            .values(**_BACK_TO_QUEUE)
            .returning(Job.id)
        ).scalars().all()  # fmt: skip
        exhausted = session.execute(
            update(Job)
            .where(*expired, Job.cancel_requested.is_(False), Job.data_read_at.is_not(None))
            .values(status="failed", error=FAILED_AFTER_READING, **ended)
            .returning(Job.id)
        ).scalars().all()  # fmt: skip
        cancelled = session.execute(  # a cancel was requested of a job a run of which read rows: charge kept
            update(Job)
            .where(*expired, Job.data_read_at.is_not(None))
            .values(status="cancelled", error=CANCELLED_RUNNING, **ended)
            .returning(Job.id)
        ).scalars().all()  # fmt: skip
        never_started = session.execute(
            update(Job)
            .where(*expired, Job.cancel_requested.is_(False))
            .values(status="failed", error=NEVER_STARTED, **ended)
            .returning(Job.id, Job.dataset_id)
        ).all()  # fmt: skip
        unread = session.execute(  # a cancel was requested before the lost worker read anything: refunded
            update(Job)
            .where(*expired)
            .values(status="cancelled", error={"type": "cancelled", "detail": "cancelled; its worker stopped before "
                    "reading a row and its charge was refunded"}, **ended)
            .returning(Job.id, Job.dataset_id)
        ).all()  # fmt: skip
        for job_id, dataset_id in (*never_started, *unread):
            refund(session, dataset_id, job_id, REFUND_NOTE)
        return [*requeued, *exhausted, *cancelled, *(job_id for job_id, _ in (*never_started, *unread))]


def requeue_interrupted(db: Database, job_id: str, worker: str, max_attempts: int = DEFAULT_MAX_ATTEMPTS) -> str | None:
    """A running job of ``worker`` that the worker itself stopped at a step boundary — a graceful shutdown
    (SIGTERM), or a ``MemoryError`` — goes back to the queue with its charge to run again from the start, as a lost
    worker's job does (:func:`recover_lost`): nothing of this run is released. Past ``max_attempts`` runs it fails
    (:data:`FAILED_AFTER_READING`, charge kept, if a run read rows; :data:`NEVER_STARTED`, refunded, otherwise); one
    whose cancel was requested ends cancelled. Returns "queued", "cancelled", "failed", or None if the job is no
    longer running under ``worker``. Retried on transient faults (a second try after a first that committed changes
    nothing and reads back what the first did)."""
    return _requeue(db, job_id, worker, (Job.attempt < max_attempts,), exhaust=True, what="requeue interrupted")


#: A private evaluation reads its n_val validation rows and releases a few noisy sums: seconds. One still running
#: this long after its admission belongs to an API process that died between its charge and its result.
ABANDONED_EVALUATION_SECONDS = 3600.0


def fail_abandoned_evaluations(db: Database, now: datetime | None = None) -> list[str]:
    """Evaluations still ``running`` :data:`ABANDONED_EVALUATION_SECONDS` after their admission: failed, with their
    charge kept (they may have read rows) and an error that quotes nothing. Their result is written once, only while
    running, so a process that comes back later cannot overwrite this. Retried on transient faults."""
    cutoff = (now or utcnow()) - timedelta(seconds=ABANDONED_EVALUATION_SECONDS)

    def fail() -> list[str]:
        with db.write() as session:
            return list(session.execute(
                update(Evaluation)
                .where(Evaluation.status == "running", Evaluation.created_at < cutoff)
                .values(status="failed", finished_at=now or utcnow(),
                        error={"type": "server_stopped", "detail": "the server stopped during this evaluation; "
                               "its charge is kept"})
                .returning(Evaluation.id)
            ).scalars().all())  # fmt: skip

    return db.retrying(fail, what="fail_abandoned_evaluations")


def refuse_queued(db: Database, job_id: str, error: dict[str, Any]) -> bool:
    """A worker that cannot serve a queued job (e.g. its dataset store is not this worker's) ends it *before*
    claiming it: queued → failed with ``error``, the reservation released in the same transaction (refunded if an
    earlier attempt had charged it — it never read a row). False if the job was no longer queued. Retried on
    transient faults (a second try finds the job no longer queued)."""
    return db.retrying(lambda: _refuse_queued(db, job_id, error), what="refuse_queued")


def _refuse_queued(db: Database, job_id: str, error: dict[str, Any]) -> bool:
    with db.write() as session:
        row = session.execute(
            update(Job)
            .where(Job.id == job_id, Job.status == "queued")
            .values(status="failed", finished_at=utcnow(), error=error)
            .returning(Job.dataset_id, Job.data_read_at)
        ).one_or_none()
        if row is None:
            return False
        if row.data_read_at is not None:  # an earlier run read rows: the charge is kept
            session.execute(update(Job).where(Job.id == job_id).values(error=_as_charged(error)))
            return True
        charged = session.execute(
            select(LedgerEntry.id).where(LedgerEntry.job_id == job_id, LedgerEntry.kind == "charge")
        ).first()
        if charged is None:
            release(session, row.dataset_id, job_id, "refused before starting: the worker cannot read the dataset")
        else:
            refund(session, row.dataset_id, job_id, REFUND_NOTE)
        return True
