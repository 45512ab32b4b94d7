"""Moving every live dataset from one dataset store to another (``privfit store migrate``; issue 39): e.g. from the
local directory or the database to partitioned Parquet on an object store, so that existing datasets follow a
deployment that scales out.

For each live dataset not yet in the target store, one at a time:

1. read its matrix (and its validation split's) from the source store — checked against its key, so a corrupted
   blob is reported and left where it is, never copied;
2. write it to the target (content-addressed and idempotent: a re-run after a crash writes nothing new);
3. in one write transaction holding the locks of the old and new keys (:func:`~privfit.datasets.lifecycle.lock_key`),
   point the dataset at its new keys and the target's identity (``datasets.store_id``) — if it still points at the
   old ones (a dataset deleted meanwhile is left alone);
4. release the old keys in the source (:func:`~privfit.datasets.lifecycle.release_key`: purged once nothing refers
   to them).

A crash between 2 and 3 leaves data in the target that nothing refers to yet: the next run uses it, or the target's
orphan sweep removes it after the upload grace. A crash between 3 and 4 leaves unreferenced data in the source: the
next run releases every key of the source nothing refers to (step 0). Budgets, ledgers, fits and content hashes are
not touched: only where the rows are kept changes. Run it with the API and workers stopped (every process of one
database must use one store: :func:`~privfit.datasets.lifecycle.check_store`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import or_, select

from privfit.db import Database, Dataset

from .lifecycle import lock_key, release_key
from .store import DatasetStore, DatasetStoreError

__all__ = ["MigrationReport", "migrate_store"]


@dataclass
class MigrationReport:
    """What a migration did: datasets moved, keys released in the source, datasets that could not be read (ids,
    with the store's data-free message)."""

    migrated: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


def migrate_store(db: Database, source: DatasetStore, target: DatasetStore) -> MigrationReport:
    """Move every live dataset held by ``source`` (or recorded with no store) into ``target`` (module docstring)."""
    report = MigrationReport()
    if source.identity == target.identity:
        return report
    with db.read() as session:
        rows = session.execute(
            select(Dataset.id, Dataset.storage_key, Dataset.validation_storage_key).where(
                Dataset.deleted_at.is_(None), Dataset.storage_key.is_not(None),
                or_(Dataset.store_id.is_(None), Dataset.store_id != target.identity),
            ).order_by(Dataset.created_at, Dataset.id)
        ).all()  # fmt: skip
    for dataset_id, key, validation_key in rows:
        try:
            moved = {old: target.put(source.read(old)) for old in (key, validation_key) if old is not None}
        except DatasetStoreError as error:
            report.failed[dataset_id] = str(error)
            continue
        if _repoint(db, dataset_id, moved, target.identity):
            report.migrated.append(dataset_id)
            report.released.extend(old for old in sorted(moved) if release_key(db, source, old))
    report.released.extend(key for key in source.stored_keys() if release_key(db, source, key))  # earlier crashes
    return report


def _repoint(db: Database, dataset_id: str, moved: dict[str, str], store_id: str) -> bool:
    """Point the dataset at its keys in the target, if it still holds the old ones; whether it was changed."""
    with db.write() as session:
        for key in sorted({*moved, *moved.values()}):
            lock_key(session, key)
        dataset = session.get(Dataset, dataset_id)
        if dataset is None or dataset.deleted_at is not None or dataset.storage_key not in moved:
            return False
        if dataset.validation_storage_key is not None and dataset.validation_storage_key not in moved:
            return False
        dataset.storage_key = moved[dataset.storage_key]
        if dataset.validation_storage_key is not None:
            dataset.validation_storage_key = moved[dataset.validation_storage_key]
        dataset.store_id = store_id
        return True
