r"""The exact worst case of an adaptive analyst against an admission rule: dynamic programming over the privacy loss.

The interaction studied (issue #18): the analyst runs pure-ε / Laplace fits one at a time, observes each release —
which reveals its privacy loss on the worst-case pair of neighbours — and at a moment of its choosing submits ONE
Gaussian fit with the least noise the admission rule still admits. Its privacy is the hockey-stick divergence of
the whole transcript,

    δ(ε) = E_P[(1 − e^{ε − L})_+],      L = the transcript's privacy loss log dP/dQ,

and the best strategy for the analyst solves an optimal-stopping problem on the running loss ℓ:

    V_r(ℓ) = max( g_r(ℓ),  E[V_{r+1}(ℓ + ℓ′)] ),       g_r(ℓ) = E[(1 − e^{ε − ℓ − G_r})_+],

where r is the number of pure fits so far (the admission rule's state is a function of r alone), ℓ′ the next pure
fit's loss, and G_r ~ N(μ_r²/2, μ_r²) the loss of the largest Gaussian the rule admits after r pure fits
(μ = sensitivity/σ). The maximum over strategies of the true δ(ε) is V_0(0).

**Discretisation, rounded in a known direction.** Losses live on a grid of step h (ε₀ a multiple of h). Every
term above is non-decreasing in ℓ, so rounding each pure fit's loss UP gives an upper bound on V_0(0) (by induction:
⌈a + b⌉ ≤ ⌈a⌉ + ⌈b⌉ and monotonicity) — the check that a rule is safe. Rounding DOWN gives a lower bound that a real
analyst attains: its strategy depends only on the rounded-down sum of what it observed, and its true loss is at
least that sum — the check that a rule is broken. The Gaussian term is evaluated in closed form at the grid point.

Loss laws under P for the worst-case pairs: Laplace P = Lap(0, b), Q = Lap(Δ, b), ε₀ = Δ/b — atoms +ε₀ (mass ½) and
−ε₀ (mass e^{−ε₀}/2), density ¼ e^{−(ε₀ − ℓ)/2} on (−ε₀, ε₀); a pure ε₀-DP release is dominated by randomised
response (Kairouz, Oh & Viswanath 2015): ±ε₀ with masses e^{ε₀}/(1 + e^{ε₀}), 1/(1 + e^{ε₀}).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import log_ndtr


@dataclass(frozen=True)
class LossLaw:
    """A discretised privacy-loss law under P: ``offsets`` in units of ``step``, with ``probabilities``."""

    offsets: np.ndarray
    probabilities: np.ndarray
    step: float


def _grid_points(epsilon0: float, step: float) -> int:
    points = round(epsilon0 / step)
    if points < 1 or abs(points * step - epsilon0) > 1e-12 * max(1.0, epsilon0):
        raise ValueError(f"ε₀ = {epsilon0} must be a positive multiple of the step {step}")
    return points


def laplace_loss_law(epsilon0: float, step: float, *, round_up: bool) -> LossLaw:
    """The Laplace mechanism's loss law (module docstring), its continuous part rounded up or down to the grid."""
    points = _grid_points(epsilon0, step)
    offsets = np.arange(-points, points + 1)
    probabilities = np.zeros(offsets.size)
    probabilities[-1] += 0.5
    probabilities[0] += 0.5 * math.exp(-epsilon0)
    lower, upper = offsets[:-1] * step, offsets[1:] * step
    cell = 0.5 * math.exp(-epsilon0 / 2.0) * (np.exp(upper / 2.0) - np.exp(lower / 2.0))
    if round_up:
        probabilities[1:] += cell
    else:
        probabilities[:-1] += cell
    return LossLaw(offsets, probabilities, step)


def randomized_response_loss_law(epsilon0: float, step: float) -> LossLaw:
    """Randomised response's loss law: ±ε₀ (exact on the grid)."""
    points = _grid_points(epsilon0, step)
    high = math.exp(epsilon0) / (1.0 + math.exp(epsilon0))
    return LossLaw(np.array([-points, points]), np.array([1.0 - high, high]), step)


def gaussian_hockey_stick(epsilon: float, losses: np.ndarray, mu: float) -> np.ndarray:
    """E[(1 − e^{ε − ℓ − G})_+] with G ~ N(μ²/2, μ²), for each ℓ: Φ(μ/2 − x/μ) − e^x Φ(−μ/2 − x/μ), x = ε − ℓ."""
    x = epsilon - np.asarray(losses, dtype=np.float64)
    if mu == 0.0:
        return np.maximum(0.0, -np.expm1(x))
    return np.maximum(np.exp(log_ndtr(mu / 2.0 - x / mu)) - np.exp(x + log_ndtr(-mu / 2.0 - x / mu)), 0.0)


