"""Utility of every privfit solver at its DEFAULTS on five public datasets and a synthetic one (issue 21's
acceptance instrument; issue 34's non-expert schemas).

    .venv/bin/python benchmarks/utility.py
        [--datasets adult telco_churn hr_attrition power_plant wine_white synthetic_skewed]
        [--schemas expert|naive] [--epsilons 0.1 0.5 1 2 5 50] [--seeds 3] [--delta 1e-6] [--solvers dp_gd ...]
        [--max-rows N] [--split-seed 0] [--quick] [--markdown]

Needs ``pip install -e ".[bench]"`` (scikit-learn, diffprivlib; diffprivlib's rows are skipped with a printed
reason when it cannot be imported). Reports; judges nothing (no thresholds, exit 0).

**Datasets.** UCI Adult (``../shared/data/adult/adult.data`` only, split like the others; ``adult.test`` is not
used), the four development datasets of ``../shared/data/dev/`` (its README: files, labels, sha256), and
``synthetic_skewed``: 20,000 public rows generated in-process by ``benchmarks/synthetic.py`` (seed 0; no file;
log-normal and Pareto amounts and counts, two normal columns, a 4-level categorical, a ~10 % positive binary
label logistic in the LOG of the skewed columns). A dataset whose file is absent is skipped with a message. A
binary label is fitted with the ``logistic`` model, a numeric label with ``linear``.

**Schemas** (``--schemas``; :func:`dataset_schema` is the one map (dataset, kind) → schema). ``expert`` (default):
the schema a DP-aware owner writes — ``examples/adult-schema.json``, ``examples/dev/<name>-schema.json`` (bounds
from codebooks, a few clip/log transforms; see ``examples/dev/README.md``), ``synthetic.EXPERT_SCHEMA`` (clip
ranges and log1p from the generating process). ``naive``: the same columns, label, levels, missing policy and
CSV options with the codebook-wide round bounds of an owner without DP knowledge and no transforms (issue 34) —
``examples/adult-naive-schema.json``, ``examples/dev/<name>-naive-schema.json`` (README's "Non-expert schemas"),
``synthetic.NAIVE_SCHEMA``.

**Protocol** (the data README's "protocol for utility numbers"), per dataset:

1. Split. The file's records (non-blank, non-comment physical lines after the header; a record must be one line)
   are split once, 80 % train / 20 % test, by ``numpy.random.default_rng(--split-seed)`` (default 0): stratified
   for a binary label (20 % of each class, rounded, goes to test), uniform for a numeric one. Both parts keep the
   file's order (the solvers draw their own secret permutations). The split is fixed across noise seeds: the
   ± below is over the privacy noise (and diffprivlib's), not over splits. ``--max-rows N`` (``--quick``: 3,000)
   first keeps a seeded random N records.
2. Encode. The training part is encoded as an upload would be: ``privfit.datasets.parse_and_encode`` on its CSV
   bytes (header line + training lines) with the dataset's schema. The test part goes the way of
   ``POST /v1/fits/{id}/predict``: its records become JSON-like rows (column → cell text, label removed) encoded
   with ``privfit.datasets.encode_rows`` and the same schema (transforms included). This script fits on the
   declared encoding; ``benchmarks/preprocessing.py`` measures the same splits after private preprocessing.
3. privfit. Every registered solver whose ``models`` include the dataset's model (or those named by
   ``--solvers``), at its DEFAULTS, for each ε of the grid (default {0.1, 0.5, 1, 2, 5, 50}) at δ (default
   1e-6) and each seed 0..S−1 (default S = 3): ``resolved = solver.resolve({"model": m}, meta, target_epsilon=ε,
   delta=δ)`` with ``meta = PublicMetadata.from_dataset(train)``; the charged ``solver.cost(resolved,
   meta).epsilon(δ).epsilon`` must be ≤ ε (the run stops otherwise); then ``solver.fit(X, y, meta, resolved,
   make_generator(seed, data_is_public=True))`` (the datasets are public, so seeded noise is allowed). A
   ``SolverParameterError`` (defaults the solver refuses) is reported in the cell and in a footnote, not raised.
   Each (solver, model) is warmed up once, untimed, on the first 2,000 training rows (numba compilation).
4. Baselines on the SAME encoding, in the same run: non-private scikit-learn (``LogisticRegression(C=1)`` for a
   binary label, ``Ridge(alpha=1)`` for a numeric one; fitted once, deterministic); diffprivlib
   (``LogisticRegression(epsilon=ε, data_norm=schema.row_norm_bound)``, default ``C = 1``, pure ε-DP; for
   regression ``LinearRegression(epsilon=ε, bounds_X, bounds_y=(−1, 1))`` with ``bounds_X`` the encoded ranges
   the schema implies, [−1, 1] for a numeric column and [0, 1] for a one-hot one; ``random_state`` = the seed);
   and the constant model: the majority class of the training labels (binary) or the training mean of the
   encoded label (numeric).
5. Score. Every model, private or not, is a ``FitResult`` (coefficients, intercept) scored exactly like
   ``/predict``: ``scores = result.decision_function(X_test)``, ``predictions = result.predict(X_test)``, decoded by
   ``schema.label.decode`` (class names; numeric values mapped back to the label's units and clipped to its
   declared range). Binary: accuracy of the decoded classes against the test file's label cells, and ROC AUC of
   the scores. Numeric: RMSE and MAE of the decoded predictions against the test file's label values, in the
   label's units.

**Output.** Per dataset, one table per metric: rows are the methods, columns the ε grid, cells mean ± sd over
the seeds (the non-private and constant rows are the same in every column); ▼ marks a mean accuracy below the
majority class, or a mean RMSE (MAE) above the mean predictor's; the ``fit s`` column is the mean wall-clock
seconds of one ``fit`` (resolve/cost and scoring excluded) over all ε and seeds. Then, at ε = 1 (when in the
grid), each private method's gap to non-private: accuracy points and AUC difference (binary), RMSE and MAE
ratios (numeric). Then, at ε = 50 (when in the grid), the "none underfits" check: for each privfit solver, its
own regularised training objective F(θ) = (1/n) Σ φ(⟨θ, x̃_i⟩, y_i) + (λ/2)‖θ‖² (x̃ = (x, 1) with the default
intercept, θ including it; φ the logistic loss log(1 + e^{−yz}) or the squared loss ½(z − y)² on the encoded
label) with the radius R and λ of ITS resolved settings (``radius``, ``l2``; none or 0 when the solver has no
such setting), minimised non-privately by scipy on the encoded training data (L-BFGS-B from 0; when an iterate
leaves the ball ‖θ‖ ≤ R, SLSQP with that constraint from its projection; solved once per (R, λ)); printed: F
at the released θ (mean over seeds), F*, their gap, and the test accuracy (RMSE) of the released models against
the optimum's. ``resque_dpsgd`` minimises a smoothed version of its loss; its reference is the unsmoothed loss
on its radius. Last, a summary over the datasets: at each ε the best privfit solver (by mean test accuracy or
RMSE) next to non-private, diffprivlib and the constant model; and the RECOMMENDED solver of each (dataset, ε) —
``privfit.solvers.recommendation.recommend(model, n, ε)``, the rule of docs/solvers.md's "Which solver when" —
with issue 21's checks: it beats the constant model and diffprivlib (mean accuracy, or mean RMSE), and at ε = 1
it is within 1.5 points and 0.03 AUC of non-private (binary) or within 10 % of its RMSE (numeric); ✓/✗ marks
report, they do not judge (exit 0). ``--markdown`` prints every table in Markdown (for
docs/benchmarks.md); progress goes to stderr.

``--quick``: 1 seed, ε ∈ {1}, 3,000 rows per dataset (explicit ``--epsilons``/``--seeds``/``--max-rows`` win).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import functools
import math
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import synthetic
from common import (
    ADULT_DIR,
    EXPECTED_SOLVERS,
    fit_diffprivlib_logistic,
    import_diffprivlib_linear,
    import_diffprivlib_logistic,
    library_versions,
    resolve_checked,
    timed,
    warm_up,
)

from privfit.datasets import (
    BinaryLabel,
    CategoricalFeature,
    DatasetSchema,
    EncodedDataset,
    NumericFeature,
    encode_rows,
    parse_and_encode,
)
from privfit.privacy import make_generator
from privfit.privacy.noise import configure_sampler
from privfit.solvers import FitResult, PublicMetadata, SolverParameterError
from privfit.solvers.recommendation import recommend
from privfit.solvers.registry import get_solver, solver_names

REPO = Path(__file__).resolve().parents[1]
DEV_DIR = REPO / ".." / "shared" / "data" / "dev"

DEFAULT_EPSILONS: tuple[float, ...] = (0.1, 0.5, 1.0, 2.0, 5.0, 50.0)
QUICK_EPSILONS: tuple[float, ...] = (1.0,)
QUICK_MAX_ROWS = 3000
GAP_EPSILON = 1.0
UNDERFIT_EPSILON = 50.0
TEST_FRACTION = 0.2

_START = time.perf_counter()


def progress(message: str) -> None:
    print(f"[{time.perf_counter() - _START:7.1f} s] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------------------
# datasets: split the file's records, encode the train part as an upload, the test part as /predict rows
# ---------------------------------------------------------------------------------------------------------


SCHEMA_KINDS: tuple[str, ...] = ("expert", "naive")
SYNTHETIC_SEED = 0  # the seed of benchmarks/synthetic.py's rows (the split has its own, --split-seed)


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """A dataset: its CSV file, or (``csv_path`` None) a generator of its CSV bytes. Its schema is not here:
    :func:`dataset_schema` maps (name, schema kind) to it."""

    name: str
    csv_path: Path | None
    title: str
    generate: Callable[[], bytes] | None = None

    def absent(self) -> str | None:
        """Why the dataset cannot be loaded (its file is not found), or None."""
        if self.csv_path is None or self.csv_path.is_file():
            return None
        return f"{self.csv_path.resolve()} not found"

    def read_bytes(self) -> bytes:
        if self.csv_path is not None:
            return self.csv_path.read_bytes()
        assert self.generate is not None
        return self.generate()


#: the file-backed datasets (other benchmarks iterate these and read ``csv_path``)
DATASETS: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in (
        DatasetSpec("adult", ADULT_DIR / "adult.data", "UCI Adult"),
        *(
            DatasetSpec(name, DEV_DIR / f"{name}.csv", title)
            for name, title in (
                ("telco_churn", "Telco customer churn"),
                ("hr_attrition", "HR attrition"),
                ("power_plant", "Combined cycle power plant"),
                ("wine_white", "Wine quality (white)"),
            )
        ),
    )
}
SYNTHETIC = DatasetSpec(
    synthetic.NAME,
    None,
    f"Synthetic skewed (benchmarks/synthetic.py, seed {SYNTHETIC_SEED})",
    functools.partial(synthetic.synthetic_csv, SYNTHETIC_SEED),
)
#: this benchmark's datasets: the files and the generated one
BENCHMARK_DATASETS: dict[str, DatasetSpec] = {**DATASETS, SYNTHETIC.name: SYNTHETIC}


def dataset_schema(name: str, kind: str) -> tuple[DatasetSchema, str]:
    """THE map (dataset, schema kind) → (schema, where it is declared), for every dataset of this benchmark.

    ``expert``: ``examples/adult-schema.json``, ``examples/dev/<name>-schema.json``, ``synthetic.EXPERT_SCHEMA``;
    ``naive``: ``examples/adult-naive-schema.json``, ``examples/dev/<name>-naive-schema.json``,
    ``synthetic.NAIVE_SCHEMA`` (codebook-wide bounds, no transforms)."""
    if kind not in SCHEMA_KINDS:
        raise ValueError(f"unknown schema kind {kind!r}; one of {', '.join(SCHEMA_KINDS)}")
    if name == synthetic.NAME:
        document = synthetic.EXPERT_SCHEMA if kind == "expert" else synthetic.NAIVE_SCHEMA
        return DatasetSchema.model_validate(document), f"benchmarks/synthetic.py {kind.upper()}_SCHEMA"
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}")
    directory = REPO / "examples" if name == "adult" else REPO / "examples" / "dev"
    path = directory / f"{name}{'-naive' if kind == 'naive' else ''}-schema.json"
    return DatasetSchema.model_validate_json(path.read_text()), str(path.relative_to(REPO))


@dataclasses.dataclass(frozen=True)
class Split:
    """One dataset after the protocol's steps 1–2."""

    spec: DatasetSpec
    schema: DatasetSchema  # what encodes the test rows and decodes predictions
    model: str
    train: EncodedDataset
    test_x: np.ndarray
    test_truth: list[str] | np.ndarray  # label cells (binary) or label values (numeric) of the test records
    rows_in_file: int
    schema_kind: str = "expert"
    schema_source: str = ""  # where the declared schema comes from (dataset_schema)
    test_rows: list[dict[str, str]] = dataclasses.field(default_factory=list)  # the test records as /predict rows

    def encoded_by(self, schema: DatasetSchema, train: EncodedDataset) -> Split:
        """This split with ``train`` (e.g. after private preprocessing) and the test rows encoded by ``schema``."""
        return dataclasses.replace(self, schema=schema, train=train, test_x=encode_rows(self.test_rows, schema).X)

    @property
    def binary(self) -> bool:
        return isinstance(self.schema.label, BinaryLabel)


