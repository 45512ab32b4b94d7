"""Migration 0012 (privacy domains, issue 37 item 2), on SQLite and PostgreSQL: every existing dataset is its own
domain (its own budget, as before), and a downgrade is refused while a dataset spends another's budget (its fits
would be left without one)."""

from __future__ import annotations

import pytest
from ledger_helpers import fit_cost, make_dataset
from sqlalchemy import select, update

from privfit.db import Dataset, make_database
from privfit.db.migrate import check, downgrade, upgrade
from privfit.ledger import reserve


def test_existing_datasets_are_their_own_domains_and_a_downgrade_keeps_members(empty_database_url: str) -> None:
    url = empty_database_url
    upgrade(url)
    db = make_database(url)
    first, jobs = make_dataset(db, 1.0, jobs=1)
    second, _ = make_dataset(db, 2.0)
    with db.write() as session:  # rows referencing the datasets: neither direction may rebuild the table
        reserve(session, first, jobs[0], fit_cost())
    db.dispose()
    downgrade(url, "0011")
    upgrade(url)
    db = make_database(url)
    with db.read() as session:
        assert session.scalars(select(Dataset.budget_dataset_id)).all() == [None, None]  # each its own domain
    with db.write() as session:
        session.execute(update(Dataset).where(Dataset.id == second).values(budget_dataset_id=first))
    db.dispose()
    with pytest.raises(RuntimeError, match="spend another dataset's budget"):
        downgrade(url, "0011")
    db = make_database(url)
    with db.write() as session:
        session.execute(update(Dataset).values(budget_dataset_id=None))
    db.dispose()
    downgrade(url, "0011")
    upgrade(url)
    db = make_database(url)
    with db.read() as session:
        assert len(session.scalars(select(Dataset.id)).all()) == 2
    db.dispose()
    check(url)  # the migrated schema is the models'
