"""Private evaluation of a fitted model on a dataset's private validation rows: noisy metrics with intervals.

Every metric is a sum of per-row terms, each bounded by a PUBLIC constant, divided by the public validation size
n_val (DESIGN §1.1: n is public, and so is n_val = ⌊f·n⌋ for the declared fraction f). The sum gets Laplace noise
calibrated to its replace-one sensitivity Δ (Dwork, McSherry, Nissim & Smith 2006, Thm 1: Lap(Δ/ε) is ε-DP):

==========  ====================================================  ============================================
metric      sum S over validation rows                            replace-one sensitivity Δ (public)
==========  ====================================================  ============================================
accuracy    #{i : predicted class = true class}                   1
log_loss    Σ −log max(p_i, p_min), p_i = model probability of    log(1/p_min), p_min = :data:`LOG_LOSS_P_MIN`
            the true class (each term in [0, log(1/p_min)])
roc_auc     per-class histograms of σ(score) over                 L1 = 2: one row leaves one cell and enters
            :data:`AUC_BINS` equal bins of [0, 1]                 another (two cells change by 1)
mae         Σ |ŷ_i − y_i| (encoded units; ŷ clipped to [−1, 1])   2
rmse        Σ (ŷ_i − y_i)² (encoded units)                        4
==========  ====================================================  ============================================

**Budget split.** The evaluation's target ε is split over the requested metrics in proportion to the public
weights :data:`METRIC_WEIGHTS` (renormalised over the requested ones). Binary labels: accuracy 0.7, roc_auc 0.2,
log_loss 0.1 — chosen so that, with the default metrics at ε = 0.1 and n_val ≥ 5,000, accuracy gets ε = 0.07,
i.e. Laplace scale 1/0.07 on the count, and P(|error| > 1 point) = P(|L| > 0.01·n_val) ≤ exp(−0.07·50) = 3.0 %
(< 5 %; the acceptance target). Numeric labels: rmse 0.5, mae 0.5.

**Cost** (from public inputs only: ε, the metric list and the weights; n_val only scales the released values):
basic composition of Laplace releases — the exact Laplace RDP curve of each (Mironov 2017, Prop. 6), summed, and
the pure-ε bound Σ ε_m = ε. A metric released with Laplace noise is ε_m-DP; the histogram of roc_auc is two
Laplace releases of sensitivity 1 each under replace-one (the two cells that change), scale 2/ε_m, so its curve
is twice the sensitivity-1 curve and its pure bound 2/(2/ε_m) = ε_m.

**Why Laplace, not Gaussian.** Each metric is a one-dimensional sum (or a histogram of L1 sensitivity 2), and the
targets are small ε (0.1): Laplace gives pure ε-DP with noise sd √2·Δ/ε, whereas the Gaussian needs
σ ≈ Δ·√(2 log(1.25/δ))/ε — about 3.7× the Laplace sd at δ = 1e-6 — for one release.

**Intervals** (level ``confidence``, default 0.95). The true validation-set metric is a deterministic function of
the rows, so only the noise is random. For a sum S released as S̃ = S + L with L ~ Lap(b), P(|L| ≤ t) = 1 − e^{−t/b},
so ``[S̃ − t, S̃ + t]`` with t = b·log(1/(1 − confidence)) covers S with probability exactly ``confidence``;
intersecting it with S's public range and mapping it through the metric's monotone map (÷ n_val, √ for rmse,
the label's scale for mae/rmse) keeps the coverage. roc_auc is a non-linear function of 2·B noisy counts (clamped
at 0 before use, which biases it towards ½): its interval is a basic (pivotal) parametric bootstrap — replicates
Ĥ* = Ĥ + Lap(b) noise, AUC* = AUC(max(Ĥ*, 0)), interval [2·â − q_{1−a/2}, 2·â − q_{a/2}] clipped to [0, 1] —
whose tail a is calibrated by an iterated bootstrap (:func:`_auc_release`); pure post-processing of the released
histograms. It covers the *binned* AUC approximately: measured 0.93–0.95 for ε_auc ≥ 0.05 and ≈ 0.92 at
ε_auc = 0.02 (the default split at ε = 0.1) on 5,000 rows, where the uncalibrated bootstrap gave 0.80–0.93.

**Binning bias of roc_auc.** The histogram AUC counts a positive–negative pair in the same bin as ½. The exact
AUC of the validation set differs from the binned one by at most ½·Σ_b P_b·N_b / (n₊·n₋) (the share of pairs
that share a bin): small when scores spread over many bins, larger for a model whose probabilities all lie in a
few bins (e.g. a nearly constant model).

**The noise sampler** (issue 25; :mod:`.noise`, whose module docstring proves what is used here). The plan records
the sampler in force when it is made (``sampler``), and the release draws with it. ``float``: numpy's Laplace, as
above. ``exact``: each sum (and the roc_auc histogram, one release of 2·B coordinates of L1 sensitivity 2) is a
discrete Laplace release on a lattice 2^k·Z (:func:`~.noise.laplace_release`; public bound on the value: n_val
times the per-row range), immune to the floating-point attacks on the released low bits; its curve is the pure-DP
one of the same ε_m (:func:`~.noise.laplace_cost`), so the budget split is unchanged. The interval of a sum then
uses the discrete tail: for P(z) ∝ e^{−|z|/t} on the integers, P(|Z| > m) = 2q^{m+1}/(1 + q) ≤ q^m (q = e^{−1/t}),
so with m = ⌈t·log(1/(1 − c))⌉ (t the lattice's integer scale) the half-width 2^k·m + 2^{k−1} (the lattice
rounding of S) covers S with probability ≥ c. The bootstrap draws of roc_auc's interval perturb the already
released histograms (post-processing) and stay numpy's.

Pure numpy: nothing here imports the web or database layers. The released numbers are ε-DP post-processing of
the noisy sums; this module never returns the exact sums.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .cost import PrivacyCost
from .errors import PrivacyParameterError
from .noise import SamplerName, current_sampler, laplace_cost, laplace_lattice, laplace_release, using_sampler
from .orders import DEFAULT_GRID, OrderGrid

__all__ = [
    "AUC_BINS",
    "AUC_BOOTSTRAP",
    "AUC_CALIBRATION",
    "BINARY_METRICS",
    "CATEGORICAL_METRICS",
    "LOG_LOSS_P_MIN",
    "METRIC_WEIGHTS",
    "NUMERIC_METRICS",
    "EvaluationInputs",
    "EvaluationPlan",
    "MetricRelease",
    "auc_from_histograms",
    "auc_histograms",
    "binary_inputs",
    "categorical_inputs",
    "numeric_inputs",
    "plan_evaluation",
    "release",
]

BINARY_METRICS: tuple[str, ...] = ("accuracy", "roc_auc", "log_loss")
"""Metrics for a binary label, in their default order (log_loss only for models that output probabilities)."""
NUMERIC_METRICS: tuple[str, ...] = ("rmse", "mae")
"""Metrics for a numeric label."""
CATEGORICAL_METRICS: tuple[str, ...] = ("accuracy", "log_loss")
"""Metrics for a categorical label (k ≥ 3 classes, the multinomial model): the same sums as for a binary label —
one row changes the number of correct predictions by at most 1 and its clipped −log p of the true class lies in
[0, log(1/p_min)] — so the same sensitivities hold."""
METRIC_WEIGHTS: Mapping[str, float] = {"accuracy": 0.7, "roc_auc": 0.2, "log_loss": 0.1, "rmse": 0.5, "mae": 0.5}
"""Public weights of the budget split (renormalised over the requested metrics; module docstring)."""
LOG_LOSS_P_MIN = 1e-3
"""Probabilities are clipped to [p_min, 1] before the log: each row's term lies in [0, log(1000) ≈ 6.91]."""
AUC_BINS = 10
"""Equal-width bins of σ(score) on [0, 1] for the roc_auc histograms (public; fewer bins, less total noise and more
binning bias: 10 halves the noise of 20 bins at ε = 0.02 for a bias of 0.004 on a typical model)."""
AUC_BOOTSTRAP = 2000
"""Replicates of the parametric noise bootstrap of the roc_auc interval."""
AUC_CALIBRATION = (100, 200)
"""Outer × inner replicates of the bootstrap that calibrates the roc_auc interval's level (:func:`_auc_release`)."""

