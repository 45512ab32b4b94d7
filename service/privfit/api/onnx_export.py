"""A released fit as an ONNX model (``GET /v1/fits/{id}/model.onnx``, ``Client.export_onnx``, ``privfit fits export
FIT --format onnx``): the dataset's encoding and the released linear model as one ONNX graph, built with
``onnx.helper`` from public things only — the dataset's schema as the service stored it (the declared schema with the
transforms derived by private preprocessing) and the fit's release — so that onnxruntime computes what
``POST /v1/fits/{id}/predict`` answers for the same rows (``tests/api/test_api_onnx.py``: to about 1e-15).

Double precision throughout; ONNX opset :data:`OPSET` (the first whose ``Equal`` compares strings), IR version
:data:`IR_VERSION`: any onnxruntime since 1.15 runs it.

Inputs, one per used raw column, in the schema's order (an ``"ignore"`` column and the privacy unit have none), each
of shape [N, 1] (:func:`input_names`: the column's name, unless it is an output's name):

* a numeric column: ``tensor(double)``. NaN is a missing value: under ``"missing": "impute"`` it is replaced by the
  feature's public ``fill``; under ``"reject"`` the row is refused (below). ±inf is refused as ``/predict`` refuses a
  non-finite number (a decimal text too large for float64, which ``/predict`` clips to the bounds, should be passed
  as the largest finite double). Then the feature's transform — ``Max``/``Min`` to its clip range (or the bounds),
  log1p (computed as ``Log(1 + x) · x / ((1 + x) − 1)``, accurate like ``numpy.log1p``), then ``(t − mean) /
  (clip_at · std)`` or the affine map of the (transformed) range onto [−1, 1] — and ``Clip`` to [−1, 1], in the
  operations of :meth:`privfit.datasets.schema.NumericFeature.scale`.
* a categorical column: ``tensor(string)``, one-hot by ``Equal`` against the declared levels (in Unicode NFC).
  Strings are compared as given: the caller strips surrounding whitespace and puts cells in NFC (``/predict`` does
  both; ONNX has no operator for either). A cell that is one of the schema's ``csv.na_values``, or the empty string
  (a string tensor has no null), is missing: an all-zero block under ``"impute"``, a refused row under ``"reject"``.
  Any other undeclared text is refused, or with ``unknown_category="ignore"`` (the endpoint's query parameter, as
  ``/predict``'s) an all-zero block.

The numeric columns are encoded together, as one [N, m] block with per-column constants [1, m], and the categorical
ones as one [N, L] one-hot block (each level's column ``Gather``-ed from its feature's input, then ``Equal``), whose
columns a ``Gather`` puts in the fit's order: a graph of a few dozen nodes whatever the schema's size (10⁴ features:
built in well under a second, most of the file being the coefficients).

A refused row — one ``/predict`` answers 422 for — cannot raise inside a graph: its ``scores`` and ``probabilities``
are NaN and its ``label`` is the empty string (classification) or NaN (regression). The other rows are unaffected.

Outputs (the encoded row x in the fit's ``feature_names`` order, θ and b the release):

* ``scores``: ⟨θ, x⟩ + b, ``tensor(double)`` [N]; for a multiclass fit (a categorical label) the k logits Θx + b,
  [N, k] — ``/predict``'s ``scores``;
* ``label``: ``/predict``'s ``predictions``: the class names (``tensor(string)`` [N]: the positive class where the
  score is ≥ 0, else the negative one; the most probable class, the first on ties, for a multiclass fit), or for a
  numeric label (``linear``, ``huber``, ``absolute``, ``quantile``) the score decoded to the label's units and
  clipped to its declared range (``tensor(double)`` [N]);
* ``probabilities`` (logistic fits only): ``tensor(double)`` [N, 2] — (σ(−score), σ(score)), the columns in the order
  [negative, positive] — or [N, k], softmax(Θx + b) in the order of the fit's ``classes``; ``/predict``'s
  ``probabilities``.

The model's ``metadata_props`` say what it is: ``privfit_version``, ``fit_id``, ``solver``, ``model``, ``label``
(its declaration, JSON), ``classes`` (JSON), ``feature_names`` (JSON), ``inputs`` (JSON: per input its ``name``,
``column`` and ``type``), ``outputs`` (JSON), ``missing`` and ``unknown_category``. This module imports nothing from the
web layer: :func:`fit_to_onnx` is a function of a release and a schema.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from privfit import __version__
from privfit.datasets.schema import BinaryLabel, CategoricalFeature, CategoricalLabel, DatasetSchema, NumericFeature
from privfit.solvers.base import CLASSIFICATION_MODELS, REGRESSION_MODELS
from privfit.text import nfc

__all__ = ["IR_VERSION", "OPSET", "OUTPUTS", "fit_to_onnx", "input_names", "onnx_bytes"]

#: The ONNX operator set: 19 is the first whose ``Equal`` compares strings (onnxruntime ≥ 1.15).
OPSET = 19
#: The IR version of :data:`OPSET` (onnx's table), so that older runtimes load the file too.
IR_VERSION = 9
#: The graph's output names (``probabilities`` for logistic fits only).
OUTPUTS = ("scores", "label", "probabilities")


def input_names(schema: DatasetSchema) -> list[tuple[str, str, str]]:
    """(input name, column, type) of each used column, in the schema's order: the input is named as its column,
    unless that is an output's name (then ``<column>_input``, with more ``_input`` until the name is free)."""
    columns = [(f.name, f.type) for f in schema.features if isinstance(f, NumericFeature | CategoricalFeature)]
    taken = set(OUTPUTS) | {name for name, _ in columns}
    out: list[tuple[str, str, str]] = []
    for column, kind in columns:
        name = column
        if name in OUTPUTS:
            name += "_input"
            while name in taken:
                name += "_input"
        taken.add(name)
        out.append((name, column, kind))
    return out


