"""Private evaluation under the noise layer (issue 25, :mod:`privfit.privacy.noise`): the plan records the sampler;
with ``exact`` every released sum (and the roc_auc histogram) is a discrete Laplace release on a lattice, charged the
pure-DP curve of the same ε split, and the intervals use the discrete tail (coverage ≥ the level); with ``float``
nothing changes (the other evaluation tests). Seeds on synthetic data only.

The coverage test allows 3.5 binomial sd below the level (a false failure rate below 5e-4)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfit.api.routers.evaluations import EVALUATION_FORMULA, EXACT_EVALUATION_FORMULA, evaluation_formula
from privfit.privacy import DEFAULT_GRID, PrivacyCost, make_generator
from privfit.privacy.evaluation import EvaluationInputs, binary_inputs, plan_evaluation, release
from privfit.privacy.noise import laplace_lattice, using_sampler


def binary_plan(epsilon: float, metrics: list[str] | None, n: int, sampler: str | None = "exact"):
    return plan_evaluation(epsilon, metrics, label_type="binary", probabilities=True, n=n, sampler=sampler)


def test_the_plan_records_the_sampler_and_the_exact_cost_is_pure() -> None:
    with using_sampler("exact"):
        exact = binary_plan(0.1, None, 5000, sampler=None)  # the sampler in force
    floating = binary_plan(0.1, None, 5000, sampler="float")
    assert (exact.sampler, floating.sampler) == ("exact", "float")
    assert (exact.noise, floating.noise) == ("discrete_laplace", "laplace")
    assert exact.epsilons == floating.epsilons and all(exact.scale(m) == floating.scale(m) for m in exact.metrics)
    cost = exact.cost()
    expected = PrivacyCost.zero(DEFAULT_GRID)
    for epsilon in exact.epsilons.values():
        expected = expected + PrivacyCost.pure_dp(epsilon, DEFAULT_GRID)
    np.testing.assert_allclose(cost.rdp, expected.rdp, rtol=1e-12)
    assert cost.pure_epsilon == pytest.approx(0.1, rel=1e-12)
    assert np.all(cost.rdp >= floating.cost().rdp)  # the pure curve dominates the continuous Laplace's
    assert evaluation_formula(exact) == EXACT_EVALUATION_FORMULA and evaluation_formula(floating) == EVALUATION_FORMULA
    inputs = binary_inputs(np.zeros(5000), np.ones(5000), probabilities=True)
    released = release(exact, inputs, make_generator(0, data_is_public=True))
    assert [r.metric for r in released] == ["accuracy", "roc_auc", "log_loss"]
    assert all(r.noise == "discrete_laplace" and r.interval[0] <= r.value <= r.interval[1] for r in released)


def test_exact_sums_are_released_on_the_lattice() -> None:
    """n = 1024: value·n is the noisy sum exactly (a power of two), which lies on the lattice of the plan."""
    n, runs = 1024, 300
    correct = np.arange(n) < 600
    plan = binary_plan(2.0, ["accuracy"], n)
    lattice = laplace_lattice(plan.scale("accuracy"), 1.0, 1, plan.value_bound("accuracy"))
    rng = make_generator(3, data_is_public=True)
    sums = np.array([release(plan, EvaluationInputs(correct=correct), rng)[0].value * n for _ in range(runs)])
    scaled = np.ldexp(sums, -lattice.exponent)
    assert np.array_equal(scaled, np.rint(scaled))
    assert np.mean(np.abs(sums - 600)) == pytest.approx(plan.scale("accuracy"), rel=0.2)  # E|Lap(b)| = b
    with using_sampler("exact"):  # a float plan draws numpy's noise whatever the sampler in force
        floating = binary_plan(2.0, ["accuracy"], n, sampler="float")
        values = np.array([release(floating, EvaluationInputs(correct=correct), rng)[0].value * n for _ in range(50)])
    scaled = np.ldexp(values, -lattice.exponent)
    assert not np.array_equal(scaled, np.rint(scaled))


def test_exact_intervals_cover_at_least_at_the_level() -> None:
    runs, n = 1500, 2000
    rng = make_generator(7, data_is_public=True)
    scores = rng.normal(0.0, 2.0, n)
    y = np.where(rng.random(n) < 1.0 / (1.0 + np.exp(-scores)), 1.0, -1.0)
    inputs = binary_inputs(scores, y, probabilities=True)
    p = np.clip(inputs.p_true, 1e-3, 1.0)
    truth = {"accuracy": float(inputs.correct.mean()), "log_loss": float(np.mean(-np.log(p)))}
    plan = binary_plan(0.5, ["accuracy", "log_loss"], n)
    floating = binary_plan(0.5, ["accuracy", "log_loss"], n, sampler="float")
    hits = dict.fromkeys(truth, 0)
    for _ in range(runs):
        for result in release(plan, inputs, rng):
            hits[result.metric] += result.interval[0] <= truth[result.metric] <= result.interval[1]
    for metric, count in hits.items():
        assert count / runs >= 0.95 - 3.5 * math.sqrt(0.95 * 0.05 / runs), metric
    # the width is the float one up to the lattice's rounding (no interval here reaches the range's ends)
    widths = {}
    for name, each in (("exact", plan), ("float", floating)):
        released = release(each, inputs, make_generator(1, data_is_public=True))
        widths[name] = {r.metric: r.interval[1] - r.interval[0] for r in released}
    for metric in truth:
        assert widths["exact"][metric] == pytest.approx(widths["float"][metric], rel=1e-3)


def test_exact_roc_auc_release() -> None:
    rng = make_generator(9, data_is_public=True)
    n = 3000
    scores = rng.normal(0.0, 2.0, n)
    y = np.where(rng.random(n) < 1.0 / (1.0 + np.exp(-scores)), 1.0, -1.0)
    plan = binary_plan(1.0, ["roc_auc"], n)
    (result,) = release(plan, binary_inputs(scores, y, probabilities=False), rng)
    assert result.noise == "discrete_laplace" and result.sensitivity == 2.0
    assert 0.0 <= result.interval[0] <= result.value <= result.interval[1] <= 1.0
    assert result.value > 0.7  # the scores predict the labels (AUC ≈ 0.8 at this noise)
