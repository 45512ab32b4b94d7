"""SQLAlchemy 2 models. Alembic migrations (``alembic/``) are the only way the schema changes.

The privacy-relevant invariants are enforced by the database itself, not by convention:
- ``ledger_entries`` is append-only (triggers in the migration refuse UPDATE and DELETE on both dialects);
- one job has at most one reservation, one charge and one release: ``UNIQUE(job_id, kind)``; likewise one
  evaluation: ``UNIQUE(evaluation_id, kind)``; every entry belongs to exactly one job or one evaluation;
- a job's (and an evaluation's) idempotency key is unique per API key.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

JOB_STATUSES = ("queued", "running", "succeeded", "failed", "cancelled")
EVALUATION_STATUSES = ("running", "succeeded", "failed")
LEDGER_KINDS = ("reservation", "charge", "release")
ONE_SUBJECT = (
    "(CASE WHEN job_id IS NULL THEN 0 ELSE 1 END + CASE WHEN evaluation_id IS NULL THEN 0 ELSE 1 END"
    " + CASE WHEN preprocessing_dataset_id IS NULL THEN 0 ELSE 1 END) = 1"
)
"""A ledger entry belongs to exactly one fit, evaluation or dataset preprocessing."""
ROLES = ("owner", "analyst", "admin")


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {  # noqa: RUF012
        dict[str, Any]: JSON, list[float]: JSON, list[float | None]: JSON, list[str]: JSON,
    }  # fmt: skip


class ApiKey(Base):
    """An API key: only the SHA-256 of the secret is stored; ``prefix`` identifies it in logs and lists."""

    __tablename__ = "api_keys"
    __table_args__ = (CheckConstraint(f"role IN {ROLES}", name="role"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    prefix: Mapped[str] = mapped_column(String(16), unique=True)
    secret_hash: Mapped[str] = mapped_column(String(64), unique=True)
    role: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(200), default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Dataset(Base):
    """A registered dataset: public metadata only. The encoded matrix lives in the dataset store."""

    __tablename__ = "datasets"
    __table_args__ = (Index("ix_datasets_created", "created_at", "id"),)  # GET /v1/datasets pages (migration 0013)

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    owner_key_id: Mapped[str] = mapped_column(ForeignKey("api_keys.id"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    schema_json: Mapped[dict[str, Any]]
    feature_names: Mapped[list[str]]
    n: Mapped[int] = mapped_column(Integer)
    d: Mapped[int] = mapped_column(Integer)
    row_norm_bound: Mapped[float] = mapped_column(Float)
    label_bound: Mapped[float] = mapped_column(Float)
    content_hash: Mapped[str] = mapped_column(String(64))
    storage_key: Mapped[str | None] = mapped_column(String(200), index=True)
    #: the declared public validation fraction f (None: no validation rows), n_validation = ⌊f·(n + n_validation)⌋
    #: rows held apart (``n`` counts the training rows only) and the key of their matrix (None once deleted)
    validation_fraction: Mapped[float | None] = mapped_column(Float)
    n_validation: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    validation_storage_key: Mapped[str | None] = mapped_column(String(200), index=True)
    #: the released statistics of private preprocessing and the encoding derived from them (public), or NULL
    preprocessing: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    #: the identity of the store holding the matrix (``DatasetStore.identity``: ``local:<uuid>`` of a data
    #: directory, or ``database``); a worker whose store differs refuses the fit before charging it. NULL for
    #: datasets registered before revision 0006 (not checked).
    store_id: Mapped[str | None] = mapped_column(String(80))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    deleted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    #: the dataset whose budget this one spends — its privacy domain's first dataset, for a dataset registered into
    #: an existing domain (the same people: a cleaned re-upload, a second table); NULL: its own budget
    #: (:mod:`privfit.ledger.ledger`, "Privacy domains"). Not a foreign key: migration 0012 explains why; it is
    #: set once, at registration, to an existing dataset's domain, and datasets are never removed
    budget_dataset_id: Mapped[str | None] = mapped_column(String(36), index=True)

    @property
    def domain_id(self) -> str:
        """The id of the budget this dataset spends (its privacy domain): its own id unless it joined another's."""
        return self.budget_dataset_id or self.id


