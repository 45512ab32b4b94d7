"""The filter's condition (a) in the form its proof uses (issue 35 item 9): step 1 of the proof
(:mod:`privfit.privacy.filter`) bounds the δ-only parts of an adaptive interaction by

    E_P[D] + k E_P[A] + k e^{ε_max} E_Q[A]   ≤   sup D + k (1 + e^{ε_max}) sup A

(P, Q the laws of the transcript on neighbours; D the composed δ parts and A the summed approximate-RDP slacks of
the path; the reveal probability and the coupling's P side are expectations under P, the coupling's Q side under
Q). The previous rule checked D + k(1 + e^{ε_max})·A ≤ δ_A on the realised path only; an analyst who lets the
first output decide between spending the pot on a δ part and spending it on a slack brings that bound above δ_A.
The split pot, (a1) D ≤ δ_A − δ_S and (a2) k(1 + e^{ε_max})·A ≤ δ_S at every admission, refuses the violating
branches and keeps the bound ≤ δ_A.

The mechanism family is tiny, and enumerated exactly: first ε₁-randomised response on the differing row's bit
(output 1 with probability e^{ε₁}/(1 + e^{ε₁}) in the world where the bit is 1, 1/(1 + e^{ε₁}) in the other), then,
chosen from that output, one of: an (ε, δ)-DP fit with the largest δ the rule admits, an approximate-RDP fit with
the largest slack the rule admits, or nothing. The bound is the proof's, computed exactly over the enumerated paths,
not the exact hockey-stick divergence of a concrete slack mechanism (the slack weight k(1 + e^ε) is conservative):
what fails under the previous rule is the proof, which is what the split repairs.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import pytest
from ledger_helpers import DELTA, make_dataset

from privfit.db import Database
from privfit.ledger import BudgetExceededError, reserve
from privfit.privacy import DEFAULT_GRID, PrivacyCost, PrivacyFilter

EPSILON_MAX = 1.0
FIRST_EPSILON = 0.9  # the first round's randomised response
SECOND_EPSILON = 0.01  # the ε of the second round's (ε, δ) fit
SMALL_CURVE = DEFAULT_GRID.orders * 1e-4  # the second round's approximate-RDP fit: a tiny curve and its slack

Rule = Callable[[PrivacyCost], bool]


def _filter() -> PrivacyFilter:
    return PrivacyFilter.for_budget(EPSILON_MAX, DELTA, DEFAULT_GRID)


def previous_rule(privacy_filter: PrivacyFilter) -> Rule:
    """The admission rule before the split: (b), and D + k(1 + e^{ε_max})·A ≤ δ_A on the realised path."""

    def admits(cost: PrivacyCost) -> bool:
        reading = privacy_filter.measure(cost)
        certified = min(reading.order_share, reading.pure_share) <= 1.0
        return certified and privacy_filter.delta_used(cost) <= privacy_filter.approximate_delta

    return admits


def delta_fit(delta: float) -> PrivacyCost:
    return PrivacyCost.approximate_dp(SECOND_EPSILON, delta)


def slack_fit(slack: float) -> PrivacyCost:
    return PrivacyCost.approximate_rdp(SMALL_CURVE, slack)


def largest_admitted(admits: Rule, committed: PrivacyCost, fit: Callable[[float], PrivacyCost]) -> float:
    """The largest x (to a relative 1e-12) with ``committed + fit(x)`` admitted: the analyst spends what the rule
    lets it."""
    low, high = 0.0, 1e-3
    assert admits(committed + fit(low)) and not admits(committed + fit(high))
    for _ in range(200):
        middle = (low + high) / 2.0
        low, high = (middle, high) if admits(committed + fit(middle)) else (low, middle)
        if high - low <= 1e-12 * high:
            break
    return low


def first_round(epsilon: float) -> tuple[dict[int, float], dict[int, float]]:
    """The laws of ε-randomised response's output under P (the bit is 1) and Q (the bit is 0)."""
    keep = math.exp(epsilon) / (1.0 + math.exp(epsilon))
    return {1: keep, 0: 1.0 - keep}, {1: 1.0 - keep, 0: keep}


