"""Allocations (issue 37, item 1) in the Python client and the CLI, against the app in process on SQLite and
PostgreSQL (the client on the test client's transport; an app without workers, so fits stay queued: admission is
what is tested): the owner allocates by the dataset's name, lists, and removes; the analyst sees its own allocation
in the list, the budget and the estimate; a refusal by the allocation is a ``BudgetExceededError`` with ``scope``
``allocation``; the CLI's tables carry the numbers and its exit statuses follow its conventions (409: 6, 422: 7,
403: 4, 404: 5); docs/client.md's allocations example runs as printed."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from api_helpers import SMALL_SCHEMA, Keys, granted_analyst, small_csv, upload
from fastapi.testclient import TestClient

from privfit.cli import main
from privfit.client import (
    Allocation,
    BudgetExceededError,
    Client,
    ConflictError,
    InvalidRequestError,
    NotFoundError,
    PermissionDeniedError,
    _client,
)
from privfit.client.cli import EXIT_AUTH, EXIT_CONFLICT, EXIT_INVALID, EXIT_NOT_FOUND, EXIT_OK

REPO = Path(__file__).resolve().parents[2]
PARAMS = {"steps": 20}
#: (exit status, stdout, stderr) of ``privfit ARGS`` run with a key's headers
Cli = Callable[..., tuple[int, str, str]]


def _secret(headers: dict[str, str]) -> str:
    return headers["Authorization"].removeprefix("Bearer ")


@pytest.fixture
def connect(idle_client: TestClient) -> Iterator[Callable[[dict[str, str]], Client]]:
    """A :class:`Client` with a key's headers, on the in-process app (closed after the test)."""
    opened: list[Client] = []

    def open_client(headers: dict[str, str]) -> Client:
        opened.append(Client("http://testserver", _secret(headers), retries=0, transport=idle_client._transport))
        return opened[-1]

    yield open_client
    for client in opened:
        client.close()


