r"""Convex GLM losses ``ℓ(θ; x, y) = φ(⟨θ, x⟩, y)`` with constants derived only from public bounds.

Data convention (DESIGN §1.2, §3): encoded features ``X ∈ R^{n×d}`` with a PUBLIC row-norm bound
``‖x_i‖₂ ≤ B_x``; labels with ``|y_i| ≤ B_y`` where binary labels are ±1 and numeric labels are scaled to
[−1, 1]; parameters constrained to the L2 ball ``‖θ‖₂ ≤ R`` of public radius. An intercept is handled by
:func:`privfit.solvers.geometry.augment_intercept` (bound ``sqrt(B_x² + 1)``, see ``augmented_bound``).

Chain rule used throughout (z = ⟨θ, x⟩):

    ∇_θ ℓ = φ'(z, y) · x,        ∇²_θ ℓ = φ''(z, y) · x xᵀ.                                   (1)

Hence, with ``|φ'| ≤ a`` on the reachable (z, y) and ``0 ≤ φ'' ≤ c``,

    G = a · B_x  (Lipschitz: ‖∇ℓ‖ ≤ |φ'| ‖x‖),      β = c · B_x²  (smoothness: ‖x xᵀ‖₂ = ‖x‖²).        (2)

Constants (``h`` = smoothed-hinge width, ``δ`` = Huber threshold; regularised: see :class:`RegularizedLoss`):

    ========  ========================  ==========================  ===  ======  =================
    model     φ(z, y)                   φ'(z, y)                    c    β       G on ‖θ‖ ≤ R
    ========  ========================  ==========================  ===  ======  =================
    logistic  log(1 + e^{−yz})          −y σ(−yz)                   1/4  B_x²/4  B_x
    linear    ½ (z − y)²                z − y                       1    B_x²    (R B_x + B_y) B_x
    huber     H_δ(z − y)                clip(z − y, −δ, δ)          1    B_x²    δ B_x
    svm       ψ_h(yz) (smoothed hinge)  −y clip((1 − yz)/h, 0, 1)   1/h  B_x²/h  B_x
    ========  ========================  ==========================  ===  ======  =================

Classification constants hold for every label with ``|y| ≤ 1`` (so in particular for ±1). The logistic, Huber
and smoothed-hinge Lipschitz constants hold for every θ ∈ R^d (``lipschitz_is_global``); the squared loss is
Lipschitz only on the ball, so its gradients must be evaluated at points of the ball (or clipped).

A categorical label with k ≥ 3 classes has its own loss, :class:`MultinomialLogisticLoss` (softmax cross-entropy
on Θ ∈ R^{k×d}, handled as the vector vec(Θ)): G = √2·B_x, β = B_x²/2, proved in its docstring. It is not a GLM of
one margin and is built by the solvers that fit it (``privfit.solvers.base.resolved_loss``), not by
:func:`make_loss`.

Nothing here inspects label or feature values to validate them (an error would itself leak, DESIGN §1.3):
values are validated at upload; these functions only check shapes and public parameters.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit, log_softmax, softmax

from privfit.errors import ParameterError

__all__ = [
    "LOSS_REGISTRY",
    "GLMLoss",
    "HuberLoss",
    "LogisticLoss",
    "LossParameterError",
    "MultinomialLogisticLoss",
    "RegularizedLoss",
    "SmoothedHingeLoss",
    "SquaredLoss",
    "available_models",
    "make_loss",
]

FloatArray = NDArray[np.float64]


class LossParameterError(ParameterError):
    """A public loss parameter, a public bound or an array shape is invalid. ``parameter`` names it."""


# ---------------------------------------------------------------------------------------------------------
# argument checks and rounding
# ---------------------------------------------------------------------------------------------------------


def _real(name: str, value: Any, *, allow_inf: bool = False) -> float:
    if isinstance(value, bool | str | bytes):
        raise LossParameterError(name, f"must be a real number, not a {type(value).__name__}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise LossParameterError(name, f"must be a real number, got {type(value).__name__}") from None
    if math.isnan(number):
        raise LossParameterError(name, "must not be NaN")
    if math.isinf(number) and not allow_inf:
        raise LossParameterError(name, "must be finite")
    return number


def _nonneg(name: str, value: Any, *, allow_inf: bool = False) -> float:
    number = _real(name, value, allow_inf=allow_inf)
    if number < 0:
        raise LossParameterError(name, f"must be >= 0, got {number!r}")
    return number


def _up(value: Fraction | float) -> float:
    """The smallest float ≥ ``value`` (exact rational arithmetic, then one upward step if needed).

    Public constants are computed exactly from the (float) public inputs and rounded UP, so a reported
    Lipschitz/smoothness constant is never below its mathematical value (DESIGN §1.6: round against the user).
    """
    if isinstance(value, float):
        return value
    f = float(value)  # correctly rounded to nearest
    if Fraction(f) < value:
        f = math.nextafter(f, math.inf)
    return f


def _sqrt_up(value: float) -> float:
    """The smallest float ≥ sqrt(value) for a float value ≥ 0."""
    r = math.sqrt(value)
    if Fraction(r) ** 2 < Fraction(value):
        r = math.nextafter(r, math.inf)
    return r


def _as_theta(theta: ArrayLike) -> FloatArray:
    t = np.asarray(theta, dtype=np.float64)
    if t.ndim != 1:
        raise LossParameterError("theta", f"must be a 1-D vector, got ndim={t.ndim}")
    return t


def _as_matrix(X: ArrayLike, d: int) -> FloatArray:
    A = np.asarray(X, dtype=np.float64)
    if A.ndim != 2:
        raise LossParameterError("X", f"must be a 2-D array (n, d), got ndim={A.ndim}")
    if A.shape[1] != d:
        raise LossParameterError("X", f"has {A.shape[1]} columns but theta has dimension {d}")
    return A


def _as_y(y: ArrayLike, n: int) -> FloatArray:
    v = np.asarray(y, dtype=np.float64)
    if v.shape != (n,):
        raise LossParameterError("y", f"must have shape ({n},), got {v.shape}")
    return v


# ---------------------------------------------------------------------------------------------------------
# base class
# ---------------------------------------------------------------------------------------------------------


class GLMLoss(ABC):
    r"""Base class of a convex GLM loss ``ℓ(θ; x, y) = φ(⟨θ, x⟩, y)`` (+ ``l2/2 ‖θ‖²`` in subclasses).

    Subclasses implement the scalar link ``phi``, its derivatives ``dphi``/``d2phi`` in z, the constant
    ``second_derivative_bound`` (c with ``0 ≤ φ'' ≤ c``) and ``dphi_bound`` (a with ``|φ'| ≤ a`` on the
    reachable (z, y)); everything else follows from the chain rule (1) and the bounds (2) of the module doc.
    """

    #: registry name of the model ("logistic", "linear", "huber", "svm")
    name: ClassVar[str]
    #: labels are ±1 and ``predict`` returns signs
    is_classification: ClassVar[bool]
    #: the Lipschitz constant holds for all θ ∈ R^d, not only on the ball ‖θ‖ ≤ R
    lipschitz_is_global: ClassVar[bool] = True
    #: public parameters and their defaults, as accepted by :func:`make_loss`
    PARAMS: ClassVar[dict[str, float]] = {}

    # --- scalar link ---------------------------------------------------------------------------------
    @abstractmethod
    def phi(self, z: ArrayLike, y: ArrayLike) -> FloatArray:
        """φ(z, y), elementwise."""

    @abstractmethod
    def dphi(self, z: ArrayLike, y: ArrayLike) -> FloatArray:
        """∂φ/∂z (z, y), elementwise."""

    @abstractmethod
    def d2phi(self, z: ArrayLike, y: ArrayLike) -> FloatArray:
        """∂²φ/∂z² (z, y), elementwise (a valid choice in [left, right] second derivative at kinks)."""

    @abstractmethod
    def second_derivative_bound(self) -> float:
        """c with 0 ≤ φ''(z, y) ≤ c for all z and all labels of the convention (|y| ≤ 1 if classifying)."""

    @abstractmethod
    def dphi_bound(self, B_x: float, B_y: float, R: float) -> float:
        """a such that |φ'(⟨θ, x⟩, y)| ≤ a whenever ‖x‖ ≤ B_x, |y| ≤ B_y, ‖θ‖ ≤ R."""

    @abstractmethod
    def max_loss_at_zero(self, B_y: float = 1.0) -> float:
        """sup over |y| ≤ B_y of ℓ(0; x, y) = φ(0, y) (used for data-independent radii)."""

    def public_params(self) -> dict[str, float]:
        """The public parameters of this loss (for result metadata)."""
        return {}

    @property
    def l2(self) -> float:
        """L2 regularisation strength λ (0 for an unregularised loss)."""
        return 0.0

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.public_params().items())
        return f"{type(self).__name__}({params})"

    # --- vectorised loss, gradients, Hessians ---------------------------------------------------------
    def _prepare(self, theta: ArrayLike, X: ArrayLike, y: ArrayLike) -> tuple[FloatArray, FloatArray, FloatArray]:
        t = _as_theta(theta)
        A = _as_matrix(X, t.shape[0])
        v = _as_y(y, A.shape[0])
        return t, A, v

    def margins(self, theta: ArrayLike, X: ArrayLike) -> FloatArray:
        """z_i = ⟨θ, x_i⟩, shape (n,)."""
        t = _as_theta(theta)
        return _as_matrix(X, t.shape[0]) @ t

    def value(self, theta: ArrayLike, X: ArrayLike, y: ArrayLike) -> FloatArray:
        """Per-example losses ℓ_i = φ(⟨θ, x_i⟩, y_i), shape (n,)."""
        t, A, v = self._prepare(theta, X, y)
        return self.phi(A @ t, v)

    def mean_value(self, theta: ArrayLike, X: ArrayLike, y: ArrayLike) -> float:
        """Empirical risk (1/n) Σ_i ℓ_i."""
        losses = self.value(theta, X, y)
        if losses.shape[0] == 0:
            raise LossParameterError("X", "mean over zero rows is undefined")
        return float(np.mean(losses))

    def per_example_gradients(self, theta: ArrayLike, X: ArrayLike, y: ArrayLike) -> FloatArray:
        """Rows ∇ℓ_i = φ'(⟨θ, x_i⟩, y_i) · x_i (eq. 1), shape (n, d), computed as ``dphi[:, None] * X``."""
        t, A, v = self._prepare(theta, X, y)
        return self.dphi(A @ t, v)[:, None] * A

    def gradient_sum(self, theta: ArrayLike, X: ArrayLike, y: ArrayLike) -> FloatArray:
        """Σ_i ∇ℓ_i = Xᵀ φ'(Xθ, y), shape (d,), without materialising the (n, d) matrix."""
        t, A, v = self._prepare(theta, X, y)
        return A.T @ self.dphi(A @ t, v)

    def mean_gradient(self, theta: ArrayLike, X: ArrayLike, y: ArrayLike) -> FloatArray:
        """(1/n) Σ_i ∇ℓ_i, shape (d,)."""
        total = self.gradient_sum(theta, X, y)  # validates shapes
        n = np.shape(X)[0]
        if n == 0:
            raise LossParameterError("X", "mean over zero rows is undefined")
        return np.asarray(total / n, dtype=np.float64)

    def hessian_vector_product(self, theta: ArrayLike, X: ArrayLike, y: ArrayLike, v: ArrayLike) -> FloatArray:
        """(∇² (1/n)Σ_i ℓ_i) v = (1/n) Xᵀ (φ''(Xθ, y) ⊙ Xv) (eq. 1), shape (d,)."""
        t, A, lab = self._prepare(theta, X, y)
        vec = _as_theta(v)
        if vec.shape != t.shape or A.shape[0] == 0:
            raise LossParameterError("v", f"must have shape {t.shape} and X at least one row")
        return np.asarray(A.T @ (self.d2phi(A @ t, lab) * (A @ vec)) / A.shape[0], dtype=np.float64)

    def hessian(self, theta: ArrayLike, X: ArrayLike, y: ArrayLike) -> FloatArray:
        """Mean Hessian (1/n) Xᵀ diag(φ''(Xθ, y)) X, shape (d, d) (small d: Newton, objective perturb.)."""
        t, A, lab = self._prepare(theta, X, y)
        if A.shape[0] == 0:
            raise LossParameterError("X", "mean over zero rows is undefined")
        return np.asarray((A.T * self.d2phi(A @ t, lab)) @ A / A.shape[0], dtype=np.float64)

    # --- public constants ----------------------------------------------------------------------------
    def strong_convexity(self) -> float:
        """μ such that θ ↦ ℓ(θ; x, y) is μ-strongly convex: 0 for an unregularised GLM (rank-one Hessian)."""
        return 0.0

    def smoothness(self, B_x: float) -> float:
        r"""β = c · B_x² (eq. 2): ‖∇²ℓ‖₂ = |φ''| ‖x‖² ≤ c B_x², so θ ↦ ℓ(θ; x, y) is β-smooth on R^d."""
        B_x = _nonneg("B_x", B_x)
        return _up(Fraction(self.second_derivative_bound()) * Fraction(B_x) ** 2)

    def hessian_bound(self, B_x: float) -> float:
        """Alias of :meth:`smoothness` (a bound on ‖∇²_θ ℓ‖₂)."""
        return self.smoothness(B_x)

    def lipschitz(self, B_x: float, B_y: float = 1.0, R: float = math.inf) -> float:
        r"""Public Lipschitz constant G = a · B_x of θ ↦ ℓ(θ; x, y) on ‖θ‖ ≤ R (eq. 2).

        ‖∇ℓ‖ = |φ'(⟨θ,x⟩, y)| ‖x‖ ≤ a(B_x, B_y, R) · B_x, where a is :meth:`dphi_bound`. Derived only from the
        declared bounds ``B_x`` (features), ``B_y`` (labels) and ``R`` (radius; ``inf`` allowed if the loss is
        globally Lipschitz).
        """
        B_x = _nonneg("B_x", B_x)
        B_y = _nonneg("B_y", B_y)
        R = _nonneg("R", R, allow_inf=True)
        if self.is_classification and B_y > 1.0:
            raise LossParameterError(
                "B_y", f"labels of the {self.name!r} model are ±1, so B_y must be <= 1, got {B_y!r}"
            )
        return _up(Fraction(self.dphi_bound(B_x, B_y, R)) * Fraction(B_x))

    # --- prediction ----------------------------------------------------------------------------------
    def predict(self, theta: ArrayLike, X: ArrayLike) -> FloatArray:
        """Predictions: labels sign(⟨θ, x⟩) ∈ {−1, +1} (0 ↦ +1) for classification, ⟨θ, x⟩ for regression."""
        z = self.margins(theta, X)
        if self.is_classification:
            return np.where(z >= 0.0, 1.0, -1.0)
        return z


