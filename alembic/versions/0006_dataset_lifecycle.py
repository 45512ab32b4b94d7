"""dataset lifecycle: pending uploads (dataset_uploads) and the store holding each dataset (datasets.store_id)

``dataset_uploads`` holds one row per upload in progress, committed before the encoded matrix is written and
removed in the transaction that registers the dataset: stored data is always referenced by a live dataset or a
pending upload, and the orphan sweep purges what neither references (``privfit.datasets.lifecycle``).

``datasets.store_id`` records which store holds a dataset's matrix (``local:<uuid>`` of a data directory, or
``database``), so a process configured with another data directory is detected at start-up and at claim time,
before any charge. Datasets registered earlier keep NULL (not checked). ``storage_key`` gets an index: deletes,
duplicate checks and the sweep look datasets up by it.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24 18:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "dataset_uploads",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("storage_key", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dataset_uploads")),
    )
    op.create_index(op.f("ix_dataset_uploads_storage_key"), "dataset_uploads", ["storage_key"], unique=False)
    with op.batch_alter_table("datasets") as batch:
        batch.add_column(sa.Column("store_id", sa.String(length=80), nullable=True))
        batch.create_index("ix_datasets_storage_key", ["storage_key"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("datasets") as batch:
        batch.drop_index("ix_datasets_storage_key")
        batch.drop_column("store_id")
    op.drop_index(op.f("ix_dataset_uploads_storage_key"), table_name="dataset_uploads")
    op.drop_table("dataset_uploads")
