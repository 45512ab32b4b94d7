"""Issue 38, item 4: every list endpoint pages (``?limit=N&cursor=…``, the next page in ``Link: <…>; rel="next"``).

* each list endpoint — datasets, duplicates, keys, grants, allocations, fits (of a dataset and of the caller),
  evaluations — pages in a stable order (creation time, then id) with neither duplicates nor gaps, also while items
  are created or deleted between two pages; the ledger's offset pages carry the same ``Link``;
* a ``limit`` over 1000 (or under 1, or not a number) and a malformed or foreign ``cursor`` are 422s naming the field;
* ``GET /v1/fits`` without ``dataset_id`` lists exactly the fits the caller may open with ``GET /v1/fits/{id}``
  (another analyst's never), filtered by ``status`` and ``solver`` (validated);
* pagination over 10,000 fits, bulk-inserted through the ORM on SQLite and PostgreSQL and paged through with the
  Python client: each appears exactly once, in order;
* the client's list methods follow every page and its ``*_page`` methods return one; ``privfit fits list`` without a
  dataset, with ``--status``, ``--solver``, ``--limit`` and ``--cursor``; ``privfit datasets list`` follows pages;
* the "Lists and pages" example of docs/client.md runs as printed.

Fits and evaluations are inserted through the ORM (an app without workers: nothing runs them); what is listed is
their rows, not what a solver made of them.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from api_helpers import SMALL_SCHEMA, Keys, granted_analyst, small_csv, upload
from fastapi.testclient import TestClient
from sqlalchemy import insert

from privfit.api.auth import create_api_key
from privfit.api.pagination import MAX_PAGE_SIZE
from privfit.client import Client, _client, _plans
from privfit.db import Database, Job
from privfit.db.models import Evaluation, utcnow

REPO = Path(__file__).resolve().parents[2]
STATUSES = ("queued", "running", "succeeded", "failed", "cancelled")
FINISHED = ("succeeded", "failed", "cancelled")
TINY = small_csv(200)


def secret(headers: dict[str, str]) -> str:
    return headers["Authorization"].removeprefix("Bearer ")


def insert_fits(db: Database, dataset_id: str, api_key_id: str, count: int, *, statuses: tuple[str, ...] = FINISHED,
                solvers: tuple[str, ...] = ("dp_gd", "dp_sgd"), tied: int = 10) -> list[dict[str, Any]]:  # fmt: skip
    """``count`` fit rows in one bulk insert, created now and after, ``tied`` at a time at one instant (the id breaks
    the tie), cycling through ``statuses`` and ``solvers``; their rows."""
    start = utcnow()
    rows = [
        {"id": str(uuid.uuid4()), "dataset_id": dataset_id, "api_key_id": api_key_id, "request_hash": "0" * 64,
         "solver": solvers[i % len(solvers)], "model": "logistic", "params": {}, "cost": {},
         "status": statuses[i % len(statuses)], "progress": 1.0, "cancel_requested": False, "attempt": 0,
         "created_at": start + timedelta(microseconds=i // tied)}
        for i in range(count)
    ]  # fmt: skip
    with db.write() as session:
        session.execute(insert(Job), rows)
    return rows


def insert_evaluations(db: Database, fit: dict[str, Any], count: int) -> list[str]:
    """``count`` failed evaluation rows of ``fit``, all created at one instant; their ids."""
    now = utcnow()
    rows = [
        {"id": str(uuid.uuid4()), "job_id": fit["id"], "dataset_id": fit["dataset_id"],
         "api_key_id": fit["api_key_id"], "request_hash": "0" * 64, "epsilon": 0.1, "confidence": 0.95,
         "metrics": ["accuracy"], "n_validation": 10, "cost": {}, "status": "failed",
         "error": {"type": "test", "detail": "inserted by the test"}, "created_at": now}
        for _ in range(count)
    ]  # fmt: skip
    with db.write() as session:
        session.execute(insert(Evaluation), rows)
    return [row["id"] for row in rows]


def in_order(rows: list[dict[str, Any]]) -> Callable[[list[str]], list[str]]:
    """A function putting ids of ``rows`` in the lists' order: by creation time, then id."""
    position = {row["id"]: (row["created_at"], row["id"]) for row in rows}
    return lambda ids: sorted(ids, key=position.__getitem__)


