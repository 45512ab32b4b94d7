"""Extreme solver parameters never give a 5xx (issue 20): either a 422 naming the field or a valid plan.

A hypothesis property test over every registered solver and each of its models draws parameter values from the
solver's published JSON schema (``GET /v1/solvers``) — in-range values, the schema's bounds and just past them, and
extremes (5e-324, 1e-300, 1e300, huge integers, 0, negatives, inf-like strings, wrong types) — and sends them to
``POST /v1/fits/estimate`` and ``POST /v1/fits`` of an in-process app on SQLite (no workers: an admitted fit is
cancelled at once, which releases its reservation). Explicit regression cases pin every reproduced example.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from api_helpers import Keys, bearer, make_client, upload
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privfit.api.auth import create_api_key
from privfit.db.migrate import upgrade
from privfit.solvers.registry import get_solver, list_solvers

EXTREME_NUMBERS: list[Any] = [
    5e-324, -5e-324, 1e-300, 1e-200, 1e-7, 1e-6, 1e-3, 0, 0.0, -0.0, -1, -1e300, 1, 0.5, 2, 1e6, 1e6 + 1, 1e9,
    1e300, 1.7976931348623157e308, 10**18, 2**63, 10**30, -(10**30), 10**400,
]  # fmt: skip
EXTREME_OTHERS: list[Any] = ["inf", "-Infinity", "NaN", "1e-300", "", None, True, False, [], {}, [1e300], "x" * 50]


@pytest.fixture(scope="module")
def fuzz_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, Keys, str, list[dict]]]:
    """An app on SQLite with experimental solvers enabled (every registered solver is reachable), its keys, a dataset
    and the published solver descriptions."""
    tmp_path: Path = tmp_path_factory.mktemp("fuzz")
    url = f"sqlite:///{tmp_path / 'privfit.db'}"
    upgrade(url)
    base = make_client(url, tmp_path, workers=False, enable_experimental_solvers=True)
    with TestClient(base.app, raise_server_exceptions=False) as client:
        db = client.app.state.db
        owner_id, owner = create_api_key(db, "owner", "owner")
        analyst_id, analyst = create_api_key(db, "analyst", "analyst")
        _, admin = create_api_key(db, "admin", "admin")
        keys = Keys(bearer(owner), owner_id, bearer(owner), bearer(analyst), analyst_id, bearer(analyst), bearer(admin))
        dataset_id = upload(client, keys, epsilon=100.0)
        solvers = client.get("/v1/solvers", headers=keys.analyst).json()
        yield client, keys, dataset_id, solvers


def _schema_numbers(prop: dict[str, Any]) -> list[Any]:
    """The bounds a property's schema publishes, and values just inside and outside them."""
    out: list[Any] = []
    for option in prop.get("anyOf", [prop]):
        for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            if key in option:
                bound = option[key]
                out += [bound, bound * (1 + 1e-12) if bound else 1e-12, bound * (1 - 1e-12) if bound else -1e-12]
                if option.get("type") == "integer":
                    out += [int(bound) - 1, int(bound) + 1]
    return out


