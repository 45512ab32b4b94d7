"""Evaluation interval coverage (issue 35 §5): does every metric's interval cover the true value at its level?

    .venv/bin/python benchmarks/evaluation_coverage.py [--runs 500] [--samplers float exact]
                                                       [--epsilons 1e-6 1e-3 0.01 0.1 1] [--sizes 100 5000]
                                                       [--implementation PATH]

What it does. Four synthetic validation sets per size n_val (``--sizes``; a small one and a typical one), each
fixed by a seed, so that their TRUE metrics are known numbers:

* ``binary``: a logistic model's scores s ~ N(0, 2²) and labels y = +1 with probability σ(s) — accuracy,
  roc_auc and log_loss (AUC ≈ 0.86);
* ``binary_edge``: a near-perfect model (s = ±8 + N(0, 1) on the true side) — accuracy ≈ 1, exact AUC = 1 and a
  log-loss near 0: the metrics sit on their range's bounds, where clamping and truncation act;
* ``categorical``: k = 3 classes, probabilities softmax(logits), logits ~ N(0, 1.5²), labels drawn from them —
  accuracy and log_loss;
* ``numeric``: labels y ~ U[−1, 1] (encoded units), predictions y + N(0, 0.3²), label scale 3 — rmse and mae.

For every set, every ε of ``--epsilons`` and every noise sampler of ``--samplers`` (``exact`` is the service's
default), it releases the set's default metrics with the default budget split (:func:`plan_evaluation`,
:func:`release`: the service's code path) ``--runs`` times from one seeded generator, and counts how often each
metric's interval (level 0.95) holds the truth. The truth is the metric the module defines, computed without
noise on the same rows: the share correct, the clipped log-loss mean −log max(p, 10⁻³), the EXACT AUC of the
scores (``sklearn.metrics.roc_auc_score``: ties ½, not the 10-bin histogram's AUC), mae and rmse in the label's
units. With 500 runs a cell's coverage has a binomial sd of 1.0 point at 95 % (±2 points at 2 sd).

Printed: one Markdown table per sampler — per set, n_val and metric, the truth, then per ε the coverage and the
mean interval width (a width equal to the metric's full public range — 1 for accuracy and roc_auc, log 1000 ≈
6.91 for log_loss, 2 × the label scale = 6 for mae and rmse — means the noise dominated) — and the lowest coverage
of all cells. ``--implementation`` loads another file of :mod:`privfit.privacy.evaluation` (e.g.
the version before issue 35, ``git show <rev>:service/privfit/privacy/evaluation.py > /tmp/old.py``) to measure it
on the same sets and seeds. No thresholds: this reports; ``tests/privacy/test_evaluation_coverage.py`` judges a
lean version.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
import time
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
from sklearn.metrics import roc_auc_score

import privfit.privacy.evaluation as evaluation
from privfit.privacy import make_generator

CONFIDENCE = 0.95
LABEL_SCALE = 3.0


@dataclass(frozen=True)
class ValidationSet:
    """A fixed synthetic validation set: how to build the module's inputs and plan, and the true metrics."""

    name: str
    n: int
    label_type: str
    probabilities: bool
    build: Any  # (module) -> EvaluationInputs
    truth: dict[str, float]
    label_scale: float = 1.0


def clipped_log_loss(p_true: np.ndarray) -> float:
    return float(np.mean(-np.log(np.clip(p_true, evaluation.LOG_LOSS_P_MIN, 1.0))))


def binary_set(name: str, n: int, seed: int) -> ValidationSet:
    rng = np.random.default_rng(seed)
    if name == "binary":
        scores = rng.normal(0.0, 2.0, n)
        y = np.where(rng.random(n) < 1.0 / (1.0 + np.exp(-scores)), 1.0, -1.0)
    else:  # binary_edge: a near-perfect model
        y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
        scores = y * (8.0 + rng.normal(0.0, 1.0, n))
    positive = y > 0
    p_plus = 1.0 / (1.0 + np.exp(-scores))
    p_true = np.where(positive, p_plus, 1.0 - p_plus)
    truth = {
        "accuracy": float(np.mean((scores >= 0) == positive)),
        "roc_auc": float(roc_auc_score(positive, scores)),
        "log_loss": clipped_log_loss(p_true),
    }
    return ValidationSet(name, n, "binary", True, lambda m: m.binary_inputs(scores, y, probabilities=True), truth)


def categorical_set(n: int, seed: int) -> ValidationSet:
    rng = np.random.default_rng(seed)
    logits = rng.normal(0.0, 1.5, (n, 3))
    probabilities = np.exp(logits - logits.max(axis=1, keepdims=True))
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    y = np.array([rng.choice(3, p=row) for row in probabilities], dtype=np.float64)
    index = y.astype(np.int64)
    truth = {
        "accuracy": float(np.mean(np.argmax(probabilities, axis=1) == index)),
        "log_loss": clipped_log_loss(probabilities[np.arange(n), index]),
    }
    return ValidationSet("categorical", n, "categorical", True,
                         lambda m: m.categorical_inputs(probabilities, y), truth)  # fmt: skip


