"""Tests of the ``dp_gd`` solver: cost from public metadata, calibration, convergence, sensitivity, audit, Adult.

All randomness is seeded on public/synthetic data (``make_generator(seed, data_is_public=True)``).
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
from dp_accounting import GaussianDpEvent, SelfComposedDpEvent
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant
from scipy.optimize import minimize

from privfit.errors import ParameterError
from privfit.privacy import (
    DEFAULT_GRID,
    GRIDS,
    PrivacyCost,
    gaussian_rdp,
    gaussian_sigma,
    gdp_gaussian_sigma,
    make_generator,
)
from privfit.privacy.audit import epsilon_lower_bound
from privfit.privacy.noise import describe_sampler, using_sampler
from privfit.solvers import (
    DPGDResolved,
    FitCancelled,
    PublicMetadata,
    SolverParameterError,
    get_solver,
)
from privfit.solvers.base import DEFAULT_RADIUS, ProgressReporter
from privfit.solvers.baselines.dp_gd import (
    REFERENCE_STEPS,
    clipped_gradient_sum,
    default_schedule,
    dp_gradient_descent,
)
from privfit.solvers.geometry import augment_intercept, augmented_bound
from privfit.solvers.losses import make_loss

SOLVER = get_solver("dp_gd")
MODELS = ("logistic", "linear", "huber", "svm")
ADULT_DIR = Path(__file__).resolve().parents[3] / ".." / "shared" / "data" / "adult"


def synthetic(n: int, d: int, model: str, seed: int, row_norm_bound: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Rows with ‖x‖ ≤ row_norm_bound; ±1 labels for classification, labels in [−1, 1] for regression."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X *= row_norm_bound * rng.uniform(0.2, 1.0, size=(n, 1)) / np.linalg.norm(X, axis=1, keepdims=True)
    w = rng.normal(size=d)
    score = X @ w + 0.3 + 0.3 * rng.normal(size=n)
    y = np.where(score >= 0, 1.0, -1.0) if model in ("logistic", "svm") else np.clip(score / 3.0, -1.0, 1.0)
    return X, y


def meta_for(X: np.ndarray, row_norm_bound: float = 1.0) -> PublicMetadata:
    return PublicMetadata(n=X.shape[0], d=X.shape[1], row_norm_bound=row_norm_bound, label_bound=1.0)


# ---------------------------------------------------------------------------------------------------------
# cost and calibration: public metadata only
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", MODELS)
def test_cost_is_t_fold_gaussian_with_sensitivity_2c_from_metadata_alone(model: str) -> None:
    meta = PublicMetadata(n=5000, d=7, row_norm_bound=2.0, label_bound=1.0)  # no X anywhere
    resolved = SOLVER.resolve({"model": model, "steps": 150, "noise_multiplier": 3.0}, meta)
    bound = augmented_bound(2.0)
    radius = DEFAULT_RADIUS[model]
    loss = make_loss(model)
    lipschitz = loss.lipschitz(bound, 1.0, radius)
    assert resolved.lipschitz == lipschitz
    if model == "linear":
        assert lipschitz == pytest.approx((radius * bound + 1.0) * bound)  # G of the squared loss grows with R
        expected_c = bound / 4  # the default clips residuals at ¼ of the label's half-range, far below G
    else:
        assert lipschitz == pytest.approx(bound)  # |φ'| ≤ 1 (logistic, svm; huber with its default δ = 1)
        expected_c = lipschitz
    assert resolved.clip_norm == expected_c and resolved.sensitivity == 2 * expected_c
    assert resolved.sigma == pytest.approx(3.0 * 2 * expected_c, rel=1e-15)
    cost = SOLVER.cost(resolved, meta)
    expected = PrivacyCost(150 * gaussian_rdp(DEFAULT_GRID, sigma=resolved.sigma, sensitivity=2 * expected_c))
    np.testing.assert_array_equal(cost.rdp, expected.rdp)
    np.testing.assert_allclose(cost.rdp, 150 * DEFAULT_GRID.orders / (2 * 3.0**2), rtol=1e-12)
    assert cost.extra_delta == 0.0 and resolved.epsilon is None  # no δ given: no ε reported


def test_cost_matches_dp_accounting() -> None:
    """The curve is dp_accounting's RDP of 200 Gaussian steps; the fit's ε is the exact Gaussian curve's (GDP),
    which dp_accounting's PLD accountant reaches (pessimistically discretised: a hair above), below the RDP one."""
    meta = PublicMetadata(n=1000, d=3, row_norm_bound=1.0)
    resolved = SOLVER.resolve({"steps": 200, "noise_multiplier": 40.0}, meta)
    cost = SOLVER.cost(resolved, meta)
    accountant = RdpAccountant(list(DEFAULT_GRID.orders))
    accountant.compose(SelfComposedDpEvent(GaussianDpEvent(40.0), 200))
    curve = PrivacyCost(cost.rdp, DEFAULT_GRID)  # the curve alone, without the GDP bound
    assert curve.epsilon(1e-6).epsilon == pytest.approx(accountant.get_epsilon(1e-6), rel=1e-9)
    assert cost.gdp_mu_squared == pytest.approx(200 / 40.0**2, rel=1e-12)
    pld = PLDAccountant(value_discretization_interval=1e-4)
    pld.compose(SelfComposedDpEvent(GaussianDpEvent(40.0), 200))
    ours = cost.epsilon(1e-6)
    assert ours.optimal_order == math.inf  # the exact curve, not an RDP order
    assert ours.epsilon <= pld.get_epsilon(1e-6) <= ours.epsilon * (1 + 2e-3)
    assert ours.epsilon < 0.95 * curve.epsilon(1e-6).epsilon


