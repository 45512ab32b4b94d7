"""Uploads larger than one machine's memory, encoded straight into the parquet store's partitions (issue 39).

An upload whose encoded matrix n·(d + 1)·8 exceeds ``max_matrix_bytes`` is refused when fits read datasets into
memory. With the parquet store and a Dask cluster (``PRIVFIT_STORE=parquet``, ``PRIVFIT_DASK_SCHEDULER``), whose
solvers read a dataset by partitions, it is instead encoded batch by batch (:func:`~privfit.datasets.columnar.
stream_parquet`, :func:`~privfit.datasets.columnar.stream_csv`: the same encoder, cell for cell, as an upload held in
memory) into a :class:`~privfit.datasets.parquet_store.PartitionWriter`: memory is one batch plus one partition,
whatever n is (up to ``max_stored_bytes``). :func:`encode_into_partitions` reads the spooled file once, or twice
with private preprocessing:

1. **Count** (with preprocessing): encode the file batch by batch and sum the exact histogram counts of the
   columns preprocessing measures (:func:`privfit.datasets.preprocessing.exact_counts`); nothing is written. A
   count is a sum over rows, so the sum of the batches' counts is the whole data's. The plan is then made from
   public facts (schema, n, budget: :func:`~privfit.datasets.preprocessing.plan_preprocessing`) and released from
   those counts: the same noisy histograms, the same public rules and the same charge as an upload in memory.
2. **Write**: encode the file again (the encoder is a fixed function of the file: the same rows), re-encode each
   batch by the derived schema with the per-cell function the in-memory path uses
   (:meth:`~privfit.datasets.preprocessing.PreprocessingRelease.reencode_rows`) and write it to staged partitions.
   Without preprocessing this is the only pass.

The caller then commits a pending upload of the result's key, moves the partitions into place
(:meth:`PartitionedUpload.finish`) and registers the dataset; any failure before discards the staging
(:meth:`PartitionedUpload.abort`), and a crash leaves it to the store's sweep of partial writes.

Not stored by partitions (the router answers 413 naming the schema field): a dataset with a privacy unit (each
unit's rows are bounded by a secret choice over the whole matrix, :mod:`privfit.datasets.units`) or a validation
split (a secret split of the whole matrix). The content hash (duplicates are matched by it: with preprocessing the
stored rows carry noise) is :func:`partitioned_content_hash`, which hashes X and y apart so that it can be computed
batch by batch.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

import numpy as np

from privfit.privacy import PrivacyFilter

from .columnar import stream_csv, stream_parquet
from .encoding import CONTENT_HASH_VERSION, DatasetTooLargeError, DatasetValidationError
from .parquet_store import Manifest, ParquetDatasetStore, PartitionWriter
from .preprocessing import (
    PreprocessingRelease,
    candidate_columns,
    exact_counts,
    plan_preprocessing,
    preprocessing_share,
)
from .schema import DatasetSchema, restart_clipped_cells

__all__ = ["PartitionedUpload", "encode_into_partitions", "partitioned_content_hash"]


@dataclass(frozen=True)
class PartitionedUpload:
    """An upload encoded into staged partitions (:func:`encode_into_partitions`), not yet stored: the dataset's
    public facts, its preprocessing release, and the sealed writer that holds its partitions."""

    writer: PartitionWriter
    manifest: Manifest
    schema: DatasetSchema
    content_hash: str
    preprocessing: PreprocessingRelease | None

    @property
    def storage_key(self) -> str:
        """The key the dataset is stored under (the manifest's hash-tree root)."""
        return self.manifest.key()

    @property
    def n(self) -> int:
        return self.manifest.n

    @property
    def public_n(self) -> int:
        """The public size: the number of rows (a dataset stored by partitions is row-level)."""
        return self.manifest.n

    @property
    def d(self) -> int:
        return self.manifest.d

    @property
    def feature_names(self) -> list[str]:
        return list(self.schema.feature_names)

    @property
    def row_norm_bound(self) -> float:
        return self.schema.row_norm_bound

    @property
    def label_bound(self) -> float:
        return self.schema.label_bound

    def finish(self) -> str:
        """Move the partitions into place and write the manifest (the commit point); the storage key."""
        return self.writer.finish()

    def abort(self) -> None:
        """Discard the staged partitions."""
        self.writer.abort()


class _ContentHash:
    """The content hash of rows given in blocks (:func:`partitioned_content_hash`'s definition): X's and y's bytes
    each hashed in row order, so that any cutting of the same rows into blocks gives the same hash."""

    def __init__(self, schema: DatasetSchema) -> None:
        self.schema, self.n = schema, 0
        self._X, self._y = hashlib.sha256(), hashlib.sha256()

    def update(self, X: np.ndarray, y: np.ndarray) -> None:
        self._X.update(np.ascontiguousarray(X + 0.0, dtype="<f8").data)  # + 0.0: −0.0 hashes as 0.0
        self._y.update(np.ascontiguousarray(y + 0.0, dtype="<f8").data)
        self.n += X.shape[0]

    def hexdigest(self) -> str:
        h = hashlib.sha256(CONTENT_HASH_VERSION + b"\0partitions\0")
        h.update(self.schema.canonical_json().encode("utf-8") + b"\0")
        h.update(struct.pack("<QQ", self.n, self.schema.dimension))
        h.update(self._X.digest() + self._y.digest())
        return h.hexdigest()


def partitioned_content_hash(schema: DatasetSchema, X: np.ndarray, y: np.ndarray) -> str:
    """The content hash of a dataset stored by partitions, encoded by the declared ``schema`` as ``X``, ``y``:
    sha256 over the content hash version, the schema's canonical JSON, n and d, and the sha256 of X's row-major and
    of y's little-endian float64 bytes (−0.0 as 0.0). A function of the content alone, as
    :func:`~privfit.datasets.encoding.compute_content_hash` is for a matrix in memory (which hashes X and y in one
    stream, and so needs all of X before y)."""
    content = _ContentHash(schema)
    content.update(X, y)
    return content.hexdigest()


def encode_into_partitions(
    stream: IO[bytes],
    schema: DatasetSchema,
    store: ParquetDatasetStore,
    privacy_filter: PrivacyFilter,
    rng: np.random.Generator,
    *,
    parquet: bool,
    max_stored_bytes: int,
    max_cell_bytes: int | None = None,
    max_page_bytes: int | None = None,
    admit_rows: Callable[[int], None] | None = None,
) -> PartitionedUpload:
    """Encode the upload ``stream`` (a seekable CSV or Parquet file at its start) declared by the row-level
    ``schema`` into staged partitions of ``store``, with private preprocessing on the budget ``privacy_filter``
    measures (``rng``: OS-seeded), in bounded memory (module docstring). The caller charges the release's cost,
    then :meth:`~PartitionedUpload.finish` es or :meth:`~PartitionedUpload.abort` s it.

    Raises:
        DatasetValidationError: as the upload's encoders (the first invalid cell, named), or a CSV only the exact
            encoder reads (quoted fields and the like): it is read cell by cell in memory, which this size is not.
        DatasetTooLargeError: the encoded data over ``max_stored_bytes`` (setting ``max_stored_bytes``), or a
            Parquet page over ``max_page_bytes``.
    """
    if schema.privacy_unit is not None or schema.validation_fraction is not None:
        raise ValueError("a dataset with a privacy unit or a validation split is encoded in memory")
    origin = stream.tell()
    measured = candidate_columns(schema) if preprocessing_share(schema) is not None else []
    content = _ContentHash(schema)

    def encode(emit: Callable[[np.ndarray, np.ndarray], None]) -> None:
        stream.seek(origin)
        restart_clipped_cells()  # each pass counts the clipped cells afresh
        try:
            if parquet:
                stream_parquet(stream, schema, emit, max_matrix_bytes=max_stored_bytes, max_cell_bytes=max_cell_bytes,
                               max_page_bytes=max_page_bytes, admit_rows=admit_rows)  # fmt: skip
            elif stream_csv(stream, schema, emit, max_matrix_bytes=max_stored_bytes,
                            max_cell_bytes=max_cell_bytes) is None:  # fmt: skip
                raise DatasetValidationError(None, None, _EXACT_ONLY)
        except DatasetTooLargeError as error:
            if error.setting != "max_matrix_bytes":
                raise
            raise DatasetTooLargeError(
                "max_stored_bytes", max_stored_bytes,
                f"the encoded data of {schema.dimension} features exceeds max_stored_bytes = {max_stored_bytes} bytes "
                "(n·(d + 1)·8), the largest dataset this server stores by partitions; split it or ask the operator "
                "to raise the limit",
            ) from None  # fmt: skip

    release = None
    if measured:  # pass 1: the exact counts (and the content hash); nothing written
        totals = np.zeros((len(measured), measured[0].edges.size - 1), dtype=np.int64)

        def count(X: np.ndarray, y: np.ndarray) -> None:
            content.update(X, y)
            np.add(totals, exact_counts(measured, X, y), out=totals)

        encode(count)
        if not parquet and admit_rows is not None:
            admit_rows(content.n)
        plan = plan_preprocessing(schema, content.n, privacy_filter)
        if plan is not None:
            if [c.name for c in plan.columns] != [c.name for c in measured]:
                raise AssertionError("the plan measures the schema's candidate columns")
            release = plan.release(totals, rng, privacy_filter)
    writer = store.writer(schema.dimension)
    try:

        def write(X: np.ndarray, y: np.ndarray) -> None:
            if not measured:
                content.update(X, y)
            if release is not None:
                release.reencode_rows(X, y)  # in place: a batch's own fresh arrays
            writer.write(X, y)

        encode(write)  # the rows as pass 1 read them (the encoder is a fixed function of the file)
        manifest = writer.seal()
        if not measured and not parquet and admit_rows is not None:
            admit_rows(manifest.n)
        if manifest.n != content.n:
            raise AssertionError("both passes read the same rows")
    except BaseException:
        writer.abort()
        raise
    dataset_schema = schema if release is None else release.schema
    return PartitionedUpload(writer, manifest, dataset_schema, content.hexdigest(), release)


_EXACT_ONLY = (
    "this CSV file is over max_matrix_bytes and so is stored by partitions, which needs the columnar reader; it "
    "declines this file (a quoted field, a comment line, a cell it cannot read, or a wrong field count). Upload "
    "it as Parquet, or without quotes; a smaller part of it uploaded alone names the first bad cell"
)
