"""Tests of the ``dp_sgd`` solver: golden accounting against dp_accounting, calibration, the batch samplers' laws,
the update (divisor m, clipping, projection), noiseless convergence, validation, progress and cancellation.

All randomness is seeded on public/synthetic data (``make_generator(seed, data_is_public=True)``). Statistical
tolerances are 5 standard deviations of the estimate (a false failure has probability < 1e-6 per check).
"""

from __future__ import annotations

import itertools
import json
import math

import dp_accounting as dpa
import numpy as np
import pytest
from dp_accounting.rdp import RdpAccountant
from scipy.optimize import minimize

from privfit.errors import ParameterError
from privfit.privacy import (
    DEFAULT_GRID,
    gaussian_rdp,
    gaussian_sigma,
    gdp_gaussian_sigma,
    make_generator,
    poisson_noise_multiplier,
    poisson_subsampled_gaussian_rdp,
    poisson_subsampled_gaussian_rdp_replace_one,
    without_replacement_noise_multiplier,
)
from privfit.privacy.noise import describe_sampler
from privfit.solvers import (
    DPSGD,
    DPSGDResolved,
    FitCancelled,
    PublicMetadata,
    SolverParameterError,
    describe_solvers,
    get_solver,
    solver_names,
)
from privfit.solvers.base import DEFAULT_RADIUS
from privfit.solvers.baselines.dp_gd import clipped_gradient_sum
from privfit.solvers.baselines.dp_sgd import (
    BatchSampler,
    EpochSchedule,
    default_epoch_schedule,
    dp_sgd,
    learning_rates,
    member_gradient_sums,
    steps_per_epoch,
)
from privfit.solvers.geometry import augment_intercept, augmented_bound
from privfit.solvers.losses import make_loss

SOLVER = get_solver("dp_sgd")
MODELS = ("logistic", "linear", "huber", "svm")
SAMPLINGS = ("poisson", "fixed_size", "shuffle")
ORDERS = DEFAULT_GRID.orders
Rel = dpa.NeighboringRelation

# The accounting instance: n = 10,000 rows, m = 100 (q = 0.01), 3 epochs (T = 300), calibrated to ε = 1 at δ = 1e-6.
ACCOUNTING_META = PublicMetadata(n=10_000, d=4, row_norm_bound=1.0)
ACCOUNTING_PARAMS = {"batch_size": 100, "epochs": 3}


def resolved_for(sampling: str, **extra: object) -> DPSGDResolved:
    params = {**ACCOUNTING_PARAMS, "sampling": sampling, **extra}
    return SOLVER.resolve(params, ACCOUNTING_META, target_epsilon=1.0, delta=1e-6)


def dpa_curve(event: dpa.DpEvent, relation: dpa.NeighboringRelation, orders: np.ndarray, count: int) -> np.ndarray:
    accountant = RdpAccountant(list(orders), relation)
    accountant.compose(event, count)
    return np.asarray(accountant.rdp, dtype=np.float64)


def small_meta(n: int = 200, d: int = 3) -> PublicMetadata:
    return PublicMetadata(n=n, d=d, row_norm_bound=1.0, label_bound=1.0)


def synthetic(n: int, d: int, model: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows with ‖x‖ ≤ 1; ±1 labels for classification, labels in [−1, 1] for regression."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X *= rng.uniform(0.2, 1.0, size=(n, 1)) / np.linalg.norm(X, axis=1, keepdims=True)
    score = X @ rng.normal(size=d) + 0.3 + 0.3 * rng.normal(size=n)
    y = np.where(score >= 0, 1.0, -1.0) if model in ("logistic", "svm") else np.clip(score / 3.0, -1.0, 1.0)
    return X, y


def regularised_optimum(X: np.ndarray, y: np.ndarray, l2: float, radius: float):
    """argmin mean logistic loss + (λ/2)‖θ‖² s.t. ‖θ‖ ≤ R (scipy SLSQP), and the objective."""
    loss = make_loss("logistic")

    def objective(theta: np.ndarray) -> float:
        return loss.mean_value(theta, X, y) + 0.5 * l2 * float(theta @ theta)

    def gradient(theta: np.ndarray) -> np.ndarray:
        return loss.mean_gradient(theta, X, y) + l2 * theta

    ball = {"type": "ineq", "fun": lambda t: radius**2 - t @ t, "jac": lambda t: -2 * t}
    result = minimize(objective, np.zeros(X.shape[1]), jac=gradient, method="SLSQP", constraints=[ball],
                      options={"ftol": 1e-14, "maxiter": 1000})  # fmt: skip
    assert result.success, result.message
    return result.x, objective


# ---------------------------------------------------------------------------------------------------------
# golden accounting against dp_accounting
# ---------------------------------------------------------------------------------------------------------


def test_poisson_add_remove_curve_matches_dp_accounting_for_the_resolved_settings() -> None:
    r = resolved_for("poisson")
    q, z, steps = r.sampling_rate, r.noise_multiplier, r.steps
    assert (q, steps) == (0.01, 300) and r.sigma == pytest.approx(z * r.clip_norm, rel=1e-15)
    ours = steps * poisson_subsampled_gaussian_rdp(ORDERS, q=q, noise_multiplier=z)
    event = dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(z))
    theirs = dpa_curve(event, Rel.ADD_OR_REMOVE_ONE, ORDERS, steps)
    # privfit caps the per-step curve by the un-sampled Gaussian α/(2z²) (valid by quasi-convexity); dp_accounting
    # does not, and its fractional series is loose at the highest orders (the cross-check test does the same).
    np.testing.assert_allclose(ours, np.minimum(theirs, steps * ORDERS / (2 * z**2)), rtol=1e-4)


