r"""Binary-tree noise of DP online-to-batch (Zhang, Tran & Cutkosky 2022, Algorithm 1 ``NOISE(t)``, App. B), with
the tighter replace-one sensitivity of §A below and Honaker's (2015) minimum-variance prefix sums of §B.

Index sets (App. B.2). Write t in binary and clear its lowest set bits one at a time: the numbers met on the
way, from the smallest up to t, are

    I_t = {s_1 < s_2 < … < s_n = t},   s_i = t with all but its i highest set bits cleared,           (1)

so |I_t| = popcount(t) (I_4 = {4}, I_7 = {4, 6, 7}). The block of rows node t covers is

    S_t = {t − lowbit(t) + 1, …, t}                                                                 (2)

(S_4 = {1, 2, 3, 4}, S_7 = {7}); {S_i : i ∈ I_t} partitions [t]. Node t carries fresh noise R_t = σ_t R̃_t,
R̃_t ~ N(0, I), and the noise on the t-th running sum is γ_t = Σ_{i ∈ I_t} R_i.

Incremental form. The first popcount(t) − 1 members of I_t are I_{t − lowbit(t)}, whose popcount is one less,
and every step strictly between t − lowbit(t) and t has a larger popcount. So with ``prefix[m]`` holding the
γ of the last step of popcount m,

    γ_t = prefix[popcount(t) − 1] + E_t,   prefix[popcount(t)] ← γ_t                                (3)

is exact and costs O(d) per step and O(d log T) memory (:func:`tree_noise_step`), where E_t is the error of
the estimate of node t's sum: E_t = R_t for the plain estimator, and Honaker's E_t of §B.

Noise scale (eq. (6) with the sensitivity of §A). With β_t = t^k, ℓ convex, G-Lipschitz on the ball W of
diameter D and H-smooth, and r ≤ D a PUBLIC bound on every step ‖w_t − x_{t−1}‖ (the step bound, §A′),

    σ_t = (2kG + (k + 1)H·r) · sqrt(log₂(2T)) · t^{k−1} / ρ                                          (4)

The paper's eq. (6) has 2(k + 1)(G + H·D) in place of 2kG + (k + 1)H·r (:func:`theorem3_sensitivity_bound`):
for k = 1 and r = D the new constant, 2G + 2HD, is half of the paper's 4G + 4HD (formula v2), and the step
bound r < D (formula v3) shrinks its H term further, which dominates when H·D ≫ G.

**§A. Replace-one sensitivity** (replaces Lemma 15's use in the proof of Theorem 3; DESIGN §1.1).

*Claim.* Let ℓ(·, z) be convex and H-smooth on R^p and G-Lipschitz on W for every row z, ‖w_i − x_{i−1}‖ ≤ r,
x_i = x_{i−1} + (β_i/β_{1:i})(w_i − x_{i−1}) and δ_i(z) = β_i ∇ℓ(x_i, z) − β_{i−1}∇ℓ(x_{i−1}, z). Then for any
two rows z, z′ (given the same history, hence the same x_{i−1}, w_i, x_i)

    ‖δ_i(z) − δ_i(z′)‖ ≤ Δ_i := i^{k−1} (2kG + (k + 1)H·r)                                          (A1)

and node t's sum Σ_{i∈S_t} δ_i, which contains the replaced row at most once (at its round q ≤ t), moves by at
most Δ_q ≤ Δ_t (Δ_i is non-decreasing in i).

*Proof.* Split δ_i(z) = (β_i − β_{i−1}) ∇ℓ(x_i, z) + β_{i−1} u(z), u(z) = ∇ℓ(x_i, z) − ∇ℓ(x_{i−1}, z). Then

    ‖δ_i(z) − δ_i(z′)‖ ≤ (β_i − β_{i−1}) ‖∇ℓ(x_i, z) − ∇ℓ(x_i, z′)‖ + β_{i−1} ‖u(z) − u(z′)‖.

(i) ‖∇ℓ(x_i, z) − ∇ℓ(x_i, z′)‖ ≤ 2G (x_i ∈ W), and β_i − β_{i−1} = i^k − (i−1)^k ≤ k i^{k−1} by the mean value
theorem (d/ds s^k = k s^{k−1} ≤ k i^{k−1} on [i−1, i], k ≥ 1).
(ii) Co-coercivity of a convex H-smooth function (Nesterov 2004, Thm 2.1.5): ⟨u, s⟩ ≥ ‖u‖²/H with
s = x_i − x_{i−1}, i.e. ‖u − Hs/2‖ ≤ H‖s‖/2: u(z) and u(z′) both lie in the ball of centre Hs/2 and radius
H‖s‖/2, so ‖u(z) − u(z′)‖ ≤ H‖s‖ (the ball's diameter; without convexity it would be 2H‖s‖).
(iii) ‖s‖ = (β_i/β_{1:i}) ‖w_i − x_{i−1}‖ ≤ β_i r/β_{1:i}, and β_{1:i} = Σ_{j≤i} j^k ≥ ∫_0^i s^k ds =
i^{k+1}/(k + 1), so β_{i−1} β_i/β_{1:i} ≤ (k + 1)(i − 1)^k i^k / i^{k+1} ≤ (k + 1) i^{k−1}.
Together: ‖δ_i(z) − δ_i(z′)‖ ≤ 2k i^{k−1} G + (k + 1) i^{k−1} H r. For k = 1 the exact constants are
β_i − β_{i−1} = 1 and β_{i−1}β_i/β_{1:i} = 2(i − 1)/(i + 1) < 2: Δ_i = 2G + 2Hr·(i − 1)/(i + 1) ≤ 2G + 2Hr.
Each of the two constants k and k + 1 is attained as i → ∞ (checked numerically up to i = 10⁷ in the tests). ∎

**§A′. The step bound is enforced by a public projection** (formula v3). The loop plays, instead of the
learner's point v_i ∈ W,

    w_i = x_{i−1} + Π_{B(0, r)}(v_i − x_{i−1}),   i.e. the nearest point to v_i in the ball B(x_{i−1}, r),   (A2)

so ‖w_i − x_{i−1}‖ ≤ r by construction, and w_i ∈ W (it lies on the segment [x_{i−1}, v_i], both in the convex
W). Everything in (A2) is a function of the past releases only: v_i is the learner's output after ḡ_1, …, ḡ_{i−1},
and x_{i−1} the weighted average of w_1, …, w_{i−1}, themselves functions of those releases (and of the public
initial point). So, conditioned on the past releases, (A2) fixes x_{i−1}, w_i and x_i identically on the two
neighbouring datasets — exactly what the Claim assumes — whatever the learner, the data, or the adaptivity
(the history is arbitrary in the Claim: it only uses ‖w_i − x_{i−1}‖ ≤ r). The projection reads no row and
draws no random number; r is fixed before the fit from public constants (:func:`~privfit.solvers.
online_to_batch.solver.default_step_bound`). With r = D (any r ≥ D is clipped to D) (A2) is a no-op and (A1) is
formula v2. (The learners whose state is the played point continue from w_i: post-processing too.)
Rounding: (A2) is computed with the target r·(1 − 4(p + 2)u) and a shrinking backstop, so the computed step is
≤ r; x_i is then formed in floating point, which may exceed the exact ‖x_i − x_{i−1}‖ ≤ (β_i/β_{1:i}) r by
O(p u) relatively (u = 2⁻⁵³). The bound (iii) has a relative slack ≥ 1/i — (k + 1) i^{k−1} ((i − 1)/i)^k ≤
(k + 1) i^{k−1} (1 − 1/i); for k = 1 exactly 2(i − 1)/(i + 1) = 2 − 4/(i + 1) — which covers it for every
i ≤ 10¹² (and i = 1 has β_0 = 0: no H term). The tests check ‖x_i − x_{i−1}‖ ≤
(β_i/β_{1:i}) r on the compiled loop round by round, and that adversarial rows replacing one another on those
realised histories stay within Δ_i.

The L2 term (λ/2)‖x‖² is the same function on neighbouring datasets, so it cancels in δ_i(z) − δ_i(z′) and G, H
are the data term's. All of privfit's GLM data terms φ(⟨x, a⟩, y) (logistic, squared, Huber, smoothed hinge) are
convex with 0 ≤ φ'' ≤ h on all of R, hence convex and H = h B²-smooth on R^p, as (ii) needs. Privacy then
follows as in Theorem 3: node t's release has Δ_t/σ_t = ρ/sqrt(log₂ 2T), a row enters at most
⌊log₂ T⌋ + 1 ≤ log₂(2T) nodes, and Theorem 17 (adaptive composition of Gaussian releases) gives
(α, αρ²/2)-RDP for every α > 1.

**§B. Honaker's minimum-variance prefix sums** (Honaker 2015; the online form of Kairouz et al. 2021, App. D).

*The release.* The complete binary tree over rounds 1..T: node (h, j) sums δ_i over the 2^h rounds
(j − 1)2^h < i ≤ j 2^h and is released at its last round e = j 2^h, with noise N(0, σ_e² I), σ_e = σ_1 e^{k−1}.
Row q is in one node per level h ≤ ⌊log₂ T⌋ that is complete by T, so again in at most log₂(2T) nodes, each
with Δ ≤ Δ_q ≤ Δ_e (A1): Δ/σ ≤ ρ/sqrt(log₂ 2T), and the whole tree costs exactly what the Fenwick nodes of (1)–(2)
cost (those are the tree's nodes (v₂(t), t/2^{v₂(t)}), one per round). Every estimate below is a function of these
released values only (no row, no other randomness): post-processing, no privacy cost.

*The estimator.* Bottom up, each node's estimate combines its own noisy value with the sum of its two children's
estimates, inverse-variance weighted:

    ŝ = (V_c · y + σ_e² · (ŝ_L + ŝ_R)) / (V_c + σ_e²),   V_ŝ = V_c σ_e² / (V_c + σ_e²),   V_c = V_L + V_R,   (5)

(leaves: ŝ = y, V = σ_e²), and the estimate of g_t is the sum of ŝ over the dyadic decomposition I_t. The
subtrees of the nodes of I_t are exactly the nodes complete at t, their data are disjoint and their noises
independent, and in a complete binary subtree the bottom-up pass (5) gives the best linear unbiased estimate of
the root (Honaker 2015, §3.1); so this is the minimum-variance unbiased linear estimate of g_t from everything
released by round t (checked against generalised least squares in the tests). For k = 1 the root variances
tend to σ_1²/2 from σ_1² (plain).

*How the loop computes it.* Everything is linear: ŝ − (true sum) = E is (5) applied to the node noises, with
the same weights, and only the top node of round t (level v₂(t)) is ever used again (as a left child or in (3));
the nodes below it at round t are right children, consumed at once. So E_t = C_t + f_t^{1/2} Z_t with C_t the
deterministic combination of the stored left-children errors (``left[h]``) that (5) gives, f_t the variance of
(5)'s combination of round t's v₂(t) + 1 fresh node noises, and Z_t ~ N(0, I) ONE fresh vector: the same
Gaussian process (E_t) in law as the explicit tree, with one normal vector per round as for the plain
estimator (:func:`honaker_noise_step`; the joint law is checked exactly in the tests). The transcript (all ḡ_t,
hence x_T) is the same function of the data and of that process, so it has the same law as post-processing the
released tree, and the same privacy.
"""

