r"""Empirical privacy audit of ``resque_dpsgd`` (spec ``seed-004-resque.md`` §6.2 and §8 "Empirical privacy audit",
including the "last-iterate Gaussian check"): distinguishing tests on replace-one neighbours, with σ exactly as
:meth:`ReSQueDPSGD.resolve` calibrates it (target ε = 1 at δ = 1e-5, claim = the resolved ``epsilon``), runs of the
solver's own loop :func:`privfit.solvers.resque.dpsgd.resque_dp_sgd` (``runs=``: independent batches, ξ and noise).
:func:`privfit.privacy.audit.epsilon_lower_bound` (Clopper–Pearson 95 %, Bonferroni over thresholds, both tails)
turns the released values of D and D' into a lower bound ε_lb, which must stay below the claim for the correct
mechanism and exceed it for a broken one. Black box: the statistic is the released θ itself (``output="last"``,
η = 1, so it is the sum of the increments).

Canaries. Loss ``absolute`` (subgradient sign(⟨x, θ + ξ⟩ − y)·x), no intercept, radius R = 10⁶ (never reached:
asserted). A canary row is (x, y = ±10⁶): whatever θ, ξ and the weights, its subgradient is ∓x, so after clipping
at C ≤ ‖x‖ its contribution to every batch sum it enters is ∓C·x/‖x‖ exactly — the worst case of the replace-one
sensitivity 2C at every step. D has y = +10⁶, D' has y = −10⁶.

Orthogonal canaries (the m = 1 instances). ``resque_dp_sgd`` loops over the runs in Python (≈ 60–100 µs per run and
step on this machine), so the 4·10⁵ one-canary runs per world that make a one-step audit tight would take ≈ 50 s.
Instead row j is the canary (e_j, ±10⁶) for j = 1..k, d = k: each run yields k samples. This is valid because with
m = 1 (w ≡ 1) coordinate j of the release depends only on row j's label, row j's batch memberships and coordinate j
of the noise; the noise is isotropic, memberships are deterministic (full batch) or independent across rows
(Poisson), C = ‖x_j‖ = 1 so clipping changes no row, and the B(R) projection never acts. So (i) coordinate j under
D' = (all labels −) has the law it has under D^{(j)} = D with only row j flipped, and (D, D^{(j)}) are replace-one
neighbours: the claim bounds every test on coordinate j; (ii) the k coordinates of a run are independent and
identically distributed, so the pooled samples are i.i.d. as Clopper–Pearson needs. The claim does not depend on d
(σ is set by q, T and C only), so the k-canary instance carries the same claim as n = m_b = 2.

The one-step instance (n = m_b = k = 64, one epoch, T = 1, q = 1; every sampling mode is one Gaussian mechanism of
sensitivity 2C) is the spec's last-iterate Gaussian check: each released coordinate is exactly N(±η C/m_b,
(η σ/m_b)²), which the test checks (mean, standard deviation, Kolmogorov–Smirnov) — this pins the σ/C plumbing
from ``resolve`` through the loop — and the exact ε of that Gaussian (Balle & Wang's privacy profile, μ = 2C/σ) is
computed: ε_lb ≤ ε_exact ≤ claim. The ReSQue instance with block_length > 1 cannot use orthogonal canaries: the
weights w_i = exp((2⟨θ − x̄, ξ_i⟩ − ‖θ − x̄‖²)/(2ρ²)) couple all coordinates through θ − x̄. It is 1-dimensional
(n = m_b = 2: the canary (1, ±10⁶) and a zero row; q = 1, T = 2, one block m = 2, so the second step is
reweighted), C = 1/4 < ‖x‖ = 1, ρ = 16 (ρ/4 ≈ 2 standard deviations of the release). With the projection onto
B_x̄(ρ/4), log w ~ N(−‖v‖²/(2ρ²), ‖v‖²/ρ²) with ‖v‖ = ‖θ − x̄‖ ≤ ρ/4, so w < 1/4 would need a 5.4-standard-deviation
ξ: every clipped weighted subgradient is exactly ∓C, while w·∂f itself exceeds ‖x‖ whenever w > 1 (a spy on the
weights asserts both on the runs audited).

Measured (seeds fixed below); claims: the resolved ε = 0.99999973 (one step; ReSQue instance) and 0.99999965 (ten
Poisson steps):

* one step, 64 canaries × 6250 runs = 4·10⁵ samples per world: poisson 0.543, shuffle 0.541, fixed_size 0.541
  (shuffle and fixed_size coincide: with q = 1 both draw the same full-batch permutations), all ≤ ε_exact = 0.915
  ≤ claim. Tight: a perfect audit on 4·10⁵ samples of the exact Gaussian reaches ≈ 0.56. Standardised releases:
  mean 0.001, standard deviation 1.001–1.002, KS p-value 0.43–0.53 (world D).
* broken (ii), noise the solver calibrates for clip norm C/2, i.e. for sensitivity C instead of 2C, while clipping
  at C (σ halved; its ε_exact is 1.97): poisson 1.271, shuffle 1.267 > 1. DETECTED.
* ten Poisson steps (n = 100 canaries, m_b = 10: q = 0.1, T = 10, the (q, T) of n = 10, m_b = 1), 2000 runs =
  2·10⁵ samples per world: 0.409 ≤ claim and not vacuous.
* ReSQue, block_length 2, correct build, 15 000 runs per world: 0.264 ≤ claim (lower than the one-step bound: fewer
  samples, and the B_x̄(ρ/4) projection truncates the release's tails); weights seen in [0.50, 1.97].
* broken (i), the clip of the WEIGHTED subgradients removed (the loop's ``clipped_scaled_row_sum`` replaced by the
  plain sum; ``project_step``'s ``clip_rows`` with R and ρ/4 kept intact), same instance and runs: 1.795 > 1.
  DETECTED.
* exact sampler (the one-step poisson instance resolved and drawn under it: the lattice Gaussian), 4·10⁵ samples
  per world: 0.525 ≤ ε_exact 0.915; σ for sensitivity C: 1.249 > 1, DETECTED.

The whole module runs in ≈ 15–27 s on 2 cores (shared machine): ≈ 1.5–2 s per one-step case, 4.4 s for ten steps,
2–7 s per ReSQue case.

What is not detectable, and why. Variant (i) is detected because C < ‖∂f‖ = 1: without the clip the canary
contributes ∓w·4C; it would be detected with m = 1 too. The purely ReSQue failure — C ≥ L (e.g. the default C = 2L
for m > 1, so that the clip only ever acts through the weights) and the clip dropped — is NOT detectable at ε = 1
with an affordable number of runs of this loop: (a) with the B_x̄(ρ/4) projection, log w has standard deviation
≤ 1/4 whatever ρ and η (the law of w depends on ‖θ − x̄‖/ρ only, so w cannot be made "often ≫ 1"): P(w > 2) ≈ 2·10⁻³
and P(w > 3) ≈ 3·10⁻⁶, an excess over the 2C sensitivity of at most ≈ 1.5× on a 10⁻³ event; (b) even without
the projection (what making ``clip_rows`` the identity everywhere in the module does), E w = 1 and, with
a = ‖θ − x̄‖/ρ, P(w > K) = Φ̄(ln K/a + a/2) ≤ Φ̄(√(2 ln K)) for every a. At ε = 1 the noise is σ ≈ 11.4 C per step
(q = 1, T = 2), σ√2 ≈ 32 L on the release for C = 2L, so a contribution w·L must reach ≈ 100 L to stand out: w > 100, of
probability ≤ Φ̄(3.03) ≈ 1.2·10⁻³ per step — a δ-scale violation that takes ≳ 10⁵–10⁶ runs (minutes of this
loop) to resolve. Measured at 2·10⁴ runs per world (C = 2, T = 2, one block): clip alone removed = correct build
(0.04, on a heavily truncated instance); clip and projections removed 0.08 (ρ = σ/2) and 0.05 (ρ = σ/6), max |θ|
≈ 1.5·10³ (w of order 10³): huge but rare weights, far below the claim. Also not audited here: the batch samplers
and their accountants (shared with ``dp_sgd``: ``test_dp_sgd_audit.py``) and the cost's equality with
dp_accounting's curves (``test_resque_dpsgd.py``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import optimize, stats

import privfit.solvers.resque.dpsgd as resque_dpsgd_module
from privfit.privacy import make_generator
from privfit.privacy.audit import epsilon_lower_bound
from privfit.privacy.noise import using_sampler
from privfit.solvers import PublicMetadata, get_solver
from privfit.solvers.resque.dpsgd import ReSQueDPSGDResolved, resque_dp_sgd
from privfit.solvers.resque.estimator import log_resque_weights, make_margin_loss

FloatArray = NDArray[np.float64]

SOLVER = get_solver("resque_dpsgd")
EPSILON, DELTA = 1.0, 1e-5
LOSS = make_margin_loss("absolute")
LABEL = 1e6  # |y| ≫ |⟨x, θ + ξ⟩|: the canary's subgradient is −sign(y)·x whatever θ and ξ
RADIUS = 1e6  # never reached (asserted)
SEED_D, SEED_D_PRIME = 1, 2

ONE_STEP_CANARIES, ONE_STEP_RUNS = 64, 6250  # 4·10⁵ samples per world
MULTI_STEP_CANARIES, MULTI_STEP_BATCH, MULTI_STEP_RUNS = 100, 10, 2000  # q = 0.1, T = 10; 2·10⁵ samples
RESQUE_CLIP, RESQUE_SMOOTHING, RESQUE_RUNS = 0.25, 16.0, 15_000


def resolve(
    sampling: str,
    *,
    n: int,
    d: int,
    batch_size: int,
    epochs: int = 1,
    clip_norm: float = 1.0,
    block_length: int = 1,
    smoothing: float = 1.0,
) -> ReSQueDPSGDResolved:
    """The solver's own resolution of an audit instance (σ calibrated to ε = 1 at δ = 1e-5)."""
    params = {"model": "absolute", "fit_intercept": False, "radius": RADIUS, "clip_norm": clip_norm, "step_size": 1.0,
              "batch_size": batch_size, "epochs": epochs, "sampling": sampling, "output": "last",
              "smoothing": smoothing, "block_length": block_length}  # fmt: skip
    meta = PublicMetadata(n=n, d=d, row_norm_bound=1.0, label_bound=LABEL)
    resolved = SOLVER.resolve(params, meta, target_epsilon=EPSILON, delta=DELTA)
    assert isinstance(resolved, ReSQueDPSGDResolved)
    assert resolved.clip_norm == clip_norm and resolved.epsilon is not None and resolved.epsilon <= EPSILON
    return resolved


