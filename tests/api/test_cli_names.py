"""Issue 36 against a live ``privfit serve``: a dataset's name works wherever the CLI and the Python client take a
dataset (when exactly one of the key's datasets has it), with clear errors when none or several do; the duplicate
upload's message names ``--allow-duplicate``; ``privfit fits cancel`` shows the fit as the cancel left it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from api_helpers import FIT_WAIT_SECONDS
from process_helpers import PRIVFIT, environment, register, sqlite_server

from privfit.client import AmbiguousDatasetNameError, Client, NotFoundError, UnknownDatasetNameError
from privfit.client.cli import EXIT_CONFLICT, EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    with sqlite_server(tmp_path_factory.mktemp("names")) as running:
        yield {"base": running.base, "url": running.database_url, "tmp": str(running.tmp_path),
               "owner": running.owner, "admin": running.admin}  # fmt: skip


def run(live: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    env = environment(live["url"], Path(live["tmp"]), PRIVFIT_URL=live["base"], PRIVFIT_API_KEY=live["owner"])
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run([*PRIVFIT, *args], env=env, capture_output=True, text=True, timeout=120, cwd=REPO)


class CountingTransport(httpx.HTTPTransport):
    """A real transport that records the paths it sends (to see which calls looked a name up)."""

    def __init__(self) -> None:
        super().__init__()
        self.paths: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        return super().handle_request(request)


def test_the_client_takes_a_unique_name_wherever_it_takes_a_dataset(live: dict[str, str]):
    dataset_id = register(live["base"], live["owner"], 1.0, name="loans-client")
    transport = CountingTransport()
    with Client(live["base"], live["owner"], retries=0, transport=transport) as client:
        assert client.resolve_dataset("loans-client") == dataset_id
        assert client.dataset("loans-client").id == dataset_id
        assert client.budget("loans-client").epsilon_max == 1.0
        assert client.ledger("loans-client").dataset_id == dataset_id
        estimate = client.estimate("loans-client", epsilon=0.1, params={"steps": 20})
        assert estimate.admissible
        fit = client.wait(client.fit("loans-client", epsilon=0.1, params={"steps": 20}), timeout=FIT_WAIT_SECONDS)
        assert fit.dataset_id == dataset_id
        assert [f.id for f in client.fits("loans-client")] == [fit.id]
        assert [e.job_id for e in client.iter_ledger("loans-client")][-1] == fit.id
        assert client.grants("loans-client") == []
        transport.paths.clear()
        client.budget(dataset_id.upper())  # an id (either case) is never looked up: one request
        assert transport.paths == [f"/v1/datasets/{dataset_id.upper()}/budget"]


def test_a_name_is_matched_exactly_in_nfc(live: dict[str, str]):
    composed = unicodedata.normalize("NFC", "café-ε")
    dataset_id = register(live["base"], live["owner"], 1.0, name=composed)
    with Client(live["base"], live["owner"], retries=0) as client:
        assert client.resolve_dataset(unicodedata.normalize("NFD", composed)) == dataset_id
        with pytest.raises(UnknownDatasetNameError):
            client.resolve_dataset("café-ε ")  # no trimming, no prefix match


def test_an_unknown_or_shared_name_is_a_clear_error(live: dict[str, str]):
    first = register(live["base"], live["owner"], 1.0, name="twin")
    second = register(live["base"], live["owner"], 1.0, name="twin")
    register(live["base"], live["owner"], 1.0, name="Housing")
    with Client(live["base"], live["owner"], retries=0) as client:
        with pytest.raises(AmbiguousDatasetNameError) as shared:
            client.budget("twin")
        assert [d.id for d in shared.value.matches] == [first, second]
        assert first in str(shared.value) and second in str(shared.value) and "pass the id" in str(shared.value)
        with pytest.raises(UnknownDatasetNameError) as unknown:
            client.budget("housing")
        assert isinstance(unknown.value, NotFoundError) and unknown.value.status == 404
        assert unknown.value.similar == ["Housing"]
        assert "no dataset named 'housing'" in str(unknown.value) and "did you mean 'Housing'?" in str(unknown.value)
        assert "privfit datasets list" in str(unknown.value) and "GET /v1/datasets" in str(unknown.value)
        assert unknown.value.problem["name"] == "housing"


def test_the_cli_takes_a_name_and_says_what_to_do_when_it_cannot(live: dict[str, str]):
    """The issue's case: ``privfit budget loans`` printed ``error: 404 Not Found: Not Found``."""
    dataset_id = register(live["base"], live["owner"], 2.0, name="loans-cli")
    budget = run(live, "budget", "loans-cli", "--json")
    assert budget.returncode == EXIT_OK, budget.stderr
    assert json.loads(budget.stdout)["epsilon_max"] == 2.0
    listed = run(live, "fits", "list", "loans-cli")
    assert listed.returncode == EXIT_OK, listed.stderr
    missing = run(live, "budget", "loans")
    assert missing.returncode == EXIT_NOT_FOUND == 5
    assert "error: no dataset named 'loans' among the datasets this key may see" in missing.stderr
    assert "did you mean 'loans-cli'?" in missing.stderr and "privfit datasets list" in missing.stderr
    as_json = run(live, "budget", "loans", "--json")
    assert json.loads(as_json.stdout)["title"] == "No dataset of that name"
    register(live["base"], live["owner"], 1.0, name="loans-cli")
    shared = run(live, "estimate", "loans-cli", "--epsilon", "0.1")
    assert shared.returncode == EXIT_USAGE == 2
    assert "2 datasets this key may see are named 'loans-cli'" in shared.stderr and dataset_id in shared.stderr
    deleted = run(live, "datasets", "delete", dataset_id, "--json")  # the id still works; the name is unique again
    assert deleted.returncode == EXIT_OK and json.loads(deleted.stdout) == {"id": dataset_id, "deleted": True}
    assert run(live, "estimate", "loans-cli", "--epsilon", "0.1").returncode == EXIT_OK


