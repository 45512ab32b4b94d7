"""How many fits fit into a budget under each admission rule: the cost of a filter valid under adaptivity.

    python benchmarks/filter_capacity.py [--epsilon 1] [--delta 1e-6]

Counts the fits admitted one after another into (ε_max, δ_max) for four workloads, each fit's cost given by the real
solver's cost function on UCI Adult's public metadata (n = 30162 rows, d = 104 encoded columns, declared row-norm
bound): ``dp_gd`` calibrated to ε = 0.1 (at δ_max), ``dp_sgd`` at ε = 0.1, Laplace fits at ε₀ = 0.1
(``dp_distributed`` with explicit noise), pure ε₀ = 0.1 fits (``output_perturbation`` with Laplace noise), and a mixed
workload cycling through the four. Rules, measured in the same run:

* ``previous``: admit while the committed curve converts to ≤ ε_max at δ_max at SOME order (no proof under
  adaptivity; what privfit did before #18);
* ``filter`` (privfit's, :mod:`privfit.privacy.filter`): one pinned order α* at δ_R = 0.9 δ_max, the pure-ε
  certificate, δ_A = 0.1 δ_max for δ-only parts;
* candidates measured to choose it: the same without the pure certificate; with δ_A = 0; with 2 and 3 pinned
  orders sharing δ_R (a union bound over the orders: each at δ_R/k).

Prints the counts and their ratio to ``previous``. No thresholds; the README quotes a recorded run.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

import numpy as np

from privfit.privacy import DEFAULT_GRID, PrivacyCost, PrivacyFilter
from privfit.privacy.filter import conversion_offset
from privfit.solvers.base import PublicMetadata
from privfit.solvers.registry import get_solver

ADULT_META = PublicMetadata(n=30162, d=104, row_norm_bound=math.sqrt(14.0))
Rule = Callable[[PrivacyCost], bool]


def workloads(delta: float) -> dict[str, list[PrivacyCost]]:
    def plan(solver: str, params: dict[str, object], epsilon: float | None = None) -> PrivacyCost:
        return get_solver(solver).plan(params, ADULT_META, target_epsilon=epsilon, delta=delta).cost

    gd = plan("dp_gd", {}, 0.1)
    sgd = plan("dp_sgd", {}, 0.1)
    laplace = plan("dp_distributed", {"noise_multiplier": 10.0})
    pure = plan("output_perturbation", {"noise": "laplace", "noise_multiplier": 10.0})
    return {"dp_gd ε=0.1": [gd], "dp_sgd ε=0.1": [sgd], "Laplace ε₀=0.1": [laplace], "pure ε₀=0.1": [pure],
            "mixed": [gd, sgd, laplace, pure]}  # fmt: skip


def previous_rule(epsilon: float, delta: float) -> Rule:
    return lambda cost: cost.epsilon(delta).epsilon <= epsilon


def union_rule(epsilon: float, delta: float, *, orders: int, pure: bool, approximate_share: float) -> Rule:
    """Pinned orders (the Gaussian-exhausting α* and its neighbours by factors of 2) at δ_R/k each, ± pure."""
    base = PrivacyFilter.for_budget(epsilon, delta, DEFAULT_GRID, approximate_share * delta)
    grid = np.asarray(DEFAULT_GRID.orders)
    picks = [base.order, base.order * 2.0, base.order / 2.0][:orders]
    indices = sorted({int(np.argmin(np.abs(grid - a))) for a in picks})
    share = base.rdp_delta / len(indices)
    budgets = [(i, epsilon - conversion_offset(float(grid[i]), share)) for i in indices]

    def admits(cost: PrivacyCost) -> bool:
        if not base.delta_used(cost) <= base.approximate_delta:
            return False
        if pure and cost.pure_epsilon <= epsilon:
            return True
        return any(cost.rdp[i] <= budget for i, budget in budgets)

    return admits


def count(admits: Rule, cycle: list[PrivacyCost], limit: int = 100_000) -> int:
    total = PrivacyCost.zero(DEFAULT_GRID)
    for n in range(limit):
        candidate = total + cycle[n % len(cycle)]
        if not admits(candidate):
            return n
        total = candidate
    return limit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-6)
    args = parser.parse_args()
    eps, delta = args.epsilon, args.delta
    chosen = PrivacyFilter.for_budget(eps, delta, DEFAULT_GRID)
    print(f"budget (ε, δ) = ({eps:g}, {delta:g}); privfit's filter: α* = {chosen.order:g}, "
          f"δ_R = {chosen.rdp_delta:.3g}, δ_A = {chosen.approximate_delta:.3g}")  # fmt: skip
    rules: dict[str, Rule] = {
        "previous (some order; no proof)": previous_rule(eps, delta),
        "filter: α* + pure, δ_A = δ/10": chosen.admits,
        "α* only, δ_A = δ/10": union_rule(eps, delta, orders=1, pure=False, approximate_share=0.1),
        "α* + pure, δ_A = 0": union_rule(eps, delta, orders=1, pure=True, approximate_share=0.0),
        "2 orders + pure, δ_A = δ/10": union_rule(eps, delta, orders=2, pure=True, approximate_share=0.1),
        "3 orders + pure, δ_A = δ/10": union_rule(eps, delta, orders=3, pure=True, approximate_share=0.1),
    }
    loads = workloads(delta)
    print(f"{'rule':<34}" + "".join(f"{name:>16}" for name in loads))
    reference = {name: count(rules["previous (some order; no proof)"], cycle) for name, cycle in loads.items()}
    for label, rule in rules.items():
        cells = []
        for name, cycle in loads.items():
            fits = count(rule, cycle)
            cells.append(f"{fits:>7} ({fits / reference[name]:4.2f}x)")
        print(f"{label:<34}" + "".join(f"{cell:>16}" for cell in cells))


if __name__ == "__main__":
    main()
