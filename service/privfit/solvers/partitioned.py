"""Rows that are not in the fit's memory: a dataset read partition by partition where it is stored, the clipped
gradient sums computed there and only the sums brought back (issue 39; Dask: :mod:`privfit.scaleout`).

A solver that supports it (:attr:`privfit.solvers.base.Solver.supports_partitions`: ``dp_gd``, ``dp_sgd``,
``dp_distributed``, ``dp_otb``) is given a :class:`PartitionedRows` instead of the matrix. ``dp_otb`` makes one pass
over the rows and reads them itself, one partition at a time (:meth:`PartitionedRows.read_rows`; its compiled rounds
enforce the declared bounds row by row, as in memory): its process holds one partition and the next, never the dataset.
The gradient-descent solvers' only access to the rows is :meth:`PartitionedRows.clipped_sum`: ``Σ_{i ∈ B} clip_C(∇ℓ(θ;
x_i, y_i))`` over every row (``dp_gd``) or over a batch B the fit drew (``dp_sgd``: the indices its sampler drew from
its own generator, as in memory; ``dp_distributed``: each learner's batch at its mixed point, each summand scaled to the
in-memory rounding margin below C), for one or several θ — exactly the quantity the in-memory fit computes
(:func:`privfit.solvers.baselines.dp_gd.clipped_gradient_sum`), each partition's part
computed by that same function on that partition's rows (declared bounds enforced, the intercept column appended)
and the parts added in partition order. A batch goes to the partitions holding its rows, and nowhere else. The
privacy argument is therefore unchanged: replacing one row changes one
partition's part by at most 2C (every summand has norm ≤ C), so the sum has replace-one sensitivity 2C, and the
noise is drawn once, by the fit, through the noise layer (:func:`privfit.privacy.noise.gaussian_stream`). Which
partitions hold which rows, how many there are and how long each takes are public or data-independent.

Row-level datasets only: a privacy unit's rows may lie in several partitions, and its summed gradient is clipped as
one (:mod:`privfit.solvers.units`), so a dataset with a privacy unit is fitted in memory.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from privfit.solvers.losses import GLMLoss, MultinomialLogisticLoss

__all__ = ["PartitionedRows"]

FloatArray = np.ndarray


class PartitionedRows(Protocol):
    """A row-level dataset held elsewhere, by partitions (module docstring)."""

    @property
    def rows(self) -> int:
        """n: the number of rows (public: the dataset's ``n``)."""
        ...

    @property
    def features(self) -> int:
        """The columns of the design matrix: the dataset's d, plus one when the fit has an intercept."""
        ...

    @property
    def partition_rows(self) -> tuple[int, ...]:
        """The number of rows of each partition, in storage order (public: a function of n and d)."""
        ...

    def read_rows(self, index: int) -> tuple[FloatArray, FloatArray]:
        """Partition ``index``'s rows (r × d, without the intercept column) and labels as stored, read into this
        process and checked (a streamed pass: ``dp_otb``; the solver enforces the declared bounds)."""
        ...

    def clipped_sum(
        self,
        loss: GLMLoss | MultinomialLogisticLoss,
        theta: FloatArray,
        clip_norm: float,
        batch: np.ndarray | None = None,
    ) -> FloatArray:
        """``Σ_{i ∈ B} clip_C(∇ℓ(θ_j; x_i, y_i))`` for each row θ_j of ``theta`` (shape (k, p) → (k, p); (p,) →
        (p,)), ``loss`` unregularised, in float64, as :func:`~privfit.solvers.baselines.dp_gd.clipped_gradient_sum`.
        ``batch``: None, every row; a sorted 1-D array of row indices, those rows for every θ_j; a (k, n) boolean
        matrix, row i for θ_j where it is True (vectorised runs of an audit)."""
        ...

    def release(self) -> None:
        """Forget whatever the machines holding the partitions kept of the rows for this fit (called when it ends,
        whatever its outcome)."""
        ...
