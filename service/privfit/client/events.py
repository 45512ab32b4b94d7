"""Reading ``GET /v1/fits/{id}/events`` (Server-Sent Events, WHATWG HTML §9.2) in the client: the events of a stream's
lines, as the standard's parsing rules give them (``event:``, ``data:`` (joined by newlines), ``id:``; comment lines
and other fields ignored; an event ends at a blank line)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

__all__ = ["HEARTBEAT_SECONDS", "ServerEvent", "server_events"]

HEARTBEAT_SECONDS = 15.0
"""The server sends a comment line at least this often on a quiet stream (privfit.api.events; a test checks the two
agree): a read that waits twice as long has lost the stream."""


@dataclass(frozen=True)
class ServerEvent:
    """One event: its type (``message`` when the stream names none), its data, its id (or None)."""

    event: str
    data: str
    id: str | None = None


def server_events(lines: Iterable[str]) -> Iterator[ServerEvent]:
    """The events of a stream given as its lines (without line terminators)."""
    event, event_id = "", None
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield ServerEvent(event or "message", "\n".join(data), event_id)
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            event = value
        elif field == "data":
            data.append(value)
        elif field == "id":
            event_id = value
