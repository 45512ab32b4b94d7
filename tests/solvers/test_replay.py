"""Issue 18 part 2: no outcome an analyst can see may depend on the private rows.

For every registered solver (:data:`replay_helpers.SOLVER_CASES`), neighbouring datasets — one row replaced by an
extreme row within the declared bounds, at the first, middle and last position — fitted with the same seed leave
the SAME analyst-visible record: outcome and error fields, the full progress sequence, the number of stop polls,
every random draw (method and public arguments) and the generator state after the fit, and the metadata
(:func:`replay_helpers.replay`). The harness has power: a data-dependent iteration count (an early-stopping
minimiser, as before) and a data-dependent number of draws (a rejection loop until acceptance, as before) are
detected. And the γ attack of the issue on ``examples/loans.csv`` is refused below the public floor and replays
identically at it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from replay_helpers import (
    SOLVER_CASES,
    SolverCase,
    assert_same_record,
    neighbours,
    random_rows,
    replay,
)

import privfit.solvers.baselines.erm as erm_module
import privfit.solvers.baselines.output_perturbation as output_module
import privfit.solvers.baselines.perturbation as perturbation_module
import privfit.solvers.lazy_oco.sampling as sampling_module
from privfit.datasets import parse_and_encode
from privfit.privacy import make_generator
from privfit.solvers import PublicMetadata, SolverParameterError, get_solver, solver_names
from privfit.solvers.base import FitResult, ProgressReporter
from privfit.solvers.baselines.erm import ERMSolution
from privfit.solvers.baselines.output_perturbation import perturb_output
from privfit.solvers.lazy_oco.pcomw import GibbsSamplingPlan, PcomwConfig, mean_estimation_loss_stream, run_pcomw_tg
from privfit.solvers.lazy_oco.sampling import TruncatedGaussianSampler

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_every_registered_solver_has_a_case() -> None:
    assert {case.solver for case in SOLVER_CASES} == set(solver_names())


@pytest.mark.parametrize("case", SOLVER_CASES, ids=lambda case: case.id)
def test_neighbours_leave_the_same_analyst_visible_record(case: SolverCase) -> None:
    solver, resolved, meta = get_solver(case.solver), case.resolve(), case.meta()
    for seed in (1, 2):
        for label, X, y, X2, y2 in neighbours(case.n, case.d, seed=10 + seed):
            first = replay(solver, resolved, meta, X, y, seed)
            second = replay(solver, resolved, meta, X2, y2, seed)
            assert first.outcome == "succeeded", first.error
            # the comparison is not vacuous: the fit reported progress, polled for a stop and drew noise
            assert first.progress[-1] == 1.0 and first.polls > 0 and first.draws
            assert_same_record(first, second, f"{case.id}, {label}, seed {seed}")


def test_the_sampler_takes_the_same_draws_on_both_paths_whatever_the_target(monkeypatch) -> None:
    """dp_lazy_oco with the reduction path forced (the public plan picks the naive path at these settings):
    neighbours still leave the same record, so the reduction's fixed proposal count is exercised too."""
    monkeypatch.setattr(sampling_module, "NAIVE_MAX_NORMALS", 0)
    case = SolverCase("dp_lazy_oco", {"model": "mean"}, n=400)
    resolved = case.resolve()
    assert resolved.sampler_path == "reduction"
    solver, meta = get_solver(case.solver), case.meta()
    for label, X, y, X2, y2 in neighbours(case.n, case.d, seed=3):
        assert_same_record(replay(solver, resolved, meta, X, y, 5), replay(solver, resolved, meta, X2, y2, 5), label)


