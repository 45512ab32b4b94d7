"""White-box likelihood-ratio privacy audit of P-COMW-TG (spec ``seed-003-lazy-oco.md`` §7.3 items 2 and 4).

WHAT IS AUDITED. :func:`run_pcomw_tg` as implemented, on neighbouring loss streams. The released output is the whole
iterate sequence x_{1:T}. Its law has a closed form, because a switch is visible (x_{t+1} ≠ x_t) and every fresh draw
is an exact truncated Gaussian with known log Z (spec §2.2, §2.3, §5.3):

    log p(x_{1:T}) = log μ̄_1(x_1) + Σ_{t=1}^{T−1} [ keep:   log((1−p) a_t(x_t))
                                                  switch: log(1 − (1−p) a_t(x_t)) + log μ̄_{t+1}(x_{t+1}) ],

for rounds with b_t < B_int. Once b_t = B_int the iterate is frozen with probability 1. Round T's coin decides only
x_{T+1}, which is not released. Here a_t = exp(``pcomw.log_keep_probability``(l_t(x_t), log Z_{t+1} − log Z_t, β,
log Φ)), looked up at call time, so a monkeypatched keep rule changes the simulation and the likelihood alike. The
normaliser ratio is recomputed independently from ``log_partition``; it is not taken from the implementation.

The likelihood is validated three ways. It integrates to 1 by quadrature (d = 1, T = 3, with and without an active
cap). Its log a_t equal the implementation's own diagnostics on every simulated round. Its coin probabilities are
calibrated against the simulated switches (martingale z-score).

NEIGHBOURS (spec §7.3 item 1), t₀ = 1, d = 2, R = 1, C = 1. The other rows are identical in both worlds and
alternate in sign, so the Gibbs mean stays inside the ball. They have an e₁ component, so the post-t₀ normaliser
ratios differ between the worlds. With 0.6·e₂ rows they would be equal by symmetry.
  * linear:          g_1 = ±C e₁, g_t = (−1)^t (0.3, 0.6);   G = C.
  * mean estimation: z_1 = ±C e₁, z_t = (−1)^t (0.3, 0.6);   G = R + C.
Privacy loss: L = log p_l(x_{1:T}) − log p_l'(x_{1:T}) on transcripts simulated under l. Both directions are used.
δ̂(ε) = mean[(1 − e^{ε−L})_+], which is the exact hockey-stick divergence of the output laws, estimated.

MONTE CARLO SLACK. One-sided bounds at level α = 1e-3 each:
  * upper bound = min(empirical-Bernstein upper bound at α/2 (Maurer & Pontil 2009, Thm 4), Clopper–Pearson upper
    bound at α/2 on Pr[L > ε], which is ≥ δ(ε));
  * lower bound = max(empirical-Bernstein lower bound at α/2, Clopper–Pearson lower bound at α/2 on Pr[L = +∞],
    which is ≤ δ(ε)).
A claim (ε, δ) is VIOLATED when the lower bound exceeds δ. It HOLDS when the upper bound is ≤ δ. Per-round bounds
that hold with probability 1 are checked on every transcript, with a floating-point tolerance of 1e-9.

CLAIMS.
  (P) Paper regime: log Φ = ``paper_log_phi(u, T, δ)`` = 22.5, B_int = ``switch_budget`` = 72, T = 20, δ = 0.2
      (T ≥ 12 log 1/δ), p = 0.2, u = 0.1 (linear: β = 0.632, λ = 6.32; mean: β = 0.316, λ = 12.6; βλ = 4), N = 150
      per world. The ledger's claim is ``paper_accountant`` (thm:dp, uncollapsed): ε_claim = 1.86e5, δ_claim = 0.131,
      the same for both families since u is the same. It is vacuous in ε at this T. a_t ≈ e^{−22}, so every round
      switches and L is a sum of fresh-draw likelihood ratios.
      Measured (+/− directions): mean L, the KL, is 2.86/2.55 (linear) and 0.50/0.52 (mean); max L is 7.9/8.6
      (linear) and 3.2/3.1 (mean); δ̂(ε_claim) = 0 with upper bound 0.049 ≤ 0.131 in all four directions.
      Also asserted:
        - Claim D.2: the clamp never binds, i.e. log r_t ∈ [−2 log Φ, 0] in both worlds on every round.
        - Claim D.1's fresh-draw step: |log μ̄_t(x)/μ̄'_t(x)| ≤ log Φ on every draw. Measured max: 1.30 (linear),
          0.63 (mean).
        - The per-round coin bounds below. Measured coin increments: ≤ 2e-10.
  (S) Small-Φ regime, where the clamp binds on almost every round: linear, T = 10, β = λ = 2 (u = 1, σ = 0.5),
      p = 0.05, log Φ = 0.025, B_int = 3, N = 1000 per world. No full-transcript claim is made, because thm:dp's
      closeness hypothesis on Φ fails. Claim D.1's per-round bounds hold for every x because the clamp keeps
      Π(·) ∈ [Φ^{-2}, 1] (App. C), and the paper's own chain in the "at" case then gives:
        - every coin (x_t is common to both worlds given the history):
          |ℓ_t| ≤ ε_coin = max(2 log Φ, log(1 + (1 − Φ^{-2})/p)) = 0.681 ≤ 2 log Φ / p = 1.0;
        - post-t₀ coins, in addition, |ℓ_t| ≤ 2u/p (Claim D.1, t > t₀);
        - after the budget is spent (b_t ≥ B_int): increment 0 (Claim D.1's indicator);
        - the first-round release (x_1, ζ_1) = (x_1, 1{x_2 ≠ x_1}), a post-processing of x_{1:T}, is
          (ε_{t₀}, 0) = (2 log Φ / p, 0) = (1.0, 0)-DP, which is Claim D.1 at t = t₀. Its privacy loss is the coin-1
          increment, since x_1 ~ μ̄_1 in both worlds.
      Measured for the correct build: max |ℓ_1| = 0.656 against ε_coin = 0.681, so the bound is attained to 4 %;
      first-round δ̂(1.0) = 0 with upper bound 0.0076.

MUTATIONS (spec §7.3 item 4). Each goes through :func:`run_audit` on regime (S), with the same seeds as the
correct build. Figures are for the +/− directions.
  * Clamp removed (a_t = min(1, r_t)): max |ℓ_1| = 2.90/2.88 against ε_coin = 0.68. First-round δ̂(1.0) =
    0.281/0.282 with lower bounds 0.217/0.219 > 0: VIOLATED in both directions.
  * p = 0, claim still computed at p = 0.05: some coin increments are infinite (a_t = 1 in one world, so a switch is
    impossible there, while it is possible in the other). First-round δ̂(1.0) = 0.021/0.019 with lower bounds
    0.009/0.008 > 0: VIOLATED in both directions.
  * No switch cap: 2 and 4 of the 1000 transcripts make a (B_int+1)-th switch. Their coin and fresh-draw
    increments reach 2.7/3.1 where Claim D.1 says 0: VIOLATED.
  * Flipped sign of the normaliser ratio: NOT a privacy violation. Only |Δ_t − Δ'_t| enters the coins, and the
    clamp bounds them anyway. It is detected as a law mismatch. On 3716 of 8960 rounds, the implementation's own
    log a_t differ from the specification's, by up to 2 log Φ = 0.05. The switch calibration (z = −0.8/+0.2) cannot
    see it, because the clamp confines a_t to [Φ^{-2}, 1] = [0.95, 1].

WHY THE CLAMP REMOVAL CANNOT FAIL THE PAPER CLAIM. Take an oblivious G-Lipschitz loss l_t. Then log r_t(x) is
βG-Lipschitz in x, and x_t ~ μ̄_t up to Lemma C.1's drift, where μ̄_t is βλ-strongly log-concave. So log r_t is
sub-Gaussian with variance proxy u (Herbst), around a mean within u of −log Φ. thm:dp's Φ has
log Φ ≥ 2 sqrt(72 u log(2/δ')). The clamp floor (log r_t < −2 log Φ) and the cap at 1 (log r_t > 0) each need a
deviation of at least ≈ log Φ − u, so Pr[clamp active] ≲ exp(−144 log(2/δ')). At the paper's Φ the clamped and
unclamped builds therefore produce the same transcripts except with negligible probability. Here they are
bit-identical with common seeds (:func:`test_clamp_removal_is_invisible_at_the_paper_phi`). No audit can find the
mutation against a claim made at log Φ ≥ ``paper_log_phi``.
  * p = 0: likewise invisible there, since 1 − a_t stays ≥ 1 − Φ^{-1} e^{O(√u)} in both worlds.
  * Missing cap: binds with probability ≤ e^{−p̃T}, which thm:dp already charges to δ_claim.
The powered checks are therefore the per-round Claim D.1 bounds, in regime (S).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache

import numpy as np
import pytest
from numpy.typing import ArrayLike, NDArray

from privfit.privacy import make_generator
from privfit.privacy.audit import clopper_pearson_lower, clopper_pearson_upper
from privfit.solvers.lazy_oco import pcomw
from privfit.solvers.lazy_oco.accounting import PaperAccount, paper_accountant, paper_log_phi, switch_budget
from privfit.solvers.lazy_oco.pcomw import (
    PcomwConfig,
    QuadraticLossStream,
    linear_loss_stream,
    mean_estimation_loss_stream,
    run_pcomw_tg,
)
from privfit.solvers.lazy_oco.sampling import log_partition

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
KeepRule = Callable[[ArrayLike, ArrayLike, float, float], FloatArray]

ALPHA = 1e-3  # one-sided level of every Monte Carlo bound (split α/2 + α/2 between the two bounds combined)
TOL = 1e-9  # floating-point tolerance of the probability-one (pathwise) per-round bounds
CALIBRATION_Z = 5.0  # |z| above which the simulated switches are declared inconsistent with the likelihood
OTHER_ROW = (0.3, 0.6)


# ---------------------------------------------------------------------------------------------------------------
# Transcript likelihood
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Transcripts:
    """N transcripts x_{1:T} as arrays: ``fresh[n, t−1]`` = x_t is a fresh draw (t = 1 or t ∈ switch_rounds);
    ``points[n, t−1]`` = x_t; ``log_keep[n, t−1]`` = the implementation's own log a_t diagnostic (NaN if unused)."""

    fresh: BoolArray
    points: FloatArray
    log_keep: FloatArray


