"""dp_otb with the exact noise sampler next to the float one at n = 1e5 and 1e6 (issue 40, target 2), and the exact
discrete Gaussian sampler's time per draw, in one run.

    nice -n 10 .venv/bin/python benchmarks/otb_exact_scaling.py [--rows 100000 1000000] [--features 50]
                                                                [--repeats 3] [--epsilon 1] [--delta 1e-6]

Target 2 of issue 40: dp_otb under ``exact`` ≤ 2 × its ``float`` time at n = 1e5 and 1e6, and dp_otb ``float``
linear in n (≤ 12 × from 1e5 to 1e6).

Data: the public synthetic logistic rows of ``otb_synthetic.py`` (seeded generator, ``--features`` features uniform
on [−1, 1], ‖θ*‖ = 4), the first ``n`` training rows of one draw of the largest ``--rows``. For each n: dp_otb
``logistic`` at its DEFAULT settings, resolved under ``using_sampler("float")`` and ``using_sampler("exact")``
separately (``common.resolve_checked``: the charged ε at δ ≤ ε; under ``exact`` dp_otb runs the plain prefix
estimator, so the two columns time the algorithm each sampler runs by default); one untimed fit of each on 2,000
rows (numba compilation); then ``--repeats`` pairs of timed fits alternating the samplers in ABBA order (float,
exact, exact, float, …), repeat i on ``make_generator(i, data_is_public=True)`` (public data). Time:
``solver.fit`` only (``time.perf_counter``), median over the repeats.

Printed per n: float s, exact s, exact / float (met when ≤ 2), the exact draws per fit (n·p: one discrete Gaussian
per round and coordinate, p = d + 1), the 1-minute load average, and the CPU seconds of the whole process
per fit (``time.process_time``, every thread: the exact noise is drawn by background threads; median) — on a
machine shared with other jobs the wall times depend on the load, the CPU seconds much less; then float(largest n) /
float(smallest n) (met when ≤ 12 × per 10 × rows). Then the sampler alone: 2^20 discrete Gaussian draws at the
variance S of the last exact fit's lattice (:func:`privfit.solvers.online_to_batch.solver.exact_lattice`) in one
call of :func:`privfit.privacy.exact_sampling.discrete_gaussian` (which splits a call this large over two threads),
best of 5, as ns per draw: wall, and CPU of the process (both threads), next to numpy's ``standard_normal`` for the
same count (what the float sampler draws).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
from common import resolve_checked
from otb_synthetic import synthetic

from privfit.privacy import exact_sampling, make_generator
from privfit.privacy.noise import using_sampler
from privfit.solvers import PublicMetadata, get_solver
from privfit.solvers.online_to_batch.solver import exact_lattice

GOAL_RATIO = 2.0
GOAL_SCALING = 12.0
WARM_ROWS = 2_000
SAMPLER_DRAWS = 1 << 20


def timed_fit(solver, X, y, meta, resolved, sampler: str, seed: int) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """(wall seconds, CPU seconds of the whole process: every thread) of one fit."""
    with using_sampler(sampler):
        start, cpu = time.perf_counter(), time.process_time()
        solver.fit(X, y, meta, resolved, make_generator(seed, data_is_public=True))
        return time.perf_counter() - start, time.process_time() - cpu


def sampler_speed(variance: int) -> tuple[float, float, float]:
    """(wall ns, CPU ns of the process per exact draw, wall ns per numpy normal) for :data:`SAMPLER_DRAWS` draws,
    best of 5."""
    rng = make_generator(0, data_is_public=True)
    exact_sampling.discrete_gaussian(rng, variance, 4096)  # first call: load the kernel
    walls, cpus, normals = [], [], []
    for _ in range(5):
        wall, cpu = time.perf_counter(), time.process_time()
        exact_sampling.discrete_gaussian(rng, variance, SAMPLER_DRAWS)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
        wall = time.perf_counter()
        rng.standard_normal(SAMPLER_DRAWS)
        normals.append(time.perf_counter() - wall)
    return tuple(1e9 * min(values) / SAMPLER_DRAWS for values in (walls, cpus, normals))  # type: ignore[return-value]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--features", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3, help="timed fits per sampler (median reported)")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-6)
    args = parser.parse_args()
    if args.repeats < 1 or min(args.rows) <= WARM_ROWS:
        parser.error(f"--repeats must be ≥ 1 and every --rows above {WARM_ROWS}")
    rows = sorted(set(args.rows))
    X_all, y_all, _, _ = synthetic(rows[-1], 0, args.features)
    solver = get_solver("dp_otb")
    print(
        f"dp_otb logistic at defaults on synthetic rows, d = {args.features}, ε = {args.epsilon:g}, "
        f"δ = {args.delta:g}; median of {args.repeats} fit(s) per sampler, alternating (ABBA)"
    )
    print(
        f"{'n':>9} | {'float s':>8} | {'exact s':>8} | {'exact/float':>11} | {'exact draws':>12} | goal ≤ 2× | load | "
        "CPU s float | CPU s exact"
    )
    floats: dict[int, float] = {}
    variance = 0
    for n in rows:
        X, y = X_all[:n], y_all[:n]
        meta = PublicMetadata(n=n, d=args.features, row_norm_bound=float(np.sqrt(args.features)))
        small = PublicMetadata(n=WARM_ROWS, d=args.features, row_norm_bound=meta.row_norm_bound)
        resolved, seconds, cpus = {}, {"float": [], "exact": []}, {"float": [], "exact": []}  # type: ignore[var-annotated]
        for sampler in ("float", "exact"):
            with using_sampler(sampler):
                resolved[sampler] = resolve_checked(solver, "logistic", meta, args.epsilon, args.delta)
                warm = resolve_checked(solver, "logistic", small, args.epsilon, args.delta)
                solver.fit(X[:WARM_ROWS], y[:WARM_ROWS], small, warm, make_generator(0, data_is_public=True))
        for repeat in range(args.repeats):
            order = ("float", "exact") if repeat % 2 == 0 else ("exact", "float")
            for sampler in order:
                wall, cpu = timed_fit(solver, X, y, meta, resolved[sampler], sampler, repeat)
                seconds[sampler].append(wall)
                cpus[sampler].append(cpu)
        floats[n] = statistics.median(seconds["float"])
        exact = statistics.median(seconds["exact"])
        ratio = exact / floats[n]
        draws = n * (args.features + (1 if resolved["exact"].fit_intercept else 0))
        variance = exact_lattice(resolved["exact"]).integer_parameter
        print(
            f"{n:>9,} | {floats[n]:8.3f} | {exact:8.3f} | {ratio:11.2f} | {draws:>12,} | "
            f"{'met' if ratio <= GOAL_RATIO else 'not met':>9} | {os.getloadavg()[0]:.2f} | "
            f"{statistics.median(cpus['float']):.3f} | {statistics.median(cpus['exact']):.3f}",
            flush=True,
        )
    if len(rows) > 1:
        growth, scale = floats[rows[-1]] / floats[rows[0]], rows[-1] / rows[0]
        goal = GOAL_SCALING * scale / 10
        print(
            f"dp_otb float from n = {rows[0]:,} to {rows[-1]:,} ({scale:g} × rows): {growth:.2f} × "
            f"({'met' if growth <= goal else 'not met'}: goal ≤ {goal:g} ×)"
        )
    wall, cpu, normal = sampler_speed(variance)
    print(
        f"exact discrete Gaussian at S = {variance:,} (≈ 2^{np.log2(variance):.1f}): {wall:.1f} ns per draw "
        f"(CPU {cpu:.1f} ns over both threads; {SAMPLER_DRAWS:,} draws in one call, best of 5); "
        f"numpy standard_normal {normal:.1f} ns"
    )


if __name__ == "__main__":
    main()
