"""``auto`` and the recommendation rule under the noise layer (issue 25, :mod:`privfit.privacy.noise`): the scores
are Gaussian releases of the layer (float: numpy's draws as before, bit for bit; exact: on the lattice of their
public inputs), and under the exact sampler ``objective_perturbation``, which needs continuous noise, is neither a
candidate nor the recommendation. Seeds on synthetic data only."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfit.privacy import make_generator
from privfit.privacy.noise import describe_sampler, gaussian_lattice, using_sampler
from privfit.solvers import PublicMetadata, SolverParameterError, get_solver
from privfit.solvers.recommendation import OBJECTIVE_PERTURBATION_MIN_N_EPSILON, recommend
from privfit.solvers.selection.auto import candidate_set

AUTO = get_solver("auto")
DELTA = 1e-6
META = PublicMetadata(5000, 10, 1.0)


def plan(sampler: str, model: str = "logistic", meta: PublicMetadata = META, **params: object):
    with using_sampler(sampler):
        return AUTO.plan({"model": model, "mode": "selection", **params}, meta, target_epsilon=1.0, delta=DELTA)


def test_exact_candidates_and_recommendation_leave_out_objective_perturbation() -> None:
    for model in ("logistic", "svm", "huber", "linear"):
        assert candidate_set(model, sampler="exact") == ("dp_gd", "output_perturbation")
    assert candidate_set("logistic") == ("dp_gd", "objective_perturbation")
    n = int(OBJECTIVE_PERTURBATION_MIN_N_EPSILON)
    assert recommend("logistic", n, 1.0, sampler="float").solver == "objective_perturbation"
    assert recommend("logistic", n, 1.0, sampler="exact").solver == "dp_gd"
    with using_sampler("exact"):  # the default is the sampler in force
        exact = recommend("logistic", n, 1.0)
    assert exact.solver == "dp_gd" and "exact lattice noise" in exact.reason
    assert recommend("logistic", n, 1.0).solver == "objective_perturbation"


def test_exact_selection_plans_its_candidates_under_the_exact_sampler() -> None:
    p = plan("exact")
    r = p.resolved
    assert r.sampler == "exact" and [c.solver for c in r.candidates] == ["dp_gd", "output_perturbation"]
    assert r.candidates[1].resolved["sampler"] == "exact"  # planned (and charged) for exact draws
    assert p.cost.epsilon(DELTA).epsilon <= 1.0
    assert plan("float").resolved.sampler == "float"
    # stored settings are verified against the sampler they record, not the one in force
    stored = plan("float").resolved.model_dump(mode="json")
    with using_sampler("exact"):
        assert AUTO.cost(stored, META).epsilon(DELTA).epsilon <= 1.0
    with pytest.raises(SolverParameterError, match="public set"):
        AUTO.cost({**stored, "sampler": "exact"}, META)  # objective_perturbation is no exact candidate
    # 'recommended' under exact: dp_gd where the float rule picks objective perturbation
    large = PublicMetadata(20_000, 10, 1.0)
    chosen = plan("exact", meta=large, mode="recommended").resolved
    assert [c.solver for c in chosen.candidates] == ["dp_gd"]
    assert [c.solver for c in plan("float", meta=large, mode="recommended").resolved.candidates] == [
        "objective_perturbation"
    ]


def test_float_scores_are_the_draws_made_before_the_noise_layer() -> None:
    r = plan("float", "linear").resolved
    X = np.zeros((r.n_validation, META.d))
    y = np.ones(r.n_validation)
    thetas = [np.zeros(META.d + 1), np.full(META.d + 1, 0.1)]
    scores = AUTO._noisy_scores(r, thetas, X, y, np.random.default_rng(4))
    margins = np.stack([np.hstack([X, np.ones((X.shape[0], 1))]) @ theta for theta in thetas])
    exact = -np.sum(np.minimum((margins - y) ** 2, 0.25), axis=1)
    expected = exact + np.random.default_rng(4).normal(0.0, r.score_noise_multiplier * r.score_sensitivity, size=2)
    np.testing.assert_array_equal(scores, expected)


def test_exact_scores_are_on_the_lattice_of_their_public_inputs() -> None:
    r = plan("exact").resolved
    X = np.zeros((r.n_validation, META.d))
    y = np.ones(r.n_validation)
    thetas = [np.zeros(META.d + 1), np.zeros(META.d + 1)]
    sigma = r.score_noise_multiplier * r.score_sensitivity
    lattice = gaussian_lattice(sigma, r.score_sensitivity, 1, r.n_validation * r.score_sensitivity)
    rng = make_generator(5, data_is_public=True)
    with using_sampler("exact"):
        draws = np.array([AUTO._noisy_scores(r, thetas, X, y, rng) for _ in range(300)])
    scaled = np.ldexp(draws, -lattice.exponent)
    assert np.array_equal(scaled, np.rint(scaled))
    # every row is classified +1 (margin 0 ≥ 0) and y = +1: S = n_val; the noise has the stored scale
    np.testing.assert_allclose(draws.mean(axis=0), r.n_validation, atol=5 * sigma / math.sqrt(300))
    np.testing.assert_allclose(draws.std(axis=0), sigma, rtol=0.15)


def test_fit_draws_with_the_resolved_sampler_and_names_it() -> None:
    meta = PublicMetadata(3000, 4, 1.0)
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (3000, 4)) / 2.0
    y = np.where(X @ np.ones(4) + 0.05 * rng.standard_normal(3000) >= 0, 1.0, -1.0)
    r = plan("exact", meta=meta).resolved
    result = AUTO.fit(X, y, meta, r.model_dump(mode="json"), make_generator(1, data_is_public=True))
    assert result.metadata["noise_sampler"] == describe_sampler("exact")
    assert result.selected is not None and result.selected["solver"] in ("dp_gd", "output_perturbation")
    assert np.mean(result.predict(X) == y) > 0.85
