"""The API's OpenAPI document is a contract: it changes only on purpose. When an endpoint, a parameter or a
response changes, regenerate the snapshot with ``python tests/api/test_openapi_snapshot.py > tests/api/openapi.
snapshot.json`` and review the diff."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from privfit.api.app import create_app
from privfit.settings import Settings

SNAPSHOT = Path(__file__).with_name("openapi.snapshot.json")


def current_document() -> str:
    app = create_app(Settings(database_url="sqlite:///:memory:"), run_workers=False)
    return json.dumps(app.openapi(), indent=1, sort_keys=True, ensure_ascii=False)


def test_the_openapi_document_matches_its_snapshot():
    assert current_document() == SNAPSHOT.read_text(encoding="utf-8")


if __name__ == "__main__":
    sys.stdout.write(current_document())
