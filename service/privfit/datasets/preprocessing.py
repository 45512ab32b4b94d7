r"""Private preprocessing at upload: DP histograms of the numeric columns, then public rules for their encoding.

A data owner who is not a DP expert declares codebook-wide bounds (ages 0–120, amounts 0 to a generous cap) and no
transforms. Encoded by those bounds, the data fills a small part of [−1, 1]: little signal against noise scaled to
the bounds. With the owner's consent (on by default; ``"preprocessing": "none"`` opts out) a public share of the
budget is spent once, before any fit, on

1. **the release** (:mod:`privfit.privacy.histogram`): one noisy histogram per *candidate* column — every numeric
   feature that declares no ``transform`` and a numeric label — on a public grid of :data:`BINS` bins uniform in
   sign(x)·log1p(|x|) over its declared bounds, with exact discrete Gaussian noise calibrated so the release uses
   the declared share of the dataset's privacy filter; charged through the filter like a fit
   (:func:`privfit.ledger.charge_preprocessing`) and then public metadata of the dataset;
2. **public rules** (:func:`derive_range`, functions of the released counts, the public grid and n only, hence
   post-processing): the clip range [a, b] that holds all but a :data:`TAIL` share of the column's surviving mass
   at each end, and for a non-negative, right-skewed column ``log1p`` (:func:`is_right_skewed`);
3. **the derived encoding**: the declared schema with those transforms filled in (a feature's ``transform:
   {"clip": [a, b], "log": …}``; a numeric label's bounds narrowed to [a, b]) becomes the dataset's schema, so
   fits, ``/predict``, evaluations and exported coefficients all use it. Owner-declared transforms keep precedence.

**Rules in detail.** With noisy counts c̃_k and noise scale σ = √S: counts below τ = :data:`THRESHOLD_SIGMAS`·σ are
set to 0 (a bin that holds nothing shows noise only; P(N_Z(0, S) ≥ 3.5σ) < 2.4·10⁻⁴ per bin). If the surviving mass
M is below :data:`MIN_SURVIVING` · n the histogram says too little and the column keeps its declared encoding.
Otherwise k_lo is the first bin where the surviving cumulative mass reaches TAIL·M, k_hi the last from the right;
[a, b] = [e_{k_lo}, e_{k_hi + 1}] (bin edges, so a whole bin is kept); a numeric label's range is then widened by
:data:`LABEL_MARGIN` of its width on each side, within the declared bounds, and with a numeric label each feature's
range by :data:`REGRESSION_FEATURE_MARGIN` (measured on the power plant and wine data, non-expert and expert schemas,
ε ∈ {0.5, 1, 2}: RMSE 4.88 → 4.60 MW on the power plant's expert schema at ε = 1, wine within ±0.004; the same margin
on the classification datasets cost up to 0.4 points on HR and 0.011 AUC on the synthetic data, so it is not applied
there). A column with a ≥ 0 is modelled as log1p
when log1p(b) − log1p(a) ≥ 1 (the range spans a factor e in 1 + x) and its median bin's centre m (in the grid's
own scale) satisfies b − m ≥ :data:`SKEW_RATIO` · (m − a): the upper tail is several times longer than the lower.

The encoding of a numeric column from the stored matrix: the declared encoding is the affine map of the value
clipped to [L, U] onto [−1, 1], so the clipped value is recovered as L + (x + 1)(U − L)/2 (to within an ulp of
U − L) and encoded again with the derived transform; the public answer shows every derived transform.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np

from privfit.privacy import PrivacyCost, PrivacyFilter
from privfit.privacy.histogram import (
    NoisyHistograms,
    add_histogram_noise,
    histogram_matrix,
    histogram_release_cost,
    symlog_grids,
    variance_for_share,
)

from .encoding import EncodedDataset, compute_content_hash
from .schema import DEFAULT_PREPROCESSING_SHARE, DatasetSchema, NumericFeature, NumericLabel, Preprocessing

__all__ = [
    "BINS",
    "MECHANISM",
    "BatchCounts",
    "PreprocessingOutcome",
    "PreprocessingPlan",
    "PreprocessingRelease",
    "candidate_columns",
    "derive_range",
    "exact_counts",
    "is_right_skewed",
    "plan_preprocessing",
    "preprocess",
    "preprocessing_share",
]

BINS = 32
"""Bins of each column's public grid."""
_COUNT_BLOCK_ROWS = 1 << 16
"""Rows counted at a time (:meth:`PreprocessingPlan.counts`)."""
THRESHOLD_SIGMAS = 3.5
"""Noisy counts below this many noise scales are treated as empty bins."""
MIN_SURVIVING = 0.5
"""A column keeps its declared encoding unless the surviving counts hold at least this share of n."""
MIN_ROWS_IN_NOISE_SCALES = 4.0
"""No release (and no charge) unless n ≥ this × THRESHOLD_SIGMAS × √S: with fewer rows, even a bin holding a quarter
of them would not stand out of the noise, so the release could derive nothing (a public rule: n, p, the budget)."""
TAIL = 0.01
"""The share of the surviving mass left beyond the clip range at each end."""
LABEL_MARGIN = 0.25
"""A numeric label's derived range is widened by this share of its width on each side (within the declared
bounds): a label clipped too narrowly caps every prediction, a cost features do not have."""
REGRESSION_FEATURE_MARGIN = 0.1
"""With a numeric label, each feature's derived range is widened by this share of its width on each side (within
the declared bounds): a linear regression's prediction moves with every feature's tail, so clipping the tails
biases the predictions of the rows there; a classifier's does not need them (measured: module docstring)."""
SKEW_RATIO = 3.0
"""Upper tail / lower tail length (about the median bin) from which a non-negative column is modelled as log1p."""
MECHANISM = "noisy histograms on a public symlog grid, discrete Gaussian noise (Canonne, Kamath & Steinke 2020)"


