"""Helpers for the API tests: a small public dataset, keys of every role, upload and polling."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from fastapi.testclient import TestClient

from privfit.api.app import create_app
from privfit.api.auth import create_api_key
from privfit.settings import Settings
from privfit.solvers.base import REGRESSION_MODELS

SMALL_SCHEMA: dict[str, Any] = {
    "label": {"name": "y", "type": "binary", "positive": "yes", "negative": "no"},
    "features": [
        {"name": "x1", "type": "numeric", "lower": -1, "upper": 1},
        {"name": "x2", "type": "numeric", "lower": -1, "upper": 1},
        {"name": "color", "type": "categorical", "levels": ["red", "green", "blue"]},
    ],
    "missing": "reject",
    "budget": {"epsilon": 2.0, "delta": 1e-6},
    # No private preprocessing: x1, x2 already fill their bounds, and the tests that use this schema read budgets
    # and ledgers that start empty. tests/api/test_api_preprocessing.py tests the default (on).
    "preprocessing": "none",
}


#: The same features with a numeric label y ∈ [−4, 4], for the regression models (a model must match its label).
NUMERIC_LABEL_SCHEMA: dict[str, Any] = {
    **SMALL_SCHEMA,
    "label": {"name": "y", "type": "numeric", "lower": -4, "upper": 4},
}


def label_kind(model: str) -> str:
    """``"numeric"`` for a regression model, else ``"binary"``: which small dataset a fit of ``model`` needs."""
    return "numeric" if model in REGRESSION_MODELS else "binary"


def small_csv(n: int = 4000, seed: int = 0, label: str = "binary") -> bytes:
    """A public synthetic dataset: y = sign(2·x1 − x2 + noise); n = 4000 keeps fits at ε = 0.5 far from the
    boundary (0 of 200 simulated fits misclassify the test points or flip a coefficient sign). With
    ``label="numeric"`` y is the score 2·x1 − x2 + noise itself (for :data:`NUMERIC_LABEL_SCHEMA`)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, size=(n, 2))
    colors = rng.choice(["red", "green", "blue"], size=n)
    score = 2 * x[:, 0] - x[:, 1] + 0.3 * rng.standard_normal(n)
    labels = [f"{v:.4f}" for v in score] if label == "numeric" else np.where(score > 0, "yes", "no")
    lines = ["x1,x2,color,y"] + [f"{a:.4f},{b:.4f},{c},{y}" for (a, b), c, y in zip(x, colors, labels, strict=True)]
    return ("\n".join(lines) + "\n").encode()


@dataclass
class Keys:
    owner: dict[str, str]
    owner_id: str
    other_owner: dict[str, str]
    analyst: dict[str, str]
    analyst_id: str
    stranger_analyst: dict[str, str]
    admin: dict[str, str]


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def make_client(database_url: str, tmp_path: Path, *, workers: bool = True, **overrides: Any) -> TestClient:
    """A test client of an app on ``database_url`` with its data_dir under ``tmp_path``; ``overrides`` are further
    :class:`Settings` fields or replace the defaults here (e.g. ``store="database"``, ``heartbeat_seconds=5``)."""
    fields: dict[str, Any] = {
        "database_url": database_url, "data_dir": tmp_path / "store", "workers": 2, "poll_seconds": 0.05,
        "heartbeat_seconds": 0.2, "max_upload_bytes": 8 * 1024 * 1024, **overrides,
    }  # fmt: skip
    return TestClient(create_app(Settings(**fields), run_workers=workers))


def make_keys(test_client: TestClient) -> Keys:
    """An owner, another owner, an analyst, a stranger analyst and an admin of ``test_client``'s app."""
    db = test_client.app.state.db
    owner_id, owner = create_api_key(db, "owner", "owner")
    _, other = create_api_key(db, "owner", "other")
    analyst_id, analyst = create_api_key(db, "analyst", "analyst")
    _, stranger = create_api_key(db, "analyst", "stranger")
    _, admin = create_api_key(db, "admin", "admin")
    return Keys(bearer(owner), owner_id, bearer(other), bearer(analyst), analyst_id, bearer(stranger), bearer(admin))


def upload(test_client: TestClient, keys: Keys, *, csv: bytes | None = None, schema: dict | None = None,
           epsilon: float = 2.0, grant: bool = True, allow_duplicate: bool = True,
           label: str = "binary") -> str:  # fmt: skip
    """Upload (the small dataset by default, with a ``label`` kind from :func:`label_kind`) as the owner and grant it
    to the analyst; its id. Tests upload the same content many times, so ``allow_duplicate`` is on unless a test
    checks the duplicate refusal."""
    if csv is None and schema is None and label == "numeric":
        csv, schema = small_csv(label="numeric"), NUMERIC_LABEL_SCHEMA
    declared = json.loads(json.dumps(schema or SMALL_SCHEMA))
    declared["budget"]["epsilon"] = epsilon
    response = test_client.post(
        "/v1/datasets", headers=keys.owner, files={"file": ("data.csv", csv or small_csv(), "text/csv")},
        data={"schema": json.dumps(declared), "name": "small", "allow_duplicate": str(allow_duplicate).lower()},
    )  # fmt: skip
    assert response.status_code == 201, response.text
    dataset_id = response.json()["id"]
    if grant:
        granted = test_client.post(f"/v1/datasets/{dataset_id}/grants", headers=keys.owner,
                                   json={"api_key_id": keys.analyst_id})  # fmt: skip
        assert granted.status_code == 201, granted.text
    return dataset_id