def file_records(data: bytes, schema: DatasetSchema) -> tuple[str | None, list[str], list[list[str]], list[str]]:
    """(header line or None, record lines, their cells, column names) — one record per non-blank, non-comment
    physical line, as the service's reader sees this file (a multi-line quoted record is refused here)."""
    options = schema.csv
    lines = [
        line
        for line in data.decode("utf-8-sig").splitlines()
        if line.strip() and not (options.comment and line.startswith(options.comment))
    ]

    def cells(line: str) -> list[str]:
        return next(csv.reader([line], delimiter=options.delimiter))

    header: str | None = None
    if options.header:
        header, lines = lines[0], lines[1:]
        columns = [c.strip() for c in cells(header)]
    else:
        columns = list(options.columns or [])
    parsed = [cells(line) for line in lines]
    for number, record in enumerate(parsed, start=1):
        if len(record) != len(columns):
            raise SystemExit(f"record {number}: {len(record)} cells for {len(columns)} columns (multi-line record?)")
    return header, lines, parsed, columns


def split_indices(labels: Sequence[str], positive: str | None, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train, test) record indices, each sorted: 20 % of each class (of all rows without ``positive``) to test."""
    rng = np.random.default_rng(seed)
    n = len(labels)
    if positive is None:
        groups = [np.arange(n)]
    else:
        is_positive = np.array([label.strip() == positive for label in labels])
        groups = [np.flatnonzero(is_positive), np.flatnonzero(~is_positive)]
    test = np.concatenate([rng.permutation(g)[: round(TEST_FRACTION * len(g))] for g in groups])
    mask = np.zeros(n, dtype=bool)
    mask[test] = True
    return np.flatnonzero(~mask), np.flatnonzero(mask)


def load_split(spec: DatasetSpec, split_seed: int, max_rows: int | None, schemas: str = "expert") -> Split:
    """The protocol's steps 1–2 for one dataset, with its schema of kind ``schemas`` (``expert`` or ``naive``)."""
    schema, source = dataset_schema(spec.name, schemas)
    header, lines, parsed, columns = file_records(spec.read_bytes(), schema)
    rows_in_file = len(lines)
    label_name = schema.label.name
    label_at = columns.index(label_name)
    keep = np.arange(rows_in_file)
    if max_rows is not None and max_rows < rows_in_file:
        keep = np.sort(np.random.default_rng([split_seed, max_rows]).choice(rows_in_file, max_rows, replace=False))
    lines = [lines[i] for i in keep]
    parsed = [parsed[i] for i in keep]
    labels = [record[label_at] for record in parsed]
    binary = isinstance(schema.label, BinaryLabel)
    positive = schema.label.positive if isinstance(schema.label, BinaryLabel) else None
    train_idx, test_idx = split_indices(labels, positive, split_seed)

    train_lines = ([header] if header is not None else []) + [lines[i] for i in train_idx]
    train = parse_and_encode(("\n".join(train_lines) + "\n").encode(), schema)
    rows = [
        {column: cell for column, cell in zip(columns, parsed[i], strict=True) if column != label_name}
        for i in test_idx
    ]
    test_x = encode_rows(rows, schema).X
    truth: list[str] | np.ndarray = (
        [labels[i].strip() for i in test_idx] if binary else np.array([float(labels[i]) for i in test_idx])
    )
    model = "logistic" if binary else "linear"
    return Split(spec, schema, model, train, test_x, truth, rows_in_file, schemas, source, rows)


