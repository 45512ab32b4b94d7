"""A server with ``noise_sampler = "exact"`` (the service's default; the suite runs float) through the HTTP API, on
SQLite and PostgreSQL: fits draw exact lattice noise and say so in their result's metadata, plans resolve for the
exact sampler (dp_otb's plain estimator), solvers without an exact sampler are refused with a 422 naming the
field, and the process's sampler is restored when the app stops."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from api_helpers import Keys, fit_and_wait, make_client, make_keys, upload
from fastapi.testclient import TestClient

from privfit.privacy import PrivacyCost, get_grid, unbounded_from_json
from privfit.privacy.noise import current_sampler


@pytest.fixture
def exact(database_url: str, tmp_path: Path) -> Iterator[tuple[TestClient, Keys]]:
    assert current_sampler() == "float"
    with make_client(database_url, tmp_path, noise_sampler="exact", enable_experimental_solvers=True) as client:
        assert current_sampler() == "exact"
        yield client, make_keys(client)
    assert current_sampler() == "float"  # restored at shutdown: later tests in this process are unaffected


@pytest.mark.parametrize(
    ("solver", "params"),
    [("dp_gd", {}), ("dp_sgd", {}), ("resque_dpsgd", {"model": "svm"}), ("dp_otb", {})],
)  # "model" goes to the request's top level
def test_fits_on_an_exact_server_draw_exact_noise_and_say_so(exact, solver: str, params: dict) -> None:
    client, keys = exact
    dataset_id = upload(client, keys, epsilon=2.0)
    request = {"dataset_id": dataset_id, "solver": solver, "privacy": {"epsilon": 1.0}, "params": dict(params)}
    request.update({"model": request["params"].pop("model")} if "model" in params else {})
    cost, done = fit_and_wait(client, keys, request)
    sampler = done["result"]["metadata"]["noise_sampler"]
    assert sampler["name"] == "exact" and "discrete Gaussian" in sampler["gaussian"]
    # the charge is the calibrated cost (curve and GDP bound), unchanged by the exact sampler
    gdp = unbounded_from_json(cost["gdp_mu_squared"])
    assert PrivacyCost(np.array(cost["rdp"]), get_grid(cost["grid"]), gdp_mu_squared=gdp).epsilon(1e-6).epsilon <= 1.0
    assert np.all(np.isfinite(done["result"]["coefficients"]))
    if solver == "dp_otb":
        assert done["settings"]["prefix_estimator"] == "plain" and done["settings"]["sampler"] == "exact"


@pytest.mark.parametrize(
    ("solver", "params", "field"),
    [
        ("dp_otb", {"prefix_estimator": "honaker"}, "prefix_estimator"),
        ("dp_otb", {"learner": "parameter_free"}, "k"),
        ("resque_localized", {}, "solver"),
    ],
)
def test_what_has_no_exact_sampler_is_refused_naming_the_field(exact, solver: str, params: dict, field: str) -> None:
    client, keys = exact
    dataset_id = upload(client, keys, epsilon=2.0)
    request = {"dataset_id": dataset_id, "solver": solver, "privacy": {"epsilon": 1.0}, "params": params}
    answer = client.post("/v1/fits", headers=keys.analyst, json=request)
    assert answer.status_code == 422, answer.text
    problem = answer.json()
    assert field in str(problem) and "noise_sampler = exact" in str(problem)
    budget = client.get(f"/v1/datasets/{dataset_id}/budget?include=rdp", headers=keys.analyst).json()
    assert not any(budget["committed_rdp"])  # nothing charged


def test_an_estimate_on_an_exact_server_resolves_for_the_exact_sampler(exact) -> None:
    client, keys = exact
    dataset_id = upload(client, keys, epsilon=2.0)
    request = {"dataset_id": dataset_id, "solver": "dp_otb", "privacy": {"epsilon": 1.0}, "params": {}}
    estimate = client.post("/v1/fits/estimate", headers=keys.analyst, json=request)
    assert estimate.status_code == 200, estimate.text
    assert estimate.json()["settings"]["prefix_estimator"] == "plain"
