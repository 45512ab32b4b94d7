"""private preprocessing: the released statistics of a dataset (datasets.preprocessing) and its ledger entries

``datasets`` gets ``preprocessing`` (JSON, NULL for none: every dataset registered before this revision), the
public statistics released by private preprocessing at upload and the encoding derived from them
(``privfit.datasets.preprocessing``).

``ledger_entries`` entries may now belong to a dataset's preprocessing: ``preprocessing_dataset_id`` is added, exactly
one of ``job_id``, ``evaluation_id``, ``preprocessing_dataset_id`` is set (CHECK ``one_subject``, replaced) and
``UNIQUE(preprocessing_dataset_id, kind)`` charges a dataset's preprocessing at most once. On SQLite the table is
rebuilt (batch mode), which drops its triggers: the append-only triggers of revision 0001 are created again.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28 01:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op
from privfit.db.migrate import recreate_sqlite_ledger_triggers

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ONE_SUBJECT = (
    "(CASE WHEN job_id IS NULL THEN 0 ELSE 1 END + CASE WHEN evaluation_id IS NULL THEN 0 ELSE 1 END"
    " + CASE WHEN preprocessing_dataset_id IS NULL THEN 0 ELSE 1 END) = 1"
)


def upgrade() -> None:
    with op.batch_alter_table("datasets") as batch:
        batch.add_column(sa.Column("preprocessing", sa.JSON(), nullable=True))
    with op.batch_alter_table("ledger_entries") as batch:
        batch.add_column(sa.Column("preprocessing_dataset_id", sa.String(length=36), nullable=True))
        batch.create_index("ix_ledger_entries_preprocessing_dataset_id", ["preprocessing_dataset_id"], unique=False)
        batch.create_foreign_key(
            "fk_ledger_entries_preprocessing_dataset_id_datasets", "datasets", ["preprocessing_dataset_id"], ["id"]
        )
        batch.create_unique_constraint("uq_ledger_preprocessing_kind", ["preprocessing_dataset_id", "kind"])
        batch.drop_constraint("one_subject", type_="check")
        batch.create_check_constraint("one_subject", _ONE_SUBJECT)
    recreate_sqlite_ledger_triggers()


def downgrade() -> None:
    # Entries of preprocessing cannot be expressed before this revision: refuse rather than lose ledger history.
    bind = op.get_bind()
    if bind.execute(sa.text("SELECT COUNT(*) FROM ledger_entries WHERE preprocessing_dataset_id IS NOT NULL")).scalar():
        raise RuntimeError("cannot downgrade below 0008: the ledger holds entries of preprocessing (append-only)")
    with op.batch_alter_table("ledger_entries") as batch:
        batch.drop_constraint("one_subject", type_="check")
        batch.create_check_constraint("one_subject", "(job_id IS NULL) <> (evaluation_id IS NULL)")
        batch.drop_constraint("uq_ledger_preprocessing_kind", type_="unique")
        batch.drop_constraint("fk_ledger_entries_preprocessing_dataset_id_datasets", type_="foreignkey")
        batch.drop_index("ix_ledger_entries_preprocessing_dataset_id")
        batch.drop_column("preprocessing_dataset_id")
    recreate_sqlite_ledger_triggers()
    with op.batch_alter_table("datasets") as batch:
        batch.drop_column("preprocessing")