def test_poisson_cost_is_the_replace_one_triangle_rule_on_dp_accountings_curve() -> None:
    """cost(α) = T · min((α − ½)/(α − 1) · ε_AR(2α) + ε_AR(2α − 1), 4α/(2z²)), ε_AR from dp_accounting."""
    r = resolved_for("poisson")
    q, z, steps = r.sampling_rate, r.noise_multiplier, r.steps
    event = dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(z))

    def add_remove(orders: np.ndarray) -> np.ndarray:
        return np.minimum(dpa_curve(event, Rel.ADD_OR_REMOVE_ONE, orders, 1), orders / (2 * z**2))

    a = ORDERS
    triangle = (a - 0.5) / (a - 1.0) * add_remove(2 * a) + add_remove(2 * a - 1)
    expected = steps * np.minimum(triangle, 4 * a / (2 * z**2))
    cost = SOLVER.cost(r, ACCOUNTING_META)
    np.testing.assert_allclose(cost.rdp, expected, rtol=1e-4)
    assert cost.grid == DEFAULT_GRID and cost.extra_delta == 0.0
    # and the triangle rule is strictly above the add/remove curve (replace-one costs more)
    assert (cost.rdp > steps * add_remove(a)).all()


def test_fixed_size_cost_matches_dp_accountings_without_replacement_event_under_replace_one() -> None:
    """dp_accounting's REPLACE_ONE Gaussian noise multiplier is σ over the replace-one sensitivity 2C (as in
    tests/privacy/test_cross_check_dp_accounting.py), i.e. the resolved ``replace_one_noise_multiplier``."""
    r = resolved_for("fixed_size")
    assert r.replace_one_noise_multiplier == pytest.approx(r.sigma / (2 * r.clip_norm), rel=1e-15)
    event = dpa.SampledWithoutReplacementDpEvent(
        ACCOUNTING_META.n, r.batch_size, dpa.GaussianDpEvent(r.sigma / r.sensitivity)
    )
    theirs = dpa_curve(event, Rel.REPLACE_ONE, ORDERS, r.steps)
    np.testing.assert_allclose(SOLVER.cost(r, ACCOUNTING_META).rdp, theirs, rtol=1e-4)


def test_shuffle_cost_is_epochs_gaussians_of_sensitivity_2c_exactly() -> None:
    r = resolved_for("shuffle")
    cost = SOLVER.cost(r, ACCOUNTING_META)
    np.testing.assert_array_equal(cost.rdp, 3 * gaussian_rdp(DEFAULT_GRID, sigma=r.sigma, sensitivity=2 * r.clip_norm))
    np.testing.assert_allclose(cost.rdp, 3 * ORDERS * (2 * r.clip_norm) ** 2 / (2 * r.sigma**2), rtol=1e-12)
    event = dpa.GaussianDpEvent(r.sigma / r.sensitivity)
    np.testing.assert_allclose(cost.rdp, dpa_curve(event, Rel.REPLACE_ONE, ORDERS, r.epochs), rtol=1e-9)
    # the number of steps per epoch (100 here) does not enter: no amplification is claimed
    assert r.steps == 300 and r.steps_per_epoch == 100


@pytest.mark.parametrize("sampling", SAMPLINGS)
@pytest.mark.parametrize(("target", "delta"), [(1.0, 1e-6), (0.3, 1e-5), (5.0, 1e-8)])
def test_calibration_meets_target_within_1e3(sampling: str, target: float, delta: float) -> None:
    r = SOLVER.resolve({**ACCOUNTING_PARAMS, "sampling": sampling}, ACCOUNTING_META, target_epsilon=target, delta=delta)
    q, steps, c = r.sampling_rate, r.steps, r.clip_norm
    if sampling == "poisson":
        assert r.sigma == poisson_noise_multiplier(target, delta, q=q, steps=steps).noise * c
    elif sampling == "fixed_size":
        assert r.sigma == without_replacement_noise_multiplier(target, delta, q=q, steps=steps).noise * 2 * c
    else:
        # the exact Gaussian curve (GDP): E epochs of one release of sensitivity 2C each, no RDP conversion slack
        coordinates = r.steps_per_epoch * (ACCOUNTING_META.d + 1)
        calibration = gdp_gaussian_sigma(target, delta, sensitivity=2 * c, count=r.epochs, coordinates=coordinates)
        assert r.sigma == calibration.noise
        assert r.sigma < 0.96 * gaussian_sigma(target, delta, sensitivity=2 * c, count=r.epochs).noise
    achieved = SOLVER.cost(r, ACCOUNTING_META).epsilon(delta).epsilon
    assert target * (1 - 1e-3) <= achieved <= target
    assert r.epsilon == achieved and r.target_epsilon == target and r.delta == delta


