r"""``dp_otb``: differentially private online-to-batch (Zhang, Tran & Cutkosky, NeurIPS 2022), Algorithm 1.

One pass over the n rows in a secret random order turns an online learner into a private stochastic convex
optimiser for SMOOTH losses, at the optimal rate Õ(1/√T + √d/(εT)) (Theorem 4, Remark 5). With β_t = t^k,

    x_t = (β_{1:t−1} x_{t−1} + β_t w_t) / β_{1:t}                 (anytime online-to-batch, Cutkosky 2019)
    δ_t = β_t ∇ℓ(x_t, z_t) − β_{t−1} ∇ℓ(x_{t−1}, z_t),  g_t = Σ_{i≤t} δ_i  (≈ β_t ∇ℒ(x_t))
    ḡ_t = g_t + γ_t,  γ_t = Σ_{i ∈ I_t} R_i                         (binary-tree noise, NOISE(t))

and the learner plays w_{t+1} after seeing ⟨ḡ_t, ·⟩. The release is x_T (T = n). The compiled loop is in
:mod:`privfit.solvers.online_to_batch.kernel`, the tree in :mod:`privfit.solvers.online_to_batch.tree_aggregation`,
the learners in :mod:`privfit.solvers.online_to_batch.learners`.

**Privacy** (Theorem 3, App. B; replace-one neighbours, DESIGN §1.1). Node t releases Σ_{i∈S_t} δ_i + R_t with
R_t ~ N(0, σ_t² I) and σ_t = (2kG + (k+1)H r) sqrt(log₂(2T)) t^{k−1} / ρ (eq. (4) of the tree module), where r ≤ D
is the public STEP BOUND: before x_t is formed, the loop projects the learner's point onto the ball of radius r
around x_{t−1}, so every played w_t has ‖w_t − x_{t−1}‖ ≤ r (the paper uses max‖w_i − x_{i−1}‖ ≤ D = 2R, the
diameter of the parameter ball; the projection is a function of the past releases only, tree module §A′). Its
replace-one sensitivity given the past releases is Δ_t ≤ t^{k−1}(2kG + (k+1)H r) — eq. (A1), proved in the tree
module's §A from co-coercivity of the convex smooth losses; for k = 1 and r = D it is 2G + 2HD, half of the
2(k+1)(G + HD) = 4G + 4HD the paper's Lemma 15 gives (formula v1; v2 was 2G + 2HD, v3 is the step bound) — each
row enters at most ⌊log₂T⌋ + 1 ≤ log₂(2T) nodes, and Theorem 17 composes the adaptive
Gaussian releases: the whole sequence (ḡ_t) — hence x_T — is (α, αρ²/2)-RDP for every α > 1. The cost curve is
that line on the dataset's grid, data-independent; ρ is calibrated to a target (ε, δ) by the usual RDP → (ε, δ)
conversion. With ``prefix_estimator='honaker'`` (default) the learner sees Honaker's (2015) minimum-variance
estimate of g_t from the complete binary tree's nodes, which cost the same (tree module §B): post-processing.

G and H in σ_t are the constants of the DATA term φ(⟨x, a⟩, y) only, from the declared row-norm bound, label
bound and radius (:mod:`privfit.solvers.losses`; rows and labels are clipped to those bounds in the loop).
The optional L2 term (λ/2)‖x‖² is part of ℓ (it enters δ_t as λ(β_t x_t − β_{t−1} x_{t−1})), but it is the
same function on neighbouring datasets, and given the past releases x_t and x_{t−1} are the same too, so it
cancels in δ_q − δ'_q: the sensitivity bound of the proof holds with the data term's G and H. The learners'
step schedules use the regularised constants G + λR and H + λ (``lipschitz_total``, ``smoothness_total``).

**Defaults.** Learner ``adagrad_norm`` (adapts to the actual size of ḡ_t, which the worst-case bounds
overstate); k = 1 (k = 3 for ``parameter_free``, as Theorem 10 requires); prefix estimator ``honaker``. Radius:
a public rule (:func:`default_radius`), R = c·sqrt(κ) with κ = ρT/(B² sqrt(p) log₂²(2T)) (the private term of the
excess risk is ∝ B²R² sqrt(p) log₂²(2T)/(ρT), so κ is the R² at which it is of order one), c = 4 for logistic,
svm and huber and 0.6 for linear (whose G grows with R as well), clipped to [0.25, 10]. Chosen by sweeping
R ∈ {0.25, 0.5, 1, 2, 4, 8} at ε ∈ {0.5, 1, 5}, 5 seeds, on Adult and the four dev datasets (``benchmarks/
utility.py``'s protocol): the best R per cell was 4/4/4 (Adult), 0.5/1/2 (telco_churn), ≤1/2/2–4 (hr_attrition),
0.25–0.5/0.5/1 (power_plant), ≤0.25 (wine_white), i.e. best R / sqrt(κ) ≈ 3–5 for the classification datasets
(Adult, flat at low ε, up to 10) and 0.35–1 for the regression ones. Measured at defaults (3 seeds, accuracy or
RMSE at ε = 0.5 / 1 / 5), fixed radius 2 (1) → this rule with the tighter σ and Honaker: Adult 76.10/76.11/77.01
→ 75.99/76.31/81.61 %, telco_churn 61.49/67.64/73.53 → 73.39/73.46/76.30, hr_attrition 75.86/76.14/76.19 →
76.12/76.11/76.78, power_plant RMSE 18.08/17.00/12.06 → 15.93/14.23/8.59, wine_white 1.180/1.157/1.059 →
0.944/0.914/0.906.

Step bound (formula v3): a public rule (:func:`default_step_bound`), r = c·G/H with the data term's constants, at
most D; c = 1 for logistic, svm and huber, 0.375 for linear. At r = c·G/H the H term of (A1) is c times the G
term, so σ_1 is (1 + c)·2G sqrt(log₂ 2T)/ρ instead of (2G + 2HD) sqrt(log₂ 2T)/ρ: on the 10⁶ × 50 synthetic
logistic data of ``benchmarks/otb_synthetic.py`` (B = √51, G/H = 4/B, R = 4.7) r = 0.56 and σ_1 = 592 instead of
5265. A smaller r is not better: x_t moves by at most (k+1) r/t per round (‖x_t − x_{t−1}‖ ≤ (β_t/β_{1:t}) r), so
x can travel only ≈ (k+1) r ln(T/t₀) after round t₀, and the early rounds, where the tree noise dominates ḡ_t,
push the learner across the ball. Measured (test accuracy, ε = 1, mean of 4 seeds, 1M rows): r = 0.42 / 0.56 /
0.75 / 1 / 9.4 (= D, formula v2) → 79.87 / 80.01 / 80.05 / 80.04 / ≈ 78.0–78.5 % (r = 0.28 → 79.63, 2 seeds;
at 200,000 rows, where the travel budget is shorter, r = 1 is best: 78.86 % against 73.8 % at r = 0.5 and 73.9 %
at D). On ``benchmarks/utility.py``'s protocol (ε ∈ {0.5, 1, 5}, 4 seeds; accuracy % or RMSE), c ∈ {0.25, 0.5,
0.75, 1, 1.25} for the logistic datasets and c ∈ {0.125, 0.25, 0.375, 0.5} (6 seeds) for the linear ones: c = 1
(logistic) gave Adult 76.12/77.61/83.29 (v2: 75.98/76.31/81.76), telco_churn 73.46/73.46/79.26
(73.40/73.46/76.14), hr_attrition 76.17/76.10/76.81 (76.14/76.13/77.03; c = 0.5 had 77.49 at ε = 5 but was
worse on Adult and at 1M rows); c = 0.375 (linear) gave power_plant RMSE 14.63/12.25/7.01 (v2:
15.32/13.55/8.28) and wine_white 0.984/0.928/0.907 (1.021/0.955/0.914). The radius rule was re-checked with the
step bound (R × 0.5 and × 2): neither was better on every dataset, so it is unchanged.

**Data-independent observables** (DESIGN §4; issue 18). This solver **runs a public number of iterations**: one
round per row in blocks of a public size; the normals of each block are drawn with a fixed shape and the stop is
polled once per block. The compiled rounds clip every row to the public bounds and have no data-dependent loop;
the online learners' own loops (the Newton step of the diagonal-metric projection, the projection backstop) act
on the noisy running sums ḡ_t only — post-processing of the tree mechanism's outputs, all of which Theorem 3's
charge covers — and draw no random numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import ClassVar, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field, ValidationInfo, field_validator

from privfit.privacy import OrderGrid, PrivacyCost, gaussian_sigma, zcdp_rdp
from privfit.privacy.noise import Lattice, SamplerName, current_sampler, gaussian_lattice, integer_noise
from privfit.solvers.base import (
    MAX_SCALE,
    MIN_SCALE,
    FitRun,
    GLMParams,
    GLMResolved,
    PrivacyRequest,
    ProgressReporter,
    PublicMetadata,
    Solver,
    SolverParameterError,
    ball_capped,
    design_bound,
    glm_loss,
    glm_resolved_fields,
)
from privfit.solvers.compiled_losses import LOSS_KINDS
from privfit.solvers.online_to_batch.kernel import online_to_batch_block
from privfit.solvers.online_to_batch.learners import LEARNERS, LearnerContext, get_learner
from privfit.solvers.online_to_batch.tree_aggregation import (
    ESTIMATORS,
    noise_scale,
    tree_levels,
    tree_sensitivity_bound,
)
from privfit.solvers.partitioned import PartitionedRows

__all__ = ["DPOTBParams", "DPOTBResolved", "DPOnlineToBatch", "dp_online_to_batch"]

FloatArray = NDArray[np.float64]

LearnerName = Literal["ogd", "adagrad_norm", "adagrad_diagonal", "optimistic", "strongly_convex", "parameter_free"]
EstimatorName = Literal["honaker", "plain"]

#: the public radius rule R = c · sqrt(κ) clipped to [R_MIN, R_MAX] (see :func:`default_radius`): c per model
RADIUS_RULE_CONSTANT: dict[str, float] = {"logistic": 4.0, "svm": 4.0, "huber": 4.0, "linear": 0.6}
RADIUS_MIN, RADIUS_MAX = 0.25, 10.0
#: the public step-bound rule r = c · G/H, at most D (see :func:`default_step_bound`): c per model
STEP_BOUND_RULE_CONSTANT: dict[str, float] = {"logistic": 1.0, "svm": 1.0, "huber": 1.0, "linear": 0.375}
_NOISE_BLOCK_ELEMENTS = 1 << 20
_MIN_BLOCK_ROUNDS = 1024


class DPOTBParams(GLMParams):
    """Parameters of ``dp_otb`` (all optional; the defaults need no tuning)."""

    radius: float | None = Field(
        None,
        ge=MIN_SCALE,
        le=MAX_SCALE,
        description="Public radius R of the L2 ball (with intercept); the domain diameter is D = 2R and the noise "
        "grows with 2G + 2H·min(r, D) (r: step_bound). Default: a public rule from n, d, the row-norm bound and "
        "ε, δ (R = c·sqrt(κ), κ = ρT/(B² sqrt(p) log₂²(2T)), c = 4, or 0.6 for linear; clipped to [0.25, 10]).",
    )
    learner: LearnerName = Field(
        "adagrad_norm",
        description="Online learner fed the private linear losses: 'ogd' (projected OGD, public step schedule), "
        "'adagrad_norm', 'adagrad_diagonal', 'optimistic' (hint ḡ_{t−1}), 'strongly_convex' (needs l2 > 0; "
        "Section 4) or 'parameter_free' (KT coin betting around initial_point, k = 3; Section 5).",
    )
    k: float | None = Field(
        None,
        ge=1.0,
        le=4.0,
        description="Exponent of the weights β_t = t^k. Default 1; 3 for 'parameter_free' (required there).",
    )
    learning_rate: float = Field(
        1.0,
        ge=MIN_SCALE,
        le=MAX_SCALE,
        description="Scale of the learner's theory step size (OGD/AdaGrad/optimistic: D/√2 per unit gradient; "
        "strongly convex: 1/Σμ_t; parameter-free: initial wealth R).",
    )
    initial_point: list[float] | None = Field(
        None,
        description="The first point x₁ = w₁ (length d, plus 1 for the intercept, last), inside the ball; a PUBLIC "
        "input, e.g. a model pre-trained on public data. Default: 0. The parameter-free learner's regret "
        "scales with ‖x* − x₁‖.",
    )
    regularization_scale: float | None = Field(
        None,
        ge=0.0,
        le=1e6,
        description="'parameter_free' only: multiplier of ξ_t and ν_t of Theorem 10 (1 = the theorem with its "
        "universal constant C = 1; default 1e-4, since the theorem's high-probability constants dwarf the "
        "gradients until t ≈ 10⁷).",
    )
    rho: float | None = Field(
        None,
        gt=0.0,
        le=1e6,
        description="Explicit privacy parameter ρ instead of a target ε: the fit is then (α, αρ²/2)-RDP for all α.",
    )
    step_bound: float | None = Field(
        None,
        ge=MIN_SCALE,
        le=MAX_SCALE,
        description="Public bound r on the learner's step from the running average, ‖w_t − x_{t−1}‖ ≤ r (each "
        "played point is projected onto that ball around x_{t−1}); the noise grows with 2G + 2H·min(r, D) "
        "instead of 2G + 2H·D. Default: r = c·G/H (the data term's constants; c = 1, or 0.375 for linear), at "
        "most D; a value above D is D.",
    )
    prefix_estimator: EstimatorName | None = Field(
        None,
        description="How the learner's running sums ḡ_t are estimated from the tree's noisy nodes: 'honaker' "
        "(minimum-variance, Honaker 2015, from the complete binary tree; the default) or 'plain' (the sum of the "
        "dyadic nodes, Algorithm 1 as printed). Both are post-processing of the same release: same privacy cost. "
        "A server with the exact sampler (noise_sampler = exact) runs 'plain' only, which is then the default: "
        "Honaker's estimate is drawn through Gaussian identities that lattice noise does not satisfy.",
    )

    @field_validator("regularization_scale")
    @classmethod
    def _parameter_free_only(cls, value: float | None, info: ValidationInfo) -> float | None:
        if value is not None and info.data.get("learner") != "parameter_free":
            raise ValueError("applies only to learner 'parameter_free'")
        return value


def noise_to_signal(*, n: int, dimension: int, design_bound: float, rho: float) -> float:
    """κ = ρ T / (B² sqrt(p) log₂²(2T)): public, and the inverse of the noise term of the excess risk per unit
    R² (the private term of Theorem 4 scales as H D² sqrt(p) log₂²(2T)/(ρT) with H ∝ B²)."""
    return rho * n / (design_bound**2 * math.sqrt(dimension) * math.log2(2.0 * n) ** 2)


def default_radius(model: str, *, n: int, dimension: int, design_bound: float, rho: float) -> float:
    """The default radius from public information: R = c_model · sqrt(κ) (:func:`noise_to_signal`), clipped to
    [0.25, 10] and rounded to 3 significant digits; c = 4 for the bounded-slope losses (logistic, svm, huber),
    0.6 for the squared loss (whose G grows with R too). See the module docstring for the measurement."""
    kappa = noise_to_signal(n=n, dimension=dimension, design_bound=design_bound, rho=rho)
    radius = min(RADIUS_MAX, max(RADIUS_MIN, RADIUS_RULE_CONSTANT[model] * math.sqrt(kappa)))
    return float(f"{radius:.3g}")


def default_step_bound(model: str, *, lipschitz: float, smoothness: float, diameter: float) -> float:
    """The default step bound from public constants: r = c_model · G/H (the data term's Lipschitz and smoothness
    constants), at most D and rounded to 3 significant digits; c = 1 for logistic, svm and huber, 0.375 for
    linear. At r = c G/H the H term of the sensitivity (A1) is c times its G term, so σ_1 is (1 + c) times the
    floor 2G sqrt(log₂ 2T)/ρ of k = 1. See the module docstring for the measurement."""
    if not smoothness > 0.0:
        return diameter
    return min(diameter, float(f"{STEP_BOUND_RULE_CONSTANT[model] * lipschitz / smoothness:.3g}"))


class DPOTBResolved(GLMResolved):
    """Fully resolved ``dp_otb`` settings (public, data-independent; JSON-serialisable)."""

    solver: Literal["dp_otb"] = "dp_otb"
    formula_version: Literal["dp_otb/theorem3-zcdp-cocoercive-stepbound/v3"] = (
        "dp_otb/theorem3-zcdp-cocoercive-stepbound/v3"
    )
    l2: float = Field(ge=0.0)
    radius: float = Field(gt=0.0)
    diameter: float = Field(gt=0.0, description="D = 2R.")
    step_bound: float = Field(gt=0.0, description="r ≤ D: ‖w_t − x_{t−1}‖ ≤ r is enforced by the loop.")
    lipschitz: float = Field(gt=0.0, description="G of the data term on the ball (enters σ_t).")
    smoothness: float = Field(ge=0.0, description="H of the data term (enters σ_t).")
    lipschitz_total: float = Field(gt=0.0, description="G + λR (the learners' schedules).")
    smoothness_total: float = Field(ge=0.0, description="H + λ.")
    learner: LearnerName
    k: float = Field(ge=1.0, le=4.0)
    learning_rate: float = Field(gt=0.0)
    initial_point: list[float] | None
    regularization_scale: float | None
    rho: float = Field(gt=0.0, description="The fit is (α, αρ²/2)-RDP for every α > 1 (Theorem 3).")
    noise_scale: float = Field(
        gt=0.0,
        description="σ_1 = (2kG + (k+1)H r) sqrt(log₂ 2T)/ρ, r = step_bound (eq. (4) of the tree module); node "
        "t's noise is "
        "N(0, (σ_1 t^{k−1})² I).",
    )
    prefix_estimator: EstimatorName
    sampler: SamplerName = Field(
        "float",
        description="The noise sampler the plan was resolved and charged for (privfit.privacy.noise); the fit "
        "draws with it: 'exact' rounds every δ_t to a lattice, sums them in integers and draws the nodes' noise "
        "from the exact discrete Gaussian. Settings stored before the sampler existed drew with 'float'.",
    )


def dp_online_to_batch(
    X: FloatArray,
    y: FloatArray,
    *,
    model: str,
    loss_parameter: float,
    l2: float,
    fit_intercept: bool,
    feature_bound: float,
    label_bound: float,
    radius: float,
    k: float,
    sigma_1: float,
    step_bound: float,
    learner_name: str,
    estimator: str = "plain",
    context: LearnerContext,
    rng: np.random.Generator,
    reporter: ProgressReporter | None = None,
    order: NDArray[np.int64] | None = None,
    lattice: Lattice | None = None,
    partitions: PartitionedRows | None = None,
) -> FloatArray:
    """Algorithm 1 over all rows of ``X`` in a secret random order; returns x_T (length p = d + intercept).

    With ``partitions`` (a dataset held elsewhere, :mod:`privfit.solvers.partitioned`; ``X`` then only gives d by its
    columns) the pass streams the partitions, holding one (and the next, read meanwhile): the rounds visit the
    partitions in a secret random order and each partition's rows in a secret random order
    (:func:`partition_order`, from a child of ``rng`` spawned before any noise is drawn). The mechanism is the same:
    each row is used in exactly one round, whatever the order, and Theorem 3's bound holds for every fixed order
    (tree module §A: the replaced row enters one round q and the nodes covering q).

    With a ``lattice`` (:func:`exact_lattice`; the exact sampler, k = 1, the plain estimator) every δ_t is
    rounded to it and summed in integers, and the nodes' noise is the exact discrete Gaussian of the lattice's
    variance drawn from a child of ``rng``; ``sigma_1`` is then ignored (module docstring, "Exact sampler").

    ``order`` (a permutation of the rows) is drawn from ``rng`` unless given (tests on public data only).
    Standard normals are drawn from ``rng`` in blocks (≥ 1024 rounds, ≤ 2^20 numbers, ~100 per pass: progress
    and cancellation are checked between blocks), the next block in a background
    thread while the compiled loop (which releases the GIL) runs the current one. ``sigma_1 = 0`` is NOT
    private and exists only for tests of the noiseless path. ``X`` and ``y`` may violate the declared bounds
    (``feature_bound`` B_x of the rows without intercept, ``label_bound``): the loop enforces them (module
    :mod:`~privfit.solvers.online_to_batch.kernel`); ``step_bound`` is r of the noise (σ_1 must be calibrated to
    it), enforced by the loop's projection of every played point.
    """
    d = X.shape[1]
    if partitions is None:
        n = X.shape[0]
        if order is None:
            order = rng.permutation(n)
        rows: Iterator[RowSegment] = iter([(X, y, np.ascontiguousarray(order, dtype=np.int64))])
    else:
        n = partitions.rows
        rows = partition_order(partitions, rng.spawn(1)[0])
    p = d + (1 if fit_intercept else 0)
    learner = get_learner(learner_name)
    state = learner.init_state(context)
    w = np.array(context.initial_point, dtype=np.float64, copy=True)
    x = np.zeros(p)
    g = np.zeros(p)
    prefix = np.zeros((tree_levels(n) + 1, p))
    left = np.zeros((tree_levels(n) + 1, p))
    left_variance = np.zeros(tree_levels(n) + 1)
    beta_total = np.zeros(1)
    scratch = np.zeros((4, p))
    # blocks of ≥ 1024 rounds, ≤ 2^20 normals, and ~100 per pass for progress and cancellation
    block = max(1, min(n, _NOISE_BLOCK_ELEMENTS // p, max(_MIN_BLOCK_ROUNDS, math.ceil(n / 100))))
    loss_kind = LOSS_KINDS[model]
    g_int = np.zeros(p, dtype=np.int64)
    if lattice is None:
        draw: Callable[[tuple[int, int]], FloatArray] = rng.standard_normal
        spacing, node_scale = 0.0, sigma_1
    else:
        if k != 1.0 or estimator != "plain":
            raise SolverParameterError("prefix_estimator", "the exact sampler runs k = 1 with the plain estimator")
        noise_rng = rng.spawn(1)[0]
        exact = lattice

        def draw(shape: tuple[int, int]) -> FloatArray:
            return integer_noise(exact, shape[0] * shape[1], noise_rng).reshape(shape).astype(np.float64)

        spacing, node_scale = lattice.spacing, 1.0
    segment_X, segment_y, segment_order = X, y, np.empty(0, dtype=np.int64)
    used = 0  # rounds run on the current segment
    for start, normals in _prefetched_noise(draw, n, p, block):
        if reporter is not None:
            reporter.check_stop(start - 1)
        stop = start + normals.shape[0]
        t = start
        while t < stop:  # the block's rounds, over as many segments (partitions) as they span
            if used == segment_order.shape[0]:
                segment_X, segment_y, segment_order = next(rows)
                used = 0
            until = min(stop, t + segment_order.shape[0] - used)
            segment_rows, segment_normals = segment_order[used : used + until - t], normals[t - start : until - start]
            online_to_batch_block(
                segment_X, segment_y, segment_rows, t, until, segment_normals, node_scale, k, ESTIMATORS[estimator],
                loss_kind, loss_parameter, l2, fit_intercept, feature_bound, label_bound, radius, step_bound,
                learner.kind, w, x, g, prefix, left, left_variance, beta_total, state.vectors, state.scalars,
                state.config, scratch, spacing, g_int,
            )  # fmt: skip
            used += until - t
            t = until
        if reporter is not None:
            reporter.report(stop - 1)
    return x


#: Rows of consecutive rounds: (X, y, order), round j of the segment using row ``order[j]`` of X.
RowSegment = tuple[FloatArray, FloatArray, NDArray[np.int64]]


def partition_order(partitions: PartitionedRows, rng: np.random.Generator) -> Iterator[RowSegment]:
    """The rows of ``partitions`` in the order a streamed pass uses them: the partitions in the random order
    π = ``rng.permutation(P)``, then for each partition j = π_1, π_2, … its rows in the order
    ``rng.permutation(rows_j)`` (drawn as the partition is reached). Partition j + 1 is read while the caller runs
    partition j. The order is secret (``rng`` is the fit's) and drawn from public sizes only; it is a uniform
    permutation of the partitions and of the rows within each, not of all n rows (rows of one partition are
    consecutive rounds: the upload's order decides which rows share a partition)."""
    sizes = partitions.partition_rows
    visit = rng.permutation(len(sizes))
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="privfit-partition") as pool:
        pending = pool.submit(partitions.read_rows, int(visit[0]))
        for position, index in enumerate(visit):
            X, y = pending.result()
            if position + 1 < len(visit):
                pending = pool.submit(partitions.read_rows, int(visit[position + 1]))
            yield X, y, rng.permutation(sizes[index]).astype(np.int64)


def _prefetched_noise(
    draw: Callable[[tuple[int, int]], FloatArray], rounds: int, p: int, block: int
) -> Iterator[tuple[int, FloatArray]]:
    """(first round, the block's noise ``draw((rows, p))``) per block; the next block is drawn while the caller
    uses this one."""
    starts = list(range(1, rounds + 1, block))
    if len(starts) == 1:
        yield 1, draw((rounds, p))
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="privfit-noise") as pool:
        pending: Future[FloatArray] = pool.submit(draw, (min(block, rounds), p))
        for index, start in enumerate(starts):
            normals = pending.result()
            if index + 1 < len(starts):
                following = starts[index + 1]
                pending = pool.submit(draw, (min(block, rounds + 1 - following), p))
            yield start, normals


