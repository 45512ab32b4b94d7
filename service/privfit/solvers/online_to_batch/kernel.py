r"""The compiled one-pass loop of DP online-to-batch (Zhang, Tran & Cutkosky 2022, Algorithm 1).

:func:`online_to_batch_block` runs rounds ``t_start … t_stop − 1`` (1-based t) of Algorithm 1 on GLM rows,
updating its state arrays in place so the caller can run the pass in blocks (fresh noise per block, progress
and cancellation between blocks). Round t, with β_t = t^k, β_0 = 0 and row z_t = (a_t, y_t) the t-th row of the
secret order, clipped to the public bounds:

    x_t = x_{t−1} + (β_t / β_{1:t}) (w_t − x_{t−1})                       (= (β_{1:t−1}x_{t−1} + β_t w_t)/β_{1:t})
    δ_t = β_t ∇ℓ(x_t, z_t) − β_{t−1} ∇ℓ(x_{t−1}, z_t)                         (Algorithm 1, line 5)
    g_t = g_{t−1} + δ_t,   γ_t = NOISE(t),   ḡ_t = g_t + γ_t                   (line 6)
    w_{t+1} = learner(ḡ_t)                                                   (line 7)

For a GLM ℓ(x, z) = φ(⟨x, a⟩, y) + (λ/2)‖x‖², ∇ℓ(x, z) = φ'(⟨x, a⟩, y) a + λ x, so δ_t costs two dot
products and two axpys. The node error E_t uses the caller's standard normals R̃_t, one vector per round
(:mod:`privfit.solvers.online_to_batch.tree_aggregation`, eq. (3)–(5)): E_t = σ_1 t^{k−1} R̃_t for the plain
estimator, Honaker's minimum-variance node estimate (§B there, O(p) amortised per round) otherwise. Every w_t
and x_t is (re-)projected onto the public ball as a backstop for the D bound the noise relies on (a no-op up to
rounding: learners stay in W and x_t is a convex combination of points of W). No per-round allocation.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from privfit.solvers.compiled_losses import glm_slope
from privfit.solvers.geometry import UNIT_ROUNDOFF
from privfit.solvers.online_to_batch.learners import learner_update, project_ball
from privfit.solvers.online_to_batch.tree_aggregation import honaker_noise_step, tree_noise_step

__all__ = ["online_to_batch_block"]


@numba.njit(cache=True, nogil=True)
def online_to_batch_block(
    X: np.ndarray,
    y: np.ndarray,
    order: np.ndarray,
    t_start: int,
    t_stop: int,
    normals: np.ndarray,
    sigma_1: float,
    k: float,
    estimator: int,
    loss_kind: int,
    loss_parameter: float,
    l2: float,
    intercept: bool,
    row_bound: float,
    label_bound: float,
    radius: float,
    learner_kind: int,
    w: np.ndarray,
    x: np.ndarray,
    g: np.ndarray,
    prefix: np.ndarray,
    left: np.ndarray,
    left_variance: np.ndarray,
    beta_total: np.ndarray,
    vectors: np.ndarray,
    scalars: np.ndarray,
    config: np.ndarray,
    scratch: np.ndarray,
) -> None:
    """Rounds ``t_start ≤ t < t_stop`` of Algorithm 1 (see the module docstring); state updated in place.

    Args:
        X, y: the private rows (n × d, n); ``order[t − 1]`` is the row used in round t (a secret permutation).
        normals: standard normals R̃_t for the block, shape (t_stop − t_start, p).
        sigma_1: σ_1 of eq. (4); round t's node noise has standard deviation σ_1 t^{k−1}.
        estimator: 0 = plain (E_t = R_t), 1 = Honaker (``ESTIMATORS`` of the tree module).
        intercept: p = d + 1 and the design row is (a, 1).
        row_bound, label_bound: public clipping bounds of the design row (with intercept) and of |y|.
        w: w_t of the first round on entry, w_{t_stop} on exit; x, g: x_{t−1} and g_{t−1} (same convention).
        prefix: tree prefix sums (levels + 1, p); beta_total: [β_{1:t−1}].
        left, left_variance: Honaker's stored left-children errors (levels + 1, p) and variances (levels + 1).
        vectors, scalars, config: the learner's state (:class:`~privfit.solvers.online_to_batch.learners.LearnerState`).
        scratch: (3, p) work space.
    """
    d = X.shape[1]
    p = w.shape[0]
    x_prev, gamma, gbar = scratch[0], scratch[1], scratch[2]
    safety = 1.0 - 2.0 * (p + 2) * UNIT_ROUNDOFF  # geometry._safety_factor: exact norm of a clipped row ≤ bound
    for t in range(t_start, t_stop):
        project_ball(w, radius)
        beta_t = float(t) ** k
        beta_prev = float(t - 1) ** k
        beta_total[0] += beta_t
        ratio = beta_t / beta_total[0]
        for j in range(p):
            x_prev[j] = x[j]
            x[j] += ratio * (w[j] - x[j])
        project_ball(x, radius)
        # the row of round t, clipped to the public bounds (rows within them are unchanged)
        row = X[order[t - 1]]
        norm_sq = 1.0 if intercept else 0.0
        for j in range(d):
            norm_sq += row[j] * row[j]
        scale = 1.0
        if norm_sq > row_bound * row_bound:
            scale = row_bound * safety / math.sqrt(norm_sq)
        label = min(max(y[order[t - 1]], -label_bound), label_bound)
        z_now = 0.0
        z_before = 0.0
        for j in range(d):
            z_now += x[j] * row[j]
            z_before += x_prev[j] * row[j]
        if intercept:
            z_now += float(x[d])
            z_before += float(x_prev[d])
        z_now *= scale
        z_before *= scale
        coefficient = (
            beta_t * glm_slope(loss_kind, z_now, label, loss_parameter)
            - beta_prev * glm_slope(loss_kind, z_before, label, loss_parameter)
        ) * scale
        for j in range(d):
            g[j] += coefficient * row[j]
        if intercept:
            g[d] += coefficient
        if l2 > 0.0:
            for j in range(p):
                g[j] += l2 * (beta_t * x[j] - beta_prev * x_prev[j])
        sigma_t = sigma_1 * float(t) ** (k - 1.0)
        noise = normals[t - t_start]
        if estimator == 1:
            honaker_noise_step(left, left_variance, t, sigma_t, noise, gbar)  # E_t of Honaker's estimate
        else:
            for j in range(p):
                gbar[j] = sigma_t * noise[j]  # E_t = R_t
        tree_noise_step(prefix, t, gbar, gamma)  # γ_t = Σ_{s∈I_t} E_s
        for j in range(p):
            gbar[j] = g[j] + gamma[j]
        learner_update(learner_kind, t, beta_t, gbar, x, w, vectors, scalars, config)