class _Graph:
    """Nodes and initializers of one graph, with fresh names for intermediate values (never an input's or output's
    name: a column may be named like anything)."""

    def __init__(self, reserved: set[str]) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._used = set(reserved)
        self._count = 0
        self._constants: dict[tuple[Any, ...], str] = {}

    def fresh(self, hint: str) -> str:
        while True:
            self._count += 1
            name = f"privfit/{hint}/{self._count}"
            if name not in self._used:
                self._used.add(name)
                return name

    def const(self, value: Any, hint: str, dtype: Any = np.float64) -> str:
        """An initializer holding ``value`` (one per distinct value: the constants 0, 1, 2, … are shared)."""
        array = np.asarray(value, dtype=dtype)
        content = tuple(array.ravel().tolist()) if array.dtype == object else array.tobytes()  # bit for bit
        key = (array.dtype.str, array.shape, content)
        if key not in self._constants:
            self._constants[key] = name = self.fresh(hint)
            self.initializers.append(numpy_helper.from_array(array, name))
        return self._constants[key]

    def op(self, op_type: str, inputs: Sequence[str], hint: str, *, output: str | None = None, doc: str = "",
           **attributes: Any) -> str:  # fmt: skip
        out = output if output is not None else self.fresh(hint)
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=self.fresh(op_type), doc_string=doc,
                                           **attributes))  # fmt: skip
        return out


def _log1p(g: _Graph, v: str) -> str:
    """log1p(v) for v ≥ 0 to a few ulps: u = 1 + v; v where u == 1, else log(u) · v / (u − 1) (the rounding of u
    cancels; ``Log(Add(v, 1))`` alone loses the digits of a small v: about 1e-7 on a log range [0, 1e-9])."""
    u = g.op("Add", [v, g.const(1.0, "one")], "one_plus")
    d = g.op("Sub", [u, g.const(1.0, "one")], "rounded")
    exact = g.op("Equal", [d, g.const(0.0, "zero")], "tiny")
    log = g.op("Mul", [g.op("Log", [u], "log"), g.op("Div", [v, d], "correction")], "log1p")
    return g.op("Where", [exact, v, log], "log1p", doc="log1p")


