"""/predict, issue 38 item 3, on SQLite and PostgreSQL: a binary logistic fit returns its class probabilities
(σ(−score), σ(score)) for [negative, positive]; other binary models and regressions return none; an undeclared
categorical level is refused by default and, with ``unknown_category: "ignore"``, encoded as an all-zero one-hot
block (its coefficients do not contribute)."""

from __future__ import annotations

import numpy as np
import pytest
from api_helpers import Keys, fit_and_wait, upload
from fastapi.testclient import TestClient
from scipy.special import expit

from privfit.client import Client

ROWS = [{"x1": 0.5, "x2": -0.2, "color": "red"}, {"x1": -0.9, "x2": 0.4, "color": "blue"}]


@pytest.fixture
def fitted(client: TestClient, keys: Keys) -> dict[str, dict]:
    """A logistic and an SVM fit on the binary dataset and a linear fit on the numeric one (few steps)."""
    binary, numeric = upload(client, keys), upload(client, keys, label="numeric")
    fits = {}
    for model, dataset in (("logistic", binary), ("svm", binary), ("linear", numeric)):
        _, done = fit_and_wait(client, keys, {"dataset_id": dataset, "model": model, "solver": "dp_gd",
                                              "privacy": {"epsilon": 1.0}, "params": {"steps": 20}})  # fmt: skip
        fits[model] = done
    return fits


def predict(client: TestClient, keys: Keys, fit: dict, rows: list[dict], **options):
    return client.post(f"/v1/fits/{fit['id']}/predict", headers=keys.analyst, json={"rows": rows, **options})


def test_binary_logistic_predictions_carry_class_probabilities(client, keys, fitted):
    body = predict(client, keys, fitted["logistic"], ROWS).json()
    scores = np.array(body["scores"])
    assert body["classes"] == ["no", "yes"]
    np.testing.assert_allclose(body["probabilities"], np.column_stack([expit(-scores), expit(scores)]), rtol=1e-15)
    assert [p[1] > 0.5 for p in body["probabilities"]] == [s >= 0 for s in scores]
    assert body["predictions"] == ["yes" if s >= 0 else "no" for s in scores]
    for model in ("svm", "linear"):  # no probabilities without a logistic model
        other = predict(client, keys, fitted[model], [{k: v for k, v in r.items()} for r in ROWS]).json()
        assert "probabilities" not in other and "classes" not in other, other


def test_an_unknown_category_is_refused_or_encoded_as_an_all_zero_block(client, keys, fitted):
    fit = fitted["logistic"]
    unknown = [{"x1": 0.5, "x2": -0.2, "color": "purple"}]
    refused = predict(client, keys, fit, unknown)
    assert refused.status_code == 422 and refused.json()["column"] == "color", refused.text
    ignored = predict(client, keys, fit, unknown, unknown_category="ignore")
    assert ignored.status_code == 200, ignored.text
    known = predict(client, keys, fit, [{"x1": 0.5, "x2": -0.2, "color": "red"}]).json()
    coefficients = dict(zip(fit["result"]["feature_names"], fit["result"]["coefficients"], strict=True))
    assert ignored.json()["scores"][0] == pytest.approx(known["scores"][0] - coefficients["color=red"], abs=1e-12)
    assert predict(client, keys, fit, ROWS, unknown_category="ignore").json()["scores"] == \
        predict(client, keys, fit, ROWS).json()["scores"]  # declared levels: unchanged  # fmt: skip
    bad = predict(client, keys, fit, unknown, unknown_category="skip")
    assert bad.status_code == 422 and "unknown_category" in bad.text, bad.text


def test_the_client_passes_unknown_category(client, keys, fitted):
    token = keys.analyst["Authorization"].removeprefix("Bearer ")
    with Client("http://testserver", token, transport=client._transport) as analyst:
        prediction = analyst.predict(fitted["logistic"]["id"], [{"x1": 0.1, "x2": 0.1, "color": "teal"}],
                                     unknown_category="ignore")  # fmt: skip
    assert prediction.n == 1 and prediction.classes == ["no", "yes"]
    assert sum(prediction.probabilities[0]) == pytest.approx(1.0, abs=1e-15)
