"""Datasets as partitioned Parquet on a filesystem many machines reach (``PRIVFIT_STORE=parquet``): a local or shared
directory, or an S3-compatible object store, through fsspec (issue 39).

**Layout.** A dataset of n encoded rows of dimension d is cut into partitions of at most r rows, r a public function of
d alone (:func:`rows_per_partition`: about ``partition_bytes`` of float64 per partition). Under ``<root>/<key>/`` each
partition is one Parquet file ``part-00000.parquet``, … — one non-nullable float64 column per feature (``x0``, …,
``x{d−1}``), a column ``y`` (float64) and, for a user-level dataset, a column ``unit`` (int64), in one row group,
PLAIN-encoded and snappy-compressed (no dictionary: a partition is re-read at each step of a fit larger than the
workers' memory, and plain columns decode at memory speed, 3–4 × faster than a list column's levels) —, and
``manifest.json`` lists them. (Partitions written before this layout hold the rows as one column ``x`` of fixed-size
lists; they are read as well.) The manifest is written last: a dataset is stored once
its manifest is there; partitions without a manifest are an interrupted write, removed by :meth:`remove_partial`
after the upload grace, and a delete removes the manifest first.

**The key is a hash tree** (a Merkle root) instead of one hash over the whole matrix, so that one partition can be
checked on its own — by the machine that reads it, without the others (a Dask worker, :mod:`privfit.solvers.dask`):

* each partition's hash ``h_i = sha256("privfit-partition-v1" ‖ rows_i, d, units? ‖ X_i ‖ y_i ‖ units_i)`` over its
  encoded content (little-endian float64 in row-major order, int64 unit ids), not over Parquet's bytes, which depend
  on the writer's version;
* ``key = sha256("privfit-parquet-v1" ‖ {n, d, r, units?} ‖ h_0 ‖ h_1 ‖ …)``.

A reader recomputes the key from the manifest (a manifest that does not hash to the dataset's key is refused) and
each partition's hash from the rows it decoded (a partition that does not match the manifest is refused): a corrupted
or tampered byte anywhere is :class:`~privfit.datasets.store.DatasetStoreError`, whose messages never quote data.
The key depends only on the content and r, so equal content stored twice is one directory (content addressing, the
lifecycle's reference counting: :mod:`privfit.datasets.lifecycle`), and a put of content already stored writes
nothing.

**Where.** ``PRIVFIT_STORE_URL`` is an fsspec URL: ``file:///srv/privfit/datasets`` (or a plain path; the default
is ``PRIVFIT_DATA_DIR``) or ``s3://bucket/prefix`` (the ``s3`` extra, s3fs; credentials and endpoint as for any AWS
client — ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_ENDPOINT_URL`` for MinIO, Ceph or another
S3-compatible server — or ``PRIVFIT_STORE_OPTIONS``, a JSON object given to the filesystem, e.g.
``{"client_kwargs": {"endpoint_url": "http://minio:9000"}}``). On a local directory every file is written to a
temporary name and renamed; on an object store each object is written whole by one request (S3's PUT is atomic).
The root holds an identity marker, as the local store does (``.privfit-store-id``).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import posixpath
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .store import DatasetStore, DatasetStoreError, Matrix, StoredMatrix, _check_key

__all__ = ["Manifest", "ParquetDatasetStore", "PartitionInfo", "open_filesystem", "rows_per_partition"]

FORMAT = "privfit-parquet-v1"
MANIFEST = "manifest.json"
#: The default size of a partition's float64 rows: Dask workers hold a few partitions at once in well under 1 GiB.
DEFAULT_PARTITION_BYTES = 64 * 1024**2
#: Bytes hashed at a time when a partition's rows are not one contiguous buffer: a block below glibc's mmap threshold
#: (128 KiB) is copied without fresh pages.
_HASH_BLOCK_BYTES = 64 * 1024
_PARTIAL_PREFIX = ".partial-"
_STAGING_PREFIX = ".staging-"

UNREADABLE = "stored dataset is unreadable (not a valid dataset archive)"
MISMATCH = "stored dataset does not match its content hash"
MISSING = "dataset data is not in the store (purged or never written)"


def rows_per_partition(d: int, partition_bytes: int = DEFAULT_PARTITION_BYTES) -> int:
    """r: the rows of a partition for rows of dimension d — ``partition_bytes`` of float64 (x and y), at least one.
    A function of public things only (d and the setting), never of the rows."""
    return max(1, partition_bytes // (8 * (d + 1)))


@dataclass(frozen=True)
class PartitionInfo:
    """One partition of a stored dataset: its file (relative to the dataset's directory), rows and hash."""

    file: str
    rows: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    """A stored dataset's shape, partition size and partitions (``manifest.json``); :meth:`key` is its storage key."""

    n: int
    d: int
    rows_per_partition: int
    units: bool
    partitions: tuple[PartitionInfo, ...]

    def key(self) -> str:
        """The storage key: the hash-tree root over the shape and the partitions' hashes (module docstring)."""
        hasher = hashlib.sha256(FORMAT.encode())
        shape = {"n": self.n, "d": self.d, "rows_per_partition": self.rows_per_partition, "units": self.units}
        hasher.update(json.dumps(shape, sort_keys=True).encode())
        for partition in self.partitions:
            hasher.update(bytes.fromhex(partition.sha256))
        return hasher.hexdigest()

    def to_json(self) -> str:
        return json.dumps({"format": FORMAT, "n": self.n, "d": self.d, "rows_per_partition": self.rows_per_partition,
                           "units": self.units, "partitions": [vars(p) for p in self.partitions]})  # fmt: skip

    @classmethod
    def from_json(cls, text: bytes) -> Manifest:
        """Parse a manifest; anything malformed is an unreadable dataset (the message quotes nothing)."""
        try:
            data = json.loads(text)
            if data["format"] != FORMAT:
                raise ValueError
            partitions = tuple(PartitionInfo(str(p["file"]), int(p["rows"]), str(p["sha256"]))
                               for p in data["partitions"])  # fmt: skip
            manifest = cls(int(data["n"]), int(data["d"]), int(data["rows_per_partition"]), bool(data["units"]),
                           partitions)  # fmt: skip
        except Exception:
            raise DatasetStoreError(UNREADABLE) from None
        if any(not _is_partition_name(p.file) for p in partitions) or sum(p.rows for p in partitions) != manifest.n:
            raise DatasetStoreError(UNREADABLE)
        return manifest


def _is_partition_name(name: str) -> bool:
    return name.startswith("part-") and name.endswith(".parquet") and name[5:-8].isdigit()


def partition_hash(X: np.ndarray, y: np.ndarray, units: np.ndarray | None) -> str:
    """h_i of the module docstring: sha256 over a partition's encoded rows, labels and unit ids."""
    return _blocks_hash([(X, y, units)])


Block = tuple[np.ndarray, np.ndarray, "np.ndarray | None"]


def _blocks_hash(blocks: list[Block]) -> str:
    """:func:`partition_hash` of the rows given in consecutive blocks (X, y, units): the same bytes in the same order
    as their concatenation, without it."""
    hasher = hashlib.sha256(b"privfit-partition-v1")
    rows, d, units = sum(X.shape[0] for X, _, _ in blocks), blocks[0][0].shape[1], blocks[0][2] is not None
    hasher.update(json.dumps([int(rows), int(d), units]).encode())
    for X, _, _ in blocks:
        if X.flags.c_contiguous and X.dtype == np.dtype("<f8"):
            hasher.update(X.data)
        else:  # a view (e.g. the first d columns of a wider buffer): its row-major bytes, a block at a time
            block = max(1, _HASH_BLOCK_BYTES // (8 * max(1, X.shape[1])))
            for start in range(0, X.shape[0], block):
                hasher.update(np.ascontiguousarray(X[start : start + block], dtype="<f8").data)
    for _, y, _ in blocks:
        hasher.update(np.ascontiguousarray(y, dtype="<f8").data)
    for _, _, unit_ids in blocks:
        if unit_ids is not None:
            hasher.update(np.ascontiguousarray(unit_ids, dtype="<i8").data)
    return hasher.hexdigest()


def _partition_table(blocks: list[Block]) -> pa.Table:
    """A partition's Parquet columns from its rows given in consecutive blocks (each column copied once, chunk by
    chunk: the blocks are never concatenated)."""
    d, units = blocks[0][0].shape[1], blocks[0][2] is not None

    def column(values: list[np.ndarray], dtype: type) -> pa.ChunkedArray:
        return pa.chunked_array([pa.array(np.asarray(v, dtype=dtype)) for v in values])

    fields = [pa.field(f"x{j}", pa.float64(), nullable=False) for j in range(d)]
    columns = [column([X[:, j] for X, _, _ in blocks], np.float64) for j in range(d)]
    fields.append(pa.field("y", pa.float64(), nullable=False))
    columns.append(column([y for _, y, _ in blocks], np.float64))
    if units:
        fields.append(pa.field("unit", pa.int64(), nullable=False))
        columns.append(column([u for _, _, u in blocks if u is not None], np.int64))
    return pa.table(columns, schema=pa.schema(fields))


def _decode_rows(table: pa.Table, d: int, out: np.ndarray | None) -> np.ndarray:
    """The partition's rows (len(table) × d float64) from its feature columns, written into ``out[:, :d]`` when given
    (a caller's buffer with room for more columns, e.g. an intercept's)."""
    rows = len(table)
    X = np.empty((rows, d), dtype=np.float64) if out is None else out[:, :d]
    if X.shape != (rows, d) or X.dtype != np.float64:
        raise ValueError
    if "x" in table.column_names:  # the earlier layout: one column of fixed-size lists
        x = table.column("x").combine_chunks()
        if x.type.list_size != d:
            raise ValueError
        X[:] = x.flatten().to_numpy(zero_copy_only=False).reshape(rows, d)
        return X
    if table.column_names[:d] != [f"x{j}" for j in range(d)]:
        raise ValueError
    for j in range(d):
        X[:, j] = table.column(j).to_numpy()
    return X


class VerifiedFiles:
    """Local partition files one process has read and checked against their hash, each with the identity the kernel
    gave it then: ``(st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns)`` (thread-safe).

    A partition read again within a fit (a dataset larger than the Dask workers' memory is read at every step) is
    checked against its hash again unless the file has that same identity both before and after the read. Any write
    to a file, or a replacement of it, changes its ctime, which no process can set back (``utime`` sets mtime and
    atime only). The kernel stamps times at a coarse clock tick, so an identity is recorded only for a file whose
    ctime is more than :data:`STABLE_SECONDS` old when it is checked (git's "racy clean" rule): a later write cannot
    share its tick. Partitions are written at upload, long before a fit reads them twice, so in practice each is
    hashed once per fit. Objects on an object store have no such identity and are always checked."""

    STABLE_SECONDS = 2.0

    def __init__(self) -> None:
        self._ids: dict[str, tuple[int, ...]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def identity(path: str) -> tuple[int, ...] | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    def known(self, path: str, identity: tuple[int, ...] | None) -> bool:
        """Whether ``path`` was checked with this ``identity``."""
        with self._lock:
            return identity is not None and self._ids.get(path) == identity

    def record(self, path: str, identity: tuple[int, ...] | None) -> None:
        """``path`` was read with ``identity`` before and after and its rows matched their hash."""
        if identity is not None and time.time_ns() - identity[4] > self.STABLE_SECONDS * 1e9:
            with self._lock:
                self._ids[path] = identity

    def clear(self) -> None:
        with self._lock:
            self._ids.clear()


def decode_partition(
    source: bytes | str,
    info: PartitionInfo,
    d: int,
    units: bool,
    *,
    out: np.ndarray | None = None,
    verified: VerifiedFiles | None = None,
) -> StoredMatrix:
    """A partition's (X, y, units) from its Parquet bytes or a local file's path (memory-mapped: a partition read
    again at every step of a fit costs no copy of the file), checked against its manifest entry; X is written into
    ``out[:, :d]`` (and is that view) when ``out`` is given. With ``verified``, a local file already checked with
    the same identity before and after this read is not hashed again (:class:`VerifiedFiles`)."""
    local = isinstance(source, str)
    before = VerifiedFiles.identity(source) if verified is not None and isinstance(source, str) else None
    try:
        if isinstance(source, str):
            table = pq.read_table(source, memory_map=True, use_threads=False)
        else:
            table = pq.read_table(io.BytesIO(source), use_threads=False)
        if len(table) != info.rows:
            raise ValueError
        X = _decode_rows(table, d, out)
        y = np.array(table.column("y").to_numpy(), dtype=np.float64)  # copies: nothing refers to the file after
        unit_ids = np.array(table.column("unit").to_numpy(), dtype=np.int64) if units else None
        if table.schema.field("y").type != pa.float64():
            raise ValueError
    except FileNotFoundError:
        raise DatasetStoreError(MISSING) from None
    except Exception:
        raise DatasetStoreError(UNREADABLE) from None
    if verified is not None and local:
        assert isinstance(source, str)
        after = VerifiedFiles.identity(source)
        if before is not None and before == after and verified.known(source, after):
            return StoredMatrix(X, y, unit_ids)  # the very file checked before, unchanged during this read
    if partition_hash(X, y, unit_ids) != info.sha256:
        raise DatasetStoreError(MISMATCH)
    if verified is not None and local and before is not None and before == after:
        assert isinstance(source, str)
        verified.record(source, after)
    return StoredMatrix(X, y, unit_ids)


def open_filesystem(url: str, options: dict[str, Any] | None = None) -> tuple[Any, str]:
    """The fsspec filesystem and root path of ``url`` (a plain path is a local directory)."""
    import fsspec

    # every existence check asks the store: another machine may have written or deleted a dataset meanwhile
    filesystem, root = fsspec.core.url_to_fs(url, **{"use_listings_cache": False, **(options or {})})
    return filesystem, root.rstrip("/")


class ParquetDatasetStore(DatasetStore):
    """Datasets under ``url`` as ``<key>/part-*.parquet`` and ``<key>/manifest.json`` (module docstring)."""

    MARKER = ".privfit-store-id"

    def __init__(self, url: str, options: dict[str, Any] | None = None,
                 partition_bytes: int = DEFAULT_PARTITION_BYTES) -> None:  # fmt: skip
        self.url, self.options = url, dict(options or {})
        self.fs, self.root = open_filesystem(url, options)
        self.local = "file" in (self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,))
        if self.local:
            self.fs.makedirs(self.root, exist_ok=True)
        self.partition_bytes = partition_bytes
        self._identity: str | None = None

    # --- identity --------------------------------------------------------------------------------------------------
    @property
    def identity(self) -> str:  # type: ignore[override]
        """``parquet:<uuid>`` from the root's marker; ``parquet:unmarked`` while nothing was ever stored there."""
        if self._identity is None:
            try:
                marker = self.fs.cat_file(self._join(self.MARKER)).decode().strip()
            except FileNotFoundError:
                return "parquet:unmarked"
            self._identity = f"parquet:{marker}"
        return self._identity

    def _ensure_marker(self) -> None:
        """Write the identity marker unless it exists, then read it back (a concurrent creator's may have won)."""
        if self._identity is not None:
            return
        if not self.fs.exists(self._join(self.MARKER)):
            self._write_file(self._join(self.MARKER), str(uuid.uuid4()).encode())
        self._identity = None
        _ = self.identity

    # --- the format ------------------------------------------------------------------------------------------------
    def _join(self, *parts: str) -> str:
        return posixpath.join(self.root, *parts)

    def _partitions(self, dataset: Matrix) -> Iterator[tuple[PartitionInfo, slice]]:
        r = rows_per_partition(dataset.X.shape[1], self.partition_bytes)
        for index, start in enumerate(range(0, dataset.X.shape[0], r)):
            rows = slice(start, min(start + r, dataset.X.shape[0]))
            units = None if dataset.units is None else dataset.units[rows]
            yield (PartitionInfo(f"part-{index:05d}.parquet", rows.stop - rows.start,
                                 partition_hash(dataset.X[rows], dataset.y[rows], units)), rows)  # fmt: skip

    def manifest_of(self, dataset: Matrix) -> Manifest:
        """The manifest :meth:`put` writes for ``dataset`` (its partitions' hashes computed, nothing stored)."""
        n, d = dataset.X.shape
        partitions = tuple(info for info, _ in self._partitions(dataset))
        return Manifest(int(n), int(d), rows_per_partition(d, self.partition_bytes), dataset.units is not None,
                        partitions)  # fmt: skip

    def key_of(self, dataset: Matrix) -> str:  # type: ignore[override]
        """The storage key: the hash-tree root of the module docstring (one pass over the rows)."""
        return self.manifest_of(dataset).key()

    def manifest(self, key: str) -> Manifest:
        """The manifest of ``key``, checked against the key; :class:`DatasetStoreError` if missing or mismatched."""
        try:
            text = self.fs.cat_file(self._join(_check_key(key), MANIFEST))
        except FileNotFoundError:
            raise DatasetStoreError(MISSING) from None
        manifest = Manifest.from_json(text)
        if manifest.key() != key:
            raise DatasetStoreError(MISMATCH)
        return manifest

    def read_partition(
        self,
        key: str,
        manifest: Manifest,
        index: int,
        *,
        out: np.ndarray | None = None,
        verified: VerifiedFiles | None = None,
    ) -> StoredMatrix:
        """Partition ``index`` of ``key`` (whose ``manifest`` the caller checked with :meth:`manifest`), decoded and
        checked against its hash: what one machine reads of a partitioned fit. With ``out`` (rows × ≥ d float64) the
        rows are decoded into its first d columns; with ``verified``, a local file read and checked before by this
        process, unchanged since, is not hashed again (:class:`VerifiedFiles`)."""
        info = manifest.partitions[index]
        path = self._join(key, info.file)
        if self.local:  # read in place (memory-mapped), not copied into a bytes object first
            return decode_partition(path, info, manifest.d, manifest.units, out=out, verified=verified)
        try:
            data = self.fs.cat_file(path)
        except FileNotFoundError:
            raise DatasetStoreError(MISSING) from None
        return decode_partition(data, info, manifest.d, manifest.units, out=out)

    def read(self, key: str) -> StoredMatrix:
        """The whole dataset (X, y, units), every partition checked: for the solvers that fit in memory."""
        manifest = self.manifest(key)
        X = np.empty((manifest.n, manifest.d), dtype=np.float64)
        y = np.empty(manifest.n, dtype=np.float64)
        units = np.empty(manifest.n, dtype=np.int64) if manifest.units else None
        start = 0
        for index, info in enumerate(manifest.partitions):
            part = self.read_partition(key, manifest, index, out=X[start : start + info.rows])
            y[start : start + info.rows] = part.y
            if units is not None and part.units is not None:
                units[start : start + info.rows] = part.units
            start += info.rows
        return StoredMatrix(X, y, units)

    def put(self, dataset: Matrix, key: str | None = None) -> str:
        """Store ``dataset``'s partitions, then its manifest; returns the key (nothing is written for content
        already stored). ``key`` is :meth:`key_of` ``(dataset)`` when the caller has it."""
        manifest = self.manifest_of(dataset)
        if key is not None and _check_key(key) != manifest.key():
            raise DatasetStoreError(MISMATCH)
        key = manifest.key()
        self._ensure_marker()
        if not self._contains(key):
            self._write_dataset(key, dataset, manifest)
        return key

    def _write_dataset(self, key: str, dataset: Matrix, manifest: Manifest) -> None:
        if self.local:
            self.fs.makedirs(self._join(key), exist_ok=True)
        for info, rows in self._partitions(dataset):
            units = None if dataset.units is None else dataset.units[rows]
            self._write_partition(self._join(key, info.file), [(dataset.X[rows], dataset.y[rows], units)])
        self._write_file(self._join(key, MANIFEST), manifest.to_json().encode())  # the commit point

    def _write_partition(self, path: str, blocks: list[Block]) -> None:
        """One partition file of the rows given in consecutive blocks, one row group: on a local directory written
        straight into its temporary file (no copy of its bytes in memory), on an object store in one PUT."""
        table = _partition_table(blocks)

        def write(sink: Any) -> None:
            pq.write_table(table, sink, row_group_size=max(1, len(table)), compression="snappy", use_dictionary=False)

        if self.local:
            self._write_file(path, write)
            return
        buffer = io.BytesIO()
        write(buffer)
        self._write_file(path, buffer.getbuffer())

    def writer(self, d: int, *, units: bool = False) -> PartitionWriter:
        """A :class:`PartitionWriter` for a dataset of d columns (with a unit index if ``units``), given in blocks."""
        return PartitionWriter(self, d, units)

    def _write_file(self, path: str, data: bytes | memoryview | Callable[[Any], None]) -> None:
        """Write ``path`` whole: a temporary name renamed on a local directory, one PUT on an object store. ``data``:
        the bytes, or (local only) a function writing them to an open binary file."""
        if not self.local:
            assert not callable(data)
            self.fs.pipe_file(path, bytes(data))
            return
        partial = posixpath.join(posixpath.dirname(path), f"{_PARTIAL_PREFIX}{uuid.uuid4().hex}")
        with self.fs.open(partial, "wb") as handle:
            if callable(data):
                data(handle)
            else:
                handle.write(data)
        self.fs.mv(partial, path)

    # --- the DatasetStore primitives --------------------------------------------------------------------------------
    def _contains(self, key: str) -> bool:
        return bool(self.fs.exists(self._join(_check_key(key), MANIFEST)))

    def _write(self, key: str, dataset: Matrix) -> None:  # pragma: no cover - put is overridden
        self._write_dataset(key, dataset, self.manifest_of(dataset))

    def _open(self, key: str) -> None:  # pragma: no cover - read is overridden
        raise NotImplementedError

    def delete(self, key: str) -> None:
        """Purge ``key``: its manifest first (readers then see a missing dataset, never half of one), then its
        partitions. A missing key is not an error."""
        directory = self._join(_check_key(key))
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm_file(self._join(key, MANIFEST))
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm(directory, recursive=True)

    def stored_keys(self) -> list[str]:
        """Every key whose manifest is stored (partitions without one are an interrupted write)."""
        keys = []
        for name in self._children():
            if _is_key(name) and self.fs.exists(self._join(name, MANIFEST)):
                keys.append(name)
        return sorted(keys)

    def remove_partial(self, older_than_seconds: float) -> int:
        """Remove interrupted writes not modified for ``older_than_seconds``: a key's partitions without its manifest,
        a streamed write's staging directory (:class:`PartitionWriter`) and temporary files; returns how many
        directories and files were removed."""
        cutoff, removed = time.time() - older_than_seconds, 0
        for name in self._children():
            directory = self._join(name)
            if name.startswith(_PARTIAL_PREFIX) and _modified(self.fs.info(directory)) < cutoff:
                self.fs.rm_file(directory)  # an identity marker's temporary file
                removed += 1
                continue
            staging = name.startswith(_STAGING_PREFIX)
            if not (staging or _is_key(name)) or self.fs.exists(self._join(name, MANIFEST)):
                continue
            entries = self.fs.ls(directory, detail=True) or [self.fs.info(directory)]  # an empty local directory
            if all(_modified(entry) < cutoff for entry in entries):
                self.fs.rm(directory, recursive=True)
                removed += 1
        return removed

    def _children(self) -> list[str]:
        try:
            entries = self.fs.ls(self.root, detail=False)
        except FileNotFoundError:
            return []
        return [posixpath.basename(str(entry).rstrip("/")) for entry in entries]


class PartitionWriter:
    """Stores a dataset given as row blocks of any size, holding at most one partition in memory: each full
    partition is hashed and written to a staging directory (``<root>/.staging-<uuid>/``) as it fills; :meth:`finish`
    computes the manifest and the key, moves the partitions under ``<root>/<key>/`` and writes the manifest last
    (nothing is moved for content already stored). The key and the files are those :meth:`ParquetDatasetStore.put`
    gives the whole matrix. Used as a context manager, an exception before :meth:`finish` removes the staging
    directory; a crash leaves it to :meth:`ParquetDatasetStore.remove_partial`."""

    def __init__(self, store: ParquetDatasetStore, d: int, units: bool) -> None:
        self.store, self.d, self.units = store, int(d), units
        self.rows_per_partition = rows_per_partition(self.d, store.partition_bytes)
        self.staging = store._join(f"{_STAGING_PREFIX}{uuid.uuid4().hex}")
        self._blocks: list[tuple[np.ndarray, np.ndarray, np.ndarray | None]] = []
        self._buffered = 0
        self._partitions: list[PartitionInfo] = []
        self._done = False
        if store.local:
            store.fs.makedirs(self.staging, exist_ok=True)

    def __enter__(self) -> PartitionWriter:
        return self

    def __exit__(self, kind: object, *_: object) -> None:
        if kind is not None and not self._done:
            self.abort()

    def write(self, X: np.ndarray, y: np.ndarray, units: np.ndarray | None = None) -> None:
        """Append a block of rows (float64 ``X`` of d columns, ``y``, and each row's unit if the dataset has units)."""
        X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.d or y.shape != (X.shape[0],) or (units is None) == self.units:
            raise ValueError("a block must have d columns, one label per row and units exactly when declared")
        self._blocks.append((X, y, None if units is None else np.asarray(units, dtype=np.int64)))
        self._buffered += X.shape[0]
        while self._buffered >= self.rows_per_partition:
            self._flush(self.rows_per_partition)

    def _flush(self, rows: int) -> None:
        """Write the first ``rows`` buffered rows as the next partition (taken from the front of the buffered
        blocks: a slice of a large block is not copied, so a block of many partitions costs one pass)."""
        taken: list[tuple[np.ndarray, np.ndarray, np.ndarray | None]] = []
        need = rows
        while need:
            X, y, units = self._blocks[0]
            if X.shape[0] <= need:
                taken.append(self._blocks.pop(0))
                need -= X.shape[0]
            else:
                taken.append((X[:need], y[:need], None if units is None else units[:need]))
                self._blocks[0] = (X[need:], y[need:], None if units is None else units[need:])
                need = 0
        info = PartitionInfo(f"part-{len(self._partitions):05d}.parquet", rows, _blocks_hash(taken))
        self.store._write_partition(posixpath.join(self.staging, info.file), taken)
        self._partitions.append(info)
        self._buffered -= rows

    def seal(self) -> Manifest:
        """Write the last partition and return the manifest (its key is the dataset's), moving nothing yet: no more
        rows may be written; then :meth:`finish` or :meth:`abort`."""
        if self._buffered:
            self._flush(self._buffered)
        n = sum(p.rows for p in self._partitions)
        if n == 0:
            raise ValueError("a dataset needs at least one row")
        return Manifest(n, self.d, self.rows_per_partition, self.units, tuple(self._partitions))

    def finish(self) -> str:
        """Write the last partition, move the partitions to the dataset's directory, write the manifest; the key."""
        manifest = self.seal()
        key = manifest.key()
        store = self.store
        store._ensure_marker()
        if not store._contains(key):
            if store.local:
                store.fs.makedirs(store._join(key), exist_ok=True)
            for info in self._partitions:
                store.fs.mv(posixpath.join(self.staging, info.file), store._join(key, info.file))
            store._write_file(store._join(key, MANIFEST), manifest.to_json().encode())  # the commit point
        self._done = True
        self.abort()  # the staging directory, empty or holding content already stored
        return key

    def abort(self) -> None:
        """Remove the staging directory and whatever it holds."""
        with contextlib.suppress(FileNotFoundError):
            self.store.fs.rm(self.staging, recursive=True)


def _is_key(name: str) -> bool:
    try:
        _check_key(name)
    except DatasetStoreError:
        return False
    return True


def _modified(entry: dict[str, Any]) -> float:
    """An fsspec listing entry's modification time in seconds (local ``mtime``, S3 ``LastModified``)."""
    value = entry.get("mtime", entry.get("LastModified", entry.get("last_modified")))
    if value is None:
        return time.time()  # unknown: never old enough to remove
    return float(value.timestamp()) if hasattr(value, "timestamp") else float(value)