def worst_bound(privacy_filter: PrivacyFilter, admits: Rule) -> tuple[float, dict[str, tuple[float, float]]]:
    """max over the analyst's strategies (a second-round choice per first output) and over the order of the
    neighbours of E_P[D] + k E_P[A] + k e^{ε_max} E_Q[A], and the (D, A) of each second-round choice."""
    committed = PrivacyCost.pure_dp(FIRST_EPSILON)
    assert admits(committed)
    choices = {
        "delta": (largest_admitted(admits, committed, delta_fit), 0.0),
        "slack": (0.0, largest_admitted(admits, committed, slack_fit)),
        "nothing": (0.0, 0.0),
    }
    k, weight = len(privacy_filter.orders), math.exp(privacy_filter.epsilon_max)
    p_law, q_law = first_round(FIRST_EPSILON)
    worst = 0.0
    for strategy in itertools.product(choices, repeat=2):  # strategy[b]: the choice after output b
        for p, q in ((p_law, q_law), (q_law, p_law)):
            d_p = math.fsum(p[b] * choices[strategy[b]][0] for b in (0, 1))
            a_p = math.fsum(p[b] * choices[strategy[b]][1] for b in (0, 1))
            a_q = math.fsum(q[b] * choices[strategy[b]][1] for b in (0, 1))
            worst = max(worst, d_p + k * a_p + k * weight * a_q)
    return worst, choices


def test_the_previous_rule_breaks_the_proofs_bound_and_the_split_keeps_it():
    privacy_filter = _filter()
    pot = privacy_filter.approximate_delta
    old, old_choices = worst_bound(privacy_filter, previous_rule(privacy_filter))
    new, new_choices = worst_bound(privacy_filter, privacy_filter.admits)
    # the previous rule lets each branch spend the whole pot: δ_A on D, or δ_A / (k(1 + e^ε)) on A
    assert old_choices["delta"][0] == pytest.approx(pot, rel=1e-9)
    assert old_choices["slack"][1] == pytest.approx(pot / privacy_filter.slack_weight, rel=1e-9)
    # closed form of the worst strategy (1 → δ part, 0 → slack) with p = e^{ε₁}/(1 + e^{ε₁}), q = e^ε/(1 + e^ε):
    # δ_A (p + (1 − p)(1 − q) + p q) = δ_A (1 + q (2p − 1)) > δ_A
    p = math.exp(FIRST_EPSILON) / (1 + math.exp(FIRST_EPSILON))
    q = math.exp(EPSILON_MAX) / (1 + math.exp(EPSILON_MAX))
    assert old == pytest.approx(pot * (1 + q * (2 * p - 1)), rel=1e-9)
    assert old > 1.25 * pot
    # the proof's δ(ε_max) for the transcript exceeds δ_max (δ_G: the GDP certificate's share of it)
    assert old + privacy_filter.rdp_delta + privacy_filter.gdp_delta > DELTA
    # the split: each branch gets only its part, and the bound holds
    assert new_choices["delta"][0] == pytest.approx(privacy_filter.parts_delta, rel=1e-9)
    assert new_choices["slack"][1] == pytest.approx(privacy_filter.slack_delta / privacy_filter.slack_weight, rel=1e-9)
    assert new <= pot * (1 + 1e-9) and new + privacy_filter.rdp_delta + privacy_filter.gdp_delta <= DELTA * (1 + 1e-9)


def test_the_split_refuses_the_violating_branches():
    privacy_filter, first = _filter(), PrivacyCost.pure_dp(FIRST_EPSILON)
    old = previous_rule(privacy_filter)
    spend_on_parts = first + delta_fit(privacy_filter.approximate_delta)
    spend_on_slack = first + slack_fit(privacy_filter.approximate_delta / privacy_filter.slack_weight)
    for branch in (spend_on_parts, spend_on_slack):
        assert old(branch) and not privacy_filter.admits(branch)
        assert not privacy_filter.measure(branch).delta_fits


def test_the_ledger_refuses_the_violating_branch_naming_the_part(database: Database):
    """The same admission through the ledger (SQLite and PostgreSQL): the δ part that the previous rule took is a
    refusal with reason ``delta``, whose message names the part of the pot it would overflow."""
    dataset_id, jobs = make_dataset(database, epsilon_max=EPSILON_MAX, jobs=3)
    privacy_filter = _filter()
    with database.write() as session:
        reserve(session, dataset_id, jobs[0], PrivacyCost.pure_dp(FIRST_EPSILON))
    for job, fit, part in (
        (jobs[1], delta_fit(privacy_filter.approximate_delta), "approximate_delta − slack_delta"),
        (jobs[1], slack_fit(privacy_filter.approximate_delta / privacy_filter.slack_weight), "slack_delta)"),
    ):
        with pytest.raises(BudgetExceededError) as refused, database.write() as session:
            reserve(session, dataset_id, job, fit)
        assert refused.value.reason == "delta" and part in str(refused.value)
        assert refused.value.problem_fields()["slack_delta"] == privacy_filter.slack_delta
    with database.write() as session:  # within its part, each is admitted
        reserve(session, dataset_id, jobs[1], delta_fit(privacy_filter.parts_delta))
        reserve(
            session, dataset_id, jobs[2], slack_fit(0.999 * privacy_filter.slack_delta / privacy_filter.slack_weight)
        )
