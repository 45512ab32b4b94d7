"""the Gaussian-DP certificate: filters get its δ share, committed compositions and ledger entries their Σμ²

``budgets`` and ``allocations`` get ``filter_gdp_delta`` (δ_G, the δ share of the filter's Gaussian-DP certificate,
:mod:`privfit.privacy.filter`; 0 = no such certificate) and ``committed_gdp_mu_squared`` (the Σμ² of the committed
Gaussian-DP releases, NULL = +∞); ``ledger_entries`` get ``gdp_mu_squared`` (NULL = +∞: no GDP bound).

Existing rows keep their rule (``filter:rdp-orders+pure+split-delta-pot/v2``) with δ_G = 0: a filter's parameters
are fixed before the releases it governs, so only budgets and allocations created from now on get the certificate
(rule v3). No entry written before this revision recorded a GDP bound, so every existing entry gets NULL, and the
cached ``committed_gdp_mu_squared`` is what the ledger would recompute from its entries: 0.0 for a budget (an
allocation) that counts no live reservation — none, or every one released —, NULL (+∞) as soon as it counts one.
A live reservation is one whose fit or evaluation has no release (a preprocessing's reservation is never released);
an allocation counts those of its analyst key's fits and evaluations (:func:`privfit.ledger.spent_by`). A row whose
cache is not empty (δ parts, slacks, a pure ε other than 0) gets NULL whatever its entries say: +∞ is always safe,
and a finite μ² beside δ parts would not be a valid composition. The v2 filters have no GDP certificate to read the
value; it keeps the cache equal to its recomputation, which a release writes.

The upgrade also repairs caches that a ledger bug left short. The ledger named an entry's subject
``coalesce(job_id, evaluation_id)``, NULL for a preprocessing's entries, and ``NULL NOT IN (…)`` is not true: each
release, which recomputes the budget's cache from its entries, dropped the preprocessing's cost, and the budget
over-admitted. Affected: budgets with a preprocessing entry and a release entry (allocations count no preprocessing).
Each such budget's cache (``committed_rdp``, ``committed_extra_delta``, ``committed_approx_delta``,
``committed_pure_epsilon``, ``committed_gdp_mu_squared``) is recomputed from its entries as the fixed ledger does
(:func:`privfit.ledger.committed_cost_from_entries`): every reservation whose subject (fit, else evaluation, else
preprocessing) has no release, composed; Σμ² is NULL, as no existing entry records one. Nothing else changes.

Downgrading drops the columns. It is refused while a ledger entry records a GDP bound: the entry would lose it, and
with it the hash the ledger chained it with (:mod:`privfit.ledger.chain`). Without such an entry, nothing was ever
admitted by a GDP certificate, and the v3 filters go back to the v2 rule's name: their δ_G is then left unused (the
v2 rule admits a subset of what v3 admits, so every guarantee stated for them still holds).

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-08 10:00:00
"""

import math
from collections.abc import Sequence

import numpy as np
import sqlalchemy as sa

from alembic import op
from privfit.db.migrate import recreate_sqlite_ledger_triggers

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RULE_V2 = "filter:rdp-orders+pure+split-delta-pot/v2"
RULE_V3 = "filter:rdp-orders+pure+gdp+split-delta-pot/v3"
FILTER_TABLES = ("budgets", "allocations")

_entries = sa.table(
    "ledger_entries",
    sa.column("id", sa.Integer),
    sa.column("dataset_id", sa.String),
    sa.column("kind", sa.String),
    sa.column("job_id", sa.String),
    sa.column("evaluation_id", sa.String),
    sa.column("preprocessing_dataset_id", sa.String),
    sa.column("rdp", sa.JSON),
    sa.column("extra_delta", sa.Float),
    sa.column("approx_delta", sa.Float),
    sa.column("pure_epsilon", sa.Float),
    sa.column("gdp_mu_squared", sa.Float),
)
_budgets = sa.table(
    "budgets",
    sa.column("dataset_id", sa.String),
    sa.column("committed_rdp", sa.JSON),
    sa.column("committed_extra_delta", sa.Float),
    sa.column("committed_approx_delta", sa.Float),
    sa.column("committed_pure_epsilon", sa.Float),
    sa.column("committed_gdp_mu_squared", sa.Float),
)
_jobs = sa.table("jobs", sa.column("id", sa.String), sa.column("api_key_id", sa.String))
_evaluations = sa.table("evaluations", sa.column("id", sa.String), sa.column("api_key_id", sa.String))


