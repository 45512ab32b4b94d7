"""Every solver's fit time on Adult with the exact noise sampler next to the float one, in one run (issue 25).

    .venv/bin/python benchmarks/exact_noise.py [--repeats 3] [--epsilon 1.0] [--delta 1e-6]
                                              [--solvers dp_gd dp_sgd ...] [--data ../shared/data/adult]

Issue 25's row: the default sampler (``exact``: the discrete Gaussian and Laplace on a 2^k lattice,
:mod:`privfit.privacy.noise`, drawn exactly by :mod:`privfit.privacy.exact_sampling`) costs at most 1.5 × the
``float`` sampler (numpy's) in fit time for ``dp_gd``, ``dp_sgd`` and the perturbation solvers on Adult; the factor
of ``dp_otb`` and ``dp_distributed`` is stated.

What it does. UCI Adult encoded with privfit's declared schema (``common.load_adult``: 32 561 training rows,
d = 104), ``PublicMetadata.from_dataset``. For every registered solver (or those of ``--solvers``), with the
model ``logistic`` (``linear_loss`` for ``dp_lazy_oco``, which has no GLM), at ε = ``--epsilon`` and δ =
``--delta`` (default 1e-6, the budget rule's δ ≪ 1/n = 3.1e-5) and the solver's DEFAULT settings:

* the settings are resolved inside ``using_sampler("float")`` and inside ``using_sampler("exact")`` separately
  (resolution may depend on the sampler, e.g. the Laplace noise of ``output_perturbation``), and the charged ε
  must be ≤ the target (``common.resolve_checked``). A solver that refuses either sampler
  (``SolverParameterError``: ``objective_perturbation`` and ``dp_lazy_oco`` have no exact sampler;
  ``resque_localized``'s feasibility guard) is skipped with the printed reason;
* one untimed float fit on 2 000 rows (``common.warm_up``: numba compilation, first-call imports);
* ``--repeats`` pairs of timed fits on all rows, alternating the samplers in ABBA order (float, exact, exact,
  float, …) so that a drift of the machine's load falls on both; repeat i uses ``make_generator(i,
  data_is_public=True)`` for both samplers (Adult is a public benchmark; under ``exact`` the generator draws the
  batches and seeds the exact noise streams' child generators). Time: ``solver.fit`` only (``time.perf_counter``),
  median over the repeats.

Before anything is timed: ``configure_sampler("exact")`` as ``privfit serve`` and the workers do at start-up,
and 4,096 untimed draws of each exact sampler (first-call paths); its time is printed. OpenDP is not used at run
time (the tests cross-check the samplers against it).

Printed per solver: float s, exact s (medians), exact / float, the exact draws per fit (the coordinates requested
from :func:`~privfit.privacy.exact_sampling.discrete_gaussian` and ``discrete_laplace`` — the only sources of
exact noise, including the background thread's blocks — counted by wrapping those functions in this script
(:class:`DrawCounter`); blocks drawn ahead and not used by a fit that stops early are counted too), the resolved
settings that differ under ``exact`` (dp_otb's prefix estimator, auto's candidates: then the two columns time
different algorithms), the sampler
the result's metadata names (``noise_sampler.name``), the test accuracy on ``adult.test`` (mean ± sd over the
repeats) under each sampler, and the 1-minute load average when the row finished. ``--accuracy-seeds N`` then fits
N more seeds per sampler (untimed) and prints each solver's mean accuracy under both and their difference in
standard errors. Rows of ``dp_gd``, ``dp_sgd``,
``output_perturbation`` and ``objective_perturbation`` are marked met / not met against the 1.5 × goal; the others
state their factor.
Exact fits with 0 draws, or whose metadata does not say ``exact``, are flagged: that solver's noise does not go
through the layer.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import math
import os
import statistics
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from common import ADULT_DIR, EXPECTED_SOLVERS, load_adult, resolve_checked, warm_up

from privfit.privacy import exact_sampling, make_generator
from privfit.privacy import noise as noise_layer
from privfit.solvers import PublicMetadata, Solver, SolverParameterError
from privfit.solvers.registry import get_solver, solver_names

#: the solvers whose exact/float ratio issue 25 bounds, and the bound
GOAL_SOLVERS: tuple[str, ...] = ("dp_gd", "dp_sgd", "output_perturbation", "objective_perturbation")
GOAL_RATIO = 1.5
#: model per solver when it has no ``logistic`` (dp_lazy_oco's classification loss)
FALLBACK_MODELS: tuple[str, ...] = ("linear_loss",)
SAMPLERS: tuple[str, str] = ("float", "exact")
#: the exact samplers whose requested sizes are counted
EXACT_SAMPLERS: tuple[str, ...] = ("discrete_gaussian", "discrete_laplace")

_START = time.perf_counter()


def progress(message: str) -> None:
    print(f"[{time.perf_counter() - _START:7.1f} s] {message}", file=sys.stderr, flush=True)


class DrawCounter:
    """Counts the coordinates requested from the exact samplers (:func:`~privfit.privacy.exact_sampling.
    discrete_gaussian` and ``discrete_laplace``) while active, in every thread: the wrappers replace those functions
    in every loaded ``privfit`` module that holds them but ``exact_sampling`` itself (whose Gaussian proposes from
    its Laplace) — ``privfit.privacy.noise`` imports them by name, and the background producer looks them up there
    at each block."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def _counted(self, sampler: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
        def counted(rng: np.random.Generator, parameter: Any, size: int) -> np.ndarray:
            with self._lock:
                self.count += int(size)
            return sampler(rng, parameter, size)

        return counted

    @contextlib.contextmanager
    def counting(self) -> Iterator[None]:
        originals = {name: getattr(exact_sampling, name) for name in EXACT_SAMPLERS}
        patched: list[tuple[Any, str]] = []
        modules = [m for name, m in sys.modules.items() if name.split(".")[0] == "privfit" and m is not None]
        for module in [m for m in modules if m is not exact_sampling]:  # not its own inner calls
            for name, original in originals.items():
                if getattr(module, name, None) is original:
                    setattr(module, name, self._counted(original))
                    patched.append((module, name))
        try:
            yield
        finally:
            for module, name in patched:
                setattr(module, name, originals[name])