from __future__ import annotations

import math
from typing import Literal

import numba
import numpy as np

__all__ = [
    "ESTIMATORS",
    "honaker_noise_step",
    "node_variance",
    "noise_scale",
    "noisy_running_sums",
    "prefix_variance",
    "theorem3_sensitivity_bound",
    "tree_block",
    "tree_index_set",
    "tree_levels",
    "tree_noise_step",
    "tree_sensitivity_bound",
]

#: prefix-sum estimator name → the integer the compiled loop dispatches on (§B)
ESTIMATORS: dict[str, int] = {"plain": 0, "honaker": 1}


def tree_index_set(t: int) -> list[int]:
    """I_t of eq. (1): the prefixes of t's binary expansion, ascending (Algorithm 1, lines 9–11)."""
    if t < 1:
        raise ValueError(f"t must be ≥ 1, got {t}")
    members: list[int] = []
    partial = 0
    for bit in range(t.bit_length() - 1, -1, -1):
        if t >> bit & 1:
            partial += 1 << bit
            members.append(partial)
    return members


def tree_block(t: int) -> list[int]:
    """S_t of eq. (2): the rows whose gradient differences node t sums."""
    if t < 1:
        raise ValueError(f"t must be ≥ 1, got {t}")
    low = t & -t
    return list(range(t - low + 1, t + 1))


