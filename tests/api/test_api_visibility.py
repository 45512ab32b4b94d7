"""A dataset or fit the caller may not see answers exactly like one that does not exist, on every endpoint that
takes its id: same status, same headers, same body but for the requested id (compared byte for byte after
replacing that id), on SQLite and PostgreSQL. Nothing in the answer names anything else (the old leak: another
owner asking for your fit was told your dataset's id)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from api_helpers import Keys, bearer, upload
from fastapi.testclient import TestClient

from privfit.api.auth import create_api_key

FIT = {"model": "logistic", "solver": "dp_gd", "privacy": {"epsilon": 0.2}}
ROW = {"x1": 0.5, "x2": -0.5, "color": "red"}

# Each dataset endpoint: (name, request(client, headers, dataset_id, analyst_id)).
DATASET_CALLS: list[tuple[str, Callable[..., Any]]] = [
    ("GET dataset", lambda c, h, d, a: c.get(f"/v1/datasets/{d}", headers=h)),
    ("GET budget", lambda c, h, d, a: c.get(f"/v1/datasets/{d}/budget", headers=h)),
    ("GET ledger", lambda c, h, d, a: c.get(f"/v1/datasets/{d}/ledger", headers=h)),
    ("GET grants", lambda c, h, d, a: c.get(f"/v1/datasets/{d}/grants", headers=h)),
    ("POST grants", lambda c, h, d, a: c.post(f"/v1/datasets/{d}/grants", headers=h, json={"api_key_id": a})),
    ("DELETE grant", lambda c, h, d, a: c.delete(f"/v1/datasets/{d}/grants/{a}", headers=h)),
    ("DELETE dataset", lambda c, h, d, a: c.delete(f"/v1/datasets/{d}", headers=h)),
    ("GET fits?dataset_id", lambda c, h, d, a: c.get("/v1/fits", params={"dataset_id": d}, headers=h)),
    ("POST fits", lambda c, h, d, a: c.post("/v1/fits", headers=h, json={"dataset_id": d, **FIT})),
    ("POST estimate", lambda c, h, d, a: c.post("/v1/fits/estimate", headers=h, json={"dataset_id": d, **FIT})),
]

# Each fit endpoint: (name, request(client, headers, fit_id)).
FIT_CALLS: list[tuple[str, Callable[..., Any]]] = [
    ("GET fit", lambda c, h, f: c.get(f"/v1/fits/{f}", headers=h)),
    ("POST cancel", lambda c, h, f: c.post(f"/v1/fits/{f}/cancel", headers=h)),
    ("POST predict", lambda c, h, f: c.post(f"/v1/fits/{f}/predict", headers=h, json={"rows": [ROW]})),
]


def answer(response: Any, requested: str) -> tuple[int, dict[str, str], bytes]:
    """What the caller observes, with the requested id replaced: status, every header, the body's bytes."""
    placeholder = "00000000-0000-4000-8000-000000000000"
    headers = {name: value.replace(requested, placeholder) for name, value in response.headers.items()}
    return response.status_code, headers, response.content.replace(requested.encode(), placeholder.encode())


def assert_alike(invisible: Any, invisible_id: str, missing: Any, missing_id: str, code: str, *, what: str) -> None:
    assert invisible.status_code == 404, (what, invisible.status_code, invisible.text)
    assert invisible.json()["code"] == code, (what, invisible.text)
    assert answer(invisible, invisible_id) == answer(missing, missing_id), what


@pytest.fixture
def world(idle_client: TestClient, idle_keys: Keys) -> dict[str, Any]:
    """A dataset of the owner, granted to the analyst and to a second analyst; a fit of the analyst on it (queued:
    visibility does not depend on its state); a deleted dataset of the owner that the analyst was granted."""
    db = idle_client.app.state.db
    second_id, second = create_api_key(db, "analyst", "second")
    dataset_id = upload(idle_client, idle_keys)
    idle_client.post(f"/v1/datasets/{dataset_id}/grants", headers=idle_keys.owner, json={"api_key_id": second_id})
    fit = idle_client.post("/v1/fits", headers=idle_keys.analyst, json={"dataset_id": dataset_id, **FIT}).json()
    deleted_id = upload(idle_client, idle_keys)
    assert idle_client.delete(f"/v1/datasets/{deleted_id}", headers=idle_keys.owner).status_code == 204
    return {"dataset": dataset_id, "fit": fit["id"], "deleted": deleted_id, "second_analyst": bearer(second)}


