"""Issue 36: answers people can act on when a request names a resource wrongly.

* An id path parameter holding something else (a dataset's name: ``GET /v1/datasets/loans/budget``) is a 404 that
  says so: problem+json naming the path parameter (``errors[0].loc``), that it takes an id, and where the ids are
  listed (``GET /v1/datasets``, ``privfit datasets list``; ``GET /v1/fits`` for fits). A path the API
  does not have for another reason keeps the plain 404, and a well-formed unknown id keeps ``dataset_not_found``.
* A JSON body sent without ``Content-Type: application/json`` (curl ``-d`` sends a form type; no header at all) is
  a 422 that says to send that header; a JSON body that is not an object keeps the plain message.
"""

from __future__ import annotations

import json

import pytest
from api_helpers import upload

UUID = "00000000-0000-0000-0000-000000000000"
FIT = {"model": "logistic", "solver": "dp_gd", "privacy": {"epsilon": 0.5}}


@pytest.mark.parametrize(
    ("method", "path", "parameter", "listed"),
    [
        ("GET", "/v1/datasets/loans/budget", "dataset_id", "GET /v1/datasets (privfit datasets list"),
        ("GET", "/v1/datasets/loans", "dataset_id", "GET /v1/datasets (privfit datasets list"),
        ("DELETE", "/v1/datasets/loans", "dataset_id", "GET /v1/datasets (privfit datasets list"),
        ("GET", "/v1/datasets/my%20loans/ledger", "dataset_id", "GET /v1/datasets (privfit datasets list"),
        ("GET", "/v1/fits/first-fit", "job_id", "GET /v1/fits (privfit fits list)"),
        ("POST", "/v1/fits/first-fit/cancel", "job_id", "GET /v1/fits (privfit fits list)"),
        ("DELETE", f"/v1/datasets/{UUID}/grants/bob", "api_key_id", "GET /v1/datasets/{dataset_id}/grants"),
        ("DELETE", "/v1/keys/bob", "key_id", "GET /v1/keys (privfit keys list"),
    ],
)
def test_a_malformed_id_in_the_path_is_a_404_that_says_an_id_is_expected(
    idle_client, idle_keys, method: str, path: str, parameter: str, listed: str
):
    response = idle_client.request(method, path, headers=idle_keys.admin)
    assert response.status_code == 404, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["code"] == "malformed_id" and problem["title"] == "Not Found"
    assert problem["errors"][0]["loc"] == ["path", parameter]
    assert problem["detail"].startswith(f"{parameter}: ") and "is not an id" in problem["detail"]
    assert "a UUID such as" in problem["detail"] and listed in problem["detail"], problem["detail"]


def test_the_404_quotes_the_value_escaped_and_cut_short(idle_client, idle_keys):
    """The value is echoed as a Python literal (a control character shows as ``\\x00``), at most 80 characters."""
    nul = idle_client.get("/v1/datasets/x%00y/budget", headers=idle_keys.admin).json()
    assert "'x\\x00y' is not an id" in nul["detail"] and "\x00" not in nul["detail"]
    long = idle_client.get(f"/v1/datasets/{'n' * 500}", headers=idle_keys.admin).json()
    assert f"'{'n' * 80}…' is not an id" in long["detail"] and "n" * 81 not in long["detail"]


def test_other_404s_and_sibling_routes_are_unchanged(idle_client, idle_keys):
    unknown = idle_client.get("/v1/nothing/here", headers=idle_keys.admin)
    assert unknown.status_code == 404 and "code" not in unknown.json() and unknown.json()["detail"] == "Not Found"
    missing = idle_client.get(f"/v1/datasets/{UUID}/budget", headers=idle_keys.admin)
    assert missing.status_code == 404 and missing.json()["code"] == "dataset_not_found"
    missing_fit = idle_client.get(f"/v1/fits/{UUID}", headers=idle_keys.admin)
    assert missing_fit.status_code == 404 and missing_fit.json()["code"] == "fit_not_found"
    # a literal sibling of an id route is never read as a malformed id: the method is what does not match
    assert idle_client.delete("/v1/datasets/duplicates", headers=idle_keys.admin).status_code == 405
    assert idle_client.get("/v1/datasets/duplicates", headers=idle_keys.admin).status_code == 200


@pytest.mark.parametrize(
    ("headers", "sent"),
    [
        ({}, "no Content-Type"),
        ({"content-type": "application/x-www-form-urlencoded"}, "Content-Type: application/x-www-form-urlencoded"),
        ({"content-type": "text/plain; charset=utf-8"}, "Content-Type: text/plain"),
    ],
)
def test_a_json_body_without_its_content_type_is_a_422_that_names_the_header(
    idle_client, idle_keys, headers: dict[str, str], sent: str
):
    dataset_id = upload(idle_client, idle_keys)
    body = json.dumps({"dataset_id": dataset_id, **FIT}).encode()
    response = idle_client.post("/v1/fits/estimate", content=body, headers={**idle_keys.analyst, **headers})
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["errors"][0]["loc"] == ["body"]
    assert "the body must be a JSON object sent with the header Content-Type: application/json" in problem["detail"]
    assert f"(this request has {sent};" in problem["detail"], problem["detail"]
    sent_right = idle_client.post("/v1/fits/estimate", content=body,
                                  headers={**idle_keys.analyst, "content-type": "application/json"})  # fmt: skip
    assert sent_right.status_code == 200, sent_right.text


def test_a_json_body_that_is_not_an_object_keeps_the_plain_message(idle_client, idle_keys):
    response = idle_client.post("/v1/fits/estimate", content=b"[1, 2]",
                                headers={**idle_keys.analyst, "content-type": "application/json"})  # fmt: skip
    assert response.status_code == 422
    assert "Content-Type" not in response.json()["detail"]