# ---------------------------------------------------------------------------------------------------------
# scoring: the /predict code path
# ---------------------------------------------------------------------------------------------------------


def score(result: FitResult, split: Split) -> dict[str, float]:
    """Metrics of one model on the test rows, through ``decision_function`` / ``predict`` / ``label.decode``."""
    from sklearn.metrics import roc_auc_score

    scores = result.decision_function(split.test_x)
    decoded = split.schema.label.decode(result.predict(split.test_x))
    if isinstance(split.schema.label, BinaryLabel):
        truth = np.asarray(split.test_truth)
        positive = truth == split.schema.label.positive
        accuracy = float(np.mean(np.asarray(decoded, dtype=object) == truth))
        finite = bool(np.all(np.isfinite(scores)))
        auc = float(roc_auc_score(positive, scores)) if finite else math.nan
        return {"accuracy": accuracy, "auc": auc}
    error = np.asarray(decoded, dtype=np.float64) - np.asarray(split.test_truth)
    return {"rmse": float(np.sqrt(np.mean(error**2))), "mae": float(np.mean(np.abs(error)))}


def fit_result(label: str, model: str, coefficients: Any, intercept: Any) -> FitResult:
    """A non-privfit model as the ``FitResult`` /predict would apply."""
    return FitResult(
        solver=label,
        model=model,
        coefficients=[float(c) for c in np.ravel(coefficients)],
        intercept=float(np.ravel(intercept)[0]),
    )


