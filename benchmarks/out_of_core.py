"""Data larger than the Dask workers' memory (issue 39): ``dp_gd`` on a synthetic logistic dataset stored as partitioned
Parquet several times the memory the workers are given, against the in-memory ``dp_gd`` on rows that fit, in one run;
then one streamed ``dp_otb`` pass over it.

    python benchmarks/out_of_core.py [--gib 3] [--workers 4] [--worker-memory 256MiB] [--features 20] [--steps 10]
                                     [--partition-mib 16] [--peer-rows 1000000] [--store DIR] [--no-otb]

1. Writes ``--gib`` GiB of float64 rows (and labels) through :class:`privfit.datasets.parquet_store.PartitionWriter`,
   a block of 2^20 rows at a time (the writer holds one partition), into a local parquet store (``--store``, default a
   temporary directory, removed at the end).
2. Starts a ``LocalCluster`` of ``--workers`` processes of one thread, each limited to ``--worker-memory`` (the nanny
   restarts a worker above it), samples every worker's resident memory every 50 ms, and runs ``--steps`` steps of
   ``dp_gd`` (logistic, σ for ε = 1, δ = 1e-6) on the stored dataset through :class:`privfit.scaleout.dask_rows.
   DaskPartitionedRows` with a partition cache of a quarter of a worker's memory: most partitions are read from the
   store again at each step.
3. Runs the same steps of the in-memory ``dp_gd`` (the service's float32 path) on ``--peer-rows`` rows in this
   process, three times before and three times after the Dask run (the fastest counts), and prints both throughputs
   in rows × steps per second and their ratio, the data's size against the workers' total memory, and each worker's
   peak memory against its limit.

4. Runs one ``dp_otb`` pass over the stored dataset, streamed partition by partition through this process
   (:func:`privfit.solvers.online_to_batch.solver.partition_order`), and prints its rows per second and how much this
   process's resident memory grew during the pass, against a partition's size.

Absolute times move with the machine's load; the ratio and the memory figures are what the issue's target speaks of
(throughput ≥ 0.5 × in-memory, peak < limit, data ≥ 3 × the workers' memory).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from privfit.datasets.parquet_store import ParquetDatasetStore
from privfit.privacy import gaussian_sigma, make_generator
from privfit.scaleout.cluster import local_cluster
from privfit.scaleout.dask_rows import DaskPartitionedRows, StoredPartitions
from privfit.solvers import PublicMetadata, get_solver
from privfit.solvers.baselines.dp_gd import dp_gradient_descent
from privfit.solvers.geometry import augment_intercept
from privfit.solvers.losses import make_loss

BLOCK_ROWS = 2**20


def synthetic_block(rng: np.random.Generator, rows: int, d: int, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows with norm ≤ 1 and logistic labels ±1 of a fixed public weight vector."""
    X = rng.uniform(-1, 1, size=(rows, d)) / np.sqrt(d)
    labels = np.where(rng.random(rows) < 1 / (1 + np.exp(-(X @ weights))), 1.0, -1.0)
    return X, labels


def write_dataset(store: ParquetDatasetStore, rows: int, d: int) -> tuple[str, float]:
    """The stored dataset's key and the seconds the write took."""
    rng = np.random.default_rng(0)
    weights = np.linspace(3, -3, d)
    began = time.perf_counter()
    with store.writer(d) as writer:
        for start in range(0, rows, BLOCK_ROWS):
            writer.write(*synthetic_block(rng, min(BLOCK_ROWS, rows - start), d, weights))
        key = writer.finish()
    return key, time.perf_counter() - began


def start_memory_sampler(dask_worker) -> None:
    """In a worker process (``client.run`` passes its Worker): sample the process's resident memory every 50 ms into
    an attribute of the worker, read back by :func:`peak_memory`."""
    import os

    import psutil

    process = psutil.Process(os.getpid())
    dask_worker.privfit_peak_rss = process.memory_info().rss

    def sample() -> None:
        while True:
            dask_worker.privfit_peak_rss = max(dask_worker.privfit_peak_rss, process.memory_info().rss)
            time.sleep(0.05)

    threading.Thread(target=sample, daemon=True).start()


def peak_memory(dask_worker) -> int:
    return int(dask_worker.privfit_peak_rss)


def stream_dp_otb(client, where: StoredPartitions, meta: PublicMetadata) -> tuple[float, float, int]:
    """One ``dp_otb`` pass (logistic, ε = 1, δ = 1e-6) streamed over the stored partitions by this process: (rows per
    second, the growth of this process's peak resident memory during the pass in bytes, the partitions' largest size
    as float64)."""
    import os

    import psutil

    solver = get_solver("dp_otb")
    resolved = solver.resolve({"model": "logistic"}, meta, target_epsilon=1.0, delta=1e-6)
    partitions = DaskPartitionedRows(client, where, meta, fit_intercept=False)
    process = psutil.Process(os.getpid())
    before = peak = process.memory_info().rss
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.wait(0.05):
            peak = max(peak, process.memory_info().rss)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    began = time.perf_counter()
    solver.fit_partitioned(partitions, meta, resolved, make_generator(1, data_is_public=True))
    seconds = time.perf_counter() - began
    done.set()
    sampler.join()
    return meta.n / seconds, peak - before, max(partitions.partition_rows) * 8 * (meta.d + 1)


