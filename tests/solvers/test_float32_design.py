"""The float32 design matrix of dp_gd (issue 23): its blocked clipped sum keeps replace-one sensitivity ≤ 2C with
every rounding included, agrees with the float64 shortcut to float32 accuracy, and leaves fits unchanged."""

from __future__ import annotations

from fractions import Fraction

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfit.privacy import make_generator
from privfit.solvers import PublicMetadata, get_solver
from privfit.solvers.baselines.dp_gd import dp_gradient_descent
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
