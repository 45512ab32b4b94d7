r"""Binary-tree noise of DP online-to-batch (Zhang, Tran & Cutkosky 2022, Algorithm 1 ``NOISE(t)``, App. B).

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

    γ_t = prefix[popcount(t) − 1] + R_t,   prefix[popcount(t)] ← γ_t                                (3)

is exact and costs O(d) per step and O(d log T) memory (:func:`tree_noise_step`).

Noise scale (eq. (6)). With β_t = t^k, W of diameter D, ℓ G-Lipschitz and H-smooth,

    σ_t = 2(k + 1)(G + H·D) · sqrt(log₂(2T)) · t^{k−1} / ρ                                           (4)

using the public D in place of max_{i ≤ t} ‖w_i − x_{i−1}‖ (≤ D for every learner that stays in W). Node t's
sum Σ_{i ∈ S_t} δ_i has replace-one sensitivity Δ_t ≤ 2(k + 1) t^{k−1}(G + H D) (proof of Theorem 3), a row
enters at most ⌊log₂ T⌋ + 1 ≤ log₂(2T) nodes, so Theorem 17 gives (α, αρ²/2)-RDP for every α > 1.
"""

from __future__ import annotations

import math

import numba
import numpy as np

__all__ = [
    "noise_scale",
    "noisy_running_sums",
    "tree_block",
    "tree_index_set",
    "tree_levels",
    "tree_noise_step",
    "tree_sensitivity_bound",
]


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


def tree_sensitivity_bound(t: int, *, k: float, lipschitz: float, smoothness: float, diameter: float) -> float:
    """Δ_t ≤ 2(k + 1) t^{k−1} (G + H D): replace-one sensitivity of node t (proof of Theorem 3, Lemma 15)."""
    return float(2.0 * (k + 1.0) * t ** (k - 1.0) * (lipschitz + smoothness * diameter))


def noise_scale(*, k: float, lipschitz: float, smoothness: float, diameter: float, horizon: int, rho: float) -> float:
    """σ_1 of eq. (4); node t's standard deviation is σ_t = σ_1 · t^{k−1}."""
    if rho <= 0 or not math.isfinite(rho):
        raise ValueError(f"rho must be finite and > 0, got {rho!r}")
    return 2.0 * (k + 1.0) * (lipschitz + smoothness * diameter) * math.sqrt(math.log2(2.0 * horizon)) / rho


@numba.njit(cache=True, nogil=True)
def tree_noise_step(prefix: np.ndarray, t: int, node_noise: np.ndarray, gamma: np.ndarray) -> None:
    """Eq. (3): write γ_t = prefix[popcount(t) − 1] + R_t into ``gamma`` and store it in ``prefix``.

    ``prefix`` has shape (levels + 1, d) with ``prefix[0] = 0``; ``node_noise`` is R_t (already scaled by σ_t).
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
def noisy_running_sums(increments: np.ndarray, sigma_1: float, k: float, normals: np.ndarray, out: np.ndarray) -> None:
    """The tree-aggregation mechanism on a given stream: ``out[t−1] = Σ_{i≤t} increments[i−1] + γ_t``.

    The same noise path as the one-pass loop (:func:`tree_noise_step` with σ_t = σ_1 t^{k−1} and the caller's
    standard normals R̃_t = ``normals[t−1]``), on increments chosen by the caller instead of computed from GLM
    rows: it serves white-box audits of the noise with worst-case increments, and any private running sum whose
    per-step sensitivity is bounded as in the module docstring.
    """
    rounds, p = increments.shape
    prefix = np.zeros((tree_levels_compiled(rounds) + 1, p))
    node = np.empty(p)
    gamma = np.empty(p)
    running = np.zeros(p)
    for t in range(1, rounds + 1):
        sigma_t = sigma_1 * float(t) ** (k - 1.0)
        for j in range(p):
            node[j] = sigma_t * normals[t - 1, j]
            running[j] += increments[t - 1, j]
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
