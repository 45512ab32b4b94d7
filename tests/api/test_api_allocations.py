"""Allocations through the API (issue 37, item 1), on SQLite and PostgreSQL: the owner gives analyst A a share of
the budget; A's fits are admitted within it (estimate, 409 with ``scope: allocation`` and the largest ε A could
still have), B without one spends from the dataset's budget; the views show what each has left; an allocation is
fixed once set; errors name the field. Fits stay queued (an app without workers): admission is what is tested."""

from __future__ import annotations

from api_helpers import Keys, granted_analyst, upload
from fastapi.testclient import TestClient

FIT = {"model": "logistic", "solver": "dp_gd", "privacy": {"epsilon": 0.4}, "params": {"steps": 20}}


def allocate(client: TestClient, keys: Keys, dataset_id: str, key_id: str, epsilon: float, delta: float = 1e-7):
    return client.put(f"/v1/datasets/{dataset_id}/allocations/{key_id}", headers=keys.owner,
                      json={"epsilon": epsilon, "delta": delta})  # fmt: skip


def fit(client: TestClient, headers: dict[str, str], dataset_id: str, epsilon: float = 0.4):
    request = {**FIT, "dataset_id": dataset_id, "privacy": {"epsilon": epsilon}}
    return client.post("/v1/fits", headers=headers, json=request)


def test_an_analyst_fits_within_its_allocation_and_sees_what_it_has_left(idle_client: TestClient, idle_keys: Keys):
    client, keys = idle_client, idle_keys
    dataset_id = upload(client, keys, epsilon=2.0)
    key_b, analyst_b = granted_analyst(client, keys, dataset_id)
    created = allocate(client, keys, dataset_id, keys.analyst_id, 0.5)
    assert created.status_code == 201, created.text
    allocation = created.json()
    assert allocation["api_key_id"] == keys.analyst_id and allocation["api_key_name"] == "analyst"
    assert allocation["epsilon_max"] == 0.5 and allocation["committed_epsilon"] == 0.0
    assert allocation["remaining_epsilon"] == 0.5 and allocation["closed_reason"] is None

    assert fit(client, keys.analyst, dataset_id).status_code == 202
    refused = fit(client, keys.analyst, dataset_id)
    assert refused.status_code == 409, refused.text
    problem = refused.json()
    assert problem["scope"] == "allocation" and problem["epsilon_max"] == 0.5
    assert "your allocation" in problem["detail"]
    assert 0.0 < problem["max_admissible_epsilon"] < 0.4
    assert fit(client, keys.analyst, dataset_id, problem["max_admissible_epsilon"]).status_code == 202

    estimate = client.post("/v1/fits/estimate", headers=keys.analyst,
                           json={**FIT, "dataset_id": dataset_id}).json()  # fmt: skip
    assert not estimate["admissible"] and estimate["refusal_reason"] == "allocation"
    assert estimate["allocation"]["epsilon_max"] == 0.5 and not estimate["allocation"]["admissible"]
    assert estimate["max_admissible_epsilon"] < 0.01  # A's allocation is (nearly) used up

    # B has no allocation: the dataset's budget alone, and its estimate says so
    for _ in range(3):
        assert fit(client, analyst_b, dataset_id).status_code == 202
    estimate_b = client.post("/v1/fits/estimate", headers=analyst_b, json={**FIT, "dataset_id": dataset_id}).json()
    assert estimate_b["allocation"] is None and estimate_b["admissible"]

    budget_a = client.get(f"/v1/datasets/{dataset_id}/budget", headers=keys.analyst).json()
    assert budget_a["allocation"]["remaining_epsilon"] < 0.01 < budget_a["remaining_epsilon"]
    assert client.get(f"/v1/datasets/{dataset_id}/budget", headers=analyst_b).json()["allocation"] is None

    listed = client.get(f"/v1/datasets/{dataset_id}/allocations", headers=keys.owner).json()
    assert [a["api_key_id"] for a in listed] == [keys.analyst_id]
    assert listed[0]["reserved_epsilon"] > 0.0 and listed[0]["charged_epsilon"] == 0.0  # queued: reserved only
    assert client.get(f"/v1/datasets/{dataset_id}/allocations", headers=keys.analyst).json() == listed
    assert client.get(f"/v1/datasets/{dataset_id}/allocations", headers=analyst_b).json() == []  # not A's

    # the owner lifts the cap: A then spends from the dataset's budget alone
    assert (
        client.delete(f"/v1/datasets/{dataset_id}/allocations/{keys.analyst_id}", headers=keys.owner).status_code == 204
    )
    assert fit(client, keys.analyst, dataset_id).status_code == 202
    again = allocate(client, keys, dataset_id, keys.analyst_id, 0.5)  # counts what A has committed: closed
    assert again.status_code == 201 and again.json()["closed_reason"] and again.json()["remaining_epsilon"] == 0.0
    assert key_b != keys.analyst_id


def test_allocation_errors_name_what_is_wrong(idle_client: TestClient, idle_keys: Keys):
    client, keys = idle_client, idle_keys
    dataset_id = upload(client, keys, epsilon=2.0)
    assert allocate(client, keys, dataset_id, keys.analyst_id, 0.5).status_code == 201
    exists = allocate(client, keys, dataset_id, keys.analyst_id, 0.7)
    assert exists.status_code == 409 and exists.json()["code"] == "allocation_exists"
    assert "delete it" in exists.json()["detail"]
    key_b, analyst_b = granted_analyst(client, keys, dataset_id)
    for body, field in (({"epsilon": 3.0, "delta": 1e-7}, "epsilon"), ({"epsilon": 0.5, "delta": 0.5}, "delta")):
        wrong = client.put(f"/v1/datasets/{dataset_id}/allocations/{key_b}", headers=keys.owner, json=body)
        assert wrong.status_code == 422 and wrong.json()["field"] == field, wrong.text
    negative = client.put(f"/v1/datasets/{dataset_id}/allocations/{key_b}", headers=keys.owner,
                          json={"epsilon": -1, "delta": 1e-7})  # fmt: skip
    assert negative.status_code == 422
    stranger = client.put(f"/v1/datasets/{dataset_id}/allocations/{keys.owner_id}", headers=keys.owner,
                          json={"epsilon": 0.5, "delta": 1e-7})  # fmt: skip
    assert stranger.status_code == 422 and stranger.json()["field"] == "api_key_id"  # not a granted analyst
    by_analyst = client.put(f"/v1/datasets/{dataset_id}/allocations/{key_b}", headers=analyst_b,
                            json={"epsilon": 0.5, "delta": 1e-7})  # fmt: skip
    assert by_analyst.status_code == 403
    missing = client.delete(f"/v1/datasets/{dataset_id}/allocations/{key_b}", headers=keys.owner)
    assert missing.status_code == 404 and missing.json()["code"] == "allocation_not_found"
    assert client.get(f"/v1/datasets/{dataset_id}/allocations", headers=keys.stranger_analyst).status_code == 404
