r"""User-level privacy in ``dp_gd`` and ``dp_sgd`` (issue 37 item 3): neighbours differ in ONE UNIT with all its rows.

* With one row per unit (k = 1) the unit-level fit is the row-level fit: the same release for the same seed.
* The unit-clipped sum Σ_u clip_C(Σ_{i∈u} ∇ℓ_i) moves by at most 2C when one unit's rows (up to k, any values) are
  replaced, while the per-row-clipped sum moves by up to 2kC (a crafted unit reaches it).
* An empirical audit on unit-level neighbours (a unit of k = 8 rows all pushing one way, replaced by 8 rows pushing
  the other way; many runs vectorised, :func:`privfit.privacy.audit.epsilon_lower_bound`, Clopper–Pearson 95 %):
  the correct mechanism stays below its claim, the broken one — per-row clipping with the same σ — is detected.
  Measured with the seeds below (2·10⁵ runs per world for dp_gd, 10⁵ for dp_sgd): dp_gd (U = 3, T = 5, claim
  ε = 0.99999973 at δ = 1e-5): correct 0.48, broken 5.20; dp_sgd (Poisson over U = 10 units, m = 1, T = 10, claim
  0.9999984): correct 0.36, broken 4.23 (a broken bound is capped by the number of runs; its true ε is far larger:
  the unit moves the sum by 2kC = 16C against noise calibrated for 2C). Other seeds: correct 0.48–0.53 / 0.31–0.33,
  broken 5.37–5.50 / 4.37–4.45.
* Every other registered solver, ``auto`` included, refuses a dataset with a privacy unit, naming dp_gd and dp_sgd.
* The units are checked (length, range, every unit present, at most k rows each), with errors that name public
  facts only; the observable record of a fit (progress, polls, draws) does not depend on the units' sizes.

All randomness is seeded on public/synthetic data.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import privfit.solvers.baselines.dp_gd as dp_gd_module
import privfit.solvers.baselines.dp_sgd as dp_sgd_module
from privfit.privacy import make_generator
from privfit.privacy.audit import epsilon_lower_bound
from privfit.privacy.noise import using_sampler
from privfit.solvers import PublicMetadata, SolverParameterError, get_solver, list_solvers
from privfit.solvers.base import (
    check_fit_inputs,
    check_resolved_metadata,
    enforce_declared_bounds,
    resolved_metadata,
    unit_level_solvers,
)
from privfit.solvers.baselines.dp_gd import clipped_gradient_sum, dp_gradient_descent
from privfit.solvers.baselines.dp_sgd import dp_sgd
from privfit.solvers.geometry import augment_intercept
from privfit.solvers.losses import MultinomialLogisticLoss, make_loss
from privfit.solvers.units import UnitIndex, clipped_unit_gradient_sum, unit_gradient_sums

DP_GD, DP_SGD = get_solver("dp_gd"), get_solver("dp_sgd")
CLASSES = ("low", "mid", "high")
EPSILON, DELTA = 1.0, 1e-6


def synthetic(rows: int, d: int, seed: int, classes: tuple[str, ...] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Rows with ‖x‖ ≤ 1 and ±1 labels (or class indices)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, d))
    X *= rng.uniform(0.2, 1.0, size=(rows, 1)) / np.linalg.norm(X, axis=1, keepdims=True)
    score = X @ rng.normal(size=d) + 0.2 * rng.normal(size=rows)
    if classes is not None:
        return X, np.digitize(score, np.quantile(score, [1 / 3, 2 / 3])).astype(np.float64)
    return X, np.where(score >= 0.0, 1.0, -1.0)


def random_units(units: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Codes of ``units`` units of 1..k rows each, in a random row order."""
    sizes = rng.integers(1, k + 1, size=units)
    return rng.permutation(np.repeat(np.arange(units), sizes))


def unit_meta(meta: PublicMetadata, k: int = 1) -> PublicMetadata:
    return dataclasses.replace(meta, max_rows_per_unit=k)


def released(result: Any) -> np.ndarray:
    coefficients = np.asarray(result.coefficients, dtype=np.float64)
    return np.append(coefficients, result.intercept) if result.classes is None else coefficients


