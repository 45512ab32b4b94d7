"""Empirical privacy auditing: statistically valid lower bounds on ε from samples of a mechanism.

Run a mechanism many times on two neighbouring datasets D, D', reduce each output to a real score, and for a
threshold t test the event {score > t}. (ε, δ)-DP implies P[M(D') ∈ S] ≤ e^ε P[M(D) ∈ S] + δ for every S, so
with a one-sided Clopper–Pearson upper bound p̂₀ on P[M(D) ∈ S] and a lower bound p̂₁ on P[M(D') ∈ S],
``ε ≥ log((p̂₁ − δ)/p̂₀)`` holds with the stated confidence (Jagielski, Ullman & Oprea 2020; Nasr et al. 2021).
Both directions and all thresholds are scanned with a Bonferroni correction, so the bound stays valid.

An audit passes when this lower bound stays below the claimed ε; a broken variant (too little noise) must
push it above. Used by the test suite and the benchmarks; never on private data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class AuditResult:
    """The best lower bound on ε found, with the threshold and direction that gave it."""

    epsilon_lower_bound: float
    threshold: float
    direction: str
    confidence: float


def clopper_pearson_upper(successes: np.ndarray, trials: int, alpha: float) -> np.ndarray:
    """One-sided (1 − alpha) Clopper–Pearson upper bound on a binomial proportion."""
    successes = np.asarray(successes)
    return np.where(successes >= trials, 1.0, stats.beta.ppf(1 - alpha, successes + 1, trials - successes))


def clopper_pearson_lower(successes: np.ndarray, trials: int, alpha: float) -> np.ndarray:
    """One-sided (1 − alpha) Clopper–Pearson lower bound on a binomial proportion."""
    successes = np.asarray(successes)
    return np.where(successes <= 0, 0.0, stats.beta.ppf(alpha, successes, trials - successes + 1))


def epsilon_lower_bound(
    scores_d: np.ndarray,
    scores_d_prime: np.ndarray,
    *,
    delta: float,
    confidence: float = 0.95,
    thresholds: int = 200,
) -> AuditResult:
    """A (``confidence``)-level lower bound on the ε of a mechanism from its scores on D and on D'.

    Thresholds are the quantiles of the pooled scores; both tails ({score > t} and {score ≤ t}) and both
    orders (D vs D', D' vs D) are tried, with the error probability split evenly over all the tests.
    """
    a = np.sort(np.asarray(scores_d, dtype=np.float64))
    b = np.sort(np.asarray(scores_d_prime, dtype=np.float64))
    if a.size == 0 or b.size == 0:
        raise ValueError("scores: both samples must be non-empty")
    cut_points = np.unique(np.quantile(np.concatenate([a, b]), np.linspace(0.0, 1.0, thresholds + 2)[1:-1]))
    tests = 4 * cut_points.size
    # Each test uses one upper and one lower bound: split 1 − confidence over 2·tests intervals.
    alpha = (1.0 - confidence) / (2 * tests)
    above_a = a.size - np.searchsorted(a, cut_points, side="right")
    above_b = b.size - np.searchsorted(b, cut_points, side="right")
    best = AuditResult(0.0, math.nan, "none", confidence)
    for direction, (count_0, n0, count_1, n1) in {
        "D' above": (above_a, a.size, above_b, b.size),
        "D' below": (a.size - above_a, a.size, b.size - above_b, b.size),
        "D above": (above_b, b.size, above_a, a.size),
        "D below": (b.size - above_b, b.size, a.size - above_a, a.size),
    }.items():
        p0_high = clopper_pearson_upper(count_0, n0, alpha)
        p1_low = clopper_pearson_lower(count_1, n1, alpha)
        with np.errstate(divide="ignore", invalid="ignore"):
            bounds = np.where((p1_low > delta) & (p0_high > 0), np.log((p1_low - delta) / p0_high), 0.0)
        index = int(np.argmax(bounds))
        if bounds[index] > best.epsilon_lower_bound:
            best = AuditResult(float(bounds[index]), float(cut_points[index]), direction, confidence)
    return best
