"""allocations: an analyst's share of a dataset's budget, with its own privacy filter (issue 37, item 1)

One row per (dataset, analyst key): the share (ε_max, δ_max), its filter (pinned orders and their δ, the pot of
δ-only parts and its slack part) and the cached composition of the analyst's live reservations on the dataset, as
``budgets`` holds them for the dataset (:class:`privfit.db.models.FilterColumns`). Existing datasets get no
allocation: their analysts spend from the dataset's budget alone, as before. Downgrading drops the table (the
ledger itself is unchanged).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-06 18:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "allocations",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("dataset_id", sa.String(length=36),
                  sa.ForeignKey("datasets.id", name="fk_allocations_dataset_id_datasets"), nullable=False),
        sa.Column("api_key_id", sa.String(length=36),
                  sa.ForeignKey("api_keys.id", name="fk_allocations_api_key_id_api_keys"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("epsilon_max", sa.Float(), nullable=False),
        sa.Column("delta_max", sa.Float(), nullable=False),
        sa.Column("grid_name", sa.String(length=64), nullable=False),
        sa.Column("committed_rdp", sa.JSON(), nullable=False),
        sa.Column("committed_extra_delta", sa.Float(), nullable=False),
        sa.Column("committed_approx_delta", sa.Float(), nullable=False),
        sa.Column("committed_pure_epsilon", sa.Float(), nullable=True),
        sa.Column("filter_version", sa.String(length=64), nullable=False),
        sa.Column("filter_orders", sa.JSON(), nullable=False),
        sa.Column("filter_order_deltas", sa.JSON(), nullable=False),
        sa.Column("filter_approximate_delta", sa.Float(), nullable=False),
        sa.Column("filter_slack_delta", sa.Float(), nullable=False),
        sa.Column("filter_note", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_allocations"),
        sa.UniqueConstraint("dataset_id", "api_key_id", name="uq_allocations_dataset_id"),
        sa.CheckConstraint("epsilon_max > 0", name="ck_allocations_epsilon_positive"),
        sa.CheckConstraint("delta_max > 0 AND delta_max < 1", name="ck_allocations_delta_unit"),
    )  # fmt: skip
    op.create_index("ix_allocations_dataset_id", "allocations", ["dataset_id"])
    op.create_index("ix_allocations_api_key_id", "allocations", ["api_key_id"])


def downgrade() -> None:
    op.drop_index("ix_allocations_api_key_id", table_name="allocations")
    op.drop_index("ix_allocations_dataset_id", table_name="allocations")
    op.drop_table("allocations")
