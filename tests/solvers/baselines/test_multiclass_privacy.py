"""Privacy of the multinomial (categorical-label) fits of dp_gd and dp_sgd (issue 22 §3).

The claims tested: the loss's public constants G = √2·B̃ and β = B̃²/2 (:class:`MultinomialLogisticLoss`); every
clipped per-example gradient MATRIX has Frobenius norm ≤ C exactly, also for adversarial rows; the clipped sum has
replace-one sensitivity ≤ 2C over random and adversarial neighbouring pairs; the plan's σ is the Gaussian
calibration of T steps at sensitivity 2C (golden value, and dp_accounting's RDP of the same composition); and an
empirical audit on neighbouring multiclass datasets passes for the real mechanism and detects two broken variants
(each class's gradient row clipped to C separately, whose Frobenius norm reaches √k·C; and σ/2).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfit.privacy import DEFAULT_GRID, PrivacyCost, gaussian_rdp, gaussian_sigma, gdp_gaussian_sigma, make_generator
from privfit.privacy.audit import epsilon_lower_bound
from privfit.privacy.noise import gaussian_releases, using_sampler
from privfit.solvers.base import PublicMetadata, SolverParameterError
from privfit.solvers.baselines.dp_gd import (
    MULTICLASS_CLIP,
    clipped_gradient_sum,
    dp_gradient_descent,
    multiclass_schedule,
)
from privfit.solvers.geometry import clip_rows
from privfit.solvers.losses import MultinomialLogisticLoss
from privfit.solvers.registry import get_solver

WINE = PublicMetadata(n=3918, d=11, row_norm_bound=math.sqrt(11), label_bound=6.0, classes=tuple("3456789"))


def adversarial_rows(rng: np.random.Generator, n: int, d: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of every scale (zero, tiny, near a unit bound, far beyond it) and labels, some outside 0..k−1."""
    X = rng.standard_normal((n, d)) * rng.choice([1e-300, 1e-3, 1.0, 1e3, 1e100], size=(n, 1))
    X[0] = 0.0
    y = rng.integers(0, k, size=n).astype(float)
    y[:5] = [-3.0, k + 2.0, 0.4, np.nan, np.inf]  # mapped to SOME class: the bound holds for any label
    return X, y


def test_the_public_constants_bound_the_gradients_and_the_hessian() -> None:
    rng = make_generator(0, data_is_public=True)
    loss, k, d = MultinomialLogisticLoss(5), 5, 4
    assert loss.lipschitz(2.0) >= 2.0 * math.sqrt(2) and loss.smoothness(2.0) == 2.0
    for _ in range(200):
        Theta = rng.standard_normal((k, d)) * rng.choice([0.1, 3.0, 30.0])
        x = rng.standard_normal(d)
        x *= 2.0 / np.linalg.norm(x)
        y = np.array([float(rng.integers(k))])
        gradient = loss.per_example_gradients(Theta, x[None], y)[0]
        assert np.linalg.norm(gradient) <= loss.lipschitz(2.0) * (1 + 1e-12)  # tight: p on another class, ‖x‖ = 2
        p = loss.probabilities(Theta, x[None])[0]
        hessian = np.kron(np.diag(p) - np.outer(p, p), np.outer(x, x))
        assert np.linalg.eigvalsh(hessian).max() <= loss.smoothness(2.0) * (1 + 1e-12)
        # the gradient is the derivative of the loss (central differences)
        step = rng.standard_normal((k, d)) * 1e-6
        change = loss.value(Theta + step, x[None], y)[0] - loss.value(Theta - step, x[None], y)[0]
        assert change == pytest.approx(2 * float(np.sum(gradient * step)), rel=1e-4, abs=1e-12)