@pytest.mark.parametrize("grid_name", sorted(GRIDS))
@pytest.mark.parametrize(("target", "delta", "steps"), [(1.0, 1e-6, 200), (0.1, 1e-5, 50), (5.0, 1e-8, 1000)])
def test_calibration_meets_target_and_cost_converts_to_it(grid_name: str, target: float, delta: float, steps: int):
    grid = GRIDS[grid_name]
    meta = PublicMetadata(n=32561, d=104, row_norm_bound=math.sqrt(13))
    resolved = SOLVER.resolve({"steps": steps}, meta, target_epsilon=target, delta=delta, grid=grid)
    calibration = gdp_gaussian_sigma(target, delta, sensitivity=resolved.sensitivity, count=steps, coordinates=105)
    assert resolved.sigma == calibration.noise  # the exact Gaussian curve: the same σ on every grid
    conversion = SOLVER.cost(resolved, meta, grid).epsilon(delta)
    achieved = conversion.epsilon
    assert achieved <= target
    assert achieved >= target * (1 - 1e-4)  # tight: the calibration rounds σ up by ≤ 1e-6 relative
    rdp = gaussian_sigma(target, delta, sensitivity=resolved.sensitivity, count=steps, grid=grid).noise
    assert resolved.sigma < 0.96 * rdp  # the slack of the RDP conversion, no longer in the noise
    assert resolved.epsilon == achieved and resolved.target_epsilon == target and resolved.delta == delta


def test_clip_norm_below_lipschitz_is_used_and_above_is_capped() -> None:
    meta = PublicMetadata(n=100, d=4, row_norm_bound=1.0)
    g = augmented_bound(1.0)
    assert SOLVER.resolve({"clip_norm": 0.5, "noise_multiplier": 1.0}, meta).clip_norm == 0.5
    assert SOLVER.resolve({"clip_norm": 50.0, "noise_multiplier": 1.0}, meta).clip_norm == g
    no_intercept = SOLVER.resolve({"fit_intercept": False, "noise_multiplier": 1.0}, meta)
    assert no_intercept.clip_norm == 1.0 and no_intercept.design_norm_bound == 1.0


def test_default_step_size_is_inverse_smoothness() -> None:
    meta = PublicMetadata(n=100, d=4, row_norm_bound=3.0)
    for model, c in [("logistic", 0.25), ("linear", 1.0), ("huber", 1.0), ("svm", 2.0)]:
        params = {"model": model, "l2": 0.1, "noise_multiplier": 1.0}
        if model == "svm":
            params["hinge_smoothing"] = 0.5
        resolved = SOLVER.resolve(params, meta)
        assert resolved.smoothness == pytest.approx(c * 10.0 + 0.1)  # B̃² = 3² + 1
        assert resolved.step_size == pytest.approx(1.0 / resolved.smoothness)


def test_privacy_source_must_be_exactly_one() -> None:
    meta = PublicMetadata(n=100, d=2, row_norm_bound=1.0)
    with pytest.raises(ParameterError) as both:
        SOLVER.resolve({"noise_multiplier": 2.0}, meta, target_epsilon=1.0, delta=1e-6)
    assert both.value.parameter == "noise_multiplier"
    with pytest.raises(ParameterError) as neither:
        SOLVER.resolve({}, meta, delta=1e-6)
    assert neither.value.parameter == "epsilon"
    with pytest.raises(ParameterError) as no_delta:
        SOLVER.resolve({}, meta, target_epsilon=1.0)
    assert no_delta.value.parameter == "delta"
    with pytest.raises(ParameterError) as bad_eps:
        SOLVER.resolve({}, meta, target_epsilon=-1.0, delta=1e-6)
    assert bad_eps.value.parameter == "epsilon"


def test_resolved_round_trips_through_json_and_is_checked_against_metadata() -> None:
    meta = PublicMetadata(n=300, d=3, row_norm_bound=1.0)
    plan = SOLVER.plan({"model": "huber", "huber_delta": 0.5}, meta, target_epsilon=2.0, delta=1e-5)
    stored = json.loads(json.dumps(plan.resolved.model_dump(mode="json")))
    reloaded = SOLVER.load_resolved(stored)
    assert reloaded == plan.resolved
    np.testing.assert_array_equal(SOLVER.cost(reloaded, meta).rdp, plan.cost.rdp)
    other = PublicMetadata(n=301, d=3, row_norm_bound=1.0)
    with pytest.raises(ParameterError) as wrong_meta:
        SOLVER.cost(reloaded, other)
    assert wrong_meta.value.parameter == "resolved"
    with pytest.raises(ParameterError):
        SOLVER.load_resolved({**stored, "sigma": -1.0})
    with pytest.raises(ParameterError):
        SOLVER.load_resolved({**stored, "solver": "other"})


