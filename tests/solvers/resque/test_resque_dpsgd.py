"""The ``resque_dpsgd`` solver (spec ``seed-004-resque.md`` §6.2): its cost is the sampled-Gaussian curve of its
sampling mode, equal to dp_accounting's for the same events; calibration; the spec's defaults; the clipped weighted
subgradients bound each row's influence; the noiseless path optimises the smoothed objective; progress and
cancellation. The estimator itself is tested in ``test_resque_estimator.py``, the privacy audit in
``test_resque_dpsgd_audit.py``."""

from __future__ import annotations

import math

import dp_accounting as dpa
import numpy as np
import pytest
from dp_accounting.rdp import RdpAccountant

from privfit.privacy import DEFAULT_GRID, gaussian_sigma, make_generator
from privfit.solvers import FitCancelled, PublicMetadata, SolverParameterError, get_solver
from privfit.solvers.baselines.dp_sgd import batch_noise_cost
from privfit.solvers.geometry import clip_rows
from privfit.solvers.resque.dpsgd import project_step, resque_dp_sgd
from privfit.solvers.resque.estimator import make_margin_loss

SOLVER = get_solver("resque_dpsgd")
ORDERS = DEFAULT_GRID.orders
Rel = dpa.NeighboringRelation
META = PublicMetadata(n=10_000, d=4, row_norm_bound=1.0)
PARAMS = {"batch_size": 100, "epochs": 3}


def resolved_for(sampling: str, **extra: object):  # type: ignore[no-untyped-def]
    return SOLVER.resolve({**PARAMS, "sampling": sampling, **extra}, META, target_epsilon=1.0, delta=1e-6)


def dpa_curve(event: dpa.DpEvent, relation: dpa.NeighboringRelation, orders: np.ndarray, count: int) -> np.ndarray:
    accountant = RdpAccountant(list(orders), relation)
    accountant.compose(event, count)
    return np.asarray(accountant.rdp, dtype=np.float64)


# ---------------------------------------------------------------------------------------------------------
# accounting: the sampled Gaussian events of dp_accounting
# ---------------------------------------------------------------------------------------------------------


def test_poisson_cost_is_the_replace_one_triangle_rule_on_dp_accountings_sampled_gaussian() -> None:
    """T · min((α − ½)/(α − 1)·ε_AR(2α) + ε_AR(2α − 1), 4α/(2z²)), ε_AR = dp_accounting's PoissonSampledDpEvent
    curve (add/remove, capped by the un-sampled Gaussian) with z = σ/C."""
    r = resolved_for("poisson")
    q, z = r.sampling_rate, r.sigma / r.clip_norm
    assert (q, r.steps) == (0.01, 300)
    event = dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(z))

    def add_remove(orders: np.ndarray) -> np.ndarray:
        return np.minimum(dpa_curve(event, Rel.ADD_OR_REMOVE_ONE, orders, 1), orders / (2 * z**2))

    a = ORDERS
    expected = r.steps * np.minimum(
        (a - 0.5) / (a - 1.0) * add_remove(2 * a) + add_remove(2 * a - 1), 4 * a / (2 * z**2)
    )
    np.testing.assert_allclose(SOLVER.cost(r, META).rdp, expected, rtol=1e-4)


def test_fixed_size_cost_is_dp_accountings_without_replacement_event_under_replace_one() -> None:
    r = resolved_for("fixed_size")
    event = dpa.SampledWithoutReplacementDpEvent(META.n, r.batch_size, dpa.GaussianDpEvent(r.sigma / (2 * r.clip_norm)))
    np.testing.assert_allclose(SOLVER.cost(r, META).rdp, dpa_curve(event, Rel.REPLACE_ONE, ORDERS, r.steps), rtol=1e-4)


def test_shuffle_cost_is_dp_accountings_gaussian_once_per_epoch() -> None:
    r = resolved_for("shuffle")
    event = dpa.GaussianDpEvent(r.sigma / (2 * r.clip_norm))
    np.testing.assert_allclose(SOLVER.cost(r, META).rdp, dpa_curve(event, Rel.REPLACE_ONE, ORDERS, r.epochs), rtol=1e-9)


