"""``auto``: private selection on a secret split (privfit.solvers.selection.auto).

Cost: equation (1) of the module — the pointwise maximum of the candidates' composed curve and the scores'
Gaussian curve — pinned to golden values, recomputed from the stored settings, and cross-checked with
dp_accounting where every candidate has a dp_accounting event (``linear``: dp_gd's T Gaussian steps and output
perturbation's one Gaussian release). The fit: the released model is one candidate's, progress is public, and
stored settings are recomputed rather than trusted.
"""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as rdp

from privfit.privacy import DEFAULT_GRID, PrivacyCost, gdp_epsilon, make_generator
from privfit.privacy.noise import describe_sampler
from privfit.solvers import FitCancelled, PublicMetadata, SolverParameterError, get_solver
from privfit.solvers.selection.auto import CANDIDATE_SOLVERS, SHARE_BISECTIONS, candidate_set, validation_size

AUTO = get_solver("auto")
DELTA = 1e-6
META = PublicMetadata(5000, 10, 1.0)


def plan(model: str = "logistic", epsilon: float = 1.0, meta: PublicMetadata = META, **params):
    """A plan of the selection itself (``mode='selection'``) unless ``params`` say otherwise."""
    return AUTO.plan({"model": model, "mode": "selection", **params}, meta, target_epsilon=epsilon, delta=DELTA)


def candidate_costs(resolved, grid=DEFAULT_GRID):
    meta_train = PublicMetadata(resolved.n_train, resolved.d, resolved.row_norm_bound, resolved.label_bound)
    return [CANDIDATE_SOLVERS[c.solver].cost(c.resolved, meta_train, grid) for c in resolved.candidates]


@pytest.mark.parametrize("model", ["logistic", "linear", "svm", "huber"])
@pytest.mark.parametrize("epsilon", [0.1, 1.0, 5.0])
def test_cost_is_the_maximum_of_the_composed_fits_and_the_scores(model: str, epsilon: float) -> None:
    p = plan(model, epsilon)
    r = p.resolved
    fits = np.sum([cost.rdp for cost in candidate_costs(r)], axis=0)
    scores = len(r.candidates) * DEFAULT_GRID.orders / (2 * r.score_noise_multiplier**2)
    np.testing.assert_allclose(p.cost.rdp, np.maximum(fits, scores), rtol=1e-12)
    assert p.cost.extra_delta == 0.0 and p.cost.approx_delta == 0.0
    assert p.cost.epsilon(DELTA).epsilon <= epsilon
    assert r.n_validation == math.floor(0.2 * META.n) and r.n_train == META.n - r.n_validation
    assert [c.solver for c in r.candidates] == list(candidate_set(model))
    for candidate in r.candidates:  # every candidate runs at the share t of the target, for n_train rows
        assert candidate.resolved["n"] == r.n_train
        assert candidate.resolved["target_epsilon"] == pytest.approx(r.share * epsilon)


def test_share_is_the_largest_feasible_one_to_the_bisection_resolution() -> None:
    """One more bisection step up would overspend: the calibration leaves no more than 2^−12 of t unused."""
    r = plan().resolved
    assert 0.5 <= r.share < 1.0
    bigger = r.share + 2.0**-SHARE_BISECTIONS
    meta_train = PublicMetadata(r.n_train, META.d, META.row_norm_bound, META.label_bound)
    costs = [
        CANDIDATE_SOLVERS[name].plan({"model": "logistic"}, meta_train, target_epsilon=bigger, delta=DELTA).cost
        for name in candidate_set("logistic")
    ]
    from privfit.privacy import gaussian_sigma
    from privfit.solvers.selection.auto import selection_curve

    z = gaussian_sigma(bigger, DELTA, count=2).noise
    assert selection_curve(costs, z, DEFAULT_GRID).epsilon(DELTA).epsilon > 1.0


def test_golden_values() -> None:
    """Pinned for (n, d, B) = (5000, 10, 1), logistic, ε = 1 at δ = 1e-6 (recomputed on any change of rule). Since
    dp_gd calibrates on the exact Gaussian curve (2026-12-07) its RDP curve at a share is larger, and composed with
    objective perturbation (float sampler; no GDP bound) the share fell from 0.65210 to 0.62463."""
    r = plan().resolved
    assert r.share == pytest.approx(0.62463, abs=1e-5)
    assert r.score_noise_multiplier == pytest.approx(9.9558, abs=1e-3)
    assert r.candidates[0].resolved["steps"] == 182
    assert r.candidates[0].resolved["noise_multiplier"] == pytest.approx(88.309, abs=1e-2)


