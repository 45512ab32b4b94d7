r"""User-level privacy in the clipped-gradient solvers: the rows of each privacy unit and their clipped sums.

A dataset whose schema names a privacy unit column (DESIGN §1.1) states every cost for neighbouring datasets that
differ in ONE UNIT with all its rows: one unit's rows replaced by another unit's (bounded DP at the unit level). The
number of units U is public (it is the metadata's ``n``, :class:`~privfit.solvers.base.PublicMetadata`); the number
of rows is NOT (a replacement may change it), and each unit has at most k rows, a public maximum bounded at upload
(:mod:`privfit.datasets.units`; ``max_rows_per_unit``).

The data layer hands a solver each row's unit as an int64 index in [0, U); :meth:`PublicMetadata.unit_index
<privfit.solvers.base.PublicMetadata.unit_index>` checks it and builds a :class:`UnitIndex` once per fit: the rows
grouped by unit (a stable sort of the codes) with the offsets of each unit's block, which is exactly the CSR form of
the U × rows indicator matrix (:attr:`UnitIndex.indicator`), and :meth:`UnitIndex.rows_of` /
:meth:`UnitIndex.segments` to turn a batch of units into its rows (``dp_sgd``).

:func:`clipped_unit_gradient_sum` is the query of ``dp_gd`` and ``dp_sgd`` at unit level:

    Σ_u clip_C( Σ_{i ∈ u} ∇ℓ(θ; x_i, y_i) ),        clip_C(v) = v · min(1, C/‖v‖₂),                        (U1)

the sum over units (all of them, or a batch) of each unit's SUMMED gradient clipped to C. Two datasets that differ
in one unit u have sums (U1) that differ in the one summand of u on each side, each of norm ≤ C, so by at most 2C,
whatever the unit's number of rows (up to k) and whatever its values: the replace-one-unit L2 sensitivity is 2C,
exactly the replace-one-row sensitivity of the row-level sum Σ_i clip_C(∇ℓ_i). Clipping each ROW instead would
not do: a unit of k rows moves Σ_i clip_C(∇ℓ_i) by up to 2kC (k summands on each side), k times the noise's
calibration (``tests/solvers/baselines/test_unit_level.py`` detects it empirically).

**How (U1) is computed.** A GLM's per-row gradient is φ'(⟨θ, x_i⟩, y_i)·x_i, so the unit sums are
``indicator · diag(φ') · X`` (U × d): one sparse-times-dense product whose sparse factor is the indicator with
the slopes as its values (no n × d temporary). The multinomial loss's per-row gradient is (p_i − e_{y_i}) x_iᵀ,
a K × d matrix; its unit sum is computed one class at a time (K blocks of U × d) and clipped in Frobenius norm
(the L2 norm of its vec, the norm in which ``dp_gd`` and ``dp_sgd`` add their noise). Each unit's sum is then
clipped by :func:`~privfit.solvers.geometry.clip_rows` (every clipped vector has exact norm ≤ C, rounding
included; vectors within the ball are unchanged bit for bit) and the clipped vectors are added. Several θ at once
(``theta`` of shape (k, p)) serve the vectorised privacy audits, as ``clipped_gradient_sum`` of
:mod:`~privfit.solvers.baselines.dp_gd` does. float64 only (there is no float32 path at unit level).

**Cost.** Time O(rows·K·d + U·K·d) per θ and step (a numpy pass over the rows of the units involved); memory
O(rows·K) for the sparse factor and O(U·K·d) = O(U·p) for the unit sums, per θ and step, beyond X itself. The work
is a fixed number of vectorised passes: it does not branch on values (which units are clipped changes nothing but
the factors), and its size is a function of the number of rows read, which the run time of any numpy pass shows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse
from numpy.typing import NDArray

from .geometry import clip_rows
from .losses import GLMLoss, LossParameterError, MultinomialLogisticLoss, RegularizedLoss

__all__ = ["UnitIndex", "clipped_unit_gradient_sum", "unit_gradient_sums"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class UnitIndex:
    """The rows of each privacy unit of one fit, built once from the checked unit codes.

    Attributes:
        units: U, the number of units (public: the metadata's ``n``).
        max_rows_per_unit: k, the public maximum of rows of a unit.
        order: the row indices grouped by unit (unit 0's rows, then unit 1's, …; each unit's rows in increasing
            order), shape (rows,).
        offsets: unit u's rows are ``order[offsets[u]:offsets[u + 1]]``, shape (U + 1,).
    """

    units: int
    max_rows_per_unit: int
    order: IntArray
    offsets: IntArray

    @classmethod
    def from_codes(cls, codes: IntArray, units: int, max_rows_per_unit: int) -> UnitIndex:
        """The index of ``codes`` (each row's unit, int64 in [0, U); checked by the caller:
        :meth:`~privfit.solvers.base.PublicMetadata.unit_index`). O(rows log rows) once per fit."""
        order = np.argsort(codes, kind="stable").astype(np.int64, copy=False)
        counts = np.bincount(codes, minlength=units)
        offsets = np.zeros(units + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        for array in (order, offsets):
            array.flags.writeable = False
        return cls(int(units), int(max_rows_per_unit), order, offsets)

    @property
    def rows(self) -> int:
        """The number of rows (private at unit level: used for shapes only, never released)."""
        return int(self.order.size)

    @property
    def indicator(self) -> scipy.sparse.csr_matrix:
        """The U × rows indicator matrix (entry (u, i) is 1 when row i belongs to unit u), in CSR form: its
        ``indptr`` is :attr:`offsets` and its ``indices`` are :attr:`order`."""
        data = np.ones(self.order.size, dtype=np.float64)
        return scipy.sparse.csr_matrix((data, self.order, self.offsets), shape=(self.units, self.rows))

    def segments(self, unit_ids: NDArray[np.integer] | None = None) -> tuple[IntArray, IntArray]:
        """The rows of the units ``unit_ids`` (all units when None), grouped by unit in the order given, and the
        offsets of each unit's block in them (length len(unit_ids) + 1). O(rows of the batch)."""
        if unit_ids is None:
            return self.order, self.offsets
        ids = np.asarray(unit_ids, dtype=np.int64)
        starts = self.offsets[ids]
        lengths = self.offsets[ids + 1] - starts
        local = np.zeros(ids.size + 1, dtype=np.int64)
        np.cumsum(lengths, out=local[1:])
        positions = np.repeat(starts - local[:-1], lengths) + np.arange(local[-1], dtype=np.int64)
        return self.order[positions], local

    def rows_of(self, unit_ids: NDArray[np.integer]) -> IntArray:
        """The row indices of the units ``unit_ids``, grouped by unit in the order given (``dp_sgd``'s batch of
        units as rows)."""
        return self.segments(unit_ids)[0]


def unit_gradient_sums(
    loss: GLMLoss | MultinomialLogisticLoss,
    theta: FloatArray,
    X: FloatArray,
    y: FloatArray,
    index: UnitIndex,
    *,
    unit_ids: NDArray[np.integer] | None = None,
) -> FloatArray:
    """The UNCLIPPED summed gradient Σ_{i ∈ u} ∇ℓ(θ; x_i, y_i) of each unit u of ``unit_ids`` (all units when None),
    for each row θ of ``theta`` (shape (k, p), or (p,)): shape (k, S, p) (or (S, p)) for S units, p = d for a GLM
    loss and K·d (vec of the K × d matrix, row-major) for the multinomial loss. ``loss`` must be unregularised."""
    if isinstance(loss, RegularizedLoss) or (isinstance(loss, MultinomialLogisticLoss) and loss.l2 > 0.0):
        raise LossParameterError("loss", "pass the unregularised loss; the L2 term is added after the noise")
    single = np.ndim(theta) == 1
    Theta = np.atleast_2d(np.asarray(theta, dtype=np.float64))
    A = np.asarray(X, dtype=np.float64)
    v = np.asarray(y, dtype=np.float64)
    rows, offsets = index.segments(unit_ids)
    full = rows.size == A.shape[0]  # every row is read: the margins in row order, then gathered (no copy of X)
    d, count = A.shape[1], offsets.size - 1
    if isinstance(loss, MultinomialLogisticLoss):
        classes = loss.classes
        blocks = []
        for row in Theta:
            matrix = loss.as_matrix(row, d)
            residuals = loss.residuals(matrix, A, v)[rows] if full else loss.residuals(matrix, A[rows], v[rows])
            blocks.append(residuals)
        scales = np.concatenate(blocks, axis=1)  # (rows, k·K): block j·K + c is θ_j's class c
    else:
        classes = 1
        margins = (A @ Theta.T)[rows] if full else A[rows] @ Theta.T
        scales = np.asarray(loss.dphi(margins, v[rows][:, None]), dtype=np.float64)  # (rows, k)
    sums = _segment_sums(A, rows, offsets, scales)  # (k·K, S, d)
    k = Theta.shape[0]
    out = sums.reshape(k, classes, count, d).transpose(0, 2, 1, 3).reshape(k, count, classes * d)
    return out[0] if single else out


def clipped_unit_gradient_sum(
    loss: GLMLoss | MultinomialLogisticLoss,
    theta: FloatArray,
    X: FloatArray,
    y: FloatArray,
    index: UnitIndex,
    clip_norm: float,
    *,
    unit_ids: NDArray[np.integer] | None = None,
) -> FloatArray:
    r"""(U1) of the module docstring: ``Σ_u clip_C(Σ_{i ∈ u} ∇ℓ(θ; x_i, y_i))`` over the units ``unit_ids`` (all
    units when None; a batch of ``dp_sgd``), for each row θ of ``theta`` (shape (k, p) → (k, p); (p,) → (p,)).

    Each unit's summed gradient (:func:`unit_gradient_sums`; a K × d matrix for the multinomial loss, clipped in
    Frobenius norm) is clipped to C by :func:`~privfit.solvers.geometry.clip_rows`, so every summand has exact norm
    ≤ C and the sum has replace-one-UNIT sensitivity 2C whatever the units' sizes. ``loss`` must be unregularised
    (the regulariser is not a per-unit term). Memory O(U·p) per θ (module docstring).
    """
    single = np.ndim(theta) == 1
    sums = unit_gradient_sums(loss, np.atleast_2d(np.asarray(theta, dtype=np.float64)), X, y, index, unit_ids=unit_ids)
    k, count, p = sums.shape
    if count == 0:  # an empty batch (a Poisson draw of no unit): the sum is 0
        total = np.zeros((k, p), dtype=np.float64)
    else:
        total = clip_rows(sums.reshape(k * count, p), clip_norm).reshape(k, count, p).sum(axis=1)
    return total[0] if single else total


def _segment_sums(X: FloatArray, rows: IntArray, offsets: IntArray, scales: FloatArray) -> FloatArray:
    """For each column j of ``scales`` (one per θ and class) and each segment s, Σ_{r in segment s} scales[r, j] ·
    X[rows[r]]: shape (blocks, S, d). One CSR product: the block-diagonal stack of the segment indicator with the
    scales as its values, times X (O(rows·blocks·d); memory O(rows·blocks) for the sparse factor)."""
    blocks, count, nnz = scales.shape[1], offsets.size - 1, rows.size
    if blocks == 1:
        indices, indptr = rows, offsets
    else:
        indices = np.tile(rows, blocks)
        starts = (np.arange(blocks, dtype=np.int64)[:, None] * nnz + offsets[None, :-1]).ravel()
        indptr = np.append(starts, blocks * nnz)
    data = np.ascontiguousarray(scales.T).ravel()
    factor = scipy.sparse.csr_matrix((data, indices, indptr), shape=(blocks * count, X.shape[0]))
    return np.asarray(factor @ X, dtype=np.float64).reshape(blocks, count, X.shape[1])
