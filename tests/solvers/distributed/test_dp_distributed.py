"""``dp_distributed`` pinned to the spec (``specs/seed-001-distributed-online.md``): §7.1 deterministic values,
§7.2 structural privacy invariants (with variants that break them, to show the tests have power), the cost
curve against the spec's table and dp-accounting, parameters, progress and cancellation."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable

import numpy as np
import pytest
from numpy.typing import NDArray

import privfit.solvers.distributed.solver as distributed_module
from privfit.privacy import DEFAULT_GRID, PrivacyCost, laplace_rdp, make_generator, pure_dp_rdp
from privfit.privacy.noise import describe_sampler
from privfit.solvers import (
    DPDistributedResolved,
    FitCancelled,
    PublicMetadata,
    SolverParameterError,
    get_solver,
)
from privfit.solvers.distributed.mixing import MixingSchedule, make_mixing
from privfit.solvers.distributed.solver import (
    MIN_ROUNDS,
    OUTLOOK_BLOCK_FRACTION,
    OUTLOOK_EXACT_ROUNDS,
    SQUARED_ROUNDS,
    assign_batches,
    broadcast_noise_sum,
    default_l2,
    laplace_scales,
    local_update,
    round_schedule,
    run_rounds,
    step_sizes,
)
from privfit.solvers.losses import make_loss

SOLVER = get_solver("dp_distributed")
FloatArray = NDArray[np.float64]


def synthetic(n: int, d: int, seed: int) -> tuple[FloatArray, FloatArray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X *= rng.uniform(size=(n, 1)) ** (1 / d) / np.linalg.norm(X, axis=1, keepdims=True)
    y = np.where(X @ np.linspace(1.0, -1.0, d) > 0, 1.0, -1.0)
    return X, y


# ---------------------------------------------------------------------------------------------------------
# §7.1 deterministic values
# ---------------------------------------------------------------------------------------------------------


def test_noise_scales_match_the_spec_table() -> None:
    """§7.1.1: μ_k = 2 α_k √n C/(h ε) with n = 10, C = 1, ε = 0.1, λ = 0.1."""
    alphas = step_sizes(1000, schedule="strongly_convex", l2=0.1)
    mus = laplace_scales(alphas, dimension=10, clip_norm=1.0, batch_size=1, noise_multiplier=1 / 0.1)
    expected = {1: 632.4555320336759, 2: 316.22776601683796, 10: 63.245553203367585, 100: 6.32455532033676,
                1000: 0.6324555320336759}  # fmt: skip
    for k, value in expected.items():
        assert mus[k - 1] == pytest.approx(value, rel=1e-11)
        assert mus[k - 1] >= value  # the rounding margin only ever adds noise
    mus5 = laplace_scales(alphas, dimension=10, clip_norm=1.0, batch_size=5, noise_multiplier=10.0)
    assert mus5[0] == pytest.approx(126.49110640673518, rel=1e-11)
    convex = laplace_scales(
        step_sizes(100, schedule="convex", l2=0.0), dimension=10, clip_norm=1.0, batch_size=1, noise_multiplier=10.0
    )
    for k, value in {1: 31.622776601683793, 4: 15.811388300841896, 100: 3.16227766016838}.items():
        assert convex[k - 1] == pytest.approx(value, rel=1e-11)


def update(mixed: FloatArray, X: FloatArray, y: FloatArray, *, step: float, l2: float = 0.0, clip: float = 1.0,
           radius: float = 1e6, model: str = "svm") -> FloatArray:  # fmt: skip
    return local_update(
        mixed, X, y, np.linalg.norm(X, axis=2), loss=make_loss(model), step=step, l2=l2, clip_norm=clip, radius=radius
    )


def test_sensitivity_is_attained() -> None:
    """§7.1.2: b = 0, n = 10, x = (C/√n)·1, y = ±1 under the hinge: ‖w − w'‖₁ = 2α√nC = 4.427188724235731."""
    x = np.full((1, 1, 10), 1 / math.sqrt(10))
    w = update(np.zeros((1, 10)), x, np.array([[1.0]]), step=0.7)
    w_prime = update(np.zeros((1, 10)), x, np.array([[-1.0]]), step=0.7)
    assert np.abs(w - w_prime).sum() == pytest.approx(4.427188724235731, rel=1e-12)


