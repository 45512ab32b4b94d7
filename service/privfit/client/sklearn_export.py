"""A released fit as a fitted scikit-learn estimator: :func:`to_sklearn` (``FitResult.to_sklearn()``, ``privfit fits
export FIT --format joblib``).

The :class:`~sklearn.pipeline.Pipeline` is built from public things only — the dataset's schema as
``GET /v1/datasets/{id}`` answers it (the declared schema with the transforms derived by private preprocessing filled
in) and the fit's release (coefficients, intercept, classes, model) — and predicts what ``POST /v1/fits/{id}/predict``
answers for the same rows:

1. ``"encode"``: a :class:`~sklearn.compose.ColumnTransformer` with one transformer per feature, in the schema's
   order, so that its output columns are the fit's ``feature_names`` (``name``, ``name=level``; also what
   ``pipeline[:-1].get_feature_names_out()`` returns):

   * a numeric feature: ``cells`` (a :class:`~sklearn.preprocessing.FunctionTransformer` of :func:`numeric_cells`:
     numbers, or decimal texts as the service reads them; a missing value — ``None``, NaN, or one of the schema's
     ``csv.na_values`` — raises under ``"missing": "reject"``), under ``"impute"`` a
     :class:`~sklearn.impute.SimpleImputer` with the feature's public ``fill``, then ``scale``
     (:func:`scaled_numeric`: the transform's clip, log1p and standardize, the scaling to [−1, 1] and its clipping,
     exactly as the service encodes);
   * a categorical feature: ``cells`` (:func:`categorical_cells`: stripped, in Unicode NFC, missing values found;
     a level the schema does not declare raises, as ``/predict`` refuses it) then a
     :class:`~sklearn.preprocessing.OneHotEncoder` over the declared levels (a missing value under ``"impute"`` is
     an all-zero block);
   * an ``"ignore"`` column is dropped (it may be present in the input or not).

2. ``"model"``: the released coefficients in an estimator that is already fitted:

   * ``logistic`` on a binary label: :class:`ReleasedLogisticRegression` (a
     :class:`~sklearn.linear_model.LogisticRegression`) with ``classes_`` = [negative, positive]: ``predict`` the
     class names, ``predict_proba`` (σ(−z), σ(z)), ``decision_function`` z = ⟨θ, x⟩ + b;
   * ``logistic`` on a categorical label: the same class with the k ``classes_``: ``predict_proba`` the softmax of the
     k logits (``decision_function``), ``predict`` the most probable class;
   * ``svm`` and ``linear_loss``: :class:`ReleasedLinearClassifier` — the positive class where z ≥ 0, else the
     negative one; no ``predict_proba`` (the service gives none for these models);
   * ``linear``, ``huber``, ``absolute``, ``quantile`` (a numeric label): :class:`ReleasedLinearRegressor` —
     ``predict`` z decoded to the label's units and clipped to its declared range, ``decision_function`` z.

The models are never refitted: their ``fit`` keeps the released parameters and ``clone`` copies them, so the pipeline
works in :func:`~sklearn.model_selection.cross_val_score` and the like (the encoding's transformers refit to the same
public constants): the scores are those of the released model on your data. Differences from ``/predict``: the input
is a pandas DataFrame of raw columns (extra columns, such as the label, are ignored rather than refused), a NaN cell is
a missing value (as the Python client sends it), and errors are :class:`CellError` (a ``ValueError``).

The pipeline pickles (``joblib.dump``) and loads where ``privfit.client``, numpy, scikit-learn and pandas are
importable: it references only this module, never the service's. scikit-learn is the ``sklearn`` extra
(``pip install 'privfit[sklearn]'``).
"""

from __future__ import annotations

import copy
import math
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import numpy as np

try:
    from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin  # type: ignore[import-untyped]
    from sklearn.compose import ColumnTransformer  # type: ignore[import-untyped]
    from sklearn.impute import SimpleImputer  # type: ignore[import-untyped]
    from sklearn.linear_model import LogisticRegression  # type: ignore[import-untyped]
    from sklearn.pipeline import Pipeline  # type: ignore[import-untyped]
    from sklearn.preprocessing import FunctionTransformer, OneHotEncoder  # type: ignore[import-untyped]
