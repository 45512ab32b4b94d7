"""A server whose noise sampler is ``exact`` (issue 25; :mod:`privfit.privacy.noise`), over HTTP on SQLite and
PostgreSQL, for the solvers without an exact sampler and those whose charge changes with it:

* ``objective_perturbation`` and ``dp_lazy_oco`` are refused with a 422 naming ``solver`` that charges nothing;
* ``output_perturbation`` with Laplace noise and ``dp_distributed`` are charged the pure-DP curve of the discrete
  Laplace they draw, their settings record the sampler and the result's metadata names it;
* an evaluation is charged the pure-DP curves (formula ``evaluation-discrete-laplace/v1``) and its metrics say
  ``discrete_laplace``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from api_helpers import SMALL_SCHEMA, Keys, check_bad_params_refused, fit_and_wait, make_client, make_keys, upload
from fastapi.testclient import TestClient

from privfit.privacy import PrivacyCost, get_grid
from privfit.privacy.noise import configure_sampler, current_sampler


@pytest.fixture
def exact_client(database_url: str, tmp_path: Path) -> Iterator[TestClient]:
    before = current_sampler()
    try:
        with make_client(database_url, tmp_path, noise_sampler="exact") as test_client:
            assert current_sampler() == "exact"
            yield test_client
    finally:  # the sampler is per process: give the rest of the suite its own back
        configure_sampler(before)


@pytest.fixture
def exact_keys(exact_client: TestClient) -> Keys:
    return make_keys(exact_client)


@pytest.mark.parametrize(("solver", "model"), [("objective_perturbation", "logistic"), ("dp_lazy_oco", "mean")])
def test_solvers_without_an_exact_sampler_are_refused_naming_the_solver(
    exact_client: TestClient, exact_keys: Keys, solver: str, model: str
) -> None:
    check_bad_params_refused(exact_client, exact_keys, solver, {}, "solver", model=model)
    dataset_id = upload(exact_client, exact_keys)
    request = {"dataset_id": dataset_id, "solver": solver, "model": model, "privacy": {"epsilon": 0.5}}
    for path in ("/v1/fits", "/v1/fits/estimate"):
        refused = exact_client.post(path, headers=exact_keys.analyst, json=request)
        assert refused.status_code == 422, refused.text
        problem = refused.json()
        assert "solver" in (problem.get("field"), problem.get("parameter")), problem
        assert "PRIVFIT_NOISE_SAMPLER=float" in problem["detail"]  # the setting that enables it (GET /v1/solvers)


@pytest.mark.parametrize(
    ("solver", "params"), [("output_perturbation", {"noise": "laplace"}), ("dp_distributed", {})]
)  # fmt: skip
def test_laplace_solvers_are_charged_the_pure_curve_of_the_discrete_laplace(
    exact_client: TestClient, exact_keys: Keys, solver: str, params: dict
) -> None:
    dataset_id = upload(exact_client, exact_keys, epsilon=2.0)
    request = {"dataset_id": dataset_id, "solver": solver, "model": "logistic", "privacy": {"epsilon": 0.8},
               "params": params}  # fmt: skip
    cost, done = fit_and_wait(exact_client, exact_keys, request)
    assert done["settings"]["sampler"] == "exact"
    assert done["result"]["metadata"]["noise_sampler"]["name"] == "exact"
    grid = get_grid(cost["grid"])
    pure = PrivacyCost.pure_dp(cost["pure_epsilon"], grid)
    np.testing.assert_allclose(cost["rdp"], pure.rdp, rtol=1e-12)
    assert cost["epsilon"] <= 0.8


def test_an_evaluation_is_charged_the_pure_curves_and_names_the_discrete_laplace(
    exact_client: TestClient, exact_keys: Keys
) -> None:
    dataset_id = upload(exact_client, exact_keys, schema={**SMALL_SCHEMA, "validation_fraction": 0.25}, epsilon=5.0)
    fit = {"dataset_id": dataset_id, "solver": "output_perturbation", "model": "logistic", "privacy": {"epsilon": 1}}
    _, done = fit_and_wait(exact_client, exact_keys, fit)
    body = {"privacy": {"epsilon": 1.0}}
    estimate = exact_client.post(f"/v1/fits/{done['id']}/evaluate/estimate", headers=exact_keys.analyst, json=body)
    assert estimate.status_code == 200, estimate.text
    assert {m["noise"] for m in estimate.json()["metrics"]} == {"discrete_laplace"}
    response = exact_client.post(f"/v1/fits/{done['id']}/evaluate?include=rdp", headers=exact_keys.analyst, json=body)
    assert response.status_code == 201, response.text
    evaluation = response.json()
    assert evaluation["status"] == "succeeded"
    assert evaluation["cost"]["formula_version"] == "evaluation-discrete-laplace/v1"
    assert {r["noise"] for r in evaluation["results"]} == {"discrete_laplace"}
    grid = get_grid(evaluation["cost"]["grid"])
    np.testing.assert_allclose(  # accuracy 0.7, roc_auc 0.2 and log_loss 0.1 of ε = 1, each pure
        evaluation["cost"]["rdp"],
        sum((PrivacyCost.pure_dp(e, grid) for e in (0.7, 0.2, 0.1)), PrivacyCost.zero(grid)).rdp,
        rtol=1e-9,
    )
    assert evaluation["cost"]["pure_epsilon"] == pytest.approx(1.0)
