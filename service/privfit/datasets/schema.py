"""The public schema a data owner declares for a dataset (DESIGN §1.2).

Everything in a :class:`DatasetSchema` is PUBLIC: column names and types, categorical levels, numeric bounds,
the label's classes or range, the missing-value policy, the CSV layout and the privacy budget. The service
never derives any of these from the private rows; the encoder only checks the rows against them.

JSON format (every object forbids unknown keys)::

    {
      "label":    {"name": str, "type": "binary", "positive": str, "negative": str}
                | {"name": str, "type": "categorical", "levels": [str, ...]}   # 3 ≤ k ≤ 100 classes
                | {"name": str, "type": "numeric", "lower": float, "upper": float},
      "features": [                                     # ordered; at least one non-"ignore" entry
                    {"name": str, "type": "numeric", "lower": float, "upper": float, "fill": float?,
                     "transform": {"clip": [a, b]?, "log": bool?,
                                   "standardize": {"mean": float, "std": float, "clip_at": float?}?}?}
                  | {"name": str, "type": "categorical", "levels": [str, ...]}
                  | {"name": str, "type": "ignore"}     # present in the file, not used
                  ],
      "missing":  "reject" | "impute",                  # default "reject"
      "budget":   {"epsilon": float > 0, "delta": float in (0, 1)},
      "csv":      {"header": bool, "columns": [str]?, "na_values": [str], "delimiter": str,
                   "comment": str?},                    # optional; defaults below
      "validation_fraction": float in (0, 0.5]?,        # optional: private validation rows (datasets/split.py)
      "preprocessing": "none" | {"share": float in (0, 0.5]}?,  # optional: private preprocessing (default on)
      "privacy_unit": {"column": str, "max_rows": int in [1, 10000]}?   # optional: user-level privacy
    }

Encoding rules fixed by the schema (implemented in :mod:`privfit.datasets.encoding`):

* numeric feature ``x`` → ``(2x − lower − upper) / (upper − lower)`` clipped to [−1, 1]; with a declared
  ``transform`` (:class:`NumericTransform`): clipped to ``clip``, then log1p, then standardized or scaled from
  the transformed range;
* categorical feature → one-hot over ``levels`` in declared order (columns named ``name=level``);
* binary label → +1 for ``positive``, −1 for ``negative``;
* categorical label → the class index 0, …, k−1 of its level in ``levels`` (declared order), as a float; a level
  not declared is an upload error naming the column (:class:`CategoricalLabel`);
* numeric label → scaled like a numeric feature and clipped to [−1, 1] (see :meth:`NumericLabel.decode`);
* ``"ignore"`` columns are parsed for structure only; their cells are never inspected.
* the ``privacy_unit`` column (:class:`PrivacyUnit`, not a feature) names each row's unit — a person, a customer,
  a device — as text (an integer in a Parquet file); equal texts (stripped, NFC) are one unit. It is never a
  feature, never stored as text: the matrix keeps a unit index beside X and y (:mod:`privfit.datasets.units`).

Missing values: a cell is *missing* if, after stripping surrounding whitespace, it equals one of
``csv.na_values`` (exact, case-sensitive match; in :func:`~privfit.datasets.encoding.encode_rows` a JSON
``null`` is missing too).

* ``"reject"`` (default): any missing feature cell is an error.
* ``"impute"``: every numeric feature must declare a public ``fill`` value inside its bounds, which replaces a
  missing cell (and is then scaled like any other value); a missing categorical cell becomes an all-zero
  one-hot block (the row carries no information for that column).
* A missing label is always an error: labels are never imputed.

``fill`` is only allowed under ``"impute"`` so that a declaration cannot silently have no effect.

Names and levels (:mod:`privfit.text`): column names, categorical levels, class labels and NA markers are
normalised to Unicode NFC when the schema is validated, so "é" written precomposed (U+00E9) or decomposed ("e" +
U+0301) is one level, one one-hot column; two levels (or classes, or columns) equal after normalisation are a
duplicate. Names, levels and classes containing a control, bidirectional-control or invisible character are
refused, naming the field and the character. The encoder normalises cells and CSV header names the same way
(:mod:`privfit.datasets.encoding`). Schemas stored before these rules are read back as they were
(:meth:`DatasetSchema.from_stored`).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from fractions import Fraction
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, model_validator

from privfit.privacy.filter import DEFAULT_APPROXIMATE_DELTA_SHARE
from privfit.text import checked_name, nfc

__all__ = [
    "MAX_CLASSES",
    "BinaryLabel",
    "Budget",
    "CategoricalFeature",
    "CategoricalLabel",
    "CsvOptions",
    "DatasetSchema",
    "Feature",
    "IgnoredColumn",
    "Label",
    "NumericFeature",
    "NumericLabel",
    "NumericTransform",
    "Preprocessing",
    "PrivacyUnit",
    "Standardize",
    "label_classes",
    "one_hot_blocks",
]

_CONFIG = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)

#: The validation context key under which :meth:`DatasetSchema.from_stored` reads a stored schema.
_STORED = "privfit_stored_schema"


def _name_text(value: str, info: ValidationInfo) -> str:
    """A declared name, level or class in NFC; refused if it hides characters (:func:`privfit.text.checked_name`).
    A stored schema is read back as it was stored (:meth:`DatasetSchema.from_stored`)."""
    if info.context and info.context.get(_STORED):
        return value
    return checked_name(value)


#: A column name: 1 to 200 characters, NFC, nothing hidden.
Name = Annotated[str, Field(min_length=1, max_length=200), AfterValidator(_name_text)]
#: A categorical level or a class label: NFC, nothing hidden (emptiness and whitespace: :func:`_check_token`).
Level = Annotated[str, AfterValidator(_name_text)]


def _check_name(name: str) -> None:
    if name != name.strip():
        raise ValueError(f"column name {name!r} has leading or trailing whitespace (cells and headers are stripped)")


def _check_bounds(what: str, lower: float, upper: float) -> None:
    if not lower < upper:
        raise ValueError(f"{what}: lower ({lower!r}) must be strictly less than upper ({upper!r})")
    if not math.isfinite(upper - lower):
        raise ValueError(f"{what}: upper − lower overflows; declare bounds of smaller magnitude")


def _duplicates(items: Iterable[str]) -> list[str]:
    """The sorted values that occur more than once, in linear time (a declaration may list 10⁵ names: a
    quadratic ``list.count`` scan would hold a worker for minutes)."""
    return sorted(item for item, count in Counter(items).items() if count > 1)


def _duplicates_text(dups: list[str]) -> str:
    """``dups`` for an error message, saying that names are compared in NFC when that may be why they are equal."""
    if all(d.isascii() for d in dups):
        return str(dups)
    return f"{dups} (compared after Unicode NFC normalisation: precomposed and decomposed accents are equal)"


def _check_token(what: str, token: str) -> None:
    if token == "":
        raise ValueError(f"{what} must be a non-empty string")
    if token != token.strip():
        raise ValueError(
            f"{what} {token!r} has leading or trailing whitespace (cells are stripped, so it could never match)"
        )


def label_classes(label: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The class names of a stored label declaration (a :class:`CategoricalLabel` as JSON), or None for any other
    label type: what :class:`~privfit.solvers.base.PublicMetadata` carries as its ``classes``."""
    if label.get("type") != "categorical":
        return None
    return tuple(str(level) for level in label["levels"])


