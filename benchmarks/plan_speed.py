"""Plan (validate, resolve, calibrate, cost) times of the sampled solvers next to dp_gd's, in one run.

    python benchmarks/plan_speed.py [--repeats 7]

Issue 23's row: the plan of ``dp_sgd`` and ``resque_dpsgd`` — what every estimate and every admission runs, the
calibration of σ for the Poisson-subsampled Gaussian — at most 20 ms; the peer is ``dp_gd``'s plan (a plain
Gaussian calibration). Adult's public metadata (n = 32,561, d = 104, B = 3), logistic (``resque_dpsgd``: hinge),
δ = 1e-6, ε ∈ {0.1, 1, 8}. Each plan is timed *cold* (the curve and calibration caches cleared before every
call, i.e. the first request with these inputs) and *warm* (the same request again: an estimate followed by its
admission). Prints medians, the ratios to dp_gd's cold plan and the load average. No thresholds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from privfit.privacy.calibration import clear_calibration_caches
from privfit.solvers import PublicMetadata, get_solver

ADULT = PublicMetadata(n=32_561, d=104, row_norm_bound=3.0)
SOLVERS = {"dp_gd": "logistic", "dp_sgd": "logistic", "resque_dpsgd": "svm"}


def plan_seconds(name: str, epsilon: float, repeats: int, cold: bool) -> float:
    solver = get_solver(name)
    times = []
    for _ in range(repeats):
        if cold:
            clear_calibration_caches()
        start = time.perf_counter()
        solver.plan({"model": SOLVERS[name]}, ADULT, target_epsilon=epsilon, delta=1e-6)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    for name in SOLVERS:  # imports and first-call set-up outside the timings
        get_solver(name).plan({"model": SOLVERS[name]}, ADULT, target_epsilon=1.0, delta=1e-6)
    print(f"load average {os.getloadavg()[0]:.2f} (1 min); medians of {args.repeats}; Adult metadata, δ = 1e-6")
    print(f"{'solver':<14} {'ε':>5} {'cold ms':>9} {'warm ms':>9} {'cold / dp_gd':>13}")
    for epsilon in (0.1, 1.0, 8.0):
        peer = plan_seconds("dp_gd", epsilon, args.repeats, cold=True)
        for name in SOLVERS:
            cold = peer if name == "dp_gd" else plan_seconds(name, epsilon, args.repeats, cold=True)
            warm = plan_seconds(name, epsilon, args.repeats, cold=False)
            print(f"{name:<14} {epsilon:5g} {cold * 1e3:9.2f} {warm * 1e3:9.2f} {cold / peer:13.2f}")
    print("goal (issue 23): dp_sgd and resque_dpsgd cold plans ≤ 20 ms")


if __name__ == "__main__":
    main()
