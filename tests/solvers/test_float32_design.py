"""The float32 design matrix of dp_gd (issue 23): its blocked clipped sum keeps replace-one sensitivity ≤ 2C with
every rounding included, agrees with the float64 shortcut to float32 accuracy, and leaves fits unchanged."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfit.privacy import make_generator
from privfit.solvers import PublicMetadata, get_solver
from privfit.solvers.baselines.dp_gd import dp_gradient_descent
from privfit.solvers.compiled_losses import LOSS_KINDS, glm_slope
from privfit.solvers.float32_design import (
    BLOCK_ROWS,
    UNIT_ROUNDOFF_32,
    UNIT_ROUNDOFF_64,
    WEIGHT_FLOOR,
    Float32Design,
    float32_suffices,
)
from privfit.solvers.geometry import augment_intercept, clipped_scaled_row_sum
from privfit.solvers.losses import make_loss


def _gamma(m: int, u: Fraction) -> Fraction:
    return m * u / (1 - m * u)


@pytest.mark.parametrize("n", [1, 63, 64, 65, 32_561, 10**6, 10**8])
def test_clip_target_times_every_rounding_factor_is_at_most_c_in_exact_arithmetic(n: int) -> None:
    """C₀ (1 + u₃₂)(1 + γ_b·b + γ⁶⁴_K(1 + γ_b)·n) ≤ C, evaluated in rationals: the sensitivity bound of the module
    docstring is 2C₀(1 + u₃₂)(…) ≤ 2C, with the float64 evaluation of C₀ itself on the safe side."""
    design = Float32Design.of(np.zeros((n if n <= 65 else 1, 2)))
    object.__setattr__(design, "n", n)  # only n and the block count enter the target
    object.__setattr__(design, "rows", np.zeros((-(-n // BLOCK_ROWS) * BLOCK_ROWS, 2), dtype=np.float32))
    u32, u64 = Fraction(UNIT_ROUNDOFF_32), Fraction(UNIT_ROUNDOFF_64)
    gamma_block = _gamma(BLOCK_ROWS, u32)
    blocks = -(-n // BLOCK_ROWS)
    for C in (1.0, 0.37, 3.0e5, 2.0**-30):
        target = Fraction(design.clip_target(C))
        growth = 1 + gamma_block * BLOCK_ROWS + _gamma(blocks, u64) * (1 + gamma_block) * n
        assert target * (1 + u32) * growth <= Fraction(C)
        if n <= 10**7:  # the shrink is small: 2.4e-4 at b = 64, plus γ⁶⁴_K·n ≈ n²u₆₄/64 (1.7e-4 at n = 10⁷)
            assert target >= Fraction(C) * (1 - Fraction(1, 1000))


@settings(max_examples=150, deadline=None)
@given(
    X=hnp.arrays(np.float64, st.tuples(st.integers(1, 200), st.integers(1, 6)), elements=st.floats(-1e3, 1e3)),
    data=st.data(),
    C=st.floats(1e-3, 1e3),
)
def test_every_float32_summand_is_within_the_rounded_target(X: np.ndarray, data: st.DataObject, C: float) -> None:
    """|w̃_i|·‖x̃_i‖ ≤ C₀(1 + u₃₂) exactly, for the float32 weights and rows the kernel multiplies."""
    design = Float32Design.of(X)
    s = data.draw(hnp.arrays(np.float64, (X.shape[0],), elements=st.floats(-1e6, 1e6)))
    from privfit.solvers.geometry import clipped_scales

    w64 = clipped_scales(s[:, None], design.norms, design.clip_target(C), X.shape[1])[:, 0]
    w32 = np.where(np.abs(w64) < WEIGHT_FLOOR, 0.0, w64).astype(np.float32)
    bound = Fraction(design.clip_target(C)) * (1 + Fraction(UNIT_ROUNDOFF_32))
    for wi, xi in zip(w32, design.rows[: design.n], strict=True):
        assert Fraction(float(wi)) ** 2 * sum(Fraction(float(v)) ** 2 for v in xi) <= bound**2


def test_float32_sum_matches_the_float64_shortcut_to_float32_accuracy() -> None:
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(1000, 9))
    S = rng.normal(size=(1000, 3)) * 5
    design = Float32Design.of(X)
    C = 1.5
    fast = design.clipped_sum(S, C)
    reference = clipped_scaled_row_sum(design.rows[: design.n].astype(np.float64), S, design.clip_target(C))
    scale = np.abs(S).sum() * np.abs(X).max()
    np.testing.assert_allclose(fast, reference, rtol=0, atol=BLOCK_ROWS * UNIT_ROUNDOFF_32 * scale)
    assert not np.array_equal(fast, reference)  # really computed in float32
    margins = design.margins(rng.normal(size=(2, 9)))
    assert margins.shape == (1000, 2) and margins.dtype == np.float64


def test_neighbouring_sums_differ_by_at_most_2c() -> None:
    """Every summand at the clip (the worst case of the exact part): replacing one row by its opposite moves the
    computed float32 sum by ≤ 2C, checked in exact arithmetic, at the first, a middle and the last row."""
    rng = np.random.default_rng(1)
    n, d, C = 4_000, 7, 0.8
    X = rng.uniform(-3, 3, size=(n, d))
    S = np.full((n, 1), 1e6)
    for i in (0, n // 2 + 5, n - 1):
        X2, S2 = X.copy(), S.copy()
        X2[i], S2[i] = -X[i][::-1] * 1.7, -1e6
        one = Float32Design.of(X).clipped_sum(S, C)[0]
        two = Float32Design.of(X2).clipped_sum(S2, C)[0]
        gap = sum((Fraction(float(a)) - Fraction(float(b))) ** 2 for a, b in zip(one, two, strict=True))
        assert gap <= Fraction(2 * C) ** 2


def test_rows_are_clamped_and_flushed_by_public_constants_only() -> None:
    X = np.array([[1e50, 1e-300, 0.5], [-1e50, -3.0, 2.0**-60]])
    rows = Float32Design.of(X).rows
    assert rows[0, 0] == np.float32(2.0**40) and rows[1, 0] == -np.float32(2.0**40)
    assert rows[0, 1] == 0 and rows[1, 2] == 0 and rows[1, 1] == -3.0
    assert rows.shape == (BLOCK_ROWS, 3) and not rows[2:].any()


def test_the_public_rule_keeps_extreme_settings_in_float64() -> None:
    assert float32_suffices(10.0, 10.0, 1.0)
    assert not float32_suffices(2.0**41, 10.0, 1.0)
    assert not float32_suffices(10.0, 2.0**41, 1.0)
    assert not float32_suffices(10.0, 10.0, 2.0**-31)


def test_a_float32_fit_is_the_float64_fit_to_float32_accuracy() -> None:
    """The same noise draws: float32 and float64 runs of dp_gd end within 1e-4 of each other (relative to R)."""
    rng = np.random.default_rng(5)
    X = augment_intercept(rng.uniform(-1, 1, size=(3000, 6)))
    y = np.where(X @ rng.normal(size=7) + 0.3 * rng.normal(size=3000) > 0, 1.0, -1.0)
    common = {"loss": make_loss("logistic"), "clip_norm": 2.0, "sigma": 20.0, "steps": 50, "step_size": 1.0}
    runs = {
        precision: dp_gradient_descent(
            X, y, radius=10.0, rng=make_generator(3, data_is_public=True), precision=precision, **common
        )[0]
        for precision in ("float32", "float64")
    }
    assert np.linalg.norm(runs["float32"] - runs["float64"]) <= 1e-4 * 10.0
    assert not np.array_equal(runs["float32"], runs["float64"])


def test_the_solver_takes_the_float32_path_under_the_public_rule() -> None:
    """dp_gd's fit is the float32 core's output bit for bit for ordinary bounds, the float64 core's for huge ones."""
    rng = np.random.default_rng(2)
    X = rng.uniform(-1, 1, size=(200, 3))
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    solver = get_solver("dp_gd")
    for bound, precision in ((float(np.sqrt(3.0)), "float32"), (2.0**41, "float64")):
        meta = PublicMetadata(n=200, d=3, row_norm_bound=bound)
        resolved = solver.resolve({"steps": 5, "noise_multiplier": 1.0}, meta)
        result = solver.fit(X, y, meta, resolved, make_generator(4, data_is_public=True))
        core = dp_gradient_descent(
            augment_intercept(X), y, loss=make_loss("logistic"), clip_norm=resolved.clip_norm, sigma=resolved.sigma,
            steps=5, step_size=resolved.step_size, radius=resolved.radius, rng=make_generator(4, data_is_public=True),
            momentum=resolved.momentum, precision=precision,
        )[0]  # fmt: skip
        np.testing.assert_array_equal(np.array([*result.coefficients, result.intercept]), core)