def release(
    resolved: ReSQueDPSGDResolved, X: FloatArray, y: FloatArray, sigma: float, seed: int, runs: int
) -> FloatArray:
    """The released θ of ``runs`` independent runs of the solver's loop, shape (runs, d)."""
    theta = resque_dp_sgd(
        X, y, loss=LOSS, smoothing=resolved.smoothing, block_length=resolved.block_length,
        clip_norm=resolved.clip_norm, sigma=sigma, batch_size=resolved.batch_size, sampling=resolved.sampling,
        epochs=resolved.epochs, step_size=resolved.step_size, radius=resolved.radius,
        rng=make_generator(seed, data_is_public=True), output=resolved.output, runs=runs,
    )  # fmt: skip
    assert theta.shape == (runs, X.shape[1])
    assert np.linalg.norm(theta, axis=1).max() < resolved.radius  # the B(R) projection never acted
    return theta


def canary_samples(resolved: ReSQueDPSGDResolved, sigma: float, sign: float, seed: int, runs: int) -> FloatArray:
    """Orthogonal canaries (e_j, sign·10⁶), j = 1..n = d: the pooled coordinates of every run's release."""
    assert resolved.n == resolved.d and resolved.block_length == 1
    X = np.eye(resolved.n)
    y = np.full(resolved.n, sign * LABEL)
    return release(resolved, X, y, sigma, seed, runs).ravel()


