"""Geometry helpers shared by the private solvers: row clipping, L2-ball projection, intercept augmentation.

All functions are pure numpy, return new arrays (inputs are never modified) and never look at private values
to choose a scale: every threshold (C, R, B_x) is a public parameter.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privfit.errors import ParameterError

__all__ = [
    "UNIT_ROUNDOFF",
    "GeometryParameterError",
    "augment_intercept",
    "augmented_bound",
    "clip_rows",
    "clipped_outer_sum",
    "clipped_scaled_row_sum",
    "clipped_scales",
    "project_l2_ball",
    "row_norms",
]

FloatArray = NDArray[np.float64]

UNIT_ROUNDOFF = 2.0**-53
# Relative shrink applied when a rescaled vector's computed norm still exceeds the bound by rounding.
_SHRINK = 1.0 - 2.0**-50
_MAX_SHRINK_STEPS = 64


def _safety_factor(d: int) -> float:
    """1 − 2(d + 2)u: absorbs the rounding of a d-term norm (relative error ≤ (d/2 + 1)u, Higham 2002)."""
    return 1.0 - 2.0 * (d + 2) * UNIT_ROUNDOFF


def _clip_factor(d: int) -> float:
    """1 − 4(d + 2)u: the clipping target of :func:`clip_rows`, small enough that no backstop pass is needed."""
    return 1.0 - 4.0 * (d + 2) * UNIT_ROUNDOFF


class GeometryParameterError(ParameterError):
    """A public geometry parameter (C, R, B_x) or an array shape is invalid."""


def _positive(name: str, value: float, *, allow_zero: bool = False) -> float:
    if isinstance(value, bool | str | bytes):
        raise GeometryParameterError(name, f"must be a real number, not a {type(value).__name__}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise GeometryParameterError(name, f"must be a real number, got {type(value).__name__}") from None
    if not math.isfinite(number):
        raise GeometryParameterError(name, "must be finite")
    if number < 0 or (number == 0 and not allow_zero):
        raise GeometryParameterError(name, f"must be {'>= 0' if allow_zero else '> 0'}, got {number!r}")
    return number


def _row_norms(A: FloatArray) -> FloatArray:
    """sqrt(Σ_j a_ij²) per row, without an n × d temporary (4–6 × ``np.linalg.norm(A, axis=1)``'s speed). The d
    squares are summed in some order: the computed norm is within (d/2 + 1)u of the exact one for every order
    (nonnegative terms; Higham 2002, §3.1), the bound the clipping targets of this module assume."""
    return np.asarray(np.sqrt(np.einsum("ij,ij->i", A, A, dtype=np.float64)), dtype=np.float64)


def row_norms(X: ArrayLike) -> FloatArray:
    """‖x_i‖₂ of each row of a 2-D array (the public-shape work of :func:`clipped_scaled_row_sum`, done once)."""
    return _row_norms(np.asarray(X, dtype=np.float64))


def clip_rows(G: ArrayLike, C: float) -> FloatArray:
    r"""Clip each row of ``G`` to L2 norm at most ``C``: ``g_i ← g_i · min(1, C / ‖g_i‖₂)``.

    This is the per-example clipping of DP-SGD (Abadi et al. 2016, Alg. 1), which bounds the L2 sensitivity of
    a sum of rows by ``C`` under add/remove and ``2C`` under replace-one. Rows with ``‖g_i‖ ≤ C`` (including
    zero rows) are returned bit-for-bit unchanged; a clipped row keeps its direction.

    Rounding against the user (DESIGN §1.6): a clipped row x is multiplied by f = fl(C·s / n_c), where n_c is
    the computed norm, |n_c/‖x‖ − 1| ≤ (d/2 + 1)u (Higham 2002, §3.1; u = 2⁻⁵³), and s = 1 − 4(d + 2)u. The
    result y has ‖y‖ ≤ ‖x‖·f·(1 + u) ≤ C·s·(1 + u)³/(1 − (d/2 + 1)u) < C, and its computed norm is within a
    further factor 1 + (d/2 + 1)u, i.e. ≤ C·s·(1 + (d + 5)u + O(u²)) ≤ C·(1 − (3d + 3)u + O(u²)) < C: both the
    EXACT and the computed norms of a returned row are ≤ C, with no backstop pass.

    The work does not depend on the values (issue 18: per-row timings must not reveal which rows were
    clipped): one pass computes the norms and one multiplies every row by its factor (exactly 1.0 inside the
    ball, so those rows are unchanged bit for bit).

    Args:
        G: array of shape (n, d) with finite entries.
        C: public clipping threshold, ``C > 0``.

    Returns:
        A new float64 array of shape (n, d) whose rows all have norm ``≤ C``.
    """
    A = np.array(G, dtype=np.float64, copy=True)
    clip_rows_in_place(A, C)
    return A


def clip_rows_in_place(A: FloatArray, C: float, *, norms: FloatArray | None = None) -> None:
    """:func:`clip_rows` on the float64 array ``A`` itself (a view included): the same passes and result, no copy.
    ``norms``: the rows' norms as :func:`row_norms` computes them, when the caller has them (one pass fewer)."""
    C = _positive("C", C)
    if A.ndim != 2:
        raise GeometryParameterError("G", f"must be a 2-D array (n, d), got ndim={A.ndim}")
    if A.size == 0:
        return
    norms = _row_norms(A) if norms is None else norms
    over = norms > C
    A *= np.where(over, C * _clip_factor(A.shape[1]) / np.where(over, norms, 1.0), 1.0)[:, None]


def clipped_scaled_row_sum(
    X: FloatArray, scales: FloatArray, C: float, *, norms: FloatArray | None = None
) -> FloatArray:
    r"""``Σ_i clip_C(s_i · x_i)`` without forming the n vectors ``s_i x_i``: the GLM shortcut of issue 23.

    A GLM's per-example gradient is a scalar multiple of its row, ∇ℓ_i = φ'(⟨θ, x_i⟩, y_i)·x_i, so its norm is
    |φ'|·‖x_i‖ and the clipped sum is ``Xᵀ w`` with ``w_i = s_i · min(1, C·c_d / (|s_i|·‖x_i‖))``: one
    matrix-vector product per θ (two with the margins), the row norms computed once per fit (``norms``).

    ``scales`` has shape (n,) (one θ; returns (d,)) or (n, k) (k θ at once; returns (k, d)). Exactly as in
    :func:`clip_rows`, a summand within the ball is not rescaled (``w_i = s_i``) and a clipped one is scaled
    to a target ``C·c_d`` with c_d = 1 − 4(d + 2)u: the exact norm of the summand ``w_i x_i`` is
    |s_i|‖x_i‖·f·(1 + u) with f = fl(C c_d / fl(|s_i|·n_c)), |n_c/‖x_i‖ − 1| ≤ (d/2 + 1)u, hence
    ≤ C c_d (1 + u)²/((1 − (d/2 + 1)u)(1 − u)) ≤ C (1 − (7d/2 + 4)u + O(u²)) < C. So every summand has norm ≤ C
    exactly and a sum over rows has replace-one sensitivity 2C, as with :func:`clip_rows`. The result equals
    ``clip_rows(s_i x_i).sum()`` up to summation rounding (≈ 1e-15 relative; pinned by a test). The work does
    not depend on the values: every row gets its factor (exactly 1.0 inside the ball) in one pass.
    """
    C = _positive("C", C)
    A = np.asarray(X, dtype=np.float64)
    if A.ndim != 2:
        raise GeometryParameterError("X", f"must be a 2-D array (n, d), got ndim={A.ndim}")
    S = np.asarray(scales, dtype=np.float64)
    single = S.ndim == 1
    S2 = S[:, None] if single else S
    if S2.shape[0] != A.shape[0]:
        raise GeometryParameterError("scales", f"has {S2.shape[0]} rows for {A.shape[0]} rows of X")
    lengths = _row_norms(A) if norms is None else np.asarray(norms, dtype=np.float64)
    total = np.asarray(clipped_scales(S2, lengths, C, A.shape[1]).T @ A, dtype=np.float64)
    return total[0] if single else total


def clipped_outer_sum(X: FloatArray, residuals: FloatArray, C: float, *, norms: FloatArray | None = None) -> FloatArray:
    r"""``Σ_i clip_C(r_i x_iᵀ)`` (Frobenius clipping) without forming the n matrices: the multiclass analogue of
    :func:`clipped_scaled_row_sum` (``residuals`` R of shape (n, k), rows X of shape (n, d); returns (k, d)).

    A rank-one matrix has ‖r xᵀ‖_F = ‖r‖₂‖x‖₂, so the clipped sum is ``Wᵀ X`` with ``w_i = r_i · min(1,
    C·c/(‖r_i‖·‖x_i‖))``, c = 1 − 4(k·d + 2)u the clipping target of :func:`clip_rows` for the k·d entries of the
    flattened matrix: the computed product of the two norms has relative error ≤ ((k + d)/2 + 3)u, well inside
    the margin, so every summand ``w_i x_iᵀ`` has Frobenius norm ≤ C exactly and a sum over rows has replace-one
    sensitivity 2C (pinned by an adversarial test). Summands within the ball are not rescaled. Time O(n·k·d),
    memory O(n·k) beyond X; the work does not depend on the values.
    """
    C = _positive("C", C)
    A = np.asarray(X, dtype=np.float64)
    Rm = np.asarray(residuals, dtype=np.float64)
    if A.ndim != 2 or Rm.ndim != 2 or Rm.shape[0] != A.shape[0]:
        raise GeometryParameterError("residuals", f"must have shape (n, k) for X of shape {A.shape}, got {Rm.shape}")
    lengths = _row_norms(A) if norms is None else np.asarray(norms, dtype=np.float64)
    magnitude = _row_norms(Rm) * lengths
    over = magnitude > C
    factor = np.where(over, C * _clip_factor(Rm.shape[1] * A.shape[1]) / np.where(over, magnitude, 1.0), 1.0)
    return np.asarray((Rm * factor[:, None]).T @ A, dtype=np.float64)


def clipped_scales(scales: FloatArray, norms: FloatArray, C: float, d: int) -> FloatArray:
    """The weights w of :func:`clipped_scaled_row_sum`: ``w_i = s_i · min(1, C·c_d/(|s_i|·‖x_i‖))`` (computed
    norms ``norms``, rows of dimension d), so that |w_i|·‖x_i‖ ≤ C exactly. ``scales`` (n,) or (n, k)."""
    S = np.asarray(scales, dtype=np.float64)
    lengths = np.asarray(norms, dtype=np.float64)
    magnitude = np.abs(S) * (lengths[:, None] if S.ndim == 2 else lengths)
    over = magnitude > C
    return np.asarray(S * np.where(over, C * _clip_factor(d) / np.where(over, magnitude, 1.0), 1.0))


def project_l2_ball(theta: ArrayLike, R: float) -> FloatArray:
    r"""Euclidean projection onto the ball ``{θ : ‖θ‖₂ ≤ R}``: ``Π(θ) = θ · min(1, R / ‖θ‖₂)``.

    Points already inside the ball are returned unchanged (as a copy), so the map is idempotent:
    ``Π(Π(θ)) == Π(θ)`` exactly. Points outside are rescaled to norm ``R · (1 − 2(d+2)u)`` so that, despite
    rounding, the result's exact norm is ``≤ R`` (see :func:`clip_rows`).

    Args:
        theta: vector of shape (d,).
        R: public radius, ``R ≥ 0``.
    """
    R = _positive("R", R, allow_zero=True)
    t = np.array(theta, dtype=np.float64, copy=True)
    if t.ndim != 1:
        raise GeometryParameterError("theta", f"must be a 1-D vector, got ndim={t.ndim}")
    norm = float(np.linalg.norm(t))
    if norm <= R:
        return t
    t *= R * _safety_factor(t.shape[0]) / norm
    for _ in range(_MAX_SHRINK_STEPS):
        if float(np.linalg.norm(t)) <= R:
            break
        t *= _SHRINK
    return t


def augment_intercept(X: ArrayLike) -> FloatArray:
    r"""Append a constant feature 1 as the last column: ``x̃ = (x, 1)`` so that ``⟨θ̃, x̃⟩ = ⟨θ, x⟩ + b``.

    The intercept is then the last coordinate of the parameter vector and is constrained and regularised
    together with θ. The augmented row-norm bound is ``augmented_bound(B_x) = sqrt(B_x² + 1)``.
    """
    A = np.asarray(X, dtype=np.float64)
    if A.ndim != 2:
        raise GeometryParameterError("X", f"must be a 2-D array (n, d), got ndim={A.ndim}")
    return np.hstack([A, np.ones((A.shape[0], 1), dtype=np.float64)])


def augmented_bound(B_x: float) -> float:
    r"""Public row-norm bound after :func:`augment_intercept`: ``‖(x, 1)‖₂ ≤ sqrt(B_x² + 1)``.

    Returns the smallest float ≥ the exact value (checked in rational arithmetic), so the bound is never
    below the truth (DESIGN §1.6).
    """
    B_x = _positive("B_x", B_x, allow_zero=True)
    r = math.hypot(B_x, 1.0)
    exact_sq = Fraction(B_x) ** 2 + 1
    while Fraction(r) ** 2 < exact_sq:
        r = math.nextafter(r, math.inf)
    while r > 0 and Fraction(math.nextafter(r, 0.0)) ** 2 >= exact_sq:
        r = math.nextafter(r, 0.0)
    return r