_CLIPPED_CELLS: ContextVar[dict[str, int] | None] = ContextVar("clipped_cells", default=None)


@contextmanager
def counting_clipped_cells() -> Iterator[dict[str, int]]:
    """Count, per numeric column (features and label), the cells outside the declared [lower, upper] that the
    encodings below clip, while the block runs (in this thread or task). The counts are a function of the private
    rows: the upload returns them to its owner only, who holds those rows anyway; they are not stored."""
    counts: dict[str, int] = {}
    token = _CLIPPED_CELLS.set(counts)
    try:
        yield counts
    finally:
        _CLIPPED_CELLS.reset(token)


def restart_clipped_cells() -> None:
    """Forget the counts so far (an encoding that starts over on the same rows)."""
    counts = _CLIPPED_CELLS.get()
    if counts is not None:
        counts.clear()


def _count_clipped(name: str, values: np.ndarray, lower: float, upper: float) -> None:
    counts = _CLIPPED_CELLS.get()
    if counts is not None:
        counts[name] = counts.get(name, 0) + int(np.count_nonzero((values < lower) | (values > upper)))


def _scale(values: np.ndarray, lower: float, upper: float) -> np.ndarray:
    """Map [lower, upper] affinely onto [−1, 1] and clip; ``+ 0.0`` turns −0.0 into 0.0 (canonical bytes)."""
    scaled = (2.0 * values - lower - upper) / (upper - lower)
    return np.clip(scaled, -1.0, 1.0) + 0.0