@pytest.mark.parametrize(("name", "call"), DATASET_CALLS, ids=[name for name, _ in DATASET_CALLS])
def test_an_invisible_dataset_answers_like_a_missing_one(idle_client, idle_keys, world, name, call):
    callers = {"another owner": idle_keys.other_owner, "an analyst without a grant": idle_keys.stranger_analyst}
    for who, headers in callers.items():
        missing_id = str(uuid.uuid4())
        invisible = call(idle_client, headers, world["dataset"], idle_keys.analyst_id)
        missing = call(idle_client, headers, missing_id, idle_keys.analyst_id)
        assert_alike(invisible, world["dataset"], missing, missing_id, "dataset_not_found", what=f"{name}, {who}")
    # to a granted analyst, a deleted dataset does not exist (its owner and admins still read its ledger)
    missing_id = str(uuid.uuid4())
    deleted = call(idle_client, idle_keys.analyst, world["deleted"], idle_keys.analyst_id)
    missing = call(idle_client, idle_keys.analyst, missing_id, idle_keys.analyst_id)
    assert_alike(deleted, world["deleted"], missing, missing_id, "dataset_not_found", what=f"{name}, deleted")


@pytest.mark.parametrize(("name", "call"), FIT_CALLS, ids=[name for name, _ in FIT_CALLS])
def test_an_invisible_fit_answers_like_a_missing_one(idle_client, idle_keys, world, name, call):
    callers = {
        "another owner": idle_keys.other_owner,
        "an analyst without a grant": idle_keys.stranger_analyst,
        "another analyst granted the dataset": world["second_analyst"],
    }
    for who, headers in callers.items():
        missing_id = str(uuid.uuid4())
        invisible = call(idle_client, headers, world["fit"])
        missing = call(idle_client, headers, missing_id)
        assert_alike(invisible, world["fit"], missing, missing_id, "fit_not_found", what=f"{name}, {who}")
        assert world["dataset"] not in invisible.text  # the fit's dataset is never named
    # those who may see it still do
    for headers in (idle_keys.analyst, idle_keys.owner, idle_keys.admin):
        assert idle_client.get(f"/v1/fits/{world['fit']}", headers=headers).status_code == 200


def test_malformed_ids_never_reach_the_database(idle_client, idle_keys):
    """A NUL byte or another non-id in a path is a 404; in a body or query field a 422 naming it (PostgreSQL
    answered 500 to NUL bytes before)."""
    for path in ("/v1/datasets/%00", "/v1/fits/%00", "/v1/datasets/x%01y/budget", "/v1/fits/%00/cancel"):
        response = idle_client.request("POST" if path.endswith("cancel") else "GET", path, headers=idle_keys.admin)
        assert response.status_code == 404, (path, response.text)
        assert response.headers["content-type"].startswith("application/problem+json")
    for request in (
        lambda: idle_client.get("/v1/fits", params={"dataset_id": "\x00"}, headers=idle_keys.admin),
        lambda: idle_client.post("/v1/fits", json={"dataset_id": "\x00", **FIT}, headers=idle_keys.analyst),
        lambda: idle_client.post("/v1/fits/estimate", json={"dataset_id": "nope", **FIT}, headers=idle_keys.analyst),
    ):
        response = request()
        assert response.status_code == 422, response.text
        assert response.json()["errors"][0]["loc"][-1] == "dataset_id"
    dataset_id = upload(idle_client, idle_keys, grant=False)
    granted = idle_client.post(f"/v1/datasets/{dataset_id}/grants", headers=idle_keys.owner,
                               json={"api_key_id": "\u0000"})  # fmt: skip
    assert granted.status_code == 422 and granted.json()["errors"][0]["loc"] == ["body", "api_key_id"]
    for name in ("a\x00b", "line\nbreak", "\x1b[31mred", "\ud800"):  # a lone surrogate cannot be stored either
        body = json.dumps({"role": "analyst", "name": name})  # ASCII: the surrogate travels as \ud800
        created = idle_client.post("/v1/keys", headers={**idle_keys.admin, "content-type": "application/json"},
                                   content=body)  # fmt: skip
        assert created.status_code == 422 and created.json()["errors"][0]["loc"] == ["body", "name"], created.text
