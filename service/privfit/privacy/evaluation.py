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

**Intervals** (level c = ``confidence``, default 0.95). The validation rows are fixed, so the true metric on them
is a number and only the noise is random: an interval is *valid* when, for every validation set, it contains the
true value with probability ≥ c over the noise. Both constructions below are valid by proof, at every ε and every
n_val, and use only the released noisy statistics, public values (n_val, the scales, the lattice, c) and, for
roc_auc, fresh draws of the public noise law: they are post-processing, look at no row, and change neither the
release nor its cost (issue 35 §5). Given the generator, they are deterministic.

* **A sum** S ∈ [0, S_max] (S_max = n_val × the per-row range, public), released as x = S + E: the Feldman &
  Cousins (1998) unified interval — the Neyman construction whose acceptance regions are ordered by the likelihood
  ratio against the best-fitting admissible value ŝ = clip(x, 0, S_max) (:func:`_sum_interval`). Coverage ≥ c
  holds by construction; the interval always contains ŝ (the released value), is never empty or degenerate, keeps
  the full two-sided width where S is far from the bounds, and grows to the whole public range [0, S_max] when
  the noise dominates it. The interval it replaces, [x ± t] ∩ [0, S_max], also covered with probability c
  *unconditionally*, but when the noise pushed x below 0 it shrank with x — down to [0, 0] — so, among releases
  of 0, it missed the truth far more often than 1 − c (the issue's ``0.0 [0.0, 0.3996]``).
* **roc_auc**: a test inversion on the two released noisy histograms, each noise term bounded by a Monte Carlo
  order statistic with an exact finite-sample guarantee (exchangeability) and a Bonferroni split of 1 − c
  (:func:`_auc_interval`). It covers the *exact* AUC of the validation scores (ties ½, as scikit-learn's) and the
  binned one, with probability ≥ c, and is [0, 1] by itself when the histogram noise dominates. The calibrated
  bootstrap it replaces centred its replicates on the clamped noisy histograms: at small ε those are pure noise,
  so it gave narrow intervals around a random AUC (three evaluations at ε = 1e-6 gave disjoint intervals), and it
  under-covered at ε_auc = 0.02.

The released *values* are unchanged: the clamped mean of a sum, and the AUC of the histograms clamped at 0 (moved
into its interval, the nearest end, in the rare case it falls outside — post-processing).

**Binning bias of roc_auc.** The histogram AUC counts a positive–negative pair in the same bin as ½. The exact
AUC of the validation set differs from the binned one by at most ½·Σ_b P_b·N_b / (n₊·n₋) (the share of pairs
that share a bin): small when scores spread over many bins, larger for a model whose probabilities all lie in a
few bins (e.g. a nearly constant model). The interval accounts for it: it bounds the share of pairs ranked in
the right order by different bins from below and that share plus the within-bin share from above, so it covers
the exact AUC whatever the ties.

**The noise sampler** (issue 25; :mod:`.noise`, whose module docstring proves what is used here). The plan records
the sampler in force when it is made (``sampler``), and the release draws with it. ``float``: numpy's Laplace, as
above. ``exact``: each sum (and the roc_auc histogram, one release of 2·B coordinates of L1 sensitivity 2) is a
discrete Laplace release on a lattice 2^k·Z (:func:`~.noise.laplace_release`; public bound on the value: n_val
times the per-row range), immune to the floating-point attacks on the released low bits; its curve is the pure-DP
one of the same ε_m (:func:`~.noise.laplace_cost`), so the budget split is unchanged. The intervals then use the
discrete law (:class:`_NoiseLaw`): a coordinate's error is E = r + 2^k·Z with the lattice rounding |r| ≤ 2^{k−1}
and P(Z = z) ∝ q^{|z|}, q = e^{−1/t} (t the lattice's integer scale): a sum's interval uses the exact tail
P(2^k·Z > y) ≤ q^{y/2^k}/(1 + q) and the rounding's worst case; roc_auc's copies of the noise are drawn with the
exact sampler itself, the rounding added at its worst.

Pure numpy: nothing here imports the web or database layers. The released numbers are ε-DP post-processing of
the noisy sums; this module never returns the exact sums.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .cost import PrivacyCost
from .errors import PrivacyParameterError
from .noise import (
    Lattice,
    SamplerName,
    current_sampler,
    integer_noise,
    laplace_cost,
    laplace_lattice,
    laplace_release,
    using_sampler,
)
from .orders import DEFAULT_GRID, OrderGrid

__all__ = [
    "AUC_BINS",
    "AUC_COPIES",
    "AUC_GRID",
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
AUC_GRID = (16, 16, 8)
"""Cells per level of the nested grids of [0, 1] on which the roc_auc test is inverted (:func:`_auc_interval`):
the interval's ends are edges of the finest grid (1/2048), moved outwards — at most 1/2048 of width, nothing in
coverage."""
AUC_COPIES = 2000
"""Copies of the noise drawn for the roc_auc interval's Monte Carlo bounds: at least 4 over the smallest error share
(1 − c)/20, up to 20 × this — enough for every level c ≤ 0.9995; above it the product term is unbounded and the
interval is [0, 1] (:func:`_auc_interval`)."""
_AUC_SPLIT = (0.45, 0.45, 0.10)
"""Shares of each side's error probability (1 − c)/2 for the three noise terms of the roc_auc test: the two linear
terms A and B, and the product term C (:func:`_auc_interval`)."""

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
    "ties within a bin count ½); interval by test inversion, covering the exact AUC",
    "mae": "mean absolute error in the label's units (predictions clipped to the label's range); Laplace on the sum",
    "rmse": "root mean squared error in the label's units (predictions clipped to the label's range); Laplace on the "
    "sum of squares",
}


@dataclass(frozen=True)
class _NoiseLaw:
    """The public law of one released coordinate's error E = x̃ − x: a random part Y plus a rounding |r| ≤
    :attr:`rounding` fixed by the true value (module docstring, "The noise sampler").

    No ``lattice`` (the float sampler): Y ~ Laplace(β = ``scale``). A lattice (the exact sampler): Y = 2^k·Z with
    Z discrete Laplace of the lattice's integer scale t, β = 2^k·t. Y is symmetric, its coordinates independent."""

    scale: float
    lattice: Lattice | None = None

    @property
    def rounding(self) -> float:
        """The lattice rounding's bound 2^{k−1} (0 for the float sampler)."""
        return 0.0 if self.lattice is None else self.lattice.spacing / 2.0

    @property
    def tail_factor(self) -> float:
        """K with P(E > d) ≤ K·e^{−d/β} and P(E < −d) ≤ K·e^{−d/β} for every d: ½ (Laplace), or
        e^{r/β}/(1 + q) (P(2^k·Z > y) = q^{⌊y/2^k⌋+1}/(1 + q) ≤ q^{y/2^k}/(1 + q), q = e^{−1/t}, y = d − r)."""
        if self.lattice is None:
            return 0.5
        return math.exp(self.rounding / self.scale) / (1.0 + math.exp(-self.lattice.spacing / self.scale))

    def draw(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        """Independent copies of Y (numpy's Laplace, or the exact sampler's discrete Laplace on the lattice)."""
        if self.lattice is None:
            return rng.laplace(0.0, self.scale, size=shape)
        size = int(np.prod(shape))
        return np.ldexp(integer_noise(self.lattice, size, rng).astype(np.float64), self.lattice.exponent).reshape(shape)


def _noise_law(plan: EvaluationPlan, metric: str) -> _NoiseLaw:
    """The law of the error of ``metric``'s released coordinates under the plan's sampler (the lattice
    :func:`~.noise.laplace_release` uses: one coordinate for a sum, the 2·B counts for roc_auc)."""
    b = plan.scale(metric)
    if plan.sampler == "float":
        return _NoiseLaw(b)
    auc = metric == "roc_auc"
    lattice = laplace_lattice(b, 2.0 if auc else plan.sensitivity(metric), 2 * AUC_BINS if auc else 1,
                              plan.value_bound(metric))  # fmt: skip
    return _NoiseLaw(lattice.noise_scale, lattice)


def _sum_interval(plan: EvaluationPlan, metric: str, noisy: float) -> _Released:
    """The released value clip(x, 0, S_max) and the Feldman–Cousins interval of a sum S ∈ [0, S_max] from its
    release x = S + E (module docstring), both mapped to the metric's scale.

    Ordering by the likelihood ratio against ŝ = clip(x, 0, S_max) ranks x by D(x; S) = |x − S| − |x − ŝ|: D = |E|
    while x ∈ [0, S_max], D = S when x < 0, D = S_max − S when x > S_max. Hence, with u = S and v = S_max − S the
    distances to the bounds, P_S(D > d) = 1[d < u]·P(E < −d) + 1[d < v]·P(E > d) ≤ (1[d < u] + 1[d < v])·K·e^{−d/β}
    (:attr:`_NoiseLaw.tail_factor`; equality for the Laplace). The smallest d with that bound ≤ α = 1 − c is, for
    u ≤ v (symmetric otherwise), with d₀ = β·log(2K/α) and d₁ = β·log(K/α):

        d_S = d₀ if u > d₀;   max(u, d₁) if u ≤ d₀ and v > d₁;   v if v ≤ d₁,

    and the acceptance region {x : D(x; S) ≤ d_S} has probability ≥ c under S. The confidence set
    {S : D(x; S) ≤ d_S} therefore covers the true S with probability ≥ c (the Neyman construction; exactly c in
    the interior for the Laplace). d_S is continuous in S with slopes in {−1, 0, 1}, so D − d_S is monotone on
    each side of ŝ (where it is −d_ŝ ≤ 0): the set is an interval containing ŝ, whose ends are found exactly
    (piecewise-linear roots) and rounded outwards. If x < 0 it is [0, d₀] (at most) whatever x, not an interval
    shrinking with x; if β·log(K/α) ≥ S_max, every S is accepted: the whole public range."""
    law = _noise_law(plan, metric)
    s_max = plan.value_bound(metric)
    alpha = 1.0 - plan.confidence
    k = law.tail_factor
    d0 = law.scale * math.log(2.0 * k / alpha)
    d1 = max(law.scale * math.log(k / alpha), 0.0)
    best = min(max(noisy, 0.0), s_max)

    def excess(s: float) -> float:
        near, far = min(s, s_max - s), max(s, s_max - s)
        radius = d0 if near > d0 else (max(near, d1) if far > d1 else far)
        distance = s if noisy < 0.0 else (s_max - s if noisy > s_max else abs(noisy - s))
        return distance - radius

    def end(stop: float) -> float:
        """Where acceptance ends between ``best`` (accepted) and ``stop``: ``excess`` is continuous, monotone and
        linear between the breakpoints of d_S (d₀, d₁, their mirrors and S_max/2), so the end is found exactly on
        the first segment where it exceeds ``slack`` (10⁻⁹ of S_max, for float rounding: outwards)."""
        slack = 1e-9 * s_max + 1e-12 * d0
        inner = (d0, s_max - d0, d1, s_max - d1, s_max / 2.0)
        points = sorted({best, stop, *(p for p in inner if min(best, stop) < p < max(best, stop))},
                        reverse=stop < best)  # fmt: skip
        before = excess(points[0])
        for start, point in itertools.pairwise(points):
            after = excess(point)
            if after > slack:
                return start + (point - start) * (slack - before) / (after - before)
            before = after
        return stop

    low, high = end(0.0), end(s_max)

    def to_metric(total: float) -> float:
        mean = min(max(total, 0.0), s_max) / plan.n
        if metric == "mae":
            return mean * plan.label_scale
        if metric == "rmse":
            return math.sqrt(mean) * plan.label_scale
        return mean

    return to_metric(best), (to_metric(low), to_metric(high))


def _sum_release(plan: EvaluationPlan, metric: str, exact: float, rng: np.random.Generator) -> _Released:
    """Release S̃ = S + Lap(b) (with the plan's sampler: :func:`~.noise.laplace_release`) and its interval
    (:func:`_sum_interval`)."""
    noisy = laplace_release(rng, exact, scale=plan.scale(metric), l1_sensitivity=plan.sensitivity(metric),
                            bound=plan.value_bound(metric))  # fmt: skip
    return _sum_interval(plan, metric, float(noisy))


def _order_statistic(values: np.ndarray, alpha: float) -> np.ndarray:
    """Per row, a threshold q of the N copies in ``values`` (…, N; reordered in place) such that one more
    exchangeable draw X exceeds it with probability ≤ ``alpha``: the k-th smallest, k = N + 1 − m with
    m = ⌊(N + 1)·α⌋. X > X₍ₖ₎ needs k copies strictly below X, which at most N + 1 − k = m of the N + 1
    exchangeable values can have, so P ≤ m/(N + 1) ≤ α (ties only lower it). +∞ when m = 0 (N + 1 < 1/α)."""
    count = values.shape[-1]
    allowed = math.floor((count + 1) * alpha * (1.0 - 1e-12))  # rounded down: never above α
    if allowed < 1:
        return np.full(values.shape[:-1], np.inf)
    k = count + 1 - allowed
    values.partition(k - 1, axis=-1)  # in place: the caller's scratch array
    return values[..., k - 1]


def _auc_interval(plan: EvaluationPlan, noisy: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    """An interval that covers the exact AUC of the validation scores with probability ≥ c, from the released
    (unclamped) noisy histograms (Ñ, P̃) = (N + E_N, P + E_P), the public noise law and fresh copies of it.

    **Target.** Positive i and negative j in bins β_i > β_j have s_i > s_j; pairs in one bin count 0, ½ or 1. So
    the exact AUC a* (ties ½) lies in [a_s, a_w], a_s = PᵀM_sN/(n₊n₋), a_w = PᵀM_wN/(n₊n₋), with the public
    M_s[b, b'] = 1[b' < b] and M_w[b, b'] = 1[b' ≤ b] (the binned AUC lies there too). With K = M − aJ (J all
    ones), g(a) = PᵀKN = n₊n₋·(a_M − a): g_s(a*) ≤ 0 and g_w(a*) ≥ 0. (A class may be empty: then g ≡ 0 and
    every a, the convention ½ included, satisfies both.)

    **The statistic.** T(a) = P̃ᵀKÑ (computable) expands exactly as T(a) = g(a) + A + B − C with
    A = E_Pᵀ(KÑ), B = (KᵀP̃)ᵀE_N and C = E_PᵀKE_N. E_P is independent of Ñ and E_N of P̃, so given the released
    other class, A and B are weighted sums of independent errors with *known* weights; C's law is public. Each
    is bounded by Monte Carlo with an exact finite-sample guarantee: :data:`AUC_COPIES` fresh copies of the noise
    (from ``rng``: post-processing, independent of the rows) and the actual error are exchangeable given the
    weights, so the copies' order statistic of :func:`_order_statistic` bounds the actual term with error
    probability ≤ its share (a conditional bound holds unconditionally). The lattice rounding (exact sampler)
    enters as its worst case, added to each copy.

    **Inversion.** Lower side: a is refused when T_s(a) > q_A + q_B + q_C (error shares :data:`_AUC_SPLIT` of
    α/2, α = 1 − c). At a = a*: T_s(a*) ≤ A + B − C, so a* is refused with probability ≤ α/2 (Bonferroni), and the
    lower end — the smallest a not refused — is ≤ a* with probability ≥ 1 − α/2. Upper side: the same with M_w,
    refusing a when T_w(a) < −(q_A + q_B + q_C). Both ends fail together with probability ≤ α: coverage ≥ c by
    construction. The test runs on the cells of :data:`AUC_GRID`: T and each of A, B, C are affine in a, so over a
    cell each lies below the larger of its values at the cell's ends; thresholds are taken on those per-cell
    maxima (of the copies), so a cell is refused only if its a's all are. Ends are cell edges, outwards. A side
    with no accepted cell (a refusal of a*: probability ≤ α/2) ends at 0 or 1; crossed ends (likewise) give
    [0, 1].

    **Noise domination.** When the noise terms exceed |g| for every a — the counts drowned in noise — nothing is
    refused and the interval is [0, 1]; it narrows as ε·n_val grows, to the within-bin share of pairs (the ties
    the histogram cannot order) plus about twice the noise's standard error."""
    law = _noise_law(plan, "roc_auc")
    alpha = (1.0 - plan.confidence) / 2.0
    share_a, share_b, share_c = (alpha * share for share in _AUC_SPLIT)
    copies = max(AUC_COPIES, min(math.ceil(4.0 / share_c), 20 * AUC_COPIES))
    noise = law.draw(rng, (2, copies, AUC_BINS))
    y_n, y_p = noise[0], noise[1]
    negatives, positives = noisy[0], noisy[1]
    n_total, p_total = float(negatives.sum()), float(positives.sum())
    h = law.rounding
    strict = np.tril(np.ones((AUC_BINS, AUC_BINS)), -1)  # M_s[b, b'] = 1[b' < b]: b the positive's bin

    def side(weak: bool) -> Callable[[np.ndarray], np.ndarray]:
        """The side's test: whether each cell [edges[i], edges[i + 1]] holds an a it does not refuse."""
        m = strict + np.eye(AUC_BINS) if weak else strict
        m_n, m_p = m @ negatives, m.T @ positives
        sum_n, sum_p = y_n.sum(axis=1), y_p.sum(axis=1)
        # Per copy j, each term is x0_j − a·x1_j: A = Y_Pᵀ(M Ñ − a·ΣÑ), B = Y_Nᵀ(MᵀP̃ − a·ΣP̃), −C = −Y_Pᵀ(M − aJ)Y_N.
        a0, a1 = y_p @ m_n, n_total * sum_p
        b0, b1 = y_n @ m_p, p_total * sum_n
        c0, c1 = -np.einsum("jb,bc,jc->j", y_p, m, y_n), -sum_p * sum_n
        if h > 0.0:  # −C's rounding terms at their worst for every a (|K x| ≤ |M x| + |Σx| per coordinate)
            c0 = c0 + h * (np.abs(y_n @ m.T).sum(axis=1) + AUC_BINS * np.abs(sum_n)
                           + np.abs(y_p @ m).sum(axis=1) + AUC_BINS * np.abs(sum_p)) + h * h * AUC_BINS**2  # fmt: skip
        t0, t1 = float(positives @ m_n), p_total * n_total  # T(a) = t0 − a·t1

        def bound(x0: np.ndarray, x1: np.ndarray, share: float, edges: np.ndarray) -> np.ndarray:
            at = x0[None, :] - edges[:, None] * x1[None, :]  # (edges, copies)
            return _order_statistic(np.maximum(at[:-1], at[1:]), share)

        def rounding(m_x: np.ndarray, total: float, edges: np.ndarray) -> np.ndarray:
            l1 = np.abs(m_x[None, :] - edges[:, None] * total).sum(axis=1)
            return np.asarray(h * np.maximum(l1[:-1], l1[1:]))

        def accepted(edges: np.ndarray) -> np.ndarray:
            q = bound(a0, a1, share_a, edges) + bound(b0, b1, share_b, edges) + bound(c0, c1, share_c, edges)
            if h > 0.0:
                q = q + rounding(m_n, n_total, edges) + rounding(m_p, p_total, edges)
            t = t0 - edges * t1
            if weak:
                return np.asarray(np.maximum(t[:-1], t[1:]) >= -q)
            return np.asarray(np.minimum(t[:-1], t[1:]) <= q)

        return accepted

    def end(weak: bool) -> float | None:
        """The lower end (strict side, from 0 up) or the upper end (weak side, from 1 down): depth-first through
        the levels of :data:`AUC_GRID`, in order. A cell a finer level accepts lies in a cell every coarser level
        accepts (a larger cell's bounds are looser), so this finds the first accepted cell of the finest grid."""
        accepted = side(weak)

        def search(low: float, high: float, level: int) -> float | None:
            edges = np.linspace(low, high, AUC_GRID[level] + 1)
            cells = np.flatnonzero(accepted(edges))
            for cell in cells[::-1] if weak else cells:
                if level + 1 == len(AUC_GRID):
                    return float(edges[cell + 1] if weak else edges[cell])
                found = search(float(edges[cell]), float(edges[cell + 1]), level + 1)
                if found is not None:
                    return found
            return None

        return search(0.0, 1.0, 0)

    low, high = end(False), end(True)
    low, high = 0.0 if low is None else low, 1.0 if high is None else high
    return (low, high) if low <= high else (0.0, 1.0)


def _auc_release(plan: EvaluationPlan, exact: np.ndarray, rng: np.random.Generator) -> _Released:
    """Noisy histograms (one release) → clamped at 0 → AUC, the released value; its interval from the unclamped
    release (:func:`_auc_interval`), the value moved into it if it falls outside."""
    b = plan.scale("roc_auc")
    # The release: the 2·B counts as ONE vector of L1 sensitivity 2 (the layer's rounding covers all its coordinates).
    noisy = laplace_release(rng, exact.reshape(-1), scale=b, l1_sensitivity=2.0, bound=plan.value_bound("roc_auc"))
    noisy = noisy.reshape(exact.shape)
    low, high = _auc_interval(plan, noisy, rng)
    value = float(auc_from_histograms(np.maximum(noisy, 0.0)))
    return min(max(value, low), high), (low, high)


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
