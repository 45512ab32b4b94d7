r"""The privacy filter: the rule by which the ledger admits a fit, valid against an adaptive analyst.

A dataset's budget (ε_max, δ_max) promises that the WHOLE interaction with its analysts — every fit they run,
each chosen after seeing the results of the earlier ones, concurrent fits included — is (ε_max, δ_max)-DP.
Converting the composed RDP curve of the committed fits at δ_max (:meth:`PrivacyCost.epsilon`) describes a FIXED
sequence of fits; admitting a fit when that conversion stays ≤ ε_max "at some order" is not covered by any proof
once the fits are chosen adaptively (the certifying order can depend on the outputs; "natural" filters over whole
privacy profiles are not free in general: Regehr, Hu, Leeman, Manurangsi, Tholoniat & Lécuyer 2026,
arXiv:2602.15815). The filter below has a proof.

**The filter.** Fixed when the dataset is created, from public numbers only, and stored with its budget:

* a δ split δ_max = δ_R + δ_A: δ_A (default δ_max/10, the owner may choose) is the pot of every δ-only part —
  the δ of (ε, δ)-DP charges and the approximate-RDP slacks; δ_R is left to the RDP certificate;
* one RDP order α* of the dataset's grid: the order at which the Gaussian mechanism that exactly exhausts
  (ε_max, δ_R) converts best, i.e. α* = argmax_α (ε_max − c_α)/α with c_α = log(1 − 1/α) − (log δ_R + log α)/(α − 1)
  (Balle et al. 2020, Thm. 21; the conversion of :mod:`privfit.privacy.conversion` at one order);
* the order-∞ (pure ε) certificate, which needs no δ.

With S(α*) the sum of the committed fits' RDP at α*, E_∞ the sum of their pure-ε bounds (+∞ for any fit without
one: :attr:`PrivacyCost.pure_epsilon`), D the composed δ parts 1 − Π(1 − δ_i) and A the sum of the
approximate-RDP slacks, a fit is admitted iff, with it added,

    (a)  D + (1 + e^{ε_max}) · A ≤ δ_A,        and
    (b)  S(α*) + c_α* ≤ ε_max    or    E_∞ ≤ ε_max.

**Theorem.** Let an analyst interact adaptively with the mechanisms privfit runs on a dataset: the i-th fit to
start (to be charged) is chosen, with its settings, from everything observed before, fits may run concurrently,
and a fit released before it reads any row (cancelled while queued, refunded on an early failure) is not
counted. If every admission obeys (a) and (b), the transcript of the whole interaction is (ε_max, δ_max)-DP.

*Proof.* Order the charged fits by the time they were charged; fit i's cost c_i is fixed before any of its
output exists (cost before data, DESIGN §1.4), so it is predictable. Outputs that arrive later than others are
a post-processing of this sequential interaction, because what an analyst can observe of a running fit does not
depend on the rows (DESIGN §4); a released fit is a mechanism with a constant output. Fix neighbours D, D′ and
write P, Q for the laws of the transcript, L for its privacy loss log dP/dQ.

1. *δ parts.* An (ε_i, δ_i)-DP fit is a post-processing of the canonical pair of Kairouz, Oh & Viswanath
   (2015): with probability δ_i a "reveal" outcome that differs between P and Q, else ε_i-randomised response,
   the post-processing kernel depending only on the history. An approximate-RDP fit (Bun, Dwork, Rothblum &
   Steinke 2018; Carmon et al. 2023) has laws within total variation a_i of laws P′_i, Q′_i whose Rényi
   divergence at α* is ≤ c_i(α*). Let G^P, G^Q be the "good" interactions in which no reveal happens and every
   approximate-RDP fit draws from P′_i (resp. Q′_i). Coupling step by step, for every event S
   P(S) − e^{ε}Q(S) ≤ P(reveal) + (1 + e^{ε}) sup Σ a_i + sup_f (E_{G^P} f − e^{ε} E_{G^Q} f) over f ∈ [0, 1]
   (the reveal probability enters once because both worlds reveal with the same δ_i and the no-reveal
   sub-measures share the factor Π(1 − δ_i); the slack enters on both sides, as in Carmon et al., Cor. 1).
   P(reveal) = 1 − E_{G^P}[Π(1 − δ_i)] ≤ sup over paths of D, and (a) holds on every path, so the first two
   terms are ≤ δ_A at ε = ε_max.
2. *RDP part.* In the good interaction, M_t = exp((α* − 1)(L_t − S_t(α*))) is a non-negative supermartingale
   under G^P with M_0 = 1, since E[exp((α* − 1) ℓ_i) | past] = exp((α* − 1) D_α*(P_i‖Q_i)) ≤
   exp((α* − 1) c_i(α*)) (Feldman & Zrnic 2021, Thm. 3.1; Lécuyer 2021). For every x,
   (1 − e^{ε − x})_+ ≤ (1/α*)((α* − 1)/α*)^{α* − 1} e^{(α* − 1)(x − ε)} (the pointwise inequality behind the
   conversion of Balle et al. 2020 / Canonne, Kamath & Steinke 2020, Prop. 12). The supremum over f is
   E_{G^P}[(1 − e^{ε − L_T})_+]. At the end T (bounded, or by Fatou) some certificate of (b) holds, since the last
   admission left one holding and only releases followed. On the paths where the α* certificate holds,
   S_T(α*) ≤ ε − c_α* and the bound above gives E[1{α* holds} (1 − e^{ε − L_T})_+] ≤ δ_R · E[M_T] ≤ δ_R; on the
   paths where only the pure certificate holds, L_T ≤ E_∞ ≤ ε in the good interaction (randomised response, the
   Laplace mechanism and the pure releases have privacy loss bounded by their ε_∞), so (1 − e^{ε − L_T})_+ = 0.
   Adding: δ(ε_max) ≤ δ_A + δ_R = δ_max. ∎

The union over certificates is the filter of Whitehouse, Ramdas, Rogers & Wu (ICML 2023) specialised to two
"orders" (α* at δ_R, ∞ at 0); with k finite orders at δ_R/k each the same proof holds, and a single pinned order
is Feldman & Zrnic's filter. The order α* and the split were chosen by measuring fits per budget
(``benchmarks/filter_capacity.py``): a second finite order costs Gaussian workloads a fit or more per budget
(log k/(α* − 1) of ε) and gains nothing on them; the free order-∞ certificate keeps pure/Laplace workloads
at their basic-composition count.

**What the ledger reports.** :meth:`PrivacyFilter.measure` gives the share of the budget that a set of committed
fits uses by the filter's certificates: min(S(α*)/ρ_max, E_∞/ε_max) with ρ_max = ε_max − c_α* the RDP the α*
certificate allows (+∞ if (a) fails). Each certificate's share is additive over fits, so the share tells how many
more fits of the same kind fit; admission is exactly "share of committed + fit ≤ 1". The API shows ε_max × share as
"committed ε" and ε_max − committed as "remaining ε", and says that it is the filter's measure: not an (ε, δ)
guarantee of its own — the guarantee is (ε_max, δ_max) for whatever admitted sequence the analysts choose. A fit's
own ε (its cost converted at δ_max over the whole grid) remains the (ε, δ_max)-DP statement of that fit alone; under
RDP composition it is larger than its share of ε_max (83 Gaussian fits of own ε = 0.1 fill (ε, δ) = (1, 10⁻⁶)).

Numerics round against the user: shares are rounded up by a relative 1e-12 before they are compared with 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .cost import PrivacyCost, compose_deltas
from .errors import PrivacyParameterError, require_non_negative, require_open_unit, require_positive
from .orders import OrderGrid

FILTER_VERSION = "filter:rdp-order+pure+delta-pot/v1"
"""Names the admission rule of the module docstring (stored with every budget)."""

DEFAULT_APPROXIMATE_DELTA_SHARE = 0.1
"""The share of δ_max set apart for δ-only parts when the owner does not choose (module docstring)."""

_ROUND_UP = 1e-12
_MIN_ORDER = 1.01  # the conversion is not used at orders ≤ 1.01 (dp_accounting's guard)


def conversion_offset(order: float, delta: float) -> float:
    """c_α = log(1 − 1/α) − (log δ + log α)/(α − 1): an (α, ρ)-RDP mechanism is (ρ + c_α, δ)-DP."""
    return math.log1p(-1.0 / order) - (math.log(delta) + math.log(order)) / (order - 1.0)


def gaussian_exhausting_order(grid: OrderGrid, epsilon: float, delta: float) -> float:
    """The order of ``grid`` at which the Gaussian (α ↦ ρα) that exactly exhausts (ε, δ) converts best.

    The largest ρ with min_α (ρα + c_α) ≤ ε is ρ* = max_α (ε − c_α)/α; its optimal order is the argmax (ties:
    the smallest order). Orders ≤ 1.01 are skipped.
    """
    orders = np.asarray(grid.orders, dtype=np.float64)
    usable = orders > _MIN_ORDER
    if not usable.any():
        raise PrivacyParameterError("grid", f"grid {grid.name!r} has no order above {_MIN_ORDER}")
    candidates = orders[usable]
    offsets = np.log1p(-1.0 / candidates) - (math.log(delta) + np.log(candidates)) / (candidates - 1.0)
    return float(candidates[int(np.argmax((epsilon - offsets) / candidates))])


def _share(used: float, allowed: float) -> float:
    """``used``/``allowed`` rounded up (0 when nothing is used; +∞ when ``used`` is +∞ or nothing is allowed)."""
    if used == 0.0:
        return 0.0
    if not (math.isfinite(used) and allowed > 0.0):
        return math.inf
    return used / allowed * (1.0 + _ROUND_UP)


@dataclass(frozen=True)
class FilterReading:
    """What the filter's certificates say of one (committed) cost.

    Attributes:
        share: the share of the budget used, min(order_share, pure_share); +∞ when the δ pot is exceeded.
        epsilon: ε_max × share, the "committed ε" the API shows (module docstring).
        order_share: S(α*)/ρ_max, the α* certificate's share (+∞ if the curve has no bound at α*, or if ρ_max ≤ 0
            and S(α*) > 0).
        pure_share: E_∞/ε_max, the order-∞ certificate's share (+∞ if some fit has no pure bound).
        certificate: ``"order"`` or ``"pure"``, whichever gives ``share`` (None when it is +∞).
        delta_used: D + (1 + e^{ε_max}) A, the δ pot in use.
        delta_fits: whether ``delta_used`` ≤ the pot δ_A.
    """

    share: float
    epsilon: float
    order_share: float
    pure_share: float
    certificate: str | None
    delta_used: float
    delta_fits: bool


@dataclass(frozen=True)
class DeltaAllowance:
    """How much of the δ pot one more fit may use: ``delta`` in pot units; an approximate-RDP slack a counts
    ``slack_weight`` · a (= (1 + e^{ε_max}) a). Solvers with δ-only parts size them within it."""

    delta: float
    slack_weight: float

    @property
    def max_slack(self) -> float:
        """The largest total approximate-RDP slack within the allowance."""
        return self.delta / self.slack_weight


@dataclass(frozen=True)
class PrivacyFilter:
    """A dataset's admission rule (module docstring): public, fixed when the dataset is created."""

    epsilon_max: float
    delta_max: float
    grid: OrderGrid
    order: float
    rdp_delta: float
    approximate_delta: float
    version: str = FILTER_VERSION

    def __post_init__(self) -> None:
        require_positive("epsilon_max", self.epsilon_max)
        require_open_unit("delta_max", self.delta_max)
        require_open_unit("rdp_delta", self.rdp_delta)
        require_non_negative("approximate_delta", self.approximate_delta)
        if self.rdp_delta + self.approximate_delta > self.delta_max * (1.0 + 1e-12):
            raise PrivacyParameterError("approximate_delta", "the δ split must not exceed δ_max")
        if not (self.order > _MIN_ORDER and np.isclose(self.grid.orders, self.order, rtol=0, atol=1e-12).any()):
            raise PrivacyParameterError("order", f"{self.order!r} is not an order > 1.01 of grid {self.grid.name!r}")

    @classmethod
    def for_budget(
        cls, epsilon_max: float, delta_max: float, grid: OrderGrid, approximate_delta: float | None = None
    ) -> PrivacyFilter:
        """The filter of a new budget: δ_A = ``approximate_delta`` (default δ_max/10), δ_R = δ_max − δ_A and the
        Gaussian-exhausting order α* at (ε_max, δ_R)."""
        epsilon_max = require_positive("epsilon_max", epsilon_max)
        delta_max = require_open_unit("delta_max", delta_max)
        pot = DEFAULT_APPROXIMATE_DELTA_SHARE * delta_max if approximate_delta is None else approximate_delta
        pot = require_non_negative("approximate_delta", pot)
        if not pot < delta_max:
            raise PrivacyParameterError(
                "approximate_delta", f"must be below the budget's δ = {delta_max:g} (the rest goes to RDP), got {pot:g}"
            )
        rdp_delta = delta_max - pot
        order = gaussian_exhausting_order(grid, epsilon_max, rdp_delta)
        return cls(epsilon_max, delta_max, grid, order, rdp_delta, pot)

    @property
    def order_index(self) -> int:
        """Index of α* in the grid."""
        return int(np.argmin(np.abs(self.grid.orders - self.order)))

    @property
    def offset(self) -> float:
        """c_α* at δ_R: the α* certificate holds while S(α*) + c_α* ≤ ε_max."""
        return conversion_offset(self.order, self.rdp_delta)

    @property
    def order_budget(self) -> float:
        """The RDP at α* the filter allows: ε_max − c_α*."""
        return self.epsilon_max - self.offset

    @property
    def slack_weight(self) -> float:
        """1 + e^{ε_max}: the weight of an approximate-RDP slack in the δ pot (proof, step 1)."""
        return 1.0 + math.exp(min(self.epsilon_max, 700.0))

    def delta_used(self, cost: PrivacyCost) -> float:
        """D + (1 + e^{ε_max}) A of ``cost`` (condition (a))."""
        return compose_deltas([cost.extra_delta]) + self.slack_weight * cost.approx_delta

    def measure(self, cost: PrivacyCost) -> FilterReading:
        """What the certificates say of ``cost`` (usually the composition of the committed fits)."""
        if cost.grid != self.grid:
            raise PrivacyParameterError("grid", f"cost is on grid {cost.grid.name!r}, the filter on {self.grid.name!r}")
        order_share = _share(float(cost.rdp[self.order_index]), self.order_budget)
        pure_share = _share(cost.pure_epsilon, self.epsilon_max)
        used = self.delta_used(cost)
        fits = used <= self.approximate_delta
        best = min(order_share, pure_share) if fits else math.inf
        certificate = None if not math.isfinite(best) else ("order" if order_share <= pure_share else "pure")
        return FilterReading(
            share=best, epsilon=self.epsilon_max * best, order_share=order_share, pure_share=pure_share,
            certificate=certificate, delta_used=used, delta_fits=fits,
        )  # fmt: skip

    def admits(self, cost: PrivacyCost) -> bool:
        """Conditions (a) and (b) for ``cost`` = committed + the new fit."""
        return self.measure(cost).share <= 1.0

    def allowance(self, committed: PrivacyCost) -> DeltaAllowance:
        """Half of the δ pot still unused: what the next fit's δ-only parts may take (each fit halves what is left,
        so the pot is never exhausted by δ parts alone). Zero when the pot is used up or empty."""
        left = max(self.approximate_delta - self.delta_used(committed), 0.0)
        return DeltaAllowance(delta=left / 2.0, slack_weight=self.slack_weight)