def transcript_arrays(compact: Sequence[tuple[NDArray[np.int64], FloatArray]], T: int) -> tuple[BoolArray, FloatArray]:
    """Expand compact transcripts (switch_rounds, switch_points) into ``fresh[n, t−1]`` (x_t is a fresh draw: t = 1
    or t ∈ switch_rounds) and ``points[n, t−1]`` = x_t."""
    d = compact[0][1].shape[1]
    fresh = np.zeros((len(compact), T), dtype=bool)
    points = np.empty((len(compact), T, d))
    for i, (rounds, switch_points) in enumerate(compact):
        fresh[i, rounds - 1] = True
        points[i] = switch_points[np.cumsum(fresh[i]) - 1]
    return fresh, points


def simulate(losses: QuadraticLossStream, config: PcomwConfig, R: float, n: int, seed: int) -> Transcripts:
    """n seeded runs of :func:`run_pcomw_tg` (with its log a_t diagnostics) on public synthetic losses."""
    rng = make_generator(seed, data_is_public=True)
    runs = [run_pcomw_tg(losses, config, R, rng, record_diagnostics=True) for _ in range(n)]
    fresh, points = transcript_arrays([(r.switch_rounds, r.switch_points) for r in runs], losses.horizon)
    log_keep = np.array([np.full(losses.horizon, np.nan) if r.log_keep is None else r.log_keep for r in runs])
    return Transcripts(fresh, points, log_keep)


