"""Dataset store backends (privfit.datasets.store): the local directory, the service database on SQLite and
PostgreSQL, and partitioned Parquet (privfit.datasets.parquet_store) on a local directory and on an S3-compatible
server (moto) — round trip, idempotent and concurrent puts, integrity check on read, delete, and the migration."""

from __future__ import annotations

import io
import threading
import traceback
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from sqlalchemy import func, inspect, select, update

from privfit.datasets import parse_and_encode
from privfit.datasets.parquet_store import ParquetDatasetStore, _partition_table
from privfit.datasets.schema import DatasetSchema
from privfit.datasets.store import (
    DatabaseDatasetStore,
    DatasetStore,
    DatasetStoreError,
    LocalDatasetStore,
    make_store,
)
from privfit.db import DatasetBlob, make_database
from privfit.db.migrate import alembic_config, check, downgrade, upgrade
from privfit.settings import Settings

SCHEMA = DatasetSchema.model_validate(
    {
        "label": {"name": "y", "type": "binary", "positive": "yes", "negative": "no"},
        "features": [
            {"name": "x", "type": "numeric", "lower": -1, "upper": 1},
            {"name": "color", "type": "categorical", "levels": ["red", "blue"]},
        ],
        "budget": {"epsilon": 1.0, "delta": 1e-6},
    }
)
# Known messages: the only things a DatasetStoreError may say (no values, no stored bytes).
MESSAGES = {
    "dataset data is not in the store (purged or never written)",
    "stored dataset does not match its content hash",
    "stored dataset is unreadable (not a valid dataset archive)",
    "malformed storage key",
}
SENTINEL = b"PRIVATE-ROW-0.8765"


def encoded(seed: int = 0, n: int = 200):
    rng = np.random.default_rng(seed)
    rows = [f"{rng.uniform(-1, 1):.6f},{rng.choice(['red', 'blue'])},{rng.choice(['yes', 'no'])}" for _ in range(n)]
    return parse_and_encode(("x,color,y\n" + "\n".join(rows) + "\n").encode(), SCHEMA)


BACKENDS = [("local", "sqlite"), ("database", "sqlite"), ("database", "postgresql"), ("parquet", "sqlite"),
            ("parquet-s3", "sqlite")]  # fmt: skip
#: The parquet stores' partitions here: 1 KiB of float64, a few rows each, so every dataset has several partitions.
PARTITION_BYTES = 1024


def store_settings(request: pytest.FixtureRequest, backend: str, url: str, tmp_path: Path) -> Settings:
    """The settings of a store of ``backend`` (BACKENDS) on the database ``url``: the parquet ones with small
    partitions, ``parquet-s3`` in a fresh bucket of the test S3 server."""
    options: dict = {"store": backend}
    if backend.startswith("parquet"):
        store_url = request.getfixturevalue("s3_bucket") + "/datasets" if backend == "parquet-s3" else None
        options = {"store": "parquet", "store_url": store_url, "store_partition_bytes": PARTITION_BYTES}
    return Settings(database_url=url, data_dir=tmp_path / "store", **options)


@pytest.fixture(params=BACKENDS, ids=[f"{backend}-{dialect}" for backend, dialect in BACKENDS])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DatasetStore]:
    """A store of each backend, built by make_store from the settings (the database one on each dialect)."""
    backend, dialect = request.param
    url = request.getfixturevalue(f"{dialect}_url")
    db = make_database(url, pool_size=16)
    made = make_store(store_settings(request, backend, url, tmp_path), db)
    kind = {"local": LocalDatasetStore, "database": DatabaseDatasetStore}.get(backend, ParquetDatasetStore)
    assert isinstance(made, kind)
    yield made
    db.dispose()


def stored_count(store: DatasetStore) -> int:
    if isinstance(store, LocalDatasetStore):
        assert not list(store.root.glob("*.tmp"))  # no temporary file left behind
        return len(list(store.root.glob("*.npz")))
    if isinstance(store, ParquetDatasetStore):
        assert not store.fs.glob(f"{store.root}/**/.partial-*")  # no temporary file left behind
        return len(store.stored_keys())
    with store.db.read() as session:
        return session.scalar(select(func.count()).select_from(DatasetBlob))


def overwrite(store: DatasetStore, key: str, blob: bytes) -> None:
    """Tamper with the stored bytes of ``key`` behind the store's back (for the parquet store: its first
    partition's file, as a valid partition of the archive's arrays if ``blob`` is one, else as the bytes)."""
    if isinstance(store, LocalDatasetStore):
        (store.root / f"{key}.npz").write_bytes(blob)
        return
    if isinstance(store, ParquetDatasetStore):
        first = store.manifest(key).partitions[0]
        try:
            with np.load(io.BytesIO(blob)) as arrays:
                rows = slice(0, first.rows)
                table = _partition_table([(arrays["X"][rows], arrays["y"][rows], None)])
            buffer = io.BytesIO()
            pq.write_table(table, buffer)
            blob = buffer.getvalue()
        except (ValueError, OSError, zipfile.BadZipFile):
            pass  # not an archive: the bytes as they are
        store.fs.pipe_file(f"{store.root}/{key}/{first.file}", blob)
        return
    with store.db.write() as session:
        assert session.execute(update(DatasetBlob).where(DatasetBlob.key == key).values(content=blob)).rowcount == 1


def assert_data_free(error: pytest.ExceptionInfo[DatasetStoreError]) -> None:
    """The message is one of the fixed ones and nothing in the printed traceback quotes stored bytes."""
    assert str(error.value) in MESSAGES
    printed = "".join(traceback.format_exception(error.value))
    assert SENTINEL.decode() not in printed and "0.8765" not in printed


