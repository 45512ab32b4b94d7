"""Tests of privfit.solvers.losses: gradients, public constants, convexity, stability, factory."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy.optimize import minimize

from privfit.solvers.geometry import augment_intercept, augmented_bound
from privfit.solvers.losses import (
    LOSS_REGISTRY,
    GLMLoss,
    HuberLoss,
    LogisticLoss,
    LossParameterError,
    RegularizedLoss,
    SmoothedHingeLoss,
    SquaredLoss,
    available_models,
    make_loss,
)

B_X, B_Y, R = 2.0, 0.8, 3.0

BASE_LOSSES: list[GLMLoss] = [
    LogisticLoss(),
    SquaredLoss(),
    HuberLoss(0.3),
    HuberLoss(2.0),
    SmoothedHingeLoss(1.0),
    SmoothedHingeLoss(0.1),
]
ALL_LOSSES: list[GLMLoss] = BASE_LOSSES + [RegularizedLoss(loss, 0.37) for loss in BASE_LOSSES]


def _ids(losses: list[GLMLoss]) -> list[str]:
    return [repr(loss) for loss in losses]


def b_y(loss: GLMLoss) -> float:
    """Label bound of the data convention: ±1 labels for classification."""
    return 1.0 if loss.is_classification else B_Y


def random_rows(rng: np.random.Generator, n: int, d: int, B_x: float = B_X) -> np.ndarray:
    """Rows with ‖x‖ ≤ B_x; the first third sit exactly on the sphere ‖x‖ = B_x (adversarial corner)."""
    dirs = rng.standard_normal((n, d))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    radii = B_x * rng.uniform(0.0, 1.0, n)
    radii[: n // 3] = B_x
    return dirs * radii[:, None]


def random_labels(rng: np.random.Generator, loss: GLMLoss, n: int) -> np.ndarray:
    if loss.is_classification:
        return rng.choice([-1.0, 1.0], n)
    y = rng.uniform(-B_Y, B_Y, n)
    y[: n // 4] = rng.choice([-B_Y, B_Y], n // 4)
    return y


def random_in_ball(rng: np.random.Generator, d: int, radius: float = R) -> np.ndarray:
    v = rng.standard_normal(d)
    return v / np.linalg.norm(v) * radius * rng.uniform() ** (1.0 / d)


# --------------------------------------------------------------------------------------------------
# gradients: central finite differences (rtol 1e-6)
# --------------------------------------------------------------------------------------------------

FD_STEP = 1e-6


def fd_per_example(loss: GLMLoss, theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    d = theta.shape[0]
    cols = []
    for j in range(d):
        e = np.zeros(d)
        e[j] = FD_STEP
        cols.append((loss.value(theta + e, X, y) - loss.value(theta - e, X, y)) / (2 * FD_STEP))
    return np.stack(cols, axis=1)


@pytest.mark.parametrize("loss", ALL_LOSSES, ids=_ids(ALL_LOSSES))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_per_example_gradients_match_finite_differences(loss: GLMLoss, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, d = 40, 5
    X, y = random_rows(rng, n, d), random_labels(rng, loss, n)
    theta = random_in_ball(rng, d)
    G = loss.per_example_gradients(theta, X, y)
    assert G.shape == (n, d)
    np.testing.assert_allclose(G, fd_per_example(loss, theta, X, y), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("loss", ALL_LOSSES, ids=_ids(ALL_LOSSES))
def test_mean_gradient_matches_finite_differences(loss: GLMLoss) -> None:
    rng = np.random.default_rng(11)
    n, d = 60, 4
    X, y = random_rows(rng, n, d), random_labels(rng, loss, n)
    theta = random_in_ball(rng, d)
    fd = np.empty(d)
    for j in range(d):
        e = np.zeros(d)
        e[j] = FD_STEP
        fd[j] = (loss.mean_value(theta + e, X, y) - loss.mean_value(theta - e, X, y)) / (2 * FD_STEP)
    np.testing.assert_allclose(loss.mean_gradient(theta, X, y), fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("loss", ALL_LOSSES, ids=_ids(ALL_LOSSES))
def test_hessian_vector_product_matches_finite_differences(loss: GLMLoss) -> None:
    rng = np.random.default_rng(12)
    n, d = 50, 4
    X, y = random_rows(rng, n, d), random_labels(rng, loss, n)
    theta, v = random_in_ball(rng, d), rng.standard_normal(d)
    fd = (loss.mean_gradient(theta + FD_STEP * v, X, y) - loss.mean_gradient(theta - FD_STEP * v, X, y)) / (2 * FD_STEP)
    hvp = loss.hessian_vector_product(theta, X, y, v)
    np.testing.assert_allclose(hvp, fd, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(loss.hessian(theta, X, y) @ v, hvp, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("loss", BASE_LOSSES, ids=_ids(BASE_LOSSES))
def test_scalar_link_derivatives_match_finite_differences(loss: GLMLoss) -> None:
    z = np.linspace(-7.3, 7.1, 1001)
    for label in [-1.0, 1.0] if loss.is_classification else [-B_Y, 0.1, B_Y]:
        y = np.full_like(z, label)
        d1 = (loss.phi(z + FD_STEP, y) - loss.phi(z - FD_STEP, y)) / (2 * FD_STEP)
        np.testing.assert_allclose(loss.dphi(z, y), d1, rtol=1e-6, atol=1e-8)
        d2 = (loss.dphi(z + FD_STEP, y) - loss.dphi(z - FD_STEP, y)) / (2 * FD_STEP)
        ok = np.abs(d2 - loss.d2phi(z, y)) <= 1e-5 * (1 + np.abs(d2))
        assert np.mean(ok) > 0.99  # φ'' may jump at the (measure-zero) kinks of Huber / smoothed hinge


@settings(max_examples=60, deadline=None)
@given(
    data=st.data(),
    n=st.integers(0, 25),
    d=st.integers(1, 6),
    loss=st.sampled_from(ALL_LOSSES),
)
def test_gradient_sum_equals_sum_of_per_example_gradients(data: st.DataObject, n: int, d: int, loss: GLMLoss) -> None:
    elems = st.floats(-1.0, 1.0, allow_nan=False)
    X = data.draw(hnp.arrays(np.float64, (n, d), elements=elems))
    y = data.draw(hnp.arrays(np.float64, (n,), elements=st.sampled_from([-1.0, 1.0]) | elems))
    theta = data.draw(hnp.arrays(np.float64, (d,), elements=st.floats(-5.0, 5.0)))
    G = loss.per_example_gradients(theta, X, y)
    np.testing.assert_allclose(loss.gradient_sum(theta, X, y), G.sum(axis=0), rtol=1e-12, atol=1e-12)
    if n > 0:
        np.testing.assert_allclose(loss.mean_gradient(theta, X, y), G.mean(axis=0), rtol=1e-12, atol=1e-12)
        assert loss.mean_value(theta, X, y) == pytest.approx(float(np.mean(loss.value(theta, X, y))))


def test_per_example_gradients_are_dphi_times_rows() -> None:
    rng = np.random.default_rng(3)
    X, y, theta = random_rows(rng, 30, 3), rng.choice([-1.0, 1.0], 30), rng.standard_normal(3)
    loss = LogisticLoss()
    expected = loss.dphi(X @ theta, y)[:, None] * X
    np.testing.assert_array_equal(loss.per_example_gradients(theta, X, y), expected)


# --------------------------------------------------------------------------------------------------
# public constants: Lipschitz, smoothness, second derivative
# --------------------------------------------------------------------------------------------------


def corner_cases(
    rng: np.random.Generator, loss: GLMLoss, d: int, radius: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(thetas, X, y): ‖x‖ = B_x, θ = ±R·x/‖x‖ (aligned / anti-aligned), y at its extremes and 0."""
    X, Y, T = [], [], []
    labels = [-1.0, 1.0] if loss.is_classification else [-B_Y, 0.0, B_Y]
    for _ in range(20):
        x = rng.standard_normal(d)
        x *= B_X / np.linalg.norm(x)
        for sign in (-1.0, 1.0):
            for label in labels:
                X.append(x)
                Y.append(label)
                T.append(sign * radius * x / B_X)
    return np.array(T), np.array(X), np.array(Y)