@pytest.fixture
def cli(idle_client: TestClient, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Cli:
    """``privfit`` (:func:`privfit.cli.main`, as the console script runs it) with the client it builds sent to the
    in-process app."""
    transport = idle_client._transport

    class InProcessClient(_client.Client):
        def __init__(self, url: str, api_key: str | None = None, **options: Any) -> None:
            super().__init__(url, api_key, **{**options, "retries": 0, "transport": transport})

    monkeypatch.setattr(_client, "Client", InProcessClient)  # the command imports it from _client when it runs

    def run(headers: dict[str, str], *args: str) -> tuple[int, str, str]:
        code = main([*args, "--url", "http://testserver", "--api-key", _secret(headers)])
        printed = capsys.readouterr()
        return code, printed.out, printed.err

    return run


def test_the_client_allocates_lists_shows_refuses_and_removes(connect, idle_client: TestClient, idle_keys: Keys):
    dataset_id = upload(idle_client, idle_keys, epsilon=2.0)  # named "small": the client resolves the name
    key_b, headers_b = granted_analyst(idle_client, idle_keys, dataset_id)
    owner, analyst, analyst_b = connect(idle_keys.owner), connect(idle_keys.analyst), connect(headers_b)

    allocation = owner.allocate("small", idle_keys.analyst_id, 0.5, 1e-7)
    assert isinstance(allocation, Allocation) and allocation.dataset_id == dataset_id
    assert (allocation.api_key_id, allocation.api_key_name) == (idle_keys.analyst_id, "analyst")
    assert (allocation.epsilon_max, allocation.delta_max) == (0.5, 1e-7)
    assert allocation.committed_epsilon == 0.0 and allocation.remaining_epsilon == 0.5
    assert allocation.closed_reason is None and allocation.created_at is not None
    assert owner.allocations("small") == [allocation]  # the owner sees every allocation
    assert analyst.allocations(dataset_id) == [allocation]  # the analyst its own
    assert analyst_b.allocations(dataset_id) == []  # not A's
    assert analyst.budget("small").allocation == allocation
    assert analyst_b.budget(dataset_id).allocation is None and owner.budget(dataset_id).allocation is None

    estimate = analyst.estimate(dataset_id, epsilon=0.4, params=PARAMS)
    assert estimate.admissible and estimate.allocation is not None and estimate.allocation.admissible
    assert estimate.allocation.epsilon_max == 0.5 and estimate.allocation.committed_epsilon_before == 0.0
    assert 0.0 < estimate.allocation.remaining_epsilon_after < 0.5
    assert analyst_b.estimate(dataset_id, epsilon=0.4, params=PARAMS).allocation is None

    assert analyst.fit(dataset_id, epsilon=0.4, params=PARAMS).status == "queued"
    with pytest.raises(BudgetExceededError) as refused:  # within the dataset's budget, over A's allocation
        analyst.fit("small", epsilon=0.4, params=PARAMS)
    assert refused.value.scope == "allocation" and refused.value.problem["epsilon_max"] == 0.5
    remaining = analyst.budget(dataset_id).allocation
    assert remaining is not None and refused.value.remaining_epsilon == pytest.approx(remaining.remaining_epsilon)
    largest = refused.value.max_admissible_epsilon
    assert largest is not None and 0.0 < largest < 0.4
    again = analyst.estimate(dataset_id, epsilon=0.4, params=PARAMS)
    assert not again.admissible and again.refusal_reason == "allocation"
    assert again.allocation is not None and not again.allocation.admissible
    with pytest.raises(BudgetExceededError) as over_dataset:  # B has no allocation: the dataset's filter refuses
        analyst_b.fit(dataset_id, epsilon=5.0, params=PARAMS)
    assert over_dataset.value.scope == "dataset"

    with pytest.raises(ConflictError) as exists:  # fixed once set
        owner.allocate(dataset_id, idle_keys.analyst_id, 0.7, 1e-7)
    assert not isinstance(exists.value, BudgetExceededError) and exists.value.problem["code"] == "allocation_exists"
    for epsilon, delta, field in ((3.0, 1e-7, "epsilon"), (0.5, 0.5, "delta")):
        with pytest.raises(InvalidRequestError) as invalid:
            owner.allocate(dataset_id, key_b, epsilon, delta)
        assert invalid.value.problem["field"] == field
    with pytest.raises(PermissionDeniedError):
        analyst_b.allocate(dataset_id, key_b, 0.5, 1e-7)

    owner.remove_allocation("small", idle_keys.analyst_id)
    assert owner.allocations(dataset_id) == [] and analyst.budget(dataset_id).allocation is None
    with pytest.raises(NotFoundError) as missing:
        owner.remove_allocation(dataset_id, idle_keys.analyst_id)
    assert missing.value.problem["code"] == "allocation_not_found"


def test_the_cli_allocates_lists_shows_and_unallocates(cli: Cli, idle_client: TestClient, idle_keys: Keys):
    owner, analyst = idle_keys.owner, idle_keys.analyst
    dataset_id = upload(idle_client, idle_keys, epsilon=2.0)
    key_b, headers_b = granted_analyst(idle_client, idle_keys, dataset_id)
    analyst_id = idle_keys.analyst_id

    code, out, err = cli(owner, "datasets", "allocate", "small", analyst_id, "--epsilon", "0.5", "--delta", "1e-7")
    assert code == EXIT_OK, err
    assert re.search(rf"│ analyst\s+│ {analyst_id}\s+│ 0\.5\s+│ 1e-07\s+│ 0\s+│ 0\.5\s+│ —", out), out
    assert f"key {analyst_id} may now use ε = 0.5, δ = 1e-07" in err and "unallocate" in err

    code, out, err = cli(owner, "datasets", "allocations", "small")
    assert code == EXIT_OK and "allocations of small" in out, err
    for column in ("analyst key", "key id", "ε", "δ", "committed ε", "remaining ε", "closed"):
        assert column in out
    assert re.search(rf"│ analyst\s+│ {analyst_id}\s+│ 0\.5\s+│ 1e-07\s+│ 0\s+│ 0\.5\s+│ —", out), out
    code, out, _ = cli(analyst, "datasets", "allocations", dataset_id, "--json")
    assert code == EXIT_OK and [(a["api_key_id"], a["epsilon_max"]) for a in json.loads(out)] == [(analyst_id, 0.5)]
    code, out, _ = cli(headers_b, "datasets", "allocations", dataset_id, "--json")
    assert code == EXIT_OK and json.loads(out) == []

    code, out, err = cli(analyst, "budget", "small")
    assert code == EXIT_OK, err
    assert re.search(r"your allocation\s+│ ε = 0\.5, δ = 1e-07: committed ε = 0, remaining ε = 0\.5", out), out
    assert "your allocation" not in cli(owner, "budget", "small")[1]
    code, out, err = cli(analyst, "estimate", "small", "--epsilon", "0.4", "--param", "steps=20")
    assert code == EXIT_OK and "your allocation: committed ε before → after" in out and "of ε = 0.5" in out, err

    code, _, err = cli(analyst, "fit", "small", "--epsilon", "0.6", "--param", "steps=20")  # over the allocation
    assert code == EXIT_CONFLICT == 6
    assert "error: 409 Privacy budget exceeded:" in err and "remaining ε of your allocation on this dataset: 0.5" in err
    code, out, _ = cli(analyst, "fit", "small", "--epsilon", "0.6", "--param", "steps=20", "--json")
    assert code == EXIT_CONFLICT and json.loads(out)["scope"] == "allocation"
    code, out, err = cli(analyst, "estimate", "small", "--epsilon", "0.6", "--param", "steps=20")
    assert code == EXIT_OK and "no: your allocation's privacy filter would exceed its ε" in out, err

    code, _, err = cli(owner, "datasets", "allocate", "small", analyst_id, "--epsilon", "0.7", "--delta", "1e-7")
    assert code == EXIT_CONFLICT and "error: 409 Allocation exists:" in err
    code, out, err = cli(owner, "datasets", "allocate", "small", key_b, "--epsilon", "3", "--delta", "1e-7", "--json")
    assert code == EXIT_INVALID == 7 and "error: 422 Invalid allocation: epsilon:" in err
    assert json.loads(out)["field"] == "epsilon"
    code, _, err = cli(headers_b, "datasets", "allocate", dataset_id, key_b, "--epsilon", "0.5", "--delta", "1e-7")
    assert code == EXIT_AUTH and "403" in err

    code, out, err = cli(owner, "datasets", "unallocate", "small", analyst_id, "--json")
    assert code == EXIT_OK and json.loads(out) == {"dataset_id": dataset_id, "api_key_id": analyst_id, "removed": True}
    code, _, err = cli(owner, "datasets", "unallocate", "small", analyst_id)
    assert code == EXIT_NOT_FOUND == 5 and "error: 404" in err
    assert json.loads(cli(owner, "datasets", "allocations", "small", "--json")[1]) == []


def test_the_docs_allocations_example_runs(connect, idle_client: TestClient, idle_keys: Keys,
                                           capsys: pytest.CaptureFixture[str]):  # fmt: skip
    """docs/client.md's allocations block as printed, with the owner's and the analyst's clients it names."""
    owner, analyst = connect(idle_keys.owner), connect(idle_keys.analyst)
    dataset = owner.upload_dataset(small_csv(), SMALL_SCHEMA, name="loans")
    owner.grant(dataset.id, idle_keys.analyst_id)
    doc = (REPO / "docs" / "client.md").read_text()
    section = doc.split("\n**Allocations:**", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block, "docs/client.md has no allocations example"
    code = block.group(1)
    names = {"owner": owner, "analyst": analyst, "analyst_key_id": idle_keys.analyst_id,
             "BudgetExceededError": BudgetExceededError}  # fmt: skip
    exec(compile(code, "docs/client.md", "exec"), names)
    assert capsys.readouterr().out.splitlines() == ["0.5 [('analyst', 0.5)]", "0.5", "allocation 0.5"]
    assert owner.allocations("loans") == []


def test_the_client_and_the_cli_register_into_a_privacy_domain(connect, cli: Cli, idle_client: TestClient,
                                                               idle_keys: Keys, tmp_path: Path):  # fmt: skip
    """Issue 37, item 2 from the client's side: ``upload_dataset(privacy_domain=NAME)`` and ``--privacy-domain``
    register into the named dataset's domain; the CLI words the duplicate 409's proposal with its option."""
    first = upload(idle_client, idle_keys, epsilon=2.0)  # "small"
    owner = connect(idle_keys.owner)
    schema = {**SMALL_SCHEMA, "budget": {"epsilon": 2.0, "delta": 1e-6}}
    joined = owner.upload_dataset(small_csv(seed=5), schema, name="cleaned", privacy_domain="small")
    assert joined.privacy_domain == first and owner.dataset(first).privacy_domain == first
    (tmp_path / "rows.csv").write_bytes(small_csv())  # the first dataset's content
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    files = (str(tmp_path / "rows.csv"), "--schema", str(tmp_path / "schema.json"))
    code, _, err = cli(idle_keys.owner, "datasets", "upload", *files, "--name", "again")
    assert code == EXIT_CONFLICT and f"(--privacy-domain {first}" in err, err
    code, out, err = cli(idle_keys.owner, "datasets", "upload", *files, "--name", "again", "--privacy-domain",
                         "small", "-q")  # fmt: skip
    assert code == EXIT_OK, err
    assert owner.dataset(out.strip()).privacy_domain == first