# ---------------------------------------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Row:
    """One method on one dataset: per-ε lists of per-seed metrics, fit seconds, refusals, ε=50 releases."""

    label: str
    private: bool
    metrics: dict[float, list[dict[str, float]]] = dataclasses.field(default_factory=dict)
    seconds: list[float] = dataclasses.field(default_factory=list)
    refused: dict[float, str] = dataclasses.field(default_factory=dict)
    releases: dict[float, list[FitResult]] = dataclasses.field(default_factory=dict)
    resolved: dict[float, Any] = dataclasses.field(default_factory=dict)
    note: str = ""

    def values(self, epsilon: float, metric: str) -> list[float]:
        return [m[metric] for m in self.metrics.get(epsilon, [])]

    def mean(self, epsilon: float, metric: str) -> float | None:
        values = self.values(epsilon, metric)
        return statistics.fmean(values) if values else None


def constant_row(label: str, metrics: dict[str, float], epsilons: list[float], seconds: list[float]) -> Row:
    return Row(label, private=False, metrics={e: [metrics] for e in epsilons}, seconds=list(seconds))


def run_privfit(name: str, split: Split, epsilons: list[float], seeds: int, delta: float) -> Row:
    solver = get_solver(name)
    row = Row(name, private=True)
    meta = PublicMetadata.from_dataset(split.train)
    for epsilon in epsilons:
        try:
            resolved = resolve_checked(solver, split.model, meta, epsilon, delta)
        except SolverParameterError as error:
            row.refused[epsilon] = str(error)
            progress(f"{split.spec.name} {name} ε={epsilon:g}: refused: {error}")
            continue
        row.resolved[epsilon] = resolved
        runs = []
        for seed in range(seeds):
            rng = make_generator(seed, data_is_public=True)
            fit = functools.partial(solver.fit, split.train.X, split.train.y, meta, resolved, rng)
            result, seconds = timed(fit)
            row.seconds.append(seconds)
            runs.append(score(result, split))
            if epsilon == UNDERFIT_EPSILON:
                row.releases.setdefault(epsilon, []).append(result)
        row.metrics[epsilon] = runs
        main = "accuracy" if split.binary else "rmse"
        progress(
            f"{split.spec.name} {name} ε={epsilon:g}: {main} {row.mean(epsilon, main):.4f}, "
            f"{statistics.fmean(row.seconds[-seeds:]):.2f} s/fit"
        )
    return row


def run_diffprivlib(model_cls: Any, split: Split, epsilons: list[float], seeds: int) -> Row:
    train = split.train
    if split.binary:
        label = "diffprivlib LogisticRegression (pure ε, C = 1)"
    else:
        label = "diffprivlib LinearRegression (pure ε)"
    row = Row(label, private=True)
    for epsilon in epsilons:
        runs = []
        for seed in range(seeds):
            if split.binary:
                fit = functools.partial(
                    fit_diffprivlib_logistic, model_cls, train.X, train.y, epsilon, train.row_norm_bound, 1.0, seed
                )
            else:
                regression = model_cls(
                    epsilon=epsilon, bounds_X=encoded_bounds(split.schema), bounds_y=(-1.0, 1.0), random_state=seed
                )
                fit = functools.partial(regression.fit, train.X, train.y)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # diffprivlib's compatibility/convergence chatter
                model, seconds = timed(fit)
            row.seconds.append(seconds)
            runs.append(score(fit_result("diffprivlib", split.model, model.coef_, model.intercept_), split))
        row.metrics[epsilon] = runs
    progress(f"{split.spec.name} diffprivlib: {len(epsilons)} ε × {seeds} seed(s) done")
    return row


def encoded_bounds(schema: DatasetSchema) -> tuple[np.ndarray, np.ndarray]:
    """The range of each encoded column, from the schema alone: [−1, 1] for a numeric, [0, 1] for a one-hot."""
    lower: list[float] = []
    for feature in schema.features:
        if isinstance(feature, NumericFeature):
            lower.append(-1.0)
        elif isinstance(feature, CategoricalFeature):
            lower.extend([0.0] * len(feature.levels))
    return np.array(lower), np.ones(len(lower))


def baselines(split: Split, epsilons: list[float]) -> tuple[Row, Row]:
    """(non-private scikit-learn, constant model) rows."""
    from sklearn.linear_model import LogisticRegression, Ridge

    X, y = split.train.X, split.train.y
    if split.binary:
        model, seconds = timed(lambda: LogisticRegression(C=1.0, max_iter=5000).fit(X, y))
        sk = fit_result("scikit-learn", "logistic", model.coef_, model.intercept_)
        majority = 1.0 if np.mean(y == 1.0) >= 0.5 else -1.0
        constant = fit_result("majority", "logistic", np.zeros(split.train.d), [majority])
        label = split.schema.label
        name = label.positive if majority > 0 else label.negative if isinstance(label, BinaryLabel) else ""
        labels = ("non-private scikit-learn LogisticRegression (C = 1)", f"majority class ({name})")
    else:
        model, seconds = timed(lambda: Ridge(alpha=1.0).fit(X, y))
        sk = fit_result("scikit-learn", "linear", model.coef_, model.intercept_)
        constant = fit_result("mean", "linear", np.zeros(split.train.d), [float(np.mean(y))])
        labels = ("non-private scikit-learn Ridge (alpha = 1)", "training mean")
    return (
        constant_row(labels[0], score(sk, split), epsilons, [seconds]),
        constant_row(labels[1], score(constant, split), epsilons, []),
    )


# ---------------------------------------------------------------------------------------------------------
# ε = 50: each solver's own objective, minimised non-privately
# ---------------------------------------------------------------------------------------------------------


def objective(model: str, A: np.ndarray, y: np.ndarray, l2: float) -> Callable[[np.ndarray], tuple[float, np.ndarray]]:
    """θ ↦ (F(θ), ∇F(θ)) with F = mean φ(Aθ, y) + (l2/2)‖θ‖²; φ logistic or ½(z − y)²."""
    n = A.shape[0]

    def f(theta: np.ndarray) -> tuple[float, np.ndarray]:
        z = A @ theta
        if model == "logistic":
            margin = y * z
            value = float(np.mean(np.logaddexp(0.0, -margin)))
            slope = -y * np.exp(-np.logaddexp(0.0, margin))  # −y σ(−yz)
        else:
            residual = z - y
            value = float(0.5 * np.mean(residual**2))
            slope = residual
        return value + 0.5 * l2 * float(theta @ theta), A.T @ slope / n + l2 * theta

    return f


