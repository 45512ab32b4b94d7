"""How many fits fit into a budget under each admission rule: the cost of a filter valid under adaptivity.

    python benchmarks/filter_capacity.py [--epsilon 1] [--delta 1e-6]

Counts the fits admitted one after another into (ε_max, δ_max) for several workloads, each fit's cost given by the
real solver's cost function on UCI Adult's public metadata (n = 30162 rows, d = 104 encoded columns, declared
row-norm bound): ``dp_gd`` and ``dp_sgd`` calibrated to ε = 0.1·ε_max (at δ_max; ``dp_gd`` on the exact Gaussian
curve), ``dp_gd`` with the same steps at the noise its RDP calibration gave before issue 40 ("RDP σ": the filters
compared at equal noise per fit), Laplace fits at ε₀ = 0.1·ε_max
(``dp_distributed`` with explicit noise), pure ε₀ = 0.1·ε_max fits (``output_perturbation`` with Laplace noise),
``objective_perturbation`` (Gaussian variant: its RDP curve, formula v2, and a small Gaussian output step) at
0.1·ε_max and 0.5·ε_max, and a mixed workload cycling through dp_gd, dp_sgd, Laplace and pure fits. Rules,
measured in the same run:

* ``previous``: admit while the committed curve converts to ≤ ε_max at δ_max at SOME order (no proof under
  adaptivity; what privfit did before #18);
* ``filter`` (privfit's, :mod:`privfit.privacy.filter`): the GDP certificate at δ_G = δ_R/2 (δ_R = 0.9 δ_max), α* at
  99% of δ_O = δ_R/2, the grid order nearest 10·α* at 1%, the pure-ε certificate, δ_A = 0.1 δ_max for δ-only parts;
  the same with other GDP shares δ_G/δ_R (0: the v2 filter of budgets created before the GDP certificate);
* candidates measured to choose it: α* alone with and without the pure certificate, with δ_A = 0, and 2 or 3 orders
  sharing δ_R equally (α*, 2α*, α*/2).

With ``--preprocessing-share s`` (default 0.05; 0 for none) a last row counts the fits privfit's filter admits after
a dataset's private preprocessing at upload took share s of the budget (:mod:`privfit.datasets.preprocessing`: noisy
histograms of Adult's 6 numeric columns, a Gaussian curve; it has no pure-ε bound, so the order-∞ certificate no
longer applies to what follows).

Prints the counts and their ratio to ``previous``. No thresholds; ``docs/privacy.md`` quotes a recorded run.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

import numpy as np

from privfit.datasets.preprocessing import BINS
from privfit.privacy import DEFAULT_GRID, DeltaAllowance, PrivacyCost, PrivacyFilter, gaussian_sigma
from privfit.privacy.filter import conversion_offset
from privfit.privacy.histogram import histogram_release_cost, variance_for_share
from privfit.solvers.base import PublicMetadata
from privfit.solvers.registry import get_solver

ADULT_META = PublicMetadata(n=30162, d=104, row_norm_bound=math.sqrt(14.0))
ADULT_NUMERIC_COLUMNS = 6  # age, fnlwgt, education-num, capital-gain, capital-loss, hours-per-week
Rule = Callable[[PrivacyCost], bool]
GDP_SHARES = (0.0, 0.1, 0.25, 0.5, 0.75)  # δ_G / δ_R of the GDP certificate; 0 is the v2 filter (no GDP certificate)


Workload = Callable[[int, PrivacyCost], PrivacyCost]  # (fits so far, the committed cost) -> the next fit's cost


def workloads(epsilon: float, delta: float, allowance: Callable[[PrivacyCost], DeltaAllowance]) -> dict[str, Workload]:
    def plan(solver: str, params: dict[str, object], target: float | None = None,
             committed: PrivacyCost | None = None) -> PrivacyCost:  # fmt: skip
        share = None if committed is None else allowance(committed)
        return get_solver(solver).plan(params, ADULT_META, target_epsilon=target, delta=delta,
                                       delta_allowance=share).cost  # fmt: skip

    tenth = 0.1 * epsilon
    gd, sgd = plan("dp_gd", {}, tenth), plan("dp_sgd", {}, tenth)
    # dp_gd at the noise of its RDP calibration (before issue 40): the filters compared at equal noise per fit
    steps = get_solver("dp_gd").plan({}, ADULT_META, target_epsilon=tenth, delta=delta).resolved.steps
    rdp_noise = gaussian_sigma(tenth, delta, count=steps).noise
    gd_rdp_noise = plan("dp_gd", {"steps": steps, "noise_multiplier": rdp_noise})
    laplace = plan("dp_distributed", {"noise_multiplier": 1.0 / tenth})
    pure = plan("output_perturbation", {"noise": "laplace", "noise_multiplier": 1.0 / tenth})
    cycle = [gd, sgd, laplace, pure]
    return {
        "dp_gd": lambda n, committed: gd, "dp_gd RDP σ": lambda n, committed: gd_rdp_noise,
        "dp_sgd": lambda n, committed: sgd, "Laplace": lambda n, committed: laplace,
        "pure": lambda n, committed: pure,
        "objective .1": lambda n, committed: plan("objective_perturbation", {}, tenth, committed),
        "objective .5": lambda n, committed: plan("objective_perturbation", {}, 0.5 * epsilon, committed),
        "mixed": lambda n, committed: cycle[n % len(cycle)],
    }  # fmt: skip


def previous_rule(epsilon: float, delta: float) -> Rule:
    return lambda cost: cost.epsilon(delta).epsilon <= epsilon


def union_rule(epsilon: float, delta: float, *, orders: int, pure: bool, approximate_share: float) -> Rule:
    """Pinned orders (the Gaussian-exhausting α*, then 2α*, α*/2) sharing δ_R equally, ± the pure certificate."""
    base = PrivacyFilter.for_budget(epsilon, delta, DEFAULT_GRID, approximate_share * delta, gdp_share=0.0)
    grid = np.asarray(DEFAULT_GRID.orders)
    picks = [base.order, base.order * 2.0, base.order / 2.0][:orders]
    indices = sorted({int(np.argmin(np.abs(grid - a))) for a in picks})
    share = base.rdp_delta / len(indices)
    budgets = [(i, epsilon - conversion_offset(float(grid[i]), share)) for i in indices]

    def admits(cost: PrivacyCost) -> bool:
        if not base.delta_fits(cost):  # (a1) and (a2)
            return False
        if pure and cost.pure_epsilon <= epsilon:
            return True
        return any(cost.rdp[i] <= budget for i, budget in budgets)

    return admits


def count(admits: Rule, next_fit: Workload, limit: int = 100_000, start: PrivacyCost | None = None) -> int:
    total = PrivacyCost.zero(DEFAULT_GRID) if start is None else start
    for n in range(limit):
        candidate = total + next_fit(n, total)
        if not admits(candidate):
            return n
        total = candidate
    return limit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument("--preprocessing-share", type=float, default=0.05)
    args = parser.parse_args()
    eps, delta = args.epsilon, args.delta
    chosen = PrivacyFilter.for_budget(eps, delta, DEFAULT_GRID)
    chosen_share = chosen.gdp_delta / (chosen.delta_max - chosen.approximate_delta)
    print(f"budget (ε, δ) = ({eps:g}, {delta:g}); privfit's filter: orders {chosen.orders} at δ "
          f"{tuple(f'{d:.3g}' for d in chosen.order_deltas)}, δ_A = {chosen.approximate_delta:.3g}")  # fmt: skip
    rules: dict[str, Rule] = {
        "previous (some order; no proof)": previous_rule(eps, delta),
        "filter: α*, 10α* (1%), pure, GDP": chosen.admits,
        **{
            f"  with δ_G = {share:g} δ_R": PrivacyFilter.for_budget(eps, delta, DEFAULT_GRID, gdp_share=share).admits
            for share in GDP_SHARES
            if share != chosen_share
        },
        "α* + pure": union_rule(eps, delta, orders=1, pure=True, approximate_share=0.1),
        "α* only": union_rule(eps, delta, orders=1, pure=False, approximate_share=0.1),
        "α* + pure, δ_A = 0": union_rule(eps, delta, orders=1, pure=True, approximate_share=0.0),
        "α*, 2α* (1/2 each), pure": union_rule(eps, delta, orders=2, pure=True, approximate_share=0.1),
        "α*, 2α*, α*/2 (1/3 each), pure": union_rule(eps, delta, orders=3, pure=True, approximate_share=0.1),
    }
    loads = workloads(eps, delta, chosen.allowance)
    print(f"{'rule':<32}" + "".join(f"{name:>15}" for name in loads))
    reference = {name: count(rules["previous (some order; no proof)"], load) for name, load in loads.items()}
    for label, rule in rules.items():
        cells = []
        for name, load in loads.items():
            fits = count(rule, load)
            cells.append(f"{fits:>6} ({fits / reference[name]:4.2f}x)")
        print(f"{label:<32}" + "".join(f"{cell:>15}" for cell in cells))
    share = args.preprocessing_share
    variance = variance_for_share(ADULT_NUMERIC_COLUMNS, chosen, share, bins=BINS) if share > 0 else None
    if variance is not None:
        start = histogram_release_cost(ADULT_NUMERIC_COLUMNS, variance, DEFAULT_GRID, bins=BINS)
        cells = []
        for name, load in loads.items():
            fits = count(chosen.admits, load, start=start)
            cells.append(f"{fits:>6} ({fits / reference[name]:4.2f}x)")
        print(f"{f'filter after preprocessing {share:g}':<32}" + "".join(f"{cell:>15}" for cell in cells))


if __name__ == "__main__":
    main()
