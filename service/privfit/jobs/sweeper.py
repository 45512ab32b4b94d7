"""The sweeper every Celery worker process runs beside its consumer: lost leases and lost messages.

Every ``poll_seconds``·k (half a lease at most):

* :func:`~privfit.jobs.states.recover_lost` — a running job whose lease expired belongs to a dead worker: re-queued
  with its charge (never a second one) to run again from the start, or failed with its charge kept once it has had
  ``PRIVFIT_FIT_MAX_ATTEMPTS`` runs;
* jobs still queued ``redispatch_seconds`` after their creation or their last publication by this sweeper are
  published again (a message lost by a broker restart, or never published because the broker was down). A
  duplicate message is harmless: the row is claimed once.

:class:`OrphanSweeper` is the API's: at start-up and every ``orphan_sweep_seconds`` it removes private data that no
dataset accounts for (:func:`privfit.datasets.lifecycle.sweep_orphans`: uploads abandoned by a crash, partial
temporary files, stored matrices no live dataset or pending upload references), and fails the private evaluations
an API process left running when it died (charges kept).
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta

from privfit.datasets.lifecycle import SweepReport, sweep_orphans
from privfit.datasets.store import DatasetStore
from privfit.db import Database
from privfit.db.models import utcnow
from privfit.settings import Settings

from .dispatch import Dispatcher
from .states import fail_abandoned_evaluations, queued_before, recover_lost

log = logging.getLogger("privfit.jobs")


class PeriodicThread:
    """A daemon thread calling :meth:`sweep` every ``interval`` seconds until :meth:`stop`; a failed pass is
    logged (its error type only) and the next one runs on time."""

    interval: float

    def __init__(self, name: str) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def sweep(self) -> object:
        raise NotImplementedError

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.sweep()
            except Exception as error:
                log.warning("sweep failed", extra={"thread": self._thread.name, "error_type": type(error).__name__})


class Sweeper(PeriodicThread):
    """Lost leases and lost messages, every min(lease/2, max(poll, 1 s)) seconds."""

    def __init__(self, db: Database, settings: Settings, dispatcher: Dispatcher) -> None:
        super().__init__("privfit-sweeper")
        self.db, self.settings, self.dispatcher = db, settings, dispatcher
        self.interval = min(settings.lease_seconds / 2, max(settings.poll_seconds, 1.0))
        self._published: dict[str, float] = {}

    def sweep(self) -> tuple[list[str], list[str]]:
        """One pass: (jobs recovered from dead workers, jobs published again)."""
        recovered = recover_lost(self.db, max_attempts=self.settings.fit_max_attempts)
        if recovered:
            log.warning("recovered lost jobs", extra={"job_ids": recovered})
        grace = self.settings.redispatch_seconds
        now = time.monotonic()
        republished = []
        for job_id in queued_before(self.db, utcnow() - timedelta(seconds=grace)):
            if now - self._published.get(job_id, -float("inf")) >= grace:
                self.dispatcher.job_created(job_id)
                self._published[job_id] = now
                republished.append(job_id)
        if republished:
            log.info("queued jobs published again", extra={"job_ids": republished})
        self._published = {k: v for k, v in self._published.items() if now - v < 10 * grace}
        return recovered, republished


class OrphanSweeper(PeriodicThread):
    """A daemon thread running :func:`~privfit.datasets.lifecycle.sweep_orphans` every ``orphan_sweep_seconds``
    until :meth:`stop` (every API process runs one; concurrent sweeps are safe: each purge is decided under the
    key's lock)."""

    def __init__(self, db: Database, store: DatasetStore, settings: Settings) -> None:
        super().__init__("privfit-orphan-sweeper")
        self.db, self.store = db, store
        self.grace, self.interval = settings.upload_grace_seconds, settings.orphan_sweep_seconds

    def sweep(self) -> SweepReport:
        """One pass (also run once, before serving, at start-up); also ends the private evaluations whose API
        process died between their charge and their result (:func:`~privfit.jobs.states.fail_abandoned_evaluations`)."""
        abandoned = fail_abandoned_evaluations(self.db)
        if abandoned:
            log.warning("abandoned evaluations failed, charges kept", extra={"evaluation_ids": abandoned})
        return sweep_orphans(self.db, self.store, self.grace)
