r"""Tests of privfit.solvers.resque.estimator: the ReSQue estimator (paper Def. 2, Lemmas 1–2) and the smoothed GLM
losses.

Spec ``seed-004-resque.md`` §8 items 1–4. Monte Carlo checks are seeded and tolerant: an estimate must lie within
``Z_TOL`` = 5 standard errors (estimated from the same sample) of its exact value; the exact values are

* Lemma 1.1: E ∇̃ = ∇f̂_ρ(x) = φ̂'(⟨a, x⟩, y; ρ‖a‖)·a (closed forms of spec §2 written out again here);
* weights: log w ~ N(−t/2, t), t = ‖v‖²/ρ², hence E w^p = exp(p(p − 1)t/2);
* Lemma 1.2: E‖∇̃‖² = L² E w² = L² e^t when ‖∂f‖ ≡ L (absolute loss on a unit row), ≤ L² e^t in general;
* Lemma 2: E(w − w')^p for even p in closed form (the paper's S_q expansion, proof of Lemma 2).

Measured with the seeds below (largest |z-score| of the MC checks): Lemma 1.1 1.4 over 3 models × 8 configurations
× 4 components (10⁶ draws, SE ≤ 2.5e-3); weight moments 2.0; Lemma 1.2 0.8 (E‖∇̃‖² = 2.745 ± 0.035 vs e = 2.718 at
‖v‖ = ρ); Lemma 2 1.7, with the exact E|w − w'|^p at 4e-4 (p = 2) and 4e-8 (p = 4) of the (24p‖x − x'‖/ρ)^p bound.

E w^p is checked by Monte Carlo only where it can be resolved: var(w^p)/(E w^p)² = e^{p²t} − 1, so for p = 4 and
‖v‖ = ρ a sample of 10⁶ has a relative standard error of about 3 (and an unreliable sample SE). There the exact
one-dimensional Gauss–Hermite check (w depends on ξ only through ⟨v, ξ⟩) and the KS test on log w take over.
"""

from __future__ import annotations

import itertools
import math
import warnings
from math import comb

import numpy as np
import pytest
from numpy.polynomial.hermite_e import hermegauss
from numpy.typing import NDArray
from scipy import stats
from scipy.integrate import quad
from scipy.special import ndtr

from privfit.privacy import make_generator
from privfit.solvers.base import SolverParameterError
from privfit.solvers.resque.estimator import (
    RESQUE_MODELS,
    MarginLoss,
    glm_subgradients,
    log_resque_weights,
    make_margin_loss,
    resque_gradients,
    resque_weights,
    smoothed_glm_gradients,
    smoothed_glm_values,
)

FloatArray = NDArray[np.float64]

Z_TOL = 5.0
RHO = 0.5
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)

LOSSES: dict[str, MarginLoss] = {
    "logistic": make_margin_loss("logistic"),
    "svm": make_margin_loss("svm"),
    "absolute": make_margin_loss("absolute"),
    "quantile": make_margin_loss("quantile", quantile_tau=0.3),
    "huber": make_margin_loss("huber", huber_delta=0.7),
}
LABELS = {True: (-1.0, 1.0), False: (-0.7, 0.0, 0.4)}


def _rng(seed: int) -> np.random.Generator:
    return make_generator(seed, data_is_public=True)


def _direction(rng: np.random.Generator, d: int) -> FloatArray:
    u = rng.standard_normal(d)
    return u / np.linalg.norm(u)


def _kinks(loss: MarginLoss, y: float) -> list[float]:
    """The z where φ(·, y) is not differentiable (or, for Huber, not twice differentiable)."""
    if loss.name == "svm":
        return [1.0 / y]
    if loss.name in ("absolute", "quantile"):
        return [y]
    if loss.name == "huber":
        return [y - loss.parameter, y + loss.parameter]  # type: ignore[operator]
    return []


def _npdf(u: float) -> float:
    return math.exp(-0.5 * u * u) / math.sqrt(2.0 * math.pi)


