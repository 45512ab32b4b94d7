"""CSV parsing, validation and encoding (privfit.datasets.encoding)."""

from __future__ import annotations

import copy
import math
import pickle
import unicodedata
from dataclasses import fields
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfit.datasets import (
    DatasetSchema,
    DatasetValidationError,
    EncodedDataset,
    compute_content_hash,
    encode_rows,
    parse_and_encode,
)

SCHEMA: dict[str, Any] = {
    "label": {"name": "y", "type": "binary", "positive": "yes", "negative": "no"},
    "features": [
        {"name": "age", "type": "numeric", "lower": 0, "upper": 100},
        {"name": "color", "type": "categorical", "levels": ["red", "green", "blue"]},
        {"name": "score", "type": "numeric", "lower": -5, "upper": 5},
        {"name": "id", "type": "ignore"},
    ],
    "budget": {"epsilon": 1.0, "delta": 1e-6},
}
HEADER = "id,age,color,score,y\n"  # deliberately not in schema order


def schema(**changes: Any) -> DatasetSchema:
    obj = copy.deepcopy(SCHEMA)
    obj.update(changes)
    return DatasetSchema.model_validate(obj)


def impute_schema() -> DatasetSchema:
    obj = copy.deepcopy(SCHEMA)
    obj["missing"] = "impute"
    obj["features"][0]["fill"] = 50
    obj["features"][2]["fill"] = -5
    return DatasetSchema.model_validate(obj)


def enc(text: str | bytes, s: DatasetSchema | None = None) -> EncodedDataset:
    data = text.encode() if isinstance(text, str) else text
    return parse_and_encode(data, s or schema())


# --------------------------------------------------------------------------------------------------
# encoding
# --------------------------------------------------------------------------------------------------


def test_basic_encoding_and_one_hot_layout() -> None:
    e = enc(HEADER + "a1,25,green,0,yes\nb2,100,blue,-5,no\nc3,0,red,2.5,yes\n")
    assert e.feature_names == ["age", "color=red", "color=green", "color=blue", "score"]
    assert e.n == 3 and e.d == 5 and e.X.shape == (3, 5) and e.X.dtype == np.float64
    expected = np.array(
        [
            [-0.5, 0, 1, 0, 0.0],
            [1.0, 0, 0, 1, -1.0],
            [-1.0, 1, 0, 0, 0.5],
        ]
    )
    np.testing.assert_array_equal(e.X, expected)
    np.testing.assert_array_equal(e.y, [1.0, -1.0, 1.0])
    assert e.label_bound == 1.0
    assert e.row_norm_bound == pytest.approx(math.sqrt(3))
    assert not e.X.flags.writeable and not e.y.flags.writeable


def test_out_of_bounds_numerics_are_clipped_and_clip_count_is_not_exposed() -> None:
    e = enc(HEADER + "a,-10,red,99,yes\nb,1e400,red,-1e9,no\nc,100.0000001,red,5,no\n")
    np.testing.assert_array_equal(e.X[:, 0], [-1.0, 1.0, 1.0])
    np.testing.assert_array_equal(e.X[:, 4], [1.0, -1.0, 1.0])
    names = {f.name for f in fields(EncodedDataset)} | set(dir(e))
    assert not any("clip" in name.lower() for name in names)


def test_cells_are_stripped_and_blank_lines_skipped() -> None:
    plain = enc(HEADER + "a,25,green,0,yes\nb,30,red,1,no\n")
    spaced = enc(" id , age,color ,score, y\r\n\r\n a , 25, green , 0 , yes\r\n   \r\nb,30,red,1,no \r\n\r\n")
    np.testing.assert_array_equal(plain.X, spaced.X)
    np.testing.assert_array_equal(plain.y, spaced.y)
    assert plain.content_hash == spaced.content_hash


