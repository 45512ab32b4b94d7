"""JSON for API responses: FastAPI's encoder, with non-finite floats (an ε of +∞: "no bound", "not admissible")
written as ``null`` — JSON has no Infinity, and Starlette refuses to render one — and every timestamp written in
UTC with its offset (``2026-01-02T03:04:05.123456+00:00``).

Timestamps are stored in UTC. PostgreSQL returns them aware (in the session's time zone), SQLite naive; both are
normalised here (:func:`utc`) so that a client sees the same RFC 3339 ``date-time`` whatever the database.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi.encoders import jsonable_encoder
from pydantic import AfterValidator, PlainSerializer, WithJsonSchema


def utc(value: datetime) -> datetime:
    """``value`` in UTC: a naive datetime (SQLite) is taken to be UTC already, an aware one is converted."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def utc_text(value: datetime) -> str:
    """The ISO-8601 text of ``value`` in UTC with its offset, e.g. ``2026-01-02T03:04:05.123456+00:00``."""
    return utc(value).isoformat()


#: A response timestamp: UTC, written as ISO-8601 with the ``+00:00`` offset (an RFC 3339 ``date-time``).
UtcDateTime = Annotated[
    datetime,
    AfterValidator(utc),
    PlainSerializer(utc_text, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "format": "date-time", "description": "UTC, ISO-8601 with offset"}),
]


def public_json(value: Any) -> Any:
    """``value`` as JSON-ready data; +∞, −∞ and NaN become ``None``, datetimes UTC ISO-8601 with offset."""
    return _finite(jsonable_encoder(value, custom_encoder={datetime: utc_text}))


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value
