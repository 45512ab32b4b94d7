"""Lean answers (issue 36, item 5), on SQLite and PostgreSQL: fit, estimate and budget answers leave out the per-order
RDP arrays (and a fit's result the metadata that repeats its settings) unless asked for with ``?include=``; the
default answers of the walkthrough's fit on ``examples/loans.csv`` stay under 2 KB; on request the arrays are there,
identical to what the ledger stores (what every answer showed before); ``GET /v1/fits/{id}/privacy`` gives a fit's
whole curve with its orders; the Python client asks for them and restores the whole metadata; an unknown part is a
422 naming ``include``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from api_helpers import Keys, fit_and_wait, make_client, make_keys, wait_for
from fastapi.testclient import TestClient
from sqlalchemy import select
from test_api_multiclass import upload_multiclass

from privfit.client import Client
from privfit.db import Budget, Job, LedgerEntry
from privfit.privacy import get_grid

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LEAN_LIMIT = 2048  # bytes: "under 2 KB"
FIT = {"solver": "dp_gd", "model": "logistic", "privacy": {"epsilon": 1.0}}


def upload_loans(client: TestClient, keys: Keys, **schema_changes: Any) -> str:
    """``examples/loans.csv`` with ``examples/loans-schema.json`` (as the walkthrough uploads it), granted to the
    analyst; its id."""
    schema = {**json.loads((EXAMPLES / "loans-schema.json").read_text()), **schema_changes}
    response = client.post(
        "/v1/datasets", headers=keys.owner, files={"file": ("loans.csv", (EXAMPLES / "loans.csv").read_bytes())},
        data={"schema": json.dumps(schema), "name": "loans", "allow_duplicate": "true"},
    )  # fmt: skip
    assert response.status_code == 201, response.text
    dataset_id = response.json()["id"]
    granted = client.post(f"/v1/datasets/{dataset_id}/grants", headers=keys.owner, json={"api_key_id": keys.analyst_id})
    assert granted.status_code == 201, granted.text
    return dataset_id


def without(document: dict[str, Any], *names: str) -> dict[str, Any]:
    return {key: value for key, value in document.items() if key not in names}


def test_default_answers_are_under_2_kb_and_the_arrays_come_on_request_identical(client, keys) -> None:
    dataset_id = upload_loans(client, keys)
    request = {"dataset_id": dataset_id, **FIT}

    # estimate: lean by default (asked first: the plan cache's shared cost must not lose its curve)
    lean = client.post("/v1/fits/estimate", headers=keys.analyst, json=request)
    full = client.post("/v1/fits/estimate?include=rdp", headers=keys.analyst, json=request)
    assert lean.status_code == full.status_code == 200, lean.text
    assert len(lean.content) < LEAN_LIMIT < len(full.content), len(lean.content)
    assert "rdp" not in lean.json()["cost"] and len(full.json()["cost"]["rdp"]) == 156
    assert lean.json() == {**full.json(), "cost": without(full.json()["cost"], "rdp")}  # nothing else differs

    # three fits: the budget then has eight ledger entries (a reservation and a charge for the upload's private
    # preprocessing and for each fit)
    fit_ids = []
    for _ in range(3):
        admitted = client.post("/v1/fits", headers=keys.analyst, json=request)
        assert admitted.status_code == 202, admitted.text
        assert len(admitted.content) < LEAN_LIMIT and "rdp" not in admitted.json()["cost"]
        fit_ids.append(admitted.json()["id"])
        assert wait_for(client, fit_ids[-1], keys.analyst)["status"] == "succeeded"
    fit_id = fit_ids[0]

    # a succeeded fit: the default answer is lean and under 2 KB; include=rdp&include=metadata is the whole one
    lean_fit = client.get(f"/v1/fits/{fit_id}", headers=keys.analyst)
    full_fit = client.get(f"/v1/fits/{fit_id}?include=rdp&include=metadata", headers=keys.analyst)
    assert lean_fit.status_code == full_fit.status_code == 200, lean_fit.text
    assert len(lean_fit.content) < LEAN_LIMIT, len(lean_fit.content)
    lean_body, full_body = lean_fit.json(), full_fit.json()
    settings, metadata = full_body["settings"], full_body["result"]["metadata"]
    assert "rdp" not in lean_body["cost"] and len(full_body["cost"]["rdp"]) == 156
    assert (
        lean_body["result"]["metadata"] == without(metadata, *settings) == {"noise_sampler": metadata["noise_sampler"]}
    )
    assert {**settings, **lean_body["result"]["metadata"]} == metadata  # the whole metadata, in order too
    assert list({**settings, **lean_body["result"]["metadata"]}) == list(metadata)
    assert lean_body == {**full_body, "cost": without(full_body["cost"], "rdp"),
                         "result": {**full_body["result"], "metadata": lean_body["result"]["metadata"]}}  # fmt: skip
    only_rdp = client.get(f"/v1/fits/{fit_id}?include=rdp", headers=keys.analyst).json()
    assert only_rdp["cost"] == full_body["cost"] and only_rdp["result"] == lean_body["result"]
    only_metadata = client.get(f"/v1/fits/{fit_id}?include=metadata", headers=keys.analyst).json()
    assert only_metadata["result"] == full_body["result"] and "rdp" not in only_metadata["cost"]

    # identical to what is stored (what the answers showed before): the fit's cost, the budget's curve, the ledger's
    db = client.app.state.db
    with db.read() as session:
        stored_cost = session.get_one(Job, fit_id).cost
        stored_committed = session.get_one(Budget, dataset_id).committed_rdp
        stored_entries = [e.rdp for e in session.scalars(
            select(LedgerEntry).where(LedgerEntry.dataset_id == dataset_id).order_by(LedgerEntry.id))]  # fmt: skip
    assert full_body["cost"] == stored_cost and full_body["cost"]["rdp"] == full.json()["cost"]["rdp"]

    # the sub-resource: the whole cost with the grid's orders
    privacy = client.get(f"/v1/fits/{fit_id}/privacy", headers=keys.analyst)
    assert privacy.status_code == 200, privacy.text
    grid = get_grid(stored_cost["grid"])
    assert privacy.json() == {"fit_id": fit_id, **stored_cost, "orders": [float(a) for a in grid.orders]}
    assert len(privacy.json()["orders"]) == len(privacy.json()["rdp"]) == 156

    # the budget, eight ledger entries in: lean and under 2 KB; the grid and the committed curve on request
    lean_budget = client.get(f"/v1/datasets/{dataset_id}/budget", headers=keys.analyst)
    full_budget = client.get(f"/v1/datasets/{dataset_id}/budget?include=rdp", headers=keys.analyst).json()
    assert full_budget["entries"] == 8 and len(lean_budget.content) < LEAN_LIMIT, len(lean_budget.content)
    assert lean_budget.json() == without(full_budget, "orders", "committed_rdp")
    assert full_budget["committed_rdp"] == stored_committed and full_budget["orders"] == privacy.json()["orders"]

    # the ledger and the fits list: curves and the repeated metadata only on request
    lean_ledger = client.get(f"/v1/datasets/{dataset_id}/ledger", headers=keys.owner).json()
    full_ledger = client.get(f"/v1/datasets/{dataset_id}/ledger?include=rdp", headers=keys.owner).json()
    assert [without(e, "rdp") for e in full_ledger["entries"]] == lean_ledger["entries"]
    assert [e["rdp"] for e in full_ledger["entries"]] == stored_entries and len(stored_entries) == 8
    listed = client.get(f"/v1/fits?dataset_id={dataset_id}", headers=keys.analyst).json()
    assert [f["id"] for f in listed] == fit_ids and listed[0] == lean_body
    listed_full = client.get(f"/v1/fits?dataset_id={dataset_id}&include=rdp&include=metadata", headers=keys.analyst)
    assert listed_full.json()[0] == full_body


def test_the_walkthrough_fit_is_under_2_kb_on_an_exact_server_too(database_url: str, tmp_path: Path) -> None:
    """The service's default sampler is ``exact``, whose ``noise_sampler`` description is the longer one."""
    with make_client(database_url, tmp_path, noise_sampler="exact") as exact:
        exact_keys = make_keys(exact)
        dataset_id = upload_loans(exact, exact_keys)
        admitted = exact.post("/v1/fits", headers=exact_keys.analyst, json={"dataset_id": dataset_id, **FIT})
        assert admitted.status_code == 202, admitted.text
        done = wait_for(exact, admitted.json()["id"], exact_keys.analyst)
        assert done["status"] == "succeeded" and done["result"]["metadata"]["noise_sampler"]["name"] == "exact"
        answer = exact.get(f"/v1/fits/{done['id']}", headers=exact_keys.analyst)
        assert len(answer.content) < LEAN_LIMIT, answer.text


