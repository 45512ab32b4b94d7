"""Adult benchmark of ``dp_distributed`` (Li et al., spec seed-001) over learners m and batch sizes h, next to
``dp_otb`` and ``dp_gd`` in the same run, with rows/s.

    python benchmarks/adult_dp_distributed.py [--seeds 3] [--epsilons 0.1 1 5] [--learners 1 4 64]
                                              [--batches 1 10 100] [--delta 1e-6] [--l2 0.1]

Needs ``pip install -e ".[bench]"`` (scikit-learn for the non-private ceiling). Everything runs in one process.

All models fit the SAME encoding of UCI Adult (privfit's declared schema: 104 columns plus the intercept, public
row-norm bound sqrt(13)), logistic loss, and are scored on ``adult.test``. For each ε: ``dp_distributed`` with
every (m, h) of the grid (ring topology, λ = ``--l2``, C = G, α_k = 1/(λk), tail average, every other setting at its
default; cost: one Laplace mechanism, pure ε₀-DP, calibrated to ε at δ through its RDP curve), then ``dp_otb``
(default learner adagrad_norm) and ``dp_gd`` (200 steps), all at (ε, δ). Cells: test accuracy mean ± sd over
the seeds and rows processed per second of ``fit`` (m·K·h rows for dp_distributed, n for dp_otb's single pass,
200·n gradient evaluations for dp_gd). A combination with fewer than 20 rounds (K = ⌊⌊n/m⌋/h⌋ < 20, e.g.
m = 64, h = 100 on Adult's 32 561 rows) is refused by the solver and shown as ``K<20``.

What to expect (spec §4, P18): the Laplace noise per broadcast has E‖σ‖₂ ≈ 2√2 α n C/(hε), linear in the model
dimension n = 105 here, so dp_distributed is far behind dp_otb and dp_gd on Adult except with large h and ε;
it is meant for low-dimensional models and for data that really is split across sites.

No thresholds: this reports, it does not judge.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
from common import ADULT_DIR, adult_with_baseline

from privfit.privacy import make_generator
from privfit.solvers import PublicMetadata, SolverParameterError, get_solver


def fit_once(solver_name: str, params: dict[str, Any], train: Any, test: Any, meta: PublicMetadata,
             epsilon: float, delta: float, seed: int) -> tuple[float, float, int]:  # fmt: skip
    """Plan and fit one solver; (test accuracy, fit seconds, rows processed)."""
    solver = get_solver(solver_name)
    plan = solver.plan(params, meta, target_epsilon=epsilon, delta=delta)
    start = time.perf_counter()
    result = solver.fit(train.X, train.y, meta, plan.resolved, make_generator(seed, data_is_public=True))
    seconds = time.perf_counter() - start
    accuracy = float(np.mean(np.asarray(result.predict(test.X)) == test.y))
    settings = plan.resolved.model_dump()
    rows = settings.get("rows_used", meta.n) * settings.get("passes", 1) * settings.get("steps", 1)
    return accuracy, seconds, rows


def summary(runs: list[tuple[float, float, int]]) -> str:
    accuracies = [a for a, _, _ in runs]
    sd = statistics.stdev(accuracies) if len(accuracies) > 1 else 0.0
    rate = sum(r for _, _, r in runs) / sum(s for _, s, _ in runs)
    return f"{statistics.fmean(accuracies):.4f}±{sd:.4f} {rate / 1e3:8.0f}k/s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=ADULT_DIR)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.1, 1.0, 5.0])
    parser.add_argument("--learners", type=int, nargs="+", default=[1, 4, 64])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 10, 100])
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument("--l2", type=float, default=0.1)
    args = parser.parse_args()
    if not (args.data / "adult.data").exists():
        raise SystemExit(f"UCI Adult not found under {args.data} (expected adult.data and adult.test)")

    train, test, _, _ = adult_with_baseline(args.data, args.delta)
    meta = PublicMetadata.from_dataset(train)
    fit_once("dp_otb", {"model": "logistic"}, train, test, meta, 1.0, args.delta, 0)  # numba compile, untimed
    cell_width = 24
    print(f"\nδ = {args.delta:g}, {args.seeds} seeds; cells: test accuracy mean±sd, rows/s of fit; logistic loss")
    for epsilon in args.epsilons:
        print(f"\nε = {epsilon:g}: dp_distributed (ring, λ = {args.l2:g}), rows m, columns h")
        print(f"{'m':>4} | " + " | ".join(f"{f'h = {h}':>{cell_width}}" for h in args.batches))
        for m in args.learners:
            cells = []
            for h in args.batches:
                params = {"model": "logistic", "n_learners": m, "l2": args.l2, "clip_norm": 1e9,  # C = G
                          **({"algorithm": "online"} if h == 1 else {"batch_size": h})}  # fmt: skip
                try:
                    runs = [fit_once("dp_distributed", params, train, test, meta, epsilon, args.delta, s)
                            for s in range(args.seeds)]  # fmt: skip
                except SolverParameterError as error:
                    if "rounds" not in str(error):
                        raise
                    cells.append(f"{'K<20':>{cell_width}}")
                    continue
                cells.append(f"{summary(runs):>{cell_width}}")
            print(f"{m:>4} | " + " | ".join(cells))
        runs = [fit_once("dp_distributed", {"model": "logistic"}, train, test, meta, epsilon, args.delta, s)
                for s in range(args.seeds)]  # fmt: skip
        print(f"{'dp_distributed (defaults)':>16}: {summary(runs)}")
        for name in ("dp_otb", "dp_gd"):
            runs = [fit_once(name, {"model": "logistic"}, train, test, meta, epsilon, args.delta, s)
                    for s in range(args.seeds)]  # fmt: skip
            print(f"{name:>16}: {summary(runs)}")


if __name__ == "__main__":
    main()
