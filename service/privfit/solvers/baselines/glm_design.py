r"""The design matrix of the certified minimiser (:mod:`privfit.solvers.baselines.erm`), stored by its public column
layout, and the compiled pass that sums the GLM gradient over it.

A categorical feature is encoded as a one-hot block (:attr:`privfit.datasets.schema.DatasetSchema.one_hot_blocks`:
at most one non-zero entry per row, all zero for an imputed level). A dense pass spends most of its n·d work on
those zeros: UCI Adult's 105 columns hold 13 non-zeros per row. :class:`GLMDesign` keeps the columns outside every
block as a dense float64 matrix and, for each block and row, ONE (column, value) pair:

    x̃_i = the dense entries of x_i, and in each block b the entry of largest |x_ij| (the first among equals).      (1)

**Privacy.** (1) is a deterministic map of one row at a time, so neighbouring datasets map to neighbouring
datasets; it keeps some entries of x_i and zeroes the others, so ‖x̃_i‖ ≤ ‖x_i‖ ≤ B and every public constant of
the minimiser (G, β, the step count, the rounding bound) holds for X̃. The minimiser fits X̃. For rows the encoder
wrote — at most one non-zero per block — X̃ = X exactly, so nothing changes but the work. Which columns form
blocks comes from the schema alone (:attr:`~privfit.solvers.base.PublicMetadata.one_hot_blocks`).

**Work and observables.** Each row costs the same p dense products and g (column, value) products whatever its
values (p and g are public), so the iteration's running time does not depend on the rows. The columns a row
touches do; they index θ and the gradient accumulator, two vectors of d doubles that stay in the first-level
cache for any d this service accepts in memory, so no access reaches memory at an address chosen by the rows.

**Rounding.** Each margin adds p + g ≤ d products (the dense ones by :func:`row_margin`, in SIMD order), and each
gradient coordinate is a sum over rows, so :func:`~privfit.solvers.baselines.erm.gradient_rounding_bound`'s
n·d-term analysis (any summation order; Higham 2002, §3.1) covers this pass as it covered the dense one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numba
import numpy as np
from numpy.typing import NDArray

from privfit.solvers.compiled_losses import glm_slope

__all__ = ["GLMDesign", "gradient_sum_kernel", "row_margin"]

FloatArray = NDArray[np.float64]
IndexArray = NDArray[np.int64]


@dataclass(frozen=True)
class GLMDesign:
    """X̃ of (1): the dense columns, and one (column, value) pair per one-hot block and row.

    Attributes:
        dense: (n, p) float64, C order: the columns ``dense_columns`` of X (the numeric features, the intercept).
        dense_columns: (p,) their indices in X.
        block_columns: (n, g) the column kept in each block (its first column when the block is all zero).
        block_values: (n, g) the value kept there (0.0 for an all-zero block).
        dimension: d, the number of columns of X.
    """

    dense: FloatArray
    dense_columns: IndexArray
    block_columns: IndexArray
    block_values: FloatArray
    dimension: int

    @classmethod
    def of(cls, X: FloatArray, blocks: Sequence[tuple[int, int]] = ()) -> GLMDesign:
        """X̃ of X (n × d) with the public half-open column ranges ``blocks`` (disjoint, within [0, d)); no block: X
        itself, all dense."""
        A = np.asarray(X, dtype=np.float64)
        n, d = A.shape
        in_block = np.zeros(d, dtype=bool)
        columns = np.empty((n, len(blocks)), dtype=np.int64)
        values = np.empty((n, len(blocks)), dtype=np.float64)
        rows = np.arange(n)
        for index, (start, stop) in enumerate(blocks):
            if not 0 <= start < stop <= d or in_block[start:stop].any():
                raise ValueError(f"one-hot block [{start}, {stop}) is empty, overlaps another or leaves [0, {d})")
            in_block[start:stop] = True
            chosen = start + np.argmax(np.abs(A[:, start:stop]), axis=1)
            columns[:, index] = chosen
            values[:, index] = A[rows, chosen]
        dense_columns = np.flatnonzero(~in_block).astype(np.int64)
        dense = np.ascontiguousarray(A[:, dense_columns])
        return cls(dense=dense, dense_columns=dense_columns, block_columns=columns, block_values=values, dimension=d)

    @property
    def n(self) -> int:
        return int(self.dense.shape[0])

    def rows(self, start: int, stop: int) -> tuple[FloatArray, IndexArray, FloatArray]:
        """The arrays of rows [start, stop) for :func:`gradient_sum_kernel` (views, C order)."""
        return self.dense[start:stop], self.block_columns[start:stop], self.block_values[start:stop]


@numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def row_margin(dense: np.ndarray, i: int, theta_dense: np.ndarray) -> float:
    """Σ_j dense[i, j]·θ_j, its p products added in whatever order the compiler vectorises (``reassoc``: SIMD lanes)
    with fused multiply-adds (``contract``). The rounding bound holds for any order, and an FMA rounds once where a
    product and a sum round twice. No other fast-math flag: NaN and infinity keep their IEEE meaning (the
    certificate must see a non-finite value). The order is fixed by the compiled code, not by the values."""
    z = 0.0
    for j in range(theta_dense.shape[0]):
        z += dense[i, j] * theta_dense[j]
    return z


@numba.njit(cache=True, nogil=True)
def gradient_sum_kernel(
    dense: np.ndarray,
    dense_columns: np.ndarray,
    block_columns: np.ndarray,
    block_values: np.ndarray,
    y: np.ndarray,
    theta: np.ndarray,
    kind: int,
    parameter: float,
    out: np.ndarray,
) -> None:
    """out = Σ_i φ'(⟨θ, x̃_i⟩, y_i) x̃_i over the given rows of X̃ (1), in one pass: per row p dense products and g
    pairs for the margin, the slope (:func:`~privfit.solvers.compiled_losses.glm_slope`), then p + g additions."""
    n, p = dense.shape
    g = block_columns.shape[1]
    theta_dense = np.empty(p)
    dense_sum = np.zeros(p)
    for j in range(p):
        theta_dense[j] = theta[dense_columns[j]]
    for j in range(out.shape[0]):
        out[j] = 0.0
    for i in range(n):
        z = row_margin(dense, i, theta_dense)
        for k in range(g):
            z += block_values[i, k] * theta[block_columns[i, k]]
        slope = glm_slope(kind, z, y[i], parameter)
        for j in range(p):
            dense_sum[j] += slope * dense[i, j]
        for k in range(g):
            out[block_columns[i, k]] += slope * block_values[i, k]
    for j in range(p):
        out[dense_columns[j]] += dense_sum[j]