def next_link(response: httpx.Response) -> str | None:
    return response.links.get("next", {}).get("url")


def with_query(path: str, **params: Any) -> str:
    """``path`` with ``params`` added to its query (httpx's ``params=`` would replace the query)."""
    return f"{path}{'&' if '?' in path else '?'}{httpx.QueryParams(params)}"


def with_limit(path: str, limit: int) -> str:
    return with_query(path, limit=limit)


def walk(client: TestClient, path: str, headers: dict[str, str], limit: int,
         between: Callable[[int], None] | None = None) -> list[list[Any]]:  # fmt: skip
    """Every page of ``path`` (``limit`` items each), following the ``Link`` headers; ``between(n)`` runs after the
    n-th page."""
    pages, url = [], with_limit(path, limit)
    while url is not None:
        response = client.get(url, headers=headers)
        assert response.status_code == 200, response.text
        pages.append(response.json())
        assert len(pages) <= 1000, f"{path}: more than 1000 pages"
        url = next_link(response)
        if between is not None and url is not None:
            between(len(pages))
    return pages


def problem_field(response: httpx.Response) -> str:
    """The query parameter a 422 names (``errors[0].loc`` is ``["query", name]``; ``field`` too where set)."""
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    (error,) = problem["errors"]
    assert error["loc"][0] == "query" and problem.get("field", error["loc"][1]) == error["loc"][1], problem
    return str(error["loc"][1])


@pytest.fixture
def lists(idle_client: TestClient, idle_keys: Keys) -> dict[str, Any]:
    """A small instance of every list: datasets (two contents, twice and three times: two duplicate groups), grants
    and allocations of the first dataset, fits and evaluations of one fit; the path of each list, who reads it and
    each item's id."""
    client, keys = idle_client, idle_keys
    db: Database = client.app.state.db
    first = upload(client, keys, csv=TINY)
    datasets = [first, *(upload(client, keys, csv=TINY, grant=False) for _ in range(2))]
    datasets += [upload(client, keys, csv=small_csv(200, seed=1), grant=False) for _ in range(2)]
    analysts = [granted_analyst(client, keys, first, f"b{i}")[0] for i in range(3)]
    for analyst in analysts:
        allocated = client.put(f"/v1/datasets/{first}/allocations/{analyst}", headers=keys.owner,
                               json={"epsilon": 0.1, "delta": 1e-7})  # fmt: skip
        assert allocated.status_code == 201, allocated.text
    fits = insert_fits(db, first, keys.analyst_id, 5, tied=5)  # one instant: ordered by id
    insert_evaluations(db, fits[0], 3)
    return {
        "first": first, "fit": fits[0]["id"],
        "lists": {  # path: (headers, the id of an item)
            "/v1/datasets": (keys.owner, lambda item: item["id"]),
            "/v1/datasets/duplicates": (keys.owner, lambda item: item["datasets"][0]["id"]),
            "/v1/keys": (keys.admin, lambda item: item["key_id"]),
            f"/v1/datasets/{first}/grants": (keys.owner, lambda item: item["api_key_id"]),
            f"/v1/datasets/{first}/allocations": (keys.owner, lambda item: item["api_key_id"]),
            f"/v1/fits?dataset_id={first}": (keys.owner, lambda item: item["id"]),
            "/v1/fits": (keys.analyst, lambda item: item["id"]),
            f"/v1/fits/{fits[0]['id']}/evaluations": (keys.analyst, lambda item: item["id"]),
        },
    }  # fmt: skip


def test_every_list_endpoint_pages_in_a_stable_order_without_duplicates_or_gaps(
    idle_client: TestClient, lists: dict[str, Any]
):
    for path, (headers, identity) in lists["lists"].items():
        whole = idle_client.get(with_limit(path, MAX_PAGE_SIZE), headers=headers)
        assert whole.status_code == 200 and next_link(whole) is None, (path, whole.text)
        everything = [identity(item) for item in whole.json()]
        assert len(everything) >= 2, (path, everything)
        pages = walk(idle_client, path, headers, 1)
        assert [len(page) for page in pages] == [1] * len(everything), path  # the last page has no Link
        assert [identity(item) for page in pages for item in page] == everything, path
        default = idle_client.get(path, headers=headers)  # no limit: the default page (100) holds these few
        assert [identity(item) for item in default.json()] == everything and next_link(default) is None
    fits = idle_client.get(f"/v1/fits?dataset_id={lists['first']}", headers=lists["lists"]["/v1/fits"][0]).json()
    assert [fit["id"] for fit in fits] == sorted(fit["id"] for fit in fits)  # one instant: the id breaks the tie
    assert len({fit["created_at"] for fit in fits}) == 1


