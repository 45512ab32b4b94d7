"""Exact truncated isotropic Gaussians on a Euclidean ball, and their log-normalisers (spec §2.6, §5.3).

For P-COMW-TG (spec §5.3) every Gibbs measure μ̄_t of Algorithm 1 (paper eqs. 3.1–3.3) is
``N(m, σ² I_d)`` restricted to ``K = B(0, R)``.  This module provides, as numpy/scipy functions (the 1-D rejection
kernel compiled with numba):

* :func:`log_chi2_cdf` — ``log F_{χ²_k}(w)``, stable where ``gammainc`` underflows (series, spec §5.3);
* :func:`log_ball_mass` — ``LBM = log Pr_{X~N(m,σ²I)}[‖X‖ ≤ R]`` as a function of ν = ‖m‖ (vectorised): d = 1 closed
  form, ``ncx2.logcdf`` fast path where it is > −600, otherwise the exact 1-D integral
  ``log ∫_{−R}^{R} φ_σ(s−ν) F_{χ²_{d−1}}((R²−s²)/σ²) ds`` in log space (spec §5.3 "LBM");
* :func:`log_partition` — ``log Z`` of ``exp(−β((κ/2)‖x‖² + ⟨S, x⟩ + c))`` on the ball (spec §5.3, §2.6 table);
* :class:`TruncatedGaussianSampler` — EXACT draws (no MCMC) with a FIXED number of proposals and random draws per
  draw (issue 18: no loop until acceptance, whose length would depend on the target, i.e. on private prefix sums):
  naive rejection, or the 2-D reduction — s = ⟨x, e⟩ from the log-concave density ∝ e^{h(s)} and q = ‖x_⊥‖²/σ²
  from a χ²_{d−1} truncated to [0, (R²−s²)/σ²], each by rejection from a three-piece envelope (tangents at the
  points where h = max h − 1, flat between) whose acceptance is ≥ 1/(1 + e) for every log-concave target, then a
  uniform direction. A draw whose proposals are all rejected returns the public point 0; its probability is
  bounded from public quantities (the solver charges it as a δ);
* :func:`sample_truncated_gaussian` — the same draws for a given target (tests and direct use; the path chosen from
  the target's own ball mass, failure probability ≤ 2⁻⁴⁰ per draw).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numba
import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from privfit.solvers.base import SolverParameterError

__all__ = [
    "LOG_CONCAVE_ACCEPTANCE",
    "NAIVE_MAX_NORMALS",
    "TruncatedGaussianSampler",
    "log_ball_escape",
    "log_ball_mass",
    "log_chi2_cdf",
    "log_partition",
    "projection_log_density",
    "sample_truncated_gaussian",
]

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
#: Fast path threshold for ``ncx2.logcdf`` (spec §5.3: use it only if the result is > −600).
_NCX2_SAFE = -600.0
#: Tail cut of the 1-D integrand: where h drops this many nats below its maximum (spec §5.3: 60 nats).
_TAIL_NATS = 60.0
#: Gauss–Legendre nodes per panel (spec §5.3: two 96-node panels).
_GL_NODES = 96
_BISECTION_STEPS = 100
_SERIES_TERMS = 400


def _as_float(name: str, value: float, *, positive: bool = True) -> float:
    value = float(value)
    if not math.isfinite(value) or (positive and value <= 0.0) or (not positive and value < 0.0):
        raise SolverParameterError(name, f"must be a finite number {'>' if positive else '≥'} 0, got {value!r}")
    return value


def _check_d(d: int) -> int:
    if isinstance(d, bool) or int(d) != d or d < 1:
        raise SolverParameterError("d", f"must be an integer ≥ 1, got {d!r}")
    return int(d)


def log_chi2_cdf(w: ArrayLike, k: int) -> NDArray[np.float64]:
    """``log F_{χ²_k}(w)`` for w ≥ 0 (−inf at w = 0), stable where the regularised gamma underflows.

    ``log gammainc(k/2, w/2)`` while that is above 1e-280, else the series (spec §5.3)
    ``(k/2)log(w/2) − w/2 − lgamma(k/2+1) + log Σ_n (w/2)^n/((k/2+1)…(k/2+n))``.
    """
    w = np.asarray(w, dtype=float)
    shape = w.shape
    a = 0.5 * k
    x = 0.5 * np.maximum(w.ravel(), 0.0)
    with np.errstate(divide="ignore"):
        P = special.gammainc(a, x)
        out = np.log(P)
    small = (P < 1e-280) & (x > 0.0)
    if np.any(small):
        xs = x[small]
        n = np.arange(1, _SERIES_TERMS + 1, dtype=float)
        # log of the n-th term: n log x − Σ_{j≤n} log(a + j)
        log_terms = n[None, :] * np.log(xs)[:, None] - np.cumsum(np.log(a + n))[None, :]
        log_terms = np.concatenate([np.zeros((xs.size, 1)), log_terms], axis=1)
        series = special.logsumexp(log_terms, axis=1)
        out[small] = a * np.log(xs) - xs - special.gammaln(a + 1.0) + series
    out[x <= 0.0] = -np.inf
    return np.asarray(out.reshape(shape), dtype=np.float64)


def _log_chi2_pdf(w: NDArray[np.float64], k: int) -> NDArray[np.float64]:
    a = 0.5 * k
    with np.errstate(divide="ignore"):
        return np.asarray((a - 1.0) * np.log(w) - 0.5 * w - a * math.log(2.0) - special.gammaln(a), dtype=np.float64)


def projection_log_density(s: ArrayLike, nu: ArrayLike, sigma: ArrayLike, R: float, d: int) -> NDArray[np.float64]:
    """h(s): log of the (unnormalised over s, exactly normalised over x) density of s = ⟨X, e⟩, e = m/‖m‖.

    ``h(s) = −(s−ν)²/(2σ²) − log(σ√(2π)) + log F_{χ²_{d−1}}((R² − s²)/σ²)`` on [−R, R] (spec §5.3), so that
    ``log ∫_{−R}^{R} e^{h} ds = LBM``.  Concave in s for d ≥ 2.  Requires d ≥ 2.
    """
    s, nu, sigma = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (s, nu, sigma)))
    w = (R - s) * (R + s) / (sigma * sigma)
    gauss = -0.5 * ((s - nu) / sigma) ** 2 - np.log(sigma) - _LOG_SQRT_2PI
    return np.asarray(gauss + log_chi2_cdf(w, d - 1), dtype=np.float64)


def _projection_log_density_slope(
    s: NDArray[np.float64], nu: NDArray[np.float64], sigma: NDArray[np.float64], R: float, d: int
) -> NDArray[np.float64]:
    """Analytic h'(s) = −(s−ν)/σ² − (2s/σ²)·f_{χ²_{d−1}}(w)/F_{χ²_{d−1}}(w), w = (R²−s²)/σ² (spec §5.3)."""
    w = (R - s) * (R + s) / (sigma * sigma)
    with np.errstate(over="ignore", invalid="ignore"):
        ratio = np.exp(_log_chi2_pdf(w, d - 1) - log_chi2_cdf(w, d - 1))
    return -(s - nu) / sigma**2 - (2.0 * s / sigma**2) * ratio


