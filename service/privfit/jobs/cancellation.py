"""Cancellation of running fits: the solver stops at its next step (issue 20).

A cancel request commits ``cancel_requested`` on the job's row (:func:`privfit.jobs.states.cancel`); three things
then carry it to the fit:

* **in-process** (the embedded pool of ``privfit serve``): :func:`~privfit.jobs.states.cancel` calls
  :func:`notify_cancel` after its commit, which sets the stop event of the job if this process runs it (the job
  runner registers it with :func:`watching` before it claims the job). The solver's stop callback, polled once per
  step, sees it at once;
* **out-of-process workers** (``privfit worker``, Celery): the stop callback (:class:`StopCheck`) reads the job's
  cancel flag from the database at most every ``PRIVFIT_CANCEL_POLL_SECONDS`` (0.2 s by default) — one indexed
  primary-key read;
* **the result commit** re-checks the flag in the transaction that writes the result
  (:func:`~privfit.jobs.states.finish`): a fit whose cancel committed before its result ends ``cancelled`` and
  releases nothing, even if its last step ran before the cancel arrived.

The ledger does not change: a running fit that is cancelled keeps its charge if it read rows, and is refunded if it
never did (:mod:`privfit.jobs.states`). When the fit stops depends on the request time and the public step count
only: the solvers' per-step work does not depend on the rows (DESIGN §4).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

log = logging.getLogger("privfit.jobs")


class CancelRegistry:
    """The stop events of the jobs this process is running, by job id (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: dict[str, set[threading.Event]] = {}

    @contextmanager
    def watching(self, job_id: str, event: threading.Event) -> Iterator[None]:
        """Register ``event`` as a stop event of ``job_id`` for the duration of the block."""
        with self._lock:
            self._events.setdefault(job_id, set()).add(event)
        try:
            yield
        finally:
            with self._lock:
                events = self._events.get(job_id)
                if events is not None:
                    events.discard(event)
                    if not events:
                        del self._events[job_id]

    def notify(self, job_id: str) -> bool:
        """Set the stop events of ``job_id``; whether this process was running it."""
        with self._lock:
            events = list(self._events.get(job_id, ()))
        for event in events:
            event.set()
        return bool(events)


REGISTRY = CancelRegistry()
"""This process's registry (the embedded pool's runners and the API's cancel requests share it)."""


def notify_cancel(job_id: str) -> bool:
    """Tell this process's runner of ``job_id`` (if any) that a cancel was committed; whether one was running it."""
    return REGISTRY.notify(job_id)


def watching(job_id: str, event: threading.Event) -> AbstractContextManager[None]:
    """Register ``event`` as the stop event of ``job_id`` in this process for the duration of the block."""
    return REGISTRY.watching(job_id, event)


class StopCheck:
    """The solver's stop callback: True once the job's stop event is set or its process is stopping
    (``process_stopping``), polling the database's cancel flag at most every ``every`` seconds on the way (for
    cancels committed by another process).

    ``poll()`` returns ``"cancel"`` (cancel requested), ``"lost"`` (this worker no longer runs the job) or None; a
    poll that fails (a database fault) is logged and retried at the next interval, it never fails the fit.
    """

    def __init__(
        self,
        event: threading.Event,
        poll: Callable[[], str | None],
        every: float,
        on_lost: Callable[[], None],
        process_stopping: threading.Event | None = None,
    ) -> None:
        self.event, self.poll, self.every, self.on_lost = event, poll, every, on_lost
        self.process_stopping = process_stopping
        self._next = time.monotonic() + every

    def stopping(self) -> bool:
        """Whether the process running the fit is shutting down (the fit is then queued again, not cancelled)."""
        return self.process_stopping is not None and self.process_stopping.is_set()

    def __call__(self) -> bool:
        if self.event.is_set() or self.stopping():
            return True
        now = time.monotonic()
        if now >= self._next:
            self._next = now + self.every
            try:
                state = self.poll()
            except Exception as error:
                log.warning("cancel poll failed", extra={"error_type": type(error).__name__})
                return False
            if state == "lost":
                self.on_lost()
                self.event.set()
            elif state == "cancel":
                self.event.set()
        return self.event.is_set()