def test_an_unknown_part_is_a_422_naming_include(client, keys) -> None:
    dataset_id = upload_loans(client, keys)
    for path in (f"/v1/datasets/{dataset_id}/budget?include=everything", f"/v1/datasets/{dataset_id}/ledger?include=x"):
        refused = client.get(path, headers=keys.owner)
        assert refused.status_code == 422 and refused.headers["content-type"].startswith("application/problem+json")
        assert refused.json()["errors"][0]["loc"] == ["query", "include", "0"], refused.text
    refused = client.post("/v1/fits/estimate?include=metadata", headers=keys.analyst,
                          json={"dataset_id": dataset_id, **FIT})  # fmt: skip
    assert refused.status_code == 422 and "include" in refused.json()["detail"], refused.text


def test_a_multiclass_fit_is_lean_too(client, keys) -> None:
    """The same parts go as for a binary fit. (No 2 KB bound here: the k × d coefficients are the release itself, and
    this 3-class fit's answer is about 2.4 KB with them and the noise outlook's warning.)"""
    dataset_id = upload_multiclass(client, keys)
    _, done = fit_and_wait(client, keys, {"dataset_id": dataset_id, **FIT})
    lean = client.get(f"/v1/fits/{done['id']}", headers=keys.analyst).json()
    full = client.get(f"/v1/fits/{done['id']}?include=rdp&include=metadata", headers=keys.analyst).json()
    assert len(lean["result"]["classes"]) == 3 and len(full["cost"]["rdp"]) == 156
    assert lean == {
        **full,
        "cost": without(full["cost"], "rdp"),
        "result": {**full["result"], "metadata": without(full["result"]["metadata"], *full["settings"])},
    }
    assert {**full["settings"], **lean["result"]["metadata"]} == full["result"]["metadata"]


