"""The validation split declared by ``validation_fraction`` (issue #22 §2): training and validation rows.

With a declared public fraction f ∈ (0, 0.5] and the public row count n, n_val = ⌊f·n⌋ (computed exactly for the
decimal f) and n_train = n − n_val are public. Which rows go where is a uniformly random subset of size n_val drawn
from an operating-system-seeded generator (:func:`privfit.privacy.secure_generator`) at upload; it is independent
of the values, never stored on its own and never exposed. Each part is stored as its own content-addressed matrix
(rows in file order); fits read only the training part (the dataset's ``n`` is n_train), evaluations only the
validation part (``n_validation``).

Privacy: the split is data-independent, so each part's row count is public and a replace-one neighbour of the
uploaded data is a replace-one neighbour of exactly one part (the other is unchanged). Fits and evaluations are
charged to the same ledger by sequential composition — no parallel-composition saving is claimed.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np

from .encoding import EncodedDataset, compute_content_hash

__all__ = ["ValidationSplitError", "split_validation", "validation_size"]


class ValidationSplitError(ValueError):
    """The declared fraction leaves no validation row for this n (names the field; quotes no value)."""


def validation_size(n: int, fraction: float) -> int:
    """n_val = ⌊f·n⌋ computed exactly for f the decimal the owner wrote (the float's shortest repr: 0.3 is 3/10,
    so 0.3 · 10 gives 3, not the 2 the binary value 0.29999… would), with no rounding of f·n."""
    return math.floor(Fraction(repr(float(fraction))) * int(n))


def _part(encoded: EncodedDataset, rows: np.ndarray) -> EncodedDataset:
    X = np.ascontiguousarray(encoded.X[rows])
    y = np.ascontiguousarray(encoded.y[rows])
    X.setflags(write=False)
    y.setflags(write=False)
    return dataclasses.replace(
        encoded, X=X, y=y, n=int(rows.size), content_hash=compute_content_hash(X, y, encoded.schema)
    )


def split_validation(
    encoded: EncodedDataset, fraction: float, rng: np.random.Generator
) -> tuple[EncodedDataset, EncodedDataset]:
    """(training, validation) parts of ``encoded``: a uniformly random ⌊f·n⌋-subset of rows (drawn with ``rng``,
    OS-seeded for private data) is the validation part. Raises :class:`ValidationSplitError` if ⌊f·n⌋ = 0."""
    n_val = validation_size(encoded.n, fraction)
    if n_val < 1:
        raise ValidationSplitError(
            f"schema.validation_fraction: {fraction:g} · n = {fraction * encoded.n:g} < 1 leaves no validation row "
            f"for this dataset's n = {encoded.n}; declare a larger fraction or upload more rows"
        )
    chosen = np.zeros(encoded.n, dtype=bool)
    chosen[rng.choice(encoded.n, size=n_val, replace=False)] = True
    return _part(encoded, np.flatnonzero(~chosen)), _part(encoded, np.flatnonzero(chosen))
