"""The noise outlook (issue 21 §4): the levels, every solver's prediction at its defaults, and the formulas on
cases where the noise's contribution to θ is known exactly (a pure noise draw, a random walk)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfit.solvers import PublicMetadata, get_solver
from privfit.solvers.base import NoiseOutlook, expected_gaussian_norm, outlook_level
from privfit.solvers.baselines.dp_gd import dp_gradient_descent
from privfit.solvers.baselines.perturbation import sample_noise
from privfit.solvers.losses import make_loss
from privfit.solvers.registry import solver_names

META = PublicMetadata(n=5000, d=9, row_norm_bound=2.0)
DEFAULTS = {"dp_lazy_oco": {"model": "linear_loss", "z": "yx"}}


def test_levels_and_the_warning() -> None:
    assert [outlook_level(r) for r in (0.0, 0.0999, 0.1, 0.799, 0.8, 2.0)] == ["low", "low", "moderate", "moderate",
                                                                                "high", "high"]  # fmt: skip
    high = NoiseOutlook.of(3.0, 2.0)
    assert (high.ratio, high.level) == (1.5, "high") and "no better than a constant model" in (high.warning or "")
    assert NoiseOutlook.of(0.5, 2.0).warning is None


@pytest.mark.parametrize("name", [n for n in solver_names() if not get_solver(n).experimental])
def test_every_solver_predicts_at_its_defaults_and_the_ratio_falls_with_epsilon(name: str) -> None:
    solver = get_solver(name)
    params = DEFAULTS.get(name, {})
    outlooks = [solver.outlook(solver.resolve(params, META, target_epsilon=e, delta=1e-6), META) for e in (0.05, 5.0)]
    assert all(o is not None and math.isfinite(o.ratio) and o.ratio == o.noise_norm / o.radius for o in outlooks)
    assert outlooks[0].ratio > outlooks[1].ratio  # type: ignore[union-attr]


def test_expected_gaussian_norm_is_the_mean_of_chi() -> None:
    assert expected_gaussian_norm(2.0, 1) == pytest.approx(2.0 * math.sqrt(2.0 / math.pi), rel=1e-14)
    assert expected_gaussian_norm(1.0, 2) == pytest.approx(math.sqrt(math.pi / 2.0), rel=1e-14)
    assert 1000 / math.sqrt(1001) < expected_gaussian_norm(1.0, 1000) < math.sqrt(1000)


@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
def test_output_perturbation_predicts_the_mean_norm_of_its_noise_draws(noise: str) -> None:
    """Output perturbation's noise IS one draw of v: its predicted norm is E‖v‖ exactly. 20,000 seeded draws: the
    standard error of the empirical mean is ≤ 0.5% of it (sd of χ_d ≤ 0.71σ; of Gamma(d, s), √d·s), so 2%."""
    solver = get_solver("output_perturbation")
    resolved = solver.resolve({"noise": noise, "noise_multiplier": 0.2}, META)
    outlook = solver.outlook(resolved, META)
    assert outlook is not None and outlook.noise_norm < 2.0 * outlook.radius  # not capped here
    draws = sample_noise(noise, META.d + 1, resolved.noise_scale, np.random.default_rng(7), runs=20_000)
    assert outlook.noise_norm == pytest.approx(float(np.linalg.norm(draws, axis=1).mean()), rel=0.02)


def test_objective_perturbation_bounds_the_minimiser_shift_and_adds_the_output_noise() -> None:
    solver = get_solver("objective_perturbation")
    resolved = solver.resolve({}, META, target_epsilon=1.0, delta=1e-6)
    outlook = solver.outlook(resolved, META)
    dimension = META.d + 1
    shift = expected_gaussian_norm(resolved.objective_noise_scale, dimension) / (META.n * resolved.l2)
    assert outlook is not None
    assert outlook.noise_norm == pytest.approx(shift + expected_gaussian_norm(resolved.output_noise_scale, dimension))
    assert outlook.radius == pytest.approx(math.sqrt(2.0 * math.log(2.0) / resolved.l2))  # R* of the logistic loss


def test_dp_gd_predicts_the_random_walk_of_its_noise() -> None:
    """With rows of zeros the data gradient vanishes and DP-GD's iterate is exactly its accumulated noise (a wide
    ball: no projection): E‖θ_T‖ = E‖N(0, (ησ/n)² T I)‖, the prediction. 4,000 runs: standard error < 0.6%."""
    solver, meta = get_solver("dp_gd"), PublicMetadata(n=40, d=9, row_norm_bound=2.0)
    resolved = solver.resolve({"noise_multiplier": 3.0, "steps": 200, "radius": 1e6}, meta)
    outlook = solver.outlook(resolved, meta)
    assert outlook is not None
    zeros = np.zeros((meta.n, meta.d + 1))
    theta = dp_gradient_descent(zeros, np.ones(meta.n), loss=make_loss("logistic"), clip_norm=resolved.clip_norm,
                                sigma=resolved.sigma, steps=resolved.steps, step_size=resolved.step_size,
                                radius=resolved.radius, rng=np.random.default_rng(3), runs=4000)  # fmt: skip
    assert outlook.noise_norm == pytest.approx(float(np.linalg.norm(theta, axis=1).mean()), rel=0.025)


def test_an_early_stopped_dp_gd_is_judged_by_its_reference_run() -> None:
    """Fewer than T₀ = 200 steps: the noise walk is scaled by T₀/T (the signal-to-noise ratio of the displacement
    does not depend on T at a fixed ε), so stopping early never lowers the level: equal to the 200-step run's
    within the √T law of σ(T), and the default early-stopped fit at ε = 0.01 still warns."""
    solver, meta = get_solver("dp_gd"), PublicMetadata(n=5_000, d=20, row_norm_bound=4.0)
    short = solver.resolve({"steps": 20, "momentum": "none"}, meta, target_epsilon=0.05, delta=1e-6)
    full = solver.resolve({"steps": 200, "momentum": "none"}, meta, target_epsilon=0.05, delta=1e-6)
    short_outlook, full_outlook = solver.outlook(short, meta), solver.outlook(full, meta)
    assert short_outlook is not None and full_outlook is not None
    walk = short.step_size * short.sigma * math.sqrt(short.steps * (meta.d + 1)) / meta.n
    assert short_outlook.noise_norm > 5 * walk  # the unscaled walk would have said "far less noise"
    assert short_outlook.ratio == pytest.approx(full_outlook.ratio, rel=0.15)
    stopped = solver.resolve({}, meta, target_epsilon=0.01, delta=1e-6)
    assert stopped.steps < 200
    stopped_outlook = solver.outlook(stopped, meta)
    assert stopped_outlook is not None and stopped_outlook.level == "high" and stopped_outlook.warning


def test_a_noise_larger_than_the_ball_is_capped_at_its_diameter() -> None:
    solver = get_solver("dp_gd")
    resolved = solver.resolve({"steps": 200}, META, target_epsilon=0.02, delta=1e-6)  # no early stopping
    outlook = solver.outlook(resolved, META)
    assert outlook is not None and outlook.noise_norm == 2.0 * resolved.radius and outlook.level == "high"


@pytest.mark.parametrize("noise_norm", [math.inf, math.nan, 1e308])
def test_an_overflowing_prediction_is_no_outlook(monkeypatch: pytest.MonkeyPatch, noise_norm: float) -> None:
    """A non-finite noise norm (or a ratio that overflows against a tiny radius) gives None, never inf/NaN in JSON."""
    solver = get_solver("dp_gd")
    meta = PublicMetadata(n=1_000, d=5, row_norm_bound=2.0)
    resolved = solver.resolve({"model": "logistic", "radius": 1e-3}, meta, target_epsilon=1.0, delta=1e-6)
    assert solver.outlook(resolved, meta) is not None
    monkeypatch.setattr(type(solver), "_noise_norm", lambda self, r, m: noise_norm)
    assert solver.outlook(resolved, meta) is None
