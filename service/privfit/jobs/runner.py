"""Run one job: the only place that touches both the ledger and a solver (DESIGN §4).

Order of events, each step a separate commit:
1. :func:`~privfit.jobs.states.claim` — queued → running and reservation → charge, before any row is read;
2. the dataset's matrix is loaded from the store (integrity-checked);
3. :func:`~privfit.jobs.states.mark_reading` — ``data_read_at`` is committed, then the solver runs on the rows with
   an OS-seeded generator, while a heartbeat thread renews the lease and publishes data-independent progress; the
   solver's stop callback, polled once per step, sees a cancel at once (from this process) or within
   ``cancel_poll_seconds`` (from another: :mod:`privfit.jobs.cancellation`);
4. the result is written once by the lease owner, unless a cancel committed first (checked in the same
   transaction: the fit ends cancelled and releases nothing); a worker that lost its lease discards its result, so
   one charge never releases two outputs.

Before step 1, a worker whose dataset store is not the one holding the job's dataset (two processes with
different ``PRIVFIT_DATA_DIR`` on one database) refuses the job before charging it: failed with
``dataset_store_mismatch``, its reservation released, and the operator told in the log
(:func:`privfit.datasets.lifecycle.store_mismatch`).

A fit stopped by its process's shutdown (``stopping``: SIGTERM) at its next step, or whose solver ran short of
memory, goes back to the queue with its charge and runs again from the start
(:func:`~privfit.jobs.states.requeue_interrupted`, at most ``max_attempts`` runs; docs/privacy.md §10): nothing of
the interrupted run is released, and the cause is the machine, not the rows.

A fit that ends before step 3 (dataset deleted while queued, store unreachable or corrupt, a cancel) released
nothing that depends on the data: it fails or is cancelled and its charge is refunded in the same transaction
(:mod:`privfit.jobs.states`). Every database step is retried on transient faults
(:meth:`~privfit.db.Database.retrying`; each transition is idempotent); a transient database fault that outlives the
retries before step 3 is no failure of the fit: it goes back to the queue with its charge, as a lost worker's unread
fit does (:func:`_database_fault_before_reading`). A fit that fails after step 3 keeps its charge and shows the
analyst one fixed, data-free error — never the exception's type or message, which may depend on the rows; those go
to the server log for owners and operators.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy import select

from privfit.datasets.lifecycle import store_mismatch
from privfit.datasets.store import DatasetStore, DatasetStoreError
from privfit.db import Database, Dataset, Job
from privfit.db.engine import is_transient
from privfit.privacy import secure_generator
from privfit.solvers.base import FitCancelled, PublicMetadata
from privfit.solvers.design_cache import design_cache
from privfit.solvers.registry import get_solver

from .cancellation import StopCheck, watching

if TYPE_CHECKING:
    from privfit.scaleout.source import DaskRowSource
from .metadata import public_metadata
from .states import (
    DEFAULT_MAX_ATTEMPTS,
    FAILED_AFTER_READING,
    ClaimedJob,
    LeaseLostError,
    claim,
    end_cancelled,
    fail,
    finish,
    hand_back_unread,
    heartbeat,
    mark_reading,
    refuse_queued,
    requeue_interrupted,
    requeue_unread,
    stop_state,
)

__all__ = ["DATABASE_UNAVAILABLE", "FAILED_AFTER_READING", "MAX_FAULTED_ATTEMPTS", "STORE_MISMATCH", "run_job"]

log = logging.getLogger("privfit.jobs")


@dataclass
class _Monitor:
    """Shared state between the fitting thread and its heartbeat thread."""

    progress: float = 0.0
    cancel: threading.Event = field(default_factory=threading.Event)
    lost: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)


def _heartbeat_loop(db: Database, job: ClaimedJob, worker: str, lease: float, every: float, monitor: _Monitor) -> None:
    while not monitor.done.wait(every):
        try:
            if heartbeat(db, job.id, worker, lease, monitor.progress):
                monitor.cancel.set()
        except LeaseLostError:
            monitor.lost.set()
            monitor.cancel.set()
            return
        except Exception:
            log.warning("heartbeat failed", extra={"job_id": job.id})


def run_job(
    db: Database,
    store: DatasetStore,
    job_id: str,
    worker: str,
    *,
    lease_seconds: float,
    heartbeat_seconds: float,
    cancel_poll_seconds: float = 0.2,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    stopping: threading.Event | None = None,
    rows: DaskRowSource | None = None,
) -> str | None:
    """Claim and run ``job_id``; returns its final status ("queued" if it went back to the queue to run again), or
    None if another worker had it or it was not queued.

    A cancel reaches the running fit at its next step (:mod:`privfit.jobs.cancellation`): at once from this
    process (its stop event is registered before the claim), within ``cancel_poll_seconds`` from another. So does
    ``stopping`` (set when this process shuts down): the fit then goes back to the queue with its charge, to run
    again from the start (:func:`~privfit.jobs.states.requeue_interrupted`; at most ``max_attempts`` runs).
    ``rows`` (``PRIVFIT_DASK_SCHEDULER``): the Dask cluster the fits it can serve run on
    (:mod:`privfit.scaleout.source`); the others, and every fit without it, read their dataset into memory."""
    if _refused_for_store(db, store, job_id):
        return "failed"
    monitor = _Monitor()
    with watching(job_id, monitor.cancel):
        job = claim(db, job_id, worker, lease_seconds)
        if job is None:
            return None
        log.info("job started", extra={"job_id": job.id, "solver": job.solver, "attempt": job.attempt})
        beat = threading.Thread(
            target=_heartbeat_loop, args=(db, job, worker, lease_seconds, heartbeat_seconds, monitor), daemon=True
        )
        beat.start()
        stop = StopCheck(monitor.cancel, lambda: stop_state(db, job_id, worker), cancel_poll_seconds, monitor.lost.set,
                         stopping)  # fmt: skip
        try:
            return _execute(db, store, job, worker, monitor, stop, max_attempts, rows)
        finally:
            monitor.done.set()
            beat.join()


STORE_MISMATCH = {
    "type": "dataset_store_mismatch",
    "detail": "the worker that took this fit cannot read the dataset's store (a deployment misconfiguration, "
    "reported to the operator in the server log); the fit did not start and its reservation was released",
}


def _refused_for_store(db: Database, store: DatasetStore, job_id: str) -> bool:
    """Whether the queued job's dataset lives in another store than this worker's; if so the job is refused before
    it is claimed or charged, and the operator is told why (the analyst gets :data:`STORE_MISMATCH`)."""

    def read() -> str | None:
        with db.read() as session:
            return session.scalar(
                select(Dataset.store_id).join(Job, Job.dataset_id == Dataset.id).where(Job.id == job_id)
            )

    reason = store_mismatch(db.retrying(read, what="dataset store id"), store)
    if reason is None or not refuse_queued(db, job_id, STORE_MISMATCH):
        return False
    log.error("fit refused before charging: %s", reason, extra={"job_id": job_id})
    return True


def forget_deleted_designs(db: Database) -> int:
    """Drop this process's shared designs (:mod:`privfit.solvers.design_cache`) of datasets deleted since: an entry's
    dataset key is (dataset id, storage key), and a deleted dataset's row no longer holds that storage key. One query
    over the cached ids; returns how many entries were dropped."""
    cache = design_cache()
    cached = cache.dataset_keys()
    if not cached:
        return 0
    ids = {key[0] for key in cached if isinstance(key, tuple)}
    with db.read() as session:
        live = set(session.execute(select(Dataset.id, Dataset.storage_key).where(Dataset.id.in_(ids))).tuples())
    return cache.forget({key for key in cached if key not in live})


def _dataset_of(db: Database, dataset_id: str) -> tuple[str | None, PublicMetadata | None]:
    """The dataset's storage key (None once deleted) and public metadata (None if the row is gone)."""
    with db.read() as session:
        dataset = session.get(Dataset, dataset_id)
        if dataset is None:
            return None, None
        return dataset.storage_key, public_metadata(dataset)