# ---------------------------------------------------------------------------------------------------------
# convergence to the non-private optimum
# ---------------------------------------------------------------------------------------------------------


def regularised_optimum(model: str, X: np.ndarray, y: np.ndarray, l2: float, radius: float, **loss_params):
    """argmin mean ℓ(θ) + (λ/2)‖θ‖² s.t. ‖θ‖ ≤ R (scipy; SLSQP with the ball as an inequality constraint)."""
    loss = make_loss(model, **loss_params)

    def objective(theta: np.ndarray) -> float:
        return loss.mean_value(theta, X, y) + 0.5 * l2 * float(theta @ theta)

    def gradient(theta: np.ndarray) -> np.ndarray:
        return loss.mean_gradient(theta, X, y) + l2 * theta

    ball = {"type": "ineq", "fun": lambda t: radius**2 - t @ t, "jac": lambda t: -2 * t}
    result = minimize(
        objective, np.zeros(X.shape[1]), jac=gradient, method="SLSQP", constraints=[ball],
        options={"ftol": 1e-14, "maxiter": 1000},
    )  # fmt: skip
    assert result.success, result.message
    return result.x, objective


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("radius", [50.0, 0.4])  # inactive and active ball constraint
def test_tiny_noise_converges_to_regularised_optimum(model: str, radius: float) -> None:
    X, y = synthetic(400, 3, model, seed=7)
    meta = meta_for(X)
    extra = {"huber_delta": 0.1} if model == "huber" else {"hinge_smoothing": 0.5} if model == "svm" else {}
    params = {"model": model, "l2": 0.05, "radius": radius, "steps": 3000, "noise_multiplier": 1e-9, **extra}
    resolved = SOLVER.resolve(params, meta)
    result = SOLVER.fit(X, y, meta, resolved, make_generator(0, data_is_public=True))
    theta = np.array([*result.coefficients, result.intercept])
    loss_params = {"delta": 0.1} if model == "huber" else {"h": 0.5} if model == "svm" else {}
    optimum, objective = regularised_optimum(model, augment_intercept(X), y, 0.05, radius, **loss_params)
    assert np.linalg.norm(theta) <= radius
    assert objective(theta) == pytest.approx(objective(optimum), abs=1e-9)
    np.testing.assert_allclose(theta, optimum, atol=2e-5)


def test_default_clip_is_a_no_op_on_rows_within_bounds() -> None:
    """For the classification and Huber losses; the squared loss is clipped on purpose (the next test)."""
    for model in (m for m in MODELS if m != "linear"):
        X, y = synthetic(200, 4, model, seed=3, row_norm_bound=2.0)
        meta = meta_for(X, row_norm_bound=2.0)
        resolved = SOLVER.resolve({"model": model, "noise_multiplier": 1.0}, meta)
        A = augment_intercept(X)
        loss = make_loss(model, **resolved.loss_params)
        rng = np.random.default_rng(0)
        for _ in range(5):
            theta = rng.normal(size=A.shape[1])
            theta *= resolved.radius * rng.uniform() / np.linalg.norm(theta)
            clipped = clipped_gradient_sum(loss, theta, A, y, resolved.clip_norm)
            np.testing.assert_allclose(clipped, loss.gradient_sum(theta, A, y), rtol=1e-12, atol=1e-12)


def test_the_squared_loss_clips_residuals_at_a_quarter_of_the_label_range() -> None:
    """Default C = B̃/4 for 'linear': a row whose residual |⟨θ, x⟩ − y| is at most ¼ keeps its exact gradient,
    a larger residual counts as ±¼ (the Huber loss of threshold ¼, whose gradient is checked here row by row)."""
    X, y = synthetic(300, 4, "linear", seed=5, row_norm_bound=2.0)
    meta = meta_for(X, row_norm_bound=2.0)
    resolved = SOLVER.resolve({"model": "linear", "noise_multiplier": 1.0}, meta)
    A, bound = augment_intercept(X), augmented_bound(2.0)
    assert resolved.clip_norm == pytest.approx(bound / 4) and resolved.clip_norm < resolved.lipschitz / 10
    loss = make_loss("linear")
    rng = np.random.default_rng(1)
    for _ in range(5):
        theta = rng.normal(size=A.shape[1]) * 0.3
        residual = A @ theta - y
        huber = np.clip(residual, -0.25, 0.25)  # with ‖x̃‖ = B̃ at most, the clip factor min(1, C/(|r|‖x̃‖)) ≥ this
        exact = np.abs(residual) * np.linalg.norm(A, axis=1) <= resolved.clip_norm
        clipped = clipped_gradient_sum(loss, theta, A, y, resolved.clip_norm)
        scales = np.where(
            exact, residual, residual * resolved.clip_norm / (np.abs(residual) * np.linalg.norm(A, axis=1))
        )
        np.testing.assert_allclose(clipped, A.T @ scales, rtol=1e-12, atol=1e-12)
        assert np.all(np.abs(scales) * np.linalg.norm(A, axis=1) <= resolved.clip_norm * (1 + 1e-12))
        assert np.all(np.abs(scales) >= np.abs(huber) * np.linalg.norm(A, axis=1) / bound - 1e-12)