def canary_audit(resolved: ReSQueDPSGDResolved, sigma: float, runs: int) -> tuple[float, FloatArray, FloatArray]:
    """ε_lb of D (labels +) against D' (labels −), with the samples of both worlds."""
    on_d = canary_samples(resolved, sigma, +1.0, SEED_D, runs)
    on_d_prime = canary_samples(resolved, sigma, -1.0, SEED_D_PRIME, runs)
    return epsilon_lower_bound(on_d, on_d_prime, delta=DELTA).epsilon_lower_bound, on_d, on_d_prime


def gaussian_epsilon(mu: float, delta: float) -> float:
    """The exact ε at δ of the Gaussian mechanism N(0, 1) vs N(μ, 1): the root of
    Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) = δ (Balle & Wang 2018, Thm. 8)."""

    def excess(eps: float) -> float:
        return float(stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)) - delta

    return float(optimize.brentq(excess, 0.0, 100.0, xtol=1e-12))


def one_step(sampling: str, clip_norm: float = 1.0) -> ReSQueDPSGDResolved:
    k = ONE_STEP_CANARIES
    resolved = resolve(sampling, n=k, d=k, batch_size=k, clip_norm=clip_norm)
    assert resolved.steps == 1 and resolved.sampling_rate == 1.0
    return resolved