def test_a_next_link_keeps_the_request_and_the_ledger_pages_carry_one(
    idle_client: TestClient, idle_keys: Keys, lists: dict[str, Any]
):
    first = lists["first"]
    page = idle_client.get(f"/v1/fits?dataset_id={first}&status=succeeded&include=rdp&limit=1",
                           headers=idle_keys.owner)  # fmt: skip
    url = httpx.URL(next_link(page) or "")
    assert url.path == "/v1/fits" and page.headers["link"].endswith('>; rel="next"')
    assert {name: url.params.get_list(name) for name in ("dataset_id", "status", "include", "limit")} == {
        "dataset_id": [first], "status": ["succeeded"], "include": ["rdp"], "limit": ["1"]}  # fmt: skip
    assert re.fullmatch(r"[A-Za-z0-9_-]+", url.params["cursor"])  # base64url, opaque
    for _ in range(3):  # admitted fits: a reservation each in the ledger
        admitted = idle_client.post("/v1/fits", headers=idle_keys.analyst,
                                    json={"dataset_id": first, "privacy": {"epsilon": 0.01}})  # fmt: skip
        assert admitted.status_code == 202, admitted.text
    entries = idle_client.get(f"/v1/datasets/{first}/ledger?limit=2", headers=idle_keys.owner)
    assert entries.json()["total"] > 2 and next_link(entries) == f"/v1/datasets/{first}/ledger?limit=2&offset=2"
    seen, url_ = [], f"/v1/datasets/{first}/ledger?limit=2"
    while url_ is not None:
        answer = idle_client.get(url_, headers=idle_keys.owner)
        seen += [entry["id"] for entry in answer.json()["entries"]]
        url_ = next_link(answer)
    assert seen == sorted(seen) and len(seen) == entries.json()["total"]


def test_pages_neither_repeat_nor_skip_while_items_are_created_and_deleted(idle_client: TestClient, idle_keys: Keys):
    client, keys = idle_client, idle_keys
    db: Database = client.app.state.db
    dataset_id = upload(client, keys, csv=TINY)
    inserted = insert_fits(db, dataset_id, keys.analyst_id, 9, tied=3)
    original = [row["id"] for row in inserted]
    ordered = in_order(inserted)
    created: list[str] = []

    def more_fits(page: int) -> None:  # fits admitted meanwhile (after the first three pages): on later pages
        if page <= 3:
            created.extend(row["id"] for row in insert_fits(db, dataset_id, keys.analyst_id, 2, tied=2))

    pages = walk(client, "/v1/fits", keys.analyst, 2, between=more_fits)
    listed = [fit["id"] for page in pages for fit in page]
    assert len(listed) == len(set(listed)) == len(original) + len(created)
    assert listed[: len(original)] == ordered(original) and set(listed) == {*original, *created}

    datasets = [dataset_id, *(upload(client, keys, csv=TINY, grant=False) for _ in range(4))]
    uploaded: list[str] = []

    def churn(page: int) -> None:  # one listed dataset deleted, one not yet listed deleted, one uploaded
        if page == 1:
            for gone in (datasets[0], datasets[3]):
                assert client.delete(f"/v1/datasets/{gone}", headers=keys.owner).status_code == 204
            uploaded.append(upload(client, keys, csv=TINY, grant=False))

    pages = walk(client, "/v1/datasets", keys.owner, 2, between=churn)
    listed = [dataset["id"] for page in pages for dataset in page]
    assert listed == [datasets[0], datasets[1], datasets[2], datasets[4], *uploaded]


@pytest.mark.parametrize("bad", ["0", "1001", "-1", "ten", ""])
def test_a_limit_out_of_range_is_a_422_naming_limit(idle_client: TestClient, lists: dict[str, Any], bad: str):
    for path, (headers, _) in [*lists["lists"].items(), (f"/v1/datasets/{lists['first']}/ledger", (None, None))]:
        headers = headers or lists["lists"]["/v1/datasets"][0]
        assert problem_field(idle_client.get(f"{path}{'&' if '?' in path else '?'}limit={bad}",
                                             headers=headers)) == "limit", path  # fmt: skip


