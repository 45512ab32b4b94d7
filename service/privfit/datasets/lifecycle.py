"""The lifecycle of stored private data: nothing the store holds is ever left unaccounted for.

Invariant: every key in the dataset store is referenced by a live dataset (``datasets.storage_key`` or, for a
dataset with a validation split, ``datasets.validation_storage_key``) or by a pending upload (``dataset_uploads``,
both of whose keys count) — except briefly, between the commit that drops the last reference and the
purge that follows it, and after a crash at that point, which the orphan sweep repairs.

* **Upload** (:func:`begin_upload` → ``store.put`` → :func:`finish_upload` in the registering transaction): the
  pending upload is committed *before* any byte is written, and removed in the transaction that inserts the
  dataset and its budget. A crash at any step leaves at most a pending upload, a partial temporary file or a
  complete blob that only the pending upload references; the sweep removes all three once the upload is older
  than ``PRIVFIT_UPLOAD_GRACE_SECONDS``.
* **Reference counting under a lock** (:func:`lock_key`): checking a key's references and purging it
  (:func:`release_key`) happen in one write transaction holding the key's lock (PostgreSQL: a transaction-scoped
  advisory lock on the key; SQLite: ``BEGIN IMMEDIATE`` serialises every writer), and :func:`begin_upload` takes the
  same lock. So a delete of dataset B racing an upload of A with equal content either purges first (A's put then
  writes the data again) or sees A's pending upload and keeps the data — A is never registered on purged data.
* **Orphan sweep** (:func:`sweep_orphans`), at start-up and periodically (:class:`privfit.jobs.sweeper.
  OrphanSweeper`): stale pending uploads, stale temporary files, and every stored key nothing references.
* **Store identity**: a local data directory has an identity (``LocalDatasetStore.identity``) recorded with each
  dataset (``datasets.store_id``). :func:`check_store` refuses to start a process whose directory is not the one
  holding the live datasets; :func:`store_mismatch` lets a worker refuse a fit before charging it.

Nothing here reads, logs or returns stored values: only keys, ids and counts.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import and_, delete, func, or_, select, text
from sqlalchemy.orm import Session

from privfit.db import Database, Dataset
from privfit.db.models import DatasetUpload, utcnow

from .store import DatabaseDatasetStore, DatasetStore, LocalDatasetStore

__all__ = [
    "DuplicateDatasetError",
    "StoreMismatchError",
    "SweepReport",
    "abandon_upload",
    "begin_upload",
    "check_store",
    "finish_upload",
    "lock_key",
    "refuse_duplicate",
    "release_key",
    "store_mismatch",
    "sweep_orphans",
]

log = logging.getLogger("privfit.datasets")

_LOCK_NAMESPACE = 0x70F1  # high bits of the advisory lock id: privfit storage keys


class DuplicateDatasetError(Exception):
    """The owner already has a live dataset with the same encoded content (``existing_id``)."""

    def __init__(self, existing_id: str) -> None:
        super().__init__(existing_id)
        self.existing_id = existing_id


class StoreMismatchError(RuntimeError):
    """This process's dataset store is not the one holding the live datasets (a deployment misconfiguration)."""


def lock_key(session: Session, key: str) -> None:
    """Take ``key``'s lock for the rest of ``session``'s write transaction (PostgreSQL advisory lock; on SQLite the
    ``BEGIN IMMEDIATE`` write transaction already excludes every other writer)."""
    if session.get_bind().dialect.name == "postgresql":
        lock_id = (_LOCK_NAMESPACE << 44) | int(key[:11], 16)
        session.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": lock_id})


def _lock_keys(session: Session, *keys: str | None) -> None:
    """Lock each distinct key, in sorted order (two uploads sharing keys never wait on each other in a cycle)."""
    for key in sorted({k for k in keys if k is not None}):
        lock_key(session, key)


def _referenced(session: Session, key: str) -> bool:
    live = session.scalar(
        select(func.count()).select_from(Dataset)
        .where(or_(Dataset.storage_key == key, Dataset.validation_storage_key == key))
    )  # fmt: skip
    pending = session.scalar(
        select(func.count()).select_from(DatasetUpload)
        .where(or_(DatasetUpload.storage_key == key, DatasetUpload.validation_storage_key == key))
    )  # fmt: skip
    return bool(live or pending)


