"""Exact truncated isotropic Gaussians on a Euclidean ball, and their log-normalisers (spec §2.6, §5.3).

For P-COMW-TG (spec §5.3) every Gibbs measure μ̄_t of Algorithm 1 (paper eqs. 3.1–3.3) is
``N(m, σ² I_d)`` restricted to ``K = B(0, R)``.  This module provides, as pure numpy/scipy functions:

* :func:`log_chi2_cdf` — ``log F_{χ²_k}(w)``, stable where ``gammainc`` underflows (series, spec §5.3);
* :func:`log_ball_mass` — ``LBM = log Pr_{X~N(m,σ²I)}[‖X‖ ≤ R]`` as a function of ν = ‖m‖ (vectorised): d = 1 closed
  form, ``ncx2.logcdf`` fast path where it is > −600, otherwise the exact 1-D integral
  ``log ∫_{−R}^{R} φ_σ(s−ν) F_{χ²_{d−1}}((R²−s²)/σ²) ds`` in log space (spec §5.3 "LBM");
* :func:`log_partition` — ``log Z`` of ``exp(−β((κ/2)‖x‖² + ⟨S, x⟩ + c))`` on the ball (spec §5.3, §2.6 table);
* :func:`sample_truncated_gaussian` — EXACT draws (no MCMC): naive rejection while the ball mass is ≥ 0.05, else the
  2-D reduction: s = ⟨x, e⟩ from the log-concave density ∝ e^{h(s)} by exact rejection from a piecewise-exponential
  tangent envelope, then q = ‖x_⊥‖²/σ² from a χ²_{d−1} truncated to [0, (R²−s²)/σ²], then a uniform direction.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special, stats

from privfit.solvers.base import SolverParameterError

__all__ = [
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
#: Use naive rejection while the ball mass is at least this (spec §5.3).
_NAIVE_MIN_LOG_MASS = math.log(0.05)
_BISECTION_STEPS = 100
#: The sampler only needs the mode to place tangents (exactness does not depend on it): 2R·2^-64 is plenty.
_SAMPLER_MODE_STEPS = 64
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
    return out.reshape(shape)


def _log_chi2_pdf(w: NDArray[np.float64], k: int) -> NDArray[np.float64]:
    a = 0.5 * k
    with np.errstate(divide="ignore"):
        return (a - 1.0) * np.log(w) - 0.5 * w - a * math.log(2.0) - special.gammaln(a)


def projection_log_density(s: ArrayLike, nu: ArrayLike, sigma: ArrayLike, R: float, d: int) -> NDArray[np.float64]:
    """h(s): log of the (unnormalised over s, exactly normalised over x) density of s = ⟨X, e⟩, e = m/‖m‖.

    ``h(s) = −(s−ν)²/(2σ²) − log(σ√(2π)) + log F_{χ²_{d−1}}((R² − s²)/σ²)`` on [−R, R] (spec §5.3), so that
    ``log ∫_{−R}^{R} e^{h} ds = LBM``.  Concave in s for d ≥ 2.  Requires d ≥ 2.
    """
    s, nu, sigma = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (s, nu, sigma)))
    w = (R - s) * (R + s) / (sigma * sigma)
    return -0.5 * ((s - nu) / sigma) ** 2 - np.log(sigma) - _LOG_SQRT_2PI + log_chi2_cdf(w, d - 1)


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
    return gauss + log_chi2_cdf(w, d - 1) - log_chi2_cdf(w_ref, d - 1)


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
    return 0.5 * (lo + hi)


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
        return h_max + special.logsumexp(h + np.log(jac * wv[None, :]), axis=1)


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
        return out.reshape(shape)
    out = np.full(nu_f.shape, np.nan)
    todo = np.ones(nu_f.shape, dtype=bool)
    if fast_path:
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
    return beta * norm_S**2 / (2.0 * kappa) + 0.5 * d * np.log(2.0 * math.pi * sigma**2) + lbm - beta * c


# ----------------------------------------------------------------------------------------------------------------
# Exact sampler
# ----------------------------------------------------------------------------------------------------------------


def _log_segment_mass(g: NDArray[np.float64], a: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
    """log ∫_a^b e^{g (s − a)} ds, stable for any sign/size of g."""
    L = b - a
    gL = g * L
    out = np.log(L)  # g ≈ 0
    with np.errstate(all="ignore"):
        pos = gL > 1e-12
        neg = gL < -1e-12
        out = np.where(pos, gL + np.log(-np.expm1(-gL)) - np.log(np.abs(g)), out)
        out = np.where(neg, np.log(-np.expm1(gL)) - np.log(np.abs(g)), out)
    return out


def _sample_segment(
    g: NDArray[np.float64], a: NDArray[np.float64], b: NDArray[np.float64], U: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Inverse-CDF draw from the density ∝ e^{g s} on [a, b]."""
    L = b - a
    gL = g * L
    with np.errstate(all="ignore"):
        # g > 0: s = b + log(U + (1−U) e^{−gL})/g ;  g < 0: s = a + log1p(−U(1 − e^{gL}))/g
        s_pos = b + np.log(U + (1.0 - U) * np.exp(-gL)) / g
        s_neg = a + np.log1p(U * np.expm1(gL)) / g
    s = np.where(gL > 1e-12, s_pos, np.where(gL < -1e-12, s_neg, a + U * L))
    return np.clip(s, a, b)


