"""indexes for the paged lists (issue 38, item 4): ``GET /v1/fits`` and ``GET /v1/datasets`` page by keyset

The lists answer ``WHERE … AND (created_at, id) > (cursor) ORDER BY created_at, id LIMIT n``
(:mod:`privfit.api.pagination`); each of these indexes gives one listing its rows in that order, so a page reads
``n`` index entries at any depth instead of sorting every visible row:

* ``ix_jobs_dataset_created`` (dataset_id, created_at, id): a dataset's fits (``?dataset_id=``), and an owner's
  fits on its datasets;
* ``ix_jobs_api_key_created`` (api_key_id, created_at, id): the fits a key requested (an analyst's list);
* ``ix_jobs_created`` (created_at, id): every fit (admins);
* ``ix_datasets_created`` (created_at, id): every dataset (admins).

The first two lead with the columns of ``ix_jobs_dataset_id`` and ``ix_jobs_api_key_id`` (revision 0001) and serve
every lookup those did, so they replace them. Only indexes change: no row is read or written. Downgrading restores
the single-column indexes.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-07 10:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_jobs_dataset_created", "jobs", ["dataset_id", "created_at", "id"])
    op.create_index("ix_jobs_api_key_created", "jobs", ["api_key_id", "created_at", "id"])
    op.create_index("ix_jobs_created", "jobs", ["created_at", "id"])
    op.create_index("ix_datasets_created", "datasets", ["created_at", "id"])
    op.drop_index("ix_jobs_dataset_id", table_name="jobs")
    op.drop_index("ix_jobs_api_key_id", table_name="jobs")


def downgrade() -> None:
    op.create_index("ix_jobs_api_key_id", "jobs", ["api_key_id"])
    op.create_index("ix_jobs_dataset_id", "jobs", ["dataset_id"])
    op.drop_index("ix_datasets_created", table_name="datasets")
    op.drop_index("ix_jobs_created", table_name="jobs")
    op.drop_index("ix_jobs_api_key_created", table_name="jobs")
    op.drop_index("ix_jobs_dataset_created", table_name="jobs")