@pytest.mark.parametrize("model", ["logistic", "svm", "linear", "huber"])
def test_l1_shift_never_exceeds_the_sensitivity(model: str) -> None:
    """§7.1.2 property test: random batches differing in one row, random b (also far outside W), random radius
    (projection active or not), rows and labels outside any bound: ‖w − w'‖₁ ≤ 2α√nC/h."""
    rng = np.random.default_rng(5)
    for _ in range(300):
        n, h = int(rng.integers(1, 8)), int(rng.integers(1, 6))
        X = rng.normal(scale=rng.uniform(0.1, 5.0), size=(1, h, n))
        y = rng.choice([-1.0, 1.0], size=(1, h)) * (1.0 if model in ("logistic", "svm") else rng.uniform(0, 5))
        X2, y2 = X.copy(), y.copy()
        X2[0, 0] = rng.normal(scale=5.0, size=n)
        y2[0, 0] = -y2[0, 0] * 3.0 if model in ("linear", "huber") else -y2[0, 0]
        mixed = rng.normal(scale=rng.uniform(0.1, 20.0), size=(1, n))
        step, clip, radius = rng.uniform(0.01, 3.0), rng.uniform(0.1, 2.0), rng.uniform(0.5, 30.0)
        l2 = float(rng.choice([0.0, 0.5]))
        w = update(mixed, X, y, step=step, l2=l2, clip=clip, radius=radius, model=model)
        w2 = update(mixed, X2, y2, step=step, l2=l2, clip=clip, radius=radius, model=model)
        assert np.abs(w - w2).sum() <= 2 * step * math.sqrt(n) * clip / h


def test_cost_is_the_laplace_curve_of_the_spec_table() -> None:
    """§3.4: one pass at ε₀ charges ε_Lap(α; ε₀); the spec's reference values (p = 1), relative 1e-9."""
    table = {
        0.01: [7.474969374e-05, 9.966419172e-05, 1.992953279e-04, 3.983001829e-04, 7.94185557e-04,
               1.569108546e-03, 2.996409397e-03, 7.312950415e-03],
        0.1: [7.247485389e-03, 9.64420784e-03, 1.899121496e-02, 3.567677343e-02, 5.866450976e-02,
              7.820575859e-02, 8.912220635e-02, 9.728944257e-02],
        1.0: [0.5128835113, 0.61912363, 0.8136892966, 0.9101988012, 0.9559067679, 0.978148425, 0.9891221587,
              0.9972894426],
        2.0: [1.436809158, 1.595773501, 1.813461612, 1.910198763, 1.955906768, 1.978148425, 1.989122159,
              1.997289443],
    }  # fmt: skip
    orders = [1.5, 2, 4, 8, 16, 32, 64, 256]
    for epsilon, values in table.items():
        np.testing.assert_allclose(laplace_rdp(orders, scale=1 / epsilon), values, rtol=1e-9)
    meta = PublicMetadata(n=400, d=3, row_norm_bound=1.0)
    resolved = SOLVER.resolve({"noise_multiplier": 2.0, "passes": 3, "n_learners": 2}, meta)
    cost = SOLVER.cost(resolved, meta)
    np.testing.assert_allclose(cost.rdp, 3 * laplace_rdp(DEFAULT_GRID, scale=2.0), rtol=1e-15)
    assert resolved.epsilon_per_pass == 0.5


def test_cost_matches_dp_accounting() -> None:
    """The same events in dp-accounting: p passes = SelfComposed(LaplaceDpEvent(b), p) under REPLACE_ONE."""
    dpa = pytest.importorskip("dp_accounting")
    from dp_accounting import rdp

    meta = PublicMetadata(n=1000, d=4, row_norm_bound=1.0)
    for b, passes in ((1.0, 1), (0.7, 2), (5.0, 4)):
        resolved = SOLVER.resolve({"noise_multiplier": b, "passes": passes}, meta)
        ours = SOLVER.cost(resolved, meta)
        accountant = rdp.RdpAccountant(list(DEFAULT_GRID.orders), dpa.NeighboringRelation.REPLACE_ONE)
        accountant.compose(dpa.SelfComposedDpEvent(dpa.LaplaceDpEvent(b), passes))
        for delta in (1e-5, 1e-8):
            assert ours.epsilon(delta).epsilon == pytest.approx(accountant.get_epsilon(delta), rel=1e-6)


