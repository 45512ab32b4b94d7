"""The partitioned Parquet store (privfit.datasets.parquet_store; issue 39) beyond what every backend shares
(tests/datasets/test_store_backends.py, test_dataset_lifecycle.py run on it, locally and on S3): the partitions and
their public size rule, the hash-tree key (content only, the same on any filesystem), each partition checked on its
own, a tampered or incomplete manifest refused, interrupted writes invisible and swept after the grace."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import numpy as np
import pytest
from test_store_backends import MESSAGES, encoded

from privfit.datasets.parquet_store import MANIFEST, Manifest, ParquetDatasetStore, rows_per_partition
from privfit.datasets.store import DatasetStoreError, LocalDatasetStore

PARTITION_BYTES = 1024  # rows of d = 3 encoded columns (x, two one-hot levels): 1024 / (8 · 4) = 32 per partition


def stores(tmp_path: Path, s3_bucket: str | None = None) -> list[ParquetDatasetStore]:
    made = [ParquetDatasetStore(str(tmp_path / "parquet"), partition_bytes=PARTITION_BYTES)]
    if s3_bucket is not None:
        made.append(ParquetDatasetStore(f"{s3_bucket}/datasets", partition_bytes=PARTITION_BYTES))
    return made


def test_partitions_follow_the_public_size_rule_and_round_trip_units(tmp_path: Path):
    assert rows_per_partition(3, PARTITION_BYTES) == 32 and rows_per_partition(10**6, 1024) == 1
    assert rows_per_partition(50) == 64 * 1024**2 // (8 * 51)
    dataset = encoded(0, n=100)
    assert dataset.X.shape == (100, 3)
    store = stores(tmp_path)[0]
    key = store.put(dataset)
    manifest = store.manifest(key)
    assert [p.rows for p in manifest.partitions] == [32, 32, 32, 4] and manifest.n == 100 and manifest.d == 3
    assert [p.file for p in manifest.partitions] == [f"part-{i:05d}.parquet" for i in range(4)]
    parts = [store.read_partition(key, manifest, i) for i in range(4)]
    np.testing.assert_array_equal(np.concatenate([p.X for p in parts]), dataset.X)
    np.testing.assert_array_equal(np.concatenate([p.y for p in parts]), dataset.y)
    # a user-level dataset keeps each row's unit; it is another content, so another key
    units = np.arange(100, dtype=np.int64) // 3
    with_units = dataclasses.replace(dataset, units=units)
    unit_key = store.put(with_units)
    assert unit_key != key and store.manifest(unit_key).units
    X, y, read_units = store.read(unit_key)
    np.testing.assert_array_equal(read_units, units)
    np.testing.assert_array_equal(X, dataset.X)
    np.testing.assert_array_equal(y, dataset.y)


def test_partitions_are_plain_columns_and_the_earlier_list_layout_still_reads(tmp_path: Path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    store = stores(tmp_path)[0]
    dataset = encoded(2, n=40)
    key = store.put(dataset)
    manifest = store.manifest(key)
    first = tmp_path / "parquet" / key / manifest.partitions[0].file
    metadata = pq.ParquetFile(first).metadata
    assert pq.read_schema(first).names == ["x0", "x1", "x2", "y"]
    chunk = metadata.row_group(0).column(0)
    assert "PLAIN_DICTIONARY" not in chunk.encodings and "RLE_DICTIONARY" not in chunk.encodings
    # a partition of the earlier layout (one column of fixed-size lists) decodes to the same rows and hash
    rows = dataset.X[:32]
    flat = pa.FixedSizeListArray.from_arrays(pa.array(np.ascontiguousarray(rows).reshape(-1)), 3)
    pq.write_table(pa.table({"x": flat, "y": pa.array(dataset.y[:32])}), first)
    part = store.read_partition(key, manifest, 0)
    np.testing.assert_array_equal(part.X, rows)
    out = np.full((32, 5), -1.0)  # decoding into a wider buffer fills its first d columns only
    assert np.shares_memory(store.read_partition(key, manifest, 0, out=out).X, out)
    np.testing.assert_array_equal(out[:, :3], rows)
    assert np.all(out[:, 3:] == -1.0)
    np.testing.assert_array_equal(store.read(key).X, dataset.X)


def test_the_key_depends_on_the_content_and_partition_size_only(tmp_path: Path, s3_bucket: str):
    local, remote = stores(tmp_path, s3_bucket)
    dataset = encoded(1, n=70)
    key = local.put(dataset)
    assert remote.put(dataset) == key == local.key_of(dataset)  # the same on a directory and on S3
    assert remote.manifest(key) == local.manifest(key)
    bigger = ParquetDatasetStore(str(tmp_path / "big"))  # 64 MiB partitions: one partition, another tree
    assert bigger.put(dataset) != key and len(bigger.manifest(bigger.key_of(dataset)).partitions) == 1
    assert LocalDatasetStore(tmp_path / "npz").key_of(dataset) != key  # the npz store hashes the whole matrix
    with pytest.raises(DatasetStoreError, match="does not match its content hash"):
        local.put(dataset, key="0" * 64)  # a wrong key given by the caller is refused before anything is written


def test_each_partition_is_checked_on_its_own(tmp_path: Path, s3_bucket: str):
    for store in stores(tmp_path, s3_bucket):
        key = store.put(encoded(2, n=100))
        manifest = store.manifest(key)
        other = ParquetDatasetStore(str(tmp_path / "other"), partition_bytes=PARTITION_BYTES)
        other_key = other.put(encoded(3, n=100))
        foreign = other.fs.cat_file(f"{other.root}/{other_key}/part-00002.parquet")
        store.fs.pipe_file(f"{store.root}/{key}/part-00002.parquet", foreign)  # a valid partition of other rows
        assert store.read_partition(key, manifest, 1).X.shape == (32, 3)  # the others still read
        with pytest.raises(DatasetStoreError, match="does not match its content hash"):
            store.read_partition(key, manifest, 2)
        with pytest.raises(DatasetStoreError, match="does not match its content hash"):
            store.read(key)
        store.fs.rm_file(f"{store.root}/{key}/part-00003.parquet")
        with pytest.raises(DatasetStoreError, match="not in the store"):
            store.read_partition(key, manifest, 3)


def test_a_partition_read_again_unchanged_is_not_hashed_again_and_any_change_is(tmp_path: Path, monkeypatch):
    """VerifiedFiles: a local partition checked once and unchanged since (the same inode, size, mtime and ctime
    before and after the read) is not hashed again; a partition rewritten in place, replaced by another file, or
    written within the last STABLE_SECONDS (a coarse clock tick could hide a later write) is hashed at every read."""
    import privfit.datasets.parquet_store as parquet_store

    hashed: list[int] = []
    real_hash = parquet_store.partition_hash
    monkeypatch.setattr(parquet_store, "partition_hash", lambda X, y, u: hashed.append(1) or real_hash(X, y, u))
    store = stores(tmp_path)[0]
    key = store.put(encoded(2, n=100))
    manifest = store.manifest(key)
    path = f"{store.root}/{key}/part-00001.parquet"
    other = ParquetDatasetStore(str(tmp_path / "other"), partition_bytes=PARTITION_BYTES)
    other_key = other.put(encoded(3, n=100))
    foreign = Path(f"{other.root}/{other_key}/part-00001.parquet").read_bytes()
    hashed.clear()
    verified = parquet_store.VerifiedFiles()
    for _ in range(3):  # just written: within STABLE_SECONDS, checked at every read
        store.read_partition(key, manifest, 1, verified=verified)
    assert len(hashed) == 3
    monkeypatch.setattr(parquet_store.VerifiedFiles, "STABLE_SECONDS", 0.0)
    first = store.read_partition(key, manifest, 1, verified=verified)
    again = store.read_partition(key, manifest, 1, verified=verified)
    assert len(hashed) == 4  # checked once, then read without hashing: the same rows
    np.testing.assert_array_equal(again.X, first.X)
    np.testing.assert_array_equal(again.y, first.y)
    time.sleep(0.05)  # past the kernel's coarse timestamp tick (≤ 10 ms): the write below gets a later ctime
    with open(path, "r+b") as handle:  # rewritten in place: the same inode, a new ctime
        handle.write(foreign)
        handle.truncate()
    with pytest.raises(DatasetStoreError, match="does not match its content hash"):
        store.read_partition(key, manifest, 1, verified=verified)
    store.fs.pipe_file(path, foreign)  # replaced whole
    with pytest.raises(DatasetStoreError, match="does not match its content hash"):
        store.read_partition(key, manifest, 1, verified=verified)
    assert len(hashed) == 6
    verified.clear()


@pytest.mark.parametrize(
    "edit",
    [
        lambda m: {**m, "n": m["n"] - 1, "partitions": [*m["partitions"][:-1], {**m["partitions"][-1], "rows": 3}]},
        lambda m: {**m, "partitions": [m["partitions"][1], m["partitions"][0], *m["partitions"][2:]]},
        lambda m: {**m, "partitions": m["partitions"][:-1], "n": m["n"] - m["partitions"][-1]["rows"]},
        lambda m: {**m, "partitions": [{**p, "file": "../../elsewhere.parquet"} for p in m["partitions"]]},
        lambda m: {**m, "n": m["n"] + 1},
        lambda m: {**m, "format": "something-else"},
    ],
    ids=["rows", "reordered", "dropped", "path", "sum", "format"],
)
def test_a_manifest_that_does_not_hash_to_its_key_is_refused(tmp_path: Path, edit):
    store = stores(tmp_path)[0]
    key = store.put(encoded(4, n=100))
    path = f"{store.root}/{key}/{MANIFEST}"
    store.fs.pipe_file(path, json.dumps(edit(json.loads(store.fs.cat_file(path)))).encode())
    with pytest.raises(DatasetStoreError) as error:
        store.read(key)
    assert (
        str(error.value) in MESSAGES
        and str(error.value) != "dataset data is not in the store (purged or never written)"
    )


def test_an_interrupted_write_is_invisible_and_swept_after_the_grace(tmp_path: Path, s3_bucket: str,
                                                                    monkeypatch: pytest.MonkeyPatch):  # fmt: skip
    for store in stores(tmp_path, s3_bucket):
        dataset = encoded(5, n=100)
        key = store.key_of(dataset)

        def crash_at_the_manifest(path: str, data: bytes | memoryview, write=store._write_file) -> None:
            if path.endswith(MANIFEST):
                raise OSError("the process died before the manifest")
            write(path, data)

        monkeypatch.setattr(store, "_write_file", crash_at_the_manifest)
        with pytest.raises(OSError):
            store.put(dataset)
        monkeypatch.undo()
        assert store.fs.exists(f"{store.root}/{key}/part-00000.parquet")  # partitions written …
        assert key not in store.stored_keys()  # … but no dataset: its manifest is the commit point
        with pytest.raises(DatasetStoreError, match="not in the store"):
            store.read(key)
        assert store.remove_partial(3600) == 0  # younger than the grace: an upload may still be writing it
        time.sleep(1.1)  # S3's modification times have a resolution of one second
        assert store.remove_partial(1) == 1 and not store.fs.exists(f"{store.root}/{key}")
        assert store.put(dataset) == key and store.stored_keys() == [key]  # written again, whole


def test_a_manifest_is_parsed_strictly():
    with pytest.raises(DatasetStoreError, match="unreadable"):
        Manifest.from_json(b"not json")
    with pytest.raises(DatasetStoreError, match="unreadable"):
        Manifest.from_json(json.dumps({"format": "privfit-parquet-v1", "n": 1}).encode())


def test_a_dataset_written_in_blocks_is_the_dataset_put_whole(tmp_path: Path, s3_bucket: str):
    """PartitionWriter: blocks of any size, one partition in memory at a time, give the same key, manifest and
    files as ``put`` of the whole matrix — with units too; content already stored is not written again."""
    rng = np.random.default_rng(8)
    dataset = dataclasses.replace(encoded(6, n=203), units=np.arange(203, dtype=np.int64) // 4)
    for store in stores(tmp_path, s3_bucket):
        with store.writer(3, units=True) as writer:
            start = 0
            while start < 203:
                stop = min(203, start + int(rng.integers(1, 70)))
                writer.write(dataset.X[start:stop], dataset.y[start:stop], dataset.units[start:stop])
                start = stop
            assert len(writer._blocks) <= 2 and writer._buffered < writer.rows_per_partition  # bounded buffer
            key = writer.finish()
        assert key == store.key_of(dataset) and store.stored_keys() == [key]
        X, y, units = store.read(key)
        np.testing.assert_array_equal(X, dataset.X)
        np.testing.assert_array_equal(units, dataset.units)
        assert not store.fs.glob(f"{store.root}/.staging-*")  # the staging directory is gone
        with store.writer(3, units=True) as again:  # the same content once more: nothing moved, nothing left
            again.write(dataset.X, dataset.y, dataset.units)
            assert again.finish() == key
        assert not store.fs.glob(f"{store.root}/.staging-*") and store.stored_keys() == [key]
        np.testing.assert_array_equal(y, dataset.y)


def test_a_failed_or_crashed_block_write_leaves_nothing_visible(tmp_path: Path):
    store = stores(tmp_path)[0]
    dataset = encoded(7, n=100)
    with pytest.raises(ValueError, match="d columns"), store.writer(3) as writer:
        writer.write(dataset.X, dataset.y)
        writer.write(dataset.X[:, :2], dataset.y)  # a block of the wrong shape: the write is abandoned
    assert not store.fs.glob(f"{store.root}/.staging-*") and store.stored_keys() == []
    crashed = store.writer(3)
    crashed.write(dataset.X, dataset.y)  # partitions in staging, then the process dies (no finish, no abort)
    assert store.fs.glob(f"{store.root}/.staging-*") and store.stored_keys() == []
    assert store.remove_partial(3600) == 0
    time.sleep(1.1)
    assert store.remove_partial(1) == 1 and not store.fs.glob(f"{store.root}/.staging-*")