@dataclass(frozen=True)
class LikelihoodTerms:
    """The factors of log p(x_{1:T}) per transcript; column t−1 of the (N, T−1) arrays is round t = 1..T−1.

    ``initial`` = log μ̄_1(x_1); ``coins`` = log Pr[coin outcome at round t]; ``draws`` = log μ̄_{t+1}(x_{t+1}) if x_{t+1}
    is fresh, else 0; ``log_keep`` = log a_t; ``log_r`` = unclamped log r_t; ``switch_prob`` = 1 − (1−p) a_t; ``active``
    = b_t < B_int (the coin matters); ``switched`` = ζ_t as visible in x_{t+1} ≠ x_t; ``spent`` = b_t ≥ ``budget``.
    """

    initial: FloatArray
    coins: FloatArray
    draws: FloatArray
    log_keep: FloatArray
    log_r: FloatArray
    switch_prob: FloatArray
    active: BoolArray
    switched: BoolArray
    switches_before: NDArray[np.int64]

    @property
    def total(self) -> FloatArray:
        return self.initial + self.coins.sum(axis=1) + self.draws.sum(axis=1)


def gibbs_log_normalizers(losses: QuadraticLossStream, beta: float, lam: float, R: float) -> FloatArray:
    """``log Z_t`` of μ̄_t ∝ exp(−β((κ_t/2)‖x‖² + ⟨S_{t−1}, x⟩)) on B(0, R) for t = 1..T (index t−1), via
    :func:`log_partition` with S_{t−1} = Σ_{τ<t} g_τ and κ_t = λ + Σ_{τ<t} a_τ (constants c_t omitted throughout)."""
    T, d = losses.horizon, losses.dim
    S = np.vstack([np.zeros((1, d)), np.cumsum(losses.g, axis=0)])[:T]
    kappa = lam + np.concatenate([[0.0], np.cumsum(losses.a)])[:T]
    return log_partition(S, kappa, beta, R, d)


