r"""The ReSQue gradient estimator for Gaussian-smoothed GLM losses (a library primitive, no privacy claim by itself).

Source: Carmon, Jambulapati, Jin, Lee, Liu, Sidford, Tian, "ReSQueing Parallel and Private Stochastic Convex
Optimization" (``/work/shared/papers/resque-private-sco.txt``), Section 2.1; service spec
``seed-004-resque.md`` §1, §2, §6.2 and §8 items 1–4.

**Losses** (paper Problem 2, spec §1). A sample loss is a margin loss ``f_i(θ) = φ(⟨θ, x_i⟩, y_i)``, convex in z and
``L_φ``-Lipschitz on all of R (the ReSQue queries ``x̄ + ξ`` leave any ball, so φ must be defined everywhere):

    ========  ====================================  ===============================================  ============
    model     φ(z, y)                               deterministic φ'(z, y)  (kink choice)            L_φ
    ========  ====================================  ===============================================  ============
    logistic  log(1 + e^{−yz})  (losses.py)         −y σ(−yz)                                        1
    svm       max(0, 1 − yz)    (hinge)             −y·1{yz < 1}            (0 at yz = 1)            1
    absolute  |z − y|                               sign(z − y)             (0 at z = y)             1
    quantile  ρ_τ(y − z) = max(τ(y−z), (τ−1)(y−z))  1 − τ if z > y, −τ if z < y  (0 at z = y)        max(τ, 1−τ)
    huber     H_δ(z − y)        (losses.py)         clip(z − y, −δ, δ)                               δ
    ========  ====================================  ===============================================  ============

Classification labels are ±1 (the constants hold for |y| ≤ 1); regression labels are any reals (privfit scales
numeric labels to [−1, 1]). A deterministic subgradient selection is what Lemmas 2 and 5 assume (spec §2).

**Gaussian convolution** (Def. 1, eq. (5)). ``f̂_ρ(θ) = E_{u~N(0, ρ² I_d)} f(θ + u)``. For a GLM it is
one-dimensional (spec §2 "GLM shortcut"): ``⟨θ + u, x⟩ ~ N(⟨θ, x⟩, ρ²‖x‖²)``, so

    f̂_ρ(θ; x, y) = φ̂(⟨θ, x⟩, y; ρ‖x‖),   φ̂(z, y; s) := E φ(z + sZ, y),  Z ~ N(0, 1),                     (1)
    ∇f̂_ρ(θ; x, y) = φ̂'(⟨θ, x⟩, y; ρ‖x‖) · x,   0 ≤ φ̂ − φ ≤ L_φ s E|Z| = L_φ s sqrt(2/π).                  (2)

Closed forms (Φ, ϕ the standard normal cdf/pdf; t := (·)/s):

* hinge, u = 1 − yz, σ = |y|s:  φ̂ = uΦ(u/σ) + σϕ(u/σ),  φ̂' = −yΦ(u/σ);
* absolute, r = z − y:  φ̂ = r erf(r/(s√2)) + 2sϕ(r/s) = r(2Φ(r/s) − 1) + 2sϕ(r/s),  φ̂' = 2Φ(r/s) − 1;
* quantile, r = z − y (ρ_τ(−r) = |r|/2 + (1/2 − τ)r):  φ̂ = rΦ(r/s) + sϕ(r/s) − τr,  φ̂' = Φ(r/s) − τ;
* huber (symmetric: use r ≥ 0, a = (−δ − r)/s, b = (δ − r)/s, W = r + sZ):
  φ̂' = E clip(W, −δ, δ) = δ(Φ(−b) − Φ(a)) + r(Φ(b) − Φ(a)) + s(ϕ(a) − ϕ(b)),
  φ̂ = ½[(r² + s²)(Φ(b) − Φ(a)) + 2rs(ϕ(a) − ϕ(b)) + s²(aϕ(a) − bϕ(b))]
      + δ(rΦ(−b) + sϕ(b)) − δ(rΦ(a) − sϕ(a)) − (δ²/2)(Φ(a) + Φ(−b));
* logistic, m = yz, σ = |y|s, ℓ(m) = log(1 + e^{−m}): Gauss–Hermite (64 nodes) in Z for σ ≤ 1.5; for σ > 1.5
  (where the integrand's feature of width 1/σ defeats Gauss–Hermite) the split ℓ(m) = max(0, −m) + h(m),
  h(m) = log(1 + e^{−|m|}) even: the hinge-like part in closed form, ∫ h(t) g(t) dt with g the N(m, σ²) density
  by 64-node Gauss–Laguerre on t ≥ 0 (h(t) e^{t} ∈ [log 2, 1] is smooth). Absolute error ≲ 1e-12 for all σ.

Scale 0 gives φ and the deterministic φ' exactly; every function depends on the scale only through |s|.

**ReSQue** (Def. 2). With centre x̄, query point x, ``v = x − x̄`` and ξ ~ N(0, ρ² I_d),

    ∇̃_x̄ f̂_ρ(x) = w(x; x̄, ξ) · ∂f(x̄ + ξ),   w = γ_ρ(v − ξ)/γ_ρ(ξ) = exp((2⟨v, ξ⟩ − ‖v‖²)/(2ρ²)).        (3)

The query point x̄ + ξ does not depend on x: only the scalar weight does. ERM form: the row i ~ Unif[n] is drawn
with replacement by the caller. Properties (tested in ``tests/solvers/resque/test_resque_estimator.py``):

* Lemma 1.1: ``E ∇̃ = ∇f̂_ρ(x)`` for every x̄ (with (1)–(2), ``E ∇̃ = φ̂'(⟨x, a⟩, y; ρ‖a‖) a`` for a GLM row a).
* log w ~ N(−‖v‖²/(2ρ²), ‖v‖²/ρ²), so ``E w^p = exp(p(p − 1)‖v‖²/(2ρ²))`` (proof of Lemma 2, via eq. (6)).
* Lemma 1.2: ``E‖∇̃‖² ≤ L² E w² = L² exp(‖v‖²/ρ²) ≤ 3L²`` for ‖v‖ ≤ ρ (the paper's eq. (7) writes
  exp(2‖v‖²/ρ²): a slip, the lemma holds).
* Lemma 2: for x, x' ∈ B_x̄(ρ/p), p ≥ 2: ``E w^p ≤ 2`` and ``E|w(x) − w(x')|^p ≤ (24p‖x − x'‖/ρ)^p``.

Weights are computed in log space with ξ and v scaled by 1/ρ first (no ρ² underflow), and are never clipped here:
clipping biases the estimator and voids Lemma 1 (clipping is the caller's business, spec §6.2). For ‖v‖ ≤ ρ,
log w has standard deviation ≤ 1, so overflow (log w > 709) is impossible in practice.

Everything is pure numpy/scipy; nothing looks at a private value to choose a scale or to raise an error: only
public parameters (model, τ, δ, ρ) and array shapes are validated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from numpy.polynomial.laguerre import laggauss
from numpy.typing import ArrayLike, NDArray
from scipy.special import erf, ndtr

from privfit.solvers.base import SolverParameterError
from privfit.solvers.losses import GLMLoss, make_loss

__all__ = [
    "RESQUE_MODELS",
    "MarginLoss",
    "glm_subgradient_scales",
    "glm_subgradients",
    "log_resque_weights",
    "make_margin_loss",
    "resque_gradients",
    "resque_weights",
    "smoothed_glm_gradients",
    "smoothed_glm_values",
]

FloatArray = NDArray[np.float64]

RESQUE_MODELS: tuple[str, ...] = ("logistic", "svm", "absolute", "quantile", "huber")

_CLASSIFICATION = frozenset({"logistic", "svm"})
_DEFAULT_TAU = 0.5
_DEFAULT_DELTA = 1.0

# Standardised arguments are clipped to ±_T_CLIP: Φ(−40) < 1e-349 and ϕ(40) underflow to 0 in float64, so the
# clip changes nothing representable, and it turns r/s = ±inf (s → 0⁺) into finite values (no 0·inf = nan).
_T_CLIP = 40.0
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_HALF = math.sqrt(0.5)

# Logistic smoothing by quadrature (module doc): Gauss–Hermite for the probabilists' weight e^{−x²/2}, normalised
# to a N(0, 1) expectation; Gauss–Laguerre for the remainder h(t) = log(1 + e^{−|t|}) on t ≥ 0, with the factor
# e^{t} h(t) folded into the weights (computed by numpy's logaddexp, i.e. the same φ as losses.LogisticLoss).
_GH_NODES_COUNT = 64
_GH_NODES, _GH_WEIGHTS = hermegauss(_GH_NODES_COUNT)
_GH_WEIGHTS = _GH_WEIGHTS / math.sqrt(2.0 * math.pi)
_LAG_NODES, _lag_w = laggauss(64)
_LAG_WEIGHTS = _lag_w * np.exp(_LAG_NODES) * np.logaddexp(0.0, -_LAG_NODES)
_LOGISTIC_GH_MAX_SCALE = 1.5
_QUAD_CHUNK = 8192  # elements per quadrature chunk: bounds the (chunk × 64) temporaries to 4 MiB
_LOGISTIC: GLMLoss = make_loss("logistic")  # ℓ(m) = φ(m, 1) = log(1 + e^{−m}), ℓ'(m) = φ'(m, 1)


# ---------------------------------------------------------------------------------------------------------
# small numerical helpers
# ---------------------------------------------------------------------------------------------------------


def _npdf(t: FloatArray) -> FloatArray:
    """Standard normal density ϕ(t) (t already clipped, so no overflow in t²)."""
    return _INV_SQRT_2PI * np.exp(-0.5 * t * t)


def _standardise(num: FloatArray, s: FloatArray) -> FloatArray:
    """clip(num / s, ±40) for s > 0 (inf from a tiny s is clipped, without an overflow warning)."""
    with np.errstate(over="ignore", divide="ignore"):
        t = num / s
    return np.clip(t, -_T_CLIP, _T_CLIP)


def _prepare(z: ArrayLike, y: ArrayLike, scale: ArrayLike) -> tuple[FloatArray, FloatArray, FloatArray]:
    zz, yy, ss = np.broadcast_arrays(
        np.asarray(z, dtype=np.float64), np.asarray(y, dtype=np.float64), np.abs(np.asarray(scale, dtype=np.float64))
    )
    return zz, yy, ss


def _select(scale: FloatArray, positive: NDArray[np.bool_], smooth: FloatArray, exact: FloatArray) -> FloatArray:
    """smooth where scale > 0, exact where scale == 0, nan where scale is nan."""
    return np.where(positive, smooth, np.where(np.isnan(scale), np.nan, exact)).astype(np.float64, copy=False)


# ---------------------------------------------------------------------------------------------------------
# the margin loss
# ---------------------------------------------------------------------------------------------------------


def _check_real(name: str, value: Any) -> float:
    if isinstance(value, bool | str | bytes):
        raise SolverParameterError(name, f"must be a real number, not a {type(value).__name__}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise SolverParameterError(name, f"must be a real number, got {type(value).__name__}") from None
    if not math.isfinite(number):
        raise SolverParameterError(name, f"must be finite, got {number!r}")
    return number


def _check_model(model: Any) -> str:
    if not isinstance(model, str) or model not in RESQUE_MODELS:
        valid = ", ".join(repr(m) for m in RESQUE_MODELS)
        raise SolverParameterError("model", f"unknown model {model!r} for ReSQue; valid models are {valid}")
    return model


def _check_tau(tau: Any) -> float:
    t = _check_real("quantile_tau", tau)
    if not 0.0 < t < 1.0:
        raise SolverParameterError("quantile_tau", f"the quantile level τ must lie in (0, 1), got {t!r}")
    return t


def _check_delta(delta: Any) -> float:
    d = _check_real("huber_delta", delta)
    if d <= 0.0:
        raise SolverParameterError("huber_delta", f"the Huber threshold δ must be > 0, got {d!r}")
    return d


def _constants(name: str, parameter: float | None) -> tuple[float, bool]:
    """(L_φ, classification) of a validated model."""
    if name == "quantile":
        assert parameter is not None
        return max(parameter, 1.0 - parameter), False
    if name == "huber":
        assert parameter is not None
        return parameter, False
    return 1.0, name in _CLASSIFICATION


@dataclass(frozen=True)
class MarginLoss:
    """ℓ(θ; x, y) = φ(⟨θ, x⟩, y): convex in its first argument, defined and L_φ-Lipschitz on all of R (spec §1: the
    ReSQue queries x̄ + ξ may leave the ball, so the loss must be defined everywhere).

    Build it with :func:`make_margin_loss`; direct construction is validated the same way (``lipschitz`` and
    ``classification`` must be the model's). Logistic and Huber delegate φ, φ' to :mod:`privfit.solvers.losses`.
    """

    name: str  # one of RESQUE_MODELS
    parameter: float | None  # τ ∈ (0, 1) for "quantile", δ > 0 for "huber", None otherwise
    lipschitz: float  # L_φ = sup |∂φ/∂z|
    classification: bool  # True for logistic and svm (labels ±1; predict sign), False for the regression losses
    _base: GLMLoss | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        name = _check_model(self.name)
        if name == "quantile":
            parameter: float | None = _check_tau(self.parameter)
        elif name == "huber":
            parameter = _check_delta(self.parameter)
        elif self.parameter is not None:
            raise SolverParameterError("parameter", f"the {name!r} model takes no parameter, got {self.parameter!r}")
        else:
            parameter = None
        lipschitz, classification = _constants(name, parameter)
        if self.lipschitz != lipschitz:
            raise SolverParameterError(
                "lipschitz", f"the {name!r} model has L_φ = {lipschitz!r}, got {self.lipschitz!r}"
            )
        if self.classification is not classification:
            raise SolverParameterError("classification", f"the {name!r} model has classification = {classification!r}")
        object.__setattr__(self, "parameter", parameter)
        if name == "logistic":
            object.__setattr__(self, "_base", make_loss("logistic"))
        elif name == "huber" and parameter is not None:
            object.__setattr__(self, "_base", make_loss("huber", delta=parameter))

    # --- φ and a deterministic φ' ----------------------------------------------------------------------
    def value(self, z: ArrayLike, y: ArrayLike) -> FloatArray:
        """φ(z, y), elementwise (broadcast)."""
        if self._base is not None:
            return np.asarray(self._base.phi(z, y), dtype=np.float64)
        zz, yy, _ = _prepare(z, y, 0.0)
        if self.name == "svm":
            return np.maximum(0.0, 1.0 - yy * zz)
        r = zz - yy
        if self.name == "absolute":
            return np.abs(r)
        tau = float(self.parameter)  # type: ignore[arg-type]
        return np.maximum(-tau * r, (1.0 - tau) * r)  # ρ_τ(y − z) with y − z = −r

    def derivative(self, z: ArrayLike, y: ArrayLike) -> FloatArray:
        """A DETERMINISTIC element of ∂φ/∂z (kinks: hinge 0 at yz = 1, absolute and quantile 0 at z = y);
        |·| ≤ lipschitz everywhere (for classification labels |y| ≤ 1)."""
        if self._base is not None:
            return np.asarray(self._base.dphi(z, y), dtype=np.float64)
        zz, yy, _ = _prepare(z, y, 0.0)
        if self.name == "svm":
            return np.where(yy * zz < 1.0, -yy, 0.0)
        r = zz - yy
        if self.name == "absolute":
            return np.sign(r)
        tau = float(self.parameter)  # type: ignore[arg-type]
        return np.where(r > 0.0, 1.0 - tau, np.where(r < 0.0, -tau, 0.0))

    # --- Gaussian smoothing φ̂(z, y; s) = E φ(z + sZ, y) --------------------------------------------------
    def smoothed_value(self, z: ArrayLike, y: ArrayLike, scale: ArrayLike) -> FloatArray:
        """E φ(z + scale·Z, y), Z ~ N(0, 1), elementwise (module doc (1)); scale 0 gives φ exactly."""
        return self._smoothed(z, y, scale, derivative=False)

    def smoothed_derivative(self, z: ArrayLike, y: ArrayLike, scale: ArrayLike) -> FloatArray:
        """d/dz of :meth:`smoothed_value` = E φ'(z + scale·Z, y); scale 0 gives the deterministic φ'."""
        return self._smoothed(z, y, scale, derivative=True)

    def _smoothed(self, z: ArrayLike, y: ArrayLike, scale: ArrayLike, *, derivative: bool) -> FloatArray:
        zz, yy, ss = _prepare(z, y, scale)
        exact = self.derivative(zz, yy) if derivative else self.value(zz, yy)
        if self.name in _CLASSIFICATION:
            ss = np.abs(yy) * ss  # φ(z + sZ, y) depends on y(z + sZ) = yz + |y|s Z' in law
        positive = ss > 0.0
        if not np.any(positive):
            return _select(ss, positive, exact, exact)
        s = np.where(positive, ss, 1.0)
        if self.name == "svm":
            u = 1.0 - yy * zz
            t = _standardise(u, s)
            smooth = -yy * ndtr(t) if derivative else u * ndtr(t) + s * _npdf(t)
        elif self.name == "absolute":
            r = zz - yy
            t = _standardise(r, s)
            smooth = erf(_SQRT_HALF * t) if derivative else r * erf(_SQRT_HALF * t) + 2.0 * s * _npdf(t)
        elif self.name == "quantile":
            tau = float(self.parameter)  # type: ignore[arg-type]
            r = zz - yy
            t = _standardise(r, s)
            smooth = ndtr(t) - tau if derivative else r * ndtr(t) + s * _npdf(t) - tau * r
        elif self.name == "huber":
            smooth = _huber_smoothed(zz - yy, s, float(self.parameter), derivative)  # type: ignore[arg-type]
        else:
            smooth = _logistic_smoothed(yy * zz, s, derivative)
            if derivative:
                smooth = yy * smooth
        return _select(ss, positive, smooth, exact)


def make_margin_loss(model: str, *, quantile_tau: float | None = None, huber_delta: float | None = None) -> MarginLoss:
    """The :class:`MarginLoss` of ``model`` ∈ :data:`RESQUE_MODELS` (defaults τ = 0.5, δ = 1.0).

    Raises:
        SolverParameterError: unknown model (field "model", the message lists the valid models); a parameter given
            for the wrong model (field "quantile_tau" or "huber_delta"); τ ∉ (0, 1) or δ ≤ 0 (same fields).
    """
    name = _check_model(model)
    if quantile_tau is not None and name != "quantile":
        raise SolverParameterError("quantile_tau", f"applies only to the 'quantile' model, not to {name!r}")
    if huber_delta is not None and name != "huber":
        raise SolverParameterError("huber_delta", f"applies only to the 'huber' model, not to {name!r}")
    parameter: float | None = None
    if name == "quantile":
        parameter = _check_tau(_DEFAULT_TAU if quantile_tau is None else quantile_tau)
    elif name == "huber":
        parameter = _check_delta(_DEFAULT_DELTA if huber_delta is None else huber_delta)
    lipschitz, classification = _constants(name, parameter)
    return MarginLoss(name=name, parameter=parameter, lipschitz=lipschitz, classification=classification)


# ---------------------------------------------------------------------------------------------------------
# smoothed Huber and logistic
# ---------------------------------------------------------------------------------------------------------


def _huber_smoothed(r: FloatArray, s: FloatArray, delta: float, derivative: bool) -> FloatArray:
    """E H_δ(r + sZ) or E clip(r + sZ, −δ, δ) for s > 0 (module doc), via the symmetry r ↦ |r|."""
    ra = np.abs(r)
    a = _standardise(-delta - ra, s)  # ≤ 0
    b = _standardise(delta - ra, s)
    p_lo = ndtr(a)  # P(W < −δ)
    p_hi = ndtr(-b)  # P(W > δ)
    # Φ(b) − Φ(a) without cancellation when b ≥ 0 (then both halves are ≥ 0); both tails are accurate when b < 0
    mid = np.where(b >= 0.0, 0.5 * (erf(_SQRT_HALF * b) + erf(-_SQRT_HALF * a)), ndtr(b) - p_lo)
    pa, pb = _npdf(a), _npdf(b)
    if derivative:
        return np.asarray(np.sign(r) * (delta * (p_hi - p_lo) + ra * mid + s * (pa - pb)), dtype=np.float64)
    inner = 0.5 * ((ra * ra + s * s) * mid + 2.0 * ra * s * (pa - pb) + s * s * (a * pa - b * pb))
    tails = delta * (ra * p_hi + s * pb) - delta * (ra * p_lo - s * pa) - 0.5 * delta * delta * (p_lo + p_hi)
    return np.asarray(inner + tails, dtype=np.float64)


def _logistic_smoothed(m: FloatArray, s: FloatArray, derivative: bool) -> FloatArray:
    """E ℓ(m + sZ) or E ℓ'(m + sZ) for ℓ(m) = log(1 + e^{−m}) and s > 0 (module doc), in chunks."""
    m_flat = np.ascontiguousarray(m, dtype=np.float64).ravel()
    s_flat = np.ascontiguousarray(s, dtype=np.float64).ravel()
    out = np.empty_like(m_flat)
    loss = _LOGISTIC
    for start in range(0, m_flat.size, _QUAD_CHUNK):
        sl = slice(start, start + _QUAD_CHUNK)
        mc, sc = m_flat[sl], s_flat[sl]
        res = np.empty_like(mc)
        small = sc <= _LOGISTIC_GH_MAX_SCALE
        if np.any(small):
            pts = mc[small, None] + sc[small, None] * _GH_NODES
            f = loss.dphi(pts, 1.0) if derivative else loss.phi(pts, 1.0)
            res[small] = f @ _GH_WEIGHTS
        large = ~small
        if np.any(large):
            ml, sl_ = mc[large], sc[large]
            # hinge-like part E max(0, −m − sZ) = uΦ(u/s) + sϕ(u/s), u = −m; d/dm = −Φ(−m/s)
            t = _standardise(-ml, sl_)
            # remainder ∫ h(t) g(t) dt = ∫_0^∞ h(t)(g(t) + g(−t)) dt, g = N(m, s²) density
            tp = _standardise(_LAG_NODES[None, :] - ml[:, None], sl_[:, None])
            tm = _standardise(-_LAG_NODES[None, :] - ml[:, None], sl_[:, None])
            gp, gm = _npdf(tp), _npdf(tm)
            if derivative:
                rem = ((gp * tp + gm * tm) @ _LAG_WEIGHTS) / (sl_ * sl_)
                res[large] = -ndtr(t) + rem
            else:
                rem = ((gp + gm) @ _LAG_WEIGHTS) / sl_
                res[large] = -ml * ndtr(t) + sl_ * _npdf(t) + rem
        out[sl] = res
    return out.reshape(np.shape(m))


# ---------------------------------------------------------------------------------------------------------
# GLM subgradients, ReSQue weights and estimates, exact smoothed gradients
# ---------------------------------------------------------------------------------------------------------


def _as_rows(name: str, A: ArrayLike) -> FloatArray:
    M = np.asarray(A, dtype=np.float64)
    if M.ndim != 2:
        raise SolverParameterError(name, f"must be a 2-D array (k, d), got ndim={M.ndim}")
    return M


def _as_labels(y: ArrayLike, k: int) -> FloatArray:
    v = np.asarray(y, dtype=np.float64)
    if v.shape != (k,):
        raise SolverParameterError("y", f"must have shape ({k},), got {v.shape}")
    return v


def _as_points(name: str, P: ArrayLike, k: int, d: int) -> FloatArray:
    M = np.asarray(P, dtype=np.float64)
    if M.shape not in ((d,), (k, d)):
        raise SolverParameterError(name, f"must have shape ({d},) or ({k}, {d}), got {M.shape}")
    return M


def _as_rho(rho: Any, *, allow_zero: bool = False) -> float:
    r = _check_real("rho", rho)
    if r < 0.0 or (r == 0.0 and not allow_zero):
        raise SolverParameterError("rho", f"the smoothing radius must be {'>= 0' if allow_zero else '> 0'}, got {r!r}")
    return r


def _margins(X: FloatArray, points: FloatArray) -> FloatArray:
    """⟨points_i, X_i⟩ for points (k, d), or X @ points for points (d,)."""
    if points.ndim == 1:
        return X @ points
    return np.asarray(np.einsum("ij,ij->i", X, points), dtype=np.float64)


def glm_subgradient_scales(loss: MarginLoss, X: FloatArray, y: FloatArray, points: FloatArray) -> FloatArray:
    """φ'(⟨points_i, X_i⟩, y_i), shape (k,): row i of :func:`glm_subgradients` is this scalar times X_i (so its
    norm is |φ'|·‖X_i‖ and it can be clipped without being formed)."""
    A = _as_rows("X", X)
    k, d = A.shape
    return np.asarray(loss.derivative(_margins(A, _as_points("points", points, k, d)), _as_labels(y, k)))


def glm_subgradients(loss: MarginLoss, X: FloatArray, y: FloatArray, points: FloatArray) -> FloatArray:
    """Row i: ∂f_i(points_i) = φ'(⟨points_i, X_i⟩, y_i)·X_i, shape (k, d); X (k, d), y (k,), points (k, d) or (d,)
    (broadcast). φ' is the loss's deterministic subgradient selection, so ‖row i‖ ≤ L_φ ‖X_i‖."""
    A = _as_rows("X", X)
    k, d = A.shape
    lab = _as_labels(y, k)
    P = _as_points("points", points, k, d)
    return loss.derivative(_margins(A, P), lab)[:, None] * A


def log_resque_weights(v: FloatArray, xi: FloatArray, rho: float) -> FloatArray:
    """log w_i = (2⟨v, ξ_i⟩ − ‖v‖²)/(2ρ²) for v = x − x̄ (shape (d,) or (k, d)) and ξ (k, d): spec §2, Def. 1.

    Computed as ⟨v/ρ, ξ_i/ρ⟩ − ‖v/ρ‖²/2 (no ρ² under/overflow); shape (k,).
    """
    r = _as_rho(rho)
    Xi = _as_rows("xi", xi)
    k, d = Xi.shape
    V = _as_points("v", v, k, d)
    vs = V / r
    zs = Xi / r
    if vs.ndim == 1:
        return zs @ vs - 0.5 * float(vs @ vs)
    return np.asarray(np.einsum("ij,ij->i", zs, vs) - 0.5 * np.einsum("ij,ij->i", vs, vs))


def resque_weights(v: FloatArray, xi: FloatArray, rho: float) -> FloatArray:
    """w_i = exp(:func:`log_resque_weights`), shape (k,) (may overflow to inf only for ‖v‖ ≫ ρ)."""
    return np.asarray(np.exp(log_resque_weights(v, xi, rho)))


def resque_gradients(
    loss: MarginLoss, X: FloatArray, y: FloatArray, center: FloatArray, xi: FloatArray, x: FloatArray, rho: float
) -> FloatArray:
    """The block of ReSQue estimates w(x; x̄, ξ_i)·∂f_i(x̄ + ξ_i), shape (k, d) — Def. 2's ERM form with the rows i
    already chosen by the caller. Computed in log space; no clipping of weights (clipping is the caller's business).

    ``center`` (x̄) and ``x`` are (d,) or (k, d); ``xi`` is (k, d); row i uses ξ_i, X_i, y_i. The weight is
    exponentiated once from :func:`log_resque_weights` and multiplies the scalar φ'_i before the row X_i; a zero
    subgradient gives exactly 0 even if w_i overflows (possible only for ‖v‖ ≫ ρ, outside Lemmas 1.2 and 2). At
    x = x̄ the weights are exactly 1 and the result equals :func:`glm_subgradients` at x̄ + ξ bit for bit.
    """
    A = _as_rows("X", X)
    k, d = A.shape
    lab = _as_labels(y, k)
    c = _as_points("center", center, k, d)
    Xi = _as_rows("xi", xi)
    if Xi.shape != (k, d):
        raise SolverParameterError("xi", f"must have shape ({k}, {d}), got {Xi.shape}")
    q = _as_points("x", x, k, d)
    w = np.exp(log_resque_weights(q - c, Xi, rho))
    dphi = loss.derivative(_margins(A, c + Xi), lab)
    with np.errstate(invalid="ignore"):  # inf·0 only where w overflowed (‖v‖ ≫ ρ): those rows are exactly 0
        coef = np.where(dphi == 0.0, 0.0, w * dphi)
    return coef[:, None] * A


def smoothed_glm_gradients(loss: MarginLoss, X: FloatArray, y: FloatArray, theta: FloatArray, rho: float) -> FloatArray:
    """Exact per-row ∇_θ f̂_ρ(θ; x_i, y_i) = φ̂'(⟨θ, x_i⟩, y_i; ρ‖x_i‖)·x_i, shape (k, d), where f̂_ρ(θ) = E f(θ + ρZ_d)
    = E φ(⟨θ, x⟩ + ρ‖x‖Z, y) (spec §2 'GLM shortcut'). The test oracle for unbiasedness.

    ``theta`` is (d,) or (k, d) (one point per row); ρ ≥ 0 (ρ = 0 gives :func:`glm_subgradients`).
    """
    A = _as_rows("X", X)
    k, d = A.shape
    lab = _as_labels(y, k)
    t = _as_points("theta", theta, k, d)
    r = _as_rho(rho, allow_zero=True)
    scale = r * np.linalg.norm(A, axis=1)
    return loss.smoothed_derivative(_margins(A, t), lab, scale)[:, None] * A


def smoothed_glm_values(loss: MarginLoss, X: FloatArray, y: FloatArray, theta: FloatArray, rho: float) -> FloatArray:
    """Per-row f̂_ρ(θ; x_i, y_i) = φ̂(⟨θ, x_i⟩, y_i; ρ‖x_i‖), shape (k,); 0 ≤ f̂_ρ − f ≤ L_φ ρ‖x_i‖ sqrt(2/π)."""
    A = _as_rows("X", X)
    k, d = A.shape
    lab = _as_labels(y, k)
    t = _as_points("theta", theta, k, d)
    r = _as_rho(rho, allow_zero=True)
    scale = r * np.linalg.norm(A, axis=1)
    return loss.smoothed_value(_margins(A, t), lab, scale)