def _any(g: _Graph, flags: str, axis: int, hint: str) -> str:
    """Whether any of ``flags`` (bool) is true along ``axis`` (kept, of size 1)."""
    counted = g.op("Cast", [flags], hint, to=TensorProto.DOUBLE)
    reduced = g.op("ReduceMax", [counted, g.const([axis], "axis", dtype=np.int64)], hint, keepdims=1)
    return g.op("Greater", [reduced, g.const(0.0, "zero")], hint)


def _row(values: Iterable[Any], dtype: Any = np.float64) -> np.ndarray:
    """``values`` as a [1, m] constant, broadcast over the rows."""
    return np.asarray([list(values)], dtype=dtype)


def _numeric_block(g: _Graph, columns: list[str], features: list[NumericFeature], impute: bool) -> tuple[str, str]:
    """The encoded numeric features [N, m] and the rows they refuse [N, 1] (bool: ±inf, or NaN under "reject"),
    for all of them at once: per-column constants [1, m], the operations of
    :meth:`privfit.datasets.schema.NumericFeature.scale` (clip, log1p, then the affine map of the range onto [−1, 1]
    — ((2v − a) − b) / (b − a) — or (t − mean) / (clip_at · std), clipped to [−1, 1])."""
    x = columns[0] if len(columns) == 1 else g.op("Concat", columns, "numeric", axis=1, doc="the numeric columns")
    missing = g.op("IsNaN", [x], "missing")
    refused = g.op("IsInf", [x], "infinite")
    if impute:
        fills = _row([f.fill for f in features])
        x = g.op("Where", [missing, g.const(fills, "fill"), x], "filled", doc="NaN is the feature's public fill")
    else:
        refused = g.op("Or", [refused, missing], "refused")
    clip = [(f.lower, f.upper) if f.transform is None or f.transform.clip is None else tuple(f.transform.clip)
            for f in features]  # fmt: skip
    v = g.op("Max", [x, g.const(_row(a for a, _ in clip), "clip_lower")], "above")
    v = g.op("Min", [v, g.const(_row(b for _, b in clip), "clip_upper")], "clipped",
             doc="clipped to the transform's clip range, or the bounds")  # fmt: skip
    logs = [f.transform is not None and f.transform.log for f in features]
    if any(logs):
        log1p = _log1p(g, v)  # NaN in the columns without log (a negative value): not selected
        v = log1p if all(logs) else g.op("Where", [g.const(_row(logs), "log_columns", dtype=bool), log1p, v], "log")
    standardize = [None if f.transform is None else f.transform.standardize for f in features]
    minus_one, one = g.const(-1.0, "minus_one"), g.const(1.0, "one")
    scaled = standardized = None
    if any(s is None for s in standardize):  # the transformed range [t(a), t(b)] onto [−1, 1]
        ranges = [(math.log1p(a), math.log1p(b)) if log else (a, b) for (a, b), log in zip(clip, logs, strict=True)]
        ranges = [r if s is None else (-1.0, 1.0) for r, s in zip(ranges, standardize, strict=True)]  # not selected
        twice = g.op("Mul", [v, g.const(2.0, "two")], "twice")
        shifted = g.op("Sub", [twice, g.const(_row(a for a, _ in ranges), "range_lower")], "minus_lower")
        shifted = g.op("Sub", [shifted, g.const(_row(b for _, b in ranges), "range_upper")], "minus_upper")
        ratio = g.op("Div", [shifted, g.const(_row(b - a for a, b in ranges), "span")], "ratio")
        scaled = g.op("Clip", [ratio, minus_one, one], "scaled", doc="the range mapped onto [−1, 1], clipped")
    if any(s is not None for s in standardize):  # (t − mean) / (clip_at · std)
        means = _row(0.0 if s is None else s.mean for s in standardize)
        reach = _row(1.0 if s is None else s.clip_at * s.std for s in standardize)
        centred = g.op("Sub", [v, g.const(means, "mean")], "centred")
        ratio = g.op("Div", [centred, g.const(reach, "reach")], "standardized")
        standardized = g.op("Clip", [ratio, minus_one, one], "scaled", doc="(t − mean) / (clip_at · std), clipped")
    if scaled is None or standardized is None:
        encoded = scaled or standardized
        assert encoded is not None
    else:
        chosen = g.const(_row(s is not None for s in standardize), "standardized_columns", dtype=bool)
        encoded = g.op("Where", [chosen, standardized, scaled], "encoded")
    return encoded, _any(g, refused, 1, "refused")