def grad_norms_at(loss: GLMLoss, thetas: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.array(
        [
            np.linalg.norm(loss.per_example_gradients(t, x[None, :], np.array([lab]))[0])
            for t, x, lab in zip(thetas, X, y, strict=True)
        ]
    )


@pytest.mark.parametrize("loss", ALL_LOSSES, ids=_ids(ALL_LOSSES))
def test_lipschitz_bound_holds_on_the_ball(loss: GLMLoss) -> None:
    rng = np.random.default_rng(21)
    d = 4
    G = loss.lipschitz(B_X, b_y(loss), R)
    # random θ in the ball, random rows within bounds
    n = 400
    X, y = random_rows(rng, n, d), random_labels(rng, loss, n)
    thetas = np.array([random_in_ball(rng, d) for _ in range(n)])
    assert np.all(grad_norms_at(loss, thetas, X, y) <= G + 1e-12)
    # adversarial corners: ‖x‖ = B_x, θ aligned or anti-aligned with x, on the sphere ‖θ‖ = R
    Tc, Xc, yc = corner_cases(rng, loss, d, R)
    norms = grad_norms_at(loss, Tc, Xc, yc)
    assert np.all(norms <= G + 1e-12)
    # the stated constants are attained (up to the logistic tail) at the corners
    if isinstance(loss, SquaredLoss | HuberLoss | SmoothedHingeLoss):
        assert norms.max() == pytest.approx(G, rel=1e-9)
    if isinstance(loss, RegularizedLoss) and not isinstance(loss.base, LogisticLoss):
        assert norms.max() == pytest.approx(G, rel=1e-9)


@pytest.mark.parametrize("loss", [lo for lo in BASE_LOSSES if lo.lipschitz_is_global], ids=str)
def test_global_lipschitz_bound_holds_outside_the_ball(loss: GLMLoss) -> None:
    rng = np.random.default_rng(22)
    G = loss.lipschitz(B_X, b_y(loss))  # R = inf
    Tc, Xc, yc = corner_cases(rng, loss, 3, 1e4)
    assert np.all(grad_norms_at(loss, Tc, Xc, yc) <= G + 1e-12)
    assert grad_norms_at(loss, Tc, Xc, yc).max() == pytest.approx(G, rel=1e-9)


def test_logistic_lipschitz_is_approached_at_large_margins() -> None:
    loss = LogisticLoss()
    x = np.array([[B_X, 0.0]])
    g = loss.per_example_gradients(np.array([-50.0, 0.0]), x, np.array([1.0]))
    assert np.linalg.norm(g) == pytest.approx(loss.lipschitz(B_X, 1.0, R), rel=1e-12)


@pytest.mark.parametrize("loss", ALL_LOSSES, ids=_ids(ALL_LOSSES))
def test_smoothness_bound_via_finite_difference_hessian_vector_products(loss: GLMLoss) -> None:
    rng = np.random.default_rng(31)
    d = 4
    beta = loss.smoothness(B_X)
    for _ in range(300):
        x = random_rows(rng, 1, d)
        if rng.uniform() < 0.5:
            x *= B_X / np.linalg.norm(x)
        y = random_labels(rng, loss, 3)[:1]
        theta = random_in_ball(rng, d)
        v = x[0] / np.linalg.norm(x[0]) if rng.uniform() < 0.5 else rng.standard_normal(d)
        v /= np.linalg.norm(v)
        t = 1e-6
        hv = loss.per_example_gradients(theta + t * v, x, y) - loss.per_example_gradients(theta - t * v, x, y)
        assert np.linalg.norm(hv / (2 * t)) <= beta * (1 + 1e-6) + 1e-9
        # gradient-Lipschitz form of smoothness, valid across kinks: ‖∇ℓ(a) − ∇ℓ(b)‖ ≤ β‖a − b‖
        a, b = random_in_ball(rng, d), random_in_ball(rng, d)
        diff = loss.per_example_gradients(a, x, y) - loss.per_example_gradients(b, x, y)
        assert np.linalg.norm(diff) <= beta * np.linalg.norm(a - b) * (1 + 1e-12) + 1e-12


@pytest.mark.parametrize("loss", BASE_LOSSES, ids=_ids(BASE_LOSSES))
def test_smoothness_bound_is_attained_at_maximal_curvature(loss: GLMLoss) -> None:
    # x on the sphere, direction v = x/‖x‖, margin where φ'' is largest
    x = np.array([[B_X, 0.0]])
    y = np.array([1.0 if loss.is_classification else 0.0])
    z_star = 1.0 - loss.h / 2 if isinstance(loss, SmoothedHingeLoss) else 0.0
    theta = np.array([z_star / B_X, 0.0])
    hv = loss.hessian_vector_product(theta, x, y, np.array([1.0, 0.0]))
    assert np.linalg.norm(hv) == pytest.approx(loss.smoothness(B_X), rel=1e-12)


@pytest.mark.parametrize("loss", BASE_LOSSES, ids=_ids(BASE_LOSSES))
def test_second_derivative_bound_on_a_grid(loss: GLMLoss) -> None:
    c = loss.second_derivative_bound()
    z = np.linspace(-30.0, 30.0, 60001)
    labels = [-1.0, -0.5, 0.0, 0.5, 1.0] if loss.is_classification else [-B_Y, 0.0, B_Y, 5.0]
    top = 0.0
    for label in labels:
        d2 = loss.d2phi(z, np.full_like(z, label))
        assert np.all(d2 >= 0.0)
        assert np.all(d2 <= c)
        top = max(top, float(d2.max()))
    assert top == pytest.approx(c, rel=1e-6)


def test_constants_table() -> None:
    B_x, B_y, radius = 2.0, 0.5, 3.0
    expected = {  # loss: (c, β, G)
        LogisticLoss(): (0.25, B_x**2 / 4, B_x),
        SquaredLoss(): (1.0, B_x**2, (radius * B_x + B_y) * B_x),
        HuberLoss(0.5): (1.0, B_x**2, 0.5 * B_x),
        SmoothedHingeLoss(0.25): (4.0, B_x**2 / 0.25, B_x),
    }
    for loss, (c, beta, G) in expected.items():
        assert loss.second_derivative_bound() == c
        got_beta, got_G = loss.smoothness(B_x), loss.lipschitz(B_x, B_y, radius)
        assert got_beta >= beta and got_beta == pytest.approx(beta, rel=1e-12)  # rounded up, never down
        assert got_G >= G and got_G == pytest.approx(G, rel=1e-12)
        assert loss.strong_convexity() == 0.0
        assert loss.hessian_bound(B_x) == got_beta
        lam = 0.1
        reg = RegularizedLoss(loss, lam)
        assert reg.strong_convexity() == lam
        assert reg.smoothness(B_x) >= beta + lam
        assert reg.smoothness(B_x) == pytest.approx(beta + lam, rel=1e-12)
        assert reg.lipschitz(B_x, B_y, radius) == pytest.approx(G + lam * radius, rel=1e-12)
        assert reg.lipschitz(B_x, B_y, radius) >= G + lam * radius
        assert reg.second_derivative_bound() == c


def test_constants_are_rounded_up_never_down() -> None:
    # exact when representable
    assert LogisticLoss().lipschitz(2.0, 1.0, 3.0) == 2.0
    assert LogisticLoss().smoothness(2.0) == 1.0
    assert RegularizedLoss(LogisticLoss(), 0.0).lipschitz(1.0, 1.0) == 1.0
    # otherwise the smallest float above the exact rational value
    for h in (0.3, 0.7, 1 / 3, 0.1):
        c = SmoothedHingeLoss(h).second_derivative_bound()
        assert Fraction(c) >= 1 / Fraction(h) and Fraction(math.nextafter(c, 0.0)) < 1 / Fraction(h)
    B_x, B_y, radius, lam = 0.1, 0.3, 0.7, 0.01
    G = SquaredLoss().lipschitz(B_x, B_y, radius)
    assert Fraction(G) >= (Fraction(radius) * Fraction(B_x) + Fraction(B_y)) * Fraction(B_x)
    beta = RegularizedLoss(SmoothedHingeLoss(0.3), lam).smoothness(B_x)
    assert Fraction(beta) >= Fraction(B_x) ** 2 / Fraction(0.3) + Fraction(lam)
    r = RegularizedLoss(SquaredLoss(), lam).minimizer_radius(B_y)
    assert Fraction(r) ** 2 >= 2 * (Fraction(B_y) ** 2 / 2) / Fraction(lam)


def test_constant_domain_errors() -> None:
    with pytest.raises(LossParameterError, match="R"):
        SquaredLoss().lipschitz(1.0, 1.0)  # squared loss needs a finite ball
    with pytest.raises(LossParameterError, match="R"):
        RegularizedLoss(LogisticLoss(), 0.1).lipschitz(1.0, 1.0)
    with pytest.raises(LossParameterError, match="B_y"):
        LogisticLoss().lipschitz(1.0, 2.0, 1.0)  # ±1 labels
    for bad in (-1.0, math.nan, math.inf, True, "2"):
        with pytest.raises(LossParameterError, match="B_x"):
            HuberLoss().lipschitz(bad, 1.0, 1.0)
        with pytest.raises(LossParameterError, match="B_x"):
            HuberLoss().smoothness(bad)
    with pytest.raises(LossParameterError, match="R"):
        HuberLoss().lipschitz(1.0, 1.0, -1.0)
    assert HuberLoss(0.5).lipschitz(2.0, 1.0, math.inf) == pytest.approx(1.0)
    assert SquaredLoss().lipschitz_is_global is False
    assert RegularizedLoss(HuberLoss(), 1.0).lipschitz_is_global is False


def test_intercept_augmentation_bound_feeds_the_constants() -> None:
    rng = np.random.default_rng(41)
    X = random_rows(rng, 200, 3)
    Xa = augment_intercept(X)
    B_aug = augmented_bound(B_X)
    assert np.all(np.linalg.norm(Xa, axis=1) <= B_aug)
    loss = LogisticLoss()
    y = rng.choice([-1.0, 1.0], 200)
    thetas = np.array([random_in_ball(rng, 4) for _ in range(200)])
    assert np.all(grad_norms_at(loss, thetas, Xa, y) <= loss.lipschitz(B_aug, 1.0, R) + 1e-12)
    theta = np.array([0.5, -1.0, 2.0, 0.25])  # last coordinate is the intercept
    np.testing.assert_allclose(loss.margins(theta, Xa), X @ theta[:3] + 0.25)


# --------------------------------------------------------------------------------------------------
# convexity, regularisation
# --------------------------------------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(
    data=st.data(),
    d=st.integers(1, 5),
    loss=st.sampled_from(ALL_LOSSES),
)
def test_convexity_midpoint(data: st.DataObject, d: int, loss: GLMLoss) -> None:
    n = 8
    X = data.draw(hnp.arrays(np.float64, (n, d), elements=st.floats(-1.0, 1.0)))
    labels = st.sampled_from([-1.0, 1.0]) if loss.is_classification else st.floats(-1.0, 1.0)
    y = data.draw(hnp.arrays(np.float64, (n,), elements=labels))
    a = data.draw(hnp.arrays(np.float64, (d,), elements=st.floats(-20.0, 20.0)))
    b = data.draw(hnp.arrays(np.float64, (d,), elements=st.floats(-20.0, 20.0)))
    mid = loss.value(0.5 * (a + b), X, y)
    avg = 0.5 * (loss.value(a, X, y) + loss.value(b, X, y))
    # λ-strong convexity: ℓ(mid) ≤ avg − (λ/8)‖a − b‖²
    gap = loss.strong_convexity() / 8 * float(np.sum((a - b) ** 2))
    assert np.all(mid <= avg - gap + 1e-12 * (1 + np.abs(avg)))