def test_linear_cost_matches_dp_accounting() -> None:
    """Every linear candidate is Gaussian: dp_gd = T self-composed Gaussians of multiplier z = σ/(2C), output
    perturbation one Gaussian of multiplier σ/Δ; the scores m Gaussians of multiplier z_s."""
    p = plan("linear", 1.0)
    r = p.resolved
    gd, op = (c.resolved for c in r.candidates)
    orders = list(DEFAULT_GRID.orders)
    fits = dp_accounting.ComposedDpEvent([
        dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(gd["noise_multiplier"]), gd["steps"]),
        dp_accounting.GaussianDpEvent(op["noise_multiplier"]),
    ])  # fmt: skip
    scores = dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(r.score_noise_multiplier), 2)
    curves = []
    for event in (fits, scores):
        accountant = rdp.RdpAccountant(orders)
        accountant.compose(event)
        curves.append(np.asarray(accountant._rdp))
    expected = np.maximum(*curves)
    np.testing.assert_allclose(p.cost.rdp, expected, rtol=1e-9)
    epsilon, _ = rdp.compute_epsilon(orders, expected, DELTA)
    assert PrivacyCost(p.cost.rdp, DEFAULT_GRID).epsilon(DELTA).epsilon == pytest.approx(epsilon, rel=1e-9)
    # and the GDP bound of the module docstring: max(T/z_gd² + 1/z_op², m/z_s²), whose exact curve is tighter
    mu_squared = max(gd["steps"] / gd["noise_multiplier"] ** 2 + 1 / op["noise_multiplier"] ** 2,
                     2 / r.score_noise_multiplier**2)  # fmt: skip
    assert p.cost.gdp_mu_squared == pytest.approx(mu_squared, rel=1e-9)
    assert p.cost.epsilon(DELTA).epsilon == pytest.approx(gdp_epsilon(p.cost.gdp_mu_squared, DELTA), rel=1e-12)
    assert p.cost.epsilon(DELTA).epsilon <= 1.0 and p.cost.epsilon(DELTA).epsilon < epsilon


def test_cost_is_recomputed_from_stored_settings_and_tampering_is_refused() -> None:
    r = plan().resolved
    stored = r.model_dump(mode="json")
    assert np.array_equal(AUTO.cost(stored, META).rdp, plan().cost.rdp)
    fewer = {**stored, "candidates": stored["candidates"][:1]}
    with pytest.raises(SolverParameterError, match="public set"):
        AUTO.cost(fewer, META)
    split = {**stored, "n_validation": 10, "n_train": META.n - 10}
    with pytest.raises(SolverParameterError, match="split sizes"):
        AUTO.cost(split, META)
    whole = dict(stored["candidates"][0]["resolved"], n=META.n)  # a candidate fitted on every row
    with pytest.raises(SolverParameterError, match="different public metadata"):
        AUTO.cost({**stored, "candidates": [{"solver": "dp_gd", "resolved": whole}, stored["candidates"][1]]}, META)
    wrong_model = plan("svm").resolved.model_dump(mode="json")["candidates"]
    with pytest.raises(SolverParameterError, match="another model"):
        AUTO.cost({**stored, "candidates": wrong_model}, META)


def test_validation_size_refuses_empty_splits() -> None:
    assert validation_size(10, 0.2) == 2
    with pytest.raises(SolverParameterError, match="validation_fraction"):
        validation_size(4, 0.2)
    with pytest.raises(SolverParameterError, match="validation_fraction"):
        plan(validation_fraction=0.9)


def separable(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, d)) / math.sqrt(d)
    y = np.where(X @ np.ones(d) + 0.05 * rng.standard_normal(n) >= 0, 1.0, -1.0)
    return X, y


