r"""The compiled one-pass loop of DP online-to-batch (Zhang, Tran & Cutkosky 2022, Algorithm 1).

:func:`online_to_batch_block` runs rounds ``t_start … t_stop − 1`` (1-based t) of Algorithm 1 on GLM rows,
updating its state arrays in place so the caller can run the pass in blocks (fresh noise per block, progress
and cancellation between blocks). Round t, with β_t = t^k, β_0 = 0 and row z_t = (a_t, y_t) the t-th row of the
secret order, with the declared bounds enforced (the fit passes the rows as given: the loop maps a non-finite
entry to 0 and clips the features to B_x and the label to [−B_y, B_y], as ``enforce_declared_bounds`` does,
without copying X), and w_t the learner's point projected onto the ball of the public radius r (the step bound)
around x_{t−1} (tree module §A′):

    x_t = x_{t−1} + (β_t / β_{1:t}) (w_t − x_{t−1})                       (= (β_{1:t−1}x_{t−1} + β_t w_t)/β_{1:t})
    δ_t = β_t ∇ℓ(x_t, z_t) − β_{t−1} ∇ℓ(x_{t−1}, z_t)                         (Algorithm 1, line 5)
    g_t = g_{t−1} + δ_t,   γ_t = NOISE(t),   ḡ_t = g_t + γ_t                   (line 6)
    w_{t+1} = learner(ḡ_t)                                                   (line 7)

For a GLM ℓ(x, z) = φ(⟨x, a⟩, y) + (λ/2)‖x‖², ∇ℓ(x, z) = φ'(⟨x, a⟩, y) a + λ x, so δ_t costs two dot
products and two axpys. The node error E_t uses the caller's standard normals R̃_t, one vector per round
(:mod:`privfit.solvers.online_to_batch.tree_aggregation`, eq. (3)–(5)): E_t = σ_1 t^{k−1} R̃_t for the plain
estimator, Honaker's minimum-variance node estimate (§B there, O(p) amortised per round) otherwise. Every w_t
and x_t is (re-)projected onto the public ball W as a backstop (a no-op up to rounding: learners stay in W and
x_t is a convex combination of points of W), and every w_t onto the step ball B(x_{t−1}, r), which the noise
relies on (‖w_t − x_{t−1}‖ ≤ r in (A1)). No per-round allocation; the same passes for every row.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from privfit.solvers.compiled_losses import glm_slope
from privfit.solvers.geometry import UNIT_ROUNDOFF
from privfit.solvers.online_to_batch.learners import bound_step, learner_update, project_ball
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
    feature_bound: float,
    label_bound: float,
    radius: float,
    step_bound: float,
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
    lattice: float,
    g_int: np.ndarray,
) -> None:
    """Rounds ``t_start ≤ t < t_stop`` of Algorithm 1 (see the module docstring); state updated in place.

    Args:
        X, y: the private rows (m × d, m: all n rows, or the partition that rounds t_start … t_stop − 1 read);
            ``order[t − t_start]`` is the row of X used in round t (a part of a secret permutation).
        normals: standard normals R̃_t for the block, shape (t_stop − t_start, p).
        sigma_1: σ_1 of eq. (4); round t's node noise has standard deviation σ_1 t^{k−1}.
        estimator: 0 = plain (E_t = R_t), 1 = Honaker (``ESTIMATORS`` of the tree module).
        intercept: p = d + 1 and the design row is (a, 1).
        feature_bound, label_bound: the declared bounds B_x of the feature row a (without intercept) and B_y of |y|,
            enforced here (the fit gets the rows as given: ``DPOnlineToBatch.enforces_declared_bounds``).
        radius: R of the ball W; step_bound: r, the public bound on ‖w_t − x_{t−1}‖ (each played w_t is projected
            onto the ball of radius r around x_{t−1}).
        w: w_t of the first round on entry, w_{t_stop} on exit; x, g: x_{t−1} and g_{t−1} (same convention).
        prefix: tree prefix sums (levels + 1, p); beta_total: [β_{1:t−1}].
        left, left_variance: Honaker's stored left-children errors (levels + 1, p) and variances (levels + 1).
        vectors, scalars, config: the learner's state (:class:`~privfit.solvers.online_to_batch.learners.LearnerState`).
        scratch: (4, p) work space.
        lattice: 0 for the float sampler; for the exact one the lattice spacing h = 2^k of
            :mod:`privfit.privacy.noise`: every δ_t is rounded to the lattice and summed exactly in ``g_int``
            (int64, p), ``normals`` holds the nodes' integer discrete-Gaussian noise (``sigma_1`` is then 1) and
            ḡ_t = h·(Σ_{s≤t} rint(δ_s/h) + Σ_{s∈I_t} Z_s), exactly: the integer node values are differences of the
            integer running sum, so the plain estimate telescopes to it, and every released ḡ_t is a function of
            the released lattice nodes (module docstring of :mod:`privfit.solvers.online_to_batch.solver`).
    """
    d = X.shape[1]
    p = w.shape[0]
    x_prev, gamma, gbar, a = scratch[0], scratch[1], scratch[2], scratch[3]
    delta = np.empty(p)
    clip_factor = 1.0 - 4.0 * (d + 2) * UNIT_ROUNDOFF  # geometry._clip_factor: exact norm of a clipped row < B_x
    for t in range(t_start, t_stop):
        project_ball(w, radius)  # backstop: the learners play points of W
        bound_step(w, x, step_bound)  # ‖w_t − x_{t−1}‖ ≤ r, the bound (A1) of the noise relies on
        beta_t = float(t) ** k
        beta_prev = float(t - 1) ** k
        beta_total[0] += beta_t
        ratio = beta_t / beta_total[0]
        norm_sq = 0.0
        for j in range(p):
            x_prev[j] = x[j]
            value = x[j] + ratio * (w[j] - x[j])
            x[j] = value
            norm_sq += value * value
        if norm_sq > 0.5 * radius * radius:  # (a computed norm² below R²/2 is certainly ≤ R²)
            project_ball(x, radius)  # backstop: x_t is a convex combination of points of W, ‖x_t‖ ≤ R
        # the row of round t with the declared bounds enforced as enforce_declared_bounds does (a non-finite
        # entry is 0, the features are clipped to B_x, the label to [−B_y, B_y]; rows within the bounds are used
        # unchanged), so the design row (a, 1) has norm ≤ sqrt(B_x² + 1). The clipping factor multiplies the dot
        # products and the gradient's coefficient, so every row costs the same passes (issue 18)
        index = order[t - t_start]
        row = X[index]
        feature_sq = 0.0
        z_now = 0.0
        z_before = 0.0
        for j in range(d):
            value = row[j] if math.isfinite(row[j]) else 0.0
            a[j] = value
            feature_sq += value * value
            z_now += x[j] * value
            z_before += x_prev[j] * value
        scale = 1.0
        if feature_sq > feature_bound * feature_bound:
            scale = feature_bound * clip_factor / math.sqrt(feature_sq)
            if scale == 0.0:  # the squares overflowed (as enforce_declared_bounds, the row becomes 0)
                z_now = 0.0
                z_before = 0.0
        z_now *= scale
        z_before *= scale
        label = y[index] if math.isfinite(y[index]) else 0.0
        label = min(max(label, -label_bound), label_bound)
        if intercept:
            z_now += float(x[d])
            z_before += float(x_prev[d])
        coefficient = beta_t * glm_slope(loss_kind, z_now, label, loss_parameter) - beta_prev * glm_slope(
            loss_kind, z_before, label, loss_parameter
        )
        scaled = coefficient * scale
        for j in range(d):
            g[j] += scaled * a[j]
        if intercept:
            g[d] += coefficient
        if l2 > 0.0:
            for j in range(p):
                g[j] += l2 * (beta_t * x[j] - beta_prev * x_prev[j])
        if lattice > 0.0:  # δ_t rounded to the lattice, summed exactly (|δ/h| < 2^50: exact rounding)
            for j in range(d):
                delta[j] = scaled * a[j]
            if intercept:
                delta[d] = coefficient
            for j in range(p):
                if l2 > 0.0:
                    delta[j] += l2 * (beta_t * x[j] - beta_prev * x_prev[j])
                g_int[j] += np.int64(math.floor(delta[j] / lattice + 0.5))
        sigma_t = sigma_1 * float(t) ** (k - 1.0)
        noise = normals[t - t_start]
        if estimator == 1:
            honaker_noise_step(left, left_variance, t, sigma_t, noise, gbar)  # E_t of Honaker's estimate
        else:
            for j in range(p):
                gbar[j] = sigma_t * noise[j]  # E_t = R_t
        tree_noise_step(prefix, t, gbar, gamma)  # γ_t = Σ_{s∈I_t} E_s
        if lattice > 0.0:
            for j in range(p):
                gbar[j] = (float(g_int[j]) + gamma[j]) * lattice  # integers below 2^52: exact
        else:
            for j in range(p):
                gbar[j] = g[j] + gamma[j]
        learner_update(learner_kind, t, beta_t, gbar, x, w, vectors, scalars, config)