def minimise(
    f: Callable[[np.ndarray], tuple[float, np.ndarray]], dim: int, radius: float | None
) -> tuple[np.ndarray, str]:
    """Non-private minimiser of f on the ball ‖θ‖ ≤ radius (R^dim when None) and a solver note."""
    from scipy.optimize import minimize

    def leave_the_ball(xk: np.ndarray) -> None:
        # an iterate outside the ball: the constrained problem is solved below (on Adult the unconstrained
        # minimiser is at infinity, and L-BFGS-B would otherwise run its full iteration budget)
        if radius is not None and float(np.linalg.norm(xk)) > radius:
            raise StopIteration

    options = {"maxiter": 20000, "gtol": 1e-10, "ftol": 1e-15}
    first = minimize(f, np.zeros(dim), jac=True, method="L-BFGS-B", callback=leave_the_ball, options=options)
    theta = first.x
    note = "L-BFGS-B" + ("" if first.success else f" ({first.message})")
    if radius is not None and float(np.linalg.norm(theta)) > radius:
        start = theta * (radius / float(np.linalg.norm(theta)))
        second = minimize(
            f,
            start,
            jac=True,
            method="SLSQP",
            constraints=[{"type": "ineq", "fun": lambda t: radius**2 - t @ t, "jac": lambda t: -2.0 * t}],
            options={"maxiter": 2000, "ftol": 1e-14},
        )
        theta = second.x
        if float(np.linalg.norm(theta)) > radius:  # SLSQP may end a hair outside
            theta = theta * (radius / float(np.linalg.norm(theta)))
        note = "SLSQP on the ball" + ("" if second.success else f" ({second.message})")
    return theta, note


@dataclasses.dataclass
class Underfit:
    solver: str
    radius: float | None
    l2: float
    value: float  # mean F at the released θ
    optimum: float  # F*
    metric: float  # mean test accuracy (binary) or RMSE (numeric) of the released models
    optimum_metric: float
    note: str


def underfitting(split: Split, rows: list[Row]) -> list[Underfit]:
    out = []
    train = split.train
    A = np.hstack([train.X, np.ones((train.n, 1))])
    main = "accuracy" if split.binary else "rmse"
    optima: dict[tuple[float | None, float, bool], tuple[np.ndarray, str]] = {}  # solvers sharing R and λ
    for row in rows:
        releases = row.releases.get(UNDERFIT_EPSILON)
        resolved = row.resolved.get(UNDERFIT_EPSILON)
        if not releases or resolved is None:
            continue
        radius = getattr(resolved, "radius", None)
        l2 = float(getattr(resolved, "l2", 0.0) or 0.0)
        intercept = bool(getattr(resolved, "fit_intercept", True))
        design = A if intercept else A[:, :-1]
        f = objective(split.model, design, train.y, l2)
        started = time.perf_counter()
        key = (radius, l2, intercept)
        if key not in optima:
            optima[key] = minimise(f, design.shape[1], radius)
        theta, note = optima[key]
        optimum = f(theta)[0]
        optimum_result = FitResult(
            solver="optimum",
            model=split.model,
            coefficients=[float(c) for c in theta[: train.d]],
            intercept=float(theta[train.d]) if intercept else None,
        )
        values = []
        for release in releases:
            released = np.asarray([*release.coefficients, *([release.intercept or 0.0] if intercept else [])])
            values.append(f(released)[0])
        if min(values) < optimum - 1e-9 * max(1.0, abs(optimum)):
            note += "; WARNING: a release beats the reference optimum (scipy did not converge)"
        progress(f"{split.spec.name} {row.label}: reference optimum in {time.perf_counter() - started:.1f} s ({note})")
        out.append(
            Underfit(
                row.label,
                radius,
                l2,
                statistics.fmean(values),
                optimum,
                row.mean(UNDERFIT_EPSILON, main) or math.nan,
                score(optimum_result, split)[main],
                note,
            )
        )
    return out


# ---------------------------------------------------------------------------------------------------------
# tables
# ---------------------------------------------------------------------------------------------------------


def render(header: list[str], body: list[list[str]], markdown: bool, left: int = 1) -> str:
    """A table with the first ``left`` columns left-aligned and the rest right-aligned (Markdown or plain)."""
    if markdown:
        body = [[cell.replace("|", "\\|") for cell in line] for line in body]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        padded = [c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))]
        return "| " + " | ".join(padded) + " |" if markdown else "  ".join(padded).rstrip()

    if markdown:
        rule = "|" + "|".join("-" * (w + 2) if i < left else "-" * (w + 1) + ":" for i, w in enumerate(widths)) + "|"
    else:
        rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), rule, *(line(cells) for cells in body)])


METRICS = {
    "accuracy": ("test accuracy (%)", 100.0, 2, "lower"),
    "auc": ("test ROC AUC", 1.0, 3, None),
    "rmse": ("test RMSE ({units})", 1.0, 3, "higher"),
    "mae": ("test MAE ({units})", 1.0, 3, "higher"),
}
UNITS = {"power_plant": "MW", "wine_white": "quality points"}


def format_cell(row: Row, epsilon: float, metric: str, floor: float | None) -> str:
    if epsilon in row.refused:
        return "refused"
    values = row.values(epsilon, metric)
    if not values:
        return "—"
    _, scale, digits, bad = METRICS[metric]
    mean = statistics.fmean(values)
    text = f"{scale * mean:.{digits}f}"
    if len(values) > 1:
        text += f" ± {scale * statistics.stdev(values):.{digits}f}"
    if row.private and floor is not None and bad is not None and (mean < floor if bad == "lower" else mean > floor):
        text += " ▼"
    return text


def metric_table(split: Split, rows: list[Row], floor_row: Row, metric: str, epsilons: list[float], md: bool) -> str:
    header = ["method", *(f"ε = {e:g}" for e in epsilons), "fit s"]
    body = []
    for row in rows:
        cells = [row.label if row.private is False or row.label.startswith("diffprivlib") else f"`{row.label}`"]
        for epsilon in epsilons:
            cells.append(format_cell(row, epsilon, metric, floor_row.mean(epsilon, metric)))
        cells.append(f"{statistics.fmean(row.seconds):.2f}" if row.seconds else "—")
        body.append(cells)
    return render(header, body, md)


