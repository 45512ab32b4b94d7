r"""Online learners for DP online-to-batch (Zhang, Tran & Cutkosky 2022): one interface, compiled updates.

Every learner plays points w_t of the public ball W = {w : ‖w‖₂ ≤ R} (diameter D = 2R) and, after round t,
receives the PRIVATISED linear loss ℓ_t(w) = ⟨ḡ_t, w⟩ with ḡ_t = g_t + γ_t (Algorithm 1, line 7). What a
learner does with ḡ_t is post-processing: it cannot affect privacy, except through the one fact the noise
calibration relies on — every PLAYED w_t has ‖w_t − x_{t−1}‖ ≤ r, the public step bound (eq. (4) of the tree
module, r ≤ D): the compiled loop re-projects each w_t onto W as a backstop and then onto the ball B(x_{t−1}, r)
(:func:`bound_step`; a learner whose state is its played point continues from the projected one).

A learner is a small Python class (:class:`OnlineLearner`) that builds its state from public quantities
(:class:`LearnerContext`) and names a compiled update; :func:`learner_update` dispatches on ``kind`` so that
the whole one-pass loop is one compiled function (numba), cached on disk. The update signature is

    update(t, β_t, ḡ_t, x_t, w, vectors, scalars, config)   # w: in = w_t, out = w_{t+1}

Learners (D = 2R; ``lr`` a user scale, default 1):

* ``ogd`` — projected online gradient descent, w_{t+1} = Π_W(w_t − η_t ḡ_t), with the public schedule
  η_t = lr·D / sqrt(2 Σ_{i≤t} b_i²), b_t² = 3t^{2k}(G² + (4(k+1)²/λ)((σ_G + Dσ_H)²/t + 2V(G+DH)² log₂²(2T)/(ρ²t²)))
  the bound on E‖ḡ_t‖² of Theorem 4 (λ = 2 for ‖·‖₂², σ_G = 2G, σ_H = 2H, V = d for N(0, I)).
* ``adagrad_norm`` — the same step with the observed η_t = lr·D / sqrt(2 Σ_{i≤t} ‖ḡ_i‖²) (Streeter & McMahan
  2010; regret ≤ √2 D sqrt(Σ‖ḡ_t‖²)).
* ``adagrad_diagonal`` — per-coordinate η_{t,j} = lr·D / sqrt(2 Σ_{i≤t} ḡ_{i,j}²) and the projection onto W
  in the learner's metric diag(sqrt(Σ ḡ²)) (Duchi, Hazan & Singer 2011, eq. (23); D_∞ of the ball is D).
* ``optimistic`` — optimistic OGD (Rakhlin & Sridharan 2013; Section 3) with hint ĝ_{t+1} = ḡ_t
  (= g_t + γ_t, Theorem 6): ŵ_{t+1} = Π_W(ŵ_t − η_t ḡ_t), w_{t+1} = Π_W(ŵ_{t+1} − η_t ḡ_t), η_t = lr·D /
  sqrt(2 Σ_{i≤t} ‖ḡ_i − ĝ_i‖²); regret O(D sqrt(Σ‖ḡ_t − ĝ_t‖²)), eq. (8).
* ``strongly_convex`` — Section 4: OGD on ℓ̄_t(w) = ⟨ḡ_t, w⟩ + (β_t μ/4)‖w − x_t‖² (Lemma 7), which is
  (β_t μ/2)-strongly convex, with η_t = lr / Σ_{i≤t} β_i μ/2 (Remark 9); μ is the L2 strength.
* ``parameter_free`` — Section 5: Krichevsky–Trofimov coin betting in Hilbert space (Orabona & Pál 2016,
  Alg. 2) centred at the user's initial point x₁, on the regularised losses ℓ̄_t(w) = ℓ_t(w) + ξ_t‖w − x₁‖ +
  ν_t‖w − x₁‖² with ξ_t, ν_t of Theorem 10 (k = 3), constrained to W by the reduction of Cutkosky &
  Orabona (2018, Thm. 3): play w_t = Π_W(x₁ + v_t) and feed g̃_t = ½(ĝ_t + ‖ĝ_t‖ s_t), s_t the unit
  normal of W at the unconstrained point (0 inside W). Coins are −g̃_t / L with L a public bound on ‖ĝ_t‖
  (:meth:`ParameterFree.gradient_bound`; a larger ĝ_t is clipped to L, which is post-processing).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numba
import numpy as np
from numpy.typing import NDArray

from privfit.solvers.geometry import UNIT_ROUNDOFF

__all__ = [
    "LEARNERS",
    "AdaGradDiagonal",
    "AdaGradNorm",
    "LearnerContext",
    "LearnerState",
    "OnlineGradientDescent",
    "OnlineLearner",
    "OptimisticOGD",
    "ParameterFree",
    "StronglyConvexOGD",
    "get_learner",
    "learner_update",
    "project_ball",
]

FloatArray = NDArray[np.float64]

_SHRINK = 1.0 - 2.0**-50


@dataclass(frozen=True)
class LearnerContext:
    """The public quantities a learner may use (no row, no noisy value).

    Attributes:
        dimension: p, the length of w (features plus intercept).
        radius: R of the ball W; the diameter is D = 2R.
        horizon: T, the number of rounds (rows).
        k: exponent of the weights β_t = t^k.
        lipschitz: G of the (regularised) loss on W.
        smoothness: H of the (regularised) loss.
        rho: the privacy parameter ρ of eq. (6).
        strong_convexity: μ of the population loss (the L2 strength; 0 if none).
        learning_rate: user scale of the learner's step (1 = the theory's choice).
        initial_point: x₁, the first point played (inside W).
        regularization_scale: multiplier of ξ_t and ν_t (parameter-free only; 1 = Theorem 10 with C = 1).
        confidence: failure probability δ' inside Φ of Theorem 10 (parameter-free only).
    """

    dimension: int
    radius: float
    horizon: int
    k: float
    lipschitz: float
    smoothness: float
    rho: float
    strong_convexity: float
    learning_rate: float
    initial_point: FloatArray
    regularization_scale: float = 1.0
    confidence: float = 0.05

    @property
    def diameter(self) -> float:
        return 2.0 * self.radius

    @property
    def adaptive_scale(self) -> float:
        """lr · D / √2: the step per unit of 1/sqrt(Σ squared gradients) of the AdaGrad-type learners."""
        return self.learning_rate * self.diameter / math.sqrt(2.0)


@dataclass
class LearnerState:
    """Mutable state of a learner for the compiled loop: vectors (m × p), scalars and a constant config."""

    vectors: FloatArray
    scalars: FloatArray
    config: FloatArray


class OnlineLearner(ABC):
    """A learner: its public name, its compiled-update ``kind`` and how its state is built."""

    name: ClassVar[str]
    kind: ClassVar[int]
    description: ClassVar[str]
    #: the k of β_t = t^k the learner's analysis assumes (None: any k ≥ 1, default 1)
    required_k: ClassVar[float | None] = None
    requires_strong_convexity: ClassVar[bool] = False

    @abstractmethod
    def init_state(self, context: LearnerContext) -> LearnerState:
        """State before round 1 (w_1 = x₁ is set by the caller)."""

    @staticmethod
    def _state(p: int, vectors: int, scalars: int, config: list[float]) -> LearnerState:
        return LearnerState(
            np.zeros((max(vectors, 1), p), dtype=np.float64),
            np.zeros(max(scalars, 1), dtype=np.float64),
            np.asarray(config, dtype=np.float64),
        )


class OnlineGradientDescent(OnlineLearner):
    name = "ogd"
    kind = 0
    description = "projected online gradient descent with the public step schedule of Theorem 4's gradient bound"

    def init_state(self, context: LearnerContext) -> LearnerState:
        c = context
        k, D, G, H = c.k, c.diameter, c.lipschitz, c.smoothness
        log_term = math.log2(2.0 * c.horizon)
        # b_t² = 3 t^{2k} (c0 + c1/t + c2/t²): Theorem 4, second part, with λ = 2, σ_G = 2G, σ_H = 2H, V = p.
        c0 = G * G
        c1 = 2.0 * (k + 1.0) ** 2 * (2.0 * G + 2.0 * D * H) ** 2
        c2 = 2.0 * (k + 1.0) ** 2 * 2.0 * c.dimension * (G + D * H) ** 2 * log_term**2 / c.rho**2
        return self._state(c.dimension, 0, 1, [c.adaptive_scale, c0, c1, c2, k, c.radius])


class AdaGradNorm(OnlineLearner):
    name = "adagrad_norm"
    kind = 1
    description = "projected gradient descent with the AdaGrad-norm step D / sqrt(2 Σ‖ḡ‖²)"

    def init_state(self, context: LearnerContext) -> LearnerState:
        c = context
        return self._state(c.dimension, 0, 1, [c.adaptive_scale, c.radius])


class AdaGradDiagonal(OnlineLearner):
    name = "adagrad_diagonal"
    kind = 2
    description = "diagonal AdaGrad with the projection onto the ball in the learner's metric"

    def init_state(self, context: LearnerContext) -> LearnerState:
        c = context
        # vectors[0] = Σ ḡ² per coordinate, vectors[1] = scratch for the metric
        return self._state(c.dimension, 2, 0, [c.adaptive_scale, c.radius])


class OptimisticOGD(OnlineLearner):
    name = "optimistic"
    kind = 3
    description = "optimistic OGD with hint ḡ_{t−1} = g_{t−1} + γ_{t−1} and an adaptive step (Section 3)"

    def init_state(self, context: LearnerContext) -> LearnerState:
        c = context
        state = self._state(c.dimension, 2, 1, [c.adaptive_scale, c.radius])
        state.vectors[0] = c.initial_point  # ŵ_1 = x₁; the first hint is ḡ_0 = 0
        return state


class StronglyConvexOGD(OnlineLearner):
    name = "strongly_convex"
    kind = 4
    description = "OGD on the regularised losses ⟨ḡ_t, w⟩ + β_t μ/4 ‖w − x_t‖² of Section 4 (μ = l2)"
    requires_strong_convexity = True

    def init_state(self, context: LearnerContext) -> LearnerState:
        c = context
        if not c.strong_convexity > 0.0:
            raise ValueError("the strongly convex learner needs l2 > 0 (μ is the L2 strength)")
        return self._state(c.dimension, 0, 1, [c.learning_rate, c.strong_convexity, c.radius])


class ParameterFree(OnlineLearner):
    name = "parameter_free"
    kind = 5
    description = "KT coin betting centred at the initial point, on the regularised losses of Theorem 10 (k = 3)"
    required_k = 3.0

    @staticmethod
    def regularizer_coefficients(context: LearnerContext) -> tuple[float, float, float]:
        """(a, b, c) with ξ_t = a t^{5/2} + b t² and ν_t = c t^{5/2} (Theorem 10, C = 1, scaled)."""
        c = context
        G, H, D, T, p = c.lipschitz, c.smoothness, c.diameter, c.horizon, c.dimension
        A = 8.0 * math.sqrt(2.0)
        A_prime = 8.0 * math.sqrt(p)  # σ_D = 1 for N(0, I)
        kappa = 1.0 + D * H / G
        phi = math.sqrt(math.log(20.0 * p * T * math.log(2.0 * kappa * T) / c.confidence))
        s = c.regularization_scale
        return (
            s * A * G * phi,
            s * A_prime * (G + D * H) * phi * math.log2(2.0 * T) / c.rho,
            s * 28.0 * A * H * phi,
        )

    @classmethod
    def gradient_bound(cls, context: LearnerContext) -> float:
        """L, the public scale of the coins: a bound on ‖ĝ_T‖ (every term is non-decreasing in t).

        ‖ḡ_T‖ ≤ ‖β_T ∇ℒ(x_T)‖ + ‖g_T − β_T ∇ℒ(x_T)‖ + ‖γ_T‖ with the first ≤ G T^k, the second at its root mean
        square 2(k+1)(σ_G + Dσ_H) T^{k−1/2} / √λ (eq. (4), σ_G = 2G, σ_H = 2H, λ = 2) and the Gaussian γ_T at
        its 1 − δ' quantile σ_T sqrt(log₂(2T)) (√p + sqrt(2 log(1/δ'))); then the regulariser's ξ_T + 2ν_T D.
        Theorem 11 bounds the same terms with its unspecified universal constant; a ĝ_t above L is clipped.
        """
        c = context
        G, H, D, T, p, k = c.lipschitz, c.smoothness, c.diameter, float(c.horizon), c.dimension, c.k
        log_term = math.log2(2.0 * T)
        sigma_T = 2.0 * (k + 1.0) * (G + H * D) * math.sqrt(log_term) * T ** (k - 1.0) / c.rho
        noise = sigma_T * math.sqrt(log_term) * (math.sqrt(p) + math.sqrt(2.0 * math.log(1.0 / c.confidence)))
        sampling = 2.0 * (k + 1.0) * (2.0 * G + 2.0 * D * H) * T ** (k - 0.5) / math.sqrt(2.0)
        a, b, cc = cls.regularizer_coefficients(context)
        return float(G * T**k + sampling + noise + a * T**2.5 + b * T**2 + 2.0 * cc * T**2.5 * D)

    def init_state(self, context: LearnerContext) -> LearnerState:
        c = context
        a, b, cc = self.regularizer_coefficients(c)
        # ε₀ in parameter units. KT's regret is ε₀ L + ‖u‖ L sqrt(T log(1 + ‖u‖T/ε₀)); after division by
        # β_{1:T} ≈ T⁴/4 (with L ≈ c·G T³) the first term is ≈ 4c ε₀ G / T, so ε₀ = R sqrt(T) costs no more than
        # the rate's R G / sqrt(T), while letting the bets reach the scale of W within the pass.
        initial_wealth = c.learning_rate * c.radius * math.sqrt(c.horizon)
        state = self._state(c.dimension, 4, 1, [self.gradient_bound(c), a, b, cc, c.radius])
        state.scalars[0] = initial_wealth
        # vectors: [0] v_t (offset from the centre), [1] Σ coins, [2] the centre x₁, [3] scratch for ĝ_t
        state.vectors[2] = c.initial_point
        return state


LEARNERS: dict[str, OnlineLearner] = {
    learner.name: learner
    for learner in (
        OnlineGradientDescent(),
        AdaGradNorm(),
        AdaGradDiagonal(),
        OptimisticOGD(),
        StronglyConvexOGD(),
        ParameterFree(),
    )
}


def get_learner(name: str) -> OnlineLearner:
    """The learner called ``name`` (KeyError otherwise)."""
    return LEARNERS[name]


# ---------------------------------------------------------------------------------------------------------
# compiled updates
# ---------------------------------------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def project_ball(v: np.ndarray, radius: float) -> None:
    """In place: v ← Π_{‖·‖ ≤ R}(v), rounded so the exact norm is ≤ R (as :func:`geometry.project_l2_ball`)."""
    total = 0.0
    for j in range(v.shape[0]):
        total += v[j] * v[j]
    norm = math.sqrt(total)
    if norm <= radius:
        return
    scale = radius * (1.0 - 2.0 * (v.shape[0] + 2) * UNIT_ROUNDOFF) / norm
    for j in range(v.shape[0]):
        v[j] *= scale
    for _ in range(64):
        total = 0.0
        for j in range(v.shape[0]):
            total += v[j] * v[j]
        if math.sqrt(total) <= radius:
            return
        for j in range(v.shape[0]):
            v[j] *= _SHRINK


@numba.njit(cache=True, nogil=True)
def bound_step(w: np.ndarray, centre: np.ndarray, bound: float) -> None:
    """In place: w ← centre + Π_{‖·‖ ≤ bound}(w − centre), the nearest point to w in the ball B(centre, bound),
    rounded so that the computed ‖w − centre‖ is ≤ bound: the step bound (A2) of the tree module's §A′ (the loop
    calls it with centre = x_{t−1}, a function of the past releases only). A no-op when w is within the bound."""
    total = 0.0
    for j in range(w.shape[0]):
        total += (w[j] - centre[j]) ** 2
    norm = math.sqrt(total)
    if norm <= bound:
        return
    scale = bound * (1.0 - 4.0 * (w.shape[0] + 2) * UNIT_ROUNDOFF) / norm
    for j in range(w.shape[0]):
        w[j] = centre[j] + scale * (w[j] - centre[j])
    for _ in range(64):
        total = 0.0
        for j in range(w.shape[0]):
            total += (w[j] - centre[j]) ** 2
        if math.sqrt(total) <= bound:
            return
        for j in range(w.shape[0]):
            w[j] = centre[j] + _SHRINK * (w[j] - centre[j])


@numba.njit(cache=True, nogil=True)
def _norm_sq(v: np.ndarray) -> float:
    total = 0.0
    for j in range(v.shape[0]):
        total += v[j] * v[j]
    return total


@numba.njit(cache=True, nogil=True)
def _gradient_step(w: np.ndarray, gbar: np.ndarray, eta: float, radius: float) -> None:
    for j in range(w.shape[0]):
        w[j] -= eta * gbar[j]
    project_ball(w, radius)


@numba.njit(cache=True, nogil=True)
def _ogd(t: int, gbar: np.ndarray, w: np.ndarray, scalars: np.ndarray, config: np.ndarray) -> None:
    scale, c0, c1, c2, k, radius = config[0], config[1], config[2], config[3], config[4], config[5]
    tf = float(t)
    scalars[0] += 3.0 * tf ** (2.0 * k) * (c0 + c1 / tf + c2 / (tf * tf))
    _gradient_step(w, gbar, scale / math.sqrt(scalars[0]), radius)


@numba.njit(cache=True, nogil=True)
def _adagrad_norm(gbar: np.ndarray, w: np.ndarray, scalars: np.ndarray, config: np.ndarray) -> None:
    scalars[0] += _norm_sq(gbar)
    if scalars[0] > 0.0:
        _gradient_step(w, gbar, config[0] / math.sqrt(scalars[0]), config[1])


@numba.njit(cache=True, nogil=True)
def _metric_projection(w: np.ndarray, metric: np.ndarray, radius: float) -> None:
    """In place: argmin_{‖v‖ ≤ R} Σ a_j (v_j − w_j)²: v_j = a_j w_j / (a_j + λ), λ ≥ 0 by Newton's method."""
    if _norm_sq(w) <= radius * radius:
        return
    lam = 0.0
    for _ in range(100):
        f = -radius * radius
        df = 0.0
        for j in range(w.shape[0]):
            ratio = metric[j] / (metric[j] + lam)
            f += (ratio * w[j]) ** 2
            df -= 2.0 * (ratio * w[j]) ** 2 / (metric[j] + lam)
        if f <= 1e-12 * radius * radius or df == 0.0:
            break
        lam -= f / df  # f is convex and decreasing in λ: Newton from the left never overshoots
    for j in range(w.shape[0]):
        w[j] *= metric[j] / (metric[j] + lam)
    project_ball(w, radius)  # absorbs the Newton tolerance and rounding


