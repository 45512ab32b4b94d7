"""``Idempotency-Key`` on the endpoints that charge the ledger (fit creation, private evaluation): a retried request
finds the row its first attempt created instead of being admitted and charged again.

The key (:data:`IdempotencyKey`) is 1 to :data:`IDEMPOTENCY_KEY_MAX_LENGTH` printable ASCII characters (U+0020–U+007E,
as the IETF draft's structured-field string; a fresh UUID is the usual choice). An empty header — also one of only
spaces, which HTTP strips to empty — is a 422 naming the header, not a key: every client sending it would otherwise
share one key and replay each other's first request. Other characters are refused too: HTTP carries header bytes,
which the server reads as Latin-1, so a UTF-8 key would be stored as different text (and may contain C1 controls).
"""

from __future__ import annotations

from typing import Annotated, TypeVar

from fastapi import Header
from pydantic import AfterValidator, Field, WithJsonSchema
from pydantic_core import PydanticCustomError
from sqlalchemy import select

from privfit.db import Database, Evaluation, Job

from .auth import Principal
from .problems import Problem

Charged = TypeVar("Charged", Job, Evaluation)

#: The longest key accepted: the ``idempotency_key`` columns hold 200 characters.
IDEMPOTENCY_KEY_MAX_LENGTH = 200

#: The key's form as a JSON-schema pattern: printable ASCII, not starting or ending with a space.
IDEMPOTENCY_KEY_PATTERN = "^[!-~](?:[ -~]*[!-~])?$"


def _check_key(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError(
            "idempotency_key_empty",
            "must not be empty: send a non-empty key (e.g. a fresh UUID), or no Idempotency-Key header at all",
        )
    for position, char in enumerate(value, start=1):
        if not " " <= char <= "~":
            raise PydanticCustomError(
                "idempotency_key_characters",
                "must be printable ASCII (U+0020–U+007E, e.g. a UUID): character {position} is U+{code}",
                {"position": position, "code": f"{ord(char):04X}"},
            )
    return value


#: The ``Idempotency-Key`` header of a charging request (module docstring); None when not sent.
IdempotencyKey = Annotated[
    Annotated[
        str,
        Field(max_length=IDEMPOTENCY_KEY_MAX_LENGTH),
        AfterValidator(_check_key),
        WithJsonSchema(
            {
                "type": "string",
                "minLength": 1,
                "maxLength": IDEMPOTENCY_KEY_MAX_LENGTH,
                "pattern": IDEMPOTENCY_KEY_PATTERN,
            }
        ),
    ]
    | None,
    Header(
        description="Makes a retried request safe: the same key and body answer the first request's resource, "
        f"charged once. 1 to {IDEMPOTENCY_KEY_MAX_LENGTH} printable ASCII characters (e.g. a fresh UUID); an empty "
        "key is a 422.",
    ),
]


def replayed(db: Database, table: type[Charged], principal: Principal, key: str, request_hash: str) -> Charged | None:
    """The row of ``table`` that ``principal`` created under ``key``, or None; a 409 when that request's body (its
    ``request_hash``) differs from this one's."""
    with db.read() as session:
        found = session.execute(
            select(table).where(table.api_key_id == principal.key_id, table.idempotency_key == key)
        ).scalar_one_or_none()
    if found is not None and found.request_hash != request_hash:
        raise Problem(409, "Idempotency key reused", "this Idempotency-Key was used with a different request body")
    return found