# ---------------------------------------------------------------------------------------------------------
# one row per unit: the row-level release
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "classes"),
    [
        ({"steps": 40}, None),
        ({"steps": 40, "momentum": "nesterov", "output": "suffix_average"}, None),
        ({"steps": 30}, CLASSES),
    ],
    ids=["plain", "nesterov-average", "multinomial"],
)
def test_dp_gd_with_one_row_per_unit_releases_the_row_level_release(
    monkeypatch: pytest.MonkeyPatch, params: dict[str, Any], classes: tuple[str, ...] | None
) -> None:
    # the row-level fit in float64 (the unit path has no float32 kernel): then the two agree to rounding
    monkeypatch.setattr(dp_gd_module, "float32_suffices", lambda *args: False)
    X, y = synthetic(150, 3, seed=1, classes=classes)
    row = PublicMetadata(n=150, d=3, row_norm_bound=1.0, label_bound=2.0 if classes else 1.0, classes=classes)
    unit = unit_meta(row, k=1)
    r_row = DP_GD.resolve(params, row, target_epsilon=EPSILON, delta=DELTA)
    r_unit = DP_GD.resolve(params, unit, target_epsilon=EPSILON, delta=DELTA)
    assert r_unit.max_rows_per_unit == 1 and r_row.max_rows_per_unit is None
    assert r_unit.model_copy(update={"max_rows_per_unit": None}) == r_row  # same σ, T, η, C and ε: n = U
    one = DP_GD.fit(X, y, row, r_row, make_generator(7, data_is_public=True))
    two = DP_GD.fit(X, y, unit, r_unit, make_generator(7, data_is_public=True), units=np.arange(150))
    np.testing.assert_allclose(released(two), released(one), rtol=0.0, atol=1e-12)
    assert not np.allclose(released(one), 0.0)


@pytest.mark.parametrize(
    ("sampling", "classes"),
    [("poisson", None), ("fixed_size", None), ("shuffle", None), ("poisson", CLASSES)],
)
def test_dp_sgd_with_one_row_per_unit_releases_the_row_level_release(
    sampling: str, classes: tuple[str, ...] | None
) -> None:
    """The batches of units are drawn by the same sampler over U = n elements: the same draws, the same batches."""
    X, y = synthetic(200, 3, seed=2, classes=classes)
    row = PublicMetadata(n=200, d=3, row_norm_bound=1.0, label_bound=2.0 if classes else 1.0, classes=classes)
    unit = unit_meta(row, k=1)
    params = {"epochs": 2, "batch_size": 16, "sampling": sampling}
    r_row = DP_SGD.resolve(params, row, target_epsilon=EPSILON, delta=DELTA)
    r_unit = DP_SGD.resolve(params, unit, target_epsilon=EPSILON, delta=DELTA)
    assert r_unit.model_copy(update={"max_rows_per_unit": None}) == r_row
    one = DP_SGD.fit(X, y, row, r_row, make_generator(11, data_is_public=True))
    # the rows in another order: unit j's one row is row j of the row-level data, wherever it is
    codes = np.random.default_rng(3).permutation(200)
    two = DP_SGD.fit(X[codes], y[codes], unit, r_unit, make_generator(11, data_is_public=True), units=codes)
    np.testing.assert_allclose(released(two), released(one), rtol=0.0, atol=1e-12)


def test_dp_sgd_draws_batches_of_whole_units(monkeypatch: pytest.MonkeyPatch) -> None:
    """fixed_size: m distinct units per step, each with all its rows; T = E·⌈U/m⌉ and the default m = min(256, U)."""
    rng = np.random.default_rng(4)
    codes = random_units(40, 4, rng)
    X, y = synthetic(codes.size, 2, seed=5)
    meta = PublicMetadata(n=40, d=2, row_norm_bound=1.0, max_rows_per_unit=4)
    assert DP_SGD.resolve({"epochs": 1}, meta, target_epsilon=EPSILON, delta=DELTA).batch_size == 40
    big = dataclasses.replace(meta, n=1000)
    assert DP_SGD.resolve({"epochs": 1}, big, target_epsilon=EPSILON, delta=DELTA).steps_per_epoch == 4  # m = 256
    resolved = DP_SGD.resolve({"epochs": 2, "batch_size": 6, "sampling": "fixed_size"}, meta,
                              target_epsilon=EPSILON, delta=DELTA)  # fmt: skip
    assert resolved.steps == 2 * 7
    seen: list[np.ndarray] = []
    original = dp_sgd_module.clipped_unit_gradient_sum

    def recording(*args: Any, unit_ids: np.ndarray | None = None, **kwargs: Any) -> np.ndarray:
        assert unit_ids is not None
        seen.append(np.asarray(unit_ids))
        return original(*args, unit_ids=unit_ids, **kwargs)

    monkeypatch.setattr(dp_sgd_module, "clipped_unit_gradient_sum", recording)
    DP_SGD.fit(X, y, meta, resolved, make_generator(6, data_is_public=True), units=codes)
    assert len(seen) == resolved.steps
    index = meta.unit_index(codes, codes.size)
    for batch in seen:
        assert batch.size == 6 and np.unique(batch).size == 6 and batch.min() >= 0 and batch.max() < 40
        rows = index.rows_of(batch)
        assert sorted(rows) == sorted(np.flatnonzero(np.isin(codes, batch)))  # every row of every unit drawn


