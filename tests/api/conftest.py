"""API fixtures: an app (with its embedded worker pool) on each dialect, keys of every role."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from api_helpers import Keys, bearer, make_client
from fastapi.testclient import TestClient

from privfit.api.auth import create_api_key


@pytest.fixture
def client(database_url: str, tmp_path: Path) -> Iterator[TestClient]:
    with make_client(database_url, tmp_path) as test_client:
        yield test_client


@pytest.fixture
def idle_client(database_url: str, tmp_path: Path) -> Iterator[TestClient]:
    """An app without workers: fits stay queued."""
    with make_client(database_url, tmp_path, workers=False) as test_client:
        yield test_client


def _keys(test_client: TestClient) -> Keys:
    db = test_client.app.state.db
    owner_id, owner = create_api_key(db, "owner", "owner")
    _, other = create_api_key(db, "owner", "other")
    analyst_id, analyst = create_api_key(db, "analyst", "analyst")
    _, stranger = create_api_key(db, "analyst", "stranger")
    _, admin = create_api_key(db, "admin", "admin")
    return Keys(bearer(owner), owner_id, bearer(other), bearer(analyst), analyst_id, bearer(stranger), bearer(admin))


@pytest.fixture
def keys(client: TestClient) -> Keys:
    return _keys(client)


@pytest.fixture
def idle_keys(idle_client: TestClient) -> Keys:
    return _keys(idle_client)