def _relative_log_density(
    s: ArrayLike, ref: ArrayLike, nu: ArrayLike, sigma: ArrayLike, R: float, d: int
) -> NDArray[np.float64]:
    """h(s) − h(ref) without cancellation: the Gaussian part as −(s − ref)(s + ref − 2ν)/(2σ²).

    When ν ≫ R and σ ≪ R, h itself is ~−1e7 while its variation near the mode is O(1); differencing two rounded
    h values would lose ~1e-9 absolute, enough to break an exact rejection envelope.
    """
    s, ref, nu, sigma = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (s, ref, nu, sigma)))
    w = (R - s) * (R + s) / (sigma * sigma)
    w_ref = (R - ref) * (R + ref) / (sigma * sigma)
    gauss = -(s - ref) * (s + ref - 2.0 * nu) / (2.0 * sigma * sigma)
    return np.asarray(gauss + log_chi2_cdf(w, d - 1) - log_chi2_cdf(w_ref, d - 1), dtype=np.float64)


def _mode(
    nu: NDArray[np.float64], sigma: NDArray[np.float64], R: float, d: int, steps: int = _BISECTION_STEPS
) -> NDArray[np.float64]:
    """Maximiser of the concave h on (−R, R) by bisection on h' (h' → ±∞ at ∓R for d ≥ 2)."""
    lo = np.full(nu.shape, -R)
    hi = np.full(nu.shape, R)
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        slope = _projection_log_density_slope(mid, nu, sigma, R, d)
        up = slope > 0.0
        lo = np.where(up, mid, lo)
        hi = np.where(up, hi, mid)
    return np.asarray(0.5 * (lo + hi), dtype=np.float64)


def _tail_point(
    mode: NDArray[np.float64],
    end: float,
    nu: NDArray[np.float64],
    sigma: NDArray[np.float64],
    R: float,
    d: int,
) -> NDArray[np.float64]:
    """Point between the mode and ``end`` (= ±R) where h = h(mode) − 60 (or ``end`` itself), by bisection."""
    inner = mode.copy()
    outer = np.full(mode.shape, end)
    for _ in range(_BISECTION_STEPS):
        mid = 0.5 * (inner + outer)
        above = _relative_log_density(mid, mode, nu, sigma, R, d) > -_TAIL_NATS
        inner = np.where(above, mid, inner)
        outer = np.where(above, outer, mid)
    return outer