def _mc_mean(samples: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Column means and their standard errors."""
    n = samples.shape[0]
    return samples.mean(axis=0), samples.std(axis=0, ddof=1) / math.sqrt(n)


# ---------------------------------------------------------------------------------------------------------
# 1. Lemma 1.1: unbiasedness for the smoothed GLM gradient
# ---------------------------------------------------------------------------------------------------------


def _spec_closed_form(model: str, a: FloatArray, b: float, x: FloatArray, rho: float) -> FloatArray:
    """∇f̂_ρ(x) written out from spec §2 / §8 (independent of the module's own formulas)."""
    s = rho * np.linalg.norm(a)
    m = float(a @ x)
    if model == "absolute":
        return a * (2.0 * ndtr((m - b) / s) - 1.0)
    if model == "svm":
        return -b * a * ndtr((1.0 - b * m) / s)
    if model == "quantile":
        return a * (ndtr((m - b) / s) - 0.3)
    raise AssertionError(model)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["absolute", "svm", "quantile"])
def test_lemma_1_1_unbiased(model: str) -> None:
    """Mean of 10⁶ ReSQue estimates = ∇f̂_ρ(x) for ‖x − x̄‖ ∈ {0, ρ/4, ρ/2, ρ}, rows with ‖a‖ = 1 and ‖a‖ = 2.5."""
    loss = LOSSES[model]
    rng = _rng(11)
    d, n_total, chunk = 4, 1_000_000, 250_000
    x = np.array([0.3, -0.2, 0.5, 0.1])
    a1 = _direction(rng, d)
    a2 = 2.5 * _direction(rng, d)
    rows = []  # (a, y, query point x): ⟨a, x⟩ within O(ρ‖a‖) of the kink, so the smoothed gradient is non-trivial
    for a, offset in ((a1, 0.3), (a2, -1.0)):
        s = RHO * np.linalg.norm(a)
        if model == "svm":
            b = 1.0 if offset > 0 else -1.0  # labels ±1; move x along a so that 1 − b⟨a, x⟩ = offset·s
            query = x + ((1.0 - offset * s) / b - float(a @ x)) * a / float(a @ a)
        else:
            b, query = float(a @ x) - offset * s, x
        rows.append((a, b, query))
    configs = [
        (a, b, query, query - r * _direction(rng, d)) for a, b, query in rows for r in (0.0, RHO / 4, RHO / 2, RHO)
    ]
    sums = np.zeros((len(configs), d))
    sq = np.zeros((len(configs), d))
    for _ in range(n_total // chunk):
        xi = RHO * rng.standard_normal((chunk, d))
        for c, (a, b, query, centre) in enumerate(configs):
            G = resque_gradients(loss, np.broadcast_to(a, (chunk, d)), np.full(chunk, b), centre, xi, query, RHO)
            sums[c] += G.sum(axis=0)
            sq[c] += (G * G).sum(axis=0)
    worst = 0.0
    for c, (a, b, query, _centre) in enumerate(configs):
        mean = sums[c] / n_total
        se = np.sqrt((sq[c] / n_total - mean**2) / (n_total - 1))
        exact = smoothed_glm_gradients(loss, a[None, :], np.array([b]), query, RHO)[0]
        np.testing.assert_allclose(exact, _spec_closed_form(model, a, b, query, RHO), rtol=1e-12, atol=1e-14)
        assert np.linalg.norm(exact) > 0.05 * np.linalg.norm(a)  # a non-trivial target
        assert np.all(se < 0.01 * np.linalg.norm(a))  # the test has power
        z = np.abs(mean - exact) / se
        worst = max(worst, float(z.max()))
        assert np.all(z < Z_TOL), (model, c, mean, exact, se)
    assert worst > 0.0


def test_resque_equals_weight_times_subgradient() -> None:
    """resque_gradients = exp(log w)·glm_subgradients(x̄ + ξ) (Def. 2), for x̄ and x given per row or shared."""
    rng = _rng(3)
    k, d = 64, 7
    X = rng.standard_normal((k, d)) / math.sqrt(d)
    y = np.sign(rng.standard_normal(k))
    centre = 0.1 * rng.standard_normal(d)
    xi = RHO * rng.standard_normal((k, d))
    x_rows = centre + 0.2 * rng.standard_normal((k, d))
    for loss in LOSSES.values():
        lab = y if loss.classification else 0.5 * y
        for x in (x_rows, x_rows[0]):
            G = resque_gradients(loss, X, lab, centre, xi, x, RHO)
            w = np.exp((2.0 * np.sum((x - centre) * xi, axis=-1) - np.sum((x - centre) ** 2, axis=-1)) / (2 * RHO**2))
            naive = w[:, None] * glm_subgradients(loss, X, lab, centre + xi)
            np.testing.assert_allclose(G, naive, rtol=1e-12, atol=1e-15)
            np.testing.assert_allclose(w, resque_weights(x - centre, xi, RHO), rtol=1e-13)
        # x = x̄: weights are exactly 1 and the estimate is the plain subgradient at the query point
        G0 = resque_gradients(loss, X, lab, centre, xi, centre, RHO)
        assert np.array_equal(G0, glm_subgradients(loss, X, lab, centre + xi))


# ---------------------------------------------------------------------------------------------------------
# 2. weights: E w^p = exp(p(p − 1) t / 2), log w ~ N(−t/2, t)
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ratio", [0.0, 0.25, 0.5, 1.0, 3.0, 10.0])
def test_weight_moments_exact_by_quadrature(ratio: float) -> None:
    """w depends on ξ only through ⟨v, ξ⟩: a 1-D Gauss–Hermite rule along v gives E w^p to ~1e-12 (deterministic)."""
    rng = _rng(5)
    d = 6
    u = _direction(rng, d)
    v = ratio * RHO * u
    nodes, weights = hermegauss(80)
    weights = weights / math.sqrt(2.0 * math.pi)
    orth = rng.standard_normal((nodes.size, d))
    orth -= np.outer(orth @ u, u)  # components of ξ orthogonal to v do not change w
    xi = RHO * (np.outer(nodes, u) + orth)
    log_w = log_resque_weights(v, xi, RHO)
    np.testing.assert_allclose(log_w, log_resque_weights(v, RHO * np.outer(nodes, u), RHO), rtol=1e-12, atol=1e-12)
    t = ratio**2
    for p in (1, 2, 3, 4):
        if p * ratio > 4.0:  # the rule is exact only while exp(p·ratio·x) is well resolved
            continue
        moment = float(np.exp(p * log_w) @ weights)
        assert moment == pytest.approx(math.exp(p * (p - 1) * t / 2), rel=1e-10)


@pytest.mark.slow
def test_weight_moments_monte_carlo() -> None:
    """E w = 1 for every ‖v‖ ≤ ρ and E w^p = exp(p(p−1)‖v‖²/(2ρ²)), p ≤ 4, wherever MC can resolve it (p‖v‖ ≤ 2ρ)."""
    rng = _rng(7)
    d, n = 5, 1_000_000
    xi = RHO * rng.standard_normal((n, d))
    assert np.array_equal(log_resque_weights(np.zeros(d), xi, RHO), np.zeros(n))  # w ≡ 1 at x = x̄
    for ratio in (0.25, 0.5, 1.0):
        v = ratio * RHO * _direction(rng, d)
        log_w = log_resque_weights(v, xi, RHO)
        t = ratio**2
        for p in (1, 2, 3, 4):
            if p * ratio > 2.0:  # var(w^p)/E²w^p = e^{p²t} − 1: beyond σ_log = 2 the sample SE is unreliable
                continue
            wp = np.exp(p * log_w)
            mean, se = _mc_mean(wp[:, None])
            exact = math.exp(p * (p - 1) * t / 2)
            assert abs(mean[0] - exact) < Z_TOL * se[0], (ratio, p, mean[0], exact, se[0])
            # the same on the log scale (delta method): log Ê w^p = p(p−1)t/2 ± se/mean
            assert abs(math.log(mean[0]) - p * (p - 1) * t / 2) < Z_TOL * se[0] / mean[0]


@pytest.mark.parametrize("ratio", [0.25, 0.5, 1.0, 3.0])
def test_log_weight_distribution(ratio: float) -> None:
    """log w ~ N(−‖v‖²/(2ρ²), ‖v‖²/ρ²) (KS test, and the first two moments), in dimension 20."""
    rng = _rng(13)
    d, n = 20, 200_000
    v = ratio * RHO * _direction(rng, d)
    log_w = log_resque_weights(v, RHO * rng.standard_normal((n, d)), RHO)
    t = ratio**2
    result = stats.kstest(log_w, stats.norm(loc=-t / 2, scale=math.sqrt(t)).cdf)
    assert result.pvalue > 1e-4
    assert abs(log_w.mean() + t / 2) < Z_TOL * math.sqrt(t / n)
    assert abs(log_w.var(ddof=1) / t - 1.0) < Z_TOL * math.sqrt(2.0 / n)


# ---------------------------------------------------------------------------------------------------------
# 3. Lemma 1.2: E‖∇̃‖² ≤ L² e^{‖v‖²/ρ²} ≤ 3L² for ‖v‖ ≤ ρ
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_lemma_1_2_second_moment() -> None:
    rng = _rng(17)
    d, n, k = 5, 600_000, 40
    xi = RHO * rng.standard_normal((n, d))
    idx = rng.integers(0, k, size=n)  # ERM form: rows drawn uniformly with replacement
    rows = rng.standard_normal((k, d))
    rows /= np.maximum(1.0, np.linalg.norm(rows, axis=1))[:, None]  # ‖a_i‖ ≤ 1, so L = L_φ
    signs = np.sign(rng.standard_normal(k))
    centre = 0.2 * rng.standard_normal(d)
    unit = _direction(rng, d)
    for ratio in (0.25, 0.5, 1.0):
        x = centre + ratio * RHO * _direction(rng, d)
        t = ratio**2
        # absolute loss on one unit row: ‖∂f‖ ≡ 1 off a null set, so E‖∇̃‖² = E w² = e^t exactly
        G = resque_gradients(LOSSES["absolute"], np.broadcast_to(unit, (n, d)), np.full(n, 0.05), centre, xi, x, RHO)
        mean, se = _mc_mean(np.sum(G * G, axis=1)[:, None])
        assert abs(mean[0] - math.exp(t)) < Z_TOL * se[0], (ratio, mean[0], se[0])
        assert mean[0] < 3.0
        # every model on a data set of k rows: E‖∇̃‖² ≤ L² e^t ≤ 3L²
        for loss in LOSSES.values():
            lab = signs[idx] if loss.classification else 0.6 * signs[idx]
            G = resque_gradients(loss, rows[idx], lab, centre, xi, x, RHO)
            mean, se = _mc_mean(np.sum(G * G, axis=1)[:, None])
            bound = loss.lipschitz**2 * math.exp(t)
            assert mean[0] <= bound + Z_TOL * se[0], (loss.name, ratio, mean[0], bound)
            assert mean[0] < 3.0 * loss.lipschitz**2


# ---------------------------------------------------------------------------------------------------------
# 4. Lemma 2: E w^p ≤ 2 and E|w(x) − w(x')|^p ≤ (24p‖x − x'‖/ρ)^p on B_x̄(ρ/p)
# ---------------------------------------------------------------------------------------------------------


def _exact_even_difference_moment(v: FloatArray, vp: FloatArray, p: int, rho: float) -> float:
    """E(w(v) − w(v'))^p for even p: Σ_q (−1)^q C(p, q) S_q (proof of Lemma 2, S_q by eq. (6))."""
    total = 0.0
    for q in range(p + 1):
        e = ((p - q) ** 2 - (p - q)) * (v @ v) + (q * q - q) * (vp @ vp) + 2 * q * (p - q) * (v @ vp)
        total += (-1) ** q * comb(p, q) * math.exp(e / (2 * rho**2))
    return total


@pytest.mark.slow
@pytest.mark.parametrize("p", [2, 4])
def test_lemma_2_weight_differences(p: int) -> None:
    rng = _rng(19 + p)
    d, n = 4, 1_000_000
    xi = RHO * rng.standard_normal((n, d))
    r = RHO / p
    u1, u2 = _direction(rng, d), _direction(rng, d)
    pairs = [
        (r * u1, -r * u1),  # antipodal on the boundary: ‖x − x'‖ = 2ρ/p
        (r * u1, r * u2),
        (0.5 * r * u1, 0.5 * r * u1 + 0.1 * r * u2),
        (np.zeros(d), 0.3 * r * u2),
    ]
    for v, vp in pairs:
        dist = float(np.linalg.norm(v - vp))
        w = resque_weights(v, xi, RHO)
        wp = resque_weights(vp, xi, RHO)
        # part 1: E w^p = exp(p(p−1)‖v‖²/(2ρ²)) ≤ e^{(p−1)/(2p)} ≤ 2
        assert math.exp(p * (p - 1) * float(v @ v) / (2 * RHO**2)) <= 2.0
        mean_wp, se_wp = _mc_mean((w**p)[:, None])
        assert mean_wp[0] <= 2.0 + Z_TOL * se_wp[0]
        # part 2
        diff = np.abs(w - wp) ** p
        mean, se = _mc_mean(diff[:, None])
        exact = _exact_even_difference_moment(v, vp, p, RHO)
        bound = (24.0 * p * dist / RHO) ** p
        assert abs(mean[0] - exact) < Z_TOL * se[0], (p, dist, mean[0], exact, se[0])
        assert exact <= bound
        assert mean[0] + Z_TOL * se[0] <= 1e-2 * bound  # "large margin": more than 100× below the bound


# ---------------------------------------------------------------------------------------------------------
# 5. smoothing: bias, derivative, agreement with brute-force quadrature
# ---------------------------------------------------------------------------------------------------------


Z_GRID = np.array([-50.0, -3.0, -1.0, -0.31, 0.0, 0.2, 0.7, 1.0, 1.3, 2.5, 8.0, 1e3])
S_GRID = np.array([1e-9, 1e-3, 0.05, 0.3, 1.0, 1.49, 1.51, 3.0, 20.0])


@pytest.mark.parametrize("model", RESQUE_MODELS)
def test_smoothing_bias_bounds(model: str) -> None:
    """0 ≤ φ̂(z, y; s) − φ(z, y) ≤ L_φ s sqrt(2/π) on a grid, and through rows: 0 ≤ f̂_ρ − f ≤ L_φ ρ‖x‖ sqrt(2/π)."""
    loss = LOSSES[model]
    for y in LABELS[loss.classification]:
        z, s = np.meshgrid(np.concatenate([Z_GRID, _kinks(loss, y)]), S_GRID)
        bias = loss.smoothed_value(z, y, s) - loss.value(z, y)
        tol = 1e-12 * (1.0 + np.abs(z) + s)
        assert np.all(bias >= -tol)
        assert np.all(bias <= loss.lipschitz * s * SQRT_2_OVER_PI + tol)
    rng = _rng(23)
    X = rng.standard_normal((50, 6))
    y = np.sign(rng.standard_normal(50)) * (1.0 if loss.classification else 0.5)
    theta = 0.4 * rng.standard_normal(6)
    for rho in (0.01, 0.3, 2.0):
        f_hat = smoothed_glm_values(loss, X, y, theta, rho)
        f = loss.value(X @ theta, y)
        bound = loss.lipschitz * rho * np.linalg.norm(X, axis=1) * SQRT_2_OVER_PI
        assert np.all(f_hat - f >= -1e-12) and np.all(f_hat - f <= bound + 1e-12)
    np.testing.assert_array_equal(smoothed_glm_values(loss, X, y, theta, 0.0), loss.value(X @ theta, y))


@pytest.mark.parametrize("model", RESQUE_MODELS)
def test_smoothed_derivative_is_derivative_of_smoothed_value(model: str) -> None:
    """Central differences of φ̂ match φ̂'; φ̂' is monotone and L_φ sqrt(2/π)/s-Lipschitz (smoothness of f̂)."""
    loss = LOSSES[model]
    z = np.linspace(-4.0, 4.0, 161)
    for y in LABELS[loss.classification]:
        for s in (0.05, 0.4, 1.0, 1.5, 2.0, 7.0):
            h = 1e-5 * max(1.0, s)
            fd = (loss.smoothed_value(z + h, y, s) - loss.smoothed_value(z - h, y, s)) / (2 * h)
            der = loss.smoothed_derivative(z, y, s)
            np.testing.assert_allclose(der, fd, atol=1e-7 * (1.0 + 1.0 / s))
            assert np.all(np.abs(der) <= loss.lipschitz + 1e-12)
            slopes = np.diff(der) / np.diff(z)
            assert np.all(slopes >= -1e-9)  # φ̂ convex
            assert np.all(slopes <= loss.lipschitz * SQRT_2_OVER_PI / s * (1.0 + 1e-6) + 1e-9)


def _brute_force_expectation(fn, z: float, s: float, breaks: list[float]) -> float:
    """E fn(z + sZ) by composite 16-point Gauss–Legendre on u ∈ [−12, 12] (64 panels per piece between kinks)."""
    nodes, weights = np.polynomial.legendre.leggauss(16)
    edges = np.unique(np.clip([-12.0, 12.0, *breaks], -12.0, 12.0))
    total = 0.0
    for lo, hi in itertools.pairwise(edges):
        panels = np.linspace(lo, hi, 65)
        half = 0.5 * np.diff(panels)[:, None]
        u = (0.5 * (panels[:-1] + panels[1:]))[:, None] + half * nodes
        total += float(np.sum(half * weights * fn(z + s * u) * np.exp(-0.5 * u * u)))
    return total / math.sqrt(2.0 * math.pi)


@pytest.mark.parametrize("model", RESQUE_MODELS)
def test_smoothed_value_matches_quadrature(model: str) -> None:
    """φ̂(z, y; s) and φ̂' equal brute-force quadratures of E φ(z + sZ, y), E φ'(z + sZ, y) with the kinks as
    breakpoints: scipy.integrate.quad on a few points, composite Gauss–Legendre on a grid."""
    loss = LOSSES[model]
    for y in LABELS[loss.classification]:
        for z in (-2.0, -0.4, 0.0, 0.9, 3.0):
            for s in (0.02, 0.5, 1.2, 2.5):
                breaks = [(k - z) / s for k in _kinks(loss, y)]
                ref = _brute_force_expectation(lambda t, y=y: loss.value(t, y), z, s, breaks)
                dref = _brute_force_expectation(lambda t, y=y: loss.derivative(t, y), z, s, breaks)
                assert float(loss.smoothed_value(z, y, s)) == pytest.approx(ref, rel=1e-10, abs=1e-12)
                assert float(loss.smoothed_derivative(z, y, s)) == pytest.approx(dref, rel=1e-10, abs=1e-12)
        for z, s in ((-0.4, 0.02), (0.9, 1.2)):
            breaks = [(k - z) / s for k in _kinks(loss, y) if abs((k - z) / s) < 30]
            opts = {"points": breaks or None, "limit": 200, "epsabs": 1e-13, "epsrel": 1e-12}
            ref = quad(lambda u, y=y, z=z, s=s: float(loss.value(z + s * u, y)) * _npdf(u), -30, 30, **opts)[0]
            dref = quad(lambda u, y=y, z=z, s=s: float(loss.derivative(z + s * u, y)) * _npdf(u), -30, 30, **opts)[0]
            assert float(loss.smoothed_value(z, y, s)) == pytest.approx(ref, rel=1e-9, abs=1e-11)
            assert float(loss.smoothed_derivative(z, y, s)) == pytest.approx(dref, rel=1e-8, abs=1e-10)


def test_logistic_smoothing_at_large_scale() -> None:
    """Above s = 1.5 the logistic uses hinge + Gauss–Laguerre: checked against quad in t = yz + sZ space, and
    continuous across the switch."""
    loss = LOSSES["logistic"]
    for s in (1.6, 4.0, 30.0, 1e3):
        for m in (-500.0, -2.0, 0.0, 0.7, 60.0):
            dens = stats.norm(loc=m, scale=s).pdf
            lo, hi = m - 12 * s, m + 12 * s  # ℓ(t) = max(0, −t) + log(1 + e^{−|t|}), integrated in t-space
            pts = [0.0] if lo < 0 < hi else None
            relu = quad(lambda t, dens=dens: max(0.0, -t) * dens(t), lo, hi, points=pts, limit=200)[0]
            rem = quad(
                lambda t, dens=dens: np.log1p(np.exp(-abs(t))) * dens(t), -80, 80, points=[0.0], epsabs=1e-15, limit=200
            )[0]
            for y in (1.0, -1.0):
                assert float(loss.smoothed_value(m / y, y, s)) == pytest.approx(relu + rem, rel=1e-9, abs=1e-11)
    z = np.linspace(-3, 3, 13)
    for y in (-1.0, 1.0):
        lo, hi = 1.5, math.nextafter(1.5, 2.0)
        np.testing.assert_allclose(loss.smoothed_value(z, y, lo), loss.smoothed_value(z, y, hi), rtol=1e-11)
        np.testing.assert_allclose(loss.smoothed_derivative(z, y, lo), loss.smoothed_derivative(z, y, hi), atol=1e-11)


@pytest.mark.parametrize("model", RESQUE_MODELS)
def test_scale_zero_and_tiny_scale(model: str) -> None:
    """Scale 0 gives φ and the deterministic φ' exactly (kinks included); a tiny scale is finite and ≈ φ; only |s|
    matters; shapes broadcast."""
    loss = LOSSES[model]
    for y in LABELS[loss.classification]:
        z = np.concatenate([Z_GRID, _kinks(loss, y), [-1e12, 1e12]])
        assert np.array_equal(loss.smoothed_value(z, y, 0.0), loss.value(z, y))
        assert np.array_equal(loss.smoothed_derivative(z, y, 0.0), loss.derivative(z, y))
        tiny = loss.smoothed_value(z, y, 1e-300)
        assert np.all(np.isfinite(tiny))
        np.testing.assert_allclose(tiny, loss.value(z, y), rtol=1e-14, atol=1e-14)
        assert np.all(np.isfinite(loss.smoothed_derivative(z, y, 1e-300)))
        np.testing.assert_array_equal(loss.smoothed_value(z, y, -0.3), loss.smoothed_value(z, y, 0.3))
        assert np.all(np.isnan(loss.smoothed_value(z, y, np.nan)))
        assert np.all(np.isnan(loss.smoothed_derivative(z, y, np.nan)))
    out = loss.smoothed_derivative(np.zeros((3, 1)), LABELS[loss.classification][-1], np.array([0.0, 0.5]))
    assert out.shape == (3, 2)


def test_smoothed_glm_gradients_closed_forms() -> None:
    """Spec §2 GLM shortcut: hinge −y a Φ((1 − y⟨a, θ⟩)/(ρ‖a‖)), absolute a(2Φ((⟨a, θ⟩ − b)/(ρ‖a‖)) − 1); θ per row."""
    rng = _rng(29)
    k, d = 30, 5
    X = rng.standard_normal((k, d))
    theta = 0.3 * rng.standard_normal((k, d))
    y = np.sign(rng.standard_normal(k))
    m = np.sum(X * theta, axis=1)
    s = RHO * np.linalg.norm(X, axis=1)
    hinge = smoothed_glm_gradients(LOSSES["svm"], X, y, theta, RHO)
    np.testing.assert_allclose(hinge, (-y * ndtr((1 - y * m) / s))[:, None] * X, rtol=1e-12, atol=1e-15)
    b = 0.5 * y
    absolute = smoothed_glm_gradients(LOSSES["absolute"], X, b, theta, RHO)
    np.testing.assert_allclose(absolute, (2 * ndtr((m - b) / s) - 1)[:, None] * X, rtol=1e-12, atol=1e-15)
    for loss in LOSSES.values():
        np.testing.assert_array_equal(
            smoothed_glm_gradients(loss, X, y, theta, 0.0), glm_subgradients(loss, X, y, theta)
        )


# ---------------------------------------------------------------------------------------------------------
# 6. subgradients, constants, validation
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", RESQUE_MODELS)
def test_derivative_is_bounded_deterministic_subgradient(model: str) -> None:
    """|φ'| ≤ L_φ everywhere (kinks, huge |z|); backward FD ≤ φ' ≤ forward FD (φ' ∈ ∂φ for convex φ); fixed kink
    choices."""
    loss = LOSSES[model]
    for y in LABELS[loss.classification]:
        kinks = _kinks(loss, y)
        z = np.concatenate([np.linspace(-5, 5, 101), kinks, [-1e300, -1e12, 1e12, 1e300]])
        g = loss.derivative(z, y)
        assert np.all(np.isfinite(g)) and np.all(np.abs(g) <= loss.lipschitz)
        assert np.all(np.isfinite(loss.value(z, y)))
        zz = np.concatenate([np.linspace(-5, 5, 101), kinks])
        h = 1e-7
        back = (loss.value(zz, y) - loss.value(zz - h, y)) / h
        fwd = (loss.value(zz + h, y) - loss.value(zz, y)) / h
        gz = loss.derivative(zz, y)
        assert np.all(back - 1e-6 <= gz) and np.all(gz <= fwd + 1e-6)
        assert np.array_equal(gz, loss.derivative(zz, y))
    if model in ("svm", "absolute", "quantile"):
        for y in LABELS[loss.classification]:
            assert float(loss.derivative(_kinks(loss, y)[0], y)) == 0.0
    if model == "svm":
        np.testing.assert_array_equal(loss.derivative([0.5, 2.0, -2.0], [1.0, 1.0, -1.0]), [-1.0, 0.0, 0.0])
    if model == "quantile":
        np.testing.assert_array_equal(loss.derivative([1.0, -1.0], [0.0, 0.0]), [0.7, -0.3])


def test_margin_loss_constants() -> None:
    expected = {
        "logistic": (None, 1.0, True),
        "svm": (None, 1.0, True),
        "absolute": (None, 1.0, False),
        "quantile": (0.5, 0.5, False),
        "huber": (1.0, 1.0, False),
    }
    for model, (parameter, lipschitz, classification) in expected.items():
        loss = make_margin_loss(model)
        assert (loss.name, loss.parameter, loss.lipschitz, loss.classification) == (
            model,
            parameter,
            lipschitz,
            classification,
        )
        assert loss == make_margin_loss(model) and hash(loss) == hash(make_margin_loss(model))
    assert make_margin_loss("quantile", quantile_tau=0.8).lipschitz == pytest.approx(0.8)
    assert make_margin_loss("quantile", quantile_tau=0.3).lipschitz == pytest.approx(0.7)
    assert make_margin_loss("huber", huber_delta=2.5).lipschitz == 2.5
    # logistic and huber delegate to privfit.solvers.losses
    z = np.linspace(-3, 3, 7)
    np.testing.assert_array_equal(LOSSES["logistic"].value(z, 1.0), np.logaddexp(0.0, -z))
    np.testing.assert_array_equal(LOSSES["huber"].derivative(z, 0.5), np.clip(z - 0.5, -0.7, 0.7))
    with pytest.raises(AttributeError):
        LOSSES["svm"].name = "absolute"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"model": "hinge"}, "model"),
        ({"model": "linear"}, "model"),
        ({"model": 3}, "model"),
        ({"model": "quantile", "quantile_tau": 0.0}, "quantile_tau"),
        ({"model": "quantile", "quantile_tau": 1.0}, "quantile_tau"),
        ({"model": "quantile", "quantile_tau": float("nan")}, "quantile_tau"),
        ({"model": "quantile", "quantile_tau": True}, "quantile_tau"),
        ({"model": "huber", "huber_delta": 0.0}, "huber_delta"),
        ({"model": "huber", "huber_delta": -1.0}, "huber_delta"),
        ({"model": "huber", "huber_delta": float("inf")}, "huber_delta"),
        ({"model": "logistic", "quantile_tau": 0.5}, "quantile_tau"),
        ({"model": "huber", "quantile_tau": 0.5}, "quantile_tau"),
        ({"model": "svm", "huber_delta": 1.0}, "huber_delta"),
        ({"model": "quantile", "huber_delta": 1.0}, "huber_delta"),
    ],
)
def test_make_margin_loss_validation(kwargs: dict, field: str) -> None:
    model = kwargs.pop("model")
    with pytest.raises(SolverParameterError) as info:
        make_margin_loss(model, **kwargs)
    assert info.value.parameter == field
    if field == "model":
        assert all(name in str(info.value) for name in RESQUE_MODELS)


