"""The columnar CSV path (privfit.datasets.columnar.encode_csv) against the exact, cell-by-cell path.

For every file, ``parse_and_encode`` (columnar first) and ``parse_and_encode(columnar=False)`` (Python's csv module)
must agree: the same matrix, labels and content hash, or the same error (column, line, message). Hand-written edge
cases cover what the pre-scan must decline (quotes, NUL, bad UTF-8, comments, long lines) and what Arrow's parsers
accept differently from the exact path (non-finite words, whitespace, NA markers); a property test fuzzes files
built from such tokens. Valid, plain files must actually take the columnar path.
"""

from __future__ import annotations

import copy
import csv
import io
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_dataset_encoding import HEADER, SCHEMA, impute_schema, schema

import privfit.datasets.columnar as columnar
from privfit.datasets import DatasetSchema, DatasetValidationError, parse_and_encode
from privfit.datasets.columnar import encode_csv
from privfit.datasets.encoding import DatasetTooLargeError

ROW = "7,30,red,1,yes\n"


def outcome(data: bytes, s: DatasetSchema, columnar: bool, **kwargs: Any) -> tuple[Any, ...]:
    try:
        e = parse_and_encode(data, s, columnar=columnar, **kwargs)
    except DatasetValidationError as error:
        return ("error", error.column, error.line, error.message)
    except DatasetTooLargeError as error:
        return ("too large", error.setting, error.limit, error.message)
    return ("ok", e.n, e.content_hash, e.X.tobytes(), e.y.tobytes())


def assert_same(data: bytes, s: DatasetSchema | None = None, **kwargs: Any) -> tuple[Any, ...]:
    s = s or schema()
    exact = outcome(data, s, False, **kwargs)
    assert outcome(data, s, True, **kwargs) == exact
    return exact


def takes_columnar(data: bytes, s: DatasetSchema | None = None) -> bool:
    return encode_csv(io.BytesIO(data), s or schema()) is not None


