"""The fixed-work exact sampler of ``dp_lazy_oco`` (issue 18 part 2): the public acceptance bound its δ charge rests
on, the compiled incomplete gamma behind it, the guard of a failed draw, and the plan's δ.

The exactness of the accepted draws is tested in ``test_lazy_oco.py`` (marginals against 1-D integrals, naive
against reduction); here: every rejection stage accepts a proposal with probability ≥ 1/4
(:data:`~privfit.solvers.lazy_oco.sampling.LOG_CONCAVE_ACCEPTANCE`, proof ≥ 1/(1 + e) ≈ 0.269) on targets across the
validated range, which is what bounds P(a draw fails) by stages × (3/4)^M from public quantities.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special

import privfit.solvers.lazy_oco.sampling as sampling
from privfit.solvers import PublicMetadata, get_solver
from privfit.solvers.lazy_oco.pcomw import GibbsSamplingPlan

TRIALS = 20_000
#: 5 standard errors of a proportion near 1/4 at TRIALS: the acceptance must exceed 1/4 by a clear margin.
MARGIN = 5.0 * math.sqrt(0.25 * 0.75 / TRIALS)


@pytest.mark.parametrize(
    ("a", "x"),
    [(0.5, 1e-300), (0.5, 1e-8), (1.0, 0.3), (1.5, 2.0), (5.0, 1e-20), (50.0, 49.0), (50.0, 51.5), (499.5, 400.0),
     (499.5, 499.5), (499.5, 600.0), (3.0, 1e4), (0.5, 700.0)],
)  # fmt: skip
def test_compiled_log_incomplete_gamma_matches_scipy(a: float, x: float) -> None:
    expected = math.log(special.gammainc(a, x)) if special.gammainc(a, x) > 1e-280 else None
    value = sampling._log_gamma_p(a, x)
    if expected is None:  # scipy underflows: the series in log space (log_chi2_cdf's own fallback)
        expected = float(sampling.log_chi2_cdf(np.array([2 * x]), round(2 * a))[0])
        assert value == pytest.approx(expected, rel=1e-10)
    else:
        assert value == pytest.approx(expected, rel=1e-10, abs=1e-14)


def one_proposal_acceptance(kind: int, p0: float, p1: float, R: float, k: float, lo: float, hi: float) -> float:
    """The fraction of single-proposal draws that succeed: the acceptance probability of one proposal."""
    rng = np.random.default_rng(17)
    full = np.ones(TRIALS)
    _, ok = sampling._draw_log_concave(kind, p0 * full, p1 * full, R, k, lo * full, hi * full,
                                       rng.random((1, 3, TRIALS)))  # fmt: skip
    return float(ok.mean())


@pytest.mark.parametrize(
    ("nu", "sigma", "d"),
    [(0.0, 1e-3, 2), (1e3, 1e-3, 2), (1e3, 1e-3, 1000), (0.999, 1e-3, 50), (0.5, 1.0, 10), (0.0, 100.0, 3),
     (2.0, 0.3, 50), (30.0, 0.05, 5)],
)  # fmt: skip
def test_the_projection_stage_accepts_with_probability_at_least_a_quarter(nu: float, sigma: float, d: int) -> None:
    acceptance = one_proposal_acceptance(sampling._PROJECTION, nu, sigma, 1.0, d - 1.0, -1.0, 1.0)
    assert acceptance >= sampling.LOG_CONCAVE_ACCEPTANCE + MARGIN, acceptance


@pytest.mark.parametrize(
    ("k", "w"), [(2, 0.01), (2, 50.0), (3, 1e-6), (3, 1.0), (10, 8.0), (999, 1.0), (999, 500.0), (999, 997.0),
                 (999, 5000.0)],
)  # fmt: skip
def test_the_chi_square_stage_accepts_with_probability_at_least_a_quarter(k: int, w: float) -> None:
    acceptance = one_proposal_acceptance(sampling._CHI_SQUARE, 1.0, 1.0, 1.0, float(k), 0.0, w)
    assert acceptance >= sampling.LOG_CONCAVE_ACCEPTANCE + MARGIN, acceptance


@pytest.mark.parametrize(("mu", "sigma", "lo", "hi"), [(0.0, 1.0, -1e-3, 1e-3), (5.0, 0.1, -1.0, 1.0),
                                                       (0.0, 1.0, -3.0, 3.0), (-40.0, 2.0, -1.0, 1.0)])  # fmt: skip
def test_the_gaussian_stage_accepts_with_probability_at_least_a_quarter(mu, sigma, lo, hi) -> None:  # type: ignore[no-untyped-def]
    acceptance = one_proposal_acceptance(sampling._GAUSSIAN, mu, sigma, 1.0, 1.0, lo, hi)
    assert acceptance >= sampling.LOG_CONCAVE_ACCEPTANCE + MARGIN, acceptance


@pytest.mark.parametrize("path", ["naive", "reduction"])
def test_a_failed_draw_is_the_public_point_and_takes_the_same_random_numbers(path: str) -> None:
    """A target the proposals (almost) never hit fails; it returns 0 with ok False, after exactly the draws of a
    success (the generator ends in the same state)."""
    sampler = sampling.TruncatedGaussianSampler(3, 1.0, path, 1, 0.999)  # type: ignore[arg-type]
    far, near = np.array([60.0, 0.0, 0.0]), np.zeros(3)
    failed_rng, fine_rng = np.random.default_rng(3), np.random.default_rng(3)
    failed = [sampler.draw(far, 0.01 if path == "naive" else 1e-3, 1, failed_rng) for _ in range(20)]
    fine = [sampler.draw(near, 0.3, 1, fine_rng) for _ in range(20)]
    if path == "naive":
        assert not any(ok[0] for _, ok in failed)
        assert all(np.array_equal(x[0], np.zeros(3)) for x, _ in failed)
    assert any(ok[0] for _, ok in fine)
    assert failed_rng.bit_generator.state == fine_rng.bit_generator.state


@pytest.mark.parametrize("model", ["mean", "linear_loss"])
@pytest.mark.parametrize("epsilon", [0.1, 1.0, 10.0])
def test_the_solver_charges_the_plans_failure_probability_within_its_share(model: str, epsilon: float) -> None:
    meta = PublicMetadata(n=5_000, d=4, row_norm_bound=1.0)
    solver = get_solver("dp_lazy_oco")
    r = solver.resolve({"model": model}, meta, target_epsilon=epsilon, delta=1e-6)
    plan = GibbsSamplingPlan.public(
        dimension=r.dimension, radius=r.radius, clip_norm=r.clip_norm, curvature=1.0 if model == "mean" else 0.0,
        beta=r.beta, lam=r.lam, horizon=r.n, switch_cap=r.switch_cap, log_failure_budget=0.0,
    )  # fmt: skip
    assert plan.units == min(r.switch_cap, r.n)
    # the stored settings are the public plan's, and the charge is (1 + e^ε)·(U + 1)·(per-draw bound)
    per_draw = math.exp(math.log(plan.sampler.stages) + r.sampler_proposals * math.log(plan.sampler.proposal_failure))
    expected = (1.0 + math.exp(r.paper_epsilon)) * (plan.units + 1) * per_draw
    assert r.sampler_delta == pytest.approx(expected, rel=1e-9)
    assert 0.0 < r.sampler_delta <= 2.0**-20 * 1e-6 / 2
    assert solver.cost(r, meta).extra_delta == r.paper_delta + r.sampler_delta
