"""API fixtures: an app (with its embedded worker pool) on each dialect, keys of every role."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from api_helpers import Keys, make_client, make_keys
from fastapi.testclient import TestClient


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
def idle_keys(idle_client: TestClient) -> Keys:
    return make_keys(idle_client)
