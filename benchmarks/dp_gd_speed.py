"""dp_gd's fit time on Adult next to a noiseless numpy loop of the same steps and scikit-learn, in one run.

    python benchmarks/dp_gd_speed.py [--steps 200] [--repeats 5] [--epsilon 1.0]

Issue 23's row: dp_gd on Adult (logistic, 200 steps) at most 1.3 × a noiseless numpy loop doing the same 200
steps (margins Xθ, the logistic slopes, Xᵀs, a projected step: the least any implementation of full-batch
gradient descent can do), and at most 1 × scikit-learn's ``LogisticRegression`` (lbfgs, C = 1) on the same rows.
Three timings, each the median of ``--repeats``:

* ``dp_gd fit``: the solver's whole ``fit`` (bounds check, design matrix, 200 clipped noisy steps, the result),
  with the settings its plan resolves at ε (steps forced to ``--steps``);
* ``noiseless loop``: the same steps with numpy, no clipping, no noise;
* ``scikit-learn``: ``LogisticRegression(C=1, max_iter=2000).fit``.

Prints the three times and the ratios dp_gd / loop and dp_gd / scikit-learn, with the load average.

``--accuracy`` adds the check that the float32 design matrix (:mod:`privfit.solvers.float32_design`) changes no
fitted accuracy: dp_gd at its defaults on Adult and the four development datasets (``utility.py``'s split, seed
0), ε ∈ {0.5, 1, 2}, 3 noise seeds, once under the public float32 rule and once forced to float64, with the same
noise draws; prints both metrics (accuracy, or RMSE for the regression datasets) and the largest difference.
No thresholds: this reports, it does not judge.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings
from collections.abc import Callable

import numpy as np
from common import ADULT_DIR, load_adult

from privfit.privacy import make_generator
from privfit.solvers import PublicMetadata, get_solver


def median_seconds(work: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def noiseless_loop(X: np.ndarray, y: np.ndarray, steps: int, step_size: float, radius: float) -> np.ndarray:
    """Plain full-batch projected gradient descent on the mean logistic loss (intercept column appended)."""
    A = np.hstack([X, np.ones((X.shape[0], 1))])
    theta = np.zeros(A.shape[1])
    for _ in range(steps):
        slopes = -y / (1.0 + np.exp(y * (A @ theta)))
        theta = theta - step_size * (A.T @ slopes) / A.shape[0]
        norm = np.linalg.norm(theta)
        if norm > radius:
            theta *= radius / norm
    return theta


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument("--accuracy", action="store_true", help="also compare float32 and float64 fits' metrics")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    from sklearn.linear_model import LogisticRegression

    train, _ = load_adult(ADULT_DIR, args.delta)
    meta = PublicMetadata.from_dataset(train)
    solver = get_solver("dp_gd")
    plan = solver.plan({"model": "logistic", "steps": args.steps}, meta, target_epsilon=args.epsilon, delta=args.delta)
    r = plan.resolved
    print(f"Adult: n = {train.n}, d = {train.d}; dp_gd at ε = {args.epsilon:g}: {r.steps} steps, momentum {r.momentum}")

    def dp_gd() -> object:
        return solver.fit(train.X, train.y, meta, r, make_generator(0, data_is_public=True))

    def loop() -> object:
        return noiseless_loop(train.X, train.y, r.steps, r.step_size, r.radius)

    def sklearn() -> object:
        return LogisticRegression(C=1.0, max_iter=2000).fit(train.X, train.y)

    dp_gd()  # warm-up: imports, first-touch pages
    t_dp = median_seconds(dp_gd, args.repeats)
    t_loop = median_seconds(loop, args.repeats)
    t_sk = median_seconds(sklearn, args.repeats)
    print(f"load average {os.getloadavg()[0]:.2f} (1 min), median of {args.repeats}")
    print(f"{'dp_gd fit':<16} {t_dp:7.3f} s")
    print(f"{'noiseless loop':<16} {t_loop:7.3f} s   dp_gd / loop          {t_dp / t_loop:5.2f}  (goal ≤ 1.3)")
    print(f"{'scikit-learn':<16} {t_sk:7.3f} s   dp_gd / scikit-learn  {t_dp / t_sk:5.2f}  (goal ≤ 1)")
    if args.accuracy:
        compare_precisions(args.delta)


def compare_precisions(delta: float) -> None:
    """dp_gd's test metric with the float32 rule and forced to float64, same seeds (module docstring)."""
    import utility

    import privfit.solvers.baselines.dp_gd as dp_gd_module

    rule = dp_gd_module.float32_suffices
    solver = get_solver("dp_gd")
    print(f"\n{'dataset':<14} {'ε':>4} {'metric':>8} {'float32':>9} {'float64':>9} {'max |diff|':>11}")
    for spec in utility.DATASETS.values():
        if not spec.csv_path.exists():
            print(f"{spec.name:<14} skipped: {spec.csv_path} is absent")
            continue
        split = utility.load_split(spec, 0, None)
        meta = PublicMetadata.from_dataset(split.train)
        metric = "accuracy" if split.binary else "rmse"
        for epsilon in (0.5, 1.0, 2.0):
            resolved = solver.plan({"model": split.model}, meta, target_epsilon=epsilon, delta=delta).resolved
            values: dict[str, list[float]] = {"float32": [], "float64": []}
            for precision, chosen in (("float32", rule), ("float64", lambda *_: False)):
                dp_gd_module.float32_suffices = chosen
                for seed in range(3):
                    rng = make_generator(seed, data_is_public=True)
                    result = solver.fit(split.train.X, split.train.y, meta, resolved, rng)
                    values[precision].append(utility.score(result, split)[metric])
            dp_gd_module.float32_suffices = rule
            gap = max(abs(a - b) for a, b in zip(values["float32"], values["float64"], strict=True))
            print(
                f"{spec.name:<14} {epsilon:4g} {metric:>8} {statistics.fmean(values['float32']):9.5f} "
                f"{statistics.fmean(values['float64']):9.5f} {gap:11.2e}"
            )


if __name__ == "__main__":
    main()