@pytest.mark.parametrize("sampling", ["poisson", "fixed_size", "shuffle"])
@pytest.mark.parametrize("model", ["svm", "absolute", "quantile"])
def test_calibration_meets_the_target_and_equals_dp_sgds_accountant(sampling: str, model: str) -> None:
    for target in (0.5, 2.0):
        r = SOLVER.resolve({**PARAMS, "sampling": sampling, "model": model}, META, target_epsilon=target, delta=1e-6)
        cost = SOLVER.cost(r, META)
        assert target * 0.999 <= cost.epsilon(1e-6).epsilon <= target == r.target_epsilon
        shared = batch_noise_cost(sampling, rate=r.sampling_rate, steps=r.steps, epochs=r.epochs, sigma=r.sigma,
                                  clip_norm=r.clip_norm, coordinates=META.d + 1)  # fmt: skip
        np.testing.assert_array_equal(cost.rdp, shared.rdp)


def test_explicit_noise_multiplier_is_sigma_over_c() -> None:
    r = SOLVER.resolve({**PARAMS, "noise_multiplier": 1.3}, META)
    assert r.sigma == pytest.approx(1.3 * r.clip_norm) and r.epsilon is None
    with pytest.raises(SolverParameterError, match="not both"):
        SOLVER.resolve({**PARAMS, "noise_multiplier": 1.3}, META, target_epsilon=1.0, delta=1e-6)


# ---------------------------------------------------------------------------------------------------------
# defaults and validation (spec §6.2 table)
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "batch", "epochs", "factor"),
    [(1_000, 64, 10, 1), (40_000, 200, 10, 1), (200_000, 447, 100, 16), (50_000_000, 4096, 81, 16)],
)
def test_default_batch_size_epochs_smoothing_clip_and_step(n: int, batch: int, epochs: int, factor: float) -> None:
    """The spec's defaults; where dp_gd's public noise level ρ = σ₂₀₀(2B̃)·sqrt(d)/(n·B̃) < 0.01 (the two
    large n at ε = 1), 100 epochs (capped at T ≤ 1e6: 81 at n = 5e7) and 16× the step."""
    meta = PublicMetadata(n=n, d=9, row_norm_bound=2.0)
    bound = math.sqrt(2.0**2 + 1)
    level = gaussian_sigma(1.0, 1e-6, sensitivity=2 * bound, count=200).noise * math.sqrt(10) / (n * bound)
    assert (level < 0.01) == (factor == 16)
    for model, lipschitz_phi, radius in (("svm", 1.0, 10.0), ("quantile", 0.7, 1.0)):
        params = {"model": model} | ({"quantile_tau": 0.3} if model == "quantile" else {})
        r = SOLVER.resolve(params, meta, target_epsilon=1.0, delta=1e-6)
        assert (r.batch_size, r.epochs, r.radius) == (batch, epochs, radius)
        assert r.noise_level == pytest.approx(level, rel=1e-12)
        assert r.design_norm_bound == pytest.approx(bound) and r.lipschitz == pytest.approx(lipschitz_phi * bound)
        assert r.clip_norm == r.lipschitz and r.block_length == 1
        expected_rho = radius * max(1 / math.sqrt(n), math.sqrt(10 * math.log(1e6)) / n)
        assert r.smoothing == pytest.approx(expected_rho)
        gradient_scale = r.lipschitz + r.sigma * math.sqrt(10) / r.batch_size
        assert r.step_size == pytest.approx(factor * radius / (gradient_scale * math.sqrt(r.steps)))
        assert r.output == "suffix_average"
    blocked = SOLVER.resolve({"model": "svm", "block_length": 8}, meta, target_epsilon=1.0, delta=1e-6)
    assert blocked.clip_norm == pytest.approx(2 * blocked.lipschitz)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"model": "linear"}, "model"),
        ({"model": "svm", "quantile_tau": 0.2}, "quantile_tau"),
        ({"model": "quantile", "quantile_tau": 1.0}, "quantile_tau"),
        ({"model": "huber", "huber_delta": 0.0}, "huber_delta"),
        ({"batch_size": 20_000}, "batch_size"),
        ({"block_length": 0}, "block_length"),
    ],
)
def test_bad_parameters_are_refused_naming_the_field(params: dict, field: str) -> None:
    with pytest.raises(SolverParameterError) as info:
        SOLVER.plan(params, META, target_epsilon=1.0, delta=1e-6)
    assert info.value.parameter == field