def _value_strategy(prop: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Mostly values of the property's type near and inside its published range (so that most examples reach the
    solver's resolution), sometimes the extremes and wrong types."""
    typed: list[st.SearchStrategy[Any]] = []
    bounds = _schema_numbers(prop)
    if bounds:
        typed.append(st.sampled_from(bounds))
    for option in prop.get("anyOf", [prop]):
        kind = option.get("type")
        if "enum" in option:
            typed.append(st.sampled_from(option["enum"]))
        elif kind == "number":
            low = option.get("minimum", option.get("exclusiveMinimum", -1e300))
            high = option.get("maximum", option.get("exclusiveMaximum", 1e300))
            typed.append(st.floats(min_value=low, max_value=high, allow_nan=False, allow_infinity=False))
            if low > 0:  # log-uniform over the range: the small end is where numerics break
                typed.append(
                    st.floats(math.log10(low), math.log10(high)).map(lambda e, lo=low, hi=high: min(max(10**e, lo), hi))
                )
        elif kind == "integer":
            low = option.get("minimum", -(2**63))
            high = option.get("maximum", 2**70)
            typed.append(st.integers(min_value=low, max_value=high))
            typed.append(st.sampled_from([low, min(low + 1, high), high]))
        elif kind == "boolean":
            typed.append(st.booleans())
        elif kind == "array":
            typed.append(st.lists(st.sampled_from([0.0, 1.0, -1.0, 1e300, 5e-324, 0.5]), max_size=6))
    extremes = st.one_of(st.sampled_from(EXTREME_NUMBERS), st.sampled_from(EXTREME_OTHERS))
    if not typed:
        return extremes
    in_type = st.one_of(*typed)
    return st.one_of(in_type, in_type, in_type, extremes)  # three in four of the type


#: parameters that apply to one model only (another model refuses them at once: drawn for their model only)
MODEL_ONLY = {"huber_delta": "huber", "hinge_smoothing": "svm", "quantile_tau": "quantile"}


def _params_strategy(schema: dict[str, Any], model: str, explicit: str | None) -> st.SearchStrategy[dict[str, Any]]:
    """One to four of the solver's parameters for ``model`` (not the model itself, nor the explicit noise parameter),
    each drawn by :func:`_value_strategy`."""
    properties = {
        name: prop for name, prop in schema["properties"].items()
        if name not in ("model", explicit) and MODEL_ONLY.get(name, model) == model
    }  # fmt: skip

    @st.composite
    def draw(data: st.DrawFn) -> dict[str, Any]:
        names = data(st.lists(st.sampled_from(sorted(properties)), min_size=1, max_size=4, unique=True))
        return {name: data(_value_strategy(properties[name])) for name in names}

    return draw()


_VALID_EPSILONS = st.one_of(st.sampled_from([1e-6, 1e-3, 0.5, 2.0, 100.0]), st.floats(1e-6, 100.0))
EPSILONS = st.one_of(st.none(), _VALID_EPSILONS, _VALID_EPSILONS,
                     st.sampled_from([5e-324, 1e-300, 1e-7, 9.99e-7, 100.5, 1e300, 0, -1, 10**400]))  # fmt: skip

PATHS = ["/v1/fits/estimate", "/v1/fits"]
#: solvers whose calibration takes ~0.5 s a plan on a shared CI core get fewer examples (the file stays < 60 s)
SLOW_PLANS = {"dp_sgd": 10, "resque_dpsgd": 8}
CASES = [(solver.name, model) for solver in list_solvers() for model in solver.models]


def assert_no_server_error(response: Any, fields: set[str]) -> None:
    """Never a 5xx; a 422 is problem+json naming a field of the request; a 200/202 carries a cost."""
    assert response.status_code < 500, response.text
    if response.status_code == 422:
        assert response.headers["content-type"].startswith("application/problem+json"), response.text
        body = response.json()
        if "parameter" in body:
            named = body["parameter"]
        else:
            loc = body["errors"][0]["loc"]
            assert len(loc) >= 2, body
            named = str(loc[-1])
            if loc[:2] == ["body", "params"] and len(loc) >= 3:
                named = str(loc[2])
        assert named.split(".")[0] in fields, (named, body)  # a nested field is named by its path
    elif response.status_code in (200, 202):
        cost = response.json()["cost"]
        assert cost["epsilon"] is None or cost["epsilon"] >= 0, cost


def check_request(client: TestClient, keys: Keys, request: dict[str, Any], fields: set[str], path: str) -> None:
    """``request`` on ``path`` (the estimate or the fit submission); an admitted fit is cancelled at once."""
    created = client.post(path, headers=keys.analyst, json=request)
    assert_no_server_error(created, fields)
    if created.status_code == 202:  # release the reservation: the budget stays open for the next examples
        cancelled = client.post(f"/v1/fits/{created.json()['id']}/cancel", headers=keys.analyst)
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled", cancelled.text


@pytest.mark.parametrize(("solver", "model"), CASES, ids=[f"{s}-{m}" for s, m in CASES])
def test_extreme_parameters_never_give_a_server_error(fuzz_app, solver: str, model: str) -> None:
    client, keys, dataset_id, solvers = fuzz_app
    schema = next(s for s in solvers if s["name"] == solver)["params_schema"]
    # "steps": resque_localized's operator work cap names the planned gradient steps (PRIVFIT_RESQUE_LOCALIZED_…)
    fields = {*schema["properties"], "epsilon", "model", "solver", "params", "privacy", "steps"}

    explicit = get_solver(solver).explicit_noise

    @settings(max_examples=SLOW_PLANS.get(solver, 20), deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
    @given(params=_params_strategy(schema, model, explicit), source=st.sampled_from(["target", "explicit", "any"]),
           epsilon=EPSILONS, path=st.sampled_from(PATHS), data=st.data())  # fmt: skip
    def run(params: dict[str, Any], source: str, epsilon: float | None, path: str, data: st.DataObject) -> None:
        # the privacy source: mostly exactly one of a target ε and the explicit noise parameter (as a valid request
        # has), sometimes whatever was drawn
        if source == "target" or (source == "explicit" and explicit is None):
            epsilon = epsilon if epsilon is not None else 0.5
        elif source == "explicit":
            epsilon = None
            params = {**params, explicit: data.draw(_value_strategy(schema["properties"][explicit]))}
        elif explicit is not None and data.draw(st.booleans()):
            params = {**params, explicit: data.draw(_value_strategy(schema["properties"][explicit]))}
        privacy = {} if epsilon is None else {"epsilon": epsilon}
        request = {"dataset_id": dataset_id, "solver": solver, "model": model, "privacy": privacy, "params": params}
        check_request(client, keys, request, fields, path)

    run()


REPRODUCED = [
    ("objective_perturbation", "logistic", 1e-300, {}, "epsilon"),
    ("dp_gd", "svm", 0.5, {"hinge_smoothing": 5e-324}, "hinge_smoothing"),
    ("dp_distributed", "logistic", 0.5, {"l2": 5e-324}, "l2"),
    ("output_perturbation", "logistic", 0.5, {"radius": 1e-300}, "radius"),
    ("output_perturbation", "logistic", 0.5, {"l2": 1e-300}, "l2"),
    ("dp_lazy_oco", "mean", 0.5, {"clip_norm": 1e-300}, "clip_norm"),
    ("dp_lazy_oco", "linear_loss", 0.5, {"clip_norm": 1e-300}, "clip_norm"),
]


@pytest.mark.parametrize(("solver", "model", "epsilon", "params", "field"), REPRODUCED)
@pytest.mark.parametrize("path", ["/v1/fits/estimate", "/v1/fits"])
def test_reproduced_extremes_are_422_naming_the_field(fuzz_app, path, solver, model, epsilon, params, field) -> None:
    client, keys, dataset_id, _ = fuzz_app
    request = {"dataset_id": dataset_id, "solver": solver, "model": model, "privacy": {"epsilon": epsilon},
               "params": params}  # fmt: skip
    response = client.post(path, headers=keys.analyst, json=request)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    named = body.get("parameter") or body["errors"][0]["loc"][-1]
    assert named == field, body


@pytest.mark.parametrize(
    ("params", "field"),
    [({"l2": 5e-324}, "l2"), ({"l2": 1e-7}, "l2"), ({"radius": 9e-7}, "radius"), ({"step_size": 1e-300}, "step_size")],
)
def test_published_bounds_are_in_the_schema_and_enforced(fuzz_app, params, field) -> None:
    """The bounds are public (the solver's JSON schema) and a value past them is a 422 on that field, while the
    bound itself is accepted."""
    client, keys, dataset_id, solvers = fuzz_app
    schema = next(s for s in solvers if s["name"] == "dp_gd")["params_schema"]["properties"]
    assert schema["radius"]["anyOf"][0]["minimum"] == 1e-6
    assert schema["hinge_smoothing"]["anyOf"][0]["minimum"] == 1e-6
    request = {"dataset_id": dataset_id, "solver": "dp_gd", "privacy": {"epsilon": 0.5}, "params": params}
    refused = client.post("/v1/fits/estimate", headers=keys.analyst, json=request)
    assert refused.status_code == 422 and refused.json()["parameter"] == field, refused.text
    at_bound = {**request, "params": {field: 1e-6}}
    assert client.post("/v1/fits/estimate", headers=keys.analyst, json=at_bound).status_code == 200