def largest_admitted(admits: Callable[[float], bool], high: float = 64.0, iterations: int = 60) -> float:
    """The largest μ in [0, ``high``] with ``admits(μ)`` (monotone), by bisection from below (0 if none)."""
    if not admits(0.0):
        return 0.0
    low = 0.0
    for _ in range(iterations):
        middle = (low + high) / 2.0
        if admits(middle):
            low = middle
        else:
            high = middle
    return low


@dataclass(frozen=True)
class GameResult:
    """The analyst's best δ(ε) and the rule's shape: pure fits admitted alone, the Gaussian μ after r of them."""

    delta: float
    pure_fits: int
    mus: tuple[float, ...]


def _expect(values: np.ndarray, law: LossLaw) -> np.ndarray:
    """E[values[i + offset]] on the state grid (the grid is wide enough that clipping never binds)."""
    out = np.zeros_like(values)
    index = np.arange(values.size)
    for offset, probability in zip(law.offsets, law.probabilities, strict=True):
        out += probability * values[np.clip(index + offset, 0, values.size - 1)]
    return out


def pure_then_gaussian(
    epsilon: float,
    law: LossLaw,
    pure_admitted: Callable[[int], bool],
    gaussian_admitted: Callable[[int, float], bool],
) -> GameResult:
    """V_0(0) of the module docstring. ``pure_admitted(r)``: may an (r+1)-th pure fit follow r of them;
    ``gaussian_admitted(r, μ)``: may a Gaussian μ follow r pure fits."""
    mus = [largest_admitted(lambda mu: gaussian_admitted(0, mu))]
    fits = 0
    while pure_admitted(fits):
        fits += 1
        mus.append(largest_admitted(lambda mu, r=fits: gaussian_admitted(r, mu)))
    span = fits * int(np.max(np.abs(law.offsets)))
    losses = np.arange(-span, span + 1) * law.step
    value = gaussian_hockey_stick(epsilon, losses, mus[fits])
    for r in range(fits - 1, -1, -1):
        value = np.maximum(gaussian_hockey_stick(epsilon, losses, mus[r]), _expect(value, law))
    return GameResult(float(value[span]), fits, tuple(mus))


def composed_law(law: LossLaw, fits: int) -> tuple[np.ndarray, np.ndarray]:
    """The loss of ``fits`` independent draws of ``law``, summed: (losses, probabilities)."""
    probabilities = np.ones(1)
    for _ in range(fits):
        probabilities = np.convolve(probabilities, law.probabilities)
    low = fits * int(law.offsets[0])
    return (low + np.arange(probabilities.size)) * law.step, probabilities


def fixed_sequence_delta(epsilon: float, law: LossLaw, fits: int, mu: float) -> float:
    """δ(ε) of the fixed sequence "``fits`` pure fits, then a Gaussian μ" on the same grid (no adaptivity)."""
    losses, probabilities = composed_law(law, fits)
    return float(np.dot(probabilities, gaussian_hockey_stick(epsilon, losses, mu)))


def gaussian_then_choice(
    epsilon: float,
    law: LossLaw,
    mu_first: float,
    mu_second: float,
    pure_fits: int,
    *,
    upper: bool,
    width: float = 12.0,
) -> float:
    """The mirror order: a Gaussian μ₁ first; seeing its loss ℓ₀, the analyst continues EITHER with one more
    Gaussian μ₂ OR with ``pure_fits`` pure fits (more pure fits never lower E[(1 − e^{ε − L})_+], by Jensen:
    E_P[e^{−ℓ′}] = 1), whichever is worth more at ℓ₀: E_ℓ₀[max(f_Gauss(ℓ₀), f_pure(ℓ₀))].

    ℓ₀ ~ N(μ₁²/2, μ₁²) is put on the grid rounded up (``upper``: its mass beyond the grid counts as 1) or down
    (mass beyond is dropped); the lower tail sits at the grid's first point when rounding up."""
    step = law.step
    centre, spread = mu_first**2 / 2.0, max(mu_first, step)
    low = math.floor((centre - width * spread) / step)
    high = math.ceil((centre + width * spread) / step)
    edges = np.arange(low, high + 1) * step
    cdf = np.exp(log_ndtr((edges - centre) / mu_first)) if mu_first > 0 else (edges >= 0).astype(float)
    cells = np.diff(cdf)
    first = edges[1:] if upper else edges[:-1]
    span = pure_fits * int(np.max(np.abs(law.offsets)))
    losses = np.arange(low - span, high + span + 1) * step
    pure = gaussian_hockey_stick(epsilon, losses, 0.0)
    for _ in range(pure_fits):
        pure = _expect(pure, law)
    index = np.rint(first / step).astype(int) - (low - span)
    best = np.maximum(gaussian_hockey_stick(epsilon, first, mu_second), pure[index])
    if not upper:
        return float(np.sum(cells * best))
    # the mass below the grid sits at its lowest point (higher than where it is), the mass above counts as 1
    below = cdf[0] * max(gaussian_hockey_stick(epsilon, edges[:1], mu_second)[0], pure[index[0]])
    return float(np.sum(cells * best) + below + (1.0 - cdf[-1]))