def steps_per_second(run, steps: int) -> float:
    began = time.perf_counter()
    run()
    return steps / (time.perf_counter() - began)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gib", type=float, default=3.0, help="size of the stored float64 rows and labels")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--worker-memory", default="256MiB")
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--partition-mib", type=float, default=16.0)
    parser.add_argument("--peer-rows", type=int, default=1_000_000)
    parser.add_argument("--store", type=Path, default=None)
    parser.add_argument("--no-otb", dest="otb", action="store_false", help="skip the streamed dp_otb pass")
    args = parser.parse_args()

    import dask.utils
    import distributed

    d = args.features
    rows = int(args.gib * 1024**3 // (8 * (d + 1)))
    root = args.store or Path(tempfile.mkdtemp(prefix="privfit-out-of-core-"))
    store = ParquetDatasetStore(str(root), partition_bytes=int(args.partition_mib * 1024**2))
    key, seconds = write_dataset(store, rows, d)
    on_disk = sum(f.stat().st_size for f in (root / key).iterdir())
    where = StoredPartitions.of(store, key)
    print(f"wrote {rows:,} rows × {d} features ({args.gib:.2f} GiB as float64; {on_disk / 1024**3:.2f} GiB of "
          f"Parquet in {len(where.manifest.partitions)} partitions) in {seconds:.1f} s "
          f"({rows * 8 * (d + 1) / seconds / 1024**2:.0f} MiB/s)")  # fmt: skip

    loss, clip, eta, radius = make_loss("logistic"), 1.0, 0.5, 10.0
    sigma = gaussian_sigma(1.0, 1e-6, sensitivity=2 * clip, count=args.steps).noise
    common = {"loss": loss, "clip_norm": clip, "sigma": sigma, "steps": args.steps, "step_size": eta, "radius": radius}
    peer_X, peer_y = synthetic_block(np.random.default_rng(2), args.peer_rows, d, np.linspace(3, -3, d))
    design = augment_intercept(peer_X)

    def peer() -> float:
        """The in-memory dp_gd's rows·steps per second on the peer rows."""
        return steps_per_second(lambda: dp_gradient_descent(design, peer_y, rng=make_generator(1, data_is_public=True),
                                                            **common), args.steps) * args.peer_rows  # fmt: skip

    in_memory_before = max(peer() for _ in range(3))
    limit = dask.utils.parse_bytes(args.worker_memory)
    cluster = local_cluster(args.workers, memory_limit=limit)
    try:
        with distributed.Client(cluster) as client:
            client.run(start_memory_sampler)
            meta = PublicMetadata(n=rows, d=d, row_norm_bound=1.0)
            partitions = DaskPartitionedRows(client, where, meta, fit_intercept=True, cache_bytes=limit // 4)
            out_of_core = steps_per_second(lambda: dp_gradient_descent(
                np.empty((0, d + 1)), np.empty(0), rng=make_generator(1, data_is_public=True), partitions=partitions,
                **common), args.steps) * rows  # fmt: skip
            peaks = client.run(peak_memory)
            restarts = sum(1 for _ in cluster.workers)  # workers alive at the end (a nanny restart keeps the count)
            if args.otb:
                otb = stream_dp_otb(client, where, meta)
    finally:
        cluster.close()
        if args.store is None:
            shutil.rmtree(root, ignore_errors=True)
    in_memory = max(in_memory_before, *(peer() for _ in range(3)))  # the fastest of 3 runs before and 3 after
    total = args.workers * limit
    print(f"data {args.gib:.2f} GiB = {args.gib * 1024**3 / total:.1f} × the workers' memory ({args.workers} × "
          f"{args.worker_memory}); {restarts} workers at the end")  # fmt: skip
    print(f"dp_gd on the Dask workers: {out_of_core:,.0f} rows·steps/s; in memory ({args.peer_rows:,} rows): "
          f"{in_memory:,.0f} rows·steps/s; ratio {out_of_core / in_memory:.2f}")  # fmt: skip
    if args.otb:
        rate, growth, partition = otb
        print(f"dp_otb streamed one pass over the {rows:,} rows in this process: {rate:,.0f} rows/s; its peak memory "
              f"grew by {growth / 1024**2:.0f} MiB (a partition is {partition / 1024**2:.0f} MiB)")  # fmt: skip
    for address, peak in sorted(peaks.items()):
        print(f"worker {address}: peak {peak / 1024**2:.0f} MiB of {limit / 1024**2:.0f} MiB "
              f"({'under' if peak < limit else 'OVER'} its limit)")  # fmt: skip


if __name__ == "__main__":
    main()
