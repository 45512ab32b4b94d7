"""Drafting a schema from a file (privfit.datasets.draft, issue 36 item 8): names, types and levels from the file,
numeric bounds never from it (placeholders, or a wide range for private preprocessing), a valid schema once filled,
and an error naming the column for every ambiguity."""

from __future__ import annotations

import json
import math
import unicodedata
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from privfit.datasets import DatasetSchema, encode_parquet, parse_and_encode
from privfit.datasets.draft import (
    CODE_LEVELS,
    DEFAULT_MAX_LEVELS,
    DEFAULT_WIDE_BOUND,
    PLACEHOLDER_PREFIX,
    RARE_COUNT,
    DraftError,
    draft_schema,
    unfilled,
)
from privfit.datasets.schema import DEFAULT_PREPROCESSING_SHARE, MAX_CLASSES

REPO = Path(__file__).resolve().parents[2]
LOANS = REPO / "examples" / "loans.csv"
DEV_SCHEMAS = REPO / "examples" / "dev"
DEV_DATA = REPO / ".." / "shared" / "data" / "dev"


def write_csv(tmp_path: Path, header: list[str], rows: list[list[Any]], name: str = "data.csv", sep: str = ",") -> Path:
    path = tmp_path / name
    lines = [sep.join(header), *(sep.join(str(cell) for cell in row) for row in rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def numbers_in(document: Any) -> list[float]:
    """Every JSON number in ``document`` (bools excluded)."""
    if isinstance(document, bool):
        return []
    if isinstance(document, int | float):
        return [float(document)]
    if isinstance(document, dict):
        return [n for value in document.values() for n in numbers_in(value)]
    if isinstance(document, list):
        return [n for value in document for n in numbers_in(value)]
    return []


def fill(document: dict[str, Any], values: dict[str, float]) -> dict[str, Any]:
    """``document`` with each placeholder at dotted path p replaced by ``values[p]``."""
    filled = json.loads(json.dumps(document))
    for path in unfilled(filled):
        *parents, key = path.split(".")
        container: Any = filled
        for part in parents:
            container = container[int(part)] if isinstance(container, list) else container[part]
        container[key] = values[path]
    assert unfilled(filled) == []
    return filled


def loans_bounds() -> dict[str, float]:
    """Placeholder path → value, from examples/loans-schema.json (the owner's codebook bounds and budget)."""
    declared = json.loads((REPO / "examples" / "loans-schema.json").read_text())
    values = {f"budget.{k}": v for k, v in declared["budget"].items()}
    for i, feature in enumerate(declared["features"]):
        if feature["type"] == "numeric":
            values[f"features.{i}.lower"], values[f"features.{i}.upper"] = feature["lower"], feature["upper"]
    return values


def error_of(path: Path, **options: Any) -> DraftError:
    with pytest.raises(DraftError) as caught:
        draft_schema(path, **options)
    assert "\n" not in str(caught.value)  # one line
    return caught.value


# ---------------------------------------------------------------------------------------------------------------
# what a draft holds
# ---------------------------------------------------------------------------------------------------------------


def test_loans_draft_has_names_types_levels_and_placeholders_and_no_number_from_the_data():
    draft = draft_schema(LOANS, label="default")
    schema = draft.schema
    assert draft.rows == 3000
    assert schema["label"] == {"name": "default", "type": "binary", "positive": "yes", "negative": "no"}
    assert [(f["name"], f["type"]) for f in schema["features"]] == [
        ("age", "numeric"), ("income", "numeric"), ("debt_ratio", "numeric"), ("employment", "categorical"),
    ]  # fmt: skip
    assert schema["features"][3]["levels"] == ["retired", "salaried", "self-employed", "unemployed"]  # sorted
    assert schema["missing"] == "reject" and "preprocessing" not in schema and "csv" not in schema
    # no number at all: bounds and budget are placeholders the owner fills in
    assert numbers_in(schema) == []
    assert draft.placeholders == [
        "features.0.lower", "features.0.upper", "features.1.lower", "features.1.upper",
        "features.2.lower", "features.2.upper", "budget.epsilon", "budget.delta",
    ]  # fmt: skip
    for path in draft.placeholders:
        assert str(eval_path(schema, path)).startswith(PLACEHOLDER_PREFIX)
    assert "not the data's minimum" in schema["features"][0]["lower"]
    assert "1/n = 1/3000" in schema["budget"]["delta"]  # n is public (DESIGN §1.1)
    # the notes say why bounds are not read off the data, and that levels are public
    notes = " ".join(draft.notes)
    assert "never from the data's minimum or maximum" in notes and "publishes one person's value" in notes
    assert "levels of employment were read from the file and are part of the public schema" in notes
    assert "positive class 'yes'" in notes and "8 placeholder(s) to fill" in notes
    assert json.loads(draft.to_json()) == schema


def eval_path(document: Any, path: str) -> Any:
    for part in path.split("."):
        document = document[int(part)] if isinstance(document, list) else document[part]
    return document


def test_the_unfilled_draft_is_refused_by_the_schema_and_the_filled_one_encodes_the_file():
    draft = draft_schema(LOANS, label="default")
    with pytest.raises(ValueError, match=r"features\.0\.numeric\.lower\n  Input should be a valid number"):
        DatasetSchema.model_validate(draft.schema)
    schema = DatasetSchema.model_validate(fill(draft.schema, loans_bounds()))
    encoded = parse_and_encode(LOANS.read_bytes(), schema)
    assert encoded.n == 3000 and encoded.feature_names[:3] == ["age", "income", "debt_ratio"]
    expected = DatasetSchema.model_validate_json((REPO / "examples" / "loans-schema.json").read_text())
    assert schema.label == expected.label and schema.budget == expected.budget
    assert sorted(schema.feature_names) == sorted(expected.feature_names)  # the example lists levels unsorted


def test_derive_bounds_are_one_wide_range_independent_of_the_data_with_preprocessing(tmp_path: Path):
    draft = draft_schema(LOANS, label="default", bounds="derive", epsilon=2.0, delta=1e-6)
    schema = draft.schema
    W = DEFAULT_WIDE_BOUND
    assert [(f["lower"], f["upper"]) for f in schema["features"] if f["type"] == "numeric"] == [(-W, W)] * 3
    assert schema["preprocessing"] == {"share": DEFAULT_PREPROCESSING_SHARE}
    assert draft.placeholders == [] and schema["budget"] == {"epsilon": 2.0, "delta": 1e-6}
    parse_and_encode(LOANS.read_bytes(), DatasetSchema.model_validate(schema))
    assert "private preprocessing" in " ".join(draft.notes) and "clipped_cells" in " ".join(draft.notes)
    # the same columns holding other values draft to the same schema: nothing numeric is read into it
    lines = LOANS.read_text().splitlines()
    scaled = [lines[0]] + [
        ",".join([str(int(a) * 3), str(float(i) * 7.5), str(float(r) / 9), e, d])
        for a, i, r, e, d in (line.split(",") for line in lines[1:])
    ]
    other = tmp_path / "other.csv"
    other.write_text("\n".join(scaled) + "\n")
    assert draft_schema(other, label="default", bounds="derive", epsilon=2.0, delta=1e-6).schema == schema
    assert draft_schema(LOANS, label="default", bounds="derive", wide_bound=5e7).schema["features"][0]["upper"] == 5e7


def test_placeholder_bounds_do_not_depend_on_the_data_either(tmp_path: Path):
    a = write_csv(tmp_path, ["x", "y"], [[i * 0.5, "yes" if i % 2 else "no"] for i in range(40)], "a.csv")
    b = write_csv(tmp_path, ["x", "y"], [[i * 900.25, "no" if i % 3 else "yes"] for i in range(55)], "b.csv")
    da, db = draft_schema(a, label="y"), draft_schema(b, label="y")
    assert da.schema["features"] == db.schema["features"] and da.schema["label"] == db.schema["label"]


def test_levels_are_nfc_and_sorted_integer_codes_by_value(tmp_path: Path):
    decomposed = unicodedata.normalize("NFD", "é")
    rows = [["é", 2, "yes"], [decomposed, 10, "no"], [" b ", 1, "yes"], ["a", 2, "no"]] * 3
    draft = draft_schema(write_csv(tmp_path, ["c", "code", "y"], rows), label="y", categorical=["code"])
    features = {f["name"]: f for f in draft.schema["features"]}
    assert features["c"]["levels"] == ["a", "b", "é"]  # one level for both forms, stripped, NFC
    assert features["code"]["levels"] == ["1", "2", "10"]  # integer codes by value


def test_a_dev_like_csv_with_codes_identifiers_missing_cells_and_a_semicolon(tmp_path: Path):
    header = ["id", "dept", "senior", "tenure", "charges", "total", "churn"]
    rows = [
        [f"C{i:04d}", ["sales", "hr", "it"][i % 3], i % 2, i % 60, 20 + (i * 7) % 90, "" if i % 25 == 0 else i * 3.5,
         "Yes" if i % 4 == 0 else "No"]
        for i in range(300)
    ]  # fmt: skip
    path = write_csv(tmp_path, header, rows, sep=";")
    assert "--delimiter ';'" in str(error_of(path, label="churn"))
    error = error_of(path, label="churn", delimiter=";")
    assert error.column == "id" and "--ignore id" in str(error)
    error = error_of(path, label="churn", delimiter=";", ignore=["id"])
    assert error.column == "senior" and "--categorical senior" in str(error) and "--numeric senior" in str(error)
    error = error_of(path, label="churn", delimiter=";", ignore=["id"], categorical=["senior"])
    assert error.column == "total" and "--missing impute" in str(error) and "12 of 300 rows" in str(error)
    draft = draft_schema(path, label="churn", delimiter=";", ignore=["id"], categorical=["senior"], missing="impute")
    schema = draft.schema
    assert schema["csv"] == {"delimiter": ";"} and schema["missing"] == "impute"
    assert schema["features"][0] == {"name": "id", "type": "ignore"}
    assert schema["features"][2] == {"name": "senior", "type": "categorical", "levels": ["0", "1"]}
    assert schema["label"]["positive"] == "Yes"
    assert [p for p in draft.placeholders if p.endswith(".fill")] == ["features.3.fill", "features.4.fill",
                                                                      "features.5.fill"]  # fmt: skip
    values = {p: (0.0 if p.endswith((".lower", ".fill")) else 1e5) for p in draft.placeholders}
    values.update({"budget.epsilon": 3.0, "budget.delta": 1e-6})
    encoded = parse_and_encode(path.read_bytes(), DatasetSchema.model_validate(fill(schema, values)))
    assert encoded.n == 300


def test_numeric_and_categorical_labels_and_the_positive_class(tmp_path: Path):
    rows = [[i * 0.1, i % 7, ["lo", "mid", "hi"][i % 3], ["up", "down"][i % 2]] for i in range(60)]
    path = write_csv(tmp_path, ["x", "grade", "band", "move"], rows)
    numeric = draft_schema(path, label="x", ignore=["move"], categorical=["grade"])
    assert numeric.schema["label"]["type"] == "numeric" and numeric.placeholders[:2] == ["label.lower", "label.upper"]
    error = error_of(path, label="grade")
    assert error.column == "grade" and "--categorical grade" in str(error)
    graded = draft_schema(path, label="grade", categorical=["grade"], ignore=["move"])
    assert graded.schema["label"] == {"name": "grade", "type": "categorical", "levels": [str(i) for i in range(7)]}
    assert draft_schema(path, label="grade", numeric=["grade"], ignore=["move"]).schema["label"]["type"] == "numeric"
    assert draft_schema(path, label="band", ignore=["move"], numeric=["grade"]).schema["label"]["levels"] == [
        "hi",
        "lo",
        "mid",
    ]
    error = error_of(path, label="move", numeric=["grade"])
    assert error.column == "move" and "--positive" in str(error)
    assert draft_schema(path, label="move", positive="up", numeric=["grade"]).schema["label"] == {
        "name": "move", "type": "binary", "positive": "up", "negative": "down",
    }  # fmt: skip
    assert "not one of its classes" in str(error_of(path, label="move", positive="sideways", numeric=["grade"]))
    assert "two-class" in str(error_of(path, label="band", positive="hi", numeric=["grade"]))
    assert "label 'x' is numeric: --positive" in str(error_of(path, label="x", positive="hi", numeric=["grade"]))


def test_a_parquet_file_drafts_like_the_same_csv_and_encodes(tmp_path: Path):
    n = 80
    table = pa.table({
        "amount": pa.array([float(i) * 1.5 for i in range(n)]),
        "visits": pa.array(list(range(n)), type=pa.int32()),
        "region": pa.array([["north", "south"][i % 2] for i in range(n)]).dictionary_encode(),
        "y": pa.array(["yes" if i % 3 else "no" for i in range(n)]),
    })  # fmt: skip
    pq.write_table(table, tmp_path / "d.parquet")
    draft = draft_schema(tmp_path / "d.parquet", label="y", epsilon=1.0, delta=1e-6)
    csv_path = write_csv(tmp_path, table.column_names, [list(r.values()) for r in table.to_pylist()])
    assert draft.schema == draft_schema(csv_path, label="y", epsilon=1.0, delta=1e-6).schema
    values = {p: (0.0 if p.endswith(".lower") else 1e3) for p in draft.placeholders}
    schema = DatasetSchema.model_validate(fill(draft.schema, values))
    with (tmp_path / "d.parquet").open("rb") as source:
        assert encode_parquet(source, schema).n == n


# ---------------------------------------------------------------------------------------------------------------
# levels that would publish private values are refused or pointed out
# ---------------------------------------------------------------------------------------------------------------


def test_high_cardinality_and_identifier_columns_are_refused_not_listed(tmp_path: Path):
    many = DEFAULT_MAX_LEVELS + 1
    rows = [[f"v{i % many}", f"id{i}", "yes" if i % 2 else "no"] for i in range(3 * many)]
    path = write_csv(tmp_path, ["wide", "ident", "y"], rows)
    error = error_of(path, label="y")
    assert error.column == "wide" and f"more than {DEFAULT_MAX_LEVELS} distinct values" in str(error)
    assert "--max-levels" in str(error)
    raised = draft_schema(path, label="y", max_levels=many, ignore=["ident"])
    assert len(raised.schema["features"][0]["levels"]) == many
    # distinct ≈ rows although under the limit: an identifier
    small = write_csv(tmp_path, ["ident", "y"], [[f"p{i}", "yes" if i % 2 else "no"] for i in range(30)], "s.csv")
    error = error_of(small, label="y")
    assert error.column == "ident" and "30 distinct values in 30 rows" in str(error)
    assert draft_schema(small, label="y", categorical=["ident"]).schema["features"][0]["type"] == "categorical"


def test_rare_levels_are_pointed_out(tmp_path: Path):
    rows = [["common", "yes" if i % 2 else "no"] for i in range(40)] + [["rare", "no"]]
    draft = draft_schema(write_csv(tmp_path, ["kind", "y"], rows), label="y")
    assert any(note.startswith("kind have levels seen in fewer than") for note in draft.notes)
    assert RARE_COUNT > 1


def test_an_ignored_column_is_never_read(tmp_path: Path):
    rows = [["x\u200bz" if i % 2 else str(i), i * 1.5, "yes" if i % 2 else "no"] for i in range(30)]
    path = write_csv(tmp_path, ["notes", "v", "y"], rows)
    assert error_of(path, label="y").column == "notes"
    assert draft_schema(path, label="y", ignore=["notes"]).schema["features"][0] == {"name": "notes", "type": "ignore"}


# ---------------------------------------------------------------------------------------------------------------
# every ambiguity is an error naming the column
# ---------------------------------------------------------------------------------------------------------------


def test_mixed_types_empty_columns_and_non_finite_numbers(tmp_path: Path):
    rows = [[i if i % 5 else "n/a", "", "nan" if i == 3 else i * 0.5, "yes" if i % 2 else "no"] for i in range(30)]
    path = write_csv(tmp_path, ["mixed", "empty", "odd", "y"], rows)
    error = error_of(path, label="y")
    assert error.column == "mixed" and "mixes numbers (24 cells) and text (6 cells)" in str(error)
    assert "--categorical mixed" in str(error)
    error = error_of(path, label="y", categorical=["mixed"])
    assert error.column == "empty" and "is empty" in str(error)
    error = error_of(path, label="y", categorical=["mixed"], ignore=["empty"])
    assert error.column == "odd" and "NaN or infinite" in str(error)
    error = error_of(path, label="y", numeric=["mixed"], ignore=["empty", "odd"])
    assert error.column == "mixed" and "--numeric, but 6 of its cells are not numbers" in str(error)


def test_few_distinct_integers_must_be_chosen(tmp_path: Path):
    rows = [[i % CODE_LEVELS, i % (CODE_LEVELS + 1), i * 1.0, "yes" if i % 2 else "no"] for i in range(100)]
    path = write_csv(tmp_path, ["code", "count", "real", "y"], rows)
    error = error_of(path, label="y")
    assert error.column == "code" and f"only {CODE_LEVELS} distinct integers" in str(error)
    draft = draft_schema(path, label="y", numeric=["code"])
    assert [f["type"] for f in draft.schema["features"]] == ["numeric", "numeric", "numeric"]


@pytest.mark.parametrize(
    ("header", "column", "says"),
    [
        (["a", "a", "y"], "a", "appears more than once"),
        (["a", " a", "y"], "a", "appears more than once"),  # CSV headers are stripped, as the upload does
        ([unicodedata.normalize("NFD", "é"), "b", "y"], unicodedata.normalize("NFD", "é"), "not in Unicode NFC"),
        (["a\u200bb", "b", "y"], "a\u200bb", "contains U+200B ZERO WIDTH SPACE"),
        (["", "b", "y"], "", "empty name"),
    ],
)
def test_bad_column_names(tmp_path: Path, header: list[str], column: str, says: str):
    path = write_csv(tmp_path, header, [[1.5 * i, 2.5 * i, "yes" if i % 2 else "no"] for i in range(20)])
    error = error_of(path, label="y")
    assert error.column == column and says in str(error)


def test_label_errors(tmp_path: Path):
    rows = [[i * 1.5, "only", "yes" if i % 2 else "", f"c{i}", f"k{i % (MAX_CLASSES + 1)}"] for i in range(300)]
    path = write_csv(tmp_path, ["x", "one", "gappy", "ident", "wide"], rows)
    error = error_of(path, label="nope")
    assert error.column == "nope" and "unknown label column 'nope' (columns: x, one, gappy, ident, wide)" in str(error)
    assert "name the label column with --label" in str(error_of(path, label=None))
    error = error_of(path, label="one", ignore=["gappy", "ident", "wide"])
    assert error.column == "one" and "single class" in str(error)
    error = error_of(path, label="gappy", ignore=["one", "ident", "wide"])
    assert error.column == "gappy" and "missing cells (150 rows)" in str(error)
    error = error_of(path, label="ident", ignore=["one", "gappy", "wide"])
    assert error.column == "ident" and f"more than {MAX_CLASSES} classes" in str(error)
    error = error_of(path, label="wide", ignore=["one", "gappy", "ident"], max_levels=MAX_CLASSES + 50)
    assert error.column == "wide" and f"has {MAX_CLASSES + 1} classes" in str(error) and "no model fits" in str(error)
    assert "cannot be ignored" in str(error_of(path, label="x", ignore=["x"]))


def test_parquet_types_no_model_reads(tmp_path: Path):
    n = 30
    table = pa.table({
        "flag": pa.array([i % 2 == 0 for i in range(n)]),
        "code": pa.array([i % 3 for i in range(n)], type=pa.int64()),
        "v": pa.array([float(i) for i in range(n)]),
    })  # fmt: skip
    pq.write_table(table, tmp_path / "t.parquet")
    error = error_of(tmp_path / "t.parquet", label="flag")
    assert error.column == "flag" and "Parquet type bool" in str(error) and "no model reads" in str(error)
    error = error_of(tmp_path / "t.parquet", label="v", categorical=["code"], ignore=["flag"])
    assert error.column == "code" and "needs a string column in a Parquet file" in str(error)
    error = error_of(tmp_path / "t.parquet", label="code", categorical=["code"], ignore=["flag"])
    assert error.column == "code" and "needs a string column" in str(error)
    assert draft_schema(tmp_path / "t.parquet", label="v", numeric=["code"], ignore=["flag"]).schema["label"]["type"]


def test_files_that_are_not_csv_or_parquet(tmp_path: Path):
    (tmp_path / "book.xlsx").write_bytes(b"PK\x03\x04 not a table")
    assert "not a CSV or Parquet file" in str(error_of(tmp_path / "book.xlsx", label="y"))
    (tmp_path / "fake.parquet").write_text("a,y\n1,yes\n")
    assert "not a Parquet file" in str(error_of(tmp_path / "fake.parquet", label="y"))
    (tmp_path / "binary.csv").write_bytes(b"a,y\n\xff\xfe\x00\x01,yes\n")
    assert "not a UTF-8 text file" in str(error_of(tmp_path / "binary.csv", label="y"))
    (tmp_path / "header.csv").write_text("a,y\n")
    assert "no data rows" in str(error_of(tmp_path / "header.csv", label="y"))
    (tmp_path / "empty.csv").write_text("")
    assert "draft can read" in str(error_of(tmp_path / "empty.csv", label="y"))


def test_bad_choices_and_budgets(tmp_path: Path):
    path = write_csv(tmp_path, ["x", "y"], [[i * 1.5, "yes" if i % 2 else "no"] for i in range(40)])
    assert "--numeric 'z': no such column" in str(error_of(path, label="y", numeric=["z"]))
    assert "both --categorical and --numeric" in str(error_of(path, label="y", categorical=["x"], numeric=["x"]))
    assert "no feature left" in str(error_of(path, label="y", ignore=["x"]))
    error = error_of(path, label="y", epsilon=-1.0)
    assert "refused by the upload's rules: budget.epsilon: Input should be greater than 0" in str(error)
    assert "not below 1/n" in str(error_of(path, label="y", epsilon=1.0, delta=0.1))
    assert "--wide-bound" in str(error_of(path, label="y", bounds="derive", wide_bound=math.inf))
    assert "--max-levels" in str(error_of(path, label="y", max_levels=0))
    assert "--delimiter" in str(error_of(path, label="y", delimiter='"'))


# ---------------------------------------------------------------------------------------------------------------
# the development datasets, where ../shared/data/dev is present: the draft agrees with the owner-written schemas
# ---------------------------------------------------------------------------------------------------------------

DEV_CHOICES: dict[str, dict[str, Any]] = {
    "hr_attrition": {"label": "left", "categorical": ["left", "Work_accident", "promotion_last_5years"],
                     "numeric": ["number_project", "time_spend_company"]},
    "telco_churn": {"label": "Churn", "ignore": ["customerID"], "categorical": ["SeniorCitizen"],
                    "missing": "impute"},
    "power_plant": {"label": "PE"},
    "wine_white": {"label": "quality", "numeric": ["quality"], "delimiter": ";"},
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(DEV_CHOICES))
def test_dev_drafts_match_the_owner_written_schemas(name: str):
    data = DEV_DATA / f"{name}.csv"
    if not data.is_file():
        pytest.skip(f"{data} is absent (the development data lives outside the repository)")
    draft = draft_schema(data, **DEV_CHOICES[name])
    expected = json.loads((DEV_SCHEMAS / f"{name}-schema.json").read_text())

    def shape(entry: dict[str, Any]) -> tuple[str, str, list[str] | None]:
        levels = entry.get("levels") or ([entry["positive"], entry["negative"]] if "positive" in entry else None)
        return entry["name"], entry["type"], sorted(levels) if levels else None

    assert shape(draft.schema["label"]) == shape(expected["label"])
    assert sorted(map(shape, draft.schema["features"])) == sorted(map(shape, expected["features"]))
    assert draft.schema["missing"] == expected["missing"]
    assert numbers_in(draft.schema) == []
