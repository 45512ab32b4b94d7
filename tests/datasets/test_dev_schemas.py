"""The owner-written schemas of the four development datasets (``examples/dev/``, issue 21; and wine's multiclass
variant, issue 22) validate, and each dev CSV in ``../shared/data/dev/`` encodes with its schema: the row count of
the data README, the dimension the schema implies, every encoded feature in [−1, 1] and label within the schema's
label bound. Skips with a reason when the data directory is absent."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from privfit.datasets import CategoricalFeature, DatasetSchema, NumericFeature, NumericLabel, parse_and_encode

REPO = Path(__file__).resolve().parents[2]
SCHEMA_DIR = REPO / "examples" / "dev"
DEV_DIR = Path(__file__).parents[2] / ".." / "shared" / "data" / "dev"

#: name → (rows per ../shared/data/dev/README.md, label, label type, numeric features, categorical features,
#: one-hot columns): d = numeric + one-hot columns, row-norm bound sqrt(numeric + categorical)
EXPECTED: dict[str, tuple[int, str, str, int, int, int]] = {
    "telco_churn": (7_043, "Churn", "binary", 3, 16, 43),
    "hr_attrition": (14_999, "left", "binary", 5, 4, 17),
    "power_plant": (6_410, "PE", "numeric", 4, 0, 0),
    "wine_white": (4_898, "quality", "numeric", 11, 0, 0),
    "wine_white_multiclass": (4_898, "quality", "categorical", 11, 0, 0),
}


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
    path = DEV_DIR / f"{name.removesuffix('_multiclass')}.csv"
    if not path.is_file():
        pytest.skip(f"development dataset not found at {path.resolve()} (see issue 21: ../shared/data/dev/)")
    rows = EXPECTED[name][0]
    schema = load_schema(name)
    encoded = parse_and_encode(path.read_bytes(), schema)
    assert (encoded.n, encoded.d) == (rows, schema.dimension)
    assert encoded.feature_names == schema.feature_names
    assert np.all(np.abs(encoded.X) <= 1.0) and np.all(np.abs(encoded.y) <= encoded.label_bound)
    assert np.all(np.linalg.norm(encoded.X, axis=1) <= encoded.row_norm_bound)
    if schema.label.type == "binary":
        assert set(np.unique(encoded.y)) == {-1.0, 1.0}
    if schema.label.type == "categorical":  # every quality 3..9 occurs (public codebook: the sensory scale)
        assert set(np.unique(encoded.y)) == set(map(float, range(len(schema.label_classes or ()))))
