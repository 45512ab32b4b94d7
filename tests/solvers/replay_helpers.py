"""The replay harness of issue 18 part 2: everything an analyst can observe of a fit, recorded for comparison.

An analyst sees a fit's status (succeeded, or failed with error fields), its progress sequence, its timing and its
result. :func:`replay` runs :meth:`Solver.fit` with a seeded :class:`RecordingGenerator` and records

* the outcome: ``"succeeded"`` or the exception's type and message;
* the full progress sequence (every value passed to the progress callback);
* the number of ``should_stop()`` polls (one per iteration or block: a proxy for the iteration counts);
* every random draw: the method name and its public arguments (sizes, shapes, distribution parameters), and the
  bit generator's state after the fit (exact: any difference in the number or size of draws changes it);
* the released metadata (it must hold public settings only).

On neighbouring datasets with the same seed, every field must be equal (the released parameters may differ:
they are the private output). :data:`SOLVER_CASES` lists small instances of every registered solver;
:func:`datasets_at_the_bounds` the extreme datasets the fuzz and replay tests use.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from privfit.solvers import PublicMetadata, Solver, get_solver

#: The sampling methods of numpy's Generator (every public callable but the bookkeeping ones).
_SAMPLING_METHODS = frozenset(
    name
    for name in dir(np.random.Generator)
    if not name.startswith("_") and callable(getattr(np.random.Generator, name)) and name not in ("spawn",)
)


def _describe(value: Any) -> Any:
    """A hashable description of a draw argument: arrays by shape, numbers and tuples as they are."""
    if isinstance(value, np.ndarray):
        return ("array", value.shape, str(value.dtype))
    if isinstance(value, list | tuple):
        return tuple(_describe(item) for item in value)
    if isinstance(value, np.generic):
        return value.item()
    return value


class RecordingGenerator(np.random.Generator):
    """A numpy Generator (PCG64, seeded) that records each sampling call's method and arguments."""

    def __init__(self, seed: int) -> None:
        super().__init__(np.random.PCG64(seed))
        self.calls: list[tuple[str, Any, Any]] = []

    def __getattribute__(self, name: str) -> Any:
        attribute = super().__getattribute__(name)
        if name not in _SAMPLING_METHODS:
            return attribute
        calls = super().__getattribute__("calls")

        def recorded(*args: Any, **kwargs: Any) -> Any:
            calls.append((name, _describe(args), tuple(sorted((k, _describe(v)) for k, v in kwargs.items()))))
            return attribute(*args, **kwargs)

        return recorded


@dataclass(frozen=True)
class Record:
    """What an analyst can observe of one fit (module docstring)."""

    outcome: str
    error: str | None
    progress: tuple[float, ...]
    polls: int
    draws: tuple[tuple[str, Any, Any], ...]
    generator_state: str
    metadata: str | None

    def differences(self, other: Record) -> list[str]:
        """The names of the fields that differ (empty when the records are identical)."""
        return [name for name in self.__dataclass_fields__ if getattr(self, name) != getattr(other, name)]


def replay(solver: Solver, resolved: Any, meta: PublicMetadata, X: np.ndarray, y: np.ndarray, seed: int) -> Record:
    """Run ``solver.fit`` with a recording generator seeded ``seed`` and record what an analyst can observe."""
    rng = RecordingGenerator(seed)
    progress: list[float] = []
    polls = 0

    def should_stop() -> bool:
        nonlocal polls
        polls += 1
        return False

    try:
        result = solver.fit(X, y, meta, resolved, rng, progress.append, should_stop)
        outcome, error, metadata = "succeeded", None, json.dumps(result.metadata, sort_keys=True)
    except Exception as failure:  # every failure is part of the record
        outcome, error, metadata = type(failure).__name__, str(failure), None
    return Record(outcome, error, tuple(progress), polls, tuple(rng.calls),
                  json.dumps(rng.bit_generator.state, sort_keys=True, default=str), metadata)  # fmt: skip


# ---------------------------------------------------------------------------------------------------------
# small instances of every registered solver
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SolverCase:
    """A solver with parameters and the public metadata of a small instance (fast enough for many fits)."""

    solver: str
    params: dict[str, Any]
    n: int = 300
    d: int = 3
    epsilon: float = 1.0
    delta: float = 1e-6
    #: the columns of one-hot blocks declared in the metadata (the rows of ``neighbours`` are not one-hot: the
    #: solvers that store rows by blocks then map them, privfit.solvers.baselines.glm_design (1))
    one_hot_blocks: tuple[tuple[int, int], ...] = ()

    @property
    def id(self) -> str:
        extra = ",".join(f"{k}={v}" for k, v in self.params.items() if k != "model")
        blocks = f",blocks={list(self.one_hot_blocks)}" if self.one_hot_blocks else ""
        return f"{self.solver}[{self.params.get('model', '')}{',' + extra if extra else ''}{blocks}]"

    def meta(self) -> PublicMetadata:
        return PublicMetadata(n=self.n, d=self.d, row_norm_bound=1.0, label_bound=1.0,
                              one_hot_blocks=self.one_hot_blocks)  # fmt: skip

    def resolve(self) -> Any:
        return get_solver(self.solver).resolve(self.params, self.meta(), target_epsilon=self.epsilon,
                                               delta=self.delta)  # fmt: skip


