"""The public metadata a solver gets for a registered dataset (DESIGN §1.2), read from its database row only."""

from __future__ import annotations

from privfit.datasets import label_classes
from privfit.datasets.schema import one_hot_blocks
from privfit.db import Dataset
from privfit.solvers import PublicMetadata

__all__ = ["public_metadata"]


def public_metadata(dataset: Dataset) -> PublicMetadata:
    """The solver's :class:`~privfit.solvers.PublicMetadata` of ``dataset``: n (its rows, or its privacy units for a
    user-level dataset), d, the declared bounds, the feature names, the classes of a categorical label and the public
    bound on rows per privacy unit (None for a row-level dataset), and the columns of the one-hot blocks. Reads no
    row of data."""
    schema = dataset.schema_json
    unit = schema.get("privacy_unit")
    return PublicMetadata(
        n=dataset.n, d=dataset.d, row_norm_bound=dataset.row_norm_bound, label_bound=dataset.label_bound,
        feature_names=tuple(dataset.feature_names), classes=label_classes(schema.get("label", {})),
        max_rows_per_unit=None if unit is None else int(unit["max_rows"]),
        one_hot_blocks=tuple(one_hot_blocks(schema.get("features", []))),
    )  # fmt: skip