def footnotes(rows: list[Row]) -> list[str]:
    notes = []
    for row in rows:
        messages: dict[str, list[float]] = {}
        for epsilon, message in row.refused.items():
            messages.setdefault(message, []).append(epsilon)
        for message, eps in messages.items():
            notes.append(f"- `{row.label}` refused its defaults at ε = {', '.join(f'{e:g}' for e in eps)}: {message}")
        if row.note:
            notes.append(f"- `{row.label}`: {row.note}")
    return notes


def gap_table(split: Split, rows: list[Row], reference: Row, floor: Row, md: bool) -> str:
    e = GAP_EPSILON
    if split.binary:
        header = ["method (ε = 1)", "accuracy %", "Δ accuracy (points)", "AUC", "Δ AUC"]
        ref_acc, ref_auc = reference.mean(e, "accuracy") or 0.0, reference.mean(e, "auc") or 0.0
    else:
        header = ["method (ε = 1)", "RMSE", "RMSE / non-private", "MAE", "MAE / non-private"]
        ref_rmse, ref_mae = reference.mean(e, "rmse") or math.nan, reference.mean(e, "mae") or math.nan
    body = []
    for row in [floor, *(row for row in rows if row.private)]:
        label = row.label if not row.private or row.label.startswith("diffprivlib") else f"`{row.label}`"
        if e in row.refused or e not in row.metrics:
            body.append([label, "refused" if e in row.refused else "—", "", "", ""])
            continue
        if split.binary:
            acc, auc = row.mean(e, "accuracy") or 0.0, row.mean(e, "auc") or 0.0
            body.append(
                [label, f"{100 * acc:.2f}", f"{100 * (acc - ref_acc):+.2f}", f"{auc:.3f}", f"{auc - ref_auc:+.3f}"]
            )
        else:
            rmse, mae = row.mean(e, "rmse") or math.nan, row.mean(e, "mae") or math.nan
            body.append([label, f"{rmse:.3f}", f"{rmse / ref_rmse:.3f}", f"{mae:.3f}", f"{mae / ref_mae:.3f}"])
    return render(header, body, md)


def underfit_table(split: Split, results: list[Underfit], md: bool) -> str:
    metric = "accuracy %" if split.binary else "RMSE"
    header = ["solver (ε = 50)", "R", "λ", "F(released)", "F* (scipy)", "gap", f"{metric}", f"{metric} at F*"]
    header.append("Δ (points)" if split.binary else "ratio")
    body = []
    for u in results:
        radius = "—" if u.radius is None else f"{u.radius:.4g}"
        if split.binary:
            metric_cells = [f"{100 * u.metric:.2f}", f"{100 * u.optimum_metric:.2f}"]
            delta = f"{100 * (u.metric - u.optimum_metric):+.2f}"
        else:
            metric_cells = [f"{u.metric:.3f}", f"{u.optimum_metric:.3f}"]
            delta = f"{u.metric / u.optimum_metric:.3f}"
        cells = [f"`{u.solver}`", radius, f"{u.l2:.3g}", f"{u.value:.5f}", f"{u.optimum:.5f}"]
        body.append([*cells, f"{u.value - u.optimum:.2e}", *metric_cells, delta])
    return render(header, body, md)


# ---------------------------------------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------------------------------------


def summary_lines(split: Split, rows: list[Row], reference: Row, floor: Row, epsilons: list[float]) -> list[list[str]]:
    """Per ε: the best privfit solver by mean accuracy (RMSE) next to non-private, diffprivlib and the constant."""
    main, second = ("accuracy", "auc") if split.binary else ("rmse", "mae")
    sign = 1.0 if split.binary else -1.0
    dp = next((row for row in rows if row.label.startswith("diffprivlib")), None)

    def show(row: Row | None, epsilon: float) -> str:
        if row is None or row.mean(epsilon, main) is None:
            return "—"
        value, other = row.mean(epsilon, main) or 0.0, row.mean(epsilon, second) or 0.0
        return f"{100 * value:.2f} / {other:.3f}" if split.binary else f"{value:.3f} / {other:.3f}"

    out = []
    for epsilon in epsilons:
        candidates = [row for row in rows if row.private and row is not dp and row.mean(epsilon, main) is not None]
        best = max(candidates, key=lambda row: sign * (row.mean(epsilon, main) or 0.0), default=None)
        out.append(
            [
                f"`{split.spec.name}`",
                f"{epsilon:g}",
                f"`{best.label}`" if best else "—",
                show(best, epsilon),
                show(reference, epsilon),
                show(dp, epsilon),
                show(floor, epsilon),
            ]
        )
    return out


def mark(ok: bool | None) -> str:
    return "—" if ok is None else "✓" if ok else "✗"


def recommended_lines(
    split: Split, rows: list[Row], reference: Row, floor: Row, epsilons: list[float]
) -> list[list[str]]:
    """Per ε: the solver ``privfit.solvers.recommendation.recommend`` names for (model, n, ε) — the rule of
    docs/solvers.md's "Which solver when" — and issue 21's checks on it: beats the constant model and diffprivlib
    (mean accuracy; mean RMSE for a numeric label); at ε = 1 also within 1.5 points and 0.03 AUC of non-private
    (binary) or within 10 % of its RMSE (numeric). ``—`` where a check does not apply or a row is missing."""
    main = "accuracy" if split.binary else "rmse"
    sign = 1.0 if split.binary else -1.0
    dp = next((row for row in rows if row.label.startswith("diffprivlib")), None)
    out = []
    for epsilon in epsilons:
        name = recommend(split.model, split.train.n, epsilon).solver
        row = next((r for r in rows if r.label == name), None)
        value = row.mean(epsilon, main) if row else None
        if value is None:
            out.append([f"`{split.spec.name}`", f"{epsilon:g}", f"`{name}`", "not run", "—", "—", "—"])
            continue
        floor_value, dp_value = floor.mean(epsilon, main) or 0.0, dp.mean(epsilon, main) if dp else None
        beats_floor = sign * (value - floor_value) > 0
        beats_dp = None if dp_value is None else sign * (value - dp_value) > 0
        gap: bool | None = None
        reference_value = reference.mean(epsilon, main) or 0.0
        if epsilon == GAP_EPSILON and split.binary:
            auc, reference_auc = row.mean(epsilon, "auc") or 0.0, reference.mean(epsilon, "auc") or 0.0
            gap = 100 * (reference_value - value) <= 1.5 and reference_auc - auc <= 0.03
        elif epsilon == GAP_EPSILON:
            gap = value <= 1.10 * reference_value
        shown = f"{100 * value:.2f} / {row.mean(epsilon, 'auc') or 0.0:.3f}" if split.binary else f"{value:.3f}"
        out.append(
            [f"`{split.spec.name}`", f"{epsilon:g}", f"`{name}`", shown, mark(beats_floor), mark(beats_dp), mark(gap)]
        )
    return out


