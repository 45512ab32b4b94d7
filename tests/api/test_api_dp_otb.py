"""``dp_otb`` through the HTTP API (SQLite and PostgreSQL): every learner end to end, its cost in the ledger,
progress, and cancellation of a running pass."""

from __future__ import annotations

import time

import numpy as np
import pytest
from api_helpers import (
    cancel_running_fit_and_check_charge_kept,
    check_bad_params_refused,
    fit_and_wait,
    small_csv,
    upload,
)

import privfit.solvers.online_to_batch.solver as dp_otb_module
from privfit.privacy import PrivacyCost, get_grid
from privfit.solvers.online_to_batch.learners import LEARNERS


@pytest.mark.parametrize("learner", sorted(LEARNERS))
def test_every_learner_fits_end_to_end_and_is_charged_its_cost(client, keys, learner: str) -> None:
    dataset_id = upload(client, keys, epsilon=1.0)
    params: dict[str, object] = {"learner": learner}
    if learner == "strongly_convex":
        params["l2"] = 0.01
    request = {"dataset_id": dataset_id, "solver": "dp_otb", "privacy": {"epsilon": 0.9}, "params": params}
    cost, done = fit_and_wait(client, keys, request)
    settings = done["settings"]
    assert settings["learner"] == learner and settings["k"] == (3.0 if learner == "parameter_free" else 1.0)
    # Theorem 3: the charged curve is αρ²/2 on the dataset's grid, and it is what the ledger holds
    grid = get_grid(cost["grid"])
    np.testing.assert_allclose(cost["rdp"], grid.orders * settings["rho"] ** 2 / 2, rtol=1e-12)
    assert PrivacyCost(np.array(cost["rdp"]), grid).epsilon(1e-6).epsilon <= 0.9
    budget = client.get(f"/v1/datasets/{dataset_id}/budget?include=rdp", headers=keys.analyst).json()
    np.testing.assert_allclose(budget["committed_rdp"], cost["rdp"], rtol=1e-12)
    entries = client.get(f"/v1/datasets/{dataset_id}/ledger", headers=keys.owner).json()["entries"]
    assert [entry["kind"] for entry in entries] == ["reservation", "charge"]
    result = done["result"]
    released = np.linalg.norm([*result["coefficients"], result["intercept"]])
    assert len(result["coefficients"]) == 5 and released <= settings["radius"] * (1 + 1e-12)  # x_T stays in W


def test_solvers_endpoint_lists_dp_otb_with_its_learners(client, keys) -> None:
    solvers = {s["name"]: s for s in client.get("/v1/solvers", headers=keys.analyst).json()}
    schema = solvers["dp_otb"]["params_schema"]
    assert set(schema["properties"]["learner"]["enum"]) == set(LEARNERS)
    assert solvers["dp_otb"]["models"] == ["logistic", "linear", "huber", "svm"]


def test_bad_dp_otb_params_are_a_422_naming_the_field_and_charge_nothing(client, keys) -> None:
    check_bad_params_refused(client, keys, "dp_otb", {"learner": "strongly_convex"}, "l2")


def test_a_running_pass_shows_progress_and_stops_on_cancel_keeping_its_charge(client, keys, monkeypatch) -> None:
    """The pass checks for a stop between blocks of rounds; each block is slowed down here so the test can watch
    the fit run (the database, the job runner and the solver are the real ones)."""
    real_block = dp_otb_module.online_to_batch_block

    def slow_block(*args: object) -> None:
        time.sleep(0.05)
        real_block(*args)

    monkeypatch.setattr(dp_otb_module, "online_to_batch_block", slow_block)
    dataset_id = upload(client, keys, csv=small_csv(n=100_000))
    request = {"dataset_id": dataset_id, "solver": "dp_otb", "privacy": {"epsilon": 0.5}}
    fit_id = client.post("/v1/fits", headers=keys.analyst, json=request).json()["id"]
    cancel_running_fit_and_check_charge_kept(client, keys, fit_id, dataset_id)
