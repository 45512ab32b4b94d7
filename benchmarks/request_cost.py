"""Request cost (issue 35, item 6): the CPU time of planning one estimate or admission, fuzzed over every solver.

    python benchmarks/request_cost.py [--cases 60] [--seed 0] [--limit 1.0] [--solver NAME ...]

An estimate (``POST /v1/estimate``) and an admission (``POST /v1/fits``) both run
:func:`privfit.api.routers.fits.planned_fit` on a plan-cache miss — validate, resolve (calibrate the noise), cost,
and render the cost JSON and the outlook — then measure the cost by the dataset's filter
(:func:`privfit.ledger.estimate_for`; the admission's :func:`~privfit.ledger.reserve_many` does the same
measurement). This script calls exactly that, cold (every calibration and curve cache cleared before each case:
the first request with those public inputs), and records the CPU time (``time.process_time``) of each case.

The cases are drawn by a seeded random sampler, ``--cases`` per solver and model: n log-uniform in [100, 1e7],
d in [1, 1000], a row-norm bound in [0.1, 100], the dataset's δ log-uniform in [1e-12, min(1e-3, 1/n)), its grid
(all three registered), ε_max, the noise sampler in force (exact or float), a target ε log-uniform in
[1e-3, 10] (or, one case in eight, the solver's explicit noise instead) and every solver parameter: each field of
the solver's params JSON schema is set with probability 0.4 to a value drawn from its schema (enums uniformly,
numbers and integers log-uniformly over their range, unbounded integers up to 1e9), so sampling modes, step
counts, batch sizes, epochs, rounds, learners and topologies are all covered. A refusal (a ``ParameterError``,
which the API answers 422) is timed too; any other exception would be a 500 and is reported. The reported case
of the issue (``resque_dpsgd``, svm, ε = 0.01, ``fixed_size``, Adult-sized) is always included.

Prints the slowest 10 cases and the maximum, and exits 1 if any case took more than ``--limit`` seconds of CPU
(default 1 s, the issue's bound) or raised anything but a ``ParameterError``. Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from privfit.api.routers.fits import planned_fit
from privfit.db import Budget
from privfit.errors import ParameterError
from privfit.ledger import allowance_for, create_budget, estimate_for
from privfit.privacy import GRIDS, get_grid
from privfit.privacy.calibration import clear_calibration_caches
from privfit.privacy.noise import SAMPLERS, using_sampler
from privfit.settings import Settings
from privfit.solvers import PublicMetadata
from privfit.solvers.base import MULTICLASS_SOLVERS
from privfit.solvers.registry import list_solvers

#: Probability that a schema field is set (else its default).
SET_PROBABILITY = 0.4
#: Probability that a case gives the solver's explicit noise parameter instead of a target ε.
EXPLICIT_NOISE_PROBABILITY = 1 / 8
#: Largest value drawn for an integer field without a maximum in its schema.
UNBOUNDED_INTEGER_MAX = 10**9
#: Fields that apply to one model only (set only for it: elsewhere they are an instant 422).
MODEL_FIELDS = {"huber_delta": "huber", "hinge_smoothing": "svm", "quantile_tau": "quantile"}
#: Integer fields drawn in [1, n] rather than over their whole schema range (larger is an instant 422).
AT_MOST_N_FIELDS = ("batch_size",)


@dataclass
class Case:
    """One request's public inputs and, once run, its CPU seconds and outcome."""

    solver: str
    model: str
    params: dict[str, Any]
    n: int
    d: int
    row_norm_bound: float
    classes: tuple[str, ...] | None
    target_epsilon: float | None
    delta: float
    epsilon_max: float
    grid: str
    sampler: str
    seconds: float = field(default=0.0, init=False)
    outcome: str = field(default="", init=False)

    def describe(self) -> str:
        target = "explicit noise" if self.target_epsilon is None else f"ε={self.target_epsilon:.3g}"
        k = "" if self.classes is None else f" k={len(self.classes)}"
        return (f"{self.solver}/{self.model} {target} δ={self.delta:.2g} n={self.n} d={self.d}{k} "
                f"B={self.row_norm_bound:.3g} grid={self.grid} sampler={self.sampler} "
                f"params={json.dumps(self.params, sort_keys=True)}")  # fmt: skip


