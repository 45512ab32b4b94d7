"""Issue 35, item 4, at the encoder: caps checked from what a file declares, before it is decoded.

CSV (:func:`privfit.datasets.columnar.encode_csv_upload`): a cell over ``max_cell_bytes``, or a line longer than
its fields can take, is a 422 naming the line and (when no quote precedes it) the column, found by the pre-scan
before either path parses a cell. Parquet (:func:`encode_parquet`): δ < 1/n and the caps apply to the footer's row
count before any page is decoded; statistics, dictionary sizes and encodings are read from the footer and page
headers; every decoding failure (corrupt or truncated pages, bad Thrift) is a 422. tests/api/test_api_hostile_files.py
uploads the hostile set through the API and measures the decoding's memory.
"""

from __future__ import annotations

import io
import random
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_dataset_encoding import HEADER, impute_schema, schema
from test_dataset_parquet import ROWS, csv_bytes, parquet_bytes

import privfit.datasets.columnar as columnar
from privfit.datasets import DatasetValidationError, encode_parquet, parse_and_encode
from privfit.datasets.columnar import encode_csv, encode_csv_upload
from privfit.datasets.encoding import DatasetTooLargeError
from privfit.datasets.parquet_limits import _Compact, _Corrupt

CAP = 32  # max_cell_bytes in these tests
ROW = "7,30,red,1,yes\n"  # id, age, color, score, y


def csv_error(data: bytes, s: Any = None, cap: int = CAP) -> DatasetValidationError:
    with pytest.raises(DatasetValidationError) as caught:
        encode_csv_upload(io.BytesIO(data), s or schema(), max_cell_bytes=cap)
    return caught.value


LONG = "x" * (CAP + 1)
CSV_CASES: dict[str, tuple[bytes, Any, str | None, int, str]] = {
    # name: (file, schema, column, line, words)
    "ignored column": ((HEADER + ROW + LONG + ",30,red,1,yes\n").encode(), None, "id", 3, "cell in column 'id'"),
    "categorical column, crlf and cr lines": ((HEADER + ROW.replace("\n", "\r\n") + "\r" + ROW + f"7,30,{LONG},1,yes"
                                               ).encode(), None, "color", 5, "at line 5"),
    "after a bom and blank lines": (b"\xef\xbb\xbf\n" + (HEADER + ROW + f"7,30,red,{LONG},yes\n").encode(), None,
                                    "score", 4, "max_cell_bytes = 32 bytes"),
    "header": ((HEADER.strip() + LONG + "\n" + ROW).encode(), None, None, 1, "a cell of the header (line 1)"),
    "quoted, the file's first quote": ((HEADER + ROW + f'7,30,"{LONG}",1,yes\n').encode(), None, "color", 3, "'color'"),
    "quoted, after another quote": ((HEADER + '"7",30,red,1,yes\n' + f'7,30,"{LONG}",1,yes\n').encode(), None, None,
                                    3, "a cell at line 3"),
    "quoted around delimiters": ((HEADER + ROW + '7,30,"' + "r," * 100 + '",1,yes\n').encode(), None, None, 3,
                                 "line 3 is longer than 165 bytes, the most its 5 fields"),
    "a line of delimiters": ((HEADER + ROW + "7,30,red,1,yes" + "," * 200 + "\n").encode(), None, None, 3,
                             "at most 33554432 bytes a line"),
    "multi-byte delimiter": ((HEADER + ROW + f"7,30,red,1,{LONG}\n").replace(",", "§").encode(),
                             schema(csv={"delimiter": "§"}), "y", 3, "'y' at line 3"),
    "header false": ((ROW + f"7,30,red,{LONG},yes\n").encode(),
                     schema(csv={"header": False, "columns": ["id", "age", "color", "score", "y"]}), "score", 2, ""),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CSV_CASES))
def test_a_csv_cell_or_line_over_the_cap_is_a_422_naming_line_and_column(name, monkeypatch):
    data, s, column, line, words = CSV_CASES[name]
    error = csv_error(data, s)
    assert (error.column, error.line) == (column, line) and words in error.message, error.message
    assert "xxx" not in error.message
    monkeypatch.setattr(columnar, "_SCAN_BLOCK", 5)  # a run, a line end, a BOM and a delimiter across blocks
    again = csv_error(data, s)
    assert (again.column, again.line, again.message) == (error.column, error.line, error.message)