def likelihood_terms(
    fresh: BoolArray, points: FloatArray, losses: QuadraticLossStream, config: PcomwConfig, R: float
) -> LikelihoodTerms:
    """Vectorised exact log-likelihood factors of N transcripts under Algorithm 1 with ``config`` on ``losses``."""
    T, d = losses.horizon, losses.dim
    beta, lam, p, log_phi = config.beta, config.lam, config.p, config.log_phi
    cap = math.inf if config.switch_cap is None else config.switch_cap
    S = np.vstack([np.zeros((1, d)), np.cumsum(losses.g, axis=0)])[:T]  # S_{t−1}, t = 1..T
    kappa = lam + np.concatenate([[0.0], np.cumsum(losses.a)])[:T]  # κ_t
    log_z = gibbs_log_normalizers(losses, beta, lam, R)
    sq = np.einsum("ntd,ntd->nt", points, points)
    log_mu = -beta * (0.5 * kappa * sq + np.einsum("ntd,td->nt", points, S)) - log_z  # log μ̄_t(x_t)
    values = 0.5 * losses.a[: T - 1] * sq[:, : T - 1] + np.einsum("ntd,td->nt", points[:, : T - 1], losses.g[: T - 1])
    log_z_ratio = np.diff(log_z)[None, :]  # log Z_{t+1} − log Z_t, t = 1..T−1
    log_keep = np.asarray(pcomw.log_keep_probability(values, log_z_ratio, beta, log_phi), dtype=float)
    log_keep = np.broadcast_to(log_keep, values.shape)
    log_r = -beta * values - log_z_ratio - log_phi
    switched = fresh[:, 1:]
    switches_before = np.cumsum(fresh[:, :-1], axis=1) - 1  # b_t
    active = switches_before < cap
    keep_prob = (1.0 - p) * np.exp(log_keep)
    with np.errstate(divide="ignore"):
        log_keep_coin = math.log1p(-p) + log_keep if p < 1.0 else np.full(values.shape, -np.inf)
        log_switch_coin = np.log1p(-keep_prob)
    coins = np.where(active, np.where(switched, log_switch_coin, log_keep_coin), np.where(switched, -np.inf, 0.0))
    draws = np.where(switched, log_mu[:, 1:], 0.0)
    return LikelihoodTerms(
        initial=log_mu[:, 0],
        coins=coins,
        draws=draws,
        log_keep=log_keep,
        log_r=log_r,
        switch_prob=1.0 - keep_prob,
        active=active,
        switched=switched,
        switches_before=switches_before,
    )


def reference_log_likelihood(
    switch_rounds: NDArray[np.int64],
    switch_points: FloatArray,
    losses: QuadraticLossStream,
    config: PcomwConfig,
    R: float,
) -> float:
    """log p(x_{1:T}) of one compact transcript, round by round: the definition that :func:`likelihood_terms`
    vectorises (it is checked against this)."""
    T, d = losses.horizon, losses.dim
    beta, p = config.beta, config.p
    cap = math.inf if config.switch_cap is None else config.switch_cap
    rounds = [int(t) for t in switch_rounds]

    def log_gibbs(t: int, x: FloatArray) -> float:  # log μ̄_t(x), t 1-based
        S = losses.g[: t - 1].sum(axis=0) if t > 1 else np.zeros(d)
        kappa = config.lam + float(losses.a[: t - 1].sum())
        log_z = float(log_partition(S, kappa, beta, R, d))
        return -beta * (0.5 * kappa * float(x @ x) + float(S @ x)) - log_z

    x = switch_points[0]
    total = log_gibbs(1, x)
    switches = 0
    for t in range(1, T):
        switch = (t + 1) in rounds
        if switches >= cap:
            if switch:
                return -math.inf
            continue
        value = 0.5 * losses.a[t - 1] * float(x @ x) + float(losses.g[t - 1] @ x)
        log_z_ratio = log_gibbs(t, np.zeros(d)) - log_gibbs(t + 1, np.zeros(d))  # = log Z_{t+1} − log Z_t
        keep = (1.0 - p) * math.exp(float(pcomw.log_keep_probability(value, log_z_ratio, beta, config.log_phi)))
        if switch:
            switches += 1
            x = switch_points[rounds.index(t + 1)]
            total += math.log1p(-keep) + log_gibbs(t + 1, x)
        else:
            total += math.log(keep)
    return total


# ---------------------------------------------------------------------------------------------------------------
# Instances (neighbouring worlds, parameters, claims) and builds (the correct one and the mutations)
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Instance:
    """A neighbouring pair (worlds "+" and "−": row t₀ = 1 is ±C e₁) with Algorithm 1's parameters.

    ``delta`` is the target δ of the paper accountant when log Φ is thm:dp's (regime P); None in regime S, where
    only Claim D.1's per-round bounds (valid for any Φ ≥ 1 thanks to the clamp) are claimed.
    """

    name: str
    family: str
    T: int
    beta: float
    lam: float
    p: float
    log_phi: float
    delta: float | None
    n: int
    seed: int
    d: int = 2
    R: float = 1.0
    C: float = 1.0

    @property
    def lipschitz(self) -> float:
        """G, the public Lipschitz constant of the family on B(0, R) (spec §5.3)."""
        return self.C if self.family == "linear" else self.R + self.C

    @property
    def u(self) -> float:
        return self.beta * self.lipschitz**2 / self.lam

    @property
    def switch_cap(self) -> int:
        return switch_budget(self.p, self.log_phi, self.T)[1]

    def config(self) -> PcomwConfig:
        return PcomwConfig(self.beta, self.lam, self.p, self.log_phi, self.switch_cap)

    def world(self, sign: float) -> QuadraticLossStream:
        rows = np.array([(-1.0) ** t * np.array(OTHER_ROW) for t in range(1, self.T + 1)])
        rows = np.hstack([rows, np.zeros((self.T, self.d - 2))])
        rows[0] = 0.0
        rows[0, 0] = sign * self.C
        if self.family == "linear":
            return linear_loss_stream(rows, self.C)
        return mean_estimation_loss_stream(rows, self.C)

    def paper_claim(self) -> PaperAccount | None:
        if self.delta is None:
            return None
        return paper_accountant(self.u, self.p, self.log_phi, self.T, self.delta)

    @property
    def eps_t0(self) -> float:
        """Claim D.1's ε_{t₀} = 2 log Φ / p: the first-round release (x_1, ζ_1) is (ε_{t₀}, 0)-DP."""
        return 2.0 * self.log_phi / self.p

    @property
    def eps_coin(self) -> float:
        """The paper's intermediate bound for one coin given x (App. D, "at" case), valid for every x when the
        clamp holds: keep ratio ≤ Φ², switch ratio ≤ 1 + (1 − Φ^{-2})/p. It is ≤ ε_{t₀}."""
        return max(2.0 * self.log_phi, math.log1p(-math.expm1(-2.0 * self.log_phi) / self.p))

    @property
    def eps_post(self) -> float:
        """Claim D.1, t > t₀: each later coin is (2βG²/λ)/p = 2u/p-DP (and ε_coin-DP by the clamp)."""
        return min(2.0 * self.u / self.p, self.eps_coin)