class _Detached:
    """A stand-in session for :func:`privfit.ledger.create_budget`: the budget row is built, never written."""

    def add(self, row: object) -> None:
        pass


def log_uniform(rng: random.Random, low: float, high: float) -> float:
    return math.exp(rng.uniform(math.log(low), math.log(high)))


def _bounds(schema: dict[str, Any]) -> tuple[float | None, float | None]:
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    return low, high


def draw_value(rng: random.Random, schema: dict[str, Any]) -> Any:
    """A value for one field of a params JSON schema (``anyOf`` with null: the non-null branch); None to skip a
    field the sampler does not generate (arrays: initial points, mixing matrices)."""
    if "anyOf" in schema:
        branches = [branch for branch in schema["anyOf"] if branch.get("type") != "null"]
        return draw_value(rng, branches[0]) if branches else None
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kind = schema.get("type")
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "integer":
        low, high = _bounds(schema)
        low = int(low) if low is not None else 0
        high = int(min(high, UNBOUNDED_INTEGER_MAX)) if high is not None else UNBOUNDED_INTEGER_MAX
        return min(high, max(low, round(log_uniform(rng, max(low, 1), max(high, 1)))))
    if kind == "number":
        low, high = _bounds(schema)
        low, high = float(low if low is not None else 0.0), float(high if high is not None else 1e6)
        if high >= 1.0 and high / max(low, 1e-6) > 100:
            value = log_uniform(rng, max(low, 1e-6), high)
        else:
            value = rng.uniform(low, high)
        return min(high, max(low, value)) if low < value < high else (low + high) / 2.0
    return None


def draw_case(rng: random.Random, solver: Any, model: str) -> Case:
    """A random request for ``solver`` and ``model`` (module docstring)."""
    n = round(log_uniform(rng, 100, 1e7))
    delta = log_uniform(rng, 1e-12, min(1e-3, 1.0 / n))
    properties = solver.describe()["params_schema"].get("properties", {})
    explicit = solver.explicit_noise is not None and rng.random() < EXPLICIT_NOISE_PROBABILITY
    params: dict[str, Any] = {}
    for name, schema in properties.items():
        other_model = MODEL_FIELDS.get(name, model) != model
        if name == "model" or other_model or (name == solver.explicit_noise and not explicit):
            continue
        if name == solver.explicit_noise or rng.random() < SET_PROBABILITY:
            value = round(log_uniform(rng, 1, n)) if name in AT_MOST_N_FIELDS else draw_value(rng, schema)
            if value is not None:
                params[name] = value
    classes = None
    if solver.name in MULTICLASS_SOLVERS and model == "logistic" and rng.random() < 0.2:
        classes = tuple(f"c{i}" for i in range(rng.randint(3, 12)))
    target = None if explicit else log_uniform(rng, 1e-3, 10.0)
    return Case(
        solver=solver.name, model=model, params=params, n=n, d=round(log_uniform(rng, 1, 1000)),
        row_norm_bound=log_uniform(rng, 0.1, 100.0), classes=classes, target_epsilon=target, delta=delta,
        epsilon_max=log_uniform(rng, max(target or 1e-3, 1e-3), 100.0), grid=rng.choice(sorted(GRIDS)),
        sampler=rng.choice(SAMPLERS),
    )  # fmt: skip


