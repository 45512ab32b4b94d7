"""The cost of ``max_admissible_epsilon`` (issue 36, item 4): an estimate's CPU time with and without the search.

    python benchmarks/headroom_cost.py [--cases 2] [--seed 0] [--solver NAME ...]

An estimate (``POST /v1/fits/estimate``) plans the fit (:func:`privfit.api.routers.fits.planned_fit`, from the plan
cache when the same request was planned before) and measures it by the filter (:func:`privfit.ledger.estimate_for`);
issue 36 adds :func:`privfit.api.headroom.fit_headroom`, the search for the largest admissible target ε, cached by
its public inputs. This script times, per case and with every calibration cache cleared first (a cold request):

- ``without``: the estimate as before (plan + measure);
- ``with (miss)``: the same plus the search on an empty headroom cache — the first estimate of these parameters on
  this ledger state;
- ``with (hit)``: the same again with the headroom cache holding the answer — an analyst's next estimates at other
  target ε on an unchanged ledger.

Cases: every solver (the experimental ones included) with its default parameters on Adult's public metadata
(n = 26,049, d = 104), target ε = 0.5 at (ε_max, δ) = (3, 10⁻⁶), with the budget empty, half used and 90 % used by
``dp_gd`` fits; then ``--cases`` random requests per solver and model drawn by ``benchmarks/request_cost.py``'s
sampler (its parameter fuzz, the worst cases of issue 35). Prints, per solver, the median number of plans a search
took, the median and largest ratio with/without (miss) and the largest absolute CPU seconds of a search, then the
same over all cases, and the median ratio on a hit (each case's timings also go to stderr as they are measured). Run
it on a quiet machine; CPU time (``time.process_time``). The fuzzed cases include issue 35's slowest plans (up to
1 s each), so a search over them can take seconds: ``--cases 0`` times the default parameters only.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any

from request_cost import _Detached, draw_case

from privfit.api.headroom import HeadroomCache, fit_headroom
from privfit.api.routers.fits import planned_fit
from privfit.db import Budget
from privfit.errors import ParameterError
from privfit.ledger import Gates, allowance_for, budget_filter, create_budget, estimate_for
from privfit.ledger.ledger import _cache
from privfit.privacy import DEFAULT_GRID, get_grid
from privfit.privacy.calibration import clear_calibration_caches
from privfit.privacy.noise import using_sampler
from privfit.settings import Settings
from privfit.solvers import PublicMetadata
from privfit.solvers.registry import get_solver, list_solvers

ADULT = PublicMetadata(n=26_049, d=104, row_norm_bound=3.6055, label_bound=1.0)
USED = (0.0, 0.5, 0.9)


@dataclass
class Timing:
    solver: str
    label: str
    without: float
    miss: float
    hit: float
    plans: int


def _budget(epsilon_max: float, delta: float, grid_name: str, used: float, meta: PublicMetadata) -> Budget:
    """A budget row (never written) whose committed cost is ``dp_gd`` fits using about ``used`` of the filter (as
    many fits of a twentieth of ε_max as it takes; an empty budget when one such fit's share is 0 or +∞)."""
    budget: Budget = create_budget(_Detached(), "bench", epsilon_max, delta, get_grid(grid_name))  # type: ignore[arg-type]
    if used > 0.0:
        gd = get_solver("dp_gd")
        spent = gd.plan({"model": "logistic"}, meta, target_epsilon=0.05 * epsilon_max, delta=delta,
                        grid=get_grid(grid_name)).cost  # fmt: skip
        share = budget_filter(budget).measure(spent).share
        if 0.0 < share < math.inf:
            _cache(budget, spent * min(math.ceil(used / share), 1_000_000))
    return budget


def time_case(solver_name: str, model: str, params: dict[str, Any], meta: PublicMetadata, target: float | None,
              budget: Budget, limits: dict[str, Any], sampler: str, label: str) -> Timing | None:  # fmt: skip
    """The three timings of one request (module docstring); None when the request itself is a 422."""
    solver = get_solver(solver_name).with_operator_limits(limits)
    request = {**params, "model": model}
    allowance = allowance_for(budget) if solver.uses_delta_parts else None
    limits_key = tuple(sorted(limits.items()))
    with using_sampler(sampler):
        clear_calibration_caches()
        start = time.process_time()
        try:
            planned = planned_fit(solver, request, meta, target, budget, allowance)
        except ParameterError:
            return None
        estimate_for(budget, planned.plan.cost)
        without = time.process_time() - start

        clear_calibration_caches()
        cache = HeadroomCache()
        start = time.process_time()
        planned = planned_fit(solver, request, meta, target, budget, allowance)
        estimate_for(budget, planned.plan.cost)
        found = fit_headroom(cache, solver, request, meta, Gates(budget), allowance, limits_key)
        miss = time.process_time() - start

        clear_calibration_caches()
        start = time.process_time()
        planned = planned_fit(solver, request, meta, target, budget, allowance)
        estimate_for(budget, planned.plan.cost)
        fit_headroom(cache, solver, request, meta, Gates(budget), allowance, limits_key)
        hit = time.process_time() - start
    timing = Timing(solver_name, label, without, miss, hit, found.plans)
    print(f"  {solver_name}/{model} {label}: {without:.3f} s without, {miss:.3f} s with ({found.plans} plans), "
          f"{hit:.3f} s on a hit", file=sys.stderr, flush=True)  # fmt: skip
    return timing


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cases", type=int, default=2, help="random cases per solver and model")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--solver", action="append", help="only these solvers (repeatable)")
    args = parser.parse_args()
    settings = Settings()
    limits = {"resque_localized_max_steps": settings.resque_localized_max_steps}
    solvers = [solver for solver in list_solvers() if not args.solver or solver.name in args.solver]
    timings: list[Timing] = []
    time_case("dp_gd", "logistic", {}, ADULT, 0.5, _budget(3.0, 1e-6, DEFAULT_GRID.name, 0.0, ADULT), limits,
              "float", "warm-up")  # imports and first-call set-up outside the timings  # fmt: skip
    for solver in solvers:
        for used in USED:
            budget = _budget(3.0, 1e-6, DEFAULT_GRID.name, used, ADULT)
            timing = time_case(solver.name, solver.models[0], {}, ADULT, 0.5, budget, limits, "float",
                               f"default, {used:.0%} used")  # fmt: skip
            if timing is not None:
                timings.append(timing)
    rng = random.Random(args.seed)
    for solver in solvers:
        for model in solver.models:
            for _ in range(args.cases):
                case = draw_case(rng, solver, model)
                meta = PublicMetadata(n=case.n, d=case.d, row_norm_bound=case.row_norm_bound, classes=case.classes)
                used = rng.choice(USED)
                try:
                    budget = _budget(case.epsilon_max, case.delta, case.grid, used, meta)
                except ParameterError:
                    continue
                timing = time_case(case.solver, case.model, case.params, meta, case.target_epsilon, budget, limits,
                                   case.sampler, "fuzz")  # fmt: skip
                if timing is not None:
                    timings.append(timing)
    print(f"{len(timings)} estimates (the requests that plan; 422s are not timed): CPU seconds, cold caches")
    print(f"{'solver':24s} {'cases':>5s} {'plans':>6s} {'ratio med':>9s} {'ratio max':>9s} {'search max s':>12s}")
    for name in sorted({t.solver for t in timings}):
        rows = [t for t in timings if t.solver == name]
        _line(name, rows)
    _line("all", timings)
    hits = [t.hit / t.without for t in timings if t.without > 0]
    print(f"on a hit (the next estimates on an unchanged ledger): median ratio {statistics.median(hits):.2f}")
    return 0


def _line(name: str, rows: list[Timing]) -> None:
    ratios = [t.miss / t.without for t in rows if t.without > 0]
    plans = statistics.median(t.plans for t in rows)
    search = max(t.miss - t.without for t in rows)
    print(f"{name:24s} {len(rows):5d} {plans:6.0f} {statistics.median(ratios):9.1f} {max(ratios):9.1f} "
          f"{search:12.3f}")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