_MIN_EPSILON = 1e-6
_Released = tuple[float, tuple[float, float]]
"""A released value and its interval."""


@dataclass(frozen=True)
class EvaluationPlan:
    """The public side of an evaluation: metrics, each one's ε share, n_val, and the label's scale.

    ``label_scale`` is (upper − lower)/2 of a numeric label (errors are computed in encoded units, where labels
    and clipped predictions lie in [−1, 1], and reported in the label's units); 1.0 for a binary label.
    """

    metrics: tuple[str, ...]
    epsilons: Mapping[str, float]
    n: int
    label_scale: float
    confidence: float
    sampler: SamplerName = "float"

    @property
    def noise(self) -> str:
        """The released metrics' noise: ``laplace`` (float sampler) or ``discrete_laplace`` (exact; module
        docstring)."""
        return "laplace" if self.sampler == "float" else "discrete_laplace"

    def value_bound(self, metric: str) -> float:
        """A public bound on the metric's sum (each row's term lies in [0, its range]): n_val times that range; for
        roc_auc, on each histogram count."""
        ranges = {"accuracy": 1.0, "log_loss": self.sensitivity("log_loss"), "roc_auc": 1.0, "mae": 2.0, "rmse": 4.0}
        return self.n * ranges[metric]

    def sensitivity(self, metric: str) -> float:
        """Replace-one L1 sensitivity of the metric's sum (per cell changed, for roc_auc; module table)."""
        return {"accuracy": 1.0, "log_loss": math.log(1.0 / LOG_LOSS_P_MIN), "roc_auc": 1.0,
                "mae": 2.0, "rmse": 4.0}[metric]  # fmt: skip

    def cells_changed(self, metric: str) -> int:
        """How many released coordinates one replaced row can change (each by at most the sensitivity)."""
        return 2 if metric == "roc_auc" else 1

    def scale(self, metric: str) -> float:
        """Laplace scale b_m = cells·Δ_m/ε_m, so that the metric's release is ε_m-DP."""
        return self.cells_changed(metric) * self.sensitivity(metric) / self.epsilons[metric]

    def cost(self, grid: OrderGrid = DEFAULT_GRID) -> PrivacyCost:
        """Sum of the Laplace releases' costs (exact curves, pure bound Σ ε_m; the pure-DP curves of the same ε_m with
        the exact sampler: :func:`~.noise.laplace_cost`); public inputs only."""
        total = PrivacyCost.zero(grid)
        for metric in self.metrics:
            total = total + laplace_cost(grid, scale=self.scale(metric), sensitivity=self.sensitivity(metric),
                                         count=self.cells_changed(metric), sampler=self.sampler)  # fmt: skip
        return total