def test_sampling_modes_cost_what_their_theory_says_relative_to_each_other() -> None:
    """At the same σ: shuffle (no amplification) costs far more than the amplified modes."""
    z = 1.5
    epsilons = {}
    for sampling in SAMPLINGS:
        r = SOLVER.resolve({**ACCOUNTING_PARAMS, "sampling": sampling, "noise_multiplier": z}, ACCOUNTING_META)
        assert r.sigma == z * r.clip_norm and r.epsilon is None and r.target_epsilon is None
        epsilons[sampling] = SOLVER.cost(r, ACCOUNTING_META).epsilon(1e-6).epsilon
    # measured: 1.57 (poisson), 4.81 (fixed size: the WBK bound is looser), 13.9 (shuffle)
    assert epsilons["poisson"] < epsilons["fixed_size"] < epsilons["shuffle"] / 2


def test_at_sampling_rate_one_the_three_accountants_coincide() -> None:
    """m = n: every step is the full-batch Gaussian of sensitivity 2C in every mode (at q = 1 the Poisson
    triangle rule exceeds its cap 4α/(2z²) by 1/(2(α − 1)z²), so the cap is what is charged). The two RDP
    calibrations then agree to their tolerance (1e-6 relative); ``shuffle``, calibrated on the exact Gaussian curve
    (GDP), has the smaller σ of a PLD accountant."""
    meta = small_meta(n=50)
    resolved = [
        SOLVER.resolve({"sampling": s, "batch_size": 50, "epochs": 7}, meta, target_epsilon=1.0, delta=1e-5)
        for s in SAMPLINGS
    ]
    expected = 7 * gaussian_rdp(DEFAULT_GRID, sigma=resolved[0].sigma, sensitivity=2 * resolved[0].clip_norm)
    for r in resolved:
        assert r.sampling_rate == 1.0 and r.steps == 7
        if r.sampling == "shuffle":
            assert 0.85 * resolved[0].sigma < r.sigma < 0.96 * resolved[0].sigma
            continue
        assert r.sigma == pytest.approx(resolved[0].sigma, rel=1e-6)
        np.testing.assert_allclose(SOLVER.cost(r, meta).rdp, expected * (resolved[0].sigma / r.sigma) ** 2, rtol=1e-12)


@pytest.mark.parametrize("sampling", SAMPLINGS)
def test_explicit_noise_multiplier_is_sigma_over_c(sampling: str) -> None:
    meta = small_meta()
    r = SOLVER.resolve({"sampling": sampling, "noise_multiplier": 2.0, "batch_size": 20}, meta, delta=1e-5)
    c = augmented_bound(1.0)
    assert r.clip_norm == c and r.sigma == pytest.approx(2.0 * c, rel=1e-15)
    assert r.noise_multiplier == pytest.approx(2.0) and r.replace_one_noise_multiplier == pytest.approx(1.0)
    assert r.target_epsilon is None and r.epsilon == SOLVER.cost(r, meta).epsilon(1e-5).epsilon
    if sampling == "shuffle":
        expected = r.epochs * gaussian_rdp(DEFAULT_GRID, sigma=r.sigma, sensitivity=2 * c)
        np.testing.assert_array_equal(SOLVER.cost(r, meta).rdp, expected)


# ---------------------------------------------------------------------------------------------------------
# resolution: defaults from public metadata
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", MODELS)
def test_defaults_clip_at_lipschitz_and_step_at_inverse_smoothness(model: str) -> None:
    meta = PublicMetadata(n=5000, d=7, row_norm_bound=2.0)
    r = SOLVER.resolve({"model": model, "noise_multiplier": 1.0}, meta)
    bound = augmented_bound(2.0)
    loss = make_loss(model)
    assert r.lipschitz == loss.lipschitz(bound, 1.0, DEFAULT_RADIUS[model])
    assert r.clip_norm == (bound / 4 if model == "linear" else r.lipschitz)  # residuals clipped at ¼ (dp_gd)
    assert r.sensitivity == 2 * r.clip_norm
    assert r.step_size == pytest.approx(1.0 / make_loss(model).smoothness(bound))
    assert (r.batch_size, r.epochs, r.sampling, r.lr_schedule, r.output) == (256, 5, "poisson", "constant", "last")
    assert r.steps_per_epoch == math.ceil(5000 / 256) == 20 and r.steps == 100
    assert r.sampling_rate == 256 / 5000


@pytest.mark.parametrize("epsilon", [0.5, 3.0, 8.0, 60.0])
def test_default_epochs_release_and_step_follow_dp_gds_public_noise_level(epsilon: float) -> None:
    """ρ = σ₂₀₀·sqrt(d)/(n·B̃), recomputed here from a 200-fold Gaussian of sensitivity 2C, picks (E, release,
    η·β) by the documented bands; ε = 0.5 … 60 on this metadata reaches all three; explicit values override each
    part; the cost is the sampled-Gaussian curve of the resolved T whichever band chose it."""
    meta = PublicMetadata(n=20_000, d=30, row_norm_bound=3.0)
    r = SOLVER.resolve({"model": "logistic"}, meta, target_epsilon=epsilon, delta=1e-6)
    bound = augmented_bound(3.0)
    level = gaussian_sigma(epsilon, 1e-6, sensitivity=2 * bound, count=200).noise * math.sqrt(31) / (20_000 * bound)
    assert r.noise_level == pytest.approx(level, rel=1e-12)
    if level >= 0.03:
        expected = (5, "last", 1.0)
    elif level >= 0.005:
        expected = (50, "suffix_average", 1.0)
    else:
        expected = (100, "suffix_average", 4.0)
    beta = make_loss("logistic").smoothness(bound)
    assert (r.epochs, r.output, round(r.step_size * beta, 12)) == expected
    assert r.steps == r.epochs * math.ceil(20_000 / 256)
    expected_cost = r.steps * poisson_subsampled_gaussian_rdp_replace_one(
        DEFAULT_GRID, q=r.sampling_rate, noise_multiplier=r.noise_multiplier
    )
    np.testing.assert_allclose(SOLVER.cost(r, meta).rdp, expected_cost, rtol=1e-12)
    pinned = SOLVER.resolve(
        {"model": "logistic", "epochs": 2, "output": "last", "step_size": 0.125},
        meta,
        target_epsilon=epsilon,
        delta=1e-6,
    )
    assert (pinned.epochs, pinned.output, pinned.step_size) == (2, "last", 0.125)


