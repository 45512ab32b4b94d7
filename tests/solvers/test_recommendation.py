"""The recommended-solver rule of docs/solvers.md ("Which solver when"), as ``benchmarks/utility.py`` scores it."""

from __future__ import annotations

import pytest

from privfit.solvers import solver_names
from privfit.solvers.recommendation import OBJECTIVE_PERTURBATION_MIN_N_EPSILON, recommend


@pytest.mark.parametrize(
    ("n", "epsilon", "expected"),
    [
        (26_049, 0.1, "dp_gd"),  # Adult at ε = 0.1: n·ε = 2,605
        (26_049, 0.5, "objective_perturbation"),  # n·ε = 13,025
        (5_634, 1.0, "dp_gd"),  # Telco at ε = 1: n·ε = 5,634
        (5_634, 2.0, "objective_perturbation"),  # n·ε = 11,268
        (11_999, 1.0, "objective_perturbation"),  # HR at ε = 1: n·ε = 11,999
        (10_000, 1.0, "objective_perturbation"),  # the boundary belongs to objective perturbation
        (9_999, 1.0, "dp_gd"),
    ],
)
def test_logistic_switches_to_objective_perturbation_from_n_epsilon_ten_thousand(
    n: int, epsilon: float, expected: str
) -> None:
    recommendation = recommend("logistic", n, epsilon)
    assert recommendation.solver == expected
    assert f"{OBJECTIVE_PERTURBATION_MIN_N_EPSILON:.0f}" in recommendation.reason


def test_linear_is_dp_gd_at_every_size_and_every_name_is_a_registered_solver() -> None:
    names = set(solver_names())
    for n in (10, 5_128, 10**7):
        for epsilon in (0.01, 1.0, 100.0):
            assert recommend("linear", n, epsilon).solver == "dp_gd"
            assert recommend("logistic", n, epsilon).solver in names


@pytest.mark.parametrize(("model", "n", "epsilon"), [("svm", 100, 1.0), ("logistic", 0, 1.0), ("linear", 10, 0.0)])
def test_uncovered_models_and_impossible_sizes_are_refused(model: str, n: int, epsilon: float) -> None:
    with pytest.raises(ValueError):
        recommend(model, n, epsilon)
