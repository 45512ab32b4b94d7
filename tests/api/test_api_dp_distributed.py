"""``dp_distributed`` through the HTTP API (SQLite and PostgreSQL): both algorithms and every built-in topology
end to end, the Laplace curve in the ledger, clear 422s, progress, and cancellation of a running fit."""

from __future__ import annotations

import time

import numpy as np
import pytest
from api_helpers import (
    cancel_running_fit_and_check_charge_kept,
    check_bad_params_refused,
    fit_and_wait,
    label_kind,
    small_csv,
    upload,
)

import privfit.solvers.distributed.solver as dp_distributed_module
from privfit.privacy import PrivacyCost, get_grid, laplace_rdp

CASES = [
    {"algorithm": "online", "n_learners": 1},
    {"algorithm": "minibatch", "n_learners": 4, "topology": "ring", "passes": 2},
    {"n_learners": 8, "batch_size": 5, "topology": "ring_matchings", "schedule": "convex", "l2": 0.0, "radius": 2.0},
    {"n_learners": 5, "batch_size": 2, "topology": "erdos_renyi", "edge_probability": 0.6, "topology_seed": 3},
    {"n_learners": 3, "batch_size": 4, "topology": "star", "model": "linear"},
    {"n_learners": 2, "batch_size": 3, "topology": "custom", "mixing_matrices": [[[0.75, 0.25], [0.25, 0.75]]]},
    {"n_learners": 6, "topology": "complete", "model": "huber", "output": "last"},
]


@pytest.mark.parametrize("params", CASES, ids=lambda p: f"{p.get('topology', 'ring')}-{p.get('algorithm', 'mb')}")
def test_fits_end_to_end_and_is_charged_the_laplace_curve(client, keys, params: dict[str, object]) -> None:
    params = dict(params)
    model = str(params.pop("model", "logistic"))
    dataset_id = upload(client, keys, epsilon=1.0, label=label_kind(model))
    request = {"dataset_id": dataset_id, "solver": "dp_distributed", "model": model, "privacy": {"epsilon": 0.8},
               "params": params}  # fmt: skip
    cost, done = fit_and_wait(client, keys, request)
    settings = done["settings"]
    assert settings["n_learners"] == params["n_learners"]
    grid = get_grid(cost["grid"])
    expected = settings["passes"] * laplace_rdp(grid, scale=settings["noise_multiplier"])
    np.testing.assert_allclose(cost["rdp"], expected, rtol=1e-12)
    assert PrivacyCost(np.array(cost["rdp"]), grid).epsilon(1e-6).epsilon <= 0.8
    budget = client.get(f"/v1/datasets/{dataset_id}/budget?include=rdp", headers=keys.analyst).json()
    np.testing.assert_allclose(budget["committed_rdp"], cost["rdp"], rtol=1e-12)
    entries = client.get(f"/v1/datasets/{dataset_id}/ledger", headers=keys.owner).json()["entries"]
    assert [entry["kind"] for entry in entries] == ["reservation", "charge"]
    result = done["result"]
    theta = [*result["coefficients"], result["intercept"]]
    assert len(result["coefficients"]) == 5 and np.linalg.norm(theta) <= settings["radius"] * (1 + 1e-12)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"l2": 0.0}, "l2"),
        ({"topology": "erdos_renyi"}, "edge_probability"),
        ({"topology": "custom", "n_learners": 2, "mixing_matrices": [[[0.9, 0.2], [0.1, 0.8]]]}, "mixing_matrices"),
        ({"n_learners": 512}, "n_learners"),
        ({"seed": 1}, "seed"),
    ],
)
def test_bad_params_are_a_422_naming_the_field_and_charge_nothing(client, keys, params, field: str) -> None:
    check_bad_params_refused(client, keys, "dp_distributed", params, field)


def test_solvers_endpoint_lists_dp_distributed(client, keys) -> None:
    solvers = {s["name"]: s for s in client.get("/v1/solvers", headers=keys.analyst).json()}
    schema = solvers["dp_distributed"]["params_schema"]["properties"]
    assert set(schema["topology"]["enum"]) == {"complete", "ring", "star", "ring_matchings", "erdos_renyi", "custom"}
    assert set(schema["algorithm"]["enum"]) == {"online", "minibatch"}


def test_a_running_fit_shows_progress_and_stops_on_cancel_keeping_its_charge(client, keys, monkeypatch) -> None:
    """Rounds poll for a stop; each round is slowed down here so the test can watch the fit run (the database,
    the job runner and the solver are the real ones)."""
    real_update = dp_distributed_module.local_update

    def slow_update(*args: object, **kwargs: object) -> np.ndarray:
        time.sleep(0.002)
        return real_update(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(dp_distributed_module, "local_update", slow_update)
    dataset_id = upload(client, keys, csv=small_csv(n=20_000))
    request = {"dataset_id": dataset_id, "solver": "dp_distributed", "privacy": {"epsilon": 0.5},
               "params": {"algorithm": "online", "n_learners": 1}}  # fmt: skip
    fit_id = client.post("/v1/fits", headers=keys.analyst, json=request).json()["id"]
    cancel_running_fit_and_check_charge_kept(client, keys, fit_id, dataset_id)