def test_fit_releases_the_selected_candidate_with_public_progress() -> None:
    meta = PublicMetadata(4000, 5, 1.0)
    X, y = separable(4000, 5, 0)
    p = plan("logistic", 2.0, meta)
    reported: list[float] = []
    result = AUTO.fit(X, y, meta, p.resolved, make_generator(1, data_is_public=True), progress=reported.append)
    selected = result.selected
    assert selected["solver"] in candidate_set("logistic")
    assert selected in [c.model_dump(mode="json") for c in p.resolved.candidates]
    assert result.solver == "auto" and result.model == "logistic" and result.intercept is not None
    assert len(result.coefficients) == meta.d
    assert np.mean(result.predict(X) == y) > 0.9
    assert reported == sorted(reported) and reported[-1] == 1.0
    # public settings only (and the sampler that drew the scores): no score, no loser
    assert result.metadata == {**p.resolved.model_dump(mode="json"), "noise_sampler": describe_sampler("float")}


def test_fit_can_be_cancelled_between_and_inside_candidates() -> None:
    meta = PublicMetadata(500, 3, 1.0)
    X, y = separable(500, 3, 1)
    r = plan("logistic", 1.0, meta).resolved
    polls = []

    def stop() -> bool:
        polls.append(1)
        return len(polls) > 5

    with pytest.raises(FitCancelled):
        AUTO.fit(X, y, meta, r, make_generator(2, data_is_public=True), should_stop=stop)


def test_regression_fit_scores_by_clipped_squared_error() -> None:
    meta = PublicMetadata(3000, 4, 1.0)
    rng = np.random.default_rng(3)
    X = rng.uniform(-0.5, 0.5, (3000, 4))
    y = np.clip(X @ np.array([0.5, -0.5, 0.25, 0.0]) + 0.05 * rng.standard_normal(3000), -1, 1)
    r = plan("linear", 5.0, meta).resolved
    result = AUTO.fit(X, y, meta, r, make_generator(4, data_is_public=True))
    assert result.selected["solver"] in candidate_set("linear")
    assert float(np.sqrt(np.mean((result.predict(X) - y) ** 2))) < float(np.std(y))


def test_scores_draw_one_noise_per_candidate_with_the_stored_scale() -> None:
    """The score noise is z_s·Δ_s per candidate: with the thetas fixed, the spread of s_c matches it."""
    r = plan("linear", 1.0).resolved
    X = np.zeros((r.n_validation, META.d))
    y = np.ones(r.n_validation)
    thetas = [np.zeros(META.d + 1), np.zeros(META.d + 1)]
    rng = make_generator(5, data_is_public=True)
    draws = np.array([AUTO._noisy_scores(r, thetas, X, y, rng) for _ in range(4000)])
    exact = -0.25 * r.n_validation  # every residual is 1 − 0 = 1, capped at c = B_y/2 = 0.5
    expected_sd = r.score_noise_multiplier * r.score_sensitivity
    assert r.score_sensitivity == 0.25
    np.testing.assert_allclose(draws.mean(axis=0), exact, atol=4 * expected_sd / math.sqrt(4000))
    np.testing.assert_allclose(draws.std(axis=0), expected_sd, rtol=0.05)


@pytest.mark.parametrize(
    ("model", "n", "epsilon", "expected"),
    [("logistic", 5000, 1.0, "dp_gd"), ("logistic", 20000, 1.0, "objective_perturbation"),
     ("linear", 5000, 1.0, "dp_gd"), ("svm", 50000, 1.0, "dp_gd")],
)  # fmt: skip
def test_recommended_mode_fits_the_public_rule_at_the_whole_epsilon(
    model: str, n: int, epsilon: float, expected: str
) -> None:
    meta = PublicMetadata(n, 10, 1.0)
    p = plan(model, epsilon, meta, mode="recommended")
    r = p.resolved
    assert r.mode == "recommended" and r.n_train == n and r.n_validation == 0 and r.share == 1.0
    assert [c.solver for c in r.candidates] == [expected] and r.score_noise_multiplier is None
    alone = CANDIDATE_SOLVERS[expected].plan({"model": model}, meta, target_epsilon=epsilon, delta=DELTA)
    assert np.array_equal(p.cost.rdp, alone.cost.rdp)
    stored = r.model_dump(mode="json")
    with pytest.raises(SolverParameterError, match="score settings"):
        AUTO.cost({**stored, "score_noise_multiplier": 5.0}, meta)


