"""The noise outlook (issue 21 §4) through the HTTP API: the estimate, the fit answer and the fit resource carry
the same public prediction; it depends on the public metadata only (two datasets of different rows with the same
metadata get the same outlook); a fit expected to drown in noise is warned about before it runs."""

from __future__ import annotations

from api_helpers import SMALL_SCHEMA, fit_and_wait, small_csv, upload

from privfit.solvers import PublicMetadata, get_solver


def _estimate(client, keys, dataset_id: str, solver: str, epsilon: float) -> dict:
    request = {"dataset_id": dataset_id, "solver": solver, "model": "logistic", "privacy": {"epsilon": epsilon}}
    response = client.post("/v1/fits/estimate", headers=keys.analyst, json=request)
    assert response.status_code == 200, response.text
    return response.json()


def test_estimate_fit_and_fit_resource_carry_the_same_outlook(client, keys) -> None:
    dataset_id = upload(client, keys, epsilon=2.0)
    estimate = _estimate(client, keys, dataset_id, "dp_gd", 1.0)
    outlook = estimate["outlook"]
    assert outlook["level"] in ("low", "moderate") and outlook["warning"] is None
    assert outlook["ratio"] == outlook["noise_norm"] / outlook["radius"]
    settings = estimate["settings"]
    meta = PublicMetadata(settings["n"], settings["d"], settings["row_norm_bound"], settings["label_bound"])
    assert outlook == get_solver("dp_gd").outlook(settings, meta).model_dump(mode="json")

    request = {"dataset_id": dataset_id, "solver": "dp_gd", "model": "logistic", "privacy": {"epsilon": 1.0}}
    created = client.post("/v1/fits", headers=keys.analyst, json=request)
    assert created.status_code == 202 and created.json()["outlook"] == outlook
    _, done = fit_and_wait(client, keys, request)
    assert done["outlook"] == outlook  # recomputed on read from the stored settings: the same public prediction
    listed = client.get("/v1/fits", headers=keys.owner, params={"dataset_id": dataset_id}).json()
    assert {fit["id"]: fit["outlook"] for fit in listed} == {created.json()["id"]: outlook, done["id"]: outlook}


def test_the_outlook_is_the_same_for_different_rows_with_the_same_public_metadata(client, keys) -> None:
    first = upload(client, keys, csv=small_csv(seed=1))
    # other rows, labels flipped: a different dataset, with the same schema, n and bounds
    flipped = small_csv(seed=2).replace(b",yes\n", b",tmp\n").replace(b",no\n", b",yes\n").replace(b",tmp\n", b",no\n")
    second = upload(client, keys, csv=flipped, schema=SMALL_SCHEMA)
    for solver in ("dp_gd", "output_perturbation", "dp_otb", "dp_distributed"):
        outlooks = [_estimate(client, keys, dataset, solver, 0.5)["outlook"] for dataset in (first, second)]
        assert outlooks[0] is not None and outlooks[0] == outlooks[1], solver


def test_a_fit_drowned_in_noise_is_warned_about_before_it_runs(client, keys) -> None:
    dataset_id = upload(client, keys, epsilon=2.0)
    outlook = _estimate(client, keys, dataset_id, "dp_distributed", 0.01)["outlook"]
    assert outlook["level"] == "high" and outlook["ratio"] >= 0.8
    assert "no better than a constant model" in outlook["warning"]