except ImportError as missing:  # pragma: no cover - exercised by the CLI test with sklearn hidden
    raise ImportError(
        f"exporting a fit as a scikit-learn model needs scikit-learn and pandas ({missing}): "
        "pip install 'privfit[sklearn]'"
    ) from missing

__all__ = [
    "CLASSIFICATION_MODELS",
    "MISSING_LEVEL",
    "REGRESSION_MODELS",
    "CellError",
    "ReleasedLinearClassifier",
    "ReleasedLinearRegressor",
    "ReleasedLogisticRegression",
    "categorical_cells",
    "numeric_cells",
    "one_hot_name",
    "scaled_numeric",
    "to_sklearn",
]

#: Models whose prediction is a class (the service's ``privfit.solvers.base.CLASSIFICATION_MODELS``; a test keeps
#: them equal: this module never imports the service).
CLASSIFICATION_MODELS = ("logistic", "svm", "linear_loss")
#: Models whose prediction is a value of a numeric label (``privfit.solvers.base.REGRESSION_MODELS``).
REGRESSION_MODELS = ("linear", "huber", "absolute", "quantile")

#: A plain decimal number, ASCII digits only: what the service reads as a number in a text cell
#: (``privfit.datasets.encoding._NUMBER``; a test keeps them equal).
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_NON_FINITE_WORDS = frozenset({"nan", "inf", "infinity"})
#: The defaults of the schema's ``transform.standardize.clip_at`` (``privfit.datasets.schema.Standardize``) and
#: ``csv.na_values`` (``CsvOptions``), for a schema document that leaves them out.
_DEFAULT_CLIP_AT = 3.0
_DEFAULT_NA_VALUES = ("", "NA", "?")
#: What :func:`categorical_cells` passes on for a missing (or, with ``unknown="ignore"``, undeclared) level: the
#: one-hot encoder drops its column, leaving an all-zero block. Declared levels never hold a control character.
MISSING_LEVEL = "\x00missing"

_OK, _MISSING, _NOT_NUMBER, _NON_FINITE, _BAD_TYPE, _UNKNOWN = range(6)
_FLOAT_MAX = float(np.finfo(np.float64).max)


class CellError(ValueError):
    """A cell the service would refuse (``/predict`` answers 422): a missing value under ``"missing": "reject"``, an
    undeclared level, a text that is not a number, a non-finite number, a value of the wrong type. ``column`` names
    the column, ``row`` the 1-based row of the input (never the cell's value)."""

    def __init__(self, column: str, row: int, message: str) -> None:
        super().__init__(message)
        self.column, self.row = column, row

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.column, self.row, str(self)))


def _nfc(text: str) -> str:
    """``text`` in Unicode NFC, as the schema stores names and levels (``privfit.text.nfc``)."""
    if text.isascii() or unicodedata.is_normalized("NFC", text):
        return text
    return unicodedata.normalize("NFC", text)


def _missing_object(value: Any) -> bool:
    """None, a float NaN (pandas' missing value, and what the Python client sends as null), pandas.NA or NaT."""
    if value is None:
        return True
    if isinstance(value, float | np.floating):
        return math.isnan(value)
    return type(value).__name__ in ("NAType", "NaTType")


def _cells(X: Any) -> np.ndarray:
    """The one column of ``X`` (a one-column DataFrame, an (n, 1) array or a 1-D array) as a 1-D numpy array."""
    if hasattr(X, "iloc"):
        X = X.iloc[:, 0] if getattr(X, "ndim", 1) == 2 else X
        return np.asarray(X.to_numpy())
    array = np.asarray(X)
    return array.reshape(-1) if array.ndim != 2 else array[:, 0]


def _memoised(cells: np.ndarray, fn: Callable[[Any], Any]) -> list[Any]:
    """``[fn(v) for v in cells]``, memoised on string cells (a column repeats few distinct texts)."""
    memo: dict[str, Any] = {}
    out = []
    for v in cells:
        if isinstance(v, str):
            if v not in memo:
                memo[v] = fn(v)
            out.append(memo[v])
        else:
            out.append(fn(v))
    return out