def test_quoted_fields_bom_delimiter_and_comments() -> None:
    e = enc(b"\xef\xbb\xbf" + (HEADER + '"a,b",25,"green",0,yes\n').encode())
    np.testing.assert_array_equal(e.X[0], [-0.5, 0, 1, 0, 0])
    s = schema(csv={"delimiter": ";", "comment": "#"})
    e2 = enc("# a comment\nid;age;color;score;y\n#another\nx,y;25;green;0;yes\n", s)
    np.testing.assert_array_equal(e2.X, e.X)


def test_header_false_uses_declared_column_order() -> None:
    s = schema(csv={"header": False, "columns": ["y", "score", "color", "age", "id"]})
    e = enc("yes,0,green,25,a\nno,5,red,0,b\n", s)
    np.testing.assert_array_equal(e.X, [[-0.5, 0, 1, 0, 0], [-1, 1, 0, 0, 1]])
    np.testing.assert_array_equal(e.y, [1, -1])


def test_ignored_column_is_never_inspected() -> None:
    e = enc(HEADER + ",25,green,0,yes\nnan,25,green,0,yes\n?,25,green,0,yes\n")
    assert e.n == 3 and e.d == 5


def test_numeric_label_scaling_clipping_and_decode() -> None:
    s = schema(label={"name": "y", "type": "numeric", "lower": 10, "upper": 20})
    e = enc(HEADER + "a,1,red,0,10\nb,1,red,0,15\nc,1,red,0,20\nd,1,red,0,25\ne,1,red,0,-3\nf,1,red,0,12.5\n", s)
    np.testing.assert_allclose(e.y, [-1, 0, 1, 1, -1, -0.5])
    np.testing.assert_allclose(s.label.decode(e.y), [10, 15, 20, 20, 10, 12.5])  # type: ignore[union-attr]
    assert e.label_bound == 1.0


def test_binary_label_decode() -> None:
    s = schema()
    assert s.label.decode(np.array([1.0, -1.0, 0.3, -0.2])) == ["yes", "no", "yes", "no"]  # type: ignore[union-attr]


def test_impute_policy_fill_and_all_zero_one_hot() -> None:
    e = enc(HEADER + "a,,?,NA,yes\nb,?,,3,no\n", impute_schema())
    np.testing.assert_array_equal(e.X, [[0.0, 0, 0, 0, -1.0], [0.0, 0, 0, 0, 0.6]])


def test_single_level_categorical() -> None:
    obj = copy.deepcopy(SCHEMA)
    obj["features"][1]["levels"] = ["only"]
    e = enc(HEADER + "a,1,only,0,yes\n", DatasetSchema.model_validate(obj))
    assert e.feature_names == ["age", "color=only", "score"]
    assert e.X[0, 1] == 1.0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(-1e6, 1e6, allow_nan=False),
            st.sampled_from(["red", "green", "blue", "?"]),
            st.floats(-1e6, 1e6, allow_nan=False),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_row_norm_bound_holds_for_every_row(rows: list[tuple[float, str, float]]) -> None:
    text = HEADER + "".join(f"i,{a!r},{c},{s!r},yes\n" for a, c, s in rows)
    for sch in (schema(), impute_schema()):
        if sch.missing == "reject" and any(c == "?" for _, c, _ in rows):
            continue
        e = enc(text, sch)
        assert np.all(np.linalg.norm(e.X, axis=1) <= e.row_norm_bound)
        assert np.all(np.abs(e.X) <= 1.0) and np.all(np.abs(e.y) <= e.label_bound)


def test_row_norm_bound_is_attained() -> None:
    e = enc(HEADER + "a,100,blue,-5,yes\nb,-3,red,1e9,no\n")
    norms = np.linalg.norm(e.X, axis=1)
    assert norms.max() == pytest.approx(e.row_norm_bound, rel=1e-15)
    assert np.all(norms <= e.row_norm_bound)


# --------------------------------------------------------------------------------------------------
# content hash
# --------------------------------------------------------------------------------------------------

ROWS = "a,25,green,0,yes\nb,30,red,1,no\n"


