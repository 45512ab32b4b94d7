"""``auto`` (private selection) through the HTTP API, SQLite and PostgreSQL: the ledger holds the whole
procedure's cost (equation (1) of privfit.solvers.selection.auto), the result names the selected candidate and
nothing about the others, the estimate shows the same cost, and bad parameters are a 422 that charges nothing."""

from __future__ import annotations

import numpy as np
import pytest
from api_helpers import check_bad_params_refused, fit_and_wait, label_kind, upload

from privfit.privacy import get_grid
from privfit.privacy.noise import describe_sampler
from privfit.solvers import PublicMetadata, get_solver
from privfit.solvers.selection.auto import candidate_set


@pytest.mark.parametrize(("model", "mode"), [("logistic", "selection"), ("linear", "selection"),
                                             ("logistic", "auto")])  # fmt: skip
def test_auto_fits_end_to_end_and_the_ledger_holds_the_selection_cost(client, keys, model: str, mode: str) -> None:
    dataset_id = upload(client, keys, epsilon=2.0, label=label_kind(model))
    request = {"dataset_id": dataset_id, "solver": "auto", "model": model, "privacy": {"epsilon": 1.0},
               "params": {"mode": mode}}  # fmt: skip
    estimate = client.post("/v1/fits/estimate?include=rdp", headers=keys.analyst, json=request)
    assert estimate.status_code == 200, estimate.text
    cost, done = fit_and_wait(client, keys, request)
    assert done["status"] == "succeeded", done
    np.testing.assert_allclose(cost["rdp"], estimate.json()["cost"]["rdp"], rtol=1e-12)
    settings = done["settings"]
    meta = PublicMetadata(settings["n"], settings["d"], settings["row_norm_bound"], settings["label_bound"])
    expected = get_solver("auto").cost(settings, meta, get_grid(cost["grid"]))
    np.testing.assert_allclose(cost["rdp"], expected.rdp, rtol=1e-12)
    assert expected.epsilon(1e-6).epsilon <= 1.0
    result = done["result"]
    selected = result["selected"]
    if mode == "selection":
        assert settings["mode"] == "selection" and settings["n_validation"] == settings["n"] // 5
        assert selected["solver"] in candidate_set(model)
    else:  # 4000 rows at ε = 1: the candidates' outlooks are not all 'low', so the public rule's solver
        assert settings["mode"] == "recommended" and selected["solver"] == "dp_gd"
    # the public settings and the sampler only: no score, nothing about the other candidates (the answer's metadata
    # lists what the release adds to the settings, here only the sampler)
    assert result["metadata"] == {"noise_sampler": describe_sampler(settings["sampler"])}
    assert len(result["coefficients"]) == 5 and np.isfinite([*result["coefficients"], result["intercept"]]).all()
    entries = client.get(f"/v1/datasets/{dataset_id}/ledger", headers=keys.owner).json()["entries"]
    assert [entry["kind"] for entry in entries] == ["reservation", "charge"]
    rows = [{"x1": 0.9, "x2": -0.5, "color": "red"}, {"x1": -0.9, "x2": 0.5, "color": "blue"}]
    predicted = client.post(f"/v1/fits/{done['id']}/predict", headers=keys.analyst, json={"rows": rows})
    assert predicted.status_code == 200, predicted.text
    predictions = predicted.json()["predictions"]
    if model == "logistic":
        assert predictions == ["yes", "no"]
    else:  # y = 2·x1 − x2 + noise: 2.3 and −2.3, within the label's declared range
        assert predictions[0] > 0.5 > -0.5 > predictions[1]


@pytest.mark.parametrize(
    ("params", "field"),
    [({"validation_fraction": 0.9}, "validation_fraction"), ({"mode": "sometimes"}, "mode"),
     ({"candidates": ["dp_sgd"]}, "candidates")],
)  # fmt: skip
def test_bad_params_are_a_422_naming_the_field_and_charge_nothing(client, keys, params, field) -> None:
    check_bad_params_refused(client, keys, "auto", params, field)
