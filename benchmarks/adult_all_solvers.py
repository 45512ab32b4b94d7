"""Adult comparison table: every registered privfit solver (logistic, DEFAULT settings) next to diffprivlib and
scikit-learn, all in one run.

    .venv/bin/python benchmarks/adult_all_solvers.py [--epsilons 0.1 0.5 1 2 5] [--seeds 5] [--delta 1e-6]
                                                     [--solvers dp_gd dp_otb ...] [--quick]

Needs ``pip install -e ".[bench]"`` (scikit-learn, diffprivlib; diffprivlib is skipped with a printed reason when
it cannot be imported). Skips with a message (exit 0) when UCI Adult is not under ``../shared/data/adult``.

What it measures. Every model fits the SAME encoding of UCI Adult (privfit's declared schema: 104 columns, public
row-norm bound sqrt(13)) and is scored on ``adult.test``. Rows:

* scikit-learn ``LogisticRegression(C=1)``, non-private (the ceiling; deterministic, fit once);
* the majority class of the training labels (the floor);
* diffprivlib ``LogisticRegression`` (objective perturbation, PURE ε-DP, default ``C = 1``, ``data_norm`` = the
  public bound, never measured on the data);
* every registered privfit solver that supports the ``logistic`` model — at least ``dp_gd``, ``dp_otb``,
  ``dp_distributed``, ``dp_sgd``, ``objective_perturbation``, ``output_perturbation``; a name that is not (yet)
  registered is listed as "not registered", so new solvers are picked up without editing this script.

Each privfit fit goes through the public solver interface exactly as the service does: ``solver.resolve({"model":
"logistic"}, meta, target_epsilon=ε, delta=δ)`` — ONLY the model is set, every other parameter is the solver's
default (what a user gets without tuning) —, then the charged ``solver.cost(resolved, meta).epsilon(δ)`` must be
≤ ε (the run stops otherwise: the table shows only fits within budget), then ``solver.fit(X, y, meta, resolved,
make_generator(seed, data_is_public=True))`` (Adult is a public benchmark, so seeded noise is allowed). Defaults
that the solver refuses on Adult (``SolverParameterError``) are reported in the row's note instead of failing.

Cells: test accuracy in percent, mean ± sd over the seeds, per ε at δ (diffprivlib: pure ε, δ = 0). Time column:
mean seconds per fit (``fit`` + ``predict`` on the test rows; privfit's ``resolve``/``cost`` — public noise
calibration — is not included) over every ε and seed, and its ratio to diffprivlib's. Every privfit solver
is warmed up once on a 2 000-row slice before anything is timed, so numba compile time is excluded. Also
printed: the ε each solver is charged at δ for a target ε = 1 (sanity) and the total run time. Progress goes to
stderr. ``--quick``: 1 seed, ε ∈ {0.1, 1} (smoke run).

No thresholds: this reports, it does not judge. Results of the full grid are pasted into
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from common import (
    ADULT_DIR,
    EXPECTED_SOLVERS,
    adult_with_baseline,
    diffprivlib_predictions,
    import_diffprivlib_logistic,
    library_versions,
    ratio,
    resolve_checked,
    timed,
    warm_up,
)

from privfit.privacy import make_generator
from privfit.solvers import PublicMetadata, Solver, SolverParameterError
from privfit.solvers.registry import get_solver, solver_names

MODEL = "logistic"
DEFAULT_EPSILONS: tuple[float, ...] = (0.1, 0.5, 1.0, 2.0, 5.0)
QUICK_EPSILONS: tuple[float, ...] = (0.1, 1.0)

_START = time.perf_counter()


def progress(message: str) -> None:
    print(f"[{time.perf_counter() - _START:7.1f} s] {message}", file=sys.stderr, flush=True)


@dataclasses.dataclass
class Row:
    """One table row: accuracies and fit seconds per ε, refusals per ε, and a note."""

    label: str
    accuracies: dict[float, list[float]] = dataclasses.field(default_factory=dict)
    seconds: list[float] = dataclasses.field(default_factory=list)
    refused: dict[float, str] = dataclasses.field(default_factory=dict)
    note: str = ""


def privfit_fit(
    solver: Solver, train: Any, test: Any, meta: PublicMetadata, epsilon: float, delta: float, seed: int
) -> tuple[float, float]:
    """resolve → cost check → fit, as the service does; (test accuracy, seconds of fit + predict)."""
    resolved = resolve_checked(solver, MODEL, meta, epsilon, delta)
    rng = make_generator(seed, data_is_public=True)
    predictions, seconds = timed(lambda: solver.fit(train.X, train.y, meta, resolved, rng).predict(test.X))
    return float(np.mean(np.asarray(predictions) == test.y)), seconds


def run_privfit(
    name: str, train: Any, test: Any, meta: PublicMetadata, epsilons: list[float], seeds: int, delta: float
) -> Row:
    row = Row(name)
    solver = get_solver(name)
    failure = warm_up(solver, MODEL, train.X, train.y, meta, delta)
    if failure:
        progress(f"{name}: warm-up on the first rows failed ({failure}); continuing")
    for epsilon in epsilons:
        try:
            runs = [privfit_fit(solver, train, test, meta, epsilon, delta, seed) for seed in range(seeds)]
        except SolverParameterError as error:
            row.refused[epsilon] = str(error)
            progress(f"{name} ε={epsilon:g}: refused: {error}")
            continue
        row.accuracies[epsilon] = [accuracy for accuracy, _ in runs]
        row.seconds.extend(seconds for _, seconds in runs)
        progress(
            f"{name} ε={epsilon:g}: {seeds} fit(s), accuracy {100 * statistics.fmean(row.accuracies[epsilon]):.2f} %, "
            f"{statistics.fmean(s for _, s in runs):.2f} s/fit"
        )
    if row.refused:
        messages: dict[str, list[float]] = {}
        for epsilon, message in row.refused.items():
            messages.setdefault(message, []).append(epsilon)
        row.note = "; ".join(
            f"refused at ε = {', '.join(f'{e:g}' for e in eps)}: {message}" for message, eps in messages.items()
        )
    return row


def run_diffprivlib(model_cls: Any, train: Any, test: Any, epsilons: list[float], seeds: int) -> Row:
    row = Row("diffprivlib (pure ε, C=1)")
    for epsilon in epsilons:
        runs = [
            timed(functools.partial(diffprivlib_predictions, model_cls, train, test, epsilon, 1.0, seed))
            for seed in range(seeds)
        ]
        row.accuracies[epsilon] = [float(np.mean(predictions == test.y)) for predictions, _ in runs]
        row.seconds.extend(seconds for _, seconds in runs)
        progress(
            f"diffprivlib ε={epsilon:g}: {seeds} fit(s), accuracy "
            f"{100 * statistics.fmean(row.accuracies[epsilon]):.2f} %, {statistics.fmean(s for _, s in runs):.2f} s/fit"
        )
    return row


def constant_row(label: str, accuracy: float, seconds: list[float], epsilons: list[float], note: str) -> Row:
    """A row whose accuracy does not depend on ε (non-private baselines): the same value in every column."""
    return Row(label, {epsilon: [accuracy] for epsilon in epsilons}, seconds, note=note)


def format_cell(row: Row, epsilon: float) -> str:
    if epsilon in row.refused:
        return "refused"
    accuracies = row.accuracies.get(epsilon)
    if not accuracies:
        return "—"
    mean = 100 * statistics.fmean(accuracies)
    if len(accuracies) == 1:
        return f"{mean:.2f}"
    return f"{mean:.2f} ± {100 * statistics.stdev(accuracies):.2f}"


def markdown_table(rows: list[Row], epsilons: list[float], reference: Row | None) -> str:
    header = ["method", *(f"ε = {e:g}" for e in epsilons), "fit s", "fit time / diffprivlib", "note"]
    body = []
    for row in rows:
        seconds = f"{statistics.fmean(row.seconds):.3f}" if row.seconds else "—"
        time_ratio = ratio(row.seconds, reference.seconds, 1, 2) if reference and row.seconds else "—"
        cells = [row.label, *(format_cell(row, e) for e in epsilons), seconds, time_ratio.strip(), row.note]
        body.append([cell.replace("|", "\\|") for cell in cells])
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    right = range(1, len(header) - 1)  # numbers right-aligned, method and note left-aligned

    def line(cells: list[str]) -> str:
        padded = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if i in right else "-" * (w + 2) for i, w in enumerate(widths)) + "|"
    return "\n".join([line(header), rule, *(line(cells) for cells in body)])


def candidate_solvers(requested: list[str] | None) -> tuple[list[str], list[str]]:
    """(solver names to show as rows, notes on registered solvers skipped because they have no logistic model)."""
    registered = set(solver_names())
    if requested:
        names = list(dict.fromkeys(requested))
    else:
        names = [*EXPECTED_SOLVERS, *sorted(registered - set(EXPECTED_SOLVERS))]
    shown, skipped = [], []
    for name in names:
        if name in registered and MODEL not in get_solver(name).models:
            skipped.append(f"{name} (models: {', '.join(get_solver(name).models)})")
        else:
            shown.append(name)
    return shown, skipped


def charged_at_one(names: list[str], meta: PublicMetadata, delta: float) -> list[str]:
    """What each solver is charged at δ for a target ε = 1 with default settings (sanity check)."""
    lines = []
    for name in names:
        solver = get_solver(name)
        try:
            resolved = solver.resolve({"model": MODEL}, meta, target_epsilon=1.0, delta=delta)
        except SolverParameterError as error:
            lines.append(f"  {name:<24} refused: {error}")
            continue
        conversion = solver.cost(resolved, meta).epsilon(delta)
        edge = ", at the grid edge" if conversion.at_grid_edge else ""
        lines.append(
            f"  {name:<24} ε = {conversion.epsilon:.8f} (optimal RDP order {conversion.optimal_order:g}{edge})"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epsilons", type=float, nargs="+", default=list(DEFAULT_EPSILONS))
    parser.add_argument("--seeds", type=int, default=5, help="number of seeds (0, 1, …, seeds − 1)")
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument("--solvers", nargs="+", metavar="NAME", help="privfit solvers to run (default: all)")
    parser.add_argument("--quick", action="store_true", help=f"smoke run: 1 seed, ε ∈ {set(QUICK_EPSILONS)}")
    parser.add_argument("--data", type=Path, default=ADULT_DIR)
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.epsilons = 1, list(QUICK_EPSILONS)
    if args.seeds < 1:
        parser.error("--seeds must be ≥ 1")
    if not ((args.data / "adult.data").is_file() and (args.data / "adult.test").is_file()):
        print(f"UCI Adult not found under {args.data.resolve()} (expected adult.data and adult.test); skipping")
        return
    warnings.filterwarnings("ignore")
    epsilons: list[float] = list(dict.fromkeys(args.epsilons))

    progress("loading Adult, fitting scikit-learn")
    train, test, sk_accuracy, sk_seconds = adult_with_baseline(args.data, args.delta)
    meta = PublicMetadata.from_dataset(train)
    labels, counts = np.unique(train.y, return_counts=True)
    majority_label = labels[np.argmax(counts)]
    majority_accuracy = float(np.mean(test.y == majority_label))

    names, skipped = candidate_solvers(args.solvers)
    registered = set(solver_names())
    print(
        f"\nn = {meta.n} train rows ({test.n} test), d = {meta.d} columns (+ intercept), row-norm bound "
        f"{meta.row_norm_bound:.4f} (public); model {MODEL}; ε ∈ {{{', '.join(f'{e:g}' for e in epsilons)}}}, "
        f"δ = {args.delta:g}; {args.seeds} seed(s) per cell"
    )
    print(f"registered privfit solvers: {', '.join(solver_names())}")
    for name in names:
        if name not in registered:
            print(f"  {name}: not registered — skipped")
    for note in skipped:
        print(f"  {note}: no {MODEL} model — skipped")
    print(f"python {platform.python_version()}, numpy {np.__version__}, {library_versions()}")

    rows = [
        constant_row("scikit-learn (non-private, C=1)", sk_accuracy, [sk_seconds], epsilons, "fit once"),
        constant_row(f"majority class ({int(majority_label):+d})", majority_accuracy, [], epsilons, ""),
    ]
    DPLogisticRegression = import_diffprivlib_logistic()
    reference = None
    if DPLogisticRegression is not None:
        reference = run_diffprivlib(DPLogisticRegression, train, test, epsilons, args.seeds)
        rows.append(reference)
    else:
        rows.append(Row("diffprivlib", note="could not be imported (see above)"))

    for name in names:
        if name not in registered:
            rows.append(Row(name, note="not registered"))
            continue
        progress(f"{name}: warm-up, then {len(epsilons)} ε × {args.seeds} seed(s)")
        rows.append(run_privfit(name, train, test, meta, epsilons, args.seeds, args.delta))

    privacy = f"privfit: (ε, δ = {args.delta:g}); diffprivlib: pure ε" if reference else f"(ε, δ = {args.delta:g})"
    print(f"\nTest accuracy (%) on adult.test, mean ± sd over {args.seeds} seed(s); {privacy}; default settings\n")
    print(markdown_table(rows, epsilons, reference))
    print(f"\nε charged at δ = {args.delta:g} for a target ε = 1 (default settings, from solver.cost):")
    print("\n".join(charged_at_one([n for n in names if n in registered], meta, args.delta)))
    print(f"\ntotal run time: {time.perf_counter() - _START:.1f} s")


if __name__ == "__main__":
    main()
