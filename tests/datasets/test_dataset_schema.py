"""Validation of the declared public dataset schema (privfit.datasets.schema)."""

from __future__ import annotations

import copy
import json
import math
import unicodedata
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from privfit.datasets import DatasetSchema, NumericLabel


def base() -> dict[str, Any]:
    return {
        "label": {"name": "y", "type": "binary", "positive": "yes", "negative": "no"},
        "features": [
            {"name": "age", "type": "numeric", "lower": 0, "upper": 100},
            {"name": "color", "type": "categorical", "levels": ["red", "green", "blue"]},
            {"name": "id", "type": "ignore"},
        ],
        "budget": {"epsilon": 1.0, "delta": 1e-6},
    }


def with_(path: str, value: Any) -> dict[str, Any]:
    """A copy of base() with the dotted path set (value ... deletes it)."""
    obj = copy.deepcopy(base())
    *parents, last = path.split(".")
    cur: Any = obj
    for p in parents:
        cur = cur[int(p)] if p.isdigit() else cur.setdefault(p, {})
    key: Any = int(last) if last.isdigit() else last
    if value is ...:
        del cur[key]
    else:
        cur[key] = value
    return obj


def test_valid_schema_from_json_and_defaults() -> None:
    s = DatasetSchema.model_validate_json(json.dumps(base()))
    assert s.missing == "reject"
    assert s.csv.header is True and s.csv.na_values == ["", "NA", "?"] and s.csv.delimiter == ","
    assert s.column_names == ["y", "age", "color", "id"]
    assert s.feature_names == ["age", "color=red", "color=green", "color=blue"]
    assert s.dimension == 4
    assert s.row_norm_bound == pytest.approx(math.sqrt(2))
    assert s.label_bound == 1.0
    assert DatasetSchema.model_validate_json(s.model_dump_json()) == s