# ---------------------------------------------------------------------------------------------------------
# concrete losses
# ---------------------------------------------------------------------------------------------------------


class LogisticLoss(GLMLoss):
    r"""Logistic loss φ(z, y) = log(1 + exp(−y z)), y ∈ {−1, +1}.

    * value: ``np.logaddexp(0, −y z)`` (finite for all finite z, no overflow);
    * φ'(z, y) = −y σ(−y z), with σ(u) = 1/(1 + e^{−u}) (``scipy.special.expit``);
    * φ''(z, y) = y² σ(y z) σ(−y z) ≤ y²/4 ≤ 1/4 for |y| ≤ 1, maximal at z = 0  ⇒ β = B_x²/4;
    * |φ'| = |y| σ(−y z) ≤ 1  ⇒ G = B_x on all of R^d (independent of R).
    """

    name = "logistic"
    is_classification = True

    def phi(self, z: ArrayLike, y: ArrayLike) -> FloatArray:
        return np.logaddexp(0.0, -np.asarray(y, dtype=np.float64) * np.asarray(z, dtype=np.float64))

    def dphi(self, z: ArrayLike, y: ArrayLike) -> FloatArray:
        yy = np.asarray(y, dtype=np.float64)
        return np.asarray(-yy * expit(-yy * np.asarray(z, dtype=np.float64)), dtype=np.float64)

    def d2phi(self, z: ArrayLike, y: ArrayLike) -> FloatArray:
        yy = np.asarray(y, dtype=np.float64)
        m = yy * np.asarray(z, dtype=np.float64)
        return np.asarray(yy * yy * expit(m) * expit(-m), dtype=np.float64)

    def second_derivative_bound(self) -> float:
        return 0.25

    def dphi_bound(self, B_x: float, B_y: float, R: float) -> float:
        return 1.0

    def max_loss_at_zero(self, B_y: float = 1.0) -> float:
        """φ(0, y) = log 2 for every y (libm log is within 1 ulp, so one step up bounds it)."""
        return math.nextafter(math.log(2.0), math.inf)

    def predict_proba(self, theta: ArrayLike, X: ArrayLike) -> FloatArray:
        """P(y = +1 | x) = σ(⟨θ, x⟩), shape (n,)."""
        return np.asarray(expit(self.margins(theta, X)), dtype=np.float64)


