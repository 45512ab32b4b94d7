"""``resque_localized`` through the HTTP API (SQLite and PostgreSQL): hidden and refused unless the operator enables
experimental solvers; when enabled, a tiny fit runs end to end and the ledger stores its approximate-RDP charge (a
curve that is +∞ — JSON null — above the order cap, plus the slack); the feasibility guard answers 422 with the
planned step count."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from api_helpers import Keys, fit_and_wait, make_client, make_keys, small_csv, upload
from fastapi.testclient import TestClient

from privfit.privacy import PrivacyCost, curve_from_json, get_grid
from privfit.solvers import PublicMetadata, get_solver

TINY = {"outer_iterations": 1, "line_search_probes": 1, "zeta": 0.5, "steps_per_call": 16}


@pytest.fixture
def experimental(database_url: str, tmp_path: Path) -> Iterator[tuple[TestClient, Keys]]:
    with make_client(database_url, tmp_path, enable_experimental_solvers=True) as test_client:
        yield test_client, make_keys(test_client)


def test_hidden_and_refused_unless_enabled(client, keys) -> None:
    assert "resque_localized" not in {s["name"] for s in client.get("/v1/solvers", headers=keys.analyst).json()}
    dataset_id = upload(client, keys)
    request = {"dataset_id": dataset_id, "solver": "resque_localized", "model": "svm", "privacy": {"epsilon": 1.0},
               "params": TINY}  # fmt: skip
    for path in ("/v1/fits", "/v1/fits/estimate"):
        refused = client.post(path, headers=keys.analyst, json=request)
        assert refused.status_code == 422 and "PRIVFIT_ENABLE_EXPERIMENTAL_SOLVERS" in refused.json()["detail"]
    assert client.get(f"/v1/datasets/{dataset_id}/ledger", headers=keys.owner).json()["total"] == 0


def test_enabled_a_tiny_fit_runs_and_the_ledger_holds_its_approximate_rdp_charge(experimental) -> None:
    client, keys = experimental
    listed = {s["name"] for s in client.get("/v1/solvers", headers=keys.analyst).json()}
    assert "resque_localized" in listed
    dataset_id = upload(client, keys, csv=small_csv(n=4_000), epsilon=2.0)
    request = {"dataset_id": dataset_id, "solver": "resque_localized", "model": "svm", "privacy": {"epsilon": 1.0},
               "params": TINY}  # fmt: skip
    cost, done = fit_and_wait(client, keys, request)
    settings = done["settings"]
    meta = PublicMetadata(n=settings["n"], d=settings["d"], row_norm_bound=settings["row_norm_bound"],
                          label_bound=settings["label_bound"])  # fmt: skip
    grid = get_grid(cost["grid"])
    expected = get_solver("resque_localized").cost(settings, meta, grid)
    curve = curve_from_json(cost["rdp"])
    assert None in cost["rdp"] and np.array_equal(np.isinf(curve), np.isinf(expected.rdp))
    np.testing.assert_allclose(curve[np.isfinite(curve)], expected.rdp[np.isfinite(expected.rdp)], rtol=1e-12)
    assert cost["approx_delta"] == pytest.approx(expected.approx_delta) and expected.approx_delta > 0
    assert cost["epsilon"] <= 1.0
    assert PrivacyCost(curve, grid, 0.0, cost["approx_delta"]).epsilon(1e-6).epsilon == pytest.approx(cost["epsilon"])
    assert len(done["result"]["coefficients"]) == 5 and math.isfinite(done["result"]["intercept"])
    ledger = client.get(f"/v1/datasets/{dataset_id}/ledger?include=rdp", headers=keys.owner).json()
    assert [e["kind"] for e in ledger["entries"]] == ["reservation", "charge"]
    assert all(None in e["rdp"] and e["approx_delta"] > 0 for e in ledger["entries"])
    budget = client.get(f"/v1/datasets/{dataset_id}/budget", headers=keys.owner)
    assert budget.status_code == 200, budget.text
    assert budget.json()["committed_epsilon"] == pytest.approx(cost["filter_epsilon"])


def test_the_feasibility_guard_is_a_422_with_the_planned_steps(experimental) -> None:
    client, keys = experimental
    dataset_id = upload(client, keys)
    request = {"dataset_id": dataset_id, "solver": "resque_localized", "model": "svm", "privacy": {"epsilon": 1.0}}
    refused = client.post("/v1/fits/estimate", headers=keys.analyst, json=request)
    assert refused.status_code == 422 and "gradient steps" in refused.json()["detail"]
    assert "resque_dpsgd" in refused.json()["detail"]