# ---------------------------------------------------------------------------------------------------------
# sensitivity: clipping holds whatever the data
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", MODELS)
def test_adversarial_row_moves_gradient_sum_by_at_most_2c(model: str) -> None:
    X, y = synthetic(50, 3, model, seed=11)
    meta = meta_for(X)
    resolved = SOLVER.resolve({"model": model, "noise_multiplier": 1.0}, meta)
    C = resolved.clip_norm
    A = augment_intercept(X)
    A_prime, y_prime = A.copy(), y.copy()
    A_prime[-1] = 1e6 * np.array([1.0, -2.0, 3.0, 1.0])  # far outside the declared bound
    y_prime[-1] = -y[-1] if model in ("logistic", "svm") else -1e6 * np.sign(y[-1] or 1.0)
    loss = make_loss(model, **resolved.loss_params)
    rng = np.random.default_rng(5)
    for _ in range(20):
        theta = rng.normal(size=4) * rng.uniform(0, 3)
        diff = clipped_gradient_sum(loss, theta, A, y, C) - clipped_gradient_sum(loss, theta, A_prime, y_prime, C)
        assert np.linalg.norm(diff) <= 2 * C * (1 + 1e-12)
    # one noiseless step from the same start: ‖θ(D) − θ(D')‖ ≤ η · 2C / n
    step = {"loss": loss, "clip_norm": C, "sigma": 0.0, "steps": 1, "step_size": resolved.step_size}
    one = dp_gradient_descent(A, y, radius=resolved.radius, rng=make_generator(0, data_is_public=True), **step)
    two = dp_gradient_descent(
        A_prime, y_prime, radius=resolved.radius, rng=make_generator(0, data_is_public=True), **step
    )
    gap = np.linalg.norm(one - two)
    assert 0 < gap <= resolved.step_size * 2 * C / meta.n * (1 + 1e-12)


@pytest.mark.parametrize("epsilon", [0.002, 0.02, 0.05, 0.5, 2.0, 10.0, 100.0])
def test_default_steps_and_momentum_follow_the_public_noise_level(epsilon: float) -> None:
    """ρ = σ(T₀)·sqrt(d)/(n·B̃) (eq. (4)) recomputed here picks (T, momentum) by the documented thresholds; the
    momentum changes nothing in the cost (it post-processes past releases) and explicit values override."""
    meta = PublicMetadata(n=20_000, d=30, row_norm_bound=3.0)
    resolved = SOLVER.resolve({"model": "logistic"}, meta, target_epsilon=epsilon, delta=1e-6)
    bound = augmented_bound(3.0)
    sigma_reference = gaussian_sigma(epsilon, 1e-6, sensitivity=2 * bound, count=REFERENCE_STEPS).noise
    level = sigma_reference * math.sqrt(31) / (20_000 * bound)
    assert resolved.noise_level == pytest.approx(level, rel=1e-12)
    if level >= 0.15:  # early stopping: T = max(16, ⌈30/ρ⌉), continuous with T = 200 at ρ = 0.15
        expected: tuple[int, str] = (max(16, math.ceil(30.0 / level)), "none")
    else:
        long_run = (min(1000, max(200, math.ceil(25.0 / level))), "none")
        expected = long_run if level >= 0.0125 else (200, "nesterov") if level >= 0.005 else (300, "nesterov")
    assert (resolved.steps, resolved.momentum) == expected == default_schedule(level)
    flipped = "none" if resolved.momentum == "nesterov" else "nesterov"
    other = SOLVER.plan({"model": "logistic", "momentum": flipped}, meta, target_epsilon=epsilon, delta=1e-6)
    assert other.resolved.momentum == flipped and other.resolved.steps == resolved.steps
    np.testing.assert_array_equal(other.cost.rdp, SOLVER.cost(resolved, meta, DEFAULT_GRID).rdp)
    pinned = SOLVER.resolve({"model": "logistic", "steps": 17}, meta, target_epsilon=epsilon, delta=1e-6)
    assert pinned.steps == 17 and pinned.momentum == resolved.momentum


@pytest.mark.parametrize("epsilon", [0.05, 1.0, 50.0])
def test_the_squared_loss_runs_1000_plain_averaged_steps_at_every_noise_level(epsilon: float) -> None:
    """'linear': T = 1000, no momentum, suffix average whatever ρ (which is still reported); explicit values win;
    the cost is the 1000-fold Gaussian of sensitivity 2C with the residual clip C = B̃/4."""
    meta = PublicMetadata(n=5_000, d=11, row_norm_bound=3.0)
    r = SOLVER.resolve({"model": "linear"}, meta, target_epsilon=epsilon, delta=1e-6)
    assert (r.steps, r.momentum, r.output) == (1000, "none", "suffix_average") and r.noise_level > 0
    bound = augmented_bound(3.0)
    assert r.clip_norm == pytest.approx(bound / 4) and r.sensitivity == 2 * r.clip_norm
    expected = PrivacyCost(1000 * gaussian_rdp(DEFAULT_GRID, sigma=r.sigma, sensitivity=2 * r.clip_norm))
    np.testing.assert_array_equal(SOLVER.cost(r, meta).rdp, expected.rdp)
    assert SOLVER.cost(r, meta).epsilon(1e-6).epsilon <= epsilon
    pinned = SOLVER.resolve(
        {"model": "linear", "steps": 50, "momentum": "nesterov", "output": "last"}, meta, target_epsilon=epsilon,
        delta=1e-6,
    )  # fmt: skip
    assert (pinned.steps, pinned.momentum, pinned.output) == (50, "nesterov", "last")
    logistic = SOLVER.resolve({"model": "logistic"}, meta, target_epsilon=epsilon, delta=1e-6)
    assert logistic.output == "last" and logistic.steps != 1000


