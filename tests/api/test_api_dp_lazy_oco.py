"""``dp_lazy_oco`` through the HTTP API (SQLite and PostgreSQL): mean and linear-loss fits end to end with the
ledger holding the solver's approximate-DP charge, predictions only for label-weighted fits, clear 422s that
charge nothing (GLM models are routed to the solvers that fit them), 409 over budget before any row is read, the
solver listing, and cancellation of a running fit with its charge kept."""

from __future__ import annotations

import time

import numpy as np
from api_helpers import (
    cancel_running_fit_and_check_charge_kept,
    check_bad_params_refused,
    fit_and_wait,
    small_csv,
    upload,
)

import privfit.solvers.lazy_oco.pcomw as lazy_oco_module
from privfit.privacy import PrivacyCost, get_grid
from privfit.solvers import PublicMetadata, get_solver

SOLVER = get_solver("dp_lazy_oco")


def _meta(settings: dict) -> PublicMetadata:
    return PublicMetadata(
        n=settings["n"], d=settings["d"], row_norm_bound=settings["row_norm_bound"], label_bound=settings["label_bound"]
    )


def test_a_mean_fit_runs_end_to_end_and_the_ledger_holds_the_paper_charge(client, keys) -> None:
    dataset_id = upload(client, keys, epsilon=2.0)
    request = {"dataset_id": dataset_id, "solver": "dp_lazy_oco", "model": "mean", "privacy": {"epsilon": 1.0},
               "params": {"report_switches": True}}  # fmt: skip
    cost, done = fit_and_wait(client, keys, request)
    settings = done["settings"]
    expected = SOLVER.cost(settings, _meta(settings), get_grid(cost["grid"]))
    np.testing.assert_allclose(cost["rdp"], expected.rdp, rtol=1e-12)
    assert cost["extra_delta"] == expected.extra_delta == settings["paper_delta"] + settings["sampler_delta"] > 0.0
    assert PrivacyCost(np.array(cost["rdp"]), get_grid(cost["grid"]), cost["extra_delta"]).epsilon(1e-6).epsilon <= 1.0
    assert cost["epsilon"] <= 1.0 and settings["z"] == "x"
    result = done["result"]
    assert len(result["coefficients"]) == 5 and result["intercept"] is None and result["predictor"] is False
    assert np.linalg.norm(result["coefficients"]) <= settings["radius"]
    assert 0 <= result["metadata"]["num_switches"] <= settings["switch_cap"]  # released: not one of the settings
    whole = client.get(f"/v1/fits/{done['id']}?include=metadata", headers=keys.analyst).json()["result"]["metadata"]
    assert whole["average_regret_bound"] == settings["average_regret_bound"] > 0
    entries = client.get(f"/v1/datasets/{dataset_id}/ledger", headers=keys.owner).json()["entries"]
    assert [entry["kind"] for entry in entries] == ["reservation", "charge"]
    refused = client.post(f"/v1/fits/{done['id']}/predict", headers=keys.analyst, json={"rows": [{"x1": 0.1,
                          "x2": 0.2, "color": "red"}]})  # fmt: skip
    assert refused.status_code == 409 and "does not predict labels" in refused.json()["detail"]


def test_a_label_weighted_linear_loss_fit_predicts_classes(client, keys) -> None:
    dataset_id = upload(client, keys)
    request = {"dataset_id": dataset_id, "solver": "dp_lazy_oco", "model": "linear_loss", "privacy": {"epsilon": 1.0},
               "params": {"fit_intercept": True}}  # fmt: skip
    _, done = fit_and_wait(client, keys, request)
    assert done["settings"]["z"] == "yx" and done["result"]["predictor"] is True
    assert done["result"]["intercept"] is not None
    rows = [{"x1": 0.9, "x2": -0.9, "color": "red"}, {"x1": -0.9, "x2": 0.9, "color": "blue"}]
    predicted = client.post(f"/v1/fits/{done['id']}/predict", headers=keys.analyst, json={"rows": rows})
    assert predicted.status_code == 200, predicted.text
    assert set(predicted.json()["predictions"]) <= {"yes", "no"}


def test_glm_models_and_bad_params_are_a_422_that_charges_nothing(client, keys) -> None:
    check_bad_params_refused(client, keys, "dp_lazy_oco", {}, "model", model="logistic")
    check_bad_params_refused(client, keys, "dp_lazy_oco", {"fit_intercept": True}, "fit_intercept", model="mean")
    check_bad_params_refused(client, keys, "dp_lazy_oco", {"z": "y"}, "z", model="mean")
    dataset_id = upload(client, keys, label="numeric")
    request = {"dataset_id": dataset_id, "solver": "dp_lazy_oco", "model": "huber", "privacy": {"epsilon": 0.5}}
    refused = client.post("/v1/fits/estimate", headers=keys.analyst, json=request)
    assert refused.status_code == 422 and "dp_otb" in refused.json()["detail"]


def test_over_budget_is_a_409_before_any_row_is_read(client, keys) -> None:
    dataset_id = upload(client, keys, epsilon=1.0)
    request = {"dataset_id": dataset_id, "solver": "dp_lazy_oco", "model": "mean", "privacy": {"epsilon": 0.8}}
    estimate = client.post("/v1/fits/estimate", headers=keys.analyst, json=request).json()
    assert estimate["cost"]["epsilon"] <= 0.8 and estimate["settings"]["regret_bound"] > 0
    fit_and_wait(client, keys, request)
    refused = client.post("/v1/fits", headers=keys.analyst, json=request)
    assert refused.status_code == 409, refused.text
    ledger = client.get(f"/v1/datasets/{dataset_id}/ledger", headers=keys.owner).json()
    assert [e["kind"] for e in ledger["entries"]] == ["reservation", "charge"]


def test_solvers_endpoint_lists_the_two_models(client, keys) -> None:
    solvers = {s["name"]: s for s in client.get("/v1/solvers", headers=keys.analyst).json()}
    assert solvers["dp_lazy_oco"]["models"] == ["mean", "linear_loss"]
    assert set(solvers["dp_lazy_oco"]["params_schema"]["properties"]["z"]["anyOf"][0]["enum"]) == {"x", "yx"}


def test_a_running_fit_stops_on_cancel_keeping_its_charge(client, keys, monkeypatch) -> None:
    """Each block of keep decisions is slowed down so the test can watch the pass run with progress > 0."""
    real_keep = lazy_oco_module.log_keep_probability

    def slow_keep(*args, **kwargs):  # type: ignore[no-untyped-def]
        time.sleep(0.05)
        return real_keep(*args, **kwargs)

    monkeypatch.setattr(lazy_oco_module, "log_keep_probability", slow_keep)
    dataset_id = upload(client, keys, csv=small_csv(n=4_000))
    request = {"dataset_id": dataset_id, "solver": "dp_lazy_oco", "model": "mean", "privacy": {"epsilon": 0.5}}
    fit_id = client.post("/v1/fits", headers=keys.analyst, json=request).json()["id"]
    cancel_running_fit_and_check_charge_kept(client, keys, fit_id, dataset_id)