def plan_evaluation(
    epsilon: float,
    metrics: Sequence[str] | None,
    *,
    label_type: str,
    probabilities: bool,
    n: int,
    label_scale: float = 1.0,
    confidence: float = 0.95,
    sampler: SamplerName | None = None,
) -> EvaluationPlan:
    """Resolve the metrics (default: every one that applies) and split ε by :data:`METRIC_WEIGHTS`; the noise
    ``sampler`` (default: the one in force, :func:`~.noise.current_sampler`) is recorded in the plan.

    Raises :class:`PrivacyParameterError` naming ``metrics``, ``privacy.epsilon``, ``confidence`` or ``n``."""
    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon >= _MIN_EPSILON):
        raise PrivacyParameterError("privacy.epsilon", f"must be a finite number ≥ {_MIN_EPSILON}, got {epsilon!r}")
    if not 0.5 <= confidence < 1.0:
        raise PrivacyParameterError("confidence", f"must lie in [0.5, 1), got {confidence!r}")
    if n < 1:
        raise PrivacyParameterError("n", "the dataset has no validation rows")
    applicable = {"binary": BINARY_METRICS, "categorical": CATEGORICAL_METRICS}.get(label_type, NUMERIC_METRICS)
    if not probabilities:
        applicable = tuple(m for m in applicable if m != "log_loss")
    if metrics is None:
        chosen = applicable
    else:
        chosen = tuple(dict.fromkeys(metrics))
        unknown = [m for m in chosen if m not in applicable]
        if unknown or not chosen:
            raise PrivacyParameterError(
                "metrics", f"{unknown or 'an empty list'}: for this fit choose among {list(applicable)} (log_loss "
                "needs a model that outputs probabilities: logistic)",
            )  # fmt: skip
    weight = math.fsum(METRIC_WEIGHTS[m] for m in chosen)
    epsilons = {m: float(epsilon) * METRIC_WEIGHTS[m] / weight for m in chosen}
    return EvaluationPlan(
        chosen, epsilons, int(n), float(label_scale), float(confidence), sampler or current_sampler()
    )  # fmt: skip


