"""Helpers shared by the benchmarks (``adult_*.py``, ``utility.py``); not a script.

The scripts run as ``python benchmarks/<name>.py``, which puts this directory first on ``sys.path``, so they
import these helpers with ``from common import ...``.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from privfit.datasets import adult_schema, parse_and_encode
from privfit.privacy import make_generator
from privfit.solvers import PublicMetadata, Solver

ADULT_DIR = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "adult"
#: the solvers every data team asks about, in table order (registered solvers not listed here follow, sorted)
EXPECTED_SOLVERS: tuple[str, ...] = (
    "dp_gd",
    "dp_otb",
    "dp_distributed",
    "dp_sgd",
    "objective_perturbation",
    "output_perturbation",
)
#: rows of the untimed warm-up fit (numba compilation, first-call imports)
WARMUP_ROWS = 2000


def timed(fn: Callable[[], np.ndarray]) -> tuple[np.ndarray, float]:
    """Run ``fn`` (returns test predictions) and its wall-clock seconds."""
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def load_adult(data_dir: Path, delta: float) -> tuple[Any, Any]:
    """UCI Adult encoded with privfit's declared schema: (train from ``adult.data``, test from ``adult.test``)."""
    train = parse_and_encode((data_dir / "adult.data").read_bytes(), adult_schema(1.0, delta))
    test = parse_and_encode((data_dir / "adult.test").read_bytes(), adult_schema(1.0, delta, test_file=True))
    return train, test


def adult_with_baseline(data_dir: Path, delta: float) -> tuple[Any, Any, float, float]:
    """Load Adult, print its shape and majority class, fit non-private scikit-learn ``LogisticRegression(C=1)``.

    Returns (train, test, scikit-learn test accuracy, its fit seconds).
    """
    from sklearn.linear_model import LogisticRegression

    train, test = load_adult(data_dir, delta)
    print(f"UCI Adult: n = {train.n} train, {test.n} test, d = {train.d}, row-norm bound {train.row_norm_bound:.4f}")
    print(f"majority class (test): {max(np.mean(test.y == 1), np.mean(test.y == -1)):.4f}")
    predictions, seconds = timed(lambda: LogisticRegression(C=1.0, max_iter=2000).fit(train.X, train.y).predict(test.X))
    accuracy = float(np.mean(predictions == test.y))
    print(f"scikit-learn LogisticRegression (non-private, C=1): accuracy {accuracy:.4f}, fit {seconds:.2f} s")
    return train, test, accuracy, seconds


def import_diffprivlib_logistic() -> Any | None:
    """diffprivlib's ``LogisticRegression`` class, or None (with a note printed) when it cannot be imported."""
    try:
        from diffprivlib.models import LogisticRegression as DPLogisticRegression
    except Exception as error:  # diffprivlib breaks on scikit-learn upgrades: report instead of failing
        print(f"diffprivlib not available ({type(error).__name__}: {error}); its columns are skipped")
        return None
    return DPLogisticRegression


def import_diffprivlib_linear() -> Any | None:
    """diffprivlib's ``LinearRegression`` class, or None (with a note printed) when it cannot be imported."""
    try:
        from diffprivlib.models import LinearRegression as DPLinearRegression
    except Exception as error:  # see import_diffprivlib_logistic
        print(f"diffprivlib not available ({type(error).__name__}: {error}); its columns are skipped")
        return None
    return DPLinearRegression


def library_versions() -> str:
    """``sklearn x.y, diffprivlib x.y`` (or "unavailable") for the run's header."""
    versions = []
    for module in ("sklearn", "diffprivlib"):
        try:
            versions.append(f"{module} {__import__(module).__version__}")
        except Exception:
            versions.append(f"{module} unavailable")
    return ", ".join(versions)


def resolve_checked(solver: Solver, model: str, meta: PublicMetadata, epsilon: float, delta: float) -> Any:
    """``solver.resolve({"model": model}, ...)`` at the solver's DEFAULTS, as the service plans a fit, then the
    charged ``solver.cost(resolved, meta).epsilon(delta)`` must be ≤ ``epsilon`` (an explicit raise, not
    ``assert``: it must also hold under ``python -O``). ``SolverParameterError`` propagates (refused defaults)."""
    resolved = solver.resolve({"model": model}, meta, target_epsilon=epsilon, delta=delta)
    charged = solver.cost(resolved, meta).epsilon(delta)
    if not charged.epsilon <= epsilon:
        raise AssertionError(
            f"{solver.name}: charged ε = {charged.epsilon!r} > target ε = {epsilon!r} at δ = {delta:g}"
        )
    return resolved


def warm_up(solver: Solver, model: str, X: np.ndarray, y: np.ndarray, meta: PublicMetadata, delta: float) -> str | None:
    """One untimed fit on the first :data:`WARMUP_ROWS` rows (compiles numba kernels); best effort.

    Returns None, or why the warm-up failed (e.g. too few rows for the defaults: the full-data run reports what
    matters)."""
    rows = min(WARMUP_ROWS, meta.n)
    small = dataclasses.replace(meta, n=rows)
    try:
        resolved = solver.resolve({"model": model}, small, target_epsilon=1.0, delta=delta)
        solver.fit(X[:rows], y[:rows], small, resolved, make_generator(0, data_is_public=True))
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return None


def fit_diffprivlib_logistic(model_cls: Any, X: Any, y: Any, epsilon: float, data_norm: float, c: float, seed: int):
    """diffprivlib objective perturbation (pure ε-DP) with the PUBLIC data norm, fitted on (X, y)."""
    model = model_cls(epsilon=epsilon, data_norm=data_norm, C=c, max_iter=1000, random_state=seed)
    return model.fit(X, y)


def diffprivlib_predictions(model_cls: Any, train: Any, test: Any, epsilon: float, c: float, seed: int):
    """diffprivlib objective perturbation (pure ε-DP) with the PUBLIC data norm; predictions on the test rows."""
    model = fit_diffprivlib_logistic(model_cls, train.X, train.y, epsilon, train.row_norm_bound, c, seed)
    return model.predict(test.X)


def cell(accuracies: list[float], seconds: list[float]) -> str:
    """``mean±sd time`` or n/a."""
    if not accuracies:
        return f"{'n/a':>15} {'':>7}"
    sd = statistics.stdev(accuracies) if len(accuracies) > 1 else 0.0
    return f"{statistics.fmean(accuracies):8.4f}±{sd:.4f} {statistics.fmean(seconds):6.2f}s"


def ratio(numerator: list[float], denominator: list[float], width: int, digits: int = 3) -> str:
    """mean(numerator) / mean(denominator), or n/a when the peer did not run."""
    if not numerator or not denominator:
        return f"{'n/a':>{width}}"
    return f"{statistics.fmean(numerator) / statistics.fmean(denominator):{width}.{digits}f}"