def _missing_message(column: str, row: int, na_values: Sequence[str]) -> str:
    markers = ", ".join(repr(v) for v in na_values) if na_values else "none"
    return (f"missing value in column {column!r} at row {row} (missing-value policy is 'reject'; "
            f"declared NA markers: {markers}; None and NaN are missing too)")  # fmt: skip


def numeric_cells(X: Any, *, column: str, na_values: Sequence[str] = (), impute: bool = False) -> np.ndarray:
    """A numeric column's cells as float64, shape (n, 1), read as the service reads them: a number (not a bool); a
    text stripped of surrounding whitespace that is a plain decimal number; missing — None, NaN, or a text among
    ``na_values`` — is NaN under ``impute``, else a :class:`CellError`, as is any other cell (a non-numeric text,
    ±inf, a bool)."""
    cells = _cells(X)
    na = frozenset(na_values)
    if cells.dtype.kind in "iuf":
        values = cells.astype(np.float64)
        status = np.where(np.isnan(values), _MISSING, np.where(np.isinf(values), _NON_FINITE, _OK))
    elif cells.dtype.kind == "b":
        values = np.full(len(cells), np.nan)
        status = np.full(len(cells), _BAD_TYPE)
    else:

        def parse(value: Any) -> tuple[int, float]:
            if isinstance(value, str):
                s = value.strip()
                if s in na or (not s.isascii() and _nfc(s) in na):
                    return _MISSING, math.nan
                if _NUMBER.fullmatch(s):
                    return _OK, float(s)  # a decimal too large for float64 is ±inf, then clipped (as the service)
                if s.lower().lstrip("+-") in _NON_FINITE_WORDS:
                    return _NON_FINITE, math.nan
                return _NOT_NUMBER, math.nan
            if _missing_object(value):
                return _MISSING, math.nan
            if isinstance(value, bool | np.bool_):
                return _BAD_TYPE, math.nan
            if isinstance(value, int | np.integer):
                try:
                    return _OK, float(value)
                except OverflowError:
                    return _OK, math.copysign(math.inf, value)
            if isinstance(value, float | np.floating):
                return (_OK, float(value)) if math.isfinite(value) else (_NON_FINITE, math.nan)
            return _BAD_TYPE, math.nan

        parsed = _memoised(cells, parse)
        status = np.fromiter((st for st, _ in parsed), dtype=np.int64, count=len(parsed))
        values = np.fromiter((v for _, v in parsed), dtype=np.float64, count=len(parsed))
    if impute:
        status = np.where(status == _MISSING, _OK, status)
    bad = np.flatnonzero(status != _OK)
    if bad.size:
        i = int(bad[0])
        row, code = i + 1, status[i]
        if code == _MISSING:
            message = _missing_message(column, row, na_values)
        elif code == _NON_FINITE:
            message = f"non-finite number (infinity) in numeric column {column!r} at row {row}"
        elif code == _NOT_NUMBER:
            message = f"non-numeric value in numeric column {column!r} at row {row} (expected a decimal number)"
        else:
            message = f"wrong value type in numeric column {column!r} at row {row} (expected a number or a string)"
        raise CellError(column, row, message)
    # a decimal text beyond float64 ("1e400") is ±inf, which the service clips to the bounds like any large value:
    # the largest finite float clips alike, and SimpleImputer refuses infinities
    return np.nan_to_num(values, nan=np.nan, posinf=_FLOAT_MAX, neginf=-_FLOAT_MAX).reshape(-1, 1)


def _scale(values: np.ndarray, lower: float, upper: float) -> np.ndarray:
    """[lower, upper] mapped affinely onto [−1, 1] and clipped (``privfit.datasets.schema._scale``)."""
    scaled = (2.0 * values - lower - upper) / (upper - lower)
    return np.clip(scaled, -1.0, 1.0) + 0.0