def paper_instance(family: str, seed: int) -> Instance:
    """Regime P: thm:dp's Φ (:func:`paper_log_phi`) at u = 0.1, βλ = 4 (σ_1 = 0.5 R), T = 20, δ = 0.2, p = 0.2."""
    T, delta, p, u = 20, 0.2, 0.2, 0.1
    G2 = 1.0 if family == "linear" else 4.0  # G² with R = C = 1
    lam = 2.0 * math.sqrt(G2 / u)  # β/λ = u/G² and βλ = 4
    beta = 4.0 / lam
    log_phi = paper_log_phi(beta * G2 / lam, T, delta)
    return Instance(f"paper-{family}", family, T, beta, lam, p, log_phi, delta, n=150, seed=seed)


PAPER_INSTANCES = {family: paper_instance(family, seed) for family, seed in (("linear", 101), ("mean", 201))}
SMALL_PHI = Instance(
    "small-phi-linear", "linear", T=10, beta=2.0, lam=2.0, p=0.05, log_phi=0.025, delta=None, n=1000, seed=301
)


def unclamped_keep(loss_values: ArrayLike, log_z_ratio: ArrayLike, beta: float, log_phi: float) -> FloatArray:
    """Mutation: a_t = min(1, r_t), i.e. the clamp Π without its floor Φ^{-2}."""
    log_r = -beta * np.asarray(loss_values, dtype=float) - np.asarray(log_z_ratio, dtype=float) - log_phi
    return np.minimum(log_r, 0.0)


_ORIGINAL_RATIOS = pcomw.log_normalizer_ratios


def flipped_ratios(*args: object, **kwargs: object) -> FloatArray:
    """Mutation: the normaliser difference log Z_{t+1} − log Z_t enters log r_t with the wrong sign."""
    return -_ORIGINAL_RATIOS(*args, **kwargs)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Build:
    """The implementation under audit: the correct one or a mutation (spec §7.3 item 4)."""

    name: str
    keep_rule: KeepRule | None = None
    flip_normalizer: bool = False
    p_zero: bool = False
    uncapped: bool = False

    def config(self, instance: Instance) -> PcomwConfig:
        c = instance.config()
        return PcomwConfig(
            c.beta, c.lam, 0.0 if self.p_zero else c.p, c.log_phi, None if self.uncapped else c.switch_cap
        )

    @contextmanager
    def installed(self) -> Iterator[None]:
        with pytest.MonkeyPatch.context() as mp:
            if self.keep_rule is not None:
                mp.setattr("privfit.solvers.lazy_oco.pcomw.log_keep_probability", self.keep_rule)
            if self.flip_normalizer:
                mp.setattr("privfit.solvers.lazy_oco.pcomw.log_normalizer_ratios", flipped_ratios)
            yield


BUILDS = {
    b.name: b
    for b in (
        Build("correct"),
        Build("unclamped", keep_rule=unclamped_keep),
        Build("p_zero", p_zero=True),
        Build("uncapped", uncapped=True),
        Build("flipped_normalizer", flip_normalizer=True),
    )
}


# ---------------------------------------------------------------------------------------------------------------
# δ̂(ε) with one-sided confidence bounds
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeltaEstimate:
    """δ̂(ε) = mean[(1 − e^{ε−L})_+] against a claim (ε, δ_claim), with one-sided (1 − α) bounds (module docstring)."""

    epsilon: float
    claim_delta: float
    estimate: float
    lower: float
    upper: float

    @property
    def violated(self) -> bool:
        return self.lower > self.claim_delta

    @property
    def holds(self) -> bool:
        return self.upper <= self.claim_delta


def empirical_bernstein_margin(y: FloatArray, alpha: float) -> float:
    """Maurer & Pontil (2009), Thm 4: for i.i.d. y ∈ [0, 1], |E y − ȳ| ≤ this margin one-sidedly w.p. ≥ 1 − α."""
    n = y.size
    log_term = math.log(2.0 / alpha)
    return math.sqrt(2.0 * float(np.var(y, ddof=1)) * log_term / n) + 7.0 * log_term / (3.0 * (n - 1))


