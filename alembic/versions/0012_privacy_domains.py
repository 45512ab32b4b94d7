"""privacy domains: a dataset may spend another dataset's budget (issue 37, item 2)

``datasets.budget_dataset_id`` names the dataset whose budget (filter and ledger) a dataset registered into an
existing privacy domain spends; NULL — every existing dataset — means its own, so each existing dataset is its own
domain and nothing else changes. Downgrading drops the column (refused while a dataset spends another's budget: its
fits would then have no budget).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-06 19:05:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A plain ADD COLUMN: a batch rebuild of ``datasets`` on SQLite would drop the table that every other table
    # references, which its enforced foreign keys refuse once rows exist, and SQLite cannot add a foreign key to an
    # existing table without that rebuild. So the reference is kept by the application on both databases (the same
    # schema everywhere): set once, at registration, to an existing dataset's domain; datasets are never removed,
    # only marked deleted.
    op.add_column("datasets", sa.Column("budget_dataset_id", sa.String(length=36), nullable=True))
    op.create_index("ix_datasets_budget_dataset_id", "datasets", ["budget_dataset_id"])


def downgrade() -> None:
    bind = op.get_bind()
    members = bind.scalar(sa.text("SELECT count(*) FROM datasets WHERE budget_dataset_id IS NOT NULL"))
    if members:
        raise RuntimeError(f"{members} datasets spend another dataset's budget: downgrading would leave them none")
    op.drop_index("ix_datasets_budget_dataset_id", table_name="datasets")
    if bind.dialect.name == "sqlite":
        op.execute("ALTER TABLE datasets DROP COLUMN budget_dataset_id")  # native (SQLite ≥ 3.35): no rebuild
    else:
        op.drop_column("datasets", "budget_dataset_id")
