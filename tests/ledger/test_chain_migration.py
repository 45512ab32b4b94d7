"""Migration 0010 chains the entries a ledger already holds (issue 37, item 4), on SQLite and PostgreSQL: entries
written by the ledger, their hash columns dropped by a downgrade and backfilled by the upgrade, get exactly the hashes
the ledger gave them when it wrote them — the canonical content is the same whether it is built from the values
written or from the values a database returns — and each budget's head is its last entry's hash (its genesis when it
has none). The append-only triggers are back afterwards."""

from __future__ import annotations

import pytest
from ledger_helpers import fit_cost, make_dataset
from sqlalchemy import create_engine, select, text
from sqlalchemy.exc import DatabaseError

from privfit.db import Budget, LedgerEntry, make_database
from privfit.db.migrate import downgrade, upgrade
from privfit.ledger import charge, release, reserve
from privfit.ledger.chain import genesis_hash


def _chains(url: str) -> tuple[dict[int, tuple[str, str]], dict[str, str]]:
    db = make_database(url)
    with db.read() as session:
        entries = {e.id: (e.previous_hash, e.entry_hash) for e in session.scalars(select(LedgerEntry))}
        heads = {b.dataset_id: b.chain_head for b in session.scalars(select(Budget))}
    db.dispose()
    return entries, heads


def test_the_upgrade_gives_existing_entries_the_hashes_the_ledger_gave_them(empty_database_url: str) -> None:
    url = empty_database_url
    upgrade(url)
    db = make_database(url)
    busy, jobs = make_dataset(db, 5.0, jobs=3)
    quiet, _ = make_dataset(db, 1.0)
    with db.write() as session:
        for job_id in jobs:
            reserve(session, busy, job_id, fit_cost(), description="fit ünïcode ✓")
        charge(session, busy, jobs[0])
        release(session, busy, jobs[1])
    db.dispose()
    written, heads = _chains(url)
    assert len(written) == 5 and heads[quiet] == genesis_hash(quiet)

    downgrade(url, "0009")
    upgrade(url)
    backfilled, heads_after = _chains(url)
    assert backfilled == written and heads_after == heads

    engine = create_engine(url)
    with pytest.raises(DatabaseError, match="append-only"), engine.begin() as connection:
        connection.execute(text("UPDATE ledger_entries SET description = 'x'"))
    engine.dispose()