def auto_lines(split: Split, rows: list[Row], floor: Row, epsilons: list[float]) -> list[list[str]]:
    """Per ε: ``auto`` (issue 22 §1: private selection, or the public rule's solver when selection cannot pay;
    its resolved ``mode`` is shown) next to the best single privfit solver at its defaults IN HINDSIGHT (the best
    mean test metric of this run, ``auto`` excluded) and the constant model; the checks of issue 22: within 0.5
    accuracy points of that best (binary; for a numeric label the RMSE ratio is shown) and above the majority
    class (below the training mean's RMSE)."""
    main = "accuracy" if split.binary else "rmse"
    sign = 1.0 if split.binary else -1.0
    auto = next((row for row in rows if row.label == "auto"), None)
    out = []
    for epsilon in epsilons:
        value = auto.mean(epsilon, main) if auto else None
        singles = [r for r in rows if r.private and r.label not in ("auto",) and not r.label.startswith("diffprivlib")]
        measured = [r for r in singles if r.mean(epsilon, main) is not None]
        best = max(measured, key=lambda r: sign * (r.mean(epsilon, main) or 0.0), default=None)
        if auto is None or value is None or best is None:
            out.append([f"`{split.spec.name}`", f"{epsilon:g}", "not run", "—", "—", "—", "—", "—"])
            continue
        best_value, floor_value = best.mean(epsilon, main) or 0.0, floor.mean(epsilon, main) or 0.0
        mode = getattr(auto.resolved.get(epsilon), "mode", "?")
        if split.binary:
            shown, best_shown = f"{100 * value:.2f}", f"`{best.label}` {100 * best_value:.2f}"
            gap, within = f"{100 * (value - best_value):+.2f}", mark(100 * (best_value - value) <= 0.5)
        else:
            shown, best_shown = f"{value:.3f}", f"`{best.label}` {best_value:.3f}"
            gap, within = f"×{value / best_value:.3f}", "—"
        beats = mark(sign * (value - floor_value) > 0)
        out.append([f"`{split.spec.name}`", f"{epsilon:g}", mode, shown, best_shown, gap, within, beats])
    return out


def print_section(
    title: str,
    groups: dict[bool, list[list[str]]],
    header: Callable[[bool], list[str]],
    md: bool,
    left: int,
    note: Callable[[bool], str] = lambda binary: "",
) -> None:
    """One summary section: its heading, then a table per label kind (binary, numeric) that has lines."""
    print(f"\n{'###' if md else '=='} {title}")
    for binary, lines in groups.items():
        if lines:
            print(f"\n{'Binary labels' if binary else 'Numeric labels'}{note(binary)}:\n")
            print(render(header(binary), lines, md, left=left))


def solver_order(requested: list[str] | None) -> list[str]:
    registered = set(solver_names())
    if requested:
        unknown = [name for name in requested if name not in registered]
        if unknown:
            raise SystemExit(f"unknown solvers {unknown}; registered: {', '.join(sorted(registered))}")
        return list(dict.fromkeys(requested))
    return [name for name in EXPECTED_SOLVERS if name in registered] + sorted(registered - set(EXPECTED_SOLVERS))


