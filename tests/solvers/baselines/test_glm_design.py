"""The certified minimiser's design by its public column layout (privfit.solvers.baselines.glm_design, issue 40):
one-hot rows are kept exactly, any other row maps to one of no larger norm, and the minimiser's answer and step
count are those of the dense pass; the layout comes from the schema alone."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from privfit.datasets import adult_schema
from privfit.jobs.metadata import public_metadata
from privfit.solvers import PublicMetadata, SolverParameterError
from privfit.solvers.baselines.erm import MinimiserProblem, minimize_regularized_glm
from privfit.solvers.baselines.glm_design import GLMDesign, gradient_sum_kernel
from privfit.solvers.compiled_losses import LOSS_KINDS, glm_slope
from privfit.solvers.losses import make_loss

#: columns: 2 numeric, a 3-level block, 1 numeric, a 4-level block, the intercept
BLOCKS = ((2, 5), (6, 10))
D = 11


def one_hot_rows(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows the encoder could write (numerics in [−1, 1], each block one-hot or all zero: an imputed level), scaled
    to norm ≤ 1, and ±1 labels."""
    rng = np.random.default_rng(seed)
    X = np.zeros((n, D))
    X[:, [0, 1, 5]] = rng.uniform(-1.0, 1.0, size=(n, 3))
    for start, stop in BLOCKS:
        level = rng.integers(start, stop + 1, size=n)  # stop: the block is all zero
        present = level < stop
        X[np.flatnonzero(present), level[present]] = 1.0
    X[:, -1] = 1.0
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = np.where(X @ rng.normal(size=D) + 0.3 * rng.normal(size=n) >= 0, 1.0, -1.0)
    return X, y


def dense_of(design: GLMDesign) -> np.ndarray:
    """X̃ as a dense matrix again."""
    out = np.zeros((design.n, design.dimension))
    out[:, design.dense_columns] = design.dense
    rows = np.arange(design.n)[:, None]
    np.add.at(out, (np.broadcast_to(rows, design.block_columns.shape), design.block_columns), design.block_values)
    return out


def test_one_hot_rows_are_stored_exactly_and_the_pass_is_the_gradient_sum() -> None:
    X, y = one_hot_rows(500, seed=1)
    design = GLMDesign.of(X, BLOCKS)
    assert design.dense.shape == (500, 4) and design.block_columns.shape == (500, 2)
    np.testing.assert_array_equal(dense_of(design), X)
    theta = np.random.default_rng(2).normal(size=D)
    for name in ("logistic", "huber", "svm", "linear"):
        loss = make_loss(name)
        kind, parameter = LOSS_KINDS[name], float(next(iter(loss.public_params().values()), 0.0))
        out = np.empty(D)
        gradient_sum_kernel(design.dense, design.dense_columns, design.block_columns, design.block_values, y, theta,
                            kind, parameter, out)  # fmt: skip
        np.testing.assert_allclose(out / 500, loss.mean_gradient(theta, X, y), rtol=1e-12, atol=1e-14)


def test_a_block_with_several_entries_keeps_its_largest_and_the_norm_does_not_grow() -> None:
    rng = np.random.default_rng(3)
    X = rng.uniform(-1.0, 1.0, size=(200, D))  # not one-hot: what the encoder never writes
    X[0, 2:5] = [0.5, -0.5, 0.25]  # a tie: the first of the largest
    design = GLMDesign.of(X, BLOCKS)
    mapped = dense_of(design)
    assert np.all(np.linalg.norm(mapped, axis=1) <= np.linalg.norm(X, axis=1))
    np.testing.assert_array_equal(mapped[0, 2:5], [0.5, 0.0, 0.0])
    for start, stop in BLOCKS:
        kept = np.abs(mapped[:, start:stop])
        assert np.all((kept > 0).sum(axis=1) <= 1)
        np.testing.assert_array_equal(kept.max(axis=1), np.abs(X[:, start:stop]).max(axis=1))
    np.testing.assert_array_equal(np.delete(mapped, np.r_[2:5, 6:10], axis=1), np.delete(X, np.r_[2:5, 6:10], axis=1))


