"""``dp_distributed`` and the noise layer (issue 25, :mod:`privfit.privacy.noise`): the float sampler draws exactly as
before the layer (bit for bit), the exact sampler releases every broadcast on its round's lattice (discrete
Laplace of L1 sensitivity S_k and scale μ_k), and the resolution records the sampler so that the cost — the
Laplace RDP curve (float) or the pure-DP curve (exact) — is that of the draws. Seeds on synthetic data only."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from privfit.privacy import DEFAULT_GRID, laplace_rdp, make_generator, pure_dp_rdp
from privfit.privacy.noise import describe_sampler, laplace_lattice, using_sampler
from privfit.solvers import PublicMetadata, SolverParameterError, get_solver
from privfit.solvers.distributed.mixing import make_mixing
from privfit.solvers.distributed.solver import (
    DPDistributedResolved,
    assign_batches,
    l1_sensitivities,
    laplace_scales,
    run_rounds,
    step_sizes,
)
from privfit.solvers.losses import make_loss

SOLVER = get_solver("dp_distributed")
FloatArray = NDArray[np.float64]
N_ROWS, DIM, M, H, RADIUS = 600, 4, 3, 10, 4.0


def synthetic(n: int, d: int, seed: int) -> tuple[FloatArray, FloatArray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X *= rng.uniform(size=(n, 1)) ** (1 / d) / np.linalg.norm(X, axis=1, keepdims=True)
    return X, np.where(X @ np.linspace(1.0, -1.0, d) > 0, 1.0, -1.0)


def recorded(sampler: str, seed: int = 3) -> tuple[list[FloatArray], list[FloatArray], FloatArray, FloatArray]:
    """Run the rounds under ``sampler``; (iterates, broadcasts) of every round, μ_k and S_k."""
    X, y = synthetic(N_ROWS, DIM, 1)
    batches = assign_batches(N_ROWS, M, H, np.random.default_rng(2))
    steps = step_sizes(batches.shape[1], schedule="strongly_convex", l2=0.3)
    scales = laplace_scales(steps, dimension=DIM, clip_norm=1.0, batch_size=H, noise_multiplier=2.0)
    sensitivities = l1_sensitivities(steps, dimension=DIM, clip_norm=1.0, batch_size=H)
    iterates: list[FloatArray] = []
    broadcasts: list[FloatArray] = []

    def observe(k: int, w: FloatArray, noisy: FloatArray) -> None:
        iterates.append(w.copy())
        broadcasts.append(noisy.copy())

    with using_sampler(sampler):
        run_rounds(
            X, y, batches, mixing=make_mixing("ring", M), loss=make_loss("logistic"), steps=steps,
            noise_scales=scales, l2=0.3, clip_norm=1.0, radius=RADIUS, rng=np.random.default_rng(seed),
            tail_start=1, observer=observe, sensitivities=sensitivities,
        )  # fmt: skip
    return iterates, broadcasts, scales, sensitivities


def test_float_broadcasts_are_the_draws_made_before_the_noise_layer() -> None:
    """Before the layer the loop drew Lap(1) in blocks of rounds, w̃_k = w_k + μ_k·unit_k: the same numbers."""
    iterates, broadcasts, scales, _ = recorded("float")
    unit = np.random.default_rng(3).laplace(0.0, 1.0, size=(len(iterates), M, DIM))
    for k, (w, noisy) in enumerate(zip(iterates, broadcasts, strict=True)):
        np.testing.assert_array_equal(noisy, w + scales[k] * unit[k])


def test_exact_broadcasts_are_discrete_laplace_on_each_rounds_lattice() -> None:
    iterates, broadcasts, scales, sensitivities = recorded("exact")
    assert np.all(np.abs(np.concatenate(iterates)) <= RADIUS)  # the public bound the layer clips to is not binding
    exponents = set()
    standardised = []
    for k, (w, noisy) in enumerate(zip(iterates, broadcasts, strict=True)):
        lattice = laplace_lattice(float(scales[k]), float(sensitivities[k]), DIM, RADIUS)
        exponents.add(lattice.exponent)
        scaled = np.ldexp(noisy, -lattice.exponent)
        assert np.array_equal(scaled, np.rint(scaled)), k
        standardised.append((noisy - w) / scales[k])
    assert len(exponents) > 1  # the lattice follows the round's sensitivity
    # E|Lap(μ)|/μ = 1 for the unit-scale noise of every round: |Lap(1)| is Exp(1) (sd 1), so the mean of the
    # 240 values (rounds × M × DIM) has sd 1/√240 ≈ 6.5 %; within 4 of them
    standardised_abs = np.abs(np.concatenate(standardised))
    assert abs(standardised_abs.mean() - 1.0) < 4.0 / np.sqrt(standardised_abs.size)
    # the float loop's broadcasts are not on those lattices
    _, float_broadcasts, _, _ = recorded("float")
    lattice = laplace_lattice(float(scales[0]), float(sensitivities[0]), DIM, RADIUS)
    scaled = np.ldexp(float_broadcasts[0], -lattice.exponent)
    assert not np.array_equal(scaled, np.rint(scaled))


def test_exact_rounds_need_the_sensitivities() -> None:
    X, y = synthetic(N_ROWS, DIM, 1)
    batches = assign_batches(N_ROWS, M, H, np.random.default_rng(2))
    steps = step_sizes(batches.shape[1], schedule="convex", l2=0.0)
    with using_sampler("exact"), pytest.raises(SolverParameterError, match="L1 sensitivity per round"):
        run_rounds(
            X, y, batches, mixing=make_mixing("ring", M), loss=make_loss("logistic"), steps=steps,
            noise_scales=np.ones(len(steps)), l2=0.0, clip_norm=1.0, radius=RADIUS, rng=np.random.default_rng(0),
            tail_start=1,
        )  # fmt: skip


def test_the_sampler_is_resolved_and_the_exact_cost_is_pure() -> None:
    meta = PublicMetadata(n=2000, d=3, row_norm_bound=1.0)
    with using_sampler("exact"):
        exact = SOLVER.resolve({"noise_multiplier": 2.0, "passes": 2}, meta)
    float_settings = SOLVER.resolve({"noise_multiplier": 2.0, "passes": 2}, meta)
    assert isinstance(exact, DPDistributedResolved) and exact.sampler == "exact" and float_settings.sampler == "float"
    exact_cost, float_cost = SOLVER.cost(exact, meta), SOLVER.cost(float_settings, meta)
    np.testing.assert_allclose(exact_cost.rdp, pure_dp_rdp(DEFAULT_GRID, epsilon=1.0), rtol=1e-12)  # p·ε₀ = 2·½
    assert exact_cost.pure_epsilon == pytest.approx(1.0, rel=1e-12)
    np.testing.assert_allclose(float_cost.rdp, 2 * laplace_rdp(DEFAULT_GRID, scale=2.0), rtol=1e-15)
    assert np.all(exact_cost.rdp >= float_cost.rdp) and np.any(exact_cost.rdp > 1.2 * float_cost.rdp)
    # calibrated to a target: the exact resolution picks the noise for the pure-DP curve, within the target
    with using_sampler("exact"):
        targeted = SOLVER.resolve({}, meta, target_epsilon=1.0, delta=1e-6)
    float_targeted = SOLVER.resolve({}, meta, target_epsilon=1.0, delta=1e-6)
    assert targeted.epsilon is not None and targeted.epsilon == pytest.approx(1.0, rel=1e-3)
    assert targeted.epsilon <= 1.0 and SOLVER.cost(targeted, meta).epsilon(1e-6).epsilon <= 1.0
    assert targeted.noise_multiplier > float_targeted.noise_multiplier  # the pure curve needs more noise
    stored = float_settings.model_dump(mode="json")
    del stored["sampler"]  # settings stored before the noise layer
    assert SOLVER.load_resolved(stored).sampler == "float"
    assert float_targeted.epsilon is not None and float_targeted.epsilon <= 1.0


def test_fit_draws_with_the_resolved_sampler_and_names_it() -> None:
    meta = PublicMetadata(n=4000, d=3, row_norm_bound=1.0)
    X, y = synthetic(4000, 3, 5)
    with using_sampler("exact"):
        exact = SOLVER.resolve({"model": "svm"}, meta, target_epsilon=2.0, delta=1e-6)
    result = SOLVER.fit(X, y, meta, exact.model_dump(mode="json"), make_generator(1, data_is_public=True))
    assert result.metadata["noise_sampler"] == describe_sampler("exact")
    assert result.metadata["sampler"] == "exact"
    theta = np.array(result.coefficients)
    assert float(np.mean(np.sign(X @ theta + (result.intercept or 0.0)) == y)) > 0.85