def test_direct_construction_is_validated() -> None:
    with pytest.raises(SolverParameterError, match="lipschitz"):
        MarginLoss(name="huber", parameter=2.0, lipschitz=1.0, classification=False)
    with pytest.raises(SolverParameterError, match="classification"):
        MarginLoss(name="svm", parameter=None, lipschitz=1.0, classification=False)
    with pytest.raises(SolverParameterError, match="parameter"):
        MarginLoss(name="absolute", parameter=0.5, lipschitz=1.0, classification=False)
    assert MarginLoss(name="huber", parameter=2.0, lipschitz=2.0, classification=False) == make_margin_loss(
        "huber", huber_delta=2.0
    )


def test_glm_subgradients_shapes_and_broadcasting() -> None:
    rng = _rng(31)
    k, d = 9, 4
    X = rng.standard_normal((k, d))
    y = np.sign(rng.standard_normal(k))
    theta = rng.standard_normal(d)
    for loss in LOSSES.values():
        G = glm_subgradients(loss, X, y, theta)
        assert G.shape == (k, d)
        np.testing.assert_array_equal(G, glm_subgradients(loss, X, y, np.tile(theta, (k, 1))))
        np.testing.assert_allclose(G, loss.derivative(X @ theta, y)[:, None] * X, rtol=1e-15)
        assert np.all(np.linalg.norm(G, axis=1) <= loss.lipschitz * np.linalg.norm(X, axis=1) * (1 + 1e-15))
    loss = LOSSES["absolute"]
    bad = [
        ((X[0], y, theta), "X"),
        ((X, y[:-1], theta), "y"),
        ((X, y, theta[:-1]), "points"),
        ((X, y, np.ones((k + 1, d))), "points"),
    ]
    for args, name in bad:
        with pytest.raises(SolverParameterError) as info:
            glm_subgradients(loss, *args)
        assert info.value.parameter == name
    xi = rng.standard_normal((k, d))
    for rho in (0.0, -1.0, float("nan"), "1"):
        with pytest.raises(SolverParameterError) as info:
            log_resque_weights(theta, xi, rho)  # type: ignore[arg-type]
        assert info.value.parameter == "rho"
    with pytest.raises(SolverParameterError) as info:
        resque_gradients(loss, X, y, theta, xi[:-1], theta, RHO)
    assert info.value.parameter == "xi"
    with pytest.raises(SolverParameterError) as info:
        log_resque_weights(np.ones(d + 1), xi, RHO)
    assert info.value.parameter == "v"
    with pytest.raises(SolverParameterError) as info:
        smoothed_glm_gradients(loss, X, y, theta, -0.1)
    assert info.value.parameter == "rho"