def numeric_set(n: int, seed: int) -> ValidationSet:
    rng = np.random.default_rng(seed)
    y = rng.uniform(-1.0, 1.0, n)
    predictions = y + 0.3 * rng.standard_normal(n)
    errors = np.abs(np.clip(predictions, -1.0, 1.0) - y)
    truth = {"mae": LABEL_SCALE * float(errors.mean()), "rmse": LABEL_SCALE * math.sqrt(float(np.mean(errors**2)))}
    return ValidationSet("numeric", n, "numeric", False, lambda m: m.numeric_inputs(predictions, y), truth,
                         LABEL_SCALE)  # fmt: skip


def validation_sets(sizes: list[int]) -> list[ValidationSet]:
    out = []
    for i, n in enumerate(sizes):
        seed = 1000 * (i + 1)
        out += [binary_set("binary", n, seed), binary_set("binary_edge", n, seed + 1), categorical_set(n, seed + 2),
                numeric_set(n, seed + 3)]  # fmt: skip
    return out


def load(path: str | None) -> ModuleType:
    """The evaluation module under test: the installed one, or the file at ``path`` loaded in its place."""
    if path is None:
        return evaluation
    spec = importlib.util.spec_from_file_location("privfit.privacy._evaluation_under_test", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def coverage(module: ModuleType, data: ValidationSet, epsilon: float, sampler: str, runs: int,
             seed: int) -> dict[str, tuple[float, float]]:  # fmt: skip
    """{metric: (coverage, mean width)} over ``runs`` releases of the set's default metrics."""
    plan = module.plan_evaluation(epsilon, None, label_type=data.label_type, probabilities=data.probabilities,
                                  n=data.n, label_scale=data.label_scale, confidence=CONFIDENCE,
                                  sampler=sampler)  # fmt: skip
    inputs = data.build(module)
    rng = make_generator(seed, data_is_public=True)
    hits = dict.fromkeys(plan.metrics, 0)
    widths = dict.fromkeys(plan.metrics, 0.0)
    for _ in range(runs):
        for result in module.release(plan, inputs, rng):
            low, high = result.interval
            hits[result.metric] += low <= data.truth[result.metric] <= high
            widths[result.metric] += high - low
    return {m: (hits[m] / runs, widths[m] / runs) for m in plan.metrics}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--samplers", nargs="+", default=["float", "exact"], choices=["float", "exact"])
    parser.add_argument("--epsilons", nargs="+", type=float, default=[1e-6, 1e-3, 0.01, 0.1, 1.0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[100, 5000])
    parser.add_argument("--implementation", default=None, help="a file to load as privfit.privacy.evaluation")
    args = parser.parse_args()
    module = load(args.implementation)
    sets = validation_sets(args.sizes)
    print(f"# evaluation interval coverage: {args.runs} runs per cell, level {CONFIDENCE}, "
          f"implementation {args.implementation or module.__file__}")  # fmt: skip
    lowest: tuple[float, str] = (2.0, "")
    for sampler in args.samplers:
        started = time.perf_counter()
        header = " | ".join(f"ε = {e:g}" for e in args.epsilons)
        print(f"\n### sampler `{sampler}`: coverage · mean width\n")
        print(f"| set | n_val | metric | truth | {header} |")
        print("|---|---:|---|---:|" + "---:|" * len(args.epsilons))
        for index, data in enumerate(sets):
            cells = [coverage(module, data, e, sampler, args.runs, seed=97 * index + j)
                     for j, e in enumerate(args.epsilons)]  # fmt: skip
            for metric in cells[0]:
                row = []
                for epsilon, cell in zip(args.epsilons, cells, strict=True):
                    rate, width = cell[metric]
                    row.append(f"{100 * rate:.1f} % · {width:.3g}")
                    lowest = min(lowest, (rate, f"{sampler} {data.name} n={data.n} {metric} ε={epsilon:g}"))
                print(f"| {data.name} | {data.n} | {metric} | {data.truth[metric]:.4f} | {' | '.join(row)} |",
                      flush=True)  # fmt: skip
        print(f"\n({sampler}: {time.perf_counter() - started:.0f} s)")
    sd = math.sqrt(CONFIDENCE * (1 - CONFIDENCE) / args.runs)
    print(f"\nlowest coverage: {100 * lowest[0]:.1f} % ({lowest[1]}); binomial sd at the level: {100 * sd:.1f} points")


if __name__ == "__main__":
    main()