# ---------------------------------------------------------------------------------------------------------
# the loop
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("block_length", [1, 5])
def test_one_row_moves_a_step_by_at_most_eta_2c_over_the_batch_size(block_length: int) -> None:
    """Replace-one sensitivity: with the same generator (same batches, ξ and noise), datasets differing in one row
    give steps that differ by at most η·2C/m_b — the weights are clipped with the subgradients."""
    rng = np.random.default_rng(3)
    n, d = 40, 3
    X = rng.normal(size=(n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = np.sign(rng.normal(size=n))
    X2, y2 = X.copy(), y.copy()
    X2[0] = -X[0]  # (−x, y): the hinge sees the opposite margin
    kwargs = {"loss": make_margin_loss("svm"), "smoothing": 0.5, "block_length": block_length, "clip_norm": 0.7,
              "sigma": 0.0, "batch_size": n, "sampling": "fixed_size", "epochs": 1, "step_size": 0.3,
              "radius": 100.0, "output": "last"}  # fmt: skip
    a = resque_dp_sgd(X, y, rng=make_generator(1, data_is_public=True), **kwargs)
    b = resque_dp_sgd(X2, y2, rng=make_generator(1, data_is_public=True), **kwargs)
    assert np.linalg.norm(a - b) <= 0.3 * 2 * 0.7 / n * (1 + 1e-12)
    assert np.linalg.norm(a - b) > 0.0


def test_the_block_projection_lands_in_both_balls() -> None:
    """Π onto B(R) ∩ B_x̄(ρ/4) by alternating projections: the result is in both balls (post-processing)."""
    rng = np.random.default_rng(4)
    centers = rng.normal(size=(200, 3))
    centers = 0.9 * centers / np.linalg.norm(centers, axis=1, keepdims=True)  # x̄ ∈ B(1)
    points = 3 * rng.normal(size=(200, 3))
    projected = project_step(points, 1.0, centers, 0.2)
    assert np.all(np.linalg.norm(projected, axis=1) <= 1.0 * (1 + 1e-9))
    assert np.all(np.linalg.norm(projected - centers, axis=1) <= 0.2 * (1 + 1e-9))
    inside = centers + 0.05
    np.testing.assert_allclose(project_step(inside, 10.0, centers, 0.2), inside)
    np.testing.assert_allclose(project_step(points, 1.0, None, 0.2), clip_rows(points, 1.0))


NOISELESS_CASES = [("svm", "accuracy", 0.97), ("logistic", "accuracy", 0.97), ("absolute", "mae", 0.12),
                   ("quantile", "mae", 0.12)]  # fmt: skip


@pytest.mark.parametrize(("model", "metric", "threshold"), NOISELESS_CASES)
def test_noiseless_path_fits_the_smoothed_objective(model: str, metric: str, threshold: float) -> None:
    rng = np.random.default_rng(7)
    n, d = 4000, 3
    X = rng.normal(size=(n, d)) / math.sqrt(d)
    w = np.array([1.0, -0.5, 0.25])
    y = np.sign(X @ w) if metric == "accuracy" else np.clip(0.5 * X @ w + 0.05 * rng.laplace(size=n), -1, 1)
    theta = resque_dp_sgd(X, y, loss=make_margin_loss(model), smoothing=0.01, block_length=1, clip_norm=10.0,
                          sigma=0.0, batch_size=100, sampling="poisson", epochs=5, step_size=0.5, radius=10.0,
                          rng=make_generator(8, data_is_public=True))[0]  # fmt: skip
    score = np.mean(np.sign(X @ theta) == y) if metric == "accuracy" else np.mean(np.abs(X @ theta - y))
    assert score >= threshold if metric == "accuracy" else score <= threshold


def test_fit_releases_public_settings_and_reports_progress_then_cancels() -> None:
    rng = np.random.default_rng(9)
    n, d = 2000, 3
    X = rng.normal(size=(n, d)) / 2
    X /= np.maximum(1, np.linalg.norm(X, axis=1, keepdims=True))
    y = np.sign(X[:, 0] + 0.1)
    meta = PublicMetadata(n=n, d=d, row_norm_bound=1.0)
    plan = SOLVER.plan({"model": "svm"}, meta, target_epsilon=1.0, delta=1e-6)
    progress: list[float] = []
    result = SOLVER.fit(X, y, meta, plan.resolved, make_generator(1, data_is_public=True), progress=progress.append)
    assert result.model == "svm" and result.intercept is not None and len(result.coefficients) == d
    assert np.mean(result.predict(X) == y) > 0.9
    assert progress[-1] == 1.0 and progress == sorted(progress) and len(progress) <= 101
    assert set(result.metadata) == set(plan.resolved.model_dump(mode="json")) | {"noise_sampler"}
    with pytest.raises(FitCancelled):
        SOLVER.fit(X, y, meta, plan.resolved, make_generator(1, data_is_public=True), should_stop=lambda: True)