def test_every_clipped_per_example_gradient_matrix_has_frobenius_norm_at_most_c() -> None:
    rng = make_generator(1, data_is_public=True)
    k, d = 7, 6
    loss = MultinomialLogisticLoss(k)
    X, y = adversarial_rows(rng, 300, d, k)
    for C in (1e-6, 0.3, 1.2247448713915894, 5.0):
        for scale in (0.0, 1.0, 1e6):
            theta = (rng.standard_normal(k * d) * scale)[None]
            for i in range(X.shape[0]):
                summand = clipped_gradient_sum(loss, theta, X[i : i + 1], y[i : i + 1], C)[0]
                assert np.linalg.norm(summand) <= C, (C, scale, i)


def test_the_clipped_sum_has_replace_one_sensitivity_at_most_2c() -> None:
    rng = make_generator(2, data_is_public=True)
    k, d, C = 4, 5, 0.7
    loss = MultinomialLogisticLoss(k)
    worst = 0.0
    for trial in range(300):
        X, y = adversarial_rows(rng, 40, d, k) if trial % 2 else (rng.standard_normal((40, d)), rng.integers(0, k, 40))
        X2, y2 = X.copy(), np.asarray(y, dtype=float).copy()
        X2[7] = -X[7] * rng.choice([1.0, 1e6])  # the neighbour: row 7 replaced (opposite direction, other class)
        if trial % 3:  # another class; else the same class, which at θ = 0 makes the two summands opposite: 2C
            y2[7] = (y2[7] + 1 + rng.integers(k - 1)) % k
        theta = rng.standard_normal(k * d) * (0.0 if trial % 3 == 0 else rng.choice([1.0, 100.0]))
        difference = clipped_gradient_sum(loss, theta, X, y, C) - clipped_gradient_sum(loss, theta, X2, y2, C)
        worst = max(worst, float(np.linalg.norm(difference)))
        assert worst <= 2 * C
    assert worst > 1.9 * C  # the adversarial pairs reach the bound


def test_the_multiclass_dp_gd_plan_has_the_golden_sigma_and_the_gaussian_cost() -> None:
    solver = get_solver("dp_gd")
    plan = solver.plan({"model": "logistic"}, WINE, target_epsilon=1.0, delta=1e-6)
    r = plan.resolved
    bound = math.sqrt(11 + 1)
    assert r.classes == list("3456789")
    assert r.lipschitz == pytest.approx(math.sqrt(2) * bound) and r.lipschitz >= math.sqrt(2) * bound
    assert r.smoothness == pytest.approx(bound**2 / 2)
    assert r.clip_norm == pytest.approx(MULTICLASS_CLIP * math.sqrt(2) * bound)
    assert r.sensitivity == 2 * r.clip_norm
    assert r.noise_level == pytest.approx(0.10598824566540338, rel=1e-9)  # ρ of eq. (4) with dimension k·d'
    assert (r.steps, r.momentum, r.output) == (944, "none", "last")  # ⌈100/ρ⌉ plain steps
    assert r.step_size == pytest.approx(2 / r.smoothness)
    # golden (2026-12-07): the exact Gaussian curve (GDP); 340.9919543684326 by the RDP conversion before
    assert r.sigma == pytest.approx(317.947436181725, rel=1e-9)
    dimension = 7 * 12  # k·d', the noise coordinates of each step
    calibration = gdp_gaussian_sigma(1.0, 1e-6, sensitivity=r.sensitivity, count=r.steps, coordinates=dimension)
    assert r.sigma == calibration.noise
    assert np.allclose(plan.cost.rdp, r.steps * gaussian_rdp(DEFAULT_GRID, sigma=r.sigma, sensitivity=r.sensitivity))
    assert 0.99 < plan.cost.epsilon(1e-6).epsilon <= 1.0
    outlook = solver.outlook(r, WINE)
    assert outlook is not None and outlook.noise_norm > 0