def begin_upload(
    db: Database,
    upload_id: str,
    key: str,
    *,
    owner_key_id: str,
    allow_duplicate: bool,
    validation_key: str | None = None,
    content_hash: str | None = None,
    domain: str | None = None,
) -> None:
    """Commit a pending upload of ``key`` (and of ``validation_key``, the validation matrix of a split upload)
    before anything is written to the store, under the keys' locks.

    Raises :class:`DuplicateDatasetError` if ``owner_key_id`` already has a live dataset with this content and
    ``allow_duplicate`` is false (nothing is recorded then). A split upload's keys are random (the split is), so it
    also passes its ``content_hash`` (of the whole encoded data): it is locked like a key and matched too. An upload
    joining the privacy ``domain`` (the id of the budget it will spend) is not refused for a dataset of that domain:
    they share one budget.
    """
    with db.write() as session:
        _lock_keys(session, key, validation_key, content_hash)
        if not allow_duplicate:
            refuse_duplicate(session, owner_key_id, key, content_hash, domain=domain)
        session.add(
            DatasetUpload(id=upload_id, storage_key=key, validation_storage_key=validation_key, created_at=utcnow())
        )


def refuse_duplicate(session: Session, owner_key_id: str, key: str, content_hash: str | None = None, *,
                     domain: str | None = None) -> None:  # fmt: skip
    """Raise :class:`DuplicateDatasetError` if ``owner_key_id`` has a live dataset stored under ``key`` (or, given,
    with ``content_hash``) outside the privacy ``domain`` the upload joins (a copy within it spends the same budget).
    Called under the key's lock when an upload begins and again when it registers, so two identical uploads racing
    each other cannot both register (the second sees the first's dataset)."""
    same = Dataset.storage_key == key
    if content_hash is not None:
        same = or_(same, Dataset.content_hash == content_hash)
    if domain is not None:
        same = and_(same, func.coalesce(Dataset.budget_dataset_id, Dataset.id) != domain)
    existing = session.scalar(
        select(Dataset.id)
        .where(Dataset.owner_key_id == owner_key_id, same, Dataset.deleted_at.is_(None))
        .order_by(Dataset.created_at)
        .limit(1)
    )
    if existing is not None:
        raise DuplicateDatasetError(existing)


def finish_upload(
    session: Session, upload_id: str, key: str, validation_key: str | None = None, content_hash: str | None = None
) -> bool:
    """In the transaction that registers the dataset: take the locks :func:`begin_upload` took and remove the
    pending upload. False if it is gone (the sweep judged it abandoned and may have purged the data): the caller
    must not register."""
    _lock_keys(session, key, validation_key, content_hash)
    removed = session.execute(delete(DatasetUpload).where(DatasetUpload.id == upload_id).returning(DatasetUpload.id))
    return removed.first() is not None


def abandon_upload(
    db: Database, store: DatasetStore, upload_id: str, key: str, validation_key: str | None = None
) -> None:
    """An upload that failed after :func:`begin_upload`: drop its pending record, and its data unless referenced."""
    with db.write() as session:
        session.execute(delete(DatasetUpload).where(DatasetUpload.id == upload_id))
    for each in sorted({k for k in (key, validation_key) if k is not None}):
        release_key(db, store, each)


def release_key(db: Database, store: DatasetStore, key: str) -> bool:
    """Purge ``key`` from the store if no live dataset and no pending upload references it; True if purged.

    The check and the purge happen in one write transaction holding the key's lock (module docstring)."""
    with db.write() as session:
        lock_key(session, key)
        if _referenced(session, key):
            return False
        store.purge(session, key)
        return True


@dataclass
class SweepReport:
    """What one orphan sweep removed (counts and storage keys; never data)."""

    abandoned_uploads: list[str] = field(default_factory=list)
    partial_files: int = 0
    purged_keys: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.abandoned_uploads or self.partial_files or self.purged_keys)


