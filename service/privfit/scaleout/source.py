"""Which fits run on the Dask cluster (``PRIVFIT_DASK_SCHEDULER``): :class:`DaskRowSource`, given to the job runner
by every worker process (the embedded pool, ``privfit worker``, Celery workers), answers for each fit the
:class:`~privfit.solvers.partitioned.PartitionedRows` it runs on, or None to read the dataset into memory as before.

A fit runs on the cluster when its dataset is in the parquet store (``PRIVFIT_STORE=parquet``), has no privacy unit, and
its solver reads rows only through partitions (:attr:`~privfit.solvers.base.Solver.supports_partitions`: ``dp_gd``,
``dp_sgd`` and ``dp_distributed``, whose partition sums the cluster computes; ``dp_otb``, which streams the partitions
through its own process, for a dataset over ``PRIVFIT_MAX_MATRIX_BYTES`` only (streamed, its rows come in a shuffle of
the partitions and of each one's rows; in memory in a uniform shuffle of all rows). The choice depends on public things
only (the deployment's settings, the solver, the schema), never on the rows. The cluster is ``PRIVFIT_DASK_SCHEDULER``:
a scheduler's address (``tcp://scheduler:8786``, the Dask project's own deployments: docker compose, Kubernetes, HPC) or
``local`` — a ``LocalCluster`` of ``PRIVFIT_DASK_LOCAL_WORKERS`` worker processes started by this process on first use
(one machine; also what the tests use). The client connects on the first fit, not at start-up.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from privfit.datasets.parquet_store import ParquetDatasetStore
from privfit.datasets.store import DatasetStore
from privfit.solvers.base import AnySolver, PublicMetadata, ResolvedParams, fits_intercept
from privfit.solvers.partitioned import PartitionedRows

if TYPE_CHECKING:
    from privfit.settings import Settings

__all__ = ["DaskRowSource", "row_source"]


class DaskRowSource:
    """The Dask cluster of a worker process (module docstring); thread-safe, connected on first use."""

    def __init__(self, scheduler: str, *, local_workers: int = 2, cache_bytes: int = 256 * 1024**2,
                 connect_timeout_seconds: float = 30.0, step_timeout_seconds: float = 600.0,
                 max_matrix_bytes: int | None = None) -> None:  # fmt: skip
        self.scheduler, self.local_workers, self.cache_bytes = scheduler, local_workers, cache_bytes
        self.max_matrix_bytes = max_matrix_bytes
        self.step_timeout_seconds = step_timeout_seconds
        self.connect_timeout_seconds = connect_timeout_seconds
        self._lock = threading.Lock()
        self._client: Any = None
        self._cluster: Any = None

    def client(self) -> Any:
        """The ``distributed.Client`` (connected, or the local cluster started, on the first call)."""
        with self._lock:
            if self._client is None:
                import distributed

                if self.scheduler == "local":
                    from .cluster import local_cluster

                    self._cluster = local_cluster(self.local_workers)
                    self._client = distributed.Client(self._cluster, set_as_default=False)
                else:
                    self._client = distributed.Client(self.scheduler, timeout=self.connect_timeout_seconds,
                                                      set_as_default=False)  # fmt: skip
            return self._client

    def partitions_for(
        self, store: DatasetStore, key: str, solver: AnySolver, meta: PublicMetadata, resolved: ResolvedParams
    ) -> PartitionedRows | None:
        """The partitioned rows a fit runs on, or None when it reads its dataset into memory (module docstring)."""
        if not isinstance(store, ParquetDatasetStore) or not solver.supports_partitions or meta.unit_level:
            return None
        fits_in_memory = self.max_matrix_bytes is None or meta.n * (meta.d + 1) * 8 <= self.max_matrix_bytes
        if solver.partitioned_order_differs and fits_in_memory:
            return None  # dp_otb shuffles all rows in memory; by partitions only what memory cannot hold
        from .dask_rows import DaskPartitionedRows, StoredPartitions

        intercept = solver.appends_intercept and fits_intercept(resolved)
        return DaskPartitionedRows(self.client(), StoredPartitions.of(store, key), meta, intercept, self.cache_bytes,
                                   self.step_timeout_seconds)  # fmt: skip

    def close(self) -> None:
        """Disconnect (and stop the local cluster, if this process started one)."""
        with self._lock:
            if self._client is not None:
                self._client.close()
            if self._cluster is not None:
                self._cluster.close()
            self._client = self._cluster = None


def row_source(settings: Settings) -> DaskRowSource | None:
    """The Dask row source of ``settings`` (``dask_scheduler`` set), or None: every fit reads into memory."""
    if settings.dask_scheduler is None:
        return None
    return DaskRowSource(settings.dask_scheduler, local_workers=settings.dask_local_workers,
                         cache_bytes=settings.dask_cache_bytes, step_timeout_seconds=settings.dask_timeout_seconds,
                         max_matrix_bytes=settings.max_matrix_bytes)  # fmt: skip