# ---------------------------------------------------------------------------------------------------------
# sensitivity: 2C per unit for the unit-clipped sum, up to 2kC for the per-row-clipped one
# ---------------------------------------------------------------------------------------------------------

LOSSES: dict[str, Any] = {
    "logistic": make_loss("logistic"),
    "linear": make_loss("linear"),
    "huber": make_loss("huber"),
    "svm": make_loss("svm"),
    "multinomial": MultinomialLogisticLoss(3),
}


@pytest.mark.parametrize("name", list(LOSSES))
def test_replacing_one_unit_moves_the_unit_clipped_sum_by_at_most_2c(name: str) -> None:
    """Random units of 1..k rows, random θ (inside and far outside any ball); one unit's rows replaced by 1..k
    arbitrary rows — huge, non-finite, labels far outside the bounds — brought to the declared bounds as a fit does
    (and, for finite rows, also without: the clipping alone bounds it)."""
    loss, k, U, d, C = LOSSES[name], 8, 12, 3, 0.7
    multinomial = name == "multinomial"
    meta = PublicMetadata(n=U, d=d, row_norm_bound=1.0, label_bound=2.0 if multinomial else 1.0,
                          classes=CLASSES if multinomial else None, max_rows_per_unit=k)  # fmt: skip
    rng = np.random.default_rng(8)
    worst = 0.0
    for _ in range(30):
        codes = random_units(U, k, rng)
        X = rng.uniform(-1.0, 1.0, size=(codes.size, d)) / np.sqrt(d)
        y = rng.integers(0, 3, size=codes.size).astype(float) if multinomial else rng.choice([-1.0, 1.0], codes.size)
        victim = int(rng.integers(U))
        keep = codes != victim
        extra = int(rng.integers(1, k + 1))
        X_new = rng.normal(scale=10.0 ** rng.uniform(-1, 6), size=(extra, d))
        y_new = rng.normal(scale=1e6, size=extra)
        for raw in (False, True):
            if raw:
                X_new[0, 0], y_new[-1] = np.inf, np.nan  # non-finite: the declared bounds make them 0
            X2, y2 = np.vstack([X[keep], X_new]), np.concatenate([y[keep], y_new])
            codes2 = np.concatenate([codes[keep], np.full(extra, victim)])
            if raw:
                (X, y), (X2, y2) = enforce_declared_bounds(X, y, meta), enforce_declared_bounds(X2, y2, meta)
            p = loss.parameter_dimension(d + 1) if multinomial else d + 1
            Theta = rng.normal(size=(6, p)) * np.array([0.0, 0.1, 1.0, 10.0, 100.0, 1e4])[:, None]
            sums = [
                clipped_unit_gradient_sum(loss, Theta, augment_intercept(A), v, meta.unit_index(c, c.size), C)
                for A, v, c in ((X, y, codes), (X2, y2, codes2))
            ]
            gap = float(np.linalg.norm(sums[0] - sums[1], axis=1).max())
            assert gap <= 2 * C * (1 + 1e-12), gap
            worst = max(worst, gap)
    assert worst > C  # the bound is not vacuous: replacements do move the sum by more than one clipped summand


