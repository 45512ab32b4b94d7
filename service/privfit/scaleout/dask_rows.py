"""A stored dataset's rows on a Dask cluster (``dask.distributed``): :class:`DaskPartitionedRows` is the
:class:`~privfit.solvers.partitioned.PartitionedRows` of a dataset in the parquet store
(:mod:`privfit.datasets.parquet_store`), whose clipped gradient sums are computed by the workers, partition by
partition, and added in partition order (issue 39).

**What runs where.** The fit's process (a privfit worker) runs the solver: its iterates, its noise (drawn once per
step through :func:`privfit.privacy.noise.gaussian_stream`, the exact sampler included) and its progress. For each
step it sends θ and the public settings to one task per group of :data:`PARTITIONS_PER_TASK` consecutive
partitions (:func:`partitions_clipped_sum`); for each of its partitions the task reads the partition from the store —
checking it against the dataset's hash tree —, enforces the declared bounds
(:func:`~privfit.solvers.base.enforce_declared_bounds`), appends the intercept column and computes
:func:`~privfit.solvers.baselines.dp_gd.clipped_gradient_sum` of its rows in float64, and returns their sum: only a
p-vector per θ leaves a worker, never a row. Group g is sent to worker g mod W (W workers, sorted by address) so that
its decoded rows, cached in that worker's memory up to ``cache_bytes``, are read from the store once per fit when they
fit in the workers' memory, and again at each step when they do not (data larger than the cluster's memory). A step
visits every partition in the same order, a cyclic scan for which a least-recently-used cache smaller than the data
hits nothing (each partition is evicted just before it is needed again): the cache keeps the partitions it admitted
while they fit and reads the others into one reused buffer per thread, so a step reads only the partitions beyond the
cache. When the fit ends, whatever its outcome, every worker drops the dataset's partitions
(:meth:`DaskPartitionedRows.release`): no row stays in a worker's memory past its fit.

**Privacy.** The sum returned is the in-memory fit's sum of the same clipped terms
(:mod:`privfit.solvers.partitioned`); the tasks, their number and their sizes are functions of the public manifest
(n, d, the partition size), and a task's failure (a store error, a lost worker) fails the whole fit the same way
whatever the rows hold.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privfit.datasets.parquet_store import Manifest, ParquetDatasetStore, VerifiedFiles
from privfit.solvers.base import PublicMetadata, enforce_declared_bounds
from privfit.solvers.baselines.dp_gd import clipped_gradient_sum, parameter_dimension
from privfit.solvers.baselines.dp_sgd import member_gradient_sums
from privfit.solvers.geometry import row_norms
from privfit.solvers.losses import GLMLoss, MultinomialLogisticLoss

__all__ = [
    "DaskPartitionedRows",
    "DaskStepTimeout",
    "StoredPartitions",
    "forget_partitions",
    "partitions_clipped_sum",
]

log = logging.getLogger("privfit.scaleout")

FloatArray = np.ndarray
#: The decoded partitions a worker keeps by default: a quarter of the 1 GiB a Dask worker is typically given.
DEFAULT_CACHE_BYTES = 256 * 1024**2
#: The longest one step's partition sums may take before the fit fails (a cluster without live workers).
DEFAULT_TIMEOUT_SECONDS = 600.0
#: Consecutive partitions summed by one task: a task costs the scheduler and the fit's client about as much CPU as a
#: 16 MiB partition's sum, so one task a partition left a worker's core idle half the time (docs/benchmarks.md)
PARTITIONS_PER_TASK = 8


class DaskStepTimeout(RuntimeError):
    """The cluster did not compute a step's partition sums in time (its workers are gone or keep dying); the message
    names settings only."""


@dataclass(frozen=True)
class StoredPartitions:
    """Where a dataset's partitions are (a store's URL, filesystem options and partition size) and its checked
    manifest: what a task needs to read one partition, sent to the workers with each task."""

    url: str
    options: dict[str, Any] = field(hash=False)
    partition_bytes: int
    key: str
    manifest: Manifest = field(hash=False)

    @classmethod
    def of(cls, store: ParquetDatasetStore, key: str) -> StoredPartitions:
        """The partitions of ``key`` in ``store``, its manifest checked against the key."""
        return cls(store.url, dict(store.options), store.partition_bytes, key, store.manifest(key))


#: A prepared partition: its design matrix, labels and row norms.
Prepared = tuple[FloatArray, FloatArray, FloatArray]


class _PartitionCache:
    """Prepared partitions (bounded rows with the intercept column, labels, row norms) of one worker process, admitted
    while they fit in ``budget`` bytes and kept until their dataset's fit ends (module docstring: a cyclic scan);
    thread-safe (a worker may run several tasks at once)."""

    def __init__(self) -> None:
        self._entries: dict[Hashable, Prepared] = {}
        self._bytes = 0
        self.reads = 0  # partitions read from the store by this process (benchmarks, tests)
        self._lock = threading.Lock()
        self._stores: dict[tuple[str, str, int], ParquetDatasetStore] = {}
        #: local partition files this process checked against their hash during the current fits (not hashed again
        #: at the next step while unchanged: parquet_store.VerifiedFiles); cleared when a fit ends
        self.verified = VerifiedFiles()

    def store(self, where: StoredPartitions) -> ParquetDatasetStore:
        index = (where.url, repr(sorted(where.options.items())), where.partition_bytes)
        with self._lock:
            if index not in self._stores:
                self._stores[index] = ParquetDatasetStore(where.url, where.options, where.partition_bytes)
            return self._stores[index]

    def forget(self, key: str) -> None:
        """Drop every prepared partition of the dataset ``key`` (entries are (url, key, index, …))."""
        with self._lock:
            for entry in [e for e in self._entries if isinstance(e, tuple) and e[1] == key]:
                self._bytes -= sum(array.nbytes for array in self._entries.pop(entry))

    def get(self, entry: Hashable) -> Prepared | None:
        with self._lock:
            return self._entries.get(entry)

    def admits(self, size: int, budget: int) -> bool:
        """Whether a prepared partition of ``size`` bytes fits beside the cached ones in ``budget``."""
        with self._lock:
            return self._bytes + size <= budget

    def put(self, entry: Hashable, value: Prepared, budget: int) -> None:
        """Keep ``value`` if it fits beside the cached partitions in ``budget`` (nothing is evicted for it)."""
        size = sum(array.nbytes for array in value)
        with self._lock:
            if entry in self._entries or self._bytes + size > budget:
                return
            self._entries[entry] = value
            self._bytes += size


class _Scratch:
    """One design-matrix buffer per thread, reused by the partitions the cache does not keep: a partition read again
    at each step costs no fresh allocation (whose page faults cost as much as decoding it). :meth:`clear` drops them
    all (the end of a fit: no row stays in the worker's memory)."""

    def __init__(self) -> None:
        self._buffers: dict[int, np.ndarray] = {}
        self._lock = threading.Lock()

    def matrix(self, rows: int, columns: int) -> FloatArray:
        thread = threading.get_ident()
        with self._lock:
            buffer = self._buffers.get(thread)
            if buffer is None or buffer.size < rows * columns:
                buffer = self._buffers[thread] = np.empty(rows * columns, dtype=np.float64)
        return column_major(buffer[: rows * columns], rows, columns)

    def clear(self) -> None:
        with self._lock:
            self._buffers.clear()


_CACHE = _PartitionCache()
_SCRATCH = _Scratch()


def column_major(buffer: np.ndarray, rows: int, columns: int) -> FloatArray:
    """The flat float64 ``buffer`` (rows · columns entries) as a rows × columns matrix stored column by column
    (Fortran order). A partition's Parquet columns are copied into it contiguously — into a row-major matrix each
    column is a strided scatter, 2–3 × the whole decoding — and BLAS's products read it as fast either way."""
    return buffer.reshape(columns, rows).T


def forget_partitions(key: str) -> None:
    """In a worker process: drop the prepared partitions of the dataset ``key`` and the reused buffers (the end of a
    fit)."""
    _CACHE.forget(key)
    _CACHE.verified.clear()
    _SCRATCH.clear()


def _prepare(where: StoredPartitions, index: int, meta: PublicMetadata, fit_intercept: bool, A: FloatArray) -> Prepared:
    """Partition ``index`` as the in-memory fit prepares its matrix (:meth:`privfit.solvers.base.Solver.fit`: the
    declared bounds enforced, the intercept column appended — :func:`~privfit.solvers.base.design_matrix` — and the
    row norms computed once), decoded straight into the design matrix's buffer ``A`` (rows × (d + intercept), column
    major: :func:`column_major`) and bounded there: no copies (a partition is read again at each step when the data
    is larger than the workers' memory)."""
    d = where.manifest.d
    if fit_intercept:
        A[:, d] = 0.0  # for the bounds below: a zero column adds nothing to a row's norm
    part = _CACHE.store(where).read_partition(where.key, where.manifest, index, out=A, verified=_CACHE.verified)
    v = np.array(part.y, dtype=np.float64)
    # on the whole contiguous buffer (faster than on its first d columns, a strided view): the rows within the
    # bound are kept bit for bit, as in memory; a row beyond it is scaled to it by clip_rows' factor for d + 1
    # columns, within 4u of the in-memory one and as safe (geometry.clip_rows)
    enforce_declared_bounds(A, v, meta, in_place=True)
    if fit_intercept:
        A[:, d] = 1.0
    return A, v, row_norms(A)


def _prepared(
    where: StoredPartitions, index: int, meta: PublicMetadata, fit_intercept: bool, cache_bytes: int
) -> Prepared:
    """Partition ``index`` prepared (:func:`_prepare`): from this worker's cache, or read from the store — into a
    buffer the cache keeps while it admits it (``cache_bytes``), else into the thread's reused one."""
    entry = (where.url, where.key, index, meta.row_norm_bound, meta.label_bound, fit_intercept)
    prepared = _CACHE.get(entry)
    if prepared is None:
        rows, columns = where.manifest.partitions[index].rows, where.manifest.d + (1 if fit_intercept else 0)
        keep = _CACHE.admits(rows * (columns + 2) * 8, cache_bytes)  # the matrix, the labels and the row norms
        A = column_major(np.empty(rows * columns), rows, columns) if keep else _SCRATCH.matrix(rows, columns)
        prepared = _prepare(where, index, meta, fit_intercept, A)
        _CACHE.reads += 1
        if keep:
            _CACHE.put(entry, prepared, cache_bytes)
    return prepared


def partitions_clipped_sum(
    where: StoredPartitions,
    indices: tuple[int, ...],
    meta: PublicMetadata,
    fit_intercept: bool,
    loss: GLMLoss | MultinomialLogisticLoss,
    theta: FloatArray,
    clip_norm: float,
    cache_bytes: int = DEFAULT_CACHE_BYTES,
    batches: tuple[np.ndarray | None, ...] | None = None,
) -> FloatArray:
    """A task: the partitions ``indices``' parts of the clipped gradient sum, ``Σ_{i ∈ partition ∩ B}
    clip_C(∇ℓ(θ_j; x_i, y_i))`` for each row θ_j of ``theta``, added in that order, each on its rows with the
    declared bounds enforced and the intercept column appended — as the in-memory fit prepares its matrix
    (:meth:`privfit.solvers.base.Solver.fit`). ``batches[i]`` is partition ``indices[i]``'s batch: None (every row),
    its selected rows (indices within it) or its columns of a (k, rows) membership matrix."""
    total: FloatArray | None = None
    for i, index in enumerate(indices):
        A, v, norms = _prepared(where, index, meta, fit_intercept, cache_bytes)
        batch = None if batches is None else batches[i]
        if batch is not None and batch.ndim == 2:
            part = np.asarray(member_gradient_sums(loss, theta, A, v, batch, clip_norm), dtype=np.float64)
        else:
            if batch is not None:
                A, v, norms = A[batch], v[batch], norms[batch]
            part = np.asarray(clipped_gradient_sum(loss, theta, A, v, clip_norm, norms=norms), dtype=np.float64)
        total = part if total is None else total + part
    assert total is not None
    return total


def _batch_of(batch: np.ndarray, start: int, stop: int) -> np.ndarray:
    """The part of ``batch`` in rows [start, stop): indices relative to ``start``, or those membership columns."""
    if batch.ndim == 2:
        return batch[:, start:stop]
    return batch[np.searchsorted(batch, start) : np.searchsorted(batch, stop)] - start


class DaskPartitionedRows:
    """:class:`~privfit.solvers.partitioned.PartitionedRows` of a stored dataset, summed by a Dask cluster's
    workers (module docstring). ``client`` is a ``distributed.Client``."""

    def __init__(
        self,
        client: Any,
        where: StoredPartitions,
        meta: PublicMetadata,
        fit_intercept: bool,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> None:
        if where.manifest.units:
            raise ValueError("a dataset with a privacy unit is fitted in memory")
        self._client, self._where, self._meta = client, where, meta
        self._fit_intercept, self._cache_bytes, self._timeout = fit_intercept, cache_bytes, timeout_seconds
        self._workers = sorted(client.scheduler_info()["workers"])
        if not self._workers:
            raise RuntimeError("the Dask cluster has no workers")
        ends = np.cumsum([p.rows for p in where.manifest.partitions])
        self._bounds = [(int(end - p.rows), int(end)) for end, p in zip(ends, where.manifest.partitions, strict=True)]

    @property
    def rows(self) -> int:
        return self._where.manifest.n

    @property
    def features(self) -> int:
        return self._where.manifest.d + (1 if self._fit_intercept else 0)

    @property
    def partition_rows(self) -> tuple[int, ...]:
        return tuple(p.rows for p in self._where.manifest.partitions)

    def read_rows(self, index: int) -> tuple[FloatArray, FloatArray]:
        """Partition ``index`` read from the store by the fit's own process (a streamed pass needs no worker)."""
        part = _CACHE.store(self._where).read_partition(self._where.key, self._where.manifest, index)
        return part.X, np.array(part.y, dtype=np.float64)  # a writable copy of Arrow's read-only labels

    def clipped_sum(
        self,
        loss: GLMLoss | MultinomialLogisticLoss,
        theta: FloatArray,
        clip_norm: float,
        batch: np.ndarray | None = None,
    ) -> FloatArray:
        """One task per group of :data:`PARTITIONS_PER_TASK` consecutive partitions (those holding a row of
        ``batch``, if given), group g on worker g mod W; their parts added in partition order."""
        single = np.ndim(theta) == 1
        Theta = np.atleast_2d(np.asarray(theta, dtype=np.float64))
        scattered = self._client.scatter(Theta, broadcast=True) if Theta.nbytes > 1024**2 else Theta
        futures = []
        for group, first in enumerate(range(0, len(self._bounds), PARTITIONS_PER_TASK)):
            indices, parts = [], []
            for index in range(first, min(first + PARTITIONS_PER_TASK, len(self._bounds))):
                start, stop = self._bounds[index]
                part = None if batch is None else _batch_of(batch, start, stop)
                if part is not None and not (part.any() if part.ndim == 2 else part.size):
                    continue  # no row of this partition is in the batch
                indices.append(index)
                parts.append(part)
            if not indices:
                continue
            futures.append(self._client.submit(
                partitions_clipped_sum, self._where, tuple(indices), self._meta, self._fit_intercept, loss, scattered,
                clip_norm, self._cache_bytes, None if batch is None else tuple(parts),
                workers=[self._workers[group % len(self._workers)]], allow_other_workers=True, pure=False,
            ))  # fmt: skip
        total = np.zeros((Theta.shape[0], parameter_dimension(loss, self.features)), dtype=np.float64)
        deadline = time.monotonic() + self._timeout
        try:  # a cluster that cannot run the tasks (no live worker, workers killed for memory) must not hang the fit
            for future in futures:  # in partition order
                total += future.result(timeout=max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            self._client.cancel(futures)
            raise DaskStepTimeout(f"the Dask cluster did not compute a step's {len(futures)} partition sums within "
                                  f"{self._timeout:g} s (PRIVFIT_DASK_TIMEOUT_SECONDS)") from None  # fmt: skip
        return total[0] if single else total

    def release(self) -> None:
        """Every worker drops this dataset's prepared partitions: no row stays in a worker's memory past the fit (a
        worker that is gone holds nothing)."""
        try:
            self._client.run(forget_partitions, self._where.key)
        except Exception:  # an unreachable cluster keeps nothing of this fit either
            log.warning("could not clear the Dask workers' partition caches")
