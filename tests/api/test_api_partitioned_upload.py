"""Uploads over max_matrix_bytes on a server with the parquet store and a Dask cluster (issue 39): stored by
partitions in bounded memory instead of refused, matched as duplicates by content whatever the file format, charged
for their private preprocessing, and fit only by the solvers that read a dataset by partitions — the others are a
422 naming those. Without a cluster, or with a privacy unit or a validation split, the cap still refuses (413),
and nothing is left in the store."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest
from api_helpers import SMALL_SCHEMA, make_client, make_keys, small_csv, wait_for

from privfit.datasets import DatasetSchema
from privfit.datasets.columnar import encode_csv_upload
from privfit.datasets.parquet_store import ParquetDatasetStore
from privfit.db import Dataset

#: 4000 rows of d = 5 encode to 4000 · 6 · 8 = 192,000 bytes: over this cap, stored by partitions of 341 rows.
CAP = 64 * 1024
SERVER: dict[str, Any] = {"store": "parquet", "store_partition_bytes": 16 * 1024, "max_matrix_bytes": CAP}


def _post(client: Any, keys: Any, body: bytes, *, parquet: bool = False, schema: dict | None = None,
          allow_duplicate: bool = False) -> Any:  # fmt: skip
    name, kind = ("data.parquet", "application/vnd.apache.parquet") if parquet else ("data.csv", "text/csv")
    return client.post("/v1/datasets", headers=keys.owner, files={"file": (name, body, kind)},
                       data={"schema": json.dumps(schema or SMALL_SCHEMA),
                             "allow_duplicate": str(allow_duplicate).lower()})  # fmt: skip


def _as_parquet(csv: bytes) -> bytes:
    out = io.BytesIO()
    pq.write_table(pa_csv.read_csv(io.BytesIO(csv)), out, row_group_size=1000)
    return out.getvalue()


def _grant(client: Any, keys: Any, dataset_id: str) -> None:
    granted = client.post(f"/v1/datasets/{dataset_id}/grants", headers=keys.owner, json={"api_key_id": keys.analyst_id})
    assert granted.status_code == 201, granted.text


def test_an_upload_over_the_cap_is_stored_by_partitions_and_fit_by_the_partition_solvers(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    pytest.importorskip("distributed", reason="dask[distributed] is a test dependency")
    from privfit.scaleout.dask_rows import DaskPartitionedRows

    streamed: list[int] = []
    read_rows = DaskPartitionedRows.read_rows
    monkeypatch.setattr(DaskPartitionedRows, "read_rows", lambda self, i: streamed.append(i) or read_rows(self, i))
    csv = small_csv()
    with make_client(sqlite_url, tmp_path, dask_scheduler="local", dask_local_workers=1, **SERVER) as client:
        keys = make_keys(client)
        store = client.app.state.store
        assert isinstance(store, ParquetDatasetStore)
        answer = _post(client, keys, csv)
        assert answer.status_code == 201, answer.text
        dataset_id = answer.json()["id"]
        assert (answer.json()["n"], answer.json()["d"]) == (4000, 5)
        with client.app.state.db.read() as session:
            key = session.get_one(Dataset, dataset_id).storage_key
        assert len(store.manifest(key).partitions) == 12
        expected = encode_csv_upload(io.BytesIO(csv), DatasetSchema.model_validate(SMALL_SCHEMA))
        X, y, _ = store.read(key)
        np.testing.assert_array_equal(X, expected.X)
        np.testing.assert_array_equal(y, expected.y)

        # the same table as Parquet is the same content: refused as a duplicate, unless asked for
        duplicate = _post(client, keys, _as_parquet(csv), parquet=True)
        assert duplicate.status_code == 409 and duplicate.json()["existing_dataset_id"] == dataset_id
        assert _post(client, keys, _as_parquet(csv), parquet=True, allow_duplicate=True).status_code == 201

        # private preprocessing (the default) is released from the partitions' counts and charged
        with_preprocessing = {key: value for key, value in SMALL_SCHEMA.items() if key != "preprocessing"}
        preprocessed = _post(client, keys, small_csv(seed=1), schema=with_preprocessing)
        assert preprocessed.status_code == 201, preprocessed.text
        release = preprocessed.json()["preprocessing"]
        assert release is not None and release["epsilon"] > 0
        ledger = client.get(f"/v1/datasets/{preprocessed.json()['id']}/ledger", headers=keys.owner).json()
        assert [entry["kind"] for entry in ledger["entries"]] == ["reservation", "charge"]
        assert ledger["entries"][1]["epsilon"] == pytest.approx(release["epsilon"], rel=1e-12)

        _grant(client, keys, dataset_id)
        fit = {"dataset_id": dataset_id, "model": "logistic", "privacy": {"epsilon": 0.5}}
        refused = client.post("/v1/fits", headers=keys.analyst, json={**fit, "solver": "output_perturbation"})
        assert refused.status_code == 422 and refused.json()["parameter"] == "solver", refused.text
        detail = refused.json()["detail"]
        assert "dp_distributed, dp_gd, dp_otb, dp_sgd" in detail and "max_matrix_bytes" in detail
        assert client.post("/v1/fits", headers=keys.analyst, json={**fit, "solver": "auto"}).status_code == 422
        for solver, params in (("dp_gd", {"steps": 40}), ("dp_otb", {})):
            body = {**fit, "solver": solver, "params": params}
            fit_id = client.post("/v1/fits", headers=keys.analyst, json=body).json()["id"]
            done = wait_for(client, fit_id, keys.analyst)
            assert done["status"] == "succeeded" and done["result"]["coefficients"][0] > 0, done
        assert sorted(streamed) == list(range(12))  # over the cap, dp_otb streamed each partition once, itself
        assert not [name for name in store._children() if name.startswith(".staging-")]


def test_the_cap_still_refuses_without_a_cluster_or_with_a_privacy_unit_or_a_split(sqlite_url: str, tmp_path: Path):
    """No cluster: 413 on max_matrix_bytes as before. A privacy unit or a validation split needs the whole matrix:
    413 naming the schema field. Nothing is stored, nothing is left staged."""
    csv = small_csv()
    with make_client(sqlite_url, tmp_path, **SERVER) as client:
        refused = _post(client, make_keys(client), csv)
        assert refused.status_code == 413 and refused.json()["setting"] == "max_matrix_bytes", refused.text
    with make_client(sqlite_url, tmp_path, dask_scheduler="local", **SERVER) as client:
        keys = make_keys(client)
        split = _post(client, keys, csv, schema={**SMALL_SCHEMA, "validation_fraction": 0.2})
        assert split.status_code == 413 and split.json()["field"] == "schema.validation_fraction", split.text
        with_units = csv.replace(b"x1,x2,color,y", b"x1,x2,color,y,uid").replace(b"\n", b",u\n")
        with_units = with_units.replace(b"x1,x2,color,y,uid,u\n", b"x1,x2,color,y,uid\n")
        unit_schema = {**SMALL_SCHEMA, "privacy_unit": {"column": "uid", "max_rows": 2}}
        unit = _post(client, keys, with_units, schema=unit_schema)
        assert unit.status_code == 413 and unit.json()["field"] == "schema.privacy_unit", unit.text
        store = client.app.state.store
        assert store.stored_keys() == [] and not [n for n in store._children() if n.startswith(".staging-")]
