"""Content-addressed storage of encoded dataset matrices, behind one interface with two backends.

Every dataset is stored as one ``.npz`` blob (arrays ``X`` and ``y`` as float64, and for a user-level dataset the
unit index ``units`` as int64 beside them) under a key that is the sha256 of its content (:func:`_digest`); on read
the hash is recomputed and checked, so a corrupted or tampered blob is refused rather than fitted on. A blob without
``units`` (every dataset stored before user-level privacy, and every row-level one) has the key it always had: the
format gained an optional array, and existing datasets need no rewrite. The serialisation and the check live in
:class:`DatasetStore`; a backend only moves bytes:

* :class:`LocalDatasetStore` (``PRIVFIT_STORE=local``, the default) — ``<key>.npz`` files under
  ``PRIVFIT_DATA_DIR``, written to a temporary file and renamed so a reader never sees half a file. Only
  processes that see that directory can fit (one machine, or a shared filesystem). The directory carries an
  identity marker (``.privfit-store-id``, a random uuid, written with the first matrix) so that datasets record
  which directory holds them and a process configured with another directory is detected
  (:mod:`privfit.datasets.lifecycle`).
* :class:`DatabaseDatasetStore` (``PRIVFIT_STORE=database``) — one row of the ``dataset_blobs`` table in
  privfit's own database, so any worker that has ``PRIVFIT_DATABASE_URL`` can fit.

:func:`make_store` picks the backend from the settings. The matrices are private: nothing here logs or returns
values except to the job runner, and :class:`DatasetStoreError` messages never quote stored bytes or values.

What is stored is accounted for by :mod:`privfit.datasets.lifecycle` (pending uploads, reference counting under a
per-key lock, the orphan sweep); this module only adds the primitives it needs: :meth:`DatasetStore.key_of`,
:meth:`DatasetStore.stored_keys`, :meth:`DatasetStore.purge` (inside the caller's locked transaction) and
:meth:`DatasetStore.remove_partial` (temporary files of interrupted writes).
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, BinaryIO, NamedTuple, Protocol, cast

import numpy as np
from sqlalchemy import delete, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from privfit.db.models import DatasetBlob, utcnow
from privfit.faults import crash_point

if TYPE_CHECKING:
    from privfit.db import Database
    from privfit.settings import Settings

__all__ = [
    "DatabaseDatasetStore",
    "DatasetStore",
    "DatasetStoreError",
    "LocalDatasetStore",
    "StoredMatrix",
    "make_store",
]

_HEX = frozenset("0123456789abcdef")


class Matrix(Protocol):
    """What a store writes: an encoded matrix, its labels and its unit index (None for a row-level dataset) — an
    :class:`~privfit.datasets.encoding.EncodedDataset`, or a :class:`StoredMatrix` read from another store."""

    @property
    def X(self) -> np.ndarray: ...  # noqa: N802 - the matrix's conventional name

    @property
    def y(self) -> np.ndarray: ...

    @property
    def units(self) -> np.ndarray | None: ...


class DatasetStoreError(Exception):
    """A stored dataset is missing or does not match its content hash (the message never contains data)."""


def _digest(X: np.ndarray, y: np.ndarray, units: np.ndarray | None = None) -> str:
    hasher = hashlib.sha256()
    for array in (X, y):
        contiguous = np.ascontiguousarray(array, dtype=np.float64)
        hasher.update(str(contiguous.shape).encode())
        hasher.update(contiguous.data)  # the array's buffer itself: ``tobytes()`` would copy the whole matrix
    if units is not None:  # a row-level dataset keeps the key it had before units existed
        index = np.ascontiguousarray(units, dtype="<i8")
        hasher.update(b"units" + str(index.shape).encode())
        hasher.update(index.data)
    return hasher.hexdigest()


def _check_key(key: str) -> str:
    if not isinstance(key, str) or len(key) != 64 or not _HEX.issuperset(key):
        raise DatasetStoreError("malformed storage key")
    return key


def _write_npz(target: BinaryIO, dataset: Matrix) -> None:
    """Write the ``.npz`` of ``dataset``'s matrix and labels (float64, no pickles), and its unit index (int64) when
    it has one, to ``target``. numpy writes an array to a stream that is not a plain file (a zip entry) in pieces
    of 16 MiB: no matrix-sized copy is made."""
    arrays: dict[str, np.ndarray] = {
        "X": np.asarray(dataset.X, dtype=np.float64),
        "y": np.asarray(dataset.y, dtype=np.float64),
    }
    if dataset.units is not None:
        arrays["units"] = np.asarray(dataset.units, dtype=np.int64)
    np.savez(target, **arrays)  # type: ignore[arg-type]  # numpy's stub types **kwds after allow_pickle


def _serialise(dataset: Matrix) -> memoryview:
    """The ``.npz`` bytes of ``dataset``, as a view of the buffer they were written to (not copied again)."""
    buffer = io.BytesIO()
    _write_npz(buffer, dataset)
    return buffer.getbuffer()


class _HalfwayHook:
    """``handle`` (write, seek, tell, flush, …) that calls ``at_half`` once, when half of ``total`` bytes were
    written: where a test-only crash point leaves half a temporary file (:mod:`privfit.faults`)."""

    def __init__(self, handle: IO[bytes], total: int, at_half: Callable[[], None]) -> None:
        self._handle, self._total, self._at_half = handle, total, at_half
        self._written = 0

    def write(self, data: Any) -> int:
        written = self._handle.write(data)
        before, self._written = self._written, self._written + len(memoryview(data).cast("B"))
        if before < self._total // 2 <= self._written:
            self._at_half()
        return written

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)


class StoredMatrix(NamedTuple):
    """A stored dataset as read back: the matrix, the labels and the unit index (None for a row-level dataset)."""

    X: np.ndarray
    y: np.ndarray
    units: np.ndarray | None


def _deserialise_checked(key: str, source: BinaryIO) -> StoredMatrix:
    """Read ``(X, y, units)`` from ``.npz`` bytes and verify them against ``key``."""
    try:
        with np.load(source, allow_pickle=False) as data:
            X, y = data["X"], data["y"]
            units = data["units"] if "units" in data.files else None
    except Exception:
        # numpy's messages may quote the bytes it could not parse: report the fact only, without the cause.
        raise DatasetStoreError("stored dataset is unreadable (not a valid dataset archive)") from None
    if _digest(X, y, units) != key:
        raise DatasetStoreError("stored dataset does not match its content hash")
    return StoredMatrix(X, y, units)


class DatasetStore(ABC):
    """Content-addressed dataset storage: ``put`` → key, ``get`` (integrity-checked), ``delete``.

    Subclasses implement only the byte transport (:meth:`_contains`, :meth:`_write`, :meth:`_open`,
    :meth:`delete`); serialisation and the hash check are shared here.
    """

    #: which store holds the data (recorded with each dataset): ``local:<uuid>`` or ``database``
    identity: str

    @staticmethod
    def key_of(dataset: Matrix) -> str:
        """The storage key :meth:`put` will use for ``dataset`` (the sha256 of X, y and the unit index if any),
        without storing it."""
        return _digest(dataset.X, dataset.y, dataset.units)

    def put(self, dataset: Matrix, key: str | None = None) -> str:
        """Store ``dataset``'s matrix and labels; returns the storage key (idempotent for equal content).

        ``key`` is :meth:`key_of` ``(dataset)`` when the caller has it already (a hash over the whole matrix is
        not computed twice); a wrong one is caught when the data is read (:meth:`get` checks it)."""
        key = self.key_of(dataset) if key is None else _check_key(key)
        if not self._contains(key):
            self._write(key, dataset)
        return key

    def get(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """Load (X, y) and verify them against ``key``; :class:`DatasetStoreError` if missing or mismatched."""
        X, y, _ = self.read(key)
        return X, y

    def read(self, key: str) -> StoredMatrix:
        """Load (X, y, units) and verify them against ``key``; :class:`DatasetStoreError` if missing or
        mismatched. ``units`` is None for a row-level dataset."""
        source = self._open(_check_key(key))
        if source is None:
            raise DatasetStoreError("dataset data is not in the store (purged or never written)")
        with source:
            return _deserialise_checked(key, source)

    @abstractmethod
    def delete(self, key: str) -> None:
        """Purge the data of ``key`` (the ledger keeps its entries); a missing key is not an error."""

    def purge(self, session: Session, key: str) -> None:
        """Purge ``key`` while the caller's write transaction (``session``) holds the key's lock, so no upload of
        the same content can start between the reference check and the purge. The database backend deletes in
        that transaction; the local one unlinks the file before it commits."""
        self.delete(key)

    @abstractmethod
    def stored_keys(self) -> list[str]:
        """Every key with data in the store (for the orphan sweep)."""

    def remove_partial(self, older_than_seconds: float) -> int:
        """Remove leftovers of interrupted writes older than ``older_than_seconds``; returns how many."""
        return 0

    @abstractmethod
    def _contains(self, key: str) -> bool:
        """Whether ``key`` is stored (a fast path that skips serialising content already stored)."""

    @abstractmethod
    def _write(self, key: str, dataset: Matrix) -> None:
        """Store the ``.npz`` of ``dataset`` (:func:`_write_npz`) under ``key`` atomically; storing an existing key
        (even concurrently) must succeed."""

    @abstractmethod
    def _open(self, key: str) -> BinaryIO | None:
        """A readable binary stream of the blob of ``key``, or None if it is not stored."""


class LocalDatasetStore(DatasetStore):
    """Datasets under ``root`` as ``<sha256 of X and y>.npz`` (one machine, or a shared filesystem)."""

    MARKER = ".privfit-store-id"

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._identity: str | None = None

    @property
    def identity(self) -> str:  # type: ignore[override]
        """``local:<uuid>`` from the directory's marker; ``local:unmarked`` while no matrix was ever stored here
        (then it holds no dataset, and matches none)."""
        if self._identity is None:
            marker = self._read_marker()
            if marker is None:
                return "local:unmarked"
            self._identity = f"local:{marker}"
        return self._identity

    def _read_marker(self) -> str | None:
        path = self.root / self.MARKER
        for _ in range(50):  # a concurrent creator may not have written its uuid yet
            try:
                text = path.read_text().strip()
            except FileNotFoundError:
                return None
            if text:
                return text
            time.sleep(0.01)
        raise DatasetStoreError(f"the store identity marker {path} is empty")

    def _ensure_marker(self) -> None:
        """Create the identity marker (a random uuid) unless it exists; concurrent creators agree (exclusive
        create, the losers read the winner's)."""
        if self._identity is not None:
            return
        try:
            with (self.root / self.MARKER).open("x") as handle:
                handle.write(str(uuid.uuid4()))
                handle.flush()
                os.fsync(handle.fileno())
        except FileExistsError:
            pass
        self._identity = None
        _ = self.identity

    def _path(self, key: str) -> Path:
        return self.root / f"{_check_key(key)}.npz"

    def _contains(self, key: str) -> bool:
        self._ensure_marker()  # every put asks first: a directory that holds data always has its identity
        return self._path(key).exists()

    def _write(self, key: str, dataset: Matrix) -> None:
        """Stream the ``.npz`` into a temporary file in the store's directory (no copy of it in memory), fsync it,
        rename it to ``<key>.npz``: a reader never sees half a file."""
        with tempfile.NamedTemporaryFile(dir=self.root, suffix=".tmp", delete=False) as handle:
            total = dataset.X.nbytes + dataset.y.nbytes
            # test-only: die with half a temporary file written
            _write_npz(cast(BinaryIO, _HalfwayHook(handle, total, lambda: crash_point("store:partial", handle))),
                       dataset)  # fmt: skip
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

    def stored_keys(self) -> list[str]:
        names = (path.name.removesuffix(".npz") for path in self.root.glob("*.npz"))
        return sorted(name for name in names if len(name) == 64 and _HEX.issuperset(name))

    def remove_partial(self, older_than_seconds: float) -> int:
        """Unlink ``*.tmp`` files (writes interrupted by a crash) not modified for ``older_than_seconds``."""
        cutoff, removed = time.time() - older_than_seconds, 0
        for path in self.root.glob("*.tmp"):
            try:
                if path.stat().st_mtime < cutoff:
                    path.unlink()
                    removed += 1
            except FileNotFoundError:
                continue
        return removed


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

    identity = "database"

    def __init__(self, db: Database) -> None:
        self.db = db

    def _contains(self, key: str) -> bool:
        with self.db.read() as session:
            return session.scalar(select(DatasetBlob.key).where(DatasetBlob.key == key)) is not None

    def _write(self, key: str, dataset: Matrix) -> None:
        blob = _serialise(dataset)
        values = {"key": key, "content": bytes(blob), "size": len(blob), "created_at": utcnow()}
        with self.db.write() as session:
            _insert_if_absent(session, values)

    def _open(self, key: str) -> BinaryIO | None:
        with self.db.read() as session:
            content = session.scalar(select(DatasetBlob.content).where(DatasetBlob.key == key))
        return None if content is None else io.BytesIO(content)

    def delete(self, key: str) -> None:
        """Purge the data of ``key`` (the ledger keeps its entries)."""
        with self.db.write() as session:
            self.purge(session, key)

    def purge(self, session: Session, key: str) -> None:
        """Delete the row in the caller's transaction (which holds the key's lock)."""
        session.execute(delete(DatasetBlob).where(DatasetBlob.key == _check_key(key)))

    def stored_keys(self) -> list[str]:
        with self.db.read() as session:
            return list(session.scalars(select(DatasetBlob.key).order_by(DatasetBlob.key)))


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
    """The dataset store chosen by ``settings.store``: ``"local"`` (files under ``settings.data_dir``),
    ``"database"`` (blobs in ``db``, reachable by every worker) or ``"parquet"`` (partitioned Parquet under
    ``settings.store_url``: :mod:`privfit.datasets.parquet_store`)."""
    if settings.store == "local":
        return LocalDatasetStore(settings.data_dir)
    if settings.store == "database":
        return DatabaseDatasetStore(db)
    if settings.store == "parquet":
        from .parquet_store import ParquetDatasetStore

        return ParquetDatasetStore(settings.store_url or str(settings.data_dir), settings.store_options,
                                   settings.store_partition_bytes)  # fmt: skip
    raise ValueError(f"unknown dataset store {settings.store!r} (expected 'local', 'database' or 'parquet')")
