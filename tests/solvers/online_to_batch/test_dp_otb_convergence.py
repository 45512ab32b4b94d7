r"""Convergence of ``dp_otb`` (Zhang, Tran & Cutkosky 2022) on logistic data whose population optimum is known.

Instance. x is uniform in the unit ball of R³ (‖x‖ ≤ 1 = the declared row-norm bound) and
P[y = +1 | x] = σ(⟨θ*, x⟩) with ‖θ*‖ = 1, inside the ball of radius R = 2 (``fit_intercept=False``). The
labels are very noisy (|⟨θ*, x⟩| ≤ 1, so P[y = +1 | x] ∈ [0.27, 0.73]): the data are far from separable.

Population risk. L(θ) = E_x[p(x) softplus(−⟨θ, x⟩) + (1 − p(x)) softplus(⟨θ, x⟩)] with p(x) = σ(⟨θ*, x⟩) is
estimated on a fixed held-out sample of 200 000 x's, with the expectation over the label taken EXACTLY. Its
gradient at θ* is then 0 for every x (σ(⟨θ*, x⟩) − p(x) = 0), so θ* is the exact minimiser of the estimate too:
the excess risk L(x_T) − L(θ*) has no O(1/√n_heldout) linear error term that would swamp the 10⁻⁵ excesses
measured at T = 64 000. For the strongly convex learner (Section 4) the objective is L(θ) + (λ/2)‖θ‖², and its
minimiser is computed with scipy on the same sample.

What the theory predicts, and what the learners do (measured; see the per-test comments):

* Theorem 4 / Remark 5 (and Theorem 6 for the optimistic learner, Remark 12 for the parameter-free one) give
  the WORST-CASE bound E[L(x_T) − L(x*)] = O(D(G + Dσ_H)/√T + √d D(G + DH) log T / (ρT)): the non-private
  excess decays at least like 1/√T, i.e. the log-log slope is at most −½.
* This instance is not a worst case: the logistic risk restricted to W is μ-strongly convex with
  μ ≥ σ'(R‖x‖) λ_min(E[xxᵀ]) > 0, so the 1/√T bound is not tight here: the best possible non-private rate is
  the statistical one, c/T with c = tr(H⁻¹Σ)/2 (Hájek–Le Cam; the asymptotic excess of the empirical risk
  minimiser, H the Hessian and Σ the gradient covariance at the optimum; c = d/2 for the well-specified
  logistic model, where Σ = H). Remark 9 states the O(1/(μT)) rate for the ``strongly_convex`` learner. Measured
  slopes over T = 500 … 64 000 (24 seeds per T, three disjoint seed sets): ogd −1.00 … −1.04, adagrad_norm
  −0.95 … −1.04, adagrad_diagonal −0.96 … −1.05, optimistic −0.94 … −0.99, strongly_convex (λ = 0.05)
  −0.93 … −1.03, with the excess at the three largest T within 1.2–1.9 × c/T. A [−0.6, −0.4] window (the 1/√T of
  Remark 5) therefore fails on this instance, and is not to be expected on a fixed instance with a non-degenerate
  design (an ill-conditioned design, eigenvalues of H from 1e-4 to 5e-2, still gave −0.73 … −0.90): a smooth
  GLM shows 1/√T when its curvature shrinks with T, as in the horizon-dependent minimax lower-bound instances. The tests
  assert the statistical regime instead: slope in [−1.25, −0.75] (which implies the Theorem 4 bound, slope
  ≤ −½) and a mean excess within [0.5, 3] × c/T at the three largest horizons.
* ``parameter_free`` (k = 3, Theorem 10, Remark 12) is pre-asymptotic on this grid: its coin-betting bets are
  scaled by a public worst-case gradient bound that is 20–40× β_T‖∇L(x₁)‖, so x_T stays near x₁ = 0 for
  T ≲ 10⁴ (excess ≈ L(0) − L(θ*) = 0.02) and then drops quickly (measured slope −0.84 … −0.85 over
  500 … 64 000, local slopes from −0.1 to −3; its excess is still ≈ 28 × c/T at the largest horizons and reaches
  ≈ 3 × c/T only around T = 1.3·10⁵). It is held to Remark 12's envelope
  ‖x* − x₁‖(G + DH)/√T (with constant 1) at every T and to slope ≤ −0.4.

The privacy term (Remark 5: √d D(G + DH) log T / (ρT)) is checked by calibrating ρ to a target ε at fixed T.

All data are synthetic and all generators seeded (``make_generator(seed, data_is_public=True)``).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy.optimize import minimize
from scipy.special import expit

from privfit.privacy import make_generator
from privfit.solvers import DPOTBResolved, PublicMetadata, get_solver

SOLVER = get_solver("dp_otb")

FloatArray = NDArray[np.float64]

DIMENSION = 3
RADIUS = 2.0
THETA_STAR: FloatArray = np.array([1.0, -0.6, 0.4]) / np.linalg.norm([1.0, -0.6, 0.4])  # ‖θ*‖ = 1 < R
HELD_OUT_ROWS = 200_000
HORIZONS = (500, 1000, 2000, 4000, 8000, 16000, 32000, 64000)
SEEDS = 24
NON_PRIVATE_RHO = 1e6  # σ_1 = 4(G + HD) sqrt(log₂ 2T) / ρ ≈ 3e-5: the noise is negligible
STRONG_CONVEXITY = 0.05  # λ = μ of the strongly convex learner
RATE_LEARNERS = ("ogd", "adagrad_norm", "adagrad_diagonal", "optimistic", "strongly_convex")


def sample_features(rng: np.random.Generator, n: int) -> FloatArray:
    """n points uniform in the unit ball of R^d (so ‖x‖ ≤ 1, the declared row-norm bound)."""
    X = rng.normal(size=(n, DIMENSION))
    X *= rng.uniform(size=(n, 1)) ** (1.0 / DIMENSION) / np.linalg.norm(X, axis=1, keepdims=True)
    return X


def training_set(T: int, seed: int) -> tuple[FloatArray, FloatArray]:
    """T fresh rows of the well-specified logistic model (±1 labels drawn with P[y = +1 | x] = σ(⟨θ*, x⟩))."""
    rng = np.random.default_rng([T, seed])
    X = sample_features(rng, T)
    y = np.where(rng.uniform(size=T) < expit(X @ THETA_STAR), 1.0, -1.0)
    return X, y


class PopulationRisk:
    """L(θ) + (λ/2)‖θ‖² on a held-out sample of x's, with the expectation over y | x taken exactly.

    softplus(−z) = softplus(z) − z gives p softplus(−z) + (1 − p) softplus(z) = softplus(z) − p z, so
    L(θ) = mean softplus(⟨θ, x⟩) − ⟨mean p(x) x, θ⟩.
    """

    def __init__(self, X: FloatArray, l2: float) -> None:
        self.X = X
        self.l2 = l2
        self.p = expit(X @ THETA_STAR)
        self.linear = self.X.T @ self.p / X.shape[0]
        self.minimiser = self._minimise()
        self.minimum = float(self(self.minimiser[None, :])[0])

    def __call__(self, thetas: FloatArray) -> FloatArray:
        """The objective at each row of ``thetas`` (m × d), vectorised over the m points."""
        Z = self.X @ thetas.T
        return np.logaddexp(0.0, Z).mean(axis=0) - thetas @ self.linear + 0.5 * self.l2 * np.sum(thetas**2, axis=1)

    def gradient(self, theta: FloatArray) -> FloatArray:
        return self.X.T @ (expit(self.X @ theta) - self.p) / self.X.shape[0] + self.l2 * theta

    def hessian(self, theta: FloatArray) -> FloatArray:
        s = expit(self.X @ theta)
        return (self.X * (s * (1.0 - s))[:, None]).T @ self.X / self.X.shape[0] + self.l2 * np.eye(DIMENSION)

    def _minimise(self) -> FloatArray:
        if self.l2 == 0.0:
            return THETA_STAR.copy()  # the gradient vanishes at θ* pointwise in x (checked in a test)
        result = minimize(
            lambda t: float(self(t[None, :])[0]), THETA_STAR, jac=self.gradient, hess=self.hessian,
            method="trust-exact", options={"gtol": 1e-13},
        )  # fmt: skip
        assert np.linalg.norm(self.gradient(result.x)) < 1e-12, result.message
        return result.x

    def statistical_constant(self) -> float:
        """c = tr(H⁻¹Σ)/2 at the minimiser: the empirical risk minimiser's excess is ≈ c/T (Hájek–Le Cam).

        Per-row gradient of the data term: (σ(z) − 1{y = +1}) x, so E[ggᵀ | x] = ((σ(z) − p)² + p(1 − p)) xxᵀ.
        """
        s = expit(self.X @ self.minimiser)
        n = self.X.shape[0]
        second_moment = (self.X * ((s - self.p) ** 2 + self.p * (1.0 - self.p))[:, None]).T @ self.X / n
        mean = self.X.T @ (s - self.p) / n
        covariance = second_moment - np.outer(mean, mean)
        return 0.5 * float(np.trace(np.linalg.solve(self.hessian(self.minimiser), covariance)))

    def excess(self, thetas: FloatArray) -> FloatArray:
        return self(thetas) - self.minimum


@pytest.fixture(scope="module")
def held_out() -> FloatArray:
    return sample_features(np.random.default_rng(20_221_022), HELD_OUT_ROWS)


@pytest.fixture(scope="module")
def risks(held_out: FloatArray) -> dict[float, PopulationRisk]:
    return {0.0: PopulationRisk(held_out, 0.0), STRONG_CONVEXITY: PopulationRisk(held_out, STRONG_CONVEXITY)}


def resolve(learner: str, T: int, *, l2: float = 0.0, target_epsilon: float | None = None) -> DPOTBResolved:
    meta = PublicMetadata(n=T, d=DIMENSION, row_norm_bound=1.0, label_bound=1.0)
    params: dict[str, object] = {
        "model": "logistic",
        "fit_intercept": False,
        "radius": RADIUS,
        "learner": learner,
        "l2": l2,
    }
    if target_epsilon is None:
        return SOLVER.resolve({**params, "rho": NON_PRIVATE_RHO}, meta)
    return SOLVER.resolve(params, meta, target_epsilon=target_epsilon, delta=1e-6)


def fitted(resolved: DPOTBResolved, seeds: range) -> FloatArray:
    """x_T of one fit per seed (fresh training set per seed; the fit's order and noise from the same seed)."""
    meta = PublicMetadata(n=resolved.n, d=DIMENSION, row_norm_bound=1.0, label_bound=1.0)
    thetas = np.empty((len(seeds), DIMENSION))
    for i, seed in enumerate(seeds):
        X, y = training_set(resolved.n, seed)
        result = SOLVER.fit(X, y, meta, resolved, make_generator(seed, data_is_public=True))
        thetas[i] = result.coefficients
    return thetas


def mean_excess_curve(learner: str, risk: PopulationRisk) -> FloatArray:
    """Mean excess risk over ``SEEDS`` runs at each horizon of ``HORIZONS`` (non-private regime)."""
    return np.array(
        [float(np.mean(risk.excess(fitted(resolve(learner, T, l2=risk.l2), range(SEEDS))))) for T in HORIZONS]
    )


def log_log_slope(curve: FloatArray) -> float:
    return float(np.polyfit(np.log(HORIZONS), np.log(curve), 1)[0])


def test_held_out_objective_has_the_intended_minimisers(risks: dict[float, PopulationRisk]) -> None:
    unregularised, regularised = risks[0.0], risks[STRONG_CONVEXITY]
    np.testing.assert_allclose(unregularised.gradient(THETA_STAR), 0.0, atol=1e-15)  # θ* minimises exactly
    assert np.linalg.norm(THETA_STAR) == pytest.approx(1.0) and np.linalg.norm(regularised.minimiser) < RADIUS
    assert unregularised.statistical_constant() == pytest.approx(DIMENSION / 2, rel=1e-9)  # Σ = H: c = d/2
    # strict convexity on W: the excess of the start x₁ = 0 is far above the 1e-5 … 1e-3 excesses measured
    assert unregularised.excess(np.zeros((1, DIMENSION)))[0] > 0.01


@pytest.mark.parametrize("learner", RATE_LEARNERS)
def test_non_private_excess_risk_decays_at_the_statistical_rate(
    learner: str, risks: dict[float, PopulationRisk]
) -> None:
    """Slope of log(mean excess) vs log T in [−1.25, −0.75], and excess ≈ c/T at the largest horizons.

    Theorem 4 / Remark 5 (Theorem 6 for ``optimistic``) bound the non-private excess by O(1/√T); on this locally
    strongly convex instance the learners reach the statistical rate c/T instead (module docstring), and
    Remark 9 gives O(1/(μT)) for ``strongly_convex`` (μ = λ). The window excludes both a 1/√T-or-slower solver
    (slope ≥ −0.75) and an impossibly fast one; the measured slopes are −0.93 … −1.05.
    """
    risk = risks[STRONG_CONVEXITY if learner == "strongly_convex" else 0.0]
    curve = mean_excess_curve(learner, risk)
    slope = log_log_slope(curve)
    assert -1.25 <= slope <= -0.75, (slope, curve)
    # Efficiency (measured 1.2 … 1.9 on the last three horizons): within a small factor of c/T. An excess far
    # below c/T would mean the test measures the wrong thing; far above, a regression in the learner or loop.
    efficiency = curve[-3:] * np.array(HORIZONS[-3:]) / risk.statistical_constant()
    assert 0.5 <= float(np.mean(efficiency)) <= 3.0, (efficiency, curve)


def test_parameter_free_stays_within_remark_12(risks: dict[float, PopulationRisk]) -> None:
    """Remark 12: L(x_T) − L(x*) = Õ(‖x* − x₁‖(G + DH)/√T) (non-private), asserted with constant 1 at every T.

    On this grid the learner is pre-asymptotic (module docstring): flat near x₁ = 0, then a fast drop, so only
    the envelope and a slope at least as steep as the bound's (−½, with 0.1 of slack) are asserted; the measured
    ratio to the envelope peaks at 0.38–0.39 and the slope is −0.84 … −0.85.
    """
    risk = risks[0.0]
    resolved = resolve("parameter_free", HORIZONS[0])
    assert resolved.k == 3.0
    envelope = (
        np.linalg.norm(THETA_STAR)  # ‖x* − x₁‖ with x₁ = 0
        * (resolved.lipschitz + resolved.smoothness * resolved.diameter)
        / np.sqrt(np.array(HORIZONS, dtype=np.float64))
    )
    curve = mean_excess_curve("parameter_free", risk)
    assert np.all(curve <= envelope), curve / envelope
    assert log_log_slope(curve) <= -0.4, curve
    assert curve[-1] < 0.1 * curve[0]  # it does leave x₁ within the grid


PRIVACY_HORIZON = 20_000
PRIVACY_SEEDS = 48
EPSILONS = (0.5, 2.0, 8.0, 32.0)


def test_privacy_term_shrinks_as_epsilon_grows(risks: dict[float, PopulationRisk]) -> None:
    """adagrad_norm at T = 20 000: the mean excess decreases along ε = 0.5, 2, 8, 32 (δ = 1e-6).

    Remark 5's privacy term √d D(G + DH) log T/(ρT) falls as the calibrated ρ grows with ε. The runs share their
    training sets and generator seeds across ε (common random numbers), so consecutive means are a paired
    comparison: the measured paired differences are 4–10 standard errors, and no tolerance is needed. At ε = 32
    the privacy term no longer dominates the sampling error (measured ratio of the mean excess to the non-private
    run 1.2 … 1.5 over four disjoint seed sets, against 50 … 83 at ε = 0.5).
    """
    risk = risks[0.0]
    seeds = range(PRIVACY_SEEDS)
    means = []
    for epsilon in EPSILONS:
        resolved = resolve("adagrad_norm", PRIVACY_HORIZON, target_epsilon=epsilon)
        assert resolved.epsilon is not None and resolved.epsilon <= epsilon
        means.append(float(np.mean(risk.excess(fitted(resolved, seeds)))))
    non_private = float(np.mean(risk.excess(fitted(resolve("adagrad_norm", PRIVACY_HORIZON), seeds))))
    assert all(later < earlier for earlier, later in itertools.pairwise(means)), means
    assert means[-1] <= 2.0 * non_private, (means, non_private)
    assert means[0] > 10.0 * non_private  # at ε = 0.5 the privacy term dominates: the comparison is not vacuous
