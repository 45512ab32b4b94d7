"""private evaluation: validation splits (datasets, dataset_uploads), evaluations, ledger entries of evaluations

``datasets`` gets ``validation_fraction`` (the declared public fraction, NULL for none), ``n_validation`` (rows held
apart; 0 for none, the value of every dataset registered before this revision) and ``validation_storage_key`` (the
validation matrix in the dataset store); ``dataset_uploads`` gets ``validation_storage_key`` so a pending upload
accounts for both of its matrices (``privfit.datasets.lifecycle``).

``evaluations`` records each private evaluation of a fit (``POST /v1/fits/{id}/evaluate``).

``ledger_entries`` entries belong to a job or, now, to an evaluation: ``job_id`` becomes nullable, ``evaluation_id``
is added, exactly one of them is set (CHECK ``one_subject``) and ``UNIQUE(evaluation_id, kind)`` charges an
evaluation at most once. On SQLite the table is rebuilt (batch mode), which drops its triggers: the append-only
triggers of revision 0001 are created again, with the same names and bodies. PostgreSQL alters it in place (its
trigger stays).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26 03:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op
from privfit.db.migrate import recreate_sqlite_ledger_triggers

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("datasets") as batch:
        batch.add_column(sa.Column("validation_fraction", sa.Float(), nullable=True))
        batch.add_column(sa.Column("n_validation", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("validation_storage_key", sa.String(length=200), nullable=True))
        batch.create_index("ix_datasets_validation_storage_key", ["validation_storage_key"], unique=False)
    with op.batch_alter_table("dataset_uploads") as batch:
        batch.add_column(sa.Column("validation_storage_key", sa.String(length=64), nullable=True))
        batch.create_index("ix_dataset_uploads_validation_storage_key", ["validation_storage_key"], unique=False)
    op.create_table(
        "evaluations",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("job_id", sa.String(length=36), nullable=False),
        sa.Column("dataset_id", sa.String(length=36), nullable=False),
        sa.Column("api_key_id", sa.String(length=36), nullable=False),
        sa.Column("idempotency_key", sa.String(length=200), nullable=True),
        sa.Column("request_hash", sa.String(length=64), nullable=False),
        sa.Column("epsilon", sa.Float(), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("n_validation", sa.Integer(), nullable=False),
        sa.Column("cost", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("error", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("status IN ('running', 'succeeded', 'failed')", name=op.f("ck_evaluations_status")),
        sa.ForeignKeyConstraint(["api_key_id"], ["api_keys.id"], name=op.f("fk_evaluations_api_key_id_api_keys")),
        sa.ForeignKeyConstraint(["dataset_id"], ["datasets.id"], name=op.f("fk_evaluations_dataset_id_datasets")),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_evaluations_job_id_jobs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_evaluations")),
        sa.UniqueConstraint("api_key_id", "idempotency_key", name="uq_evaluations_idempotency"),
    )
    op.create_index(op.f("ix_evaluations_api_key_id"), "evaluations", ["api_key_id"], unique=False)
    op.create_index(op.f("ix_evaluations_dataset_id"), "evaluations", ["dataset_id"], unique=False)
    op.create_index(op.f("ix_evaluations_job_id"), "evaluations", ["job_id"], unique=False)
    with op.batch_alter_table("ledger_entries") as batch:
        batch.alter_column("job_id", existing_type=sa.String(length=36), nullable=True)
        batch.add_column(sa.Column("evaluation_id", sa.String(length=36), nullable=True))
        batch.create_index("ix_ledger_entries_evaluation_id", ["evaluation_id"], unique=False)
        batch.create_foreign_key(
            "fk_ledger_entries_evaluation_id_evaluations", "evaluations", ["evaluation_id"], ["id"]
        )
        batch.create_unique_constraint("uq_ledger_evaluation_kind", ["evaluation_id", "kind"])
        batch.create_check_constraint("one_subject", "(job_id IS NULL) <> (evaluation_id IS NULL)")
    recreate_sqlite_ledger_triggers()


def downgrade() -> None:
    # Entries of evaluations cannot be expressed before this revision (job_id NOT NULL): refuse rather than lose
    # ledger history (the ledger is append-only).
    bind = op.get_bind()
    if bind.execute(sa.text("SELECT COUNT(*) FROM ledger_entries WHERE evaluation_id IS NOT NULL")).scalar():
        raise RuntimeError("cannot downgrade below 0007: the ledger holds entries of evaluations (append-only)")
    with op.batch_alter_table("ledger_entries") as batch:
        batch.drop_constraint("one_subject", type_="check")
        batch.drop_constraint("uq_ledger_evaluation_kind", type_="unique")
        batch.drop_constraint("fk_ledger_entries_evaluation_id_evaluations", type_="foreignkey")
        batch.drop_index("ix_ledger_entries_evaluation_id")
        batch.drop_column("evaluation_id")
        batch.alter_column("job_id", existing_type=sa.String(length=36), nullable=False)
    recreate_sqlite_ledger_triggers()
    op.drop_index(op.f("ix_evaluations_job_id"), table_name="evaluations")
    op.drop_index(op.f("ix_evaluations_dataset_id"), table_name="evaluations")
    op.drop_index(op.f("ix_evaluations_api_key_id"), table_name="evaluations")
    op.drop_table("evaluations")
    with op.batch_alter_table("dataset_uploads") as batch:
        batch.drop_index("ix_dataset_uploads_validation_storage_key")
        batch.drop_column("validation_storage_key")
    with op.batch_alter_table("datasets") as batch:
        batch.drop_index("ix_datasets_validation_storage_key")
        batch.drop_column("validation_storage_key")
        batch.drop_column("n_validation")
        batch.drop_column("validation_fraction")
