"""dp_gd, dp_sgd and dp_distributed on a Dask cluster (privfit.scaleout.dask_rows; issue 39): a dataset in the parquet
store is summed partition by partition by the workers of a real ``LocalCluster`` (two worker processes), and the fit
equals the in-memory fit for the same noise seed — binary, numeric and categorical labels, plain and momentum steps,
every batch sampling —; a tampered partition fails the fit; the solvers and datasets it cannot serve are refused. The
empirical audits through the Dask path are beside the in-memory ones (tests/solvers/baselines/test_dp_gd.py,
test_dp_sgd_audit.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

distributed = pytest.importorskip("distributed", reason="dask[distributed] is a test dependency")

from privfit.datasets.parquet_store import ParquetDatasetStore  # noqa: E402
from privfit.datasets.store import DatasetStoreError  # noqa: E402
from privfit.privacy import make_generator  # noqa: E402
from privfit.scaleout.dask_rows import DaskPartitionedRows, DaskStepTimeout, StoredPartitions  # noqa: E402
from privfit.solvers import PublicMetadata, SolverParameterError, get_solver  # noqa: E402
from privfit.solvers.baselines.dp_gd import dp_gradient_descent  # noqa: E402
from privfit.solvers.baselines.dp_sgd import dp_sgd  # noqa: E402
from privfit.solvers.geometry import augment_intercept  # noqa: E402
from privfit.solvers.losses import MultinomialLogisticLoss, make_loss  # noqa: E402

DP_GD = get_solver("dp_gd")


def stored(tmp_path: Path, X: np.ndarray, y: np.ndarray, partition_bytes: int = 2048) -> StoredPartitions:
    store = ParquetDatasetStore(str(tmp_path / "parquet"), partition_bytes=partition_bytes)
    key = store.put(SimpleNamespace(X=X, y=y, units=None))
    return StoredPartitions.of(store, key)


def rows(seed: int, n: int = 700, d: int = 4, label: str = "binary") -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-0.5, 0.5, size=(n, d))
    score = X @ np.linspace(1, -1, d) + 0.1 * rng.standard_normal(n)
    if label == "binary":
        return X, np.where(score > 0, 1.0, -1.0)
    if label == "numeric":
        return X, np.clip(score, -1, 1)
    return X, np.digitize(score, [-0.2, 0.2]).astype(np.float64)  # three classes 0, 1, 2


@pytest.mark.parametrize(
    ("model", "label", "momentum"),
    [("logistic", "binary", "none"), ("linear", "numeric", "nesterov"), ("multinomial", "categorical", "none")],
)
def test_the_dask_sums_give_the_in_memory_release_for_the_same_noise(
    dask_client, tmp_path: Path, model, label, momentum
):
    X, y = rows(1, label=label)
    where = stored(tmp_path, X, y)
    assert len(where.manifest.partitions) == 14  # 2048 B / (8 · (4 + 1)) = 51 rows a partition
    meta = PublicMetadata(n=700, d=4, row_norm_bound=1.0, label_bound=2.0 if label == "categorical" else 1.0)
    loss = MultinomialLogisticLoss(3) if model == "multinomial" else make_loss(model)
    common = {"loss": loss, "clip_norm": 0.8, "sigma": 3.0, "steps": 12, "step_size": 0.5, "radius": 5.0,
              "momentum": momentum, "runs": 3}  # fmt: skip
    in_memory = dp_gradient_descent(augment_intercept(X), y, rng=make_generator(7, data_is_public=True),
                                    precision="float64", **common)  # fmt: skip
    partitions = DaskPartitionedRows(dask_client, where, meta, fit_intercept=True)
    assert (partitions.rows, partitions.features) == (700, 5)
    on_dask = dp_gradient_descent(np.empty((0, 5)), np.empty(0), rng=make_generator(7, data_is_public=True),
                                  partitions=partitions, **common)  # fmt: skip
    np.testing.assert_allclose(on_dask, in_memory, rtol=1e-10, atol=1e-12)


def test_the_solver_fits_partitions_as_it_fits_the_matrix(dask_client, tmp_path: Path):
    X, y = rows(2)
    meta = PublicMetadata(n=700, d=4, row_norm_bound=1.0)
    resolved = DP_GD.resolve({"model": "logistic"}, meta, target_epsilon=1.0, delta=1e-6)
    partitions = DaskPartitionedRows(dask_client, stored(tmp_path, X, y), meta, fit_intercept=True)
    seen: list[float] = []
    on_dask = DP_GD.fit_partitioned(partitions, meta, resolved, make_generator(3, data_is_public=True), seen.append)
    in_memory = DP_GD.fit(X, y, meta, resolved, make_generator(3, data_is_public=True))
    # the in-memory fit runs in float32 (float32_suffices); the partitions in float64: the same release to rounding
    np.testing.assert_allclose(on_dask.coefficients, in_memory.coefficients, atol=1e-4)
    assert on_dask.intercept == pytest.approx(in_memory.intercept, abs=1e-4)
    assert on_dask.metadata == in_memory.metadata and seen[-1] == 1.0 and len(seen) >= resolved.steps


def test_what_cannot_run_on_partitions_is_refused(dask_client, tmp_path: Path):
    X, y = rows(3)
    meta = PublicMetadata(n=700, d=4, row_norm_bound=1.0)
    partitions = DaskPartitionedRows(dask_client, stored(tmp_path, X, y), meta, fit_intercept=True)
    in_memory_only = get_solver("output_perturbation")
    resolved = in_memory_only.resolve({"model": "logistic"}, meta, target_epsilon=1.0, delta=1e-6)
    with pytest.raises(SolverParameterError, match="in memory only") as refused:
        in_memory_only.fit_partitioned(partitions, meta, resolved, make_generator(0, data_is_public=True))
    assert refused.value.parameter == "solver"
    resolved = DP_GD.resolve({"model": "logistic"}, meta, target_epsilon=1.0, delta=1e-6)
    wrong = dataclasses.replace(meta, n=701)
    resolved_wrong = DP_GD.resolve({"model": "logistic"}, wrong, target_epsilon=1.0, delta=1e-6)
    with pytest.raises(SolverParameterError, match="701 rows"):
        DP_GD.fit_partitioned(partitions, wrong, resolved_wrong, make_generator(0, data_is_public=True))
    store = ParquetDatasetStore(str(tmp_path / "units"), partition_bytes=2048)
    key = store.put(SimpleNamespace(X=X, y=y, units=np.arange(700) // 2))
    with pytest.raises(ValueError, match="privacy unit"):
        DaskPartitionedRows(dask_client, StoredPartitions.of(store, key), meta, fit_intercept=True)
    assert resolved.steps > 0


def test_a_tampered_partition_fails_the_fit(dask_client, tmp_path: Path):
    X, y = rows(4)
    where = stored(tmp_path, X, y)
    store = ParquetDatasetStore(where.url, partition_bytes=where.partition_bytes)
    other_key = store.put(SimpleNamespace(X=X[::-1].copy(), y=y[::-1].copy(), units=None))
    foreign = store.fs.cat_file(f"{store.root}/{other_key}/part-00003.parquet")
    store.fs.pipe_file(f"{store.root}/{where.key}/part-00003.parquet", foreign)
    meta = PublicMetadata(n=700, d=4, row_norm_bound=1.0)
    resolved = DP_GD.resolve({"model": "logistic"}, meta, target_epsilon=1.0, delta=1e-6)
    partitions = DaskPartitionedRows(dask_client, where, meta, fit_intercept=True, cache_bytes=0)
    with pytest.raises(DatasetStoreError, match="does not match its content hash"):
        DP_GD.fit_partitioned(partitions, meta, resolved, make_generator(0, data_is_public=True))


@pytest.mark.parametrize("sampling", ["poisson", "fixed_size", "shuffle"])
def test_dp_sgd_batches_drawn_here_and_summed_there_give_the_in_memory_release(dask_client, tmp_path: Path,
                                                                               sampling: str):  # fmt: skip
    X, y = rows(5, n=300)
    meta = PublicMetadata(n=300, d=4, row_norm_bound=1.0)
    common = {"loss": make_loss("logistic"), "clip_norm": 0.8, "sigma": 2.0, "batch_size": 32, "sampling": sampling,
              "epochs": 2, "step_size": 0.5, "radius": 5.0}  # fmt: skip
    in_memory = dp_sgd(augment_intercept(X), y, rng=make_generator(11, data_is_public=True), **common)
    partitions = DaskPartitionedRows(dask_client, stored(tmp_path, X, y), meta, fit_intercept=True)
    on_dask = dp_sgd(np.empty((0, 5)), np.empty(0), rng=make_generator(11, data_is_public=True),
                     partitions=partitions, **common)  # fmt: skip
    np.testing.assert_allclose(on_dask, in_memory, rtol=1e-10, atol=1e-12)
    solver = get_solver("dp_sgd")
    resolved = solver.resolve({"model": "logistic", "epochs": 1}, meta, target_epsilon=1.0, delta=1e-6)
    fitted = solver.fit_partitioned(partitions, meta, resolved, make_generator(4, data_is_public=True))
    reference = solver.fit(X, y, meta, resolved, make_generator(4, data_is_public=True))
    np.testing.assert_allclose(fitted.coefficients, reference.coefficients, rtol=1e-9, atol=1e-12)
    assert fitted.metadata == reference.metadata


@pytest.mark.parametrize(
    ("sampler", "params"), [("float", {}), ("exact", {}), ("float", {"n_learners": 3, "topology": "ring", "passes": 2})]
)
def test_dp_distributed_rounds_summed_there_give_the_in_memory_release(dask_client, tmp_path: Path, sampler: str,
                                                                       params: dict):  # fmt: skip
    """The learners' batches (one learner, or three on a ring over two passes) are drawn by the fit and summed
    where they are, each summand clipped to norm ≤ C as in memory: the same release for the same noise, to
    rounding (float and exact samplers)."""
    from privfit.privacy.noise import using_sampler

    X, y = rows(6, n=600)
    meta = PublicMetadata(n=600, d=4, row_norm_bound=1.0)
    solver = get_solver("dp_distributed")
    with using_sampler(sampler):
        resolved = solver.resolve({"model": "logistic", **params}, meta, target_epsilon=2.0, delta=1e-6)
        partitions = DaskPartitionedRows(dask_client, stored(tmp_path, X, y), meta, fit_intercept=True)
        seen: list[float] = []
        fitted = solver.fit_partitioned(partitions, meta, resolved, make_generator(9, data_is_public=True),
                                        seen.append)  # fmt: skip
        reference = solver.fit(X, y, meta, resolved, make_generator(9, data_is_public=True))
    np.testing.assert_allclose(fitted.coefficients, reference.coefficients, rtol=1e-9, atol=1e-12)
    assert fitted.intercept == pytest.approx(reference.intercept, rel=1e-9, abs=1e-12)
    assert fitted.metadata == reference.metadata and seen[-1] == 1.0


def test_a_cluster_without_workers_fails_the_step_instead_of_hanging(tmp_path: Path):
    """Workers gone (or killed for memory at every start): the step's sums time out (PRIVFIT_DASK_TIMEOUT_SECONDS)
    with an error naming the setting, and the fit fails instead of waiting forever."""
    X, y = rows(6)
    meta = PublicMetadata(n=700, d=4, row_norm_bound=1.0)
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None)
    with distributed.Client(cluster, set_as_default=False) as client:
        partitions = DaskPartitionedRows(client, stored(tmp_path, X, y), meta, fit_intercept=True, timeout_seconds=1.0)
        client.retire_workers(list(client.scheduler_info()["workers"]))
        resolved = DP_GD.resolve({"model": "logistic"}, meta, target_epsilon=1.0, delta=1e-6)
        with pytest.raises(DaskStepTimeout, match="PRIVFIT_DASK_TIMEOUT_SECONDS"):
            DP_GD.fit_partitioned(partitions, meta, resolved, make_generator(0, data_is_public=True))
    cluster.close()


def _worker_cache(key: str) -> tuple[int, int, int]:
    """In a worker: (partitions read from the store, partitions of ``key`` kept, reused buffers held)."""
    from privfit.scaleout.dask_rows import _CACHE, _SCRATCH

    return _CACHE.reads, sum(1 for entry in _CACHE._entries if entry[1] == key), len(_SCRATCH._buffers)


def _forget_every_dataset() -> None:
    from privfit.scaleout.dask_rows import _CACHE, forget_partitions

    for entry in list(_CACHE._entries):
        forget_partitions(entry[1])


def test_a_cache_smaller_than_the_data_keeps_what_it_admitted_and_reads_only_the_rest_again(
    dask_client, tmp_path: Path
):
    """Every step visits the partitions in the same order: a least-recently-used cache smaller than the data would
    evict each partition just before it is needed again and hit nothing. The cache keeps the partitions it admitted
    while they fit (here 3 of each worker's 7), reads the others into a reused buffer, and the fit's end drops both;
    the release is the one of a cache holding everything."""
    X, y = rows(8)
    where = stored(tmp_path, X, y)  # 14 partitions of 51 rows (the last 37), 7 a worker
    meta = PublicMetadata(n=700, d=4, row_norm_bound=1.0)
    loss = make_loss("logistic")
    common = {"loss": loss, "clip_norm": 0.8, "sigma": 3.0, "steps": 5, "step_size": 0.5, "radius": 5.0}
    prepared = 51 * (5 + 2) * 8  # the design matrix, labels and row norms of a partition
    dask_client.run(_forget_every_dataset)  # earlier tests' fits on this session's cluster left theirs
    before = dask_client.run(_worker_cache, where.key)
    small = DaskPartitionedRows(dask_client, where, meta, fit_intercept=True, cache_bytes=3 * prepared)
    theta = np.full(5, 0.1)
    first = small.clipped_sum(loss, theta, 0.8)
    after_one = dask_client.run(_worker_cache, where.key)
    assert sum(a[0] - b[0] for a, b in zip(after_one.values(), before.values(), strict=True)) == 14
    assert sorted(entry[1] for entry in after_one.values()) == [3, 3]  # admitted while they fit, none evicted
    assert all(entry[2] == 1 for entry in after_one.values())  # the others went through one reused buffer
    np.testing.assert_array_equal(small.clipped_sum(loss, theta, 0.8), first)
    after_two = dask_client.run(_worker_cache, where.key)
    assert sum(a[0] - b[0] for a, b in zip(after_two.values(), after_one.values(), strict=True)) == 8  # 14 − 6 kept
    on_dask = dp_gradient_descent(np.empty((0, 5)), np.empty(0), rng=make_generator(2, data_is_public=True),
                                  partitions=small, **common)  # fmt: skip
    in_memory = dp_gradient_descent(augment_intercept(X), y, rng=make_generator(2, data_is_public=True),
                                    precision="float64", **common)  # fmt: skip
    np.testing.assert_allclose(on_dask, in_memory, rtol=1e-10, atol=1e-12)
    small.release()
    assert all(entry[1:] == (0, 0) for entry in dask_client.run(_worker_cache, where.key).values())


def test_the_local_cluster_s_workers_use_glibc_s_own_malloc_policy():
    """privfit.scaleout.cluster: Dask's MALLOC_TRIM_THRESHOLD_=65536 is unset in the workers it starts."""
    import os

    from privfit.scaleout.cluster import local_cluster

    cluster = local_cluster(1, memory_limit="512MiB")
    with distributed.Client(cluster, set_as_default=False) as client:
        seen = client.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_"))
    cluster.close()
    assert list(seen.values()) == [None]
