r"""The solver interface (DESIGN §3): a pure fitting function next to its cost function and its calibration.

A private solver is three pure functions of public and private inputs, called by the job runner in this order:

1. **Parameters.** :meth:`Solver.parse_params` validates the user's ``params`` object against the solver's
   pydantic model :attr:`Solver.Params` (``extra="forbid"``, strict types, defaults that work without tuning;
   its ``model_json_schema()`` is what ``GET /v1/solvers`` serves, see :meth:`Solver.describe`).
2. **Privacy resolution** (public inputs only). :meth:`Solver.resolve` turns the parameters, the dataset's
   :class:`PublicMetadata` and EITHER a target ε (calibrated at the dataset's δ on the dataset's order grid)
   OR the explicit noise settings in the parameters into a :class:`ResolvedParams`: every default filled
   in, every noise scale explicit. It is JSON-serialisable (``model_dump(mode="json")``) and is what the job
   stores; :meth:`Solver.load_resolved` reads it back.
3. **Cost before data** (DESIGN §1.4). :meth:`Solver.cost` maps the resolved settings and the public metadata
   to a :class:`~privfit.privacy.PrivacyCost` (an RDP curve on the dataset's grid) without any row. The ledger
   admits and charges this cost before the worker reads the matrix.
4. **Fit.** :meth:`Solver.fit` runs on the private matrix ``X`` (n × d) and labels ``y`` (n,) with the SAME
   resolved settings, a numpy ``Generator`` (:func:`~privfit.privacy.make_generator`: OS-seeded for private
   data), a ``progress(fraction)`` callback and a ``should_stop()`` callback polled once per iteration;
   a stop request raises :class:`FitCancelled`. For a dataset with a privacy unit (user-level privacy,
   :attr:`PublicMetadata.max_rows_per_unit`) ``X`` has one row per ROW and ``units`` gives each row's unit; n is
   then the number of units, and only the solvers with :attr:`Solver.privacy_units` accept it.
5. **Result.** A :class:`FitResult`: coefficients, intercept, and data-independent metadata only (DESIGN §1.3:
   noise scale, steps, step size, clipping norm, radius, …; never a loss, accuracy or gradient norm).

6. **Outlook** (public, before any row). :meth:`Solver.outlook` predicts how noise-dominated the fit will be: the
   expected norm of the noise's contribution to the released θ (the solver's :meth:`Solver._noise_norm`, derived
   from its own noise model) against the public scale of θ (the radius of its parameter ball, or its public bound
   on ‖θ*‖), as a :class:`NoiseOutlook` with a level and, when the noise is expected to exceed that scale, a
   warning that the fit is likely no better than a constant model (issue 21 §4; docs/solvers.md, "What to expect").

The privacy guarantee of a fit is a property of ``cost(resolved, meta, grid)`` and of ``fit`` using exactly
``resolved``: each solver's docstring states the mechanism, its sensitivity under privfit's replace-one
relation (DESIGN §1.1) and the composition that gives the cost. :meth:`Solver.plan` chains steps 1–3 (the
dry-run estimate and the admission both use it).

**Adding a solver.** :class:`Solver` runs steps 1–5 itself (parsing, the target-ε-or-explicit-noise check, the
reported ε, loading the stored settings and checking them against the metadata before cost and fit, the input
checks, the progress reporter, the result); a solver brings its parameters, its calibration, its cost and its
algorithm:

1. a parameter model (subclass :class:`SolverParams`, or :class:`GLMParams` for a GLM loss; its ``model`` field's
   ``Literal`` lists the models it supports) and a resolved model (subclass :class:`GLMResolved` or
   :class:`MetadataResolved`: it records the metadata it was resolved for) whose ``solver`` and
   ``formula_version`` fields are ``Literal``\s with their value as default: they are the solver's registry name
   and cost-formula version;
2. ``class MySolver(Solver[MyParams, MyResolved])`` with a ``description``, the name of its explicit noise
   parameter in ``explicit_noise`` (None: calibrated to a target only), and the hooks :meth:`Solver._resolve`
   (parameters → resolved settings), :meth:`Solver._cost` (resolved settings → RDP curve, no row),
   :meth:`Solver._progress_steps` and :meth:`Solver._fit` (the algorithm on the checked rows);
3. its class in ``_BUILTIN`` of :mod:`privfit.solvers.registry`.

Everything here is pure (numpy, scipy, pydantic); nothing imports the web, DB or job layers (DESIGN §4).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, ClassVar, Generic, Literal, NamedTuple, TypeVar, get_args, get_origin

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator
from scipy.special import expit, softmax

from privfit.errors import ParameterError
from privfit.privacy import DEFAULT_GRID, DeltaAllowance, OrderGrid, PrivacyCost
from privfit.privacy.noise import SamplerName, current_sampler, describe_sampler, using_sampler

from .geometry import augment_intercept, augmented_bound, clip_rows_in_place, row_norms
from .losses import GLMLoss, MultinomialLogisticLoss, available_models, make_loss
from .partitioned import PartitionedRows
from .units import UnitIndex

__all__ = [
    "CLASSIFICATION_MODELS",
    "DEFAULT_RADIUS",
    "MAX_SCALE",
    "MIN_EPSILON",
    "MIN_L2",
    "MIN_SCALE",
    "MULTICLASS_SOLVERS",
    "REGRESSION_MODELS",
    "AnySolver",
    "FitCancelled",
    "FitPlan",
    "FitResult",
    "FitRun",
    "FloatArray",
    "GLMParams",
    "GLMResolved",
    "MetadataResolved",
    "ModelName",
    "MulticlassGLMResolved",
    "NoiseOutlook",
    "OutlookLevel",
    "PrivacyRequest",
    "ProgressCallback",
    "ProgressReporter",
    "PublicMetadata",
    "Release",
    "ResolvedParams",
    "Solver",
    "SolverParameterError",
    "SolverParams",
    "StopCallback",
    "Target",
    "UnitLevelGLMResolved",
    "ball_capped",
    "bounded_labels",
    "check_finite_cost",
    "check_fit_inputs",
    "check_privacy_source",
    "check_resolved_metadata",
    "check_target_epsilon",
    "delta_part",
    "enforce_declared_bounds",
    "expected_gaussian_norm",
    "fits_intercept",
    "glm_fit_result",
    "glm_resolved_fields",
    "gradient_noise_norm",
    "label_mismatch",
    "metadata_fields",
    "numeric_guard",
    "outlook_level",
    "parameter_loss",
    "partitioned_solvers",
    "require_float_sampler",
    "resolved_loss",
    "resolved_metadata",
    "sampler_refusal",
    "unit_fields",
    "unit_level_refusal",
    "unit_level_solvers",
    "validation_error_to_parameter_error",
]

FloatArray = NDArray[np.float64]

ProgressCallback = Callable[[float], None]
"""Receives the fraction of the fit done, in [0, 1], non-decreasing, ending at 1.0; data-independent."""

StopCallback = Callable[[], bool]
"""Polled once per iteration; returning True cancels the fit (:class:`FitCancelled`)."""

ModelName = Literal["logistic", "linear", "huber", "svm"]
#: Models whose predictions are sign(⟨θ, x⟩ + b): the margin losses and ``dp_lazy_oco``'s linear loss −y⟨x, θ⟩.
CLASSIFICATION_MODELS = ("logistic", "svm", "linear_loss")
#: Models that predict a real value ⟨θ, x⟩ + b of a numeric label.
REGRESSION_MODELS = ("linear", "huber", "absolute", "quantile")


#: The solvers that fit a categorical label (k ≥ 3 classes: multinomial logistic regression, ``model: "logistic"``);
#: every other solver refuses such a dataset on ``solver`` (:meth:`Solver.resolve`). Kept equal to the registered
#: solvers with :attr:`Solver.multiclass` by a test (tests/solvers/baselines/test_multiclass_privacy.py).
MULTICLASS_SOLVERS = ("dp_gd", "dp_sgd", "auto")


def label_mismatch(model: str, label_name: str, label_type: str) -> str | None:
    """Why ``model`` cannot be fitted to a label of the declared (public) type, or None when it can.

    A binary classifier needs a binary label and a regression model a numeric one; a categorical label (k ≥ 3
    classes) is fitted by ``logistic`` only (the multinomial model, as scikit-learn's LogisticRegression does);
    ``dp_lazy_oco``'s ``mean`` ignores the label. Issue 21 §6: a logistic fit on a numeric label used to predict
    0.0 everywhere.
    """
    if label_type == "categorical" and model in (*CLASSIFICATION_MODELS, *REGRESSION_MODELS) and model != "logistic":
        return (f"model {model!r} cannot fit the dataset's label {label_name!r}, which is categorical (k ≥ 3 "
                f"classes); use model 'logistic' (multinomial logistic regression, solvers "
                f"{', '.join(MULTICLASS_SOLVERS)})")  # fmt: skip
    if model in CLASSIFICATION_MODELS and label_type not in ("binary", "categorical"):
        return (f"model {model!r} is a classifier but the dataset's label {label_name!r} is {label_type}; "
                f"use a regression model ({', '.join(REGRESSION_MODELS)})")  # fmt: skip
    if model in REGRESSION_MODELS and label_type != "numeric":
        return (f"model {model!r} predicts a numeric label but the dataset's label {label_name!r} is "
                f"{label_type}; use a classifier ({', '.join(CLASSIFICATION_MODELS[:2])})")  # fmt: skip
    return None


class SolverParameterError(ParameterError):
    """A solver parameter (or the solver/model name, or an input shape) is invalid; ``parameter`` names it.

    ``errors`` lists every problem found as ``{"field": ..., "message": ...}`` (the first is the one named by
    ``parameter``). Messages quote public inputs only, never a value of a private row.
    """

    def __init__(self, parameter: str, message: str, errors: Sequence[Mapping[str, str]] | None = None) -> None:
        super().__init__(parameter, message)
        self.message = message
        self.errors: list[dict[str, str]] = (
            [dict(e) for e in errors] if errors else [{"field": parameter, "message": message}]
        )


class FitCancelled(Exception):
    """Raised by :meth:`Solver.fit` when ``should_stop()`` returned True (cooperative cancellation).

    ``steps_completed`` is the number of iterations finished before the stop was seen (data-independent).
    A cancelled fit releases nothing; its charge stays (the cost was paid when the job started reading rows).
    """

    def __init__(self, steps_completed: int, total_steps: int) -> None:
        super().__init__(f"fit cancelled after {steps_completed} of {total_steps} steps")
        self.steps_completed = steps_completed
        self.total_steps = total_steps


def validation_error_to_parameter_error(error: ValidationError, prefix: str = "params") -> SolverParameterError:
    """Convert a pydantic ``ValidationError`` into a :class:`SolverParameterError` naming the first bad field.

    The field is the error location joined by dots (``steps``, ``radius``); an error without a location
    (a model-level check) is reported on ``prefix``. Pydantic's messages are used without the input echo.
    """
    items: list[dict[str, str]] = []
    for err in error.errors(include_url=False, include_input=False):
        loc = ".".join(str(part) for part in err.get("loc", ())) or prefix
        message = str(err.get("msg", "invalid value"))
        if err.get("type") == "extra_forbidden":
            message = "is not a parameter of this solver"
        items.append({"field": loc, "message": message})
    if not items:  # pragma: no cover - pydantic always reports at least one error
        items.append({"field": prefix, "message": "invalid parameters"})
    return SolverParameterError(items[0]["field"], items[0]["message"], items)


# ---------------------------------------------------------------------------------------------------------
# public metadata
# ---------------------------------------------------------------------------------------------------------


def _checked_blocks(blocks: Any, d: int) -> tuple[tuple[int, int], ...]:
    """``blocks`` as a tuple of (start, stop) integer pairs, increasing and disjoint within [0, d), each of ≥ 2
    columns (:attr:`PublicMetadata.one_hot_blocks`)."""
    checked: list[tuple[int, int]] = []
    end = 0
    for block in blocks:
        start, stop = (int(bound) for bound in block)
        if not end <= start < stop - 1 < d:
            raise SolverParameterError(
                "one_hot_blocks", f"must be increasing, disjoint ranges of ≥ 2 of the d = {d} columns, got {blocks!r}"
            )
        checked.append((start, stop))
        end = stop
    return tuple(checked)


@dataclass(frozen=True)
class PublicMetadata:
    """The public facts about a dataset a solver may use before (and while) reading rows (DESIGN §1.2).

    Attributes:
        n: the public size of the dataset: the number of rows (public under bounded DP), or, for a dataset with a
            privacy unit (``max_rows_per_unit`` set), the number of units U. The number of rows of a unit-level
            dataset is NOT public (replacing one unit may change it) and is not part of the metadata.
        d: number of encoded feature columns.
        row_norm_bound: declared bound ``B_x ≥ ‖x_i‖₂`` of every encoded row (without intercept column).
        label_bound: declared bound ``B_y ≥ |y_i|`` (1.0 for privfit's binary and numeric encodings: ±1 or scaled to
            [−1, 1]; k − 1 for the class index of a categorical label).
        feature_names: names of the d columns (optional; only used to label results).
        classes: the declared class names of a categorical label (k ≥ 3, in declared order: the encoded label is
            the class index), or None for a binary or numeric label. k is public; only solvers with
            :attr:`Solver.multiclass` accept it.
        max_rows_per_unit: None for a row-level dataset (one row is one individual; the default). An integer k ≥ 1
            for a dataset with a privacy unit column (user-level privacy, DESIGN §1.1): neighbours differ in ONE UNIT
            with all its rows, each unit has at most k rows (bounded at upload), ``n`` is the number of units U, and
            a fit takes each row's unit (``units``, :meth:`unit_index`). Only solvers with
            :attr:`Solver.privacy_units` accept it (:func:`unit_level_solvers`).
        one_hot_blocks: the half-open column ranges [start, stop) of the one-hot blocks of the d columns, from the
            schema (:attr:`privfit.datasets.schema.DatasetSchema.one_hot_blocks`: a categorical feature's levels;
            at most one non-zero per row in the encoded rows); () when none or unknown. Solvers may store the rows
            by this layout (:mod:`privfit.solvers.baselines.glm_design`); it changes work, not results.
    """

    n: int
    d: int
    row_norm_bound: float
    label_bound: float = 1.0
    feature_names: tuple[str, ...] | None = None
    classes: tuple[str, ...] | None = None
    max_rows_per_unit: int | None = None
    one_hot_blocks: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        for name in ("n", "d"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
                raise SolverParameterError(name, f"must be an integer ≥ 1, got {value!r}")
            object.__setattr__(self, name, int(value))
        for name, allow_zero in (("row_norm_bound", False), ("label_bound", True)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float | np.floating | np.integer):
                raise SolverParameterError(name, f"must be a real number, got {type(value).__name__}")
            number = float(value)
            if not math.isfinite(number) or number < 0 or (number == 0 and not allow_zero):
                raise SolverParameterError(name, f"must be finite and {'≥' if allow_zero else '>'} 0, got {number!r}")
            object.__setattr__(self, name, number)
        if self.feature_names is not None:
            names = tuple(str(name) for name in self.feature_names)
            if len(names) != self.d:
                raise SolverParameterError("feature_names", f"has {len(names)} names for d = {self.d} columns")
            object.__setattr__(self, "feature_names", names)
        if self.classes is not None:
            classes = tuple(str(name) for name in self.classes)
            if len(classes) < 3 or len(set(classes)) != len(classes):
                raise SolverParameterError("classes", f"must be k ≥ 3 distinct class names, got {len(classes)}")
            object.__setattr__(self, "classes", classes)
        rows = self.max_rows_per_unit
        if rows is not None:
            if isinstance(rows, bool) or not isinstance(rows, int | np.integer) or rows < 1:
                raise SolverParameterError("max_rows_per_unit", f"must be an integer ≥ 1 or None, got {rows!r}")
            object.__setattr__(self, "max_rows_per_unit", int(rows))
        object.__setattr__(self, "one_hot_blocks", _checked_blocks(self.one_hot_blocks, self.d))

    @property
    def unit_level(self) -> bool:
        """Whether the dataset has a privacy unit (user-level privacy: ``max_rows_per_unit`` is set)."""
        return self.max_rows_per_unit is not None

    @property
    def k(self) -> int | None:
        """The number of classes of a categorical label (None for a binary or numeric label)."""
        return None if self.classes is None else len(self.classes)

    @classmethod
    def from_dataset(cls, dataset: Any) -> PublicMetadata:
        """The public metadata of an encoded dataset (anything with ``n``, ``d``, ``row_norm_bound``,
        ``label_bound`` and ``feature_names``, e.g. :class:`privfit.datasets.EncodedDataset`; the class names of its
        ``schema``'s label when it has one). For a dataset whose schema has a ``privacy_unit``, ``n`` is its public
        size ``public_n`` (the number of units U) and ``max_rows_per_unit`` the unit's declared ``max_rows``. Reads
        no row."""
        schema = getattr(dataset, "schema", None)
        unit = getattr(schema, "privacy_unit", None)
        return cls(
            n=dataset.n if unit is None else dataset.public_n,
            d=dataset.d,
            row_norm_bound=dataset.row_norm_bound,
            label_bound=dataset.label_bound,
            feature_names=tuple(dataset.feature_names),
            classes=None if schema is None else schema.label_classes,
            max_rows_per_unit=None if unit is None else unit.max_rows,
            one_hot_blocks=tuple(getattr(schema, "one_hot_blocks", ())),
        )

    def check_data(self, X: Any, y: Any, units: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """``X`` as (rows, d) and ``y`` as (rows,) float64 arrays, where rows = n for a row-level dataset; for a
        unit-level one (``max_rows_per_unit`` set) any number of rows ≥ 1, with ``units`` checked against them
        (:meth:`unit_codes`). A row-level dataset takes no ``units``. Errors name public facts only (n, d, U, k; at
        unit level the number of rows is private and is not quoted)."""
        A = np.asarray(X, dtype=np.float64)
        v = np.asarray(y, dtype=np.float64)
        if not self.unit_level:
            if units is not None:
                raise SolverParameterError("units", "this dataset has no privacy unit (row-level privacy): give no "
                                           "units")  # fmt: skip
            if A.shape != (self.n, self.d):
                raise SolverParameterError("X", f"must have shape (n, d) = ({self.n}, {self.d}), got {A.shape}")
            if v.shape != (self.n,):
                raise SolverParameterError("y", f"must have shape (n,) = ({self.n},), got {v.shape}")
            return A, v
        if A.ndim != 2 or A.shape[0] < 1 or A.shape[1] != self.d:
            raise SolverParameterError("X", f"must be a 2-D array of rows with d = {self.d} columns")
        if v.ndim != 1 or v.shape[0] != A.shape[0]:
            raise SolverParameterError("y", "must be a 1-D array with one label per row of X")
        self.unit_codes(units, A.shape[0])
        return A, v

    def unit_codes(self, units: Any, rows: int) -> NDArray[np.int64]:
        """Each row's unit, checked for a unit-level dataset: a 1-D integer array of one entry per row (``rows``),
        with values in [0, U) (U = n), every unit present, none with more than ``max_rows_per_unit`` rows. Raises
        :class:`SolverParameterError` on "units" naming the public facts only (never a value, a unit or a count);
        also for a row-level dataset, which takes no units."""
        k = self.max_rows_per_unit
        if k is None:
            raise SolverParameterError("units", "this dataset has no privacy unit (row-level privacy): give no units")
        if units is None:
            raise SolverParameterError("units", f"this dataset has a privacy unit (at most max_rows_per_unit = {k} "
                                       "rows per unit): give each row's unit")  # fmt: skip
        codes = np.asarray(units)
        if codes.dtype == np.bool_ or not np.issubdtype(codes.dtype, np.integer):
            raise SolverParameterError("units", "must be an array of integer unit indices")
        if codes.ndim != 1 or codes.shape[0] != rows:
            raise SolverParameterError("units", "must be a 1-D array with one unit index per row of X")
        if codes.size == 0 or int(codes.min()) < 0 or int(codes.max()) >= self.n:
            raise SolverParameterError("units", f"must lie in [0, U) = [0, {self.n}) (U = n, the number of units)")
        codes = codes.astype(np.int64, copy=False)
        counts = np.bincount(codes, minlength=self.n)
        if int(counts.min()) < 1:
            raise SolverParameterError("units", f"must name every unit 0..U−1 at least once (U = n = {self.n})")
        if int(counts.max()) > k:
            raise SolverParameterError("units", f"a unit has more rows than max_rows_per_unit = {k}")
        return codes

    def unit_index(self, units: Any, rows: int) -> UnitIndex:
        """The :class:`~privfit.solvers.units.UnitIndex` of the checked ``units`` (:meth:`unit_codes`) of ``rows``
        rows: built once per fit."""
        codes = self.unit_codes(units, rows)  # refuses a row-level dataset: max_rows_per_unit is set below
        return UnitIndex.from_codes(codes, self.n, self.max_rows_per_unit or 1)


# ---------------------------------------------------------------------------------------------------------
# parameters
# ---------------------------------------------------------------------------------------------------------


class SolverParams(BaseModel):
    """Base of every solver's parameter model: unknown fields are errors, types are strict, floats finite."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


#: Public bounds of the solvers' parameters (docs/solvers.md, "Parameter bounds"). Features are scaled to [−1, 1]
#: and labels to ±1 / [−1, 1], so every length-like scale of a fit (radius, clipping norm, Huber threshold, hinge
#: smoothing, step sizes, smoothing radius, learning-rate factors) is a multiple of 1; below :data:`MIN_SCALE` times
#: that unit a scale changes nothing useful but makes the public constants derived from it (smoothness 1/h, steps
#: 1/λ, sensitivities 1/(nλ)) overflow or divide by zero. A positive L2 strength λ is likewise at least
#: :data:`MIN_L2` (0 stays allowed where the solver accepts it), and a target ε at least :data:`MIN_EPSILON`.
MIN_SCALE = 1e-6
MAX_SCALE = 1e6
MIN_L2 = 1e-6
MIN_EPSILON = 1e-6

#: Default radius R of the parameter ball per model when ``radius`` is not given. Features are scaled to
#: [−1, 1] (one-hot blocks have norm ≤ 1), labels to ±1 / [−1, 1]. For the classification losses and Huber,
#: whose Lipschitz constant does not depend on R, R = 10 allows margins up to 10·B_x (probabilities within
#: e^{−10·B_x} of 0 or 1) and is not reached in practice (‖θ‖ ≈ 2.6 after 200 DP-GD steps on Adult); for the
#: squared loss G = (R·B_x + B_y)·B_x grows with R, so R = 1 (predictions |⟨θ, x⟩| ≤ B_x ≥ B_y) keeps the
#: gradient sensitivity — and hence the noise — small.
DEFAULT_RADIUS: dict[str, float] = {"logistic": 10.0, "svm": 10.0, "huber": 10.0, "linear": 1.0}


class GLMParams(SolverParams):
    """Settings shared by the GLM solvers: the model, its loss parameters, L2 strength, intercept, radius."""

    model: ModelName = Field(
        "logistic",
        description=(
            "GLM loss: 'logistic' (labels ±1), 'linear' (squared loss; ridge with l2 > 0), 'huber' (Huber loss "
            "on the residual) or 'svm' (quadratically smoothed hinge, labels ±1)."
        ),
    )
    l2: float = Field(
        0.0,
        ge=0.0,
        le=MAX_SCALE,
        description="L2 regularisation strength λ: 0 or in [1e-6, 1e6]; the objective is mean loss + (λ/2)‖θ‖². "
        "Default 0: the radius constraint already regularises.",
    )
    fit_intercept: bool = Field(
        True,
        description="Fit an intercept as an extra constant feature 1 (constrained and regularised with θ; the "
        "row-norm bound becomes sqrt(B_x² + 1)).",
    )
    radius: float | None = Field(
        None,
        ge=MIN_SCALE,
        le=MAX_SCALE,
        description="Public radius R ∈ [1e-6, 1e6] of the L2 ball the parameters (with intercept) are constrained to. "
        "Default: 10 for logistic, svm and huber; 1 for linear (its Lipschitz constant, hence its noise, "
        "grows with R).",
    )
    huber_delta: float | None = Field(
        None,
        ge=MIN_SCALE,
        le=MAX_SCALE,
        description="Huber threshold δ ∈ [1e-6, 1e6] on the residual (model 'huber' only; default 1).",
    )
    hinge_smoothing: float | None = Field(
        None,
        ge=MIN_SCALE,
        le=1.0,
        description="Width h ∈ [1e-6, 1] of the quadratic smoothing of the hinge (model 'svm' only; default 1).",
    )

    @field_validator("l2")
    @classmethod
    def _l2_zero_or_scale(cls, value: float | None) -> float | None:
        if value is not None and 0.0 < value < MIN_L2:
            raise ValueError(f"must be 0 or at least {MIN_L2:g} (a smaller positive strength only overflows the "
                             "constants derived from 1/λ)")  # fmt: skip
        return value

    @field_validator("huber_delta")
    @classmethod
    def _huber_only(cls, value: float | None, info: ValidationInfo) -> float | None:
        if value is not None and info.data.get("model", "huber") != "huber":
            raise ValueError("applies only to model 'huber'")
        return value

    @field_validator("hinge_smoothing")
    @classmethod
    def _svm_only(cls, value: float | None, info: ValidationInfo) -> float | None:
        if value is not None and info.data.get("model", "svm") != "svm":
            raise ValueError("applies only to model 'svm'")
        return value

    # --- derived public quantities -----------------------------------------------------------------
    def loss_params(self) -> dict[str, float]:
        """The public loss parameters for :func:`~privfit.solvers.losses.make_loss` (defaults filled in)."""
        if self.model == "huber":
            return {"delta": 1.0 if self.huber_delta is None else self.huber_delta}
        if self.model == "svm":
            return {"h": 1.0 if self.hinge_smoothing is None else self.hinge_smoothing}
        return {}

    def effective_radius(self) -> float:
        """``radius``, or the model's :data:`DEFAULT_RADIUS`."""
        return DEFAULT_RADIUS[self.model] if self.radius is None else self.radius


class ResolvedParams(BaseModel):
    """Base of a solver's fully resolved settings: every default filled in, every noise scale explicit.

    A function of the parameters and the public metadata only. The job stores ``model_dump(mode="json")``
    and passes the reloaded object (:meth:`Solver.load_resolved`) to both :meth:`Solver.cost` and
    :meth:`Solver.fit`, so the cost that was admitted is the cost of the fit that runs.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    solver: str
    formula_version: str = Field(description="Version tag of the solver's cost formula (recorded by the ledger).")
    target_epsilon: float | None = Field(description="The ε the noise was calibrated to, or None if explicit.")
    delta: float | None = Field(description="The δ of the calibration / of the reported ε, if given.")
    epsilon: float | None = Field(description="ε of this fit alone at ``delta`` (None without δ).")


class MetadataResolved(ResolvedParams):
    """Resolved settings that record the public metadata they were resolved for (checked again before cost and
    fit, :func:`check_resolved_metadata`)."""

    n: int = Field(ge=1, description="Rows (public).")
    d: int = Field(ge=1, description="Encoded feature columns (without intercept).")
    row_norm_bound: float = Field(gt=0.0, description="Declared B_x of the rows (without intercept).")
    label_bound: float = Field(ge=0.0, description="Declared B_y of the labels.")


def resolved_metadata(resolved: MetadataResolved) -> PublicMetadata:
    """The public metadata that ``resolved`` records (n, d and the declared bounds; no feature names): what a stored
    fit's outlook is recomputed from without reading its dataset."""
    classes = getattr(resolved, "classes", None)
    return PublicMetadata(resolved.n, resolved.d, resolved.row_norm_bound, resolved.label_bound,
                          classes=None if classes is None else tuple(classes),
                          max_rows_per_unit=getattr(resolved, "max_rows_per_unit", None))  # fmt: skip


def metadata_fields(meta: PublicMetadata) -> dict[str, Any]:
    """The :class:`MetadataResolved` fields of ``meta``."""
    return {"n": meta.n, "d": meta.d, "row_norm_bound": meta.row_norm_bound, "label_bound": meta.label_bound}


class GLMResolved(MetadataResolved):
    """The public facts every GLM solver's resolved settings record: the metadata, the model and its loss
    parameters."""

    model: ModelName
    loss_params: dict[str, float]
    fit_intercept: bool
    design_norm_bound: float = Field(gt=0.0, description="Row-norm bound of the design matrix (with intercept).")


class MulticlassGLMResolved(GLMResolved):
    """The resolved settings of a GLM solver that also fits a categorical label (:attr:`Solver.multiclass`): they
    record its class names (public; None for a binary or numeric label), checked against the metadata again
    before cost and fit (:func:`check_resolved_metadata`)."""

    classes: list[str] | None = Field(
        None, description="Class names of a categorical label (multinomial model, θ has k rows); null otherwise."
    )


class UnitLevelGLMResolved(MulticlassGLMResolved):
    """The resolved settings of a GLM solver that also fits a dataset with a privacy unit (:attr:`Solver.
    privacy_units`): they record the public maximum k of rows per unit (None: row-level), checked against the
    metadata again before cost and fit (:func:`check_resolved_metadata`), so the stored settings say for which
    neighbouring relation their cost is stated (``n`` is then the number of units)."""

    max_rows_per_unit: int | None = Field(
        None,
        ge=1,
        description="User-level privacy: the public maximum of rows per privacy unit, the cost being stated for "
        "neighbours that differ in one unit with all its rows (n is then the number of units); null for row-level "
        "privacy (one row per individual).",
    )


def unit_fields(meta: PublicMetadata) -> dict[str, Any]:
    """The :class:`UnitLevelGLMResolved` field of ``meta``: its ``max_rows_per_unit``."""
    return {"max_rows_per_unit": meta.max_rows_per_unit}


class Target(NamedTuple):
    """A target (ε, δ): the noise is calibrated so that the cost converts to ε ≤ ``epsilon`` at ``delta``."""

    epsilon: float
    delta: float


@dataclass(frozen=True)
class PrivacyRequest:
    """The privacy side of a resolution, as :meth:`Solver.resolve` hands it to :meth:`Solver._resolve`, checked.

    Exactly one of ``target`` and ``explicit_noise`` is set: a target (ε, δ) to calibrate the noise to on
    ``grid``, or the value of the solver's explicit noise parameter (:attr:`Solver.explicit_noise`). Solvers
    calibrated to a target only always get a target. ``delta`` is the request's δ (the target's, or with explicit
    noise the δ at which the fit's ε is reported, if any). ``delta_allowance`` is the dataset's allowance for
    δ-only parts, given only to solvers with :attr:`Solver.uses_delta_parts` (None: standalone, no dataset).
    """

    target: Target | None
    explicit_noise: float | None
    delta: float | None
    grid: OrderGrid = DEFAULT_GRID
    delta_allowance: DeltaAllowance | None = None

    @property
    def target_epsilon(self) -> float | None:
        """The target ε, or None with explicit noise."""
        return None if self.target is None else self.target.epsilon

    def required_target(self) -> Target:
        """The target (ε, δ) of a solver calibrated to a target only (:attr:`Solver.explicit_noise` is None)."""
        if self.target is None:  # pragma: no cover - Solver.resolve refuses a request without one
            raise SolverParameterError("epsilon", "a target epsilon and a delta are required")
        return self.target

    def explicit(self) -> float:
        """The explicit noise parameter's value (when there is no target)."""
        if self.explicit_noise is None:  # pragma: no cover - Solver.resolve refuses a request without one
            raise SolverParameterError("epsilon", "explicit noise was not given")
        return self.explicit_noise

    def resolved_fields(self, meta: PublicMetadata) -> dict[str, Any]:
        """The :class:`MetadataResolved` fields of a resolution for ``meta`` (``epsilon`` left None: the base fills
        it in, :meth:`Solver.with_reported_epsilon`)."""
        return {"target_epsilon": self.target_epsilon, "delta": self.delta, "epsilon": None, **metadata_fields(meta)}


def glm_resolved_fields(params: GLMParams, meta: PublicMetadata, privacy: PrivacyRequest) -> dict[str, Any]:
    """The :class:`GLMResolved` fields of a resolution (``epsilon`` left None: see
    :meth:`Solver.with_reported_epsilon`)."""
    return {
        **privacy.resolved_fields(meta),
        "model": params.model,
        "loss_params": params.loss_params(),
        "fit_intercept": params.fit_intercept,
        "design_norm_bound": design_bound(meta, params.fit_intercept),
    }


# ---------------------------------------------------------------------------------------------------------
# the noise outlook (issue 21 §4): a public prediction of how noise-dominated a fit will be
# ---------------------------------------------------------------------------------------------------------

OutlookLevel = Literal["low", "moderate", "high"]

#: Upper ends of the levels "low" and "moderate" of the ratio E‖noise in θ‖ / (public scale of θ); "high" from
#: :data:`OUTLOOK_HIGH` on. Chosen from 115 default fits (8 solvers × Adult and the binary dev datasets × ε from 1e-4 to
#: 5; ``benchmarks/noise_outlook.py``, docs/solvers.md "What to expect: the noise outlook"): all 16 below 0.1 beat the
#: majority class; 55 of the 61 at 0.8 or more did not (3 of the other 6 were within 0.3 point of it). 0.8 rather
#: than 1: resque_dpsgd's default step caps its ratio just below 1 exactly when the noise dominates its gradients.
OUTLOOK_MODERATE = 0.1
OUTLOOK_HIGH = 0.8

OUTLOOK_WARNING = (
    "the noise is expected to move the model by about the radius of its parameter ball or more (expected noise norm "
    "{noise:.3g} vs radius {radius:.3g}); predictions are likely no better than a constant model. Raise epsilon, "
    "or choose a solver with less noise at this epsilon (compare the outlook of their estimates, "
    "POST /v1/fits/estimate)"
)


class NoiseOutlook(BaseModel):
    """How noise-dominated a fit is expected to be, from its resolved public settings only (no row is read).

    ``noise_norm`` is the expected L2 norm of the noise's contribution to the released parameter vector θ (with the
    intercept) under the solver's own noise model (each solver's ``_noise_norm`` states its formula); ``radius`` the
    public scale it is compared with (the radius R of the parameter ball, or the solver's public bound on ‖θ*‖);
    ``ratio = noise_norm / radius``. ``level`` is "low" below 0.1, "moderate" below 0.8, "high" from 0.8 on, when
    ``warning`` says that the fit is likely no better than a constant model.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    noise_norm: float = Field(ge=0.0, description="Expected L2 norm of the noise's contribution to the released θ.")
    radius: float = Field(gt=0.0, description="The public scale of θ it is compared with (ball radius or ‖θ*‖ bound).")
    ratio: float = Field(ge=0.0, description="noise_norm / radius.")
    level: OutlookLevel = Field(description="low (ratio < 0.1) | moderate (< 0.8) | high (≥ 0.8).")
    warning: str | None = Field(None, description="Set when level is high: the fit is likely no better than a "
                                "constant model.")  # fmt: skip

    @classmethod
    def of(cls, noise_norm: float, radius: float) -> NoiseOutlook:
        """The outlook of a noise norm against a radius (level and warning by :func:`outlook_level`)."""
        ratio = noise_norm / radius
        level = outlook_level(ratio)
        warning = OUTLOOK_WARNING.format(noise=noise_norm, radius=radius) if level == "high" else None
        return cls(noise_norm=noise_norm, radius=radius, ratio=ratio, level=level, warning=warning)


def outlook_level(ratio: float) -> OutlookLevel:
    """ "low" (ratio < :data:`OUTLOOK_MODERATE`), "moderate" (< :data:`OUTLOOK_HIGH`) or "high"."""
    if ratio < OUTLOOK_MODERATE:
        return "low"
    return "moderate" if ratio < OUTLOOK_HIGH else "high"


def expected_gaussian_norm(sigma: float, dimension: int) -> float:
    """E‖v‖ for v ~ N(0, σ² I_d), exactly: σ·√2·Γ((d + 1)/2)/Γ(d/2) (σ times the mean of a χ_d variable; it lies
    in [σ d/sqrt(d + 1), σ√d], the upper end being Jensen's bound sqrt(E‖v‖²))."""
    return sigma * math.sqrt(2.0) * math.exp(math.lgamma((dimension + 1) / 2.0) - math.lgamma(dimension / 2.0))


def ball_capped(noise_norm: float, radius: float) -> float:
    """``min(noise_norm, 2R)``: a release projected onto the ball of radius R differs from the noiseless one, which
    lies in the same ball, by at most its diameter 2R (projection onto a convex set is non-expansive)."""
    return min(noise_norm, 2.0 * radius)


def gradient_noise_norm(sigma: float, divisor: float, squared_steps: float, dimension: int, radius: float) -> float:
    r"""The noise norm of projected noisy gradient descent θ_{t+1} = Π_R(θ_t − η_t (g_t + N(0, σ²I))/m), T steps.

    Without projection and curvature the noise terms add up: Σ_t η_t ξ_t/m with ξ_t ~ N(0, σ²I_d) independent, a
    N(0, (σ²/m²) Σ_t η_t² · I_d) vector, whose expected norm is :func:`expected_gaussian_norm` of
    σ·sqrt(Σ_t η_t²)/m (= η σ sqrt(T)/m at a constant step: η σ √(T d)/m by the √d bound). Curvature of the
    objective and the regulariser contract the noise along the directions the data constrains, so this is the
    noise of the flat directions; the projection caps it at 2R (:func:`ball_capped`). An average of the last
    iterates has a smaller noise (≈ sqrt(2/3) of the last iterate's for the last half), so this bounds it.
    ``squared_steps`` is Σ_t η_t², ``divisor`` the public m (n for full-batch GD).
    """
    return ball_capped(expected_gaussian_norm(sigma * math.sqrt(squared_steps) / divisor, dimension), radius)


# ---------------------------------------------------------------------------------------------------------
# results and progress
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FitResult:
    """What a fit releases (DESIGN §1.3): parameters plus data-independent metadata, JSON-serialisable.

    Attributes:
        solver: solver name.
        model: model name (how to predict: sign of ⟨θ, x⟩ + b for classification, the value for regression).
        coefficients: θ, one float per encoded feature column (``feature_names`` order).
        intercept: b, or ``None`` when ``fit_intercept`` is false.
        feature_names: the column names, if the metadata had them.
        metadata: the resolved settings and noise scales (no quantity computed from private rows).
        predictor: whether ⟨θ, x⟩ + b predicts the label (False for an estimate of a feature statistic, e.g.
            ``dp_lazy_oco``'s mean of the features, which has no predictions).
        classes: for a multinomial fit (a categorical label with k classes), the class names; ``coefficients`` is
            then a k × d matrix (row j: the coefficients of class j) and ``intercept`` a list of k numbers. None
            otherwise (absent from :meth:`to_dict`).
        selected: for a private selection (``auto``), the candidate whose model this is (its solver and resolved
            settings). Unlike ``metadata`` it depends on the rows — through the selection's accounted mechanism,
            like the coefficients — and is part of the release; None for every other solver (and left out of
            :meth:`to_dict`).
    """

    solver: str
    model: str
    coefficients: list[float] | list[list[float]]
    intercept: float | list[float] | None
    feature_names: list[str] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    predictor: bool = True
    classes: list[str] | None = None
    selected: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (plain lists, floats, strings); ``classes`` only for a multinomial fit, ``selected``
        only for a private selection."""
        body: dict[str, Any] = {
            "solver": self.solver,
            "model": self.model,
            "coefficients": list(self.coefficients),
            "intercept": self.intercept,
            "feature_names": None if self.feature_names is None else list(self.feature_names),
            "metadata": dict(self.metadata),
            "predictor": self.predictor,
        }
        if self.classes is not None:
            body["classes"] = list(self.classes)
        if self.selected is not None:
            body["selected"] = dict(self.selected)
        return body

    def decision_function(self, X: Any) -> np.ndarray:
        """⟨θ, x⟩ + b for each row of ``X`` (client-supplied or public rows): shape (n,), or (n, k) — the logits
        Θx + b of the k classes — for a multinomial fit."""
        A = np.asarray(X, dtype=np.float64)
        W = np.asarray(self.coefficients, dtype=np.float64)
        if self.classes is not None:
            b = np.zeros(len(self.classes)) if self.intercept is None else np.asarray(self.intercept, dtype=np.float64)
            return np.asarray(A @ W.T + b)
        return np.asarray(A @ W + (self.intercept or 0.0))

    def predict_proba(self, X: Any) -> np.ndarray:
        """The class probabilities of a logistic fit (rows sum to 1): softmax(Θx + b), shape (n, k), for a multinomial
        fit; for a binary one, shape (n, 2), the columns in the order of the labels −1 and +1 (negative, positive):
        (σ(−z), σ(z)) with z = ⟨θ, x⟩ + b and σ the logistic function (each computed directly, so a probability
        near 0 keeps its relative precision)."""
        if self.classes is not None:
            return np.asarray(softmax(self.decision_function(X), axis=1))
        if self.model != "logistic":
            raise SolverParameterError("model", f"class probabilities need a logistic model, not {self.model!r}")
        z = np.asarray(self.decision_function(X), dtype=np.float64)
        return np.column_stack([expit(-z), expit(z)])

    def predict(self, X: Any) -> np.ndarray:
        """Labels ±1 (0 ↦ +1) for binary classification models, the most probable class index (as float; the
        first on ties) for a multinomial fit, ⟨θ, x⟩ + b for regression models."""
        z = self.decision_function(X)
        if self.classes is not None:
            return np.asarray(np.argmax(z, axis=1), dtype=np.float64)
        if self.model in CLASSIFICATION_MODELS:
            return np.where(z >= 0.0, 1.0, -1.0)
        return z


class ProgressReporter:
    """Reports ``done/total`` to a :data:`ProgressCallback`, throttled to ~``updates`` calls, ending at 1.0.

    Fractions depend only on the public step count, never on the data (DESIGN §4: progress that does not
    depend on data). Also polls the :data:`StopCallback` and raises :class:`FitCancelled`.
    """

    def __init__(
        self,
        total: int,
        progress: ProgressCallback | None = None,
        should_stop: StopCallback | None = None,
        *,
        updates: int = 100,
    ) -> None:
        self.total = max(int(total), 1)
        self._progress = progress
        self._should_stop = should_stop
        self._updates = max(int(updates), 1)
        self._bucket = 0

    def check_stop(self, done: int) -> None:
        """Raise :class:`FitCancelled` if a stop was requested (called before each iteration)."""
        if self._should_stop is not None and self._should_stop():
            raise FitCancelled(done, self.total)

    def report(self, done: int) -> None:
        """Report ``done/total`` when it enters a new 1/``updates`` bucket (at most ``updates`` calls in all)."""
        if self._progress is None:
            return
        done = min(max(int(done), 0), self.total)
        bucket = done * self._updates // self.total
        if bucket > self._bucket:
            self._bucket = bucket
            self._progress(done / self.total)

    def advance(self, done: int) -> None:
        """Report every milestone k/``updates`` that ``done`` has reached and that was not reported yet, in order.

        For loops whose step sizes depend on the data (e.g. ``dp_lazy_oco`` jumps from switch to switch): the
        reported values are always the same sequence 1/updates, 2/updates, … whatever the jumps were.
        """
        if self._progress is None:
            return
        reached = min(max(int(done), 0), self.total) * self._updates // self.total
        for bucket in range(self._bucket + 1, reached + 1):
            self._bucket = bucket
            self._progress(bucket / self._updates)

    def finish(self) -> None:
        """Report 1.0 (once)."""
        self.report(self.total)


@dataclass(frozen=True)
class FitPlan:
    """Steps 1–3 done: validated parameters, resolved settings and the cost (no row read)."""

    params: SolverParams
    resolved: ResolvedParams
    cost: PrivacyCost


@dataclass(frozen=True)
class FitRun:
    """What :meth:`Solver._fit` runs with, prepared and checked by :meth:`Solver.fit`.

    Attributes:
        X: (a property) the private rows, of the metadata's shape, with the declared bounds enforced
            (:func:`enforce_declared_bounds`; as given for a solver with :attr:`Solver.enforces_declared_bounds`,
            which enforces them itself): the design matrix (a trailing column of ones when the resolved
            settings fit an intercept), or the rows themselves for a solver without :attr:`Solver.appends_intercept`.
            Prepared from ``rows`` when first read, once: a fit that takes a shared form of them instead (under
            ``dataset_key``) never prepares them.
        rows: ``X``, or the function that prepares it (called at the first read of ``X``).
        y: the labels, within the declared bound (same exception).
        meta: the public metadata (the resolved settings were resolved for it).
        rng: the fit's only source of randomness (OS-seeded for private data).
        reporter: progress and cancellation, counted in :meth:`Solver._progress_steps` steps.
        units: for a dataset with a privacy unit (``meta.max_rows_per_unit`` set; only solvers with
            :attr:`Solver.privacy_units` get one), the rows of each unit (:class:`~privfit.solvers.units.UnitIndex`,
            checked: every unit 0..U−1 present with at most k rows; ``meta.n`` is U, and the number of rows of ``X``
            is private); None for a row-level dataset.
        partitions: for a dataset held elsewhere (:meth:`Solver.fit_partitioned`; solvers with
            :attr:`Solver.supports_partitions` only), its rows' only access (:mod:`privfit.solvers.partitioned`);
            ``X`` and ``y`` are then empty. None otherwise.
        dataset_key: an identity of the rows as stored, from the caller that read them (:meth:`Solver.fit`'s
            ``dataset_key``), under which what a fit derives from ``X`` and public constants alone may be shared by
            the fits of that dataset in this process (:mod:`privfit.solvers.design_cache`); None otherwise.
    """

    rows: FloatArray | Callable[[], FloatArray]
    y: FloatArray
    meta: PublicMetadata
    rng: np.random.Generator
    reporter: ProgressReporter
    units: UnitIndex | None = None
    partitions: PartitionedRows | None = None
    dataset_key: Hashable | None = None

    @cached_property
    def X(self) -> FloatArray:  # noqa: N802 - the matrix's conventional name
        return self.rows() if callable(self.rows) else self.rows


@dataclass(frozen=True)
class Release:
    """What :meth:`Solver._fit` returns when θ alone does not say everything the fit releases.

    Attributes:
        theta: the released parameters: the d coefficients, then the intercept when the settings fit one.
        metadata: data-independent entries added after the resolved settings in :attr:`FitResult.metadata`
            (post-processing of the release, e.g. ``dp_lazy_oco``'s number of switches).
        predictor: :attr:`FitResult.predictor`.
        selected: :attr:`FitResult.selected` (a private selection's winner; part of the release).
    """

    theta: FloatArray
    metadata: Mapping[str, Any] = field(default_factory=dict)
    predictor: bool = True
    selected: Mapping[str, Any] | None = None


# ---------------------------------------------------------------------------------------------------------
# the solver interface
# ---------------------------------------------------------------------------------------------------------


ParamsT = TypeVar("ParamsT", bound=SolverParams)
ResolvedT = TypeVar("ResolvedT", bound=MetadataResolved)

_TARGET_REQUIRED = "is calibrated to a target epsilon: give both epsilon and delta"


class Solver(ABC, Generic[ParamsT, ResolvedT]):
    """A private solver: parameter model, privacy resolution, cost function and fitting function.

    ``Solver[P, R]`` runs the steps of the module docstring itself and calls its subclass for what is specific to
    the solver: :meth:`_resolve`, :meth:`_cost`, :meth:`_progress_steps` and :meth:`_fit` (abstract), and
    optionally :meth:`_verify_resolved`. From the type arguments it takes :attr:`Params` = P and :attr:`Resolved`
    = R; from R the defaults of its ``solver`` and ``formula_version`` fields (:attr:`name`,
    :attr:`formula_version`); from P's ``model`` field, a ``Literal``, the :attr:`models` (a subclass may set any
    of these itself; a name or version that disagrees with R is refused at import). Instances are stateless and
    shared (the registry holds one of each).
    """

    #: pydantic model of the user-facing parameters (the first type argument)
    Params: type[ParamsT]
    #: pydantic model of the resolved settings (the second type argument)
    Resolved: type[ResolvedT]
    #: registry name, e.g. "dp_gd" (the default of ``Resolved.solver``)
    name: ClassVar[str]
    #: version of the cost formula; a change of formula is a new version (DESIGN §2: entries record it; the
    #: default of ``Resolved.formula_version``)
    formula_version: ClassVar[str]
    #: model names this solver supports (a subset of :func:`~privfit.solvers.registry.known_models`; default: the
    #: ``Literal`` of ``Params.model``)
    models: ClassVar[tuple[str, ...]]
    #: one-paragraph description (served by ``GET /v1/solvers``)
    description: ClassVar[str]
    #: the parameter that sets the noise explicitly instead of a target ε (e.g. "noise_multiplier"): a request
    #: gives exactly one of the two (:func:`check_privacy_source`). None: calibrated to a target (ε, δ) only, and a
    #: request without both is refused on "epsilon" with the message :attr:`target_required`
    explicit_noise: ClassVar[str | None] = None
    #: the message refusing a request without a target, for solvers without :attr:`explicit_noise`
    target_required: ClassVar[str] = _TARGET_REQUIRED
    #: True: :meth:`_fit` gets the design matrix (``X`` with a trailing column of ones when the resolved settings
    #: have ``fit_intercept``); False: the bounded ``X`` itself (the solver handles any intercept)
    appends_intercept: ClassVar[bool] = True
    #: True: :meth:`_fit` gets the rows and labels as given (shape-checked float64 arrays, not copied) and enforces
    #: the declared bounds itself, row by row and with the same work for every row, exactly as
    #: :func:`enforce_declared_bounds` does (a non-finite entry is 0, a row is clipped to B_x, a label to
    #: [−B_y, B_y]; rows within the bounds are used bit for bit): a one-pass solver saves the O(nd) copy. Only
    #: with ``appends_intercept`` False. False (default): :meth:`fit` enforces them before :meth:`_fit`
    enforces_declared_bounds: ClassVar[bool] = False
    #: experimental solvers are hidden and refused by the API unless the operator enables them
    experimental: ClassVar[bool] = False
    #: why this solver's noise cannot come from the exact lattice samplers of :mod:`privfit.privacy.noise` (a public
    #: fact, worded to follow the solver's name), or None when it runs under both samplers. A server whose sampler
    #: is ``exact`` refuses such a solver: :func:`sampler_refusal` is the one rule, which :meth:`resolve` enforces
    #: (:func:`require_float_sampler`) and ``GET /v1/solvers`` reports (:mod:`privfit.solvers.availability`)
    float_sampler_only: ClassVar[str | None] = None
    #: True: fits a categorical label (k ≥ 3 classes, :attr:`PublicMetadata.classes`) with the multinomial logistic
    #: model (the solver's name must then be in :data:`MULTICLASS_SOLVERS`); False: :meth:`resolve` refuses such
    #: a dataset on ``solver``
    multiclass: ClassVar[bool] = False
    #: solvers whose cost has δ-only parts (an (ε, δ)-DP charge, an approximate-RDP slack) size them within the
    #: dataset's :class:`~privfit.privacy.DeltaAllowance`, which :meth:`resolve` then passes on in
    #: :attr:`PrivacyRequest.delta_allowance` (the ledger's filter admits δ parts only within its pot:
    #: :mod:`privfit.privacy.filter`)
    uses_delta_parts: ClassVar[bool] = False
    #: True: fits a dataset with a privacy unit (user-level privacy, :attr:`PublicMetadata.max_rows_per_unit`): its
    #: :meth:`_fit` clips each unit's SUMMED contribution (``run.units``) so that its cost, stated with n = U, holds for
    #: neighbours that differ in one unit with all its rows. False: :meth:`resolve`, :meth:`cost` and :meth:`fit`
    #: refuse such a dataset on ``solver``, naming the solvers that can (:func:`unit_level_solvers`)
    privacy_units: ClassVar[bool] = False
    #: True: fits a dataset held elsewhere by partitions (:meth:`fit_partitioned`, :mod:`privfit.solvers.partitioned`:
    #: its :meth:`_fit` reads the rows only through ``run.partitions``); False: such a dataset is fitted in memory
    supports_partitions: ClassVar[bool] = False
    #: True: a fit by partitions sees the rows in a different order than in memory (a partition-level shuffle, not a
    #: uniform one), which matters for its utility (one pass: ``dp_otb``): such a fit reads a dataset by partitions only
    #: when it cannot be read into memory (:mod:`privfit.scaleout.source`)
    partitioned_order_differs: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Take :attr:`Params` and :attr:`Resolved` from the type arguments (``class MySolver(Solver[MyParams,
        MyResolved])``), and :attr:`name`, :attr:`formula_version` and :attr:`models` from those models, unless the
        class sets them (a subclass of a concrete solver inherits them)."""
        super().__init_subclass__(**kwargs)
        for base in cls.__dict__.get("__orig_bases__", ()):
            origin, arguments = get_origin(base), get_args(base)
            if isinstance(origin, type) and issubclass(origin, Solver) and len(arguments) == 2:
                for attribute, argument in zip(("Params", "Resolved"), arguments, strict=True):
                    if isinstance(argument, type) and attribute not in cls.__dict__:
                        setattr(cls, attribute, argument)
        resolved_model: type[MetadataResolved] | None = cls.__dict__.get("Resolved")
        if resolved_model is not None:
            for attribute, field_name in (("name", "solver"), ("formula_version", "formula_version")):
                default = resolved_model.model_fields[field_name].default
                if not isinstance(default, str):
                    raise TypeError(f"{resolved_model.__name__}.{field_name} needs a Literal default")
                if attribute not in cls.__dict__:
                    setattr(cls, attribute, default)
                elif cls.__dict__[attribute] != default:
                    raise TypeError(f"{cls.__name__}.{attribute} differs from {resolved_model.__name__}.{field_name}")
        params_model: type[SolverParams] | None = cls.__dict__.get("Params")
        if params_model is not None and "models" not in cls.__dict__ and "model" in params_model.model_fields:
            annotation = params_model.model_fields["model"].annotation
            if get_origin(annotation) is Literal:
                cls.models = tuple(str(model) for model in get_args(annotation))

    def with_operator_limits(self, limits: Mapping[str, Any]) -> AnySolver:
        """This solver under the operator's limits (e.g. a work cap); solvers without limits return themselves."""
        return self

    # --- step 1 -----------------------------------------------------------------------------------
    def parse_params(self, params: Mapping[str, Any] | SolverParams | None = None) -> ParamsT:
        """Validate user parameters (a JSON object; ``None`` means all defaults), including that the solver
        supports the requested ``model``.

        Raises:
            SolverParameterError: naming the first offending field (and listing all in ``errors``).
        """
        if isinstance(params, self.Params):
            parsed = params
        else:
            if params is None:
                params = {}
            if not isinstance(params, Mapping):
                raise SolverParameterError("params", f"must be a JSON object, got {type(params).__name__}")
            try:
                parsed = self.Params.model_validate(dict(params))
            except ValidationError as error:
                raise validation_error_to_parameter_error(error) from None
        model = getattr(parsed, "model", None)
        if model is not None:
            check_model_supported(self, model)
        return parsed

    def params_schema(self) -> dict[str, Any]:
        """JSON schema of :attr:`Params` (pydantic ``model_json_schema()``)."""
        return self.Params.model_json_schema()

    def describe(self) -> dict[str, Any]:
        """What ``GET /v1/solvers`` lists for this solver (JSON-ready)."""
        return {
            "name": self.name,
            "description": self.description,
            "models": list(self.models),
            "formula_version": self.formula_version,
            "params_schema": self.params_schema(),
        }

    # --- step 2 -----------------------------------------------------------------------------------
    def resolve(
        self,
        params: Mapping[str, Any] | SolverParams | None,
        meta: PublicMetadata,
        *,
        target_epsilon: float | None = None,
        delta: float | None = None,
        grid: OrderGrid = DEFAULT_GRID,
        delta_allowance: DeltaAllowance | None = None,
    ) -> ResolvedT:
        """Fill in defaults and make every noise scale explicit, from public inputs only.

        Exactly one of ``target_epsilon`` (the noise is calibrated so that :meth:`cost` converts to
        ε ≤ target at ``delta`` on ``grid``) and the parameters' explicit noise setting (:attr:`explicit_noise`)
        must be given. Parses the parameters, checks that, runs :meth:`_resolve` and reports the ε of the result
        (:meth:`with_reported_epsilon`). ``delta_allowance`` reaches :meth:`_resolve` only for solvers with
        :attr:`uses_delta_parts`.
        """
        p = self.parse_params(params)
        if meta.classes is not None and not self.multiclass:
            message = (f"solver {self.name!r} cannot fit a categorical label (k = {meta.k} classes); the solvers "
                       f"that fit the multinomial logistic model are {', '.join(MULTICLASS_SOLVERS)}")  # fmt: skip
            raise SolverParameterError("solver", message)
        if meta.unit_level and not self.privacy_units:
            raise SolverParameterError("solver", unit_level_refusal(self, meta))
        check_target_epsilon(target_epsilon)
        if self.explicit_noise is None:
            explicit = None
            if target_epsilon is None or delta is None:
                raise SolverParameterError("epsilon", self.target_required)
        else:
            value = getattr(p, self.explicit_noise)
            explicit = None if value is None else float(value)
            check_privacy_source(target_epsilon, delta, explicit, self.explicit_noise)
        privacy = PrivacyRequest(
            target=None if target_epsilon is None or delta is None else Target(target_epsilon, delta),
            explicit_noise=explicit,
            delta=delta,
            grid=grid,
            delta_allowance=delta_allowance if self.uses_delta_parts else None,
        )
        with numeric_guard(p, target_epsilon):
            return self.with_reported_epsilon(self._resolve(p, meta, privacy), meta, grid)

    @abstractmethod
    def _resolve(self, p: ParamsT, meta: PublicMetadata, privacy: PrivacyRequest) -> ResolvedT:
        """Hook: the resolved settings of the validated parameters ``p`` for ``meta``, from public inputs only.

        A solver fills in every default, derives its public constants from the declared bounds, sizes the noise
        (calibrated to ``privacy.target`` on ``privacy.grid``, or from ``privacy.explicit()``), sizes any δ-only
        part within ``privacy.delta_allowance``, and raises :class:`SolverParameterError` naming the parameter for
        a request it cannot serve. The base has already parsed the parameters and checked the privacy source; it
        reports the ε of the returned settings itself (leave ``epsilon`` None: :meth:`PrivacyRequest.resolved_fields`
        and :func:`glm_resolved_fields` fill in the common fields).
        """

    def load_resolved(self, data: Mapping[str, Any] | ResolvedParams) -> ResolvedT:
        """Rebuild resolved settings stored as JSON by the job (validated; the solver name and formula version must
        match, and :meth:`_verify_resolved` must accept them)."""
        if isinstance(data, self.Resolved):
            resolved = data
        else:
            try:
                resolved = self.Resolved.model_validate(dict(data))
            except ValidationError as error:
                raise validation_error_to_parameter_error(error, prefix="resolved") from None
        if resolved.solver != self.name or resolved.formula_version != self.formula_version:
            raise SolverParameterError(
                "resolved",
                f"belongs to {resolved.solver!r} ({resolved.formula_version}), not {self.name!r} "
                f"({self.formula_version})",
            )
        self._verify_resolved(resolved)
        return resolved

    def _verify_resolved(self, r: ResolvedT) -> None:
        """Hook: refuse (:class:`SolverParameterError` on "resolved") stored settings whose derived values are not
        the ones the solver's theorems prescribe for the rest (stored settings are recomputed, not trusted). Runs
        on every load, so before every cost and fit. Default: nothing to verify."""

    # --- step 3 -----------------------------------------------------------------------------------
    def cost(
        self, resolved: ResolvedParams | Mapping[str, Any], meta: PublicMetadata, grid: OrderGrid = DEFAULT_GRID
    ) -> PrivacyCost:
        """The privacy cost of a fit with these settings: public inputs only, no row is read (DESIGN §1.4). The
        settings are loaded and checked against ``meta`` (:func:`check_resolved_metadata`), then :meth:`_cost`."""
        return self._cost(check_resolved_metadata(self, resolved, meta), meta, grid)

    @abstractmethod
    def _cost(self, r: ResolvedT, meta: PublicMetadata, grid: OrderGrid) -> PrivacyCost:
        """Hook: the cost of a fit with the resolved settings ``r`` (already loaded and checked for ``meta``) as an
        RDP curve on ``grid`` (with its δ parts), from public inputs only: the composition the solver's docstring
        proves, computed from the stored noise scales exactly as :meth:`_fit` uses them."""

    def with_reported_epsilon(
        self, resolved: ResolvedT, meta: PublicMetadata, grid: OrderGrid = DEFAULT_GRID
    ) -> ResolvedT:
        """``resolved`` with ``epsilon`` set to the ε of its own :meth:`cost` at its δ (unchanged without a δ)."""
        if resolved.delta is None:
            return resolved
        return resolved.model_copy(update={"epsilon": self.cost(resolved, meta, grid).epsilon(resolved.delta).epsilon})

    def plan(
        self,
        params: Mapping[str, Any] | SolverParams | None,
        meta: PublicMetadata,
        *,
        target_epsilon: float | None = None,
        delta: float | None = None,
        grid: OrderGrid = DEFAULT_GRID,
        delta_allowance: DeltaAllowance | None = None,
    ) -> FitPlan:
        """Validate, resolve and cost in one call (dry-run estimates and admission). ``delta_allowance`` reaches
        the resolution only for solvers with :attr:`uses_delta_parts`.

        Whatever the parameters, this raises :class:`SolverParameterError` or returns a plan with finite settings
        and a cost without NaN: a resolution or cost that divides by zero, overflows or produces a non-finite
        setting is refused naming the parameter responsible (:func:`numeric_guard`)."""
        parsed = self.parse_params(params)
        resolved = self.resolve(
            parsed, meta, target_epsilon=target_epsilon, delta=delta, grid=grid, delta_allowance=delta_allowance
        )
        with numeric_guard(parsed, target_epsilon):
            cost = self.cost(resolved, meta, grid)
            check_finite_cost(cost)
        return FitPlan(parsed, resolved, cost)

    # --- the outlook (public, before any row) ----------------------------------------------------------
    def outlook(self, resolved: ResolvedParams | Mapping[str, Any], meta: PublicMetadata) -> NoiseOutlook | None:
        """The :class:`NoiseOutlook` of a fit with these settings: :meth:`_noise_norm` against
        :meth:`_outlook_radius`, from the resolved settings and the public metadata only (data-independent: it is
        the same for every dataset with this metadata). None when the solver has no such prediction, or when the
        settings are so extreme that it overflows (the estimate and the fit resource then carry ``outlook: null``
        rather than a non-finite number, which JSON cannot hold)."""
        r = check_resolved_metadata(self, resolved, meta)
        try:
            noise_norm = self._noise_norm(r, meta)
            if noise_norm is None:
                return None
            outlook = NoiseOutlook.of(noise_norm, self._outlook_radius(r))
        except (ArithmeticError, ValueError):  # extreme public settings (overflow, 0 radius): no prediction
            return None
        return outlook if math.isfinite(outlook.noise_norm) and math.isfinite(outlook.ratio) else None

    def _noise_norm(self, r: ResolvedT, meta: PublicMetadata) -> float | None:
        """Hook: the expected L2 norm of the noise's contribution to the released θ under the solver's own noise
        model, from the resolved settings only (the docstring of the override states the formula). Default None:
        no prediction, no outlook."""
        return None

    def _outlook_radius(self, r: ResolvedT) -> float:
        """Hook: the public scale of θ the noise is compared with. Default: the resolved ``radius`` R of the
        parameter ball (solvers without one override this with their public bound on ‖θ*‖)."""
        radius = getattr(r, "radius", None)
        if not isinstance(radius, float):  # pragma: no cover - a solver with a _noise_norm has one or overrides this
            raise NotImplementedError(f"{self.name} has no radius: override _outlook_radius")
        return radius

    # --- step 4 -----------------------------------------------------------------------------------
    def fit(
        self,
        X: Any,
        y: Any,
        meta: PublicMetadata,
        resolved: ResolvedParams | Mapping[str, Any],
        rng: np.random.Generator,
        progress: ProgressCallback | None = None,
        should_stop: StopCallback | None = None,
        *,
        units: np.ndarray | None = None,
        dataset_key: Hashable | None = None,
    ) -> FitResult:
        """Fit on the private rows with the resolved settings; noise from ``rng`` only.

        Loads and checks the settings for ``meta``, checks the generator and the shapes and enforces the declared
        bounds (:func:`check_fit_inputs`; on the rows when :meth:`_fit` first reads ``run.X``: the same arrays, the
        same work), runs :meth:`_fit` on a :class:`FitRun` whose :class:`ProgressReporter`
        counts :meth:`_progress_steps`, reports 1.0 and returns θ with the resolved settings as metadata
        (:func:`glm_fit_result`).

        ``units``: for a dataset with a privacy unit (``meta.max_rows_per_unit`` set; solvers with
        :attr:`privacy_units` only), each row's unit, an integer array of one entry per row of ``X`` with values in
        [0, U) (U = ``meta.n``), every unit present, none with more than ``max_rows_per_unit`` rows
        (:meth:`PublicMetadata.unit_codes`); the fit gets its :class:`~privfit.solvers.units.UnitIndex` in
        ``run.units``. None for a row-level dataset.

        ``dataset_key``: an identity of the stored rows ``X`` and ``y`` are (the job runner passes the dataset's id
        and the storage key, the content hash their bytes were checked against; equal keys must mean equal rows), so
        that a solver may share what it derives from them with the next fit of the same dataset in this process
        (:mod:`privfit.solvers.design_cache`); ``run.X`` (the bounded design matrix) is prepared only if the fit
        reads it. None: nothing is shared.

        Raises:
            FitCancelled: ``should_stop()`` returned True.
            SolverParameterError: ``X``/``y``/``units`` do not have the shapes of ``meta`` (public facts only), or a
                row-level solver was given a dataset with a privacy unit (on ``solver``).
        """
        r = check_resolved_metadata(self, resolved, meta)
        A, v = check_fit_inputs(X, y, meta, rng, units=units, enforce=False)  # the generator and the shapes
        enforce = not (self.enforces_declared_bounds and not self.appends_intercept)
        intercept = fits_intercept(r) if self.appends_intercept else None

        def rows() -> np.ndarray:  # check_fit_inputs's design matrix, prepared at the fit's first read of run.X
            bounded = enforce_declared_bounds(A, v, meta)[0] if enforce else A
            return bounded if intercept is None else design_matrix(bounded, intercept)

        labels = bounded_labels(v, meta) if enforce else v
        index = meta.unit_index(units, A.shape[0]) if meta.unit_level else None
        reporter = ProgressReporter(self._progress_steps(r), progress, should_stop)
        return self._run(FitRun(rows, labels, meta, rng, reporter, units=index, dataset_key=dataset_key), r)

    def fit_partitioned(
        self,
        partitions: PartitionedRows,
        meta: PublicMetadata,
        resolved: ResolvedParams | Mapping[str, Any],
        rng: np.random.Generator,
        progress: ProgressCallback | None = None,
        should_stop: StopCallback | None = None,
    ) -> FitResult:
        """:meth:`fit` on a row-level dataset held elsewhere by ``partitions`` (:mod:`privfit.solvers.partitioned`),
        which enforces the declared bounds and appends the intercept column partition by partition; the same
        release, noise from ``rng`` only.

        Raises:
            SolverParameterError: the solver cannot (:attr:`supports_partitions`), the dataset has a privacy unit,
                or ``partitions`` do not have the shape of ``meta`` (public facts only).
        """
        r = check_resolved_metadata(self, resolved, meta)
        if not self.supports_partitions:
            raise SolverParameterError("solver", f"{self.name} fits a dataset in memory only")
        if meta.unit_level:
            raise SolverParameterError("solver", "a dataset with a privacy unit is fitted in memory")
        if not isinstance(rng, np.random.Generator):
            raise SolverParameterError("rng", "must be a numpy Generator (privfit.privacy.make_generator())")
        columns = meta.d + (1 if self.appends_intercept and fits_intercept(r) else 0)
        if partitions.rows != meta.n or partitions.features != columns:
            raise SolverParameterError("X", f"the partitions must hold {meta.n} rows of {columns} columns")
        empty = np.empty((0, columns), dtype=np.float64)
        reporter = ProgressReporter(self._progress_steps(r), progress, should_stop)
        return self._run(FitRun(empty, empty[:, 0], meta, rng, reporter, partitions=partitions), r)

    def _run(self, run: FitRun, r: ResolvedT) -> FitResult:
        """:meth:`_fit` on a prepared run, then the release (:meth:`fit`, :meth:`fit_partitioned`)."""
        # A plan that recorded its sampler (``sampler``: solvers whose resolution or cost depends on it) is fitted
        # with that one, whatever the process's; the others with the sampler in force (privacy/noise.py).
        recorded = getattr(r, "sampler", None)
        sampler = describe_sampler(recorded)
        meta = run.meta
        with using_sampler(recorded or current_sampler()):
            released = self._fit(run, r)
        run.reporter.finish()
        release = released if isinstance(released, Release) else Release(released)
        metadata = {"noise_sampler": sampler, **(release.metadata or {})}
        result = glm_fit_result(self, release.theta, meta, r, metadata=metadata, predictor=release.predictor)
        return result if release.selected is None else replace(result, selected=dict(release.selected))

    @abstractmethod
    def _progress_steps(self, r: ResolvedT) -> int:
        """Hook: the public number of steps the fit's progress is counted in (``ProgressReporter.total``): its
        iterations, rounds or blocks, a function of the resolved settings only (DESIGN §4)."""

    @abstractmethod
    def _fit(self, run: FitRun, r: ResolvedT) -> FloatArray | Release:
        """Hook: the algorithm. Runs on the checked rows ``run.X`` (the design matrix, or the bounded rows without
        :attr:`appends_intercept`) and labels ``run.y`` with exactly the settings ``r`` (checked for ``run.meta``),
        noise from ``run.rng`` only; calls ``run.reporter.check_stop`` before and ``run.reporter.report`` after each
        step (the base reports 1.0 at the end). Returns θ (coefficients, then the intercept if fitted), or a
        :class:`Release` when the fit releases more. Its observables (work, draws, progress) must not depend on the
        rows.
        """


AnySolver = Solver[Any, Any]
"""A solver of any parameter and resolved types (the registry's element type)."""


# ---------------------------------------------------------------------------------------------------------
# helpers shared by GLM solvers
# ---------------------------------------------------------------------------------------------------------


def check_model_supported(solver: AnySolver, model: str) -> None:
    """Raise :class:`SolverParameterError` on ``model`` if the solver does not support it."""
    if model not in solver.models:
        known = ", ".join(repr(m) for m in solver.models)
        raise SolverParameterError("model", f"solver {solver.name!r} does not support model {model!r}; use {known}")


def check_target_epsilon(target_epsilon: float | None) -> None:
    """A target ε must be finite and at least :data:`MIN_EPSILON` (docs/solvers.md, "Parameter bounds")."""
    if target_epsilon is None:
        return
    if isinstance(target_epsilon, bool) or not isinstance(target_epsilon, int | float | np.floating | np.integer):
        raise SolverParameterError("epsilon", f"must be a real number, got {type(target_epsilon).__name__}")
    value = float(target_epsilon)
    if not (math.isfinite(value) and value >= MIN_EPSILON):
        raise SolverParameterError("epsilon", f"must be finite and at least {MIN_EPSILON:g}, got {value!r}")


#: Exceptions of the numerics of a resolution or cost at extreme settings (turned into a 422 by the guard)
_NUMERIC_FAILURES: tuple[type[BaseException], ...] = (ZeroDivisionError, OverflowError, FloatingPointError)


@contextmanager
def numeric_guard(params: SolverParams, target_epsilon: float | None) -> Iterator[None]:
    """Turn a numeric failure of a resolution or cost from public settings into a :class:`SolverParameterError`.

    The declared bounds (:data:`MIN_SCALE` …) keep every setting within what the solvers compute with; this is the
    backstop for a combination of in-bounds values that still divides by zero or overflows
    (``ZeroDivisionError``, ``OverflowError``, ``FloatingPointError``, a ``math domain error``) or derives a
    non-finite setting (the resolved model refuses it: a pydantic ``ValidationError``). The error names the
    parameter responsible where it can tell (:func:`_culprit`): the field named by the failure if the request set
    it, else the most extreme number the request set (ε included). A :class:`SolverParameterError` passes through,
    as does another layer's :class:`~privfit.errors.ParameterError` naming a field of the request; one naming an
    internal quantity (the privacy layer's "rdp", "sigma", …) is named after the request's field instead.
    """
    try:
        yield
    except SolverParameterError:
        raise
    except ParameterError as error:  # the privacy layer's, e.g. on "rdp" or "sigma": named after the request's field
        if error.parameter in type(params).model_fields or error.parameter in ("epsilon", "delta"):
            raise
        raise _out_of_range(params, target_epsilon, [], f"{error}") from None
    except ValidationError as error:
        fields = [str(e["loc"][0]) for e in error.errors(include_url=False, include_input=False) if e.get("loc")]
        raise _out_of_range(params, target_epsilon, fields) from None
    except _NUMERIC_FAILURES:
        raise _out_of_range(params, target_epsilon, []) from None
    except ValueError as error:
        if "math domain error" not in str(error):
            raise
        raise _out_of_range(params, target_epsilon, []) from None


def _out_of_range(
    params: SolverParams, target_epsilon: float | None, hints: Sequence[str], cause: str | None = None
) -> SolverParameterError:
    name = _culprit(params, target_epsilon, hints)
    why = cause or "a constant derived from them divides by zero, overflows or is not finite"
    message = f"these settings are outside the range the solver can compute with ({why}); see 'Parameter bounds' in "
    return SolverParameterError(name, message + "docs/solvers.md")


def _culprit(params: SolverParams, target_epsilon: float | None, hints: Sequence[str]) -> str:
    """The parameter to name for a numeric failure: a hinted field the request set, else the request's number
    farthest from 1 in orders of magnitude (``epsilon`` for the target ε), else ``params``."""
    given = params.model_fields_set
    for hint in hints:
        if hint in given:
            return hint
    candidates: list[tuple[float, str]] = []
    if target_epsilon is not None:
        candidates.append((float(target_epsilon), "epsilon"))
    for name in sorted(given):
        value = getattr(params, name, None)
        if isinstance(value, int | float) and not isinstance(value, bool):
            candidates.append((float(value), name))
    best, best_spread = "params", -1.0
    for value, name in candidates:
        magnitude = abs(value)
        spread = math.inf if magnitude == 0.0 or not math.isfinite(magnitude) else abs(math.log10(magnitude))
        if spread > best_spread:
            best, best_spread = name, spread
    return best


def check_finite_cost(cost: PrivacyCost) -> None:
    """A cost whose curve or δ parts are NaN cannot be admitted or compared (+∞ is a legitimate RDP value)."""
    values = np.asarray(cost.rdp, dtype=np.float64)
    parts = (cost.extra_delta, cost.approx_delta, cost.pure_epsilon, cost.gdp_mu_squared)
    if np.isnan(values).any() or any(math.isnan(float(x)) for x in parts):
        raise FloatingPointError("the privacy cost is not a number")


def check_privacy_source(
    target_epsilon: float | None, delta: float | None, explicit: float | None, explicit_name: str
) -> None:
    """Exactly one of a target ε (which then needs δ) and the solver's explicit noise parameter must be given."""
    if target_epsilon is not None and explicit is not None:
        message = f"give either a target epsilon or an explicit {explicit_name}, not both"
        raise SolverParameterError(explicit_name, message)
    if target_epsilon is None and explicit is None:
        raise SolverParameterError("epsilon", f"a target epsilon is required unless {explicit_name} is given")
    if target_epsilon is not None and delta is None:
        raise SolverParameterError("delta", "is required to calibrate the noise to a target epsilon")


def delta_part(default: float, allowance: float | None, parameter: str, what: str, hint: str = "") -> float:
    """The δ a solver's δ-only part may use: ``default`` standalone, at most ``allowance`` on a dataset (from its
    filter's :class:`~privfit.privacy.DeltaAllowance`, in the part's own units). Raises
    :class:`SolverParameterError` naming ``parameter`` when nothing is left of the dataset's pot for δ parts."""
    value = default if allowance is None else min(default, allowance)
    if not value > 0.0:
        message = (f"{what} needs a share of the dataset's δ and the budget's pot for δ parts (approximate_delta) "
                   f"has none left{hint}")  # fmt: skip
        raise SolverParameterError(parameter, message)
    return value


def sampler_refusal(solver: AnySolver, sampler: SamplerName) -> str | None:
    """Why ``solver`` cannot run under the noise ``sampler`` (a sentence naming the solver and the setting in force),
    or None when it can: a solver with :attr:`Solver.float_sampler_only` has no exact sampler. The one rule behind
    both the refusal at resolve time (:func:`require_float_sampler`) and the catalogue's availability
    (:func:`privfit.solvers.availability.solver_availability`), so the two cannot disagree."""
    why = solver.float_sampler_only
    if why is None or sampler != "exact":
        return None
    return (f"{solver.name} {why}, so it has no exact sampler; this server draws exact lattice noise (noise_sampler = "
            "exact)")  # fmt: skip


def require_float_sampler(solver: AnySolver) -> None:
    """Refuse a solver whose noise cannot come from the exact lattice samplers (:mod:`privfit.privacy.noise`) on a
    server that draws exact noise (:func:`sampler_refusal` under the sampler in force): a 422 naming ``solver``."""
    refusal = sampler_refusal(solver, current_sampler())
    if refusal is not None:
        message = f"{refusal}: choose another solver, or a server whose noise_sampler is float"
        raise SolverParameterError("solver", message)


def check_resolved_metadata(
    solver: Solver[Any, ResolvedT], resolved: ResolvedParams | Mapping[str, Any], meta: PublicMetadata
) -> ResolvedT:
    """Load ``resolved`` for ``solver`` (:meth:`Solver.load_resolved`) and check it was resolved for ``meta`` (same
    n, d, bounds, classes and privacy unit); :meth:`Solver.cost` and :meth:`Solver.fit` run it before their hooks.
    A dataset with a privacy unit is refused on ``solver`` for a solver without :attr:`Solver.privacy_units`."""
    if meta.unit_level and not solver.privacy_units:
        raise SolverParameterError("solver", unit_level_refusal(solver, meta))
    r = solver.load_resolved(resolved)
    if (r.n, r.d, r.row_norm_bound, r.label_bound) != (meta.n, meta.d, meta.row_norm_bound, meta.label_bound):
        raise SolverParameterError("resolved", "was resolved for different public metadata (n, d or bounds)")
    classes = getattr(r, "classes", None)
    if (None if classes is None else tuple(classes)) != meta.classes:
        raise SolverParameterError("resolved", "was resolved for different public metadata (the label's classes)")
    if getattr(r, "max_rows_per_unit", None) != meta.max_rows_per_unit:
        raise SolverParameterError("resolved", "was resolved for different public metadata (the privacy unit)")
    return r


def unit_level_solvers() -> tuple[str, ...]:
    """The registered solvers that fit a dataset with a privacy unit (:attr:`Solver.privacy_units`), sorted: read
    from the registry when asked (imported here lazily: the registry imports every solver module, which import
    this one)."""
    from .registry import list_solvers

    return tuple(solver.name for solver in list_solvers() if solver.privacy_units)


def partitioned_solvers() -> tuple[str, ...]:
    """The registered solvers that fit a dataset by partitions (:attr:`Solver.supports_partitions`), sorted (read
    from the registry when asked, as :func:`unit_level_solvers`)."""
    from .registry import list_solvers

    return tuple(sorted(solver.name for solver in list_solvers() if solver.supports_partitions))


def unit_level_refusal(solver: AnySolver, meta: PublicMetadata) -> str:
    """Why ``solver`` (without :attr:`Solver.privacy_units`) cannot fit ``meta``'s dataset with a privacy unit: a
    sentence naming the solvers that can (:func:`unit_level_solvers`)."""
    return (f"solver {solver.name!r} cannot fit a dataset with a privacy unit (user-level privacy: neighbours differ "
            f"in one unit with up to max_rows_per_unit = {meta.max_rows_per_unit} rows); its privacy cost is stated "
            f"for one row. The solvers that clip each unit's summed contribution are "
            f"{', '.join(unit_level_solvers())}")  # fmt: skip


def parameter_loss(params: GLMParams, meta: PublicMetadata, *, l2: float = 0.0) -> GLMLoss | MultinomialLogisticLoss:
    """The loss a clipped-gradient solver fits for ``params`` on ``meta``: the multinomial logistic loss of the
    metadata's k classes for a categorical label (``model`` must then be "logistic", :func:`label_mismatch`), else
    the GLM loss of ``params`` (:func:`glm_loss`); with the L2 strength ``l2`` (0: unregularised)."""
    if meta.k is not None and params.model != "logistic":
        raise SolverParameterError("model", label_mismatch(params.model, "label", "categorical") or "")
    return resolved_loss(params.model, params.loss_params(), None if meta.classes is None else list(meta.classes), l2)


def resolved_loss(
    model: str, loss_params: Mapping[str, float], classes: Sequence[str] | None, l2: float = 0.0
) -> GLMLoss | MultinomialLogisticLoss:
    """The loss of resolved settings (their ``model``, ``loss_params`` and, for a categorical label, ``classes``):
    :class:`~privfit.solvers.losses.MultinomialLogisticLoss` of k = len(classes) classes, else the GLM loss."""
    if classes is not None:
        return MultinomialLogisticLoss(len(classes), l2=l2)
    return make_loss(model, l2=l2, **loss_params)


def glm_loss(params: GLMParams) -> GLMLoss:
    """The UNREGULARISED loss of ``params`` (the L2 term is data-independent and handled by the solver)."""
    if params.model not in available_models():  # pragma: no cover - the Literal type already restricts it
        raise SolverParameterError("model", f"unknown model {params.model!r}")
    return make_loss(params.model, **params.loss_params())


def design_bound(meta: PublicMetadata, fit_intercept: bool) -> float:
    """The public row-norm bound of the design matrix: B_x, or sqrt(B_x² + 1) with an intercept column."""
    return augmented_bound(meta.row_norm_bound) if fit_intercept else meta.row_norm_bound


def check_fit_inputs(
    X: Any,
    y: Any,
    meta: PublicMetadata,
    rng: Any,
    fit_intercept: bool | None = None,
    *,
    enforce: bool = True,
    units: Any = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The fit's design matrix and labels, after checking the generator and the public shapes, with the declared
    bounds enforced (:func:`enforce_declared_bounds`; with ``enforce`` False the shape-checked arrays as given, for
    a solver that enforces them itself: :attr:`Solver.enforces_declared_bounds`).

    ``rng`` must be a numpy ``Generator`` (:func:`privfit.privacy.make_generator`). With ``fit_intercept`` set,
    the returned matrix is the design matrix (:func:`design_matrix`); with ``None`` it is the (bounded) ``X``.
    For a dataset with a privacy unit ``X`` may have any number of rows and ``units`` (each row's unit) is checked
    (:meth:`PublicMetadata.check_data`); a row-level dataset takes no ``units``.
    """
    if not isinstance(rng, np.random.Generator):
        raise SolverParameterError("rng", "must be a numpy Generator (privfit.privacy.make_generator())")
    A, v = meta.check_data(X, y, units)
    if enforce:
        A, v = enforce_declared_bounds(A, v, meta)
    return (A if fit_intercept is None else design_matrix(A, fit_intercept)), v


def enforce_declared_bounds(
    X: np.ndarray, y: np.ndarray, meta: PublicMetadata, *, in_place: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """The rows with the declared bounds enforced (DESIGN §1.2): non-finite entries become 0, every row is clipped
    to ‖x‖ ≤ B_x (:func:`~privfit.solvers.geometry.clip_rows`: rows within the bound are returned bit for bit) and
    every label to [−B_y, B_y].

    Data encoded at upload already satisfies the bounds, so this is a no-op there; it is the guard that makes every
    solver's sensitivity bound and numerics hold on ANY input, so that no exception and no unaccounted change can
    come from row values (issue 18). Without ``in_place`` the work is the same for every input (a fixed number of
    vectorised passes). With ``in_place`` the caller's float64 ``X`` and ``y`` (views included) are overwritten and
    returned: the same values without the copies (a partition just decoded into its fit's buffer,
    :mod:`privfit.scaleout.dask_rows`), in two passes over ``X`` instead of five: the row norms, which also find the
    rows holding a non-finite entry (their norm is not finite), and the clipping factors. Only those rows are repaired
    entry by entry (their norms then computed again): work that grows with their number, which is zero for every
    partition read from the store (its rows matched the hash of what their upload wrote, and an upload with a
    non-finite value is refused), so there the work stays the same whatever the rows hold.
    """
    with np.errstate(invalid="ignore", over="ignore"):
        if not in_place:  # clip_rows on the new array np.where made, in place (clip_rows would copy it again)
            A = np.where(np.isfinite(X), X, 0.0)
            clip_rows_in_place(A, meta.row_norm_bound)
            return A, bounded_labels(y, meta)
        norms = row_norms(X)
        broken = np.flatnonzero(~np.isfinite(norms))
        if broken.size:
            rows = X[broken]
            np.copyto(rows, 0.0, where=~np.isfinite(rows))
            X[broken] = rows
            norms[broken] = row_norms(rows)
        clip_rows_in_place(X, meta.row_norm_bound, norms=norms)
        np.copyto(y, 0.0, where=~np.isfinite(y))
        np.clip(y, -meta.label_bound, meta.label_bound, out=y)
    return X, y


def bounded_labels(y: np.ndarray, meta: PublicMetadata) -> np.ndarray:
    """The labels of :func:`enforce_declared_bounds` (a new array): non-finite ones 0, all clipped to [−B_y, B_y]."""
    with np.errstate(invalid="ignore", over="ignore"):
        return np.clip(np.where(np.isfinite(y), y, 0.0), -meta.label_bound, meta.label_bound)


def fits_intercept(resolved: ResolvedParams) -> bool:
    """Whether the resolved settings fit an intercept (their ``fit_intercept``; False for settings without one)."""
    return bool(getattr(resolved, "fit_intercept", False))


def glm_fit_result(
    solver: AnySolver,
    theta: FloatArray,
    meta: PublicMetadata,
    resolved: ResolvedParams,
    *,
    metadata: Mapping[str, Any] | None = None,
    predictor: bool = True,
) -> FitResult:
    """The release of a fit (:meth:`Solver.fit` builds every solver's with it): θ split into coefficients and
    intercept (its last entry when the resolved settings fit one), the feature names, and the resolved settings as
    metadata, followed by any extra ``metadata`` entries. For a categorical label θ is vec(Θ), Θ ∈ R^{k×d'}
    row-major (:class:`~privfit.solvers.losses.MultinomialLogisticLoss`): a k × d coefficient matrix, k intercepts
    and the class names."""
    if meta.classes is not None:
        Theta = np.asarray(theta, dtype=np.float64).reshape(len(meta.classes), -1)
        return FitResult(
            solver=solver.name,
            model=str(getattr(resolved, "model", "")),
            coefficients=[[float(c) for c in row[: meta.d]] for row in Theta],
            intercept=[float(b) for b in Theta[:, meta.d]] if fits_intercept(resolved) else None,
            feature_names=None if meta.feature_names is None else list(meta.feature_names),
            metadata={**resolved.model_dump(mode="json"), **(metadata or {})},
            predictor=predictor,
            classes=list(meta.classes),
        )
    return FitResult(
        solver=solver.name,
        model=str(getattr(resolved, "model", "")),
        coefficients=[float(c) for c in theta[: meta.d]],
        intercept=float(theta[meta.d]) if fits_intercept(resolved) else None,
        feature_names=None if meta.feature_names is None else list(meta.feature_names),
        metadata={**resolved.model_dump(mode="json"), **(metadata or {})},
        predictor=predictor,
    )


def design_matrix(X: np.ndarray, fit_intercept: bool) -> np.ndarray:
    """``X`` with a trailing column of ones when fitting an intercept."""
    return augment_intercept(X) if fit_intercept else X
