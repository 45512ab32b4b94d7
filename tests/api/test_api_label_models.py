"""A fit's model must match the dataset's public label type (issue 21 §6), and regression predictions stay in the
label's declared range."""

from __future__ import annotations

import pytest
from api_helpers import NUMERIC_LABEL_SCHEMA, fit_and_wait, upload

from privfit.solvers.base import CLASSIFICATION_MODELS, REGRESSION_MODELS


@pytest.mark.parametrize(
    ("label", "model", "solver"),
    [("numeric", "logistic", "dp_gd"), ("numeric", "svm", "output_perturbation"), ("binary", "linear", "dp_gd"),
     ("binary", "huber", "dp_sgd"), ("binary", "absolute", "resque_dpsgd")],
)  # fmt: skip
def test_a_model_that_does_not_match_the_label_is_a_422_naming_both(client, keys, label, model, solver) -> None:
    dataset_id = upload(client, keys, label=label)
    request = {"dataset_id": dataset_id, "solver": solver, "model": model, "privacy": {"epsilon": 0.5}}
    for path in ("/v1/fits/estimate", "/v1/fits"):
        refused = client.post(path, headers=keys.analyst, json=request)
        assert refused.status_code == 422, refused.text
        body = refused.json()
        assert body["parameter"] == "model"
        assert repr(model) in body["detail"] and "'y'" in body["detail"] and label in body["detail"]
    assert client.get(f"/v1/datasets/{dataset_id}/ledger", headers=keys.owner).json()["total"] == 0


def test_the_model_families_do_not_overlap() -> None:
    assert not set(CLASSIFICATION_MODELS) & set(REGRESSION_MODELS)


def test_regression_predictions_are_clipped_to_the_label_range(client, keys) -> None:
    dataset_id = upload(client, keys, label="numeric")
    request = {"dataset_id": dataset_id, "solver": "dp_gd", "model": "linear", "privacy": {"epsilon": 1.0}}
    _, done = fit_and_wait(client, keys, request)
    rows = [{"x1": x1, "x2": x2, "color": "red"} for x1 in (-1.0, 0.0, 1.0) for x2 in (-1.0, 1.0)]
    predicted = client.post(f"/v1/fits/{done['id']}/predict", headers=keys.analyst, json={"rows": rows}).json()
    lower, upper = NUMERIC_LABEL_SCHEMA["label"]["lower"], NUMERIC_LABEL_SCHEMA["label"]["upper"]
    assert all(lower <= p <= upper for p in predicted["predictions"])
    assert predicted["predictions"][-2] > predicted["predictions"][0]  # y grows with x1 (y ≈ 2·x1 − x2)


def test_a_model_inside_params_is_refused_not_silently_replaced(client, keys) -> None:
    dataset_id = upload(client, keys, label="numeric")
    request = {"dataset_id": dataset_id, "solver": "dp_gd", "privacy": {"epsilon": 0.5}, "params": {"model": "linear"}}
    refused = client.post("/v1/fits/estimate", headers=keys.analyst, json=request)
    assert refused.status_code == 422 and refused.json()["parameter"] == "params.model", refused.text