class SquaredLoss(GLMLoss):
    r"""Squared loss φ(z, y) = ½ (z − y)² (model "linear"; with l2 > 0 this is ridge regression).

    * φ'(z, y) = z − y; φ'' = 1  ⇒ β = B_x²;
    * on the ball: |z| ≤ ‖θ‖ ‖x‖ ≤ R B_x and |y| ≤ B_y, so |φ'| ≤ R B_x + B_y  ⇒ G = (R B_x + B_y) B_x.
      The squared loss is NOT globally Lipschitz: G needs a finite R and holds only for ‖θ‖ ≤ R.
    """

    name = "linear"
    is_classification = False
    lipschitz_is_global = False

    def phi(self, z: ArrayLike, y: ArrayLike) -> FloatArray:
        r = np.asarray(z, dtype=np.float64) - np.asarray(y, dtype=np.float64)
        return 0.5 * r * r

    def dphi(self, z: ArrayLike, y: ArrayLike) -> FloatArray:
        return np.asarray(z, dtype=np.float64) - np.asarray(y, dtype=np.float64)

    def d2phi(self, z: ArrayLike, y: ArrayLike) -> FloatArray:
        return np.ones(np.broadcast_shapes(np.shape(z), np.shape(y)), dtype=np.float64)

    def second_derivative_bound(self) -> float:
        return 1.0

    def dphi_bound(self, B_x: float, B_y: float, R: float) -> float:
        if math.isinf(R):
            raise LossParameterError(
                "R", "the squared loss is Lipschitz only on a bounded ball; give a finite radius R"
            )
        return _up(Fraction(R) * Fraction(B_x) + Fraction(B_y))

    def max_loss_at_zero(self, B_y: float = 1.0) -> float:
        """φ(0, y) = y²/2 ≤ B_y²/2."""
        B_y = _nonneg("B_y", B_y)
        return _up(Fraction(B_y) ** 2 / 2)


