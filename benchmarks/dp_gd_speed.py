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


if __name__ == "__main__":
    main()