def test_ledger_arithmetic_of_repeated_jobs() -> None:
    """§7.1.4: k identical jobs compose to k·curve; 100 jobs at ε₀ = 0.1 report ≈ 4.53 at δ = 1e-5.

    privfit's ledger converts the RDP sum only (DESIGN §2); for ONE job at ε₀ = 0.1 that gives 0.1028 where the
    pure sum would say 0.1 — the ledger's value is the larger, so it never under-reports (DESIGN §1.6)."""
    meta = PublicMetadata(n=1000, d=4, row_norm_bound=1.0)
    one = SOLVER.cost(SOLVER.resolve({"noise_multiplier": 10.0}, meta), meta)
    total = PrivacyCost.zero()
    for _ in range(100):
        total = total + one
    np.testing.assert_allclose(total.rdp, 100 * one.rdp, rtol=1e-12)
    assert total.epsilon(1e-5).epsilon == pytest.approx(4.53, abs=0.01)
    assert 0.1 <= one.epsilon(1e-5).epsilon == pytest.approx(0.1028, abs=5e-4)


def test_calibration_meets_the_target() -> None:
    meta = PublicMetadata(n=5000, d=6, row_norm_bound=1.0)
    for target in (0.1, 1.0, 5.0):
        resolved = SOLVER.resolve({"passes": 2}, meta, target_epsilon=target, delta=1e-6)
        assert resolved.epsilon is not None and target * 0.995 <= resolved.epsilon <= target
        assert SOLVER.cost(resolved, meta).epsilon(1e-6).epsilon <= target


# ---------------------------------------------------------------------------------------------------------
# parameters (§7.1.7)
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"l2": 0.0}, "l2"),  # strongly convex schedule without strong convexity
        ({"n_learners": 64, "batch_size": 10}, "batch_size"),  # K = ⌊⌊1000/64⌋/10⌋ = 1 < 20
        ({"algorithm": "online", "n_learners": 64}, "n_learners"),  # K = 15 < 20
        ({"algorithm": "online", "batch_size": 5}, "batch_size"),
        ({"topology": "erdos_renyi"}, "edge_probability"),
        ({"edge_probability": 0.5}, "edge_probability"),
        ({"topology": "custom"}, "mixing_matrices"),
        ({"topology": "custom", "n_learners": 2, "mixing_matrices": [[[0.7, 0.2], [0.3, 0.8]]]}, "mixing_matrices"),
        ({"seed": 3}, "seed"),  # a client seed is never accepted on private data (spec P11)
        ({"passes": 11}, "passes"),
        ({"n_learners": 0}, "n_learners"),
        ({"rounds": 30, "batch_size": 5}, "rounds"),
        ({"rounds": 30, "algorithm": "online"}, "rounds"),
        ({"rounds": 19}, "rounds"),
    ],
)
def test_bad_parameters_are_refused_with_the_field_named(params: dict[str, object], field: str) -> None:
    meta = PublicMetadata(n=1000, d=4, row_norm_bound=1.0)
    with pytest.raises(SolverParameterError) as caught:
        SOLVER.resolve(params, meta, target_epsilon=1.0, delta=1e-6)
    assert caught.value.parameter == field, caught.value


