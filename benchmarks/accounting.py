"""Accounting benchmark: privfit's vectorised RDP core next to dp_accounting doing the same work in one run.

    python benchmarks/accounting.py [--entries 10000] [--repeats 5]

Prints wall-clock medians and ratios (dp_accounting / privfit) for:
1. a 10,000-entry ledger of Gaussian fits: building the curves, summing and converting to ε at δ;
2. converting an already summed ledger (the per-admission cost of the ledger's filter);
3. calibrating the noise multiplier of a Poisson-subsampled Gaussian (DP-SGD) to a target (ε, δ);
4. one Poisson-subsampled Gaussian curve on the 156-order grid.
No thresholds: this reports, it does not judge.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from collections.abc import Callable

import numpy as np
from dp_accounting import GaussianDpEvent, PoissonSampledDpEvent, SelfComposedDpEvent, calibrate_dp_mechanism
from dp_accounting.rdp import RdpAccountant, rdp_privacy_accountant

from privfit.privacy import (
    DEFAULT_GRID,
    epsilon_at_delta,
    gaussian_rdp,
    poisson_noise_multiplier,
    poisson_subsampled_gaussian_rdp,
    total_epsilon,
)
from privfit.privacy.calibration import clear_calibration_caches

DELTA = 1e-5


def median_seconds(work: Callable[[], object], repeats: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = work()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def report(label: str, ours: tuple[float, object], theirs: tuple[float, object]) -> None:
    (t_ours, v_ours), (t_theirs, v_theirs) = ours, theirs
    print(
        f"{label:<46} privfit {t_ours * 1e3:10.3f} ms   dp_accounting {t_theirs * 1e3:10.3f} ms   "
        f"ratio {t_theirs / t_ours:8.1f}x   values {v_ours:.6f} / {v_theirs:.6f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    logging.getLogger("absl").setLevel(logging.ERROR)
    sigmas = np.random.default_rng(0).uniform(50.0, 500.0, size=args.entries)
    orders = list(DEFAULT_GRID.orders)

    def privfit_ledger() -> float:
        curves = np.stack([gaussian_rdp(DEFAULT_GRID, sigma=s) for s in sigmas])
        return total_epsilon(curves, None, DELTA).epsilon

    def dp_accounting_ledger() -> float:
        accountant = RdpAccountant(orders)
        for sigma in sigmas:
            accountant.compose(GaussianDpEvent(float(sigma)))
        return accountant.get_epsilon(DELTA)

    report(
        f"ledger of {args.entries} fits: curves+sum+ε",
        median_seconds(privfit_ledger, args.repeats),
        median_seconds(dp_accounting_ledger, args.repeats),
    )

    stored = np.stack([gaussian_rdp(DEFAULT_GRID, sigma=s) for s in sigmas])
    summed = stored.sum(axis=0)
    report(
        f"ledger of {args.entries} fits: sum+ε only",
        median_seconds(lambda: total_epsilon(stored, None, DELTA).epsilon, args.repeats),
        median_seconds(
            lambda: rdp_privacy_accountant.compute_epsilon(orders, list(stored.sum(axis=0)), DELTA)[0], args.repeats
        ),
    )
    report(
        "convert one summed curve to ε",
        median_seconds(lambda: epsilon_at_delta(DEFAULT_GRID, summed, DELTA).epsilon, args.repeats * 20),
        median_seconds(lambda: rdp_privacy_accountant.compute_epsilon(orders, summed, DELTA)[0], args.repeats * 20),
    )

    q, steps, target = 0.01, 10_000, 2.0

    def dp_accounting_calibration() -> float:
        return calibrate_dp_mechanism(
            lambda: RdpAccountant(orders),
            lambda z: SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(z)), steps),
            target,
            DELTA,
        )

    def cold_calibration() -> float:
        clear_calibration_caches()  # the first request with these inputs, not a cache hit
        return poisson_noise_multiplier(target, DELTA, q=q, steps=steps, relation="add_remove").noise

    report(
        f"calibrate DP-SGD z (q={q}, T={steps}, ε={target})",
        median_seconds(cold_calibration, args.repeats),
        median_seconds(dp_accounting_calibration, args.repeats),
    )
    report(
        "Poisson-subsampled Gaussian curve (156 orders)",
        median_seconds(
            lambda: float(poisson_subsampled_gaussian_rdp(DEFAULT_GRID, q=q, noise_multiplier=1.1)[50]),
            args.repeats * 4,
        ),
        median_seconds(
            lambda: float(rdp_privacy_accountant._compute_rdp_poisson_subsampled_gaussian(q, 1.1, orders)[50]),
            args.repeats * 4,
        ),
    )


if __name__ == "__main__":
    main()