def exact_lattice(r: DPOTBResolved) -> Lattice:
    """The lattice of an exact fit (k = 1): noise σ_1 for the node sensitivity Δ_1 = 2G + 2Hr of eq. (A1), p
    coordinates per node, and the public bound 2T²(G + λR) on |g_t| (|δ_t| ≤ (β_t + β_{t−1})(G + λR) ≤ 2T(G + λR)).

    Only the replaced row's δ_{t*} differs between neighbours given the past releases, so every node holding t*
    moves by rint(δ_{t*}/h) − rint(δ'_{t*}/h): at most (Δ_1 + √p·h)/h, the lattice mechanism's rounding bound.
    The computed δ_t differs from the exact one by at most 64u‖δ_t‖ (a few roundings per coordinate, u = 2^−53),
    so σ_1 is raised by the relative 2·64u·2T(G + λR)/Δ_1 before the lattice inflates it (module docstring)."""
    horizon = float(r.n)
    sensitivity = tree_sensitivity_bound(
        1, k=1.0, lipschitz=r.lipschitz, smoothness=r.smoothness, step_bound=r.step_bound
    )
    gradient = 2.0 * horizon * r.lipschitz_total
    float_slack = 2.0 * 64.0 * 2.0**-53 * gradient / sensitivity
    dimension = r.d + (1 if r.fit_intercept else 0)
    return gaussian_lattice(r.noise_scale * (1.0 + float_slack), sensitivity, dimension, horizon * gradient)


