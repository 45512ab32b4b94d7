"""Who sees what in a ledger (issue 37, item 5), on SQLite and PostgreSQL: the dataset's owner and admins read every
entry (``view: all``); a granted analyst reads only the entries of its own fits and evaluations and the
preprocessing's (``view: own``), counted and paged alone, without the fields that count or sum every entry (``id``,
``budget_version``, ``committed_epsilon_after``). The Python client and the CLI show such an entry with "—" where a
field is absent."""

from __future__ import annotations

import functools
from typing import Any

import httpx
import pytest
from api_helpers import SMALL_SCHEMA, Keys, granted_analyst, upload, wait_for
from fastapi.testclient import TestClient

from privfit.client import Client

#: The small dataset with its default private preprocessing (a ledger entry of its own) and validation rows.
SCHEMA = {**{k: v for k, v in SMALL_SCHEMA.items() if k != "preprocessing"}, "validation_fraction": 0.25}
FIT = {"model": "logistic", "solver": "dp_gd", "privacy": {"epsilon": 0.2}, "params": {"steps": 20}}
RUNNING_FIELDS = {"id", "budget_version", "committed_epsilon_after"}


def second_analyst(client: TestClient, keys: Keys, dataset_id: str) -> dict[str, str]:
    """Analyst B: a key of its own, granted the dataset as analyst A (``keys.analyst``) is; its headers."""
    return granted_analyst(client, keys, dataset_id)[1]


def fit(client: TestClient, headers: dict[str, str], dataset_id: str, *, wait: bool = True) -> str:
    created = client.post("/v1/fits", headers=headers, json={"dataset_id": dataset_id, **FIT})
    assert created.status_code == 202, created.text
    if wait:
        assert wait_for(client, created.json()["id"], headers)["status"] == "succeeded"
    return created.json()["id"]


def page(client: TestClient, headers: dict[str, str], dataset_id: str, **params: Any) -> dict[str, Any]:
    response = client.get(f"/v1/datasets/{dataset_id}/ledger", headers=headers, params={"include": "rdp", **params})
    assert response.status_code == 200, response.text
    return response.json()


def without_running_fields(entry: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in entry.items() if name not in RUNNING_FIELDS}


def test_an_analyst_reads_its_own_entries_and_the_preprocessing_the_owner_reads_all(client: TestClient, keys: Keys):
    dataset_id = upload(client, keys, schema=SCHEMA)
    analyst_b = second_analyst(client, keys, dataset_id)
    fit_a = fit(client, keys.analyst, dataset_id)
    fit_b = fit(client, analyst_b, dataset_id)  # between A's fit and A's evaluation
    evaluation = client.post(f"/v1/fits/{fit_a}/evaluate", headers=keys.analyst,
                             json={"privacy": {"epsilon": 0.2}, "metrics": ["accuracy"]})  # fmt: skip
    assert evaluation.status_code == 201, evaluation.text
    evaluation_a = evaluation.json()["id"]
    fit_owner = fit(client, keys.owner, dataset_id)

    whole = page(client, keys.owner, dataset_id)
    assert whole["view"] == "all" and page(client, keys.admin, dataset_id) == whole
    entries = whole["entries"]
    assert whole["total"] == len(entries) == 10  # preprocessing, A's fit, B's fit, A's evaluation, the owner's fit
    assert all(set(entry) >= RUNNING_FIELDS for entry in entries)
    assert {fit_a, fit_b, fit_owner} == {entry["job_id"] for entry in entries} - {None}

    for headers, own_fit, own_evaluation, others, count in (
        (keys.analyst, fit_a, evaluation_a, (fit_b, fit_owner), 6),  # preprocessing, fit, evaluation: two each
        (analyst_b, fit_b, None, (fit_a, evaluation_a, fit_owner), 4),
    ):
        expected = [
            without_running_fields(entry) for entry in entries
            if entry["preprocessing_dataset_id"] == dataset_id or entry["job_id"] == own_fit
            or (own_evaluation is not None and entry["evaluation_id"] == own_evaluation)
        ]  # fmt: skip
        response = client.get(f"/v1/datasets/{dataset_id}/ledger", headers=headers, params={"include": "rdp"})
        own = response.json()
        assert own["view"] == "own" and own["total"] == len(expected) == count and own["entries"] == expected
        assert not any(other in response.text for other in others), "another key's fit or evaluation is named"
        # the pages run over the analyst's entries alone: limit=1 walks through exactly them
        walked = [page(client, headers, dataset_id, limit=1, offset=i)["entries"] for i in range(count)]
        assert all(len(one) == 1 for one in walked) and [one[0] for one in walked] == expected
        beyond = page(client, headers, dataset_id, limit=1, offset=count)
        assert beyond["entries"] == [] and beyond["total"] == count


def test_the_client_and_the_cli_show_an_analysts_view_without_the_running_fields(
    idle_client: TestClient, idle_keys: Keys, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    """Queued fits suffice (a reservation each): the analyst's page has its one entry, whose absent fields the
    client reads as None and the CLI's table shows as "—"."""
    from privfit.cli import main

    dataset_id = upload(idle_client, idle_keys)  # no preprocessing: the analyst's fit is its only entry
    own = fit(idle_client, idle_keys.analyst, dataset_id, wait=False)
    fit(idle_client, second_analyst(idle_client, idle_keys, dataset_id), dataset_id, wait=False)

    def forward(request: httpx.Request) -> httpx.Response:
        answer = idle_client.request(request.method, str(request.url), headers=dict(request.headers),
                                     content=request.content)  # fmt: skip
        return httpx.Response(answer.status_code, headers=answer.headers, content=answer.content)

    token = idle_keys.analyst["Authorization"].removeprefix("Bearer ")
    connect = functools.partial(Client, transport=httpx.MockTransport(forward), retries=0)
    with connect("http://testserver", token) as python:
        ledger = python.ledger(dataset_id)
    assert (ledger.view, ledger.total) == ("own", 1)
    (entry,) = ledger.entries
    assert (entry.job_id, entry.kind, entry.id, entry.committed_epsilon_after) == (own, "reservation", None, None)

    monkeypatch.setattr("privfit.client._client.Client", connect)  # what the CLI builds, on this app
    assert main(["--url", "http://testserver", "--api-key", token, "ledger", dataset_id]) == 0
    table = capsys.readouterr().out
    row = next(line for line in table.splitlines() if own in line)
    assert row.count("—") == 2, table  # no entry number, no committed ε after
