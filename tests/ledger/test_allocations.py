"""Allocations (issue 37, item 1): an analyst's fit is admitted only if its allocation's filter and the dataset's
both admit it; on SQLite and PostgreSQL, with two analysts racing; and the exact adaptive game of
:mod:`adaptive_game` with two analysts — the dataset's guarantee holds whatever the allocations (even each given the
whole budget), each analyst's share stays within its allocation, and a broken variant (allocations without the
dataset's filter) is caught."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable

import pytest
from adaptive_game import laplace_loss_law, pure_then_gaussian
from ledger_helpers import DELTA, make_dataset
from sqlalchemy import select
from test_filter_adversarial import EPSILON0, POINTS, gaussian_fit, laplace_fit

from privfit.db import ApiKey, Budget, Database, Job
from privfit.db.models import Allocation
from privfit.ledger import BudgetExceededError, Gates, estimate, release, reserve, reserve_many
from privfit.ledger.allocations import AllocationError, allocation_statuses, create_allocation, delete_allocation
from privfit.ledger.ledger import _committed, budget_filter, committed_cost_from_entries
from privfit.privacy import DEFAULT_GRID, PrivacyCost, PrivacyFilter

FIT = PrivacyCost.pure_dp(0.1)


def analyst(db: Database, dataset_id: str, jobs: int) -> tuple[str, list[str]]:
    """A new analyst key and ``jobs`` queued job rows of it on the dataset."""
    key_id = str(uuid.uuid4())
    job_ids = [str(uuid.uuid4()) for _ in range(jobs)]
    with db.write() as session:
        session.add(ApiKey(id=key_id, prefix=key_id[:12], secret_hash=uuid.uuid4().hex * 2, role="analyst", name="a"))
        session.flush()
        for job_id in job_ids:
            session.add(Job(id=job_id, dataset_id=dataset_id, api_key_id=key_id, request_hash="0" * 64,
                            solver="dp_gd", model="logistic", params={}, cost={}))  # fmt: skip
    return key_id, job_ids


def allocation_row(db: Database, dataset_id: str, key_id: str) -> Allocation:
    with db.read() as session:
        return session.execute(
            select(Allocation).where(Allocation.dataset_id == dataset_id, Allocation.api_key_id == key_id)
        ).scalar_one()


def sequential_count(admits: Callable[[PrivacyCost], bool], cost: PrivacyCost) -> int:
    """How many fits of ``cost`` a filter admits one after another."""
    count = 0
    while admits(cost * (count + 1)):
        count += 1
    return count


def test_a_fit_must_pass_both_filters_and_the_caches_follow_releases(database: Database):
    dataset_id, _ = make_dataset(database, epsilon_max=1.0)
    key_a, jobs_a = analyst(database, dataset_id, 12)
    key_b, jobs_b = analyst(database, dataset_id, 3)
    with database.write() as session:
        reserve(session, dataset_id, jobs_a[0], FIT, spender=key_a)  # before the allocation: counted by it
        create_allocation(session, dataset_id, key_a, 0.35, DELTA)
    allowed = sequential_count(PrivacyFilter.for_budget(0.35, DELTA, DEFAULT_GRID).admits, FIT)
    assert allowed == 3
    admitted = 1
    for job_id in jobs_a[1:]:
        try:
            with database.write() as session:
                reserve(session, dataset_id, job_id, FIT, spender=key_a)
            admitted += 1
        except BudgetExceededError as refused:
            assert refused.scope == "allocation" and refused.epsilon_max == 0.35
            assert "your allocation" in str(refused) and refused.problem_fields()["scope"] == "allocation"
            break
    assert admitted == allowed
    with database.read() as session:
        dry = estimate(session, dataset_id, FIT, key_a)
        assert not dry.admissible and dry.refusal_reason == "allocation" and dry.allocation is not None
        assert estimate(session, dataset_id, FIT, key_b).admissible  # B has no allocation: the dataset's alone
        assert estimate(session, dataset_id, FIT, key_b).allocation is None
    with database.write() as session:  # a queued fit of A cancelled: both caches drop it
        release(session, dataset_id, jobs_a[2])
        reserve(session, dataset_id, jobs_a[3], FIT, spender=key_a)  # room again
    row = allocation_row(database, dataset_id, key_a)
    with database.read() as session:
        budget = session.get_one(Budget, dataset_id)
        expected = committed_cost_from_entries(session, budget, spender=key_a)
        assert _committed(row).rdp.tolist() == expected.rdp.tolist()
        assert _committed(row).pure_epsilon == pytest.approx(expected.pure_epsilon) == pytest.approx(0.3)
        [status] = allocation_statuses(session, dataset_id, key_a)
        assert status.reserved_epsilon > 0 and status.remaining_epsilon == pytest.approx(0.05, abs=1e-9)
    with database.write() as session:  # B, without an allocation, spends from the dataset alone
        for job_id in jobs_b:
            reserve(session, dataset_id, job_id, FIT, spender=key_b)


def test_an_allocation_is_fixed_once_set_and_bounded_by_the_budget(database: Database):
    dataset_id, _ = make_dataset(database, epsilon_max=1.0)
    key_a, (job,) = analyst(database, dataset_id, 1)
    with database.write() as session:
        for field, epsilon, delta in (("epsilon", 1.5, DELTA), ("delta", 0.5, 2 * DELTA)):
            with pytest.raises(AllocationError) as refused:
                create_allocation(session, dataset_id, key_a, epsilon, delta)
            assert refused.value.field == field
        reserve(session, dataset_id, job, FIT * 3, spender=key_a)
        closed = create_allocation(session, dataset_id, key_a, 0.2, DELTA)  # set over more than it admits
        assert closed.filter_note and "already use" in closed.filter_note
    with database.write() as session:
        with pytest.raises(AllocationError) as again:
            create_allocation(session, dataset_id, key_a, 0.5, DELTA)
        assert again.value.field == "exists"
    with database.read() as session:
        assert estimate(session, dataset_id, PrivacyCost.zero(), key_a).refusal_reason == "allocation"
    with database.write() as session:
        assert delete_allocation(session, dataset_id, key_a) and not delete_allocation(session, dataset_id, key_a)
        assert create_allocation(session, dataset_id, key_a, 0.5, DELTA).filter_note is None  # counts the 0.3


@pytest.mark.parametrize("threads_per_analyst", [4])
def test_two_analysts_racing_never_exceed_their_allocations_or_the_budget(database: Database, threads_per_analyst):
    """Oversubscribed: A and B get 0.6 each of a 1.0 budget. Threads of both submit fits until refused; each
    analyst ends within its allocation, the dataset within its budget, and whoever was refused was refused by a
    full filter (its allocation, or the dataset's)."""
    dataset_id, _ = make_dataset(database, epsilon_max=1.0)
    attempts = 10
    analysts = [analyst(database, dataset_id, threads_per_analyst * attempts) for _ in range(2)]
    with database.write() as session:
        for key_id, _ in analysts:
            create_allocation(session, dataset_id, key_id, 0.6, DELTA)
    k_allocation = sequential_count(PrivacyFilter.for_budget(0.6, DELTA, DEFAULT_GRID).admits, FIT)
    with database.read() as session:
        k_dataset = sequential_count(budget_filter(session.get_one(Budget, dataset_id)).admits, FIT)
    assert k_allocation < k_dataset < 2 * k_allocation  # both limits can bind
    admitted: dict[str, int] = {key_id: 0 for key_id, _ in analysts}
    scopes: dict[str, set[str]] = {key_id: set() for key_id, _ in analysts}
    lock = threading.Lock()
    start = threading.Barrier(2 * threads_per_analyst)

    def run(key_id: str, job_ids: list[str]) -> None:
        start.wait()
        for job_id in job_ids:
            try:
                with database.write() as session:
                    reserve(session, dataset_id, job_id, FIT, spender=key_id)
                with lock:
                    admitted[key_id] += 1
            except BudgetExceededError as refused:
                with lock:
                    scopes[key_id].add(refused.scope)

    threads = [
        threading.Thread(target=run, args=(key_id, jobs[i * attempts:(i + 1) * attempts]))
        for key_id, jobs in analysts for i in range(threads_per_analyst)
    ]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    (key_a, _), (key_b, _) = analysts
    a, b = admitted[key_a], admitted[key_b]
    assert a <= k_allocation and b <= k_allocation and a + b <= k_dataset
    assert a + b == k_dataset or a == b == k_allocation
    with database.read() as session:
        budget = session.get_one(Budget, dataset_id)
        assert budget_filter(budget).measure(_committed(budget)).share <= 1.0
        for key_id, _ in analysts:
            row = session.execute(select(Allocation).where(Allocation.api_key_id == key_id)).scalar_one()
            assert budget_filter(row).measure(_committed(row)).share <= 1.0
            recomputed = committed_cost_from_entries(session, budget, spender=key_id)
            assert _committed(row).pure_epsilon == pytest.approx(recomputed.pure_epsilon)


# -- the exact adaptive game with two analysts (adaptive_game.pure_then_gaussian) -------------------------------


def two_analyst_game(epsilon: float, dataset: PrivacyFilter | None, allocation_b: PrivacyFilter,
                     allocation_a: PrivacyFilter, *, upper: bool) -> float:  # fmt: skip
    """B runs Laplace fits (ε₀ each), one at a time, seeing each release; A then runs the largest Gaussian its
    allocation (and the dataset's filter, unless ``dataset`` is None: the broken variant) still admits. δ(ε) of the
    whole transcript for the best strategy (rounded up: an upper bound; down: a lower bound a real pair attains)."""
    step = laplace_fit(EPSILON0)

    def pure_admitted(r: int) -> bool:
        spent = step * (r + 1)
        return allocation_b.admits(spent) and (dataset is None or dataset.admits(spent))

    def gaussian_admitted(r: int, mu: float) -> bool:
        own = gaussian_fit(mu)
        return allocation_a.admits(own) and (dataset is None or dataset.admits(step * r + own))

    law = laplace_loss_law(EPSILON0, EPSILON0 / POINTS, round_up=upper)
    return pure_then_gaussian(epsilon, law, pure_admitted, gaussian_admitted).delta


@pytest.mark.parametrize(("epsilon_max", "delta_max"), [(1.0, 1e-3), (1.0, 1e-6)])
def test_allocations_keep_the_datasets_guarantee_even_when_each_is_the_whole_budget(epsilon_max, delta_max):
    whole = PrivacyFilter.for_budget(epsilon_max, delta_max, DEFAULT_GRID)
    held = two_analyst_game(epsilon_max, whole, whole, whole, upper=True)
    print(f"two analysts, each allocated the whole budget: δ(ε_max) ≤ {held / delta_max:.4f} × δ_max")
    assert held <= delta_max
    broken = two_analyst_game(epsilon_max, None, whole, whole, upper=False)  # allocations without the dataset's
    print(f"the same without the dataset's filter: δ(ε_max) ≥ {broken / delta_max:.4g} × δ_max")
    assert broken > 1.01 * delta_max


@pytest.mark.parametrize(("share", "delta_share"), [(0.4, 0.5), (0.7, 0.25)])
@pytest.mark.parametrize("b_spent", [0.0, 0.5])
def test_an_analysts_share_of_the_loss_stays_within_its_allocation(share: float, delta_share: float, b_spent: float):
    """A's share of the transcript's loss (its own releases' losses, each given everything before it): A runs
    Laplace fits one at a time, seeing each, then the largest Gaussian still admitted — by its allocation on its own
    fits and by the dataset's filter on everything, B's fits (``b_spent`` of pure ε, released before) included. B's
    releases are not A's share; they only make the dataset's filter refuse A sooner. A's δ(ε_a) ≤ δ_a."""
    epsilon_max, delta_max = 1.0, 1e-4
    epsilon_a, delta_a = share, delta_share * delta_max
    allocation_a = PrivacyFilter.for_budget(epsilon_a, delta_a, DEFAULT_GRID)
    dataset = PrivacyFilter.for_budget(epsilon_max, delta_max, DEFAULT_GRID)
    others = PrivacyCost.pure_dp(b_spent) if b_spent else PrivacyCost.zero(DEFAULT_GRID)
    step = laplace_fit(EPSILON0)

    def admits(own: PrivacyCost) -> bool:
        return allocation_a.admits(own) and dataset.admits(own + others)

    law = laplace_loss_law(EPSILON0, EPSILON0 / POINTS, round_up=True)
    held = pure_then_gaussian(
        epsilon_a, law, pure_admitted=lambda r: admits(step * (r + 1)),
        gaussian_admitted=lambda r, mu: admits(step * r + gaussian_fit(mu)),
    ).delta  # fmt: skip
    print(f"A on its allocation ({epsilon_a}, {delta_a:g}), B spent {b_spent}: δ(ε_a) ≤ {held / delta_a:.4f} × δ_a")
    assert held <= delta_a


def test_the_game_predicates_are_the_ledgers(database: Database):
    """The predicates above are what the ledger does: with an allocation, a fit the two filters admit is reserved
    and one either refuses is refused, with the refusing filter's scope (SQLite and PostgreSQL)."""
    dataset_id, _ = make_dataset(database, epsilon_max=1.0)
    key_a, jobs = analyst(database, dataset_id, 3)
    with database.write() as session:
        allocation = create_allocation(session, dataset_id, key_a, 0.5, DELTA)
        gates = Gates(session.get_one(Budget, dataset_id), allocation)
        filters = [budget_filter(row) for row in gates.rows()]
    mu = max(m / 100 for m in range(1, 400) if all(f.admits(gaussian_fit(m / 100)) for f in filters))
    with database.write() as session, pytest.raises(BudgetExceededError) as refused:
        reserve(session, dataset_id, jobs[0], gaussian_fit(mu + 0.01), spender=key_a)
    assert refused.value.scope == "allocation"  # the smaller filter binds
    with database.write() as session:
        reserve(session, dataset_id, jobs[1], gaussian_fit(mu), spender=key_a)


def test_a_grouped_admission_counts_the_analysts_earlier_requests_of_the_group(database: Database):
    """Admissions grouped in one transaction (:func:`reserve_many`, the API's group commit): the allocation's check
    of each request counts the requests of the same analyst admitted before it in the group."""
    dataset_id, _ = make_dataset(database, epsilon_max=1.0)
    key_a, jobs = analyst(database, dataset_id, 6)
    with database.write() as session:
        create_allocation(session, dataset_id, key_a, 0.35, DELTA)
    allowed = sequential_count(PrivacyFilter.for_budget(0.35, DELTA, DEFAULT_GRID).admits, FIT)
    written: list[str] = []
    with database.write() as session:
        outcomes = reserve_many(session, dataset_id, [(job, FIT, "fit", key_a) for job in jobs], written.extend)
    assert [o is None for o in outcomes] == [True] * allowed + [False] * (len(jobs) - allowed)
    assert all(o.scope == "allocation" for o in outcomes if o is not None)
