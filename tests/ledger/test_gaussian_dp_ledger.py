"""The Gaussian-DP numbers in the ledger, on SQLite and PostgreSQL: a reservation of a cost with a finite Σμ² records
it on its entry and adds it to the committed cache of the budget and of the analyst's allocation, the recomputation
from the entries equals the cache, a release restores the cache as it was before the released fit, and the budget
view shows Σμ², the GDP certificate's share and its filter's δ_G and μ_G. A budget created before the certificate
(rule v2, δ_G = 0) never reports a finite GDP share, whatever it commits."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from ledger_helpers import DELTA, make_dataset
from sqlalchemy import select, update
from sqlalchemy.orm import Session
from test_allocations import allocation_row, analyst

from privfit.db import Budget, Database, LedgerEntry
from privfit.ledger import charge, committed_cost_from_entries, estimate, release, reserve, status
from privfit.ledger.allocations import create_allocation
from privfit.ledger.ledger import _committed, budget_filter
from privfit.privacy import DEFAULT_GRID, FILTER_VERSION, FILTER_VERSION_V2, PrivacyCost, PrivacyFilter


def gaussian(sigma: float) -> PrivacyCost:
    """A fit of 10 Gaussian steps of sensitivity 1 and noise σ, 3 coordinates each (Σμ² = 10/σ² and a trace)."""
    return PrivacyCost.gaussian(DEFAULT_GRID, sigma=sigma, count=10, coordinates=3)


def _cached_gdp(session: Session, dataset_id: str) -> float | None:
    return session.get_one(Budget, dataset_id).committed_gdp_mu_squared


def _entry_gdp(session: Session, job_id: str, kind: str) -> float | None:
    return session.scalar(select(LedgerEntry.gdp_mu_squared).where(LedgerEntry.job_id == job_id,
                                                                   LedgerEntry.kind == kind))  # fmt: skip


def _recomputed(session: Session, dataset_id: str, spender: str | None = None) -> PrivacyCost:
    return committed_cost_from_entries(session, session.get_one(Budget, dataset_id), spender=spender)


def test_a_gaussian_fit_is_recorded_cached_recomputed_and_released(database: Database):
    dataset_id, _ = make_dataset(database, epsilon_max=5.0)
    key, (first, second, laplace) = analyst(database, dataset_id, 3)
    costs = {first: gaussian(40.0), second: gaussian(60.0)}
    with database.write() as session:
        create_allocation(session, dataset_id, key, 2.0, DELTA)
        for job_id, cost in costs.items():
            reserve(session, dataset_id, job_id, cost, spender=key)
    both = costs[first] + costs[second]
    with database.read() as session:
        for job_id, cost in costs.items():  # the entry records the cost's Σμ² exactly
            assert _entry_gdp(session, job_id, "reservation") == cost.gdp_mu_squared
        cached = _cached_gdp(session, dataset_id)
        assert cached == pytest.approx(both.gdp_mu_squared, rel=1e-12)
        assert _recomputed(session, dataset_id).gdp_mu_squared == pytest.approx(cached, rel=1e-12)
        allocation = allocation_row(database, dataset_id, key)
        assert allocation.filter_version == FILTER_VERSION and allocation.filter_gdp_delta > 0.0
        assert _committed(allocation).gdp_mu_squared == pytest.approx(
            _recomputed(session, dataset_id, spender=key).gdp_mu_squared, rel=1e-12
        ) == pytest.approx(both.gdp_mu_squared, rel=1e-12)  # fmt: skip
        view = status(session, dataset_id)
        privacy_filter = budget_filter(session.get_one(Budget, dataset_id))
        assert (view.filter.gdp_delta, view.filter.gdp_mu) == (privacy_filter.gdp_delta, privacy_filter.gdp_mu)
        assert privacy_filter.gdp_delta > 0.0 and privacy_filter.gdp_mu > 0.0
        assert view.committed_gdp_mu_squared == cached
        assert view.committed_gdp_share == pytest.approx(cached / privacy_filter.gdp_mu**2, rel=1e-9)
        assert view.committed_share == min(view.committed_order_share, view.committed_pure_share,
                                           view.committed_gdp_share)  # fmt: skip
        assert view.committed_certificate in ("order", "gaussian")

    with database.write() as session:  # a fit without a GDP bound: +∞ everywhere it is counted
        reserve(session, dataset_id, laplace, PrivacyCost.laplace(DEFAULT_GRID, scale=20.0), spender=key)
    with database.read() as session:
        assert _entry_gdp(session, laplace, "reservation") is None and _cached_gdp(session, dataset_id) is None
        assert allocation_row(database, dataset_id, key).committed_gdp_mu_squared is None
        assert _recomputed(session, dataset_id).gdp_mu_squared == math.inf
        view = status(session, dataset_id)
        assert view.committed_gdp_mu_squared == view.committed_gdp_share == math.inf
        assert view.committed_certificate != "gaussian"

    with database.write() as session:  # released: the cache is the one before it, recomputed from the entries
        release(session, dataset_id, laplace)
        charge(session, dataset_id, first)
    with database.read() as session:
        assert _cached_gdp(session, dataset_id) == pytest.approx(cached, rel=1e-12)
        assert allocation_row(database, dataset_id, key).committed_gdp_mu_squared == pytest.approx(cached, rel=1e-12)
        assert _entry_gdp(session, laplace, "release") is None
        assert _entry_gdp(session, first, "charge") == costs[first].gdp_mu_squared
        assert status(session, dataset_id).committed_gdp_share == pytest.approx(cached / privacy_filter.gdp_mu**2)
    with database.write() as session:
        release(session, dataset_id, second)
    with database.read() as session:
        assert _cached_gdp(session, dataset_id) == costs[first].gdp_mu_squared  # one entry: its value exactly
        assert _recomputed(session, dataset_id).gdp_mu_squared == costs[first].gdp_mu_squared


def test_a_budget_from_before_the_certificate_never_reports_a_finite_gdp_share(database: Database):
    """A v2 budget (as revision 0014 leaves every older one: δ_G = 0) caches the Σμ² of its Gaussian fits exactly,
    but has no certificate to read it: its GDP share is +∞ and "gaussian" never certifies."""
    dataset_id, jobs = make_dataset(database, epsilon_max=1.0, jobs=6)
    v2 = replace(PrivacyFilter.for_budget(1.0, DELTA, DEFAULT_GRID), gdp_delta=0.0, version=FILTER_VERSION_V2)
    with database.write() as session:
        session.execute(
            update(Budget).where(Budget.dataset_id == dataset_id).values(filter_gdp_delta=0.0,
                                                                         filter_version=FILTER_VERSION_V2)
        )  # fmt: skip
    with database.read() as session:
        view = status(session, dataset_id)
        assert (view.filter.rule, view.filter.gdp_delta, view.filter.gdp_mu) == (FILTER_VERSION_V2, 0.0, 0.0)
        assert budget_filter(session.get_one(Budget, dataset_id)) == v2
        assert view.committed_gdp_mu_squared == 0.0 and view.committed_gdp_share == 0.0  # nothing committed
    admitted = 0
    for job_id in jobs:
        cost = gaussian(40.0)
        with database.read() as session:
            dry = estimate(session, dataset_id, cost)
        assert dry.certificate_after != "gaussian"
        if not dry.admissible:
            break
        with database.write() as session:
            reserve(session, dataset_id, job_id, cost)
        admitted += 1
        with database.read() as session:
            view = status(session, dataset_id)
            assert view.committed_gdp_share == math.inf and view.committed_certificate != "gaussian"
            assert view.committed_gdp_mu_squared == pytest.approx(admitted * cost.gdp_mu_squared, rel=1e-12)
    assert admitted >= 1
