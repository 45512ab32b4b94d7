"""``resque_dpsgd`` through the HTTP API (SQLite and PostgreSQL): non-smooth fits end to end with the ledger holding
the solver's sampled-Gaussian curve, predictions, 422s that charge nothing, the listing, and cancellation."""

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

import privfit.solvers.resque.dpsgd as resque_dpsgd_module
from privfit.privacy import get_grid
from privfit.solvers import PublicMetadata, get_solver

SOLVER = get_solver("resque_dpsgd")


@pytest.mark.parametrize(
    ("model", "params"),
    [("svm", {}), ("absolute", {"sampling": "fixed_size"}), ("quantile", {"quantile_tau": 0.8, "block_length": 4})],
)
def test_fits_end_to_end_and_the_ledger_holds_the_solver_cost(client, keys, model: str, params: dict) -> None:
    dataset_id = upload(client, keys, epsilon=1.0, label=label_kind(model))
    request = {"dataset_id": dataset_id, "solver": "resque_dpsgd", "model": model, "privacy": {"epsilon": 0.8},
               "params": params}  # fmt: skip
    cost, done = fit_and_wait(client, keys, request)
    settings = done["settings"]
    meta = PublicMetadata(n=settings["n"], d=settings["d"], row_norm_bound=settings["row_norm_bound"],
                          label_bound=settings["label_bound"])  # fmt: skip
    np.testing.assert_allclose(cost["rdp"], SOLVER.cost(settings, meta, get_grid(cost["grid"])).rdp, rtol=1e-12)
    assert cost["epsilon"] <= 0.8 and cost["extra_delta"] == 0.0
    result = done["result"]
    assert len(result["coefficients"]) == 5 and np.isfinite([*result["coefficients"], result["intercept"]]).all()
    rows = [{"x1": 0.9, "x2": -0.9, "color": "red"}, {"x1": -0.9, "x2": 0.9, "color": "blue"}]
    predicted = client.post(f"/v1/fits/{done['id']}/predict", headers=keys.analyst, json={"rows": rows}).json()
    assert predicted["predictions"] == ["yes", "no"] if model == "svm" else len(predicted["scores"]) == 2


def test_bad_params_are_a_422_that_charges_nothing(client, keys) -> None:
    check_bad_params_refused(client, keys, "resque_dpsgd", {}, "model", model="linear")
    check_bad_params_refused(client, keys, "resque_dpsgd", {"quantile_tau": 0.3}, "quantile_tau", model="svm")
    check_bad_params_refused(client, keys, "resque_dpsgd", {"sampling": "shuffled"}, "sampling", model="svm")


def test_solvers_endpoint_lists_the_non_smooth_models(client, keys) -> None:
    solvers = {s["name"]: s for s in client.get("/v1/solvers", headers=keys.analyst).json()}
    assert solvers["resque_dpsgd"]["models"] == ["logistic", "svm", "absolute", "quantile", "huber"]


def test_a_running_fit_stops_on_cancel_keeping_its_charge(client, keys, monkeypatch) -> None:
    real = resque_dpsgd_module.glm_subgradient_scales

    def slow(*args, **kwargs):  # type: ignore[no-untyped-def]
        time.sleep(0.02)
        return real(*args, **kwargs)

    monkeypatch.setattr(resque_dpsgd_module, "glm_subgradient_scales", slow)
    dataset_id = upload(client, keys, csv=small_csv(n=4_000))
    request = {"dataset_id": dataset_id, "solver": "resque_dpsgd", "model": "svm", "privacy": {"epsilon": 0.5}}
    fit_id = client.post("/v1/fits", headers=keys.analyst, json=request).json()["id"]
    cancel_running_fit_and_check_charge_kept(client, keys, fit_id, dataset_id)