@dataclasses.dataclass
class Row:
    name: str
    model: str = ""
    seconds: dict[str, list[float]] = dataclasses.field(default_factory=lambda: {s: [] for s in SAMPLERS})
    accuracy: dict[str, list[float]] = dataclasses.field(default_factory=lambda: {s: [] for s in SAMPLERS})
    exact_draws: list[int] = dataclasses.field(default_factory=list)
    metadata_names: set[str] = dataclasses.field(default_factory=set)
    load: float = 0.0
    skipped: str = ""
    settings: str = ""
    more_accuracy: dict[str, list[float]] = dataclasses.field(default_factory=lambda: {s: [] for s in SAMPLERS})

    def median(self, sampler: str) -> float:
        return statistics.median(self.seconds[sampler])

    @property
    def ratio(self) -> float:
        return self.median("exact") / self.median("float")


def model_for(solver: Solver) -> str | None:
    if "logistic" in solver.models:
        return "logistic"
    return next((m for m in FALLBACK_MODELS if m in solver.models), None)


def resolve_under(sampler: str, solver: Solver, model: str, meta: PublicMetadata, eps: float, delta: float) -> Any:
    with noise_layer.using_sampler(sampler):
        return resolve_checked(solver, model, meta, eps, delta)


def timed_fit(
    sampler: str, solver: Solver, resolved: Any, train: Any, test: Any, meta: PublicMetadata, seed: int
) -> tuple[float, float, str]:
    """One fit under ``sampler``: (fit seconds, test accuracy, the sampler named in the result's metadata)."""
    rng = make_generator(seed, data_is_public=True)
    with noise_layer.using_sampler(sampler):
        start = time.perf_counter()
        result = solver.fit(train.X, train.y, meta, resolved, rng)
        seconds = time.perf_counter() - start
    accuracy = float(np.mean(np.asarray(result.predict(test.X)) == test.y))
    named = (result.metadata or {}).get("noise_sampler", {}).get("name", "?")
    return seconds, accuracy, str(named)