def _categorical_block(g: _Graph, columns: list[str], features: list[CategoricalFeature], impute: bool,
                       na_values: Sequence[str], ignore_unknown: bool) -> tuple[str, str | None]:  # fmt: skip
    """The one-hot blocks of the categorical features [N, L] (L: their levels in all) and the rows they refuse
    [N, 1] (None when nothing is refused), for all of them at once: each one-hot column compares its feature's cell
    (``Gather``) with its level (``Equal``)."""
    x = columns[0] if len(columns) == 1 else g.op("Concat", columns, "categorical", axis=1,
                                                  doc="the categorical columns")  # fmt: skip
    source: list[int] = []  # per one-hot column: its feature's position among the categorical columns
    levels: list[str] = []
    ends: list[int] = []  # per feature: the position of its last one-hot column
    for j, f in enumerate(features):
        seen: set[str] = set()
        for k, level in enumerate(f.levels):  # NFC, as cells are compared; a duplicate in NFC (a schema stored before
            level = nfc(level)  # that rule) matches nothing, as the service matches the first only
            levels.append(level if level not in seen else f"\x00privfit: duplicate level {k}\x00")
            seen.add(level)
            source.append(j)
        ends.append(len(levels) - 1)
    cells = g.op("Gather", [x, g.const(source, "level_columns", dtype=np.int64)], "cells", axis=1)
    equal = g.op("Equal", [cells, g.const(_row(levels, dtype=object), "levels", dtype=object)], "is_level")
    one_hot = g.op("Cast", [equal], "one_hot", to=TensorProto.DOUBLE, doc="one-hot over the declared levels (NFC)")
    if impute and ignore_unknown:
        return one_hot, None
    # a feature's cell is a level iff its block holds a 1: the running sum over the one-hot columns (integers, exact)
    # at its block's last column minus that before its first
    running = g.op("CumSum", [one_hot, g.const(1, "axis", dtype=np.int64)], "running")
    starts = [0, *(end + 1 for end in ends[:-1])]
    hits = g.op("Sub", [g.op("Gather", [running, g.const(ends, "ends", dtype=np.int64)], "to_end", axis=1),
                        g.op("Gather", [running, g.const(starts, "starts", dtype=np.int64)], "to_start", axis=1)],
                "hits")  # fmt: skip
    hits = g.op("Add", [hits, g.op("Gather", [one_hot, g.const(starts, "starts", dtype=np.int64)], "first", axis=1)],
                "hits")  # fmt: skip
    known = g.op("Greater", [hits, g.const(0.0, "zero")], "known")  # [N, c]
    if not impute and not ignore_unknown:
        return one_hot, _any(g, g.op("Not", [known], "unknown"), 1, "refused")
    markers = [*dict.fromkeys([*(nfc(v) for v in na_values), ""])]
    widened = g.op("Unsqueeze", [x, g.const([2], "axis", dtype=np.int64)], "cells")  # [N, c, 1]
    is_marker = g.op("Equal", [widened, g.const([[markers]], "na_values", dtype=object)], "is_na")  # [N, c, m]
    missing = g.op("Squeeze", [_any(g, is_marker, 2, "missing"), g.const([2], "axis", dtype=np.int64)], "missing")
    if not impute:  # undeclared levels ignored, missing cells refused
        return one_hot, _any(g, missing, 1, "refused")
    unknown = g.op("And", [g.op("Not", [known], "unknown"), g.op("Not", [missing], "present")], "unknown")
    return one_hot, _any(g, unknown, 1, "refused")


def _value_info(name: str, elem: int, shape: Sequence[str | int], doc: str) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, list(shape), doc_string=doc)


