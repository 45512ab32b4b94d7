"""Migration 0009 splits every budget's pot for δ-only parts (issue 35 item 9), on SQLite and PostgreSQL: δ_S is
the default δ_A/2 for a budget without committed δ-only parts, the committed weighted slack when there is one,
lowered so that the committed δ parts keep fitting, and a budget whose committed parts cannot both fit is closed
with a note and a log line. Every committed fit stays admitted; the downgrade restores the previous rule's name."""

from __future__ import annotations

import json
import logging
import uuid

import pytest
from ledger_helpers import DELTA
from sqlalchemy import Connection, create_engine, inspect, text

from privfit.db import Budget, make_database
from privfit.db.migrate import downgrade, upgrade
from privfit.ledger import allowance_for, budget_filter, estimate, status
from privfit.privacy import DEFAULT_GRID, FILTER_VERSION_V2, PrivacyCost, PrivacyFilter, curve_to_json

RULE_V1 = "filter:rdp-orders+pure+delta-pot/v1"
FILTER = PrivacyFilter.for_budget(1.0, DELTA, DEFAULT_GRID)
POT, WEIGHT = FILTER.approximate_delta, FILTER.slack_weight
SMALL_CURVE = DEFAULT_GRID.orders * 1e-4


def _budget_as_0008_stored_it(connection: Connection, extra: float, approx: float, pot: float = POT) -> str:
    """A dataset whose budget is as revision 0008 stored it: the filter of the v1 rule, no δ_S."""
    key_id, dataset_id = str(uuid.uuid4()), str(uuid.uuid4())
    connection.execute(
        text("INSERT INTO api_keys (id, prefix, secret_hash, role, name, created_at) "
             "VALUES (:id, :prefix, :hash, 'owner', 'o', CURRENT_TIMESTAMP)"),
        {"id": key_id, "prefix": key_id[:12], "hash": uuid.uuid4().hex * 2},
    )  # fmt: skip
    connection.execute(
        text("INSERT INTO datasets (id, owner_key_id, name, schema_json, feature_names, n, d, row_norm_bound, "
             "label_bound, content_hash, created_at) VALUES (:id, :key, 'd', '{}', '[\"x\"]', 100, 1, 1.0, 1.0, "
             ":hash, CURRENT_TIMESTAMP)"),
        {"id": dataset_id, "key": key_id, "hash": "0" * 64},
    )  # fmt: skip
    committed = PrivacyCost(SMALL_CURVE, DEFAULT_GRID, extra, approx, 0.0 if approx == 0.0 else float("inf"))
    rdp_delta = DELTA - pot
    connection.execute(
        text("INSERT INTO budgets (dataset_id, epsilon_max, delta_max, grid_name, committed_rdp, "
             "committed_extra_delta, committed_approx_delta, committed_pure_epsilon, filter_version, filter_orders, "
             "filter_order_deltas, filter_approximate_delta, filter_note, version) VALUES (:id, 1.0, :delta, :grid, "
             ":rdp, :extra, :approx, NULL, :rule, :orders, :deltas, :pot, NULL, 1)"),
        {"id": dataset_id, "delta": DELTA, "grid": DEFAULT_GRID.name, "rdp": json.dumps(curve_to_json(committed.rdp)),
         "extra": extra, "approx": approx, "rule": RULE_V1, "orders": json.dumps(list(FILTER.orders)),
         "deltas": json.dumps([0.99 * rdp_delta, 0.01 * rdp_delta]), "pot": pot},
    )  # fmt: skip
    return dataset_id


