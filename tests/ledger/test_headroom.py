"""The largest admissible ε (issue 36, item 4): the search answers with a target ε the ledger's own admission test
admits, 1 % more is refused when admission is monotone, a non-monotone cost or a plan refused at some ε never makes
it report a refused value, nothing admissible is 0, and it plans at most MAX_PLANS candidates. The exactness is
checked through ``reserve`` on SQLite and PostgreSQL with real solvers."""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable

import pytest
from ledger_helpers import DELTA, make_dataset

from privfit.db import Budget, Database
from privfit.errors import ParameterError
from privfit.ledger import BudgetExceededError, Gates, create_budget, reserve
from privfit.ledger.headroom import MAX_PLANS, Headroom, largest_admissible_epsilon, round_down
from privfit.ledger.ledger import _cache, _committed, budget_filter
from privfit.privacy import DEFAULT_GRID, PrivacyCost, gaussian_rdp
from privfit.solvers import PublicMetadata
from privfit.solvers.registry import get_solver

LOWEST = 1e-6
META = PublicMetadata(n=5000, d=5, row_norm_bound=1.0, label_bound=1.0)


class _Detached:
    """A stand-in session for :func:`create_budget`: the budget row is built, never written."""

    def add(self, row: object) -> None:
        pass


def _budget(epsilon_max: float = 1.0, committed: PrivacyCost | None = None) -> Budget:
    budget = create_budget(_Detached(), "d", epsilon_max, DELTA, DEFAULT_GRID)  # type: ignore[arg-type]
    if committed is not None:
        _cache(budget, _committed(budget) + committed)
    return budget


def _admits(budget: Budget, cost_at: Callable[[float], PrivacyCost], epsilon: float) -> bool:
    """The ledger's admission test (``_admit``) for the fit at ``epsilon``; a plan refused at ``epsilon`` is not."""
    try:
        cost = cost_at(epsilon)
    except ParameterError:
        return False
    return not budget.filter_note and budget_filter(budget).measure(_committed(budget) + cost).share <= 1.0


def gaussian(epsilon: float) -> PrivacyCost:
    """A Gaussian fit whose noise shrinks as ε grows (σ = 3/ε): its share grows like ε²."""
    return PrivacyCost(gaussian_rdp(DEFAULT_GRID, sigma=3.0 / epsilon))


def pure(epsilon: float) -> PrivacyCost:
    """A pure ε-DP release: the order-∞ certificate's share is ε/ε_max."""
    return PrivacyCost.pure_dp(epsilon)


def _using(epsilon_max: float, cost_at: Callable[[float], PrivacyCost], share: float) -> PrivacyCost:
    """A cost of ``cost_at``'s kind that uses ``share`` of an empty budget of ``epsilon_max`` (shares of these
    kinds grow like ε² and ε)."""
    measure = budget_filter(_budget(epsilon_max)).measure
    unit = measure(cost_at(1.0)).share
    return cost_at(math.sqrt(share / unit) if cost_at is gaussian else share / unit)


def _search(budget: Budget, cost_at: Callable[[float], PrivacyCost], highest: float | None = None) -> Headroom:
    top = budget.epsilon_max if highest is None else highest
    return largest_admissible_epsilon(Gates(budget), cost_at, lowest=LOWEST, highest=top)


@pytest.mark.parametrize("value", [1.0, 0.123456789, 9.99999, 1e-6, 3.0e-5, 42.42424242, 0.1 + 0.2])
def test_round_down_keeps_four_significant_digits_and_never_rounds_up(value):
    rounded = round_down(value)
    assert rounded <= value
    assert rounded > value * (1.0 - 1e-3)  # at most one unit of the 4th digit
    assert float(f"{rounded:.4g}") == rounded  # exactly four significant digits (or fewer)