def scaled_numeric(
    X: Any,
    *,
    lower: float,
    upper: float,
    clip: Sequence[float] | None = None,
    log: bool = False,
    standardize: Mapping[str, float] | None = None,
) -> np.ndarray:
    """The service's encoding of numeric values (``NumericFeature.scale``): clipped to ``clip`` (default the bounds
    [lower, upper]), then log1p if ``log``, then ``(t − mean) / (clip_at · std)`` clipped to [−1, 1] with
    ``standardize``, else the affine map of the (transformed) range onto [−1, 1], clipped."""
    a, b = (float(lower), float(upper)) if clip is None else (float(clip[0]), float(clip[1]))
    v = np.clip(np.asarray(X, dtype=np.float64), a, b)
    if log:
        v, a, b = np.log1p(v), math.log1p(a), math.log1p(b)
    if standardize is None:
        return _scale(v, a, b)
    mean, std = float(standardize["mean"]), float(standardize["std"])
    clip_at = float(standardize.get("clip_at", _DEFAULT_CLIP_AT))
    return np.clip((v - mean) / (clip_at * std), -1.0, 1.0) + 0.0


def categorical_cells(
    X: Any,
    *,
    column: str,
    levels: Sequence[str],
    na_values: Sequence[str] = (),
    impute: bool = False,
    unknown: Literal["error", "ignore"] = "error",
) -> np.ndarray:
    """A categorical column's cells as the declared levels, shape (n, 1), object: a text is stripped and put in
    Unicode NFC, then matched with ``na_values`` (missing) and the levels. A missing cell (also None or NaN) is
    :data:`MISSING_LEVEL` under ``impute``, else a :class:`CellError`; an undeclared level is a :class:`CellError`,
    or :data:`MISSING_LEVEL` with ``unknown="ignore"``; a cell that is not a text is a :class:`CellError`."""
    cells = _cells(X)
    na = frozenset(na_values)
    lookup: dict[str, str] = {}
    for level in levels:
        lookup.setdefault(_nfc(level), level)

    def parse(value: Any) -> tuple[int, str]:
        if isinstance(value, str):
            token = _nfc(value.strip())
            if token in na:
                return _MISSING, MISSING_LEVEL
            level = lookup.get(token)
            if level is not None:
                return _OK, level
            return (_OK, MISSING_LEVEL) if unknown == "ignore" else (_UNKNOWN, MISSING_LEVEL)
        if _missing_object(value):
            return _MISSING, MISSING_LEVEL
        return _BAD_TYPE, MISSING_LEVEL

    parsed = _memoised(cells, parse)
    out = np.empty((len(parsed), 1), dtype=object)
    for i, (status, level) in enumerate(parsed):
        if status == _OK or (status == _MISSING and impute):
            out[i, 0] = level
            continue
        row = i + 1
        if status == _UNKNOWN:
            shown = ", ".join(repr(level) for level in levels)
            message = f"unknown category in column {column!r} at row {row} (declared levels: {shown})"
        elif status == _MISSING:
            message = _missing_message(column, row, na_values)
        else:
            message = f"wrong value type in column {column!r} at row {row} (expected a string)"
        raise CellError(column, row, message)
    return out


def one_hot_name(feature: str, level: Any) -> str:
    """A one-hot column's name as the service names it: ``name=level``."""
    return f"{feature}={level}"


# --------------------------------------------------------------------------------------------------
# the released models
# --------------------------------------------------------------------------------------------------


class _Released:
    """A model whose parameters are a release: ``fit`` keeps them (it fits nothing) and ``clone`` copies them, so a
    pipeline ending in it refits only its encoding (to the same public constants) in ``cross_val_score`` and the
    like."""

    def fit(self, X: Any, y: Any = None, **params: Any) -> Any:
        """Nothing to fit: the parameters are the fit's release. Returns self."""
        return self

    def __sklearn_clone__(self) -> Any:
        return copy.deepcopy(self)