class _Model(BaseModel):
    model_config = _CONFIG


class Standardize(_Model):
    """A public centre and spread for a numeric feature (e.g. from a census table or a codebook).

    In the units after ``clip`` and ``log``: the encoded value is ``(t − mean) / (clip_at · std)`` clipped to
    [−1, 1], i.e. the feature is centred and values beyond ``clip_at`` public standard deviations are clipped.
    """

    mean: float
    std: float = Field(gt=0)
    clip_at: float = Field(default=3.0, gt=0, le=1e6)

    @model_validator(mode="after")
    def _validate(self) -> Standardize:
        if not math.isfinite(self.clip_at * self.std):
            raise ValueError("standardize: clip_at × std overflows; declare a smaller spread")
        return self


class NumericTransform(_Model):
    """Owner-declared, public transforms of a numeric feature, applied in this order before encoding:

    1. ``clip``: a range [a, b] inside [lower, upper] (original units); values beyond it are clipped to it.
       Bounds still validate the file; ``clip`` only narrows what the model sees.
    2. ``log``: t = log1p(v) for a non-negative amount, duration or count (requires the clip range, or the
       bounds, to start at ≥ 0); the bounds and ``clip`` stay in the original units.
    3. ``standardize``: see :class:`Standardize`; without it, t is scaled affinely from the transformed range
       [t(a), t(b)] onto [−1, 1].

    Every step is a fixed function of one cell and public constants, so it adds nothing to the privacy cost
    (DESIGN §1.2); predictions apply the same steps to the rows they are given.
    """

    clip: list[float] | None = Field(default=None, min_length=2, max_length=2)
    log: bool = False
    standardize: Standardize | None = None


def _clip_range(what: str, lower: float, upper: float, transform: NumericTransform | None) -> tuple[float, float]:
    if transform is None or transform.clip is None:
        return lower, upper
    a, b = transform.clip
    _check_bounds(f"{what}: transform.clip", a, b)
    if not lower <= a < b <= upper:
        raise ValueError(f"{what}: transform.clip [{a!r}, {b!r}] must lie within [lower, upper]")
    return a, b


class NumericFeature(_Model):
    """A numeric feature with public bounds; values are scaled to [−1, 1] and clipped outside the bounds.

    An optional :class:`NumericTransform` (clip, log1p, standardize) is applied before the scaling.
    """

    name: Name
    type: Literal["numeric"]
    lower: float
    upper: float
    fill: float | None = Field(
        default=None, description="Public value replacing a missing cell; required iff missing == 'impute'."
    )
    transform: NumericTransform | None = Field(
        default=None, description="Public transforms applied before scaling: clip, log (log1p), standardize."
    )

    @model_validator(mode="after")
    def _validate(self) -> NumericFeature:
        _check_name(self.name)
        what = f"feature {self.name!r}"
        _check_bounds(what, self.lower, self.upper)
        if self.fill is not None and not self.lower <= self.fill <= self.upper:
            raise ValueError(f"{what}: fill ({self.fill!r}) must lie within [lower, upper]")
        a, _ = _clip_range(what, self.lower, self.upper, self.transform)
        if self.transform is not None and self.transform.log and a < 0:
            raise ValueError(f"{what}: transform.log needs a non-negative range (lower or clip ≥ 0), got {a!r}")
        return self

    def scale(self, values: np.ndarray) -> np.ndarray:
        """Apply the declared transform, then map to [−1, 1] (clipping): see :class:`NumericTransform`."""
        t = self.transform
        a, b = _clip_range(self.name, self.lower, self.upper, t)
        raw = np.asarray(values, dtype=np.float64)
        _count_clipped(self.name, raw, self.lower, self.upper)
        v = np.clip(raw, a, b)
        if t is None:
            return _scale(v, a, b)
        if t.log:
            v, a, b = np.log1p(v), math.log1p(a), math.log1p(b)
        if t.standardize is None:
            return _scale(v, a, b)
        s = t.standardize
        return np.clip((v - s.mean) / (s.clip_at * s.std), -1.0, 1.0) + 0.0