class HuberLoss(GLMLoss):
    r"""Huber loss on the residual r = z − y with public threshold δ > 0 (Huber 1964, standard scaling):

        H_δ(r) = r²/2             if |r| ≤ δ,
                 δ (|r| − δ/2)    otherwise.

    * φ'(z, y) = clip(r, −δ, δ), so |φ'| ≤ δ  ⇒ G = δ B_x on all of R^d;
    * φ'' = 1{|r| ≤ δ} ≤ 1  ⇒ β = B_x² (independent of δ).

    (The other common scaling H_δ/δ — "smoothed absolute loss" — has |φ'| ≤ 1 and φ'' ≤ 1/δ, i.e. G = B_x,
    β = B_x²/δ; it is the same model with the loss, hence the optimal θ, unchanged up to the factor 1/δ.)
    """

    name = "huber"
    is_classification = False
    PARAMS: ClassVar[dict[str, float]] = {"delta": 1.0}

    def __init__(self, delta: float = 1.0) -> None:
        delta = _real("delta", delta)
        if delta <= 0:
            raise LossParameterError("delta", f"the Huber threshold must be > 0, got {delta!r}")
        self.delta = delta

    def public_params(self) -> dict[str, float]:
        return {"delta": self.delta}

    def phi(self, z: ArrayLike, y: ArrayLike) -> FloatArray:
        r = np.asarray(z, dtype=np.float64) - np.asarray(y, dtype=np.float64)
        u = np.clip(r, -self.delta, self.delta)
        # u²/2 + δ(|r| − |u|): equals r²/2 inside, δ²/2 + δ(|r| − δ) = δ(|r| − δ/2) outside; never overflows.
        return 0.5 * u * u + self.delta * (np.abs(r) - np.abs(u))

    def dphi(self, z: ArrayLike, y: ArrayLike) -> FloatArray:
        r = np.asarray(z, dtype=np.float64) - np.asarray(y, dtype=np.float64)
        return np.clip(r, -self.delta, self.delta)

    def d2phi(self, z: ArrayLike, y: ArrayLike) -> FloatArray:
        r = np.asarray(z, dtype=np.float64) - np.asarray(y, dtype=np.float64)
        return (np.abs(r) <= self.delta).astype(np.float64)

    def second_derivative_bound(self) -> float:
        return 1.0

    def dphi_bound(self, B_x: float, B_y: float, R: float) -> float:
        return self.delta

    def max_loss_at_zero(self, B_y: float = 1.0) -> float:
        """φ(0, y) = H_δ(−y) ≤ H_δ(B_y) (H_δ is even and increasing in |r|)."""
        b, d = Fraction(_nonneg("B_y", B_y)), Fraction(self.delta)
        return _up(b * b / 2 if b <= d else d * (b - d / 2))