# --- the harness has power -----------------------------------------------------------------------------------
def early_stopping_minimiser(X, y, problem, tolerance, *, linear_term=None, reporter=None) -> ERMSolution:  # type: ignore[no-untyped-def]
    """The shape of the old minimiser: iterate (here: plain gradient steps) UNTIL the gradient is small."""
    theta = np.zeros(problem.dimension) if linear_term is None else -linear_term / (problem.n * problem.l2)
    b_over_n = 0.0 if linear_term is None else linear_term / problem.n
    step = 1.0 / (problem.smoothness + problem.l2)
    for iteration in range(100_000):
        if reporter is not None:
            reporter.check_stop(iteration)
        gradient = problem.loss.mean_gradient(theta, X, y) + problem.l2 * theta + b_over_n
        if np.linalg.norm(gradient) <= tolerance / 2:
            break
        theta = theta - step * gradient
    return ERMSolution(theta, float(np.linalg.norm(gradient)), tolerance, iteration, True)


def test_the_harness_detects_a_data_dependent_iteration_count(monkeypatch) -> None:
    def solve_until_small(design, labels, problem, resolved, reporter, linear_term=None, one_hot_blocks=()):  # type: ignore[no-untyped-def]
        return early_stopping_minimiser(design, labels, problem, resolved.gradient_tolerance, linear_term=linear_term,
                                        reporter=reporter)  # fmt: skip

    monkeypatch.setattr(output_module, "solve_certified", solve_until_small)
    case = SolverCase("output_perturbation", {"model": "logistic"})
    solver, resolved, meta = get_solver(case.solver), case.resolve(), case.meta()
    detected = [
        replay(solver, resolved, meta, X, y, 1).differences(replay(solver, resolved, meta, X2, y2, 1))
        for _, X, y, X2, y2 in neighbours(case.n, case.d, seed=11)
    ]
    assert any("polls" in fields for fields in detected), detected


class StrongGibbsPass:
    """P-COMW on mean-estimation losses with a small λ and β, so that the Gibbs means move by O(1) with one row
    and the Gibbs measures are wide (the solver's calibrated λ makes the means move by ~1e-3): a demanding test of
    the fixed-proposal sampler."""

    beta, lam, radius, cap = 0.5, 0.5, 1.0, 60

    def fit(self, X, y, meta, resolved, rng, progress=None, should_stop=None):  # type: ignore[no-untyped-def]
        plan = GibbsSamplingPlan.public(
            dimension=meta.d, radius=self.radius, clip_norm=1.0, curvature=1.0, beta=self.beta, lam=self.lam,
            horizon=meta.n, switch_cap=self.cap, log_failure_budget=-40.0 * math.log(2.0),
        )  # fmt: skip
        config = PcomwConfig(beta=self.beta, lam=self.lam, p=0.3, log_phi=0.5, switch_cap=self.cap)
        run = run_pcomw_tg(mean_estimation_loss_stream(X, 1.0), config, self.radius, rng,
                           reporter=ProgressReporter(meta.n, progress, should_stop), plan=plan)  # fmt: skip
        return FitResult("toy", "mean", run.average_iterate.tolist(), None)


def strong_gibbs_records() -> list[list[str]]:
    meta, toy = PublicMetadata(n=200, d=3, row_norm_bound=1.0), StrongGibbsPass()
    return [
        replay(toy, None, meta, X, y, seed).differences(replay(toy, None, meta, X2, y2, seed))
        for seed in (1, 2) for _, X, y, X2, y2 in neighbours(meta.n, meta.d, seed=12)
    ]  # fmt: skip


def test_the_fixed_proposal_sampler_replays_even_when_the_gibbs_means_move() -> None:
    assert strong_gibbs_records() == [[]] * 6


def test_the_harness_detects_a_data_dependent_number_of_draws(monkeypatch) -> None:
    """The shape of the old truncated-Gaussian sampler: propose until one lands in the ball."""

    def until_accepted(self, mean, sigma, size, rng):  # type: ignore[no-untyped-def]
        while True:
            x = mean + sigma * rng.standard_normal((1, self.dimension))
            if float(np.linalg.norm(x)) <= self.radius:
                return x, np.ones(1, dtype=bool)

    monkeypatch.setattr(TruncatedGaussianSampler, "draw", until_accepted)
    detected = strong_gibbs_records()
    assert any("draws" in fields and "generator_state" in fields for fields in detected), detected