class DPOnlineToBatch(Solver[DPOTBParams, DPOTBResolved]):
    """DP online-to-batch with tree-aggregated gradient differences (Zhang, Tran & Cutkosky 2022).

    The compiled loop appends the intercept itself (``appends_intercept`` False) and enforces the declared bounds
    row by row (``enforces_declared_bounds``): :meth:`_fit` gets the rows as given, without the O(nd) copy of
    :func:`~privfit.solvers.base.enforce_declared_bounds` — at 10⁶ × 50 the copy and its row norms took ≈ 3.4 s
    of a 5.5 s fit (first touch of 400 MB of fresh memory), the whole loop ≈ 2 s.
    """

    description: ClassVar[str] = (
        "DP online-to-batch (Zhang, Tran & Cutkosky 2022): one pass in a secret random order; the online learner "
        "sees the running sum of gradient differences with binary-tree Gaussian noise; releases the anytime "
        "online-to-batch average x_T. Smooth losses only. Cost: (α, αρ²/2)-RDP for all α (Theorem 3). "
        "Learners: ogd, adagrad_norm (default), adagrad_diagonal, optimistic, strongly_convex, parameter_free."
    )
    explicit_noise: ClassVar[str | None] = "rho"
    appends_intercept: ClassVar[bool] = False
    enforces_declared_bounds: ClassVar[bool] = True
    #: a dataset held elsewhere is streamed partition by partition in one pass (:func:`partition_order`)
    supports_partitions: ClassVar[bool] = True
    #: streamed, its order is a shuffle of the partitions and within each, not of all rows: used only for datasets
    #: that cannot be read into memory (a sorted upload of several partitions reaches it in runs of similar rows)
    partitioned_order_differs: ClassVar[bool] = True

    def _resolve(self, p: DPOTBParams, meta: PublicMetadata, privacy: PrivacyRequest) -> DPOTBResolved:
        """Constants from the public bounds; ρ calibrated to (target ε, δ) or explicit; σ_1 from eq. (6)."""
        learner = LEARNERS[p.learner]
        k = p.k if p.k is not None else (learner.required_k or 1.0)
        if learner.required_k is not None and k != learner.required_k:
            raise SolverParameterError("k", f"learner {p.learner!r} requires k = {learner.required_k:g}")
        sampler = current_sampler()
        estimator = p.prefix_estimator or ("plain" if sampler == "exact" else "honaker")
        if sampler == "exact" and k != 1.0:
            raise SolverParameterError(
                "k", "this server draws exact lattice noise (noise_sampler = exact), which dp_otb supports for "
                "k = 1 only (the nodes' noise then has one scale); 'parameter_free' needs k = 3"
            )  # fmt: skip
        if sampler == "exact" and estimator != "plain":
            raise SolverParameterError(
                "prefix_estimator", "this server draws exact lattice noise (noise_sampler = exact): dp_otb runs "
                "the 'plain' estimator only (Honaker's is drawn through Gaussian identities lattice noise lacks)"
            )  # fmt: skip
        if learner.requires_strong_convexity and p.l2 <= 0.0:
            raise SolverParameterError("l2", f"learner {p.learner!r} needs l2 > 0 (μ is the L2 strength)")

        if privacy.target is not None:
            # (α, αρ²/2)-RDP is the Gaussian curve with Δ/σ = ρ: calibrate σ for Δ = 1 and take ρ = 1/σ.
            rho = 1.0 / gaussian_sigma(*privacy.target, sensitivity=1.0, count=1, grid=privacy.grid).noise
        else:
            rho = privacy.explicit()
        dimension = meta.d + (1 if p.fit_intercept else 0)
        bound = design_bound(meta, p.fit_intercept)
        radius = (
            default_radius(p.model, n=meta.n, dimension=dimension, design_bound=bound, rho=rho)
            if p.radius is None
            else p.radius
        )
        initial_point = self._initial_point(p, dimension, radius)
        loss = glm_loss(p)
        lipschitz = loss.lipschitz(bound, meta.label_bound, radius)
        smoothness = loss.smoothness(bound)
        if not (lipschitz > 0.0 and math.isfinite(lipschitz) and math.isfinite(smoothness)):
            raise SolverParameterError("row_norm_bound", "gives a zero or infinite Lipschitz constant")
        diameter = 2.0 * radius
        step_bound = (
            default_step_bound(p.model, lipschitz=lipschitz, smoothness=smoothness, diameter=diameter)
            if p.step_bound is None
            else min(p.step_bound, diameter)
        )
        sigma_1 = noise_scale(
            k=k, lipschitz=lipschitz, smoothness=smoothness, step_bound=step_bound, horizon=meta.n, rho=rho
        )
        return DPOTBResolved(
            **glm_resolved_fields(p, meta, privacy),
            l2=p.l2,
            radius=radius,
            diameter=diameter,
            step_bound=step_bound,
            lipschitz=lipschitz,
            smoothness=smoothness,
            lipschitz_total=lipschitz + p.l2 * radius,
            smoothness_total=smoothness + p.l2,
            learner=p.learner,
            k=k,
            learning_rate=p.learning_rate,
            initial_point=None if p.initial_point is None else [float(v) for v in initial_point],
            regularization_scale=(
                (1e-4 if p.regularization_scale is None else p.regularization_scale)
                if p.learner == "parameter_free"
                else None
            ),
            rho=rho,
            noise_scale=sigma_1,
            prefix_estimator=estimator,
            sampler=sampler,
        )

    @staticmethod
    def _initial_point(p: DPOTBParams, dimension: int, radius: float) -> FloatArray:
        if p.initial_point is None:
            return np.zeros(dimension)
        point = np.asarray(p.initial_point, dtype=np.float64)
        if point.shape != (dimension,):
            what = "d features + 1 intercept" if p.fit_intercept else "d features"
            raise SolverParameterError("initial_point", f"must have {dimension} entries ({what})")
        if not np.all(np.isfinite(point)) or float(np.linalg.norm(point)) > radius:
            raise SolverParameterError("initial_point", f"must be finite and inside the ball of radius {radius:g}")
        return point

    def _cost(self, r: DPOTBResolved, meta: PublicMetadata, grid: OrderGrid) -> PrivacyCost:
        """Theorem 3: ε(α) = αρ²/2 on the grid; reads no row."""
        return PrivacyCost(zcdp_rdp(grid, rho=r.rho**2 / 2.0), grid)

    def learner_context(self, r: DPOTBResolved) -> LearnerContext:
        """The public context the learner is built from."""
        dimension = r.d + (1 if r.fit_intercept else 0)
        point = np.zeros(dimension) if r.initial_point is None else np.asarray(r.initial_point, dtype=np.float64)
        return LearnerContext(
            dimension=dimension,
            radius=r.radius,
            horizon=r.n,
            k=r.k,
            lipschitz=r.lipschitz_total,
            smoothness=r.smoothness_total,
            rho=r.rho,
            strong_convexity=r.l2,
            learning_rate=r.learning_rate,
            initial_point=point,
            regularization_scale=1.0 if r.regularization_scale is None else r.regularization_scale,
        )

    def _progress_steps(self, r: DPOTBResolved) -> int:
        return r.n

    def _fit(self, run: FitRun, r: DPOTBResolved) -> FloatArray:
        """One pass of Algorithm 1 on the private rows with ``r``; noise and order from ``run.rng``."""
        return dp_online_to_batch(
            np.ascontiguousarray(run.X),
            np.ascontiguousarray(run.y),
            model=r.model,
            loss_parameter=next(iter(r.loss_params.values()), 0.0),
            l2=r.l2,
            fit_intercept=r.fit_intercept,
            feature_bound=r.row_norm_bound,
            label_bound=r.label_bound,
            radius=r.radius,
            k=r.k,
            sigma_1=r.noise_scale,
            step_bound=r.step_bound,
            learner_name=r.learner,
            estimator=r.prefix_estimator,
            context=self.learner_context(r),
            rng=run.rng,
            reporter=run.reporter,
            lattice=exact_lattice(r) if r.sampler == "exact" else None,
            partitions=run.partitions,
        )

    def _noise_norm(self, r: DPOTBResolved, meta: PublicMetadata) -> float:
        r"""D·N/S, capped at D = 2R: the share of the tree noise in the linear losses the learner sees, times the
        distance it can move.

        Round t's noise γ_t sums at most log₂(2T) nodes of N(0, (σ_1 i^{k−1})² I), i ≤ t, so
        N² = Σ_t E‖γ_t‖² ≤ d σ_1² log₂(2T) Σ_t t^{2k−2} ≈ d σ_1² log₂(2T) T^{2k−1}/(2k − 1), while the signal
        g_t ≈ β_t ∇ℒ(x_t), ‖∇ℒ‖ ≤ G + λR, has S² = Σ_t β_t² (G + λR)² ≈ (G + λR)² T^{2k+1}/(2k + 1) (√ of
        sums: the √d bound). The learners' steps are normalised by the size of what they see (AdaGrad's
        D/sqrt(Σ‖ḡ_t‖²), OGD's D/(G√T)), so their iterates — and x_T, a weighted average of them — move across the
        ball in proportion to N/S. S uses the worst-case gradient, so this is optimistic near θ*.
        """
        T, k = r.n, r.k
        levels = math.log2(2.0 * T)
        noise = r.noise_scale * math.sqrt((r.d + int(r.fit_intercept)) * levels * T ** (2 * k - 1) / (2 * k - 1))
        signal = r.lipschitz_total * math.sqrt(T ** (2 * k + 1) / (2 * k + 1))
        return ball_capped(r.diameter * noise / signal, r.radius)
