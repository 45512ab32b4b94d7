"""Live fit events: ``GET /v1/fits/{id}/events`` as Server-Sent Events (the WHATWG HTML standard, §9.2).

A client that waits for a fit opens one stream instead of polling ``GET /v1/fits/{id}``. The stream sends

* ``event: fit`` with the fit's JSON (as ``GET /v1/fits/{id}`` shows it) when the stream opens and each time its
  status, progress or cancel request changes, then closes after the event that shows a terminal state (succeeded,
  failed, cancelled) with ``event: end`` (``data: {"reason": "finished"}``);
* a comment line (``: keep-alive``) every :data:`HEARTBEAT_SECONDS` while nothing changes, so proxies and clients
  see a live connection;
* ``event: end`` with ``reason`` ``"timeout"`` after ``event_stream_seconds`` (a client reconnects: the stream
  starts again with the current state) or ``"server_stopping"`` when the process stops (SIGTERM): a stream never
  holds a stopping process past its next poll; ``"unauthorized"`` when the key stopped being accepted or the fit
  stopped being visible to it meanwhile (a revoked key or grant: checked at every poll, as every request checks it).

**Where the events come from.** The database row of the job is the job of record (DESIGN §4): workers in any
process or on any machine (the embedded pool, Celery workers) write status and progress there, and every API process
reads it. Each stream reads its fit's row every ``event_poll_seconds`` in the threadpool (never on the event loop),
so events work across API processes and with Celery without a broker of their own; a change reaches the client
within one poll interval of the worker's write (progress is written at each heartbeat).

**What an analyst observes** is what ``GET /v1/fits/{id}`` shows, at the same instants it would show it: status,
data-independent progress, the result once written (DESIGN §1.3, docs/privacy.md §7). Who may open a stream is who may
read the fit (:func:`~privfit.api.routers.fits.visible_job`, checked before the stream opens: a 404 otherwise).

**Bounded.** At most ``max_event_streams`` streams are open in one API process (:class:`EventStreams`); one more is
answered 429 with ``Retry-After`` before it opens (the client then polls). A stream whose client went away is closed
at its next poll, and its slot freed even if the response never started (a finalizer on the stream).
"""

from __future__ import annotations

import asyncio
import json
import time
import weakref
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

__all__ = ["EVENT_STREAM_RETRY_AFTER_SECONDS", "HEARTBEAT_SECONDS", "EventStreams", "fit_event_stream"]

HEARTBEAT_SECONDS = 15.0
"""A comment line is sent after this long without an event."""
EVENT_STREAM_RETRY_AFTER_SECONDS = 5
"""The ``Retry-After`` of the 429 answered when every event stream slot of the process is taken."""
TERMINAL = frozenset({"succeeded", "failed", "cancelled"})


class EventStreams:
    """The fit-event streams open in this API process: at most ``limit`` at once, and the stop flag that ends them
    when the process stops. Used on the event loop only (no lock: no ``await`` between a check and its update)."""

    def __init__(self, limit: int, poll_seconds: float, max_seconds: float) -> None:
        self.limit, self.poll_seconds, self.max_seconds = limit, poll_seconds, max_seconds
        self.active = 0
        self.stopping = False

    def admit(self) -> Callable[[], None] | None:
        """A slot for one more stream, as the function that frees it (idempotent), or None when all are taken."""
        if self.active >= self.limit:
            return None
        self.active += 1
        freed = False

        def free() -> None:
            nonlocal freed
            if not freed:
                freed = True
                self.active -= 1

        return free

    def stop(self) -> None:
        """The process is stopping: every open stream ends at its next poll (``event: end``, server_stopping)."""
        self.stopping = True


def _event(name: str, data: Any, event_id: int | None = None) -> bytes:
    lines = [f"event: {name}"]
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines.append(f"data: {json.dumps(data, separators=(',', ':'), default=str)}")
    return ("\n".join(lines) + "\n\n").encode()


def fit_event_stream(
    request: Request,
    streams: EventStreams,
    free: Callable[[], None],
    read_fit: Callable[[], dict[str, Any] | None],
) -> AsyncIterator[bytes]:
    """The event stream of one fit (module docstring). ``read_fit`` reads the fit's JSON (blocking: it runs in the
    threadpool), or None when the caller may no longer see it; ``free`` frees the stream's slot
    (:meth:`EventStreams.admit`), when the stream ends or, if it never started, when it is collected."""

    async def events() -> AsyncIterator[bytes]:
        try:
            started = last_sent = time.monotonic()
            seen: tuple[Any, ...] | None = None
            count = 0
            while True:
                fit = await run_in_threadpool(read_fit)
                if fit is None:
                    yield _event("end", {"reason": "unauthorized"})
                    return
                state = (fit.get("status"), fit.get("progress"), fit.get("cancel_requested"))
                now = time.monotonic()
                if state != seen:
                    seen, count, last_sent = state, count + 1, now
                    yield _event("fit", fit, count)
                    if fit.get("status") in TERMINAL:
                        yield _event("end", {"reason": "finished"})
                        return
                elif now - last_sent >= HEARTBEAT_SECONDS:
                    last_sent = now
                    yield b": keep-alive\n\n"
                if streams.stopping or now - started >= streams.max_seconds:
                    yield _event("end", {"reason": "server_stopping" if streams.stopping else "timeout"})
                    return
                await asyncio.sleep(streams.poll_seconds)
                if await request.is_disconnected():
                    return
        finally:
            free()

    stream = events()
    weakref.finalize(stream, free)  # a response that never started still frees its slot
    return stream