def tree_levels(horizon: int) -> int:
    """The largest |I_t| for t ≤ T, i.e. the number of prefix slots :func:`tree_noise_step` needs."""
    return int(tree_levels_compiled(int(horizon)))


def tree_sensitivity_bound(t: int, *, k: float, lipschitz: float, smoothness: float, step_bound: float) -> float:
    """Δ_t = t^{k−1}(2kG + (k + 1)H r): replace-one sensitivity of node t, eq. (A1) of the module docstring, with r
    the public bound on ‖w_i − x_{i−1}‖ (the step bound the loop enforces, r ≤ D)."""
    return float(t ** (k - 1.0) * (2.0 * k * lipschitz + (k + 1.0) * smoothness * step_bound))


def theorem3_sensitivity_bound(t: int, *, k: float, lipschitz: float, smoothness: float, diameter: float) -> float:
    """The paper's Δ_t ≤ 2(k + 1) t^{k−1}(G + H D) (proof of Theorem 3, Lemma 15): formula v1, for comparison."""
    return float(2.0 * (k + 1.0) * t ** (k - 1.0) * (lipschitz + smoothness * diameter))


def noise_scale(*, k: float, lipschitz: float, smoothness: float, step_bound: float, horizon: int, rho: float) -> float:
    """σ_1 of eq. (4) (= Δ_1 sqrt(log₂ 2T)/ρ, with r = ``step_bound``); node t's standard deviation is
    σ_t = σ_1 · t^{k−1}."""
    if rho <= 0 or not math.isfinite(rho):
        raise ValueError(f"rho must be finite and > 0, got {rho!r}")
    sensitivity = tree_sensitivity_bound(1, k=k, lipschitz=lipschitz, smoothness=smoothness, step_bound=step_bound)
    return sensitivity * math.sqrt(math.log2(2.0 * horizon)) / rho