def test_the_schedule_bands_cover_every_noise_level() -> None:
    """Each band of the rule is reached (ε = 0.002 … 100 above spans them) and T never jumps up as ρ grows
    across the early-stopping boundary: fewer steps the noisier the run, down to 16."""
    assert default_schedule(10.0) == (16, "none") and default_schedule(1.0) == (30, "none")
    assert default_schedule(0.15) == (200, "none") == default_schedule(0.149)
    assert default_schedule(0.05) == (500, "none") and default_schedule(0.02) == (1000, "none")
    assert default_schedule(0.0125) == (1000, "none")
    assert default_schedule(0.01) == (200, "nesterov") and default_schedule(0.001) == (300, "nesterov")
    levels = np.geomspace(0.0125, 5.0, 400)
    steps = [default_schedule(float(level))[0] for level in levels]
    assert all(a >= b for a, b in itertools.pairwise(steps)) and steps[0] == 1000 and steps[-1] == 16


def test_nesterov_reaches_the_optimum_where_plain_steps_stop_short() -> None:
    """An ill-conditioned problem like the dev datasets' (features far inside wide declared bounds): without
    noise, 200 FISTA steps end within 1e-4 of the constrained optimum, 200 plain steps more than 10× further."""
    rng = np.random.default_rng(3)
    X = np.column_stack([0.05 * rng.normal(size=2000) - 0.9, 0.3 * rng.normal(size=2000), rng.uniform(-1, 1, 2000)])
    y = np.where(X @ np.array([40.0, 3.0, 1.0]) + 36.0 + rng.normal(size=2000) > 0, 1.0, -1.0)
    A, loss, radius = augment_intercept(X), make_loss("logistic"), 10.0
    eta = 1.0 / loss.smoothness(augmented_bound(math.sqrt(3.0)))

    def objective(theta: np.ndarray) -> float:
        return float(np.mean(np.logaddexp(0.0, -y * (A @ theta))))

    constraint = {"type": "ineq", "fun": lambda t: radius**2 - t @ t}
    best = minimize(objective, np.zeros(4), method="SLSQP", constraints=[constraint], options={"ftol": 1e-14}).fun
    gaps = {}
    for momentum in ("none", "nesterov"):
        common = {"loss": loss, "clip_norm": 1e9, "sigma": 0.0, "steps": 200, "step_size": eta, "radius": radius}
        theta = dp_gradient_descent(A, y, rng=make_generator(0, data_is_public=True), momentum=momentum, **common)[0]
        assert np.linalg.norm(theta) <= radius
        gaps[momentum] = objective(theta) - best
    assert -1e-6 <= gaps["nesterov"] <= 1e-4 and gaps["none"] > 10 * max(gaps["nesterov"], 1e-6), gaps


def test_projection_and_regulariser_do_not_enlarge_the_one_step_gap() -> None:
    X, y = synthetic(40, 2, "logistic", seed=2)
    A = augment_intercept(X)
    A_prime, y_prime = A.copy(), y.copy()
    A_prime[0], y_prime[0] = np.array([-1e3, 1e3, 1.0]), -y[0]
    loss, C, eta = make_loss("logistic"), 0.7, 0.9
    common = {"loss": loss, "clip_norm": C, "sigma": 0.0, "steps": 1, "step_size": eta, "l2": 0.3, "radius": 1e-3}
    one = dp_gradient_descent(A, y, rng=make_generator(0, data_is_public=True), **common)
    two = dp_gradient_descent(A_prime, y_prime, rng=make_generator(0, data_is_public=True), **common)
    assert np.linalg.norm(one - two) <= eta * 2 * C / 40 * (1 + 1e-12)


# ---------------------------------------------------------------------------------------------------------
# empirical privacy audit
# ---------------------------------------------------------------------------------------------------------

AUDIT_SAMPLES = 400_000
AUDIT_EPSILON, AUDIT_DELTA, AUDIT_STEPS = 1.0, 1e-5, 5