def test_defaults_resolve_from_public_values_only() -> None:
    """The public rules of the module docstring (Defaults): m = 1, K = 20, h = ⌊n/K⌋, C = B/2, λ from ν."""
    meta = PublicMetadata(n=32_561, d=104, row_norm_bound=1.0)
    r = SOLVER.resolve({}, meta, target_epsilon=1.0, delta=1e-6)
    assert (r.n_learners, r.topology, r.schedule, r.lr_offset) == (1, "ring", "strongly_convex", 0)
    assert r.rounds_per_pass == 20 and r.batch_size == 1628 and r.rows_used == 32_560
    assert r.dimension == 105 and r.clip_norm == pytest.approx(math.sqrt(2.0) / 2)  # C = B/2 < G = sqrt(2)
    nu = 2 * math.sqrt(2) * 105 * r.clip_norm * math.sqrt(20) * r.noise_multiplier / 32_561
    assert r.l2 == pytest.approx(min(1.0, max(0.02, nu / 2.5)), rel=1e-12)
    assert r.radius == pytest.approx(math.sqrt(2 * math.log(2) / r.l2), rel=1e-12)  # spec §2.3
    assert r.first_noise_scale == pytest.approx(2 / r.l2 * math.sqrt(105) * r.clip_norm / 1628 * r.noise_multiplier)
    assert r.tail_start == 10
    again = SOLVER.load_resolved(json.loads(json.dumps(r.model_dump(mode="json"))))
    assert again == r and isinstance(again, DPDistributedResolved)


def test_default_l2_rule_follows_the_public_noise_level() -> None:
    """λ grows as ε falls or d grows (ν ∝ d·b/n), within [0.02, 1]; explicit values win; the cost ignores λ."""
    meta = PublicMetadata(n=5_000, d=40, row_norm_bound=4.0)
    l2s = [SOLVER.resolve({}, meta, target_epsilon=e, delta=1e-6).l2 for e in (0.05, 0.5, 2.0, 50.0)]
    assert l2s == sorted(l2s, reverse=True) and l2s[0] == 1.0 and l2s[-1] == 0.02
    assert default_l2(dimension=10, clip_norm=1.0, n_learners=1, rounds=20, noise_multiplier=1.0, n_rows=10**9) == 0.02
    explicit = SOLVER.resolve({"l2": 0.3, "lr_offset": 7, "clip_norm": 0.1}, meta, target_epsilon=1.0, delta=1e-6)
    assert (explicit.l2, explicit.lr_offset, explicit.clip_norm) == (0.3, 7, 0.1)
    by_default = SOLVER.resolve({}, meta, target_epsilon=1.0, delta=1e-6)
    np.testing.assert_array_equal(SOLVER.cost(explicit, meta).rdp, SOLVER.cost(by_default, meta).rdp)


def test_squared_loss_defaults_start_with_a_stable_step() -> None:
    """Squared loss: K = 50 rounds and t0 = ⌈β/λ⌉ − 1, so that α_1 = 1/(λ(1 + t0)) ≤ 1/β."""
    meta = PublicMetadata(n=4_000, d=11, row_norm_bound=3.0)
    r = SOLVER.resolve({"model": "linear"}, meta, target_epsilon=1.0, delta=1e-6)
    beta = 3.0**2 + 1
    assert r.rounds_per_pass == SQUARED_ROUNDS and r.batch_size == 4_000 // SQUARED_ROUNDS
    assert r.lr_offset == math.ceil(beta / r.l2) - 1 >= 1  # the smallest offset with a stable first step
    first_step = 1 / (r.l2 * (1 + r.lr_offset))
    assert first_step <= (1 / beta) * (1 + 1e-12)
    # minimal: found by search, independently of the formula, the first offset whose first step is ≤ 1/β
    smallest = next(t for t in itertools.count(0) if 1 / (r.l2 * (1 + t)) <= (1 / beta) * (1 + 1e-12))
    assert r.lr_offset == max(1, smallest)
    assert r.clip_norm == pytest.approx(math.sqrt(beta) / 2)
    rounds = SOLVER.resolve({"rounds": 25}, meta, target_epsilon=1.0, delta=1e-6)
    assert (rounds.rounds_per_pass, rounds.batch_size) == (25, 160)


def per_round_noise_sum(rounds: int, **schedule: float | int | str) -> float:
    """Σ_j μ_j² Π_{i>j} (1 − α_i λ)² round by round over the whole schedule (the outlook before issue 35)."""
    alphas, mus = round_schedule(rounds, **schedule)  # type: ignore[arg-type]
    reach = np.append(np.cumprod(np.abs(1.0 - alphas * schedule["l2"])[::-1])[::-1][1:], 1.0)
    return float(np.sum((mus * reach) ** 2))