_RESQUE_LOCALIZED_TINY = {"model": "svm", "outer_iterations": 1, "line_search_probes": 1, "zeta": 0.5,
                          "steps_per_call": 16, "fit_intercept": False}  # fmt: skip

#: At least one case per registered solver (``test_every_registered_solver_has_a_case`` checks it).
SOLVER_CASES: tuple[SolverCase, ...] = (
    SolverCase("dp_gd", {"model": "logistic", "steps": 30}),
    SolverCase("dp_gd", {"model": "linear", "steps": 30, "output": "suffix_average"}),
    SolverCase("dp_sgd", {"model": "logistic", "batch_size": 32, "epochs": 2}),
    SolverCase("dp_sgd", {"model": "huber", "batch_size": 32, "epochs": 2, "sampling": "fixed_size"}),
    SolverCase("dp_sgd", {"model": "svm", "batch_size": 32, "epochs": 2, "sampling": "shuffle"}),
    SolverCase("dp_otb", {"model": "logistic"}),
    SolverCase("dp_otb", {"model": "linear", "learner": "parameter_free", "l2": 0.1}),
    SolverCase("dp_otb", {"model": "svm", "learner": "adagrad_diagonal"}),
    SolverCase("dp_distributed", {"model": "logistic", "n_learners": 2}, n=400),
    SolverCase("dp_distributed", {"model": "huber", "n_learners": 3, "batch_size": 4, "topology": "ring", "passes": 2}),
    SolverCase("dp_lazy_oco", {"model": "mean"}, n=400),
    SolverCase("dp_lazy_oco", {"model": "linear_loss", "fit_intercept": True}, n=400),
    SolverCase("output_perturbation", {"model": "logistic"}),
    SolverCase("output_perturbation", {"model": "linear", "noise": "laplace"}),
    SolverCase("objective_perturbation", {"model": "logistic"}),
    SolverCase("objective_perturbation", {"model": "svm", "noise": "laplace"}),
    SolverCase("objective_perturbation", {"model": "logistic"}, one_hot_blocks=((1, 3),)),
    SolverCase("output_perturbation", {"model": "huber"}, one_hot_blocks=((0, 2),)),
    SolverCase("resque_dpsgd", {"model": "svm", "epochs": 1, "batch_size": 32}),
    SolverCase("resque_dpsgd", {"model": "quantile", "epochs": 1, "batch_size": 32, "sampling": "shuffle"}),
    SolverCase("resque_localized", _RESQUE_LOCALIZED_TINY, n=2_000, d=2),
    SolverCase("auto", {"model": "logistic", "mode": "selection"}),
    SolverCase("auto", {"model": "linear", "mode": "selection"}),
    SolverCase("auto", {"model": "svm", "mode": "recommended"}),
)


# ---------------------------------------------------------------------------------------------------------
# datasets at the declared bounds
# ---------------------------------------------------------------------------------------------------------


def random_rows(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows inside the unit ball, ±1 labels correlated with the first feature."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X *= rng.uniform(0.1, 1.0, size=(n, 1)) / np.linalg.norm(X, axis=1, keepdims=True)
    return X, np.where(X[:, 0] + 0.3 * rng.normal(size=n) >= 0.0, 1.0, -1.0)


def extreme_rows(d: int) -> list[tuple[np.ndarray, float]]:
    """Rows ON the declared bounds (B_x = 1, B_y = 1) paired with extreme labels."""
    axis = np.eye(d)[0]
    corner = np.ones(d) / np.sqrt(d)
    return [(axis, -1.0), (-corner, 1.0), (corner, 1.0), (-axis, -1.0), (np.zeros(d), 0.0)]


def datasets_at_the_bounds(n: int, d: int) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """The extreme datasets of the fuzz tests: every row at ±bound, identical rows, one class, zero rows."""
    corner = np.ones(d) / np.sqrt(d)
    alternate = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    X = random_rows(n, d, seed=7)[0]
    yield "all rows at +bound, label +1", np.tile(corner, (n, 1)), np.ones(n)
    yield "all rows at -bound, label -1", np.tile(-corner, (n, 1)), -np.ones(n)
    yield "rows alternating ±bound on one axis", np.outer(alternate, np.eye(d)[0]), alternate
    yield "rows at the bound, labels against them", np.outer(alternate, corner), -alternate
    yield "all rows zero", np.zeros((n, d)), np.ones(n)
    yield "all rows zero, labels zero", np.zeros((n, d)), np.zeros(n)
    yield "random rows, labels all one class", X, -np.ones(n)


def neighbours(n: int, d: int, seed: int) -> Iterator[tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """Pairs (D, D') differing in one row, D' carrying an extreme row within the bounds, at several positions."""
    X, y = random_rows(n, d, seed)
    for index, (row, label) in zip((0, n // 2, n - 1), extreme_rows(d)[:3], strict=True):
        X2, y2 = X.copy(), y.copy()
        X2[index], y2[index] = row, label
        yield f"row {index} -> {np.round(row, 2).tolist()}, y = {label:g}", X, y, X2, y2


def assert_same_record(first: Record, second: Record, what: str) -> None:
    """Fail with the names of the differing fields."""
    differences = first.differences(second)
    assert not differences, f"{what}: the analyst-visible record differs in {differences}"