def audit_scores(sigma: float, label: float, resolved: DPGDResolved, seed: int, on_dask=None) -> np.ndarray:
    """First coordinate of θ_T over many independent runs on D (label = +1e6) or D' (label = −1e6); with ``on_dask``
    (the conftest fixture) the rows are stored as partitioned Parquet, a row a partition, and summed by Dask workers.

    Rows: two zero rows (gradient 0) and an adversarial row x = 1 whose label is far outside the declared bound,
    so its squared-loss gradient (z − y)·x is clipped to ∓C at every iterate: the worst case of the 2C bound,
    and T steps add up to a mean shift of T·η·2C/n against noise η·σ·sqrt(T)/n.
    """
    X = np.array([[0.0], [0.0], [1.0]])
    y = np.array([0.0, 0.0, label])
    partitions = None
    if on_dask is not None:  # a row a partition (16 bytes); the label bound admits ±1e6, as the raw rows above
        partitions = on_dask(X, y, PublicMetadata(n=3, d=1, row_norm_bound=1.0, label_bound=1e6), False, 16)
        X, y = np.empty((0, 1)), np.empty(0)
    theta = dp_gradient_descent(
        X, y, loss=make_loss("linear"), clip_norm=resolved.clip_norm, sigma=sigma, steps=resolved.steps,
        step_size=resolved.step_size, radius=resolved.radius, rng=make_generator(seed, data_is_public=True),
        runs=AUDIT_SAMPLES, momentum=resolved.momentum, partitions=partitions,
    )  # fmt: skip
    return theta[:, 0]


@pytest.fixture(scope="module")
def audit_setup() -> DPGDResolved:
    meta = PublicMetadata(n=3, d=1, row_norm_bound=1.0)
    params = {"model": "linear", "fit_intercept": False, "radius": 1e3, "clip_norm": 1.0, "steps": AUDIT_STEPS}
    resolved = SOLVER.resolve(params, meta, target_epsilon=AUDIT_EPSILON, delta=AUDIT_DELTA)
    assert resolved.clip_norm == 1.0 and resolved.epsilon <= AUDIT_EPSILON
    return resolved


@pytest.mark.parametrize("momentum", ["none", "nesterov"])
@pytest.mark.parametrize("variant", ["calibrated", "sensitivity C instead of 2C", "sigma / 3"])
def test_empirical_audit_detects_only_broken_noise(audit_setup: DPGDResolved, variant: str, momentum: str) -> None:
    """Plain and momentum runs (the momentum post-processes past releases, so the same claim must hold)."""
    resolved = audit_setup.model_copy(update={"momentum": momentum})
    claimed = resolved.epsilon
    assert claimed is not None
    sigma = {
        "calibrated": resolved.sigma,
        "sensitivity C instead of 2C": gaussian_sigma(
            AUDIT_EPSILON, AUDIT_DELTA, sensitivity=resolved.clip_norm, count=resolved.steps
        ).noise,
        "sigma / 3": resolved.sigma / 3,
    }[variant]
    result = epsilon_lower_bound(
        audit_scores(sigma, 1e6, resolved, seed=1), audit_scores(sigma, -1e6, resolved, seed=2), delta=AUDIT_DELTA
    )
    if variant == "calibrated":
        assert 0.3 < result.epsilon_lower_bound <= claimed
    else:
        assert result.epsilon_lower_bound > claimed


@pytest.mark.parametrize("variant", ["calibrated", "sensitivity C instead of 2C"])
def test_the_audit_holds_through_the_dask_path(audit_setup: DPGDResolved, variant: str, on_dask) -> None:
    """The audit with the rows in the parquet store, a row a partition, the clipped sums computed by the workers of
    a Dask cluster (privfit.scaleout): the calibrated release stays below its claim, a C-calibrated σ is detected."""
    claimed = audit_setup.epsilon
    assert claimed is not None
    sigma = audit_setup.sigma if variant == "calibrated" else gaussian_sigma(
        AUDIT_EPSILON, AUDIT_DELTA, sensitivity=audit_setup.clip_norm, count=audit_setup.steps).noise  # fmt: skip
    result = epsilon_lower_bound(audit_scores(sigma, 1e6, audit_setup, 1, on_dask),
                                 audit_scores(sigma, -1e6, audit_setup, 2, on_dask), delta=AUDIT_DELTA)  # fmt: skip
    if variant == "calibrated":
        assert 0.3 < result.epsilon_lower_bound <= claimed
    else:
        assert result.epsilon_lower_bound > claimed


@pytest.mark.parametrize("variant", ["calibrated", "sigma / 3"])
def test_the_audit_holds_with_the_exact_sampler(audit_setup: DPGDResolved, variant: str) -> None:
    """The same audit with the noise from the exact lattice sampler (privfit.privacy.noise): the calibrated
    release stays below its claim and a third of the noise is still detected."""
    claimed = audit_setup.epsilon
    assert claimed is not None
    sigma = audit_setup.sigma if variant == "calibrated" else audit_setup.sigma / 3
    with using_sampler("exact"):
        on_d, on_d_prime = audit_scores(sigma, 1e6, audit_setup, 1), audit_scores(sigma, -1e6, audit_setup, 2)
    result = epsilon_lower_bound(on_d, on_d_prime, delta=AUDIT_DELTA)
    if variant == "calibrated":
        assert 0.3 < result.epsilon_lower_bound <= claimed
    else:
        assert result.epsilon_lower_bound > claimed