class SmoothedHingeLoss(GLMLoss):
    r"""Quadratically smoothed hinge (model "svm"), public width h ∈ (0, 1] (Rennie & Srebro 2005;
    Shalev-Shwartz & Zhang 2013, "smoothed hinge" with γ = h). With m = y z:

        ψ_h(m) = 0                     if m ≥ 1,
                 (1 − m)²/(2h)         if 1 − h < m < 1,
                 1 − m − h/2           if m ≤ 1 − h,          φ(z, y) = ψ_h(y z).

    * ψ_h'(m) = −clip((1 − m)/h, 0, 1), φ'(z, y) = y ψ_h'(y z), so |φ'| ≤ |y| ≤ 1  ⇒ G = B_x on all of R^d;
    * φ'' = y²/h on 1 − h < yz < 1 and 0 elsewhere, ≤ 1/h  ⇒ β = B_x²/h.
    ψ_h is the Moreau envelope-like smoothing of max(0, 1 − m), with 0 ≤ hinge − ψ_h ≤ h/2.
    """

    name = "svm"
    is_classification = True
    PARAMS: ClassVar[dict[str, float]] = {"h": 1.0}

    def __init__(self, h: float = 1.0) -> None:
        h = _real("h", h)
        if not 0.0 < h <= 1.0:
            raise LossParameterError("h", f"the smoothed-hinge width must be in (0, 1], got {h!r}")
        self.h = h

    def public_params(self) -> dict[str, float]:
        return {"h": self.h}

    def phi(self, z: ArrayLike, y: ArrayLike) -> FloatArray:
        gap = 1.0 - np.asarray(y, dtype=np.float64) * np.asarray(z, dtype=np.float64)  # 1 − m
        u = np.clip(gap, 0.0, self.h)
        # u²/(2h) + (max(gap, 0) − u): the three branches above, with no (1 − m)² overflow for large |m|.
        return u * u / (2.0 * self.h) + (np.maximum(gap, 0.0) - u)

    def dphi(self, z: ArrayLike, y: ArrayLike) -> FloatArray:
        yy = np.asarray(y, dtype=np.float64)
        gap = 1.0 - yy * np.asarray(z, dtype=np.float64)
        return -yy * np.clip(gap / self.h, 0.0, 1.0)

    def d2phi(self, z: ArrayLike, y: ArrayLike) -> FloatArray:
        yy = np.asarray(y, dtype=np.float64)
        m = yy * np.asarray(z, dtype=np.float64)
        inside = (m > 1.0 - self.h) & (m < 1.0)
        return np.where(inside, yy * yy / self.h, 0.0)

    def second_derivative_bound(self) -> float:
        return _up(1 / Fraction(self.h))

    def dphi_bound(self, B_x: float, B_y: float, R: float) -> float:
        return 1.0

    def max_loss_at_zero(self, B_y: float = 1.0) -> float:
        """φ(0, y) = ψ_h(0) = 1 − h/2 (since h ≤ 1, m = 0 ≤ 1 − h)."""
        return _up(1 - Fraction(self.h) / 2)


# ---------------------------------------------------------------------------------------------------------
# L2 regularisation
# ---------------------------------------------------------------------------------------------------------


