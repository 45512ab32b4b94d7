"""Multiclass fits and plans against binary ones on the same rows (issue 40, target 7), in one run.

    .venv/bin/python benchmarks/multiclass_speed.py [--task adult:relationship] [--solvers dp_gd dp_sgd auto]
                                                    [--epsilon 1.0] [--repeats 3]

The task is one of ``benchmarks/multiclass.py``'s (a categorical feature of a dataset declared as its label; default
UCI Adult's ``relationship``, 6 classes, 26,048 training rows of its 80/20 split, seed 0). For each solver, at its
defaults (``{"model": "logistic"}``), ε and δ = 1e-6, on the SAME encoded rows:

* binary: the label "class 0 against the rest" (±1) with metadata without classes;
* multiclass: the categorical label (k classes).

Each is planned (``resolve``, with every calibration cache cleared first: a cold plan) and fitted (``fit`` with a
seeded generator: the data is public) ``--repeats`` times after one untimed warm-up fit; the median seconds are
printed with the ratios multiclass / binary and multiclass / (k × binary) — issue 40's "within 3 × a binary fit of
the same rows per class" is the second. Also the public step counts of both plans (a multiclass default may take more
steps than the binary one). Reports; judges nothing. Needs the Adult files (skips with a message otherwise).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from typing import Any

import numpy as np
from dp_gd_speed import median_seconds
from multiclass import TASKS, load

from privfit.privacy import make_generator
from privfit.privacy.calibration import clear_calibration_caches
from privfit.solvers.base import PublicMetadata
from privfit.solvers.registry import get_solver


def measure(name: str, meta: PublicMetadata, X: np.ndarray, y: np.ndarray, epsilon: float, repeats: int) -> dict:
    """Cold plan and fit seconds (medians) of ``name`` at its defaults, and its public step count."""
    solver = get_solver(name)

    def plan() -> Any:
        clear_calibration_caches()
        return solver.resolve({"model": "logistic"}, meta, target_epsilon=epsilon, delta=1e-6)

    resolved = plan()
    solver.fit(X, y, meta, resolved, make_generator(0, data_is_public=True))  # warm-up: kernels, first touches
    fit = median_seconds(lambda: solver.fit(X, y, meta, resolved, make_generator(1, data_is_public=True)), repeats)
    steps = getattr(resolved, "steps", None)
    return {"plan": median_seconds(plan, repeats), "fit": fit, "steps": steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="adult:relationship", choices=sorted(TASKS))
    parser.add_argument("--solvers", nargs="+", default=["dp_gd", "dp_sgd", "auto"])
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if not TASKS[args.task][0].exists():
        print(f"{TASKS[args.task][0]} not found; skipping")
        return
    _, train, _, _ = load(args.task, 0)
    meta = PublicMetadata.from_dataset(train)
    k = meta.k or 0
    binary_meta = dataclasses.replace(meta, classes=None, label_bound=1.0)
    binary_y = np.where(train.y == 0, 1.0, -1.0)
    print(f"{args.task}: n = {meta.n}, d = {meta.d}, k = {k}; ε = {args.epsilon}, δ = 1e-6; medians of "
          f"{args.repeats}; load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    print(
        "| solver | binary plan / fit (steps) | multiclass plan / fit (steps) | fit: multiclass / binary | "
        "per class | plan: multiclass / binary |"
    )
    print("|---|---|---|---:|---:|---:|")
    for name in args.solvers:
        binary = measure(name, binary_meta, train.X, binary_y, args.epsilon, args.repeats)
        multi = measure(name, meta, train.X, train.y, args.epsilon, args.repeats)
        ratio = multi["fit"] / binary["fit"]
        print(f"| {name} | {binary['plan'] * 1e3:.1f} ms / {binary['fit']:.2f} s ({binary['steps']}) | "
              f"{multi['plan'] * 1e3:.1f} ms / {multi['fit']:.2f} s ({multi['steps']}) | {ratio:.2f} × | "
              f"{ratio / k:.2f} × | {multi['plan'] / binary['plan']:.2f} × |", flush=True)  # fmt: skip
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