def test_a_malformed_or_foreign_cursor_is_a_422_naming_cursor(
    idle_client: TestClient, idle_keys: Keys, lists: dict[str, Any]
):
    client, first = idle_client, lists["first"]
    cursors = {}
    for path, (headers, _) in lists["lists"].items():
        cursors[path] = httpx.URL(next_link(client.get(with_limit(path, 1), headers=headers)) or "").params["cursor"]
    other = upload(client, idle_keys, csv=TINY)
    insert_fits(client.app.state.db, other, idle_keys.analyst_id, 2)
    forged = [
        "", "x" * 513, "not a cursor", "%00", "W10", "bnVsbA",  # empty, too long, not base64url, [] and null
        _encode([2, "0" * 16, "2026-01-01T00:00:00+00:00", str(uuid.uuid4())]),  # another format version
    ]  # fmt: skip
    for path, (headers, _) in lists["lists"].items():
        mine = cursors[path]
        for cursor in forged + [c for p, c in cursors.items() if p != path]:  # malformed, or another list's
            response = client.get(with_query(path, cursor=cursor), headers=headers)
            assert problem_field(response) == "cursor", (path, cursor, response.text)
        assert client.get(with_query(path, cursor=mine), headers=headers).status_code == 200
        _, scope, created, key = _decode(mine)
        wrong_ids = ("bob", None, -1, 2**70, True, 1.5, [key])
        for tampered in ([1, scope, "yesterday", key], [1, scope, None, key], [1, scope, created, key, "extra"],
                         *([1, scope, created, bad] for bad in wrong_ids)):  # fmt: skip
            assert problem_field(client.get(with_query(path, cursor=_encode(tampered)), headers=headers)) == "cursor"
    # the same endpoint with another dataset or filter is another listing
    of_first = cursors[f"/v1/fits?dataset_id={first}"]
    for query in ({"dataset_id": other}, {}, {"dataset_id": first, "status": "failed"},
                  {"dataset_id": first, "solver": "dp_gd"}):  # fmt: skip
        response = client.get("/v1/fits", params={**query, "cursor": of_first}, headers=idle_keys.owner)
        assert problem_field(response) == "cursor" and "another listing" in response.json()["detail"]


def _encode(document: Any) -> str:
    import base64

    return base64.urlsafe_b64encode(json.dumps(document).encode()).decode().rstrip("=")


def _decode(cursor: str) -> list[Any]:
    import base64

    return json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))