def _sample_projection(
    nu: float, sigma: float, R: float, d: int, size: int, rng: np.random.Generator
) -> NDArray[np.float64]:
    """Exact draws of s ∝ e^{h(s)} on [−R, R] (d ≥ 2): rejection from the tangent (piecewise-exponential) envelope
    of the concave h (non-adaptive ARS; spec §5.3).  Raises if a proposal violates the envelope."""
    nu_a, sig_a = np.array([nu]), np.array([sigma])
    mode = _mode(nu_a, sig_a, R, d, steps=_SAMPLER_MODE_STEPS)[0]
    # width from a finite-difference curvature (placement only; correctness relies on concavity + exact slopes)
    eps = 1e-6 * max(R - abs(mode), 1e-300)
    curv = float(
        (
            _projection_log_density_slope(np.array([mode + eps]), nu_a, sig_a, R, d)
            - _projection_log_density_slope(np.array([mode - eps]), nu_a, sig_a, R, d)
        )[0]
        / (2.0 * eps)
    )
    width = 1.0 / math.sqrt(-curv) if curv < 0.0 and math.isfinite(curv) else (R - abs(mode)) / 10.0
    width = min(max(width, 1e-300), R)
    cand = mode + width * np.linspace(-6.0, 6.0, 25)
    # keep tangent points strictly inside (−R, R); add points towards each end for long one-sided tails
    inside = cand[(cand > -R) & (cand < R)]
    towards = np.concatenate([mode + (R - mode) * np.array([0.5, 0.9]), mode - (R + mode) * np.array([0.5, 0.9])])
    z = np.unique(np.concatenate([inside, towards[(towards > -R) & (towards < R)], [mode]]))
    hz = _relative_log_density(z, mode, nu, sigma, R, d)
    gz = _projection_log_density_slope(z, np.full(z.shape, nu), np.full(z.shape, sigma), R, d)
    keep = np.isfinite(hz) & np.isfinite(gz)
    z, hz, gz = z[keep], hz[keep], gz[keep]
    # intersections of consecutive tangents (slopes strictly decrease for a concave h)
    dg = gz[:-1] - gz[1:]
    with np.errstate(divide="ignore", invalid="ignore"):
        x_int = (hz[1:] - hz[:-1] - gz[1:] * z[1:] + gz[:-1] * z[:-1]) / dg
    x_int = np.where(dg > 0.0, x_int, 0.5 * (z[:-1] + z[1:]))
    x_int = np.clip(x_int, z[:-1], z[1:])
    edges = np.concatenate([[-R], x_int, [R]])
    a_seg, b_seg = edges[:-1], edges[1:]
    # tangent j evaluated at its segment's left end, then log-mass of the segment
    h_at_a = hz + gz * (a_seg - z)
    log_mass = h_at_a + _log_segment_mass(gz, a_seg, b_seg)
    log_total = special.logsumexp(log_mass)
    probs = np.exp(log_mass - log_total)
    probs /= probs.sum()
    out = np.empty(size)
    filled = 0
    while filled < size:
        n = max(2 * (size - filled), 16)
        j = rng.choice(probs.size, size=n, p=probs)
        s = _sample_segment(gz[j], a_seg[j], b_seg[j], rng.random(n))
        env = hz[j] + gz[j] * (s - z[j])
        hs = _relative_log_density(s, mode, nu, sigma, R, d)
        if np.any(hs > env + 1e-9 * (1.0 + np.abs(env))):
            raise RuntimeError("tangent envelope violated: h is not concave or slopes are inaccurate")
        accept = np.log(rng.random(n)) < hs - env
        take = s[accept][: size - filled]
        out[filled : filled + take.size] = take
        filled += take.size
    return out


def _sample_truncated_chi2(k: int, w: NDArray[np.float64], rng: np.random.Generator) -> NDArray[np.float64]:
    """Exact q ~ χ²_k conditioned on q ≤ w (elementwise).

    If w ≥ k − 2 (mass not tiny): inversion ``q = 2 gammaincinv(k/2, U gammainc(k/2, w/2))`` (spec §5.3).
    Else (k ≥ 3, increasing density on [0, w]): rejection from the exponential envelope tangent to the concave
    ``log f = (k/2−1) log q − q/2`` at q = w (exact, no underflow).
    """
    a = 0.5 * k
    q = np.empty(w.shape)
    inv = (w >= k - 2.0) | (k < 3)
    if np.any(inv):
        U = rng.random(int(inv.sum()))
        P = special.gammainc(a, 0.5 * w[inv])
        q[inv] = np.minimum(2.0 * special.gammaincinv(a, U * P), w[inv])
    zero = ~inv & (w <= 0.0)
    q[zero] = 0.0
    idx = np.flatnonzero(~inv & ~zero)
    while idx.size:
        wi = w[idx]
        slope = (a - 1.0) / wi - 0.5  # > 0
        U = rng.random(idx.size)
        # density ∝ e^{slope (q − w)} on [0, w]: q = w + log(U + (1−U) e^{−slope w}) / slope
        cand = wi + np.log(U + (1.0 - U) * np.exp(-slope * wi)) / slope
        cand = np.clip(cand, 0.0, wi)
        with np.errstate(divide="ignore"):
            log_ratio = (a - 1.0) * (np.log(cand) - np.log(wi)) - 0.5 * (cand - wi) - slope * (cand - wi)
        ok = np.log(rng.random(idx.size)) < log_ratio
        q[idx[ok]] = cand[ok]
        idx = idx[~ok]
    return q


