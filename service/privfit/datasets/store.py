"""Content-addressed storage of encoded dataset matrices, behind one interface with two backends.

Every dataset is stored as one ``.npz`` blob (arrays ``X`` and ``y`` as float64) under a key that is the sha256
of its content (:func:`_digest`); on read the hash is recomputed and checked, so a corrupted or tampered blob is
refused rather than fitted on. The serialisation and the check live in :class:`DatasetStore`; a backend only
moves bytes:

* :class:`LocalDatasetStore` (``PRIVFIT_STORE=local``, the default) — ``<key>.npz`` files under
  ``PRIVFIT_DATA_DIR``, written to a temporary file and renamed so a reader never sees half a file. Only
  processes that see that directory can fit (one machine, or a shared filesystem).
* :class:`DatabaseDatasetStore` (``PRIVFIT_STORE=database``) — one row of the ``dataset_blobs`` table in
  privfit's own database, so any worker that has ``PRIVFIT_DATABASE_URL`` can fit.

:func:`make_store` picks the backend from the settings. The matrices are private: nothing here logs or returns
values except to the job runner, and :class:`DatasetStoreError` messages never quote stored bytes or values.
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import numpy as np
from sqlalchemy import delete, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from privfit.db.models import DatasetBlob, utcnow

from .encoding import EncodedDataset

if TYPE_CHECKING:
    from privfit.db import Database
    from privfit.settings import Settings

__all__ = ["DatabaseDatasetStore", "DatasetStore", "DatasetStoreError", "LocalDatasetStore", "make_store"]

_HEX = frozenset("0123456789abcdef")


class DatasetStoreError(Exception):
    """A stored dataset is missing or does not match its content hash (the message never contains data)."""


def _digest(X: np.ndarray, y: np.ndarray) -> str:
    hasher = hashlib.sha256()
    for array in (X, y):
        contiguous = np.ascontiguousarray(array, dtype=np.float64)
        hasher.update(str(contiguous.shape).encode())
        hasher.update(contiguous.tobytes())
    return hasher.hexdigest()


def _check_key(key: str) -> str:
    if not isinstance(key, str) or len(key) != 64 or not _HEX.issuperset(key):
        raise DatasetStoreError("malformed storage key")
    return key


def _serialise(dataset: EncodedDataset) -> bytes:
    """The ``.npz`` bytes of ``dataset``'s matrix and labels (float64, no pickles)."""
    buffer = io.BytesIO()
    np.savez(buffer, X=np.asarray(dataset.X, dtype=np.float64), y=np.asarray(dataset.y, dtype=np.float64))
    return buffer.getvalue()


def _deserialise_checked(key: str, source: BinaryIO) -> tuple[np.ndarray, np.ndarray]:
    """Read ``(X, y)`` from ``.npz`` bytes and verify them against ``key``."""
    try:
        with np.load(source, allow_pickle=False) as data:
            X, y = data["X"], data["y"]
    except Exception:
        # numpy's messages may quote the bytes it could not parse: report the fact only, without the cause.
        raise DatasetStoreError("stored dataset is unreadable (not a valid dataset archive)") from None
    if _digest(X, y) != key:
        raise DatasetStoreError("stored dataset does not match its content hash")
    return X, y