def estimate_delta(loss: FloatArray, epsilon: float, claim_delta: float, alpha: float = ALPHA) -> DeltaEstimate:
    if np.any(np.isnan(loss)):
        raise AssertionError("privacy loss undefined: a simulated transcript has probability 0 in its own world")
    with np.errstate(over="ignore"):
        y = np.where(np.isposinf(loss), 1.0, np.maximum(0.0, -np.expm1(epsilon - loss)))
    n = y.size
    mean = float(y.mean())
    margin = empirical_bernstein_margin(y, alpha / 2.0)
    upper = min(mean + margin, float(clopper_pearson_upper(int(np.sum(loss > epsilon)), n, alpha / 2.0)))
    lower = max(mean - margin, float(clopper_pearson_lower(int(np.sum(np.isposinf(loss))), n, alpha / 2.0)))
    return DeltaEstimate(epsilon, claim_delta, mean, max(lower, 0.0), min(upper, 1.0))


# ---------------------------------------------------------------------------------------------------------------
# The shared audit
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DirectionReport:
    """One direction: transcripts simulated in world ``simulated``, L = log p_sim − log p_other."""

    simulated: str
    transcript: DeltaEstimate | None  # the paper accountant's claim on x_{1:T} (regime P only)
    first_round: DeltaEstimate  # Claim D.1 at t₀ on (x_1, ζ_1)
    mean_loss: float
    max_loss: float
    coin_t0_max: float
    coin_post_max: float
    after_budget_max: float
    draw_ratio_max: float
    clamp_binding: int  # (transcript, round) pairs outside Claim D.2's event E_t (either world)
    calibration_z: float
    diagnostics_gap: float
    mean_switches: float


@dataclass(frozen=True)
class AuditReport:
    instance: Instance
    build: str
    directions: tuple[DirectionReport, ...]

    @property
    def violations(self) -> tuple[str, ...]:
        """Privacy claims the evidence contradicts, plus "law mismatch" when the transcripts are not distributed as
        the likelihood says (then the privacy numbers are not those of the build and nothing is certified)."""
        inst, found = self.instance, []
        for r in self.directions:
            if r.transcript is not None and r.transcript.violated:
                found.append("transcript claim")
            if r.first_round.violated:
                found.append("first-round claim")
            if r.coin_t0_max > inst.eps_coin + TOL or r.coin_post_max > inst.eps_post + TOL:
                found.append("per-round coin bound")
            if r.after_budget_max > TOL:
                found.append("increment after the budget")
            if abs(r.calibration_z) > CALIBRATION_Z or not r.diagnostics_gap <= 1e-8:
                found.append("law mismatch")
        return tuple(dict.fromkeys(found))


def _abs_max(values: FloatArray, mask: BoolArray) -> float:
    picked = np.abs(values[mask])
    return float(picked.max()) if picked.size else 0.0


@cache
def run_audit(instance: Instance, build: Build) -> AuditReport:
    """Simulate both worlds with ``build`` (common seeds across builds), compute exact privacy losses under the build's
    law and check them against the instance's claims (module docstring)."""
    worlds = {"+": instance.world(1.0), "-": instance.world(-1.0)}
    config = build.config(instance)
    claim = instance.paper_claim()
    cap = instance.switch_cap
    reports = []
    with build.installed():
        for index, (name, losses) in enumerate(worlds.items()):
            other = worlds["-" if name == "+" else "+"]
            sim = simulate(losses, config, instance.R, instance.n, instance.seed + index)
            own = likelihood_terms(sim.fresh, sim.points, losses, config, instance.R)
            alt = likelihood_terms(sim.fresh, sim.points, other, config, instance.R)
            assert np.all(np.isfinite(own.total)), "a simulated transcript has probability 0 in its own world"
            loss = own.total - alt.total
            coin = own.coins - alt.coins
            draw = own.draws - alt.draws
            spent = own.switches_before >= cap
            recorded = np.isfinite(sim.log_keep[:, :-1])
            gap = np.abs(sim.log_keep[:, :-1] - own.log_keep)[recorded]
            binding = (own.log_r < -2.0 * instance.log_phi) | (own.log_r > 0.0)
            binding |= (alt.log_r < -2.0 * instance.log_phi) | (alt.log_r > 0.0)
            s = own.switch_prob[own.active]
            residual = float(np.sum(own.switched[own.active] - s))
            reports.append(
                DirectionReport(
                    simulated=name,
                    transcript=None if claim is None else estimate_delta(loss, claim.epsilon, claim.delta_total),
                    first_round=estimate_delta(coin[:, 0], instance.eps_t0, 0.0),
                    mean_loss=float(np.mean(loss)),
                    max_loss=float(np.max(loss)),
                    coin_t0_max=_abs_max(coin[:, :1], ~spent[:, :1]),
                    coin_post_max=_abs_max(coin[:, 1:], ~spent[:, 1:]),
                    after_budget_max=_abs_max(coin + draw, spent),
                    draw_ratio_max=_abs_max(draw, own.switched & ~spent),
                    clamp_binding=int(np.sum(binding & own.active)),
                    calibration_z=residual / math.sqrt(max(float(np.sum(s * (1.0 - s))), 1e-300)),
                    diagnostics_gap=float(gap.max()) if gap.size else 0.0,
                    mean_switches=float(np.mean(sim.fresh.sum(axis=1) - 1)),
                )
            )
    return AuditReport(instance, build.name, tuple(reports))


