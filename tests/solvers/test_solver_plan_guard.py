"""The backstop behind the parameter bounds (issue 20): a resolution or cost that divides by zero, overflows, derives a
non-finite setting or a NaN cost is a :class:`SolverParameterError` naming the parameter responsible, never an
unexpected exception (which the API would answer 500)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfit.solvers.base import MIN_EPSILON, PublicMetadata, SolverParameterError
from privfit.solvers.baselines.dp_gd import DPGradientDescent

META = PublicMetadata(n=1000, d=3, row_norm_bound=1.0)


def _failing(error: BaseException) -> DPGradientDescent:
    class Failing(DPGradientDescent):
        def _resolve(self, p, meta, privacy):
            raise error

    return Failing()


NUMERIC_FAILURES = [
    ZeroDivisionError("float division by zero"),
    OverflowError("math range error"),
    FloatingPointError("overflow"),
    ValueError("math domain error"),
]


@pytest.mark.parametrize("error", NUMERIC_FAILURES, ids=lambda error: type(error).__name__)
def test_numeric_failures_name_the_most_extreme_parameter(error: BaseException) -> None:
    with pytest.raises(SolverParameterError) as refused:
        _failing(error).plan({"steps": 3, "step_size": 2e-6}, META, target_epsilon=0.5, delta=1e-6)
    assert refused.value.parameter == "step_size"  # 2e-6 is farther from 1 than 3 steps or ε = 0.5
    assert "Parameter bounds" in str(refused.value)


def test_the_target_epsilon_is_named_when_it_is_the_extreme() -> None:
    with pytest.raises(SolverParameterError) as refused:
        _failing(ZeroDivisionError()).plan({"steps": 3}, META, target_epsilon=1e-5, delta=1e-6)
    assert refused.value.parameter == "epsilon"


def test_a_non_finite_resolved_setting_names_the_field_the_request_set() -> None:
    """The resolved model refuses ±inf (pydantic); the field it names is reported if the request set it."""

    class Infinite(DPGradientDescent):
        def _resolve(self, p, meta, privacy):
            resolved = super()._resolve(p, meta, privacy)
            return type(resolved).model_validate({**resolved.model_dump(), "step_size": math.inf})

    with pytest.raises(SolverParameterError) as refused:
        Infinite().plan({"step_size": 0.5, "radius": 1e-6}, META, target_epsilon=0.5, delta=1e-6)
    assert refused.value.parameter == "step_size"


def test_a_nan_cost_is_refused() -> None:
    class NaNCost(DPGradientDescent):
        def _cost(self, r, meta, grid):
            cost = super()._cost(r, meta, grid)
            return type(cost)(np.full_like(cost.rdp, np.nan), cost.grid, cost.extra_delta, cost.approx_delta)

    with pytest.raises(SolverParameterError) as refused:
        NaNCost().plan({"noise_multiplier": 1e-3}, META)
    assert refused.value.parameter == "noise_multiplier"


@pytest.mark.parametrize("epsilon", [0.0, 5e-324, 1e-300, MIN_EPSILON / 2, math.inf, math.nan, -1.0])
def test_target_epsilon_bounds(epsilon: float) -> None:
    with pytest.raises(SolverParameterError) as refused:
        DPGradientDescent().plan({}, META, target_epsilon=epsilon, delta=1e-6)
    assert refused.value.parameter == "epsilon"


def test_the_bounds_themselves_plan() -> None:
    plan = DPGradientDescent().plan(
        {"model": "svm", "hinge_smoothing": 1e-6, "radius": 1e-6, "l2": 1e-6}, META, target_epsilon=MIN_EPSILON,
        delta=1e-6,
    )  # fmt: skip
    assert plan.resolved.epsilon is not None and plan.resolved.epsilon <= MIN_EPSILON * (1 + 1e-9)
