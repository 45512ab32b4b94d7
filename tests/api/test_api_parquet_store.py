"""The service on the partitioned Parquet store in an S3-compatible object store (PRIVFIT_STORE=parquet,
PRIVFIT_STORE_URL=s3://…; issue 39): an upload is stored as checked partitions, fits read it back and succeed, a
deleted dataset's partitions are purged from the bucket, and a process on another bucket is told so."""

from __future__ import annotations

from pathlib import Path

import pytest
from api_helpers import make_client, make_keys, upload, wait_for

from privfit.datasets.lifecycle import StoreMismatchError, check_store
from privfit.datasets.parquet_store import ParquetDatasetStore
from privfit.db import Dataset

FIT = {"model": "logistic", "solver": "dp_gd", "privacy": {"epsilon": 0.5}}


def test_upload_fit_and_delete_on_s3(database_url: str, tmp_path: Path, s3_bucket: str):
    url = f"{s3_bucket}/privfit"
    with make_client(database_url, tmp_path, store="parquet", store_url=url, store_partition_bytes=16 * 1024) as client:
        store = client.app.state.store
        assert isinstance(store, ParquetDatasetStore) and store.url == url
        keys = make_keys(client)
        dataset_id = upload(client, keys)
        with client.app.state.db.read() as session:
            dataset = session.get_one(Dataset, dataset_id)
            key, store_id = dataset.storage_key, dataset.store_id
        assert store.stored_keys() == [key] and store_id == store.identity and store_id.startswith("parquet:")
        assert len(store.manifest(key).partitions) == 12  # 4000 rows of d = 5 at 16 KiB: 341 rows a partition
        fits = [client.post("/v1/fits", headers=keys.analyst, json={**FIT, "dataset_id": dataset_id}).json()["id"]
                for _ in range(2)]  # fmt: skip
        for fit_id in fits:
            fit = wait_for(client, fit_id, keys.analyst)
            assert fit["status"] == "succeeded", fit
            assert fit["result"]["coefficients"][0] > 0  # y = sign(2·x1 − x2 + noise)
        assert client.delete(f"/v1/datasets/{dataset_id}", headers=keys.owner).status_code == 204
        assert store.stored_keys() == [] and not store.fs.exists(f"{store.root}/{key}")


def test_a_process_on_another_bucket_is_refused(sqlite_url: str, tmp_path: Path, s3_bucket: str):
    url = f"{s3_bucket}/privfit"
    with make_client(sqlite_url, tmp_path, store="parquet", store_url=url) as client:
        upload(client, make_keys(client))
        elsewhere = ParquetDatasetStore(f"{s3_bucket}/elsewhere")
        with pytest.raises(StoreMismatchError, match="PRIVFIT_STORE_URL"):
            check_store(client.app.state.db, elsewhere)


def test_dp_gd_dp_sgd_and_dp_distributed_fits_run_on_the_dask_cluster_and_others_in_memory(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """PRIVFIT_DASK_SCHEDULER=local: the embedded pool's dp_gd, dp_sgd and dp_distributed fits of a parquet-store
    dataset are summed by the cluster's worker processes (their partition caches fill); dp_otb and
    output_perturbation read the dataset into memory (dp_otb streams only datasets over max_matrix_bytes:
    tests/api/test_api_partitioned_upload.py); all succeed."""
    pytest.importorskip("distributed", reason="dask[distributed] is a test dependency")
    from privfit.scaleout.dask_rows import DaskPartitionedRows

    streamed: list[int] = []
    read_rows = DaskPartitionedRows.read_rows
    monkeypatch.setattr(DaskPartitionedRows, "read_rows", lambda self, i: streamed.append(i) or read_rows(self, i))
    with make_client(sqlite_url, tmp_path, store="parquet", store_partition_bytes=16 * 1024, dask_scheduler="local",
                     dask_local_workers=1) as client:  # fmt: skip
        keys = make_keys(client)
        dataset_id = upload(client, keys)
        rows = client.app.state.workers.rows
        assert rows is not None and rows.scheduler == "local"
        solvers = (("dp_gd", {"steps": 40}), ("dp_sgd", {"epochs": 1}), ("dp_distributed", {}), ("dp_otb", {}),
                   ("output_perturbation", {}))  # fmt: skip
        for solver, params in solvers:
            fit_id = client.post("/v1/fits", headers=keys.analyst, json={
                **FIT, "solver": solver, "params": params, "dataset_id": dataset_id}).json()["id"]  # fmt: skip
            fit = wait_for(client, fit_id, keys.analyst)
            assert fit["status"] == "succeeded" and fit["result"]["coefficients"][0] > 0, fit

        def cache() -> tuple[int, int]:
            from privfit.scaleout.dask_rows import _CACHE

            return _CACHE.reads, len(_CACHE._entries)

        # each Dask fit read the 12 partitions once, and left none in the worker's memory when it ended
        assert list(rows.client().run(cache).values()) == [(36, 0)]
        assert streamed == []  # under max_matrix_bytes: dp_otb reads the dataset into memory and shuffles all rows
