"""Tests of ``dp_otb`` pinned to the paper (Zhang, Tran & Cutkosky 2022): tree sets, eq. (6), Theorem 3's cost,
Algorithm 1 against a literal re-implementation, eq. (7) by Monte Carlo, parameters, progress and cancellation."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.rdp import RdpAccountant

from privfit.privacy import DEFAULT_GRID, make_generator
from privfit.privacy.noise import describe_sampler, integer_noise, using_sampler
from privfit.solvers import FitCancelled, PublicMetadata, SolverParameterError, get_solver
from privfit.solvers.base import enforce_declared_bounds
from privfit.solvers.geometry import augment_intercept, clip_rows
from privfit.solvers.losses import make_loss
from privfit.solvers.online_to_batch.learners import LEARNERS, learner_update
from privfit.solvers.online_to_batch.solver import DPOTBResolved, dp_online_to_batch, exact_lattice
from privfit.solvers.online_to_batch.tree_aggregation import (
    noise_scale,
    noisy_running_sums,
    tree_block,
    tree_index_set,
    tree_noise_step,
    tree_sensitivity_bound,
)

SOLVER = get_solver("dp_otb")
LEARNER_NAMES = sorted(LEARNERS)


def paper_index_set(t: int) -> list[int]:
    """NOISE(t), lines 9–11 of Algorithm 1, literally: scan bin(t) from the top, k += 2^{n−i} on each 1."""
    bits = bin(t)[2:]
    n = math.floor(math.log2(t)) + 1
    assert len(bits) == n
    k, members = 0, []
    for i in range(1, n + 1):
        if bits[i - 1] == "1":
            k += 2 ** (n - i)
            members.append(k)
    return members


# ---------------------------------------------------------------------------------------------------------
# the tree: I_t, S_t, the incremental noise, eq. (6), eq. (7)
# ---------------------------------------------------------------------------------------------------------


def test_index_sets_match_algorithm_1_and_the_papers_examples() -> None:
    assert tree_index_set(4) == [4] and tree_index_set(7) == [4, 6, 7]
    assert tree_block(4) == [1, 2, 3, 4] and tree_block(7) == [7]
    for t in range(1, 65):
        members = tree_index_set(t)
        assert members == paper_index_set(t)
        assert len(members) == bin(t).count("1") <= math.log2(2 * t)
        # {S_i : i ∈ I_t} partitions [t] (App. B.2)
        covered = sorted(row for i in members for row in tree_block(i))
        assert covered == list(range(1, t + 1))


def test_each_row_enters_at_most_log2_2t_nodes() -> None:
    for horizon in (1, 2, 7, 8, 63, 64):
        for q in range(1, horizon + 1):
            nodes = [t for t in range(1, horizon + 1) if q in tree_block(t)]
            assert len(nodes) <= horizon.bit_length() <= math.log2(2 * horizon)
        # the bound is attained by q = 1 when T is a power of two (the white-box audit's instance)
        if horizon & (horizon - 1) == 0:
            assert len([t for t in range(1, horizon + 1) if 1 in tree_block(t)]) == math.log2(2 * horizon)


def test_incremental_tree_noise_equals_the_sum_over_index_sets() -> None:
    rng = np.random.default_rng(3)
    horizon, p = 64, 3
    node_noise = rng.standard_normal((horizon, p))
    prefix = np.zeros((horizon.bit_length() + 1, p))
    gamma = np.empty(p)
    for t in range(1, horizon + 1):
        tree_noise_step(prefix, t, node_noise[t - 1], gamma)
        expected = sum(node_noise[i - 1] for i in tree_index_set(t))
        np.testing.assert_allclose(gamma, expected, rtol=0, atol=1e-12)


def test_noise_scale_is_equation_6_with_the_public_diameter() -> None:
    # σ_t² = (2kG + (k+1)HD)² log2(2T) t^{2k−2}/ρ²: k = 2, G = 3, H = 0.5, D = 4, T = 1000, ρ = 0.25, t = 7
    k, G, H, D, T, rho, t = 2.0, 3.0, 0.5, 4.0, 1000, 0.25, 7
    variance = (2 * k * G + (k + 1) * H * D) ** 2 / rho**2 * math.log2(2 * T) * t ** (2 * k - 2)
    sigma_1 = noise_scale(k=k, lipschitz=G, smoothness=H, step_bound=D, horizon=T, rho=rho)
    assert (sigma_1 * t ** (k - 1)) ** 2 == pytest.approx(variance, rel=1e-14)
    assert sigma_1 == pytest.approx((12 + 6) * math.sqrt(math.log2(2000)) / 0.25, rel=1e-14)
    # node t's sensitivity bound over σ_t is ρ / sqrt(log2(2T)) for every t (proof of Theorem 3)
    for t in (1, 5, 64):
        ratio = tree_sensitivity_bound(t, k=k, lipschitz=G, smoothness=H, step_bound=D) / (sigma_1 * t ** (k - 1))
        assert ratio == pytest.approx(rho / math.sqrt(math.log2(2 * T)), rel=1e-13)


@pytest.mark.parametrize("k", [1.0, 3.0])
def test_noise_norm_matches_equation_7_by_monte_carlo(k: float) -> None:
    """E‖γ_t‖² = p Σ_{i∈I_t} σ_i² ≤ 8(k+1)² V (G+DH)² log2²(2T) t^{2k−2} / (λρ²), V = p, λ = 2 (eq. (7))."""
    G, H, D, T, rho, p = 1.0, 0.25, 2.0, 64, 0.5, 4
    sigma_1 = noise_scale(k=k, lipschitz=G, smoothness=H, step_bound=D, horizon=T, rho=rho)
    runs = 4000
    rng = make_generator(11, data_is_public=True)
    squared = np.zeros(T)
    zeros = np.zeros((T, p))
    out = np.empty((T, p))
    for _ in range(runs):
        noisy_running_sums(zeros, sigma_1, k, rng.standard_normal((T, p)), out)
        squared += np.sum(out**2, axis=1)
    mean = squared / runs
    for t in range(1, T + 1):
        exact = p * sum((sigma_1 * i ** (k - 1)) ** 2 for i in tree_index_set(t))
        bound = 8 * (k + 1) ** 2 * p * (G + D * H) ** 2 * math.log2(2 * T) ** 2 * t ** (2 * k - 2) / (2 * rho**2)
        assert mean[t - 1] == pytest.approx(exact, rel=0.1)  # 4000 runs of a χ²: ±~5% at 3 sd for p·|I_t| ≥ 4
        assert exact <= bound


# ---------------------------------------------------------------------------------------------------------
# privacy cost (Theorem 3) and calibration
# ---------------------------------------------------------------------------------------------------------

META = PublicMetadata(n=5000, d=4, row_norm_bound=1.0)


def test_cost_is_alpha_rho_squared_over_two_from_metadata_alone() -> None:
    resolved = SOLVER.resolve({"rho": 0.3}, META)
    curve = SOLVER.cost(resolved, META).rdp
    np.testing.assert_allclose(curve, DEFAULT_GRID.orders * 0.3**2 / 2, rtol=1e-15)
    assert resolved.epsilon is None


@pytest.mark.parametrize(("target", "delta"), [(0.1, 1e-6), (1.0, 1e-6), (5.0, 1e-5)])
def test_calibrated_rho_meets_target_and_matches_dp_accounting(target: float, delta: float) -> None:
    resolved = SOLVER.resolve({}, META, target_epsilon=target, delta=delta)
    assert resolved.epsilon <= target
    assert resolved.epsilon == pytest.approx(target, rel=2e-3)
    # (α, αρ²/2)-RDP is a Gaussian mechanism with noise multiplier 1/ρ
    accountant = RdpAccountant(orders=list(DEFAULT_GRID.orders))
    accountant.compose(dp_event.GaussianDpEvent(1.0 / resolved.rho))
    assert accountant.get_epsilon(delta) == pytest.approx(resolved.epsilon, rel=1e-9)


def test_cost_and_noise_do_not_depend_on_the_learner_except_through_k() -> None:
    costs = {name: SOLVER.cost(SOLVER.resolve(_learner_params(name, rho=0.4), META), META).rdp for name in LEARNERS}
    for curve in costs.values():
        np.testing.assert_array_equal(curve, costs["ogd"])
    one = SOLVER.resolve({"rho": 0.4}, META)
    three = SOLVER.resolve({"rho": 0.4, "learner": "parameter_free"}, META)
    ratio = tree_sensitivity_bound(
        1, k=3.0, lipschitz=one.lipschitz, smoothness=one.smoothness, step_bound=one.step_bound
    ) / tree_sensitivity_bound(1, k=1.0, lipschitz=one.lipschitz, smoothness=one.smoothness, step_bound=one.step_bound)
    assert three.k == 3 and three.noise_scale == pytest.approx(one.noise_scale * ratio, rel=1e-14)  # 2kG+(k+1)HD


def test_noise_uses_the_data_terms_constants_and_the_public_step_bound() -> None:
    params = {"rho": 0.5, "model": "linear", "radius": 1.5, "l2": 0.2, "fit_intercept": False}
    meta = PublicMetadata(n=100, d=3, row_norm_bound=2.0, label_bound=1.0)
    r = SOLVER.resolve(params, meta)
    G = (1.5 * 2.0 + 1.0) * 2.0  # (R B_x + B_y) B_x
    H = 4.0  # B_x²
    assert (r.lipschitz, r.smoothness, r.diameter) == (G, H, 3.0)
    assert r.step_bound == 0.375 * G / H == 0.75  # the default rule r = c G/H, c = 0.375 for linear
    assert (r.lipschitz_total, r.smoothness_total) == (pytest.approx(G + 0.2 * 1.5), pytest.approx(H + 0.2))
    assert r.noise_scale == pytest.approx((2 * G + 2 * H * 0.75) * math.sqrt(math.log2(200)) / 0.5, rel=1e-14)
    # an explicit bound above D is D: the noise of formula v2 (‖w_t − x_{t−1}‖ ≤ D always)
    wide = SOLVER.resolve({**params, "step_bound": 100.0}, meta)
    assert wide.step_bound == 3.0
    assert wide.noise_scale == pytest.approx((2 * G + 2 * H * 3.0) * math.sqrt(math.log2(200)) / 0.5, rel=1e-14)


# ---------------------------------------------------------------------------------------------------------
# Algorithm 1 against a literal re-implementation
# ---------------------------------------------------------------------------------------------------------


def _learner_params(name: str, **extra: object) -> dict[str, object]:
    params: dict[str, object] = {"learner": name, **extra}
    if name == "strongly_convex":
        params["l2"] = 0.05
    return params


def synthetic(n: int, d: int, model: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, d))
    X = clip_rows(X, 1.0)
    theta = rng.standard_normal(d)
    if model in ("logistic", "svm"):
        y = np.where(rng.random(n) < 1 / (1 + np.exp(-3 * X @ theta)), 1.0, -1.0)
    else:
        y = np.clip(0.5 * X @ theta / np.sqrt(d) + 0.1 * rng.standard_normal(n), -1, 1)
    return X, y


def literal_algorithm_1(X, y, resolved: DPOTBResolved, normals: np.ndarray, order: np.ndarray, gammas=None):
    """Algorithm 1 as printed: x_t = (β_{1:t−1}x_{t−1} + β_t w_t)/β_{1:t}, δ_t, g_t, γ_t = Σ_{i∈I_t} R_i.

    Returns x_T and every x_t (to check the convex combinations). Uses the library's gradients and learner
    updates, but none of the compiled loop's bookkeeping (incremental β sums, tree prefixes, clipping).
    """
    A = augment_intercept(X) if resolved.fit_intercept else X
    loss = make_loss(resolved.model, l2=resolved.l2, **resolved.loss_params)
    context = SOLVER.learner_context(resolved)
    learner = LEARNERS[resolved.learner]
    state = learner.init_state(context)
    p = A.shape[1]
    k = resolved.k
    w = context.initial_point.copy()
    x_prev = np.zeros(p)
    g = np.zeros(p)
    beta_sum = 0.0
    noise = {}
    iterates = []
    for t in range(1, len(order) + 1):
        beta_t, beta_prev = float(t) ** k, float(t - 1) ** k
        step = np.linalg.norm(w - x_prev)
        if step > resolved.step_bound:  # the played point, projected onto the ball of radius r around x_{t−1}
            w[:] = x_prev + (w - x_prev) * (resolved.step_bound / step)
        x_t = (beta_sum * x_prev + beta_t * w) / (beta_sum + beta_t)
        beta_sum += beta_t
        row, label = A[order[t - 1] : order[t - 1] + 1], y[order[t - 1] : order[t - 1] + 1]
        delta_t = beta_t * loss.per_example_gradients(x_t, row, label)[0]
        delta_t -= beta_prev * loss.per_example_gradients(x_prev, row, label)[0]
        g = g + delta_t
        noise[t] = resolved.noise_scale * t ** (k - 1) * normals[t - 1]
        gamma = sum(noise[i] for i in tree_index_set(t)) if gammas is None else gammas[t - 1]
        gbar = g + gamma
        learner_update(learner.kind, t, beta_t, gbar, x_t, w, state.vectors, state.scalars, state.config)
        iterates.append(x_t)
        x_prev = x_t
    return x_prev, iterates


@pytest.mark.parametrize("learner", LEARNER_NAMES)
@pytest.mark.parametrize("model", ["logistic", "linear", "huber", "svm"])
def test_compiled_loop_is_algorithm_1(learner: str, model: str) -> None:
    X, y = synthetic(150, 3, model, seed=2)
    meta = PublicMetadata(n=150, d=3, row_norm_bound=1.0)
    resolved = SOLVER.resolve(_learner_params(learner, model=model, rho=2.0, prefix_estimator="plain"), meta)
    order = np.random.default_rng(5).permutation(150)
    normals = make_generator(8, data_is_public=True).standard_normal((150, 4))
    expected, iterates = literal_algorithm_1(X, y, resolved, normals, order)
    got = _run(X, y, resolved, order, make_generator(8, data_is_public=True))
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9)
    # each x_t is a convex combination of points of the ball, hence inside it
    assert max(np.linalg.norm(x) for x in iterates) <= resolved.radius * (1 + 1e-12)


@pytest.mark.parametrize("learner", ["adagrad_norm", "parameter_free"])
def test_compiled_loop_with_honaker_uses_the_audited_noise_path(learner: str) -> None:
    """The loop's γ_t with ``prefix_estimator='honaker'`` is :func:`noisy_running_sums` (estimator 1) on zero
    increments with the same normals: the path whose joint law the Honaker tests check against the full tree."""
    X, y = synthetic(150, 3, "logistic", seed=2)
    meta = PublicMetadata(n=150, d=3, row_norm_bound=1.0)
    resolved = SOLVER.resolve(_learner_params(learner, rho=2.0), meta)
    assert resolved.prefix_estimator == "honaker"
    order = np.random.default_rng(5).permutation(150)
    normals = make_generator(8, data_is_public=True).standard_normal((150, 4))
    gammas = np.empty((150, 4))
    noisy_running_sums(np.zeros((150, 4)), resolved.noise_scale, resolved.k, normals, gammas, 1)
    expected, _ = literal_algorithm_1(X, y, resolved, normals, order, gammas=gammas)
    got = _run(X, y, resolved, order, make_generator(8, data_is_public=True))
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9)


def _run(X, y, resolved: DPOTBResolved, order: np.ndarray | None, rng: np.random.Generator, **more) -> np.ndarray:
    return dp_online_to_batch(
        X, y, model=resolved.model, loss_parameter=next(iter(resolved.loss_params.values()), 0.0), l2=resolved.l2,
        fit_intercept=resolved.fit_intercept, feature_bound=resolved.row_norm_bound, label_bound=resolved.label_bound,
        radius=resolved.radius, k=resolved.k, sigma_1=resolved.noise_scale, step_bound=resolved.step_bound,
        learner_name=resolved.learner,
        estimator=resolved.prefix_estimator, context=SOLVER.learner_context(resolved), rng=rng, order=order, **more,
    )  # fmt: skip


@pytest.mark.parametrize("sampler", ["float", "exact"])
def test_a_stored_dataset_streamed_by_partitions_is_the_in_memory_pass_in_their_order(
    dask_client, tmp_path, sampler: str
) -> None:
    """Issue 39: the pass over a dataset in the parquet store reads one partition at a time (partitions in a secret
    order, each partition's rows in a secret order, from a child generator spawned before the noise) and releases
    exactly what the in-memory pass releases with that order for the same noise — float and exact samplers — through
    ``fit_partitioned`` as well; the partition reads are checked (a tampered partition fails the fit)."""
    from types import SimpleNamespace

    from privfit.datasets.parquet_store import ParquetDatasetStore
    from privfit.datasets.store import DatasetStoreError
    from privfit.scaleout.dask_rows import DaskPartitionedRows, StoredPartitions

    X, y = synthetic(3000, 3, "logistic", seed=6)
    X[5], y[7] = 9.0, np.nan  # rows beyond the bounds: the loop enforces them, streamed or not
    store = ParquetDatasetStore(str(tmp_path / "parquet"), partition_bytes=4096)  # 128 rows a partition
    where = StoredPartitions.of(store, store.put(SimpleNamespace(X=X, y=y, units=None)))
    meta = PublicMetadata(n=3000, d=3, row_norm_bound=1.0)
    with using_sampler(sampler):
        resolved = SOLVER.resolve({"model": "logistic", "rho": 1.0}, meta)
        partitions = DaskPartitionedRows(dask_client, where, meta, fit_intercept=False)
        assert partitions.partition_rows == (128,) * 23 + (56,) and partitions.features == 3
        lattice = exact_lattice(resolved) if sampler == "exact" else None
        streamed = _run(np.empty((0, 3)), np.empty(0), resolved, None, make_generator(4, data_is_public=True),
                        partitions=partitions, lattice=lattice)  # fmt: skip
        rng = make_generator(4, data_is_public=True)
        order_rng = rng.spawn(1)[0]
        starts = np.arange(24) * 128
        visit = order_rng.permutation(24)
        order = np.concatenate([starts[j] + order_rng.permutation(partitions.partition_rows[j]) for j in visit])
        assert sorted(order) == list(range(3000))
        in_memory = _run(X, y, resolved, order, rng, lattice=lattice)
        np.testing.assert_array_equal(streamed, in_memory)
        fitted = SOLVER.fit_partitioned(partitions, meta, resolved, make_generator(4, data_is_public=True))
        np.testing.assert_array_equal(np.append(fitted.coefficients, fitted.intercept), streamed)
    foreign = store.put(SimpleNamespace(X=X[::-1].copy(), y=y[::-1].copy(), units=None))
    store.fs.pipe_file(f"{store.root}/{where.key}/part-00009.parquet",
                       store.fs.cat_file(f"{store.root}/{foreign}/part-00009.parquet"))  # fmt: skip
    with pytest.raises(DatasetStoreError, match="does not match its content hash"):
        SOLVER.fit_partitioned(partitions, meta, resolved, make_generator(4, data_is_public=True))


def test_rows_and_labels_outside_the_bounds_are_brought_to_them_in_the_loop() -> None:
    """The loop enforces the declared bounds itself (``enforces_declared_bounds``: the fit passes the rows as
    given, without the O(nd) copy) exactly as :func:`enforce_declared_bounds` does: the same release as on the
    enforced rows, up to the rounding of the clipping factor; and ``fit`` on rows within the bounds is the loop
    on those very rows."""
    X, y = synthetic(100, 3, "linear", seed=4)
    meta = PublicMetadata(n=100, d=3, row_norm_bound=1.0, label_bound=0.5)
    resolved = SOLVER.resolve({"model": "linear", "rho": 1.0, "radius": 1.0}, meta)
    wild_X, wild_y = X * 7.0, y * 9.0
    wild_X[3, 1], wild_X[5], wild_X[6, 0], wild_X[8] = np.nan, np.inf, -np.inf, 1e200
    wild_y[7], wild_y[9] = np.nan, -np.inf
    order = np.arange(100)
    with np.errstate(over="ignore"):  # the 1e200 row's squares overflow: its norm is inf, its factor 0
        A, v = enforce_declared_bounds(wild_X, wild_y, meta)
    assert np.all(np.isfinite(A)) and np.all(np.linalg.norm(A, axis=1) <= 1.0)
    got = _run(wild_X, wild_y, resolved, order, make_generator(1, data_is_public=True))
    expected = _run(A, v, resolved, order, make_generator(1, data_is_public=True))
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)
    assert np.all(np.isfinite(got))
    inside = SOLVER.fit(X, y, meta, resolved, make_generator(2, data_is_public=True))
    rng = make_generator(2, data_is_public=True)
    direct = _run(X, y, resolved, rng.permutation(100), rng)
    np.testing.assert_array_equal(direct, [*inside.coefficients, inside.intercept])


def test_fit_releases_x_t_from_a_secret_order_and_is_reproducible_only_with_a_public_seed() -> None:
    X, y = synthetic(300, 3, "logistic", seed=6)
    meta = PublicMetadata(n=300, d=3, row_norm_bound=1.0)
    resolved = SOLVER.resolve({"rho": 1.0}, meta)
    one = SOLVER.fit(X, y, meta, resolved, make_generator(4, data_is_public=True))
    two = SOLVER.fit(X, y, meta, resolved, make_generator(4, data_is_public=True))
    assert one.coefficients == two.coefficients
    # the order is the generator's permutation, drawn before the noise, and the release is x_T
    rng = make_generator(4, data_is_public=True)
    direct = _run(X, y, resolved, rng.permutation(300), rng)
    np.testing.assert_array_equal(direct, [*one.coefficients, one.intercept])
    assert np.linalg.norm([*one.coefficients, one.intercept]) <= resolved.radius
    secret = SOLVER.fit(X, y, meta, resolved, make_generator())
    assert secret.coefficients != one.coefficients


# ---------------------------------------------------------------------------------------------------------
# parameters, progress, cancellation, results
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"learner": "strongly_convex", "rho": 1.0}, "l2"),
        ({"learner": "parameter_free", "k": 1.0, "rho": 1.0}, "k"),
        ({"learner": "ogd", "regularization_scale": 1.0, "rho": 1.0}, "regularization_scale"),
        ({"initial_point": [0.0, 0.0], "rho": 1.0}, "initial_point"),
        ({"initial_point": [50.0, 0.0, 0.0, 0.0, 0.0], "rho": 1.0}, "initial_point"),
        ({"learner": "sgd", "rho": 1.0}, "learner"),
        ({"k": 0.5, "rho": 1.0}, "k"),
        ({"rho": -1.0}, "rho"),
        ({}, "epsilon"),
    ],
)
def test_bad_params_name_the_field(params: dict, field: str) -> None:
    with pytest.raises(SolverParameterError) as error:
        SOLVER.resolve(params, META)
    assert error.value.parameter == field


def test_explicit_rho_and_target_epsilon_are_exclusive_and_delta_is_needed() -> None:
    with pytest.raises(SolverParameterError, match="not both"):
        SOLVER.resolve({"rho": 1.0}, META, target_epsilon=1.0, delta=1e-6)
    with pytest.raises(SolverParameterError) as error:
        SOLVER.resolve({}, META, target_epsilon=1.0)
    assert error.value.parameter == "delta"


def test_initial_point_is_the_first_point_played() -> None:
    X, y = synthetic(1, 3, "logistic", seed=1)
    meta = PublicMetadata(n=1, d=3, row_norm_bound=1.0)
    point = [0.1, -0.2, 0.3, 0.05]
    resolved = SOLVER.resolve({"rho": 1.0, "initial_point": point}, meta)
    result = SOLVER.fit(X, y, meta, resolved, make_generator(0, data_is_public=True))
    # T = 1: x_1 = w_1 = x₁ whatever the noise
    np.testing.assert_allclose([*result.coefficients, result.intercept], point, rtol=0, atol=0)


def test_resolved_round_trips_through_json_and_is_checked_against_metadata() -> None:
    resolved = SOLVER.resolve({"learner": "optimistic"}, META, target_epsilon=1.0, delta=1e-6)
    stored = json.loads(json.dumps(resolved.model_dump(mode="json")))
    assert SOLVER.load_resolved(stored) == resolved
    with pytest.raises(SolverParameterError):
        SOLVER.cost(stored, PublicMetadata(n=5001, d=4, row_norm_bound=1.0))


def test_progress_is_monotone_ends_at_one_and_cancel_stops_the_pass() -> None:
    n = 50_000
    X, y = synthetic(n, 3, "logistic", seed=9)
    meta = PublicMetadata(n=n, d=3, row_norm_bound=1.0)
    resolved = SOLVER.resolve({"rho": 1.0}, meta)
    seen: list[float] = []
    SOLVER.fit(X, y, meta, resolved, make_generator(1, data_is_public=True), progress=seen.append)
    assert seen == sorted(seen) and seen[-1] == 1.0 and len(seen) >= 2 and 0 < seen[0] < 1
    calls = {"n": 0}

    def stop_after_first_block() -> bool:
        calls["n"] += 1
        return calls["n"] > 1

    with pytest.raises(FitCancelled) as cancelled:
        SOLVER.fit(X, y, meta, resolved, make_generator(1, data_is_public=True), should_stop=stop_after_first_block)
    assert 0 < cancelled.value.steps_completed < n


def test_fit_result_metadata_is_the_resolved_settings() -> None:
    X, y = synthetic(200, 3, "huber", seed=3)
    meta = PublicMetadata(n=200, d=3, row_norm_bound=1.0, feature_names=("a", "b", "c"))
    resolved = SOLVER.resolve({"model": "huber", "huber_delta": 0.5}, meta, target_epsilon=2.0, delta=1e-6)
    result = SOLVER.fit(X, y, meta, resolved, make_generator(2, data_is_public=True))
    assert result.metadata == {**resolved.model_dump(mode="json"), "noise_sampler": describe_sampler()}
    assert result.feature_names == ["a", "b", "c"] and len(result.coefficients) == 3
    json.dumps(result.to_dict())


@pytest.mark.parametrize("model", ["logistic", "linear", "huber", "svm"])
def test_replacing_a_row_moves_delta_t_by_at_most_the_data_terms_bound_even_with_l2(model: str) -> None:
    """Proof of Theorem 3 with the L2 term: given the same history (x_{t−1}, w_t), δ_t − δ'_t involves only the
    data term, so Δ_t ≤ t^{k−1}(2kG + (k+1)Hr) with the UNREGULARISED G and H (what σ_t uses) even when λ > 0."""
    rng = np.random.default_rng(21)
    meta = PublicMetadata(n=500, d=3, row_norm_bound=1.0)
    for k in (1.0, 3.0):
        learner = "parameter_free" if k == 3.0 else "ogd"
        r = SOLVER.resolve({"model": model, "l2": 0.7, "rho": 1.0, "learner": learner}, meta)
        loss = make_loss(model, l2=r.l2, **r.loss_params)
        worst = 0.0
        for _ in range(2000):
            t = int(rng.integers(1, 500))
            beta_t, beta_prev = float(t) ** k, float(t - 1) ** k
            beta_sum = sum(float(i) ** k for i in range(1, t + 1))
            x_prev, w = clip_rows(rng.uniform(-3, 3, (2, 4)), r.radius)
            w = x_prev + clip_rows((w - x_prev)[None, :], r.step_bound)[0]  # the loop's step bound
            x_t = x_prev + beta_t / beta_sum * (w - x_prev)
            rows = clip_rows(rng.choice([-1.0, 1.0], (2, 4)) * rng.uniform(0.5, 1, (2, 4)), r.design_norm_bound)
            labels = rng.choice([-1.0, 1.0], 2) * r.label_bound
            deltas = [
                beta_t * loss.per_example_gradients(x_t, rows[i : i + 1], labels[i : i + 1])[0]
                - beta_prev * loss.per_example_gradients(x_prev, rows[i : i + 1], labels[i : i + 1])[0]
                for i in (0, 1)
            ]
            bound = tree_sensitivity_bound(
                t, k=k, lipschitz=r.lipschitz, smoothness=r.smoothness, step_bound=r.step_bound
            )
            worst = max(worst, float(np.linalg.norm(deltas[0] - deltas[1])) / bound)
        assert 0.05 < worst <= 1.0, (model, k, worst)


def test_exact_kernel_releases_integer_running_sums_plus_tree_noise_on_the_lattice() -> None:
    """With a lattice (the exact sampler), every ḡ_t the learner sees is h·(Σ_{s≤t} rint(δ_s/h) + Σ_{s∈I_t} Z_s)
    exactly: the integer running sum telescopes over the tree's nodes, so ḡ_t is a function of the released
    integer nodes (solver module docstring, "exact_lattice"). Checked round by round against a plain recount."""
    from privfit.solvers.compiled_losses import LOSS_KINDS
    from privfit.solvers.online_to_batch.kernel import online_to_batch_block
    from privfit.solvers.online_to_batch.learners import get_learner
    from privfit.solvers.online_to_batch.tree_aggregation import tree_index_set, tree_levels

    n, d = 40, 3
    rng = np.random.default_rng(5)
    meta = PublicMetadata(n=n, d=d, row_norm_bound=1.0, label_bound=1.0)
    with using_sampler("exact"):
        r = SOLVER.resolve({"model": "logistic", "rho": 0.5}, meta)
    assert r.sampler == "exact" and r.prefix_estimator == "plain" and r.k == 1.0
    lattice = exact_lattice(r)
    h = lattice.spacing
    X = rng.uniform(-0.5, 0.5, (n, d))
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    kind = get_learner(r.learner)
    state = kind.init_state(SOLVER.learner_context(r))
    p, levels = d + 1, tree_levels(n) + 1
    w, x, g = np.zeros(p), np.zeros(p), np.zeros(p)
    prefix, left, left_variance = np.zeros((levels, p)), np.zeros((levels, p)), np.zeros(levels)
    beta_total, scratch, g_int = np.zeros(1), np.zeros((4, p)), np.zeros(p, dtype=np.int64)
    noise = integer_noise(lattice, n * p, rng).reshape(n, p).astype(np.float64)
    for t in range(1, n + 1):
        online_to_batch_block(
            X, y, np.arange(t - 1, t), t, t + 1, noise[t - 1 : t], 1.0, 1.0, 0, LOSS_KINDS["logistic"], 0.0, r.l2, True,
            1.0, 1.0, r.radius, r.step_bound, kind.kind, w, x, g, prefix, left, left_variance, beta_total,
            state.vectors, state.scalars, state.config, scratch, h, g_int,
        )  # fmt: skip
        gbar = scratch[2]
        expected = (g_int + noise[[s - 1 for s in tree_index_set(t)]].sum(axis=0)) * h
        assert np.array_equal(gbar, expected)  # exactly the integer release, scaled
        assert np.array_equal(np.ldexp(gbar, -lattice.exponent), np.rint(np.ldexp(gbar, -lattice.exponent)))
        assert np.max(np.abs(g_int * h - g)) <= t * h  # each δ_s was rounded by at most h/2
