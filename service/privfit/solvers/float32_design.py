r"""A fit's design matrix in float32 and the two GLM kernels of a gradient step on it (issue 23).

A full-batch GLM step reads the n × d design matrix twice: the margins ``Xθ`` and the clipped sum ``Xᵀw``
(:func:`~privfit.solvers.geometry.clipped_scaled_row_sum`). Both are memory-bound, so storing the rows in
float32 halves the traffic (on Adult, 32,561 × 105, a float32 product takes 0.7–1.8 ms against 5–6 ms in
float64). What the float32 copy may change, and why privacy does not:

**The rows.** ``X̃ = fl32(X)`` after two per-entry public maps: entries are clamped to ±2⁴⁰ and entries below 2⁻⁵⁰
in magnitude are set to 0. Each is a function of one row, so neighbouring datasets stay neighbouring; the fit is
of X̃ (relative change ≤ u₃₂ = 2⁻²⁴ per entry, 6e-8). The row norms ‖x̃_i‖ are computed in float64 from the exact
float32 values.

**The margins** ``X̃θ`` are computed in float32 (relative error ≈ d·u₃₂ of ‖x̃‖‖θ‖). A margin only chooses the
scale s_i = φ'(⟨θ, x̃_i⟩, y_i) of row i's summand, which is clipped afterwards; each margin is a function of row i
and θ only, so any error in it changes no sensitivity.

**The clipped sum.** The weights ``w_i = s_i·min(1, C₀/(|s_i|‖x̃_i‖))`` are computed in float64 by
:func:`~privfit.solvers.geometry.clipped_scales` (|w_i|·‖x̃_i‖ ≤ C₀ exactly), rounded to float32 (weights below
2⁻⁷⁰ in magnitude set to 0: with entries ≥ 2⁻⁵⁰ no float32 product underflows, so every rounding is relative),
giving |w̃_i|·‖x̃_i‖ ≤ C₁ = C₀(1 + u₃₂). The rows are summed in blocks of b = 64: each block's partial sum
p̂_k = fl32(Σ_{i∈k} w̃_i x̃_i) in float32 (any order, FMA or not: |p̂_k − p_k| ≤ γ_b Σ|w̃_i||x̃_i| componentwise,
γ_m = m·u/(1 − m·u), Higham 2002 §3.1, hence ‖p̂_k − p_k‖₂ ≤ γ_b·b·C₁), and the K = ⌈n/b⌉ partials are added in
float64 (error ≤ γ⁶⁴_K Σ‖p̂_k‖ ≤ γ⁶⁴_K(1 + γ_b)·n·C₁). Replacing row i changes one block; every other partial is
the same deterministic computation on the same inputs. So the computed sums of neighbours differ by at most

    2C₁ + 2γ_b·b·C₁ + 2γ⁶⁴_K(1 + γ_b)·n·C₁ = 2C₀(1 + u₃₂)(1 + γ_b·b + γ⁶⁴_K(1 + γ_b)·n),

and :meth:`Float32Design.clip_target` picks C₀ = C / ((1 + u₃₂)(1 + γ_b·b + γ⁶⁴_K(1 + γ_b)·n)), times (1 − 16u₆₄)
for the rounding of that expression: the replace-one sensitivity of the computed sum is ≤ 2C, the value the
accountant charges. For b = 64 the clipping target shrinks by 2.4e-4 relative — below any effect on accuracy —
and the bound no longer grows like n² as an unblocked float64 sum's worst case does (γ⁶⁴_n·n).

The rule :func:`float32_suffices` keeps this path to public settings where the clamps are no-ops on rows within
the declared bounds (B ≤ 2⁴⁰), the margins stay finite (R ≤ 2⁴⁰) and the clipping norm is not tiny (C ≥ 2⁻³⁰);
elsewhere the fit stays in float64.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from .geometry import FloatArray, clipped_scales

UNIT_ROUNDOFF_32 = 2.0**-24
UNIT_ROUNDOFF_64 = 2.0**-53
BLOCK_ROWS = 64
ENTRY_LIMIT = 2.0**40
ENTRY_FLOOR = 2.0**-50
WEIGHT_FLOOR = 2.0**-70
MIN_CLIP_NORM = 2.0**-30

Precision = Literal["float32", "float64"]


def _gamma(count: int, unit: float) -> float:
    """γ_m = m·u/(1 − m·u), the relative error bound of an m-term floating-point sum or dot product."""
    return count * unit / (1.0 - count * unit)


def float32_suffices(row_norm_bound: float, radius: float, clip_norm: float) -> bool:
    """The public rule of the module docstring: float32 rows when B ≤ 2⁴⁰, R ≤ 2⁴⁰ (margins ≤ B·R stay far
    inside float32's range) and C ≥ 2⁻³⁰."""
    return row_norm_bound <= ENTRY_LIMIT and radius <= ENTRY_LIMIT and clip_norm >= MIN_CLIP_NORM


@dataclass(frozen=True)
class Float32Design:
    """The float32 rows of a design matrix (zero-padded to whole blocks) and their float64 norms."""

    rows: NDArray[np.float32]
    norms: FloatArray
    n: int

    @classmethod
    def of(cls, X: FloatArray) -> Float32Design:
        """X̃ = fl32 of X clamped to ±2⁴⁰ with entries below 2⁻⁵⁰ set to 0 (module docstring); norms of X̃."""
        A = np.clip(np.asarray(X, dtype=np.float64), -ENTRY_LIMIT, ENTRY_LIMIT)
        n, d = A.shape
        blocks = -(-n // BLOCK_ROWS)
        rows = np.zeros((blocks * BLOCK_ROWS, d), dtype=np.float32)
        rows[:n] = np.where(np.abs(A) < ENTRY_FLOOR, 0.0, A)
        norms = np.asarray(np.linalg.norm(rows[:n].astype(np.float64), axis=1), dtype=np.float64)
        rows.setflags(write=False)
        return cls(rows=rows, norms=norms, n=n)

    @property
    def d(self) -> int:
        return int(self.rows.shape[1])

    def margins(self, Theta: FloatArray) -> FloatArray:
        """⟨θ_j, x̃_i⟩ for each row θ_j of ``Theta`` (k, d), computed in float32; shape (n, k), float64."""
        theta32 = np.asarray(Theta, dtype=np.float32)
        return np.asarray(self.rows[: self.n] @ theta32.T, dtype=np.float64)

    def clip_target(self, C: float) -> float:
        """C₀ of the module docstring: the float64 clipping target that makes the computed sum's sensitivity ≤ 2C."""
        blocks = self.rows.shape[0] // BLOCK_ROWS
        gamma_block = _gamma(BLOCK_ROWS, UNIT_ROUNDOFF_32)
        growth = 1.0 + gamma_block * BLOCK_ROWS + _gamma(blocks, UNIT_ROUNDOFF_64) * (1.0 + gamma_block) * self.n
        return C * (1.0 - 16.0 * UNIT_ROUNDOFF_64) / ((1.0 + UNIT_ROUNDOFF_32) * growth)

    def clipped_sum(self, scales: FloatArray, C: float) -> FloatArray:
        """Σ_i clip(s_ij · x̃_i) for each column j of ``scales`` (n, k): shape (k, d), float64, replace-one
        sensitivity ≤ 2C (module docstring). Blocks of 64 rows are summed in float32 by one batched product."""
        S = np.asarray(scales, dtype=np.float64)
        weights = clipped_scales(S, self.norms, self.clip_target(C), self.d)
        padded = np.zeros((self.rows.shape[0], S.shape[1]), dtype=np.float32)
        padded[: self.n] = np.where(np.abs(weights) < WEIGHT_FLOOR, 0.0, weights)
        blocks = self.rows.shape[0] // BLOCK_ROWS
        by_block = padded.reshape(blocks, BLOCK_ROWS, -1).transpose(0, 2, 1)
        partials = np.matmul(by_block, self.rows.reshape(blocks, BLOCK_ROWS, self.d))
        return np.asarray(partials.sum(axis=0, dtype=np.float64), dtype=np.float64)