def test_the_multiclass_cost_matches_dp_accounting() -> None:
    dpa = pytest.importorskip("dp_accounting")
    from dp_accounting.rdp import rdp_privacy_accountant

    r = get_solver("dp_gd").resolve({"model": "logistic"}, WINE, target_epsilon=1.0, delta=1e-6)
    accountant = rdp_privacy_accountant.RdpAccountant(list(DEFAULT_GRID.orders))
    accountant.compose(dpa.GaussianDpEvent(r.sigma / r.sensitivity), r.steps)
    cost = get_solver("dp_gd").cost(r, WINE)
    curve = PrivacyCost(cost.rdp, DEFAULT_GRID).epsilon(1e-6).epsilon  # the RDP curve alone
    assert curve == pytest.approx(accountant.get_epsilon(1e-6), rel=1e-6)
    pld = dpa.pld.PLDAccountant(value_discretization_interval=1e-4)
    pld.compose(dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(r.sigma / r.sensitivity), r.steps))
    ours = cost.epsilon(1e-6).epsilon  # the exact Gaussian curve's
    assert ours <= pld.get_epsilon(1e-6) <= ours * (1 + 2e-3)


def test_dp_sgd_resolves_the_multinomial_model_with_the_same_constants() -> None:
    r = get_solver("dp_sgd").resolve({"model": "logistic"}, WINE, target_epsilon=1.0, delta=1e-6)
    assert r.classes == list("3456789") and r.lipschitz == pytest.approx(math.sqrt(2) * math.sqrt(12))
    assert get_solver("dp_sgd").cost(r, WINE).epsilon(1e-6).epsilon <= 1.0


def test_a_stored_multiclass_setting_is_refused_for_other_classes() -> None:
    solver = get_solver("dp_gd")
    r = solver.resolve({"model": "logistic"}, WINE, target_epsilon=1.0, delta=1e-6)
    other = PublicMetadata(n=WINE.n, d=WINE.d, row_norm_bound=WINE.row_norm_bound, label_bound=6.0,
                           classes=tuple("abcdefg"))  # fmt: skip
    with pytest.raises(SolverParameterError, match="classes"):
        solver.cost(r, other)


# ---------------------------------------------------------------------------------------------------------
# empirical audit on neighbouring multiclass datasets
# ---------------------------------------------------------------------------------------------------------

SAMPLES = 300_000
EPSILON, DELTA = 1.0, 1e-5
K, D, C = 4, 2, 0.05