# ---------------------------------------------------------------------------------------------------------
# m = 1: one full-batch step (the last-iterate Gaussian check) and ten Poisson steps
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sampling", ["poisson", "shuffle", "fixed_size"])
def test_one_full_batch_step_is_the_claimed_gaussian_and_the_audit_is_tight(sampling: str) -> None:
    """n = m_b, T = 1, q = 1: each released coordinate is N(±ηC/m_b, (ησ/m_b)²) with the resolved σ, and the
    audit comes close to that Gaussian's exact ε, which is below the claim."""
    resolved = one_step(sampling)
    claimed = resolved.epsilon
    assert claimed is not None
    bound, on_d, on_d_prime = canary_audit(resolved, resolved.sigma, ONE_STEP_RUNS)
    # The σ/C plumbing: standardised, both worlds are N(0, 1) (the canary moves θ by +ηC/m_b in D, −ηC/m_b in D').
    scale = resolved.step_size / resolved.batch_size
    for samples, sign in ((on_d, +1.0), (on_d_prime, -1.0)):
        z = (samples / scale - sign * resolved.clip_norm) / resolved.sigma
        assert abs(z.mean()) < 5 / math.sqrt(z.size)
        assert abs(z.std() - 1.0) < 5 / math.sqrt(2 * z.size)
        assert stats.kstest(z, "norm").pvalue > 1e-3
    exact = gaussian_epsilon(2 * resolved.clip_norm / resolved.sigma, DELTA)
    assert 0.85 < exact <= claimed  # the RDP conversion is conservative, but not grossly
    assert 0.45 < bound <= exact, (bound, exact)


@pytest.mark.parametrize("sampling", ["poisson", "shuffle"])
def test_noise_for_sensitivity_c_instead_of_2c_is_detected(sampling: str) -> None:
    """The add/remove mistake: σ calibrated (by the solver's own accountant) for clip norm C/2, i.e. for
    sensitivity C, while rows are clipped at C — σ halved on the one-step instance."""
    resolved = one_step(sampling)
    claimed = resolved.epsilon
    assert claimed is not None
    broken_sigma = one_step(sampling, clip_norm=resolved.clip_norm / 2).sigma
    assert broken_sigma == pytest.approx(resolved.sigma / 2, rel=1e-6)
    bound, _, _ = canary_audit(resolved, broken_sigma, ONE_STEP_RUNS)
    assert bound > claimed + 0.2, bound


def test_ten_poisson_steps_stay_below_their_claim() -> None:
    """q = 0.1, T = 10 (one epoch of 100 rows in expected batches of 10), every row a canary."""
    k = MULTI_STEP_CANARIES
    resolved = resolve("poisson", n=k, d=k, batch_size=MULTI_STEP_BATCH)
    assert resolved.steps == 10 and resolved.sampling_rate == 0.1
    claimed = resolved.epsilon
    assert claimed is not None
    bound, _, _ = canary_audit(resolved, resolved.sigma, MULTI_STEP_RUNS)
    assert 0.2 < bound <= claimed, bound  # the instance leaks: the audit is not vacuous


@pytest.mark.parametrize("variant", ["calibrated", "noise for sensitivity C"])
def test_one_full_batch_step_audit_holds_with_the_exact_sampler(variant: str) -> None:
    """The one-step instance with the plan resolved and the noisy sums drawn by the exact sampler (the lattice
    Gaussian of privfit.privacy.noise: one vectorised draw of 64 × 6250 coordinates): the calibrated release stays
    below the exact Gaussian's ε (≤ claim), and σ calibrated for sensitivity C is still detected."""
    with using_sampler("exact"):
        resolved = one_step("poisson")
        sigma = (
            resolved.sigma if variant == "calibrated" else one_step("poisson", clip_norm=resolved.clip_norm / 2).sigma
        )
        bound, _, _ = canary_audit(resolved, sigma, ONE_STEP_RUNS)
    claimed = resolved.epsilon
    assert claimed is not None
    if variant == "calibrated":
        exact = gaussian_epsilon(2 * resolved.clip_norm / resolved.sigma, DELTA)
        assert 0.45 < bound <= exact <= claimed, (bound, exact)
    else:
        assert bound > claimed + 0.2, bound


