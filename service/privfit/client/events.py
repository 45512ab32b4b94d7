"""Reading ``GET /v1/fits/{id}/events`` (Server-Sent Events, WHATWG HTML §9.2) in the client: the events of a stream's
lines, as the standard's parsing rules give them (``event:``, ``data:`` (joined by newlines), ``id:``; comment lines
and other fields ignored; an event ends at a blank line)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

__all__ = ["HEARTBEAT_SECONDS", "EventParser", "ServerEvent", "server_events"]

HEARTBEAT_SECONDS = 15.0
"""The server sends a comment line at least this often on a quiet stream (privfit.api.events; a test checks the two
agree): a read that waits twice as long has lost the stream."""


@dataclass(frozen=True)
class ServerEvent:
    """One event: its type (``message`` when the stream names none), its data, its id (or None)."""

    event: str
    data: str
    id: str | None = None


class EventParser:
    """A push parser: :meth:`feed` takes the stream's lines one at a time and answers each event as its blank line
    ends it (the sans-IO core of :func:`server_events`, used by the client's plans: privfit.client._plans)."""

    def __init__(self) -> None:
        self._event: str = ""
        self._id: str | None = None
        self._data: list[str] = []

    def feed(self, line: str) -> ServerEvent | None:
        """One line (without its terminator): the event it ends, or None."""
        if not line:
            done = ServerEvent(self._event or "message", "\n".join(self._data), self._id) if self._data else None
            self._event, self._data = "", []
            return done
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            self._event = value
        elif field == "data":
            self._data.append(value)
        elif field == "id":
            self._id = value
        return None


def server_events(lines: Iterable[str]) -> Iterator[ServerEvent]:
    """The events of a stream given as its lines (without line terminators)."""
    parser = EventParser()
    for line in lines:
        event = parser.feed(line)
        if event is not None:
            yield event
