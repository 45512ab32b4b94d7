"""Parquet uploads (privfit.datasets.columnar.encode_parquet): the schema checks of a CSV on a typed table.

The same table uploaded as Parquet or as CSV encodes to the same matrix, labels and content hash; a column of the
wrong type, a missing or undeclared column, a null under ``missing = "reject"``, a non-finite number, an unknown
level and a too-large matrix are refused naming the column (and the 1-based row for a cell), never a value.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_dataset_encoding import HEADER, impute_schema, schema

import privfit.datasets.columnar as columnar
from privfit.datasets import DatasetValidationError, encode_parquet, is_parquet_upload, parse_and_encode
from privfit.datasets.encoding import DatasetTooLargeError

ROWS: dict[str, list[Any]] = {
    "id": [1, 2, 3, 4],
    "age": [30.5, 0.1, 150.0, -3.0],
    "color": ["red", " blue", "green", "red"],
    "score": [1, -2, 5, 0],
    "y": ["yes", "no", "no ", "yes"],
}


def parquet_bytes(columns: dict[str, Any], row_group_size: int | None = None, **types: pa.DataType) -> bytes:
    table = pa.table({name: pa.array(values, type=types.get(name)) for name, values in columns.items()})
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=row_group_size)
    return sink.getvalue()


def csv_bytes(columns: dict[str, list[Any]]) -> bytes:
    names = HEADER.strip().split(",")
    cells = {name: ["NA" if v is None else repr(v) if isinstance(v, float) else str(v) for v in columns[name]]
             for name in names}  # fmt: skip
    return (HEADER + "".join(",".join(row) + "\n" for row in zip(*cells.values(), strict=True))).encode()


def error_of(data: bytes, s: Any = None, **kwargs: Any) -> DatasetValidationError:
    with pytest.raises(DatasetValidationError) as caught:
        encode_parquet(data, s or schema(), **kwargs)
    return caught.value


def test_same_table_as_csv_encodes_to_the_same_matrix_and_hash():
    from_parquet = encode_parquet(parquet_bytes(ROWS), schema())
    from_csv = parse_and_encode(csv_bytes(ROWS), schema())
    assert from_parquet.content_hash == from_csv.content_hash and from_parquet.n == 4
    np.testing.assert_array_equal(from_parquet.X, from_csv.X)
    np.testing.assert_array_equal(from_parquet.y, from_csv.y)
    assert not from_parquet.X.flags.writeable


def test_column_types_and_order_do_not_matter_when_compatible():
    reordered = {name: ROWS[name] for name in ("y", "score", "color", "age", "id")}
    same = encode_parquet(parquet_bytes(reordered, score=pa.float32(), age=pa.float64()), schema())
    assert same.content_hash == parse_and_encode(csv_bytes(ROWS), schema()).content_hash
    dictionary = pa.dictionary(pa.int8(), pa.string())
    as_dictionary = encode_parquet(parquet_bytes(ROWS, color=dictionary, y=pa.large_string()), schema())
    assert as_dictionary.content_hash == same.content_hash
    big = dict(ROWS, score=[2**53 + 1, -(2**62), 3, 4])  # integers round to the nearest float, as in a CSV
    assert (
        encode_parquet(parquet_bytes(big), schema()).content_hash
        == parse_and_encode(csv_bytes(big), schema()).content_hash
    )


def test_nulls_and_na_markers_are_missing():
    with_nulls = dict(ROWS, age=[30.5, None, 1.0, 2.0], color=["red", "blue", None, "NA"])
    error = error_of(parquet_bytes(with_nulls))
    assert (error.column, error.line) == ("age", 2) and "row 2" in error.message and "missing value" in error.message
    imputed = encode_parquet(parquet_bytes(with_nulls), impute_schema())
    assert imputed.content_hash == parse_and_encode(csv_bytes(with_nulls), impute_schema()).content_hash
    assert imputed.X[2, 1:4].sum() == 0 and imputed.X[3, 1:4].sum() == 0  # missing categoricals: all-zero one-hot
    no_label = dict(ROWS, y=["yes", None, "no", "yes"])
    assert (error_of(parquet_bytes(no_label), impute_schema()).column, "labels cannot be imputed") == (
        "y", "labels cannot be imputed")  # fmt: skip


@pytest.mark.parametrize(
    ("changes", "column", "row", "words"),
    [
        ({"age": [1.0, float("nan"), 2.0, 3.0]}, "age", 2, "non-finite"),
        ({"score": [1.0, 2.0, float("inf"), 3.0]}, "score", 3, "non-finite"),
        ({"color": ["red", "purple", "red", "red"]}, "color", 2, "unknown category"),
        ({"y": ["yes", "no", "yes", "maybe"]}, "y", 4, "not one of the declared classes"),
    ],
)
def test_first_invalid_cell_names_column_and_row(changes, column, row, words):
    error = error_of(parquet_bytes(dict(ROWS, **changes)))
    assert (error.column, error.line) == (column, row) and words in error.message and f"row {row}" in error.message
    assert "purple" not in error.message and "maybe" not in error.message


def test_row_numbers_count_across_row_groups_and_batches(monkeypatch):
    monkeypatch.setattr(columnar, "_PARQUET_BATCH_ROWS", 3)
    n = 40
    rows = {"id": list(range(n)), "age": [float(i) for i in range(n)], "color": ["red"] * n, "score": [1] * n,
            "y": ["yes"] * n}  # fmt: skip
    rows["color"][33] = "pink"
    rows["age"][35] = None
    error = error_of(parquet_bytes(rows, row_group_size=7))
    assert (error.column, error.line) == ("color", 34)
    rows["color"][33] = "red"
    rows["age"][35] = 5.0
    assert encode_parquet(parquet_bytes(rows, row_group_size=7), schema()).content_hash == parse_and_encode(
        csv_bytes(rows), schema()).content_hash  # fmt: skip


@pytest.mark.parametrize(
    ("changes", "types", "column", "words"),
    [
        ({"age": ["1", "2", "3", "4"]}, {}, "age", "expected an integer or floating type"),
        ({"score": [True, False, True, False]}, {}, "score", "expected an integer or floating type"),
        ({"color": [1, 2, 3, 1]}, {}, "color", "expected a string type"),
        ({"y": [1.0, -1.0, 1.0, 1.0]}, {}, "y", "expected a string type"),
    ],
)
def test_a_column_of_the_wrong_type_is_refused_naming_it(changes, types, column, words):
    error = error_of(parquet_bytes(dict(ROWS, **changes), **types))
    assert error.column == column and words in error.message and error.line is None


def test_ignored_columns_may_have_any_type_and_are_not_read():
    assert encode_parquet(parquet_bytes(dict(ROWS, id=[[1], [2], None, []])), schema()).n == 4


def test_missing_undeclared_and_duplicate_columns():
    missing = {k: v for k, v in ROWS.items() if k != "score"}
    error = error_of(parquet_bytes(missing))
    assert error.column == "score" and "lacks declared columns ['score']" in error.message
    error = error_of(parquet_bytes(dict(ROWS, extra=[1, 2, 3, 4])))
    assert error.column == "extra" and "type 'ignore'" in error.message and "Parquet" in error.message
    table = pa.Table.from_arrays([pa.array(v) for v in ROWS.values()] + [pa.array([1, 2, 3, 4])],
                                 names=[*ROWS, "age"])  # fmt: skip
    sink = io.BytesIO()
    pq.write_table(table, sink)
    assert error_of(sink.getvalue()).column == "age"


def test_empty_not_parquet_and_too_large():
    empty = {name: values[:0] for name, values in ROWS.items()}
    assert "no data rows" in error_of(parquet_bytes(empty, id=pa.int64(), age=pa.float64(), color=pa.string(),
                                                    score=pa.int64(), y=pa.string())).message  # fmt: skip
    for junk in (b"", b"PAR1", csv_bytes(ROWS)):
        assert error_of(junk).message == "the file is not a readable Parquet file"
    row_bytes = (schema().dimension + 1) * 8
    assert encode_parquet(parquet_bytes(ROWS), schema(), max_matrix_bytes=4 * row_bytes).n == 4
    with pytest.raises(DatasetTooLargeError) as caught:
        encode_parquet(parquet_bytes(ROWS), schema(), max_matrix_bytes=3 * row_bytes)
    assert caught.value.setting == "max_matrix_bytes"


def test_parquet_upload_detection():
    assert is_parquet_upload("application/vnd.apache.parquet", "data.bin")
    assert is_parquet_upload("Application/X-Parquet; charset=binary", None)
    assert is_parquet_upload("application/octet-stream", "Table.PARQUET")
    assert not is_parquet_upload("text/csv", "data.csv") and not is_parquet_upload(None, None)