def fit_to_onnx(
    result: Mapping[str, Any],
    schema: DatasetSchema,
    *,
    fit_id: str,
    unknown_category: Literal["error", "ignore"] = "error",
) -> onnx.ModelProto:
    """The fit's model (module docstring) as a checked :class:`onnx.ModelProto`.

    Args:
        result: the fit's release as stored (``Job.result``: solver, model, coefficients, intercept, classes,
            feature_names, predictor).
        schema: its dataset's schema as stored (:meth:`DatasetSchema.from_stored`), derived transforms included.
        fit_id: the fit's id (metadata only).
        unknown_category: ``"error"``: a row with an undeclared categorical level is refused (NaN outputs);
            ``"ignore"``: the level is an all-zero block, as ``/predict`` with that option.

    Raises:
        ValueError: the release does not predict, its model does not fit the label, or its coefficients do not match
            the schema's encoding.
    """
    model = str(result["model"])
    if not result.get("predictor", True):
        raise ValueError(f"the fit estimated a statistic of the features (model {model!r}); it does not predict")
    label = schema.label
    names = schema.feature_names
    released = result.get("feature_names")
    if released is not None and list(released) != names:
        raise ValueError(f"the fit's feature_names are not its dataset's encoded columns {names}")
    d = len(names)
    impute = schema.missing == "impute"
    inputs = input_names(schema)
    g = _Graph({name for name, _, _ in inputs} | set(OUTPUTS))

    # --- the encoding: the numeric block and the one-hot block, then their columns in the fit's order ---
    graph_inputs: list[onnx.ValueInfoProto] = []
    numeric: list[tuple[str, NumericFeature]] = []
    categorical: list[tuple[str, CategoricalFeature]] = []
    used = [f for f in schema.features if isinstance(f, NumericFeature | CategoricalFeature)]
    for (name, column, _), f in zip(inputs, used, strict=True):
        if isinstance(f, NumericFeature):
            doc = (f"numeric column {column!r}, float64 [N, 1]; NaN is missing "
                   f"({'the fill ' + repr(f.fill) if impute else 'the row is refused'})")  # fmt: skip
            graph_inputs.append(_value_info(name, TensorProto.DOUBLE, ["N", 1], doc))
            numeric.append((name, f))
        else:
            doc = (f"categorical column {column!r}, string [N, 1], stripped and in Unicode NFC; levels "
                   f"{f.levels!r}; missing: '' or one of {list(schema.csv.na_values)!r}")  # fmt: skip
            graph_inputs.append(_value_info(name, TensorProto.STRING, ["N", 1], doc))
            categorical.append((name, f))
    blocks: list[str] = []
    refusals: list[str] = []
    if numeric:
        block, refused = _numeric_block(g, [n for n, _ in numeric], [f for _, f in numeric], impute)
        blocks.append(block)
        refusals.append(refused)
    if categorical:
        block, flag = _categorical_block(g, [n for n, _ in categorical], [f for _, f in categorical], impute,
                                         schema.csv.na_values, unknown_category == "ignore")  # fmt: skip
        blocks.append(block)
        refusals.extend([] if flag is None else [flag])
    # the blocks' columns (the numeric features, then every level) in the schema's order: the fit's feature_names
    order: list[int] = []
    at_numeric, at_level = 0, len(numeric)
    for f in used:
        if isinstance(f, NumericFeature):
            order.append(at_numeric)
            at_numeric += 1
        else:
            order.extend(range(at_level, at_level + len(f.levels)))
            at_level += len(f.levels)
    X = blocks[0] if len(blocks) == 1 else g.op("Concat", blocks, "blocks", axis=1)
    if order != list(range(d)):
        X = g.op("Gather", [X, g.const(order, "feature_order", dtype=np.int64)], "X", axis=1,
                 doc=f"the encoded rows, columns {names!r}")  # fmt: skip
    refused_row: str | None = None  # [N, 1] bool: the rows /predict refuses
    for flag in refusals:
        refused_row = flag if refused_row is None else g.op("Or", [refused_row, flag], "refused")

    def masked(value: str, nan: Any, output: str, per_row: bool, doc: str) -> str:
        """``value`` with the refused rows set to ``nan``, as the graph output ``output``."""
        if refused_row is None:
            return g.op("Identity", [value], output, output=output, doc=doc)
        flag = refused_row if not per_row else g.op("Squeeze", [refused_row, g.const([1], "axis", dtype=np.int64)],
                                                    "refused_rows")  # fmt: skip
        return g.op("Where", [flag, nan, value], output, output=output, doc=doc)

    nan = g.const(math.nan, "nan")
    coefficients = np.asarray(result["coefficients"], dtype=np.float64)
    intercept = result.get("intercept")
    outputs: list[onnx.ValueInfoProto] = []
    classes: list[str] | None = None

    # --- the model ---
    def linear_score() -> str:
        """z = ⟨θ, x⟩ + b of a one-output model (θ of the schema's d columns), also the ``scores`` output."""
        if coefficients.shape != (d,):
            raise ValueError(f"the fit has coefficients of shape {coefficients.shape}, the schema encodes {d} columns")
        b = 0.0 if intercept is None else float(intercept)
        z = g.op("Add", [g.op("MatMul", [X, g.const(coefficients, "theta")], "dot"), g.const(b, "intercept")],
                 "score")  # fmt: skip
        masked(z, nan, "scores", True, "⟨θ, x⟩ + b")
        return z

    if model in CLASSIFICATION_MODELS and isinstance(label, BinaryLabel):
        z = linear_score()
        outputs.append(_value_info("scores", TensorProto.DOUBLE, ["N"], "⟨θ, x⟩ + b per row; NaN: a refused row"))
        positive = g.op("Cast", [g.op("GreaterOrEqual", [z, g.const(0.0, "zero")], "is_positive")], "class_index",
                        to=TensorProto.INT64)  # fmt: skip
        names_tensor = g.const([label.negative, label.positive], "classes", dtype=object)
        chosen = g.op("Gather", [names_tensor, positive], "class_name", axis=0)
        masked(chosen, g.const("", "empty", dtype=object), "label", True, "the positive class where the score ≥ 0")
        outputs.append(_value_info("label", TensorProto.STRING, ["N"],
                                   f"{label.positive!r} where the score ≥ 0, else {label.negative!r}; '' for a "
                                   "refused row"))  # fmt: skip
        if model == "logistic":
            classes = [label.negative, label.positive]
            axis = g.const([1], "axis", dtype=np.int64)
            p_negative = g.op("Unsqueeze", [g.op("Sigmoid", [g.op("Neg", [z], "minus_score")], "sigma"), axis],
                              "p_negative")  # fmt: skip
            p_positive = g.op("Unsqueeze", [g.op("Sigmoid", [z], "sigma"), axis], "p_positive")
            p = g.op("Concat", [p_negative, p_positive], "probabilities", axis=1)
            masked(p, nan, "probabilities", False, "(σ(−score), σ(score))")
            outputs.append(_value_info("probabilities", TensorProto.DOUBLE, ["N", 2],
                                       f"(P({label.negative!r}), P({label.positive!r})) = (σ(−score), "
                                       "σ(score))"))  # fmt: skip
    elif model == "logistic" and isinstance(label, CategoricalLabel):
        classes = [str(c) for c in (result.get("classes") or label.levels)]
        k = len(classes)
        if coefficients.shape != (k, d):
            raise ValueError(f"the fit has coefficients of shape {coefficients.shape}, the schema encodes {k} × {d}")
        b_vector = np.zeros(k) if intercept is None else np.asarray(intercept, dtype=np.float64).reshape(k)
        z = g.op("Add", [g.op("MatMul", [X, g.const(coefficients.T.copy(), "theta")], "dot"),
                         g.const(b_vector, "intercept")], "logits")  # fmt: skip
        masked(z, nan, "scores", False, "Θx + b")
        outputs.append(_value_info("scores", TensorProto.DOUBLE, ["N", k],
                                   f"the logits Θx + b of the classes {classes!r}; NaN: a refused row"))  # fmt: skip
        best = g.op("ArgMax", [z], "best", axis=1, keepdims=0, select_last_index=0)
        chosen = g.op("Gather", [g.const(list(label.levels), "levels", dtype=object), best], "class_name", axis=0)
        masked(chosen, g.const("", "empty", dtype=object), "label", True, "the most probable class")
        outputs.append(_value_info("label", TensorProto.STRING, ["N"],
                                   "the most probable class (the first on ties); '' for a refused row"))  # fmt: skip
        p = g.op("Softmax", [z], "softmax", axis=1)
        masked(p, nan, "probabilities", False, "softmax(Θx + b)")
        outputs.append(_value_info("probabilities", TensorProto.DOUBLE, ["N", k],
                                   f"softmax(Θx + b): the probabilities of {classes!r}"))  # fmt: skip
    elif model in REGRESSION_MODELS and not isinstance(label, BinaryLabel | CategoricalLabel):
        z = linear_score()
        outputs.append(_value_info("scores", TensorProto.DOUBLE, ["N"],
                                   "⟨θ, x⟩ + b on the encoded label's scale [−1, 1]; NaN: a refused row"))  # fmt: skip
        lower, upper = label.lower, label.upper
        # NumericLabel.decode: (clip(z, −1, 1)·(upper − lower) + lower + upper) / 2, clipped to [lower, upper]
        y = g.op("Clip", [z, g.const(-1.0, "minus_one"), g.const(1.0, "one")], "clipped")
        y = g.op("Mul", [y, g.const(upper - lower, "span")], "stretched")
        y = g.op("Add", [g.op("Add", [y, g.const(lower, "lower")], "plus_lower"), g.const(upper, "upper")], "plus")
        y = g.op("Div", [y, g.const(2.0, "two")], "decoded")
        y = g.op("Clip", [y, g.const(lower, "lower"), g.const(upper, "upper")], "value")
        masked(y, nan, "label", True, f"the prediction in {label.name!r}'s units, within [{lower!r}, {upper!r}]")
        outputs.append(_value_info("label", TensorProto.DOUBLE, ["N"],
                                   f"the predicted {label.name!r}, clipped to [{lower!r}, {upper!r}]; NaN for a "
                                   "refused row"))  # fmt: skip
    else:
        raise ValueError(f"model {model!r} on a {label.type} label: no ONNX export")

    label_json = label.model_dump(mode="json")
    inputs_json = [{"name": name, "column": column, "type": kind} for name, column, kind in inputs]
    doc = (f"privfit fit {fit_id}: {result.get('solver')}/{model} on the label {label.name!r} ({label.type}). "
           "Inputs: one [N, 1] tensor per used column (float64: NaN is missing; string: stripped, in Unicode NFC, "
           f"'' or a csv.na_values marker is missing); missing values: {schema.missing!r}; undeclared levels: "
           f"{unknown_category!r}. Outputs: {', '.join(o.name for o in outputs)}. A row /predict would refuse has "
           "NaN scores and probabilities and an empty (or NaN) label.")  # fmt: skip
    graph = helper.make_graph(g.nodes, f"privfit_fit_{fit_id}", graph_inputs, outputs, g.initializers,
                              doc_string=doc)  # fmt: skip
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="privfit",
                                   producer_version=__version__, doc_string=doc)  # fmt: skip
    onnx_model.ir_version = IR_VERSION
    metadata = {
        "privfit_version": __version__, "fit_id": fit_id, "solver": str(result.get("solver")), "model": model,
        "label": json.dumps(label_json, ensure_ascii=False), "classes": json.dumps(classes, ensure_ascii=False),
        "feature_names": json.dumps(names, ensure_ascii=False), "inputs": json.dumps(inputs_json, ensure_ascii=False),
        "outputs": json.dumps([o.name for o in outputs]), "missing": schema.missing,
        "unknown_category": unknown_category,
    }  # fmt: skip
    helper.set_model_props(onnx_model, metadata)
    onnx.checker.check_model(onnx_model, full_check=True)
    return onnx_model


def onnx_bytes(result: Mapping[str, Any], schema: DatasetSchema, *, fit_id: str,
               unknown_category: Literal["error", "ignore"] = "error") -> bytes:  # fmt: skip
    """:func:`fit_to_onnx` serialised (the bytes of a ``.onnx`` file; the same for the same fit and options)."""
    return bytes(fit_to_onnx(result, schema, fit_id=fit_id, unknown_category=unknown_category).SerializeToString())
