"""ledger hash chain: every ledger entry carries the hash of its content and of the entry before it in its budget

``ledger_entries`` gets ``previous_hash`` and ``entry_hash`` (hex SHA-256) and ``budgets`` gets ``chain_head`` (the
last entry's hash, or the budget's genesis hash before its first entry), as defined by
:mod:`privfit.ledger.chain` (format ``privfit-ledger-chain/v1``). Existing entries are chained in the order the
ledger appended them (their budget version, then id), from the contents they hold now: the chain certifies the
history from this revision's run on, and an edit made before it cannot be told apart (the migration logs how many
entries it chained per budget, so an operator can record each head as an anchor).

The ledger is append-only by trigger (revision 0001): the backfill disables the trigger on PostgreSQL for its own
updates and drops and recreates the triggers on SQLite, inside the migration's transaction. Downgrading drops the
columns (the history itself is unchanged).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-05 10:00:00
"""

import logging
from collections.abc import Sequence
from types import SimpleNamespace

import sqlalchemy as sa

from alembic import op
from privfit.db.migrate import LEDGER_TRIGGERS, recreate_sqlite_ledger_triggers
from privfit.ledger.chain import entry_content, entry_hash, genesis_hash

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_log = logging.getLogger("privfit.migrations")

_FIELDS = (
    "id", "dataset_id", "budget_version", "kind", "job_id", "evaluation_id", "preprocessing_dataset_id", "rdp",
    "extra_delta", "approx_delta", "pure_epsilon", "grid_name", "formula_version", "epsilon", "optimal_order",
    "committed_epsilon_after", "description", "created_at",
)  # fmt: skip

_entries = sa.table(
    "ledger_entries",
    sa.column("id", sa.Integer),
    sa.column("dataset_id", sa.String),
    sa.column("budget_version", sa.Integer),
    sa.column("kind", sa.String),
    sa.column("job_id", sa.String),
    sa.column("evaluation_id", sa.String),
    sa.column("preprocessing_dataset_id", sa.String),
    sa.column("rdp", sa.JSON),
    sa.column("extra_delta", sa.Float),
    sa.column("approx_delta", sa.Float),
    sa.column("pure_epsilon", sa.Float),
    sa.column("grid_name", sa.String),
    sa.column("formula_version", sa.String),
    sa.column("epsilon", sa.Float),
    sa.column("optimal_order", sa.Float),
    sa.column("committed_epsilon_after", sa.Float),
    sa.column("description", sa.Text),
    sa.column("created_at", sa.DateTime(timezone=True)),
    sa.column("previous_hash", sa.String),
    sa.column("entry_hash", sa.String),
)
_budgets = sa.table("budgets", sa.column("dataset_id", sa.String), sa.column("chain_head", sa.String))


def upgrade() -> None:
    with op.batch_alter_table("ledger_entries") as batch:
        batch.add_column(sa.Column("previous_hash", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("entry_hash", sa.String(length=64), nullable=True))
    with op.batch_alter_table("budgets") as batch:
        batch.add_column(sa.Column("chain_head", sa.String(length=64), nullable=True))
    _chain_existing_entries()
    with op.batch_alter_table("ledger_entries") as batch:
        batch.alter_column("previous_hash", existing_type=sa.String(length=64), nullable=False)
        batch.alter_column("entry_hash", existing_type=sa.String(length=64), nullable=False)
    with op.batch_alter_table("budgets") as batch:
        batch.alter_column("chain_head", existing_type=sa.String(length=64), nullable=False)
    recreate_sqlite_ledger_triggers()  # a batch rebuild of ledger_entries on SQLite drops them


def _chain_existing_entries() -> None:
    bind = op.get_bind()
    sqlite = bind.dialect.name == "sqlite"
    if sqlite:
        for name in LEDGER_TRIGGERS:
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
    else:
        op.execute("ALTER TABLE ledger_entries DISABLE TRIGGER ledger_entries_append_only")
    heads: dict[str, str] = {}
    counts: dict[str, int] = {}
    rows = bind.execute(
        sa.select(*(_entries.c[name] for name in _FIELDS)).order_by(
            _entries.c.dataset_id, _entries.c.budget_version, _entries.c.id
        )
    ).mappings()
    for row in rows.all():
        dataset_id = row["dataset_id"]
        previous = heads.get(dataset_id) or genesis_hash(dataset_id)
        digest = entry_hash(previous, entry_content(SimpleNamespace(**row)))
        bind.execute(
            sa.update(_entries).where(_entries.c.id == row["id"]).values(previous_hash=previous, entry_hash=digest)
        )
        heads[dataset_id] = digest
        counts[dataset_id] = counts.get(dataset_id, 0) + 1
    for dataset_id in bind.execute(sa.select(_budgets.c.dataset_id)).scalars().all():
        head = heads.get(dataset_id) or genesis_hash(dataset_id)
        bind.execute(sa.update(_budgets).where(_budgets.c.dataset_id == dataset_id).values(chain_head=head))
        if dataset_id in counts:
            _log.info("ledger chained", extra={"dataset_id": dataset_id, "entries": counts[dataset_id], "head": head})
    if not sqlite:
        op.execute("ALTER TABLE ledger_entries ENABLE TRIGGER ledger_entries_append_only")


def downgrade() -> None:
    with op.batch_alter_table("budgets") as batch:
        batch.drop_column("chain_head")
    with op.batch_alter_table("ledger_entries") as batch:
        batch.drop_column("entry_hash")
        batch.drop_column("previous_hash")
    recreate_sqlite_ledger_triggers()