def test_content_hash_is_deterministic_and_sensitive() -> None:
    h = enc(HEADER + ROWS).content_hash
    assert len(h) == 64 and h == enc(HEADER + ROWS).content_hash
    # same encoded content from a differently laid out file: same hash
    assert enc("y,score,color,age,id\nyes,0,green,25,zz\nno,1,red,30,yy\n").content_hash == h
    # different values, row order or schema: different hash
    assert enc(HEADER + "a,25,green,0,yes\nb,31,red,1,no\n").content_hash != h
    assert enc(HEADER + "b,30,red,1,no\na,25,green,0,yes\n").content_hash != h
    s = schema(budget={"epsilon": 2.0, "delta": 1e-6})
    assert enc(HEADER + ROWS, s).content_hash != h
    e = enc(HEADER + ROWS)
    assert compute_content_hash(e.X, e.y, e.schema) == h
    # -0.0 and 0.0 hash alike
    assert compute_content_hash(e.X * 0.0 - 0.0, e.y, e.schema) == compute_content_hash(
        np.zeros_like(e.X), e.y, e.schema
    )


# --------------------------------------------------------------------------------------------------
# errors: column, first bad line, and never the private value
# --------------------------------------------------------------------------------------------------

OK = "a,25,green,0,yes\n"

ERROR_CASES: list[tuple[str, str | bytes, DatasetSchema | None, str | None, int | None, str | None]] = [
    # (id, file, schema, column, line, secret that must not appear in the message)
    ("unknown category", HEADER + OK + OK + "a,25,Zebrine,0,yes\n", None, "color", 4, "Zebrine"),
    ("category case-sensitive", HEADER + OK + "a,25,GREEN,0,yes\n", None, "color", 3, "GREEN"),
    ("label not a class", HEADER + OK + "a,25,green,0,Maybe-so\n", None, "y", 3, "Maybe-so"),
    ("non-numeric", HEADER + OK + OK + OK + "a,4x7q,green,0,yes\n", None, "age", 5, "4x7q"),
    ("underscore digits", HEADER + "a,1_234,green,0,yes\n", None, "age", 2, "1_234"),
    ("non-ascii digits", HEADER + "a,١٢,green,0,yes\n", None, "age", 2, "١٢"),
    ("nan", HEADER + OK + "a,25,green,nan,yes\n", None, "score", 3, "nan"),
    ("NaN", HEADER + OK + "a,25,green,NaN,yes\n", None, "score", 3, ",NaN"),
    ("+inf", HEADER + OK + "a,+inf,green,0,yes\n", None, "age", 3, "+inf"),
    ("-Infinity", HEADER + OK + "a,-Infinity,green,0,yes\n", None, "age", 3, "-Infinity"),
    ("missing empty numeric", HEADER + OK + "a,,green,0,yes\n", None, "age", 3, None),
    ("missing NA categorical", HEADER + OK + OK + "a,25,NA,0,yes\n", None, "color", 4, None),
    ("missing ? numeric", HEADER + "a,25,green,?,yes\n", None, "score", 2, None),
    ("missing label", HEADER + OK + "a,25,green,0,\n", None, "y", 3, None),
    ("missing label under impute", HEADER + OK + "a,25,green,0,?\n", "impute", "y", 3, None),
    ("wrong field count", HEADER + OK + "a,25,green,0,yes,Extraneous\n", None, None, 3, "Extraneous"),
    ("too few fields", HEADER + OK + OK + "a,25,green\n", None, None, 4, "green"),
    ("unterminated quote", HEADER + OK + 'a,"25,green,0,yes\nb,30,red,1,no\n', None, None, 3, "30"),
    ("garbage after quote", HEADER + OK + 'a,"25"Secret7,green,0,yes\n', None, None, 3, "Secret7"),
    ("NUL byte", HEADER + OK + "a,25,gr\x00een,0,yes\n", None, None, 3, "gr"),
    ("non-utf8", (HEADER + OK + OK).encode() + b"a,25,gr\xffWhisper,0,yes\n", None, None, 4, "Whisper"),
    ("latin-1 file", (HEADER + OK).encode() + "a,25,grün,0,yes\n".encode("latin-1"), None, None, 3, "gr"),
    ("empty file", "", None, None, None, None),
    ("only blank lines", "\n\n  \n", None, None, None, None),
    ("header only", HEADER, None, None, None, None),
    ("header only + blanks", HEADER + "\n\n", None, None, None, None),
    ("duplicate header", "id,age,color,age,y\n" + OK, None, "age", 1, None),
    ("header lacks column", "id,age,color,y\na,25,green,yes\n", None, "score", 1, None),
    (
        "header extra column",
        "id,age,color,score,y,zip\na,25,green,0,yes,Hidden99\n",
        None,
        "zip",
        1,
        "Hidden99",
    ),
]


