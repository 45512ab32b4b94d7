"""The privacy filter over HTTP: the budget shows it and says what committed ε measures; objective perturbation
draws nothing from the pot for δ parts and many of its fits fit in a large budget; the owner's δ split is
validated."""

from __future__ import annotations

import json

import pytest
from api_helpers import SMALL_SCHEMA, fit_and_wait, small_csv, upload

from privfit.privacy import DEFAULT_GRID, PrivacyFilter

OBJECTIVE = {"model": "logistic", "solver": "objective_perturbation", "privacy": {"epsilon": 0.5}}


def _schema(**budget: float) -> dict:
    declared = json.loads(json.dumps(SMALL_SCHEMA))
    declared["budget"].update(budget)
    return declared


def test_the_budget_shows_its_filter_and_what_committed_epsilon_measures(client, keys):
    dataset_id = upload(client, keys, epsilon=2.0)
    budget = client.get(f"/v1/datasets/{dataset_id}/budget", headers=keys.analyst).json()
    expected = PrivacyFilter.for_budget(2.0, 1e-6, DEFAULT_GRID)
    assert budget["filter"]["orders"] == list(expected.orders)
    assert budget["filter"]["order_deltas"] == pytest.approx(list(expected.order_deltas))
    assert budget["filter"]["approximate_delta"] == pytest.approx(1e-7)
    assert budget["filter"]["slack_delta"] == expected.slack_delta == pytest.approx(0.5e-7)  # δ_A/2 by default
    assert budget["filter"]["rule"] == expected.version
    assert budget["committed_epsilon"] == 0.0 and budget["remaining_epsilon"] == 2.0
    assert "privacy filter" in budget["measure"] and budget["closed_reason"] is None


def test_twenty_objective_perturbation_fits_fit_in_a_large_budget(idle_client, idle_keys):
    """Issue 21 §3: at least 20 Gaussian objective-perturbation fits in (ε, δ) = (50, 1e-6); the 409 that ends
    the series names the binding constraint."""
    dataset_id = upload(idle_client, idle_keys, epsilon=50.0)
    request = {"dataset_id": dataset_id, **OBJECTIVE, "privacy": {"epsilon": 2.0}}
    admitted = 0
    while True:
        response = idle_client.post("/v1/fits", headers=idle_keys.analyst, json=request)
        if response.status_code != 202:
            break
        admitted += 1
        assert response.json()["cost"]["extra_delta"] == 0.0
    assert admitted >= 20, admitted
    assert response.status_code == 409 and "ε" in response.json()["detail"], response.text


def test_objective_perturbation_draws_nothing_from_the_delta_pot(client, keys):
    """Formula v2 (issue 21 §3): the Gaussian variant is an RDP curve, so a budget without a pot for δ parts
    (approximate_delta = 0) admits it, as it admits the pure-ε Laplace variant, while a fit with a δ part
    (dp_lazy_oco's (ε, δ) accountant) is still refused with a 422 naming the pot."""
    dataset_id = upload(client, keys, schema=_schema(approximate_delta=0.0))
    lazy = {"dataset_id": dataset_id, "model": "mean", "solver": "dp_lazy_oco", "privacy": {"epsilon": 0.5}}
    refused = client.post("/v1/fits", headers=keys.analyst, json=lazy)
    assert refused.status_code == 422 and "approximate_delta" in refused.json()["detail"], refused.text
    for params in ({"noise": "laplace"}, {}):
        cost, _ = fit_and_wait(client, keys, {"dataset_id": dataset_id, **OBJECTIVE, "params": params})
        assert cost["extra_delta"] == 0.0
    budget = client.get(f"/v1/datasets/{dataset_id}/budget", headers=keys.analyst).json()
    assert budget["committed_delta_used"] == 0.0


@pytest.mark.parametrize("pot", [1e-6, 2e-6, -1e-9])
def test_the_owner_split_must_leave_delta_for_the_rdp_curves(client, keys, pot):
    response = client.post(
        "/v1/datasets", headers=keys.owner, files={"file": ("d.csv", small_csv(200), "text/csv")},
        data={"schema": json.dumps(_schema(approximate_delta=pot))},
    )  # fmt: skip
    assert response.status_code == 422, response.text
    assert "approximate_delta" in response.text
    assert client.get("/v1/datasets", headers=keys.owner).json() == []


def test_the_owner_may_set_the_slack_part_of_the_pot(client, keys):
    dataset_id = upload(client, keys, schema=_schema(approximate_delta=2e-7, slack_delta=0.0))
    budget = client.get(f"/v1/datasets/{dataset_id}/budget", headers=keys.analyst).json()
    assert budget["filter"]["approximate_delta"] == pytest.approx(2e-7) and budget["filter"]["slack_delta"] == 0.0


@pytest.mark.parametrize(
    "budget",
    [{"slack_delta": -1e-9}, {"slack_delta": 1.5e-7}, {"approximate_delta": 1e-8, "slack_delta": 2e-8},
     {"slack_delta": "1e-8"}],
)  # fmt: skip
def test_the_slack_part_must_lie_within_the_pot(client, keys, budget):
    response = client.post(
        "/v1/datasets", headers=keys.owner, files={"file": ("d.csv", small_csv(200), "text/csv")},
        data={"schema": json.dumps(_schema(**budget))},
    )  # fmt: skip
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["detail"].startswith("budget.slack_delta: ")
    assert [error["loc"] for error in problem["errors"]] == [["budget", "slack_delta"]]
    assert client.get("/v1/datasets", headers=keys.owner).json() == []