class ReleasedLogisticRegression(_Released, LogisticRegression):
    """A :class:`~sklearn.linear_model.LogisticRegression` holding a released logistic fit (``coef_``,
    ``intercept_``, ``classes_``): binary with ``classes_`` [negative, positive], or multinomial with the k classes
    (``predict_proba`` the softmax of the logits). ``predict`` of a binary model gives the positive class at
    ⟨θ, x⟩ + b = 0 exactly, as the service does (scikit-learn's gives the negative one); nothing else differs."""

    def predict(self, X: Any) -> np.ndarray:
        if len(self.classes_) == 2:
            scores = np.asarray(self.decision_function(X))
            return np.asarray(self.classes_)[(scores >= 0).astype(np.intp)]
        return np.asarray(super().predict(X))


class ReleasedLinearClassifier(_Released, ClassifierMixin, BaseEstimator):
    """A released binary classifier without probabilities (``svm``, ``linear_loss``): ``decision_function`` is
    z = ⟨θ, x⟩ + b, ``predict`` ``classes_[1]`` (the positive class) where z ≥ 0, else ``classes_[0]`` (the negative
    one). Attributes: ``coef_`` (1, d), ``intercept_`` (1,), ``classes_`` [negative, positive], ``model_``."""

    coef_: np.ndarray
    intercept_: np.ndarray
    classes_: np.ndarray
    model_: str

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "coef_")

    def decision_function(self, X: Any) -> np.ndarray:
        return np.asarray(np.asarray(X, dtype=np.float64) @ self.coef_[0] + self.intercept_[0])

    def predict(self, X: Any) -> np.ndarray:
        return np.asarray(self.classes_)[(self.decision_function(X) >= 0).astype(np.intp)]


class ReleasedLinearRegressor(_Released, RegressorMixin, BaseEstimator):
    """A released regression fit (``linear``, ``huber``, ``absolute``, ``quantile``): ``decision_function`` is
    z = ⟨θ, x⟩ + b on the encoded label's scale [−1, 1], ``predict`` z decoded to the label's units —
    (clip(z, −1, 1)·(upper − lower) + lower + upper) / 2 — and clipped to the label's declared [lower, upper], as the
    service's predictions are. Attributes: ``coef_`` (d,), ``intercept_``, ``lower_``, ``upper_``, ``model_``."""

    coef_: np.ndarray
    intercept_: float
    lower_: float
    upper_: float
    model_: str

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "coef_")

    def decision_function(self, X: Any) -> np.ndarray:
        return np.asarray(np.asarray(X, dtype=np.float64) @ self.coef_ + self.intercept_)

    def predict(self, X: Any) -> np.ndarray:
        z = np.clip(self.decision_function(X), -1.0, 1.0)
        lower, upper = self.lower_, self.upper_
        return np.asarray(np.clip((z * (upper - lower) + lower + upper) / 2.0, lower, upper))


# --------------------------------------------------------------------------------------------------
# the pipeline
# --------------------------------------------------------------------------------------------------


def _get(source: Any, name: str, default: Any = None) -> Any:
    """A member of a release given as a mapping (the API's JSON) or an object (a client ``FitResult``)."""
    if isinstance(source, Mapping):
        return source.get(name, default)
    return getattr(source, name, default)


def _schema_document(schema: Any) -> Mapping[str, Any]:
    """The schema as a mapping: a dict (the JSON of ``GET /v1/datasets/{id}``'s ``schema``), a client ``Dataset``
    (its ``schema``) or a pydantic model (dumped)."""
    if isinstance(schema, Mapping):
        return schema
    if hasattr(schema, "model_dump"):
        return dict(schema.model_dump(mode="json"))
    inner = getattr(schema, "schema", None)
    if isinstance(inner, Mapping):
        return inner
    raise TypeError("schema must be the dataset's schema: a dict (GET /v1/datasets/{id}'s `schema`) or a Dataset")


def _feature_names(features: Sequence[Mapping[str, Any]]) -> list[str]:
    out: list[str] = []
    for f in features:
        if f["type"] == "numeric":
            out.append(str(f["name"]))
        elif f["type"] == "categorical":
            out.extend(one_hot_name(str(f["name"]), level) for level in f["levels"])
    return out


