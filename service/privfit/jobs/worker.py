"""A pool of worker threads that poll the jobs table: embedded in ``privfit serve`` or alone as ``privfit worker``."""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid

from privfit.datasets.store import DatasetStore
from privfit.db import Database

from .runner import run_job
from .states import next_queued, recover_lost

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
    ) -> None:
        self.db, self.store, self.size = db, store, size
        self.lease_seconds, self.heartbeat_seconds, self.poll_seconds = lease_seconds, heartbeat_seconds, poll_seconds
        self.cancel_poll_seconds = cancel_poll_seconds
        self.name = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        recovered = recover_lost(self.db)
        if recovered:
            log.warning("recovered lost jobs", extra={"job_ids": recovered})
        for index in range(self.size):
            thread = threading.Thread(target=self._loop, args=(f"{self.name}/{index}",), daemon=True)
            thread.start()
            self._threads.append(thread)

    def wake(self) -> None:
        self._wake.set()

    def stop(self, timeout: float | None = None) -> None:
        """Stop taking jobs and wait for the running ones to end (graceful shutdown)."""
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout)

    def _loop(self, worker: str) -> None:
        since_recovery = 0.0
        while not self._stop.is_set():
            ran = False
            try:
                for job_id in next_queued(self.db):
                    if self._stop.is_set():
                        return
                    if run_job(self.db, self.store, job_id, worker, lease_seconds=self.lease_seconds,
                               heartbeat_seconds=self.heartbeat_seconds,
                               cancel_poll_seconds=self.cancel_poll_seconds) is not None:  # fmt: skip
                        ran = True
                        break
                since_recovery += self.poll_seconds
                if since_recovery >= self.lease_seconds / 2:
                    since_recovery = 0.0
                    recover_lost(self.db)
            except Exception:
                log.exception("worker loop error")
            if not ran:
                self._wake.wait(self.poll_seconds)
                self._wake.clear()