def run_solver(name: str, train: Any, test: Any, meta: PublicMetadata, args: argparse.Namespace) -> Row:
    solver = get_solver(name)
    row = Row(name)
    model = model_for(solver)
    if model is None:
        row.skipped = f"no logistic or {'/'.join(FALLBACK_MODELS)} model (models: {', '.join(solver.models)})"
        return row
    row.model = model
    resolved: dict[str, Any] = {}
    for sampler in SAMPLERS:
        try:
            resolved[sampler] = resolve_under(sampler, solver, model, meta, args.epsilon, args.delta)
        except SolverParameterError as error:
            row.skipped = f"refused under {sampler}: {error}"
            return row
    row.settings = settings_change(resolved["float"], resolved["exact"])
    failure = warm_up(solver, model, train.X, train.y, meta, args.delta)
    if failure:
        progress(f"{name}: warm-up on the first rows failed ({failure}); continuing")
    counter = DrawCounter()
    for repeat in range(args.repeats):
        order = SAMPLERS if repeat % 2 == 0 else SAMPLERS[::-1]
        for sampler in order:
            before = counter.count
            with counter.counting():
                seconds, accuracy, named = timed_fit(sampler, solver, resolved[sampler], train, test, meta, repeat)
            row.seconds[sampler].append(seconds)
            row.accuracy[sampler].append(accuracy)
            if sampler == "exact":
                row.exact_draws.append(counter.count - before)
                row.metadata_names.add(named)
            progress(f"{name} {sampler} #{repeat}: {seconds:.3f} s, accuracy {100 * accuracy:.2f} %")
    row.load = os.getloadavg()[0]
    for seed in range(args.repeats, args.repeats + args.accuracy_seeds):  # untimed, seeds the timing did not use
        for sampler in SAMPLERS:
            row.more_accuracy[sampler].append(
                timed_fit(sampler, solver, resolved[sampler], train, test, meta, seed)[1]
            )  # fmt: skip
    if args.accuracy_seeds:
        progress(f"{name}: accuracy over {args.accuracy_seeds} more seeds per sampler")
    return row


def settings_change(float_resolved: Any, exact_resolved: Any) -> str:
    """The resolved settings that differ under ``exact`` (not the sampler itself nor the charged ε's last digits):
    e.g. dp_otb's prefix estimator, auto's candidates. Public facts of the plans."""
    before, after = float_resolved.model_dump(mode="json"), exact_resolved.model_dump(mode="json")
    changes = []
    for key in [k for k in before if k not in ("sampler", "epsilon") and before[k] != after.get(k)]:
        old, new = before[key], after.get(key)
        if isinstance(old, float) and isinstance(new, float) and old != 0.0:
            if abs(new / old - 1.0) >= 1e-6:  # not the last digits of a recomputed float
                changes.append(f"{key} ×{new / old:.5g}")
            continue
        if key == "candidates":
            old, new = [c.get("solver") for c in old], [c.get("solver") for c in new]
        text = f"{key} {old} → {new}".replace("'", "")
        changes.append(text if len(text) <= 80 else key)
    return f"exact settings: {'; '.join(changes)}" if changes else ""


def accuracy_line(row: Row) -> str:
    """mean ± sd per sampler and (exact − float) / its standard error: whether exact changes utility beyond the
    spread of the noise (|z| of a few is chance; different settings under exact change it for other reasons)."""
    floats, exacts = row.more_accuracy["float"], row.more_accuracy["exact"]
    if len(floats) < 2:
        return f"  {row.name:<24} needs ≥ 2 seeds"
    error = math.sqrt(statistics.variance(floats) / len(floats) + statistics.variance(exacts) / len(exacts))
    gap = statistics.fmean(exacts) - statistics.fmean(floats)
    z = f"{gap / error:+.2f}" if error > 0 else ("0" if gap == 0 else "inf")
    note = f"  ({row.settings})" if row.settings else ""
    return f"  {row.name:<24} float {mean_sd(floats)} %, exact {mean_sd(exacts)} %, (exact − float)/SE = {z}{note}"


def mean_sd(values: list[float]) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{100 * statistics.fmean(values):.2f} ± {100 * sd:.2f}"


def verdict(row: Row) -> str:
    notes = []
    on_layer = bool(row.exact_draws) and min(row.exact_draws) > 0
    if row.name in GOAL_SOLVERS:
        met = "met" if row.ratio <= GOAL_RATIO else "NOT met"
        notes.append(f"goal ≤ {GOAL_RATIO:g}×: {met if on_layer else 'not measured'}")
    if not on_layer:
        notes.append("no exact draws: its noise does not go through the layer")
    if row.metadata_names != {"exact"}:
        notes.append(f"metadata names {', '.join(sorted(row.metadata_names))}")
    if row.settings:
        notes.append(row.settings)
    return "; ".join(notes)