def test_the_fits_list_without_a_dataset_is_what_the_caller_may_open_filtered_by_status_and_solver(
    idle_client: TestClient, idle_keys: Keys
):
    """Analyst A (``keys.analyst``) on the owner's D0 and the other owner's D2, analyst B on D0, the owner on D0 and
    D1 (deleted later): each key lists exactly the fits ``GET /v1/fits/{id}`` shows it, whatever the dataset."""
    client, keys = idle_client, idle_keys
    db: Database = client.app.state.db
    d0, d1 = upload(client, keys, csv=TINY), upload(client, keys, csv=TINY, grant=False)
    response = client.post("/v1/datasets", headers=keys.other_owner, files={"file": ("d.csv", TINY, "text/csv")},
                           data={"schema": json.dumps(SMALL_SCHEMA), "name": "theirs"})  # fmt: skip
    d2 = response.json()["id"]
    assert client.post(f"/v1/datasets/{d2}/grants", headers=keys.other_owner,
                       json={"api_key_id": keys.analyst_id}).status_code == 201  # fmt: skip
    b_id, b = granted_analyst(client, keys, d0)
    other_owner_id = client.get("/v1/me", headers=keys.other_owner).json()["key_id"]
    a_fits = insert_fits(db, d0, keys.analyst_id, 3) + insert_fits(db, d2, keys.analyst_id, 2, solvers=("dp_sgd",))
    b_fits = insert_fits(db, d0, b_id, 2)
    owner_fits = insert_fits(db, d0, keys.owner_id, 1) + insert_fits(db, d1, keys.owner_id, 2)
    theirs = insert_fits(db, d2, other_owner_id, 1)
    assert client.delete(f"/v1/datasets/{d1}", headers=keys.owner).status_code == 204  # its fits stay the owner's
    assert client.delete(f"/v1/datasets/{d2}/grants/{keys.analyst_id}", headers=keys.other_owner).status_code == 204
    everything = a_fits + b_fits + owner_fits + theirs
    expected = {
        "analyst": a_fits, "b": b_fits, "stranger": [], "owner": a_fits[:3] + b_fits + owner_fits,
        "other owner": a_fits[3:] + theirs, "admin": everything,
    }  # fmt: skip
    who = {"analyst": keys.analyst, "b": b, "stranger": keys.stranger_analyst, "owner": keys.owner,
           "other owner": keys.other_owner, "admin": keys.admin}  # fmt: skip
    order = {row["id"]: (row["created_at"], row["id"]) for row in everything}
    for name, headers in who.items():
        listed = [fit["id"] for page in walk(client, "/v1/fits", headers, 2) for fit in page]
        assert listed == sorted((row["id"] for row in expected[name]), key=order.__getitem__), name
        opens = {row["id"] for row in everything if client.get(f"/v1/fits/{row['id']}", headers=headers).status_code
                 == 200}  # fmt: skip
        assert set(listed) == opens, name  # the list is exactly what the key may open
    for status in FINISHED:
        for solver in ("dp_gd", "dp_sgd"):
            listed = client.get("/v1/fits", params={"status": status, "solver": solver}, headers=keys.analyst).json()
            assert {fit["id"] for fit in listed} == {row["id"] for row in a_fits
                                                     if (row["status"], row["solver"]) == (status, solver)}  # fmt: skip
            assert all((fit["status"], fit["solver"]) == (status, solver) for fit in listed)
    by_dataset = client.get("/v1/fits", params={"dataset_id": d0, "solver": "dp_gd"}, headers=keys.owner).json()
    assert {fit["id"] for fit in by_dataset} == {row["id"] for row in a_fits[:3] + b_fits + owner_fits[:1]
                                                if row["solver"] == "dp_gd"}  # fmt: skip
    assert client.get("/v1/fits", params={"dataset_id": d2}, headers=keys.analyst).status_code == 404  # revoked
    assert problem_field(client.get("/v1/fits?status=done", headers=keys.analyst)) == "status"
    refused = client.get("/v1/fits?solver=dp_gdd", headers=keys.analyst)
    assert problem_field(refused) == "solver" and "dp_gd" in refused.json()["detail"]
    assert problem_field(client.get("/v1/fits?dataset_id=loans", headers=keys.analyst)) == "dataset_id"
    misspelt = client.get("/v1/fits?stauts=failed", headers=keys.analyst)  # not every fit: a 422
    assert problem_field(misspelt) == "stauts" and "status" in misspelt.json()["detail"]


def test_a_query_parameter_a_list_does_not_take_is_a_422_naming_it_after_the_key_is_checked(
    idle_client: TestClient, idle_keys: Keys, lists: dict[str, Any]
):
    for path, (headers, _) in lists["lists"].items():
        assert problem_field(idle_client.get(with_query(path, offset=2), headers=headers)) == "offset", path
        assert problem_field(idle_client.get(with_query(path, **{"": "true"}), headers=headers)) == "", path
        assert idle_client.get(with_query(path, offset=2)).status_code == 401, path  # no key: 401 first
    assert idle_client.get("/v1/keys?offset=2", headers=idle_keys.owner).status_code == 403  # the role: 403 first


def test_pagination_over_10000_fits(idle_client: TestClient, idle_keys: Keys):
    """10,000 fit rows in one bulk insert (ten at each instant), paged through with the Python client: every fit
    exactly once, in (created_at, id) order; the filtered lists and the page-at-a-time loop agree."""
    client, keys = idle_client, idle_keys
    db: Database = client.app.state.db
    dataset_id = upload(client, keys, csv=TINY)
    rows = insert_fits(db, dataset_id, keys.analyst_id, 10_000, statuses=STATUSES)
    expected = [row["id"] for row in sorted(rows, key=lambda row: (row["created_at"], row["id"]))]
    with Client("http://testserver", secret(keys.analyst), retries=0, transport=client._transport) as analyst:
        listed = [fit.id for fit in analyst.iter_fits()]
        assert listed == expected and len(set(listed)) == 10_000
        failed = [fit.id for fit in analyst.fits(dataset_id, status="failed", solver="dp_sgd")]
        chosen = {row["id"] for row in rows if (row["status"], row["solver"]) == ("failed", "dp_sgd")}
        assert failed == [fit_id for fit_id in expected if fit_id in chosen] and len(failed) == 1000
        paged, cursor, pages = [], None, 0
        while True:
            page = analyst.fits_page(limit=MAX_PAGE_SIZE, cursor=cursor)
            paged += [fit.id for fit in page]
            pages += 1
            if page.cursor is None:
                break
            cursor = page.cursor
        assert paged == expected and pages == 10
    with Client("http://testserver", secret(keys.stranger_analyst), retries=0, transport=client._transport) as other:
        assert other.fits() == []


