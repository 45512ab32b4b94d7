"""Tests of privfit.solvers.geometry: per-example clipping, L2-ball projection, intercept augmentation."""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from privfit.solvers.geometry import (
    GeometryParameterError,
    augment_intercept,
    augmented_bound,
    clip_rows,
    clipped_scaled_row_sum,
    clipped_scales,
    project_l2_ball,
    row_norms,
)

finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)
thresholds = st.floats(1e-3, 1e3, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(
    G=hnp.arrays(np.float64, hnp.array_shapes(min_dims=2, max_dims=2, max_side=12), elements=finite),
    C=thresholds,
)
def test_clip_rows_properties(G: np.ndarray, C: float) -> None:
    before = G.copy()
    out = clip_rows(G, C)
    np.testing.assert_array_equal(G, before)  # input untouched
    assert out is not G and out.shape == G.shape and out.dtype == np.float64
    norms_in = np.linalg.norm(G, axis=1)
    norms_out = np.linalg.norm(out, axis=1)
    assert np.all(norms_out <= C)
    inside = norms_in <= C
    np.testing.assert_array_equal(out[inside], G[inside])  # rows already inside: bit-for-bit unchanged
    # clipped rows keep their direction and land on the sphere (up to rounding)
    for g, o, ng in zip(G[~inside], out[~inside], norms_in[~inside], strict=True):
        np.testing.assert_allclose(o * ng, g * C, rtol=1e-12, atol=1e-12 * ng * C)
        assert float(o @ g) > 0.0
        assert np.linalg.norm(o) == pytest.approx(C, rel=1e-12)


def matrix_cases(max_rows: int, max_cols: int, examples: int) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Hypothesis cases (X, data, C): an (n ≤ max_rows, d ≤ max_cols) matrix of finite entries and a threshold."""
    shapes = st.tuples(st.integers(1, max_rows), st.integers(1, max_cols))
    cases = given(X=hnp.arrays(np.float64, shapes, elements=finite), data=st.data(), C=thresholds)
    return lambda test: settings(max_examples=examples, deadline=None)(cases(test))


@matrix_cases(30, 8, examples=100)
def test_clipped_scaled_row_sum_equals_the_explicit_clipped_sum(X: np.ndarray, data: st.DataObject, C: float) -> None:
    """The GLM shortcut (issue 23): Σ clip_C(s_i x_i) from the row norms and scalars equals clipping the formed
    vectors with :func:`clip_rows` and summing them, to 1e-12 relative to Σ‖clip_C(s_i x_i)‖₁ — one θ and k θ."""
    k = data.draw(st.integers(1, 3))
    S = data.draw(hnp.arrays(np.float64, (X.shape[0], k), elements=st.floats(-1e3, 1e3, allow_nan=False)))
    explicit = np.stack([clip_rows(S[:, [j]] * X, C).sum(axis=0) for j in range(k)])
    # Σ_i‖·‖₁ of the clipped summands (no squares: no underflow on tiny entries)
    scale = max(float(np.abs(clip_rows(S[:, [j]] * X, C)).sum()) for j in range(k))
    fast = clipped_scaled_row_sum(X, S, C)
    np.testing.assert_allclose(fast, explicit, rtol=0, atol=1e-12 * max(scale, 1e-300))
    single = clipped_scaled_row_sum(X, S[:, 0], C, norms=row_norms(X))
    np.testing.assert_allclose(single, explicit[0], rtol=0, atol=1e-12 * max(scale, 1e-300))


@matrix_cases(20, 40, examples=200)
def test_clipped_scales_bound_every_summand_exactly(X: np.ndarray, data: st.DataObject, C: float) -> None:
    """|w_i|·‖x_i‖ ≤ C in exact rational arithmetic (the sensitivity claim: each summand w_i x_i has norm ≤ C), and
    w_i = s_i bit for bit when |s_i|·‖x_i‖ ≤ C."""
    s = data.draw(hnp.arrays(np.float64, (X.shape[0],), elements=st.floats(-1e6, 1e6, allow_nan=False)))
    w = clipped_scales(s, row_norms(X), C, X.shape[1])
    for wi, si, xi in zip(w, s, X, strict=True):
        squared = sum(Fraction(float(v)) ** 2 for v in xi)
        assert Fraction(float(wi)) ** 2 * squared <= Fraction(C) ** 2
        if abs(si) * float(np.linalg.norm(xi)) <= C:
            assert wi == si


def test_clip_rows_examples() -> None:
    G = np.array([[3.0, 4.0], [0.0, 0.0], [0.3, 0.4], [-6.0, 8.0]])
    out = clip_rows(G, 1.0)
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.0, 0.0], [0.3, 0.4], [-0.6, 0.8]])
    np.testing.assert_array_equal(out[1], [0.0, 0.0])
    assert clip_rows(np.zeros((0, 3)), 1.0).shape == (0, 3)
    # rows whose rescaled norm would round above C are nudged inside
    rng = np.random.default_rng(0)
    G = rng.standard_normal((2000, 7)) * 10.0
    for C in (0.1, 1 / 3, math.pi, 7.000000000000001):
        assert np.all(np.linalg.norm(clip_rows(G, C), axis=1) <= C)


@pytest.mark.parametrize("C", [0.0, -1.0, math.nan, math.inf, True, "1"])
def test_clip_rows_rejects_bad_threshold(C: object) -> None:
    with pytest.raises(GeometryParameterError, match="C"):
        clip_rows(np.ones((2, 2)), C)  # type: ignore[arg-type]


def test_clip_rows_rejects_non_matrix() -> None:
    with pytest.raises(GeometryParameterError, match="G"):
        clip_rows(np.ones(3), 1.0)


@settings(max_examples=200, deadline=None)
@given(
    theta=hnp.arrays(np.float64, st.integers(1, 10), elements=finite),
    R=st.just(0.0) | st.floats(1e-6, 1e3),
    data=st.data(),
)
def test_project_l2_ball_properties(theta: np.ndarray, R: float, data: st.DataObject) -> None:
    p = project_l2_ball(theta, R)
    assert p is not theta and p.shape == theta.shape
    assert np.linalg.norm(p) <= R  # onto the ball
    np.testing.assert_array_equal(project_l2_ball(p, R), p)  # idempotent, exactly
    if np.linalg.norm(theta) <= R:
        np.testing.assert_array_equal(p, theta)
    else:
        assert np.linalg.norm(p) == pytest.approx(R, rel=1e-12, abs=1e-300)
        if R > 0:
            np.testing.assert_allclose(p * np.linalg.norm(theta), theta * R, rtol=1e-12, atol=1e-9 * R)
    # nearest point of the ball: ‖θ − Π(θ)‖ ≤ ‖θ − u‖ for u in the ball
    u = data.draw(hnp.arrays(np.float64, theta.shape, elements=st.floats(-1.0, 1.0)))
    nu = np.linalg.norm(u)
    if nu > 0:
        u = u / nu * R * min(1.0, nu)
    dist_p, dist_u = np.linalg.norm(theta - p), np.linalg.norm(theta - u)
    assert dist_p <= dist_u * (1 + 1e-12) + 1e-9


def test_project_l2_ball_examples_and_errors() -> None:
    np.testing.assert_allclose(project_l2_ball(np.array([3.0, 4.0]), 1.0), [0.6, 0.8])
    np.testing.assert_array_equal(project_l2_ball(np.array([3.0, 4.0]), 0.0), [0.0, 0.0])
    np.testing.assert_array_equal(project_l2_ball(np.array([0.3, 0.4]), 1.0), [0.3, 0.4])
    with pytest.raises(GeometryParameterError, match="R"):
        project_l2_ball(np.ones(2), -1.0)
    with pytest.raises(GeometryParameterError, match="R"):
        project_l2_ball(np.ones(2), math.nan)
    with pytest.raises(GeometryParameterError, match="theta"):
        project_l2_ball(np.ones((2, 2)), 1.0)


def test_augment_intercept() -> None:
    X = np.array([[1.0, 2.0], [3.0, 4.0]])
    Xa = augment_intercept(X)
    np.testing.assert_array_equal(Xa, [[1.0, 2.0, 1.0], [3.0, 4.0, 1.0]])
    np.testing.assert_array_equal(X, [[1.0, 2.0], [3.0, 4.0]])
    assert augment_intercept(np.zeros((0, 2))).shape == (0, 3)
    with pytest.raises(GeometryParameterError, match="X"):
        augment_intercept(np.ones(3))


@pytest.mark.parametrize("B_x", [0.0, 1e-9, 0.1, 1.0, 2.0, 3.0, 1 / 3, 7.5, 1e8])
def test_augmented_bound_is_the_tight_upper_bound(B_x: float) -> None:
    b = augmented_bound(B_x)
    exact_sq = Fraction(B_x) ** 2 + 1
    assert Fraction(b) ** 2 >= exact_sq  # never below sqrt(B_x² + 1)
    assert Fraction(math.nextafter(b, 0.0)) ** 2 < exact_sq  # and the smallest such float
    rng = np.random.default_rng(1)
    X = rng.standard_normal((500, 4))
    X *= B_x / np.linalg.norm(X, axis=1, keepdims=True)
    assert np.all(np.linalg.norm(augment_intercept(X), axis=1) <= b * (1 + 1e-15))