def test_solver_fit_runs_the_audited_code_path() -> None:
    X, y = synthetic(60, 2, "logistic", seed=4)
    meta = meta_for(X)
    resolved = SOLVER.resolve({"steps": 7, "noise_multiplier": 0.5, "l2": 0.01}, meta)
    result = SOLVER.fit(X, y, meta, resolved, make_generator(9, data_is_public=True))
    core = dp_gradient_descent(
        augment_intercept(X), y, loss=make_loss("logistic"), clip_norm=resolved.clip_norm, sigma=resolved.sigma,
        steps=7, step_size=resolved.step_size, radius=resolved.radius, l2=0.01,
        rng=make_generator(9, data_is_public=True), momentum=resolved.momentum,
    )[0]  # fmt: skip
    np.testing.assert_array_equal(np.array([*result.coefficients, result.intercept]), core)
    # the vectorised runs of the audit compute the same step: with one step, run 0 sees the same noise draws (to
    # float32 accuracy: the float32 kernels of one θ and of several θ at once round differently)
    common = {"loss": make_loss("logistic"), "clip_norm": resolved.clip_norm, "sigma": resolved.sigma, "steps": 1}
    common |= {"step_size": resolved.step_size, "radius": resolved.radius, "l2": 0.01}
    single = dp_gradient_descent(augment_intercept(X), y, rng=make_generator(9, data_is_public=True), **common)
    batched = dp_gradient_descent(augment_intercept(X), y, rng=make_generator(9, data_is_public=True), runs=4, **common)
    np.testing.assert_allclose(batched[0], single[0], rtol=1e-6, atol=1e-9)


# ---------------------------------------------------------------------------------------------------------
# Adult utility
# ---------------------------------------------------------------------------------------------------------


def test_adult_logistic_at_epsilon_1_reaches_083() -> None:
    from privfit.datasets import adult_schema, parse_and_encode

    paths = [ADULT_DIR / "adult.data", ADULT_DIR / "adult.test"]
    missing = [str(p.resolve()) for p in paths if not p.is_file()]
    if missing:
        pytest.skip(f"UCI Adult data not found at {missing}")
    train = parse_and_encode(paths[0].read_bytes(), adult_schema(1.0, 1e-6))
    test = parse_and_encode(paths[1].read_bytes(), adult_schema(1.0, 1e-6, test_file=True))
    meta = PublicMetadata.from_dataset(train)
    plan = SOLVER.plan({"model": "logistic"}, meta, target_epsilon=1.0, delta=1e-6)
    assert plan.cost.epsilon(1e-6).epsilon <= 1.0
    accuracies = []
    for seed in range(3):  # Adult is public: a seeded generator is allowed
        result = SOLVER.fit(train.X, train.y, meta, plan.resolved, make_generator(seed, data_is_public=True))
        accuracies.append(float(np.mean(result.predict(test.X) == test.y)))
    assert np.mean(accuracies) >= 0.83, accuracies


# ---------------------------------------------------------------------------------------------------------
# progress, cancellation, results
# ---------------------------------------------------------------------------------------------------------


def small_problem(steps: int = 250) -> tuple[np.ndarray, np.ndarray, PublicMetadata, DPGDResolved]:
    X, y = synthetic(30, 2, "logistic", seed=1)
    meta = meta_for(X)
    return X, y, meta, SOLVER.resolve({"steps": steps, "noise_multiplier": 1.0}, meta)


def test_progress_is_monotone_in_unit_interval_and_ends_at_one() -> None:
    X, y, meta, resolved = small_problem()
    seen: list[float] = []
    SOLVER.fit(X, y, meta, resolved, make_generator(0, data_is_public=True), progress=seen.append)
    assert seen and seen[-1] == 1.0
    assert all(0.0 <= f <= 1.0 for f in seen)
    assert all(b > a for a, b in itertools.pairwise(seen))
    assert len(seen) <= 101


def test_progress_does_not_depend_on_the_data() -> None:
    X, y, meta, resolved = small_problem(steps=37)
    runs = []
    for labels in (y, -y):
        seen: list[float] = []
        result = SOLVER.fit(X, labels, meta, resolved, make_generator(0, data_is_public=True), progress=seen.append)
        runs.append((seen, result.metadata))
    assert runs[0] == runs[1]  # same progress sequence and the same (data-independent) metadata


def test_should_stop_raises_fit_cancelled() -> None:
    X, y, meta, resolved = small_problem(steps=50)
    with pytest.raises(FitCancelled) as immediately:
        SOLVER.fit(X, y, meta, resolved, make_generator(0, data_is_public=True), should_stop=lambda: True)
    assert immediately.value.steps_completed == 0 and immediately.value.total_steps == 50
    calls = iter(range(1000))
    with pytest.raises(FitCancelled) as later:
        SOLVER.fit(X, y, meta, resolved, make_generator(0, data_is_public=True), should_stop=lambda: next(calls) >= 3)
    assert later.value.steps_completed == 3


