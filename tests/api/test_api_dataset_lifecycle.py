"""Dataset deletion semantics and duplicate uploads over HTTP, on SQLite and PostgreSQL.

* a deleted dataset's budget, ledger, fits list and fit status stay readable by its owner and admins; analysts get
  404; new fits and estimates are refused with 410; predictions of its fits are refused with 410;
* deleting cancels queued fits (reservation released) and asks running fits to stop;
* a delete racing an upload of the same content (two API processes, database store) never registers the upload on
  purged data;
* re-uploading content the owner already has is a 409 naming the existing dataset unless ``allow_duplicate``;
  owners and admins list duplicates.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from api_helpers import SMALL_SCHEMA, Keys, bearer, fit_and_wait, make_client, small_csv, upload, wait_for
from fastapi.testclient import TestClient
from sqlalchemy import select

from privfit.api.auth import create_api_key
from privfit.db import DatasetBlob, Job
from privfit.db.models import DatasetUpload
from privfit.jobs import claim
from privfit.solvers.design_cache import design_cache

FIT = {"model": "logistic", "solver": "dp_gd", "privacy": {"epsilon": 0.5}}
ROW = {"x1": 0.5, "x2": -0.5, "color": "red"}


def make_keys(test_client: TestClient) -> Keys:
    db = test_client.app.state.db
    owner_id, owner = create_api_key(db, "owner")
    analyst_id, analyst = create_api_key(db, "analyst")
    other, stranger, admin = (create_api_key(db, role)[1] for role in ("owner", "analyst", "admin"))
    return Keys(bearer(owner), owner_id, bearer(other), bearer(analyst), analyst_id, bearer(stranger), bearer(admin))


def kinds(test_client: TestClient, dataset_id: str, headers: dict[str, str]) -> list[str]:
    response = test_client.get(f"/v1/datasets/{dataset_id}/ledger", headers=headers)
    assert response.status_code == 200, response.text
    return [entry["kind"] for entry in response.json()["entries"]]


def test_a_deleted_datasets_ledger_stays_readable_by_its_owner_and_admins(client: TestClient, keys: Keys):
    dataset_id = upload(client, keys)
    fit_id = fit_and_wait(client, keys, {"dataset_id": dataset_id, **FIT})[1]["id"]
    before = client.get(f"/v1/datasets/{dataset_id}/budget", headers=keys.owner).json()
    assert client.post(f"/v1/fits/{fit_id}/predict", headers=keys.analyst, json={"rows": [ROW]}).status_code == 200

    assert client.delete(f"/v1/datasets/{dataset_id}", headers=keys.owner).status_code == 204

    for headers in (keys.owner, keys.admin):
        budget = client.get(f"/v1/datasets/{dataset_id}/budget", headers=headers)
        assert budget.status_code == 200, budget.text
        assert budget.json()["charged_epsilon"] == before["charged_epsilon"] > 0
        assert kinds(client, dataset_id, headers) == ["reservation", "charge"]
        fits = client.get("/v1/fits", params={"dataset_id": dataset_id}, headers=headers)
        assert fits.status_code == 200 and [f["id"] for f in fits.json()] == [fit_id]
        assert client.get(f"/v1/fits/{fit_id}", headers=headers).json()["status"] == "succeeded"
    # analysts (even granted ones) see a deleted dataset as if it never existed
    for path in (f"/v1/datasets/{dataset_id}/budget", f"/v1/datasets/{dataset_id}/ledger"):
        assert client.get(path, headers=keys.analyst).status_code == 404
    assert client.get(f"/v1/datasets/{dataset_id}", headers=keys.owner).status_code == 404  # metadata: gone
    # fitting is refused with a clear 410 to the owner; the analyst gets 404
    for path in ("/v1/fits", "/v1/fits/estimate"):
        refused = client.post(path, headers=keys.owner, json={"dataset_id": dataset_id, **FIT})
        assert refused.status_code == 410, refused.text
        assert refused.headers["content-type"].startswith("application/problem+json")
        assert "deleted" in refused.json()["detail"] and refused.json()["field"] == "dataset_id"
        assert client.post(path, headers=keys.analyst, json={"dataset_id": dataset_id, **FIT}).status_code == 404
    # the fit's model no longer serves predictions
    for headers in (keys.analyst, keys.owner, keys.admin):
        predicted = client.post(f"/v1/fits/{fit_id}/predict", headers=headers, json={"rows": [ROW]})
        assert predicted.status_code == 410, predicted.text
        assert "deleted" in predicted.json()["detail"]
    assert kinds(client, dataset_id, keys.owner) == ["reservation", "charge"]  # nothing more was charged


def test_deleting_a_dataset_drops_this_processs_shared_design_of_its_rows(client: TestClient, keys: Keys):
    """Issue 40: a dp_gd fit leaves the dataset's float32 design in the process's cache (the embedded worker runs in
    the API process here); the DELETE drops it, so the deleted rows leave memory at once, not at eviction."""
    dataset_id = upload(client, keys)
    fit_and_wait(client, keys, {"dataset_id": dataset_id, **FIT})
    cached = [key for key in design_cache().dataset_keys() if isinstance(key, tuple) and key[0] == dataset_id]
    assert len(cached) == 1, design_cache().dataset_keys()
    assert client.delete(f"/v1/datasets/{dataset_id}", headers=keys.owner).status_code == 204
    assert cached[0] not in design_cache().dataset_keys()


def test_deleting_cancels_queued_fits_with_their_reservations_released(idle_client: TestClient, idle_keys: Keys):
    dataset_id = upload(idle_client, idle_keys)
    queued = [idle_client.post("/v1/fits", headers=idle_keys.analyst, json={"dataset_id": dataset_id, **FIT}).json()
              for _ in range(2)]  # fmt: skip
    assert {fit["status"] for fit in queued} == {"queued"}
    assert idle_client.delete(f"/v1/datasets/{dataset_id}", headers=idle_keys.owner).status_code == 204
    for fit in queued:
        body = idle_client.get(f"/v1/fits/{fit['id']}", headers=idle_keys.owner).json()
        assert body["status"] == "cancelled", body
    assert sorted(kinds(idle_client, dataset_id, idle_keys.owner)) == ["release"] * 2 + ["reservation"] * 2
    budget = idle_client.get(f"/v1/datasets/{dataset_id}/budget", headers=idle_keys.owner).json()
    assert budget["committed_epsilon"] == 0.0


def test_deleting_asks_running_fits_to_stop(idle_client: TestClient, idle_keys: Keys):
    dataset_id = upload(idle_client, idle_keys)
    fit_id = idle_client.post("/v1/fits", headers=idle_keys.analyst, json={"dataset_id": dataset_id, **FIT}).json()[
        "id"
    ]
    db = idle_client.app.state.db
    assert claim(db, fit_id, "a-worker", 60) is not None  # running, as a worker would have it
    assert idle_client.delete(f"/v1/datasets/{dataset_id}", headers=idle_keys.owner).status_code == 204
    with db.read() as session:
        job = session.get(Job, fit_id)
        assert (job.status, job.cancel_requested) == ("running", True)


@pytest.fixture
def database_store_apps(database_url: str, tmp_path: Path) -> Iterator[tuple[TestClient, TestClient]]:
    """Two API "processes" (two apps, two engines) on one database with the database store, no workers."""
    options = {"workers": False, "queue": "none", "store": "database"}
    with (
        make_client(database_url, tmp_path / "a", **options) as first,
        make_client(database_url, tmp_path / "b", **options) as second,
    ):
        yield first, second


def test_a_delete_racing_an_upload_of_equal_content_never_purges_the_uploads_data(database_store_apps, database_url,
                                                                                   tmp_path):  # fmt: skip
    """Upload A in one process; at the worst moment — A's matrix stored (the blob of B, equal content, exists),
    A not yet registered — another process deletes B. A must be registered with its data, and fit."""
    first, second = database_store_apps
    keys = make_keys(first)
    b_id = upload(first, keys)
    store = first.app.state.store
    original_put = store.put

    def put_then_delete_b(encoded, key=None):  # type: ignore[no-untyped-def]
        key = original_put(encoded, key)
        assert second.delete(f"/v1/datasets/{b_id}", headers=keys.owner).status_code == 204
        return key

    store.put = put_then_delete_b
    try:
        a_id = upload(first, keys)
    finally:
        del store.put
    with first.app.state.db.read() as session:
        assert len(list(session.scalars(select(DatasetBlob.key)))) == 1  # A's data survived B's delete
    with make_client(database_url, tmp_path / "w", store="database") as worker_app:  # a worker fits A
        created = worker_app.post("/v1/fits", headers=keys.analyst, json={"dataset_id": a_id, **FIT})
        assert created.status_code == 202, created.text
        done = wait_for(worker_app, created.json()["id"], keys.analyst)
    assert done["status"] == "succeeded", done


def post_csv(test_client: TestClient, headers: dict[str, str], **form: str):  # type: ignore[no-untyped-def]
    return test_client.post(
        "/v1/datasets", headers=headers, files={"file": ("data.csv", small_csv(), "text/csv")},
        data={"schema": json.dumps(SMALL_SCHEMA), "name": "small", **form},
    )  # fmt: skip


def test_a_duplicate_upload_is_a_409_naming_the_existing_dataset_unless_allowed(idle_client: TestClient,
                                                                                idle_keys: Keys):  # fmt: skip
    first = post_csv(idle_client, idle_keys.owner)
    assert first.status_code == 201, first.text
    again = post_csv(idle_client, idle_keys.owner)
    assert again.status_code == 409, again.text
    assert again.headers["content-type"].startswith("application/problem+json")
    assert again.json()["existing_dataset_id"] == first.json()["id"] and again.json()["field"] == "allow_duplicate"
    # a different budget is still the same data: still a duplicate
    declared = json.loads(json.dumps(SMALL_SCHEMA))
    declared["budget"]["epsilon"] = 7.0
    other_budget = idle_client.post("/v1/datasets", headers=idle_keys.owner,
                                    files={"file": ("data.csv", small_csv(), "text/csv")},
                                    data={"schema": json.dumps(declared)})  # fmt: skip
    assert other_budget.status_code == 409
    allowed = post_csv(idle_client, idle_keys.owner, allow_duplicate="true")
    assert allowed.status_code == 201 and allowed.json()["id"] != first.json()["id"]
    assert post_csv(idle_client, idle_keys.other_owner).status_code == 201  # another owner's copy: not a duplicate
    # a deleted dataset is no longer a duplicate of anything
    for dataset_id in (first.json()["id"], allowed.json()["id"]):
        assert idle_client.delete(f"/v1/datasets/{dataset_id}", headers=idle_keys.owner).status_code == 204
    assert post_csv(idle_client, idle_keys.owner).status_code == 201


def test_two_identical_uploads_racing_each_other_register_once(database_store_apps):
    """Both uploads pass the duplicate check when they begin; the one that registers second must see the first
    (the check is repeated under the key's lock at registration) and get the 409, leaving no pending upload."""
    first, second = database_store_apps
    keys = make_keys(first)
    store = first.app.state.store
    original_put = store.put
    racing: list = []

    def put_then_let_the_other_upload_finish(encoded, key=None):  # type: ignore[no-untyped-def]
        key = original_put(encoded, key)
        racing.append(post_csv(second, keys.owner))
        return key

    store.put = put_then_let_the_other_upload_finish
    try:
        late = post_csv(first, keys.owner)
    finally:
        del store.put
    [early] = racing
    assert early.status_code == 201, early.text
    assert late.status_code == 409 and late.json()["existing_dataset_id"] == early.json()["id"], late.text
    assert [d["id"] for d in first.get("/v1/datasets", headers=keys.owner).json()] == [early.json()["id"]]
    with first.app.state.db.read() as session:
        assert list(session.scalars(select(DatasetUpload.id))) == []  # the loser's pending upload is gone
        assert len(list(session.scalars(select(DatasetBlob.key)))) == 1  # the winner's data stays


def test_owners_and_admins_list_duplicates(idle_client: TestClient, idle_keys: Keys):
    first = post_csv(idle_client, idle_keys.owner).json()
    second = post_csv(idle_client, idle_keys.owner, allow_duplicate="true").json()
    other = post_csv(idle_client, idle_keys.other_owner).json()
    lone = upload(idle_client, idle_keys, csv=small_csv(seed=7))
    admin_view = idle_client.get("/v1/datasets/duplicates", headers=idle_keys.admin)
    assert admin_view.status_code == 200, admin_view.text
    [group] = admin_view.json()
    assert group["count"] == 3 and group["content_hash"] == first["content_hash"]
    assert [d["id"] for d in group["datasets"]] == [first["id"], second["id"], other["id"]]
    assert lone not in json.dumps(admin_view.json())
    [own] = idle_client.get("/v1/datasets/duplicates", headers=idle_keys.owner).json()
    assert [d["id"] for d in own["datasets"]] == [first["id"], second["id"]]  # only the owner's own datasets
    assert idle_client.get("/v1/datasets/duplicates", headers=idle_keys.other_owner).json() == []
    assert idle_client.get("/v1/datasets/duplicates", headers=idle_keys.analyst).status_code == 403
    assert idle_client.delete(f"/v1/datasets/{second['id']}", headers=idle_keys.owner).status_code == 204
    assert idle_client.get("/v1/datasets/duplicates", headers=idle_keys.owner).json() == []
