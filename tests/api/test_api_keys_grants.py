"""Revoking API keys and grants, on SQLite and PostgreSQL.

* admins list keys (never a secret) and revoke them; a revoked key is refused (401) from its very next request,
  also by a second API process on the same database (real ``privfit serve`` processes: authentication reads the
  key's row on every request, nothing is cached);
* a revoked key's queued fits are cancelled with their reservations released, its running fits are asked to stop
  (their charge stays); revoking is idempotent, a key cannot revoke itself, unknown ids are 404;
* owners (and admins) list and revoke grants: the analyst loses the dataset at once, its queued fits on it are
  cancelled, its finished fits stay readable to it;
* a fit whose admission races a revocation is refused, never admitted after the revocation cancelled the others.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import pytest
from api_helpers import Keys, bearer, fit_and_wait, upload
from fastapi.testclient import TestClient
from process_helpers import keys_for, server
from sqlalchemy import select

from privfit.api.routers import fits as fits_router
from privfit.db import ApiKey, Job, LedgerEntry
from privfit.jobs import claim

FIT = {"model": "logistic", "solver": "dp_gd", "privacy": {"epsilon": 0.2}}


def kinds(client: TestClient, dataset_id: str, headers: dict[str, str]) -> list[str]:
    return [e["kind"] for e in client.get(f"/v1/datasets/{dataset_id}/ledger", headers=headers).json()["entries"]]


def test_admins_list_keys_without_their_secrets(idle_client: TestClient, idle_keys: Keys):
    listed = idle_client.get("/v1/keys", headers=idle_keys.admin)
    assert listed.status_code == 200, listed.text
    keys = listed.json()
    assert len(keys) == 5 and {k["role"] for k in keys} == {"owner", "analyst", "admin"}
    for key in keys:
        assert set(key) == {"key_id", "prefix", "role", "name", "created_at", "revoked_at"}
        assert key["revoked_at"] is None and key["created_at"].endswith("+00:00")
    with idle_client.app.state.db.read() as session:
        secrets = [row.secret_hash for row in session.execute(select(ApiKey)).scalars()]
    assert not any(secret in listed.text for secret in secrets)
    for headers in (idle_keys.owner, idle_keys.analyst):
        assert idle_client.get("/v1/keys", headers=headers).status_code == 403
    assert idle_client.get("/v1/keys").status_code == 401


def test_a_revoked_key_is_refused_from_its_next_request(idle_client: TestClient, idle_keys: Keys):
    analyst_id = idle_keys.analyst_id
    assert idle_client.get("/v1/me", headers=idle_keys.analyst).status_code == 200
    assert idle_client.delete(f"/v1/keys/{analyst_id}", headers=idle_keys.owner).status_code == 403
    assert idle_client.delete(f"/v1/keys/{analyst_id}", headers=idle_keys.admin).status_code == 204
    refused = idle_client.get("/v1/me", headers=idle_keys.analyst)
    assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
    assert refused.headers["content-type"].startswith("application/problem+json")
    (row,) = [k for k in idle_client.get("/v1/keys", headers=idle_keys.admin).json() if k["key_id"] == analyst_id]
    assert row["revoked_at"] is not None
    # idempotent; unknown and malformed ids are 404; no key revokes itself
    assert idle_client.delete(f"/v1/keys/{analyst_id}", headers=idle_keys.admin).status_code == 204
    unknown = idle_client.delete(f"/v1/keys/{uuid.uuid4()}", headers=idle_keys.admin)
    assert unknown.status_code == 404 and unknown.json()["code"] == "key_not_found"
    assert idle_client.delete("/v1/keys/not-a-key", headers=idle_keys.admin).status_code == 404
    admin_id = idle_client.get("/v1/me", headers=idle_keys.admin).json()["key_id"]
    itself = idle_client.delete(f"/v1/keys/{admin_id}", headers=idle_keys.admin)
    assert itself.status_code == 409 and "itself" in itself.json()["detail"]
    # a revoked analyst key cannot be granted a dataset any more
    dataset_id = upload(idle_client, idle_keys, grant=False)
    granted = idle_client.post(f"/v1/datasets/{dataset_id}/grants", headers=idle_keys.owner,
                               json={"api_key_id": analyst_id})  # fmt: skip
    assert granted.status_code == 422 and "revoked" in granted.json()["detail"]


def test_revoking_a_key_cancels_its_queued_fits_and_stops_its_running_ones(idle_client: TestClient, idle_keys: Keys):
    dataset_id = upload(idle_client, idle_keys)
    fits = [idle_client.post("/v1/fits", headers=idle_keys.analyst, json={"dataset_id": dataset_id, **FIT}).json()["id"]
            for _ in range(2)]  # fmt: skip
    owners_fit = idle_client.post("/v1/fits", headers=idle_keys.owner, json={"dataset_id": dataset_id, **FIT}).json()
    db = idle_client.app.state.db
    assert claim(db, fits[0], "a-worker", 60) is not None  # running (and charged), as a worker would have it

    assert idle_client.delete(f"/v1/keys/{idle_keys.analyst_id}", headers=idle_keys.admin).status_code == 204

    with db.read() as session:
        running, queued, other = (session.get(Job, fit_id) for fit_id in (*fits, owners_fit["id"]))
        assert (running.status, running.cancel_requested) == ("running", True)  # stops at its next step
        assert queued.status == "cancelled" and queued.error["type"] == "cancelled"
        assert other.status == "queued"  # another key's fit is untouched
        by_job = {(e.job_id, e.kind) for e in session.execute(select(LedgerEntry)).scalars()}
    assert (fits[0], "charge") in by_job and (fits[0], "release") not in by_job  # a charge already made stays
    assert (fits[1], "release") in by_job  # never read a row: its reservation is released


def test_owners_list_and_revoke_grants(client: TestClient, keys: Keys):
    dataset_id = upload(client, keys)
    done = fit_and_wait(client, keys, {"dataset_id": dataset_id, **FIT})[1]
    listed = client.get(f"/v1/datasets/{dataset_id}/grants", headers=keys.owner)
    assert listed.status_code == 200, listed.text
    (grant,) = listed.json()
    assert grant["api_key_id"] == keys.analyst_id and grant["key_revoked"] is False
    assert client.get(f"/v1/datasets/{dataset_id}/grants", headers=keys.admin).status_code == 200
    assert client.get(f"/v1/datasets/{dataset_id}/grants", headers=keys.analyst).status_code == 403
    assert client.delete(f"/v1/datasets/{dataset_id}/grants/{keys.analyst_id}", headers=keys.analyst).status_code == 403

    revoked = client.delete(f"/v1/datasets/{dataset_id}/grants/{keys.analyst_id}", headers=keys.owner)
    assert revoked.status_code == 204, revoked.text

    assert client.get(f"/v1/datasets/{dataset_id}/grants", headers=keys.owner).json() == []
    for path in (f"/v1/datasets/{dataset_id}", f"/v1/datasets/{dataset_id}/budget"):
        gone = client.get(path, headers=keys.analyst)
        assert gone.status_code == 404 and gone.json()["code"] == "dataset_not_found"
    refused = client.post("/v1/fits", headers=keys.analyst, json={"dataset_id": dataset_id, **FIT})
    assert refused.status_code == 404 and refused.json()["code"] == "dataset_not_found"
    # its finished fit was released before the revocation: it stays readable to the analyst
    assert client.get(f"/v1/fits/{done['id']}", headers=keys.analyst).json()["status"] == "succeeded"
    again = client.delete(f"/v1/datasets/{dataset_id}/grants/{keys.analyst_id}", headers=keys.owner)
    assert again.status_code == 404 and again.json()["code"] == "grant_not_found"
    # granting again works; an admin can revoke too
    client.post(f"/v1/datasets/{dataset_id}/grants", headers=keys.owner, json={"api_key_id": keys.analyst_id})
    assert client.delete(f"/v1/datasets/{dataset_id}/grants/{keys.analyst_id}", headers=keys.admin).status_code == 204


def test_revoking_a_grant_cancels_the_analysts_queued_fits_on_the_dataset(idle_client: TestClient, idle_keys: Keys):
    dataset_id = upload(idle_client, idle_keys)
    analysts = idle_client.post("/v1/fits", headers=idle_keys.analyst, json={"dataset_id": dataset_id, **FIT}).json()
    owners = idle_client.post("/v1/fits", headers=idle_keys.owner, json={"dataset_id": dataset_id, **FIT}).json()
    path = f"/v1/datasets/{dataset_id}/grants/{idle_keys.analyst_id}"
    assert idle_client.delete(path, headers=idle_keys.owner).status_code == 204
    assert idle_client.get(f"/v1/fits/{analysts['id']}", headers=idle_keys.owner).json()["status"] == "cancelled"
    assert idle_client.get(f"/v1/fits/{owners['id']}", headers=idle_keys.owner).json()["status"] == "queued"
    assert sorted(kinds(idle_client, dataset_id, idle_keys.owner)) == ["release", "reservation", "reservation"]


@pytest.mark.parametrize("revoke", ["key", "grant"])
def test_a_fit_racing_a_revocation_is_refused_and_writes_nothing(idle_client, idle_keys, monkeypatch, revoke):
    """The revocation lands after the request passed the visibility check and before its fit is written: the
    admission re-checks key and grant in its transaction, under their row locks, so nothing is admitted."""
    dataset_id = upload(idle_client, idle_keys)
    checked = fits_router.check_usable  # the last step of the visibility check of the fit's inputs

    def revoked_meanwhile(dataset, requested):
        dataset = checked(dataset, requested)
        path = f"/v1/keys/{idle_keys.analyst_id}" if revoke == "key" else \
            f"/v1/datasets/{dataset_id}/grants/{idle_keys.analyst_id}"  # fmt: skip
        assert idle_client.delete(path, headers=idle_keys.admin).status_code == 204
        return dataset

    monkeypatch.setattr(fits_router, "check_usable", revoked_meanwhile)
    refused = idle_client.post("/v1/fits", headers=idle_keys.analyst, json={"dataset_id": dataset_id, **FIT})
    assert refused.status_code == (401 if revoke == "key" else 404), refused.text
    with idle_client.app.state.db.read() as session:
        assert session.query(Job).count() == 0 and session.query(LedgerEntry).count() == 0


def test_a_revoked_key_is_refused_at_once_by_another_api_process(database_url: str, tmp_path: Path):
    """Two ``privfit serve`` processes on one database: a key revoked through one is refused by the other on its
    very next request."""
    _, admin = keys_for(database_url)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with server(database_url, tmp_path / "a") as first, server(database_url, tmp_path / "b") as second:
        created = httpx.post(f"{first}/v1/keys", headers=bearer(admin), json={"role": "analyst", "name": "leaving"})
        analyst = created.json()
        headers = bearer(analyst["key"])
        assert httpx.get(f"{second}/v1/me", headers=headers).status_code == 200  # known to the second process
        assert httpx.delete(f"{first}/v1/keys/{analyst['key_id']}", headers=bearer(admin)).status_code == 204
        for base in (second, first):
            assert httpx.get(f"{base}/v1/me", headers=headers).status_code == 401
        listed = httpx.get(f"{second}/v1/keys", headers=bearer(admin)).json()
        assert next(k for k in listed if k["key_id"] == analyst["key_id"])["revoked_at"] is not None