@pytest.mark.parametrize(
    ("data", "sch", "column", "line", "secret"),
    [case[1:] for case in ERROR_CASES],
    ids=[case[0] for case in ERROR_CASES],
)
def test_errors_name_column_and_first_line_but_not_the_value(
    data: str | bytes, sch: str | None, column: str | None, line: int | None, secret: str | None
) -> None:
    s = impute_schema() if sch == "impute" else schema()
    with pytest.raises(DatasetValidationError) as info:
        enc(data, s)
    err = info.value
    assert isinstance(err, ValueError)
    assert (err.column, err.line) == (column, line), str(err)
    if line is not None:
        assert f"line {line}" in str(err)
    if column is not None:
        assert repr(column) in str(err)
    if secret is not None:
        assert secret not in str(err)
    assert err.to_dict() == {"column": column, "line": line, "detail": err.message}


def test_unknown_category_message_lists_public_levels() -> None:
    with pytest.raises(DatasetValidationError) as info:
        enc(HEADER + "a,25,Zebrine,0,yes\n")
    assert str(info.value) == ("unknown category in column 'color' at line 2 (declared levels: 'red', 'green', 'blue')")


def test_first_bad_line_wins_across_columns_and_error_kinds() -> None:
    # cell errors in two columns: the earlier line is reported
    with pytest.raises(DatasetValidationError) as info:
        enc(HEADER + OK + OK + OK + "a,25,Zebrine,0,yes\n" + "a,xx,green,0,yes\n" + OK)
    assert (info.value.column, info.value.line) == ("color", 5)
    with pytest.raises(DatasetValidationError) as info:
        enc(HEADER + OK + "a,xx,green,0,yes\n" + "a,25,Zebrine,0,yes\n")
    assert (info.value.column, info.value.line) == ("age", 3)
    # same line, two bad cells: the leftmost column in the file wins
    with pytest.raises(DatasetValidationError) as info:
        enc(HEADER + OK + "a,xx,Zebrine,0,yes\n")
    assert (info.value.column, info.value.line) == ("age", 3)
    with pytest.raises(DatasetValidationError) as info:
        enc("id,color,age,score,y\n" + "a,Zebrine,xx,0,yes\n")
    assert (info.value.column, info.value.line) == ("color", 2)
    # a cell error before a structural error
    with pytest.raises(DatasetValidationError) as info:
        enc(HEADER + OK + "a,25,Zebrine,0,yes\n" + OK + "a,1,2\n")
    assert (info.value.column, info.value.line) == ("color", 3)
    with pytest.raises(DatasetValidationError) as info:
        enc((HEADER + OK + "a,25,Zebrine,0,yes\n").encode() + b"\xff\n")
    assert (info.value.column, info.value.line) == ("color", 3)
    # a structural error before a cell error
    with pytest.raises(DatasetValidationError) as info:
        enc(HEADER + OK + "a,1,2\n" + "a,25,Zebrine,0,yes\n")
    assert (info.value.column, info.value.line) == (None, 3)
    # a malformed record before invalid UTF-8
    with pytest.raises(DatasetValidationError) as info:
        enc((HEADER + 'a,"25"x,green,0,yes\n').encode() + b"\xff\n")
    assert (info.value.column, info.value.line) == (None, 2)