class CategoricalFeature(_Model):
    """A categorical feature with its public, ordered list of levels; encoded one-hot."""

    name: Name
    type: Literal["categorical"]
    levels: list[Level] = Field(min_length=1)

    @model_validator(mode="after")
    def _validate(self) -> CategoricalFeature:
        _check_name(self.name)
        for level in self.levels:
            _check_token(f"feature {self.name!r}: level", level)
        if len(set(self.levels)) != len(self.levels):
            dups = _duplicates(self.levels)
            raise ValueError(f"feature {self.name!r}: duplicate levels {_duplicates_text(dups)}")
        return self


class IgnoredColumn(_Model):
    """A column present in the file but not used; its cells are never inspected or stored."""

    name: Name
    type: Literal["ignore"]

    @model_validator(mode="after")
    def _validate(self) -> IgnoredColumn:
        _check_name(self.name)
        return self


Feature = Annotated[NumericFeature | CategoricalFeature | IgnoredColumn, Field(discriminator="type")]


class BinaryLabel(_Model):
    """A two-class label: ``positive`` is encoded as +1, ``negative`` as −1."""

    name: Name
    type: Literal["binary"]
    positive: Level
    negative: Level

    @model_validator(mode="after")
    def _validate(self) -> BinaryLabel:
        _check_name(self.name)
        _check_token(f"label {self.name!r}: positive class", self.positive)
        _check_token(f"label {self.name!r}: negative class", self.negative)
        if self.positive == self.negative:
            raise ValueError(f"label {self.name!r}: positive and negative classes must differ (compared after "
                             "Unicode NFC normalisation)")  # fmt: skip
        return self

    @property
    def classes(self) -> list[str]:
        """The two class names, positive first."""
        return [self.positive, self.negative]

    def decode(self, y: np.ndarray) -> list[str]:
        """Map encoded labels or real-valued scores back to class names (score ≥ 0 → ``positive``)."""
        return [self.positive if v >= 0 else self.negative for v in np.asarray(y, dtype=np.float64).ravel()]


#: The public cap on the number k of declared classes of a categorical label: θ has k·(d + 1) entries and the
#: noise of every step grows like sqrt(k), so a label with hundreds of classes is better fitted another way.
MAX_CLASSES = 100


class CategoricalLabel(_Model):
    """A label with k ≥ 3 public classes (its ``levels``, in declared order): encoded as the class index
    0, …, k−1 of each row's level. Fitted by multinomial logistic regression (``model: "logistic"``). Two classes
    are a :class:`BinaryLabel`; more than :data:`MAX_CLASSES` are refused."""

    name: Name
    type: Literal["categorical"]
    levels: list[Level] = Field(min_length=1)

    @model_validator(mode="after")
    def _validate(self) -> CategoricalLabel:
        _check_name(self.name)
        what = f"label {self.name!r}"
        for level in self.levels:
            _check_token(f"{what}: level", level)
        if len(set(self.levels)) != len(self.levels):
            raise ValueError(f"{what}: duplicate levels {_duplicates_text(_duplicates(self.levels))}")
        if len(self.levels) < 3:
            raise ValueError(f"{what}: a categorical label needs at least 3 levels; declare a label with 2 classes "
                             'as {"type": "binary", "positive": ..., "negative": ...}')  # fmt: skip
        if len(self.levels) > MAX_CLASSES:
            raise ValueError(f"{what}: at most {MAX_CLASSES} levels are supported, got {len(self.levels)}")
        return self

    def decode(self, y: np.ndarray) -> list[str]:
        """Map class indices (rounded, clipped to 0..k−1) back to the level names."""
        v = np.asarray(y, dtype=np.float64).ravel()
        index = np.clip(np.rint(np.where(np.isfinite(v), v, 0.0)), 0, len(self.levels) - 1).astype(np.int64)
        return [self.levels[i] for i in index]


