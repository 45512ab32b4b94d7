"""The Gaussian-DP certificate over HTTP, on SQLite and PostgreSQL: the budget shows its filter's δ_G and μ_G, the
committed Σμ² and the certificate's share; a fit's cost and its ledger entries carry their Σμ² (null for a fit with
no GDP bound, which turns the committed Σμ² and share to null until it is released); the client reads null as +∞.
A budget from before the certificate (rule v2, δ_G = 0) shows no finite GDP share. ``privfit budget`` names the
certificate's δ and μ."""

from __future__ import annotations

import math

import pytest
from api_helpers import Keys, upload
from fastapi.testclient import TestClient
from sqlalchemy import update

from privfit.client.models import Budget as BudgetModel
from privfit.client.models import Cost, LedgerEntry
from privfit.db import Budget
from privfit.privacy import DEFAULT_GRID, FILTER_VERSION_V2, PrivacyFilter

GAUSSIAN = {"solver": "dp_gd", "model": "logistic", "privacy": {"epsilon": 0.2}, "params": {"steps": 20}}
LAPLACE = {"solver": "output_perturbation", "model": "logistic", "privacy": {"epsilon": 0.2},
           "params": {"noise": "laplace"}}  # fmt: skip


def _budget(client: TestClient, keys: Keys, dataset_id: str) -> dict:
    response = client.get(f"/v1/datasets/{dataset_id}/budget", headers=keys.analyst)
    assert response.status_code == 200, response.text
    return response.json()


def _queue(client: TestClient, keys: Keys, dataset_id: str, request: dict) -> dict:
    response = client.post("/v1/fits", headers=keys.analyst, json={"dataset_id": dataset_id, **request})
    assert response.status_code == 202, response.text
    return response.json()


def test_the_budget_the_cost_and_the_ledger_show_the_gaussian_dp_numbers(idle_client: TestClient, idle_keys: Keys):
    client, keys = idle_client, idle_keys  # fits stay queued: each is committed (reserved) as it is admitted
    dataset_id = upload(client, keys, epsilon=2.0)
    expected = PrivacyFilter.for_budget(2.0, 1e-6, DEFAULT_GRID)
    budget = _budget(client, keys, dataset_id)
    assert budget["filter"]["gdp_delta"] == pytest.approx(expected.gdp_delta) and expected.gdp_delta > 0
    assert budget["filter"]["gdp_mu"] == pytest.approx(expected.gdp_mu) and expected.gdp_mu > 0
    assert budget["committed_gdp_mu_squared"] == 0.0 and budget["committed_gdp_share"] == 0.0

    fit = _queue(client, keys, dataset_id, GAUSSIAN)
    mu_squared = fit["cost"]["gdp_mu_squared"]
    assert mu_squared is not None and mu_squared > 0 and Cost.from_json(fit["cost"]).gdp_mu_squared == mu_squared
    budget = _budget(client, keys, dataset_id)
    assert budget["committed_gdp_mu_squared"] == mu_squared
    assert budget["committed_gdp_share"] == pytest.approx(mu_squared / expected.gdp_mu**2, rel=1e-9)
    typed = BudgetModel.from_json(budget)  # (null shares as +∞)
    assert typed.committed_share == min(typed.committed_order_share, typed.committed_pure_share,
                                        typed.committed_gdp_share)  # fmt: skip
    assert budget["committed_certificate"] in ("order", "gaussian")
    (entry,) = client.get(f"/v1/datasets/{dataset_id}/ledger", headers=keys.owner).json()["entries"]
    assert (entry["kind"], entry["gdp_mu_squared"]) == ("reservation", mu_squared)
    assert LedgerEntry.from_json(entry).gdp_mu_squared == mu_squared

    laplace = _queue(client, keys, dataset_id, LAPLACE)  # no GDP bound: +∞ for the whole composition
    assert laplace["cost"]["gdp_mu_squared"] is None and Cost.from_json(laplace["cost"]).gdp_mu_squared == math.inf
    budget = _budget(client, keys, dataset_id)
    assert budget["committed_gdp_mu_squared"] is None and budget["committed_gdp_share"] is None
    assert budget["committed_certificate"] != "gaussian"
    typed = BudgetModel.from_json(budget)
    assert typed.committed_gdp_mu_squared == typed.committed_gdp_share == math.inf
    entries = client.get(f"/v1/datasets/{dataset_id}/ledger", headers=keys.analyst).json()["entries"]
    assert [e["gdp_mu_squared"] for e in entries] == [mu_squared, None]
    assert LedgerEntry.from_json(entries[1]).gdp_mu_squared == math.inf

    cancelled = client.post(f"/v1/fits/{laplace['id']}/cancel", headers=keys.analyst)
    assert cancelled.status_code == 200, cancelled.text
    budget = _budget(client, keys, dataset_id)  # released: the Gaussian fit alone again
    assert budget["committed_gdp_mu_squared"] == mu_squared
    assert budget["committed_gdp_share"] == pytest.approx(mu_squared / expected.gdp_mu**2, rel=1e-9)


def test_a_budget_from_before_the_certificate_shows_no_gdp_share(idle_client: TestClient, idle_keys: Keys):
    client, keys = idle_client, idle_keys
    dataset_id = upload(client, keys, epsilon=2.0)
    with client.app.state.db.write() as session:  # as revision 0014 leaves a budget created before it
        session.execute(update(Budget).where(Budget.dataset_id == dataset_id)
                        .values(filter_version=FILTER_VERSION_V2, filter_gdp_delta=0.0))  # fmt: skip
    fit = _queue(client, keys, dataset_id, GAUSSIAN)
    assert fit["cost"]["gdp_mu_squared"] > 0 and fit["cost"]["filter_certificate"] != "gaussian"
    budget = _budget(client, keys, dataset_id)
    assert (budget["filter"]["rule"], budget["filter"]["gdp_delta"], budget["filter"]["gdp_mu"]) == (
        FILTER_VERSION_V2, 0.0, 0.0)  # fmt: skip
    assert budget["committed_gdp_mu_squared"] == fit["cost"]["gdp_mu_squared"]  # recorded, but nothing reads it
    assert budget["committed_gdp_share"] is None and budget["committed_certificate"] == "order"


def test_the_cli_budget_table_names_the_gaussian_dp_certificate():
    from privfit.client.cli import _gdp_certificate

    assert _gdp_certificate({"gdp_delta": 4.5e-7, "gdp_mu": 0.52}) == "δ = 4.5e-07, μ ≤ 0.52"
    # a filter created before the certificate, or a server that predates it
    assert _gdp_certificate({"gdp_delta": 0.0, "gdp_mu": 0.0}) == _gdp_certificate({}) == "none"
