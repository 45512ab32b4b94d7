"""API fixtures: an app (with its embedded worker pool) on each dialect, keys of every role."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from api_helpers import Keys, make_client, make_keys
from fastapi.testclient import TestClient

from privfit.client import Client


@pytest.fixture
def client(database_url: str, tmp_path: Path) -> Iterator[TestClient]:
    with make_client(database_url, tmp_path) as test_client:
        yield test_client


@pytest.fixture
def idle_client(database_url: str, tmp_path: Path) -> Iterator[TestClient]:
    """An app without workers: fits stay queued."""
    with make_client(database_url, tmp_path, workers=False) as test_client:
        yield test_client


@pytest.fixture
def keys(client: TestClient) -> Keys:
    return make_keys(client)


@pytest.fixture
def analyst(client: TestClient, keys: Keys) -> Iterator[Client]:
    """The analyst's :class:`privfit.client.Client` on ``client``'s in-process app (no retries)."""
    secret = keys.analyst["Authorization"].removeprefix("Bearer ")
    with Client("http://testserver", secret, retries=0, transport=client._transport) as opened:
        yield opened


@pytest.fixture
def idle_keys(idle_client: TestClient) -> Keys:
    return make_keys(idle_client)


@pytest.fixture
def driver(tmp_path: Path) -> Iterator[Any]:
    """A fresh headless Chromium that fails the test on a console error (:func:`dashboard_helpers.chromium`), for the
    dashboard's browser tests (a module may override it, e.g. with an air-gapped browser)."""
    from dashboard_helpers import chromium  # selenium only where a browser test asks for one

    with chromium(tmp_path) as browser:
        yield browser


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A fresh clone of the repository under ``tmp_path/clone`` with nothing beside it
    (:func:`walkthrough.fresh_clone`), for the walkthroughs a new user runs; skips when .venv is missing or stale
    (linking it would let scripts/serve.sh re-install the shared .venv from the copy)."""
    from walkthrough import fresh_clone, venv_is_current

    repo = Path(__file__).resolve().parents[2]
    if not (repo / ".venv" / "bin" / "privfit").exists() or not venv_is_current(repo):
        pytest.skip("the walkthroughs run .venv/bin/privfit from an up-to-date .venv: run scripts/test.sh")
    copy = fresh_clone(repo, tmp_path / "clone")
    assert not (copy.parent / "shared").exists() and (copy / "examples" / "data" / "adult" / "adult.data.gz").is_file()
    return copy