def _log_integral_panel(
    start: NDArray[np.float64],
    stop: NDArray[np.float64],
    h_max: NDArray[np.float64],
    nu: NDArray[np.float64],
    sigma: NDArray[np.float64],
    R: float,
    d: int,
) -> NDArray[np.float64]:
    """log ∫ exp(h) between ``start`` (the mode) and ``stop`` (a tail point), Gauss–Legendre with s = stop −
    (stop − start)·v² so that a (R − s)^{k/2} endpoint behaviour at ±R becomes smooth in v."""
    nodes, weights = np.polynomial.legendre.leggauss(_GL_NODES)
    v = 0.5 * (nodes + 1.0)  # on [0, 1]
    wv = 0.5 * weights
    length = stop - start
    s = stop[:, None] - length[:, None] * v[None, :] ** 2
    h = _relative_log_density(s, start[:, None], nu[:, None], sigma[:, None], R, d)
    jac = 2.0 * np.abs(length)[:, None] * v[None, :]
    with np.errstate(divide="ignore"):
        return np.asarray(h_max + special.logsumexp(h + np.log(jac * wv[None, :]), axis=1), dtype=np.float64)


def _log_ball_mass_robust(nu: NDArray[np.float64], sigma: NDArray[np.float64], R: float, d: int) -> NDArray[np.float64]:
    mode = _mode(nu, sigma, R, d)
    h_max = projection_log_density(mode, nu, sigma, R, d)
    left = _tail_point(mode, -R, nu, sigma, R, d)
    right = _tail_point(mode, R, nu, sigma, R, d)
    return np.logaddexp(
        _log_integral_panel(mode, left, h_max, nu, sigma, R, d),
        _log_integral_panel(mode, right, h_max, nu, sigma, R, d),
    )


def log_ball_mass(nu: ArrayLike, sigma: ArrayLike, R: float, d: int, *, fast_path: bool = True) -> NDArray[np.float64]:
    """LBM = ``log Pr_{X~N(m, σ²I_d)}[‖X‖ ≤ R]`` with ν = ‖m‖, vectorised over (ν, σ) (spec §5.3).

    d = 1: ``log(Φ_N((R−ν)/σ) − Φ_N((−R−ν)/σ))``.  d ≥ 2: ``ncx2.logcdf(R²/σ², d, ν²/σ²)`` where that is > −600
    (``fast_path``), else the exact 1-D integral of e^{h} (:func:`projection_log_density`) over [−R, R] by
    bisection for the mode and 60-nat tail points plus two 96-node Gauss–Legendre panels.
    """
    R = _as_float("R", R)
    d = _check_d(d)
    nu_a, sigma_a = np.broadcast_arrays(np.asarray(nu, dtype=float), np.asarray(sigma, dtype=float))
    shape = nu_a.shape
    nu_f = np.abs(nu_a.ravel())
    sigma_f = sigma_a.ravel().copy()
    if not (np.all(np.isfinite(nu_f)) and np.all(np.isfinite(sigma_f)) and np.all(sigma_f > 0.0)):
        raise SolverParameterError("sigma", "ν must be finite and σ finite and > 0")
    if d == 1:
        # ν ≥ 0, so (−R−ν)/σ < (R−ν)/σ and the lower argument is ≤ 0: log(e^a − e^b) has no cancellation issue
        a = special.log_ndtr((R - nu_f) / sigma_f)
        b = special.log_ndtr((-R - nu_f) / sigma_f)
        out = a + np.log(-np.expm1(b - a))
        return np.asarray(out.reshape(shape), dtype=np.float64)
    out = np.full(nu_f.shape, np.nan)
    todo = np.ones(nu_f.shape, dtype=bool)
    if fast_path:
        from scipy import stats  # 0.2 s to import: paid by the first dp_lazy_oco fit, not by every process start

        with np.errstate(all="ignore"):
            fast = stats.ncx2.logcdf((R / sigma_f) ** 2, d, (nu_f / sigma_f) ** 2)
        good = np.isfinite(fast) & (fast > _NCX2_SAFE)
        out[good] = np.minimum(fast[good], 0.0)
        todo = ~good
    if np.any(todo):
        out[todo] = _log_ball_mass_robust(nu_f[todo], sigma_f[todo], R, d)
    return out.reshape(shape)