def test_evaluation_answers_show_their_curve_on_request(client, keys) -> None:
    dataset_id = upload_loans(client, keys, validation_fraction=0.2)
    _, done = fit_and_wait(client, keys, {"dataset_id": dataset_id, **FIT})
    path, body = f"/v1/fits/{done['id']}/evaluate", {"privacy": {"epsilon": 0.2}, "metrics": ["accuracy"]}
    lean_estimate = client.post(f"{path}/estimate", headers=keys.analyst, json=body).json()
    full_estimate = client.post(f"{path}/estimate?include=rdp", headers=keys.analyst, json=body).json()
    assert lean_estimate == {**full_estimate, "cost": without(full_estimate["cost"], "rdp")}
    evaluation = client.post(path, headers=keys.analyst, json=body)
    assert evaluation.status_code == 201, evaluation.text
    assert "rdp" not in evaluation.json()["cost"]
    listed = client.get(f"/v1/fits/{done['id']}/evaluations?include=rdp", headers=keys.analyst).json()
    assert listed[0]["cost"]["rdp"] == full_estimate["cost"]["rdp"]  # the estimate is the charge
    assert client.get(f"/v1/fits/{done['id']}/evaluations", headers=keys.analyst).json() == [evaluation.json()]


def test_the_python_client_asks_for_the_arrays_and_restores_the_whole_metadata(client, keys) -> None:
    def forward(request: httpx.Request) -> httpx.Response:
        answer = client.request(request.method, str(request.url), headers=dict(request.headers),
                                content=request.content)  # fmt: skip
        return httpx.Response(answer.status_code, headers=answer.headers, content=answer.content)

    dataset_id = upload_loans(client, keys)
    token = keys.analyst["Authorization"].removeprefix("Bearer ")
    with Client("http://testserver", token, transport=httpx.MockTransport(forward), retries=0) as python:
        assert python.estimate(dataset_id, epsilon=1.0).cost.rdp is None  # type: ignore[union-attr]
        estimate = python.estimate(dataset_id, epsilon=1.0, rdp=True)
        fit = python.wait(python.fit(dataset_id, epsilon=1.0), timeout=300)
        whole = client.get(f"/v1/fits/{fit.id}?include=metadata", headers=keys.analyst).json()["result"]["metadata"]
        assert fit.result is not None and fit.result.metadata == whole and "sigma" in fit.result.metadata
        assert fit.cost is not None and fit.cost.rdp is None
        with_curve = python.get_fit(fit.id, rdp=True)
        assert with_curve.cost is not None and with_curve.cost.rdp == estimate.cost.rdp  # type: ignore[union-attr]
        privacy = python.fit_privacy(fit.id)
        assert privacy.rdp == with_curve.cost.rdp and privacy.orders is not None and len(privacy.orders) == 156
        budget = python.budget(dataset_id)
        assert budget.orders is None and budget.committed_rdp is None
        budget = python.budget(dataset_id, rdp=True)
        assert budget.orders == privacy.orders and budget.committed_rdp is not None
        assert all(entry.rdp is None for entry in python.iter_ledger(dataset_id))
        assert all(
            entry.rdp is not None and len(entry.rdp) == 156 for entry in python.iter_ledger(dataset_id, rdp=True)
        )