def test_fit_result_is_json_serialisable_with_data_independent_metadata() -> None:
    X, y, meta, resolved = small_problem(steps=20)
    meta = PublicMetadata(n=meta.n, d=meta.d, row_norm_bound=1.0, feature_names=("a", "b"))
    resolved = SOLVER.resolve({"steps": 20}, meta, target_epsilon=1.0, delta=1e-5)
    result = SOLVER.fit(X, y, meta, resolved, make_generator(0, data_is_public=True))
    payload = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert len(payload["coefficients"]) == 2 and isinstance(payload["intercept"], float)
    assert payload["feature_names"] == ["a", "b"]
    assert payload["metadata"] == {**resolved.model_dump(mode="json"), "noise_sampler": describe_sampler()}
    for key in ("sigma", "steps", "step_size", "clip_norm", "radius", "noise_multiplier", "epsilon"):
        assert key in payload["metadata"]
    no_intercept = SOLVER.resolve({"steps": 5, "fit_intercept": False, "noise_multiplier": 1.0}, meta)
    result = SOLVER.fit(X, y, meta, no_intercept, make_generator(0, data_is_public=True))
    assert result.intercept is None and len(result.coefficients) == 2


def test_suffix_average_output_stays_in_ball_and_differs_from_last() -> None:
    X, y, meta, _ = small_problem()
    results = {}
    for output in ("last", "suffix_average"):
        resolved = SOLVER.resolve({"steps": 40, "noise_multiplier": 5.0, "radius": 0.5, "output": output}, meta)
        result = SOLVER.fit(X, y, meta, resolved, make_generator(3, data_is_public=True))
        results[output] = np.array([*result.coefficients, result.intercept])
        assert np.linalg.norm(results[output]) <= 0.5 * (1 + 1e-12)
    assert not np.allclose(results["last"], results["suffix_average"])


def test_fit_rejects_wrong_shapes_without_quoting_data() -> None:
    X, y, meta, resolved = small_problem(steps=3)
    with pytest.raises(SolverParameterError) as bad_x:
        SOLVER.fit(X[:, :1], y, meta, resolved, make_generator(0, data_is_public=True))
    assert bad_x.value.parameter == "X"
    with pytest.raises(SolverParameterError) as bad_y:
        SOLVER.fit(X, y[:-1], meta, resolved, make_generator(0, data_is_public=True))
    assert bad_y.value.parameter == "y"
    with pytest.raises(SolverParameterError) as bad_rng:
        SOLVER.fit(X, y, meta, resolved, np.random.RandomState(0))  # type: ignore[arg-type]
    assert bad_rng.value.parameter == "rng"


def test_progress_reporter_throttles_and_finishes() -> None:
    seen: list[float] = []
    reporter = ProgressReporter(10_000, seen.append)
    for step in range(1, 10_001):
        reporter.report(step)
    reporter.finish()
    assert len(seen) == 100 and seen[-1] == 1.0


# ---------------------------------------------------------------------------------------------------------
# parameter validation
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"steps": 0}, "steps"),
        ({"steps": 10**6}, "steps"),
        ({"steps": "100"}, "steps"),
        ({"steps": 1.5}, "steps"),
        ({"radius": -1.0}, "radius"),
        ({"radius": float("inf")}, "radius"),
        ({"l2": -0.1}, "l2"),
        ({"step_size": float("nan")}, "step_size"),
        ({"clip_norm": 0.0}, "clip_norm"),
        ({"noise_multiplier": -2.0}, "noise_multiplier"),
        ({"fit_intercept": "yes"}, "fit_intercept"),
        ({"model": "poisson"}, "model"),
        ({"output": "best"}, "output"),
        ({"huber_delta": 0.5}, "huber_delta"),  # the default model is logistic
        ({"model": "huber", "hinge_smoothing": 0.5}, "hinge_smoothing"),
        ({"model": "svm", "hinge_smoothing": 2.0}, "hinge_smoothing"),
        ({"learning_rate": 0.1}, "learning_rate"),
    ],
)
def test_bad_params_name_the_field(params: dict, field: str) -> None:
    meta = PublicMetadata(n=10, d=2, row_norm_bound=1.0)
    with pytest.raises(ParameterError) as error:
        SOLVER.resolve(params, meta, target_epsilon=1.0, delta=1e-6)
    assert error.value.parameter == field
    assert isinstance(error.value, SolverParameterError) and error.value.errors[0]["field"] == field


def test_params_must_be_an_object_and_defaults_need_nothing() -> None:
    with pytest.raises(ParameterError) as error:
        SOLVER.parse_params([1, 2])  # type: ignore[arg-type]
    assert error.value.parameter == "params"
    assert SOLVER.parse_params(None) == SOLVER.parse_params({})
    assert SOLVER.parse_params({"l2": 1}).l2 == 1.0  # an integer is a valid number


def test_public_metadata_validation() -> None:
    for kwargs, field in [
        ({"n": 0, "d": 2, "row_norm_bound": 1.0}, "n"),
        ({"n": 5, "d": 2, "row_norm_bound": float("nan")}, "row_norm_bound"),
        ({"n": 5, "d": 2, "row_norm_bound": 1.0, "label_bound": -1.0}, "label_bound"),
        ({"n": 5, "d": 2, "row_norm_bound": 1.0, "feature_names": ("a",)}, "feature_names"),
    ]:
        with pytest.raises(ParameterError) as error:
            PublicMetadata(**kwargs)
        assert error.value.parameter == field