def log_partition(
    S: ArrayLike, kappa: ArrayLike, beta: float, R: float, d: int, c: ArrayLike = 0.0
) -> NDArray[np.float64]:
    """``log Z = log ∫_{‖x‖≤R} exp(−β((κ/2)‖x‖² + ⟨S, x⟩ + c)) dx``, vectorised over leading axes.

    Spec §5.3: ``β‖S‖²/(2κ) + (d/2) log(2πσ²) + LBM(‖m‖, σ, R, d) − βc`` with ``m = −S/κ``, ``σ = (βκ)^{−1/2}``.
    ``S`` has shape (..., d) (the running sum S_{t−1} = Σ_{τ<t} g_τ), ``kappa`` = λ + Σ_{τ<t} a_τ and ``c`` the
    running sum of the loss constants (all broadcast over the leading axes).
    """
    S = np.asarray(S, dtype=float)
    kappa = np.asarray(kappa, dtype=float)
    c = np.asarray(c, dtype=float)
    norm_S = np.linalg.norm(S, axis=-1)
    sigma = 1.0 / np.sqrt(beta * kappa)
    nu = norm_S / kappa
    lbm = log_ball_mass(nu, np.broadcast_to(sigma, nu.shape), R, d)
    energy = beta * norm_S**2 / (2.0 * kappa) + 0.5 * d * np.log(2.0 * math.pi * sigma**2)
    return np.asarray(energy + lbm - beta * c, dtype=np.float64)


# ----------------------------------------------------------------------------------------------------------------
# Exact sampler with a FIXED number of proposals (issue 18: no data-dependent loop, no data-dependent draw count)
# ----------------------------------------------------------------------------------------------------------------

#: Public lower bound on the acceptance probability of one proposal of :func:`_sample_log_concave` (proof: ≥ 1/(1+e)
#: ≈ 0.269 with exact mode and level points, module docstring of :class:`TruncatedGaussianSampler`).
LOG_CONCAVE_ACCEPTANCE = 0.25
#: The naive path is planned when its M proposals need at most this many normals per draw (M·d): it is then
#: cheaper than the reduction's envelope construction (~4 bisections of 50 steps on special functions).
NAIVE_MAX_NORMALS = 2**17
#: Per-draw failure probability of :func:`sample_truncated_gaussian` (the public helper; the solver plans its own).
HELPER_FAILURE_PROBABILITY = 2.0**-40
#: Bisection steps of the envelope construction: brackets shrink to 2^-50 of the interval, against a density
#: width ≥ σ²/(2ν) ≥ 5e-10·R over the validated range (σ/R ≥ 1e-3, ν/R ≤ 1e3) — a relative error ≤ 2e-6.
_ENVELOPE_STEPS = 50
#: Constant added to the envelope (in log space) against the rounding of h; a constant keeps the draws exact.
_ENVELOPE_SLACK = 1e-9


#: Target kinds of the compiled 1-D sampler: h(s) = −(s − μ)²/(2σ²); the projection density h of
#: :func:`projection_log_density` (k = d − 1 degrees of freedom); the χ²_k log-density (k/2 − 1) log q − q/2.
_GAUSSIAN, _PROJECTION, _CHI_SQUARE = 0, 1, 2
_SERIES_EPS = 1e-17
_SERIES_MAX_TERMS = 100_000
_TINY = 1e-300


@numba.njit(cache=True, nogil=True)
def _log_gamma_p(a: float, x: float) -> float:
    """log P(a, x), the regularised lower incomplete gamma function, in log space (no underflow): the series
    P = e^{−x}x^a/Γ(a) Σ_n x^n/(a(a+1)…(a+n)) for x < a + 1, else log(1 − Q) with Q by Lentz's continued
    fraction (Press et al., *Numerical Recipes*, §6.2; relative accuracy ~1e-15, checked against scipy)."""
    if not x > 0.0:
        return -math.inf
    if x < a + 1.0:
        term = 1.0 / a
        total = term
        denominator = a
        for _ in range(_SERIES_MAX_TERMS):
            denominator += 1.0
            term *= x / denominator
            total += term
            if term < total * _SERIES_EPS:
                break
        return a * math.log(x) - x - math.lgamma(a) + math.log(total)
    b = x + 1.0 - a
    c = 1.0 / _TINY
    d = 1.0 / b
    h = d
    for i in range(1, _SERIES_MAX_TERMS):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        if abs(d) < _TINY:
            d = _TINY
        c = b + an / c
        if abs(c) < _TINY:
            c = _TINY
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < _SERIES_EPS:
            break
    return math.log1p(-math.exp(-x + a * math.log(x) - math.lgamma(a) + math.log(h)))


