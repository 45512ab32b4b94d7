"""Issue 18 part 2, numerics: every registered solver fits ANY dataset within the declared bounds — rows on the
bound in every direction, identical rows, one label class, zero rows — to finite parameters, without an exception
and without a RuntimeWarning (``pyproject.toml`` turns those raised in ``privfit`` into errors), and with the same
analyst-visible record as on ordinary data. Rows outside the bounds (norm 1e6, NaN, inf, labels beyond B_y) are
brought back to the bounds by ``enforce_declared_bounds`` rather than failing.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from replay_helpers import SOLVER_CASES, SolverCase, assert_same_record, datasets_at_the_bounds, random_rows, replay

from privfit.privacy import make_generator
from privfit.solvers import get_solver
from privfit.solvers.base import enforce_declared_bounds


def released(result) -> np.ndarray:  # type: ignore[no-untyped-def]
    return np.array([*result.coefficients, *([] if result.intercept is None else [result.intercept])])


@pytest.mark.parametrize("case", SOLVER_CASES, ids=lambda case: case.id)
def test_datasets_at_the_bounds_fit_to_finite_parameters_with_the_ordinary_record(case: SolverCase) -> None:
    solver, resolved, meta = get_solver(case.solver), case.resolve(), case.meta()
    ordinary = replay(solver, resolved, meta, *random_rows(case.n, case.d, seed=3), 8)
    assert ordinary.outcome == "succeeded", ordinary.error
    for label, X, y in datasets_at_the_bounds(case.n, case.d):
        result = solver.fit(X, y, meta, resolved, make_generator(8, data_is_public=True))
        assert np.all(np.isfinite(released(result))), label
        assert_same_record(ordinary, replay(solver, resolved, meta, X, y, 8), f"{case.id}, {label}")


def _row(d: int):  # type: ignore[no-untyped-def]
    """One row: on the bound along an axis or a diagonal (either sign), zero, inside, or outside the bounds."""
    axis = st.integers(0, d - 1).map(lambda i: np.eye(d)[i])
    corner = st.lists(st.sampled_from([-1.0, 1.0]), min_size=d, max_size=d).map(lambda s: np.array(s) / np.sqrt(d))
    on_bound = st.one_of(axis, corner).flatmap(lambda v: st.sampled_from([v, -v]))
    inside = st.lists(st.floats(-0.5, 0.5), min_size=d, max_size=d).map(np.array)
    outside = st.sampled_from([1e6, np.nan, np.inf, -np.inf]).map(lambda value: np.full(d, value))
    return st.one_of(on_bound, on_bound, st.just(np.zeros(d)), inside, outside)


@st.composite
def datasets(draw, n: int, d: int) -> tuple[np.ndarray, np.ndarray]:  # type: ignore[no-untyped-def]
    """n rows: a few distinct extreme rows repeated (identical rows and one-class labels are likely)."""
    pool = draw(st.lists(_row(d), min_size=1, max_size=4))
    labels = draw(st.lists(st.sampled_from([1.0, -1.0, 0.0, 1.0, -1.0, 5.0, np.nan]), min_size=1, max_size=3))
    choice = draw(st.lists(st.integers(0, len(pool) - 1), min_size=n, max_size=n))
    label_choice = draw(st.lists(st.integers(0, len(labels) - 1), min_size=n, max_size=n))
    return np.array([pool[i] for i in choice]), np.array([labels[i] for i in label_choice])


@pytest.mark.parametrize("case", SOLVER_CASES, ids=lambda case: case.id)
def test_any_mixture_of_extreme_rows_fits_to_finite_parameters(case: SolverCase) -> None:
    solver, resolved, meta = get_solver(case.solver), case.resolve(), case.meta()

    @settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(data=datasets(case.n, case.d), seed=st.integers(0, 2**32 - 1))
    def check(data: tuple[np.ndarray, np.ndarray], seed: int) -> None:
        X, y = data
        result = solver.fit(X, y, meta, resolved, make_generator(seed, data_is_public=True))
        assert np.all(np.isfinite(released(result)))

    check()


def test_rows_outside_the_bounds_are_brought_to_them_and_rows_inside_are_untouched() -> None:
    meta = SolverCase("dp_gd", {}).meta()
    X, y = random_rows(meta.n, meta.d, seed=4)
    X[0], X[1, 1], X[2], y[3], y[4] = 1e6, np.nan, [np.inf, 0.0, 0.0], 7.0, np.nan
    A, v = enforce_declared_bounds(X, y, meta)
    assert np.all(np.linalg.norm(A, axis=1) <= meta.row_norm_bound) and np.all(np.abs(v) <= meta.label_bound)
    np.testing.assert_array_equal(A[5:], X[5:])  # within the bounds: bit for bit
    np.testing.assert_array_equal(v[5:], y[5:])
    assert A[1, 1] == 0.0 and v[4] == 0.0 and v[3] == 1.0


@pytest.mark.parametrize("case", [case for case in SOLVER_CASES if case.solver == "dp_gd"][:1], ids=lambda c: c.id)
@pytest.mark.parametrize("order", ["C", "F"])
def test_enforcing_the_bounds_in_place_gives_the_copy_s_values_bit_for_bit(case: SolverCase, order: str) -> None:
    """The in-place form (a partition decoded into its design buffer, privfit.scaleout) on a view of a wider buffer,
    stored row by row or column by column (the Dask workers' layout)."""
    meta = case.meta()

    @settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(data=datasets(case.n, case.d))
    def check(data: tuple[np.ndarray, np.ndarray]) -> None:
        X, y = data
        expected_A, expected_v = enforce_declared_bounds(X, y, meta)
        buffer = np.full((X.shape[0], X.shape[1] + 1), 7.0, order=order)
        buffer[:, : X.shape[1]] = X
        v = y.copy()
        A, w = enforce_declared_bounds(buffer[:, : X.shape[1]], v, meta, in_place=True)
        assert np.shares_memory(A, buffer) and w is v
        np.testing.assert_array_equal(A, expected_A)
        np.testing.assert_array_equal(w, expected_v)
        assert np.all(buffer[:, -1] == 7.0)  # the columns beyond the view are untouched

    check()