class NumericLabel(_Model):
    """A real-valued label with public bounds: y' = (2y − lower − upper)/(upper − lower), clipped."""

    name: Name
    type: Literal["numeric"]
    lower: float
    upper: float

    @model_validator(mode="after")
    def _validate(self) -> NumericLabel:
        _check_name(self.name)
        _check_bounds(f"label {self.name!r}", self.lower, self.upper)
        return self

    def scale(self, values: np.ndarray) -> np.ndarray:
        """Scale raw labels to [−1, 1] by the declared bounds, clipping values outside them."""
        raw = np.asarray(values, dtype=np.float64)
        _count_clipped(self.name, raw, self.lower, self.upper)
        return _scale(raw, self.lower, self.upper)

    def decode(self, y: np.ndarray) -> np.ndarray:
        """Map encoded labels or predictions back: y = (y'(upper − lower) + lower + upper) / 2, clipped to
        [lower, upper]: a prediction never leaves the label's declared range (a linear model extrapolates; the
        label cannot)."""
        y = np.clip(np.asarray(y, dtype=np.float64), -1.0, 1.0)
        return np.clip((y * (self.upper - self.lower) + self.lower + self.upper) / 2.0, self.lower, self.upper)


Label = Annotated[BinaryLabel | CategoricalLabel | NumericLabel, Field(discriminator="type")]


def _slack_within_pot(value: float | None, info: ValidationInfo) -> float | None:
    """``budget.slack_delta`` is at most the pot it is part of: ``approximate_delta``, or its default
    (:data:`privfit.privacy.filter.DEFAULT_APPROXIMATE_DELTA_SHARE` × δ) when that is not given."""
    delta, pot = info.data.get("delta"), info.data.get("approximate_delta")
    if value is None or delta is None:  # δ itself was refused: its own error says so
        return value
    limit = DEFAULT_APPROXIMATE_DELTA_SHARE * delta if pot is None else pot
    if not value <= limit:
        what = "approximate_delta" if pot is not None else "the default approximate_delta = δ/10"
        raise ValueError(f"must be at most {what} = {limit:g}, the pot it is part of")
    return value


class Budget(_Model):
    """The dataset's total privacy budget (ε_max, δ_max) under replace-one neighbours (DESIGN §1.1).

    ``approximate_delta`` is the part of δ set apart for the δ-only parts of fits that have them (objective
    perturbation's Gaussian variant, dp_lazy_oco, approximate-RDP charges); the rest certifies the RDP curves.
    Default δ/10; 0 refuses such fits. ``slack_delta`` is its part for approximate-RDP slacks (resque_localized),
    the rest of it being for the δ of (ε, δ) charges: 0 ≤ slack_delta ≤ approximate_delta, default half of it; 0
    refuses approximate-RDP fits. Both parts are fixed here, publicly, because the filter's proof needs each bounded
    on every path. See :mod:`privfit.privacy.filter`.
    """

    epsilon: float = Field(gt=0)
    delta: float = Field(gt=0, lt=1)
    approximate_delta: float | None = Field(
        None, ge=0, description="Share of δ for δ-only parts of fits (default δ/10); must be below δ."
    )
    slack_delta: Annotated[float | None, AfterValidator(_slack_within_pot)] = Field(
        None,
        ge=0,
        description="The part of approximate_delta for approximate-RDP slacks (default half of it); the rest is for "
        "the δ of (ε, δ) charges. At most approximate_delta.",
    )

    @model_validator(mode="after")
    def _approximate_delta_below_delta(self) -> Budget:
        if self.approximate_delta is not None and not self.approximate_delta < self.delta:
            raise ValueError(f"approximate_delta must be below delta = {self.delta:g}")
        return self

    def delta_too_large_for(self, n: int) -> str | None:
        """Why δ is too large for a dataset of ``n`` rows (δ ≥ 1/n), or None. An (ε, δ) guarantee may fail with
        probability δ; with δ ≥ 1/n a mechanism that publishes one random row outright would satisfy it, so the
        usual guidance (Dwork & Roth 2014, §2.3) is δ well below 1/n. n is public (bounded DP, DESIGN §1.1)."""
        if self.delta < 1.0 / n:
            return None
        return (
            f"delta = {self.delta:g} is not below 1/n = {1.0 / n:.3g} for this dataset's n = {n} rows: with δ ≥ 1/n, "
            "publishing one random row outright would satisfy the (ε, δ) guarantee. The usual guidance is δ well "
            f"below 1/n (e.g. δ ≤ 1/n^1.1 = {n**-1.1:.3g}, or 1e-6 for up to a million rows)"
        )