@numba.njit(cache=True, nogil=True)
def _log_chi2_cdf_scalar(w: float, k: float) -> float:
    return _log_gamma_p(0.5 * k, 0.5 * w)


@numba.njit(cache=True, nogil=True)
def _target_rel(kind: int, s: float, ref: float, p0: float, p1: float, R: float, k: float) -> float:
    """h(s) − h(ref) of the target, without cancellation (−inf outside the support)."""
    if kind == _GAUSSIAN:
        return -(s - ref) * (s + ref - 2.0 * p0) / (2.0 * p1 * p1)
    if kind == _PROJECTION:
        w = (R - s) * (R + s) / (p1 * p1)
        w_ref = (R - ref) * (R + ref) / (p1 * p1)
        if not w > 0.0:
            return -math.inf
        gauss = -(s - ref) * (s + ref - 2.0 * p0) / (2.0 * p1 * p1)
        return gauss + _log_chi2_cdf_scalar(w, k) - _log_chi2_cdf_scalar(w_ref, k)
    if not s > 0.0:
        return -math.inf if k > 2.0 else 0.5 * ref
    linear = -0.5 * (s - ref)
    return linear if k == 2.0 else (0.5 * k - 1.0) * (math.log(s) - math.log(ref)) + linear


@numba.njit(cache=True, nogil=True)
def _target_slope(kind: int, s: float, p0: float, p1: float, R: float, k: float) -> float:
    """h′(s) of the target (±inf at a boundary where h → −∞)."""
    if kind == _GAUSSIAN:
        return -(s - p0) / (p1 * p1)
    if kind == _PROJECTION:
        w = (R - s) * (R + s) / (p1 * p1)
        if not w > 0.0:
            return -math.inf if s > 0.0 else math.inf
        log_pdf = (0.5 * k - 1.0) * math.log(w) - 0.5 * w - 0.5 * k * math.log(2.0) - math.lgamma(0.5 * k)
        ratio = math.exp(min(log_pdf - _log_chi2_cdf_scalar(w, k), 700.0))
        return -(s - p0) / (p1 * p1) - (2.0 * s / (p1 * p1)) * ratio
    if not s > 0.0:
        return math.inf if k > 2.0 else -0.5
    return (0.5 * k - 1.0) / s - 0.5


@numba.njit(cache=True, nogil=True)
def _log_tail_mass(rate: float, length: float) -> float:
    """log ∫_0^L e^{−rate·t} dt, stable for any sign and size of rate·L."""
    x = rate * length
    if x > 1e-12:
        return math.log(-math.expm1(-x)) - math.log(rate)
    if x < -1e-12:  # (e^{−x} − 1)/|rate|, as −x + log(1 − e^{x}) where e^{−x} would overflow
        grown = -x + math.log(-math.expm1(x)) if -x > 700.0 else math.log(math.expm1(-x))
        return grown - math.log(-rate)
    return math.log(length) if length > 0.0 else -math.inf


@numba.njit(cache=True, nogil=True)
def _sample_exponential(rate: float, length: float, u: float) -> float:
    """Inverse-CDF draw of t ∈ [0, L] with density ∝ e^{−rate·t}."""
    x = rate * length
    if x > 1e-12:
        t = -math.log1p(u * math.expm1(-x)) / rate
    elif x < -1e-12:  # increasing density: t = L + log(u + (1 − u) e^{−|rate| L})/|rate|
        t = length + math.log(u + (1.0 - u) * math.exp(x)) / -rate
    else:
        t = u * length
    return min(max(t, 0.0), length)


