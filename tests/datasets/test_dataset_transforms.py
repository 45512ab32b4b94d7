"""Owner-declared numeric transforms (issue 21 §2): clip, log1p and standardize are public, per-cell, applied
before scaling, keep every encoded value in [−1, 1] (so the public row-norm bound still holds), and predictions
encode rows exactly like the upload did."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from pydantic import ValidationError

from privfit.datasets import encode_rows, parse_and_encode
from privfit.datasets.schema import DatasetSchema, NumericFeature

LABEL = {"name": "y", "type": "binary", "positive": "yes", "negative": "no"}
BUDGET = {"epsilon": 1.0, "delta": 1e-6}


def feature(transform: dict | None = None, lower: float = 0.0, upper: float = 500.0) -> NumericFeature:
    spec: dict = {"name": "amount", "type": "numeric", "lower": lower, "upper": upper}
    if transform is not None:
        spec["transform"] = transform
    return NumericFeature.model_validate(spec)


def test_no_transform_is_the_affine_scaling_of_the_bounds():
    values = np.array([0.0, 125.0, 250.0, 500.0, 900.0])
    assert feature().scale(values).tolist() == [-1.0, -0.5, 0.0, 1.0, 1.0]


def test_clip_narrows_the_range_the_model_sees():
    values = np.array([0.0, 25.0, 50.0, 100.0, 400.0])
    assert feature({"clip": [0, 100]}).scale(values).tolist() == [-1.0, -0.5, 0.0, 1.0, 1.0]


def test_log_scales_log1p_of_the_clipped_value_between_the_transformed_ends():
    values = np.array([0.0, 20.0, 500.0])
    got = feature({"log": True}).scale(values)
    top = math.log1p(500.0)
    expected = [2 * math.log1p(v) / top - 1 for v in values]
    assert got == pytest.approx(expected, abs=1e-15)
    assert got[0] == -1.0 and got[-1] == 1.0


def test_standardize_centres_and_clips_at_the_declared_number_of_deviations():
    transform = {"standardize": {"mean": 100.0, "std": 50.0, "clip_at": 2.0}}
    values = np.array([0.0, 100.0, 150.0, 200.0, 500.0])
    assert feature(transform).scale(values).tolist() == [-1.0, 0.0, 0.5, 1.0, 1.0]


def test_log_then_standardize_works_in_log_units():
    transform = {"log": True, "standardize": {"mean": 2.0, "std": 1.0}}
    got = feature(transform).scale(np.array([math.expm1(2.0), math.expm1(3.5)]))
    assert got == pytest.approx([0.0, 0.5], abs=1e-12)


@pytest.mark.parametrize(
    "transform",
    [
        {"clip": [-1, 100]},  # below lower
        {"clip": [0, 600]},  # above upper
        {"clip": [50, 50]},  # empty
        {"clip": [1]},  # not a pair
        {"log": True, "standardize": {"mean": 0, "std": 0}},  # std must be positive
        {"standardize": {"mean": 0, "std": 1, "clip_at": 0}},
        {"unknown": 1},
    ],
)
def test_invalid_transforms_are_refused_naming_the_feature(transform):
    with pytest.raises(ValidationError, match=r"amount|transform"):
        feature(transform)


def test_log_of_a_range_reaching_below_zero_is_refused():
    with pytest.raises(ValidationError, match="non-negative"):
        feature({"log": True}, lower=-5.0)
    feature({"log": True, "clip": [0, 100]}, lower=-5.0)  # a clip range starting at 0 makes it valid


def _schema(transform: dict) -> DatasetSchema:
    return DatasetSchema.model_validate(
        {
            "label": LABEL,
            "features": [
                {"name": "amount", "type": "numeric", "lower": 0, "upper": 500, "transform": transform},
                {"name": "hours", "type": "numeric", "lower": 0, "upper": 100},
            ],
            "budget": BUDGET,
        }
    )


@pytest.mark.parametrize(
    "transform",
    [{"log": True}, {"clip": [0, 40], "log": True}, {"standardize": {"mean": 10, "std": 15}}, {"clip": [5, 50]}],
)
def test_uploads_and_predictions_encode_alike_and_stay_within_the_row_norm_bound(transform):
    schema = _schema(transform)
    rng = np.random.default_rng(7)
    amounts = np.concatenate([rng.exponential(12.0, 300), [0.0, 500.0]]).round(2)
    hours = rng.uniform(0, 100, amounts.size).round(1)
    labels = rng.choice(["yes", "no"], amounts.size)
    csv = "amount,hours,y\n" + "".join(f"{a},{h},{y}\n" for a, h, y in zip(amounts, hours, labels, strict=True))
    uploaded = parse_and_encode(csv.encode(), schema)
    rows = [{"amount": float(a), "hours": float(h)} for a, h in zip(amounts, hours, strict=True)]
    predicted = encode_rows(rows, schema)
    assert np.array_equal(uploaded.X, predicted.X)
    assert np.abs(uploaded.X).max() <= 1.0
    assert np.linalg.norm(uploaded.X, axis=1).max() <= schema.row_norm_bound
    assert np.array_equal(uploaded.X[:, 0], schema.features[0].scale(amounts))


def test_schemas_without_transforms_keep_their_canonical_json():
    """Content hashes of datasets uploaded before transforms existed must not change."""
    schema = DatasetSchema.model_validate(
        {"label": LABEL, "features": [{"name": "amount", "type": "numeric", "lower": 0, "upper": 5}], "budget": BUDGET}
    )
    document = json.loads(schema.canonical_json())
    assert "transform" not in document["features"][0]
    with_transform = _schema({"log": True})
    assert json.loads(with_transform.canonical_json())["features"][0]["transform"]["log"] is True
