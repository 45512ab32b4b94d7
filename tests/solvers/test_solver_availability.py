"""The availability rule (:mod:`privfit.solvers.availability`) without a server: the catalogue's verdict and the
solvers' own refusal at resolve time are the same rule, and the messages that suggest solvers, built deep in the
solvers, suggest none the sampler in force refuses."""

from __future__ import annotations

import re

import pytest

from privfit.privacy.noise import using_sampler
from privfit.solvers.availability import (
    FLOAT_SAMPLER_SETTING,
    available_names,
    solver_availability,
    suggested_solvers,
    unknown_solver_message,
)
from privfit.solvers.base import PublicMetadata, SolverParameterError
from privfit.solvers.registry import UnknownSolverError, get_solver, list_solvers, solver_names
from privfit.solvers.selection.auto import candidate_set

META = PublicMetadata(n=2000, d=3, row_norm_bound=1.0, label_bound=1.0)
#: The solvers without an exact sampler (docs/solvers.md); written out, not computed.
FLOAT_ONLY = {"objective_perturbation", "dp_lazy_oco", "resque_localized"}


def _mentions(text: str) -> set[str]:
    return {name for name in solver_names() if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text)}


@pytest.mark.parametrize("sampler", ["exact", "float"])
@pytest.mark.parametrize("solver", list_solvers(), ids=lambda s: s.name)
def test_the_catalogue_and_the_resolve_step_refuse_the_same_solvers(solver, sampler: str) -> None:
    """A solver is unavailable for its sampler exactly when its own resolve step refuses it on ``solver``."""
    verdict = solver_availability(solver, experimental_enabled=True, sampler=sampler)  # type: ignore[arg-type]
    assert verdict.available is not (sampler == "exact" and solver.name in FLOAT_ONLY)
    model = "mean" if solver.name == "dp_lazy_oco" else "svm" if solver.name.startswith("resque") else "logistic"
    with using_sampler(sampler):
        try:
            solver.with_operator_limits({"resque_localized_max_steps": 1.0}).resolve(
                {"model": model}, META, target_epsilon=1.0, delta=1e-6
            )
            refused_on_solver = False
        except SolverParameterError as error:
            refused_on_solver = error.parameter == "solver"
            if refused_on_solver:
                assert verdict.unavailable_reason is not None
                assert verdict.unavailable_reason.rstrip(".") in str(error)
    assert refused_on_solver is not verdict.available
    if not verdict.available:
        assert verdict.enabled_by == FLOAT_SAMPLER_SETTING


def test_an_experimental_solver_needs_the_operator_and_says_which_settings() -> None:
    localized = get_solver("resque_localized")
    hidden = solver_availability(localized, experimental_enabled=False, sampler="float")
    assert (hidden.available, hidden.enabled_by) == (False, "PRIVFIT_ENABLE_EXPERIMENTAL_SOLVERS=true")
    both = solver_availability(localized, experimental_enabled=False, sampler="exact")
    assert both.enabled_by == "PRIVFIT_ENABLE_EXPERIMENTAL_SOLVERS=true and PRIVFIT_NOISE_SAMPLER=float"
    assert "experimental" in (both.unavailable_reason or "") and "exact" in (both.unavailable_reason or "")
    assert "resque_localized" not in available_names(sampler="float")
    assert "resque_localized" in available_names(sampler="float", experimental_enabled=True)


@pytest.mark.parametrize(
    ("solver", "model"), [("dp_lazy_oco", "logistic"), ("dp_lazy_oco", "huber"), ("objective_perturbation", "linear")]
)
def test_a_model_refusal_suggests_only_solvers_the_sampler_in_force_runs(solver: str, model: str) -> None:
    """Issue 36: dp_lazy_oco's refusal of a GLM model suggested objective_perturbation even where it is refused."""
    for sampler in ("exact", "float"):
        with using_sampler(sampler), pytest.raises(SolverParameterError) as refused:
            get_solver(solver).parse_params({"model": model})
        suggested = _mentions(str(refused.value)) - {solver}
        assert suggested and "dp_gd" in suggested, str(refused.value)
        if sampler == "exact":
            assert not suggested & FLOAT_ONLY, str(refused.value)
        elif model != "linear":
            assert "objective_perturbation" in suggested  # available under float: still suggested
        assert "resque_localized" not in suggested  # never an experimental solver (the opt-in is the API's)


def test_suggestions_and_autos_candidates_follow_the_sampler() -> None:
    with using_sampler("exact"):
        assert "objective_perturbation" not in suggested_solvers("logistic")
        assert suggested_solvers("mean") == "no solver on this server"
    with using_sampler("float"):
        assert suggested_solvers("mean") == "dp_lazy_oco"
        assert suggested_solvers("logistic", exclude=("dp_gd",)).count("dp_gd") == 0
    assert candidate_set("logistic", sampler="exact") == ("dp_gd", "output_perturbation")
    assert candidate_set("logistic", sampler="float") == ("dp_gd", "objective_perturbation")
    auto = get_solver("auto")
    for sampler in ("exact", "float"):
        with using_sampler(sampler):
            named = _mentions(auto.describe()["description"])
        runs = set(available_names(sampler=sampler))
        assert named and named <= runs, (sampler, named)


def test_unknown_solver_messages_say_did_you_mean_over_the_candidates_given() -> None:
    assert "did you mean 'dp_gd'" in unknown_solver_message("dp-gd", ["dp_gd", "dp_otb"])
    refused_close = unknown_solver_message("objective_pertubation", ["dp_gd", "output_perturbation"])
    assert "objective_perturbation" not in refused_close and "did you mean 'output_perturbation'?" in refused_close
    assert "did you mean" not in unknown_solver_message("zzz", ["dp_gd"])
    assert "did you mean" not in unknown_solver_message(None, ["dp_gd"])
    with pytest.raises(UnknownSolverError, match="did you mean 'dp_gd'"):  # the library's lookup says it too
        get_solver("dp-gd")
