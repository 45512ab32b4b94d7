"""Does the noise outlook predict which fits are no better than a constant model? (issue 21 §4)

    .venv/bin/python benchmarks/noise_outlook.py [--datasets adult telco_churn hr_attrition]
        [--epsilons 0.0001 0.01 0.1 1 5] [--seeds 2] [--solvers dp_gd ...] [--max-rows N] [--markdown]

For every binary dataset of ``benchmarks/utility.py`` (same files, schemas, split and /predict scoring), every
solver that fits a classifier at its DEFAULTS (``dp_lazy_oco``: model ``linear_loss`` on z = y·x) and every ε at
δ = 1e-6: the outlook of the resolved settings (``Solver.outlook``: ratio and level, computed before any row is
read), the mean test accuracy over the seeds, the majority class's, and whether the fit beat it. Then, per level,
how many fits beat the majority class. Reports; judges nothing. The table in docs/solvers.md ("What to expect: the
noise outlook") comes from this script.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from utility import DATASETS, load_split, progress, render, score

from privfit.errors import ParameterError
from privfit.privacy import make_generator
from privfit.solvers.base import FitResult, PublicMetadata
from privfit.solvers.registry import get_solver

SOLVERS = ["dp_gd", "dp_sgd", "output_perturbation", "objective_perturbation", "dp_otb", "dp_distributed",
           "resque_dpsgd", "dp_lazy_oco"]  # fmt: skip
BINARY = ["adult", "telco_churn", "hr_attrition"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=BINARY, choices=BINARY)
    parser.add_argument("--epsilons", nargs="+", type=float, default=[1e-4, 0.01, 0.1, 1.0, 5.0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument("--solvers", nargs="+", default=SOLVERS)
    parser.add_argument("--max-rows", type=int, default=None)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()

    body: list[list[str]] = []
    tally: dict[str, list[int]] = {"low": [0, 0], "moderate": [0, 0], "high": [0, 0]}
    for name in args.datasets:
        spec = DATASETS[name]
        if not spec.csv_path.exists():
            progress(f"{name}: {spec.csv_path} is absent; skipped")
            continue
        split = load_split(spec, 0, args.max_rows)
        meta = PublicMetadata.from_dataset(split.train)
        majority_sign = 1.0 if (split.train.y == 1.0).mean() >= 0.5 else -1.0
        majority = score(FitResult("majority", "logistic", [0.0] * meta.d, majority_sign), split)["accuracy"]
        for solver_name in args.solvers:
            solver = get_solver(solver_name)
            params = {"model": "linear_loss", "z": "yx"} if solver_name == "dp_lazy_oco" else {"model": "logistic"}
            for epsilon in args.epsilons:
                try:
                    resolved = solver.resolve(params, meta, target_epsilon=epsilon, delta=args.delta)
                except ParameterError as error:  # defaults the solver refuses at this ε
                    body.append([name, solver_name, f"{epsilon:g}", "refused", "", "", f"{majority:.3f}", str(error)])
                    continue
                outlook = solver.outlook(resolved, meta)
                accuracies = []
                for seed in range(args.seeds):
                    result = solver.fit(split.train.X, split.train.y, meta, resolved,
                                        make_generator(seed, data_is_public=True))  # fmt: skip
                    accuracies.append(score(result, split)["accuracy"])
                accuracy = statistics.fmean(accuracies)
                beat = accuracy > majority
                level = outlook.level if outlook else "none"
                if outlook:
                    tally[level][int(beat)] += 1
                ratio = f"{outlook.ratio:.3g}" if outlook else "-"
                row = [name, solver_name, f"{epsilon:g}", ratio, level, f"{accuracy:.3f}", f"{majority:.3f}",
                       "yes" if beat else "NO"]  # fmt: skip
                body.append(row)
                progress(" ".join(row))
    header = ["dataset", "solver", "ε", "ratio", "level", "accuracy", "majority", "beats majority"]
    print(render(header, body, args.markdown, left=2))
    print()
    summary = [[level, str(sum(counts)), str(counts[1]), str(counts[0])] for level, counts in tally.items()]
    print(render(["level", "fits", "beat the majority", "did not"], summary, args.markdown))


if __name__ == "__main__":
    main()