class DatasetUpload(Base):
    """An upload in progress: committed *before* its matrix is written to the store and removed in the transaction
    that registers the dataset, so stored data is always accounted for — by a live dataset or by a pending upload.

    ``id`` is the id the dataset will get. A row older than ``PRIVFIT_UPLOAD_GRACE_SECONDS`` belongs to an upload
    whose process died: the orphan sweep (:mod:`privfit.datasets.lifecycle`) deletes it and purges its data.
    """

    __tablename__ = "dataset_uploads"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    storage_key: Mapped[str] = mapped_column(String(64), index=True)
    #: the key of the validation matrix, for an upload that declares a validation fraction
    validation_storage_key: Mapped[str | None] = mapped_column(String(64), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class DatasetBlob(Base):
    """A dataset's encoded matrix in the ``database`` store (``PRIVFIT_STORE=database``): the ``.npz`` bytes of
    X and y under their sha256 (``datasets.storage_key``), read by every worker through the database URL.
    ``content`` is ``bytea`` on PostgreSQL and ``BLOB`` on SQLite; see :class:`privfit.datasets.store.
    DatabaseDatasetStore` for the size limit."""

    __tablename__ = "dataset_blobs"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    content: Mapped[bytes] = mapped_column(LargeBinary)
    size: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class DatasetGrant(Base):
    """An analyst key's permission to fit, estimate and read the budget of one dataset."""

    __tablename__ = "dataset_grants"
    __table_args__ = (UniqueConstraint("dataset_id", "api_key_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id"), index=True)
    api_key_id: Mapped[str] = mapped_column(ForeignKey("api_keys.id"), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class FilterColumns:
    """The columns of a privacy filter and of the composition it admitted (a dataset's budget, an analyst's
    allocation).

    The filter (:mod:`privfit.privacy.filter`) is fixed at creation: ``filter_orders`` (the pinned RDP orders, α*
    first), ``filter_order_deltas`` (the δ certified at each), ``filter_approximate_delta`` (δ_A, the pot of
    δ-only parts) and ``filter_slack_delta`` (δ_S ≤ δ_A, its part for approximate-RDP slacks; the rest, δ_A − δ_S,
    is for the δ of (ε, δ) charges) and ``filter_gdp_delta`` (δ_G, the δ of the Gaussian-DP certificate; 0 for a
    filter without one: every filter created before revision 0014), under the rule ``filter_version``.
    ``filter_note`` set means the filter admits nothing more, and says why.
    ``committed_rdp``/``committed_extra_delta``/``committed_approx_delta``/``committed_pure_epsilon`` (NULL = +∞)/
    ``committed_gdp_mu_squared`` (Σμ² of the Gaussian-DP releases, NULL = +∞: some release has no GDP bound)
    cache the composition of every reservation it counts that is not released (charged or still reserved); the
    ledger entries are the truth and the cache is checked against them in tests.
    """

    epsilon_max: Mapped[float] = mapped_column(Float)
    delta_max: Mapped[float] = mapped_column(Float)
    grid_name: Mapped[str] = mapped_column(String(64))
    committed_rdp: Mapped[list[float | None]]
    committed_extra_delta: Mapped[float] = mapped_column(Float, default=0.0)
    committed_approx_delta: Mapped[float] = mapped_column(Float, default=0.0)
    committed_pure_epsilon: Mapped[float | None] = mapped_column(Float)
    committed_gdp_mu_squared: Mapped[float | None] = mapped_column(Float)
    filter_version: Mapped[str] = mapped_column(String(64))
    filter_orders: Mapped[list[float]]
    filter_order_deltas: Mapped[list[float]]
    filter_approximate_delta: Mapped[float] = mapped_column(Float)
    filter_slack_delta: Mapped[float] = mapped_column(Float)
    filter_gdp_delta: Mapped[float] = mapped_column(Float, default=0.0, server_default="0")
    filter_note: Mapped[str | None] = mapped_column(Text)


class Budget(FilterColumns, Base):
    """A dataset's budget (ε_max, δ_max) on a fixed order grid, its privacy filter, and the cached sum of its live
    reservations (:class:`FilterColumns`). ``version`` increases with every ledger entry of the dataset."""

    __tablename__ = "budgets"
    __table_args__ = (
        CheckConstraint("epsilon_max > 0", name="epsilon_positive"),
        CheckConstraint("delta_max > 0 AND delta_max < 1", name="delta_unit"),
    )

    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id"), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, default=0)
    #: the hash of the budget's last ledger entry, or its genesis hash before the first (:mod:`privfit.ledger.chain`)
    chain_head: Mapped[str] = mapped_column(String(64))


class Allocation(FilterColumns, Base):
    """An analyst's share (ε_max, δ_max) of a dataset's budget, with its own privacy filter built as the dataset's
    is, and the cached composition of the analyst's live reservations on the dataset (:class:`FilterColumns`;
    :mod:`privfit.ledger.allocations`). A fit of the analyst is admitted only if both filters admit it."""

    __tablename__ = "allocations"
    __table_args__ = (
        UniqueConstraint("dataset_id", "api_key_id"),
        CheckConstraint("epsilon_max > 0", name="epsilon_positive"),
        CheckConstraint("delta_max > 0 AND delta_max < 1", name="delta_unit"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id"), index=True)
    api_key_id: Mapped[str] = mapped_column(ForeignKey("api_keys.id"), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Job(Base):
    """A fit request; the row is the job of record: queued → running → succeeded | failed | cancelled."""

    __tablename__ = "jobs"
    __table_args__ = (
        CheckConstraint(f"status IN {JOB_STATUSES}", name="status"),
        UniqueConstraint("api_key_id", "idempotency_key", name="uq_jobs_idempotency"),
        Index("ix_jobs_status_created", "status", "created_at"),
        # the paged lists (migration 0013): a dataset's fits, a key's, everyone's, each in (created_at, id) order
        Index("ix_jobs_dataset_created", "dataset_id", "created_at", "id"),
        Index("ix_jobs_api_key_created", "api_key_id", "created_at", "id"),
        Index("ix_jobs_created", "created_at", "id"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id"))  # indexed by ix_jobs_dataset_created
    api_key_id: Mapped[str] = mapped_column(ForeignKey("api_keys.id"))  # indexed by ix_jobs_api_key_created
    idempotency_key: Mapped[str | None] = mapped_column(String(200))
    request_hash: Mapped[str] = mapped_column(String(64))
    solver: Mapped[str] = mapped_column(String(64))
    model: Mapped[str] = mapped_column(String(64))
    params: Mapped[dict[str, Any]]
    cost: Mapped[dict[str, Any]]
    status: Mapped[str] = mapped_column(String(16), default="queued")
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    lease_owner: Mapped[str | None] = mapped_column(String(100))
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    error: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    #: set (and committed) just before the worker reads the dataset: a lost job without it read nothing
    data_read_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Evaluation(Base):
    """A private evaluation of a succeeded fit on its dataset's validation rows (``POST /v1/fits/{id}/evaluate``).

    Admitted, reserved and charged in one transaction before any validation row is read (``running``); the result
    is written once (``succeeded``), or ``failed`` with the charge kept. A process that dies in between leaves it
    ``running`` with its charge (it may have read rows)."""

    __tablename__ = "evaluations"
    __table_args__ = (
        CheckConstraint(f"status IN {EVALUATION_STATUSES}", name="status"),
        UniqueConstraint("api_key_id", "idempotency_key", name="uq_evaluations_idempotency"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"), index=True)
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id"), index=True)
    api_key_id: Mapped[str] = mapped_column(ForeignKey("api_keys.id"), index=True)
    idempotency_key: Mapped[str | None] = mapped_column(String(200))
    request_hash: Mapped[str] = mapped_column(String(64))
    epsilon: Mapped[float] = mapped_column(Float)
    confidence: Mapped[float] = mapped_column(Float)
    metrics: Mapped[list[str]]
    n_validation: Mapped[int] = mapped_column(Integer)
    cost: Mapped[dict[str, Any]]
    status: Mapped[str] = mapped_column(String(16), default="running")
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    error: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class LedgerEntry(Base):
    """One append-only ledger entry: a reservation, the charge that confirms it, or the release that voids it
    (a cancelled queued job, or the refund of a job that never read a row). It belongs to exactly one of a fit
    (``job_id``), an evaluation (``evaluation_id``) and a dataset's private preprocessing
    (``preprocessing_dataset_id``).

    Each records its curve (on ``grid_name``; JSON null = +∞, no bound at that order), its approximate-DP δ,
    approximate-RDP slack, pure-ε bound and Gaussian-DP μ² (both NULL = +∞, no such bound; no entry written before
    revision 0014 has a μ²; :mod:`privfit.privacy.cost`), the formula version, the ε of this entry alone at the
    dataset's δ with its optimal order, and the dataset's committed ε after it as the privacy filter measures it.
    """

    __tablename__ = "ledger_entries"
    __table_args__ = (
        CheckConstraint(f"kind IN {LEDGER_KINDS}", name="kind"),
        CheckConstraint(ONE_SUBJECT, name="one_subject"),
        UniqueConstraint("job_id", "kind", name="uq_ledger_job_kind"),
        UniqueConstraint("evaluation_id", "kind", name="uq_ledger_evaluation_kind"),
        UniqueConstraint("preprocessing_dataset_id", "kind", name="uq_ledger_preprocessing_kind"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id"), index=True)
    job_id: Mapped[str | None] = mapped_column(ForeignKey("jobs.id"), index=True)
    evaluation_id: Mapped[str | None] = mapped_column(ForeignKey("evaluations.id"), index=True)
    #: set on the entries of a dataset's private preprocessing (:mod:`privfit.datasets.preprocessing`)
    preprocessing_dataset_id: Mapped[str | None] = mapped_column(ForeignKey("datasets.id"), index=True)
    kind: Mapped[str] = mapped_column(String(16))
    rdp: Mapped[list[float | None]]
    extra_delta: Mapped[float] = mapped_column(Float, default=0.0)
    approx_delta: Mapped[float] = mapped_column(Float, default=0.0)
    pure_epsilon: Mapped[float | None] = mapped_column(Float)
    gdp_mu_squared: Mapped[float | None] = mapped_column(Float)
    grid_name: Mapped[str] = mapped_column(String(64))
    formula_version: Mapped[str] = mapped_column(String(64))
    epsilon: Mapped[float] = mapped_column(Float)
    optimal_order: Mapped[float] = mapped_column(Float)
    committed_epsilon_after: Mapped[float] = mapped_column(Float)
    budget_version: Mapped[int] = mapped_column(Integer)
    description: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    #: the hash chain (:mod:`privfit.ledger.chain`): the previous entry's hash in this budget (its genesis for the
    #: first) and this entry's, over its content and ``previous_hash``
    previous_hash: Mapped[str] = mapped_column(String(64))
    entry_hash: Mapped[str] = mapped_column(String(64))