class CsvOptions(_Model):
    """Public layout of the uploaded CSV.

    * ``header``: the first non-blank, non-comment record names the columns (any order; exactly the schema's
      columns). If false, ``columns`` gives the file's column order and is required.
    * ``na_values``: cell texts (after stripping) that mean "missing". Default ``["", "NA", "?"]``.
    * ``delimiter``: one character, default ``","``. Whitespace around cells is always stripped.
    * ``comment``: if set, records starting with this prefix are skipped (e.g. ``"#"``).

    Blank lines are skipped. Line numbers in errors count every physical line of the file, from 1.
    """

    header: bool = True
    columns: list[Name] | None = None
    na_values: list[Annotated[str, AfterValidator(nfc)]] = Field(default_factory=lambda: ["", "NA", "?"])
    delimiter: str = Field(default=",", min_length=1, max_length=1)
    comment: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _validate(self) -> CsvOptions:
        if self.header and self.columns is not None:
            raise ValueError("csv.columns is only allowed with csv.header = false (the header names the columns)")
        if not self.header and self.columns is None:
            raise ValueError("csv.columns is required when csv.header = false (it gives the file's column order)")
        if self.delimiter in {'"', "\r", "\n"}:
            raise ValueError("csv.delimiter must not be a quote or newline character")
        for v in self.na_values:
            if v != v.strip():
                raise ValueError(f"csv.na_values entry {v!r} has leading or trailing whitespace (cells are stripped)")
        return self


DEFAULT_PREPROCESSING_SHARE = 0.05
"""The share of a dataset's privacy budget spent on private preprocessing when the owner does not choose
(:mod:`privfit.datasets.preprocessing`; chosen by ``benchmarks/utility.py --preprocessing``, docs/datasets.md)."""


class Preprocessing(_Model):
    """Private preprocessing at upload (:mod:`privfit.datasets.preprocessing`): ``share`` of the budget (as the
    dataset's privacy filter measures it) is spent once on noisy histograms of the numeric columns that declare no
    transform (and of a numeric label), from which public rules derive clip ranges and log1p transforms."""

    share: float = Field(default=DEFAULT_PREPROCESSING_SHARE, gt=0, le=0.5)


MAX_ROWS_PER_UNIT = 10_000
"""The largest ``privacy_unit.max_rows`` a schema may declare (a unit of more rows than this is bounded to it)."""


class PrivacyUnit(_Model):
    """User-level privacy (DESIGN §1.1): the column naming each row's privacy unit and the public, owner-set
    maximum number of rows a unit may contribute.

    With it every privacy cost of the dataset is stated for neighbours that differ in ONE UNIT with all its rows
    (one unit's rows replaced by another unit's), not in one row. At upload each unit with more than ``max_rows``
    rows keeps ``max_rows`` of them, chosen by a secret uniformly random draw, and the others are dropped
    (:func:`privfit.datasets.units.bound_contributions`); the number of units U is then the dataset's public size
    ``n``, and the number of rows is not public. Only solvers that clip each unit's summed gradient fit such a dataset
    (``dp_gd``, ``dp_sgd``); the others answer 422. A small ``max_rows`` drops more rows; a large one costs nothing
    in privacy (each unit's summed gradient is clipped to the same norm C) but lets one heavy unit weigh as much as
    any other after clipping."""

    column: Name
    max_rows: int = Field(ge=1, le=MAX_ROWS_PER_UNIT, description="The public maximum of rows kept per unit.")


def one_hot_blocks(features: Sequence[Mapping[str, Any]]) -> list[tuple[int, int]]:
    """The column ranges [start, stop) of the one-hot blocks of ≥ 2 levels in the encoded matrix of the declared
    ``features`` (their JSON form, as stored: a numeric takes one column, a categorical one per level, an ignored
    none — the order of :attr:`DatasetSchema.feature_names`). A function of the schema alone."""
    blocks: list[tuple[int, int]] = []
    column = 0
    for feature in features:
        width = len(feature["levels"]) if feature["type"] == "categorical" else int(feature["type"] == "numeric")
        if feature["type"] == "categorical" and width >= 2:
            blocks.append((column, column + width))
        column += width
    return blocks