@pytest.mark.parametrize(
    ("rounds", "schedule", "l2", "lr_scale", "lr_offset"),
    [(20, "strongly_convex", 0.1, 1.0, 0), (5_000, "strongly_convex", 0.02, 3.0, 7), (60_000, "convex", 0.5, 1.0, 0),
     (300_000, "strongly_convex", 0.3, 1.0, 0), (300_000, "strongly_convex", 0.05, 2.5, 100),
     (400_000, "convex", 1.5, 1.1, 0), (400_000, "convex", 0.01, 0.5, 10)],
)  # fmt: skip
def test_the_outlooks_noise_sum_is_the_per_round_one(rounds, schedule, l2, lr_scale, lr_offset) -> None:
    """Up to 2¹⁶ rounds the sum runs round by round (to 1e-12); beyond, by blocks of k/4096 rounds (to 1e-4)."""
    common = {"schedule": schedule, "l2": l2, "lr_scale": lr_scale, "lr_offset": lr_offset, "dimension": 12,
              "clip_norm": 0.7, "batch_size": 3, "noise_multiplier": 2.0}  # fmt: skip
    expected = per_round_noise_sum(rounds, **common)
    rel = 1e-12 if rounds <= OUTLOOK_EXACT_ROUNDS else 1e-4
    assert broadcast_noise_sum(rounds, **common) == pytest.approx(expected, rel=rel)