def run_dataset(
    split: Split,
    names: list[str],
    epsilons: list[float],
    seeds: int,
    delta: float,
    dp_classes: tuple[Any, Any],
    warmed: set[tuple[str, str]],
) -> tuple[list[Row], Row, Row, list[str]]:
    """(rows in table order, the non-private row, the constant row, notes on solvers without the model)."""
    reference, floor = baselines(split, epsilons)
    rows = [reference, floor]
    skipped = []
    dp_cls = dp_classes[0] if split.binary else dp_classes[1]
    if dp_cls is not None:
        rows.append(run_diffprivlib(dp_cls, split, epsilons, seeds))
    meta = PublicMetadata.from_dataset(split.train)
    for name in names:
        solver = get_solver(name)
        if split.model not in solver.models:
            skipped.append(f"{name} (models: {', '.join(solver.models)})")
            continue
        if (name, split.model) not in warmed:
            warmed.add((name, split.model))
            failure = warm_up(solver, split.model, split.train.X, split.train.y, meta, delta)
            if failure:
                progress(f"{name}: warm-up failed ({failure}); continuing")
        rows.append(run_privfit(name, split, epsilons, seeds, delta))
    return rows, reference, floor, skipped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", choices=list(BENCHMARK_DATASETS), default=list(BENCHMARK_DATASETS))
    parser.add_argument(
        "--schemas", choices=SCHEMA_KINDS, default="expert",
        help="expert: examples/…-schema.json; naive: examples/…-naive-schema.json (codebook-wide, no transforms)",
    )  # fmt: skip
    parser.add_argument("--epsilons", nargs="+", type=float, default=None)
    parser.add_argument("--seeds", type=int, default=None, help="noise seeds per cell (default 3; --quick: 1)")
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument("--solvers", nargs="+", default=None, help="privfit solvers (default: every registered one)")
    parser.add_argument("--max-rows", type=int, default=None, help="keep a seeded random subset of N records")
    parser.add_argument("--split-seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="1 seed, ε ∈ {1}, 3,000 rows per dataset")
    parser.add_argument("--markdown", action="store_true", help="print the tables in Markdown")
    parser.add_argument(
        "--sampler", choices=["float", "exact"], default="float",
        help="the noise sampler of every privfit fit (privfit.privacy.noise; the service's default is exact)",
    )  # fmt: skip
    args = parser.parse_args()
    configure_sampler(args.sampler)
    epsilons = sorted(args.epsilons or (QUICK_EPSILONS if args.quick else DEFAULT_EPSILONS))
    seeds = args.seeds or (1 if args.quick else 3)
    max_rows = args.max_rows or (QUICK_MAX_ROWS if args.quick else None)
    if seeds < 1 or any(not 0 < e <= 100 for e in epsilons):
        raise SystemExit("--seeds must be ≥ 1 and every ε in (0, 100]")
    names = solver_order(args.solvers)
    md = args.markdown

    print(
        f"privfit utility benchmark (issue 21): ε ∈ {{{', '.join(f'{e:g}' for e in epsilons)}}}, δ = {args.delta:g}, "
        f"{seeds} seed(s), split seed {args.split_seed}, 80/20, noise sampler {args.sampler}, {args.schemas} schemas"
        + (f", at most {max_rows} rows per dataset" if max_rows else "")
    )
    print(f"privfit solvers: {', '.join(names)}")
    print(f"python {platform.python_version()}, numpy {np.__version__}, {library_versions()}")
    dp_classes = (import_diffprivlib_logistic(), import_diffprivlib_linear())
    warmed: set[tuple[str, str]] = set()
    summary: dict[bool, list[list[str]]] = {True: [], False: []}
    recommended: dict[bool, list[list[str]]] = {True: [], False: []}
    automatic: dict[bool, list[list[str]]] = {True: [], False: []}
    for name in args.datasets:
        spec = BENCHMARK_DATASETS[name]
        heading = f"\n{'###' if md else '=='} {spec.title} (`{spec.name}`)"
        absent = spec.absent()
        if absent:
            print(f"{heading}\n\nskipped: {absent}")
            continue
        started = time.perf_counter()
        split = load_split(spec, args.split_seed, max_rows, args.schemas)
        train = split.train
        print(heading + "\n")
        print(
            f"{split.rows_in_file} records in the {'file' if spec.csv_path else 'generated CSV'}; train n = "
            f"{train.n}, test {len(split.test_truth)}, d = {train.d}, row-norm bound {train.row_norm_bound:.4f}, "
            f"model `{split.model}`; {split.schema_kind} schema `{split.schema_source}`"
        )
        progress(f"{spec.name}: n = {train.n}, d = {train.d}")
        rows, reference, floor, skipped = run_dataset(split, names, epsilons, seeds, args.delta, dp_classes, warmed)
        if (dp_classes[0] if split.binary else dp_classes[1]) is None:
            print("diffprivlib: could not be imported (see above); its row is left out")
        for note in skipped:
            print(f"not applicable: {note} — no `{split.model}` model")
        metrics = ("accuracy", "auc") if split.binary else ("rmse", "mae")
        for metric in metrics:
            title = METRICS[metric][0].format(units=UNITS.get(spec.name, "label units"))
            privacy = f"privfit (ε, δ = {args.delta:g}), diffprivlib pure ε"
            print(f"\n{title}, mean ± sd over {seeds} seed(s); {privacy}; ▼ = worse than {floor.label}\n")
            print(metric_table(split, rows, floor, metric, epsilons, md))
        notes = footnotes(rows)
        if notes:
            print("\n" + "\n".join(notes))
        if GAP_EPSILON in epsilons:
            print(f"\nGap to {reference.label} at ε = 1:\n")
            print(gap_table(split, rows, reference, floor, md))
        if UNDERFIT_EPSILON in epsilons:
            results = underfitting(split, [row for row in rows if row.private and row.releases])
            if results:
                print(
                    f"\nε = 50, each solver's own objective (its R and λ; {split.model} loss, training rows) at its "
                    "release (mean over seeds) vs the non-private optimum (scipy), and the test metric of each:\n"
                )
                print(underfit_table(split, results, md))
                scipy_notes = [f"- `{u.solver}`: {u.note}" for u in results if "WARNING" in u.note]
                if scipy_notes:
                    print("\n" + "\n".join(scipy_notes))
        summary[split.binary].extend(summary_lines(split, rows, reference, floor, epsilons))
        recommended[split.binary].extend(recommended_lines(split, rows, reference, floor, epsilons))
        automatic[split.binary].extend(auto_lines(split, rows, floor, epsilons))
        print(f"\n{spec.name}: {time.perf_counter() - started:.1f} s")
    columns = ["best privfit solver", "its {m}", "non-private", "diffprivlib", "{c}"]

    def summary_header(binary: bool) -> list[str]:
        metric, constant = ("accuracy % / AUC", "majority class") if binary else ("RMSE / MAE", "training mean")
        return ["dataset", "ε", *(c.format(m=metric, c=constant) for c in columns)]

    def recommended_header(binary: bool) -> list[str]:
        metric, constant = ("accuracy % / AUC", "majority class") if binary else ("RMSE", "training mean")
        gap = "ε = 1: ≤ 1.5 points and ≤ 0.03 AUC from non-private" if binary else "ε = 1: RMSE ≤ 1.1 × non-private"
        return ["dataset", "ε", "recommended", metric, f"beats the {constant}", "beats diffprivlib", gap]

    def auto_header(binary: bool) -> list[str]:
        metric, constant = ("accuracy %", "majority class") if binary else ("RMSE", "training mean")
        return ["dataset", "ε", "mode", f"`auto` {metric}", "best single solver (hindsight)", "gap",
                "within 0.5 points", f"beats the {constant}"]  # fmt: skip

    def means_note(binary: bool) -> str:
        return f" ({'accuracy % / AUC' if binary else 'RMSE / MAE'}, means over seeds)"

    print_section("Summary: the best privfit solver at each ε (by mean test metric)", summary, summary_header, md, 3,
                  means_note)  # fmt: skip
    print_section("The recommended solver (docs/solvers.md, `privfit.solvers.recommendation`)", recommended,
                  recommended_header, md, 3)  # fmt: skip
    print_section("`auto`: private selection against the best single solver in hindsight", automatic, auto_header,
                  md, 5)  # fmt: skip
    print(f"\ntotal run time: {time.perf_counter() - _START:.1f} s")


if __name__ == "__main__":
    main()