def _transformer_names(features: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each used feature's name in the ColumnTransformer: its column name where scikit-learn allows it (no ``__``,
    not a parameter of ColumnTransformer, unique), else ``feature<i>``."""
    reserved = set(ColumnTransformer(transformers=[]).get_params(deep=False))
    names: list[str] = []
    for i, f in enumerate(features):
        name, k = str(f["name"]), 0
        while "__" in name or name in reserved or name in names:
            name, k = f"feature{i}" if k == 0 else f"feature{i}_{k}", k + 1
        names.append(name)
    return names


def _numeric_encoder(f: Mapping[str, Any], na_values: list[str], impute: bool) -> Pipeline:
    name = str(f["name"])
    transform = f.get("transform") or {}
    clip = transform.get("clip")
    standardize = transform.get("standardize")
    steps: list[tuple[str, Any]] = [
        ("cells", FunctionTransformer(numeric_cells, feature_names_out="one-to-one",
                                      kw_args={"column": name, "na_values": na_values, "impute": impute})),
    ]  # fmt: skip
    if impute:
        steps.append(("impute", SimpleImputer(strategy="constant", fill_value=float(f["fill"]))))
    scale = {
        "lower": float(f["lower"]), "upper": float(f["upper"]),
        "clip": None if clip is None else [float(clip[0]), float(clip[1])],
        "log": bool(transform.get("log", False)),
        "standardize": None if standardize is None else {
            "mean": float(standardize["mean"]), "std": float(standardize["std"]),
            "clip_at": float(standardize.get("clip_at", _DEFAULT_CLIP_AT)),
        },
    }  # fmt: skip
    steps.append(("scale", FunctionTransformer(scaled_numeric, feature_names_out="one-to-one", kw_args=scale)))
    return Pipeline(steps)


def _categorical_encoder(
    f: Mapping[str, Any], na_values: list[str], impute: bool, unknown: Literal["error", "ignore"]
) -> Pipeline:
    name, levels = str(f["name"]), [str(level) for level in f["levels"]]
    cells = FunctionTransformer(categorical_cells, feature_names_out="one-to-one",
                                kw_args={"column": name, "levels": levels, "na_values": na_values, "impute": impute,
                                         "unknown": unknown})  # fmt: skip
    blank = impute or unknown == "ignore"  # a missing (or ignored) level: an all-zero block
    one_hot = OneHotEncoder(
        categories=[[*levels, MISSING_LEVEL] if blank else levels],
        drop=[MISSING_LEVEL] if blank else None,
        handle_unknown="error",
        sparse_output=False,
        dtype=np.float64,
        feature_name_combiner=one_hot_name,
    )
    return Pipeline([("cells", cells), ("one_hot", one_hot)])


def _encoder(document: Mapping[str, Any], unknown: Literal["error", "ignore"]) -> ColumnTransformer:
    """The schema's encoding as a ColumnTransformer, fitted on a one-row frame of public values (the bounds and the
    first levels): fitting it learns nothing but the column names."""
    import pandas as pd  # type: ignore[import-untyped]

    features = [f for f in document["features"] if f["type"] in ("numeric", "categorical")]
    impute = document.get("missing", "reject") == "impute"
    na_values = [str(v) for v in (document.get("csv") or {}).get("na_values", _DEFAULT_NA_VALUES)]
    transformers = []
    for name, f in zip(_transformer_names(features), features, strict=True):
        if f["type"] == "numeric":
            transformers.append((name, _numeric_encoder(f, na_values, impute), [str(f["name"])]))
        else:
            transformers.append((name, _categorical_encoder(f, na_values, impute, unknown), [str(f["name"])]))
    encoder = ColumnTransformer(transformers, remainder="drop", sparse_threshold=0.0, verbose_feature_names_out=False)
    prototype = pd.DataFrame({
        str(f["name"]): pd.Series([float(f["lower"])] if f["type"] == "numeric" else [str(f["levels"][0])],
                                  dtype=np.float64 if f["type"] == "numeric" else object)
        for f in features
    })  # fmt: skip
    return encoder.fit(prototype)


def _model(result: Any, label: Mapping[str, Any], d: int) -> Any:
    """The final estimator of the release ``result`` for the dataset's ``label``."""
    model = str(_get(result, "model"))
    classes = _get(result, "classes")
    coefficients = np.asarray(_get(result, "coefficients"), dtype=np.float64)
    intercept = _get(result, "intercept")
    if model in CLASSIFICATION_MODELS and label["type"] == "binary":
        coef = coefficients.reshape(1, -1)
        b = np.array([0.0 if intercept is None else float(intercept)])
        estimator: Any
        if model == "logistic":
            estimator = ReleasedLogisticRegression(fit_intercept=intercept is not None)
        else:
            estimator = ReleasedLinearClassifier()
            estimator.model_ = model
        estimator.classes_ = np.array([str(label["negative"]), str(label["positive"])])
    elif model == "logistic" and label["type"] == "categorical":
        names = [str(c) for c in (classes if classes is not None else label["levels"])]
        coef = coefficients.reshape(len(names), -1)
        b = np.zeros(len(names)) if intercept is None else np.asarray(intercept, dtype=np.float64).reshape(-1)
        estimator = ReleasedLogisticRegression(fit_intercept=intercept is not None)
        estimator.classes_ = np.array(names)
    elif model in REGRESSION_MODELS and label["type"] == "numeric":
        estimator = ReleasedLinearRegressor()
        estimator.coef_ = coefficients.reshape(-1)
        estimator.intercept_ = 0.0 if intercept is None else float(intercept)
        estimator.lower_, estimator.upper_ = float(label["lower"]), float(label["upper"])
        estimator.model_ = model
        estimator.n_features_in_ = d
        if estimator.coef_.shape != (d,):
            raise ValueError(f"the fit has {estimator.coef_.size} coefficients, the schema encodes {d} columns")
        return estimator
    else:
        raise ValueError(
            f"model {model!r} on a {label.get('type')} label: no scikit-learn export (classifiers: "
            f"{', '.join(CLASSIFICATION_MODELS)}; regression: {', '.join(REGRESSION_MODELS)})"
        )
    if coef.shape[1] != d:
        raise ValueError(f"the fit has {coef.shape[1]} coefficients per class, the schema encodes {d} columns")
    estimator.coef_, estimator.intercept_, estimator.n_features_in_ = coef, b, d
    return estimator


