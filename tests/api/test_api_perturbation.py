"""``output_perturbation`` and ``objective_perturbation`` through the HTTP API (SQLite and PostgreSQL): fits end to
end for every supported model and both noise kinds, the ledger curve equal to the solver's cost, clear 422s that
charge nothing, the solver listing, and cancellation of a running fit."""

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

import privfit.solvers.baselines.erm as erm_module
from privfit.privacy import PrivacyCost, get_grid, unbounded_from_json
from privfit.solvers import PublicMetadata, get_solver

CASES = [
    ("output_perturbation", {}),
    ("output_perturbation", {"noise": "laplace", "model": "svm"}),
    ("output_perturbation", {"model": "huber", "l2": 0.5}),
    ("objective_perturbation", {}),
    ("objective_perturbation", {"noise": "laplace", "model": "huber"}),
    ("objective_perturbation", {"model": "svm", "hinge_smoothing": 0.5}),
]


@pytest.mark.parametrize(("solver", "params"), CASES, ids=lambda value: str(value))
def test_fits_end_to_end_and_the_ledger_holds_the_solver_cost(client, keys, solver: str, params: dict) -> None:
    params = dict(params)
    model = params.pop("model", "logistic")
    dataset_id = upload(client, keys, epsilon=1.0, label=label_kind(model))
    request = {
        "dataset_id": dataset_id,
        "solver": solver,
        "model": model,
        "privacy": {"epsilon": 0.8},
        "params": params,
    }
    cost, done = fit_and_wait(client, keys, request)
    settings = done["settings"]
    grid = get_grid(cost["grid"])
    implementation = get_solver(solver)
    meta = PublicMetadata(
        n=settings["n"], d=settings["d"], row_norm_bound=settings["row_norm_bound"], label_bound=settings["label_bound"]
    )
    expected = implementation.cost(settings, meta, grid)
    np.testing.assert_allclose(cost["rdp"], expected.rdp, rtol=1e-12)
    gdp = unbounded_from_json(cost["gdp_mu_squared"])  # output perturbation's Gaussian: its exact curve meets 0.8
    assert (
        PrivacyCost(np.array(cost["rdp"]), grid, cost.get("extra_delta", 0.0), gdp_mu_squared=gdp).epsilon(1e-6).epsilon
        <= 0.8
    )
    assert settings["noise"] == params.get("noise", "gaussian")
    entries = client.get(f"/v1/datasets/{dataset_id}/ledger", headers=keys.owner).json()["entries"]
    assert [entry["kind"] for entry in entries] == ["reservation", "charge"]
    result = done["result"]
    assert len(result["coefficients"]) == 5 and np.isfinite([*result["coefficients"], result["intercept"]]).all()


@pytest.mark.parametrize(
    ("solver", "params", "field"),
    [
        ("objective_perturbation", {"model": "linear"}, "model"),
        ("objective_perturbation", {"l2": 1e-9}, "l2"),
        ("output_perturbation", {"l2": 0.0}, "l2"),
        ("output_perturbation", {"noise": "uniform"}, "noise"),
        ("output_perturbation", {"gradient_tolerance": 1e-15}, "gradient_tolerance"),  # below the public floor
    ],
)
def test_bad_params_are_a_422_naming_the_field_and_charge_nothing(client, keys, solver, params, field) -> None:
    params = dict(params)
    check_bad_params_refused(client, keys, solver, params, field, model=params.pop("model", "logistic"))


def test_solvers_endpoint_lists_both_with_their_noise_kinds(client, keys) -> None:
    solvers = {s["name"]: s for s in client.get("/v1/solvers", headers=keys.analyst).json()}
    for name in ("output_perturbation", "objective_perturbation"):
        assert set(solvers[name]["params_schema"]["properties"]["noise"]["enum"]) == {"gaussian", "laplace"}
    assert "linear" not in solvers["objective_perturbation"]["models"]


def test_a_running_fit_stops_on_cancel_keeping_its_charge(client, keys, monkeypatch) -> None:
    """The minimiser polls for a stop between its (public number of) iterations; each iteration's gradient pass is
    slowed down here so the test can watch the fit run (database, job runner and solver are the real ones). Its
    progress moves: the step count is public, so the progress sequence does not depend on the data."""
    real_gradient_sum = erm_module._gradient_sum

    def slow_gradient_sum(*args):  # type: ignore[no-untyped-def]
        time.sleep(0.05)
        return real_gradient_sum(*args)

    monkeypatch.setattr(erm_module, "_gradient_sum", slow_gradient_sum)
    dataset_id = upload(client, keys, csv=small_csv(n=2_000))
    request = {"dataset_id": dataset_id, "solver": "objective_perturbation", "privacy": {"epsilon": 0.5}}
    fit_id = client.post("/v1/fits", headers=keys.analyst, json=request).json()["id"]
    cancel_running_fit_and_check_charge_kept(client, keys, fit_id, dataset_id)