@numba.njit(cache=True, nogil=True)
def _sample_log_concave_kernel(
    kind: int, p0: float, p1: float, R: float, k: float, lo: float, hi: float, uniforms: np.ndarray
) -> tuple[float, bool]:
    """One draw from the density ∝ e^{h} on [lo, hi] (h concave) with EXACTLY M = ``uniforms.shape[0]``
    proposals, all evaluated (fixed work); returns (the first accepted proposal, True) or (0, False)."""
    a, b = lo, hi
    for _ in range(_ENVELOPE_STEPS):
        mid = 0.5 * (a + b)
        if _target_slope(kind, mid, p0, p1, R, k) > 0.0:
            a = mid
        else:
            b = mid
    c = 0.5 * (a + b)
    top = abs(_target_slope(kind, c, p0, p1, R, k)) * (b - a)  # U − h(c) ≥ max h − h(c) (concavity)
    # the points l < c < r where h = h(c) − 1 (or the ends)
    ends = (lo, hi)
    points = [c, c]
    for side in range(2):
        inner, outer = c, ends[side]
        for _ in range(_ENVELOPE_STEPS):
            mid = 0.5 * (inner + outer)
            if _target_rel(kind, mid, c, p0, p1, R, k) > -1.0:
                inner = mid
            else:
                outer = mid
        points[side] = inner
    left, right = points[0], points[1]
    rel_left = _target_rel(kind, left, c, p0, p1, R, k)
    rel_right = _target_rel(kind, right, c, p0, p1, R, k)
    g_left = _target_slope(kind, left, p0, p1, R, k)
    g_right = _target_slope(kind, right, p0, p1, R, k)
    use_left = math.isfinite(rel_left) and math.isfinite(g_left) and left > lo
    use_right = math.isfinite(rel_right) and math.isfinite(g_right) and right < hi
    if not use_left:  # the flat piece reaches the end (U bounds h there too)
        left = lo
    if not use_right:
        right = hi
    mass_left = rel_left + _log_tail_mass(g_left, left - lo) if use_left else -math.inf
    mass_mid = math.log(right - left) + top if right > left else -math.inf
    mass_right = rel_right + _log_tail_mass(-g_right, hi - right) if use_right else -math.inf
    largest = max(mass_left, mass_mid, mass_right)
    if not (math.isfinite(largest) and math.isfinite(top)):
        return 0.0, False
    w_left = math.exp(mass_left - largest)
    w_mid = math.exp(mass_mid - largest)
    total = w_left + w_mid + math.exp(mass_right - largest)
    cut_left, cut_mid = w_left / total, (w_left + w_mid) / total
    value, found = 0.0, False
    for m in range(uniforms.shape[0]):
        u_piece, u_position, u_accept = uniforms[m, 0], uniforms[m, 1], uniforms[m, 2]
        if u_piece < cut_left:
            t = _sample_exponential(g_left, left - lo, u_position)
            proposal, envelope = left - t, rel_left - g_left * t
        elif u_piece < cut_mid or not use_right:
            proposal, envelope = left + u_position * (right - left), top
        else:
            t = _sample_exponential(-g_right, hi - right, u_position)
            proposal, envelope = right + t, rel_right + g_right * t
        accepted = math.log(u_accept) < _target_rel(kind, proposal, c, p0, p1, R, k) - envelope - _ENVELOPE_SLACK
        if accepted and not found:
            value, found = proposal, True
    return value, found


@numba.njit(cache=True, nogil=True)
def _sample_log_concave(
    kind: int, p0: np.ndarray, p1: np.ndarray, R: float, k: float, lo: np.ndarray, hi: np.ndarray,
    uniforms: np.ndarray, out: np.ndarray, ok: np.ndarray,
) -> None:  # fmt: skip
    """:func:`_sample_log_concave_kernel` for each column j of ``uniforms`` (M, 3, size)."""
    for j in range(out.shape[0]):
        out[j], ok[j] = _sample_log_concave_kernel(kind, p0[j], p1[j], R, k, lo[j], hi[j], uniforms[:, :, j])