@dataclass(frozen=True)
class _Column:
    """A candidate column: its name, its role, its declared bounds and where it sits in the encoded data."""

    name: str
    role: str  # "feature" or "label"
    lower: float
    upper: float
    index: int  # the column of X (features); -1 for the label
    edges: np.ndarray
    scale: str  # the grid's scale: "symlog" or "uniform" (privfit.privacy.histogram.symlog_grids)

    def grid(self) -> dict[str, Any]:
        """The public grid, as shown: its edges follow from these four numbers (:func:`symlog_grids`)."""
        return {"scale": self.scale, "lower": self.lower, "upper": self.upper, "bins": int(self.edges.size - 1)}


@dataclass(frozen=True)
class PreprocessingRelease:
    """What one preprocessing run released and derived: the derived schema, the charge and the public statistics
    (:meth:`public`), without the data (an upload stored by partitions re-encodes its rows block by block,
    :meth:`reencode_rows`)."""

    schema: DatasetSchema
    cost: PrivacyCost
    share: float
    histograms: NoisyHistograms
    columns: tuple[_Column, ...]
    derived: tuple[dict[str, Any] | None, ...]

    @property
    def names(self) -> tuple[str, ...]:
        """The measured columns' names, in order (features in declared order, then a numeric label)."""
        return tuple(column.name for column in self.columns)

    @property
    def roles(self) -> tuple[str, ...]:
        """Each measured column's role: ``"feature"`` or ``"label"``."""
        return tuple(column.role for column in self.columns)

    @property
    def changed(self) -> tuple[_Column, ...]:
        """The measured columns that have a derived rule (their encoding changes)."""
        return tuple(c for c, rule in zip(self.columns, self.derived, strict=True) if rule is not None)

    def reencode_rows(self, X: np.ndarray, y: np.ndarray) -> None:
        """Encode rows given by the declared schema (``X`` rows × d, ``y``; writable float64) by the derived
        :attr:`schema` instead, in place, in the columns that have a derived rule (module docstring). A fixed
        function of each cell: the same rows give the same result whole or block by block."""
        features = {f.name: f for f in self.schema.features if isinstance(f, NumericFeature)}
        for column in self.changed:
            if column.role == "feature":
                raw = _declared_values(X[:, column.index], column.lower, column.upper)
                X[:, column.index] = features[column.name].scale(raw)
            elif isinstance(self.schema.label, NumericLabel):
                y[:] = self.schema.label.scale(_declared_values(y, column.lower, column.upper))

    def public(self, epsilon: float, committed_epsilon: float) -> dict[str, Any]:
        """The released statistics and what was derived from them, as JSON (public metadata of the dataset).
        ``epsilon`` is the release's own ε at the dataset's δ; ``committed_epsilon`` its share × ε_max."""
        return {
            "mechanism": MECHANISM,
            "share": self.share,
            "epsilon": epsilon,
            "committed_epsilon": committed_epsilon,
            "noise_variance": self.histograms.variance,
            "bins": BINS,
            "columns": [
                {"name": column.name, "role": column.role, "grid": column.grid(), "noisy_counts": counts.tolist(),
                 "derived": derived}
                for column, counts, derived in zip(self.columns, self.histograms.counts, self.derived, strict=True)
            ],
        }  # fmt: skip


