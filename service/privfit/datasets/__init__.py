"""privfit.datasets: the pure (no web, no DB) dataset schema, validation and encoding layer.

* :class:`DatasetSchema` — the public declaration a data owner uploads with a CSV (DESIGN §1.2).
* :func:`parse_and_encode` — CSV bytes → :class:`EncodedDataset` (matrix, labels, public bounds, hash).
* :func:`encode_parquet` — the same for a Parquet file (:mod:`privfit.datasets.columnar`).
* :func:`encode_rows` — client-supplied rows → :class:`EncodedRows` (for prediction), same rules.
* :class:`DatasetValidationError` — names the column and first offending line, never quotes a cell value.
* :func:`adult_schema` — the declared schema of the UCI Adult benchmark.
"""

from .adult import ADULT_COLUMNS, adult_schema
from .columnar import encode_parquet, is_parquet_upload
from .encoding import (
    CONTENT_HASH_VERSION,
    DatasetValidationError,
    EncodedDataset,
    EncodedRows,
    compute_content_hash,
    encode_rows,
    parse_and_encode,
)
from .schema import (
    BinaryLabel,
    Budget,
    CategoricalFeature,
    CategoricalLabel,
    CsvOptions,
    DatasetSchema,
    Feature,
    IgnoredColumn,
    Label,
    NumericFeature,
    NumericLabel,
    label_classes,
)

__all__ = [
    "ADULT_COLUMNS",
    "CONTENT_HASH_VERSION",
    "BinaryLabel",
    "Budget",
    "CategoricalFeature",
    "CategoricalLabel",
    "CsvOptions",
    "DatasetSchema",
    "DatasetValidationError",
    "EncodedDataset",
    "EncodedRows",
    "Feature",
    "IgnoredColumn",
    "Label",
    "NumericFeature",
    "NumericLabel",
    "adult_schema",
    "compute_content_hash",
    "encode_parquet",
    "encode_rows",
    "is_parquet_upload",
    "label_classes",
    "parse_and_encode",
]