def test_planning_a_billion_rounds_evaluates_a_bounded_schedule(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 35: an online fit of 10⁸ rows over 10 passes has 10⁹ rounds. Its plan and outlook never build the
    per-round schedule (8 GB an array before) and evaluate the step-size formula at ≈ 2¹⁶ + 4096·ln(10⁹/2¹⁶)
    points; the plan's first and last noise scales are the per-round schedule's (same operations)."""
    sizes: list[int] = []
    original = distributed_module.step_sizes_at

    def recorded(rounds, **kwargs):
        sizes.append(int(np.size(rounds)))
        return original(rounds, **kwargs)

    def refused(*args, **kwargs):
        raise AssertionError("the per-round schedule was built")

    monkeypatch.setattr(distributed_module, "step_sizes_at", recorded)
    monkeypatch.setattr(distributed_module, "round_schedule", refused)
    meta = PublicMetadata(n=10**8, d=20, row_norm_bound=1.0)
    plan = SOLVER.plan({"algorithm": "online", "passes": 10}, meta, target_epsilon=1.0, delta=1e-9)
    outlook = SOLVER.outlook(plan.resolved, meta)
    assert plan.resolved.rounds_per_pass * plan.resolved.passes == 10**9 and outlook is not None
    blocks = math.log(10**9 / OUTLOOK_EXACT_ROUNDS) / math.log1p(OUTLOOK_BLOCK_FRACTION)
    assert max(sizes) <= OUTLOOK_EXACT_ROUNDS + blocks + 2 < 110_000
    small = SOLVER.resolve({"rounds": 40, "passes": 2}, meta, target_epsilon=1.0, delta=1e-9)
    monkeypatch.undo()
    _, mus = small.round_schedule()
    assert (small.first_noise_scale, small.last_noise_scale) == (mus[0], mus[-1])


# ---------------------------------------------------------------------------------------------------------
# §7.2 structural privacy tests
# ---------------------------------------------------------------------------------------------------------

M, N_ROWS, DIM, H = 4, 4 * 25 * 3, 3, 3  # K = 25 rounds


class Recorder:
    def __init__(self) -> None:
        self.iterates: list[FloatArray] = []
        self.broadcasts: list[FloatArray] = []

    def __call__(self, k: int, iterates: FloatArray, broadcasts: FloatArray) -> None:
        assert k == len(self.iterates) + 1
        self.iterates.append(iterates.copy())
        self.broadcasts.append(broadcasts.copy())


def recorded_run(
    runner: Callable[..., FloatArray] = run_rounds, *, topology: str = "ring", l2: float = 0.3
) -> tuple[Recorder, FloatArray, dict[str, object]]:
    X, y = synthetic(N_ROWS, DIM, 1)
    batches = assign_batches(N_ROWS, M, H, np.random.default_rng(2))
    steps = step_sizes(batches.shape[1], schedule="strongly_convex", l2=l2)
    setup: dict[str, object] = dict(
        mixing=make_mixing(topology, M), loss=make_loss("logistic"), steps=steps, l2=l2, clip_norm=1.0, radius=4.0,
        noise_scales=laplace_scales(steps, dimension=DIM, clip_norm=1.0, batch_size=H, noise_multiplier=1.0),
    )  # fmt: skip
    recorder = Recorder()
    released = runner(X, y, batches, rng=np.random.default_rng(3), tail_start=13, observer=recorder, **setup)
    return recorder, released, {"X": X, "y": y, "batches": batches, **setup}


def replay_mismatch(recorder: Recorder, setup: dict[str, object]) -> float:
    """Max |w_k − update(broadcasts_{k−1}, batch_k)| over k: recompute each round from the TRANSCRIPT alone."""
    X, y, batches = cast_arrays(setup)
    norms = np.linalg.norm(X, axis=1)
    worst = 0.0
    previous = np.zeros((M, DIM))
    mixing = setup["mixing"]
    assert isinstance(mixing, MixingSchedule)
    for k, (iterates, broadcasts) in enumerate(zip(recorder.iterates, recorder.broadcasts, strict=True), start=1):
        rows = batches[:, k - 1]
        again = local_update(
            mixing.mix(k, previous), X[rows], y[rows], norms[rows], loss=setup["loss"],  # type: ignore[arg-type]
            step=float(setup["steps"][k - 1]), l2=setup["l2"], clip_norm=1.0, radius=4.0,  # type: ignore[index, arg-type]
        )  # fmt: skip
        worst = max(worst, float(np.max(np.abs(again - iterates))))
        previous = broadcasts
    return worst


def cast_arrays(setup: dict[str, object]) -> tuple[FloatArray, FloatArray, NDArray[np.intp]]:
    X, y, batches = setup["X"], setup["y"], setup["batches"]
    assert isinstance(X, np.ndarray) and isinstance(y, np.ndarray) and isinstance(batches, np.ndarray)
    return X, y, batches


def variant_runner(mixing_input: str, regulariser_at: str) -> Callable[..., FloatArray]:
    """The loop with one of the two bugs of the spec (P3: mixing the learner's OWN clean iterate; P4/F: the
    literal Algorithm 2's regulariser λ w_t at the internal iterate) — for showing that the tests detect them."""

    def runner(X, y, batches, *, mixing, loss, steps, noise_scales, l2, clip_norm, radius, rng, observer,
               **_: object) -> FloatArray:  # fmt: skip
        m, rounds, _h = batches.shape
        norms = np.linalg.norm(X, axis=1)
        iterates = np.zeros((m, X.shape[1]))
        broadcasts = np.zeros_like(iterates)
        for k in range(1, rounds + 1):
            mixed = mixing.mix(k, broadcasts)
            if mixing_input == "own_clean":  # a_ii w^i instead of a_ii (w^i + σ^i)
                mixed = mixed + np.diag(mixing.matrix(k))[:, None] * (iterates - broadcasts)
            rows = batches[:, k - 1]
            step = float(steps[k - 1])
            regularised_at = iterates if regulariser_at == "internal" else mixed
            unprojected = local_update(
                mixed, X[rows], y[rows], norms[rows], loss=loss, step=step, l2=0.0, clip_norm=clip_norm, radius=1e300
            ) - step * l2 * regularised_at  # fmt: skip
            iterates = unprojected * np.minimum(1.0, radius / np.linalg.norm(unprojected, axis=1, keepdims=True))
            broadcasts = iterates + noise_scales[k - 1] * rng.laplace(size=iterates.shape)
            observer(k, iterates, broadcasts)
        return broadcasts.mean(axis=0)

    return runner


def test_each_round_is_a_function_of_the_transcript_and_its_batch() -> None:
    """§7.2.1 (I1, I2): replaying every round from the recorded BROADCASTS reproduces the internal iterate
    bit for bit; the loop with either bug of the spec fails the same replay (the test has power)."""
    recorder, _, setup = recorded_run()
    assert replay_mismatch(recorder, setup) == 0.0
    for bug in (("own_clean", "mixed"), ("noisy", "internal")):
        broken_recorder, _, broken_setup = recorded_run(variant_runner(*bug))
        assert replay_mismatch(broken_recorder, broken_setup) > 1e-3, bug
    control, _, control_setup = recorded_run(variant_runner("noisy", "mixed"))
    assert replay_mismatch(control, control_setup) < 1e-12  # the harness itself is faithful


class CountingGenerator:
    """Forwards to a numpy Generator and counts the Laplace numbers drawn."""

    def __init__(self, seed: int) -> None:
        self.inner = np.random.default_rng(seed)
        self.laplace_draws = 0

    def laplace(self, loc: float = 0.0, scale: float = 1.0, size: tuple[int, ...] = ()) -> FloatArray:
        self.laplace_draws += int(np.prod(size))
        return self.inner.laplace(loc, scale, size)


def test_exactly_one_noise_draw_per_learner_coordinate_and_round() -> None:
    """§7.2.2 (I3): m·n Laplace numbers per round, no more (a fresh draw per neighbour would add views)."""
    X, y = synthetic(N_ROWS, DIM, 1)
    batches = assign_batches(N_ROWS, M, H, np.random.default_rng(2))
    rounds = batches.shape[1]
    steps = step_sizes(rounds, schedule="convex", l2=0.0)
    rng = CountingGenerator(4)
    run_rounds(
        X, y, batches, mixing=make_mixing("complete", M), loss=make_loss("svm"), steps=steps,
        noise_scales=np.ones(rounds), l2=0.0, clip_norm=1.0, radius=3.0, rng=rng, tail_start=1,  # type: ignore[arg-type]
    )  # fmt: skip
    assert rng.laplace_draws == M * DIM * rounds


@pytest.mark.parametrize(("n_rows", "m", "h"), [(300, 4, 3), (1001, 7, 2), (50, 1, 1), (64, 64, 1)])
def test_every_used_row_occupies_exactly_one_slot(n_rows: int, m: int, h: int) -> None:
    """§7.2.3 (I5): the slot map is injective, uses m·K·h rows, and K = ⌊⌊N/m⌋/h⌋."""
    slots = assign_batches(n_rows, m, h, np.random.default_rng(0))
    assert slots.shape == (m, (n_rows // m) // h, h)
    assert np.unique(slots).size == slots.size and slots.min() >= 0 and slots.max() < n_rows


def test_release_is_recomputable_from_the_broadcasts_alone() -> None:
    """§7.2.4 (P9): the released θ is the projected tail average of the learners' mean broadcasts."""
    recorder, released, _ = recorded_run()
    tail = np.mean([b.mean(axis=0) for b in recorder.broadcasts[12:]], axis=0)
    expected = tail * min(1.0, 4.0 / float(np.linalg.norm(tail)))
    np.testing.assert_allclose(released, expected, rtol=1e-13, atol=1e-15)


# ---------------------------------------------------------------------------------------------------------
# solver: end to end, passes, progress, cancellation
# ---------------------------------------------------------------------------------------------------------


def test_fit_learns_a_separable_problem_and_reports_public_metadata_only() -> None:
    X, y = synthetic(20_000, 5, 7)
    meta = PublicMetadata(n=20_000, d=5, row_norm_bound=1.0)
    resolved = SOLVER.resolve({"model": "svm", "n_learners": 8, "topology": "ring_matchings"}, meta,
                              target_epsilon=2.0, delta=1e-6)  # fmt: skip
    fractions: list[float] = []
    result = SOLVER.fit(X, y, meta, resolved, make_generator(11, data_is_public=True), progress=fractions.append)
    theta = np.array(result.coefficients)
    accuracy = float(np.mean(np.sign(X @ theta + (result.intercept or 0.0)) == y))
    assert accuracy > 0.9
    assert fractions[-1] == 1.0 and fractions == sorted(fractions)
    assert result.metadata == {**resolved.model_dump(mode="json"), "noise_sampler": describe_sampler()}


def test_two_passes_cost_twice_and_use_fresh_permutations() -> None:
    meta = PublicMetadata(n=2000, d=3, row_norm_bound=1.0)
    one = SOLVER.resolve({"noise_multiplier": 1.0}, meta)
    two = SOLVER.resolve({"noise_multiplier": 1.0, "passes": 2}, meta)
    np.testing.assert_allclose(SOLVER.cost(two, meta).rdp, 2 * SOLVER.cost(one, meta).rdp)
    assert two.tail_start == two.rounds_per_pass  # the tail is the second pass
    X, y = synthetic(2000, 3, 8)
    result = SOLVER.fit(X, y, meta, two, make_generator(1, data_is_public=True))
    assert np.all(np.isfinite(result.coefficients))


def test_cancel_stops_between_rounds() -> None:
    X, y = synthetic(5000, 3, 9)
    meta = PublicMetadata(n=5000, d=3, row_norm_bound=1.0)
    resolved = SOLVER.resolve({"algorithm": "online", "n_learners": 1}, meta, target_epsilon=1.0, delta=1e-6)
    calls = 0

    def stop() -> bool:
        nonlocal calls
        calls += 1
        return calls > 3

    with pytest.raises(FitCancelled) as caught:
        SOLVER.fit(X, y, meta, resolved, make_generator(2, data_is_public=True), should_stop=stop)
    assert 0 < caught.value.steps_completed < resolved.rounds_per_pass


def test_minimum_rounds_boundary() -> None:
    meta = PublicMetadata(n=MIN_ROUNDS * 10 * 4, d=2, row_norm_bound=1.0)
    params = {"noise_multiplier": 1.0, "n_learners": 4, "batch_size": 10}
    assert SOLVER.resolve(params, meta).rounds_per_pass == MIN_ROUNDS
    with pytest.raises(SolverParameterError):
        SOLVER.resolve(params, PublicMetadata(n=meta.n - 4, d=2, row_norm_bound=1.0))
    with pytest.raises(SolverParameterError) as caught:  # the default K = 20 needs n ≥ 20·m rows
        SOLVER.resolve({"noise_multiplier": 1.0}, PublicMetadata(n=MIN_ROUNDS - 1, d=2, row_norm_bound=1.0))
    assert caught.value.parameter == "n_learners"


def test_laplace_curve_properties_used_by_the_proof() -> None:
    """§7.1.3: ε_Lap(α; ε) is increasing in α, ≤ min(ε, αε²/2) and ≤ the randomized-response curve, tends to ε
    (α → ∞) and to ε + e^{−ε} − 1 (α → 1); and Σ_j ε_Lap(α; s_j) ≤ ε_Lap(α; Σ_j s_j) for random splits — the
    superadditivity that reduces the n-dimensional Laplace shift to one coordinate (spec §3.3, steps 6–7)."""
    orders = np.array(DEFAULT_GRID.orders)
    rng = np.random.default_rng(9)
    for epsilon in (0.01, 0.1, 0.5, 1.0, 2.0, 5.0):
        curve = laplace_rdp(orders, scale=1 / epsilon)
        assert np.all(np.diff(curve) >= -1e-15)
        assert np.all(curve <= np.minimum(epsilon, orders * epsilon**2 / 2) * (1 + 1e-12))
        assert np.all(curve <= pure_dp_rdp(orders, epsilon=epsilon) * (1 + 1e-12))
        assert laplace_rdp([1e9], scale=1 / epsilon)[0] == pytest.approx(epsilon, rel=1e-6)
        assert laplace_rdp([1.0], scale=1 / epsilon)[0] == pytest.approx(epsilon + math.expm1(-epsilon), rel=1e-12)
        for _ in range(200):
            parts = rng.dirichlet(np.ones(int(rng.integers(2, 12)))) * epsilon
            split = sum(laplace_rdp(orders, scale=1 / s) for s in parts)
            assert np.all(split <= curve * (1 + 1e-12) + 1e-15)
