"""Run one job: the only place that touches both the ledger and a solver (DESIGN §4).

Order of events, each step a separate commit:
1. :func:`~privfit.jobs.states.claim` — queued → running and reservation → charge, before any row is read;
2. the dataset's rows are loaded from the store (integrity-checked) and the solver runs with an OS-seeded
   generator, while a heartbeat thread renews the lease, publishes data-independent progress and relays
   cancellation requests;
3. the result is written once by the lease owner (a worker that lost its lease discards its result, so one
   charge never releases two outputs); failures keep the charge and record only a generic, data-free error.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from privfit.datasets.store import DatasetStore, DatasetStoreError
from privfit.db import Database, Dataset
from privfit.privacy import secure_generator
from privfit.solvers.base import FitCancelled, PublicMetadata
from privfit.solvers.registry import get_solver

from .states import ClaimedJob, LeaseLostError, claim, end_cancelled, fail, finish, heartbeat, mark_reading

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
    db: Database, store: DatasetStore, job_id: str, worker: str, *, lease_seconds: float, heartbeat_seconds: float
) -> str | None:
    """Claim and run ``job_id``; returns its final status, or None if another worker had it or it was not queued."""
    job = claim(db, job_id, worker, lease_seconds)
    if job is None:
        return None
    log.info("job started", extra={"job_id": job.id, "solver": job.solver, "attempt": job.attempt})
    monitor = _Monitor()
    beat = threading.Thread(
        target=_heartbeat_loop, args=(db, job, worker, lease_seconds, heartbeat_seconds, monitor), daemon=True
    )
    beat.start()
    try:
        return _execute(db, store, job, worker, monitor)
    finally:
        monitor.done.set()
        beat.join()


def _execute(db: Database, store: DatasetStore, job: ClaimedJob, worker: str, monitor: _Monitor) -> str | None:
    try:
        solver = get_solver(job.solver)
        resolved = solver.load_resolved(job.params)
        with db.read() as session:
            dataset = session.get(Dataset, job.dataset_id)
            meta = PublicMetadata(
                n=dataset.n, d=dataset.d, row_norm_bound=dataset.row_norm_bound, label_bound=dataset.label_bound,
                feature_names=tuple(dataset.feature_names),
            )  # fmt: skip
            storage_key = dataset.storage_key
        if storage_key is None:
            fail(
                db, job.id, worker, {"type": "dataset_deleted", "detail": "the dataset was deleted before the fit ran"}
            )
            return "failed"
        if not mark_reading(db, job.id, worker):
            monitor.lost.set()
            return None
        X, y = store.get(storage_key)

        def progress(fraction: float) -> None:
            monitor.progress = float(fraction)

        result = solver.fit(X, y, meta, resolved, secure_generator(), progress, monitor.cancel.is_set)
    except FitCancelled:
        if monitor.lost.is_set():
            return None
        end_cancelled(db, job.id, worker)
        log.info("job cancelled", extra={"job_id": job.id})
        return "cancelled"
    except DatasetStoreError as error:
        fail(db, job.id, worker, {"type": "dataset_unavailable", "detail": str(error)})
        return "failed"
    except Exception as error:
        # The exception's message may be computed from private rows: record and log only its type.
        log.error("job failed", extra={"job_id": job.id, "error_type": type(error).__name__})
        fail(db, job.id, worker, {"type": "solver_error", "detail": "the fit failed; no result was released and "
                                  "its privacy charge is kept", "error_type": type(error).__name__})  # fmt: skip
        return "failed"
    if monitor.lost.is_set() or not finish(db, job.id, worker, result.to_dict()):
        log.warning("job result discarded: lease lost", extra={"job_id": job.id})
        return None
    log.info("job succeeded", extra={"job_id": job.id})
    return "succeeded"