# --- issue 40: the compiled pass (margins, slopes, weights and blocked sum in one read of the rows) ---------------

LOSSES = [("logistic", {}), ("linear", {}), ("huber", {"delta": 0.3}), ("svm", {"h": 0.5})]


def _reference_sum(design: Float32Design, loss_name: str, params: dict, Theta: np.ndarray, y: np.ndarray, C: float):
    """The same sum by the float64 shortcut on the same float32 rows: slopes of the float64 margins, weights with the
    same target C₀ (:func:`clipped_scaled_row_sum`), summed in float64."""
    rows = design.rows[: design.n].astype(np.float64)
    slopes = make_loss(loss_name, **params).dphi(rows @ Theta.T, y[:, None])
    return clipped_scaled_row_sum(rows, slopes, design.clip_target(C))


@pytest.mark.parametrize(("loss_name", "params"), LOSSES)
def test_the_compiled_pass_is_the_float64_shortcut_to_float32_accuracy(loss_name: str, params: dict) -> None:
    rng = np.random.default_rng(11)
    n, d, C = 3000, 9, 0.4
    X = rng.uniform(-1, 1, size=(n, d))
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0) if loss_name in ("logistic", "svm") else rng.uniform(-1, 1, n)
    Theta = rng.normal(size=(3, d)) * 2  # margins large enough that many summands are clipped
    design = Float32Design.of(X)
    fast = design.clipped_gradient_sum(loss_name, next(iter(params.values()), 0.0), Theta, y, C)
    reference = _reference_sum(design, loss_name, params, Theta, y, C)
    assert fast.shape == (3, d) and fast.dtype == np.float64
    np.testing.assert_allclose(fast, reference, rtol=0, atol=4 * BLOCK_ROWS * UNIT_ROUNDOFF_32 * n * C)
    assert not np.array_equal(fast, reference)  # really computed in float32