def test_a_duplicate_upload_names_the_cli_option(live: dict[str, str]):
    first = run(live, "datasets", "upload", "examples/loans.csv", "--schema", "examples/loans-schema.json",
                "--name", "dup", "-q")  # fmt: skip
    assert first.returncode == EXIT_OK, first.stderr
    again = run(live, "datasets", "upload", "examples/loans.csv", "--schema", "examples/loans-schema.json")
    assert again.returncode == EXIT_CONFLICT == 6
    assert "pass --allow-duplicate to register it anyway" in again.stderr, again.stderr
    assert "allow_duplicate=true" not in again.stderr and first.stdout.strip() in again.stderr


def test_fits_cancel_shows_the_fit_as_the_cancel_left_it(live: dict[str, str]):
    """A running fit stops at its next step: the command shows it ``cancelled``, not the ``running`` of the cancel
    request's own answer."""
    dataset_id = register(live["base"], live["owner"], 1.0, name="cancel-me")
    headers = {"Authorization": f"Bearer {live['owner']}"}
    started = httpx.post(f"{live['base']}/v1/fits", headers=headers, timeout=30, json={
        "dataset_id": dataset_id, "model": "logistic", "solver": "dp_gd", "privacy": {"epsilon": 0.2},
        "params": {"steps": 100_000}})  # fmt: skip
    assert started.status_code == 202, started.text
    fit_id = started.json()["id"]
    deadline = time.monotonic() + FIT_WAIT_SECONDS  # a bound on waiting for a state, not a speed requirement
    while httpx.get(f"{live['base']}/v1/fits/{fit_id}", headers=headers).json()["status"] == "queued":
        assert time.monotonic() < deadline, "the fit never started"
        time.sleep(0.2)
    cancelled = run(live, "fits", "cancel", fit_id, "--json", "--timeout", str(FIT_WAIT_SECONDS))
    assert cancelled.returncode == EXIT_OK, cancelled.stderr
    shown = json.loads(cancelled.stdout)
    assert shown["status"] == "cancelled" and shown["cancel_requested"] is True, shown
    table = run(live, "fits", "cancel", fit_id)  # cancelling a cancelled fit is harmless: shown as it is
    assert table.returncode == EXIT_OK and "cancelled" in table.stdout, table.stderr
