"""Privacy domains (issue 37, item 2), on SQLite and PostgreSQL: a dataset registered into another's domain spends
that dataset's budget — one filter, one ledger, one chain — so fits on either count against one (ε, δ); the
duplicate check proposes the domain and a copy within it is accepted; allocations hold domain-wide; errors name the
field. Fits stay queued (an app without workers): admission is what is tested."""

from __future__ import annotations

import json

from api_helpers import SMALL_SCHEMA, Keys, small_csv, upload, wait_for
from fastapi.testclient import TestClient

from privfit.ledger.chain import parse_export, verify

FIT = {"model": "logistic", "solver": "dp_gd", "params": {"steps": 20}}


def upload_into(client: TestClient, keys: Keys, domain: str, *, csv: bytes, epsilon: float = 1.0,
                allow_duplicate: bool = False):  # fmt: skip
    schema = json.loads(json.dumps(SMALL_SCHEMA))
    schema["budget"]["epsilon"] = epsilon
    return client.post("/v1/datasets", headers=keys.owner, files={"file": ("b.csv", csv, "text/csv")},
                       data={"schema": json.dumps(schema), "name": "cleaned", "privacy_domain": domain,
                             "allow_duplicate": str(allow_duplicate).lower()})  # fmt: skip


def fit(client: TestClient, headers: dict[str, str], dataset_id: str, epsilon: float):
    return client.post("/v1/fits", headers=headers,
                       json={**FIT, "dataset_id": dataset_id, "privacy": {"epsilon": epsilon}})  # fmt: skip


def test_datasets_of_one_domain_spend_one_budget(idle_client: TestClient, idle_keys: Keys):
    client, keys = idle_client, idle_keys
    first = upload(client, keys, epsilon=1.0)
    created = upload_into(client, keys, first, csv=small_csv(seed=1))
    assert created.status_code == 201, created.text
    second = created.json()["id"]
    assert created.json()["privacy_domain"] == first
    assert client.get(f"/v1/datasets/{first}", headers=keys.owner).json()["privacy_domain"] == first
    client.post(f"/v1/datasets/{second}/grants", headers=keys.owner, json={"api_key_id": keys.analyst_id})

    assert fit(client, keys.analyst, first, 0.7).status_code == 202
    refused = fit(client, keys.analyst, second, 0.7)  # alone, with a budget of its own, it would be admitted
    assert refused.status_code == 409 and refused.json()["scope"] == "dataset", refused.text
    assert 0 < refused.json()["max_admissible_epsilon"] < 0.7

    budgets = [client.get(f"/v1/datasets/{d}/budget", headers=keys.owner).json() for d in (first, second)]
    assert budgets[0] == {**budgets[1], "dataset_id": first}
    ledgers = [client.get(f"/v1/datasets/{d}/ledger", headers=keys.owner).json() for d in (first, second)]
    assert ledgers[0]["entries"] == ledgers[1]["entries"]
    assert [e["kind"] for e in ledgers[0]["entries"]] == [
        "reservation"
    ]  # the fit on `first`; the refused wrote nothing
    export = client.get(f"/v1/datasets/{second}/ledger/export", headers=keys.owner)
    header, entries = parse_export(export.content.decode().splitlines())
    assert header["dataset_id"] == first and verify(header, entries).ok

    # an allocation set through either dataset holds for fits on both
    allocated = client.put(f"/v1/datasets/{second}/allocations/{keys.analyst_id}", headers=keys.owner,
                           json={"epsilon": 0.8, "delta": 1e-7})  # fmt: skip
    assert allocated.status_code == 201 and allocated.json()["committed_epsilon"] > 0  # counts the fit on `first`
    assert client.get(f"/v1/datasets/{first}/budget", headers=keys.analyst).json()["allocation"] is not None


def test_the_duplicate_check_proposes_the_domain_and_a_copy_within_it_is_accepted(idle_client, idle_keys):
    client, keys = idle_client, idle_keys
    first = upload(client, keys, epsilon=1.0, allow_duplicate=False)
    duplicate = client.post("/v1/datasets", headers=keys.owner, files={"file": ("a.csv", small_csv(), "text/csv")},
                            data={"schema": json.dumps({**SMALL_SCHEMA, "budget": {"epsilon": 1.0, "delta": 1e-6}}),
                                  "name": "again"})  # fmt: skip
    assert duplicate.status_code == 409 and duplicate.json()["privacy_domain"] == first, duplicate.text
    assert f"privacy_domain={first}" in duplicate.json()["detail"]
    joined = upload_into(client, keys, first, csv=small_csv())  # the same content, into the same domain
    assert joined.status_code == 201 and joined.json()["privacy_domain"] == first, joined.text


