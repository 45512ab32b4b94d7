"""The largest ε a fit request could have now (issue 36, item 4): the API's side of :mod:`privfit.ledger.headroom`.

Every fit estimate answers ``max_admissible_epsilon``, and a fit the ledger refuses (409) carries it in its problem
document: the largest target ε at which the dataset's privacy filter would admit the same solver, model and
parameters now, found by the ledger's own admission test (:func:`privfit.ledger.headroom.largest_admissible_epsilon`).
A request that gives the solver's explicit noise parameter instead of a target ε is searched without it: the value
is the largest ``privacy.epsilon`` to send instead.

**Cost.** The search plans up to :data:`~privfit.ledger.headroom.MAX_PLANS` candidate ε (typically 5–8; planning
is what an estimate pays on a plan-cache miss, issue 35). Its result is a pure function of public inputs — the
request's solver, model and parameters, the operator limits, the dataset's public metadata, the budget's filter and
δ allowance, the noise sampler, and the committed cost of the ledger — so it is cached by exactly those
(:class:`HeadroomCache`, like the :class:`~privfit.api.planning.PlanCache`): the estimates an analyst sends while
trying target ε on an unchanged ledger pay for one search, and a cached answer is the one a miss computes. The
candidates are planned directly (they do not enter the plan cache, whose entries are requests people sent).
``benchmarks/headroom_cost.py`` measures the ratio of an estimate's cost with and without the search.

**Privacy.** Nothing in the key or the search reads a row or a value computed from rows (DESIGN §1.3–1.4); the
committed cost is the sum of admitted fits' public costs, which the budget view shows.
"""

from __future__ import annotations

import json
from typing import Any

from privfit.ledger import Gates
from privfit.ledger.headroom import Headroom, largest_admissible_epsilon
from privfit.privacy import DeltaAllowance, PrivacyCost, get_grid
from privfit.privacy.noise import current_sampler
from privfit.solvers.base import MIN_EPSILON, AnySolver, PublicMetadata

from .lru import LruCache
from .planning import filters_key

MAX_TARGET_EPSILON = 100.0
"""The largest target ε a fit request may give (``privacy.epsilon``); the search's upper end is min(ε_max, this)."""

HEADROOM_CACHE_SIZE = 1024
"""Searches kept per process; an entry is its key (one committed curve) and a few numbers."""

MAX_ADMISSIBLE_EPSILON_HELP = (
    "The largest target ε (privacy.epsilon) at which the dataset's privacy filter would admit this solver, model and "
    "parameters now, with every committed fit (queued ones included) counted: found by the ledger's own admission "
    "test (a search over ε), rounded down to 4 significant digits, so a fit at exactly this ε is admitted while "
    "nothing changes the ledger. At most the budget's ε_max (the search's upper end; when ε_max itself is admitted "
    "a slightly larger target may be too). 0 when nothing is admissible now (the budget is closed or used up, or "
    "even ε = 1e-6 is refused). For a request with explicit noise, the ε to send instead of it. Computed from "
    "public inputs only (the parameters, the dataset's public metadata and the ledger's committed costs), never "
    "from rows."
)


class HeadroomCache(LruCache[Headroom]):
    """The :class:`~privfit.ledger.headroom.Headroom` of searches by their public inputs (see :func:`fit_headroom`;
    at most ``size`` entries)."""

    def __init__(self, size: int = HEADROOM_CACHE_SIZE) -> None:
        super().__init__(size)


def search_params(solver: AnySolver, params: dict[str, Any]) -> dict[str, Any]:
    """The request's parameters as the search plans them: without the solver's explicit noise parameter (a target
    ε replaces it; exactly one of the two may be given)."""
    explicit = solver.explicit_noise
    if explicit is None or params.get(explicit) is None:
        return params
    return {name: value for name, value in params.items() if name != explicit}


def fit_headroom(
    cache: HeadroomCache,
    solver: AnySolver,
    params: dict[str, Any],
    meta: PublicMetadata,
    gates: Gates,
    allowance: DeltaAllowance | None,
    limits: tuple[tuple[str, Any], ...],
) -> Headroom:
    """The largest admissible target ε of a fit of ``solver`` (with its operator ``limits`` applied) with ``params``
    (its model included) on the dataset of ``gates.budget`` now, by its filter and the caller's allocation's if it
    has one, from ``cache`` or searched (module docstring). ``allowance`` is the δ allowance for a solver with
    δ-only parts, else None."""
    budget = gates.budget
    searched = search_params(solver, params)
    # the cache key: every public input of the search — the solver and its limits, the parameters searched
    # (canonical JSON), the metadata, each filter (the budget's, the allocation's) and its committed state (curve,
    # δ parts, slacks, pure bound, GDP μ², closing note), the δ allowance and the noise sampler in force
    filters = filters_key(gates)
    canonical = json.dumps(searched, sort_keys=True, separators=(",", ":"))
    key = (solver.name, canonical, meta, filters, allowance, limits, current_sampler())
    grid = get_grid(budget.grid_name)

    def cost_at(epsilon: float) -> PrivacyCost:
        plan = solver.plan(searched, meta, target_epsilon=epsilon, delta=budget.delta_max, grid=grid,
                           delta_allowance=allowance)  # fmt: skip
        return plan.cost

    def search() -> Headroom:
        return largest_admissible_epsilon(
            gates, cost_at, lowest=MIN_EPSILON, highest=min(budget.epsilon_max, MAX_TARGET_EPSILON)
        )

    return cache.get(key, search)
