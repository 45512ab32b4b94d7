"""A bounded cache of fit plans, keyed by every public input of the plan (issue 23: the request path).

Planning a fit (:meth:`privfit.solvers.base.Solver.plan`: validate, resolve — calibrate the noise — and cost) and
rendering what an estimate or an admission returns about it (the cost as JSON with its 156-order curve, the
resolved settings, the outlook) is a pure function of public inputs: the solver and its operator limits, the
request's model and parameters, the target ε, the dataset's public metadata, and the dataset's budget (δ_max, the
order grid, the filter the cost's share is measured by and, for solvers with
:attr:`~privfit.solvers.base.Solver.uses_delta_parts`, the δ allowance left by the committed fits). It reads no
row and no private value, so the cache key is made of exactly those inputs and a hit returns the very objects a
miss computes: cached and uncached answers are identical (``tests/api/test_api_request_path.py`` pins it), and what
an analyst observes still depends on public inputs only.

A plan that fails (a :class:`~privfit.errors.ParameterError`) is not cached: the error is raised again on the
next request. Entries are shared between threads and treated as immutable: the cost's curve is made read-only,
and the JSON members are only ever serialised (into a response or a JSON column), never modified.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from privfit.db import Budget
from privfit.db.models import FilterColumns
from privfit.ledger import Gates
from privfit.privacy import DeltaAllowance
from privfit.privacy.noise import current_sampler
from privfit.solvers.base import FitPlan, PublicMetadata

from .lru import LruCache

#: Entries kept per process; one entry is a few kilobytes (a 156-order curve twice: as floats and as JSON).
PLAN_CACHE_SIZE = 1024


@dataclass(frozen=True)
class PlannedFit:
    """A plan and what the API shows of it, computed once per distinct public input."""

    plan: FitPlan
    cost: dict[str, Any]  #: :func:`privfit.api.routers.fits.cost_json` of the plan's cost against the budget
    settings: dict[str, Any]  #: the resolved settings as JSON (the fit's ``settings``, the job's ``params``)
    outlook: dict[str, Any] | None  #: the noise outlook as JSON (None when the solver has none)
    stored_outlook: dict[str, Any] | None  #: the outlook a fit resource shows, recomputed from ``settings``


def budget_key(budget: FilterColumns) -> tuple[Hashable, ...]:
    """The public members of ``budget`` a plan and its cost JSON depend on: δ_max, the grid and the filter (not
    the committed cost, which only reaches a plan through the δ allowance)."""
    return (
        budget.epsilon_max, budget.delta_max, budget.grid_name, tuple(budget.filter_orders),
        tuple(budget.filter_order_deltas), budget.filter_approximate_delta, budget.filter_slack_delta,
        budget.filter_gdp_delta, budget.filter_version,
    )  # fmt: skip


def plan_key(
    solver: str,
    model: str,
    params: dict[str, Any],
    target_epsilon: float | None,
    meta: PublicMetadata,
    budget: Budget,
    allowance: DeltaAllowance | None,
    limits: tuple[tuple[str, Any], ...],
) -> tuple[Hashable, ...]:
    """The cache key of a plan: every public input, the parameters as canonical JSON (so ``1`` and ``1.0`` and
    ``true`` stay distinct, as the parameter parser sees them), and the noise sampler in force (plans resolve
    differently under the exact one: :mod:`privfit.privacy.noise`). ``allowance`` must be None for a solver
    without δ-only parts (the plan does not read it)."""
    canonical = json.dumps(params, sort_keys=True, separators=(",", ":"))
    sampler = current_sampler()
    return (solver, model, canonical, target_epsilon, meta, budget_key(budget), allowance, limits, sampler)


class PlanCache(LruCache[PlannedFit]):
    """The :class:`PlannedFit` of requests by :func:`plan_key` (at most ``size`` entries)."""

    def __init__(self, size: int = PLAN_CACHE_SIZE) -> None:
        super().__init__(size)

    def get(self, key: tuple[Hashable, ...], compute: Callable[[], PlannedFit]) -> PlannedFit:
        """The entry of ``key``, computed by ``compute()`` (outside the lock) on a miss; errors are not cached."""

        def frozen() -> PlannedFit:
            entry = compute()
            entry.plan.cost.rdp.flags.writeable = False  # shared between requests: nobody may modify it in place
            return entry

        return super().get(key, frozen)


def filters_key(gates: Gates) -> tuple[Hashable, ...]:
    """Every filter a caller's fit must pass (the dataset's budget, then the caller's allocation if any) as read:
    its public parameters (:func:`budget_key`) and its committed state — the cached committed curve, δ parts,
    slacks, pure bound and GDP μ², and the closing note. Whatever a dry run or a headroom search answers about these
    filters is a function of this key (and of the fit's plan): the part of a cache key that changes with the
    ledger. Reading it from the rows just read, in the request's own transaction, keeps a cached answer exactly the
    one computed from those rows; nothing is shared between processes."""
    return tuple(
        (budget_key(row), tuple(row.committed_rdp), row.committed_extra_delta, row.committed_approx_delta,
         row.committed_pure_epsilon, row.committed_gdp_mu_squared, row.filter_note)
        for row in gates.rows()
    )  # fmt: skip


#: Estimate answers kept per process; one entry is a rendered answer of a few kilobytes.
ESTIMATE_CACHE_SIZE = 1024


class EstimateCache(LruCache[bytes]):
    """The rendered body of ``POST /v1/fits/estimate`` by every input it is computed from (at most ``size``).

    The answer is the plan's JSON (:class:`PlannedFit`, itself a function of :func:`plan_key`), the dry run of the
    plan's cost against the filters of :func:`filters_key` (:func:`privfit.ledger.estimate_for`), the headroom
    search against the same filters (:func:`privfit.api.headroom.fit_headroom`), the dataset's id and whether the
    request asked for the RDP curve. The key is exactly those inputs, so a hit answers the bytes a miss renders for
    the same committed ledger, and a fit admitted or released anywhere (another thread or API process) changes the
    committed state the next request reads, hence the key: a cached answer is never one of an older ledger than the
    one the request read. It reads no row of the dataset: every member is a function of public inputs (DESIGN
    §1.3–1.4). A dry run changes nothing; admission decides again under the budget's lock (:mod:`privfit.ledger`)."""

    def __init__(self, size: int = ESTIMATE_CACHE_SIZE) -> None:
        super().__init__(size)