#: Naive proposals tried per requested draw before the path is chosen (see :func:`sample_truncated_gaussian`).
_FIRST_BATCH_PER_DRAW = 16


def sample_truncated_gaussian(
    mean: ArrayLike, sigma: float, R: float, size: int, rng: np.random.Generator, *, method: str = "auto"
) -> NDArray[np.float64]:
    """``size`` EXACT i.i.d. draws from N(mean, σ² I_d) restricted to {‖x‖ ≤ R}; returns shape (size, d).

    Spec §5.3 "Exact sampler": naive rejection while LBM ≥ log 0.05; otherwise the 2-D reduction
    x = s·e + σ√q·v with e = m/‖m‖ (e_1 if m = 0), s ∝ e^{h(s)} (:func:`projection_log_density`), q ~ χ²_{d−1}
    truncated to [0, (R² − s²)/σ²], v uniform on the unit sphere of e^⊥.  d = 1: truncated normal.
    ``method``: ``"exact"`` chooses between the two paths by LBM as just described; ``"auto"`` (the default) first
    tries one batch of 16 naive proposals per draw — the accepted ones are exact draws — and takes only the
    missing draws from ``"exact"``, which skips the LBM evaluation when the mass is large; ``"naive"`` and
    ``"reduction"`` force a path (for tests).  All four are exact.
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
    if d == 1:
        lo, hi = (-R - mean[0]) / sigma, (R - mean[0]) / sigma
        return stats.truncnorm.rvs(lo, hi, loc=mean[0], scale=sigma, size=size, random_state=rng).reshape(size, 1)
    if method == "auto":
        # Shortcut (exact): one batch of naive proposals first. Given how many land in the ball, those that do are
        # i.i.d. draws from the target, and the rest come from an exact path below, independently — so the output
        # is i.i.d. from the target whichever path produced each draw. It skips the ncx2 call when the mass is large.
        x = mean + sigma * rng.standard_normal((_FIRST_BATCH_PER_DRAW * size, d))
        accepted = x[np.einsum("ij,ij->i", x, x) <= R * R][:size]
        if accepted.shape[0] == size:
            return accepted
        if accepted.shape[0] > 0:
            rest = sample_truncated_gaussian(mean, sigma, R, size - accepted.shape[0], rng, method="exact")
            return np.vstack([accepted, rest])
    # the naive/reduction decision only needs to know whether the mass is ≥ 0.05, which the ncx2 fast path answers
    # whenever it is true (a mass ≥ 0.05 is far above ncx2's underflow range)
    with np.errstate(all="ignore"):
        lbm = float(stats.ncx2.logcdf((R / sigma) ** 2, d, (nu / sigma) ** 2))
    if not math.isfinite(lbm):
        lbm = -math.inf
    if method == "naive" and lbm < math.log(1e-4):
        raise SolverParameterError("method", "naive rejection would need more than 1e4 proposals per draw")
    if method == "naive" or (method in ("auto", "exact") and lbm >= _NAIVE_MIN_LOG_MASS):
        out = np.empty((size, d))
        filled = 0
        R2 = R * R
        while filled < size:
            n = max(int(1.5 * (size - filled) / math.exp(lbm)) + 8, 16)
            x = mean + sigma * rng.standard_normal((n, d))
            x = x[np.einsum("ij,ij->i", x, x) <= R2][: size - filled]
            out[filled : filled + x.shape[0]] = x
            filled += x.shape[0]
        return out
    e = mean / nu if nu > 0.0 else np.eye(d)[0]
    s = _sample_projection(nu, sigma, R, d, size, rng)
    w = np.maximum((R - s) * (R + s) / (sigma * sigma), 0.0)
    q = _sample_truncated_chi2(d - 1, w, rng)
    xi = rng.standard_normal((size, d))
    xi -= np.outer(xi @ e, e)
    norms = np.linalg.norm(xi, axis=1, keepdims=True)
    v = xi / norms
    x = s[:, None] * e[None, :] + (sigma * np.sqrt(q))[:, None] * v
    # guard against last-ulp excursions: ‖x‖² = s² + σ²q ≤ R² up to rounding
    nrm = np.linalg.norm(x, axis=1, keepdims=True)
    return np.where(nrm > R, x * (R / nrm), x)
