"""Approximate-RDP slack: ledger_entries.approx_delta and budgets.committed_approx_delta

Curves may now hold JSON null (+∞: no bound at that order) for approximate-RDP charges valid below an order cap.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-21 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("ledger_entries") as batch:
        batch.add_column(sa.Column("approx_delta", sa.Float(), nullable=False, server_default="0"))
    with op.batch_alter_table("budgets") as batch:
        batch.add_column(sa.Column("committed_approx_delta", sa.Float(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("budgets") as batch:
        batch.drop_column("committed_approx_delta")
    with op.batch_alter_table("ledger_entries") as batch:
        batch.drop_column("approx_delta")
