"""The perturbation solvers and the noise layer (issue 25, :mod:`privfit.privacy.noise`): ``output_perturbation``
records the sampler it was resolved for and draws with it — float: the draws made before the layer, bit for bit;
exact: lattice-valued releases (the discrete Gaussian, or for 'laplace' the product discrete Laplace calibrated to
the L1 sensitivity √d·Δ, charged as pure ε); ``objective_perturbation`` is refused under the exact sampler. Seeds
are used only on synthetic (public) data."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfit.privacy import DEFAULT_GRID, PrivacyCost, gaussian_rdp, make_generator, pure_dp_rdp
from privfit.privacy.noise import describe_sampler, gaussian_lattice, laplace_lattice, using_sampler
from privfit.solvers import PublicMetadata, SolverParameterError, get_solver
from privfit.solvers.baselines.objective_perturbation import EXACT_SAMPLER_REFUSAL
from privfit.solvers.baselines.output_perturbation import OutputPerturbationResolved, perturb_output
from privfit.solvers.baselines.perturbation import sample_l2_laplace

OUTPUT = get_solver("output_perturbation")
OBJECTIVE = get_solver("objective_perturbation")
META = PublicMetadata(n=20_000, d=4, row_norm_bound=1.0, label_bound=1.0)
DIMENSION = META.d + 1  # with the intercept


def resolve(noise: str, sampler: str, **params: object) -> OutputPerturbationResolved:
    with using_sampler(sampler):
        resolved = OUTPUT.resolve({"noise": noise, **params}, META, target_epsilon=1.0, delta=1e-6)
    assert isinstance(resolved, OutputPerturbationResolved)
    return resolved


def on_lattice(values: np.ndarray, exponent: int) -> bool:
    scaled = np.ldexp(values, -exponent)
    return bool(np.all(scaled == np.rint(scaled)))


def coordinate_bound(r: OutputPerturbationResolved) -> float:
    return r.minimizer_radius + r.gradient_tolerance / r.l2


def release_exponent(r: OutputPerturbationResolved) -> int:
    """The exponent k of the lattice 2^k·Z the exact release of ``r`` uses, recomputed from its public inputs."""
    if r.noise == "gaussian":
        return gaussian_lattice(r.noise_scale, r.sensitivity, DIMENSION, coordinate_bound(r)).exponent
    return laplace_lattice(r.noise_scale, r.laplace_l1_sensitivity(), DIMENSION, coordinate_bound(r)).exponent


def synthetic(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, (n, d)) / math.sqrt(d)
    return X, np.where(X @ np.ones(d) + 0.1 * rng.standard_normal(n) >= 0, 1.0, -1.0)


def test_the_resolution_records_the_sampler_and_old_settings_load_as_float() -> None:
    float_settings = resolve("gaussian", "float")
    exact_settings = resolve("gaussian", "exact")
    assert (float_settings.sampler, exact_settings.sampler) == ("float", "exact")
    # the Gaussian curve holds for the lattice Gaussian (noise module): same σ, same cost
    assert exact_settings.model_dump(exclude={"sampler"}) == float_settings.model_dump(exclude={"sampler"})
    stored = float_settings.model_dump(mode="json")
    del stored["sampler"]  # settings stored before the noise layer drew numpy's noise
    assert OUTPUT.load_resolved(stored).sampler == "float"


def test_float_releases_are_the_draws_made_before_the_noise_layer() -> None:
    theta = np.array([0.3, -0.2, 0.1, 0.05, -0.4])
    for noise in ("gaussian", "laplace"):
        r = resolve(noise, "float")
        with using_sampler("exact"):  # the resolved sampler decides, not the one in force
            released = perturb_output(theta, r, np.random.default_rng(5), runs=3)
        rng = np.random.default_rng(5)
        if noise == "gaussian":
            noisy = theta + r.noise_scale * rng.standard_normal((3, DIMENSION))
        else:
            noisy = theta + sample_l2_laplace(DIMENSION, r.noise_scale, rng, 3)
        norms = np.linalg.norm(noisy, axis=1, keepdims=True)
        expected = noisy * np.minimum(1.0, r.minimizer_radius / norms)
        np.testing.assert_array_equal(released, expected)


def test_exact_gaussian_release_is_on_the_lattice_of_its_public_inputs() -> None:
    r = resolve("gaussian", "exact")
    theta = np.array([0.3, -0.2, 0.1, 0.05, -0.4])
    with using_sampler("float"):  # the resolved sampler decides
        released = perturb_output(theta, r, np.random.default_rng(0), runs=200)
    assert np.all(np.linalg.norm(released, axis=1) < r.minimizer_radius)  # no projection: the raw release
    assert on_lattice(released, release_exponent(r))
    float_released = perturb_output(theta, resolve("gaussian", "float"), np.random.default_rng(0), 200)
    assert not on_lattice(float_released, release_exponent(r))
    # the noise has the calibrated scale: sample sd within 10 % of σ·inflation (1000 draws)
    assert np.std(released - theta) == pytest.approx(r.noise_scale, rel=0.1)


def test_exact_laplace_is_the_product_discrete_laplace_of_the_l1_sensitivity_at_the_same_pure_epsilon() -> None:
    float_settings = resolve("laplace", "float")
    exact_settings = resolve("laplace", "exact")
    assert exact_settings.pure_epsilon == float_settings.pure_epsilon
    z = exact_settings.noise_multiplier
    assert exact_settings.noise_scale == pytest.approx(z * math.sqrt(DIMENSION) * exact_settings.sensitivity, rel=1e-15)
    # the default λ balances the larger expected noise norm (×√2 per unit: b√(2d) against d·s): λ ∝ sqrt(K)
    assert exact_settings.l2 / float_settings.l2 == pytest.approx(2.0**0.25, rel=1e-9)
    for r in (float_settings, exact_settings):  # pure ε both ways, ε = 1/z
        cost = OUTPUT.cost(r, META)
        assert cost.pure_epsilon == pytest.approx(r.pure_epsilon, rel=1e-12)
        np.testing.assert_allclose(cost.rdp, pure_dp_rdp(DEFAULT_GRID, epsilon=r.pure_epsilon), rtol=1e-12)
    # the outlook uses the bound b√(2d) of E‖v‖ (capped at 2R*), against d·s for the L2-Laplace vector
    outlook = OUTPUT.outlook(exact_settings, META)
    expected = min(exact_settings.noise_scale * math.sqrt(2 * DIMENSION), 2 * exact_settings.minimizer_radius)
    assert outlook is not None and outlook.noise_norm == pytest.approx(expected, rel=1e-12)
    float_outlook = OUTPUT.outlook(float_settings, META)
    assert float_outlook is not None
    assert float_outlook.noise_norm == pytest.approx(DIMENSION * float_settings.noise_scale, rel=1e-12)
    theta = np.array([0.3, -0.2, 0.1, 0.05, -0.4])
    released = perturb_output(theta, exact_settings, np.random.default_rng(0), runs=400)
    assert np.all(np.linalg.norm(released, axis=1) < exact_settings.minimizer_radius)
    assert on_lattice(released, release_exponent(exact_settings))
    # each coordinate is Laplace of scale b: E|v| = b (2000 draws: the sd of the mean is b/√2000 ≈ 2.2 % of b)
    assert np.mean(np.abs(released - theta)) == pytest.approx(exact_settings.noise_scale, rel=0.1)


def test_explicit_laplace_noise_is_calibrated_to_the_l1_sensitivity_under_exact() -> None:
    params = {"l2": 0.1, "fit_intercept": False, "noise": "laplace", "noise_multiplier": 2.0}
    meta = PublicMetadata(n=1000, d=3, row_norm_bound=1.0, label_bound=1.0)
    with using_sampler("exact"):
        r = OUTPUT.resolve(params, meta)
    assert r.sampler == "exact" and r.pure_epsilon == 0.5
    assert r.noise_scale == pytest.approx(2.0 * math.sqrt(3.0) * r.sensitivity, rel=1e-15)
    np.testing.assert_allclose(OUTPUT.cost(r, meta).rdp, pure_dp_rdp(DEFAULT_GRID, epsilon=0.5), rtol=1e-12)


@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
def test_fit_draws_with_the_resolved_sampler_and_names_it(noise: str) -> None:
    X, y = synthetic(META.n, META.d, 1)
    for resolved_with, running_with in (("exact", "float"), ("float", "exact")):
        r = resolve(noise, resolved_with)
        with using_sampler(running_with):
            result = OUTPUT.fit(X, y, META, r.model_dump(mode="json"), make_generator(3, data_is_public=True))
        assert result.metadata["noise_sampler"] == describe_sampler(resolved_with)  # type: ignore[arg-type]
        assert result.metadata["sampler"] == resolved_with
        theta = np.array([*result.coefficients, result.intercept])
        assert np.linalg.norm(theta) < r.minimizer_radius  # not projected: the raw release
        assert on_lattice(theta, release_exponent(r)) == (resolved_with == "exact")
        assert np.mean(np.sign(X @ theta[:-1] + theta[-1]) == y) > 0.85
    if noise == "gaussian":
        cost = OUTPUT.cost(resolve(noise, "exact"), META)
        r = resolve(noise, "exact")
        np.testing.assert_array_equal(
            cost.rdp, PrivacyCost(gaussian_rdp(DEFAULT_GRID, sigma=r.noise_scale, sensitivity=r.sensitivity)).rdp
        )


def test_objective_perturbation_is_refused_under_the_exact_sampler() -> None:
    params = {"model": "logistic"}
    with using_sampler("exact"), pytest.raises(SolverParameterError, match="continuous density") as refused:
        OBJECTIVE.resolve(params, META, target_epsilon=1.0, delta=1e-6)
    assert refused.value.parameter == "solver" and str(EXACT_SAMPLER_REFUSAL) in str(refused.value)
    assert "noise_sampler is float" in str(refused.value) and "output_perturbation" in str(refused.value)
    with using_sampler("exact"), pytest.raises(SolverParameterError, match="continuous density"):
        OBJECTIVE.plan(params, META, target_epsilon=1.0, delta=1e-6)
    with using_sampler("float"):
        r = OBJECTIVE.resolve(params, META, target_epsilon=1.0, delta=1e-6)
    # a float resolution fits with numpy's draws even on an exact server, and says so
    X, y = synthetic(META.n, META.d, 2)
    with using_sampler("exact"):
        result = OBJECTIVE.fit(X, y, META, r, make_generator(4, data_is_public=True))
    assert result.metadata["noise_sampler"] == describe_sampler("float")
