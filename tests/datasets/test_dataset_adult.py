"""Encoding the real UCI Adult data with its declared schema (privfit.datasets.adult)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from privfit.datasets import (
    ADULT_COLUMNS,
    CategoricalFeature,
    DatasetValidationError,
    adult_schema,
    parse_and_encode,
)

ADULT_DIR = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "adult"


def adult_bytes(name: str) -> bytes:
    path = ADULT_DIR / name
    if not path.is_file():
        pytest.skip(f"Adult dataset not found at {path.resolve()}")
    return path.read_bytes()


def test_adult_schema_shape() -> None:
    s = adult_schema(1.0, 1e-6)
    assert s.column_names[1:] == ADULT_COLUMNS[:-1] and s.label.name == "income"
    assert s.dimension == 104
    assert s.row_norm_bound == pytest.approx(math.sqrt(13))
    assert s.feature_names[:2] == ["age", "workclass=Private"]
    assert "fnlwgt" not in " ".join(s.feature_names)
    assert s.budget.epsilon == 1.0 and s.budget.delta == 1e-6


def check_blocks(e_x: np.ndarray, schema_features: list, feature_names: list[str]) -> int:
    """One-hot blocks sum to 1, or to 0 for an imputed missing value; returns the number of zero blocks."""
    zero_blocks = 0
    for f in schema_features:
        if isinstance(f, CategoricalFeature):
            cols = [feature_names.index(f"{f.name}={lv}") for lv in f.levels]
            sums = e_x[:, cols].sum(axis=1)
            assert set(np.unique(sums)) <= {0.0, 1.0}
            zero_blocks += int((sums == 0).sum())
    return zero_blocks


def test_encode_adult_data() -> None:
    s = adult_schema(1.0, 1e-6)
    e = parse_and_encode(adult_bytes("adult.data"), s)
    assert (e.n, e.d) == (32561, 104)  # n as documented in data/adult/README.md
    assert e.X.dtype == np.float64 and np.all(np.isfinite(e.X))
    assert np.all(np.abs(e.X) <= 1.0)
    assert np.all(np.linalg.norm(e.X, axis=1) <= e.row_norm_bound)
    assert set(np.unique(e.y)) == {-1.0, 1.0}
    # '?' in workclass / occupation / native-country became all-zero one-hot blocks
    assert check_blocks(e.X, s.features, e.feature_names) > 0
    assert e.content_hash == parse_and_encode(adult_bytes("adult.data"), s).content_hash


def test_encode_adult_test_file() -> None:
    s = adult_schema(1.0, 1e-6, test_file=True)
    e = parse_and_encode(adult_bytes("adult.test"), s)
    assert (e.n, e.d) == (16281, 104)
    assert np.all(np.linalg.norm(e.X, axis=1) <= e.row_norm_bound)
    assert set(np.unique(e.y)) == {-1.0, 1.0}


def test_adult_test_file_needs_its_own_label_declaration() -> None:
    data = adult_bytes("adult.test")
    with pytest.raises(DatasetValidationError) as info:
        parse_and_encode(data, adult_schema(1.0, 1e-6))
    assert (info.value.column, info.value.line) == ("income", 2)  # line 1 is the comment
    assert "<=50K." not in str(info.value)