class RegularizedLoss(GLMLoss):
    r"""ℓ_λ(θ; x, y) = ℓ(θ; x, y) + (λ/2) ‖θ‖², with public λ = ``l2`` ≥ 0.

    The regulariser is added to EVERY per-example loss (so the mean objective is mean ℓ + λ/2‖θ‖²):

    * value_i = φ(⟨θ, x_i⟩, y_i) + (λ/2)‖θ‖²;   ∇ℓ_λ,i = φ' x_i + λ θ;   Σ_i ∇ℓ_λ,i = Xᵀφ' + n λ θ;
    * ∇²ℓ_λ = φ'' x xᵀ + λ I  ⇒  strong convexity μ = λ, smoothness β + λ;
    * on ‖θ‖ ≤ R: ‖∇ℓ_λ‖ ≤ G + λ‖θ‖ ≤ G + λ R  (never globally Lipschitz when λ > 0).

    ``phi``/``dphi``/``d2phi``/``second_derivative_bound`` are those of the unregularised link (objective
    perturbation uses c of φ alone).
    """

    lipschitz_is_global = False

    def __init__(self, loss: GLMLoss, l2: float) -> None:
        if not isinstance(loss, GLMLoss):
            raise LossParameterError("loss", f"must be a GLMLoss, got {type(loss).__name__}")
        if isinstance(loss, RegularizedLoss):
            raise LossParameterError("loss", "is already regularised; combine the l2 strengths instead")
        self.base = loss
        self._l2 = _nonneg("l2", l2)

    # identity of the model is the base's
    @property
    def name(self) -> str:  # type: ignore[override]
        return self.base.name

    @property
    def is_classification(self) -> bool:  # type: ignore[override]
        return self.base.is_classification

    @property
    def l2(self) -> float:
        return self._l2

    def public_params(self) -> dict[str, float]:
        return {**self.base.public_params(), "l2": self._l2}

    def __repr__(self) -> str:
        return f"RegularizedLoss({self.base!r}, l2={self._l2!r})"

    # scalar link: delegated
    def phi(self, z: ArrayLike, y: ArrayLike) -> FloatArray:
        return self.base.phi(z, y)

    def dphi(self, z: ArrayLike, y: ArrayLike) -> FloatArray:
        return self.base.dphi(z, y)

    def d2phi(self, z: ArrayLike, y: ArrayLike) -> FloatArray:
        return self.base.d2phi(z, y)

    def second_derivative_bound(self) -> float:
        return self.base.second_derivative_bound()

    def dphi_bound(self, B_x: float, B_y: float, R: float) -> float:
        return self.base.dphi_bound(B_x, B_y, R)

    def max_loss_at_zero(self, B_y: float = 1.0) -> float:
        """ℓ_λ(0) = φ(0, y): the regulariser vanishes at θ = 0."""
        return self.base.max_loss_at_zero(B_y)

    def predict(self, theta: ArrayLike, X: ArrayLike) -> FloatArray:
        return self.base.predict(theta, X)

    # regularised quantities
    def value(self, theta: ArrayLike, X: ArrayLike, y: ArrayLike) -> FloatArray:
        """φ(⟨θ, x_i⟩, y_i) + (λ/2)‖θ‖², shape (n,)."""
        t = _as_theta(theta)
        return self.base.value(t, X, y) + 0.5 * self._l2 * float(t @ t)

    def per_example_gradients(self, theta: ArrayLike, X: ArrayLike, y: ArrayLike) -> FloatArray:
        """φ'(⟨θ, x_i⟩, y_i) x_i + λθ, shape (n, d)."""
        t = _as_theta(theta)
        return self.base.per_example_gradients(t, X, y) + self._l2 * t

    def gradient_sum(self, theta: ArrayLike, X: ArrayLike, y: ArrayLike) -> FloatArray:
        """Xᵀ φ'(Xθ, y) + n λ θ, shape (d,)."""
        t = _as_theta(theta)
        n = _as_matrix(X, t.shape[0]).shape[0]
        return np.asarray(self.base.gradient_sum(t, X, y) + (n * self._l2) * t, dtype=np.float64)

    def hessian_vector_product(self, theta: ArrayLike, X: ArrayLike, y: ArrayLike, v: ArrayLike) -> FloatArray:
        """(1/n) Xᵀ(φ'' ⊙ Xv) + λ v."""
        return self.base.hessian_vector_product(theta, X, y, v) + self._l2 * _as_theta(v)

    def hessian(self, theta: ArrayLike, X: ArrayLike, y: ArrayLike) -> FloatArray:
        """(1/n) Xᵀ diag(φ'') X + λ I."""
        H = self.base.hessian(theta, X, y)
        return H + self._l2 * np.eye(H.shape[0])

    def strong_convexity(self) -> float:
        """μ = λ (∇²ℓ_λ ⪰ λ I)."""
        return self._l2

    def smoothness(self, B_x: float) -> float:
        """β_λ = β + λ (‖∇²ℓ_λ‖ ≤ c B_x² + λ)."""
        return _up(Fraction(self.base.smoothness(B_x)) + Fraction(self._l2))

    def lipschitz(self, B_x: float, B_y: float = 1.0, R: float = math.inf) -> float:
        """G_λ = G + λ R on ‖θ‖ ≤ R (‖φ' x + λθ‖ ≤ G + λ‖θ‖); needs finite R when λ > 0."""
        G = self.base.lipschitz(B_x, B_y, R)
        R = _nonneg("R", R, allow_inf=True)
        if self._l2 == 0.0:
            return G
        if math.isinf(R):
            raise LossParameterError("R", "an L2-regularised loss is Lipschitz only on a bounded ball; give R")
        return _up(Fraction(G) + Fraction(self._l2) * Fraction(R))

    def minimizer_radius(self, B_y: float = 1.0) -> float:
        r"""Data-independent radius containing the regularised minimiser: r = sqrt(2 ℓ_max(0) / λ).

        Since φ ≥ 0, (λ/2)‖θ*‖² ≤ F(θ*) ≤ F(0) = mean φ(0, y_i) ≤ ℓ_max(0)  (F = mean ℓ + λ/2‖θ‖²).
        """
        if self._l2 == 0.0:
            raise LossParameterError("l2", "the minimiser is unbounded without regularisation; give R")
        return _sqrt_up(_up(2 * Fraction(self.max_loss_at_zero(B_y)) / Fraction(self._l2)))


# ---------------------------------------------------------------------------------------------------------
# multinomial logistic regression (a categorical label with k ≥ 3 classes)
# ---------------------------------------------------------------------------------------------------------


