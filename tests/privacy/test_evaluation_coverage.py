"""Honest evaluation intervals (issue 35 §5): every metric's interval covers the true value at its level at every ε,
is the metric's whole public range when the noise dominates, and the two reported failures stay fixed. The full
simulation (every metric × ε ∈ {1e-6, …, 1} × two sizes × both samplers, 500 runs a cell) is
``benchmarks/evaluation_coverage.py``, its table in docs/benchmarks.md; this is its lean version, on fixed seeds.

Tolerance: the constructions cover with probability ≥ 0.95 by proof; over 200 runs a rate's binomial sd is
1.5 points, so the asserted 0.90 (3.2 sd below 0.95) cannot flake on these seeds, while the replaced roc_auc
bootstrap — narrow intervals around noise — covered far less at ε = 1e-3 and at 1e-6 gave disjoint intervals.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from privfit.privacy import make_generator
from privfit.privacy.evaluation import (
    LOG_LOSS_P_MIN,
    EvaluationInputs,
    _sum_interval,
    auc_from_histograms,
    auc_histograms,
    binary_inputs,
    categorical_inputs,
    numeric_inputs,
    plan_evaluation,
    release,
)

RUNS = 200


def clipped_log_loss(p_true: np.ndarray) -> float:
    return float(np.mean(-np.log(np.clip(p_true, LOG_LOSS_P_MIN, 1.0))))


def binary_case(n: int, seed: int, spread: float = 2.0) -> tuple[EvaluationInputs, dict[str, float], np.ndarray]:
    """A logistic model's scores and labels drawn from it; the inputs, the true metrics and the scores."""
    rng = np.random.default_rng(seed)
    scores = rng.normal(0.0, spread, n)
    y = np.where(rng.random(n) < 1.0 / (1.0 + np.exp(-scores)), 1.0, -1.0)
    inputs = binary_inputs(scores, y, probabilities=True)
    truth = {"accuracy": float(inputs.correct.mean()), "roc_auc": float(roc_auc_score(inputs.positive, scores)),
             "log_loss": clipped_log_loss(inputs.p_true)}  # fmt: skip
    return inputs, truth, scores


def categorical_case(n: int, seed: int) -> tuple[EvaluationInputs, dict[str, float]]:
    rng = np.random.default_rng(seed)
    logits = rng.normal(0.0, 1.5, (n, 3))
    probabilities = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y = (rng.random(n)[:, None] > np.cumsum(probabilities, axis=1)).sum(axis=1).astype(np.float64)
    inputs = categorical_inputs(probabilities, y)
    return inputs, {"accuracy": float(inputs.correct.mean()), "log_loss": clipped_log_loss(inputs.p_true)}


def numeric_case(n: int, seed: int) -> tuple[EvaluationInputs, dict[str, float]]:
    rng = np.random.default_rng(seed)
    y = rng.uniform(-1.0, 1.0, n)
    inputs = numeric_inputs(y + 0.3 * rng.standard_normal(n), y)
    errors = inputs.abs_error
    return inputs, {"mae": 3.0 * float(errors.mean()), "rmse": 3.0 * math.sqrt(float(np.mean(errors**2)))}


def test_auc_at_epsilon_one_in_a_million_is_the_full_range_or_covers() -> None:
    """The report: three evaluations of one fit at ε_eval = 1e-6 gave disjoint roc_auc intervals. The histograms
    are pure noise there (scale 10⁷ per cell): every interval must be [0, 1] or hold the truth — none is
    narrower, so no two are disjoint."""
    inputs, truth, _ = binary_case(5000, 1)
    for sampler, runs in (("float", 30), ("exact", 10)):
        plan = plan_evaluation(1e-6, None, label_type="binary", probabilities=True, n=5000, sampler=sampler)
        rng = make_generator(2, data_is_public=True)
        for _ in range(runs):
            auc = release(plan, inputs, rng)[1]
            assert auc.metric == "roc_auc" and auc.interval[0] <= auc.value <= auc.interval[1]
            assert auc.interval == (0.0, 1.0) or auc.interval[0] <= truth["roc_auc"] <= auc.interval[1]
            assert auc.interval == (0.0, 1.0), sampler  # the noise dominates: the whole range


@pytest.mark.parametrize(("epsilon", "n"), [(1e-3, 20_000), (0.1, 5000)])
@pytest.mark.parametrize("label", ["binary", "categorical", "numeric"])
def test_every_metric_covers_at_its_level(epsilon: float, n: int, label: str) -> None:
    """Default metrics and split; ε = 1e-3 on 20,000 rows (the histograms and the log-loss drowned in noise: where
    the replaced roc_auc bootstrap gave narrow intervals around noise) and 0.1 on 5,000 (most intervals
    informative). Coverage ≥ 0.90 over 200 seeded runs for each metric, the value inside its interval every time."""
    if label == "binary":
        inputs, truth, _ = binary_case(n, 3)
    else:
        inputs, truth = categorical_case(n, 4) if label == "categorical" else numeric_case(n, 5)
    plan = plan_evaluation(epsilon, None, label_type=label, probabilities=label != "numeric", n=n,
                           label_scale=3.0 if label == "numeric" else 1.0, sampler="float")  # fmt: skip
    rng = make_generator(6, data_is_public=True)
    hits = dict.fromkeys(plan.metrics, 0)
    for _ in range(RUNS):
        for result in release(plan, inputs, rng):
            low, high = result.interval
            assert low <= result.value <= high
            hits[result.metric] += low <= truth[result.metric] <= high
    for metric, count in hits.items():
        assert count / RUNS >= 0.90, (metric, count / RUNS)