def test_a_line_is_at_most_max_line_bytes_however_many_columns(monkeypatch):
    monkeypatch.setattr(columnar, "MAX_LINE_BYTES", 40)  # under 5 × (32 + 1)
    padded = ",".join(cell + " " * 10 for cell in ROW.strip().split(","))  # every cell under the cap
    error = csv_error((HEADER + ROW + padded + "\n").encode())
    assert (error.column, error.line) == (None, 3) and "line 3 is longer than 40 bytes" in error.message


def test_cells_at_the_cap_encode_as_without_it_on_both_paths():
    at_cap = (HEADER + ROW * 3 + "x" * CAP + ",30,red,1,yes\n").encode()
    assert encode_csv(io.BytesIO(at_cap), schema(), max_cell_bytes=CAP) is not None  # the Arrow path takes it
    quoted = at_cap + b'"8",31,blue,2,no\n'  # quotes: the exact path
    for data in (at_cap, quoted):
        capped = encode_csv_upload(io.BytesIO(data), schema(), max_cell_bytes=CAP)
        assert capped.content_hash == parse_and_encode(data, schema()).content_hash
    many = (HEADER + ROW * 20_000).encode()  # lines and blocks far longer than a window of the scan
    assert encode_csv_upload(io.BytesIO(many), schema(), max_cell_bytes=CAP).n == 20_000


# --------------------------------------------------------------------------------------------------
# Parquet
# --------------------------------------------------------------------------------------------------


class Refused(Exception):
    pass


def test_the_footer_row_count_meets_delta_and_the_caps_before_any_page_is_decoded(monkeypatch):
    """δ < 1/n (the caller's ``admit_rows``) and the matrix cap see the footer's n; no batch is read."""

    def no_decoding(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a page was decoded")

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", no_decoding)
    seen: list[int] = []

    def admit(n: int) -> None:
        seen.append(n)
        raise Refused

    with pytest.raises(Refused):
        encode_parquet(parquet_bytes(ROWS), schema(), admit_rows=admit)
    assert seen == [4]
    with pytest.raises(DatasetTooLargeError):
        encode_parquet(parquet_bytes(ROWS), schema(), max_matrix_bytes=3 * (schema().dimension + 1) * 8)


def parquet_error(data: bytes, **caps: Any) -> DatasetValidationError | DatasetTooLargeError:
    with pytest.raises((DatasetValidationError, DatasetTooLargeError)) as caught:
        encode_parquet(data, schema(), **caps)
    return caught.value


def written(table: pa.Table, **options: Any) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, **options)
    return sink.getvalue()


def rows_table(rows: dict[str, list[Any]]) -> pa.Table:
    return pa.table({name: pa.array(values) for name, values in rows.items()})


def with_color(values: list[str], **options: Any) -> bytes:
    return written(rows_table(dict(ROWS, color=values)), **options)


def test_long_values_are_refused_from_statistics_dictionary_pages_or_decoded_lengths():
    long = "r" * 100
    refused = parquet_error(with_color(["red", long, "red", "red"]), max_cell_bytes=64)  # statistics (max)
    assert refused.column == "color" and "its statistics hold one, row group 1" in refused.message
    refused = parquet_error(with_color([long] * 4, write_statistics=False), max_cell_bytes=64)  # dictionary page
    assert "its dictionary page holds one" in refused.message
    decoded = parquet_error(with_color(["red", long, "red", "red"], write_statistics=False), max_cell_bytes=64)
    assert (decoded.column, decoded.line) == ("color", 2)  # only decoding finds it: the average is under the cap
    assert "a value in column 'color' at row 2 is longer than max_cell_bytes = 64 bytes" in decoded.message
    plain = parquet_error(with_color(["red", long, "red", "red"], write_statistics=False, use_dictionary=False),
                          max_cell_bytes=64)  # fmt: skip
    assert (plain.column, plain.line) == ("color", 2)


def test_a_dictionary_page_over_the_page_cap_is_413_naming_the_setting():
    error = parquet_error(with_color(["a" * 5000 + str(i) for i in range(4)]), max_page_bytes=16_000)
    assert isinstance(error, DatasetTooLargeError) and error.setting == "max_parquet_page_bytes"
    assert "column 'color' in row group 1" in error.message


