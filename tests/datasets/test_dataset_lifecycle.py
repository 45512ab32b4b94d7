"""privfit.datasets.lifecycle on both stores and dialects: pending uploads, reference counting, the orphan sweep,
store identity — and migration 0006."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import create_engine, inspect, select, text
from test_store_backends import BACKENDS, encoded, store_settings, stored_count

from privfit.datasets.lifecycle import (
    DuplicateDatasetError,
    StoreMismatchError,
    abandon_upload,
    begin_upload,
    check_store,
    finish_upload,
    release_key,
    store_mismatch,
    sweep_orphans,
)
from privfit.datasets.store import DatabaseDatasetStore, DatasetStore, LocalDatasetStore, make_store
from privfit.db import Database, Dataset, make_database
from privfit.db.migrate import check, downgrade, upgrade
from privfit.db.models import DatasetUpload, utcnow


@pytest.fixture(params=BACKENDS, ids=[f"{backend}-{dialect}" for backend, dialect in BACKENDS])
def stored(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Database, DatasetStore]]:
    backend, dialect = request.param
    url = request.getfixturevalue(f"{dialect}_url")
    db = make_database(url, pool_size=4)
    yield db, make_store(store_settings(request, backend, url, tmp_path), db)
    db.dispose()


def owner(db: Database) -> str:
    from privfit.api.auth import create_api_key

    return create_api_key(db, "owner")[0]


def live_dataset(db: Database, owner_id: str, key: str | None, store_id: str | None = None) -> str:
    dataset_id = str(uuid.uuid4())
    with db.write() as session:
        session.add(Dataset(id=dataset_id, owner_key_id=owner_id, name="d", schema_json={}, feature_names=["x"], n=1,
                            d=1, row_norm_bound=1.0, label_bound=1.0, content_hash="0" * 64, storage_key=key,
                            store_id=store_id))  # fmt: skip
    return dataset_id


def test_a_pending_upload_protects_its_data_until_it_is_registered_or_abandoned(stored):
    db, store = stored
    data = encoded()
    key = store.key_of(data)
    begin_upload(db, "u1", key, owner_key_id=owner(db), allow_duplicate=False)
    assert store.put(data) == key
    assert not release_key(db, store, key)  # referenced by the pending upload
    assert sweep_orphans(db, store, grace_seconds=60).empty  # young: an upload in progress
    abandon_upload(db, store, "u1", key)
    assert stored_count(store) == 0


def test_the_sweep_removes_stale_uploads_and_unreferenced_data_and_keeps_live_data(stored):
    db, store = stored
    owner_id = owner(db)
    live, stale, orphan = encoded(1), encoded(2), encoded(3)
    live_id = live_dataset(db, owner_id, store.put(live))
    begin_upload(db, "stale", store.key_of(stale), owner_key_id=owner_id, allow_duplicate=False)
    store.put(stale)
    store.put(orphan)
    report = sweep_orphans(db, store, grace_seconds=60, now=utcnow() + timedelta(seconds=120))
    assert report.abandoned_uploads == ["stale"]
    assert sorted(report.purged_keys) == sorted([store.key_of(stale), store.key_of(orphan)])
    assert stored_count(store) == 1
    with db.read() as session:
        assert session.get(Dataset, live_id).storage_key == store.key_of(live)
        assert session.scalars(select(DatasetUpload)).all() == []
    np.testing.assert_array_equal(store.get(store.key_of(live))[0], live.X)
    with db.write() as session:  # the swept upload cannot register any more
        assert not finish_upload(session, "stale", store.key_of(stale))


def test_a_duplicate_of_a_live_dataset_of_the_same_owner_is_refused(stored):
    db, store = stored
    owner_id, other = owner(db), owner(db)
    key = store.key_of(encoded())
    existing = live_dataset(db, owner_id, key)
    with pytest.raises(DuplicateDatasetError) as refused:
        begin_upload(db, "dup", key, owner_key_id=owner_id, allow_duplicate=False)
    assert refused.value.existing_id == existing
    begin_upload(db, "dup", key, owner_key_id=owner_id, allow_duplicate=True)
    begin_upload(db, "theirs", key, owner_key_id=other, allow_duplicate=False)
    with db.read() as session:
        assert sorted(session.scalars(select(DatasetUpload.id))) == ["dup", "theirs"]


def test_partial_files_are_removed_once_older_than_the_grace_period(tmp_path: Path):
    store = LocalDatasetStore(tmp_path / "store")
    old, young = store.root / "old.tmp", store.root / "young.tmp"
    old.write_bytes(b"half")
    young.write_bytes(b"half")
    os.utime(old, (time.time() - 120, time.time() - 120))
    assert store.remove_partial(60) == 1
    assert not old.exists() and young.exists()


def test_a_local_store_gets_its_identity_with_its_first_matrix_and_keeps_it(tmp_path: Path):
    store = LocalDatasetStore(tmp_path / "store")
    assert store.identity == "local:unmarked" and list(store.root.iterdir()) == []
    store.put(encoded())
    identity = store.identity
    assert identity.startswith("local:") and identity != "local:unmarked"
    assert LocalDatasetStore(tmp_path / "store").identity == identity  # read back by another process
    assert LocalDatasetStore(tmp_path / "other").identity != identity
    assert DatabaseDatasetStore(None).identity == "database"  # type: ignore[arg-type]


def test_a_process_on_another_store_is_refused_at_start_up_and_at_claim(sqlite_url: str, tmp_path: Path):
    db = make_database(sqlite_url)
    try:
        here, there = LocalDatasetStore(tmp_path / "here"), LocalDatasetStore(tmp_path / "there")
        check_store(db, there)  # no dataset yet: nothing to compare with
        here.put(encoded())
        owner_id = owner(db)
        live_dataset(db, owner_id, here.key_of(encoded()), here.identity)
        live_dataset(db, owner_id, None, None)  # registered before revision 0006: not counted
        check_store(db, here)
        for wrong in (there, DatabaseDatasetStore(db)):
            with pytest.raises(StoreMismatchError, match="dataset store mismatch"):
                check_store(db, wrong)
            message = store_mismatch(here.identity, wrong)
            assert message is not None and "PRIVFIT_DATA_DIR" in message
        assert store_mismatch(here.identity, here) is None and store_mismatch(None, there) is None
    finally:
        db.dispose()


def test_migration_0006_adds_pending_uploads_and_store_ids_and_downgrades(empty_database_url: str):
    url = empty_database_url
    upgrade(url, "0005")
    engine = create_engine(url)
    key_id, dataset_id = str(uuid.uuid4()), str(uuid.uuid4())
    with engine.begin() as connection:
        connection.execute(
            text("INSERT INTO api_keys (id, prefix, secret_hash, role, name, created_at) "
                 "VALUES (:id, :prefix, :hash, 'owner', 'o', CURRENT_TIMESTAMP)"),
            {"id": key_id, "prefix": key_id[:12], "hash": uuid.uuid4().hex * 2},
        )  # fmt: skip
        connection.execute(
            text("INSERT INTO datasets (id, owner_key_id, name, schema_json, feature_names, n, d, row_norm_bound, "
                 "label_bound, content_hash, storage_key, created_at) VALUES (:id, :key, 'd', '{}', '[\"x\"]', 1, 1, "
                 "1.0, 1.0, :hash, :hash, CURRENT_TIMESTAMP)"),
            {"id": dataset_id, "key": key_id, "hash": "a" * 64},
        )  # fmt: skip
    engine.dispose()
    upgrade(url)
    check(url)
    db = make_database(url, pool_size=1)
    try:
        assert "dataset_uploads" in inspect(db.engine).get_table_names()
        with db.read() as session:
            dataset = session.get(Dataset, dataset_id)
            assert (dataset.storage_key, dataset.store_id) == ("a" * 64, None)  # an old dataset: not checked
        downgrade(url, "0005")
        inspector = inspect(db.engine)
        assert "dataset_uploads" not in inspector.get_table_names()
        assert "store_id" not in {column["name"] for column in inspector.get_columns("datasets")}
        upgrade(url)
        check(url)
        with db.read() as session:
            assert session.get(Dataset, dataset_id).storage_key == "a" * 64
    finally:
        db.dispose()