@dataclass(frozen=True)
class EvaluationInputs:
    """Per-row quantities of the validation rows (private; never released): what the sums are built from.

    ``correct``: the predicted class equals the true one (classification); ``p_true``: the model's probability of
    the true class (None when the model has none); ``scores`` and ``positive``: decision scores and the true
    class for roc_auc; ``abs_error``: |ŷ − y| in encoded units with ŷ clipped to [−1, 1] (regression).
    Multiclass extends ``correct`` and ``p_true`` directly (k-class argmax and probability of the true class).
    """

    correct: np.ndarray | None = None
    p_true: np.ndarray | None = None
    scores: np.ndarray | None = None
    positive: np.ndarray | None = None
    abs_error: np.ndarray | None = None


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return np.asarray(0.5 * (1.0 + np.tanh(0.5 * z)), dtype=np.float64)


def binary_inputs(scores: np.ndarray, y: np.ndarray, *, probabilities: bool) -> EvaluationInputs:
    """Inputs for a binary label y ∈ {−1, +1} and decision scores s (class +1 iff s ≥ 0; logistic
    p(+1) = σ(s) when ``probabilities``)."""
    s = np.asarray(scores, dtype=np.float64)
    positive = np.asarray(y, dtype=np.float64) > 0
    p_true = None
    if probabilities:
        p_plus = _sigmoid(s)
        p_true = np.where(positive, p_plus, 1.0 - p_plus)
    return EvaluationInputs(correct=(s >= 0.0) == positive, p_true=p_true, scores=s, positive=positive)


def categorical_inputs(probabilities: np.ndarray, y: np.ndarray) -> EvaluationInputs:
    """Inputs for a categorical label: y holds class indices 0..k−1, ``probabilities`` the model's (n, k) class
    probabilities; the prediction is the most probable class (the first on ties, as ``/predict``)."""
    P = np.asarray(probabilities, dtype=np.float64)
    index = np.clip(np.asarray(y, dtype=np.float64), 0, P.shape[1] - 1).astype(np.int64)
    p_true = P[np.arange(P.shape[0]), index]
    return EvaluationInputs(correct=np.argmax(P, axis=1) == index, p_true=p_true)


def numeric_inputs(predictions: np.ndarray, y: np.ndarray) -> EvaluationInputs:
    """Inputs for a numeric label in encoded units (y ∈ [−1, 1]); predictions are clipped to [−1, 1]."""
    clipped = np.clip(np.asarray(predictions, dtype=np.float64), -1.0, 1.0)
    return EvaluationInputs(abs_error=np.abs(clipped - np.clip(np.asarray(y, dtype=np.float64), -1.0, 1.0)))


def _require(value: np.ndarray | None, metric: str) -> np.ndarray:
    if value is None:
        raise PrivacyParameterError("metrics", f"{metric} does not apply to this model's outputs")
    return value


def _exact_sum(metric: str, inputs: EvaluationInputs) -> float:
    """The metric's exact sum S over the validation rows (private; only its noisy version is released)."""
    if metric == "accuracy":
        return float(np.count_nonzero(_require(inputs.correct, metric)))
    if metric == "log_loss":
        p = np.clip(_require(inputs.p_true, metric), LOG_LOSS_P_MIN, 1.0)
        return math.fsum(-np.log(p))
    error = _require(inputs.abs_error, metric)
    return math.fsum(error) if metric == "mae" else math.fsum(error * error)