class MultinomialLogisticLoss:
    r"""The softmax cross-entropy of a k-class label: ``ℓ(Θ; x, y) = −log p_y``, ``p = softmax(Θ x)``.

    Parameters Θ ∈ R^{k×d} (one row θ_j per class, in the order of the declared levels; the intercept, if any,
    is the last column, as the design matrix's trailing 1), labels y ∈ {0, …, k−1} (the class index, stored as
    a float). Parameters are handled flattened row-major, ``vec(Θ) ∈ R^{k·d}``, so that the Frobenius norm of Θ
    is the L2 norm of the vector every GLM solver already projects, clips and perturbs. With z = Θx,

        ℓ = logsumexp(z) − z_y,      ∇_Θ ℓ = (p − e_y) xᵀ,      ∇²_{vec Θ} ℓ = (diag(p) − p pᵀ) ⊗ x xᵀ.      (M1)

    **Lipschitz constant** G = √2·B_x (on all of R^{k×d}): ‖(p − e_y) xᵀ‖_F = ‖p − e_y‖₂ ‖x‖₂ and
    ‖p − e_y‖₂² = (1 − p_y)² + Σ_{j≠y} p_j² ≤ (1 − p_y)² + (Σ_{j≠y} p_j)² = 2(1 − p_y)² ≤ 2.          (M2)

    **Smoothness** β = B_x²/2: the Hessian (M1) has spectral norm ‖diag(p) − ppᵀ‖₂ · ‖x‖², and for a unit
    v ∈ R^k, vᵀ(diag(p) − ppᵀ)v = Var_{j∼p}(v_j) ≤ (max_j v_j − min_j v_j)²/4 (Popoviciu) ≤ (|v_a| + |v_b|)²/4
    ≤ (v_a² + v_b²)/2 ≤ 1/2.                                                                            (M3)

    The loss is convex (the Hessian is a Kronecker product of two PSD matrices). ``l2`` adds (λ/2)‖Θ‖_F² to
    the objective's smoothness (the solvers add λΘ after the noise, as for the binary losses). Labels are never
    validated here (an error would leak, DESIGN §1.3): :meth:`class_index` maps ANY float to a class in
    {0, …, k−1}, so the bounds (M2) hold for every input.
    """

    name: ClassVar[str] = "logistic"
    is_classification: ClassVar[bool] = True

    def __init__(self, classes: int, l2: float = 0.0) -> None:
        if isinstance(classes, bool) or not isinstance(classes, int | np.integer) or int(classes) < 2:
            raise LossParameterError("classes", f"must be an integer ≥ 2, got {classes!r}")
        self.classes = int(classes)
        self.l2 = _nonneg("l2", l2)

    def __repr__(self) -> str:
        return f"MultinomialLogisticLoss(classes={self.classes}, l2={self.l2!r})"

    # --- shapes ----------------------------------------------------------------------------------------
    def parameter_dimension(self, d: int) -> int:
        """k·d: the length of vec(Θ) for rows of dimension d."""
        return self.classes * int(d)

    def as_matrix(self, theta: ArrayLike, d: int) -> FloatArray:
        """vec(Θ) (shape (k·d,) or (runs, k·d)) as Θ (shape (k, d) or (runs, k, d)), row-major."""
        t = np.asarray(theta, dtype=np.float64)
        if t.shape[-1] != self.classes * d:
            raise LossParameterError("theta", f"has length {t.shape[-1]}, expected k·d = {self.classes * d}")
        return t.reshape(*t.shape[:-1], self.classes, d)

    def class_index(self, y: ArrayLike) -> NDArray[np.int64]:
        """The class of each encoded label: round to the nearest integer in [0, k−1] (non-finite ↦ 0). Encoded
        labels are exactly 0.0, …, k−1 and map to themselves; anything else maps to SOME class, so (M2) holds."""
        v = np.asarray(y, dtype=np.float64)
        v = np.where(np.isfinite(v), v, 0.0)
        return np.clip(np.rint(v), 0, self.classes - 1).astype(np.int64)

    def identifiable(self, theta: ArrayLike) -> FloatArray:
        """vec(Θ) (shape (k·d,) or (runs, k·d)) projected onto V = {Θ : Σ_j θ_j = 0}: each column minus its mean
        over the classes. p = softmax(Θx) does not change when one vector is added to every row, and every
        per-example gradient lies in V (Σ_j (p_j − e_{y,j}) = 0), so the clipped sums do too; projecting a noisy sum
        onto V is post-processing that removes the noise's component along the k-fold repeated vectors, which
        moves no prediction (it would only inflate ‖Θ‖_F and so the projection onto the ball): the noise left
        has (k − 1)·d dimensions instead of k·d."""
        t = np.asarray(theta, dtype=np.float64)
        d = t.shape[-1] // self.classes
        matrix = self.as_matrix(t, d)
        return np.asarray((matrix - matrix.mean(axis=-2, keepdims=True)).reshape(t.shape))

    # --- values and gradients (Θ of shape (k, d)) --------------------------------------------------------
    def logits(self, Theta: ArrayLike, X: ArrayLike) -> FloatArray:
        """z = X Θᵀ, shape (n, k)."""
        return np.asarray(np.asarray(X, dtype=np.float64) @ np.asarray(Theta, dtype=np.float64).T)

    def probabilities(self, Theta: ArrayLike, X: ArrayLike) -> FloatArray:
        """softmax(Θ x) per row, shape (n, k): computed as exp(z − max z)/Σ (no overflow), rows sum to 1."""
        return np.asarray(softmax(self.logits(Theta, X), axis=1))

    def value(self, Theta: ArrayLike, X: ArrayLike, y: ArrayLike) -> FloatArray:
        """Per-example ℓ = logsumexp(z) − z_y (the stable log-sum-exp of :func:`scipy.special.log_softmax`)."""
        logp = log_softmax(self.logits(Theta, X), axis=1)
        return np.asarray(-logp[np.arange(logp.shape[0]), self.class_index(y)])

    def mean_value(self, Theta: ArrayLike, X: ArrayLike, y: ArrayLike) -> float:
        """(1/n) Σ ℓ_i + (λ/2)‖Θ‖_F²."""
        T = np.asarray(Theta, dtype=np.float64)
        return float(np.mean(self.value(T, X, y)) + 0.5 * self.l2 * float(np.sum(T * T)))

    def residuals(self, Theta: ArrayLike, X: ArrayLike, y: ArrayLike) -> FloatArray:
        """p − e_y per row, shape (n, k): the per-example gradient is its outer product with x (M1)."""
        r = self.probabilities(Theta, X)
        r[np.arange(r.shape[0]), self.class_index(y)] -= 1.0
        return r

    def per_example_gradients(self, Theta: ArrayLike, X: ArrayLike, y: ArrayLike) -> FloatArray:
        """(p_i − e_{y_i}) x_iᵀ per row, shape (n, k, d) (unregularised; for tests and audits, O(n·k·d))."""
        return np.asarray(np.einsum("nk,nd->nkd", self.residuals(Theta, X, y), np.asarray(X, dtype=np.float64)))

    def gradient_sum(self, Theta: ArrayLike, X: ArrayLike, y: ArrayLike) -> FloatArray:
        """Σ_i (p_i − e_{y_i}) x_iᵀ, shape (k, d) (unregularised)."""
        return np.asarray(self.residuals(Theta, X, y).T @ np.asarray(X, dtype=np.float64))

    # --- public constants ----------------------------------------------------------------------------
    def lipschitz(self, B_x: float, B_y: float = 1.0, R: float = math.inf) -> float:
        """G = √2·B_x (M2), rounded up; + λR with L2 regularisation on the ball of radius R. ``B_y`` is not used
        (the label enters through e_y only)."""
        G = _up(Fraction(_sqrt_up(2.0)) * Fraction(_nonneg("B_x", B_x)))
        if self.l2 == 0.0:
            return G
        R = _nonneg("R", R, allow_inf=True)
        if math.isinf(R):
            raise LossParameterError("R", "an L2-regularised loss is Lipschitz only on a bounded ball; give R")
        return _up(Fraction(G) + Fraction(self.l2) * Fraction(R))

    def smoothness(self, B_x: float) -> float:
        """β = B_x²/2 + λ (M3), rounded up."""
        B_x = _nonneg("B_x", B_x)
        return _up(Fraction(B_x) ** 2 / 2 + Fraction(self.l2))

    def strong_convexity(self) -> float:
        """λ (the unregularised loss is not strongly convex: p is invariant to adding a vector to every row)."""
        return self.l2

    # --- prediction ----------------------------------------------------------------------------------
    def predict(self, Theta: ArrayLike, X: ArrayLike) -> NDArray[np.int64]:
        """The most probable class index per row (the first on ties)."""
        return np.asarray(np.argmax(self.logits(Theta, X), axis=1), dtype=np.int64)