@numba.njit(cache=True, nogil=True)
def _adagrad_diagonal(gbar: np.ndarray, w: np.ndarray, vectors: np.ndarray, config: np.ndarray) -> None:
    scale, radius = config[0], config[1]
    sums = vectors[0]
    largest = 0.0
    for j in range(w.shape[0]):
        sums[j] += gbar[j] * gbar[j]
        largest = max(largest, sums[j])
    if largest == 0.0:
        return
    floor = 1e-24 * largest  # coordinates that never saw a gradient keep a tiny metric weight (no step)
    metric = vectors[1]
    for j in range(w.shape[0]):
        metric[j] = math.sqrt(max(sums[j], floor))
        w[j] -= scale * gbar[j] / metric[j]
    _metric_projection(w, metric, radius)


@numba.njit(cache=True, nogil=True)
def _optimistic(gbar: np.ndarray, w: np.ndarray, vectors: np.ndarray, scalars: np.ndarray, config: np.ndarray) -> None:
    scale, radius = config[0], config[1]
    auxiliary, hint = vectors[0], vectors[1]
    error = 0.0
    for j in range(w.shape[0]):
        error += (gbar[j] - hint[j]) ** 2
    scalars[0] += error
    if scalars[0] == 0.0:
        return
    eta = scale / math.sqrt(scalars[0])
    _gradient_step(auxiliary, gbar, eta, radius)
    for j in range(w.shape[0]):
        hint[j] = gbar[j]
        w[j] = auxiliary[j] - eta * gbar[j]
    project_ball(w, radius)