def field_errors(obj: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as info:
        DatasetSchema.model_validate(obj)
    return str(info.value)


@pytest.mark.parametrize(
    ("obj", "fragments"),
    [
        (with_("extra_key", 1), ["extra_key", "Extra inputs are not permitted"]),
        (with_("features.0.unit", "years"), ["features.0.numeric.unit"]),
        (with_("budget.foo", 1), ["budget.foo"]),
        (with_("features.0.upper", 0), ["features.0.numeric", "'age'", "lower"]),
        (with_("features.0.upper", -5), ["'age'", "strictly less"]),
        (with_("features.0.upper", math.inf), ["features.0.numeric.upper", "finite"]),
        (with_("features.0.lower", math.nan), ["features.0.numeric.lower", "finite"]),
        (with_("features.0.lower", "0"), ["features.0.numeric.lower", "valid number"]),
        (with_("features.0.lower", True), ["features.0.numeric.lower"]),
        (with_("features.1.levels", []), ["features.1.categorical.levels", "at least 1"]),
        (with_("features.1.levels", ["a", "b", "a"]), ["'color'", "duplicate levels", "'a'"]),
        (with_("features.1.levels", [" a"]), ["'color'", "whitespace"]),
        (with_("features.1.levels", [""]), ["'color'", "non-empty"]),
        (with_("features.1.levels", ["red", "?"]), ["'color'", "na_values"]),
        (with_("features.2.name", "age"), ["duplicate feature names", "'age'"]),
        (with_("features.2.name", "y"), ["label name 'y'", "also declared as a feature"]),
        (with_("features.2.name", ""), ["features.2.ignore.name"]),
        (with_("features.2.name", " id"), ["whitespace"]),
        (with_("features.1.type", "text"), ["features.1", "does not match any of the expected tags"]),
        (with_("features", []), ["features", "at least 1"]),
        (with_("features", [{"name": "id", "type": "ignore"}]), ["at least one feature must be numeric or"]),
        (with_("label.negative", "yes"), ["label 'y'", "must differ"]),
        (with_("label.positive", "NA"), ["label 'y'", "na_values"]),
        (with_("label.type", "multiclass"), ["label", "does not match any of the expected tags"]),
        (with_("label.name", ...), ["label.binary.name", "Field required"]),
        (with_("budget.epsilon", 0), ["budget.epsilon", "greater than 0"]),
        (with_("budget.epsilon", -1), ["budget.epsilon"]),
        (with_("budget.epsilon", math.inf), ["budget.epsilon", "finite"]),
        (with_("budget.delta", 0), ["budget.delta", "greater than 0"]),
        (with_("budget.delta", 1), ["budget.delta", "less than 1"]),
        (with_("budget.delta", ...), ["budget.delta", "Field required"]),
        (with_("budget", ...), ["budget", "Field required"]),
        (with_("missing", "drop"), ["missing", "'reject' or 'impute'"]),
        (with_("missing", "impute"), ["'age'", "'fill' is required"]),
        (with_("features.0.fill", 50), ["'age'", "only allowed when missing = 'impute'"]),
        (with_("csv.header", False), ["csv.columns is required"]),
        (with_("csv.columns", ["y", "age", "color", "id"]), ["csv.columns is only allowed"]),
        (with_("csv.delimiter", ";;"), ["csv.delimiter"]),
        (with_("csv.delimiter", '"'), ["csv.delimiter"]),
        (with_("csv.na_values", [" NA"]), ["csv.na_values", "whitespace"]),
    ],
)
def test_invalid_schema_names_the_field(obj: dict[str, Any], fragments: list[str]) -> None:
    message = field_errors(obj)
    for fragment in fragments:
        assert fragment in message, message


def test_bounds_whose_span_overflows_are_rejected() -> None:
    obj = with_("features.0.lower", -1.7e308)
    obj["features"][0]["upper"] = 1.7e308
    message = field_errors(obj)
    assert "'age'" in message and "overflows" in message


def test_impute_with_fill() -> None:
    obj = with_("missing", "impute")
    obj["features"][0]["fill"] = 30
    assert DatasetSchema.model_validate(obj).features[0].fill == 30.0  # type: ignore[union-attr]
    obj["features"][0]["fill"] = 101
    assert "must lie within" in field_errors(obj)


def test_csv_columns_must_match_declared_names() -> None:
    obj = with_("csv", {"header": False, "columns": ["y", "age", "color"]})
    assert "not listed: ['id']" in field_errors(obj)
    obj = with_("csv", {"header": False, "columns": ["y", "age", "color", "id", "zzz"]})
    assert "not declared: ['zzz']" in field_errors(obj)
    obj = with_("csv", {"header": False, "columns": ["y", "age", "color", "id", "id"]})
    assert "duplicate names ['id']" in field_errors(obj)
    obj = with_("csv", {"header": False, "columns": ["id", "color", "y", "age"]})
    assert DatasetSchema.model_validate(obj).csv.columns == ["id", "color", "y", "age"]


def test_schema_is_immutable() -> None:
    s = DatasetSchema.model_validate(base())
    with pytest.raises(ValidationError):
        s.missing = "impute"  # type: ignore[misc]


def test_row_norm_bound_is_never_below_exact_sqrt() -> None:
    for k in range(1, 300):
        features = [{"name": f"x{i}", "type": "numeric", "lower": 0, "upper": 1} for i in range(k)]
        s = DatasetSchema.model_validate(with_("features", features))
        assert Fraction(s.row_norm_bound) ** 2 >= k, k
        assert s.row_norm_bound == pytest.approx(math.sqrt(k), rel=1e-15)


def test_numeric_label_scale_and_decode_are_inverse() -> None:
    lab = NumericLabel(name="t", type="numeric", lower=-3.0, upper=5.0)
    raw = np.array([-3.0, -1.0, 1.0, 5.0, 7.0, -10.0])
    scaled = lab.scale(raw)
    assert np.allclose(scaled, [-1.0, -0.5, 0.0, 1.0, 1.0, -1.0])
    assert np.allclose(lab.decode(scaled[:4]), raw[:4])


def test_numeric_label_decode_never_leaves_the_declared_range() -> None:
    """A linear model extrapolates; its decoded predictions are clipped to [lower, upper] (issue 21 §6)."""
    lab = NumericLabel(name="income", type="numeric", lower=0.0, upper=250_000.0)
    assert lab.decode(np.array([-1.3, -1.0, 0.0, 1.0, 2.5])).tolist() == [0.0, 0.0, 125_000.0, 250_000.0, 250_000.0]


# --------------------------------------------------------------------------------------------------
# text rules (privfit.text, issue 35): names and levels in NFC, hidden characters refused
# --------------------------------------------------------------------------------------------------

E_NFC, E_NFD = "\u00e9", "e\u0301"  # "é" precomposed and decomposed: canonically equivalent, they look the same


def test_nfc_and_nfd_spellings_of_a_level_are_one_one_hot_feature() -> None:
    """Issue 35: levels "é" (NFC) and "e\\u0301" (NFD) became two one-hot features that look the same. Declared in
    either form, names, levels and classes are stored in NFC; the declaration hashes alike."""
    nfd = with_("features.1.levels", [f"caf{E_NFD}", "tea"])
    nfd["features"][1]["name"] = f"boisson pr{E_NFD}f{E_NFD}r{E_NFD}e"
    nfd["label"] = {"name": "y", "type": "binary", "positive": f"s{E_NFD}", "negative": "no"}
    nfc_ = json.loads(unicodedata.normalize("NFC", json.dumps(nfd, ensure_ascii=False)))
    a, b = DatasetSchema.model_validate(nfd), DatasetSchema.model_validate(nfc_)
    assert a == b and a.canonical_json() == b.canonical_json()
    assert a.feature_names == [
        "age",
        f"boisson pr{E_NFC}f{E_NFC}r{E_NFC}e=caf{E_NFC}",
        f"boisson pr{E_NFC}f{E_NFC}r{E_NFC}e=tea",
    ]
    assert a.label.positive == f"s{E_NFC}"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("path", "value", "fragments"),
    [
        ("features.1.levels", [E_NFC, "red", E_NFD], ["'color'", "duplicate levels", "NFC"]),
        ("features.2.name", f"caf{E_NFD}", []),  # unique: fine (the next case clashes)
        ("label", {"name": "y", "type": "binary", "positive": E_NFC, "negative": E_NFD}, ["must differ", "NFC"]),
        ("label", {"name": "y", "type": "categorical", "levels": ["a", E_NFD, E_NFC]}, ["duplicate levels", "NFC"]),
    ],
)
def test_levels_equal_after_nfc_are_a_duplicate_naming_the_field(path: str, value: Any, fragments: list[str]) -> None:
    obj = with_(path, value)
    if not fragments:
        obj["features"][0]["name"] = f"caf{E_NFC}"
        fragments = ["duplicate feature names", "NFC"]
    message = field_errors(obj)
    for fragment in fragments:
        assert fragment in message, message