@pytest.mark.parametrize("cost_at", [gaussian, pure], ids=["gaussian", "pure"])
@pytest.mark.parametrize("committed", [None, 0.2, 0.6, 0.95])
@pytest.mark.parametrize("epsilon_max", [0.5, 1.0, 3.0])
def test_the_value_is_admitted_and_one_percent_more_is_refused(cost_at, committed, epsilon_max):
    budget = _budget(epsilon_max, None if committed is None else _using(epsilon_max, cost_at, committed))
    found = _search(budget, cost_at)
    assert found.epsilon > 0 and found.reason is None and found.plans <= MAX_PLANS
    assert _admits(budget, cost_at, found.epsilon)
    if found.at_upper_end:
        assert found.epsilon == round_down(epsilon_max)
    else:  # the bracket is within 1e-4 and the rounding loses at most 1e-3: 0.2 % more is already refused
        assert not _admits(budget, cost_at, found.epsilon * 1.002)
        assert not _admits(budget, cost_at, found.epsilon * 1.01)


def test_the_upper_end_is_epsilon_max_and_the_filter_rounds_against_the_user():
    """A fit that costs half its target in pure ε may have ε_max (the search's upper end, found in one plan); a pure
    fit of exactly ε_max is refused (shares are rounded up by 1e-12), so its value is the next 4-digit number."""

    def half(epsilon: float) -> PrivacyCost:
        return pure(epsilon / 2.0)

    assert _search(_budget(2.0), half) == Headroom(2.0, None, True, 1)
    found = _search(_budget(2.0), pure)
    assert found.epsilon == 1.999 and not found.at_upper_end and not _admits(_budget(2.0), pure, 2.0)


def test_nothing_admissible_is_zero_and_says_why():
    closed = _budget()
    closed.filter_note = "closed by migration 0005: the committed fits exceed the filter"
    assert _search(closed, gaussian) == Headroom(0.0, "closed", False, 0)
    assert _search(_budget(1.0, pure(1.5)), gaussian) == Headroom(0.0, "exhausted", False, 0)  # share > 1 already

    def huge(epsilon: float) -> PrivacyCost:  # a fit that costs more than the budget at every ε
        return pure(2.0 + epsilon)

    found = _search(_budget(1.0), huge)
    assert found.epsilon == 0.0 and found.reason == "none" and found.plans <= MAX_PLANS
    assert not _admits(_budget(1.0), huge, LOWEST)


def test_a_plan_refused_above_some_epsilon_is_not_reported():
    """``resque_localized`` refuses large ε (its step count grows with ε): the value is one that plans."""

    def capped(epsilon: float) -> PrivacyCost:
        if epsilon > 0.05:
            raise ParameterError("steps", "would run too many steps")
        return gaussian(epsilon)

    budget = _budget(1.0)
    found = _search(budget, capped)
    assert 0.0 < found.epsilon <= 0.05 and _admits(budget, capped, found.epsilon)
    assert found.epsilon > 0.05 * (1 - 2e-3)  # the search still closes in on the boundary of what plans


def test_a_non_monotone_cost_never_makes_it_report_a_refused_value():
    """A cost that is not monotone in ε (here: refused on a band of ε, and at every ε with at most 4 significant
    digits — so rounding down would land on a refused value): the value returned is admitted regardless."""

    def odd(epsilon: float) -> PrivacyCost:
        if round_down(epsilon) == epsilon or 0.3 < epsilon < 0.4:
            return pure(10.0)
        return gaussian(epsilon)

    budget = _budget(1.0)
    found = _search(budget, odd)
    assert found.epsilon > 0 and _admits(budget, odd, found.epsilon) and found.plans <= MAX_PLANS
    assert round_down(found.epsilon) != found.epsilon  # the rounded value was refused: the tested one is returned


def test_it_plans_at_most_max_plans_candidates_and_each_once():
    calls: list[float] = []

    def counted(epsilon: float) -> PrivacyCost:
        calls.append(epsilon)
        # a staircase: admission flips many times, so no interpolation converges
        return pure(0.0) if math.floor(epsilon * 1000) % 2 == 0 else pure(5.0)

    found = _search(_budget(1.0), counted)
    assert len(calls) == len(set(calls)) == found.plans <= MAX_PLANS
    assert _admits(_budget(1.0), counted, found.epsilon)