@pytest.mark.parametrize("name", ["logistic", "huber", "svm"])
def test_the_minimiser_by_blocks_matches_the_dense_pass(name: str) -> None:
    X, y = one_hot_rows(800, seed=4)
    problem = MinimiserProblem(n=800, dimension=D, loss=make_loss(name), l2=0.01, design_norm_bound=1.0,
                               label_bound=1.0, linear_term_norm_bound=5.0)  # fmt: skip
    b = np.random.default_rng(5).normal(size=D)
    dense = minimize_regularized_glm(X, y, problem, 1e-9, linear_term=b)
    blocked = minimize_regularized_glm(X, y, problem, 1e-9, linear_term=b, one_hot_blocks=BLOCKS)
    assert dense.certified and blocked.certified and dense.steps == blocked.steps
    np.testing.assert_allclose(blocked.theta, dense.theta, rtol=0, atol=1e-11)


@pytest.mark.parametrize("blocks", [((0, 3), (2, 5)), ((3, 1),), ((0, 1),), ((5, 12),), ((4, 6), (0, 3))])
def test_metadata_refuses_blocks_that_are_not_disjoint_increasing_ranges_of_two_or_more_columns(blocks) -> None:
    with pytest.raises(SolverParameterError) as info:
        PublicMetadata(n=10, d=D, row_norm_bound=1.0, one_hot_blocks=blocks)
    assert info.value.parameter == "one_hot_blocks"


def test_the_layout_comes_from_the_schema_alone_and_matches_the_feature_names() -> None:
    schema = adult_schema(1.0, 1e-6)
    blocks = schema.one_hot_blocks
    names = schema.feature_names
    assert len(blocks) == 8 and sum(stop - start for start, stop in blocks) == 99
    for start, stop in blocks:
        features = {name.split("=")[0] for name in names[start:stop]}
        assert len(features) == 1 and all("=" in name for name in names[start:stop])
    outside = [name for column, name in enumerate(names) if not any(a <= column < b for a, b in blocks)]
    assert all("=" not in name for name in outside) and len(outside) == 5
    stored = SimpleNamespace(
        schema_json=schema.model_dump(mode="json"), n=100, d=len(names), row_norm_bound=math.sqrt(13),
        label_bound=1.0, feature_names=names,
    )  # fmt: skip
    assert public_metadata(stored).one_hot_blocks == tuple(blocks)  # type: ignore[arg-type]


def test_the_logistic_slope_is_the_branching_formula_bit_for_bit() -> None:
    """glm_slope selects instead of branching on the margin's sign: the same bits as −y·e/(1 + e) for yz ≥ 0 and
    −y/(1 + e^{yz}) below, at every magnitude."""
    margins = np.concatenate([[0.0, -0.0, 1e-300, -1e-300, 745.0, -745.0, 1e308, -1e308, np.inf, -np.inf],
                              np.random.default_rng(6).normal(scale=30.0, size=2000)])  # fmt: skip
    for z in margins:
        for y in (1.0, -1.0):
            m = y * z
            expected = -y * math.exp(-m) / (1.0 + math.exp(-m)) if m >= 0 else -y / (1.0 + math.exp(m))
            assert glm_slope(0, float(z), y, 0.0) == expected or (math.isnan(expected) and math.isnan(glm_slope(
                0, float(z), y, 0.0)))  # fmt: skip


def test_the_threads_change_no_bit_of_the_gradient_sum() -> None:
    """erm's pass adds its 4 fixed chunks' partial sums in order: serial and threaded, with any grouping of the chunks
    on the threads, give the same bits."""
    from concurrent.futures import ThreadPoolExecutor

    from privfit.solvers.baselines.erm import _gradient_sum, _Threads

    X, y = one_hot_rows(1001, seed=7)
    design = GLMDesign.of(X, BLOCKS)
    theta = np.random.default_rng(8).normal(size=D)
    serial = _gradient_sum(design, y, theta, 0, 0.0)
    with ThreadPoolExecutor(3) as executor:
        for groups in (((0, 1), (2, 3)), ((0,), (1,), (2,), (3,)), ((0, 1, 2), (3,))):
            threaded = _gradient_sum(design, y, theta, 0, 0.0, _Threads(executor, groups))
            np.testing.assert_array_equal(threaded, serial)