#: A fit that met transient database faults before reading a row this many times (claims) fails, refunded
MAX_FAULTED_ATTEMPTS = 5

DATABASE_UNAVAILABLE = {
    "type": "database_unavailable",
    "detail": "the database was unavailable each time this fit was about to start; it did not read the data and its "
    "privacy charge was refunded",
}


def _database_fault_before_reading(db: Database, job: ClaimedJob, worker: str, error: Exception) -> str | None:
    """A transient database fault outlived the retries before the fit read a row: nothing depends on the data and
    the solver never ran, so this is no solver failure. The fit goes back to the queue with its charge (the next
    claim finds it), as a lost worker's unread fit does; after :data:`MAX_FAULTED_ATTEMPTS` claims it fails with
    ``database_unavailable`` and is refunded (the existing rule for a fit that ends before reading); one whose cancel
    was requested meanwhile ends cancelled. If even that write fails, the job keeps its lease until it expires and the
    sweep re-queues it (:func:`~privfit.jobs.states.recover_lost`)."""
    log.warning("transient database fault before reading", extra={"job_id": job.id,
                "error_type": type(error).__name__, "attempt": job.attempt})  # fmt: skip
    try:
        if job.attempt >= MAX_FAULTED_ATTEMPTS:
            return "failed" if fail(db, job.id, worker, DATABASE_UNAVAILABLE) else None
        return requeue_unread(db, job.id, worker)
    except Exception as again:
        log.warning("job left to lease expiry", extra={"job_id": job.id, "error_type": type(again).__name__})
        return None


