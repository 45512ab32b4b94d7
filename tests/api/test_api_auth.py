"""Authorization matrix: every role (and no key, a bad key, another owner) against every endpoint."""

from __future__ import annotations

import json

import pytest
from api_helpers import SMALL_SCHEMA, small_csv, upload, wait_for

ANON, BAD = "anonymous", "bad key"
ROLES = ["owner", "other_owner", "analyst", "stranger_analyst", "admin", ANON, BAD]

# endpoint -> the roles that succeed; every other role gets the status in EXPECTED_DENIAL
MATRIX = {
    "list datasets": ["owner", "other_owner", "analyst", "stranger_analyst", "admin"],
    "show dataset": ["owner", "analyst", "admin"],
    "budget": ["owner", "analyst", "admin"],
    "ledger": ["owner", "analyst", "admin"],
    "grant": ["owner", "admin"],
    "upload": ["owner", "other_owner"],
    "estimate": ["owner", "analyst"],
    "create fit": ["owner", "analyst"],
    "show fit": ["owner", "analyst", "admin"],
    "onnx model": ["owner", "analyst", "admin"],
    "solvers": ["owner", "other_owner", "analyst", "stranger_analyst", "admin"],
    "me": ["owner", "other_owner", "analyst", "stranger_analyst", "admin"],
    "create key": ["admin"],
    "delete dataset": ["owner", "admin"],
}


def headers_for(keys, role: str) -> dict[str, str]:
    if role == ANON:
        return {}
    if role == BAD:
        return {"Authorization": "Bearer pf_000000000000_not-a-key"}
    return getattr(keys, role)


def call(client, endpoint: str, headers, dataset_id: str, fit_id: str, analyst_id: str):
    fit = {"dataset_id": dataset_id, "privacy": {"epsilon": 0.1}}

    requests = {
        "list datasets": lambda: client.get("/v1/datasets", headers=headers),
        "show dataset": lambda: client.get(f"/v1/datasets/{dataset_id}", headers=headers),
        "budget": lambda: client.get(f"/v1/datasets/{dataset_id}/budget", headers=headers),
        "ledger": lambda: client.get(f"/v1/datasets/{dataset_id}/ledger", headers=headers),
        "grant": lambda: client.post(f"/v1/datasets/{dataset_id}/grants", headers=headers,
                                     json={"api_key_id": analyst_id}),
        "upload": lambda: client.post("/v1/datasets", headers=headers, files={"file": ("d.csv", small_csv(50))},
                                      data={"schema": json.dumps(SMALL_SCHEMA)}),
        "estimate": lambda: client.post("/v1/fits/estimate", headers=headers, json=fit),
        "create fit": lambda: client.post("/v1/fits", headers=headers, json=fit),
        "show fit": lambda: client.get(f"/v1/fits/{fit_id}", headers=headers),
        "onnx model": lambda: client.get(f"/v1/fits/{fit_id}/model.onnx", headers=headers),
        "solvers": lambda: client.get("/v1/solvers", headers=headers),
        "me": lambda: client.get("/v1/me", headers=headers),
        "create key": lambda: client.post("/v1/keys", headers=headers, json={"role": "analyst"}),
        "delete dataset": lambda: client.delete(f"/v1/datasets/{dataset_id}", headers=headers),
    }  # fmt: skip
    return requests[endpoint]()


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("endpoint", sorted(MATRIX))
def test_authorization_matrix(client, keys, endpoint):
    dataset_id = upload(client, keys, epsilon=5.0)
    fit_id = client.post("/v1/fits", headers=keys.analyst,
                         json={"dataset_id": dataset_id, "privacy": {"epsilon": 0.1}}).json()["id"]  # fmt: skip
    wait_for(client, fit_id, keys.analyst)
    for role in ROLES:
        response = call(client, endpoint, headers_for(keys, role), dataset_id, fit_id, keys.analyst_id)
        if role in MATRIX[endpoint]:
            assert response.status_code < 300, (endpoint, role, response.status_code, response.text)
        elif role in (ANON, BAD):
            assert response.status_code == 401, (endpoint, role, response.status_code)
        else:
            # Other owners and ungranted analysts cannot even learn that the dataset exists (404);
            # a role that may never use the endpoint gets 403.
            assert response.status_code in (403, 404), (endpoint, role, response.status_code)
            assert response.headers["content-type"].startswith("application/problem+json")
        if endpoint == "delete dataset" and response.status_code == 204:
            dataset_id = upload(client, keys, epsilon=5.0)


def test_nobody_can_read_rows_back(client, keys):
    dataset_id = upload(client, keys)
    body = client.get(f"/v1/datasets/{dataset_id}", headers=keys.owner).json()
    assert set(body) == {"id", "name", "n", "n_validation", "validation_fraction", "d", "feature_names",
                         "row_norm_bound", "label_bound", "schema", "created_at", "owner_key_id",
                         "content_hash", "clipped_cells", "preprocessing", "privacy_domain",
                         "privacy_unit"}  # fmt: skip
    as_analyst = client.get(f"/v1/datasets/{dataset_id}", headers=keys.analyst).json()
    assert as_analyst["content_hash"] is None
    assert body["clipped_cells"] is None and as_analyst["clipped_cells"] is None  # in the upload's answer only
    paths = {getattr(route, "path", "") for route in client.app.routes}
    assert not any("rows" in path or "download" in path or "export" in path for path in paths)