def markdown_table(rows: list[Row]) -> str:
    header = ["solver", "model", "float s", "exact s", "exact / float", "exact draws per fit",
              "accuracy float %", "accuracy exact %", "load", "note"]  # fmt: skip
    body = []
    for row in rows:
        if row.skipped:
            body.append([row.name, row.model or "—", "—", "—", "—", "—", "—", "—", "—", "skipped (below)"])
            continue
        draws = statistics.median(row.exact_draws)
        body.append([
            row.name, row.model, f"{row.median('float'):.3f}", f"{row.median('exact'):.3f}", f"{row.ratio:.2f}",
            f"{draws:,.0f}", mean_sd(row.accuracy["float"]), mean_sd(row.accuracy["exact"]), f"{row.load:.2f}",
            verdict(row),
        ])  # fmt: skip
    cells = [[c.replace("|", "\\|") for c in line] for line in [header, *body]]
    widths = [max(len(line[i]) for line in cells) for i in range(len(header))]
    right = range(2, len(header) - 1)

    def line(items: list[str]) -> str:
        padded = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(items, widths, strict=True))]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if i in right else "-" * (w + 2) for i, w in enumerate(widths)) + "|"
    return "\n".join([line(cells[0]), rule, *(line(c) for c in cells[1:])])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="timed fits per sampler (median reported)")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument("--solvers", nargs="+", metavar="NAME", help="solvers to run (default: every registered)")
    parser.add_argument("--data", type=Path, default=ADULT_DIR)
    parser.add_argument(
        "--accuracy-seeds", type=int, default=0, metavar="N",
        help="also fit N more seeds per sampler, untimed, and compare the mean test accuracies",
    )  # fmt: skip
    args = parser.parse_args()
    if args.repeats < 1 or args.accuracy_seeds < 0:
        parser.error("--repeats must be ≥ 1 and --accuracy-seeds ≥ 0")
    if not ((args.data / "adult.data").is_file() and (args.data / "adult.test").is_file()):
        print(f"UCI Adult not found under {args.data.resolve()} (expected adult.data and adult.test); skipping")
        return
    registered = solver_names()
    names = list(dict.fromkeys(args.solvers or [*EXPECTED_SOLVERS, *sorted(set(registered) - set(EXPECTED_SOLVERS))]))
    unknown = [n for n in names if n not in registered]
    if unknown:
        parser.error(f"unknown solvers {unknown}; registered: {', '.join(registered)}")
    warnings.filterwarnings("ignore")

    start = time.perf_counter()
    noise_layer.configure_sampler("exact")  # as privfit serve and the workers do at start-up
    exact_sampling.discrete_gaussian(make_generator(0, data_is_public=True), 2**40, 4096)  # first-call paths
    exact_sampling.discrete_laplace(make_generator(0, data_is_public=True), 2**20, 4096)
    warm_seconds = time.perf_counter() - start
    train, test = load_adult(args.data, args.delta)
    meta = PublicMetadata.from_dataset(train)
    load_start = os.getloadavg()
    print(
        f"UCI Adult: n = {meta.n} train rows ({test.n} test), d = {meta.d}; ε = {args.epsilon:g}, δ = {args.delta:g}; "
        f"default settings; median of {args.repeats} fit(s) per sampler, alternating (ABBA)"
    )
    print(
        f"exact samplers: privfit.privacy.exact_sampling (CKS 2020 in compiled integer arithmetic; no OpenDP at run "
        f"time); warm-up before timing (configure_sampler('exact'), 4,096 draws of each): {warm_seconds:.3f} s, "
        "not in any fit's time"
    )
    print(f"load average at start: {load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f} (1, 5, 15 min)")

    rows = []
    for name in names:
        progress(f"{name}: resolve under both samplers, warm-up, {args.repeats} × (float, exact)")
        row = run_solver(name, train, test, meta, args)
        if row.skipped:
            progress(f"{name}: skipped: {row.skipped}")
        rows.append(row)

    print()
    print(markdown_table(rows))
    for row in rows:
        if row.skipped:
            print(f"{row.name}: skipped: {row.skipped}")
    print()
    timed_rows = [row for row in rows if not row.skipped]
    for row in timed_rows:
        if row.name in GOAL_SOLVERS:
            print(f"{row.name}: exact / float = {row.ratio:.2f} ({verdict(row)})")
        elif row.name in ("dp_otb", "dp_distributed"):
            print(f"{row.name}: exact / float = {row.ratio:.2f} (stated, no goal)")
    if args.accuracy_seeds:
        print(f"\nTest accuracy over {args.accuracy_seeds} more seeds per sampler (untimed; the same seeds for both):")
        for row in timed_rows:
            print(accuracy_line(row))
    load_end = os.getloadavg()
    print(f"load average at end: {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f} (1, 5, 15 min)")
    print(f"total run time: {time.perf_counter() - _START:.1f} s")


if __name__ == "__main__":
    main()