class DatasetSchema(_Model):
    """The public declaration of a dataset: label, ordered features, missing policy, budget, CSV layout, and an
    optional validation fraction (:mod:`privfit.datasets.split`).

    Build it from JSON with ``DatasetSchema.model_validate_json(text)`` or from a dict with
    ``DatasetSchema.model_validate(obj)``; invalid declarations raise :class:`pydantic.ValidationError`
    (a ``ValueError``) whose entries name the offending field.
    """

    label: Label
    features: list[Feature] = Field(min_length=1)
    missing: Literal["reject", "impute"] = "reject"
    budget: Budget
    csv: CsvOptions = Field(default_factory=CsvOptions)
    preprocessing: Literal["none"] | Preprocessing | None = Field(
        None,
        description='Private preprocessing at upload: absent or {"share": s} (default share '
        f"{DEFAULT_PREPROCESSING_SHARE}) spends s of the budget on DP histograms of the numeric columns without a "
        'declared transform and derives their clip range and log1p from them; "none" opts out.',
    )
    validation_fraction: float | None = Field(
        None,
        gt=0,
        le=0.5,
        description="Public share f ∈ (0, 0.5] of the rows set apart, by a secret uniformly random split at upload, "
        "as private validation rows for POST /v1/fits/{id}/evaluate: n_validation = ⌊f·n⌋ rows are never fitted "
        "on; fits see the other n − ⌊f·n⌋. Default: none.",
    )
    privacy_unit: PrivacyUnit | None = Field(
        None,
        description="User-level privacy: the column naming each row's unit (a person, a customer; not a feature) "
        "and the public maximum of rows kept per unit (excess rows are dropped by a secret random choice). Costs "
        "are then for neighbours differing in one unit with all its rows; n is the number of units. Only dp_gd and "
        "dp_sgd fit such a dataset.",
    )

    @model_validator(mode="after")
    def _validate(self) -> DatasetSchema:
        names = [f.name for f in self.features]
        if self.label.name in names:
            raise ValueError(f"label name {self.label.name!r} is also declared as a feature")
        dups = _duplicates(names)
        if dups:
            raise ValueError(f"duplicate feature names: {_duplicates_text(dups)}")
        if not any(f.type != "ignore" for f in self.features):
            raise ValueError("features: at least one feature must be numeric or categorical")
        for f in self.features:
            if isinstance(f, NumericFeature):
                if self.missing == "impute" and f.fill is None:
                    raise ValueError(f"feature {f.name!r}: 'fill' is required when missing = 'impute'")
                if self.missing == "reject" and f.fill is not None:
                    raise ValueError(f"feature {f.name!r}: 'fill' is only allowed when missing = 'impute'")
        na = set(self.csv.na_values)
        for f in self.features:
            if isinstance(f, CategoricalFeature):
                clash = [lv for lv in f.levels if lv in na]
                if clash:
                    raise ValueError(f"feature {f.name!r}: levels {clash} are also csv.na_values (ambiguous)")
        if isinstance(self.label, BinaryLabel | CategoricalLabel):
            classes = self.label.levels if isinstance(self.label, CategoricalLabel) else self.label.classes
            clash = [c for c in classes if c in na]
            if clash:
                raise ValueError(f"label {self.label.name!r}: classes {clash} are also csv.na_values (ambiguous)")
        unit = self.privacy_unit
        if unit is not None:
            if unit.column == self.label.name or unit.column in names:
                raise ValueError(
                    f"privacy_unit.column {unit.column!r} is also declared as the label or a feature; the unit column "
                    "identifies rows and is never fitted on: declare it only in privacy_unit"
                )
            if self.validation_fraction is not None:
                raise ValueError(
                    "validation_fraction cannot be combined with privacy_unit: the validation split and private "
                    "evaluation are row-level; evaluate a user-level model on data you own with /predict"
                )
        if self.csv.columns is not None:
            declared = self.column_names
            cols = self.csv.columns
            cdups = _duplicates(cols)
            if cdups:
                raise ValueError(f"csv.columns: duplicate names {_duplicates_text(cdups)}")
            listed, known = set(cols), set(declared)
            missing_cols = [c for c in declared if c not in listed]
            extra_cols = [c for c in cols if c not in known]
            if missing_cols or extra_cols:
                raise ValueError(
                    f"csv.columns must list exactly the label, feature and privacy unit names; "
                    f"not listed: {missing_cols}, not declared: {extra_cols}"
                )
        return self

    @classmethod
    def from_stored(cls, document: Mapping[str, Any]) -> DatasetSchema:
        """The schema the service stored when it accepted an upload (``Dataset.schema_json``), validated without the
        text rules of :mod:`privfit.text`: a schema stored before them (a name with a character they refuse, or not
        in NFC) still serves its fits' predictions exactly as it was (the encoder compares in NFC either way)."""
        return cls.model_validate(document, context={_STORED: True})

    # ---- derived public metadata (functions of the schema alone) ----

    @property
    def column_names(self) -> list[str]:
        """All declared column names of an uploaded file: the label first, then the features in declared order,
        then the privacy unit column if there is one."""
        unit = [] if self.privacy_unit is None else [self.privacy_unit.column]
        return [self.label.name, *(f.name for f in self.features), *unit]

    @property
    def feature_names(self) -> list[str]:
        """Encoded matrix column names, in order: ``name`` for a numeric, ``name=level`` for one-hot."""
        out: list[str] = []
        for f in self.features:
            if isinstance(f, NumericFeature):
                out.append(f.name)
            elif isinstance(f, CategoricalFeature):
                out.extend(f"{f.name}={lv}" for lv in f.levels)
        return out

    @property
    def one_hot_blocks(self) -> list[tuple[int, int]]:
        """The column ranges [start, stop) of the categorical features' one-hot blocks of ≥ 2 levels, in the
        encoded matrix's order (:func:`one_hot_blocks`)."""
        return one_hot_blocks(self.model_dump(mode="json", include={"features"})["features"])

    @property
    def dimension(self) -> int:
        """Number of columns d of the encoded feature matrix."""
        return len(self.feature_names)

    @property
    def row_norm_bound(self) -> float:
        """Public bound on ‖x_i‖₂ for every encoded row: sqrt(#numeric + #categorical features).

        Each scaled numeric lies in [−1, 1] (contributes ≤ 1 to ‖x‖²) and each categorical block is one-hot
        (exactly 1) or all-zero when imputed (0), so ‖x‖² ≤ #numeric + #categorical, with equality for a row
        whose numerics sit at a declared bound and whose categoricals are all present. The float returned is
        rounded up if needed so that it is never below the exact square root. Ignored columns do not count.
        """
        k = sum(1 for f in self.features if f.type != "ignore")
        bound = math.sqrt(k)
        if Fraction(bound) ** 2 < k:
            bound = math.nextafter(bound, math.inf)
        return bound

    @property
    def label_bound(self) -> float:
        """Public bound on |y_i| for every encoded label: 1.0 for labels ±1 or scaled to [−1, 1], k − 1 for the
        class index of a categorical label."""
        if isinstance(self.label, CategoricalLabel):
            return float(len(self.label.levels) - 1)
        return 1.0

    @property
    def label_classes(self) -> tuple[str, ...] | None:
        """The k class names of a categorical label (public), or None for a binary or numeric label."""
        return tuple(self.label.levels) if isinstance(self.label, CategoricalLabel) else None

    def canonical_json(self) -> str:
        """Canonical JSON of the schema (sorted keys, no whitespace), used in content hashes. Names and levels are
        in NFC (module docstring), so a declaration hashes alike whichever Unicode form it was written in."""
        document = self.model_dump(mode="json")
        for feature in document["features"]:  # schemas without transforms hash as they did before transforms
            if feature.get("transform", "absent") is None:
                del feature["transform"]
        # likewise for schemas that do not declare them
        for optional in ("validation_fraction", "preprocessing", "privacy_unit"):
            if document.get(optional, "absent") is None:
                del document[optional]
        if document["budget"].get("slack_delta", "absent") is None:  # likewise for budgets without a declared split
            del document["budget"]["slack_delta"]
        return json.dumps(document, sort_keys=True, separators=(",", ":"), allow_nan=False)
