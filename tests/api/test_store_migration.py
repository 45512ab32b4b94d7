"""``privfit store migrate`` (privfit.datasets.store_migration; issue 39): the live datasets of a running deployment
— one with a validation split, one deleted, one fitted — move from the local directory or the database into
partitioned Parquet; the service then starts on the new store and fits and evaluates them with their budgets as they
were; the old store is emptied; a re-run does nothing; a crash between the copy and the switch is finished by the
next run and leaves nothing behind; a corrupted blob is reported and left where it was."""

from __future__ import annotations

from pathlib import Path

import pytest
from api_helpers import SMALL_SCHEMA, make_client, make_keys, upload, wait_for
from sqlalchemy import select

from privfit import cli
from privfit.datasets import store_migration
from privfit.datasets.lifecycle import check_store
from privfit.datasets.parquet_store import ParquetDatasetStore
from privfit.db import Dataset, make_database
from privfit.settings import get_settings

FIT = {"model": "logistic", "solver": "dp_gd", "privacy": {"epsilon": 0.3}}
SPLIT_SCHEMA = {**SMALL_SCHEMA, "validation_fraction": 0.25}


def deployment(database_url: str, tmp_path: Path, source: str) -> dict:
    """Three datasets on the ``source`` store (one with a validation split, one then deleted), a fit on the first."""
    with make_client(database_url, tmp_path, store=source) as client:
        keys = make_keys(client)
        plain, split, deleted = upload(client, keys), upload(client, keys, schema=SPLIT_SCHEMA), upload(client, keys)
        fit = client.post("/v1/fits", headers=keys.analyst, json={**FIT, "dataset_id": plain}).json()["id"]
        assert wait_for(client, fit, keys.analyst)["status"] == "succeeded"
        assert client.delete(f"/v1/datasets/{deleted}", headers=keys.owner).status_code == 204
        budgets = {d: client.get(f"/v1/datasets/{d}/budget", headers=keys.owner).json() for d in (plain, split)}
    return {"keys": keys, "plain": plain, "split": split, "deleted": deleted, "budgets": budgets}


def migrate(monkeypatch: pytest.MonkeyPatch, database_url: str, tmp_path: Path, source: str) -> int:
    """``privfit store migrate --from source`` with the settings of the parquet store under ``tmp_path``."""
    for name, value in {"PRIVFIT_DATABASE_URL": database_url, "PRIVFIT_DATA_DIR": str(tmp_path / "store"),
                        "PRIVFIT_STORE": "parquet", "PRIVFIT_STORE_URL": str(tmp_path / "parquet"),
                        "PRIVFIT_STORE_PARTITION_BYTES": "8192"}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    try:
        return cli.main(["store", "migrate", "--from", source])
    finally:
        get_settings.cache_clear()


@pytest.mark.parametrize("source", ["local", "database"])
def test_live_datasets_move_and_the_service_runs_on_the_new_store(database_url: str, tmp_path: Path, source: str,
                                                                 monkeypatch: pytest.MonkeyPatch, capsys):  # fmt: skip
    before = deployment(database_url, tmp_path, source)
    assert migrate(monkeypatch, database_url, tmp_path, source) == 0
    assert capsys.readouterr().out.startswith("2 datasets moved to parquet:")
    parquet = ParquetDatasetStore(str(tmp_path / "parquet"), partition_bytes=8192)
    db = make_database(database_url)
    try:
        check_store(db, parquet)  # every live dataset is in the new store
        with db.read() as session:
            rows = {d.id: d for d in session.scalars(select(Dataset))}
        live = {rows[before["plain"]].storage_key, rows[before["split"]].storage_key,
                rows[before["split"]].validation_storage_key}  # fmt: skip
        assert set(parquet.stored_keys()) == live and None not in live
        assert {rows[d].store_id for d in (before["plain"], before["split"])} == {parquet.identity}
        assert rows[before["deleted"]].storage_key is None and rows[before["deleted"]].store_id != parquet.identity
    finally:
        db.dispose()
    if source == "local":
        assert not list((tmp_path / "store").glob("*.npz"))  # the old store is empty
    assert migrate(monkeypatch, database_url, tmp_path, source) == 0  # a re-run moves nothing
    assert capsys.readouterr().out.startswith("0 datasets moved")
    keys = before["keys"]
    with make_client(database_url, tmp_path, store="parquet", store_url=str(tmp_path / "parquet"),
                     store_partition_bytes=8192) as client:  # fmt: skip
        for dataset in (before["plain"], before["split"]):
            assert client.get(f"/v1/datasets/{dataset}/budget", headers=keys.owner).json() == before["budgets"][dataset]
            fit = client.post("/v1/fits", headers=keys.analyst, json={**FIT, "dataset_id": dataset}).json()["id"]
            assert wait_for(client, fit, keys.analyst)["status"] == "succeeded"
        evaluation = client.post(f"/v1/fits/{fit}/evaluate", headers=keys.analyst,
                                 json={"privacy": {"epsilon": 0.2}, "metrics": ["accuracy"]})  # fmt: skip
        assert evaluation.status_code == 201 and evaluation.json()["results"][0]["value"] > 0.8, evaluation.text


def test_a_crash_between_copy_and_switch_is_finished_by_the_next_run(sqlite_url: str, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch):  # fmt: skip
    before = deployment(sqlite_url, tmp_path, "local")
    switch = store_migration._repoint

    def crash_after_the_first(*args, **kwargs):
        if switch(*args, **kwargs):
            raise KeyboardInterrupt("the process died after switching one dataset")
        return False

    monkeypatch.setattr(store_migration, "_repoint", crash_after_the_first)
    with pytest.raises(KeyboardInterrupt):
        migrate(monkeypatch, sqlite_url, tmp_path, "local")
    monkeypatch.setattr(store_migration, "_repoint", switch)
    assert len(list((tmp_path / "store").glob("*.npz"))) >= 2  # the switched dataset's old blob was not released
    assert migrate(monkeypatch, sqlite_url, tmp_path, "local") == 0
    assert not list((tmp_path / "store").glob("*.npz"))  # the next run moved the rest and released every old key
    parquet = ParquetDatasetStore(str(tmp_path / "parquet"), partition_bytes=8192)
    db = make_database(sqlite_url)
    try:
        with db.read() as session:
            live = session.scalars(select(Dataset).where(Dataset.id.in_([before["plain"], before["split"]])))
            keys = {k for d in live for k in (d.storage_key, d.validation_storage_key) if k}
        assert set(parquet.stored_keys()) == keys and len(keys) == 3
    finally:
        db.dispose()


def test_a_corrupted_blob_is_reported_and_left_where_it_was(sqlite_url: str, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch, capsys):  # fmt: skip
    before = deployment(sqlite_url, tmp_path, "local")
    db = make_database(sqlite_url)
    with db.read() as session:
        key = session.get_one(Dataset, before["plain"]).storage_key
    db.dispose()
    (tmp_path / "store" / f"{key}.npz").write_bytes(b"not an archive")
    assert migrate(monkeypatch, sqlite_url, tmp_path, "local") == 1
    captured = capsys.readouterr()
    assert captured.out.startswith("1 datasets moved")
    assert f"dataset {before['plain']} left in the source: stored dataset is unreadable" in captured.err
    assert (tmp_path / "store" / f"{key}.npz").exists()
