"""``dp_sgd`` through the HTTP API (SQLite and PostgreSQL): each sampling mode end to end with the ledger charged
exactly the solver's cost, clear 422s that charge nothing, the solver listing, progress, and cancellation."""

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

import privfit.solvers.baselines.dp_sgd as dp_sgd_module
from privfit.privacy import PrivacyCost, get_grid, unbounded_from_json
from privfit.solvers import PublicMetadata, get_solver

SOLVER = get_solver("dp_sgd")

CASES = [
    {},
    {"sampling": "poisson", "batch_size": 100, "epochs": 2, "lr_schedule": "cosine"},
    {"sampling": "fixed_size", "batch_size": 64, "output": "suffix_average"},
    {"sampling": "shuffle", "batch_size": 300, "epochs": 3, "lr_schedule": "inverse_sqrt"},
    {"sampling": "poisson", "model": "huber", "clip_norm": 0.5, "l2": 0.01},
]


@pytest.mark.parametrize("params", CASES, ids=lambda p: f"{p.get('sampling', 'default')}-{p.get('model', 'logistic')}")
def test_fits_end_to_end_and_is_charged_exactly_the_solver_cost(client, keys, params: dict[str, object]) -> None:
    params = dict(params)
    model = str(params.pop("model", "logistic"))
    dataset_id = upload(client, keys, epsilon=1.0, label=label_kind(model))
    request = {"dataset_id": dataset_id, "solver": "dp_sgd", "model": model, "privacy": {"epsilon": 0.8},
               "params": params}  # fmt: skip
    cost, done = fit_and_wait(client, keys, request)
    settings = done["settings"]
    assert settings["sampling"] == params.get("sampling", "poisson") and settings["n"] == 4000
    assert settings["batch_size"] == params.get("batch_size", 256)
    assert settings["steps"] == settings["epochs"] * -(-4000 // settings["batch_size"])
    meta = PublicMetadata(n=settings["n"], d=settings["d"], row_norm_bound=settings["row_norm_bound"],
                          label_bound=settings["label_bound"])  # fmt: skip
    grid = get_grid(cost["grid"])
    expected = SOLVER.cost(settings, meta, grid)
    np.testing.assert_array_equal(np.array(cost["rdp"]), expected.rdp)  # the admitted cost IS the solver's cost
    assert cost["gdp_mu_squared"] == expected.gdp_mu_squared or cost["gdp_mu_squared"] is None  # shuffle / others
    admitted = PrivacyCost(np.array(cost["rdp"]), grid, gdp_mu_squared=unbounded_from_json(cost["gdp_mu_squared"]))
    assert admitted.epsilon(1e-6).epsilon <= 0.8
    budget = client.get(f"/v1/datasets/{dataset_id}/budget?include=rdp", headers=keys.analyst).json()
    np.testing.assert_array_equal(np.array(budget["committed_rdp"]), expected.rdp)
    entries = client.get(f"/v1/datasets/{dataset_id}/ledger", headers=keys.owner).json()["entries"]
    assert [entry["kind"] for entry in entries] == ["reservation", "charge"]
    result = done["result"]
    theta = [*result["coefficients"], result["intercept"]]
    assert len(result["coefficients"]) == 5 and np.linalg.norm(theta) <= settings["radius"] * (1 + 1e-12)
    if params.get("model", "logistic") == "logistic":
        assert result["coefficients"][0] > 0 > result["coefficients"][1]  # y = sign(2·x1 − x2 + noise)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"batch_size": 4001}, "batch_size"),
        ({"sampling": "shuffled"}, "sampling"),
        ({"clip_norm": 0.0}, "clip_norm"),
        ({"noise_multiplier": 1.0}, "noise_multiplier"),  # together with the request's target ε
        ({"epochs": 0}, "epochs"),
        ({"lr_schedule": "step"}, "lr_schedule"),
    ],
)
def test_bad_params_are_a_422_naming_the_field_and_charge_nothing(client, keys, params, field: str) -> None:
    check_bad_params_refused(client, keys, "dp_sgd", params, field)


def test_solvers_endpoint_lists_dp_sgd(client, keys) -> None:
    solvers = {s["name"]: s for s in client.get("/v1/solvers", headers=keys.analyst).json()}
    entry = solvers["dp_sgd"]
    schema = entry["params_schema"]["properties"]
    assert set(schema["sampling"]["enum"]) == {"poisson", "fixed_size", "shuffle"}
    assert schema["sampling"]["default"] == "poisson"
    # epochs and the release default to null: the solver picks them from the public noise level, as documented
    assert schema["epochs"]["default"] is None and "public noise level" in schema["epochs"]["description"]
    assert schema["output"]["default"] is None
    assert entry["models"] == ["logistic", "linear", "huber", "svm"]
    assert entry["formula_version"] == "dp_sgd/sampled-gaussian-rdp/v1"


def test_a_running_fit_shows_progress_and_stops_on_cancel_keeping_its_charge(client, keys, monkeypatch) -> None:
    """Steps poll for a stop; each step is slowed down here so the test can watch the fit run (the database,
    the job runner and the solver are the real ones)."""
    real_sum = dp_sgd_module.clipped_gradient_sum

    def slow_sum(*args: object, **kwargs: object) -> np.ndarray:
        time.sleep(0.005)
        return real_sum(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(dp_sgd_module, "clipped_gradient_sum", slow_sum)
    dataset_id = upload(client, keys, csv=small_csv(n=4000))
    request = {"dataset_id": dataset_id, "solver": "dp_sgd", "privacy": {"epsilon": 0.5},
               "params": {"batch_size": 16, "epochs": 5}}  # fmt: skip  # T = 1250 steps of ≥ 5 ms
    fit_id = client.post("/v1/fits", headers=keys.analyst, json=request).json()["id"]
    cancel_running_fit_and_check_charge_kept(client, keys, fit_id, dataset_id)