def test_the_compiled_slopes_are_the_losses_slopes_and_finite_at_extreme_margins() -> None:
    margins = np.array([-1e30, -800.0, -40.0, -1.0, -1e-9, 0.0, 1e-9, 0.7, 1.0, 1.3, 40.0, 800.0, 1e30])
    for loss_name, params in LOSSES:
        loss = make_loss(loss_name, **params)
        parameter = next(iter(params.values()), 0.0)
        for label in (-1.0, 1.0, 0.0, 0.4):
            compiled = np.array([glm_slope(LOSS_KINDS[loss_name], z, label, parameter) for z in margins])
            assert np.isfinite(compiled).all() or loss_name == "linear"
            expected = loss.dphi(margins, label)
            np.testing.assert_allclose(compiled, expected, rtol=1e-14, atol=1e-300)


def test_neighbouring_gradient_sums_of_the_compiled_pass_differ_by_at_most_2c() -> None:
    """Every summand at the clip (|φ'|·‖x‖ ≫ C): replacing one row by its opposite, longer (the worst case: the two
    summands point opposite ways), or by an unrelated row and label, moves the compiled pass's sum by ≤ 2C, in exact
    arithmetic, at the first row, one mid-block and the last; the opposite row comes within 0.1 % of 2C."""
    rng = np.random.default_rng(4)
    n, d, C = 4_000, 7, 0.005
    X = rng.uniform(-3, 3, size=(n, d))
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    theta = rng.normal(size=(1, d)) * 0.1
    base = Float32Design.of(X).clipped_gradient_sum("logistic", 0.0, theta, y, C)[0]
    for i in (0, n // 2 + 5, n - 1):
        for row, label, tight in ((-X[i] * 1.7, y[i], True), (X[i][::-1] * 0.8, -y[i], False)):
            X2, y2 = X.copy(), y.copy()
            X2[i], y2[i] = row, label
            other = Float32Design.of(X2).clipped_gradient_sum("logistic", 0.0, theta, y2, C)[0]
            gap = sum((Fraction(float(a)) - Fraction(float(b))) ** 2 for a, b in zip(base, other, strict=True))
            assert 0 < gap <= Fraction(2 * C) ** 2
            assert not tight or gap > Fraction(2 * C * 0.999) ** 2


def test_the_threads_and_the_chunks_change_no_bit() -> None:
    """The fixed chunks give the same sums on the calling thread and on a pool (any number of threads)."""
    rng = np.random.default_rng(6)
    X = rng.uniform(-1, 1, size=(5_000, 13))
    y = np.where(rng.random(5_000) < 0.5, 1.0, -1.0)
    design = Float32Design.of(X)
    Theta = rng.normal(size=(2, 13))
    alone = design.clipped_gradient_sum("logistic", 0.0, Theta, y, 0.7)
    for workers in (2, 3):
        with ThreadPoolExecutor(max_workers=workers) as pool:
            np.testing.assert_array_equal(design.clipped_gradient_sum("logistic", 0.0, Theta, y, 0.7, pool), alone)
            S = rng.normal(size=(5_000, 2))
            np.testing.assert_array_equal(design.clipped_sum(S, 0.7, pool), design.clipped_sum(S, 0.7))


def test_the_compiled_rows_are_numpy_s_float32_rows() -> None:
    """One compiled pass gives the rows of the numpy formula bit for bit (C- or Fortran-ordered input), and norms
    within the (d/2 + 1)u₆₄ of any summation order."""
    rng = np.random.default_rng(8)
    X = rng.normal(size=(300, 11)) * np.logspace(-20, 20, 11)
    X[3, 2], X[4, 5], X[5, 1] = 2.0**-60, -1e60, 1e45
    expected = np.clip(X, -(2.0**40), 2.0**40)
    expected = np.where(np.abs(expected) < 2.0**-50, 0.0, expected).astype(np.float32)
    for A in (X, np.asfortranarray(X)):
        design = Float32Design.of(A)
        np.testing.assert_array_equal(design.rows[:300], expected)
        assert not design.rows[300:].any() and not design.rows.flags.writeable
        np.testing.assert_allclose(design.norms, np.linalg.norm(expected.astype(np.float64), axis=1), rtol=1e-15)
    assert design.nbytes == Float32Design.nbytes_for(300, 11)


def test_fits_of_other_shapes_and_settings_compile_nothing_after_the_warm_up_fit() -> None:
    """The float32 kernels have the argument types of the warm-up's dp_gd fits (privfit.solvers.warmup): fits of
    other shapes, losses, intercepts, runs and layouts add no specialisation (nothing is compiled on a request)."""
    from privfit.solvers import float32_design as module
    from privfit.solvers.warmup import _rows

    X, y = _rows()
    warm = PublicMetadata(n=X.shape[0], d=X.shape[1], row_norm_bound=1.0)
    solver = get_solver("dp_gd")
    solver.fit(X, y, warm, solver.resolve({"model": "logistic"}, warm, target_epsilon=1.0, delta=1e-6),
               make_generator(0, data_is_public=True))  # fmt: skip
    kernels = {name: getattr(module, name) for name in ("_float32_rows", "_gradient_chunk")}
    before = {name: len(kernel.signatures) for name, kernel in kernels.items()}
    assert all(count >= 1 for count in before.values())
    rng = np.random.default_rng(9)
    X2 = np.asfortranarray(rng.uniform(-1, 1, size=(700, 5)) / np.sqrt(5))
    y2 = np.where(rng.random(700) < 0.5, 1.0, -1.0)
    meta = PublicMetadata(n=700, d=5, row_norm_bound=1.0)
    for params in ({"model": "huber"}, {"model": "svm", "fit_intercept": False}, {"model": "linear"}):
        solver.fit(X2, y2, meta, solver.resolve(params, meta, target_epsilon=1.0, delta=1e-6),
                   make_generator(1, data_is_public=True))  # fmt: skip
    dp_gradient_descent(augment_intercept(X2), y2, loss=make_loss("logistic"), clip_norm=1.0, sigma=3.0, steps=3,
                        step_size=1.0, radius=5.0, rng=make_generator(2, data_is_public=True), runs=4)  # fmt: skip
    assert {name: len(kernel.signatures) for name, kernel in kernels.items()} == before


def test_the_multiclass_clipped_sum_is_the_float64_one_and_neighbours_differ_by_at_most_2c() -> None:
    """clipped_multinomial_sum (module docstring, "Multiclass"): the Frobenius-clipped Σ r_i x̃_iᵀ with
    r_i = softmax(Θx̃_i) − e_{y_i} agrees with geometry's float64 clipped_outer_sum of the float64 residuals on the
    same rows to float32 accuracy, and the threads change no bit. Replacing one row by a longer one in the same
    direction with the other label (k = 2: the residual flips, so the two summands point opposite ways, both at the
    clip — the worst case) moves it by ≤ 2C in Frobenius norm in exact arithmetic, within 0.1 % of 2C; an unrelated
    row and label (k = 4) by ≤ 2C."""
    from scipy.special import softmax

    from privfit.solvers.geometry import clipped_outer_sum

    rng = np.random.default_rng(9)
    n, d, C = 3_000, 6, 0.01
    X = rng.uniform(-3, 3, size=(n, d))
    design = Float32Design.of(X)
    for k in (2, 4):
        Theta = rng.normal(size=(k, d)) * 0.3
        classes = rng.integers(0, k, size=n)
        base = design.clipped_multinomial_sum(Theta, classes, C)
        exact_rows = design.rows[:n].astype(np.float64)
        residuals = softmax(exact_rows @ Theta.T, axis=1) - np.eye(k)[classes]
        np.testing.assert_allclose(base, clipped_outer_sum(exact_rows, residuals, C), rtol=0, atol=1e-5 * n * C)
        with ThreadPoolExecutor(max_workers=2) as pool:
            np.testing.assert_array_equal(design.clipped_multinomial_sum(Theta, classes, C, pool), base)
        for i in (0, n // 2 + 3, n - 1):
            flipped = (X[i] * 1.5, 1 - classes[i], True) if k == 2 else (X[i][::-1], (classes[i] + 1) % k, False)
            X2, classes2 = X.copy(), classes.copy()
            X2[i], classes2[i], tight = flipped
            other = Float32Design.of(X2).clipped_multinomial_sum(Theta, classes2, C)
            gap = sum((Fraction(float(a)) - Fraction(float(b))) ** 2 for a, b in zip(base.ravel(), other.ravel(),
                                                                                      strict=True))  # fmt: skip
            assert 0 < gap <= Fraction(2 * C) ** 2
            assert not tight or gap > Fraction(2 * C * 0.999) ** 2


def test_a_multiclass_fit_on_float32_rows_is_the_float64_fit_to_float32_accuracy() -> None:
    """dp_gd with a categorical label under the public float32 rule releases, for the same noise, what the float64
    path releases, to float32 accuracy (the logits only choose each row's residual; the bound is the same)."""
    from privfit.solvers.losses import MultinomialLogisticLoss

    rng = np.random.default_rng(10)
    n, d, k = 2_000, 5, 3
    X = augment_intercept(rng.uniform(-1, 1, size=(n, d)) / np.sqrt(d))
    y = rng.integers(0, k, size=n).astype(np.float64)
    loss = MultinomialLogisticLoss(classes=k)
    common = dict(loss=loss, clip_norm=0.5, sigma=0.5, steps=20, step_size=0.5, radius=10.0)
    fast = dp_gradient_descent(X, y, rng=make_generator(3, data_is_public=True), precision="float32", **common)
    slow = dp_gradient_descent(X, y, rng=make_generator(3, data_is_public=True), precision="float64", **common)
    np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-4)
