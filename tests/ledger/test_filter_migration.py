"""Migration 0005 moves existing budgets to the privacy filter, conservatively, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import uuid

import pytest
from ledger_helpers import DELTA
from sqlalchemy import create_engine, text

from privfit.db import Budget, make_database
from privfit.db.migrate import upgrade
from privfit.ledger import estimate, status
from privfit.privacy import DEFAULT_GRID, FILTER_VERSION_V2, PrivacyCost, PrivacyFilter, curve_to_json, gaussian_rdp


def _old_dataset(connection, committed: PrivacyCost, epsilon_max: float) -> str:  # type: ignore[no-untyped-def]
    """A dataset with a budget as revision 0004 stored it (no filter columns)."""
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
    connection.execute(
        text("INSERT INTO budgets (dataset_id, epsilon_max, delta_max, grid_name, committed_rdp, "
             "committed_extra_delta, committed_approx_delta, version) VALUES (:id, :eps, :delta, :grid, :rdp, "
             ":extra, 0, 1)"),
        {"id": dataset_id, "eps": epsilon_max, "delta": DELTA, "grid": DEFAULT_GRID.name,
         "rdp": json.dumps(curve_to_json(committed.rdp)), "extra": committed.extra_delta},
    )  # fmt: skip
    return dataset_id


def test_existing_budgets_move_to_the_filter(empty_database_url: str):
    blank_url = empty_database_url
    upgrade(blank_url, "0004")
    engine = create_engine(blank_url)
    gaussian = PrivacyCost(gaussian_rdp(DEFAULT_GRID, sigma=20.0))
    # ten pure ε = 0.1 fits: admitted by the previous rule (certified near α = 1024) but their curve at the filter's
    # order is beyond what the filter allows, and their pure bound was never recorded
    laplace_like = PrivacyCost.pure_dp(0.1) * 10
    assert laplace_like.epsilon(DELTA).epsilon <= 1.0 + 1e-6
    with engine.begin() as connection:
        fresh = _old_dataset(connection, PrivacyCost.zero(), 1.0)
        within = _old_dataset(connection, gaussian, 1.0)
        beyond = _old_dataset(connection, laplace_like, 1.0)
    engine.dispose()
    upgrade(blank_url)

    db = make_database(blank_url)
    expected = PrivacyFilter.for_budget(1.0, DELTA, DEFAULT_GRID, gdp_share=0.0)  # v2: no GDP certificate
    with db.read() as session:
        for dataset_id in (fresh, within, beyond):
            budget = session.get(Budget, dataset_id)
            assert (tuple(budget.filter_orders), tuple(budget.filter_order_deltas),
                    budget.filter_approximate_delta) == (expected.orders, expected.order_deltas,
                                                         expected.approximate_delta)  # fmt: skip
            # revision 0009 names the rule v2, and revision 0014 gives such a budget no GDP certificate
            assert (budget.filter_version, budget.filter_gdp_delta) == (FILTER_VERSION_V2, 0.0)
        assert session.get(Budget, fresh).committed_pure_epsilon == 0.0
        assert session.get(Budget, within).committed_pure_epsilon is None  # unknown for old entries: +∞
        assert session.get(Budget, within).filter_note is None
        open_view = status(session, within)
        assert open_view.committed_epsilon == pytest.approx(expected.measure(gaussian).epsilon)
        assert 0 < open_view.remaining_epsilon < 1.0 and open_view.closed_reason is None
        closed_view = status(session, beyond)
        assert closed_view.remaining_epsilon == 0.0
        assert "admits no more fits" in closed_view.closed_reason and "revision 0005" in closed_view.closed_reason
        refused = estimate(session, beyond, PrivacyCost.pure_dp(1e-6))
        assert not refused.admissible and refused.refusal_reason == "closed"
        assert estimate(session, within, gaussian).admissible
    db.dispose()