def node_variance(level: int, end: int, *, sigma_1: float, k: float) -> float:
    """Variance (per coordinate) of Honaker's estimate (5) of the tree node of ``level`` h that ends at round
    ``end`` (a multiple of 2^h): the closed form of §B (leaves: σ_end²)."""
    own = float((sigma_1 * float(end) ** (k - 1.0)) ** 2)
    if level == 0:
        return own
    half = 1 << (level - 1)
    children = node_variance(level - 1, end - half, sigma_1=sigma_1, k=k) + node_variance(
        level - 1, end, sigma_1=sigma_1, k=k
    )
    return float(own * children / (own + children))


def prefix_variance(t: int, *, sigma_1: float, k: float, estimator: Literal["plain", "honaker"]) -> float:
    """Var(γ_t) per coordinate: Σ_{s ∈ I_t} σ_s² (plain) or Σ_{s ∈ I_t} V(node s) of (5) (honaker)."""
    total = 0.0
    for s in tree_index_set(t):
        level = (s & -s).bit_length() - 1
        if estimator == "plain":
            total += (sigma_1 * float(s) ** (k - 1.0)) ** 2
        else:
            total += node_variance(level, s, sigma_1=sigma_1, k=k)
    return float(total)


@numba.njit(cache=True, nogil=True)
def tree_noise_step(prefix: np.ndarray, t: int, node_noise: np.ndarray, gamma: np.ndarray) -> None:
    """Eq. (3): write γ_t = prefix[popcount(t) − 1] + E_t into ``gamma`` and store it in ``prefix``.

    ``prefix`` has shape (levels + 1, d) with ``prefix[0] = 0``; ``node_noise`` is E_t (the plain estimator:
    R_t, already scaled by σ_t).
    """
    level = 0
    rest = t
    while rest:
        rest &= rest - 1
        level += 1
    below = prefix[level - 1]
    slot = prefix[level]
    for j in range(gamma.shape[0]):
        value = below[j] + node_noise[j]
        slot[j] = value
        gamma[j] = value


