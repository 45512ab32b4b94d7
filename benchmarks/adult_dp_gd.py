"""Adult benchmark: privfit's ``dp_gd`` (logistic, default settings) next to scikit-learn and diffprivlib.

    python benchmarks/adult_dp_gd.py [--seeds 5] [--epsilons 0.1 0.5 1 2 5] [--delta 1e-6]

Needs ``pip install -e ".[bench]"`` (scikit-learn, diffprivlib; diffprivlib is skipped with a note when it
cannot be imported — it breaks on scikit-learn ≥ 1.8). All three fit the SAME encoding of UCI Adult
(privfit's declared schema: 104 columns, public row-norm bound sqrt(13)) in the same process, and are scored
on ``adult.test``. Prints, per ε at the given δ: test accuracy (mean ± sd over seeds) and fit time, and the
ratios dp_gd / non-private and dp_gd / diffprivlib. No thresholds: this reports, it does not judge.

Notes on the peers:
* scikit-learn ``LogisticRegression(C=1)`` is non-private (the ceiling).
* diffprivlib ``LogisticRegression`` is objective perturbation (Chaudhuri et al. 2011) with PURE ε-DP (δ = 0),
  a stronger guarantee than (ε, δ); ``data_norm`` is the public bound sqrt(13), never measured on the data.
  It is shown with its default ``C = 1`` and with ``C = 100/n``, the best value of the local sweep in
  ``research/anchors-dp-systems.md`` §3.3 (choosing C on the private data would itself cost budget).
* dp_gd uses its defaults (T = 200, η = 1/β, λ = 0, R = 10, C = G), calibrated to ε at δ with RDP.
"""

from __future__ import annotations

import argparse
import functools
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from common import (
    ADULT_DIR,
    adult_with_baseline,
    cell,
    diffprivlib_predictions,
    import_diffprivlib_logistic,
    ratio,
    timed,
)

from privfit.privacy import make_generator
from privfit.solvers import PublicMetadata, get_solver


def dp_gd_predictions(train: Any, test: Any, meta: PublicMetadata, epsilon: float, delta: float, seed: int):
    """Plan (calibrate) and fit dp_gd with default logistic settings; predictions on the test rows."""
    solver = get_solver("dp_gd")
    plan = solver.plan({"model": "logistic"}, meta, target_epsilon=epsilon, delta=delta)
    result = solver.fit(train.X, train.y, meta, plan.resolved, make_generator(seed, data_is_public=True))
    return result.predict(test.X)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.1, 0.5, 1.0, 2.0, 5.0])
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument("--data", type=Path, default=ADULT_DIR)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")

    train, test, sk_acc, sk_time = adult_with_baseline(args.data, args.delta)
    meta = PublicMetadata.from_dataset(train)

    DPLogisticRegression = import_diffprivlib_logistic()

    header = (
        f"{'ε':>5} | {'dp_gd acc':>15} {'time':>7} | {'dpl C=1 acc':>15} {'time':>7} | {'dpl C=100/n':>15} "
        f"{'time':>7} | {'dp_gd/np':>8} {'dp_gd/dpl1':>10} {'dp_gd/dpl*':>10} {'time dp_gd/dpl1':>15}"
    )
    print(f"\nδ = {args.delta:g} for dp_gd (diffprivlib: pure ε-DP), {args.seeds} seeds each")
    print(header)
    print("-" * len(header))
    for epsilon in args.epsilons:
        accs: dict[str, list[float]] = {"dp_gd": [], "dpl1": [], "dpl100": []}
        times: dict[str, list[float]] = {"dp_gd": [], "dpl1": [], "dpl100": []}
        for seed in range(args.seeds):
            predictions, seconds = timed(
                functools.partial(dp_gd_predictions, train, test, meta, epsilon, args.delta, seed)
            )
            accs["dp_gd"].append(float(np.mean(predictions == test.y)))
            times["dp_gd"].append(seconds)
            if DPLogisticRegression is None:
                continue
            for key, c in (("dpl1", 1.0), ("dpl100", 100.0 / train.n)):
                predictions, seconds = timed(
                    functools.partial(diffprivlib_predictions, DPLogisticRegression, train, test, epsilon, c, seed)
                )
                accs[key].append(float(np.mean(predictions == test.y)))
                times[key].append(seconds)
        print(
            f"{epsilon:5g} | {cell(accs['dp_gd'], times['dp_gd'])} | {cell(accs['dpl1'], times['dpl1'])} | "
            f"{cell(accs['dpl100'], times['dpl100'])} | {ratio(accs['dp_gd'], [sk_acc], 8)} "
            f"{ratio(accs['dp_gd'], accs['dpl1'], 10)} {ratio(accs['dp_gd'], accs['dpl100'], 10)} "
            f"{ratio(times['dp_gd'], times['dpl1'], 15, 1)}"
        )
    print(f"\nnon-private scikit-learn: {sk_acc:.4f} in {sk_time:.2f} s")
    print("ratios: accuracy dp_gd / peer (np = non-private, dpl1 = diffprivlib C=1, dpl* = C=100/n); time dp_gd / dpl1")


if __name__ == "__main__":
    main()