def test_line_numbers_count_physical_lines() -> None:
    s = schema(csv={"comment": "#"})
    text = "# comment\n\nid,age,color,score,y\n" + '"multi\nline id",25,green,0,yes\n' + "\n#c\na,25,Zebrine,0,yes\n"
    with pytest.raises(DatasetValidationError) as info:
        enc(text, s)
    assert info.value.line == 8
    # a multi-line quoted field: the error names the record's first line
    with pytest.raises(DatasetValidationError) as info:
        enc(HEADER + OK + '"x\ny",25,Zebrine,0,yes\n')
    assert info.value.line == 3


def test_comment_prefix_inside_quoted_field_is_data() -> None:
    s = schema(csv={"comment": "#"})
    e = enc(HEADER + '"x\n#y",25,green,0,yes\n', s)
    assert e.n == 1


def test_header_false_field_count_is_checked_against_schema() -> None:
    s = schema(csv={"header": False, "columns": ["id", "age", "color", "score", "y"]})
    with pytest.raises(DatasetValidationError) as info:
        enc("a,25,green,0\nb,25,green,0\n", s)
    assert (info.value.column, info.value.line) == (None, 1)
    with pytest.raises(DatasetValidationError) as info:
        enc("", s)
    assert info.value.line is None and "no data rows" in str(info.value)


def test_error_is_picklable() -> None:
    err = DatasetValidationError("age", 7, "non-numeric value in numeric column 'age' at line 7")
    copy_ = pickle.loads(pickle.dumps(err))
    assert (copy_.column, copy_.line, copy_.message) == ("age", 7, err.message)


def test_schema_may_be_given_as_dict() -> None:
    e = parse_and_encode((HEADER + OK).encode(), copy.deepcopy(SCHEMA))
    assert e.n == 1


# --------------------------------------------------------------------------------------------------
# encode_rows
# --------------------------------------------------------------------------------------------------


def test_encode_rows_matches_csv_encoding() -> None:
    csv_e = enc(HEADER + "a,25,green,0,yes\nb,130,red,-2.5,no\n")
    rows = [
        {"age": 25, "color": "green", "score": "0", "y": "yes", "id": [1, 2]},
        {"age": " 130 ", "color": " red", "score": -2.5, "y": "no"},
    ]
    r = encode_rows(rows, csv_e.schema)
    np.testing.assert_array_equal(r.X, csv_e.X)
    assert r.y is not None
    np.testing.assert_array_equal(r.y, csv_e.y)
    assert r.feature_names == csv_e.feature_names and r.n == 2


def test_encode_rows_label_optional() -> None:
    r = encode_rows([{"age": 1, "color": "red", "score": 0}], schema())
    assert r.y is None and r.X.shape == (1, 5)


def test_encode_rows_impute() -> None:
    r = encode_rows([{"age": None, "color": None, "score": "?"}], impute_schema())
    np.testing.assert_array_equal(r.X, [[0, 0, 0, 0, -1]])


ROW = {"age": 1, "color": "red", "score": 0}

ROW_ERRORS: list[tuple[str, Any, str | None, int | None, str | None]] = [
    ("unknown category", [ROW, ROW | {"color": "Zebrine"}], "color", 2, "Zebrine"),
    ("bool in numeric", [ROW | {"age": True}], "age", 1, "True"),
    ("number in categorical", [ROW | {"color": 3}], "color", 1, None),
    ("nan float", [ROW, ROW, ROW | {"score": math.nan}], "score", 3, "nan"),
    ("inf string", [ROW | {"score": "-inf"}], "score", 1, "-inf"),
    ("list in numeric", [ROW | {"age": [1]}], "age", 1, None),
    ("missing under reject", [ROW | {"age": None}], "age", 1, None),
    ("bad label", [ROW | {"y": "Perhaps"}], "y", 1, "Perhaps"),
    ("label in some rows", [ROW | {"y": "yes"}, ROW], "y", 2, None),
    ("unknown key", [ROW, ROW | {"zip": "02139"}], "zip", 2, "02139"),
    ("absent feature", [ROW, {"age": 1, "color": "red"}], "score", 2, None),
    ("not a mapping", [ROW, ["x"]], None, 2, None),
    ("not a list", "age,color", None, None, None),
    ("empty", [], None, None, None),
    ("cell error before structural", [ROW | {"age": "x"}, ["bad"]], "age", 1, None),
]