# ---------------------------------------------------------------------------------------------------------------
# 1. The likelihood itself
# ---------------------------------------------------------------------------------------------------------------


def _tiny_streams() -> dict[str, QuadraticLossStream]:
    g = np.array([[0.7], [-0.4], [0.5]])
    return {"linear": linear_loss_stream(g, 1.0), "mean": mean_estimation_loss_stream(-g, 1.0)}


@pytest.mark.parametrize("cap", [5, 1], ids=["cap-ample", "cap-binding"])
@pytest.mark.parametrize("family", ["linear", "mean"])
def test_likelihood_integrates_to_one(family: str, cap: int) -> None:
    """d = 1, T = 3 on [−R, R]: the four switch patterns (keep/switch at rounds 1, 2) integrate, by a midpoint rule
    with the clamp's kinks contributing O(h²), to total mass 1. A wrong log Z sign, a missing (1−p), a wrong coin
    complement or a frozen round that is not frozen would each move the total by ≳ 1e-2. With B_int = 1 the
    switch–switch pattern must get probability 0."""
    losses, R = _tiny_streams()[family], 1.0
    config = PcomwConfig(beta=2.0, lam=2.0, p=0.3, log_phi=0.1, switch_cap=cap)
    m = 60
    nodes = -R + (np.arange(m) + 0.5) * (2.0 * R / m)
    weight = 2.0 * R / m
    total = 0.0
    for pattern in ((False, False), (False, True), (True, False), (True, True)):
        k = 1 + sum(pattern)  # number of distinct points
        grid = np.stack(np.meshgrid(*([nodes] * k), indexing="ij"), axis=-1).reshape(-1, k)
        fresh = np.array([[True, *pattern]] * grid.shape[0])
        which = np.cumsum(fresh, axis=1) - 1
        points = np.take_along_axis(grid, which, axis=1)[:, :, None]
        terms = likelihood_terms(fresh, points, losses, config, R)
        mass = float(np.sum(np.exp(terms.total)) * weight**k)
        if cap == 1 and pattern == (True, True):
            assert mass == 0.0
        total += mass
    assert total == pytest.approx(1.0, abs=2e-4)  # midpoint error ≈ 8e-5 at m = 60


def test_vectorised_likelihood_matches_the_round_by_round_definition() -> None:
    """The vectorised factors sum to :func:`reference_log_likelihood` on simulated transcripts, including ones that
    reach the switch cap (B_int = 3 at T = 10 in regime S)."""
    inst = SMALL_PHI
    losses, config = inst.world(1.0), inst.config()
    rng = make_generator(7, data_is_public=True)
    compact = [
        (r.switch_rounds, r.switch_points) for r in (run_pcomw_tg(losses, config, inst.R, rng) for _ in range(40))
    ]
    compact.append((np.array([1, 2, 3, 4]), np.array([[0.1, 0.2], [-0.3, 0.4], [0.5, 0.0], [0.0, -0.6]])))  # at the cap
    fresh, points = transcript_arrays(compact, inst.T)
    vectorised = likelihood_terms(fresh, points, losses, config, inst.R).total
    reference = [reference_log_likelihood(rounds, pts, losses, config, inst.R) for rounds, pts in compact]
    np.testing.assert_allclose(vectorised, reference, rtol=1e-10, atol=1e-10)
    assert inst.switch_cap == 3 and {len(rounds) - 1 for rounds, _ in compact} >= {0, 1, 3}
    assert np.all(np.isfinite(vectorised))


@pytest.mark.parametrize(
    "instance", [SMALL_PHI, *PAPER_INSTANCES.values()], ids=lambda i: i.name if isinstance(i, Instance) else ""
)
def test_likelihood_is_the_law_of_the_simulated_transcripts(instance: Instance) -> None:
    """For the correct build the likelihood's log a_t equal :func:`run_pcomw_tg`'s own diagnostics on every
    simulated round (same loss values, same log Z_{t+1} − log Z_t up to 1e-8, same clamp), and the simulated switches
    are calibrated against its switch probabilities: Σ(ζ_t − s_t)/sqrt(Σ s_t(1 − s_t)) is a martingale z-score."""
    report = run_audit(instance, BUILDS["correct"])
    for r in report.directions:
        assert r.diagnostics_gap <= 1e-8
        assert abs(r.calibration_z) <= 4.0
    assert "law mismatch" not in report.violations


