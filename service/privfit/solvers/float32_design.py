r"""A fit's design matrix in float32 and the compiled GLM gradient step on it (issues 23 and 40).

A full-batch GLM step needs the margins ``Xθ`` and the clipped sum ``Xᵀw``
(:func:`~privfit.solvers.geometry.clipped_scaled_row_sum`). Both are memory-bound, so the rows are stored in float32
(half the traffic of float64), and one compiled pass (:meth:`Float32Design.clipped_gradient_sum`) reads each row ONCE
per step: for each block of 64 rows it computes the margins, the slopes and the clipping weights, then the block's
partial sum Σ w̃_i x̃_i while the block is still in cache; fixed chunks of blocks run on threads (issue 40: half the
bytes of the two matrix-vector products, 0.4–0.5 × a float32 numpy loop's time at n·d = 5·10⁷,
``benchmarks/dp_gd_scaling.py``). What the float32 copy and the pass may change, and why privacy does not:

**The rows.** ``X̃ = fl32(X)`` after two per-entry public maps: entries are clamped to ±2⁴⁰ and entries below 2⁻⁵⁰
in magnitude are set to 0. Each is a function of one row, so neighbouring datasets stay neighbouring; the fit is
of X̃ (relative change ≤ u₃₂ = 2⁻²⁴ per entry, 6e-8). The row norms ‖x̃_i‖ are computed in float64 from the exact
float32 values (the squares are exact; the sum of d nonnegative terms, in any order, is within (d/2 + 1)u₆₄ of the
exact norm: the assumption of :func:`~privfit.solvers.geometry.clipped_scales`). X̃ and the norms are a
deterministic function of the design matrix alone, so one copy serves every fit of a dataset
(:mod:`privfit.solvers.design_cache`).

**The margins and slopes** ``⟨θ, x̃_i⟩`` are computed in float32 in any summation order (relative error ≈ d·u₃₂ of
‖x̃‖‖θ‖), the slope s_i = φ'(⟨θ, x̃_i⟩, y_i) in float64 (:func:`~privfit.solvers.compiled_losses.glm_slope`, the slope of
every compiled pass; for the logistic loss −y·e^{−|yz|}/(1 + e^{−|yz|}) or −y/(1 + e^{−|yz|}) by the sign of yz,
chosen by a select, not a branch). A slope only chooses the scale of row i's summand, which is clipped afterwards; it
is a function of row i, y_i and θ only and is finite for every input (|z| ≤ √d·2⁸⁰ under the public rule below, and
e^{yz} = ∞ gives s = ±0), so any error in it changes no sensitivity.

**The clipped sum.** The weights ``w_i = s_i·min(1, C₀/(|s_i|‖x̃_i‖))`` are computed in float64 exactly as
:func:`~privfit.solvers.geometry.clipped_scales` computes them (|w_i|·‖x̃_i‖ ≤ C₀ exactly), rounded to float32 (weights
below 2⁻⁷⁰ in magnitude set to 0: with entries ≥ 2⁻⁵⁰ no float32 product underflows, so every rounding is relative),
giving |w̃_i|·‖x̃_i‖ ≤ C₁ = C₀(1 + u₃₂). The rows are summed in blocks of b = 64 consecutive rows: each block's
partial sum p̂_k = fl32(Σ_{i∈k} w̃_i x̃_i) in float32 (any order and grouping of the b products, FMA or not:
|p̂_k − p_k| ≤ γ_b Σ|w̃_i||x̃_i| componentwise, γ_m = m·u/(1 − m·u), Higham 2002 §3.1 and §3.5, hence
‖p̂_k − p_k‖₂ ≤ γ_b·b·C₁), and the K = ⌈n/b⌉ partials are added in float64 (by fixed chunks of consecutive blocks,
then the chunks' sums: a summation tree of K leaves, whose error is ≤ γ⁶⁴_K Σ‖p̂_k‖ ≤ γ⁶⁴_K(1 + γ_b)·n·C₁ whatever
its shape, Higham 2002 §4.1). Replacing row i changes one block; every other partial is the same deterministic
computation on the same inputs. So the computed sums of neighbours differ by at most

    2C₁ + 2γ_b·b·C₁ + 2γ⁶⁴_K(1 + γ_b)·n·C₁ = 2C₀(1 + u₃₂)(1 + γ_b·b + γ⁶⁴_K(1 + γ_b)·n),

and :meth:`Float32Design.clip_target` picks C₀ = C / ((1 + u₃₂)(1 + γ_b·b + γ⁶⁴_K(1 + γ_b)·n)), times (1 − 16u₆₄)
for the rounding of that expression: the replace-one sensitivity of the computed sum is ≤ 2C, the value the
accountant charges. For b = 64 the clipping target shrinks by 2.4e-4 relative — below any effect on accuracy —
and the bound no longer grows like n² as an unblocked float64 sum's worst case does (γ⁶⁴_n·n).

**Multiclass** (:meth:`Float32Design.clipped_multinomial_sum`). The per-example gradient of the multinomial loss is
the rank-one matrix r_i x̃_iᵀ (r_i = softmax(Θx̃_i) − e_{y_i} ∈ R^k, from float32 logits, in the same pass: again a
function of row i and Θ only),
clipped in Frobenius norm, ‖r_i x̃_iᵀ‖_F = ‖r_i‖‖x̃_i‖: w_i = r_i·min(1, C₀c/(‖r_i‖‖x̃_i‖)) in float64 with the target
c = 1 − 4(k·d + 2)u₆₄ of :func:`~privfit.solvers.geometry.clipped_outer_sum` (which covers the rounding of the two
norms and their product), so ‖w_i‖‖x̃_i‖ ≤ C₀ exactly; rounded to float32, ‖w̃_i‖‖x̃_i‖ ≤ C₁. Class j's row of the
sum is the blocked sum above with the weights w̃_ij, whose error is ≤ γ_b Σ|w̃_ij||x̃_i| componentwise; in Frobenius
norm over the classes and columns that is ≤ γ_b Σ_i ‖w̃_i‖‖x̃_i‖ ≤ γ_b·b·C₁ per block, and the float64 tree of the
partials adds ≤ γ⁶⁴_K(1 + γ_b)·n·C₁, exactly the terms of the bound above with ‖·‖_F for ‖·‖₂. So the same C₀ makes
the computed sum's replace-one sensitivity ≤ 2C in Frobenius norm, the sensitivity ``dp_gd`` is charged for.

**Work.** Every row costs the same operations whatever its values (no branch on a value: the clipping factor and
the flush are selects, the division is always done), every step reads every row once, and the chunks and threads
are fixed by the public shape and the machine: the time of a step does not depend on the rows (DESIGN §4).

The rule :func:`float32_suffices` keeps this path to public settings where the clamps are no-ops on rows within
the declared bounds (B ≤ 2⁴⁰), the margins stay finite (R ≤ 2⁴⁰) and the clipping norm is not tiny (C ≥ 2⁻³⁰);
elsewhere the fit stays in float64.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal

import numba
import numpy as np
from numpy.typing import NDArray

from .compiled_losses import LOSS_KINDS, glm_slope
from .geometry import FloatArray, _clip_factor

__all__ = [
    "BLOCK_ROWS",
    "Float32Design",
    "Precision",
    "float32_suffices",
    "step_pool",
]

UNIT_ROUNDOFF_32 = 2.0**-24
UNIT_ROUNDOFF_64 = 2.0**-53
BLOCK_ROWS = 64
ENTRY_LIMIT = 2.0**40
ENTRY_FLOOR = 2.0**-50
WEIGHT_FLOOR = 2.0**-70
MIN_CLIP_NORM = 2.0**-30
#: the fixed number of chunks of consecutive blocks a step's sum is split into (the same sums on any machine)
CHUNKS = 4
#: below this many entries (n·d) a step runs its chunks on the calling thread (a thread hand-off costs more)
PARALLEL_ENTRIES = 2**20

Precision = Literal["float32", "float64"]


def _gamma(count: int, unit: float) -> float:
    """γ_m = m·u/(1 − m·u), the relative error bound of an m-term floating-point sum or dot product."""
    return count * unit / (1.0 - count * unit)


def float32_suffices(row_norm_bound: float, radius: float, clip_norm: float) -> bool:
    """The public rule of the module docstring: float32 rows when B ≤ 2⁴⁰, R ≤ 2⁴⁰ (margins ≤ B·R stay far
    inside float32's range) and C ≥ 2⁻³⁰."""
    return row_norm_bound <= ENTRY_LIMIT and radius <= ENTRY_LIMIT and clip_norm >= MIN_CLIP_NORM


# --- the compiled kernels ---------------------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def _float32_rows(X: FloatArray, rows: NDArray[np.float32], norms: FloatArray) -> None:  # pragma: no cover - numba
    """rows[i] = fl32 of X[i] clamped to ±2⁴⁰ with entries below 2⁻⁵⁰ set to 0; norms[i] = ‖rows[i]‖ in float64."""
    for i in range(X.shape[0]):
        total = 0.0
        for c in range(X.shape[1]):
            value = min(max(X[i, c], -ENTRY_LIMIT), ENTRY_LIMIT)
            entry = np.float32(0.0 if abs(value) < ENTRY_FLOOR else value)
            rows[i, c] = entry
            square = np.float64(entry)
            total += square * square
        norms[i] = math.sqrt(total)


@numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _margin(rows: NDArray[np.float32], i: int, theta: NDArray[np.float32], j: int) -> np.float32:  # pragma: no cover
    """⟨θ_j, x̃_i⟩ in float32, in any order (SIMD; module docstring, "The margins")."""
    total = np.float32(0.0)
    for c in range(rows.shape[1]):
        total += rows[i, c] * theta[j, c]
    return total


@numba.njit(cache=True, nogil=True)
def _weight(scale: float, norm: float, limit: float, target: float) -> np.float32:  # pragma: no cover - numba
    """w̃ = fl32(w) with w = s·min(1, C₀c_d/(|s|‖x̃‖)) computed as :func:`~privfit.solvers.geometry.clipped_scales`
    does (``limit`` = C₀, ``target`` = fl(C₀·c_d)), weights below 2⁻⁷⁰ set to 0; selects, no branch."""
    magnitude = abs(scale) * norm
    over = magnitude > limit
    factor = target / (magnitude if over else 1.0)
    weight = scale * factor if over else scale
    return np.float32(0.0 if abs(weight) < WEIGHT_FLOOR else weight)


@numba.njit(cache=True, nogil=True, fastmath={"contract"})
def _add_block(
    rows: NDArray[np.float32], start: int, stop: int, weights: NDArray[np.float32], sums: FloatArray
) -> None:  # pragma: no cover - numba
    """sums[j] += fl64(p̂) with p̂ = Σ_{i ∈ [start, stop)} w̃_ji x̃_i summed in float32 (four rows at a time, FMA
    allowed: any order of the ≤ 64 products; module docstring, "The clipped sum"). ``weights`` (k, 64)."""
    k, d = sums.shape
    partial = np.empty(d, dtype=np.float32)
    count = stop - start
    whole = count - count % 4
    for j in range(k):
        partial[:] = 0.0
        for r in range(0, whole, 4):
            i = start + r
            a, b, c, e = weights[j, r], weights[j, r + 1], weights[j, r + 2], weights[j, r + 3]
            for col in range(d):
                pair = a * rows[i, col] + b * rows[i + 1, col]
                partial[col] += pair + (c * rows[i + 2, col] + e * rows[i + 3, col])
        for r in range(whole, count):
            a = weights[j, r]
            for col in range(d):
                partial[col] += a * rows[start + r, col]
        for col in range(d):
            sums[j, col] += np.float64(partial[col])


@numba.njit(cache=True, nogil=True)
def _gradient_chunk(
    rows: NDArray[np.float32],
    norms: FloatArray,
    y: FloatArray,
    theta: NDArray[np.float32],
    kind: int,
    parameter: float,
    limit: float,
    target: float,
    n: int,
    first: int,
    last: int,
    sums: FloatArray,
) -> None:  # pragma: no cover - numba
    """sums[j] = Σ over the blocks [first, last) of the block sums of clip(φ'(⟨θ_j, x̃_i⟩, y_i)·x̃_i), in float64."""
    k = theta.shape[0]
    weights = np.zeros((k, BLOCK_ROWS), dtype=np.float32)
    sums[:] = 0.0
    for block in range(first, last):
        start = block * BLOCK_ROWS
        stop = min(start + BLOCK_ROWS, n)
        for i in range(start, stop):
            for j in range(k):
                z = np.float64(_margin(rows, i, theta, j))
                weights[j, i - start] = _weight(glm_slope(kind, z, y[i], parameter), norms[i], limit, target)
        _add_block(rows, start, stop, weights, sums)


@numba.njit(cache=True, nogil=True)
def _scaled_chunk(
    rows: NDArray[np.float32],
    norms: FloatArray,
    scales: FloatArray,
    limit: float,
    target: float,
    n: int,
    first: int,
    last: int,
    sums: FloatArray,
) -> None:  # pragma: no cover - numba
    """:func:`_gradient_chunk` with the scales given (``scales`` (n, k)) instead of the slopes at θ."""
    k = scales.shape[1]
    weights = np.zeros((k, BLOCK_ROWS), dtype=np.float32)
    sums[:] = 0.0
    for block in range(first, last):
        start = block * BLOCK_ROWS
        stop = min(start + BLOCK_ROWS, n)
        for i in range(start, stop):
            for j in range(k):
                weights[j, i - start] = _weight(scales[i, j], norms[i], limit, target)
        _add_block(rows, start, stop, weights, sums)


@numba.njit(cache=True, nogil=True)
def _softmax_chunk(
    rows: NDArray[np.float32],
    norms: FloatArray,
    classes: NDArray[np.int64],
    theta: NDArray[np.float32],
    limit: float,
    target: float,
    n: int,
    first: int,
    last: int,
    sums: FloatArray,
) -> None:  # pragma: no cover - numba
    """sums = Σ over the blocks [first, last) of the block sums of clip_F(r_i x̃_iᵀ), r_i = softmax(Θx̃_i) − e_{y_i}
    (``theta`` Θ (k, d) float32, ``classes`` y_i ∈ [0, k)): float32 logits, the residual in float64, one factor per
    row min(1, C₀c/(‖r_i‖‖x̃_i‖)) (module docstring, "Multiclass"); selects, no branch on a value."""
    k = theta.shape[0]
    weights = np.zeros((k, BLOCK_ROWS), dtype=np.float32)
    residual = np.empty(k)
    sums[:] = 0.0
    for block in range(first, last):
        start = block * BLOCK_ROWS
        stop = min(start + BLOCK_ROWS, n)
        for i in range(start, stop):
            top = -np.inf
            for j in range(k):
                residual[j] = np.float64(_margin(rows, i, theta, j))
                top = max(top, residual[j])
            total = 0.0
            for j in range(k):
                residual[j] = math.exp(residual[j] - top)
                total += residual[j]
            square = 0.0
            for j in range(k):
                residual[j] = residual[j] / total - (1.0 if j == classes[i] else 0.0)
                square += residual[j] * residual[j]
            magnitude = math.sqrt(square) * norms[i]
            over = magnitude > limit
            factor = target / (magnitude if over else 1.0)
            for j in range(k):
                weight = residual[j] * factor if over else residual[j]
                weights[j, i - start] = np.float32(0.0 if abs(weight) < WEIGHT_FLOOR else weight)
        _add_block(rows, start, stop, weights, sums)


# --- the design ---------------------------------------------------------------------------------------------------


def step_pool(entries: int) -> ThreadPoolExecutor | None:
    """The threads a fit's steps run their chunks on (:data:`CHUNKS` at most, one per core), or None for a design
    below :data:`PARALLEL_ENTRIES` entries or a one-core machine. Public: the shape and the machine. The caller shuts
    it down."""
    workers = min(CHUNKS, os.cpu_count() or 1)
    if workers < 2 or entries < PARALLEL_ENTRIES:
        return None
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="privfit-dp-gd")