@pytest.mark.parametrize(
    ("rows", "column", "line", "secret"),
    [case[1:] for case in ROW_ERRORS],
    ids=[case[0] for case in ROW_ERRORS],
)
def test_encode_rows_errors(rows: Any, column: str | None, line: int | None, secret: str | None) -> None:
    with pytest.raises(DatasetValidationError) as info:
        encode_rows(rows, schema())
    assert (info.value.column, info.value.line) == (column, line), str(info.value)
    if line is not None:
        assert f"row {line}" in str(info.value)
    if secret is not None:
        assert secret not in str(info.value)


# --------------------------------------------------------------------------------------------------
# text: cells, headers and row keys are matched in NFC (issue 35)
# --------------------------------------------------------------------------------------------------

E_NFC, E_NFD = "\u00e9", "e\u0301"


def accented_schema(label_levels: list[str] | None = None) -> DatasetSchema:
    """A categorical feature ``café`` with levels ``thé``, ``café`` and a label with classes ``oui`` / ``é`` — each
    declared in NFD, as a schema may arrive."""
    obj = copy.deepcopy(SCHEMA)
    obj["features"][1] = {"name": f"caf{E_NFD}", "type": "categorical", "levels": [f"th{E_NFD}", f"caf{E_NFD}", "x"]}
    obj["label"] = {"name": "y", "type": "binary", "positive": "oui", "negative": E_NFD}
    if label_levels is not None:
        obj["label"] = {"name": "y", "type": "categorical", "levels": label_levels}
    return DatasetSchema.model_validate(obj)


def accented_table(form: str) -> dict[str, list[Any]]:
    """The same five rows with every accented cell in Unicode ``form`` (NFC or NFD)."""
    e = E_NFC if form == "NFC" else E_NFD
    return {
        "id": ["a", "b", "c", "d", "e"],
        "age": [7.0, 30.0, 45.0, 60.0, 99.0],
        f"caf{E_NFC}": [f"th{e}", f"caf{e}", " x ", f"caf{e}", f"th{e}"],
        "score": [1.0, -2.0, 0.5, 4.0, -5.0],
        "y": ["oui", e, "oui", e, e],
    }


def accented_csv(table: dict[str, list[Any]], header_form: str = "NFC") -> bytes:
    names = [unicodedata.normalize(header_form, name) for name in table]
    rows = zip(*table.values(), strict=True)
    return ("\n".join([",".join(names), *(",".join(str(v) for v in row) for row in rows)]) + "\n").encode()


