"""The privacy filter over HTTP: the budget shows it and says what committed ε measures; δ-only parts are sized
within the dataset's allowance and refused once its pot is empty; the owner's δ split is validated."""

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
    assert budget["committed_epsilon"] == 0.0 and budget["remaining_epsilon"] == 2.0
    assert "privacy filter" in budget["measure"] and budget["closed_reason"] is None


def test_delta_parts_take_half_of_what_is_left_of_the_pot(client, keys):
    """Two objective-perturbation fits (Gaussian variant): δ_b = half the pot, then half of the rest."""
    dataset_id = upload(client, keys, epsilon=3.0)
    request = {"dataset_id": dataset_id, **OBJECTIVE}
    first, _ = fit_and_wait(client, keys, request)
    second, _ = fit_and_wait(client, keys, request)
    assert first["extra_delta"] == pytest.approx(0.5e-7, rel=1e-9)
    assert second["extra_delta"] == pytest.approx(0.25e-7, rel=1e-9)
    budget = client.get(f"/v1/datasets/{dataset_id}/budget", headers=keys.analyst).json()
    assert budget["committed_delta_used"] == pytest.approx(0.75e-7, rel=1e-6)
    assert budget["committed_delta_used"] <= budget["filter"]["approximate_delta"]


def test_an_empty_pot_refuses_delta_parts_with_a_422_and_admits_pure_fits(client, keys):
    dataset_id = upload(client, keys, schema=_schema(approximate_delta=0.0))
    refused = client.post("/v1/fits", headers=keys.analyst, json={"dataset_id": dataset_id, **OBJECTIVE})
    assert refused.status_code == 422 and refused.json()["parameter"] == "noise", refused.text
    assert "approximate_delta" in refused.json()["detail"]
    pure = {"dataset_id": dataset_id, **OBJECTIVE, "params": {"noise": "laplace"}}
    cost, _ = fit_and_wait(client, keys, pure)
    assert cost["extra_delta"] == 0.0 and cost["filter_certificate"] in ("order", "pure")


@pytest.mark.parametrize("pot", [1e-6, 2e-6, -1e-9])
def test_the_owner_split_must_leave_delta_for_the_rdp_curves(client, keys, pot):
    response = client.post(
        "/v1/datasets", headers=keys.owner, files={"file": ("d.csv", small_csv(200), "text/csv")},
        data={"schema": json.dumps(_schema(approximate_delta=pot))},
    )  # fmt: skip
    assert response.status_code == 422, response.text
    assert "approximate_delta" in response.text
    assert client.get("/v1/datasets", headers=keys.owner).json() == []