def granted_analyst(
    test_client: TestClient, keys: Keys, dataset_id: str, name: str = "b"
) -> tuple[str, dict[str, str]]:
    """Another analyst key (``name``), granted the dataset as ``keys.analyst`` is: its id and its headers."""
    key_id, key = create_api_key(test_client.app.state.db, "analyst", name)
    granted = test_client.post(f"/v1/datasets/{dataset_id}/grants", headers=keys.owner, json={"api_key_id": key_id})
    assert granted.status_code == 201, granted.text
    return key_id, bearer(key)


#: How long a test waits for a fit to reach a state (a wait bound, never a speed requirement: generous for a busy
#: machine; the wait ends as soon as the state is reached).
FIT_WAIT_SECONDS = 300.0


def wait_for(test_client: TestClient, fit_id: str, headers: dict[str, str], timeout: float = FIT_WAIT_SECONDS) -> dict:
    """Poll the fit until it is succeeded, failed or cancelled; its body then. Fails after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = test_client.get(f"/v1/fits/{fit_id}", headers=headers).json()
        if body["status"] in ("succeeded", "failed", "cancelled"):
            return body
        time.sleep(0.05)
    raise AssertionError(f"fit {fit_id} did not finish within {timeout} s")


def fit_and_wait(test_client: TestClient, keys: Keys, request: dict[str, Any]) -> tuple[dict, dict]:
    """POST the fit (must be accepted, 202), wait for it to succeed with progress 1; (its admitted cost with its RDP
    curve — asked for with ``include=rdp`` —, its body)."""
    created = test_client.post("/v1/fits?include=rdp", headers=keys.analyst, json=request)
    assert created.status_code == 202, created.text
    done = wait_for(test_client, created.json()["id"], keys.analyst)
    assert done["status"] == "succeeded" and done["progress"] == 1.0, done
    return created.json()["cost"], done


def wait_until_running(
    test_client: TestClient,
    fit_id: str,
    headers: dict[str, str],
    timeout: float = FIT_WAIT_SECONDS,
    *,
    with_progress: bool = True,
) -> dict:
    """Poll until the fit is running (with some progress > 0 if ``with_progress``); its body then. Fails after
    ``timeout`` s."""
    deadline = time.monotonic() + timeout
    body: dict = {}
    while time.monotonic() < deadline:
        body = test_client.get(f"/v1/fits/{fit_id}", headers=headers).json()
        if body["status"] == "running" and (body["progress"] > 0 or not with_progress):
            return body
        time.sleep(0.05)
    raise AssertionError(f"fit {fit_id} was not seen running with progress within {timeout} s: {body}")


def cancel_running_fit_and_check_charge_kept(
    test_client: TestClient, keys: Keys, fit_id: str, dataset_id: str, *, with_progress: bool = True
) -> None:
    """Watch the fit run (0 < progress < 1; progress 0 for solvers whose progress would depend on the data, when
    ``with_progress`` is False), cancel it, and check it ends cancelled with its charge kept."""
    body = wait_until_running(test_client, fit_id, keys.analyst, with_progress=with_progress)
    assert (0 < body["progress"] < 1) if with_progress else body["progress"] == 0, body
    assert test_client.post(f"/v1/fits/{fit_id}/cancel", headers=keys.analyst).status_code == 200
    done = wait_for(test_client, fit_id, keys.analyst)
    assert done["status"] == "cancelled" and "result" not in done
    ledger = test_client.get(f"/v1/datasets/{dataset_id}/ledger", headers=keys.owner).json()
    assert [e["kind"] for e in ledger["entries"]] == ["reservation", "charge"]  # rows were read: the charge stays


def check_bad_params_refused(
    test_client: TestClient, keys: Keys, solver: str, params: dict[str, Any], field: str, *, model: str = "logistic"
) -> None:
    """A fit of ``solver`` with bad ``params`` on a fresh dataset: a problem+json 422 that names ``field``, and
    nothing written to the dataset's ledger. The dataset's label matches ``model`` (see :func:`label_kind`)."""
    dataset_id = upload(test_client, keys, label=label_kind(model))
    request = {"dataset_id": dataset_id, "solver": solver, "model": model, "privacy": {"epsilon": 0.5},
               "params": params}  # fmt: skip
    refused = test_client.post("/v1/fits", headers=keys.analyst, json=request)
    assert refused.status_code == 422, refused.text
    assert refused.headers["content-type"].startswith("application/problem+json")
    assert field in refused.text
    assert test_client.get(f"/v1/datasets/{dataset_id}/ledger", headers=keys.owner).json()["total"] == 0
