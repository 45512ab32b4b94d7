r"""Empirical privacy audits of ``dp_otb`` (Zhang, Tran & Cutkosky 2022, Algorithm 1, Theorem 3, eq. (6)).

Two audits with :func:`privfit.privacy.audit.epsilon_lower_bound` (Clopper–Pearson, Bonferroni over thresholds):

(a) White-box, on the tree-aggregation noise alone with worst-case increments: TIGHT, so it has power — the
    calibrated noise passes near the claim and half the noise fails it.
(b) Black-box, on the whole solver (``SOLVER.fit``) on a tiny public instance: a valid but weak check (see its
    docstring for why halving the noise is not detectable there).

Plus a check that the σ_1 the solver resolves and the σ_1 of eq. (6) used by the audited noise path agree.
All randomness is seeded on synthetic data (``make_generator(seed, data_is_public=True)``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import optimize, stats

from privfit.privacy import DEFAULT_GRID, PrivacyCost, make_generator, zcdp_rdp
from privfit.privacy.audit import epsilon_lower_bound
from privfit.privacy.noise import using_sampler
from privfit.solvers import DPOTBResolved, PublicMetadata, get_solver
from privfit.solvers.online_to_batch.tree_aggregation import (
    noise_scale,
    noisy_running_sums,
    tree_block,
    tree_sensitivity_bound,
)

SOLVER = get_solver("dp_otb")

FloatArray = NDArray[np.float64]

AUDIT_EPSILON, AUDIT_DELTA = 1.0, 1e-5


def claimed_epsilon(rho: float, delta: float) -> float:
    """ε at δ of the (α, αρ²/2)-RDP curve of Theorem 3 (ρ²/2-zCDP), converted on the default grid."""
    return PrivacyCost(zcdp_rdp(DEFAULT_GRID, rho=rho**2 / 2.0), DEFAULT_GRID).epsilon(delta).epsilon


def gaussian_epsilon(mu: float, delta: float) -> float:
    """The exact ε at δ of a Gaussian mechanism with Δ/σ = μ (Balle & Wang 2018, Theorem 8):

    δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2). It is below the RDP conversion of the same mechanism.
    """

    def excess_delta(epsilon: float) -> float:
        return float(
            stats.norm.cdf(-epsilon / mu + mu / 2) - math.exp(epsilon) * stats.norm.cdf(-epsilon / mu - mu / 2)
        )

    return float(optimize.brentq(lambda e: excess_delta(e) - delta, 0.0, 50.0, xtol=1e-12))


# ---------------------------------------------------------------------------------------------------------
# (a) white-box audit of the tree noise: worst-case increments, exactly Gaussian privacy loss
# ---------------------------------------------------------------------------------------------------------

TREE_DEPTH = 5
HORIZON = 2**TREE_DEPTH  # T = 32
TREE_RUNS = 400_000
TREE_CHUNK = 100_000


def vectorised_running_sums(increments: FloatArray, sigma_1: float, k: float, normals: FloatArray) -> FloatArray:
    """:func:`noisy_running_sums` for many runs at once: ``normals`` (runs, T, p) → releases (runs, T, p).

    The same operations in the same order as the compiled function (eq. (3) of the tree module: γ_t =
    prefix[popcount(t) − 1] + R_t, R_t = σ_1 t^{k−1} R̃_t, release = running sum + γ_t), vectorised over runs, so
    the results are bit-for-bit identical (checked in :func:`tree_release_scores`).
    """
    runs = normals.shape[0]
    rounds, p = increments.shape
    prefix = np.zeros((rounds.bit_length() + 1, runs, p))
    running = np.zeros(p)
    out = np.empty((runs, rounds, p))
    for t in range(1, rounds + 1):
        node = (sigma_1 * float(t) ** (k - 1.0)) * normals[:, t - 1, :]
        running = running + increments[t - 1]
        level = t.bit_count()
        gamma = prefix[level - 1] + node
        prefix[level] = gamma
        out[:, t - 1, :] = running + gamma
    return out


def tree_release_scores(sign: float, sensitivity: float, sigma_1: float, seed: int) -> FloatArray:
    """Σ_j release[2^j − 1] over ``TREE_RUNS`` runs of the tree on the stream (sign·Δ/2, 0, …, 0), k = 1, p = 1.

    Row 1 enters exactly the nodes t = 1, 2, 4, …, 2^m (t − lowbit(t) = 0), whose noisy values are the
    releases at those t, and every other node is independent of row 1. The node values are independent
    N(±Δ/2, σ_1²), so their sum is the likelihood-ratio statistic of the whole release and the privacy loss
    is exactly that of a Gaussian mechanism with μ = (m + 1)Δ / (sqrt(m + 1) σ_1) = sqrt(log₂ 2T) Δ / σ_1 = ρ.
    """
    increments = np.zeros((HORIZON, 1))
    increments[0, 0] = sign * sensitivity / 2.0
    generator = make_generator(seed, data_is_public=True)
    nodes = [2**j - 1 for j in range(TREE_DEPTH + 1)]
    scores = []
    for start in range(0, TREE_RUNS, TREE_CHUNK):
        normals = generator.standard_normal((TREE_CHUNK, HORIZON, 1))
        releases = vectorised_running_sums(increments, sigma_1, 1.0, normals)
        if start == 0:  # the vectorised path is the compiled one, run by run, bit for bit
            single = make_generator(seed, data_is_public=True)
            for run in range(3):
                own = single.standard_normal((HORIZON, 1))  # what a per-run caller would draw
                np.testing.assert_array_equal(own, normals[run])
                out = np.empty((HORIZON, 1))
                noisy_running_sums(increments, sigma_1, 1.0, own, out)
                np.testing.assert_array_equal(out, releases[run])
        scores.append(releases[:, nodes, 0].sum(axis=1))
    return np.concatenate(scores)


@pytest.fixture(scope="module")
def tree_audit_setup() -> DPOTBResolved:
    """ρ calibrated by the solver to ε = 1 at δ = 1e-5 for T = 32 rows (k = 1; linear model, so H > 0)."""
    meta = PublicMetadata(n=HORIZON, d=1, row_norm_bound=1.0, label_bound=1.0)
    return SOLVER.resolve(
        {"model": "linear", "fit_intercept": False}, meta, target_epsilon=AUDIT_EPSILON, delta=AUDIT_DELTA
    )


def test_row_one_enters_log2_2t_nodes_at_the_powers_of_two() -> None:
    containing = [t for t in range(1, HORIZON + 1) if 1 in tree_block(t)]
    assert containing == [2**j for j in range(TREE_DEPTH + 1)]
    assert len(containing) == math.log2(2 * HORIZON)  # the count eq. (6) pays for: tight at q = 1, T = 2^m


@pytest.mark.parametrize("variant", ["calibrated", "sigma / 2"])
def test_white_box_tree_audit_is_tight(tree_audit_setup: DPOTBResolved, variant: str) -> None:
    r = tree_audit_setup
    assert r.k == 1.0 and r.smoothness > 0.0
    claimed = claimed_epsilon(r.rho, AUDIT_DELTA)
    assert r.epsilon == claimed and 0.99 <= claimed <= AUDIT_EPSILON
    sensitivity = tree_sensitivity_bound(
        1, k=r.k, lipschitz=r.lipschitz, smoothness=r.smoothness, step_bound=r.step_bound
    )  # Δ_1 = 2kG + (k + 1)HD (eq. (A1) of the tree module)
    sigma_1 = noise_scale(
        k=r.k, lipschitz=r.lipschitz, smoothness=r.smoothness, step_bound=r.step_bound, horizon=HORIZON, rho=r.rho
    )
    assert sigma_1 == r.noise_scale
    if variant == "sigma / 2":
        sigma_1 /= 2.0
    nodes = TREE_DEPTH + 1
    mu = nodes * sensitivity / (math.sqrt(nodes) * sigma_1)  # exact μ of the score (= ρ when calibrated)
    assert mu == pytest.approx(r.rho if variant == "calibrated" else 2.0 * r.rho, rel=1e-12)

    on_d = tree_release_scores(+1.0, sensitivity, sigma_1, seed=1)
    on_d_prime = tree_release_scores(-1.0, sensitivity, sigma_1, seed=2)
    standard_error = math.sqrt(nodes) * sigma_1 / math.sqrt(TREE_RUNS)
    assert abs(on_d.mean() - nodes * sensitivity / 2) < 5 * standard_error  # N(±(m+1)Δ/2, (m+1)σ_1²)
    assert abs(on_d_prime.mean() + nodes * sensitivity / 2) < 5 * standard_error
    assert on_d.std() == pytest.approx(math.sqrt(nodes) * sigma_1, rel=0.01)

    bound = epsilon_lower_bound(on_d, on_d_prime, delta=AUDIT_DELTA).epsilon_lower_bound
    exact = gaussian_epsilon(mu, AUDIT_DELTA)  # the mechanism's true ε at δ
    assert bound <= exact
    if variant == "calibrated":
        # measured 0.54 … 0.62 over five seed pairs (exact 0.915, claimed 1.0): near-tight, and within the claim
        assert 0.4 < bound <= claimed
        assert exact <= claimed
    else:
        # measured 1.26 … 1.32 over five seed pairs (exact 1.97): half the noise breaks the claim detectably
        assert bound > claimed


# ---------------------------------------------------------------------------------------------------------
# (b) black-box audit of the whole solver
# ---------------------------------------------------------------------------------------------------------

SOLVER_RUNS = 20_000
SOLVER_META = PublicMetadata(n=8, d=1, row_norm_bound=1.0, label_bound=1.0)


def solver_scores(
    resolved: DPOTBResolved, last_row: tuple[float, float], first_seed: int, runs: int = SOLVER_RUNS
) -> FloatArray:
    """The released coefficient over ``runs`` fits on seven zero rows plus ``last_row`` = (x, y)."""
    X = np.zeros((SOLVER_META.n, 1))
    y = np.zeros(SOLVER_META.n)
    X[-1, 0], y[-1] = last_row
    return np.array(
        [
            SOLVER.fit(X, y, SOLVER_META, resolved, make_generator(first_seed + i, data_is_public=True)).coefficients[0]
            for i in range(runs)
        ]
    )


@pytest.mark.parametrize(
    ("privacy", "sampler"), [("calibrated", "float"), ("non-private control", "float"), ("calibrated", "exact")]
)
def test_black_box_audit_of_the_solver_stays_below_the_claim(privacy: str, sampler: str) -> None:
    r"""Neighbours D (last row x = 1, y = +1) and D' (x = −1, y = +1), linear model, R = 1, adagrad_norm, k = 1.

    Seven zero rows have zero gradient, so the replaced row is the only signal, and the score is the released
    coefficient x_T. The calibrated fit must give a lower bound ≤ the claimed ε (measured: 0). The control with
    ρ = 1e6 shows that the harness itself separates D from D' when the noise is negligible (measured 2.7; not
    higher because AdaGrad-norm's step D/sqrt(2 Σ‖ḡ‖²) is scale-free: on the zero rows before round q it moves by
    ≈ D/√2 in the direction of the 1e-5-sized noise, so even these outputs are spread over the ball).

    Why halving the noise is NOT detectable here (so (a) is the audit with power):

    * It is not a violation on this instance. Given the past releases, x_q and x_{q−1} are fixed and the row of
      round q only enters δ_q = (q φ'(x_q a, y) − (q − 1) φ'(x_{q−1} a, y)) a. For the squared loss in d = 1,
      δ_q = m a² − y a with m = q x_q − (q − 1) x_{q−1} = x_{q−1} + (2q/(q + 1))(w_q − x_{q−1}), and the loop's
      step bound r = 0.375 G/H = 0.75 keeps |w_q − x_{q−1}| ≤ r, so |m| < R + 2r = 2.5 and
      |δ_q(a, y) − δ_q(a', y')| ≤ |m| |a² − a'²| + |y a − y' a'| < 2.5 + 2 = 4.5, against the bound (A1) of the
      tree module, Δ = 2G + 2Hr = 2(RB + B_y)B + 2B²r = 5.5 (2G + 2HD = 8 without the step bound; the paper's
      2(k + 1)(G + HD) was 16). Noise σ_1/2 is calibrated to Δ = 2.75 < 4.5, so it does break the claim on
      this instance, but by too little to see through the three dilutions below. (Numerically, (A1) is
      attained within a factor 1.3–2.5 by adversarial iterates for privfit's GLM losses:
      ``test_dp_otb_sensitivity.py``.)
    * The release x_T is a post-processing of the noisy sums ḡ_t (projection, adaptive steps, averaging).
    * The replaced row sits at a secret, uniformly random round q, so the outputs are a mixture over q; and a
      row enters log₂(2T) nodes only when q = 1 and T is a power of two (T = 8 here: 4 nodes at q = 1).
    * The RDP → (ε, δ) conversion is itself above the exact Gaussian ε (0.915 vs 1.0 for μ = ρ here).

    With ``sampler="exact"`` the plan and the fits use the exact lattice noise (the plain estimator, integer
    running sums: :func:`~privfit.solvers.online_to_batch.solver.exact_lattice`), on a quarter of the runs (an
    exact fit of 8 rows costs ~1 ms, mostly the sampler's numpy calls).
    """
    params: dict[str, object] = {"model": "linear", "fit_intercept": False, "radius": 1.0}
    with using_sampler(sampler):
        if privacy == "calibrated":
            resolved = SOLVER.resolve(params, SOLVER_META, target_epsilon=AUDIT_EPSILON, delta=AUDIT_DELTA)
        else:
            resolved = SOLVER.resolve({**params, "rho": 1e6}, SOLVER_META, delta=AUDIT_DELTA)
    assert resolved.sampler == sampler
    assert resolved.learner == "adagrad_norm" and resolved.k == 1.0 and resolved.radius == 1.0
    assert resolved.step_bound == 0.75  # the figures of the docstring
    claimed = resolved.epsilon
    assert claimed is not None
    runs = SOLVER_RUNS if sampler == "float" else SOLVER_RUNS // 4
    with using_sampler(sampler):
        on_d = solver_scores(resolved, (1.0, 1.0), first_seed=0, runs=runs)
        on_d_prime = solver_scores(resolved, (-1.0, 1.0), first_seed=SOLVER_RUNS, runs=runs)
    bound = epsilon_lower_bound(on_d, on_d_prime, delta=AUDIT_DELTA).epsilon_lower_bound
    if privacy == "calibrated":
        assert claimed <= AUDIT_EPSILON
        assert bound <= claimed
    else:
        assert bound > 2.0 * AUDIT_EPSILON  # negligible noise: D and D' are told apart


# ---------------------------------------------------------------------------------------------------------
# the solver and the audited noise path use the same σ_1
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "privacy"),
    [
        ({"model": "logistic"}, {"target_epsilon": 1.0, "delta": 1e-6}),
        ({"model": "linear", "fit_intercept": False, "radius": 3.0}, {"target_epsilon": 0.3, "delta": 1e-5}),
        ({"model": "huber", "huber_delta": 0.5, "rho": 0.7}, {}),
        ({"model": "svm", "hinge_smoothing": 0.25, "learner": "optimistic"}, {"target_epsilon": 4.0, "delta": 1e-7}),
        ({"model": "logistic", "learner": "parameter_free"}, {"target_epsilon": 2.0, "delta": 1e-6}),  # k = 3
        ({"model": "logistic", "learner": "strongly_convex", "l2": 0.1, "k": 2.0, "rho": 1.5}, {}),
    ],
)
def test_resolved_noise_scale_is_the_audited_equation_6(params: dict[str, object], privacy: dict[str, float]) -> None:
    meta = PublicMetadata(n=1234, d=5, row_norm_bound=2.0, label_bound=1.0)
    r = SOLVER.resolve(params, meta, **privacy)
    assert r.noise_scale == noise_scale(
        k=r.k, lipschitz=r.lipschitz, smoothness=r.smoothness, step_bound=r.step_bound, horizon=r.n, rho=r.rho
    )
    assert r.noise_scale == pytest.approx(
        tree_sensitivity_bound(1, k=r.k, lipschitz=r.lipschitz, smoothness=r.smoothness, step_bound=r.step_bound)
        * math.sqrt(math.log2(2 * meta.n))
        / r.rho,
        rel=1e-14,
    )  # σ_1 = Δ_1 sqrt(log₂ 2T) / ρ: each row's ≤ log₂(2T) nodes, each with Δ_t/σ_t = ρ / sqrt(log₂ 2T)


STREAMED_RUNS = 1_000


@pytest.mark.parametrize("privacy", ["calibrated", "non-private control"])
def test_black_box_audit_holds_streamed_by_partitions(privacy: str, on_dask) -> None:
    """The black-box audit above with the rows in the parquet store, four rows a partition, each fit streaming them
    through ``fit_partitioned`` (issue 39: the partitions in a secret order, each partition's rows in a secret order,
    so the replaced row's round is still uniform; each partition read once, by the fit) on 10³ runs per world: the
    calibrated fit stays below its claim (measured 0), and with negligible noise the harness still tells D from D'
    (ε_lb > 1; measured 1.37)."""
    params: dict[str, object] = {"model": "linear", "fit_intercept": False, "radius": 1.0}
    if privacy == "calibrated":
        resolved = SOLVER.resolve(params, SOLVER_META, target_epsilon=AUDIT_EPSILON, delta=AUDIT_DELTA)
    else:
        resolved = SOLVER.resolve({**params, "rho": 1e6}, SOLVER_META, delta=AUDIT_DELTA)
    scores = []
    for last_row, first_seed in (((1.0, 1.0), 0), ((-1.0, 1.0), STREAMED_RUNS)):
        X = np.zeros((SOLVER_META.n, 1))
        y = np.zeros(SOLVER_META.n)
        X[-1, 0], y[-1] = last_row
        partitions = on_dask(X, y, SOLVER_META, False, 64)
        assert partitions.partition_rows == (4, 4)
        scores.append(np.array([
            SOLVER.fit_partitioned(partitions, SOLVER_META, resolved,
                                   make_generator(first_seed + i, data_is_public=True)).coefficients[0]
            for i in range(STREAMED_RUNS)
        ]))  # fmt: skip
    bound = epsilon_lower_bound(scores[0], scores[1], delta=AUDIT_DELTA).epsilon_lower_bound
    if privacy == "calibrated":
        assert bound <= resolved.epsilon
    else:
        assert bound > AUDIT_EPSILON
