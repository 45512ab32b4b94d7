"""Migration 0013 (the paged lists' indexes, issue 38 item 4), on SQLite and PostgreSQL, with rows in the tables: it
adds the ``(…, created_at, id)`` indexes the keyset pages read (replacing the single-column ``jobs`` indexes they
extend), and a downgrade restores the indexes of revision 0012; the rows are untouched both ways."""

from __future__ import annotations

from ledger_helpers import fit_cost, make_dataset
from sqlalchemy import func, inspect, select

from privfit.db import Job, make_database
from privfit.db.migrate import check, downgrade, upgrade
from privfit.ledger import reserve

PAGED = {
    "ix_jobs_dataset_created": ["dataset_id", "created_at", "id"],
    "ix_jobs_api_key_created": ["api_key_id", "created_at", "id"],
    "ix_jobs_created": ["created_at", "id"],
}
SINGLE = {"ix_jobs_dataset_id": ["dataset_id"], "ix_jobs_api_key_id": ["api_key_id"]}


def indexes(url: str, table: str) -> dict[str, list[str]]:
    db = make_database(url)
    try:
        return {index["name"]: index["column_names"] for index in inspect(db.engine).get_indexes(table)}
    finally:
        db.dispose()


def test_the_list_indexes_come_and_go_with_the_rows_kept(empty_database_url: str) -> None:
    url = empty_database_url
    upgrade(url)
    db = make_database(url)
    dataset_id, jobs = make_dataset(db, 1.0, jobs=3)
    with db.write() as session:
        reserve(session, dataset_id, jobs[0], fit_cost())
    db.dispose()
    jobs_indexes = indexes(url, "jobs")
    assert PAGED.items() <= jobs_indexes.items() and not SINGLE.keys() & jobs_indexes.keys()
    assert indexes(url, "datasets")["ix_datasets_created"] == ["created_at", "id"]
    downgrade(url, "0012")
    jobs_indexes = indexes(url, "jobs")
    assert SINGLE.items() <= jobs_indexes.items() and not PAGED.keys() & jobs_indexes.keys()
    assert "ix_datasets_created" not in indexes(url, "datasets")
    upgrade(url)
    check(url)
    db = make_database(url)
    with db.read() as session:
        assert session.scalar(select(func.count()).select_from(Job)) == 3
    db.dispose()
