r"""Contribution bounding for user-level privacy (DESIGN §1.1; :class:`~privfit.datasets.schema.PrivacyUnit`).

A schema that names a privacy unit column states its guarantee for neighbouring datasets that differ in ONE UNIT
with all its rows. Every sensitivity bound of the service is then per unit, and it must hold whatever the data: a
unit's contribution is bounded at upload by the public, owner-set maximum k = ``privacy_unit.max_rows``.

:func:`bound_contributions` keeps, of every unit with more than k rows, k of them chosen by a secret uniformly
random draw (each row gets an independent uniform key from the upload's OS-seeded generator; a unit keeps its k rows
with the smallest keys, i.e. a uniformly random k-subset), and drops the others. The kept rows stay in file order.
Units are renumbered 0, …, U − 1 in order of first appearance among the kept rows.

**Why this is sound.** The bounding is a function applied to each unit's rows separately (with its own random
keys), so neighbouring files — one unit's rows replaced by another's — give bounded datasets that again differ
in one unit only, now of at most k rows; the number of units U is the same on both sides and is public, as n is in
the row model. The mechanisms that read the bounded data are then private for that relation: they clip each unit's
SUMMED contribution (:mod:`privfit.solvers.units`), or, for the counts of private preprocessing, charge a
sensitivity k times the per-row one (:mod:`privfit.privacy.histogram`). The draw is secret: which rows survived is
never stored apart from the bounded matrix or shown (the stored matrix is the bounded one; the owner's upload answer
shows only how many rows were dropped, a number the owner can compute from the file).

**Why random, not the first k rows.** A deterministic rule (the first k in file order) is just as private — privacy
comes from the bound, not from the randomness — but it biases the kept rows toward whatever the file's order
encodes (the earliest transactions of each customer, the first visits of each patient); a uniform subset keeps the
unit's rows representative. The rows are the owner's, and the draw uses the OS entropy like every other secret draw.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .encoding import EncodedDataset, compute_content_hash

__all__ = ["BoundedUnits", "bound_contributions"]


@dataclasses.dataclass(frozen=True)
class BoundedUnits:
    """The result of :func:`bound_contributions`: the bounded dataset and the rows dropped (shown to the owner only,
    who holds the file: it is a function of the private rows)."""

    encoded: EncodedDataset
    rows_dropped: int


def bound_contributions(encoded: EncodedDataset, rng: np.random.Generator) -> BoundedUnits:
    """Keep at most ``schema.privacy_unit.max_rows`` rows per unit of ``encoded`` (module docstring), chosen by
    ``rng`` (OS-seeded at upload); returns the bounded dataset with its units renumbered 0..U−1 and its content hash
    recomputed. A dataset without units is returned as it is. O(n log n) time; one copy of the kept rows (none when
    no unit is over the bound)."""
    unit = encoded.schema.privacy_unit
    codes = encoded.units
    if unit is None or codes is None:
        return BoundedUnits(encoded, 0)
    k = unit.max_rows
    keys = rng.random(codes.size)  # one secret uniform key per row: a unit keeps the k rows with the smallest
    order = np.lexsort((keys, codes))  # rows grouped by unit, each unit's rows in increasing key order
    grouped = codes[order]
    starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
    rank = np.arange(codes.size) - np.repeat(starts, np.diff(np.r_[starts, codes.size]))
    keep = np.zeros(codes.size, dtype=bool)
    keep[order[rank < k]] = True
    dropped = int(codes.size - np.count_nonzero(keep))
    if dropped == 0:
        X, y, kept = encoded.X, encoded.y, codes
    else:
        X, y, kept = encoded.X[keep], encoded.y[keep], codes[keep]
    _, first = np.unique(kept, return_index=True)  # renumber in order of first appearance among the kept rows
    number = np.empty(first.size, dtype=np.int64)
    number[np.argsort(first, kind="stable")] = np.arange(first.size)
    units = number[np.searchsorted(np.unique(kept), kept)]
    for array in (X, y, units):
        array.flags.writeable = False
    bounded = dataclasses.replace(
        encoded, X=X, y=y, n=int(y.size), units=units,
        content_hash=compute_content_hash(X, y, encoded.schema, units),
    )  # fmt: skip
    return BoundedUnits(bounded, dropped)