@pytest.mark.parametrize("committed", [None, 0.5])
def test_a_search_starts_no_plan_once_its_cpu_time_is_spent(committed):
    """Each plan here burns 20 ms of the thread's CPU time and the search may use 30 ms: it stops after two plans
    (plus the test of its rounded value), not at MAX_PLANS, and what it answers is still admitted."""
    calls: list[float] = []

    def slow(epsilon: float) -> PrivacyCost:
        calls.append(epsilon)
        until = time.thread_time() + 0.02
        while time.thread_time() < until:
            pass
        return gaussian(epsilon)

    budget = _budget(1.0, None if committed is None else _using(1.0, gaussian, committed))
    found = largest_admissible_epsilon(Gates(budget), slow, lowest=LOWEST, highest=1.0, cpu_seconds=0.03)
    assert found.plans == len(calls) <= 3 and found.epsilon > 0 and _admits(budget, gaussian, found.epsilon)
    unbounded = _search(budget, gaussian)
    assert unbounded.plans > found.plans and found.epsilon <= unbounded.epsilon


def test_typical_searches_take_a_few_plans():
    """The cost bound in practice: Gaussian and pure fits on partly used budgets need at most 10 plans."""
    for cost_at in (gaussian, pure):
        for committed in (None, 0.3, 0.9):
            spent = None if committed is None else _using(1.0, cost_at, committed)
            assert _search(_budget(1.0, spent), cost_at).plans <= 10


@pytest.mark.parametrize(
    ("solver", "model", "committed"),
    [("dp_gd", "logistic", 0.6), ("objective_perturbation", "logistic", 0.5), ("dp_sgd", "logistic", 0.3)],
)
def test_reserve_admits_exactly_the_reported_value_and_refuses_one_percent_more(database: Database, solver, model,
                                                                                committed):  # fmt: skip
    """On SQLite and PostgreSQL: with a reservation already committed (a queued fit counts as now), the value the
    search reports for a real solver is admitted by ``reserve`` and 1 % more is refused by it."""
    dataset_id, (first, refused, admitted) = make_dataset(database, epsilon_max=1.0, jobs=3)
    plans = get_solver(solver)

    def cost_at(epsilon: float) -> PrivacyCost:
        return plans.plan({"model": model}, META, target_epsilon=epsilon, delta=DELTA, grid=DEFAULT_GRID).cost

    with database.write() as session:
        reserve(session, dataset_id, first, cost_at(committed))
    with database.read() as session:
        budget = session.get_one(Budget, dataset_id)
        found = _search(budget, cost_at)
    assert 0.0 < found.epsilon < 1.0 and not found.at_upper_end
    with database.write() as session, pytest.raises(BudgetExceededError):
        reserve(session, dataset_id, refused, cost_at(found.epsilon * 1.01))
    with database.write() as session:
        reserve(session, dataset_id, admitted, cost_at(found.epsilon))
    with database.read() as session:  # and what is left now admits less than before
        after = _search(session.get_one(Budget, dataset_id), cost_at)
    assert after.epsilon < found.epsilon


def test_the_refusal_states_the_value_in_its_message_and_problem():
    error = BudgetExceededError(
        requested_epsilon=0.9, committed_epsilon=0.5, total_epsilon=1.4, epsilon_max=1.0, delta_max=DELTA,
        reason="epsilon", delta_used_after=0.0, approximate_delta=1e-7, slack_delta=5e-8, delta_parts_after=0.0,
        slack_used_after=0.0,
    )  # fmt: skip
    assert "max_admissible_epsilon" not in error.problem_fields()  # an evaluation's refusal does not state it
    error.state_headroom(0.4321)
    assert error.problem_fields()["max_admissible_epsilon"] == 0.4321
    assert str(error).endswith("could have now is 0.4321")
    error.state_headroom(0.0)
    assert "no target ε of this solver, model and parameters is admissible now" in str(error)


def test_the_search_reads_the_budget_only(database: Database):
    """Nothing is written: the budget row's version and committed cost are unchanged by a search."""
    dataset_id, _ = make_dataset(database, epsilon_max=1.0)
    with database.read() as session:
        budget = session.get_one(Budget, dataset_id)
        version, committed = budget.version, list(budget.committed_rdp)
        _search(budget, gaussian)
    with database.read() as session:
        again = session.get_one(Budget, dataset_id)
        assert (again.version, list(again.committed_rdp)) == (version, committed)
    assert uuid.UUID(dataset_id)
