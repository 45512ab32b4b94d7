"""A pool of worker threads that poll the jobs table: embedded in ``privfit serve`` or alone as ``privfit worker``."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from typing import TYPE_CHECKING

from privfit.datasets.store import DatasetStore
from privfit.db import Database

from .runner import run_job
from .states import DEFAULT_MAX_ATTEMPTS, next_queued, recover_lost

if TYPE_CHECKING:
    from privfit.scaleout.source import DaskRowSource

log = logging.getLogger("privfit.jobs")


class WorkerPool:
    """``size`` threads, each claiming and running one job at a time; :meth:`wake` shortens the idle wait."""

    def __init__(
        self,
        db: Database,
        store: DatasetStore,
        *,
        size: int,
        lease_seconds: float,
        heartbeat_seconds: float,
        poll_seconds: float,
        cancel_poll_seconds: float = 0.2,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        rows: DaskRowSource | None = None,
    ) -> None:
        self.db, self.store, self.size, self.rows = db, store, size, rows
        self.lease_seconds, self.heartbeat_seconds, self.poll_seconds = lease_seconds, heartbeat_seconds, poll_seconds
        self.cancel_poll_seconds, self.max_attempts = cancel_poll_seconds, max_attempts
        self.name = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        recovered = recover_lost(self.db, max_attempts=self.max_attempts)
        if recovered:
            log.warning("recovered lost jobs", extra={"job_ids": recovered})
        for index in range(self.size):
            name = f"{self.name}/{index}"
            thread = threading.Thread(target=self._loop, args=(name,), name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def wake(self) -> None:
        self._wake.set()

    def begin_stop(self) -> None:
        """Take no more jobs and tell the running fits to stop at their next step, without waiting: a stopping
        server calls it as soon as it stops accepting, before it lets requests in flight finish."""
        self._stop.set()
        self._wake.set()

    def stop(self, grace_seconds: float | None = None) -> bool:
        """Graceful shutdown: take no more jobs; running fits stop at their next step and go back to the queue with
        their charge, to run again from the start (:func:`~privfit.jobs.runner.run_job`'s ``stopping``). Waits at
        most ``grace_seconds`` in all (None: until they have stopped) and returns whether every thread ended; a fit
        still inside one long step then is left to its lease, whose expiry re-queues it the same way
        (:func:`~privfit.jobs.states.recover_lost`)."""
        self.begin_stop()
        deadline = None if grace_seconds is None else time.monotonic() + grace_seconds
        for thread in self._threads:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        alive = [thread.name for thread in self._threads if thread.is_alive()]
        if self.rows is not None and not alive:
            self.rows.close()
        if alive:
            log.warning("stopped with fits still running: left to their leases", extra={"threads": alive})
        return not alive

    def _loop(self, worker: str) -> None:
        since_recovery = 0.0
        while not self._stop.is_set():
            ran = False
            try:
                for job_id in next_queued(self.db):
                    if self._stop.is_set():
                        return
                    status = run_job(self.db, self.store, job_id, worker, lease_seconds=self.lease_seconds,
                                     heartbeat_seconds=self.heartbeat_seconds,
                                     cancel_poll_seconds=self.cancel_poll_seconds, max_attempts=self.max_attempts,
                                     stopping=self._stop, rows=self.rows)  # fmt: skip
                    if status is not None:
                        ran = True
                        break
                since_recovery += self.poll_seconds
                if since_recovery >= self.lease_seconds / 2:
                    since_recovery = 0.0
                    recover_lost(self.db, max_attempts=self.max_attempts)
            except Exception:
                log.exception("worker loop error")
            if not ran:
                self._wake.wait(self.poll_seconds)
                self._wake.clear()