def test_regularized_loss_adds_the_penalty() -> None:
    rng = np.random.default_rng(51)
    X, y, theta = random_rows(rng, 20, 3), rng.choice([-1.0, 1.0], 20), rng.standard_normal(3)
    base, lam = SmoothedHingeLoss(0.5), 0.3
    reg = RegularizedLoss(base, lam)
    pen = 0.5 * lam * float(theta @ theta)
    np.testing.assert_allclose(reg.value(theta, X, y), base.value(theta, X, y) + pen)
    np.testing.assert_allclose(reg.mean_value(theta, X, y), base.mean_value(theta, X, y) + pen)
    np.testing.assert_allclose(
        reg.per_example_gradients(theta, X, y), base.per_example_gradients(theta, X, y) + lam * theta
    )
    np.testing.assert_allclose(reg.gradient_sum(theta, X, y), base.gradient_sum(theta, X, y) + 20 * lam * theta)
    np.testing.assert_allclose(reg.mean_gradient(theta, X, y), base.mean_gradient(theta, X, y) + lam * theta)
    np.testing.assert_allclose(reg.hessian(theta, X, y), base.hessian(theta, X, y) + lam * np.eye(3))
    assert reg.name == "svm" and reg.is_classification and reg.l2 == lam
    assert reg.public_params() == {"h": 0.5, "l2": lam}
    np.testing.assert_array_equal(reg.predict(theta, X), base.predict(theta, X))
    with pytest.raises(LossParameterError, match="l2"):
        RegularizedLoss(base, -1.0)
    with pytest.raises(LossParameterError, match="loss"):
        RegularizedLoss(reg, 0.1)