def auc_histograms(scores: np.ndarray, positive: np.ndarray) -> np.ndarray:
    """The (2, B) counts of σ(score) over :data:`AUC_BINS` equal bins of [0, 1]: row 0 negatives, row 1 positives."""
    bins = np.minimum((_sigmoid(np.asarray(scores, dtype=np.float64)) * AUC_BINS).astype(np.int64), AUC_BINS - 1)
    out = np.zeros((2, AUC_BINS), dtype=np.float64)
    np.add.at(out, (np.asarray(positive, dtype=np.int64), bins), 1.0)
    return out


def auc_from_histograms(histograms: np.ndarray) -> np.ndarray:
    """AUC = Σ_b P_b·(Σ_{b'<b} N_{b'} + N_b/2) / (ΣP·ΣN) of (…, 2, B) non-negative counts (ties within a bin
    count ½); 0.5 where a class is empty. Vectorised over leading axes (the bootstrap's replicates)."""
    negatives, positives = histograms[..., 0, :], histograms[..., 1, :]
    below = np.cumsum(negatives, axis=-1) - negatives
    pairs = np.sum(positives * (below + 0.5 * negatives), axis=-1)
    total = positives.sum(axis=-1) * negatives.sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total > 0, pairs / np.where(total > 0, total, 1.0), 0.5)


@dataclass(frozen=True)
class MetricRelease:
    """One released metric: value, interval, and the public description of its mechanism."""

    metric: str
    value: float
    interval: tuple[float, float]
    confidence: float
    noise: str
    scale: float
    sensitivity: float
    epsilon: float
    weight: float
    note: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric, "value": self.value, "interval": list(self.interval),
            "confidence": self.confidence, "noise": self.noise, "scale": self.scale,
            "sensitivity": self.sensitivity, "epsilon": self.epsilon, "weight": self.weight, "note": self.note,
        }  # fmt: skip


_NOTES = {
    "accuracy": "share of validation rows classified correctly; Laplace on the count",
    "log_loss": f"mean of −log max(p, {LOG_LOSS_P_MIN:g}) of the true class (clipped log-loss); Laplace on the sum",
    "roc_auc": f"AUC of Laplace-noised per-class histograms of σ(score) over {AUC_BINS} bins (counts clamped at 0; "
    "ties within a bin count ½); interval by parametric noise bootstrap",
    "mae": "mean absolute error in the label's units (predictions clipped to the label's range); Laplace on the sum",
    "rmse": "root mean squared error in the label's units (predictions clipped to the label's range); Laplace on the "
    "sum of squares",
}


def _sum_release(plan: EvaluationPlan, metric: str, exact: float, rng: np.random.Generator) -> _Released:
    """Release S̃ = S + Lap(b) (with the sampler in force: :func:`~.noise.laplace_release`) and map it and
    [S̃ ± b·log(1/(1 − c))] ∩ [0, S_max] to the metric's scale (the discrete tail's half-width with the exact
    sampler: module docstring)."""
    b = plan.scale(metric)
    s_max = plan.value_bound(metric)
    noisy = float(laplace_release(rng, exact, scale=b, l1_sensitivity=plan.sensitivity(metric), bound=s_max))
    level = math.log(1.0 / (1.0 - plan.confidence))
    if current_sampler() == "float":
        half = b * level
    else:
        lattice = laplace_lattice(b, plan.sensitivity(metric), 1, s_max)
        half = (math.ceil(lattice.integer_parameter * level) + 0.5) * lattice.spacing

    def to_metric(total: float) -> float:
        mean = min(max(total, 0.0), s_max) / plan.n
        if metric == "mae":
            return mean * plan.label_scale
        if metric == "rmse":
            return math.sqrt(mean) * plan.label_scale
        return mean

    return to_metric(noisy), (to_metric(noisy - half), to_metric(noisy + half))