# --- the perturbation solvers' guard --------------------------------------------------------------------------
def test_a_failed_certificate_releases_noise_around_zero_with_the_record_of_a_success(monkeypatch) -> None:
    """The guard for the case the proof excludes: same status, progress, polls, draws and metadata as a success;
    the release is the same noise around the public point 0."""
    case = SolverCase("output_perturbation", {"model": "logistic"})
    solver, resolved, meta = get_solver(case.solver), case.resolve(), case.meta()
    X, y = random_rows(case.n, case.d, seed=13)
    honest = replay(solver, resolved, meta, X, y, 4)
    real = erm_module._gradient_sum
    calls = iter(range(10**9))
    monkeypatch.setattr(erm_module, "_gradient_sum", lambda *args: real(*args) + 1e-3 * (-1) ** next(calls))
    broken = replay(solver, resolved, meta, X, y, 4)
    assert_same_record(honest, broken, "a failed certificate")
    released = solver.fit(X, y, meta, resolved, make_generator(4, data_is_public=True))
    expected = perturb_output(np.zeros(case.d + 1), resolved, make_generator(4, data_is_public=True))[0]
    np.testing.assert_array_equal([*released.coefficients, released.intercept], expected)


# --- the γ attack of the issue, on examples/loans.csv ----------------------------------------------------------
def loans_and_a_neighbour() -> tuple[object, object]:
    """examples/loans.csv and the same file with its first row replaced by a row at every declared bound."""
    schema = json.loads((EXAMPLES / "loans-schema.json").read_text())
    lines = (EXAMPLES / "loans.csv").read_bytes().splitlines(keepends=True)
    neighbour = b"".join([lines[0], b"90,250000,1,retired,yes\n", *lines[2:]])
    return parse_and_encode(b"".join(lines), schema), parse_and_encode(neighbour, schema)


@pytest.mark.parametrize("name", ["output_perturbation", "objective_perturbation"])
def test_the_gamma_attack_on_loans_is_refused_below_the_floor_and_replays_identically_at_it(name, monkeypatch) -> None:
    dataset, neighbour = loans_and_a_neighbour()
    meta = PublicMetadata.from_dataset(dataset)
    assert PublicMetadata.from_dataset(neighbour) == meta and not np.array_equal(dataset.X, neighbour.X)
    solver = get_solver(name)
    # the attack's γ ≈ 3e-12 is below the public floor: refused before any row is read, the floor in the message
    with pytest.raises(SolverParameterError) as refused:
        solver.resolve({"gradient_tolerance": 3e-12}, meta, target_epsilon=1.0, delta=1e-6)
    floor = solver.resolve({}, meta, target_epsilon=1.0, delta=1e-6).gradient_tolerance_floor
    assert refused.value.parameter == "gradient_tolerance" and f"{floor:.6g}" in str(refused.value)
    assert floor > 3e-12
    # at the smallest γ allowed, both neighbours succeed with the same record on every seed, and the guard
    # never fires (the certificate holds on both)
    resolved = solver.resolve({"gradient_tolerance": floor}, meta, target_epsilon=1.0, delta=1e-6)
    certificates: list[bool] = []
    real = perturbation_module.minimize_regularized_glm

    def recording(*args, **kwargs):  # type: ignore[no-untyped-def]
        solution = real(*args, **kwargs)
        certificates.append(solution.certified)
        return solution

    monkeypatch.setattr(perturbation_module, "minimize_regularized_glm", recording)
    for seed in (1, 2, 3):
        first = replay(solver, resolved, meta, dataset.X, dataset.y, seed)
        second = replay(solver, resolved, meta, neighbour.X, neighbour.y, seed)
        assert first.outcome == "succeeded", first.error
        assert_same_record(first, second, f"loans, seed {seed}")
    assert certificates == [True] * 6
    assert math.isfinite(resolved.minimiser_steps) and resolved.minimiser_steps > 0
