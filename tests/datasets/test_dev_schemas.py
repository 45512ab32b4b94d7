"""The owner-written schemas of the four development datasets (``examples/dev/``, issue 21; and wine's multiclass
variant, issue 22) validate, and each dev CSV in ``../shared/data/dev/`` encodes with its schema: the row count of
the data README, the dimension the schema implies, every encoded feature in [−1, 1] and label within the schema's
label bound. Skips with a reason when the data directory is absent.

The same for the non-expert schemas (issue 34: ``examples/dev/<name>-naive-schema.json`` and
``examples/adult-naive-schema.json``): codebook-wide bounds and no transforms, otherwise the expert schema's
declarations; their bounds contain every value of the file (no cell is clipped)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from privfit.datasets import CategoricalFeature, DatasetSchema, NumericFeature, NumericLabel, parse_and_encode
from privfit.datasets.schema import counting_clipped_cells

REPO = Path(__file__).resolve().parents[2]
SCHEMA_DIR = REPO / "examples" / "dev"
DEV_DIR = Path(__file__).parents[2] / ".." / "shared" / "data" / "dev"
ADULT_DATA = Path(__file__).parents[2] / ".." / "shared" / "data" / "adult" / "adult.data"
NAIVE = "-naive"  # suffix of a non-expert schema: examples/dev/<name>-naive-schema.json

#: name → (rows per ../shared/data/dev/README.md, label, label type, numeric features, categorical features,
#: one-hot columns): d = numeric + one-hot columns, row-norm bound sqrt(numeric + categorical)
EXPECTED: dict[str, tuple[int, str, str, int, int, int]] = {
    "telco_churn": (7_043, "Churn", "binary", 3, 16, 43),
    "hr_attrition": (14_999, "left", "binary", 5, 4, 17),
    "power_plant": (6_410, "PE", "numeric", 4, 0, 0),
    "wine_white": (4_898, "quality", "numeric", 11, 0, 0),
    "wine_white_multiclass": (4_898, "quality", "categorical", 11, 0, 0),
}
NAIVE_NAMES = ("telco_churn", "hr_attrition", "power_plant", "wine_white")
EXPECTED.update({f"{name}{NAIVE}": EXPECTED[name] for name in NAIVE_NAMES})


def load_schema(name: str) -> DatasetSchema:
    return DatasetSchema.model_validate_json((SCHEMA_DIR / f"{name}-schema.json").read_text())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_dev_schema_validates_and_implies_its_dimension(name: str) -> None:
    _, label, label_type, numeric, categorical, one_hot = EXPECTED[name]
    schema = load_schema(name)
    assert schema.label.name == label and schema.label.type == label_type
    assert sum(isinstance(f, NumericFeature) for f in schema.features) == numeric
    levels = [len(f.levels) for f in schema.features if isinstance(f, CategoricalFeature)]
    assert (len(levels), sum(levels)) == (categorical, one_hot)
    assert schema.dimension == numeric + one_hot
    assert schema.row_norm_bound == pytest.approx(math.sqrt(numeric + categorical))


def test_dev_schema_declarations_an_owner_would_make() -> None:
    telco = load_schema("telco_churn")
    assert {f.name: f.type for f in telco.features}["customerID"] == "ignore"
    assert telco.missing == "impute"
    total = next(f for f in telco.features if f.name == "TotalCharges")
    assert isinstance(total, NumericFeature) and total.fill == 0.0 and total.transform and total.transform.log
    assert load_schema("wine_white").csv.delimiter == ";"
    for name in ("power_plant", "wine_white"):
        assert isinstance(load_schema(name).label, NumericLabel)
    multiclass = load_schema("wine_white_multiclass")  # the same wine with quality as 7 classes (issue 22 §3)
    assert multiclass.label_classes == tuple(str(q) for q in range(3, 10)) and multiclass.label_bound == 6.0
    assert multiclass.features == load_schema("wine_white").features


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_dev_csv_encodes_with_its_schema(name: str) -> None:
    path = DEV_DIR / f"{name.removesuffix(NAIVE).removesuffix('_multiclass')}.csv"
    if not path.is_file():
        pytest.skip(f"development dataset not found at {path.resolve()} (see issue 21: ../shared/data/dev/)")
    rows = EXPECTED[name][0]
    schema = load_schema(name)
    with counting_clipped_cells() as clipped:
        encoded = parse_and_encode(path.read_bytes(), schema)
    if name.endswith(NAIVE):  # codebook-wide bounds contain every value of the file
        assert not any(clipped.values()), clipped
    assert (encoded.n, encoded.d) == (rows, schema.dimension)
    assert encoded.feature_names == schema.feature_names
    assert np.all(np.abs(encoded.X) <= 1.0) and np.all(np.abs(encoded.y) <= encoded.label_bound)
    assert np.all(np.linalg.norm(encoded.X, axis=1) <= encoded.row_norm_bound)
    if schema.label.type == "binary":
        assert set(np.unique(encoded.y)) == {-1.0, 1.0}
    if schema.label.type == "categorical":  # every quality 3..9 occurs (public codebook: the sensory scale)
        assert set(np.unique(encoded.y)) == set(map(float, range(len(schema.label_classes or ()))))


def naive_pairs() -> list[tuple[str, Path, Path]]:
    """(name, expert schema, non-expert schema) for the four dev datasets and Adult."""
    pairs = [(n, SCHEMA_DIR / f"{n}-schema.json", SCHEMA_DIR / f"{n}{NAIVE}-schema.json") for n in NAIVE_NAMES]
    examples = REPO / "examples"
    return [*pairs, ("adult", examples / "adult-schema.json", examples / f"adult{NAIVE}-schema.json")]


@pytest.mark.parametrize(("name", "expert_path", "naive_path"), naive_pairs(), ids=[p[0] for p in naive_pairs()])
def test_naive_schema_is_the_expert_one_with_codebook_bounds_and_no_transforms(
    name: str, expert_path: Path, naive_path: Path
) -> None:
    """Same label, columns, levels, fills, missing policy, csv options and budget as the expert schema; no
    ``transform`` key anywhere; every numeric bound (label included) contains the expert's."""
    assert '"transform"' not in naive_path.read_text()
    expert = DatasetSchema.model_validate_json(expert_path.read_text())
    naive = DatasetSchema.model_validate_json(naive_path.read_text())
    assert (naive.missing, naive.csv, naive.budget) == (expert.missing, expert.csv, expert.budget)
    assert naive.validation_fraction == expert.validation_fraction
    assert (naive.feature_names, naive.dimension, naive.row_norm_bound) == (
        expert.feature_names,
        expert.dimension,
        expert.row_norm_bound,
    )
    for ours, theirs in zip([naive.label, *naive.features], [expert.label, *expert.features], strict=True):
        assert (ours.name, ours.type) == (theirs.name, theirs.type)
        if isinstance(ours, NumericFeature | NumericLabel):
            assert isinstance(theirs, NumericFeature | NumericLabel)
            assert ours.lower <= theirs.lower and theirs.upper <= ours.upper, ours.name
            if isinstance(ours, NumericFeature):
                assert isinstance(theirs, NumericFeature)
                assert ours.transform is None and ours.fill == theirs.fill
        else:
            assert ours == theirs


def test_adult_csv_encodes_with_its_naive_schema() -> None:
    if not ADULT_DATA.is_file():
        pytest.skip(f"UCI Adult not found at {ADULT_DATA.resolve()} (../shared/data/adult/)")
    schema = DatasetSchema.model_validate_json((REPO / "examples" / f"adult{NAIVE}-schema.json").read_text())
    with counting_clipped_cells() as clipped:
        encoded = parse_and_encode(ADULT_DATA.read_bytes(), schema)
    assert not any(clipped.values()), clipped
    assert (encoded.n, encoded.d) == (32_561, schema.dimension)
    assert np.all(np.linalg.norm(encoded.X, axis=1) <= encoded.row_norm_bound)
    assert set(np.unique(encoded.y)) == {-1.0, 1.0}
