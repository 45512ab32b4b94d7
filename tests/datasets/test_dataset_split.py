"""The validation split (privfit.datasets.split): exact public sizes, a partition of the rows, uniform random
membership, and the schema's ``validation_fraction`` (bounds; absent from the canonical JSON when not declared)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from pydantic import ValidationError

from privfit.datasets import DatasetSchema, compute_content_hash, parse_and_encode
from privfit.datasets.split import ValidationSplitError, split_validation, validation_size
from privfit.privacy import make_generator

SCHEMA = {
    "label": {"name": "y", "type": "binary", "positive": "yes", "negative": "no"},
    "features": [{"name": "x", "type": "numeric", "lower": 0, "upper": 1000}],
    "budget": {"epsilon": 1.0, "delta": 1e-6},
}


def encoded(n: int, fraction: float | None = 0.3):
    csv = "x,y\n" + "".join(f"{i},{'yes' if i % 2 else 'no'}\n" for i in range(n))
    return parse_and_encode(csv.encode(), DatasetSchema.model_validate({**SCHEMA, "validation_fraction": fraction}))


@pytest.mark.parametrize(("n", "fraction", "expected"), [(10, 0.3, 3), (10, 0.5, 5), (7, 0.1, 0), (1000, 0.1, 100),
                                                          (3, 1 / 3, 0), (100, 0.07, 7)])  # fmt: skip
def test_validation_size_is_the_exact_floor(n, fraction, expected):
    # f is the decimal written (0.3 = 3/10, whose binary float is below it); 1/3 is written 0.3333333333333333.
    assert validation_size(n, fraction) == expected


def test_split_is_a_partition_with_public_sizes_and_correct_hashes():
    data = encoded(1000)
    train, validation = split_validation(data, 0.3, make_generator(1, data_is_public=True))
    assert (train.n, validation.n) == (700, 300) and train.X.shape == (700, 1) and validation.y.shape == (300,)
    rows = np.sort(np.concatenate([train.X[:, 0], validation.X[:, 0]]))
    np.testing.assert_array_equal(rows, np.sort(data.X[:, 0]))
    assert train.content_hash == compute_content_hash(train.X, train.y, data.schema)
    assert not train.X.flags.writeable and not validation.X.flags.writeable


def test_membership_is_uniform_over_rows():
    """Each of 20 rows lands in validation (size 5) with probability 1/4: over 4,000 seeded splits its count is
    Binomial(4000, 1/4), sd 27.4; all 20 within 4.5 sd of 1,000."""
    data = encoded(20, 0.25)
    rng = make_generator(2, data_is_public=True)
    counts = np.zeros(20)
    for _ in range(4000):
        _, validation = split_validation(data, 0.25, rng)
        counts[np.searchsorted(np.sort(data.X[:, 0]), validation.X[:, 0])] += 1
    assert np.all(np.abs(counts - 1000) < 4.5 * np.sqrt(4000 * 0.25 * 0.75))


def test_no_validation_row_is_refused_naming_the_field():
    with pytest.raises(ValidationSplitError, match=r"schema\.validation_fraction"):
        split_validation(encoded(3, 0.25), 0.25, make_generator(3, data_is_public=True))


@pytest.mark.parametrize("fraction", [0.0, -0.1, 0.51, 1.0])
def test_fraction_bounds(fraction):
    with pytest.raises(ValidationError, match="validation_fraction"):
        DatasetSchema.model_validate({**SCHEMA, "validation_fraction": fraction})


def test_canonical_json_omits_an_undeclared_fraction():
    assert "validation_fraction" not in json.loads(DatasetSchema.model_validate(SCHEMA).canonical_json())
    declared = DatasetSchema.model_validate({**SCHEMA, "validation_fraction": 0.2})
    assert json.loads(declared.canonical_json())["validation_fraction"] == 0.2
