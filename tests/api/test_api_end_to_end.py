"""The user's path over HTTP: upload, fit, poll, predict, budget, ledger — on SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from api_helpers import upload, wait_for

from privfit.datasets import adult_schema
from privfit.privacy.noise import describe_sampler

FIT = {"model": "logistic", "solver": "dp_gd", "privacy": {"epsilon": 0.5}}


def test_fit_lifecycle_budget_and_ledger(client, keys):
    dataset_id = upload(client, keys)
    created = client.post("/v1/fits?include=rdp", headers=keys.analyst, json={"dataset_id": dataset_id, **FIT})
    assert created.status_code == 202, created.text
    body = created.json()
    assert body["status"] in ("queued", "running", "succeeded")
    assert body["cost"]["epsilon"] <= 0.5 and body["cost"]["delta"] == 1e-6
    assert len(body["cost"]["rdp"]) == 156 and created.headers["Location"] == f"/v1/fits/{body['id']}"
    done = wait_for(client, body["id"], keys.analyst)
    assert done["status"] == "succeeded" and done["progress"] == 1.0
    result = done["result"]
    assert len(result["coefficients"]) == 5 and result["feature_names"][0] == "x1"
    assert result["coefficients"][0] > 0 > result["coefficients"][1]  # y = sign(2·x1 − x2 + noise)
    # What is released besides θ is the resolved, data-independent settings — nothing computed from rows. The
    # default answer lists only what the release adds to them; include=metadata shows the whole metadata.
    assert result["metadata"] == {"noise_sampler": describe_sampler()}
    whole = client.get(f"/v1/fits/{body['id']}?include=metadata", headers=keys.analyst).json()["result"]["metadata"]
    assert whole == {**done["settings"], "noise_sampler": describe_sampler()} and whole["sigma"] > 0

    budget = client.get(f"/v1/datasets/{dataset_id}/budget?include=rdp", headers=keys.analyst).json()
    # the budget shows the filter's measure: the fit's share of ε_max, not its own ε (which composes sublinearly)
    assert budget["charged_epsilon"] == pytest.approx(body["cost"]["filter_epsilon"])
    assert 0 < budget["committed_epsilon"] < body["cost"]["epsilon"] and "filter" in budget["measure"]
    assert budget["reserved_epsilon"] == 0.0 and budget["epsilon_max"] == 2.0
    assert len(budget["orders"]) == len(budget["committed_rdp"]) == 156
    ledger = client.get(f"/v1/datasets/{dataset_id}/ledger", headers=keys.owner).json()
    assert [entry["kind"] for entry in ledger["entries"]] == ["reservation", "charge"]
    assert ledger["entries"][1]["formula_version"].startswith("balle2020|gdp;filter:")

    rows = [{"x1": 0.9, "x2": -0.5, "color": "red"}, {"x1": -0.9, "x2": 0.5, "color": "blue"}]
    predicted = client.post(f"/v1/fits/{body['id']}/predict", headers=keys.analyst, json={"rows": rows})
    assert predicted.status_code == 200, predicted.text
    assert predicted.json()["predictions"] == ["yes", "no"]


def test_over_budget_fit_gets_409_and_changes_nothing(client, keys):
    dataset_id = upload(client, keys, epsilon=0.6)
    first = client.post("/v1/fits", headers=keys.analyst, json={"dataset_id": dataset_id, **FIT})
    assert first.status_code == 202
    wait_for(client, first.json()["id"], keys.analyst)
    before = client.get(f"/v1/datasets/{dataset_id}/ledger", headers=keys.owner).json()
    refused = client.post("/v1/fits", headers=keys.analyst, json={"dataset_id": dataset_id, **FIT})
    assert refused.status_code == 409
    assert refused.headers["content-type"].startswith("application/problem+json")
    problem = refused.json()
    assert problem["remaining_epsilon"] == pytest.approx(0.6 - first.json()["cost"]["filter_epsilon"], abs=1e-9)
    assert problem["reason"] == "epsilon" and "privacy filter" in problem["detail"]
    assert problem["epsilon_max"] == 0.6
    assert client.get(f"/v1/datasets/{dataset_id}/ledger", headers=keys.owner).json() == before
    fits = client.get("/v1/fits", headers=keys.owner, params={"dataset_id": dataset_id}).json()
    assert len(fits) == 1


def test_estimate_charges_nothing(client, keys):
    dataset_id = upload(client, keys)
    estimate = client.post("/v1/fits/estimate", headers=keys.analyst, json={"dataset_id": dataset_id, **FIT})
    assert estimate.status_code == 200, estimate.text
    body = estimate.json()
    assert body["admissible"] and body["epsilon"] <= 0.5
    assert body["committed_epsilon_before"] == 0.0
    assert body["committed_epsilon_after"] == pytest.approx(body["cost"]["filter_epsilon"])
    assert client.get(f"/v1/datasets/{dataset_id}/ledger", headers=keys.owner).json()["total"] == 0


def test_idempotency_key_replays_and_refuses_a_different_body(client, keys):
    dataset_id = upload(client, keys)
    headers = {**keys.analyst, "Idempotency-Key": "fit-1"}
    first = client.post("/v1/fits", headers=headers, json={"dataset_id": dataset_id, **FIT})
    again = client.post("/v1/fits", headers=headers, json={"dataset_id": dataset_id, **FIT})
    assert first.status_code == again.status_code == 202 and first.json()["id"] == again.json()["id"]
    different = client.post("/v1/fits", headers=headers, json={"dataset_id": dataset_id, **FIT, "model": "svm"})
    assert different.status_code == 409
    assert client.get(f"/v1/datasets/{dataset_id}/ledger", headers=keys.owner).json()["total"] <= 2


def test_cancel_of_a_queued_fit_releases_its_reservation(idle_client, idle_keys):
    dataset_id = upload(idle_client, idle_keys)
    fit = idle_client.post("/v1/fits", headers=idle_keys.analyst, json={"dataset_id": dataset_id, **FIT}).json()
    assert (
        idle_client.get(f"/v1/datasets/{dataset_id}/budget", headers=idle_keys.analyst).json()["reserved_epsilon"] > 0
    )
    cancelled = idle_client.post(f"/v1/fits/{fit['id']}/cancel", headers=idle_keys.analyst)
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    budget = idle_client.get(f"/v1/datasets/{dataset_id}/budget", headers=idle_keys.analyst).json()
    assert budget["committed_epsilon"] == 0.0 and budget["reserved_epsilon"] == 0.0
    kinds = [
        e["kind"]
        for e in idle_client.get(f"/v1/datasets/{dataset_id}/ledger", headers=idle_keys.owner).json()["entries"]
    ]
    assert kinds == ["reservation", "release"]


def test_delete_purges_data_and_keeps_the_ledger(client, keys):
    dataset_id = upload(client, keys)
    fit = client.post("/v1/fits", headers=keys.analyst, json={"dataset_id": dataset_id, **FIT}).json()
    wait_for(client, fit["id"], keys.analyst)
    assert client.delete(f"/v1/datasets/{dataset_id}", headers=keys.owner).status_code == 204
    assert client.get(f"/v1/datasets/{dataset_id}", headers=keys.owner).status_code == 404
    assert not any(client.app.state.store.root.glob("*.npz"))
    from privfit.db import LedgerEntry

    with client.app.state.db.read() as session:
        assert session.query(LedgerEntry).filter_by(dataset_id=dataset_id).count() == 2


def _adult_rows(path):
    columns = ["age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
               "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country",
               "income"]  # fmt: skip
    rows, labels = [], []
    for record in csv.reader(io.StringIO(path.read_text())):
        if len(record) != len(columns):
            continue
        row = {name: value.strip() for name, value in zip(columns, record, strict=True)}
        labels.append(row.pop("income").rstrip("."))
        row.pop("fnlwgt")
        rows.append(row)
    return rows, labels


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_adult_logistic_dp_gd_at_epsilon_1_reaches_083_test_accuracy(client, keys, adult_dir):
    schema = adult_schema(5.0, 1e-6).model_dump(mode="json")
    response = client.post(
        "/v1/datasets", headers=keys.owner, files={"file": ("adult.data", (adult_dir / "adult.data").read_bytes())},
        data={"schema": json.dumps(schema), "name": "adult"},
    )  # fmt: skip
    assert response.status_code == 201, response.text
    dataset_id = response.json()["id"]
    rows, labels = _adult_rows(adult_dir / "adult.test")
    accuracies = []
    for _ in range(3):
        request = {"dataset_id": dataset_id, "model": "logistic", "solver": "dp_gd", "privacy": {"epsilon": 1.0}}
        fit = client.post("/v1/fits", headers=keys.owner, json=request)
        assert fit.status_code == 202, fit.text
        assert wait_for(client, fit.json()["id"], keys.owner, timeout=120)["status"] == "succeeded"
        predicted = client.post(f"/v1/fits/{fit.json()['id']}/predict", headers=keys.owner, json={"rows": rows})
        assert predicted.status_code == 200, predicted.text
        accuracies.append(np.mean(np.array(predicted.json()["predictions"]) == np.array(labels)))
    assert np.mean(accuracies) >= 0.83, accuracies


def test_schema_may_be_sent_as_a_text_field_or_a_file_part(client, keys):
    """`curl -F schema=<s.json` sends a text field, `curl -F schema=@s.json` a file part: both are accepted."""
    from api_helpers import SMALL_SCHEMA, small_csv

    parts = {"file": ("d.csv", small_csv(50)), "schema": ("s.json", json.dumps(SMALL_SCHEMA))}
    as_file = client.post("/v1/datasets", headers=keys.owner, files=parts)
    as_text = client.post("/v1/datasets", headers=keys.owner, files={"file": ("d.csv", small_csv(50))},
                          data={"schema": json.dumps(SMALL_SCHEMA), "allow_duplicate": "true"})  # fmt: skip
    assert as_file.status_code == as_text.status_code == 201, (as_file.text, as_text.text)
