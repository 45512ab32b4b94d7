"""A categorical label with k ≥ 3 classes (issue 22 §3): upload, multinomial fits with dp_gd and dp_sgd, the result's
k × d coefficients, /predict with class probabilities, and the refusals (other solvers, non-logistic models, bad
levels)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from api_helpers import SMALL_SCHEMA, fit_and_wait, upload

from privfit.solvers.base import MULTICLASS_SOLVERS
from privfit.solvers.selection.auto import MULTICLASS_CANDIDATES

LEVELS = ["low", "mid", "high"]
MULTICLASS_SCHEMA = {**SMALL_SCHEMA, "label": {"name": "y", "type": "categorical", "levels": LEVELS}}


def multiclass_csv(n: int = 3000, seed: int = 0, unknown: str | None = None) -> bytes:
    """y = low / mid / high by the score 2·x1 − x2 (cut at ±0.7); with ``unknown`` the 10th row's label is that."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, size=(n, 2))
    colors = rng.choice(["red", "green", "blue"], size=n)
    score = 2 * x[:, 0] - x[:, 1]
    labels = np.where(score < -0.7, "low", np.where(score > 0.7, "high", "mid")).astype(object)
    if unknown is not None:
        labels[9] = unknown
    lines = ["x1,x2,color,y"] + [f"{a:.4f},{b:.4f},{c},{y}" for (a, b), c, y in zip(x, colors, labels, strict=True)]
    return ("\n".join(lines) + "\n").encode()


def upload_multiclass(client, keys) -> str:
    return upload(client, keys, csv=multiclass_csv(), schema=MULTICLASS_SCHEMA)


@pytest.mark.parametrize("solver", MULTICLASS_SOLVERS)
def test_a_multiclass_fit_releases_k_rows_and_predicts_classes_with_probabilities(client, keys, solver) -> None:
    dataset_id = upload_multiclass(client, keys)
    request = {"dataset_id": dataset_id, "solver": solver, "model": "logistic", "privacy": {"epsilon": 1.0}}
    cost, done = fit_and_wait(client, keys, request)
    assert cost["epsilon"] <= 1.0
    result = done["result"]
    assert result["classes"] == LEVELS
    assert np.shape(result["coefficients"]) == (3, 5) and len(result["intercept"]) == 3
    assert done["settings"]["classes"] == LEVELS
    rows = [{"x1": x1, "x2": 0.0, "color": "red"} for x1 in (-1.0, 0.0, 1.0)]
    predicted = client.post(f"/v1/fits/{done['id']}/predict", headers=keys.analyst, json={"rows": rows})
    assert predicted.status_code == 200, predicted.text
    body = predicted.json()
    assert body["classes"] == LEVELS and body["n"] == 3
    probabilities = np.array(body["probabilities"])
    assert probabilities.shape == (3, 3) and np.allclose(probabilities.sum(axis=1), 1.0)
    assert np.shape(body["scores"]) == (3, 3)
    assert body["predictions"] == [LEVELS[i] for i in probabilities.argmax(axis=1)]
    assert body["predictions"][0] == "low" and body["predictions"][-1] == "high"  # 2·x1 = −2 and +2


@pytest.mark.parametrize("solver", ["objective_perturbation", "output_perturbation", "dp_otb", "resque_dpsgd"])
def test_a_solver_without_the_multinomial_model_is_a_422_naming_those_with_it(client, keys, solver) -> None:
    dataset_id = upload_multiclass(client, keys)
    request = {"dataset_id": dataset_id, "solver": solver, "model": "logistic", "privacy": {"epsilon": 1.0}}
    for path in ("/v1/fits/estimate", "/v1/fits"):
        refused = client.post(path, headers=keys.analyst, json=request)
        assert refused.status_code == 422, refused.text
        assert refused.json()["parameter"] == "solver"
        assert all(name in refused.json()["detail"] for name in MULTICLASS_SOLVERS)
    assert client.get(f"/v1/datasets/{dataset_id}/ledger", headers=keys.owner).json()["total"] == 0