def test_nfd_cells_encode_like_nfc_on_every_path() -> None:
    """Issue 35: a level written "e\\u0301" (NFD) must be the declared "é". The exact CSV path, the columnar CSV path
    (which must accept the file: it shares the level matching), Parquet and prediction rows give one matrix and one
    content hash for the table in NFC and in NFD."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from privfit.datasets.columnar import encode_csv, encode_parquet

    s = accented_schema()
    results = []
    for form in ("NFC", "NFD"):
        table = accented_table(form)
        data = accented_csv(table)
        assert encode_csv(io.BytesIO(data), s) is not None  # the fast path accepts it
        buffer = io.BytesIO()
        pq.write_table(pa.table(table), buffer)
        results += [parse_and_encode(data, s), parse_and_encode(data, s, columnar=False),
                    encode_parquet(buffer.getvalue(), s)]  # fmt: skip
        rows = [{unicodedata.normalize("NFD", k): v for k, v in zip(table, row, strict=True)}
                for row in zip(*table.values(), strict=True)]  # fmt: skip
        by_rows = encode_rows(rows, s)
        np.testing.assert_array_equal(by_rows.X, results[0].X)
        np.testing.assert_array_equal(by_rows.y, results[0].y)  # type: ignore[arg-type]
    first = results[0]
    assert first.feature_names[1:4] == [f"caf{E_NFC}=th{E_NFC}", f"caf{E_NFC}=caf{E_NFC}", f"caf{E_NFC}=x"]
    np.testing.assert_array_equal(first.X[:, 1:4], [[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 1, 0], [1, 0, 0]])
    np.testing.assert_array_equal(first.y, [1, -1, 1, -1, -1])
    for other in results[1:]:
        assert other.content_hash == first.content_hash
        assert other.X.tobytes() == first.X.tobytes() and other.y.tobytes() == first.y.tobytes()


def test_nfd_class_labels_match_a_categorical_label() -> None:
    s = accented_schema(label_levels=[f"caf{E_NFC}", f"th{E_NFD}", "eau"])
    table = accented_table("NFD") | {"y": [f"caf{E_NFD}", f"th{E_NFC}", "eau", f"th{E_NFD}", f"caf{E_NFC}"]}
    data = accented_csv(table)
    fast, exact = parse_and_encode(data, s), parse_and_encode(data, s, columnar=False)
    assert fast.y.tolist() == exact.y.tolist() == [0.0, 1.0, 2.0, 1.0, 0.0]


def test_an_nfd_csv_header_matches_the_nfc_schema_names() -> None:
    """A header written in NFD names the declared (NFC) columns; the columnar path declines the file (Arrow reads the
    file's own names), so the exact path encodes it, to the same result."""
    s = accented_schema()
    table = accented_table("NFC")
    expected = parse_and_encode(accented_csv(table), s)
    for columnar in (True, False):
        got = parse_and_encode(accented_csv(table, header_form="NFD"), s, columnar=columnar)
        assert got.content_hash == expected.content_hash
    both = {**table, f"caf{E_NFD}": table[f"caf{E_NFC}"]}  # the column twice: once in each form
    with pytest.raises(DatasetValidationError, match="duplicate column"):
        parse_and_encode(accented_csv(both).replace(b"caf\xc3\xa9", "cafe\u0301".encode(), 1), s)


def test_a_parquet_column_named_in_nfd_is_a_clear_error() -> None:
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from privfit.datasets.columnar import encode_parquet

    table = accented_table("NFC")
    table[f"caf{E_NFD}"] = table.pop(f"caf{E_NFC}")
    buffer = io.BytesIO()
    pq.write_table(pa.table(table), buffer)
    with pytest.raises(DatasetValidationError, match="Unicode form other than NFC") as info:
        encode_parquet(buffer.getvalue(), accented_schema())
    assert info.value.column == f"caf{E_NFC}"


def test_prediction_rows_naming_a_column_twice_after_nfc_are_refused() -> None:
    row = {"age": 1, f"caf{E_NFC}": "x", f"caf{E_NFD}": "x", "score": 0}
    with pytest.raises(DatasetValidationError, match="twice") as info:
        encode_rows([row], accented_schema())
    assert (info.value.column, info.value.line) == (f"caf{E_NFC}", 1)


def test_a_schema_stored_in_nfd_still_matches_rows_in_either_form() -> None:
    """A schema stored before the NFC rule (NFD names and levels, read back as stored) matches prediction rows and
    cells written in NFC or in NFD alike."""
    legacy = copy.deepcopy(SCHEMA)
    legacy["features"][1] = {"name": f"caf{E_NFD}", "type": "categorical", "levels": [f"th{E_NFD}", "x"]}
    legacy["label"] = {"name": "y", "type": "binary", "positive": "oui", "negative": E_NFD}
    stored = DatasetSchema.from_stored(legacy)
    assert stored.feature_names[1] == f"caf{E_NFD}=th{E_NFD}"  # as stored
    encoded = [encode_rows([{"age": 1, f"caf{e}": f"th{e}", "score": 0, "y": e}], stored) for e in (E_NFC, E_NFD)]
    for r in encoded:
        np.testing.assert_array_equal(r.X[0, 1:3], [1, 0])
        assert r.y is not None and r.y.tolist() == [-1.0]