@pytest.mark.parametrize("loss", BASE_LOSSES, ids=_ids(BASE_LOSSES))
def test_minimizer_radius_contains_the_regularized_minimizer(loss: GLMLoss) -> None:
    rng = np.random.default_rng(61)
    n, d, lam = 200, 3, 0.05
    X, y = random_rows(rng, n, d), random_labels(rng, loss, n)
    reg = RegularizedLoss(loss, lam)
    res = minimize(
        lambda t: reg.mean_value(t, X, y),
        np.zeros(d),
        jac=lambda t: reg.mean_gradient(t, X, y),
        method="L-BFGS-B",
        options={"gtol": 1e-10},
    )
    assert np.linalg.norm(res.x) <= reg.minimizer_radius(b_y(loss))
    assert reg.max_loss_at_zero(b_y(loss)) >= float(np.max(loss.value(np.zeros(d), X, y)))
    with pytest.raises(LossParameterError, match="l2"):
        RegularizedLoss(loss, 0.0).minimizer_radius()


# --------------------------------------------------------------------------------------------------
# numerical stability
# --------------------------------------------------------------------------------------------------


def test_logistic_is_stable_for_large_margins() -> None:
    loss = LogisticLoss()
    z = np.concatenate([np.linspace(-1e4, 1e4, 2001), [-1e4, 1e4, -745.0, 745.0, 0.0]])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        for label in (-1.0, 1.0):
            y = np.full_like(z, label)
            v, g, h = loss.phi(z, y), loss.dphi(z, y), loss.d2phi(z, y)
            assert np.all(np.isfinite(v)) and np.all(np.isfinite(g)) and np.all(np.isfinite(h))
            assert np.all(v >= 0.0)
        y = np.array([1.0, 1.0, -1.0])
        np.testing.assert_allclose(loss.phi(np.array([-1e4, 1e4, 1e4]), y), [1e4, 0.0, 1e4], rtol=1e-15)
        X = np.array([[1.0, 0.0], [0.0, 1.0]])
        theta = np.array([1e4, -1e4])
        assert np.all(np.isfinite(loss.per_example_gradients(theta, X, np.array([1.0, 1.0]))))
        assert np.isfinite(loss.mean_value(theta, X, np.array([1.0, 1.0])))
    assert float(loss.phi(np.array([0.0]), np.array([1.0]))[0]) == pytest.approx(math.log(2.0))