def _draw_log_concave(
    kind: int, p0: NDArray[np.float64], p1: NDArray[np.float64], R: float, k: float, lo: NDArray[np.float64],
    hi: NDArray[np.float64], uniforms: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:  # fmt: skip
    out = np.empty(lo.shape[0])
    ok = np.empty(lo.shape[0], dtype=np.bool_)
    _sample_log_concave(kind, p0, p1, float(R), float(k), lo, hi, np.ascontiguousarray(uniforms), out, ok)
    return out, ok


@dataclass(frozen=True)
class TruncatedGaussianSampler:
    r"""EXACT draws from N(m, σ²I_d) restricted to {‖x‖ ≤ R} with a FIXED number of proposals and random draws.

    A rejection sampler whose loop runs until acceptance does work (and draws random numbers) in an amount that
    depends on the target, i.e. on private prefix sums. This one draws a public number M of proposals per stage,
    all at once, and takes the first accepted (an exact draw, conditioned on acceptance); if none is accepted the
    draw FAILS and returns the public point 0 with ``ok = False``. The failure probability is bounded by public
    quantities (:attr:`log_failure_probability`), which the solver charges as an extra approximate-DP δ
    (:mod:`privfit.solvers.lazy_oco.solver`). Paths (chosen from PUBLIC bounds only, never per draw):

    * ``naive``: M proposals m + σZ, accept those in the ball. P(reject) = 1 − Pr[‖m + σZ‖ ≤ R], bounded by the
      caller from public worst cases (``proposal_failure``).
    * ``reduction`` (spec §5.3, exact 2-D reduction): x = s·e + σ√q·v with e = m/‖m‖, s ∝ e^{h(s)} on [−R, R]
      (:func:`projection_log_density`, concave for d ≥ 2), q ~ χ²_{d−1} truncated to [0, (R² − s²)/σ²] (concave
      log-density for d − 1 ≥ 2; for d − 1 = 1, q = z² with z ~ N(0, 1) on [−√w, √w]), v uniform on the unit
      sphere of e^⊥ (d normals). d = 1: s alone, a Gaussian on [−R, R]. Each 1-D stage is
      :func:`_sample_log_concave` with M proposals, whose acceptance probability is ≥ 1/(1 + e) for EVERY
      log-concave target: with the mode m*, h ≥ h(m*) − 1 on [l, r] (concavity), so ∫e^h ≥ (r − l)e^{h(m*)−1};
      the envelope has mass ≤ e^{h(m*)}(r − l) on [l, r] and, beyond r, ≤ e^{h(r)}/|h′(r)| ≤ e^{h(m*)−1}(r − m*)
      (|h′(r)| ≥ (h(m*) − h(r))/(r − m*) = 1/(r − m*)), likewise left of l: in all ≤ e^{h(m*)}(r − l)(1 + 1/e).
      ``proposal_failure`` = 1 − 1/4 covers the 2⁻⁶⁴-accurate mode and level points.

    Random draws per :meth:`draw` of ``size`` points: naive ``standard_normal((M, size, d))``; reduction
    ``random((M, 3, size))`` per stage and ``standard_normal((size, d))`` — fixed shapes, whatever the target.
    """

    dimension: int
    radius: float
    path: Literal["naive", "reduction"]
    proposals: int
    proposal_failure: float

    @property
    def stages(self) -> int:
        """Rejection stages per draw: 1 (naive, or d = 1), else 2 (s, then q)."""
        return 1 if self.path == "naive" or self.dimension == 1 else 2

    @property
    def log_failure_probability(self) -> float:
        """log of the public bound on P(a draw fails): stages × proposal_failure^M (union over the stages)."""
        return min(0.0, math.log(self.stages) + self.proposals * math.log(self.proposal_failure))

    @classmethod
    def plan(
        cls,
        dimension: int,
        radius: float,
        log_escape_bound: float,
        log_failure_target: float,
        path: Literal["naive", "reduction"] | None = None,
    ) -> TruncatedGaussianSampler:
        """The path and M for targets whose escape probability Pr[‖m + σZ‖ > R] is ≤ e^{``log_escape_bound``} (a
        PUBLIC bound over all targets; 0 when unknown), with per-draw failure ≤ e^{``log_failure_target``}: naive
        when its M·d ≤ :data:`NAIVE_MAX_NORMALS`, else the reduction (``path`` forces one)."""
        log_escape = max(min(log_escape_bound, 0.0), -700.0)

        def proposals(log_failure: float, stages: int) -> int:
            return max(1, math.ceil((log_failure_target - math.log(stages)) / log_failure)) if log_failure < 0 else 0

        naive = proposals(log_escape, 1)
        if path is None:
            path = "naive" if naive > 0 and naive * dimension <= NAIVE_MAX_NORMALS else "reduction"
        if path == "naive":
            if naive == 0:
                raise SolverParameterError("method", "naive rejection needs a lower bound on the ball mass > 0")
            return cls(dimension, float(radius), "naive", naive, math.exp(log_escape))
        failure = 1.0 - LOG_CONCAVE_ACCEPTANCE
        stages = 1 if dimension == 1 else 2
        return cls(dimension, float(radius), "reduction", proposals(math.log(failure), stages), failure)

    def draw(
        self, mean: NDArray[np.float64], sigma: float, size: int, rng: np.random.Generator
    ) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
        """``size`` independent draws (size, d) and their ok flags; failed draws are the public point 0."""
        d, R, M = self.dimension, self.radius, self.proposals
        if self.path == "naive":
            x = mean + sigma * rng.standard_normal((M, size, d))
            inside = np.einsum("msd,msd->ms", x, x) <= R * R
            ok = inside.any(axis=0)
            chosen = x[np.argmax(inside, axis=0), np.arange(size)]
            return np.where(ok[:, None], chosen, 0.0), ok
        nu = float(np.linalg.norm(mean))
        full = np.full(size, 1.0)
        if d == 1:
            s, ok = _draw_log_concave(_GAUSSIAN, full * float(mean[0]), full * sigma, R, 1.0, -R * full, R * full,
                                      rng.random((M, 3, size)))  # fmt: skip
            return s[:, None], ok
        e = mean / nu if nu > 0.0 else np.eye(d)[0]
        s, ok_s = _draw_log_concave(_PROJECTION, full * nu, full * sigma, R, d - 1.0, -R * full, R * full,
                                    rng.random((M, 3, size)))  # fmt: skip
        w = np.maximum((R - s) * (R + s) / (sigma * sigma), 0.0)
        u_q = rng.random((M, 3, size))
        if d == 2:  # χ²₁: q = z², z ~ N(0, 1) on [−√w, √w]
            root = np.sqrt(w)
            z, ok_q = _draw_log_concave(_GAUSSIAN, 0.0 * full, full, R, 1.0, -root, root, u_q)
            q = z * z
        else:
            q, ok_q = _draw_log_concave(_CHI_SQUARE, full, full, R, d - 1.0, 0.0 * full, w, u_q)
        xi = rng.standard_normal((size, d))
        xi -= np.outer(xi @ e, e)
        norms = np.linalg.norm(xi, axis=1, keepdims=True)
        with np.errstate(all="ignore"):
            v = np.where(norms > 0.0, xi / norms, 0.0)
            x = s[:, None] * e[None, :] + (sigma * np.sqrt(np.minimum(q, w)))[:, None] * v
            # guard against last-ulp excursions: ‖x‖² = s² + σ²q ≤ R² up to rounding
            nrm = np.linalg.norm(x, axis=1, keepdims=True)
            x = np.where(nrm > R, x * (R / nrm), x)
        ok = ok_s & ok_q & np.all(np.isfinite(x), axis=1)
        return np.where(ok[:, None], x, 0.0), ok


def log_ball_escape(nu: float, sigma: float, R: float, d: int) -> float:
    """log Pr[‖X‖ > R] for X ~ N(m, σ²I_d), ‖m‖ = ν (the naive path's rejection probability).

    d = 1: log(Φ((ν − R)/σ) + Φ((−R − ν)/σ)); d ≥ 2: ``ncx2.logsf`` (accurate when the escape is small), else
    log(1 − e^{LBM}) from :func:`log_ball_mass`.
    """
    if d == 1:
        return float(np.logaddexp(special.log_ndtr((nu - R) / sigma), special.log_ndtr((-R - nu) / sigma)))
    from scipy import stats  # as in log_ball_mass

    with np.errstate(all="ignore"):
        value = float(stats.ncx2.logsf((R / sigma) ** 2, d, (nu / sigma) ** 2))
    if math.isfinite(value) and value < -1e-3:
        return value
    lbm = float(log_ball_mass(nu, sigma, R, d))
    return math.log(-math.expm1(lbm)) if lbm < 0.0 else -math.inf


def sample_truncated_gaussian(
    mean: ArrayLike, sigma: float, R: float, size: int, rng: np.random.Generator, *, method: str = "auto"
) -> NDArray[np.float64]:
    """``size`` exact i.i.d. draws from N(mean, σ² I_d) restricted to {‖x‖ ≤ R}; returns shape (size, d).

    A helper for direct use and tests (the solver plans a :class:`TruncatedGaussianSampler` from public bounds
    instead). ``method``: ``"naive"`` or ``"reduction"`` force a path; ``"auto"``/``"exact"`` take the naive path
    when the ball mass of THIS target is ≥ 0.05 (spec §5.3). The proposal count makes a failed draw (returned as
    the point 0) happen with probability ≤ 2⁻⁴⁰ per draw.
    """
    if method not in ("auto", "exact", "naive", "reduction"):
        raise SolverParameterError("method", f"must be 'auto', 'exact', 'naive' or 'reduction', got {method!r}")
    mean = np.asarray(mean, dtype=float).ravel()
    d = mean.size
    if d < 1 or not np.all(np.isfinite(mean)):
        raise SolverParameterError("mean", "must be a finite vector of dimension ≥ 1")
    sigma = _as_float("sigma", sigma)
    R = _as_float("R", R)
    if isinstance(size, bool) or int(size) != size or size < 0:
        raise SolverParameterError("size", f"must be an integer ≥ 0, got {size!r}")
    size = int(size)
    if size == 0:
        return np.empty((0, d))
    nu = float(np.linalg.norm(mean))
    escape = log_ball_escape(nu, sigma, R, d)
    mass = -math.expm1(escape)
    if method == "naive" and mass < 1e-4:
        raise SolverParameterError("method", "naive rejection would need more than 1e4 proposals per draw")
    naive = method == "naive" or (method in ("auto", "exact") and mass >= 0.05)
    path: Literal["naive", "reduction"] = "naive" if naive else "reduction"
    sampler = TruncatedGaussianSampler.plan(d, R, escape, math.log(HELPER_FAILURE_PROBABILITY), path=path)
    return sampler.draw(mean, sigma, size, rng)[0]