def test_existing_budgets_get_a_split_that_keeps_their_commitments(
    empty_database_url: str, caplog: pytest.LogCaptureFixture
):
    url = empty_database_url
    upgrade(url, "0008")
    engine = create_engine(url)
    with engine.begin() as connection:
        fresh = _budget_as_0008_stored_it(connection, 0.0, 0.0)
        with_slack = _budget_as_0008_stored_it(connection, 3e-8, 2e-8 / WEIGHT)
        parts_heavy = _budget_as_0008_stored_it(connection, 8e-8, 0.0)
        overflowing = _budget_as_0008_stored_it(connection, 9e-8, 3e-8 / WEIGHT)
        no_pot = _budget_as_0008_stored_it(connection, 0.0, 0.0, pot=0.0)
    engine.dispose()
    with caplog.at_level(logging.WARNING, logger="privfit.migrations"):
        upgrade(url)
    warned = [record.getMessage() for record in caplog.records if record.name == "privfit.migrations"]
    assert len(warned) == 1 and overflowing in warned[0] and "admits no more fits" in warned[0]

    db = make_database(url)
    try:
        with db.read() as session:
            budgets = {dataset_id: session.get(Budget, dataset_id) for dataset_id in
                       (fresh, with_slack, parts_heavy, overflowing, no_pot)}  # fmt: skip
            # v2 (and no GDP certificate: revision 0014) for every budget created before the certificate
            assert {budget.filter_version for budget in budgets.values()} == {FILTER_VERSION_V2}
            assert {budget.filter_gdp_delta for budget in budgets.values()} == {0.0}
            assert budgets[fresh].filter_slack_delta == POT / 2  # the default rule of a new budget
            assert budgets[no_pot].filter_slack_delta == 0.0
            # committed slack: δ_S is exactly the weighted slack, the rest of the pot is for δ parts
            split = budget_filter(budgets[with_slack])
            assert split.slack_delta == split.slack_used(PrivacyCost(SMALL_CURVE, DEFAULT_GRID, 0.0, 2e-8 / WEIGHT))
            assert split.parts_delta == pytest.approx(8e-8)
            allowance = allowance_for(budgets[with_slack])
            assert allowance.slack == 0.0 and allowance.delta == pytest.approx((8e-8 - 3e-8) / 2)
            # δ parts beyond half the pot: δ_S is lowered so that they still fit
            assert budgets[parts_heavy].filter_slack_delta == pytest.approx(2e-8)
            for dataset_id in (fresh, with_slack, parts_heavy, no_pot):
                view = status(session, dataset_id)
                assert view.closed_reason is None and view.committed_share < 1.0, dataset_id
                assert estimate(session, dataset_id, PrivacyCost.zero()).admissible
                assert budget_filter(budgets[dataset_id]).measure(_committed(budgets[dataset_id])).delta_fits
            assert view.filter.slack_delta == 0.0  # (no_pot, the last): the budget view shows the split
            # more slack on the slack-filled budget is refused; a δ part within the rest is admitted
            refused = estimate(session, with_slack, PrivacyCost.approximate_rdp(SMALL_CURVE, 1e-15))
            assert not refused.admissible and refused.refusal_reason == "delta"
            assert estimate(session, with_slack, PrivacyCost.approximate_dp(0.01, allowance.delta)).admissible
            # D + k(1 + e^ε)A = 1.2e-7 > δ_A: no split fits both; δ_S takes the slacks, the budget is closed
            closed = status(session, overflowing)
            assert budgets[overflowing].filter_slack_delta == pytest.approx(3e-8)
            assert closed.remaining_epsilon == 0.0 and "revision 0009" in closed.closed_reason
            assert estimate(session, overflowing, PrivacyCost.zero()).refusal_reason == "closed"
    finally:
        db.dispose()

    downgrade(url, "0008")
    engine = create_engine(url)
    try:
        assert "filter_slack_delta" not in {column["name"] for column in inspect(engine).get_columns("budgets")}
        with engine.connect() as connection:
            rules = connection.execute(text("SELECT DISTINCT filter_version FROM budgets")).scalars().all()
        assert rules == [RULE_V1]
    finally:
        engine.dispose()
    upgrade(url)


def _committed(budget: Budget) -> PrivacyCost:
    return PrivacyCost(SMALL_CURVE, DEFAULT_GRID, budget.committed_extra_delta, budget.committed_approx_delta)