@numba.njit(cache=True, nogil=True)
def honaker_noise_step(
    left: np.ndarray, left_variance: np.ndarray, t: int, sigma_t: float, normal: np.ndarray, error: np.ndarray
) -> None:
    """§B: write into ``error`` the error E_t of Honaker's estimate (5) of the top node of round t (level
    v = v₂(t)), from ONE standard normal vector ``normal`` and the stored errors of the left children.

    ``left[h]`` / ``left_variance[h]`` hold the error and variance of the last completed node of level h that is
    a left child (its index j odd); ``sigma_t`` = σ_1 t^{k−1} is the noise of every node released at round t.
    Climbing h = 1 … v: weight w = V_c/(V_c + σ_t²) on the node's own noise and 1 − w on its children's errors
    (5); the deterministic part C (children's stored errors) and the variance f of the fresh part are carried,
    and E_t = C + sqrt(f) Z_t. Then ``left[v]``, ``left_variance[v]`` ← E_t, V_v.
    """
    own = sigma_t * sigma_t
    top = 0
    rest = t
    while rest & 1 == 0:
        rest >>= 1
        top += 1
    p = error.shape[0]
    for j in range(p):
        error[j] = 0.0  # C, the deterministic part
    fresh = own  # leaf: E = σ_t Z, all fresh
    variance = own
    for h in range(1, top + 1):
        children = left_variance[h - 1] + variance
        weight = children / (children + own)
        keep = 1.0 - weight
        below = left[h - 1]
        for j in range(p):
            error[j] = keep * (below[j] + error[j])
        fresh = weight * weight * own + keep * keep * fresh
        variance = own * children / (own + children)
    scale = math.sqrt(fresh)
    slot = left[top]
    for j in range(p):
        value = error[j] + scale * normal[j]
        error[j] = value
        slot[j] = value
    left_variance[top] = variance


@numba.njit(cache=True, nogil=True)
def noisy_running_sums(
    increments: np.ndarray, sigma_1: float, k: float, normals: np.ndarray, out: np.ndarray, estimator: int = 0
) -> None:
    """The tree-aggregation mechanism on a given stream: ``out[t−1] = Σ_{i≤t} increments[i−1] + γ_t``.

    The same noise path as the one-pass loop (:func:`tree_noise_step` with σ_t = σ_1 t^{k−1}, E_t = σ_t R̃_t for
    ``estimator`` 0 (plain) or :func:`honaker_noise_step` for 1 (honaker), and the caller's standard normals
    R̃_t = ``normals[t−1]``), on increments chosen by the caller instead of computed from GLM rows: it serves
    white-box audits of the noise with worst-case increments, and any private running sum whose per-step
    sensitivity is bounded as in the module docstring. Columns are independent: with ``increments`` zero, the p
    columns are p independent runs of the noise process.
    """
    rounds, p = increments.shape
    levels = tree_levels_compiled(rounds)
    prefix = np.zeros((levels + 1, p))
    left = np.zeros((levels + 1, p))
    left_variance = np.zeros(levels + 1)
    node = np.empty(p)
    gamma = np.empty(p)
    running = np.zeros(p)
    for t in range(1, rounds + 1):
        sigma_t = sigma_1 * float(t) ** (k - 1.0)
        for j in range(p):
            running[j] += increments[t - 1, j]
        if estimator == 1:
            honaker_noise_step(left, left_variance, t, sigma_t, normals[t - 1], node)
        else:
            for j in range(p):
                node[j] = sigma_t * normals[t - 1, j]
        tree_noise_step(prefix, t, node, gamma)
        for j in range(p):
            out[t - 1, j] = running[j] + gamma[j]


@numba.njit(cache=True, nogil=True)
def tree_levels_compiled(horizon: int) -> int:
    """:func:`tree_levels` (the bit length of T, at least 1), callable from compiled code."""
    levels = 0
    while horizon:
        horizon >>= 1
        levels += 1
    return max(levels, 1)