# ---------------------------------------------------------------------------------------------------------
# registry
# ---------------------------------------------------------------------------------------------------------

LOSS_REGISTRY: dict[str, type[GLMLoss]] = {
    "logistic": LogisticLoss,
    "linear": SquaredLoss,
    "huber": HuberLoss,
    "svm": SmoothedHingeLoss,
}


def available_models() -> tuple[str, ...]:
    """The model names accepted by :func:`make_loss`."""
    return tuple(LOSS_REGISTRY)


def make_loss(model: str, *, l2: float = 0.0, **public_params: float) -> GLMLoss:
    """Build the loss of ``model`` ("logistic", "linear", "huber", "svm") from its public parameters.

    ``public_params`` are the model's ``PARAMS`` (huber: ``delta`` > 0; svm: ``h`` ∈ (0, 1]); omitted ones
    take their defaults. ``l2 > 0`` wraps the loss in :class:`RegularizedLoss`.

    Raises:
        LossParameterError (a ValueError): unknown model (the message lists the valid names), unknown
        parameter (the message lists the model's parameters), or a parameter outside its domain.
    """
    if not isinstance(model, str) or model not in LOSS_REGISTRY:
        valid = ", ".join(repr(m) for m in LOSS_REGISTRY)
        raise LossParameterError("model", f"unknown model {model!r}; valid models are {valid}")
    cls = LOSS_REGISTRY[model]
    unknown = sorted(set(public_params) - set(cls.PARAMS))
    if unknown:
        accepted = ", ".join(repr(p) for p in cls.PARAMS) or "none"
        raise LossParameterError(
            unknown[0], f"is not a parameter of the {model!r} model (accepted: {accepted}, and 'l2')"
        )
    loss = cls(**public_params)
    l2 = _nonneg("l2", l2)
    return RegularizedLoss(loss, l2) if l2 > 0.0 else loss