def test_the_epoch_bands_and_the_step_cap() -> None:
    """Every band is reachable, an explicit noise multiplier (no ρ) keeps the first, and a huge n keeps the
    default T within MAX_STEPS instead of refusing its own default."""
    assert default_epoch_schedule(None) == default_epoch_schedule(0.03) == EpochSchedule(5, "last", 1.0)
    assert default_epoch_schedule(0.0299) == EpochSchedule(50, "suffix_average", 1.0)
    assert default_epoch_schedule(0.0049) == EpochSchedule(100, "suffix_average", 4.0)
    assert SOLVER.resolve({"noise_multiplier": 1.0}, small_meta()).noise_level is None
    huge = PublicMetadata(n=10**7, d=5, row_norm_bound=1.0)  # 39,063 steps per epoch: 100 epochs would be 3.9M
    r = SOLVER.resolve({"model": "logistic"}, huge, target_epsilon=50.0, delta=1e-6)
    assert r.noise_level is not None and r.noise_level < 0.005
    assert r.epochs == 1_000_000 // math.ceil(10**7 / 256) == 25 and r.steps <= 1_000_000


def test_an_epsilon_too_small_for_the_reference_run_keeps_the_first_band() -> None:
    """At ε = 1e-4 the 200-fold Gaussian reference of ρ exceeds the noise cap, but Poisson subsampling still
    reaches the target: the fit is planned (ρ null, first band), not refused because of the reference."""
    meta = PublicMetadata(n=26_049, d=104, row_norm_bound=3.6056)  # Adult's shape
    with pytest.raises(ParameterError):
        gaussian_sigma(1e-4, 1e-6, sensitivity=2 * augmented_bound(3.6056), count=200)
    r = SOLVER.resolve({"model": "logistic"}, meta, target_epsilon=1e-4, delta=1e-6)
    assert r.noise_level is None and (r.epochs, r.output) == (5, "last")
    assert SOLVER.cost(r, meta).epsilon(1e-6).epsilon <= 1e-4


def test_clip_norm_below_lipschitz_is_used_and_above_is_capped() -> None:
    meta = small_meta()
    assert SOLVER.resolve({"clip_norm": 0.5, "noise_multiplier": 1.0}, meta).clip_norm == 0.5
    assert SOLVER.resolve({"clip_norm": 50.0, "noise_multiplier": 1.0}, meta).clip_norm == augmented_bound(1.0)


def test_default_batch_size_is_n_on_small_datasets_and_batch_size_n_is_allowed() -> None:
    tiny = small_meta(n=100)
    r = SOLVER.resolve({"noise_multiplier": 1.0}, tiny)
    assert r.batch_size == 100 and r.sampling_rate == 1.0 and r.steps_per_epoch == 1 and r.steps == 5
    full = SOLVER.resolve({"batch_size": 100, "sampling": "poisson"}, tiny, target_epsilon=1.0, delta=1e-5)
    # q = 1: the replace-one Poisson curve is the plain Gaussian of sensitivity 2C (the cap)
    expected = full.steps * gaussian_rdp(DEFAULT_GRID, sigma=full.sigma, sensitivity=2 * full.clip_norm)
    np.testing.assert_allclose(SOLVER.cost(full, tiny).rdp, expected, rtol=1e-12)
    assert steps_per_epoch(101, 25) == 5 and steps_per_epoch(100, 25) == 4


def test_resolved_round_trips_through_json_and_is_checked_against_metadata() -> None:
    meta = small_meta(n=300)
    plan = SOLVER.plan({"model": "huber", "huber_delta": 0.5, "batch_size": 30}, meta, target_epsilon=2.0, delta=1e-5)
    stored = json.loads(json.dumps(plan.resolved.model_dump(mode="json")))
    reloaded = SOLVER.load_resolved(stored)
    assert reloaded == plan.resolved
    np.testing.assert_array_equal(SOLVER.cost(reloaded, meta).rdp, plan.cost.rdp)
    with pytest.raises(ParameterError) as wrong_meta:
        SOLVER.cost(reloaded, small_meta(n=301))
    assert wrong_meta.value.parameter == "resolved"
    with pytest.raises(ParameterError):
        SOLVER.load_resolved({**stored, "sampling": "shuffled"})
    with pytest.raises(ParameterError):
        SOLVER.load_resolved({**stored, "formula_version": "dp_sgd/v0"})