def per_class_clipped_sum(loss: MultinomialLogisticLoss, theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """BROKEN: each class's gradient row (p_j − e_{y,j})·x clipped to C separately (Frobenius norm up to √k·C)."""
    gradients = loss.per_example_gradients(loss.as_matrix(theta, X.shape[1]), X, y)
    return np.stack([clip_rows(g, C) for g in gradients]).sum(axis=0).ravel()


def neighbours() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """D and D' (30 rows within ‖x‖ ≤ 1) differ in the last row: x = (1, 0) and its opposite (−1, 0), same class:
    at θ = 0 (p uniform) the two clipped gradients are opposite, the worst case 2C."""
    rng = make_generator(5, data_is_public=True)
    X = clip_rows(rng.uniform(-1, 1, size=(30, D)), 1.0)
    y = rng.integers(0, K, size=30).astype(float)
    X[-1] = [1.0, 0.0]
    X2, y2 = X.copy(), y.copy()
    X2[-1] = [-1.0, 0.0]
    return X, y, X2, y2


@pytest.mark.parametrize("variant", ["real", "per_class_clipping", "half_sigma"])
def test_audit_of_one_multiclass_gradient_step_on_neighbouring_datasets(variant) -> None:
    """One noisy clipped gradient sum at θ = 0, σ calibrated for (ε, δ) at sensitivity 2C: the real mechanism's ε
    lower bound stays ≤ ε; both broken variants exceed it. The statistic is the projection of the release on the
    direction in which the two (possibly broken) sums differ, the most powerful test for two Gaussians."""
    loss = MultinomialLogisticLoss(K)
    X, y, X2, y2 = neighbours()
    theta = np.zeros(K * X.shape[1])
    if variant == "per_class_clipping":
        s, s2 = per_class_clipped_sum(loss, theta, X, y), per_class_clipped_sum(loss, theta, X2, y2)
        assert np.linalg.norm(s - s2) > 2 * C * 1.5  # the broken clipping exceeds the claimed sensitivity
    else:
        s, s2 = clipped_gradient_sum(loss, theta, X, y, C), clipped_gradient_sum(loss, theta, X2, y2, C)
        assert np.linalg.norm(s - s2) == pytest.approx(2 * C, rel=1e-9)
    sigma = gaussian_sigma(EPSILON, DELTA, sensitivity=2 * C).noise / (2.0 if variant == "half_sigma" else 1.0)
    rng = make_generator(6, data_is_public=True)
    u = (s - s2) / np.linalg.norm(s - s2)
    release = s + sigma * rng.standard_normal((SAMPLES, s.size))
    release2 = s2 + sigma * rng.standard_normal((SAMPLES, s.size))
    bound = epsilon_lower_bound(release @ u, release2 @ u, delta=DELTA).epsilon_lower_bound
    if variant == "real":
        assert 0.3 < bound <= EPSILON
    else:
        assert bound > EPSILON


EXACT_SAMPLES = SAMPLES  # as the float audit: fewer samples leave per-class clipping at the edge (1.06 at 10⁵)


@pytest.mark.parametrize("variant", ["real", "per_class_clipping"])
def test_audit_of_one_multiclass_gradient_step_with_the_exact_sampler(variant) -> None:
    """The same step with its noise from the exact sampler, as dp_gd draws it (:func:`gaussian_releases`: the lattice
    Gaussian of L2 sensitivity 2C, public bound n·C; one vectorised draw per world): the real mechanism stays ≤ ε,
    per-class clipping (Frobenius norm up to √k·C, beyond the 2C the lattice and σ are sized for) is still detected.
    Measured: 0.55 (real) and 1.28 (per-class clipping) with 3·10⁵ samples per world.
    """
    loss = MultinomialLogisticLoss(K)
    X, y, X2, y2 = neighbours()
    theta = np.zeros(K * X.shape[1])
    if variant == "per_class_clipping":
        s, s2 = per_class_clipped_sum(loss, theta, X, y), per_class_clipped_sum(loss, theta, X2, y2)
    else:
        s, s2 = clipped_gradient_sum(loss, theta, X, y, C), clipped_gradient_sum(loss, theta, X2, y2, C)
    sigma = gaussian_sigma(EPSILON, DELTA, sensitivity=2 * C).noise
    rng = make_generator(7, data_is_public=True)
    u = (s - s2) / np.linalg.norm(s - s2)
    with using_sampler("exact"):
        release, release2 = (
            gaussian_releases(rng, sigma=sigma, l2_sensitivity=2 * C, shape=(EXACT_SAMPLES, s.size), count=1,
                              bound=X.shape[0] * C).release(np.broadcast_to(sums, (EXACT_SAMPLES, s.size)))
            for sums in (s, s2)
        )  # fmt: skip
    bound = epsilon_lower_bound(release @ u, release2 @ u, delta=DELTA).epsilon_lower_bound
    if variant == "real":
        assert 0.3 < bound <= EPSILON
    else:
        assert bound > EPSILON


def test_the_released_theta_of_a_multiclass_run_is_in_the_frobenius_ball() -> None:
    rng = make_generator(7, data_is_public=True)
    X, y, _, _ = neighbours()
    theta = dp_gradient_descent(X, y, loss=MultinomialLogisticLoss(K), clip_norm=C, sigma=50.0, steps=5,
                                step_size=10.0, radius=0.5, rng=rng, runs=3)  # fmt: skip
    assert theta.shape == (3, K * X.shape[1]) and np.all(np.linalg.norm(theta, axis=1) <= 0.5)


def test_the_multiclass_solvers_are_exactly_those_that_declare_it() -> None:
    from privfit.solvers.base import MULTICLASS_SOLVERS
    from privfit.solvers.registry import list_solvers

    assert {s.name for s in list_solvers() if s.multiclass} == set(MULTICLASS_SOLVERS)


def test_the_noisy_steps_stay_in_the_identifiable_subspace() -> None:
    """The noisy sums are projected onto {Σ_j θ_j = 0} (post-processing: softmax ignores a shift common to all
    classes), so the released class rows sum to zero whatever the noise."""
    X, y, _, _ = neighbours()
    loss = MultinomialLogisticLoss(K)
    theta = dp_gradient_descent(X, y, loss=loss, clip_norm=C, sigma=5.0, steps=20, step_size=0.5, radius=50.0,
                                rng=make_generator(8, data_is_public=True), runs=2)  # fmt: skip
    assert np.abs(theta.reshape(2, K, -1).sum(axis=1)).max() < 1e-12
    assert np.abs(theta).max() > 0.01


def test_dp_sgd_multiclass_defaults_and_sampled_gaussian_cost() -> None:
    from privfit.privacy import poisson_subsampled_gaussian_rdp_replace_one

    solver = get_solver("dp_sgd")
    r = solver.resolve({"model": "logistic"}, WINE, target_epsilon=1.0, delta=1e-6)
    assert (r.epochs, r.output, r.batch_size) == (50, "last", 256)
    assert r.clip_norm == pytest.approx(MULTICLASS_CLIP * r.lipschitz) and r.step_size == pytest.approx(
        2 / r.smoothness
    )
    curve = r.steps * poisson_subsampled_gaussian_rdp_replace_one(DEFAULT_GRID, q=r.sampling_rate,
                                                                 noise_multiplier=r.sigma / r.clip_norm)  # fmt: skip
    assert np.allclose(solver.cost(r, WINE).rdp, curve)


@pytest.mark.parametrize(
    ("rho", "expected"),
    [(0.5, (500, "none", 2.0)), (0.2, (500, "none", 2.0)), (0.106, (944, "none", 2.0)), (0.0557, (1796, "none", 2.0)),
     (0.04, (2000, "none", 2.0)), (0.0299, (200, "nesterov", 1.0)), (1e-4, (200, "nesterov", 1.0))],
)  # fmt: skip
def test_the_multiclass_schedule_follows_the_public_noise_level(rho, expected) -> None:
    assert multiclass_schedule(rho) == expected


def test_the_multiclass_dp_gd_defaults_take_momentum_where_privacy_is_cheap() -> None:
    r = get_solver("dp_gd").resolve({"model": "logistic"}, WINE, target_epsilon=5.0, delta=1e-6)
    assert r.noise_level < 0.03 and (r.steps, r.momentum) == (200, "nesterov")
    assert r.step_size == pytest.approx(1 / r.smoothness)


def test_the_outlook_counts_the_noise_left_after_the_projection() -> None:
    """(k − 1)·d' dimensions: the projected Gaussian N(0, σ²I) onto {Σ_j θ_j = 0} is a standard Gaussian there."""
    from privfit.solvers.base import gradient_noise_norm

    solver = get_solver("dp_gd")
    r = solver.resolve({"model": "logistic"}, WINE, target_epsilon=1.0, delta=1e-6)
    outlook = solver.outlook(r, WINE)
    expected = gradient_noise_norm(r.sigma, r.n, r.steps * r.step_size**2, 6 * 12, r.radius)
    assert outlook is not None and outlook.noise_norm == pytest.approx(expected, rel=1e-12)
    rng = make_generator(9, data_is_public=True)
    loss = MultinomialLogisticLoss(7)
    projected = loss.identifiable(rng.standard_normal((20_000, 7 * 12)))
    assert np.mean(np.sum(projected**2, axis=1)) == pytest.approx(6 * 12, rel=0.01)