def reported_cases() -> list[Case]:
    """The case of the issue (resque_dpsgd, svm, ε = 0.01, fixed_size) on Adult's metadata, at a few δ."""
    cases = []
    for delta in (1e-5, 1e-6, 1e-8):
        for sampler in SAMPLERS:
            case = Case(solver="resque_dpsgd", model="svm", params={"sampling": "fixed_size"}, n=32_561, d=104,
                        row_norm_bound=3.0, classes=None, target_epsilon=0.01, delta=delta, epsilon_max=10.0,
                        grid="dp-accounting-156/v1", sampler=sampler)  # fmt: skip
            cases.append(case)
    return cases


def run_case(case: Case, limits: dict[str, Any]) -> None:
    """Plan ``case`` cold, as an estimate does on a plan-cache miss, and record its CPU seconds and outcome."""
    from privfit.solvers.registry import get_solver

    solver = get_solver(case.solver).with_operator_limits(limits)
    grid = get_grid(case.grid)
    budget: Budget = create_budget(_Detached(), "bench", case.epsilon_max, case.delta, grid)  # type: ignore[arg-type]
    clear_calibration_caches()
    start = time.process_time()
    try:
        meta = PublicMetadata(n=case.n, d=case.d, row_norm_bound=case.row_norm_bound, classes=case.classes)
        allowance = allowance_for(budget) if solver.uses_delta_parts else None
        with using_sampler(case.sampler):
            planned = planned_fit(solver, {**case.params, "model": case.model}, meta, case.target_epsilon, budget,
                                  allowance)  # fmt: skip
        estimate_for(budget, planned.plan.cost)
        case.outcome = "planned"
    except ParameterError as error:
        case.outcome = f"422 {error.parameter}"
    except Exception as error:  # the API would answer 500: reported, and the run fails
        case.outcome = f"ERROR {type(error).__name__}: {error}"
    case.seconds = time.process_time() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cases", type=int, default=60, help="random cases per solver and model")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=float, default=1.0, help="CPU seconds a plan may take")
    parser.add_argument("--solver", action="append", help="only these solvers (repeatable)")
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args()
    settings = Settings()
    limits = {"resque_localized_max_steps": settings.resque_localized_max_steps}
    rng = random.Random(args.seed)
    solvers = [solver for solver in list_solvers() if not args.solver or solver.name in args.solver]
    cases = [case for case in reported_cases() if not args.solver or case.solver in args.solver]
    for solver in solvers:
        for model in solver.models:
            cases.extend(draw_case(rng, solver, model) for _ in range(args.cases))
    run_case(cases[0], limits)  # imports and first-call set-up (numba, scipy) outside the timings
    started = time.perf_counter()
    for case in cases:
        run_case(case, limits)
    wall = time.perf_counter() - started
    cases.sort(key=lambda case: -case.seconds)
    load = os.getloadavg()[0]
    planned = sum(case.outcome == "planned" for case in cases)
    errors = [case for case in cases if case.outcome.startswith("ERROR")]
    refused = len(cases) - planned - len(errors)
    print(f"{len(cases)} cases ({planned} planned, {refused} refused with a 422, {len(errors)} errors) over "
          f"{len(solvers)} solvers in {wall:.0f} s; load average {load:.2f} (1 min)")  # fmt: skip
    print(f"slowest {args.top} (CPU seconds, cold caches):")
    for case in cases[: args.top]:
        print(f"  {case.seconds:7.3f}  {case.describe()}  -> {case.outcome}")
    per_solver: dict[str, float] = {}
    for case in cases:
        per_solver[case.solver] = max(per_solver.get(case.solver, 0.0), case.seconds)
    print("max per solver: " + ", ".join(f"{name} {seconds:.3f}" for name, seconds in sorted(per_solver.items())))
    print(f"max: {cases[0].seconds:.3f} s CPU (limit {args.limit:g} s)")
    for case in errors:
        print(f"  unexpected: {case.describe()}  -> {case.outcome}")
    over = [case for case in cases if case.seconds > args.limit]
    if over or errors:
        print(f"FAIL: {len(over)} case(s) over {args.limit:g} s CPU, {len(errors)} unexpected error(s)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