@pytest.mark.parametrize("loss", BASE_LOSSES[2:], ids=_ids(BASE_LOSSES[2:]))
def test_piecewise_losses_do_not_overflow(loss: GLMLoss) -> None:
    z = np.array([-1e300, -1e10, 0.0, 1e10, 1e300])
    with np.errstate(over="raise", invalid="raise"):
        for label in (-1.0, 1.0):
            y = np.full_like(z, label)
            assert np.all(np.isfinite(loss.phi(z, y)))
            assert np.all(np.isfinite(loss.dphi(z, y)))


def test_piecewise_values_match_their_definitions() -> None:
    hub = HuberLoss(0.5)
    r = np.array([-2.0, -0.5, -0.1, 0.0, 0.3, 0.5, 3.0])
    expect = np.where(np.abs(r) <= 0.5, r**2 / 2, 0.5 * (np.abs(r) - 0.25))
    np.testing.assert_allclose(hub.phi(r, np.zeros_like(r)), expect, rtol=1e-15)
    h = 0.4
    svm = SmoothedHingeLoss(h)
    m = np.array([-3.0, 0.0, 0.6, 0.7, 0.9, 1.0, 2.0])
    expect = np.where(m >= 1, 0.0, np.where(m > 1 - h, (1 - m) ** 2 / (2 * h), 1 - m - h / 2))
    np.testing.assert_allclose(svm.phi(m, np.ones_like(m)), expect, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(svm.phi(-m, -np.ones_like(m)), expect, rtol=1e-14, atol=1e-15)
    gap = np.maximum(0.0, 1 - m) - svm.phi(m, np.ones_like(m))  # 0 ≤ hinge − ψ_h ≤ h/2
    assert np.all((gap >= -1e-15) & (gap <= h / 2))
    sq = SquaredLoss()
    np.testing.assert_allclose(sq.phi(np.array([3.0]), np.array([-1.0])), [8.0])


# --------------------------------------------------------------------------------------------------
# prediction, factory, shapes
# --------------------------------------------------------------------------------------------------


def test_predict() -> None:
    X = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]])
    theta = np.array([2.0, 0.0])
    for loss in (LogisticLoss(), SmoothedHingeLoss()):
        np.testing.assert_array_equal(loss.predict(theta, X), [1.0, -1.0, 1.0])  # margin 0 ↦ +1
    for loss in (SquaredLoss(), HuberLoss()):
        np.testing.assert_array_equal(loss.predict(theta, X), [2.0, -2.0, 0.0])
    p = LogisticLoss().predict_proba(theta, X)
    np.testing.assert_allclose(p, [1 / (1 + math.exp(-2)), 1 / (1 + math.exp(2)), 0.5])