def test_per_row_clipping_lets_one_unit_move_the_sum_by_2kc() -> None:
    """A unit of k = 8 identical rows, each gradient of norm exactly C, all pushing one way, replaced by 8 rows
    pushing the other way: the per-row-clipped sum moves by 2kC = 16C, the unit-clipped sum by 2C."""
    loss, k, C = make_loss("logistic"), 8, 0.5
    meta = PublicMetadata(n=3, d=2, row_norm_bound=1.0, max_rows_per_unit=k)
    X = np.vstack([[[0.6, 0.0]], [[0.0, 0.6]], np.tile([1.0, 0.0], (k, 1))])
    codes = np.array([0, 1] + [2] * k)
    y_d, y_d_prime = np.array([1.0, -1.0] + [1.0] * k), np.array([1.0, -1.0] + [-1.0] * k)
    theta = np.zeros(2)  # |φ'(0, ±1)| = 1/2: each row of the unit has gradient ∓x/2, of norm 1/2 = C
    index = meta.unit_index(codes, codes.size)
    by_unit = [clipped_unit_gradient_sum(loss, theta, X, y, index, C) for y in (y_d, y_d_prime)]
    by_row = [clipped_gradient_sum(loss, theta, X, y, C) for y in (y_d, y_d_prime)]
    unit_gap, row_gap = np.linalg.norm(by_unit[0] - by_unit[1]), np.linalg.norm(by_row[0] - by_row[1])
    assert 2 * C * (1 - 1e-12) <= unit_gap <= 2 * C
    assert row_gap == pytest.approx(2 * k * C, rel=1e-12) and row_gap > 2 * C


def test_unit_sums_and_index_against_a_direct_computation() -> None:
    """The sparse unit sums equal a loop over the units, for several θ, all units or a batch; the indicator and
    rows_of describe the same grouping."""
    rng = np.random.default_rng(9)
    codes = random_units(15, 5, rng)
    X, y = synthetic(codes.size, 3, seed=10, classes=CLASSES)
    index = UnitIndex.from_codes(codes, 15, 5)
    assert index.rows == codes.size and index.units == 15
    np.testing.assert_array_equal(np.asarray(index.indicator @ np.ones(codes.size)), np.bincount(codes))
    batch = np.array([11, 2, 7])
    np.testing.assert_array_equal(index.rows_of(batch), np.concatenate([np.flatnonzero(codes == u) for u in batch]))
    for loss in (make_loss("logistic"), MultinomialLogisticLoss(3)):
        multinomial = isinstance(loss, MultinomialLogisticLoss)
        p = loss.parameter_dimension(3) if multinomial else 3
        labels = y if multinomial else np.where(y > 0.5, 1.0, -1.0)
        Theta = rng.normal(size=(4, p))
        for ids in (None, batch):
            units = range(15) if ids is None else ids
            expected = np.zeros((4, len(units), p))
            for j, theta in enumerate(Theta):
                if multinomial:
                    gradients = loss.per_example_gradients(loss.as_matrix(theta, 3), X, labels).reshape(len(X), -1)
                else:
                    gradients = loss.dphi(X @ theta, labels)[:, None] * X
                for s, u in enumerate(units):
                    expected[j, s] = gradients[codes == u].sum(axis=0)
            got = unit_gradient_sums(loss, Theta, X, labels, index, unit_ids=ids)
            np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
            norms = np.linalg.norm(expected, axis=2, keepdims=True)
            clipped = (expected * np.minimum(1.0, 0.3 / norms)).sum(axis=1)
            total = clipped_unit_gradient_sum(loss, Theta, X, labels, index, 0.3, unit_ids=ids)
            np.testing.assert_allclose(total, clipped, rtol=1e-9, atol=1e-12)
    empty = clipped_unit_gradient_sum(make_loss("logistic"), np.ones(3), X, y, index, 0.3, unit_ids=np.array([], int))
    np.testing.assert_array_equal(empty, np.zeros(3))  # a Poisson batch of no unit


# ---------------------------------------------------------------------------------------------------------
# empirical audit on unit-level neighbours
# ---------------------------------------------------------------------------------------------------------

AUDIT_K = 8
AUDIT_DELTA = 1e-5
DP_GD_RUNS = 200_000
DP_SGD_RUNS = 100_000


