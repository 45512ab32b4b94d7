"""Tests of the solver registry and of the contract every registered solver must meet."""

from __future__ import annotations

import json

import numpy as np
import pytest

from privfit.errors import ParameterError
from privfit.privacy import DEFAULT_GRID, PrivacyCost, make_generator
from privfit.solvers import (
    DPGradientDescent,
    FitResult,
    PublicMetadata,
    ResolvedParams,
    Solver,
    SolverParams,
    UnknownSolverError,
    describe_solvers,
    get_solver,
    known_models,
    list_solvers,
    register_solver,
    solver_names,
)

SOLVERS = list_solvers()
#: Experimental solvers (resque_localized) cannot run their defaults on a small instance (their feasibility guard
#: refuses them by design); their own module runs a tiny instance with explicit counts.
STABLE_SOLVERS = [solver for solver in SOLVERS if not solver.experimental]
# n = 800: every solver's defaults must accept it (dp_distributed needs K = ⌊⌊n/m⌋/h⌋ ≥ 20 rounds: 4 × 10 × 20)
META = PublicMetadata(n=800, d=3, row_norm_bound=1.0, label_bound=1.0)


def test_dp_gd_is_registered() -> None:
    assert "dp_gd" in solver_names()
    assert isinstance(get_solver("dp_gd"), DPGradientDescent)
    assert [s.name for s in SOLVERS] == list(solver_names())


@pytest.mark.parametrize("name", ["dp-gd", "", "DP_GD", None, 3])
def test_unknown_solver_is_a_parameter_error_listing_known_names(name: object) -> None:
    with pytest.raises(UnknownSolverError) as error:
        get_solver(name)  # type: ignore[arg-type]
    assert isinstance(error.value, ParameterError) and error.value.parameter == "solver"
    assert "'dp_gd'" in str(error.value)


def test_duplicate_registration_is_refused() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_solver(DPGradientDescent())
    assert register_solver(get_solver("dp_gd"), replace=True) is get_solver("dp_gd")


@pytest.mark.parametrize("solver", SOLVERS, ids=lambda s: s.name)
def test_solver_declares_its_interface(solver: Solver) -> None:
    assert solver.name and solver.description and solver.formula_version
    assert solver.models and set(solver.models) <= set(known_models())
    assert issubclass(solver.Params, SolverParams) and issubclass(solver.Resolved, ResolvedParams)


@pytest.mark.parametrize("solver", SOLVERS, ids=lambda s: s.name)
def test_params_schema_is_json_with_defaults_and_descriptions(solver: Solver) -> None:
    schema = json.loads(json.dumps(solver.params_schema()))
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    for field, spec in schema["properties"].items():
        assert "default" in spec, f"{field} has no default"
        assert spec.get("description"), f"{field} has no description"
    assert set(schema["properties"]["model"]["enum"]) == set(solver.models)
    assert solver.Params.model_validate({}) == solver.parse_params(None)  # every field has a working default
    listed = {entry["name"]: entry for entry in json.loads(json.dumps(describe_solvers()))}
    assert listed[solver.name]["params_schema"] == schema and listed[solver.name]["models"] == list(solver.models)


@pytest.mark.parametrize("solver", STABLE_SOLVERS, ids=lambda s: s.name)
@pytest.mark.parametrize("model", known_models())
def test_solver_supports_each_declared_model_end_to_end(solver: Solver, model: str) -> None:
    if model not in solver.models:
        with pytest.raises(ParameterError) as error:
            solver.plan({"model": model}, META, target_epsilon=1.0, delta=1e-5)
        assert error.value.parameter == "model"
        return
    plan = solver.plan({"model": model}, META, target_epsilon=1.0, delta=1e-5)
    assert isinstance(plan.cost, PrivacyCost) and plan.cost.grid == DEFAULT_GRID
    assert plan.cost.epsilon(1e-5).epsilon <= 1.0
    json.dumps(plan.resolved.model_dump(mode="json"), allow_nan=False)
    rng = np.random.default_rng(0)
    X = rng.uniform(-0.5, 0.5, size=(META.n, META.d))
    y = np.where(rng.uniform(size=META.n) < 0.5, -1.0, 1.0)
    result = solver.fit(X, y, META, plan.resolved, make_generator(0, data_is_public=True))
    assert isinstance(result, FitResult) and result.model == model and result.solver == solver.name
    assert len(result.coefficients) == META.d
    json.dumps(result.to_dict(), allow_nan=False)


def test_unknown_model_is_a_clear_error() -> None:
    with pytest.raises(ParameterError) as error:
        get_solver("dp_gd").parse_params({"model": "poisson"})
    assert error.value.parameter == "model"
    assert "logistic" in str(error.value)