def test_the_reported_log_loss_release_now_covers() -> None:
    """The report: log_loss at ε_eval = 0.1 came back ``0.0 [0.0, 0.3996]`` with the truth ≈ 0.47. With the default
    split log_loss gets ε = 0.01 (b = 690.8); on n_val = 4,000 that release is a noisy sum x = −471.4, and the old
    interval [x ± b·log 20] ∩ [0, S_max] = [0, 0.3996] shrank with x. The Feldman–Cousins interval of a released
    x < 0 is [0, d₀/n] whatever x: it holds 0.47 (and any truth ≤ d₀/n = 0.517, the ones such a release is
    likely under)."""
    n = 4000
    plan = plan_evaluation(0.1, None, label_type="binary", probabilities=True, n=n, sampler="float")
    b = plan.scale("log_loss")
    noisy = 0.3996 * n - b * math.log(20.0)
    old_high = (noisy + b * math.log(20.0)) / n
    assert noisy < 0.0 and old_high == pytest.approx(0.3996) and old_high < 0.47  # the old interval missed
    value, (low, high) = _sum_interval(plan, "log_loss", noisy)
    assert value == 0.0 and low == 0.0 and high == pytest.approx(b * math.log(20.0) / n, rel=1e-6)
    assert low <= 0.47 <= high
    # the same through release(): a seeded release whose log-loss comes back 0.0 (truth 0.465) covers it
    inputs, truth, _ = binary_case(n, 35)
    assert truth["log_loss"] == pytest.approx(0.465, abs=0.001)
    log_loss = release(plan, inputs, make_generator(40, data_is_public=True))[2]
    assert log_loss.metric == "log_loss" and log_loss.value == 0.0
    assert log_loss.interval[0] <= truth["log_loss"] <= log_loss.interval[1]


@pytest.mark.parametrize("sampler", ["float", "exact"])
def test_sum_intervals_never_degenerate_and_widen_to_the_public_range(sampler: str) -> None:
    """A sum's interval holds its released value, never shrinks to a point at a bound (the old [0, 0] for a
    very negative release), and is the whole public range when the noise dominates (ε = 1e-6)."""
    n = 1000
    plan = plan_evaluation(1.0, ["log_loss"], label_type="binary", probabilities=True, n=n, sampler=sampler)
    s_max = plan.value_bound("log_loss")
    below = _sum_interval(plan, "log_loss", -1e9)
    assert below[0] == 0.0 and below[1][0] == 0.0 and below[1][1] > 0.0
    assert _sum_interval(plan, "log_loss", -1.0)[1] == pytest.approx(below[1])  # not shrinking with x
    above = _sum_interval(plan, "log_loss", 1e9)
    assert above[0] == pytest.approx(s_max / n) and above[1][1] == pytest.approx(s_max / n)
    assert above[1][0] < s_max / n
    for label, metrics, top in (("binary", ["accuracy", "log_loss"], None), ("numeric", ["rmse", "mae"], 6.0)):
        tiny = plan_evaluation(1e-6, metrics, label_type=label, probabilities=True, n=n, label_scale=3.0,
                               sampler=sampler)  # fmt: skip
        for metric in metrics:
            full = tiny.value_bound(metric) / n
            expected = (0.0, top if top is not None else full)
            for noisy in (-1e12, 0.0, 0.5 * tiny.value_bound(metric), 1e12):
                value, interval = _sum_interval(tiny, metric, noisy)
                assert interval == pytest.approx(expected) and interval[0] <= value <= interval[1], metric


def test_auc_interval_covers_the_exact_auc_with_ties_and_an_empty_class() -> None:
    """Large ε: a perfect model (exact AUC 1), a model whose scores all fall in one bin but rank the pairs
    perfectly (binned AUC ½, exact 1: the interval must reach 1), and a validation set with no positive (the
    module's convention ½)."""
    rng = np.random.default_rng(7)
    n = 4000
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    one_bin = 0.2 + 0.05 * y + rng.normal(0.0, 0.01, n)  # σ ∈ (0.537, 0.563): bin 5
    cases = [(8.0 * y, 1.0), (one_bin, 1.0), (rng.normal(0.0, 2.0, n), 0.5)]
    for index, (scores, truth) in enumerate(cases):
        labels = -np.ones(n) if index == 2 else y
        inputs = binary_inputs(scores, labels, probabilities=False)
        if index == 1:
            assert float(auc_from_histograms(auc_histograms(scores, inputs.positive))) == 0.5
        plan = plan_evaluation(50.0, ["roc_auc"], label_type="binary", probabilities=False, n=n, sampler="float")
        auc = release(plan, inputs, make_generator(8 + index, data_is_public=True))[0]
        assert auc.interval[0] <= truth <= auc.interval[1] and auc.interval[0] <= auc.value <= auc.interval[1]


@pytest.mark.parametrize("sampler", ["float", "exact"])
def test_release_is_deterministic_given_the_generator(sampler: str) -> None:
    inputs, _, _ = binary_case(2000, 9)
    plan = plan_evaluation(0.5, None, label_type="binary", probabilities=True, n=2000, sampler=sampler)
    first = release(plan, inputs, make_generator(10, data_is_public=True))
    second = release(plan, inputs, make_generator(10, data_is_public=True))
    assert [r.to_dict() for r in first] == [r.to_dict() for r in second]
