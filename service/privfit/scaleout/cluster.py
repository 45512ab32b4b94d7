"""Dask worker processes as privfit's partition tasks need them: :func:`local_cluster` (the ``local`` scheduler, the
tests, the benchmarks) and :data:`WORKER_ENVIRONMENT`, the Dask configuration a deployment's workers should have
(docker/compose.yaml sets it for its ``dask-worker`` service).

**Why.** ``dask.distributed`` starts every worker process with ``MALLOC_TRIM_THRESHOLD_=65536``
(``distributed.nanny.pre-spawn-environ``) so that freed memory returns to the system at once. Setting any glibc
malloc threshold turns off glibc's dynamic mmap threshold, so every buffer of a partition (the file's bytes, Arrow's
columns, the design matrix, each temporary: tens of MiB each) is a fresh ``mmap`` whose pages fault in one by one
and is unmapped when freed. For a fit larger than the workers' memory each partition is read again at every step,
and that page-faulting cost half as much again as the rest of a partition task (a 16 MiB partition read again took
65.7 ms with it and 43.4 ms without, one process, docs/benchmarks.md "Data larger than the Dask workers' memory").
Unsetting it keeps glibc's own policy (buffers above the dynamic threshold are still returned to the system; freed
heap beyond 2 × the threshold is trimmed): the memory a worker keeps stays bounded by its largest buffers, which the
benchmark's peak RSS checks against the worker's limit.
"""

from __future__ import annotations

from typing import Any

__all__ = ["WORKER_ENVIRONMENT", "local_cluster"]

#: The Dask configuration of privfit's workers: glibc's own malloc policy (module docstring). ``None`` unsets a
#: variable; as an environment variable: ``DASK_DISTRIBUTED__NANNY__PRE_SPAWN_ENVIRON__MALLOC_TRIM_THRESHOLD_=None``.
WORKER_ENVIRONMENT: dict[str, Any] = {"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}


def local_cluster(workers: int, *, memory_limit: str | int | None = None) -> Any:
    """A ``distributed.LocalCluster`` of ``workers`` processes of one thread each on this machine, started with
    :data:`WORKER_ENVIRONMENT` (and ``memory_limit`` per worker when given; Dask's default shares the machine's)."""
    import dask
    import distributed

    limit: dict[str, Any] = {} if memory_limit is None else {"memory_limit": memory_limit}
    with dask.config.set(WORKER_ENVIRONMENT):
        return distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                        dashboard_address=None, **limit)  # fmt: skip