def sweep_orphans(db: Database, store: DatasetStore, grace_seconds: float, now: datetime | None = None) -> SweepReport:
    """Remove private data the service no longer accounts for.

    1. pending uploads older than ``grace_seconds`` (their process died between the pending commit and the
       registration) are deleted;
    2. temporary files of interrupted writes older than ``grace_seconds`` are unlinked;
    3. every stored key that no live dataset and no pending upload references is purged (:func:`release_key`,
       under the key's lock: an upload starting meanwhile is either seen or writes its data again) — in
       ``store`` and, for a local store, also in the ``dataset_blobs`` table (private data in the database
       whatever store this process uses, e.g. left from a time the deployment used the database store).
    """
    cutoff = (now or utcnow()) - timedelta(seconds=grace_seconds)
    report = SweepReport()
    with db.write() as session:
        stale = session.execute(
            delete(DatasetUpload).where(DatasetUpload.created_at < cutoff).returning(DatasetUpload.id)
        ).scalars()
        report.abandoned_uploads = sorted(stale)
    report.partial_files = store.remove_partial(grace_seconds)
    stores = [store] if isinstance(store, DatabaseDatasetStore) else [store, DatabaseDatasetStore(db)]
    for each in stores:
        with db.read() as session:  # a cheap first pass; each candidate is decided again under its lock
            referenced = set(session.scalars(select(Dataset.storage_key).where(Dataset.storage_key.is_not(None))))
            referenced |= set(session.scalars(
                select(Dataset.validation_storage_key).where(Dataset.validation_storage_key.is_not(None))
            ))  # fmt: skip
            referenced |= set(session.scalars(select(DatasetUpload.storage_key)))
            referenced |= set(session.scalars(
                select(DatasetUpload.validation_storage_key).where(DatasetUpload.validation_storage_key.is_not(None))
            ))  # fmt: skip
        for key in each.stored_keys():
            if key not in referenced and release_key(db, each, key):
                report.purged_keys.append(key)
    if not report.empty:
        log.warning(
            "orphaned dataset data removed",
            extra={"abandoned_uploads": report.abandoned_uploads, "partial_files": report.partial_files,
                   "purged_keys": report.purged_keys},
        )  # fmt: skip
    return report


def _describe(store: DatasetStore) -> str:
    if isinstance(store, LocalDatasetStore):
        return f"the local store at PRIVFIT_DATA_DIR={store.root.resolve()} (identity {store.identity})"
    if store.identity.startswith("parquet:"):
        return f"the parquet store at PRIVFIT_STORE_URL={getattr(store, 'url', '?')} (identity {store.identity})"
    return "the database store (PRIVFIT_STORE=database)"


def _describe_id(store_id: str) -> str:
    if store_id == "database":
        return "the database store"
    kind, _, identity = store_id.partition(":")
    return f"the {kind} store {identity}" if kind == "parquet" else f"the local store {store_id}"


def store_mismatch(dataset_store_id: str | None, store: DatasetStore) -> str | None:
    """Why this process cannot read a dataset recorded in ``dataset_store_id``, or None if it can (or the dataset
    predates the record). The message names stores and settings only."""
    if dataset_store_id is None or dataset_store_id == store.identity:
        return None
    return (
        f"the dataset is held by {_describe_id(dataset_store_id)}, but this process uses {_describe(store)}: every "
        "API and worker process must use the same store (one PRIVFIT_DATA_DIR on a shared filesystem, one "
        "PRIVFIT_STORE_URL, or PRIVFIT_STORE=database)"
    )


def check_store(db: Database, store: DatasetStore) -> None:
    """At start-up: refuse (:class:`StoreMismatchError`) a process whose store holds none of the live datasets
    while other stores hold some — its workers could not read them and its uploads would be invisible to the
    other processes. Datasets registered before their store was recorded are not counted."""
    with db.read() as session:
        stores = set(
            session.scalars(
                select(Dataset.store_id).where(Dataset.deleted_at.is_(None), Dataset.store_id.is_not(None)).distinct()
            )
        )
    if stores and store.identity not in stores:
        held = ", ".join(sorted(s for s in stores if s is not None))
        raise StoreMismatchError(
            f"dataset store mismatch: the live datasets of this database are held by {held}, but this process uses "
            f"{_describe(store)}. Every API and worker process on one database must use the same store: point "
            "PRIVFIT_DATA_DIR at the same directory (a shared filesystem), PRIVFIT_STORE_URL at the same URL, or use "
            "PRIVFIT_STORE=database."
        )