@pytest.mark.parametrize(
    ("path", "value", "loc"),
    [
        ("features.1.name", "co\u202elor", "features.1.categorical.name"),
        ("features.0.name", "age\u200b", "features.0.numeric.name"),
        ("features.2.name", "i\u2066d", "features.2.ignore.name"),
        ("features.1.levels", ["red", "gre\u202een"], "features.1.categorical.levels.1"),
        ("label.name", "\ufeffy", "label.binary.name"),
        ("label.positive", "ye\u200ds", "label.binary.positive"),
        ("csv", {"header": False, "columns": ["y", "age", "color", "i\u202ed"]}, "csv.columns.3"),
    ],
)
def test_a_name_or_level_with_a_hidden_character_is_refused_naming_field_and_character(
    path: str, value: Any, loc: str
) -> None:
    with pytest.raises(ValidationError) as info:
        DatasetSchema.model_validate(with_(path, value))
    (error,) = info.value.errors()
    assert ".".join(str(p) for p in error["loc"]) == loc and error["type"] == "hidden_character"
    hidden = next(c for c in json.dumps(value, ensure_ascii=False) if unicodedata.category(c) == "Cf")
    assert f"contains U+{ord(hidden):04X} {unicodedata.name(hidden)}" in error["msg"]


def test_a_stored_schema_is_read_back_as_it_was() -> None:
    """A schema stored before the text rules (a hidden character, an NFD level) still loads for its predictions."""
    legacy = with_("features.1.levels", ["red", f"verd{E_NFD}", "bl\u202eue"])
    with pytest.raises(ValidationError):
        DatasetSchema.model_validate(legacy)
    stored = DatasetSchema.from_stored(legacy)
    assert stored.features[1].levels == ["red", f"verd{E_NFD}", "bl\u202eue"]  # type: ignore[union-attr]