@dataclass(frozen=True)
class Float32Design:
    """The float32 rows of a design matrix (zero-padded to whole blocks; read-only) and their float64 norms."""

    rows: NDArray[np.float32]
    norms: FloatArray
    n: int

    @staticmethod
    def nbytes_for(n: int, d: int) -> int:
        """The memory of the design of an n × d matrix (rows padded to whole blocks, and the norms): public."""
        return -(-n // BLOCK_ROWS) * BLOCK_ROWS * d * 4 + n * 8

    @classmethod
    def of(cls, X: FloatArray) -> Float32Design:
        """X̃ = fl32 of X clamped to ±2⁴⁰ with entries below 2⁻⁵⁰ set to 0 (module docstring); norms of X̃. One
        compiled pass over X (no matrix-sized temporary)."""
        A = np.ascontiguousarray(X, dtype=np.float64)
        n, d = A.shape
        blocks = -(-n // BLOCK_ROWS)
        rows = np.zeros((blocks * BLOCK_ROWS, d), dtype=np.float32)
        norms = np.empty(n, dtype=np.float64)
        _float32_rows(A, rows, norms)
        rows.setflags(write=False)
        norms.setflags(write=False)
        return cls(rows=rows, norms=norms, n=n)

    @property
    def d(self) -> int:
        return int(self.rows.shape[1])

    @property
    def nbytes(self) -> int:
        return int(self.rows.nbytes + self.norms.nbytes)

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

    def _chunks(
        self, k: int, run: Callable[[int, int, FloatArray], None], pool: ThreadPoolExecutor | None
    ) -> FloatArray:
        """Σ over the :data:`CHUNKS` fixed chunks of consecutive blocks of ``run(first, last, sums)`` (k, d)."""
        bounds = np.linspace(0, self.rows.shape[0] // BLOCK_ROWS, CHUNKS + 1).astype(np.int64)
        sums = np.empty((CHUNKS, k, self.d), dtype=np.float64)

        def chunk(index: int) -> None:
            run(int(bounds[index]), int(bounds[index + 1]), sums[index])

        if pool is None:
            for index in range(CHUNKS):
                chunk(index)
        else:
            list(pool.map(chunk, range(CHUNKS)))
        return np.asarray(sums.sum(axis=0), dtype=np.float64)

    def clipped_gradient_sum(
        self, loss_name: str, parameter: float, Theta: FloatArray, y: FloatArray, C: float,
        pool: ThreadPoolExecutor | None = None,
    ) -> FloatArray:  # fmt: skip
        """Σ_i clip_C(φ'(⟨θ_j, x̃_i⟩, y_i)·x̃_i) for each row θ_j of ``Theta`` (k, d), in one compiled pass over the rows
        (module docstring): shape (k, d), float64, replace-one sensitivity ≤ 2C. ``loss_name`` and ``parameter``: the
        GLM loss (:data:`~privfit.solvers.compiled_losses.LOSS_KINDS`) and its public parameter (Huber's δ, the
        hinge's h; 0 otherwise); ``pool``: threads for the chunks (:func:`step_pool`)."""
        theta = np.ascontiguousarray(np.atleast_2d(Theta), dtype=np.float32)
        labels = np.ascontiguousarray(y, dtype=np.float64)
        limit = self.clip_target(C)
        target = limit * _clip_factor(self.d)
        kind = LOSS_KINDS[loss_name]

        def run(first: int, last: int, sums: FloatArray) -> None:
            _gradient_chunk(self.rows, self.norms, labels, theta, kind, float(parameter), limit, target, self.n,
                            first, last, sums)  # fmt: skip

        return self._chunks(theta.shape[0], run, pool)

    def clipped_multinomial_sum(
        self, Theta: FloatArray, classes: NDArray[np.int64], C: float, pool: ThreadPoolExecutor | None = None
    ) -> FloatArray:
        """Σ_i clip_C(r_i x̃_iᵀ) in Frobenius norm, r_i = softmax(Θx̃_i) − e_{y_i} (the multinomial logistic loss's
        per-example gradient at Θ (k, d); ``classes`` the labels' class indices), in one compiled pass over the rows:
        shape (k, d), float64, replace-one sensitivity ≤ 2C in Frobenius norm (module docstring, "Multiclass"); the
        float32 counterpart of :func:`~privfit.solvers.geometry.clipped_outer_sum` of the residuals."""
        theta = np.ascontiguousarray(Theta, dtype=np.float32)
        labels = np.ascontiguousarray(classes, dtype=np.int64)
        limit = self.clip_target(C)
        target = limit * _clip_factor(theta.shape[0] * self.d)

        def run(first: int, last: int, sums: FloatArray) -> None:
            _softmax_chunk(self.rows, self.norms, labels, theta, limit, target, self.n, first, last, sums)

        return self._chunks(theta.shape[0], run, pool)

    def clipped_sum(self, scales: FloatArray, C: float, pool: ThreadPoolExecutor | None = None) -> FloatArray:
        """Σ_i clip(s_ij · x̃_i) for each column j of ``scales`` (n, k): shape (k, d), float64, replace-one
        sensitivity ≤ 2C (module docstring): the blocked sum of :meth:`clipped_gradient_sum` with the scales given."""
        S = np.ascontiguousarray(scales, dtype=np.float64)
        limit = self.clip_target(C)
        target = limit * _clip_factor(self.d)

        def run(first: int, last: int, sums: FloatArray) -> None:
            _scaled_chunk(self.rows, self.norms, S, limit, target, self.n, first, last, sums)

        return self._chunks(S.shape[1], run, pool)