CASES: dict[str, bytes] = {
    "plain": (HEADER + ROW * 20).encode(),
    "crlf, cr, blank lines, bom": b"\xef\xbb\xbf\r\n"
    + (HEADER + ROW + "\r\n" + ROW.replace("\n", "\r\n") + ROW.replace("\n", "\r") + "\n\n" + ROW).encode(),
    "whitespace around cells": (HEADER + " 7 , 30\t, red ,\t1 , yes \n" + ROW).encode(),
    "whitespace header": (" id , age,color ,score, y\n" + ROW).encode(),
    "unicode whitespace": (HEADER + "7,\u00a030,red\u2003,1,yes\n").encode(),
    "numbers the regex accepts": (
        HEADER + "7,+30,red,1.,yes\n8,.5,red,1e0,no\n9,00030,red,-0,no\n9,1E+1,red,1e-400,no\n"
    ).encode(),
    "overflowing numbers (clipped)": (HEADER + ROW + "9,1e400,red,-1e400,no\n").encode(),
    "nan": (HEADER + ROW + "7,nan,red,1,yes\n").encode(),
    "inf": (HEADER + ROW + "7,30,red,-Infinity,yes\n").encode(),
    "hex": (HEADER + ROW + "7,0x1,red,1,yes\n").encode(),
    "underscore": (HEADER + ROW + "7,1_0,red,1,yes\n").encode(),
    "missing numeric": (HEADER + ROW + "7,NA,red,1,yes\n").encode(),
    "missing padded": (HEADER + ROW + "7, ? ,red,1,yes\n").encode(),
    "missing categorical": (HEADER + ROW + "7,30,,1,yes\n").encode(),
    "missing label": (HEADER + ROW + "7,30,red,1,NA\n").encode(),
    "unknown level": (HEADER + ROW + "7,30,Red,1,yes\n").encode(),
    "unknown class": (HEADER + ROW + "7,30,red,1,maybe\n").encode(),
    "field count": (HEADER + ROW + "7,30,red,1\n" + ROW).encode(),
    "trailing delimiter": (HEADER + ROW + "7,30,red,1,yes,\n").encode(),
    "whitespace-only line": (HEADER + ROW + "   \n" + ROW).encode(),
    "quoted": (HEADER + '7,"30",red,1,yes\n' + ROW).encode(),
    "quoted header": ('"id","age","color"," score ","y"\r\n' + ROW * 3).encode(),
    "quoted header and data": ('"id","age","color","score","y"\n' + ROW + '7,30,"red",1,yes\n').encode(),
    "quoted header with a newline": ('"id","a\nge","color","score","y"\n' + ROW).encode(),
    "malformed quoted header": ('"id"x,"age","color","score","y"\n' + ROW).encode(),
    "quoted newline": (HEADER + '7,"3\n0",red,1,yes\n').encode(),
    "quote after text": (HEADER + '7,30,re"d,1,yes\n').encode(),
    "nul in ignored column": (HEADER + ROW).encode() + b"x\0,30,red,1,yes\n",
    "bad utf-8 in ignored column": (HEADER + ROW).encode() + b"\xff,30,red,1,yes\n",
    "split utf-8 in ignored column": (HEADER + ROW).encode() + "\u00e9\u4e2d,30,red,1,yes\n".encode(),
    "long field in ignored column": (HEADER + "x" * (csv.field_size_limit() + 1) + ",30,red,1,yes\n").encode(),
    "long line of short fields": (HEADER + ROW * 3).encode(),
    "duplicate header": b"id,age,age,color,score,y\n" + ROW.encode(),
    "missing header column": b"id,age,color,y\n7,30,red,yes\n",
    "undeclared header column": b"id,age,color,score,y,z\n7,30,red,1,yes,1\n",
    "blank lines before header": b"\n\n" + (HEADER + ROW).encode(),
    "whitespace line before header": b"  \n" + (HEADER + ROW).encode(),
    "header only": HEADER.encode(),
    "empty": b"",
    "no line end at the end": (HEADER + ROW + ROW.strip()).encode(),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_columnar_path_agrees_with_the_exact_path(name):
    assert_same(CASES[name])
    assert_same(CASES[name], impute_schema())


@pytest.mark.parametrize("name", sorted(CASES))
def test_pre_scan_block_boundaries_change_nothing(name, monkeypatch):
    """The pre-scan reads 5 bytes at a time: a BOM, a UTF-8 character, a comment prefix, the header line and a long
    line cross its blocks; Arrow's blocks stay large. The outcome and whether the columnar path takes the file are
    those of whole blocks."""
    whole = (outcome(CASES[name], schema(), True), takes_columnar(CASES[name]))
    monkeypatch.setattr(columnar, "_SCAN_BLOCK", 5)
    assert (outcome(CASES[name], schema(), True), takes_columnar(CASES[name])) == whole
    commented = schema(csv={"comment": "##"})
    body = (HEADER + ROW * 3 + "#x,30,red,1,yes\n").encode()
    assert takes_columnar(body, commented) and not takes_columnar(body.replace(b"#x", b"##"), commented)


def test_plain_files_take_the_columnar_path():
    for name in ("plain", "crlf, cr, blank lines, bom", "quoted header", "whitespace around cells",
                 "numbers the regex accepts", "split utf-8 in ignored column", "blank lines before header",
                 "no line end at the end"):  # fmt: skip
        assert takes_columnar(CASES[name]), name
    assert takes_columnar(CASES["missing numeric"], impute_schema())


DECLINED = ["quoted", "nul in ignored column", "overflowing numbers (clipped)", "bad utf-8 in ignored column",
            "long field in ignored column", "nan", "unknown level", "field count"]  # fmt: skip


@pytest.mark.parametrize("name", DECLINED)
def test_files_it_cannot_decide_are_declined(name):
    assert not takes_columnar(CASES[name])


def test_comments_delimiter_header_false_and_labels():
    commented = schema(csv={"comment": "#", "delimiter": ";"})
    body = (HEADER + ROW).replace(",", ";")
    assert takes_columnar(body.encode(), commented)
    assert_same(body.encode(), commented)
    assert not takes_columnar(("# note\n" + body).encode(), commented)
    assert_same(("# note\n" + body + "#x;1\n").encode(), commented)
    assert_same(("a#b;30;red;1;yes\n").join([HEADER.replace(",", ";"), ""]).encode(), commented)
    positional = schema(csv={"header": False, "columns": ["id", "age", "color", "score", "y"]})
    assert takes_columnar((ROW * 5).encode(), positional)
    assert_same((ROW * 5).encode(), positional)
    numeric = copy.deepcopy(SCHEMA)
    numeric["label"] = {"name": "y", "type": "numeric", "lower": 0, "upper": 10}
    assert_same((HEADER + "7,30,red,1,3.5\n7,30,red,1,11\n").encode(), DatasetSchema.model_validate(numeric))
    assert_same((HEADER + "7,30,red,1,inf\n").encode(), DatasetSchema.model_validate(numeric))
    classes = copy.deepcopy(SCHEMA)
    classes["label"] = {"name": "y", "type": "categorical", "levels": ["a", "b", "c"]}
    assert_same((HEADER + "7,30,red,1,c\n7,30,red,1, a\n").encode(), DatasetSchema.model_validate(classes))
    assert_same((HEADER + "7,30,red,1,d\n").encode(), DatasetSchema.model_validate(classes))


def test_a_numeric_na_marker_takes_the_exact_path():
    """Arrow parses a padded " -999" as a number while the exact path strips it to the NA marker "-999"."""
    marked = schema(missing="impute", features=impute_schema().model_dump()["features"],
                    csv={"na_values": ["-999", "NA"]})  # fmt: skip
    data = (HEADER + ROW + "7, -999 ,red,1,yes\n7,-999,red,nan,yes\n").encode()
    assert not takes_columnar(data, marked)
    assert assert_same(data, marked)[0] == "error"
    assert assert_same(data.replace(b"nan", b"2"), marked)[0] == "ok"
    assert takes_columnar(data.replace(b"nan", b"2"), schema(csv={"na_values": ["", "n/a"]}))  # -999: a value
    assert takes_columnar((HEADER + ROW).encode(), schema(csv={"na_values": ["", "n/a", "NaN?"]}))


def test_too_large_agrees_with_the_exact_path():
    row_bytes = (schema().dimension + 1) * 8
    data = (HEADER + ROW * 100).encode()
    for rows in (99, 100, 5):
        assert assert_same(data, max_matrix_bytes=rows * row_bytes)[0] == ("ok" if rows == 100 else "too large")
    bad_early = (HEADER + ROW + "7,30,red,1,maybe\n" + ROW * 100).encode()
    assert_same(bad_early, max_matrix_bytes=50 * row_bytes)  # the size is checked before the chunk's cells
    assert_same(bad_early, max_matrix_bytes=200 * row_bytes)


NUMBERS = ["1", "+2", "-3.5", " -3.5", "1.", ".5", "1e3", "1E-2", "1e400", "nan", "inf", "-Infinity", " 4 ", "\t5",
           "\u00a06", "", "NA", "?", " NA", "0x1", "1_0", "--1", "-0", "7\v"]  # fmt: skip
LEVELS = ["red", " green", "blue ", "Red", "", "NA", "?", "\u2003red", "red\u00a0", "x"]
LABELS = ["yes", "no", " yes", "no\t", "maybe", "", "NA"]
ENDS = ["\n", "\r\n", "\r"]


@st.composite
def csv_files(draw: st.DrawFn) -> bytes:
    rows = draw(st.integers(0, 12))
    valid = draw(st.booleans())  # mostly-valid files exercise the accepting path too
    headers = [HEADER.strip(), " id,age ,color,score,y", "id,age,color,score", '"id","age",color,"score","y"',
               '"id,age",color,score,y']  # fmt: skip
    lines = [draw(st.sampled_from(headers))]
    for _ in range(rows):
        if valid:
            cells = [draw(st.sampled_from(["1", "x", ""])), draw(st.sampled_from(["30", " 1e1", "+2", "1e400"])),
                     draw(st.sampled_from(["red", " blue"])), draw(st.sampled_from(["1", "-2.5", ".5"])),
                     draw(st.sampled_from(["yes", "no "]))]  # fmt: skip
        else:
            pools = [["1", "x", "\u00e9", '"q"'], NUMBERS, LEVELS, NUMBERS, LABELS]
            cells = [draw(st.sampled_from(pool)) for pool in pools]
        if draw(st.integers(0, 20)) == 0:
            cells = cells[: draw(st.integers(0, 4))]
        lines.append(",".join(cells))
        if draw(st.integers(0, 10)) == 0:
            lines.append(draw(st.sampled_from(["", " ", "\t"])))
    text = "".join(line + draw(st.sampled_from(ENDS)) for line in lines)
    if draw(st.booleans()):
        text = text.rstrip("\r\n")
    return (b"\xef\xbb\xbf" if draw(st.integers(0, 5)) == 0 else b"") + text.encode()


SCHEMAS = [schema(), impute_schema(), schema(csv={"na_values": ["-3.5", "NA"]})]


@given(data=csv_files(), which=st.integers(0, len(SCHEMAS) - 1))
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_fuzzed_files_agree(data: bytes, which: int) -> None:
    assert_same(data, SCHEMAS[which])


def test_large_file_columnar_equals_exact():
    """Several Arrow record batches (blocks of 1 MiB) with a seeded mix of values."""
    rng = np.random.default_rng(7)
    n = 60_000
    ages = rng.uniform(-20, 120, n)
    colors = rng.choice(["red", "green", "blue", " red"], n)
    scores = rng.normal(0, 4, n)
    labels = rng.choice(["yes", "no"], n)
    rows = enumerate(zip(ages, colors, scores, labels, strict=True))
    body = "".join(f"{i},{float(a)!r},{c},{s:.17g},{y}\n" for i, (a, c, s, y) in rows)
    data = (HEADER + body).encode()
    assert len(data) > 2 * 1024 * 1024 and takes_columnar(data)
    assert assert_same(data)[0] == "ok"