@numba.njit(cache=True, nogil=True)
def _strongly_convex(
    beta_t: float, gbar: np.ndarray, x_t: np.ndarray, w: np.ndarray, scalars: np.ndarray, config: np.ndarray
) -> None:
    scale, mu, radius = config[0], config[1], config[2]
    curvature = beta_t * mu / 2.0  # ℓ̄_t is (β_t μ / 2)-strongly convex
    scalars[0] += curvature
    eta = scale / scalars[0]
    for j in range(w.shape[0]):
        w[j] -= eta * (gbar[j] + curvature * (w[j] - x_t[j]))  # ∇ℓ̄_t(w_t) = ḡ_t + (β_t μ / 2)(w_t − x_t)
    project_ball(w, radius)


@numba.njit(cache=True, nogil=True)
def _parameter_free(
    t: int, gbar: np.ndarray, w: np.ndarray, vectors: np.ndarray, scalars: np.ndarray, config: np.ndarray
) -> None:
    bound, xi_a, xi_b, nu_a, radius = config[0], config[1], config[2], config[3], config[4]
    offset, coins, centre, grad = vectors[0], vectors[1], vectors[2], vectors[3]
    p = w.shape[0]
    tf = float(t)
    xi = xi_a * tf**2.5 + xi_b * tf * tf
    nu = nu_a * tf**2.5
    # ĝ_t ∈ ∂ℓ̄_t(w_t) = ḡ_t + ξ_t u + 2ν_t (w_t − x₁), u ∈ ∂‖w_t − x₁‖
    distance = 0.0
    for j in range(p):
        distance += (w[j] - centre[j]) ** 2
    distance = math.sqrt(distance)
    for j in range(p):
        shift = w[j] - centre[j]
        grad[j] = gbar[j] + 2.0 * nu * shift + (xi * shift / distance if distance > 0.0 else 0.0)
    grad_norm = math.sqrt(_norm_sq(grad))
    if grad_norm > bound:  # post-processing: keeps the coins in the unit ball as KT requires
        for j in range(p):
            grad[j] *= bound / grad_norm
        grad_norm = bound
    # Cutkosky–Orabona surrogate: g̃ = (ĝ + ‖ĝ‖ s) / 2, s the unit normal at the unconstrained point if outside W
    outside = 0.0
    for j in range(p):
        outside += (centre[j] + offset[j] - w[j]) ** 2
    outside = math.sqrt(outside)
    reward = 0.0
    for j in range(p):
        normal = (centre[j] + offset[j] - w[j]) / outside if outside > 0.0 else 0.0
        coin = -0.5 * (grad[j] + grad_norm * normal) / bound
        reward += coin * offset[j]
        coins[j] += coin
    scalars[0] += reward  # wealth_t = wealth_{t−1} + ⟨c_t, v_t⟩ (> 0: KT bets a fraction < 1 of it)
    for j in range(p):
        offset[j] = coins[j] / (tf + 1.0) * scalars[0]
        w[j] = centre[j] + offset[j]
    project_ball(w, radius)


@numba.njit(cache=True, nogil=True)
def learner_update(
    kind: int,
    t: int,
    beta_t: float,
    gbar: np.ndarray,
    x_t: np.ndarray,
    w: np.ndarray,
    vectors: np.ndarray,
    scalars: np.ndarray,
    config: np.ndarray,
) -> None:
    """Round t of the learner ``kind``: ``w`` holds w_t on entry and w_{t+1} ∈ W on exit."""
    if kind == 0:
        _ogd(t, gbar, w, scalars, config)
    elif kind == 1:
        _adagrad_norm(gbar, w, scalars, config)
    elif kind == 2:
        _adagrad_diagonal(gbar, w, vectors, config)
    elif kind == 3:
        _optimistic(gbar, w, vectors, scalars, config)
    elif kind == 4:
        _strongly_convex(beta_t, gbar, x_t, w, scalars, config)
    else:
        _parameter_free(t, gbar, w, vectors, scalars, config)
