"""A CSV encoded as it arrives (privfit.datasets.columnar.encode_csv_stream, issue 40) against the file encoded whole.

It must give exactly the dataset :func:`encode_csv_upload` gives (matrix, labels, unit index, content hash) or
decline (None), never anything else: for every hand-written edge case of the columnar tests, with the pre-scan's
blocks cut small, for fuzzed files, for files with a privacy unit and across Arrow's blocks. It takes the plain files
the columnar path takes; the rows it hands to ``on_rows`` add up to the preprocessing's counts of the whole matrix,
as do a Parquet file's batches (:class:`BatchCounts`).
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_dataset_columnar import CASES, SCHEMAS, csv_files, takes_columnar
from test_dataset_encoding import impute_schema, schema

import privfit.datasets.columnar as columnar
from privfit.datasets import DatasetSchema, DatasetValidationError
from privfit.datasets.columnar import encode_csv_stream, encode_csv_upload, encode_parquet
from privfit.datasets.encoding import DatasetTooLargeError
from privfit.datasets.preprocessing import BatchCounts, candidate_columns, exact_counts


def whole(data: bytes, s: DatasetSchema, **caps: Any) -> tuple[Any, ...]:
    try:
        e = encode_csv_upload(io.BytesIO(data), s, **caps)
    except DatasetValidationError as error:
        return ("error", error.column, error.line, error.message)
    except DatasetTooLargeError as error:
        return ("too large", error.setting)
    units = None if e.units is None else e.units.tobytes()
    return ("ok", e.n, e.content_hash, e.X.tobytes(), e.y.tobytes(), units)


def streamed(data: bytes, s: DatasetSchema, **caps: Any) -> tuple[Any, ...] | None:
    e = encode_csv_stream(io.BytesIO(data), s, max_bytes=len(data), **caps)
    if e is None:
        return None
    units = None if e.units is None else e.units.tobytes()
    return ("ok", e.n, e.content_hash, e.X.tobytes(), e.y.tobytes(), units)


def assert_agrees(data: bytes, s: DatasetSchema, **caps: Any) -> tuple[Any, ...] | None:
    got = streamed(data, s, **caps)
    assert got is None or got == whole(data, s, **caps)
    return got


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("scan_block", [None, 5])
def test_streamed_encoding_is_the_whole_files_or_declines(name, scan_block, monkeypatch):
    if scan_block is not None:
        monkeypatch.setattr(columnar, "_SCAN_BLOCK", scan_block)
    for s in (schema(), impute_schema()):
        got = assert_agrees(CASES[name], s)
        assert (got is not None) == takes_columnar(CASES[name], s), name
        assert_agrees(CASES[name], s, max_cell_bytes=4)  # a cap: declined where the whole file's scan refuses


@given(data=csv_files(), which=st.integers(0, len(SCHEMAS) - 1))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_fuzzed_files_agree(data: bytes, which: int) -> None:
    assert_agrees(data, SCHEMAS[which])


def test_several_arrow_blocks_a_matrix_cap_and_the_preprocessing_counts():
    rng = np.random.default_rng(3)
    n = 50_000
    rows = zip(rng.uniform(-20, 120, n), rng.choice(["red", "green", "blue"], n), rng.normal(0, 4, n),
               rng.choice(["yes", "no"], n), strict=True)  # fmt: skip
    data = ("id,age,color,score,y\n" + "".join(f"{i},{float(a)!r},{c},{v:.17g},{y}\n" for i, (a, c, v, y) in
                                                enumerate(rows))).encode()  # fmt: skip
    assert len(data) > 2 * 1024 * 1024
    s = schema()
    columns = candidate_columns(s)
    totals = np.zeros((len(columns), 32), dtype=np.int64)
    e = encode_csv_stream(io.BytesIO(data), s, max_bytes=len(data),
                          on_rows=lambda X, y: np.add(totals, exact_counts(columns, X, y), out=totals))  # fmt: skip
    assert e is not None and ("ok", e.n, e.content_hash) == whole(data, s)[:3]
    assert np.array_equal(totals, exact_counts(columns, e.X, e.y))
    too_small = {"max_matrix_bytes": 1000 * (s.dimension + 1) * 8}
    assert streamed(data, s, **too_small) is None and whole(data, s, **too_small)[0] == "too large"


def test_a_privacy_unit_gets_the_same_unit_index():
    declared = DatasetSchema.model_validate({
        "label": {"name": "y", "type": "binary", "positive": "1", "negative": "0"},
        "features": [{"name": "a", "type": "numeric", "lower": 0, "upper": 100}],
        "budget": {"epsilon": 1.0, "delta": 1e-6},
        "privacy_unit": {"column": "uid", "max_rows": 2},
    })  # fmt: skip
    data = ("y,a,uid\n" + "".join(f"{i % 2},{i % 97},u{(7 * i) % 1013}\n" for i in range(150_000))).encode()
    got = assert_agrees(data, declared)
    assert got is not None and got[5] is not None


def test_a_stream_that_ends_early_or_is_empty_declines():
    assert streamed(b"", schema()) is None
    assert streamed(b"id,age,color,score,y", schema()) is None  # a header only: the whole file says "no data rows"


def test_batch_counts_of_a_parquet_files_batches_are_the_matrixs():
    rng = np.random.default_rng(5)
    n = 150_000  # several of encode_parquet's batches
    table = pa.table({"id": np.arange(n), "age": rng.uniform(-20, 120, n), "color": rng.choice(["red", "blue"], n),
                      "score": rng.normal(0, 4, n), "y": rng.choice(["yes", "no"], n)})  # fmt: skip
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=40_000)
    s = schema()
    counts = BatchCounts(s)
    e = encode_parquet(sink.getvalue(), s, on_rows=counts.add)
    totals = counts.totals()
    assert totals is not None and np.array_equal(totals, exact_counts(candidate_columns(s), e.X, e.y))
    assert e.content_hash == encode_parquet(sink.getvalue(), s).content_hash
    assert BatchCounts(schema(preprocessing="none")).totals() is None  # opted out: nothing measured
