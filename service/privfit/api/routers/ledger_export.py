"""``GET /v1/datasets/{id}/ledger/export``: a dataset's ledger as JSON lines with its hash chain (issue 37, item 4).

The first line is a header — the chain's format, the dataset, its genesis hash, the budget's ``head`` (the last
entry's hash) and how many entries follow; then one line per entry in chain order: its id, ``previous_hash``,
``entry_hash`` and the hashed ``content`` (:func:`privfit.ledger.chain.entry_content`). An auditor checks it
offline with ``privfit ledger verify FILE`` (:func:`privfit.ledger.chain.verify`), and keeps the head as an anchor
for the next check.

The header is read first; the entries exported are those with a budget version up to the header's (entries are
appended under the budget's row lock and committed with it, so every entry up to that version is committed and any
later one is left out): the export is one consistent prefix of the chain even while fits are admitted. Entries are
read in pages of :data:`PAGE_SIZE` in a worker thread (the response streams; memory stays one page).

Owners of the dataset and admins only (analysts: 403): the export is the whole ledger, every fit's entries included.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse
from sqlalchemy import func, literal, select, tuple_

from privfit.db import Budget, Database, LedgerEntry
from privfit.ledger.chain import FORMAT, canonical, entry_content, genesis_hash

from ..auth import Principal, current_principal, visible_dataset
from ..identifiers import id_path
from ..problems import problem_responses

router = APIRouter(prefix="/v1/datasets", tags=["datasets"])

PAGE_SIZE = 1000
"""Entries read per query while the export streams."""

MEDIA_TYPE = "application/x-ndjson"

_EXAMPLE = (
    '{"format":"privfit-ledger-chain/v1","dataset_id":"…","genesis":"…","head":"…","entries":2}\n'
    '{"id":1,"previous_hash":"…","entry_hash":"…","content":{"sequence":1,"kind":"reservation",…}}\n'
)


def _line(document: dict[str, Any]) -> bytes:
    return (canonical(document) + "\n").encode()


def _header(db: Database, dataset_id: str) -> tuple[dict[str, Any], int]:
    with db.read() as session:
        budget = session.get_one(Budget, dataset_id)
        version, head = budget.version, budget.chain_head
        count = session.scalar(select(func.count()).where(
            LedgerEntry.dataset_id == dataset_id, LedgerEntry.budget_version <= version
        ))  # fmt: skip
    header = {"format": FORMAT, "dataset_id": dataset_id, "genesis": genesis_hash(dataset_id), "head": head,
              "budget_version": version, "entries": int(count or 0)}  # fmt: skip
    return header, version


def _lines(db: Database, dataset_id: str, header: dict[str, Any], version: int) -> Iterator[bytes]:
    """The header, then every entry up to ``version`` in chain order (budget version, then id), page by page."""
    yield _line(header)
    after: tuple[int, int] = (-1, -1)
    while True:
        with db.read() as session:
            rows = list(session.scalars(
                select(LedgerEntry)
                .where(LedgerEntry.dataset_id == dataset_id, LedgerEntry.budget_version <= version,
                       tuple_(LedgerEntry.budget_version, LedgerEntry.id) > tuple_(*map(literal, after)))
                .order_by(LedgerEntry.budget_version, LedgerEntry.id).limit(PAGE_SIZE)
            ))  # fmt: skip
            chunk = b"".join(
                _line(
                    {
                        "id": row.id,
                        "previous_hash": row.previous_hash,
                        "entry_hash": row.entry_hash,
                        "content": entry_content(row),
                    }
                )
                for row in rows
            )
        if not rows:
            return
        yield chunk
        after = (rows[-1].budget_version, rows[-1].id)


@router.get(
    "/{dataset_id:id}/ledger/export",
    response_class=StreamingResponse,
    summary="The ledger with its hash chain, as JSON lines, for an offline audit (owners, admins)",
    responses={
        200: {
            "description": "A header line, then one line per entry in chain order (module docstring).",
            "content": {MEDIA_TYPE: {"schema": {"type": "string"}, "example": _EXAMPLE}},
        },
        **problem_responses(401, 403, 404, 503),
    },
)
def export_ledger(
    dataset_id: Annotated[str, id_path("dataset")],
    request: Request,
    principal: Principal = Depends(current_principal),  # noqa: B008
) -> StreamingResponse:
    """Every ledger entry of the dataset's budget (its privacy domain's: the header's ``dataset_id`` is the domain's
    first dataset) with its ``previous_hash`` and ``entry_hash``, after a header naming the budget's head; check it
    with ``privfit ledger verify`` (docs/privacy.md, "A tamper-evident ledger")."""
    db: Database = request.app.state.db
    dataset = visible_dataset(db, dataset_id, principal, manage=True, include_deleted=True)
    header, version = _header(db, dataset.domain_id)
    filename = f"ledger-{dataset.domain_id}.jsonl"
    return StreamingResponse(_lines(db, dataset.domain_id, header, version), media_type=MEDIA_TYPE,
                             headers={"Content-Disposition": f'attachment; filename="{filename}"'})  # fmt: skip