def test_joining_a_domain_is_checked(idle_client: TestClient, idle_keys: Keys):
    client, keys = idle_client, idle_keys
    first = upload(client, keys, epsilon=1.0)
    mismatch = upload_into(client, keys, first, csv=small_csv(seed=2), epsilon=2.0)
    assert mismatch.status_code == 422 and mismatch.json()["field"] == "schema.budget", mismatch.text
    malformed = upload_into(client, keys, "loans", csv=small_csv(seed=2))
    assert malformed.status_code == 422 and malformed.json()["field"] == "privacy_domain"
    schema = {**SMALL_SCHEMA, "budget": {"epsilon": 1.0, "delta": 1e-6}}
    other = client.post("/v1/datasets", headers=keys.other_owner,
                        files={"file": ("c.csv", small_csv(seed=3), "text/csv")},
                        data={"schema": json.dumps(schema), "privacy_domain": first})  # fmt: skip
    assert other.status_code == 404  # not the caller's dataset: as any dataset it may not manage
    assert len(client.get("/v1/datasets", headers=keys.owner).json()) == 1  # nothing half-written


def test_a_fit_on_a_member_runs_and_is_charged_to_the_domain(client: TestClient, keys: Keys):
    """With workers: the runner charges, and a cancel before the start releases, against the domain's budget."""
    first = upload(client, keys, epsilon=1.0)
    second = upload_into(client, keys, first, csv=small_csv(seed=4)).json()["id"]
    client.post(f"/v1/datasets/{second}/grants", headers=keys.owner, json={"api_key_id": keys.analyst_id})
    fit_id = fit(client, keys.analyst, second, 0.3).json()["id"]
    assert wait_for(client, fit_id, keys.analyst)["status"] == "succeeded"
    entries = client.get(f"/v1/datasets/{first}/ledger", headers=keys.owner).json()["entries"]
    assert [(e["job_id"], e["kind"]) for e in entries] == [(fit_id, "reservation"), (fit_id, "charge")]
    budget = client.get(f"/v1/datasets/{first}/budget", headers=keys.owner).json()
    assert budget["charged_epsilon"] > 0 and budget["reserved_epsilon"] == 0.0


def test_a_domain_too_spent_to_pay_an_uploads_preprocessing_refuses_it_whole(idle_client, idle_keys):
    """The one upload that can meet a spent budget: joining a domain with private preprocessing on. 409 naming the
    field, nothing registered, charged or left in the store."""
    client, keys = idle_client, idle_keys
    first = upload(client, keys, epsilon=1.0)
    estimate = client.post("/v1/fits/estimate", headers=keys.owner,
                           json={**FIT, "dataset_id": first, "privacy": {"epsilon": 1.0}}).json()  # fmt: skip
    top = estimate["max_admissible_epsilon"]
    assert fit(client, keys.owner, first, top).status_code == 202  # queued: its reservation uses the budget up
    schema = {k: v for k, v in SMALL_SCHEMA.items() if k != "preprocessing"}  # the default: preprocessing on
    schema["budget"] = {"epsilon": 1.0, "delta": 1e-6}
    refused = client.post("/v1/datasets", headers=keys.owner, files={"file": ("p.csv", small_csv(seed=6), "text/csv")},
                          data={"schema": json.dumps(schema), "privacy_domain": first})  # fmt: skip
    assert refused.status_code == 409 and refused.json()["field"] == "privacy_domain", refused.text
    assert "preprocessing" in refused.json()["detail"]
    assert [d["id"] for d in client.get("/v1/datasets", headers=keys.owner).json()] == [first]
    entries = client.get(f"/v1/datasets/{first}/ledger", headers=keys.owner).json()["entries"]
    assert [e["kind"] for e in entries] == ["reservation"]
    assert len(client.app.state.store.stored_keys()) == 1  # the first dataset's matrix only: nothing orphaned
