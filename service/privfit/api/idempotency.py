"""``Idempotency-Key`` on the endpoints that charge the ledger (fit creation, private evaluation): a retried request
finds the row its first attempt created instead of being admitted and charged again."""

from __future__ import annotations

from typing import TypeVar

from sqlalchemy import select

from privfit.db import Database, Evaluation, Job

from .auth import Principal
from .problems import Problem

Charged = TypeVar("Charged", Job, Evaluation)


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