# ---------------------------------------------------------------------------------------------------------
# the batch samplers: exactly the law each accountant assumes
# ---------------------------------------------------------------------------------------------------------


def within(observed: float, expected: float, sd: float) -> bool:
    return abs(observed - expected) <= 5 * sd


def test_poisson_batches_are_independent_bernoulli_draws() -> None:
    n, m, steps = 40, 12, 20_000
    q = m / n
    sampler = BatchSampler(n, m, "poisson", make_generator(1, data_is_public=True))
    member = np.zeros((steps, n), dtype=bool)
    for t in range(steps):
        batch = sampler.indices()
        assert np.all(np.diff(batch) > 0) and (batch.size == 0 or (batch[0] >= 0 and batch[-1] < n))
        member[t, batch] = True
    sizes = member.sum(axis=1)
    # batch sizes: Binomial(n, q) mean and variance
    assert within(sizes.mean(), n * q, math.sqrt(n * q * (1 - q) / steps))
    var_sd = n * q * (1 - q) * math.sqrt(2 / steps) * 1.1  # sd of a sample variance (near-normal) with margin
    assert within(sizes.var(ddof=1), n * q * (1 - q), var_sd)
    # every row's inclusion frequency is q, pairs are independent (q², not the q·(m−1)/(n−1) of fixed size)
    assert np.all(np.abs(member.mean(axis=0) - q) <= 5 * math.sqrt(q * (1 - q) / steps))
    pairs = (member[:, :, None] & member[:, None, :]).mean(axis=0)[np.triu_indices(n, 1)]
    assert within(pairs.mean(), q * q, math.sqrt(q * q * (1 - q * q) / steps / pairs.size) * 3)
    # and consecutive steps are independent
    assert within((member[1:] & member[:-1]).mean(), q * q, math.sqrt(q * q / ((steps - 1) * n)) * 3)