def _filter_table(name: str) -> sa.TableClause:
    return sa.table(
        name,
        sa.column("dataset_id", sa.String),
        sa.column("api_key_id", sa.String),
        sa.column("committed_extra_delta", sa.Float),
        sa.column("committed_approx_delta", sa.Float),
        sa.column("committed_pure_epsilon", sa.Float),
        sa.column("committed_gdp_mu_squared", sa.Float),
        sa.column("filter_version", sa.String),
        sa.column("filter_gdp_delta", sa.Float),
    )


def upgrade() -> None:
    # plain ADD COLUMNs: SQLite adds them in place, so ledger_entries keeps its append-only triggers
    op.add_column("ledger_entries", sa.Column("gdp_mu_squared", sa.Float(), nullable=True))
    for name in FILTER_TABLES:
        op.add_column(name, sa.Column("committed_gdp_mu_squared", sa.Float(), nullable=True))
        op.add_column(name, sa.Column("filter_gdp_delta", sa.Float(), nullable=False, server_default="0"))
    bind = op.get_bind()
    _repair_preprocessing_caches(bind)
    for name in FILTER_TABLES:  # 0.0 where nothing is counted; NULL (+∞), as added, elsewhere (module docstring)
        table = _filter_table(name)
        counted = _live_reservation(table.c.dataset_id, table.c.api_key_id if name == "allocations" else None)
        empty_cache = sa.and_(table.c.committed_extra_delta == 0.0, table.c.committed_approx_delta == 0.0,
                              table.c.committed_pure_epsilon == 0.0)  # fmt: skip
        bind.execute(sa.update(table).where(~counted, empty_cache).values(committed_gdp_mu_squared=0.0))


def _repair_preprocessing_caches(bind: sa.Connection) -> None:
    """Recompute the committed cache of every budget with a preprocessing entry and a release entry from its entries
    (module docstring), one budget at a time."""
    entry = _entries.alias("entry")

    def has(condition: sa.ColumnElement[bool]) -> sa.Exists:
        return sa.exists().where(entry.c.dataset_id == _budgets.c.dataset_id, condition)

    affected = bind.scalars(
        sa.select(_budgets.c.dataset_id)
        .where(has(entry.c.preprocessing_dataset_id.is_not(None)), has(entry.c.kind == "release"))
        .order_by(_budgets.c.dataset_id)
    ).all()
    for dataset_id in affected:
        width = len(bind.scalar(sa.select(_budgets.c.committed_rdp).where(_budgets.c.dataset_id == dataset_id)))
        bind.execute(
            sa.update(_budgets)
            .where(_budgets.c.dataset_id == dataset_id)
            .values(**_committed_from_entries(bind, dataset_id, width))
        )