def _auc_release(plan: EvaluationPlan, exact: np.ndarray, rng: np.random.Generator) -> _Released:
    """Noisy histograms → clamped → AUC; interval by the calibrated basic parametric bootstrap (module docstring).

    Calibration (Beran 1987, prepivoting; Hall 1992 §3.11, the iterated bootstrap): in the bootstrap world whose
    truth is â = AUC(Ĥ), draw :data:`AUC_CALIBRATION` outer histograms Ĥ*_m = max(Ĥ + L, 0), and for each the
    inner draws AUC(max(Ĥ*_m + L', 0)); u_m is the inner share ≤ 2·â*_m − â, so the basic interval of tail a
    covers â iff 2·min(u_m, 1 − u_m) ≥ a. The tail a is the (1 − c)-quantile of those values (the level at which
    the bootstrap world's coverage is c), floored at 1/:data:`AUC_BOOTSTRAP`, and the released interval is the
    basic interval of tail a from :data:`AUC_BOOTSTRAP` draws around Ĥ."""
    b = plan.scale("roc_auc")
    # The release: the 2·B counts as ONE vector of L1 sensitivity 2 (the layer's rounding covers all its coordinates).
    noisy = laplace_release(rng, exact.reshape(-1), scale=b, l1_sensitivity=2.0, bound=plan.value_bound("roc_auc"))
    released = np.maximum(noisy.reshape(exact.shape), 0.0)
    value = float(auc_from_histograms(released))
    # Below: the calibrated bootstrap, post-processing of the released histograms (numpy's draws whatever the sampler).
    outer_count, inner_count = AUC_CALIBRATION
    outer = np.maximum(released + rng.laplace(0.0, b, size=(outer_count, *exact.shape)), 0.0)
    outer_values = auc_from_histograms(outer)
    inner = auc_from_histograms(
        np.maximum(outer[:, None] + rng.laplace(0.0, b, size=(outer_count, inner_count, *exact.shape)), 0.0)
    )
    below = np.mean(inner <= (2.0 * outer_values - value)[:, None], axis=1)
    tail = max(float(np.quantile(2.0 * np.minimum(below, 1.0 - below), 1.0 - plan.confidence)), 1.0 / AUC_BOOTSTRAP)
    draws = auc_from_histograms(np.maximum(released + rng.laplace(0.0, b, size=(AUC_BOOTSTRAP, *exact.shape)), 0.0))
    low_q, high_q = np.quantile(draws, [tail / 2.0, 1.0 - tail / 2.0])
    low, high = 2.0 * value - float(high_q), 2.0 * value - float(low_q)
    return value, (min(max(low, 0.0), 1.0), min(max(high, 0.0), 1.0))


def release(plan: EvaluationPlan, inputs: EvaluationInputs, rng: np.random.Generator) -> list[MetricRelease]:
    """Release every metric of ``plan`` from ``inputs`` with noise from ``rng`` (OS-seeded for private data).

    The whole release is ε-DP for ε = Σ ε_m (basic composition), with ε_m and the scales fixed by ``plan``
    before this is called, with the plan's noise sampler. ``inputs`` must cover exactly ``plan.n`` rows."""
    rows = {len(v) for v in (inputs.correct, inputs.p_true, inputs.scores, inputs.abs_error) if v is not None}
    if rows != {plan.n}:
        raise ValueError(f"the inputs must cover exactly the plan's n = {plan.n} validation rows")
    weight = math.fsum(METRIC_WEIGHTS[m] for m in plan.metrics)
    out = []
    for metric in plan.metrics:
        with using_sampler(plan.sampler):
            if metric == "roc_auc":
                scores, positive = _require(inputs.scores, metric), _require(inputs.positive, metric)
                value, interval = _auc_release(plan, auc_histograms(scores, positive), rng)
            else:
                value, interval = _sum_release(plan, metric, _exact_sum(metric, inputs), rng)
        out.append(MetricRelease(
            metric=metric, value=value, interval=interval, confidence=plan.confidence, noise=plan.noise,
            scale=plan.scale(metric), sensitivity=plan.cells_changed(metric) * plan.sensitivity(metric),
            epsilon=plan.epsilons[metric], weight=METRIC_WEIGHTS[metric] / weight, note=_NOTES[metric],
        ))  # fmt: skip
    return out