# ---------------------------------------------------------------------------------------------------------
# block_length > 1: the clipped WEIGHTED subgradients
# ---------------------------------------------------------------------------------------------------------


class WeightSpy:
    """Wraps :func:`log_resque_weights` as the solver calls it, recording the range of the weights (observation
    only: the returned values are the real ones)."""

    def __init__(self) -> None:
        self.low = math.inf
        self.high = -math.inf

    def __call__(self, v: FloatArray, xi: FloatArray, rho: float) -> FloatArray:
        out = log_resque_weights(v, xi, rho)
        if out.size:
            self.low = min(self.low, float(np.exp(out.min())))
            self.high = max(self.high, float(np.exp(out.max())))
        return out


def resque_instance() -> ReSQueDPSGDResolved:
    """n = m_b = 2 (q = 1), T = 2 in one block of m = 2: the second step is reweighted; C = 1/4 < ‖x‖ = 1."""
    resolved = resolve("poisson", n=2, d=1, batch_size=2, epochs=2, clip_norm=RESQUE_CLIP, block_length=2,
                       smoothing=RESQUE_SMOOTHING)  # fmt: skip
    assert resolved.steps == 2 and resolved.sampling_rate == 1.0
    # ρ/4 is about two standard deviations of the release: the local projection rarely truncates it.
    local_radius_in_release_sds = (RESQUE_SMOOTHING / 4) / (resolved.sigma / math.sqrt(2))
    assert abs(local_radius_in_release_sds - 2.0) < 0.5  # between 1.5 and 2.5 release standard deviations
    # The per-example clip is recognisable by its threshold: the projections use R and ρ/4.
    assert len({resolved.clip_norm, resolved.radius, RESQUE_SMOOTHING / 4}) == 3
    return resolved


def resque_audit(resolved: ReSQueDPSGDResolved, monkeypatch: pytest.MonkeyPatch) -> tuple[float, WeightSpy]:
    spy = WeightSpy()
    monkeypatch.setattr(resque_dpsgd_module, "log_resque_weights", spy)
    X = np.array([[1.0], [0.0]])  # the canary and a zero row (subgradient 0)
    samples = [
        release(resolved, X, np.array([sign * LABEL, 0.0]), resolved.sigma, seed, RESQUE_RUNS)[:, 0]
        for sign, seed in ((+1.0, SEED_D), (-1.0, SEED_D_PRIME))
    ]
    return epsilon_lower_bound(samples[0], samples[1], delta=DELTA).epsilon_lower_bound, spy


def test_resque_weighted_and_clipped_build_stays_below_its_claim(monkeypatch: pytest.MonkeyPatch) -> None:
    resolved = resque_instance()
    claimed = resolved.epsilon
    assert claimed is not None
    bound, spy = resque_audit(resolved, monkeypatch)
    assert spy.high > 1.5  # weights above 1 occurred: clipping w·∂f, not ∂f, is what bounds the contribution
    assert spy.low > resolved.clip_norm  # every w·‖x‖ > C (‖x‖ = 1): each contribution was exactly ∓C
    assert 0.15 < bound <= claimed, bound


def test_unclipped_weighted_subgradients_are_detected(monkeypatch: pytest.MonkeyPatch) -> None:
    """Broken variant (i): the per-example clip of the weighted subgradients removed (the loop's clipped sum
    replaced by the plain sum Σ s_i x_i; the projections unchanged)."""
    resolved = resque_instance()
    claimed = resolved.epsilon
    assert claimed is not None

    def unclipped_sum(X: FloatArray, scales: FloatArray, C: float, *, norms: FloatArray | None = None) -> FloatArray:
        return np.asarray(np.asarray(scales, dtype=np.float64) @ X, dtype=np.float64)

    monkeypatch.setattr(resque_dpsgd_module, "clipped_scaled_row_sum", unclipped_sum)
    bound, spy = resque_audit(resolved, monkeypatch)
    assert spy.high > 1.5
    assert bound > claimed + 0.5, bound