@pytest.fixture
def in_process(idle_client: TestClient, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every :class:`Client` built from now on (the CLI's, the docs example's) sends to the in-process app, and the
    list methods ask for pages of 2: their iteration goes through several pages."""
    transport = idle_client._transport

    class InProcessClient(_client.Client):
        def __init__(self, url: str, api_key: str | None = None, **options: Any) -> None:
            super().__init__(url, api_key, **{**options, "retries": 0, "transport": transport})

    monkeypatch.setattr(_client, "Client", InProcessClient)
    monkeypatch.setattr(_plans, "PAGE_SIZE", 2)
    yield


def test_the_client_follows_every_page_and_gets_one_page(
    in_process: None, idle_client: TestClient, idle_keys: Keys, lists: dict[str, Any]
):
    first, fit = lists["first"], lists["fit"]
    with _client.Client("http://testserver", secret(idle_keys.owner)) as owner:
        assert [d.id for d in owner.datasets()] == [d["id"] for d in idle_client.get(
            "/v1/datasets", headers=idle_keys.owner).json()] and len(owner.datasets()) == 5  # fmt: skip
        assert len(owner.grants(first)) == 4 and len(owner.allocations(first)) == 3
        assert len(owner.fits(first)) == len(owner.fits()) == 5 and len(owner.evaluations(fit)) == 3
        page = owner.datasets_page(limit=3)
        assert len(page) == 3 and page.cursor is not None and page.next is not None
        rest = owner.datasets_page(limit=3, cursor=page.cursor)
        assert [d.id for d in [*page, *rest]] == [d.id for d in owner.datasets()] and rest.cursor is None
        one = owner.fits_page(first, status="succeeded", limit=1)
        assert [f.status for f in one] == ["succeeded"] and one.items[0].dataset_id == first
    with _client.Client("http://testserver", secret(idle_keys.admin)) as admin:
        assert len(admin.keys()) == len(idle_client.get("/v1/keys?limit=1000", headers=idle_keys.admin).json())


def test_the_cli_lists_every_fit_filters_and_pages(
    in_process: None, idle_client: TestClient, idle_keys: Keys, capsys: pytest.CaptureFixture[str]
):
    from privfit.cli import main

    db: Database = idle_client.app.state.db
    d0 = upload(idle_client, idle_keys, csv=TINY)
    d1 = upload(idle_client, idle_keys, csv=TINY, grant=True)
    rows = insert_fits(db, d0, idle_keys.analyst_id, 3) + insert_fits(db, d1, idle_keys.analyst_id, 3)

    def cli(*args: str) -> tuple[int, str, str]:
        code = main([*args, "--url", "http://testserver", "--api-key", secret(idle_keys.analyst)])
        printed = capsys.readouterr()
        return code, printed.out, printed.err

    code, out, _ = cli("fits", "list", "--json")
    rows.sort(key=lambda row: (row["created_at"], row["id"]))  # the lists' order (three at an instant)
    assert code == 0 and [fit["id"] for fit in json.loads(out)] == [row["id"] for row in rows]  # all pages
    code, out, _ = cli("fits", "list")
    assert code == 0 and all(row["id"] in out and row["dataset_id"] in out for row in rows) and "dataset" in out
    code, out, _ = cli("fits", "list", "--status", "failed", "--solver", "dp_sgd", "--json")
    assert code == 0 and {fit["id"] for fit in json.loads(out)} == {
        row["id"] for row in rows if (row["status"], row["solver"]) == ("failed", "dp_sgd")}  # fmt: skip
    code, out, err = cli("fits", "list", "--limit", "4", "--json")
    assert code == 0 and [fit["id"] for fit in json.loads(out)] == [row["id"] for row in rows[:4]]
    cursor = re.search(r"--cursor (\S+)", err)
    assert cursor is not None, err
    code, out, err = cli("fits", "list", "--limit", "4", "--cursor", cursor[1], "--json")
    assert code == 0 and [fit["id"] for fit in json.loads(out)] == [row["id"] for row in rows[4:]] and not err
    code, out, _ = cli("fits", "list", d1, "--json")
    assert code == 0 and [fit["id"] for fit in json.loads(out)] == [row["id"] for row in rows[3:]]
    code, _, err = cli("fits", "list", "--limit", "1001")
    assert code == 7 and "limit" in err
    code, _, err = cli("fits", "list", "--solver", "nope")
    assert code == 7 and "solver" in err
    code, _, err = cli("fits", "list", "--cursor", "nope")
    assert code == 7 and "cursor" in err
    # privfit datasets list: every page (pages of 2 here)
    main(["datasets", "list", "--json", "--url", "http://testserver", "--api-key", secret(idle_keys.owner)])
    assert [d["id"] for d in json.loads(capsys.readouterr().out)] == [d0, d1]


def test_the_docs_lists_and_pages_example_runs(
    in_process: None, idle_client: TestClient, idle_keys: Keys, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
):  # fmt: skip
    """docs/client.md's "Lists and pages" block as printed, with the key of an analyst who has fits on two datasets
    (the in-process app: PRIVFIT_URL is its URL)."""
    db: Database = idle_client.app.state.db
    d0, d1 = upload(idle_client, idle_keys, csv=TINY), upload(idle_client, idle_keys, csv=TINY)
    insert_fits(db, d0, idle_keys.analyst_id, 5, statuses=STATUSES)
    insert_fits(db, d1, idle_keys.analyst_id, 4, statuses=STATUSES)
    monkeypatch.setenv("PRIVFIT_URL", "http://testserver")
    monkeypatch.setenv("PRIVFIT_API_KEY", secret(idle_keys.analyst))
    doc = (REPO / "docs" / "client.md").read_text()
    code = re.search(r"\*\*Lists and pages:\*\*.*?```python\n(.*?)```", doc, re.S)
    assert code is not None, "docs/client.md has no Lists and pages example"
    exec(compile(code.group(1), "docs/client.md", "exec"), {"__name__": "client_doc"})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "9 fits on 2 datasets", printed
    assert printed[1] == "2 succeeded", printed
    assert printed[2] == "5 pages of at most 2", printed
    assert len(printed) == 3 + 2, printed  # the queued fits, one line each


def test_the_solvers_catalogue_is_not_paged(idle_client: TestClient, idle_keys: Keys):
    """GET /v1/solvers lists the solvers this server's code registers (a dozen, whatever the data): one answer, no
    Link; it takes no limit."""
    response = idle_client.get("/v1/solvers?limit=1", headers=idle_keys.analyst)
    assert response.status_code == 200 and len(response.json()) > 1 and "link" not in response.headers


def test_a_key_created_between_pages_comes_last(idle_client: TestClient, idle_keys: Keys):
    created: list[str] = []

    def another(page: int) -> None:
        if page <= 2:
            created.append(create_api_key(idle_client.app.state.db, "analyst", f"late {len(created)}")[0])

    pages = walk(idle_client, "/v1/keys", idle_keys.admin, 2, between=another)
    listed = [key["key_id"] for page in pages for key in page]
    assert len(listed) == len(set(listed)) and listed[-len(created) :] == created and len(created) >= 2


def test_an_analyst_lists_only_its_own_fits_of_a_granted_dataset(idle_client: TestClient, idle_keys: Keys):
    client, keys = idle_client, idle_keys
    dataset_id = upload(client, keys, csv=TINY)
    b_id, b = granted_analyst(client, keys, dataset_id)
    mine = insert_fits(client.app.state.db, dataset_id, keys.analyst_id, 3)
    insert_fits(client.app.state.db, dataset_id, b_id, 3)
    for params in ({"dataset_id": dataset_id}, {}):
        listed = [fit["id"] for page in walk(client, f"/v1/fits?{httpx.QueryParams(params)}", keys.analyst, 1)
                  for fit in page]  # fmt: skip
        assert listed == in_order(mine)([row["id"] for row in mine])
    assert len(client.get("/v1/fits", params={"dataset_id": dataset_id}, headers=b).json()) == 3
