"""PRIVFIT_STORE=database over HTTP: uploads land in ``dataset_blobs`` and fits read them from there, so the
data_dir stays empty and a worker with nothing but the database URL can fit — on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from api_helpers import fit_and_wait, make_client, upload
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from privfit.datasets.store import DatabaseDatasetStore, make_store
from privfit.db import Dataset, DatasetBlob, make_database
from privfit.jobs import WorkerPool
from privfit.settings import Settings

FIT = {"model": "logistic", "solver": "dp_gd", "privacy": {"epsilon": 0.5}}


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """The app's data_dir (make_client's ``tmp_path / "store"``), created empty beforehand."""
    path = tmp_path / "store"
    path.mkdir()
    return path


@pytest.fixture
def client(database_url: str, tmp_path: Path, data_dir: Path) -> Iterator[TestClient]:
    """The conftest ``client`` (embedded workers) with the database store; ``keys`` builds on it."""
    with make_client(database_url, tmp_path, store="database") as test_client:
        yield test_client


@pytest.fixture
def idle_client(database_url: str, tmp_path: Path, data_dir: Path) -> Iterator[TestClient]:
    """An API without workers (``PRIVFIT_QUEUE=none``) with the database store; ``idle_keys`` builds on it."""
    with make_client(database_url, tmp_path, workers=False, queue="none", store="database") as test_client:
        yield test_client


def blob_keys(test_client: TestClient) -> list[str]:
    with test_client.app.state.db.read() as session:
        return list(session.scalars(select(DatasetBlob.key)))


def test_fit_reads_the_dataset_from_the_database(client, keys, data_dir):
    assert isinstance(client.app.state.store, DatabaseDatasetStore)
    dataset_id = upload(client, keys)
    _, done = fit_and_wait(client, keys, {"dataset_id": dataset_id, **FIT})
    assert done["result"]["coefficients"][0] > 0 > done["result"]["coefficients"][1]  # y = sign(2·x1 − x2 + noise)
    with client.app.state.db.read() as session:
        storage_key = session.get(Dataset, dataset_id).storage_key
    assert blob_keys(client) == [storage_key]
    assert list(data_dir.iterdir()) == []  # nothing was written to, or read from, the data directory

    assert client.delete(f"/v1/datasets/{dataset_id}", headers=keys.owner).status_code == 204
    assert blob_keys(client) == []  # the purge removed the row


def test_a_worker_with_only_the_database_url_fits(idle_client, idle_keys, database_url, tmp_path, data_dir):
    """A worker as on another machine: its own engine and its own, empty and different, data_dir."""
    dataset_id = upload(idle_client, idle_keys)
    again = upload(idle_client, idle_keys)  # the same content: one blob for both datasets
    with idle_client.app.state.db.read() as session:
        assert session.scalar(select(func.count()).select_from(DatasetBlob)) == 1
    elsewhere = Settings(database_url=database_url, data_dir=tmp_path / "elsewhere", store="database")
    db = make_database(database_url)
    pool = WorkerPool(db, make_store(elsewhere, db), size=1, lease_seconds=30, heartbeat_seconds=0.2,
                      poll_seconds=0.05)  # fmt: skip
    pool.start()
    try:
        for target in (dataset_id, again):
            fit_and_wait(idle_client, idle_keys, {"dataset_id": target, **FIT})
    finally:
        pool.stop()
        db.dispose()
    assert list(data_dir.iterdir()) == [] and not (tmp_path / "elsewhere").exists()
    # Deleting one of two datasets with equal content keeps the blob the other still uses.
    assert idle_client.delete(f"/v1/datasets/{dataset_id}", headers=idle_keys.owner).status_code == 204
    assert len(blob_keys(idle_client)) == 1
    assert idle_client.delete(f"/v1/datasets/{again}", headers=idle_keys.owner).status_code == 204
    assert blob_keys(idle_client) == []