def test_round_trip_returns_the_same_arrays(store):
    dataset = encoded()
    key = store.put(dataset)
    assert len(key) == 64
    X, y = store.get(key)
    np.testing.assert_array_equal(X, dataset.X)
    np.testing.assert_array_equal(y, dataset.y)
    assert X.dtype == y.dtype == np.float64 and X.shape == dataset.X.shape


def test_put_is_idempotent_and_distinct_content_gets_distinct_keys(store):
    first = store.put(encoded(0))
    assert store.put(encoded(0)) == first
    assert stored_count(store) == 1
    second = store.put(encoded(1))
    assert second != first and stored_count(store) == 2


def test_database_row_records_its_size(database):
    store = DatabaseDatasetStore(database)
    key = store.put(encoded())
    with store.db.read() as session:
        row = session.get(DatasetBlob, key)
        assert row.size == len(row.content) > 0 and row.created_at is not None


def test_get_of_a_missing_key_is_a_store_error(store):
    with pytest.raises(DatasetStoreError) as error:
        store.get("0" * 64)
    assert str(error.value) == "dataset data is not in the store (purged or never written)"
    with pytest.raises(DatasetStoreError, match="malformed storage key"):
        store.get("../../etc/passwd")


def test_tampered_content_is_refused_without_quoting_it(store):
    key = store.put(encoded(0))
    other = encoded(1)
    buffer = io.BytesIO()  # a valid archive, of different (and marked) content
    np.savez(buffer, X=np.full_like(other.X, 0.8765), y=other.y)
    overwrite(store, key, buffer.getvalue())
    with pytest.raises(DatasetStoreError) as error:
        store.get(key)
    assert str(error.value) == "stored dataset does not match its content hash"
    assert_data_free(error)


def test_corrupted_bytes_are_refused_without_quoting_them(store):
    key = store.put(encoded(0))
    overwrite(store, key, b"PK\x03\x04" + SENTINEL * 20)  # zip magic then garbage
    with pytest.raises(DatasetStoreError) as error:
        store.get(key)
    assert str(error.value) == "stored dataset is unreadable (not a valid dataset archive)"
    assert_data_free(error)
    overwrite(store, key, SENTINEL)  # not even a zip: numpy's own error would quote the bytes
    with pytest.raises(DatasetStoreError) as error:
        store.get(key)
    assert_data_free(error)


def test_delete_purges_only_that_key_and_is_idempotent(store):
    kept, purged = store.put(encoded(0)), store.put(encoded(1))
    store.delete(purged)
    store.delete(purged)
    assert stored_count(store) == 1
    with pytest.raises(DatasetStoreError, match="not in the store"):
        store.get(purged)
    np.testing.assert_array_equal(store.get(kept)[0], encoded(0).X)
    assert store.put(encoded(1)) == purged  # and it can be stored again
    np.testing.assert_array_equal(store.get(purged)[1], encoded(1).y)


@pytest.mark.parametrize("skip_fast_path", [False, True], ids=["put", "save-race"])
def test_concurrent_puts_of_the_same_content_all_succeed(store, monkeypatch, skip_fast_path):
    """Threads put equal content at once; with ``skip_fast_path`` every put reaches the insert, so the unique
    key race itself is exercised (on PostgreSQL: concurrent INSERTs of one primary key)."""
    if skip_fast_path:
        monkeypatch.setattr(store, "_contains", lambda key: False)
    dataset = encoded(3, n=2000)
    barrier = threading.Barrier(8)
    keys: list[str] = []
    errors: list[BaseException] = []

    def put() -> None:
        try:
            barrier.wait()
            keys.append(store.put(dataset))
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=put) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert len(keys) == 8 and len(set(keys)) == 1
    assert stored_count(store) == 1
    np.testing.assert_array_equal(store.get(keys[0])[0], dataset.X)


def test_local_store_is_the_default_and_the_environment_selects_the_database(monkeypatch, tmp_path):
    monkeypatch.delenv("PRIVFIT_STORE", raising=False)
    assert Settings().store == "local"
    monkeypatch.setenv("PRIVFIT_STORE", "database")
    assert Settings().store == "database"
    monkeypatch.setenv("PRIVFIT_STORE", "s3")
    with pytest.raises(ValueError, match="store"):
        Settings()


def test_database_store_needs_no_data_dir(sqlite_url, tmp_path):
    db = make_database(sqlite_url)
    try:
        store = make_store(Settings(database_url=sqlite_url, data_dir=tmp_path / "absent", store="database"), db)
        store.get(store.put(encoded()))
    finally:
        db.dispose()
    assert not (tmp_path / "absent").exists()


def test_dataset_blobs_migration_downgrades_and_upgrades(database_url):
    from alembic.script import ScriptDirectory

    revision = next(
        script
        for script in ScriptDirectory.from_config(alembic_config(database_url)).walk_revisions()
        if "dataset_blobs" in (script.doc or "")
    )
    db = make_database(database_url, pool_size=1)
    try:
        assert "dataset_blobs" in inspect(db.engine).get_table_names()
        downgrade(database_url, str(revision.down_revision))
        assert "dataset_blobs" not in inspect(db.engine).get_table_names()
        upgrade(database_url)
        assert "dataset_blobs" in inspect(db.engine).get_table_names()
        check(database_url)
        store = DatabaseDatasetStore(db)
        np.testing.assert_array_equal(store.get(store.put(encoded()))[0], encoded().X)
    finally:
        db.dispose()