@pytest.mark.parametrize("model", ["linear", "huber", "svm"])
def test_a_model_other_than_logistic_on_a_categorical_label_is_a_422(client, keys, model) -> None:
    dataset_id = upload_multiclass(client, keys)
    request = {"dataset_id": dataset_id, "solver": "dp_gd", "model": model, "privacy": {"epsilon": 1.0}}
    refused = client.post("/v1/fits", headers=keys.analyst, json=request)
    assert refused.status_code == 422, refused.text
    assert refused.json()["parameter"] == "model" and "categorical" in refused.json()["detail"]


def test_an_undeclared_label_level_is_refused_naming_the_column_not_the_value(client, keys) -> None:
    declared = json.loads(json.dumps(MULTICLASS_SCHEMA))
    response = client.post(
        "/v1/datasets", headers=keys.owner,
        files={"file": ("data.csv", multiclass_csv(unknown="secret-level"), "text/csv")},
        data={"schema": json.dumps(declared), "name": "bad", "allow_duplicate": "true"},
    )  # fmt: skip
    assert 400 <= response.status_code < 500 and response.status_code != 404, response.text
    assert "'y'" in response.text and "secret-level" not in response.text


@pytest.mark.parametrize(
    ("levels", "fragment"),
    [(["a", "b"], "binary"), (["a", "b", "a"], "duplicate"), ([str(i) for i in range(101)], "at most 100")],
)
def test_a_bad_categorical_label_declaration_is_refused(client, keys, levels, fragment) -> None:
    declared = {**MULTICLASS_SCHEMA, "label": {"name": "y", "type": "categorical", "levels": levels}}
    response = client.post(
        "/v1/datasets", headers=keys.owner, files={"file": ("data.csv", multiclass_csv(), "text/csv")},
        data={"schema": json.dumps(declared), "name": "bad", "allow_duplicate": "true"},
    )  # fmt: skip
    assert response.status_code in (400, 422), response.text
    assert fragment in response.text


@pytest.mark.parametrize("mode", ["selection", "auto"])
def test_auto_on_a_categorical_label_selects_among_the_multinomial_solvers(client, keys, mode: str) -> None:
    dataset_id = upload_multiclass(client, keys)
    request = {"dataset_id": dataset_id, "solver": "auto", "model": "logistic", "privacy": {"epsilon": 1.0},
               "params": {"mode": mode}}  # fmt: skip
    cost, done = fit_and_wait(client, keys, request)
    assert done["status"] == "succeeded" and cost["epsilon"] <= 1.0
    settings, result = done["settings"], done["result"]
    assert settings["classes"] == LEVELS and result["classes"] == LEVELS
    assert [c["solver"] for c in settings["candidates"]] == (list(MULTICLASS_CANDIDATES) if mode == "selection"
                                                             else ["dp_gd"])  # fmt: skip
    assert result["selected"]["solver"] in MULTICLASS_CANDIDATES
    assert np.shape(result["coefficients"]) == (3, 5) and len(result["intercept"]) == 3


def test_a_multiclass_fit_is_evaluated_by_accuracy_and_log_loss(client, keys) -> None:
    dataset_id = upload(client, keys, csv=multiclass_csv(), schema={**MULTICLASS_SCHEMA, "validation_fraction": 0.25},
                        epsilon=5.0)  # fmt: skip
    _, done = fit_and_wait(client, keys, {"dataset_id": dataset_id, "solver": "dp_gd", "model": "logistic",
                                          "privacy": {"epsilon": 2.0}})  # fmt: skip
    response = client.post(f"/v1/fits/{done['id']}/evaluate", headers=keys.analyst, json={"privacy": {"epsilon": 2.0}})
    assert response.status_code == 201, response.text
    evaluation = response.json()
    assert evaluation["status"] == "succeeded" and evaluation["metrics"] == ["accuracy", "log_loss"]
    results = {r["metric"]: r for r in evaluation["results"]}
    assert results["accuracy"]["epsilon"] == pytest.approx(2.0 * 0.7 / 0.8)
    assert results["accuracy"]["value"] > 0.8  # three bands of a linear score: nearly separable; noise sd ≈ 0.002
    assert 0.0 < results["log_loss"]["value"] < np.log(3)  # better than the uniform guess
    refused = client.post(f"/v1/fits/{done['id']}/evaluate", headers=keys.analyst,
                          json={"privacy": {"epsilon": 0.5}, "metrics": ["roc_auc"]})  # fmt: skip
    assert refused.status_code == 422 and "metrics" in refused.text