# ---------------------------------------------------------------------------------------------------------------
# 2.–3. The correct build against the ledger's claim (regime P) and against Claim D.1 per round (both regimes)
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", ["linear", "mean"])
def test_paper_claim_holds_for_the_correct_build(family: str) -> None:
    """Regime P: the ledger's (ε_claim, δ_claim) = ``paper_accountant`` at thm:dp's Φ holds in both directions
    (upper confidence bound on δ(ε_claim) ≤ δ_claim). Claim D.2's event E_t holds on every round (the clamp never
    binds; the paper allows ≤ 3δ' + 9Tδ' + 3e^{−p̃T} per round, i.e. ≪ 1 expected occurrence here), every fresh draw
    after t₀ has |log μ̄_t/μ̄'_t| ≤ log Φ (Claim D.1's draw step fails w.p. ≤ δ' = 8e-6), and every coin meets its
    per-round bound."""
    inst = PAPER_INSTANCES[family]
    claim = inst.paper_claim()
    assert claim is not None and claim.delta_total < 1.0 and 12.0 * math.log(1.0 / inst.delta) <= inst.T
    assert inst.log_phi == paper_log_phi(inst.u, inst.T, inst.delta)
    report = run_audit(inst, BUILDS["correct"])
    assert report.violations == ()
    for r in report.directions:
        assert r.transcript is not None and r.transcript.holds
        assert r.transcript.upper <= claim.delta_total and r.transcript.estimate == 0.0
        assert r.clamp_binding == 0
        assert r.draw_ratio_max <= inst.log_phi
        assert r.coin_t0_max <= inst.eps_coin and r.coin_post_max <= inst.eps_post
        assert r.mean_loss > 0.0 and r.max_loss < claim.epsilon  # a real, nonzero KL, far below the vacuous claim


def test_claim_d1_per_round_bounds_hold_and_are_tight_for_the_correct_build() -> None:
    """Regime S, where the clamp binds: every coin's privacy-loss increment is within ε_coin (and later coins also
    within 2u/p), nothing leaks after the budget, and the first-round release meets (2 log Φ/p, 0) with δ̂ = 0. The
    t₀ bound is attained to within 5 %, so any build that lets the t₀ coin leak more is caught."""
    inst = SMALL_PHI
    report = run_audit(inst, BUILDS["correct"])
    assert report.violations == ()
    for r in report.directions:
        assert r.first_round.estimate == 0.0 and not r.first_round.violated
        assert inst.eps_coin * 0.95 <= r.coin_t0_max <= inst.eps_coin + TOL
        assert r.coin_post_max <= inst.eps_post + TOL
        assert r.after_budget_max == 0.0
        assert r.clamp_binding > 0  # the clamp is exercised here (unlike regime P)


# ---------------------------------------------------------------------------------------------------------------
# 4. Mutations through the same audit
# ---------------------------------------------------------------------------------------------------------------

EXPECTED_VIOLATIONS = {
    "correct": set(),
    "unclamped": {"first-round claim", "per-round coin bound"},
    "p_zero": {"first-round claim", "per-round coin bound"},
    "uncapped": {"increment after the budget"},
    "flipped_normalizer": {"law mismatch"},
}


@pytest.mark.parametrize("build", list(BUILDS))
def test_audit_passes_the_correct_build_and_fails_each_mutation(build: str) -> None:
    """One audit (:func:`run_audit` on regime S, same seeds): the correct build shows no violation; removing the clamp
    or the forced-switch coin violates Claim D.1's first-round (ε, δ) claim with confidence (lower bound on
    δ(2 log Φ/p) > 0 in at least one direction) and its per-round coin bound; dropping the cap leaks after the budget;
    flipping the normaliser's sign is caught as a law mismatch (it is not a privacy violation, see module docstring).
    """
    report = run_audit(SMALL_PHI, BUILDS[build])
    assert set(report.violations) == EXPECTED_VIOLATIONS[build]
    if build in ("unclamped", "p_zero"):
        assert any(r.first_round.lower > r.first_round.claim_delta for r in report.directions)
    if build == "unclamped":
        assert all(r.first_round.lower > 0.1 for r in report.directions)  # decisive in both directions


def test_clamp_removal_is_invisible_at_the_paper_phi() -> None:
    """Why the paper-claim audit cannot have power against the clamp (module docstring): at thm:dp's Φ the clamp never
    binds (Claim D.2), so with common seeds the unclamped build releases bit-identical transcripts."""
    inst = PAPER_INSTANCES["linear"]
    losses, config = inst.world(1.0), inst.config()
    runs = {}
    for name in ("correct", "unclamped"):
        with BUILDS[name].installed():
            rng = make_generator(inst.seed, data_is_public=True)
            runs[name] = [run_pcomw_tg(losses, config, inst.R, rng) for _ in range(10)]
    for a, b in zip(runs["correct"], runs["unclamped"], strict=True):
        np.testing.assert_array_equal(a.switch_rounds, b.switch_rounds)
        np.testing.assert_array_equal(a.switch_points, b.switch_points)
