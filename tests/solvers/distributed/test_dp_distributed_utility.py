"""Seeded utility trends of ``dp_distributed`` (spec §7.4 and Appendix B): accuracy grows with ε and with the
batch size h, and the spread across seeds shrinks with h.

Data as in the spec's Appendix B: n = 10, x uniform in the unit ball, y = sign(⟨w*, x⟩) with 5% of the labels
flipped; 40 000 training rows (public synthetic data, seeded) and 20 000 test rows; smoothed hinge of width 0.1
with λ = 0.1, α_k = 1/(λk), m = 4 learners on a ring, tail-average release. The noise is set explicitly with
``noise_multiplier`` b = 1/ε (one pass is then ε-DP); ε = ∞ is b = 1e-9. Measured means over 5 seeds:
ε = 0.1 / 1 / ∞ at h = 1: 0.526 / 0.703 / 0.939; h = 1 / 5 / 50 at ε = 1: 0.703 / 0.814 / 0.901, with the
standard deviation across seeds falling from 0.030 (h = 1) to 0.008 (h = 50) (the spec's Appendix B, with the
plain hinge and radius 1/√λ: 0.551 / 0.812 / 0.945 and 0.831 / 0.896 / 0.931). The spec's tolerance of 0.02 is
kept, and each trend must also exceed it by a clear margin.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
from numpy.typing import NDArray

from privfit.privacy import make_generator
from privfit.solvers import PublicMetadata, get_solver

SOLVER = get_solver("dp_distributed")
DIMENSION = 10
TRAIN, TEST = 40_000, 20_000
SEEDS = range(5)
TOLERANCE = 0.02
FloatArray = NDArray[np.float64]


def labelled(n: int, rng: np.random.Generator) -> tuple[FloatArray, FloatArray]:
    w_star = np.linspace(1.0, -0.5, DIMENSION)
    X = rng.normal(size=(n, DIMENSION))
    X *= rng.uniform(size=(n, 1)) ** (1 / DIMENSION) / np.linalg.norm(X, axis=1, keepdims=True)
    y = np.where(X @ w_star > 0, 1.0, -1.0)
    flip = rng.uniform(size=n) < 0.05
    y[flip] = -y[flip]
    return X, y


@functools.cache
def data(seed: int) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    rng = np.random.default_rng([2016, seed])
    return *labelled(TRAIN, rng), *labelled(TEST, rng)


@functools.cache
def accuracies(epsilon: float, batch_size: int) -> FloatArray:
    meta = PublicMetadata(n=TRAIN, d=DIMENSION, row_norm_bound=1.0)
    params = {"model": "svm", "hinge_smoothing": 0.1, "l2": 0.1, "n_learners": 4, "batch_size": batch_size,
              "clip_norm": 1e9,  # C = G (the pre-issue-21 default), so that h is the only lever
              "noise_multiplier": 1e-9 if epsilon == np.inf else 1.0 / epsilon}  # fmt: skip
    resolved = SOLVER.resolve(params, meta)
    out = []
    for seed in SEEDS:
        X, y, X_test, y_test = data(seed)
        result = SOLVER.fit(X, y, meta, resolved, make_generator(seed, data_is_public=True))
        scores = X_test @ np.array(result.coefficients) + float(result.intercept or 0.0)
        out.append(float(np.mean(np.where(scores >= 0, 1.0, -1.0) == y_test)))
    return np.array(out)


def test_accuracy_grows_with_epsilon() -> None:
    means = [float(accuracies(epsilon, 1).mean()) for epsilon in (0.1, 1.0, np.inf)]
    assert all(later >= earlier - TOLERANCE for earlier, later in itertools.pairwise(means)), means
    assert means[-1] > 0.9 and means[-1] - means[0] > 0.1, means  # the trend is real, not within the tolerance


def test_accuracy_grows_with_the_batch_size_and_its_spread_shrinks() -> None:
    runs = [accuracies(1.0, h) for h in (1, 5, 50)]
    means = [float(r.mean()) for r in runs]
    assert all(later >= earlier - TOLERANCE for earlier, later in itertools.pairwise(means)), means
    assert means[-1] - means[0] > 0.03, means
    assert runs[-1].std() < runs[0].std(), [r.std() for r in runs]
