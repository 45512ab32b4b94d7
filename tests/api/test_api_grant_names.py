"""Issue 36: a dataset's grants name the analyst key (``api_key_name``), not only its id, for the dashboard's Access
panel and the Python client."""

from __future__ import annotations

from api_helpers import Keys, upload
from fastapi.testclient import TestClient

from privfit.client.models import Grant, SolverInfo


def test_grants_carry_the_key_name(client: TestClient, keys: Keys) -> None:
    """On both dialects: the grant of the analyst key created as "analyst" (api_helpers.make_keys) says so."""
    dataset_id = upload(client, keys)
    listed = client.get(f"/v1/datasets/{dataset_id}/grants", headers=keys.owner)
    assert listed.status_code == 200, listed.text
    (grant,) = listed.json()
    assert (grant["api_key_id"], grant["api_key_name"]) == (keys.analyst_id, "analyst")
    assert Grant.from_json(grant).api_key_name == "analyst"


def test_the_client_models_carry_the_new_fields() -> None:
    entry = {"name": "objective_perturbation", "models": ["logistic"], "available": False,
             "unavailable_reason": "objective_perturbation needs noise with a continuous density.",
             "enabled_by": "PRIVFIT_NOISE_SAMPLER=float"}  # fmt: skip
    info = SolverInfo.from_json(entry)
    assert (info.available, info.enabled_by) == (False, "PRIVFIT_NOISE_SAMPLER=float")
    assert info.unavailable_reason == entry["unavailable_reason"]
    older = SolverInfo.from_json({"name": "dp_gd"})  # a server older than the fields: nothing claims it is refused
    assert (older.available, older.unavailable_reason, older.enabled_by) == (True, None, None)
