"""Parquet uploads through POST /v1/datasets: recognised by the file part's Content-Type or a ``.parquet`` name, the
same dataset as the CSV of the same table, and every refusal a 4xx problem+json naming the column that stores
nothing."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest
from api_helpers import SMALL_SCHEMA, small_csv
from test_api_bad_input import assert_nothing_stored, assert_problem

PARQUET = "application/vnd.apache.parquet"


def table_of(csv: bytes) -> pa.Table:
    return pa_csv.read_csv(io.BytesIO(csv), convert_options=pa_csv.ConvertOptions(
        column_types={"color": pa.string(), "y": pa.string()}))  # fmt: skip


def parquet_of(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=500)
    return sink.getvalue()


def post(client, keys, content: bytes, filename: str, content_type: str, **form: str):  # type: ignore[no-untyped-def]
    return client.post("/v1/datasets", headers=keys.owner, files={"file": (filename, content, content_type)},
                       data={"schema": json.dumps(SMALL_SCHEMA), "allow_duplicate": "true", **form})  # fmt: skip


def test_parquet_by_content_type_or_name_is_the_csv_dataset(client, keys):
    csv = small_csv(2000)
    content = parquet_of(table_of(csv))
    from_csv = post(client, keys, csv, "small.csv", "text/csv")
    assert from_csv.status_code == 201, from_csv.text
    for filename, content_type in (("blob", PARQUET), ("small.parquet", "application/octet-stream"),
                                   ("x", "application/x-parquet")):  # fmt: skip
        response = post(client, keys, content, filename, content_type)
        assert response.status_code == 201, response.text
        body = response.json()
        assert (body["n"], body["d"], body["content_hash"]) == (2000, 5, from_csv.json()["content_hash"])
    assert post(client, keys, content, "small.parquet", PARQUET).json()["name"] == "small.parquet"


def replaced(name: str, values: Callable[[int], list[Any]]) -> Callable[[pa.Table], pa.Table]:
    """A change of a table: column ``name`` replaced by ``values(rows)``."""
    return lambda t: t.set_column(t.schema.get_field_index(name), name, pa.array(values(t.num_rows)))


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (replaced("x1", lambda n: ["0.1"] * n), "x1"),
        (replaced("color", lambda n: [1] * n), "color"),
        (lambda t: t.drop_columns(["x2"]), "x2"),
        (lambda t: t.append_column("extra", pa.array([0] * t.num_rows)), "extra"),
        (replaced("x1", lambda n: [None] + [0.5] * (n - 1)), "row 1"),
        (replaced("y", lambda n: ["yes"] * (n - 1) + ["maybe"]), "row 50"),
    ],
    ids=["numeric as text", "categorical as int", "missing column", "undeclared column", "null", "unknown class"],
)
def test_bad_parquet_is_a_422_naming_the_column_and_stores_nothing(client, keys, change, needle):
    content = parquet_of(change(table_of(small_csv(50))))
    response = post(client, keys, content, "d.parquet", PARQUET)
    assert_problem(response, 422, needle)
    assert "maybe" not in response.text
    assert_nothing_stored(client)


def test_not_parquet_and_too_large(client, keys):
    assert_problem(post(client, keys, small_csv(50), "d.parquet", PARQUET), 422, "not a readable Parquet file")
    client.app.state.settings.max_matrix_bytes = 49 * 6 * 8  # n·(d + 1)·8 of 49 rows: 50 are too many
    assert_problem(post(client, keys, parquet_of(table_of(small_csv(50))), "d.parquet", PARQUET), 413,
                   "max_matrix_bytes")  # fmt: skip
    assert_nothing_stored(client)