def test_text_encodings_arrow_cannot_bound():
    """DELTA_LENGTH_BYTE_ARRAY (every byte in the pages) is read as plain strings, like the CSV; DELTA_BYTE_ARRAY
    (front coding: a value can repeat its predecessor in a few bytes) is refused naming the column."""
    delta_length = {"color": "DELTA_LENGTH_BYTE_ARRAY", "y": "DELTA_LENGTH_BYTE_ARRAY"}
    encoded = encode_parquet(written(rows_table(ROWS), use_dictionary=False, column_encoding=delta_length), schema())
    assert encoded.content_hash == parse_and_encode(csv_bytes(ROWS), schema()).content_hash
    front = written(rows_table(ROWS), use_dictionary=False, column_encoding={"y": "DELTA_BYTE_ARRAY"})
    error = parquet_error(front)
    assert error.column == "y" and "DELTA_BYTE_ARRAY" in error.message  # type: ignore[union-attr]


def test_a_dictionary_larger_than_a_batch_encodes_only_the_values_it_refers_to(monkeypatch):
    """A dictionary page is shared by the batches of its row group: a batch of 3 rows whose dictionary holds every
    level, padded variants and NA markers encodes as the CSV does (imputed missing values included)."""
    monkeypatch.setattr(columnar, "_PARQUET_BATCH_ROWS", 3)
    n = 40
    colors = [("red", " green", "blue ", "NA", None, "?")[i % 6] for i in range(n)]
    rows = {"id": list(range(n)), "age": [float(i) for i in range(n)], "color": colors, "score": [1] * n,
            "y": ["yes", "no"] * (n // 2)}  # fmt: skip
    encoded = encode_parquet(written(rows_table(rows), row_group_size=20), impute_schema())
    assert encoded.content_hash == parse_and_encode(csv_bytes(rows), impute_schema()).content_hash


def test_every_corrupt_or_truncated_file_is_a_422():
    """Random byte changes and every truncation of small files (Parquet v1 and v2 pages, four codecs, several row
    groups): Arrow's errors (ArrowInvalid, OSError, bad Thrift) and the page walk's all end as a 4xx, never as
    another exception (nor as a crash of the process, which pyarrow did on a chunk whose type was corrupted)."""
    rng = random.Random(35)
    n = 600
    data = {"id": list(range(n)), "age": np.linspace(0, 99, n), "color": (["red", "green", "blue"] * n)[:n],
            "score": [i % 5 for i in range(n)], "y": (["yes", "no"] * n)[:n]}  # fmt: skip
    files = [
        written(pa.table(data), **options)
        for options in (
            {"row_group_size": 200},
            {"compression": "snappy", "data_page_version": "2.0", "data_page_size": 512},
            {"compression": "gzip", "use_dictionary": False, "row_group_size": 300},
            {"compression": "none", "write_page_index": True},
        )
    ]
    outcomes = set()
    for _ in range(400):
        content = bytearray(rng.choice(files))
        at = rng.randrange(len(content))
        for k in range(rng.randrange(1, 4)):
            content[min(at + k, len(content) - 1)] = rng.randrange(256)
        outcomes.add(_outcome(bytes(content)))
    for content in files:
        for cut in range(0, len(content), 61):
            outcomes.add(_outcome(content[:cut]))
    assert outcomes <= {"ok", "DatasetValidationError", "DatasetTooLargeError"}, outcomes


def _outcome(content: bytes) -> str:
    try:
        encode_parquet(content, schema(), max_cell_bytes=64, max_page_bytes=1 << 20)
    except (DatasetValidationError, DatasetTooLargeError) as error:
        return type(error).__name__
    return "ok"


@pytest.mark.parametrize(
    ("header", "words"),
    [
        (bytes([0x19, 0xF6]) + b"\xff\xff\xff\xff\x0f", "runs past"),  # a list of 2^32 − 1 bytes in a short header
        (b"\x1c" * 40, "nests too deeply"),  # structs in structs
        (b"\x17", "runs past"),  # a double cut short
        (b"\x1d", "unknown type 13"),
    ],
)
def test_the_page_header_reader_refuses_malformed_thrift(header, words):
    with pytest.raises(_Corrupt) as caught:
        _Compact(io.BytesIO(header), 0, len(header)).struct({})
    assert words in str(caught.value)