def _committed_from_entries(bind: sa.Connection, dataset_id: str, width: int) -> dict[str, object]:
    """The committed-cache columns of the budget of ``dataset_id`` recomputed from its entries, as the fixed ledger
    does (``privfit.ledger.ledger._sum_entries``): its reservations whose subject (fit, else evaluation, else
    preprocessing) has no release, composed. ``width``: the number of orders of its grid, for the zero cost when
    none counts (not expected: a preprocessing's reservation is never released)."""
    subject = sa.func.coalesce(_entries.c.job_id, _entries.c.evaluation_id, _entries.c.preprocessing_dataset_id)
    rows = bind.execute(
        sa.select(_entries.c.kind, subject.label("subject"), _entries.c.rdp, _entries.c.extra_delta,
                  _entries.c.approx_delta, _entries.c.pure_epsilon)
        .where(_entries.c.dataset_id == dataset_id, _entries.c.kind.in_(("reservation", "release")))
        .order_by(_entries.c.id)
    ).all()  # fmt: skip
    released = {row.subject for row in rows if row.kind == "release"}
    counted = [row for row in rows if row.kind == "reservation" and row.subject not in released]
    if not counted:
        return {"committed_rdp": [0.0] * width, "committed_extra_delta": 0.0, "committed_approx_delta": 0.0,
                "committed_pure_epsilon": 0.0, "committed_gdp_mu_squared": 0.0}  # fmt: skip
    curves = np.asarray([[np.inf if v is None else float(v) for v in row.rdp] for row in counted], dtype=np.float64)
    curve = [float(v) if np.isfinite(v) else None for v in curves.sum(axis=0)]  # JSON null = +∞
    extra = float(-np.expm1(np.sum(np.log1p(-np.asarray([row.extra_delta for row in counted], dtype=np.float64)))))
    pure = math.fsum(math.inf if row.pure_epsilon is None else float(row.pure_epsilon) for row in counted)
    return {
        "committed_rdp": curve, "committed_extra_delta": extra,
        "committed_approx_delta": float(sum(row.approx_delta for row in counted)),
        "committed_pure_epsilon": pure if math.isfinite(pure) else None,  # NULL = +∞
        "committed_gdp_mu_squared": None,  # +∞: no entry before this revision records a GDP bound
    }  # fmt: skip


def _live_reservation(dataset_id: sa.ColumnElement[str], api_key_id: sa.ColumnElement[str] | None) -> sa.Exists:
    """Whether the budget of ``dataset_id`` counts a live reservation: one whose fit or evaluation has no release
    (a preprocessing's names neither, and is never released); with ``api_key_id``, only the reservations of that
    key's fits and evaluations, which its allocation counts."""
    reservation, release = _entries.alias("reserved"), _entries.alias("voiding")
    released = sa.exists().where(
        release.c.dataset_id == reservation.c.dataset_id,
        release.c.kind == "release",
        sa.or_(release.c.job_id == reservation.c.job_id, release.c.evaluation_id == reservation.c.evaluation_id),
    )
    live = sa.exists().where(reservation.c.dataset_id == dataset_id, reservation.c.kind == "reservation", ~released)
    if api_key_id is None:
        return live
    fits, evaluations = (
        sa.select(subjects.c.id).where(subjects.c.api_key_id == api_key_id).correlate_except(subjects)
        for subjects in (_jobs, _evaluations)
    )  # (correlated with the allocation row two levels up, which SQLAlchemy would not infer)
    return live.where(sa.or_(reservation.c.job_id.in_(fits), reservation.c.evaluation_id.in_(evaluations)))


def downgrade() -> None:
    bind = op.get_bind()
    bounded = bind.scalar(
        sa.select(sa.func.count()).select_from(_entries).where(_entries.c.gdp_mu_squared.is_not(None))
    )
    if bounded:
        raise RuntimeError(
            f"{bounded} ledger entries record a Gaussian-DP bound: downgrading would drop it and break their hashes"
        )
    for name in FILTER_TABLES:
        table = _filter_table(name)
        bind.execute(sa.update(table).where(table.c.filter_version == RULE_V3).values(filter_version=RULE_V2))
        with op.batch_alter_table(name) as batch:
            batch.drop_column("filter_gdp_delta")
            batch.drop_column("committed_gdp_mu_squared")
    with op.batch_alter_table("ledger_entries") as batch:
        batch.drop_column("gdp_mu_squared")
    recreate_sqlite_ledger_triggers()  # a batch rebuild of ledger_entries on SQLite drops them