@dataclass(frozen=True)
class PreprocessingOutcome(PreprocessingRelease):
    """A preprocessing run on a dataset in memory (:func:`preprocess`): the release and the re-encoded data."""

    encoded: EncodedDataset


@dataclass(frozen=True)
class PreprocessingPlan:
    """What a preprocessing run measures, from public facts only (the declared schema, the public size n, the
    budget): the candidate columns, the share and the noise variance S (:func:`plan_preprocessing`). The exact
    counts are sums over rows (:meth:`counts` of each block, added up); :meth:`release` adds the noise and derives
    the encoding."""

    schema: DatasetSchema
    share: float
    columns: tuple[_Column, ...]
    variance: int
    n: int
    rows_per_unit: int

    @property
    def edges(self) -> np.ndarray:
        """The columns' public grids, (p, BINS + 1)."""
        return np.stack([c.edges for c in self.columns])

    def counts(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """The exact counts (p, BINS) of the rows ``X`` (by the declared schema), ``y`` (:func:`exact_counts`), summed
        over blocks of :data:`_COUNT_BLOCK_ROWS` rows: the measured columns' values are gathered a block at a time,
        never as a copy of the whole matrix's columns."""
        totals = np.zeros((len(self.columns), BINS), dtype=np.int64)
        for start in range(0, X.shape[0], _COUNT_BLOCK_ROWS):
            stop = start + _COUNT_BLOCK_ROWS
            np.add(totals, exact_counts(self.columns, X[start:stop], y[start:stop]), out=totals)
        return totals

    def release(
        self, exact: np.ndarray, rng: np.random.Generator, privacy_filter: PrivacyFilter
    ) -> PreprocessingRelease:
        """Add N_Z(0, S) to the exact counts (``exact``: (p, BINS), of all n rows) and derive the encoding by the
        public rules (:func:`derive_range`); the release's cost is on ``privacy_filter``'s grid. ``rng`` is
        OS-seeded for private data."""
        histograms = add_histogram_noise(list(exact), list(self.edges), self.variance, rng)
        sigma = math.sqrt(self.variance)
        margin = REGRESSION_FEATURE_MARGIN if isinstance(self.schema.label, NumericLabel) else 0.0
        derived = [
            derive_range(counts, c.edges, sigma, self.n, c.role, margin=margin)
            for c, counts in zip(self.columns, histograms.counts, strict=True)
        ]
        cost = histogram_release_cost(
            len(self.columns), self.variance, privacy_filter.grid, self.rows_per_unit, bins=BINS
        )
        return PreprocessingRelease(
            schema=_derived_schema(self.schema, list(self.columns), derived),
            cost=cost,
            share=self.share,
            histograms=histograms,
            columns=self.columns,
            derived=tuple(derived),
        )


def preprocessing_share(schema: DatasetSchema) -> float | None:
    """The share of the budget the declared schema spends on preprocessing (None: opted out)."""
    if schema.preprocessing == "none":
        return None
    if isinstance(schema.preprocessing, Preprocessing):
        return schema.preprocessing.share
    return DEFAULT_PREPROCESSING_SHARE


def _candidates(schema: DatasetSchema) -> list[_Column]:
    """The columns preprocessing measures, in declared order (features, then the label), each with its public
    grid; a column whose range is too narrow for a grid is left out. Public."""
    found: list[tuple[str, str, float, float, int]] = []
    offset = 0
    for feature in schema.features:
        if isinstance(feature, NumericFeature):
            if feature.transform is None:
                found.append((feature.name, "feature", feature.lower, feature.upper, offset))
            offset += 1
        elif feature.type == "categorical":
            offset += len(feature.levels)
    if isinstance(schema.label, NumericLabel):
        found.append((schema.label.name, "label", schema.label.lower, schema.label.upper, -1))
    if not found:
        return []
    grids, scales = symlog_grids(np.array([f[2] for f in found]), np.array([f[3] for f in found]), BINS)
    return [
        _Column(name, role, lower, upper, index, edges, scale)
        for (name, role, lower, upper, index), edges, scale in zip(found, grids, scales, strict=True)
        if scale
    ]


def candidate_columns(schema: DatasetSchema) -> list[_Column]:
    """The columns preprocessing measures for ``schema`` (every numeric feature without a declared transform, and
    a numeric label), each with its public grid. Public."""
    return _candidates(schema)


def exact_counts(columns: Sequence[_Column], X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The exact counts (p, BINS) of the rows ``X`` (encoded by the declared schema), ``y`` in the measured
    ``columns`` (:func:`candidate_columns`), each on its public grid: a sum over rows, so the counts of blocks of
    rows add up to those of all of them."""
    features = [c for c in columns if c.role == "feature"]
    values = _declared_values(
        X[:, [c.index for c in features]],
        np.array([c.lower for c in features]),
        np.array([c.upper for c in features]),
    )
    if len(features) < len(columns):  # the numeric label, last
        label = columns[-1]
        values = np.column_stack([values, _declared_values(y, label.lower, label.upper)])
    return histogram_matrix(values, np.stack([c.edges for c in columns]))


class BatchCounts:
    """:func:`exact_counts` of an upload's rows summed batch by batch while they are encoded (the counts add up over
    blocks of rows), each batch's computed by :data:`~privfit.datasets.columnar.UPLOAD_THREADS` beside the
    encoding: the pass over the matrix :func:`preprocess` would make after the encoding, made during it (pass
    :meth:`totals` to :func:`preprocess` as ``counts``). Only when the preprocessing would measure the rows as
    encoded: a row-level schema with candidate columns that does not opt out (whether it then runs depends on n
    and the budget: the caller decides); otherwise :meth:`add` does nothing and :meth:`totals` is None.

    A batch's rows must be final when :meth:`add` gets them. The encoding's last step (``−0.0`` made ``0.0`` in
    place, :func:`~privfit.datasets.encoding._finish`) may overlap a count still running, which reads either
    zero: the same bin."""

    def __init__(self, declared: DatasetSchema) -> None:
        columns = _candidates(declared)
        measured = declared.privacy_unit is None and preprocessing_share(declared) is not None and columns
        self._columns = columns if measured else None
        self._pending: list[Future[np.ndarray]] = []

    def add(self, X: np.ndarray, y: np.ndarray) -> None:
        """Count the rows ``X`` (encoded by the declared schema), ``y`` of one batch (in a worker thread)."""
        if self._columns is not None:
            from .columnar import UPLOAD_THREADS  # the encoders' threads (columnar builds on this package)

            self._pending.append(UPLOAD_THREADS.submit(exact_counts, self._columns, X, y))

    def totals(self) -> np.ndarray | None:
        """The counts (p, BINS) of all the rows added (waits for them); None when nothing is measured."""
        if self._columns is None:
            return None
        totals = np.zeros((len(self._columns), BINS), dtype=np.int64)
        for future in self._pending:
            np.add(totals, future.result(), out=totals)
        return totals


def _declared_values(encoded: np.ndarray, lower: float | np.ndarray, upper: float | np.ndarray) -> np.ndarray:
    """The clipped values behind columns encoded by their declared bounds (module docstring); ``lower`` and
    ``upper`` broadcast over the last axis."""
    return np.clip(lower + (np.asarray(encoded, dtype=np.float64) + 1.0) * ((upper - lower) / 2.0), lower, upper)


def _bin_centre(edges: np.ndarray, k: int) -> float:
    """The centre of bin k in the grid's own scale (sign·log1p), mapped back."""
    t = (np.sign(edges[k : k + 2]) * np.log1p(np.abs(edges[k : k + 2]))).mean()
    return float(np.sign(t) * np.expm1(abs(t)))


def is_right_skewed(a: float, median: float, b: float) -> bool:
    """The public log1p rule of the module docstring for a non-negative range [a, b] with median bin centre m."""
    if a < 0 or not a <= median <= b:
        return False
    return math.log1p(b) - math.log1p(a) >= 1.0 and b - median >= SKEW_RATIO * (median - a)


def derive_range(
    noisy: np.ndarray, edges: np.ndarray, sigma: float, n: int, role: str, *, margin: float = 0.0
) -> dict[str, Any] | None:
    """The derived encoding of one column from its released counts (public rules, module docstring): a
    ``{"clip": [a, b], "log": bool}`` transform for a feature (its range widened by ``margin`` of its width on each
    side, within the bounds, after the log1p decision), ``{"lower": a, "upper": b}`` for a label, or None (keep the
    declared encoding)."""
    counts = np.where(noisy >= THRESHOLD_SIGMAS * sigma, noisy, 0).astype(np.float64)
    mass = float(counts.sum())
    if mass < MIN_SURVIVING * n:
        return None
    cumulative = np.cumsum(counts)
    k_lo = int(np.searchsorted(cumulative, TAIL * mass, side="left"))
    k_hi = int(counts.size - 1 - np.searchsorted(np.cumsum(counts[::-1]), TAIL * mass, side="left"))
    k_med = int(np.searchsorted(cumulative, 0.5 * mass, side="left"))
    a, b = float(edges[k_lo]), float(edges[k_hi + 1])
    if role == "label":
        margin = LABEL_MARGIN * (b - a)
        a, b = max(float(edges[0]), a - margin), min(float(edges[-1]), b + margin)
        return None if (a, b) == (float(edges[0]), float(edges[-1])) else {"lower": a, "upper": b}
    log = is_right_skewed(a, _bin_centre(edges, k_med), b)
    width = margin * (b - a)
    a, b = max(float(edges[0]), a - width), min(float(edges[-1]), b + width)
    log = log and a >= 0
    if (a, b) == (float(edges[0]), float(edges[-1])) and not log:
        return None
    return {"clip": [a, b], "log": log}


def _derived_schema(
    schema: DatasetSchema, columns: list[_Column], derived: list[dict[str, Any] | None]
) -> DatasetSchema:
    """The declared schema with each derived rule filled in (a feature's transform, a label's bounds). Only the
    changed columns are validated again: the schema's own checks (names, levels, fills) do not involve them."""
    rules = {column.name: rule for column, rule in zip(columns, derived, strict=True) if rule is not None}
    features = [
        NumericFeature.model_validate({**feature.model_dump(), "transform": {"clip": rules[feature.name]["clip"],
                                                                             "log": rules[feature.name]["log"]}})
        if isinstance(feature, NumericFeature) and feature.name in rules else feature
        for feature in schema.features
    ]  # fmt: skip
    label = schema.label
    if isinstance(label, NumericLabel) and label.name in rules:
        label = NumericLabel.model_validate({**label.model_dump(), **rules[label.name]})
    return schema.model_copy(update={"features": features, "label": label})


def plan_preprocessing(
    schema: DatasetSchema, n: int, privacy_filter: PrivacyFilter, share: float | None = None
) -> PreprocessingPlan | None:
    """The plan of a preprocessing run on a dataset of public size ``n`` (rows, or units) declared by ``schema``,
    at ``share`` of the budget ``privacy_filter`` measures (default: the schema's own setting), or None when there
    is nothing to do: the owner opted out, no numeric column lacks a declared transform, the share is too small for
    the exact sampler's range, or n is too small for the noise (:data:`MIN_ROWS_IN_NOISE_SCALES`; public, nothing
    charged)."""
    share = preprocessing_share(schema) if share is None else share
    columns = _candidates(schema)
    if share is None or not columns:
        return None
    unit = schema.privacy_unit
    k = 1 if unit is None else unit.max_rows  # a unit of k rows moves k counts per column (privacy/histogram.py)
    variance = variance_for_share(len(columns), privacy_filter, share, k, bins=BINS)
    if variance is None or n < MIN_ROWS_IN_NOISE_SCALES * THRESHOLD_SIGMAS * math.sqrt(variance):
        return None  # too little data for this noise: no bin could hold a quarter of the rows and show it
    return PreprocessingPlan(schema, share, tuple(columns), variance, n, k)


def preprocess(
    encoded: EncodedDataset,
    privacy_filter: PrivacyFilter,
    rng: np.random.Generator,
    share: float | None = None,
    *,
    counts: np.ndarray | None = None,
) -> PreprocessingOutcome | None:
    """Run private preprocessing on ``encoded`` (encoded by its declared schema) at ``share`` of the budget
    ``privacy_filter`` measures (default: the schema's own setting), or return None when there is nothing to do
    (:func:`plan_preprocessing`). ``rng`` is OS-seeded for private data. The caller charges ``outcome.cost`` to the
    ledger before the outcome's data or statistics are used or shown.

    ``counts``: the exact counts of all of ``encoded``'s rows in :func:`candidate_columns` of its schema, when the
    caller summed them block by block while it encoded the rows (:func:`exact_counts`: a streamed upload); equal
    to what would be computed here, which is skipped (counts of another shape are ignored)."""
    plan = plan_preprocessing(encoded.schema, encoded.public_n, privacy_filter, share)
    if plan is None:
        return None
    if counts is None or counts.shape != (len(plan.columns), BINS):
        counts = plan.counts(encoded.X, encoded.y)
    release = plan.release(counts, rng, privacy_filter)
    reencoded = encoded
    if release.changed:
        X = np.array(encoded.X, dtype=np.float64, copy=True)
        y = np.array(encoded.y, dtype=np.float64, copy=True)
        release.reencode_rows(X, y)
        X.setflags(write=False)
        y.setflags(write=False)
        content_hash = compute_content_hash(X, y, release.schema, encoded.units)
        reencoded = dataclasses.replace(encoded, X=X, y=y, schema=release.schema, content_hash=content_hash)
    fields = {field.name: getattr(release, field.name) for field in dataclasses.fields(release)}
    return PreprocessingOutcome(**fields, encoded=reencoded)