class DatasetStore(ABC):
    """Content-addressed dataset storage: ``put`` → key, ``get`` (integrity-checked), ``delete``.

    Subclasses implement only the byte transport (:meth:`_contains`, :meth:`_save`, :meth:`_open`,
    :meth:`delete`); serialisation and the hash check are shared here.
    """

    def put(self, dataset: EncodedDataset) -> str:
        """Store ``dataset``'s matrix and labels; returns the storage key (idempotent for equal content)."""
        key = _digest(dataset.X, dataset.y)
        if not self._contains(key):
            self._save(key, _serialise(dataset))
        return key

    def get(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """Load (X, y) and verify them against ``key``; :class:`DatasetStoreError` if missing or mismatched."""
        source = self._open(_check_key(key))
        if source is None:
            raise DatasetStoreError("dataset data is not in the store (purged or never written)")
        with source:
            return _deserialise_checked(key, source)

    @abstractmethod
    def delete(self, key: str) -> None:
        """Purge the data of ``key`` (the ledger keeps its entries); a missing key is not an error."""

    @abstractmethod
    def _contains(self, key: str) -> bool:
        """Whether ``key`` is stored (a fast path that skips serialising content already stored)."""

    @abstractmethod
    def _save(self, key: str, blob: bytes) -> None:
        """Store ``blob`` under ``key`` atomically; storing an existing key (even concurrently) must succeed."""

    @abstractmethod
    def _open(self, key: str) -> BinaryIO | None:
        """A readable binary stream of the blob of ``key``, or None if it is not stored."""


class LocalDatasetStore(DatasetStore):
    """Datasets under ``root`` as ``<sha256 of X and y>.npz`` (one machine, or a shared filesystem)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        return self.root / f"{_check_key(key)}.npz"

    def _contains(self, key: str) -> bool:
        return self._path(key).exists()

    def _save(self, key: str, blob: bytes) -> None:
        with tempfile.NamedTemporaryFile(dir=self.root, suffix=".tmp", delete=False) as handle:
            handle.write(blob)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(handle.name, self._path(key))

    def _open(self, key: str) -> BinaryIO | None:
        try:
            return self._path(key).open("rb")
        except FileNotFoundError:
            return None

    def delete(self, key: str) -> None:
        """Purge the data of ``key`` (the ledger keeps its entries)."""
        self._path(key).unlink(missing_ok=True)


class DatabaseDatasetStore(DatasetStore):
    """Datasets as rows of ``dataset_blobs`` (key, npz bytes, size, created_at) in privfit's own database.

    Every process with ``PRIVFIT_DATABASE_URL`` can read them: API servers and workers on other machines need
    no shared filesystem. ``put`` inserts if absent (``INSERT … ON CONFLICT DO NOTHING`` on PostgreSQL and
    SQLite), so equal content stored twice, even concurrently, is one row and neither put fails.

    Size limit: one dataset is one value, held whole in memory by the client (and by the server while it is
    sent). PostgreSQL ``bytea`` caps a value at 1 GB and is practical up to a few hundred MB; SQLite's default
    cap is 1 GB (``SQLITE_MAX_LENGTH``). The encoded matrix is n·(d + 1)·8 bytes — one-hot columns make it
    several times the CSV (Adult: a 4 MB CSV encodes to 27 MB). Beyond a few hundred MB use the local store
    on a shared filesystem.
    """

    def __init__(self, db: Database) -> None:
        self.db = db

    def _contains(self, key: str) -> bool:
        with self.db.read() as session:
            return session.scalar(select(DatasetBlob.key).where(DatasetBlob.key == key)) is not None

    def _save(self, key: str, blob: bytes) -> None:
        values = {"key": key, "content": blob, "size": len(blob), "created_at": utcnow()}
        with self.db.write() as session:
            _insert_if_absent(session, values)

    def _open(self, key: str) -> BinaryIO | None:
        with self.db.read() as session:
            content = session.scalar(select(DatasetBlob.content).where(DatasetBlob.key == key))
        return None if content is None else io.BytesIO(content)

    def delete(self, key: str) -> None:
        """Purge the data of ``key`` (the ledger keeps its entries)."""
        with self.db.write() as session:
            session.execute(delete(DatasetBlob).where(DatasetBlob.key == _check_key(key)))


def _insert_if_absent(session: Session, values: dict[str, object]) -> None:
    """Insert a ``dataset_blobs`` row unless its key exists (``INSERT … ON CONFLICT (key) DO NOTHING``): a
    concurrent insert of the same key — the same content, as the key is its hash — waits for the other
    transaction and then does nothing, instead of failing on the unique key."""
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        session.execute(postgresql.insert(DatasetBlob).values(values).on_conflict_do_nothing(index_elements=["key"]))
    elif dialect == "sqlite":
        session.execute(sqlite.insert(DatasetBlob).values(values).on_conflict_do_nothing(index_elements=["key"]))
    else:
        raise NotImplementedError(f"the database dataset store supports PostgreSQL and SQLite, not {dialect}")


def make_store(settings: Settings, db: Database) -> DatasetStore:
    """The dataset store chosen by ``settings.store``: ``"local"`` (files under ``settings.data_dir``) or
    ``"database"`` (blobs in ``db``, reachable by every worker)."""
    if settings.store == "local":
        return LocalDatasetStore(settings.data_dir)
    if settings.store == "database":
        return DatabaseDatasetStore(db)
    raise ValueError(f"unknown dataset store {settings.store!r} (expected 'local' or 'database')")