def audit_data(units: int, label: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unit 0: AUDIT_K rows x = 1 with label ±10⁶ (squared-loss gradients (θ − y)·x clipped to ∓C, all pushing the
    same way, at every iterate); units 1..U−1: one zero row each (gradient 0). D and D' differ in unit 0 only."""
    X = np.vstack([np.ones((AUDIT_K, 1)), np.zeros((units - 1, 1))])
    y = np.concatenate([np.full(AUDIT_K, label), np.zeros(units - 1)])
    codes = np.concatenate([np.zeros(AUDIT_K, dtype=np.int64), np.arange(1, units)])
    return X, y, codes


def per_row_clipping(loss: Any, theta: np.ndarray, X: np.ndarray, y: np.ndarray, units: UnitIndex, clip_norm: float,
                     *, unit_ids: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
    """The BROKEN query: each row of the units clipped to C, not each unit's sum (the noise stays calibrated for a
    unit sensitivity of 2C although a unit of k rows moves this sum by up to 2kC)."""
    rows = units.segments(unit_ids)[0]
    return clipped_gradient_sum(loss, theta, X[rows], y[rows], clip_norm)


def dp_gd_scores(label: float, seed: int) -> tuple[np.ndarray, float]:
    """θ_T over many runs of the solver's loop on the unit-level audit data (U = 3); the claimed ε."""
    meta = PublicMetadata(n=3, d=1, row_norm_bound=1.0, max_rows_per_unit=AUDIT_K)
    params = {"model": "linear", "fit_intercept": False, "radius": 1e3, "clip_norm": 1.0, "steps": 5}
    r = DP_GD.resolve(params, meta, target_epsilon=1.0, delta=AUDIT_DELTA)
    assert r.clip_norm == 1.0 and r.epsilon is not None and r.epsilon <= 1.0
    X, y, codes = audit_data(3, label)
    theta = dp_gradient_descent(
        X, y, loss=make_loss("linear"), clip_norm=r.clip_norm, sigma=r.sigma, steps=r.steps, step_size=r.step_size,
        radius=r.radius, rng=make_generator(seed, data_is_public=True), runs=DP_GD_RUNS,
        units=meta.unit_index(codes, codes.size),
    )  # fmt: skip
    return theta[:, 0], r.epsilon


def dp_sgd_scores(label: float, seed: int) -> tuple[np.ndarray, float]:
    """θ_{T+1} over many runs of dp_sgd's loop (Poisson over U = 10 units, m = 1, T = 10); the claimed ε."""
    meta = PublicMetadata(n=10, d=1, row_norm_bound=1.0, max_rows_per_unit=AUDIT_K)
    params = {"model": "linear", "fit_intercept": False, "radius": 1e3, "clip_norm": 1.0, "step_size": 1.0,
              "batch_size": 1, "epochs": 1, "sampling": "poisson"}  # fmt: skip
    r = DP_SGD.resolve(params, meta, target_epsilon=1.0, delta=AUDIT_DELTA)
    assert r.steps == 10 and r.sampling_rate == 0.1 and r.epsilon is not None and r.epsilon <= 1.0
    X, y, codes = audit_data(10, label)
    theta = dp_sgd(
        X, y, loss=make_loss("linear"), clip_norm=r.clip_norm, sigma=r.sigma, batch_size=r.batch_size,
        sampling=r.sampling, epochs=r.epochs, step_size=r.step_size, radius=r.radius,
        rng=make_generator(seed, data_is_public=True), runs=DP_SGD_RUNS, units=meta.unit_index(codes, codes.size),
    )  # fmt: skip
    return theta[:, 0], r.epsilon


@pytest.mark.parametrize("solver", ["dp_gd", "dp_sgd"])
@pytest.mark.parametrize("variant", ["unit clipping", "BROKEN: per-row clipping"])
def test_unit_level_audit_passes_the_mechanism_and_detects_per_row_clipping(
    monkeypatch: pytest.MonkeyPatch, solver: str, variant: str
) -> None:
    module, scores = (dp_gd_module, dp_gd_scores) if solver == "dp_gd" else (dp_sgd_module, dp_sgd_scores)
    if variant.startswith("BROKEN"):
        monkeypatch.setattr(module, "clipped_unit_gradient_sum", per_row_clipping)
    on_d, claimed = scores(+1e6, seed=1)
    on_d_prime, _ = scores(-1e6, seed=2)
    bound = epsilon_lower_bound(on_d, on_d_prime, delta=AUDIT_DELTA).epsilon_lower_bound
    if variant == "unit clipping":
        assert 0.2 < bound <= claimed, (bound, claimed)  # leaks (the audit has power), within the claim
    else:
        assert bound > claimed + 2.0, (bound, claimed)


# ---------------------------------------------------------------------------------------------------------
# every other solver refuses a dataset with a privacy unit
# ---------------------------------------------------------------------------------------------------------

UNIT_META = PublicMetadata(n=800, d=3, row_norm_bound=1.0, max_rows_per_unit=4)
ROW_LEVEL_SOLVERS = [solver for solver in list_solvers() if solver.name not in ("dp_gd", "dp_sgd")]


def test_exactly_dp_gd_and_dp_sgd_fit_a_dataset_with_a_privacy_unit() -> None:
    assert unit_level_solvers() == ("dp_gd", "dp_sgd")
    assert {solver.name for solver in list_solvers() if solver.privacy_units} == {"dp_gd", "dp_sgd"}


@pytest.mark.parametrize("solver", ROW_LEVEL_SOLVERS, ids=lambda solver: solver.name)
def test_every_other_solver_refuses_unit_level_metadata_naming_those_that_fit_it(solver: Any) -> None:
    for request in ({"target_epsilon": 1.0, "delta": 1e-5}, {}):
        with pytest.raises(SolverParameterError) as error:
            solver.resolve(None, UNIT_META, **request)
        assert error.value.parameter == "solver"
        message = str(error.value)
        assert "'dp_gd'" not in message and "dp_gd, dp_sgd" in message and repr(solver.name) in message
    if solver.experimental:  # its defaults cannot be planned on a small instance (test_solver_registry.py)
        return
    # settings planned for the row-level metadata are not costed or fitted on the unit-level one either
    plan = solver.plan(None, dataclasses.replace(UNIT_META, max_rows_per_unit=None), target_epsilon=1.0, delta=1e-5)
    with pytest.raises(SolverParameterError) as at_cost:
        solver.cost(plan.resolved, UNIT_META)
    X, y = synthetic(900, 3, seed=12)
    with pytest.raises(SolverParameterError) as at_fit:
        solver.fit(X, y, UNIT_META, plan.resolved, make_generator(0, data_is_public=True),
                   units=np.arange(900) % 800)  # fmt: skip
    assert at_cost.value.parameter == at_fit.value.parameter == "solver"


@pytest.mark.parametrize("mode", ["auto", "selection", "recommended"])
def test_auto_refuses_unit_level_metadata_in_every_mode(mode: str) -> None:
    """Its private selection runs on a secret split of the ROWS and its scores count rows: row-level only."""
    with pytest.raises(SolverParameterError) as error:
        get_solver("auto").plan({"mode": mode}, UNIT_META, target_epsilon=1.0, delta=1e-5)
    assert error.value.parameter == "solver" and "dp_gd, dp_sgd" in str(error.value)


# ---------------------------------------------------------------------------------------------------------
# the units: checked, recorded, and invisible in what an analyst observes
# ---------------------------------------------------------------------------------------------------------

# U = 5 units, k = 2, d = 2, 7 rows; no public number is 3, 6, 7 or 977 (the messages must not quote private ones)
CHECK_META = PublicMetadata(n=5, d=2, row_norm_bound=1.0, max_rows_per_unit=2)
VALID_UNITS = np.array([0, 0, 1, 2, 3, 4, 4])


@pytest.mark.parametrize(
    "units",
    [
        pytest.param(VALID_UNITS[:-1], id="one entry short"),
        pytest.param(np.append(VALID_UNITS, 1), id="one entry too many"),
        pytest.param(np.array([0, 0, 1, 2, 3, 977, 4]), id="a unit beyond U"),
        pytest.param(np.array([0, 0, 1, 2, -1, 4, 4]), id="a negative unit"),
        pytest.param(np.array([0, 0, 0, 1, 2, 3, 4]), id="a unit over k rows"),
        pytest.param(np.array([0, 0, 1, 1, 2, 2, 3]), id="a unit missing"),
        pytest.param(VALID_UNITS.astype(float), id="floats"),
        pytest.param(VALID_UNITS.astype(bool), id="booleans"),
        pytest.param(VALID_UNITS[:, None], id="2-D"),
        pytest.param(None, id="no units"),
    ],
)
def test_bad_units_are_refused_naming_public_facts_only(units: np.ndarray | None) -> None:
    X, y = synthetic(7, 2, seed=13)
    resolved = DP_GD.resolve({"steps": 3, "noise_multiplier": 1.0}, CHECK_META)
    for call in (
        lambda: DP_GD.fit(X, y, CHECK_META, resolved, make_generator(0, data_is_public=True), units=units),
        lambda: check_fit_inputs(X, y, CHECK_META, make_generator(0, data_is_public=True), units=units),
        lambda: CHECK_META.check_data(X, y, units),
    ):
        with pytest.raises(SolverParameterError) as error:
            call()
        assert error.value.parameter == "units"
        assert not any(number in str(error.value) for number in ("3", "6", "7", "977")), str(error.value)


def test_valid_units_pass_and_shapes_are_checked_without_the_row_count() -> None:
    X, y = synthetic(7, 2, seed=14)
    rng = make_generator(0, data_is_public=True)
    A, v = check_fit_inputs(X, y, CHECK_META, rng, units=VALID_UNITS)
    assert A.shape == (7, 2) and v.shape == (7,)
    for bad, field in ((X[:, :1], "X"), (X[0], "X"), (X[:0], "X")):
        with pytest.raises(SolverParameterError) as error:
            CHECK_META.check_data(bad, y, VALID_UNITS)
        assert error.value.parameter == field and "7" not in str(error.value)
    with pytest.raises(SolverParameterError) as bad_y:
        CHECK_META.check_data(X, y[:-1], VALID_UNITS)
    assert bad_y.value.parameter == "y" and "6" not in str(bad_y.value) and "7" not in str(bad_y.value)
    row_level = dataclasses.replace(CHECK_META, n=7, max_rows_per_unit=None)
    with pytest.raises(SolverParameterError) as given:
        check_fit_inputs(X, y, row_level, rng, units=VALID_UNITS)
    assert given.value.parameter == "units"


@pytest.mark.parametrize("value", [0, -1, True, 1.5, "2"])
def test_max_rows_per_unit_must_be_a_positive_integer(value: Any) -> None:
    with pytest.raises(SolverParameterError) as error:
        PublicMetadata(n=5, d=2, row_norm_bound=1.0, max_rows_per_unit=value)
    assert error.value.parameter == "max_rows_per_unit"
    assert PublicMetadata(n=5, d=2, row_norm_bound=1.0, max_rows_per_unit=np.int64(3)).max_rows_per_unit == 3


def test_metadata_of_a_unit_level_dataset_counts_units() -> None:
    schema = SimpleNamespace(label_classes=None, privacy_unit=SimpleNamespace(column="customer", max_rows=6))
    dataset = SimpleNamespace(n=1234, public_n=300, d=2, row_norm_bound=1.0, label_bound=1.0,
                              feature_names=["a", "b"], schema=schema)  # fmt: skip
    meta = PublicMetadata.from_dataset(dataset)
    assert (meta.n, meta.max_rows_per_unit, meta.unit_level) == (300, 6, True)
    row_level = PublicMetadata.from_dataset(SimpleNamespace(**{**vars(dataset), "schema": None}))
    assert (row_level.n, row_level.max_rows_per_unit, row_level.unit_level) == (1234, None, False)


@pytest.mark.parametrize("solver", [DP_GD, DP_SGD], ids=lambda solver: solver.name)
def test_the_resolved_settings_record_the_unit_and_cost_as_row_level_with_n_units(solver: Any) -> None:
    unit = PublicMetadata(n=500, d=3, row_norm_bound=1.0, max_rows_per_unit=5)
    row = dataclasses.replace(unit, max_rows_per_unit=None)
    r_unit = solver.resolve(None, unit, target_epsilon=EPSILON, delta=DELTA)
    r_row = solver.resolve(None, row, target_epsilon=EPSILON, delta=DELTA)
    assert r_unit.max_rows_per_unit == 5 and r_unit.model_dump(mode="json")["max_rows_per_unit"] == 5
    np.testing.assert_array_equal(solver.cost(r_unit, unit).rdp, solver.cost(r_row, row).rdp)
    assert r_unit.epsilon == r_row.epsilon <= EPSILON
    assert resolved_metadata(r_unit) == dataclasses.replace(unit, feature_names=None)  # the stored fit's outlook
    assert solver.outlook(r_unit, resolved_metadata(r_unit)) == solver.outlook(r_row, row)
    assert solver.load_resolved(r_unit.model_dump(mode="json")) == r_unit
    for settings, meta in ((r_row, unit), (r_unit, row)):  # a plan is fitted only under the relation it was made for
        with pytest.raises(SolverParameterError) as error:
            check_resolved_metadata(solver, settings, meta)
        assert error.value.parameter == "resolved"


@pytest.mark.parametrize(
    ("solver", "params"),
    [
        (DP_GD, {}),
        (DP_GD, {"model": "linear"}),
        (DP_SGD, {"sampling": "poisson", "epochs": 2}),
        (DP_SGD, {"sampling": "fixed_size", "epochs": 2}),
        (DP_SGD, {"sampling": "shuffle", "epochs": 2}),
    ],
    ids=["dp_gd", "dp_gd-linear", "dp_sgd-poisson", "dp_sgd-fixed_size", "dp_sgd-shuffle"],
)
def test_what_an_analyst_observes_does_not_depend_on_the_units_sizes(solver: Any, params: dict[str, Any]) -> None:
    """Neighbours that differ in one unit — 1 ordinary row in D, k = 5 extreme rows in D' (the row count differs) —
    fitted with the same seed: the same progress sequence, stop polls, draws (the generator's state after the fit)
    and metadata."""
    rng = np.random.default_rng(15)
    codes = random_units(300, 5, rng)
    victim = int(codes[0])
    codes = np.concatenate([codes[codes != victim], [victim]])  # the victim has one row in D
    X, y = synthetic(codes.size, 3, seed=16)
    X2 = np.vstack([X[:-1], np.tile([1.0, 0.0, 0.0], (5, 1))])
    y2 = np.concatenate([y[:-1], np.full(5, -1.0)])
    codes2 = np.concatenate([codes[:-1], np.full(5, victim)])
    meta = PublicMetadata(n=300, d=3, row_norm_bound=1.0, max_rows_per_unit=5)
    resolved = solver.resolve(params, meta, target_epsilon=EPSILON, delta=DELTA)
    records = []
    for A, v, c in ((X, y, codes), (X2, y2, codes2)):
        progress: list[float] = []
        polls = [0]

        def poll(polls: list[int] = polls) -> bool:
            polls[0] += 1
            return False

        generator = make_generator(17, data_is_public=True)
        result = solver.fit(A, v, meta, resolved, generator, progress.append, poll, units=c)
        records.append((progress, polls[0], generator.bit_generator.state, result.metadata, released(result)))
    (p1, n1, s1, m1, t1), (p2, n2, s2, m2, t2) = records
    assert p1 == p2 and p1[-1] == 1.0 and n1 == n2 == resolved.steps and s1 == s2 and m1 == m2
    assert m1["max_rows_per_unit"] == 5
    assert not np.array_equal(t1, t2)  # the release does differ: the comparison is not vacuous


@pytest.mark.parametrize("solver", [DP_GD, DP_SGD], ids=lambda solver: solver.name)
def test_unit_level_fits_draw_exact_lattice_noise_too(solver: Any) -> None:
    """The unit path releases through the same noise stream: under the exact sampler the public bound on a
    coordinate is U·C (U units clipped to C each)."""
    codes = np.repeat(np.arange(50), 3)
    X, y = synthetic(codes.size, 2, seed=18)
    meta = PublicMetadata(n=50, d=2, row_norm_bound=1.0, max_rows_per_unit=3)
    params = {"steps": 20} if solver is DP_GD else {"epochs": 2, "batch_size": 10}
    resolved = solver.resolve(params, meta, target_epsilon=EPSILON, delta=DELTA)
    with using_sampler("exact"):
        result = solver.fit(X, y, meta, resolved, make_generator(19, data_is_public=True), units=codes)
    assert result.metadata["noise_sampler"]["name"] == "exact" and np.all(np.isfinite(released(result)))