@pytest.mark.parametrize("sampling", SAMPLINGS)
def test_membership_matrices_have_the_same_law_as_single_run_batches(sampling: str) -> None:
    """The vectorised path of the audits: (runs, n) masks, independent runs, the same marginal laws."""
    n, m, runs, epochs = 10, 3, 20_000, 2
    q = m / n
    sampler = BatchSampler(n, m, sampling, make_generator(2, data_is_public=True))
    per_epoch = sampler.steps_per_epoch
    masks = np.stack([sampler.membership(runs) for _ in range(epochs * per_epoch)], axis=1)  # (runs, T, n)
    sizes = masks.sum(axis=2)
    if sampling == "poisson":
        assert within(sizes.mean(), m, math.sqrt(n * q * (1 - q) / sizes.size))
        assert within(sizes.var(), n * q * (1 - q), n * q * (1 - q) * math.sqrt(2 / sizes.size) * 1.1)
        assert np.all(np.abs(masks.mean(axis=(0, 1)) - q) <= 5 * math.sqrt(q * (1 - q) / (runs * masks.shape[1])))
    elif sampling == "fixed_size":
        assert np.all(sizes == m)
        assert np.all(np.abs(masks.mean(axis=(0, 1)) - q) <= 5 * math.sqrt(q * (1 - q) / (runs * masks.shape[1])))
    else:
        assert per_epoch == 4 and np.all(sizes == np.array([3, 3, 3, 1] * epochs))
        for epoch in range(epochs):
            assert np.all(masks[:, epoch * per_epoch : (epoch + 1) * per_epoch].sum(axis=1) == 1)  # each row once
        first_batch_row0 = masks[:, 0, 0].mean()
        assert within(first_batch_row0, 0.3, math.sqrt(0.21 / runs))
    # runs are independent of each other: two runs agree on a cell of step t with probability p_t² + (1 − p_t)²
    # (p_t the step's inclusion rate); a shared batch would agree everywhere. A pair's mean agreement is in [0, 1].
    rate = masks.mean(axis=(0, 2))
    agree = (masks[0::2] == masks[1::2]).mean()
    assert within(agree, float(np.mean(rate**2 + (1 - rate) ** 2)), 0.5 / math.sqrt(runs // 2))


def test_fixed_size_batches_are_uniform_m_subsets_drawn_afresh_each_step() -> None:
    n, m, steps = 30, 7, 20_000
    q = m / n
    sampler = BatchSampler(n, m, "fixed_size", make_generator(3, data_is_public=True))
    member = np.zeros((steps, n), dtype=bool)
    for t in range(steps):
        batch = sampler.indices()
        assert batch.size == m and np.unique(batch).size == m
        member[t, batch] = True
    assert np.all(np.abs(member.mean(axis=0) - q) <= 5 * math.sqrt(q * (1 - q) / steps))
    # within a step, pairs are negatively dependent as for a uniform m-subset: P(i, j) = q (m − 1)/(n − 1)
    pairs = (member[:, :, None] & member[:, None, :]).mean(axis=0)[np.triu_indices(n, 1)]
    assert within(pairs.mean(), q * (m - 1) / (n - 1), 3 * math.sqrt(q * q / steps / pairs.size))
    # across steps, independent: a row in B_t and B_{t+1} with probability q²
    assert within((member[1:] & member[:-1]).mean(), q * q, 3 * math.sqrt(q * q / ((steps - 1) * n)))


def test_shuffle_covers_every_row_exactly_once_per_epoch_with_fresh_permutations() -> None:
    n, m, epochs = 23, 5, 400
    sampler = BatchSampler(n, m, "shuffle", make_generator(4, data_is_public=True))
    assert sampler.steps_per_epoch == 5
    orders = []
    first_positions = np.zeros(n)
    for _ in range(epochs):
        batches = [sampler.indices() for _ in range(sampler.steps_per_epoch)]
        assert [b.size for b in batches] == [5, 5, 5, 5, 3]
        assert np.array_equal(np.sort(np.concatenate(batches)), np.arange(n))
        orders.append(tuple(np.concatenate(batches)))
        first_positions[batches[0]] += 1
    assert len(set(orders)) == epochs  # a fresh permutation every epoch
    assert np.all(np.abs(first_positions / epochs - m / n) <= 5 * math.sqrt((m / n) * (1 - m / n) / epochs))


def test_sampler_refuses_bad_sizes_and_modes() -> None:
    rng = make_generator(0, data_is_public=True)
    with pytest.raises(SolverParameterError) as too_big:
        BatchSampler(10, 11, "poisson", rng)
    assert too_big.value.parameter == "batch_size"
    with pytest.raises(SolverParameterError) as mode:
        BatchSampler(10, 2, "shuffled", rng)  # type: ignore[arg-type]
    assert mode.value.parameter == "sampling"


# ---------------------------------------------------------------------------------------------------------
# the update: divisor m, clipping, projection, step sizes
# ---------------------------------------------------------------------------------------------------------


def test_the_divisor_is_the_public_batch_size_not_the_realised_one() -> None:
    """One noiseless Poisson step by hand: every clipped gradient is −C, so θ_2 = η · C · |B_1| / m."""
    n, m, C, eta = 50, 10, 0.7, 0.3
    X = np.ones((n, 1))
    y = np.full(n, 1e6)  # squared-loss gradient (θ − y)·x ≈ −1e6, clipped to −C
    seen: list[float] = []
    for seed in range(20):
        batch = BatchSampler(n, m, "poisson", make_generator(seed, data_is_public=True)).indices()
        theta = dp_sgd(
            X, y, loss=make_loss("linear"), clip_norm=C, sigma=0.0, batch_size=m, sampling="poisson", epochs=1,
            step_size=eta, radius=1e9, rng=make_generator(seed, data_is_public=True),
            observer=lambda t, th: seen.append(float(th[0, 0])) if t == 1 else None,
        )  # fmt: skip
        assert seen[-1] == pytest.approx(eta * C * batch.size / m, rel=1e-12)
        assert theta.shape == (1, 1)
    realised = [round(value * m / (eta * C)) for value in seen]
    assert len(set(realised)) > 3 and any(size != m for size in realised)  # the realised sizes did vary


def test_member_gradient_sums_equal_the_single_run_batch_sums() -> None:
    X, y = synthetic(12, 3, "logistic", seed=5)
    A = augment_intercept(X)
    loss = make_loss("logistic")
    rng = np.random.default_rng(0)
    theta = rng.normal(size=(6, 4))
    member = rng.random((6, 12)) < 0.4
    member[0] = False  # an empty batch sums to 0
    sums = member_gradient_sums(loss, theta, A, y, member, 0.8)
    for r in range(6):
        rows = np.flatnonzero(member[r])
        np.testing.assert_allclose(sums[r], clipped_gradient_sum(loss, theta[r], A[rows], y[rows], 0.8), atol=1e-14)
    assert np.all(sums[0] == 0.0)


@pytest.mark.parametrize("model", MODELS)
def test_adversarial_row_moves_one_step_by_at_most_eta_2c_over_m(model: str) -> None:
    X, y = synthetic(40, 3, model, seed=11)
    A = augment_intercept(X)
    A_prime, y_prime = A.copy(), y.copy()
    A_prime[0] = 1e6 * np.array([1.0, -2.0, 3.0, 1.0])  # far outside the declared bound
    y_prime[0] = -y[0] if model in ("logistic", "svm") else -1e6
    loss, C, eta, m = make_loss(model), 0.6, 0.9, 8
    common = {"loss": loss, "clip_norm": C, "sigma": 0.0, "batch_size": m, "sampling": "fixed_size", "epochs": 1}
    common |= {"step_size": eta, "radius": 0.5, "l2": 0.2}

    def iterates(design: np.ndarray, labels: np.ndarray, seed: int) -> list[np.ndarray]:
        seen: list[np.ndarray] = []
        dp_sgd(design, labels, rng=make_generator(seed, data_is_public=True),
               observer=lambda t, th: seen.append(th.copy()), **common)  # fmt: skip
        return seen

    gaps = []
    for seed in range(30):
        first, second = iterates(A, y, seed), iterates(A_prime, y_prime, seed)  # same seed: same batches
        gaps.append(float(np.linalg.norm(first[0] - second[0])))
        assert all(np.linalg.norm(th) <= 0.5 * (1 + 1e-12) for th in first + second)
    assert max(gaps) <= eta * 2 * C / m * (1 + 1e-12)
    assert max(gaps) > 0 and min(gaps) == 0.0  # the row was in some first batches and not in others


@pytest.mark.parametrize("output", ["last", "suffix_average"])
@pytest.mark.parametrize("sampling", SAMPLINGS)
def test_projection_keeps_every_run_in_the_ball(sampling: str, output: str) -> None:
    X, y = synthetic(30, 2, "logistic", seed=1)
    radius = 0.3
    theta = dp_sgd(
        augment_intercept(X), y, loss=make_loss("logistic"), clip_norm=1.0, sigma=50.0, batch_size=5,
        sampling=sampling, epochs=3, step_size=2.0, radius=radius, rng=make_generator(7, data_is_public=True),
        output=output, runs=200,
    )  # fmt: skip
    norms = np.linalg.norm(theta, axis=1)
    assert np.all(norms <= radius * (1 + 1e-12))
    assert norms.max() > (0.9 if output == "last" else 0.1) * radius  # the noise does push against the ball


def test_learning_rate_schedules() -> None:
    np.testing.assert_array_equal(learning_rates(0.5, "constant", 6, 3), np.full(6, 0.5))
    np.testing.assert_allclose(learning_rates(0.5, "inverse_sqrt", 6, 3), 0.5 / np.sqrt(1 + np.arange(6) / 3))
    cosine = learning_rates(0.5, "cosine", 4, 2)
    np.testing.assert_allclose(
        cosine, [0.5, 0.5 * (1 + math.cos(math.pi / 4)) / 2, 0.25, 0.5 * (1 - math.cos(math.pi / 4)) / 2]
    )
    assert np.all(np.diff(learning_rates(1.0, "cosine", 100, 10)) < 0)
    with pytest.raises(SolverParameterError) as bad:
        learning_rates(1.0, "linear", 5, 1)  # type: ignore[arg-type]
    assert bad.value.parameter == "lr_schedule"


# ---------------------------------------------------------------------------------------------------------
# convergence without noise
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("sampling", "gap", "distance"), [("poisson", 2e-4, 0.05), ("fixed_size", 2e-4, 0.05),
                                                            ("shuffle", 1e-7, 2e-3)])  # fmt: skip
def test_noiseless_sgd_converges_to_the_regularised_optimum(sampling: str, gap: float, distance: float) -> None:
    """Logistic, λ = 0.05, n = 400, m = 40, 300 epochs with the cosine schedule (3000 steps). Random
    reshuffling converges much faster than with-replacement-style sampling (known; measured gaps 1e-8 vs 4e-5)."""
    X, y = synthetic(400, 3, "logistic", seed=7)
    meta = small_meta(n=400)
    params = {"l2": 0.05, "radius": 50.0, "epochs": 300, "batch_size": 40, "sampling": sampling,
              "lr_schedule": "cosine", "noise_multiplier": 1e-9}  # fmt: skip
    result = SOLVER.fit(X, y, meta, SOLVER.resolve(params, meta), make_generator(0, data_is_public=True))
    theta = np.array([*result.coefficients, result.intercept])
    optimum, objective = regularised_optimum(augment_intercept(X), y, 0.05, 50.0)
    assert 0 <= objective(theta) - objective(optimum) <= gap
    assert np.abs(theta - optimum).max() <= distance


def test_noisy_fit_on_separable_data_predicts_well() -> None:
    """With noise calibrated to ε = 1 (δ = 1e-5) and the defaults, a 4,000-row problem is learned."""
    X, y = synthetic(4000, 3, "logistic", seed=3)
    meta = small_meta(n=4000)
    for sampling in SAMPLINGS:
        resolved = SOLVER.resolve({"sampling": sampling}, meta, target_epsilon=1.0, delta=1e-5)
        result = SOLVER.fit(X, y, meta, resolved, make_generator(1, data_is_public=True))
        assert np.mean(result.predict(X) == y) > 0.85, sampling


# ---------------------------------------------------------------------------------------------------------
# the solver runs the core function; progress, cancellation, results
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sampling", SAMPLINGS)
def test_fit_runs_the_core_function(sampling: str) -> None:
    X, y = synthetic(60, 2, "logistic", seed=4)
    meta = small_meta(n=60, d=2)
    params = {"sampling": sampling, "batch_size": 16, "epochs": 2, "noise_multiplier": 0.5, "l2": 0.01,
              "lr_schedule": "inverse_sqrt", "output": "suffix_average"}  # fmt: skip
    r = SOLVER.resolve(params, meta)
    result = SOLVER.fit(X, y, meta, r, make_generator(9, data_is_public=True))
    core = dp_sgd(
        augment_intercept(X), y, loss=make_loss("logistic"), clip_norm=r.clip_norm, sigma=r.sigma, batch_size=16,
        sampling=sampling, epochs=2, step_size=r.step_size, radius=r.radius, l2=0.01, lr_schedule="inverse_sqrt",
        rng=make_generator(9, data_is_public=True), output="suffix_average",
    )[0]  # fmt: skip
    np.testing.assert_array_equal(np.array([*result.coefficients, result.intercept]), core)
    assert r.steps == 2 * 4 and result.metadata == {**r.model_dump(mode="json"), "noise_sampler": describe_sampler()}


def test_progress_is_reported_per_step_and_cancel_raises() -> None:
    X, y = synthetic(50, 2, "logistic", seed=1)
    meta = small_meta(n=50, d=2)
    r = SOLVER.resolve({"batch_size": 5, "epochs": 4, "noise_multiplier": 1.0}, meta)  # T = 40
    seen: list[float] = []
    SOLVER.fit(X, y, meta, r, make_generator(0, data_is_public=True), progress=seen.append)
    assert seen[-1] == 1.0 and len(seen) == 40 and all(b > a for a, b in itertools.pairwise(seen))
    seen_flipped: list[float] = []
    SOLVER.fit(X, -y, meta, r, make_generator(0, data_is_public=True), progress=seen_flipped.append)
    assert seen_flipped == seen  # data-independent
    with pytest.raises(FitCancelled) as immediately:
        SOLVER.fit(X, y, meta, r, make_generator(0, data_is_public=True), should_stop=lambda: True)
    assert immediately.value.steps_completed == 0 and immediately.value.total_steps == 40
    calls = iter(range(1000))
    with pytest.raises(FitCancelled) as later:
        SOLVER.fit(X, y, meta, r, make_generator(0, data_is_public=True), should_stop=lambda: next(calls) >= 7)
    assert later.value.steps_completed == 7


def test_fit_result_is_json_with_data_independent_metadata_and_checks_shapes() -> None:
    X, y = synthetic(40, 2, "logistic", seed=2)
    meta = PublicMetadata(n=40, d=2, row_norm_bound=1.0, feature_names=("a", "b"))
    r = SOLVER.resolve({"batch_size": 10}, meta, target_epsilon=1.0, delta=1e-5)
    payload = json.loads(json.dumps(SOLVER.fit(X, y, meta, r, make_generator(0, data_is_public=True)).to_dict()))
    assert len(payload["coefficients"]) == 2 and isinstance(payload["intercept"], float)
    for key in (
        "sigma",
        "steps",
        "sampling",
        "batch_size",
        "sampling_rate",
        "clip_norm",
        "noise_multiplier",
        "epsilon",
    ):
        assert key in payload["metadata"]
    no_intercept = SOLVER.resolve({"batch_size": 10, "fit_intercept": False, "noise_multiplier": 1.0}, meta)
    assert SOLVER.fit(X, y, meta, no_intercept, make_generator(0, data_is_public=True)).intercept is None
    with pytest.raises(SolverParameterError) as bad_x:
        SOLVER.fit(X[:, :1], y, meta, r, make_generator(0, data_is_public=True))
    assert bad_x.value.parameter == "X"
    with pytest.raises(SolverParameterError) as bad_rng:
        SOLVER.fit(X, y, meta, r, np.random.RandomState(0))  # type: ignore[arg-type]
    assert bad_rng.value.parameter == "rng"


# ---------------------------------------------------------------------------------------------------------
# validation and registry
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"batch_size": 201}, "batch_size"),
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": 2.5}, "batch_size"),
        ({"sampling": "uniform"}, "sampling"),
        ({"sampling": "shuffled"}, "sampling"),
        ({"clip_norm": 0.0}, "clip_norm"),
        ({"clip_norm": -1.0}, "clip_norm"),
        ({"epochs": 0}, "epochs"),
        ({"epochs": 1001}, "epochs"),
        ({"epochs": 1000, "batch_size": 1}, "epochs"),  # 200,000 steps is fine, see below; 10⁶+ is not
        ({"lr_schedule": "linear"}, "lr_schedule"),
        ({"output": "best"}, "output"),
        ({"step_size": float("nan")}, "step_size"),
        ({"step_size": 0.0}, "step_size"),
        ({"noise_multiplier": -1.0}, "noise_multiplier"),
        ({"noise_multiplier": 1.0}, "noise_multiplier"),  # together with a target ε
        ({"model": "poisson"}, "model"),
        ({"huber_delta": 0.5}, "huber_delta"),
        ({"learning_rate": 0.1}, "learning_rate"),
        ({"seed": 3}, "seed"),
    ],
)
def test_bad_params_name_the_field(params: dict, field: str) -> None:
    meta = small_meta(n=200) if params != {"epochs": 1000, "batch_size": 1} else small_meta(n=2000)
    with pytest.raises(ParameterError) as error:
        SOLVER.resolve(params, meta, target_epsilon=1.0, delta=1e-6)
    assert error.value.parameter == field
    assert isinstance(error.value, SolverParameterError) and error.value.errors[0]["field"] == field


def test_batch_size_error_quotes_public_n_and_many_steps_are_accepted_up_to_the_cap() -> None:
    with pytest.raises(SolverParameterError, match=r"n = 200"):
        SOLVER.resolve({"batch_size": 500, "noise_multiplier": 1.0}, small_meta(n=200))
    r = SOLVER.resolve({"epochs": 1000, "batch_size": 1, "noise_multiplier": 1.0}, small_meta(n=1000))
    assert r.steps == 1_000_000


def test_registry_lists_dp_sgd_with_its_parameter_schema() -> None:
    assert "dp_sgd" in solver_names() and isinstance(SOLVER, DPSGD)
    listed = {entry["name"]: entry for entry in describe_solvers()}["dp_sgd"]
    properties = listed["params_schema"]["properties"]
    assert set(properties["sampling"]["enum"]) == set(SAMPLINGS)
    assert set(properties["lr_schedule"]["enum"]) == {"constant", "inverse_sqrt", "cosine"}
    assert listed["formula_version"] == "dp_sgd/sampled-gaussian-rdp/v1" and listed["models"] == list(MODELS)
