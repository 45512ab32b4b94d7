"""Uploads encoded straight into the parquet store's partitions (privfit.datasets.partitioned_upload; issue 39): the
stored rows are those the in-memory upload encodes, bit for bit, for CSV and Parquet; with private preprocessing the
release is the in-memory one — the same exact counts, the same noise for the same generator, the same derived
schema, the same re-encoded rows and the same charge — so the mechanism is unchanged; the content hash does not
depend on how the rows were cut into batches; a refusal or an error leaves nothing in the store."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest

from privfit.datasets import DatasetSchema, encode_parquet
from privfit.datasets.columnar import encode_csv_upload
from privfit.datasets.encoding import DatasetTooLargeError, DatasetValidationError
from privfit.datasets.parquet_store import ParquetDatasetStore
from privfit.datasets.partitioned_upload import encode_into_partitions, partitioned_content_hash
from privfit.datasets.preprocessing import preprocess
from privfit.privacy import DEFAULT_GRID, PrivacyFilter

FILTER = PrivacyFilter.for_budget(1.0, 1e-6, DEFAULT_GRID)
#: Wide, codebook-style bounds (the data fills a small part): preprocessing derives clip ranges and a log.
SCHEMA: dict[str, Any] = {
    "label": {"name": "y", "type": "binary", "positive": "yes", "negative": "no"},
    "features": [
        {"name": "age", "type": "numeric", "lower": 0, "upper": 120},
        {"name": "amount", "type": "numeric", "lower": 0, "upper": 1_000_000},
        {"name": "color", "type": "categorical", "levels": ["red", "green", "blue"]},
    ],
    "missing": "reject",
    "budget": {"epsilon": 1.0, "delta": 1e-6},
}


def _csv(n: int = 6000, seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 70, n)
    amount = np.round(rng.lognormal(6.0, 1.0, n), 2)
    colors = rng.choice(["red", "green", "blue"], n)
    label = np.where(age / 50 + np.log1p(amount) / 8 + rng.normal(0, 0.3, n) > 1.9, "yes", "no")
    lines = ["age,amount,color,y"] + [f"{a},{m},{c},{y}" for a, m, c, y in zip(age, amount, colors, label, strict=True)]
    return ("\n".join(lines) + "\n").encode()


def _parquet(csv: bytes, row_group_size: int = 700) -> bytes:
    table = pa_csv.read_csv(io.BytesIO(csv), convert_options=pa_csv.ConvertOptions(strings_can_be_null=False))
    out = io.BytesIO()
    pq.write_table(table, out, row_group_size=row_group_size)
    return out.getvalue()


def _store(tmp_path: Path) -> ParquetDatasetStore:
    return ParquetDatasetStore(str(tmp_path / "parquet"), partition_bytes=16 * 1024)  # 341 rows of d = 5


def _stored(store: ParquetDatasetStore, key: str) -> tuple[np.ndarray, np.ndarray]:
    X, y, _ = store.read(key)
    return X, y


def _leftovers(store: ParquetDatasetStore) -> list[str]:
    return [name for name in store._children() if not name.startswith(".privfit-store-id")]


@pytest.mark.parametrize("parquet", [False, True], ids=["csv", "parquet"])
def test_stored_rows_are_the_in_memory_encoding_bit_for_bit(tmp_path: Path, parquet: bool):
    schema = DatasetSchema.model_validate({**SCHEMA, "preprocessing": "none"})
    data = _csv()
    source = _parquet(data) if parquet else data
    expected = encode_parquet(source, schema) if parquet else encode_csv_upload(io.BytesIO(data), schema)
    store = _store(tmp_path)
    upload = encode_into_partitions(io.BytesIO(source), schema, store, FILTER, np.random.default_rng(0),
                                    parquet=parquet, max_stored_bytes=1 << 30)  # fmt: skip
    assert upload.preprocessing is None and upload.schema == schema
    assert (upload.n, upload.d) == (6000, 5) and len(upload.manifest.partitions) == 18
    assert upload.content_hash == partitioned_content_hash(schema, expected.X, expected.y)
    key = upload.finish()
    assert key == upload.storage_key == store.key_of(expected)  # the key in-memory storage would give
    X, y = _stored(store, key)
    np.testing.assert_array_equal(X, expected.X)
    np.testing.assert_array_equal(y, expected.y)
    assert _leftovers(store) == [key]  # the staging directory is gone


@pytest.mark.parametrize("parquet", [False, True], ids=["csv", "parquet"])
def test_preprocessing_by_partitions_is_the_in_memory_release(tmp_path: Path, parquet: bool):
    """Same generator seed: the same noisy counts, derived schema, charge and re-encoded rows as
    :func:`privfit.datasets.preprocessing.preprocess` on the matrix in memory."""
    schema = DatasetSchema.model_validate(SCHEMA)
    data = _csv()
    in_memory = preprocess(encode_csv_upload(io.BytesIO(data), schema), FILTER, np.random.default_rng(7))
    assert in_memory is not None and in_memory.changed  # the wide bounds are narrowed
    store = _store(tmp_path)
    upload = encode_into_partitions(io.BytesIO(_parquet(data) if parquet else data), schema, store, FILTER,
                                    np.random.default_rng(7), parquet=parquet, max_stored_bytes=1 << 30)  # fmt: skip
    release = upload.preprocessing
    assert release is not None
    for ours, theirs in zip(release.histograms.counts, in_memory.histograms.counts, strict=True):
        np.testing.assert_array_equal(ours, theirs)
    assert release.derived == in_memory.derived and upload.schema == in_memory.schema == release.schema
    np.testing.assert_array_equal(release.cost.rdp, in_memory.cost.rdp)
    key = upload.finish()
    X, y = _stored(store, key)
    np.testing.assert_array_equal(X, in_memory.encoded.X)
    np.testing.assert_array_equal(y, in_memory.encoded.y)


def test_the_content_hash_does_not_depend_on_the_batches(tmp_path: Path):
    schema = DatasetSchema.model_validate({**SCHEMA, "preprocessing": "none"})
    data = _csv(n=3000)
    hashes = {
        encode_into_partitions(io.BytesIO(_parquet(data, size)), schema, _store(tmp_path / str(size)), FILTER,
                               np.random.default_rng(0), parquet=True, max_stored_bytes=1 << 30).content_hash
        for size in (64, 999, 3000)
    }  # fmt: skip
    assert len(hashes) == 1
    other = encode_into_partitions(io.BytesIO(_parquet(_csv(n=3000, seed=1))), schema, _store(tmp_path / "o"), FILTER,
                                   np.random.default_rng(0), parquet=True, max_stored_bytes=1 << 30)  # fmt: skip
    assert other.content_hash not in hashes


def test_errors_and_caps_leave_nothing_in_the_store(tmp_path: Path):
    schema = DatasetSchema.model_validate({**SCHEMA, "preprocessing": "none"})
    store = _store(tmp_path)
    data = _csv(n=3000)
    bad = data.replace(b",green,", b",purple,")  # an unknown level, in many rows, late ones included
    table = pa_csv.read_csv(io.BytesIO(bad))
    out = io.BytesIO()
    pq.write_table(table, out, row_group_size=500)
    with pytest.raises(DatasetValidationError, match=r"purple|level"):
        encode_into_partitions(io.BytesIO(out.getvalue()), schema, store, FILTER, np.random.default_rng(0),
                               parquet=True, max_stored_bytes=1 << 30)  # fmt: skip
    with pytest.raises(DatasetValidationError, match="columnar reader"):
        encode_into_partitions(io.BytesIO(bad), schema, store, FILTER, np.random.default_rng(0), parquet=False,
                               max_stored_bytes=1 << 30)  # fmt: skip
    with pytest.raises(DatasetTooLargeError, match="max_stored_bytes") as refused:
        encode_into_partitions(io.BytesIO(data), schema, store, FILTER, np.random.default_rng(0), parquet=False,
                               max_stored_bytes=100 * 6 * 8)  # fmt: skip
    assert refused.value.setting == "max_stored_bytes" and refused.value.limit == 100 * 6 * 8
    upload = encode_into_partitions(io.BytesIO(data), schema, store, FILTER, np.random.default_rng(0), parquet=False,
                                    max_stored_bytes=1 << 30)  # fmt: skip
    upload.abort()  # what the router does when registration refuses it
    assert _leftovers(store) == []
    with pytest.raises(ValueError, match="in memory"):
        encode_into_partitions(
            io.BytesIO(data),
            DatasetSchema.model_validate({**SCHEMA, "validation_fraction": 0.2}),
            store,
            FILTER,
            np.random.default_rng(0),
            parquet=False,
            max_stored_bytes=1 << 30,
        )


def test_row_level_only_for_the_streaming_encoders():
    from privfit.datasets.columnar import stream_csv

    schema = DatasetSchema.model_validate({**SCHEMA, "privacy_unit": {"column": "uid", "max_rows": 2}})
    with pytest.raises(ValueError, match="privacy unit"):
        stream_csv(io.BytesIO(b""), schema, lambda X, y: None)