# ---------------------------------------------------------------------------------------------------------
# 7. numerical stability
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [1, 50, 300])
def test_log_weights_finite_for_large_v_and_d(d: int) -> None:
    rng = _rng(37 + d)
    k = 2000
    for rho in (1e-150, 1e-3, 1.0, 1e150):
        xi = rho * rng.standard_normal((k, d))
        for ratio in (0.0, 1.0, 3.0, 10.0):
            v = ratio * rho * _direction(rng, d)
            log_w = log_resque_weights(v, xi, rho)
            assert log_w.shape == (k,) and np.all(np.isfinite(log_w))
            z = xi / rho  # the same standard normals
            np.testing.assert_allclose(log_w, z @ (v / rho) - ratio**2 / 2, rtol=1e-9, atol=1e-9 * (1 + ratio))
            per_row = log_resque_weights(np.tile(v, (k, 1)), xi, rho)
            np.testing.assert_allclose(per_row, log_w, rtol=1e-13, atol=1e-13)


def test_no_floating_point_warnings_within_rho() -> None:
    """For ‖v‖ ≤ ρ (d up to 300) nothing overflows, and the estimate never produces nan; far outside the ball a
    zero subgradient still gives an exact 0 (the weight is combined with φ' in log space)."""
    rng = _rng(41)
    k, d = 4000, 300
    X = rng.standard_normal((k, d)) / math.sqrt(d)
    y = np.sign(rng.standard_normal(k))
    centre = rng.standard_normal(d) / math.sqrt(d)
    xi = RHO * rng.standard_normal((k, d))
    with warnings.catch_warnings(), np.errstate(over="raise", invalid="raise", divide="raise"):
        warnings.simplefilter("error")
        for loss in LOSSES.values():
            for ratio in (0.0, 0.5, 1.0):
                x = centre + ratio * RHO * _direction(rng, d)
                G = resque_gradients(loss, X, y, centre, xi, x, RHO)
                assert np.all(np.isfinite(G))
            assert np.all(np.isfinite(smoothed_glm_gradients(loss, X, y, centre, RHO)))
            assert np.all(np.isfinite(smoothed_glm_values(loss, X, y, centre, RHO)))
    # far outside (‖v‖ = 60ρ): w overflows for some ξ, yet rows with φ' = 0 stay exactly 0 (no 0·inf = nan)
    loss = LOSSES["svm"]
    v = 60 * RHO * _direction(rng, d)
    with np.errstate(over="ignore"):
        G = resque_gradients(loss, X, y, centre, xi, centre + v, RHO)
    zero_rows = glm_subgradients(loss, X, y, centre + xi)[:, 0] == 0.0
    assert np.any(zero_rows) and np.all(G[zero_rows] == 0.0)
    assert not np.any(np.isnan(G))
