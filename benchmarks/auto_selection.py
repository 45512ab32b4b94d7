"""``auto``'s private selection against its own candidates, forced on: what the selection costs and gains.

    .venv/bin/python benchmarks/auto_selection.py [--datasets ...] [--epsilons 0.5 1 2] [--seeds 3] [--markdown]

Same datasets, split, encoding and scoring as ``benchmarks/utility.py`` (its loaders; needs the ``bench`` extra).
For each dataset and ε: ``auto`` with ``mode`` = ``selection`` (every candidate fitted at a share of ε on a
secret 80 % training split, scored privately on the other 20 %, the best released) and ``recommended`` (the
public rule's solver at the whole ε), next to each candidate alone at the whole ε on all rows, 3 seeds; the
table shows mean accuracy % (RMSE for a numeric label) and how often the selection picked each candidate. It
is the measurement behind ``mode='auto'``'s rule (privfit.solvers.selection.auto, "When to select").
"""

from __future__ import annotations

import argparse
import statistics
from collections import Counter

from utility import DATASETS, load_split, progress, render, score

from privfit.privacy import make_generator
from privfit.solvers import PublicMetadata, get_solver
from privfit.solvers.selection.auto import candidate_set


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", choices=list(DATASETS), default=list(DATASETS))
    parser.add_argument("--epsilons", nargs="+", type=float, default=[0.5, 1.0, 2.0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    print(f"auto's selection forced on: ε ∈ {args.epsilons}, δ = {args.delta:g}, {args.seeds} seeds, split seed 0")
    lines = []
    for name in args.datasets:
        spec = DATASETS[name]
        if not spec.csv_path.is_file():
            print(f"{name}: skipped, {spec.csv_path} not found")
            continue
        split = load_split(spec, 0, None)
        meta = PublicMetadata.from_dataset(split.train)
        main_metric = "accuracy" if split.binary else "rmse"
        unit = 100.0 if split.binary else 1.0
        for epsilon in args.epsilons:
            methods = [("auto", {"mode": "selection"}), ("auto", {"mode": "recommended"})]
            methods += [(candidate, {}) for candidate in candidate_set(split.model)]
            cells, picks = [], Counter[str]()
            for solver_name, params in methods:
                solver = get_solver(solver_name)
                resolved = solver.resolve({"model": split.model, **params}, meta, target_epsilon=epsilon,
                                          delta=args.delta)  # fmt: skip
                values = []
                for seed in range(args.seeds):
                    result = solver.fit(split.train.X, split.train.y, meta, resolved,
                                        make_generator(seed, data_is_public=True))  # fmt: skip
                    values.append(score(result, split)[main_metric])
                    if params.get("mode") == "selection" and result.selected is not None:
                        picks[result.selected["solver"]] += 1
                cells.append(f"{unit * statistics.fmean(values):.3f}" if unit == 1.0 else
                             f"{unit * statistics.fmean(values):.2f}")  # fmt: skip
                progress(f"{name} ε={epsilon:g} {solver_name} {params}: {cells[-1]}")
            picked = ", ".join(f"{solver} {count}" for solver, count in sorted(picks.items()))
            share = get_solver("auto").resolve({"model": split.model, "mode": "selection"}, meta,
                                               target_epsilon=epsilon, delta=args.delta).share  # fmt: skip
            lines.append([f"`{name}`", f"{epsilon:g}", *cells[:2], " / ".join(cells[2:]), f"{share:.3f}", picked])
    header = ["dataset", "ε", "selection", "recommended", "candidates alone (whole ε)", "share t", "picked"]
    print("\nmean accuracy % (binary) or RMSE (numeric) over the seeds; candidates in candidate_set order\n")
    print(render(header, lines, args.markdown, left=2))


if __name__ == "__main__":
    main()