def test_make_loss_registry_and_params() -> None:
    assert available_models() == ("logistic", "linear", "huber", "svm")
    assert set(LOSS_REGISTRY) == set(available_models())
    assert isinstance(make_loss("logistic"), LogisticLoss)
    assert isinstance(make_loss("linear"), SquaredLoss)
    assert make_loss("huber", delta=0.7).delta == 0.7
    assert make_loss("huber").delta == 1.0
    assert make_loss("svm", h=0.2).h == 0.2
    assert make_loss("svm", h=1).h == 1.0
    reg = make_loss("linear", l2=0.5)
    assert isinstance(reg, RegularizedLoss) and isinstance(reg.base, SquaredLoss) and reg.l2 == 0.5
    assert not isinstance(make_loss("linear", l2=0.0), RegularizedLoss)
    for loss_name in available_models():
        assert make_loss(loss_name).name == loss_name


@pytest.mark.parametrize(
    ("model", "params", "match"),
    [
        ("ridge", {}, r"unknown model 'ridge'.*'logistic', 'linear', 'huber', 'svm'"),
        ("LOGISTIC", {}, r"unknown model 'LOGISTIC'"),
        ("huber", {"delta": 0.0}, r"delta"),
        ("huber", {"delta": -1.0}, r"delta"),
        ("huber", {"delta": math.nan}, r"delta"),
        ("huber", {"delta": math.inf}, r"delta"),
        ("huber", {"delta": True}, r"delta"),
        ("huber", {"delta": "x"}, r"delta"),
        ("svm", {"h": 0.0}, r"h: .*\(0, 1\]"),
        ("svm", {"h": 1.5}, r"h: .*\(0, 1\]"),
        ("svm", {"delta": 0.5}, r"delta: is not a parameter of the 'svm' model .*'h'"),
        ("logistic", {"h": 0.5}, r"h: is not a parameter of the 'logistic' model"),
        ("logistic", {"l2": -0.1}, r"l2"),
        ("linear", {"l2": math.nan}, r"l2"),
    ],
)
def test_make_loss_rejects_bad_input(model: str, params: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make_loss(model, **params)


def test_shape_errors() -> None:
    loss = LogisticLoss()
    X, y = np.ones((4, 3)), np.ones(4)
    with pytest.raises(LossParameterError, match="theta"):
        loss.value(np.ones((3, 1)), X, y)
    with pytest.raises(LossParameterError, match="X"):
        loss.value(np.ones(2), X, y)
    with pytest.raises(LossParameterError, match="y"):
        loss.per_example_gradients(np.ones(3), X, np.ones(5))
    with pytest.raises(LossParameterError, match="X"):
        loss.mean_value(np.ones(3), np.ones((0, 3)), np.ones(0))
    with pytest.raises(LossParameterError, match="X"):
        loss.mean_gradient(np.ones(3), np.ones((0, 3)), np.ones(0))
    with pytest.raises(LossParameterError, match="v"):
        loss.hessian_vector_product(np.ones(3), X, y, np.ones(2))
    assert loss.gradient_sum(np.ones(3), np.ones((0, 3)), np.ones(0)).shape == (3,)