def to_sklearn(result: Any, schema: Any, *, unknown_category: Literal["error", "ignore"] = "error") -> Pipeline:
    """A fitted scikit-learn :class:`~sklearn.pipeline.Pipeline` (``"encode"``, then ``"model"``: module docstring)
    that predicts, from a pandas DataFrame of raw columns, what ``/predict`` answers for the fit ``result``.

    Args:
        result: the fit's release: a client :class:`~privfit.client.models.FitResult` or the API's ``result`` JSON.
        schema: its dataset's schema as ``GET /v1/datasets/{id}`` answers it (``Dataset.schema``, with the transforms
            derived by private preprocessing), or that ``Dataset``.
        unknown_category: ``"error"`` (the default, as ``/predict``): a level the schema does not declare raises
            :class:`CellError`; ``"ignore"``: it is an all-zero one-hot block.

    Raises:
        ValueError: the release does not predict (``dp_lazy_oco``'s ``mean``), its model does not fit the label, or
            its coefficients do not match the schema's encoding (another dataset's schema?).
    """
    if unknown_category not in ("error", "ignore"):
        raise ValueError(f"unknown_category must be 'error' or 'ignore', not {unknown_category!r}")
    document = _schema_document(schema)
    if not _get(result, "predictor", True):
        raise ValueError(f"the fit estimated a statistic of the features (model {_get(result, 'model')!r}); it does "
                         "not predict labels")  # fmt: skip
    names = _feature_names(document["features"])
    released = _get(result, "feature_names")
    if released is not None and list(released) != names:
        raise ValueError(f"the fit's feature_names {list(released)} are not the schema's encoded columns {names}: "
                         "pass the schema of the fit's dataset (GET /v1/datasets/{dataset_id})")  # fmt: skip
    model = _model(result, document["label"], len(names))
    return Pipeline([("encode", _encoder(document, unknown_category)), ("model", model)])
