"""``resque_localized`` (spec ``seed-004-resque.md`` §3–4, §6.3): the preconditions P1–P5 of every Algorithm-4 call,
the approximate-RDP accounting of the call tree (Lemmas 5–7 constants, the randomized composition over Algorithm 6's J),
a tiny instance run to completion with every call checked, and the feasibility guard on an Adult-sized request."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import logsumexp

import privfit.solvers.resque.localized_core as core
from privfit.privacy import DEFAULT_GRID, make_generator
from privfit.solvers import PublicMetadata, SolverParameterError, get_solver
from privfit.solvers.resque.localized import (
    TAU_CONSTANT,
    ReSQueLocalized,
    algorithm_5_cost,
    algorithm_6_cost,
    call_curve,
)

SOLVER = get_solver("resque_localized")
ORDERS = DEFAULT_GRID.orders
TINY = {"model": "svm", "outer_iterations": 2, "line_search_probes": 2, "zeta": 0.5, "steps_per_call": 32,
        "fit_intercept": False}  # fmt: skip


def tiny_data(n: int = 20_000, d: int = 2, seed: int = 0) -> tuple[np.ndarray, np.ndarray, PublicMetadata]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    y = np.where(X @ np.array([1.0, -0.5][:d]) > 0, 1.0, -1.0)
    return X, y, PublicMetadata(n=n, d=d, row_norm_bound=1.0)


# ---------------------------------------------------------------------------------------------------------
# preconditions P1–P5
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "kwargs", "field", "words"),
    [
        (core.CallCheck(1e-4, 400, 1e-6), {}, "steps_per_call", "P1"),
        (core.CallCheck(1e-4, 64, 1e-6), {"delta_call": 0.2}, "delta", "P2"),
        (core.CallCheck(0.01, 64, 1e-6), {}, "epsilon", "P3"),
        (core.CallCheck(2.2e-4, 64, 1e-6), {}, "epsilon", "P3"),  # τ' = 0.13: within the paper's 1/3, not 0.1
        (core.CallCheck(1e-4, 64, 1e-6), {"r": 1e-3}, "smoothing", "P4"),
        (core.CallCheck(1e-4, 64, 3e-6), {}, "radius", "P5"),
    ],
)
def test_every_precondition_is_enforced(call: core.CallCheck, kwargs: dict, field: str, words: str) -> None:
    baseline = {"n": 12_000, "rho": 10.0, "r": 1e-6, "delta_call": 1e-9}
    core.check_call(core.CallCheck(1e-4, 64, 1e-6), **baseline)  # passes: every failure below is the named one
    with pytest.raises(SolverParameterError, match=words) as info:
        core.check_call(call, **(baseline | kwargs))
    assert info.value.parameter == field


def test_p4_is_twice_as_strict_for_the_regularised_algorithm_4() -> None:
    delta_call, steps = 1e-9, 64
    needed = 1728 * math.log(2 * math.log2(steps) / delta_call) ** 2
    rho = 1.5 * needed * 1e-6
    core.check_call(core.CallCheck(1e-4, steps, 1e-6), n=12_000, rho=rho, r=1e-6, delta_call=delta_call,
                    regularized=False)  # fmt: skip
    with pytest.raises(SolverParameterError, match="P4"):
        core.check_call(core.CallCheck(1e-4, steps, 1e-6), n=12_000, rho=rho, r=1e-6, delta_call=delta_call)


# ---------------------------------------------------------------------------------------------------------
# accounting
# ---------------------------------------------------------------------------------------------------------


def test_call_curve_has_the_lemma_7_constants() -> None:
    beta, steps, n, delta_call = 1e-4, 64, 20_000, 1e-10
    curve = call_curve(beta, steps, n, delta_call, DEFAULT_GRID)
    log_term = math.log(2 / delta_call) ** 2
    tau = 13 * (1.2 * steps / n) ** 2 * 6000 * beta**2 * log_term
    assert pytest.approx(13 * 1.2**2 * 6000) == TAU_CONSTANT
    tau_prime = 6000 * beta**2 * log_term
    alpha_max = min(3.0, math.log(1 / (1.2 * steps / n)) / 4) / tau_prime  # the smaller of Prop. 7's and BDRS18's
    below = alpha_max > ORDERS
    np.testing.assert_allclose(curve[below], ORDERS[below] * tau, rtol=1e-12)
    assert np.all(np.isinf(curve[~below])) and below.any() and (~below).any()


def test_randomized_composition_over_j_lies_between_the_branches() -> None:
    """Spec §8 item 9: the Algorithm-6 loop's charge is ≥ the cheapest and ≤ the dearest branch, and it is the exact
    mixture formula (1/(α−1)) log Σ_j P(J = j) e^{(α−1)ε_j(α)}."""
    n, beta, steps, delta_call = 40_000, 1e-4, 32, 1e-10
    levels = core.mlmc_levels(n, steps)
    assert levels >= 2
    loop = algorithm_6_cost(beta, steps, n, delta_call, DEFAULT_GRID)
    five = algorithm_5_cost
    base = five(beta, steps, n, delta_call, DEFAULT_GRID)
    branches = [base.curve] + [
        (base + five(2 ** (-j / 2) * beta, 2**j * steps, n, delta_call, DEFAULT_GRID)
         + five(2 ** (-(j - 1) / 2) * beta, 2 ** (j - 1) * steps, n, delta_call, DEFAULT_GRID)).curve
        for j in range(1, levels + 1)
    ]  # fmt: skip
    weights = np.array([2.0**-levels] + [2.0**-j for j in range(1, levels + 1)])
    assert weights.sum() == pytest.approx(1.0)
    curves = np.array(branches)
    finite = np.all(np.isfinite(curves), axis=0)
    expected = logsumexp((ORDERS[finite] - 1) * curves[:, finite], axis=0, b=weights[:, None]) / (ORDERS[finite] - 1)
    np.testing.assert_allclose(loop.curve[finite] / levels, expected, rtol=1e-12)
    assert np.all(loop.curve[finite] / levels >= curves[:, finite].min(axis=0) * (1 - 1e-12))
    assert np.all(loop.curve[finite] / levels <= curves[:, finite].max(axis=0) * (1 + 1e-12))
    assert np.all(np.isinf(loop.curve[~finite]))


def test_resolution_meets_the_target_and_the_charge_is_approximate_rdp() -> None:
    _, _, meta = tiny_data()
    for epsilon in (0.5, 2.0):
        plan = SOLVER.plan(TINY, meta, target_epsilon=epsilon, delta=1e-6)
        r = plan.resolved
        assert plan.cost.approx_delta == pytest.approx(r.approx_delta) and plan.cost.extra_delta == 0.0
        assert plan.cost.approx_delta * (1 + math.exp(epsilon)) <= 0.25 * 1e-6 * (1 + 1e-9)
        assert np.isinf(plan.cost.rdp).any() and r.alpha_max < ORDERS[-1]
        assert r.epsilon == plan.cost.epsilon(1e-6).epsilon <= epsilon
        # r is the P4 radius at the largest call and β is within P3 for every call
        largest = 2 ** core.mlmc_levels(meta.n, r.steps_per_call) * r.steps_per_call
        assert r.smoothing / r.ball_radius == pytest.approx(3456 * math.log(2 * math.log2(largest) / r.delta_call) ** 2)
    charged = SOLVER.cost(plan.resolved, meta)
    np.testing.assert_array_equal(charged.rdp, plan.cost.rdp)


# ---------------------------------------------------------------------------------------------------------
# the algorithms
# ---------------------------------------------------------------------------------------------------------


def test_aggregate_returns_a_point_near_the_majority_cluster() -> None:
    """Lemma 11: if ≥ 51% of the points lie within Δ/3 of y, the output is within Δ of y, whatever the others."""
    rng = np.random.default_rng(1)
    spread, centre = 0.3, np.array([2.0, -1.0, 0.5])
    for trial in range(50):
        good = centre + spread / 3 * rng.uniform(-1, 1, size=(26, 3)) / math.sqrt(3)
        bad = centre + rng.normal(size=(24, 3)) * (10 if trial % 2 else 0.5) + 1.5
        points = rng.permutation(np.vstack([good, bad]))
        assert np.linalg.norm(core.aggregate(points, spread) - centre) <= spread


def test_a_tiny_instance_runs_to_completion_with_every_call_checked(monkeypatch) -> None:
    X, y, meta = tiny_data()
    resolved = SOLVER.resolve(TINY, meta, target_epsilon=1.0, delta=1e-6)
    checked: list[core.CallCheck] = []
    real_check = core.check_call

    def recording_check(call: core.CallCheck, **kwargs) -> None:  # type: ignore[no-untyped-def]
        real_check(call, **kwargs)
        assert kwargs["rho"] == resolved.smoothing and kwargs["r"] == resolved.ball_radius
        assert kwargs["delta_call"] == resolved.delta_call and kwargs["n"] == meta.n
        checked.append(call)

    monkeypatch.setattr(core, "check_call", recording_check)
    progress: list[float] = []
    result = SOLVER.fit(X, y, meta, resolved, make_generator(3, data_is_public=True), progress=progress.append)
    assert 0 < len(checked) <= resolved.planned_calls
    assert sum(c.steps for c in checked) <= resolved.planned_steps
    assert all(c.steps <= meta.n / 60 for c in checked)
    assert progress[-1] == 1.0
    theta = np.asarray(result.coefficients)
    assert np.all(np.isfinite(theta)) and np.linalg.norm(theta) <= resolved.radius


def test_the_feasibility_guard_refuses_an_adult_sized_request_with_the_step_count() -> None:
    adult = PublicMetadata(n=32_561, d=104, row_norm_bound=3.0)
    with pytest.raises(SolverParameterError) as refused:
        SOLVER.plan({"model": "svm"}, adult, target_epsilon=1.0, delta=1e-6)
    message = str(refused.value)
    assert refused.value.parameter == "steps" and "gradient steps" in message and "cap of 5e+07" in message
    planned = float(message.split("would run ")[1].split(" gradient")[0])
    assert planned > 1e12
    relaxed = ReSQueLocalized(max_planned_steps=1e6)
    _, _, meta = tiny_data()
    assert relaxed.plan(TINY, meta, target_epsilon=1.0, delta=1e-6).resolved.planned_steps <= 1e6
    with pytest.raises(SolverParameterError, match="cap of 100"):
        ReSQueLocalized(max_planned_steps=100).plan(TINY, meta, target_epsilon=1.0, delta=1e-6)
    assert SOLVER.with_operator_limits({"resque_localized_max_steps": 100}).max_planned_steps == 100  # type: ignore[attr-defined]
    assert SOLVER.experimental