def test_auto_mode_selects_only_when_every_candidate_outlook_is_low() -> None:
    """The public rule: selection where its overhead is cheap (all outlooks 'low'), the recommendation else."""
    small = PublicMetadata(5000, 10, 1.0)
    assert plan(meta=small, mode="auto").resolved.mode == "recommended"
    assert not AUTO._selection_pays(plan(meta=small).resolved)
    large = PublicMetadata(2_000_000, 10, 1.0)
    chosen = plan(meta=large, mode="auto").resolved
    assert chosen.mode == "selection" and AUTO._selection_pays(chosen)
    meta_train = PublicMetadata(chosen.n_train, 10, 1.0)
    for candidate in chosen.candidates:
        outlook = CANDIDATE_SOLVERS[candidate.solver].outlook(candidate.resolved, meta_train)
        assert outlook is not None and outlook.level == "low"


def test_recommended_mode_fit_is_the_candidate_on_all_rows() -> None:
    meta = PublicMetadata(2000, 4, 1.0)
    X, y = separable(2000, 4, 6)
    r = plan("logistic", 1.0, meta, mode="recommended").resolved
    result = AUTO.fit(X, y, meta, r, make_generator(7, data_is_public=True))
    alone = CANDIDATE_SOLVERS["dp_gd"].fit(X, y, meta, r.candidates[0].resolved, make_generator(7, data_is_public=True))
    assert result.coefficients == alone.coefficients and result.intercept == alone.intercept
    assert result.selected["solver"] == "dp_gd"


def test_multiclass_candidates_scores_and_release_round_trip() -> None:
    """A categorical label: the multinomial solvers are the candidates, a score counts the validation rows whose
    most probable class is the true one, and vec(Θ) goes back into the same k × d release."""
    from privfit.solvers.selection.auto import released_theta

    meta = PublicMetadata(3000, 2, 1.0, 2.0, classes=("a", "b", "c"))
    r = plan("logistic", 2.0, meta).resolved
    assert [c.solver for c in r.candidates] == ["dp_gd", "dp_sgd"] and r.classes == ["a", "b", "c"]
    assert r.score_sensitivity == 1.0
    X = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]] * 200)
    y = np.array([0.0, 1.0, 2.0] * 200)
    right = np.array([[5.0, 0.0, 0.0], [0.0, 5.0, 0.0], [-5.0, -5.0, 0.0]]).ravel()  # rows: class coefficients, b
    wrong = np.array([[0.0, 0.0, 1.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]).ravel()  # always class "a"
    rng = make_generator(8, data_is_public=True)
    draws = np.array([AUTO._noisy_scores(r, [right, wrong], X, y, rng) for _ in range(2000)])
    tolerance = 4 * r.score_noise_multiplier / math.sqrt(2000)
    np.testing.assert_allclose(draws.mean(axis=0), [600.0, 200.0], atol=tolerance)
    fitted = get_solver("dp_gd").fit(X, y, PublicMetadata(600, 2, 1.0, 2.0, classes=("a", "b", "c")),
                                     plan("logistic", 2.0, PublicMetadata(600, 2, 1.0, 2.0, classes=("a", "b", "c")),
                                          mode="recommended").resolved.candidates[0].resolved,
                                     make_generator(9, data_is_public=True))  # fmt: skip
    theta = released_theta(fitted)
    assert theta.shape == (9,)
    np.testing.assert_array_equal(theta.reshape(3, 3)[:, :2], fitted.coefficients)
    np.testing.assert_array_equal(theta.reshape(3, 3)[:, 2], fitted.intercept)


def test_a_selection_that_cannot_be_planned_is_a_clear_refusal_or_the_recommended_solver() -> None:
    """At ε = 1e-6 (the smallest target) each candidate's share t·ε is below the minimum ε: mode 'selection' says
    so and points to 'recommended'; mode 'auto' fits the recommended solver, which can be planned."""
    with pytest.raises(SolverParameterError, match=r"selection's candidates cannot be planned.*recommended") as caught:
        plan(epsilon=1e-6)
    assert caught.value.parameter == "epsilon"
    fallback = AUTO.plan({"model": "logistic"}, META, target_epsilon=1e-6, delta=DELTA).resolved
    assert fallback.mode == "recommended" and [c.solver for c in fallback.candidates] == ["dp_gd"]
    too_few = PublicMetadata(4, 3, 1.0)  # 20 % of 4 rows leaves no validation row
    assert AUTO.plan({"model": "logistic"}, too_few, target_epsilon=1.0, delta=DELTA).resolved.mode == "recommended"
    with pytest.raises(SolverParameterError, match="validation_fraction"):
        plan(meta=too_few)