def _interrupted(db: Database, job: ClaimedJob, worker: str, max_attempts: int, reason: str,
                 reading: bool = True) -> str | None:  # fmt: skip
    """This worker stopped the fit at a step boundary for a reason that does not depend on the rows (``reason``:
    the process is shutting down, or memory ran out for allocations whose sizes are public): back to the queue with
    its charge to run again from the start (:func:`~privfit.jobs.states.requeue_interrupted`; a run stopped before it
    read a row is not counted, :func:`~privfit.jobs.states.hand_back_unread`). If even that write fails, the job
    keeps its lease until it expires and the sweep re-queues it."""
    log.warning("job interrupted", extra={"job_id": job.id, "reason": reason, "attempt": job.attempt})
    try:
        if not reading:
            return hand_back_unread(db, job.id, worker)
        return requeue_interrupted(db, job.id, worker, max_attempts)
    except Exception as again:
        log.warning("job left to lease expiry", extra={"job_id": job.id, "error_type": type(again).__name__})
        return None


def _execute(
    db: Database, store: DatasetStore, job: ClaimedJob, worker: str, monitor: _Monitor, stop: StopCheck,
    max_attempts: int, rows: DaskRowSource | None = None,
) -> str | None:  # fmt: skip
    reading = False
    try:
        solver = get_solver(job.solver)
        resolved = solver.load_resolved(job.params)
        db.retrying(lambda: forget_deleted_designs(db), what="datasets of the shared designs")
        storage_key, meta = db.retrying(lambda: _dataset_of(db, job.dataset_id), what="dataset of a job")
        if storage_key is None or meta is None:
            fail(db, job.id, worker, {"type": "dataset_deleted", "detail": "the dataset was deleted before the fit "
                                      "ran; its privacy charge was refunded"})  # fmt: skip
            return "failed"
        key = storage_key
        # on the Dask cluster (PRIVFIT_DASK_SCHEDULER) where the store, the dataset and the solver allow it: the
        # workers read the partitions; else the matrix is read here (``units``: each row's privacy unit, or None)
        partitions = None if rows is None else rows.partitions_for(store, key, solver, meta, resolved)
        if partitions is None:
            X, y, units = db.retrying(lambda: store.read(key), what="dataset matrix")
        if stop():
            raise FitCancelled(0, 1)
        if not mark_reading(db, job.id, worker):
            monitor.lost.set()
            return None
        reading = True

        def progress(fraction: float) -> None:
            monitor.progress = float(fraction)

        if partitions is None:
            # the dataset's id and storage key (the content hash store.read checked X and y against) name the rows:
            # a solver may share what it derives from them with this process's next fit of the dataset
            # (privfit.solvers.design_cache; the id keeps two datasets with equal rows apart)
            dataset_key = (job.dataset_id, key)
            result = solver.fit(X, y, meta, resolved, secure_generator(), progress, stop, units=units,
                                dataset_key=dataset_key)  # fmt: skip
        else:
            try:
                result = solver.fit_partitioned(partitions, meta, resolved, secure_generator(), progress, stop)
            finally:
                partitions.release()  # the workers keep no row of the dataset past its fit
    except FitCancelled:
        if monitor.lost.is_set():
            return None
        if stop.stopping() and not monitor.cancel.is_set():
            return _interrupted(db, job, worker, max_attempts, "shutdown", reading)
        end_cancelled(db, job.id, worker)
        log.info("job cancelled", extra={"job_id": job.id})
        return "cancelled"
    except DatasetStoreError as error:
        log.error("dataset unavailable", extra={"job_id": job.id, "error_type": type(error).__name__,
                                                "reading": reading})  # fmt: skip
        if reading:  # a partition failed its check during a partitioned fit: rows were read, the charge is kept
            fail(db, job.id, worker, FAILED_AFTER_READING)
        else:
            fail(db, job.id, worker, {"type": "dataset_unavailable", "detail": f"{error}; the fit did not read the "
                                      "data and its privacy charge was refunded"})  # fmt: skip
        return "failed"
    except MemoryError:  # allocation sizes are functions of public shapes: the machine, not the rows, ran short
        return _interrupted(db, job, worker, max_attempts, "memory")
    except Exception as error:
        if not reading and is_transient(error):
            return _database_fault_before_reading(db, job, worker, error)
        # Owners and operators read the type in the server log; the analyst's record must not depend on the rows.
        log.error("job failed", extra={"job_id": job.id, "error_type": type(error).__name__, "reading": reading})
        if reading:
            fail(db, job.id, worker, FAILED_AFTER_READING)
        else:
            fail(db, job.id, worker, {"type": "fit_failed_before_reading", "detail": "the fit failed before reading "
                                      "the data; its privacy charge was refunded"})  # fmt: skip
        return "failed"
    status = None if monitor.lost.is_set() else finish(db, job.id, worker, result.to_dict())
    if status not in ("succeeded", "cancelled"):  # None, or "failed" if recovered as lost meanwhile
        log.warning("job result discarded: lease lost", extra={"job_id": job.id})
    elif status == "cancelled":  # the cancel committed before the result: nothing is released, the charge is kept
        log.info("job cancelled before its result was written", extra={"job_id": job.id})
    else:
        log.info("job succeeded", extra={"job_id": job.id})
    return status
