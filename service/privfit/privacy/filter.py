r"""The privacy filter: the rule by which the ledger admits a fit, valid against an adaptive analyst.

A dataset's budget (ε_max, δ_max) promises that the WHOLE interaction with its analysts — every fit they run,
each chosen after seeing the results of the earlier ones, concurrent fits included — is (ε_max, δ_max)-DP.
Converting the composed RDP curve of the committed fits at δ_max (:meth:`PrivacyCost.epsilon`) describes a FIXED
sequence of fits; admitting a fit when that conversion stays ≤ ε_max "at some order" is not covered by any proof
once the fits are chosen adaptively (the certifying order can depend on the outputs; "natural" filters over whole
privacy profiles are not free in general: Regehr, Hu, Leeman, Manurangsi, Tholoniat & Lécuyer 2026,
arXiv:2602.15815). The filter below has a proof.

**The filter.** Fixed when the dataset is created, from public numbers only, and stored with its budget:

* a δ split δ_max = δ_A + δ_1 + … + δ_k: δ_A (default δ_max/10, the owner may choose) is the pot of every
  δ-only part, itself split δ_A = δ_D + δ_S: δ_D for the δ of (ε, δ)-DP charges, δ_S (default δ_A/2, the owner
  may choose 0 ≤ δ_S ≤ δ_A) for the approximate-RDP slacks; the rest, δ_R, goes to the orders;
* a few RDP orders of the dataset's grid, each certified at its own δ_j: the order α* at which the Gaussian
  mechanism that exactly exhausts (ε_max, δ_R) converts best, α* = argmax_α (ε_max − c_α)/α with
  c_α = log(1 − 1/α) − (log δ + log α)/(α − 1) (Balle et al. 2020, Thm. 21; the conversion of
  :mod:`privfit.privacy.conversion` at one order), with δ_1 = 0.99 δ_R; and the grid order nearest 10·α* with
  δ_2 = 0.01 δ_R, which certifies compositions dominated by pure-ε parts with a small Gaussian part (objective
  perturbation's output step) — the rule of :meth:`PrivacyFilter.for_budget`;
* the order-∞ (pure ε) certificate, which needs no δ;
* (filters of version v3) a Gaussian-DP certificate with its own share δ_G of δ_R (default
  :data:`DEFAULT_GDP_SHARE`; the orders then share the rest): μ_G, the largest μ whose certified δ at ε_max is
  within δ_G (:func:`~privfit.privacy.gaussian_dp.gdp_mu_for`: e^{H} δ_μ(ε_max − 2H) ≤ δ_G, δ_μ the exact (ε, δ)
  curve of μ-GDP, H the exact sampler's slack). Budgets created before v3 keep δ_G = 0: no GDP certificate.

With S(α_j) the sum of the committed fits' RDP at α_j, E_∞ the sum of their pure-ε bounds (+∞ for any fit without
one: :attr:`PrivacyCost.pure_epsilon`), M the sum of their GDP μ² (+∞ for any fit that is not made of Gaussian
releases only: :attr:`PrivacyCost.gdp_mu_squared`), D the composed δ parts 1 − Π(1 − δ_i) and A the sum of the
approximate-RDP slacks (all of them random: they depend on the fits the analyst chose, hence on earlier outputs),
the condition the proof needs is on their WORST paths, k being the number of pinned finite orders:

    (a)  sup_paths D + k (1 + e^{ε_max}) · sup_paths A ≤ δ_A,        and
    (b)  S(α_j) + c_{α_j}(δ_j) ≤ ε_max for some j,    or    E_∞ ≤ ε_max,    or    M ≤ μ_G²   (on every path).

The filter enforces (a) through the public split of δ_A: a fit is admitted iff, with it added (on the path the
interaction took),

    (a1)  D ≤ δ_D = δ_A − δ_S,     (a2)  k (1 + e^{ε_max}) · A ≤ δ_S,     and (b).

Since every admission checks (a1) and (a2), they hold on every path, so sup D ≤ δ_D and k (1 + e^{ε_max}) sup A ≤
δ_S: (a) holds. Checking D + k (1 + e^{ε_max}) A ≤ δ_A on the realised path alone, as privfit did before, does not
give (a): an analyst whose paths spend the pot on D in one world and on A in the other brings step 1's bound
E_P[D] + k E_P[A] + k e^{ε} E_Q[A] above δ_A (towards 2 δ_A; ``tests/ledger/test_delta_split.py`` computes it).

**Theorem.** Let an analyst interact adaptively with the mechanisms privfit runs on a dataset: the i-th fit to
start (to be charged) is chosen, with its settings, from everything observed before, fits may run concurrently,
and a fit released before it reads any row (cancelled while queued, refunded on an early failure) is not
counted. If every admission obeys (a1), (a2) and (b), and δ_A + Σ_j δ_j + δ_G ≤ δ_max, the transcript of the whole
interaction is (ε_max, δ_max)-DP.

*Proof.* Order the charged fits by the time they were charged; fit i's cost c_i is fixed before any of its
output exists (cost before data, DESIGN §1.4), so it is predictable. Outputs that arrive later than others are
a post-processing of this sequential interaction, because what an analyst can observe of a running fit does not
depend on the rows (DESIGN §4); a released fit is a mechanism with a constant output. Fix neighbours D, D′ and
write P, Q for the laws of the transcript, L for its privacy loss log dP/dQ.

0. *The GDP certificate.* Let E be the event "M ≤ μ_G² at the end" (M over the charged fits: a function of the
   transcript, since each fit's cost is a function of the settings the analyst chose). Split any event S into
   S ∩ E and S ∖ E. Compare with the *GDP-stopped* interaction: the same analyst and fits, except that it outputs
   ⊥ from the first charged fit that is not made of Gaussian releases or that would bring M above μ_G². Each fit's
   μ² is fixed before its output exists, so by fully adaptive GDP composition (Smith & Thakurta 2022, Thm. 1.2)
   the stopped interaction, with continuous Gaussian noise, is μ_G-GDP; with privfit's exact lattice sampler its
   laws are within e^{±H} pointwise of such an interaction's (:mod:`privfit.privacy.gaussian_dp`), so every event
   of it has P − e^{ε}Q ≤ e^{H} δ_{μ_G}(ε − 2H) ≤ δ_G. M only grows along a path (every μ² is ≥ 0), so on E the
   two interactions never differ: P(S ∩ E) − e^{ε}Q(S ∩ E) ≤ δ_G. Off E, the certificate the last admission left
   holding (every sum below only shrinks when a reservation is released) is one of the others, and steps 1–2
   bound P(S ∖ E) − e^{ε}Q(S ∖ E) by δ_A + Σ_j δ_j, with J defined on the complement of E.

1. *δ parts.* An (ε_i, δ_i)-DP fit is a post-processing of the canonical pair of Kairouz, Oh & Viswanath
   (2015): with probability δ_i a "reveal" outcome that differs between P and Q, else ε_i-randomised response,
   the post-processing kernel depending only on the history. Both worlds reveal with the same δ_i and the
   no-reveal sub-measures share the factor Π(1 − δ_i), so for every event S, P(S) − e^{ε}Q(S) ≤ P(reveal) +
   sup_f (E_{G^P} f − e^{ε} E_{G^Q} f) over f ∈ [0, 1], where G^P, G^Q are the "good" interactions in which no
   reveal happens; P(reveal) = 1 − E_{G^P}[Π(1 − δ_i)] = E_{G^P}[D] ≤ sup over paths of D. An approximate-RDP fit
   (Bun, Dwork, Rothblum & Steinke 2018; Carmon et al. 2023) has, for each order α, laws within total variation a_i
   of laws whose Rényi divergence at α is within its curve (the pair may depend on α). Split the event S by J, the
   first certificate of (b) that holds at the end (a function of the transcript; step 2): for each finite order α_j,
   couple step by step with the good interaction G_j whose approximate-RDP fits draw from their α_j pairs, which
   costs E_{G^P}[Σ a_i] on the P side and e^{ε} E_{G^Q}[Σ a_i] on the Q side — expectations under DIFFERENT laws,
   so the only common bound is (1 + e^{ε}) sup Σ a_i (the slack enters on both sides, as in Carmon et al., Cor. 1);
   on {J = ∞} no approximate-RDP fit ran (their pure bound is +∞). With k finite orders the δ parts cost at most
   sup D + k (1 + e^{ε}) sup Σ a_i ≤ δ_A in all, by (a) — which (a1) and (a2), checked at every admission, give.
2. *RDP part.* In the good interaction G_j, M^j_t = exp((α_j − 1)(L_t − S_t(α_j))) is a non-negative
   supermartingale under G_j^P with M^j_0 = 1, since E[exp((α_j − 1) ℓ_i) | past] =
   exp((α_j − 1) D_{α_j}(P_i‖Q_i)) ≤ exp((α_j − 1) c_i(α_j)) (Feldman & Zrnic 2021, Thm. 3.1; Lécuyer 2021). For
   every x, (1 − e^{ε − x})_+ ≤ (1/α)((α − 1)/α)^{α − 1} e^{(α − 1)(x − ε)} (the pointwise inequality behind the
   conversion of Balle et al. 2020 / Canonne, Kamath & Steinke 2020, Prop. 12). The supremum over f is
   E_{G^P}[(1 − e^{ε − L_T})_+]. At the end T (bounded, or by Fatou) some certificate of (b) holds, since the last
   admission left one holding and only releases followed; let J be the first that holds (a function of the
   transcript). On {J = j}, S_T(α_j) ≤ ε − c_{α_j}(δ_j) and the bound above gives
   E[1{J = j} (1 − e^{ε − L_T})_+] ≤ δ_j · E[M^j_T] ≤ δ_j; on {J = ∞}, L_T ≤ E_∞ ≤ ε in the good interaction
   (randomised response, the Laplace mechanism and the pure releases have privacy loss bounded by their ε_∞), so
   (1 − e^{ε − L_T})_+ = 0. Adding, with step 0: δ(ε_max) ≤ δ_G + δ_D + δ_S + Σ_j δ_j ≤ δ_max. ∎

The union over certificates is the filter of Whitehouse, Ramdas, Rogers & Wu (ICML 2023) over a fixed set of
"orders" with fixed δ shares (∞ at 0); a single pinned order is Feldman & Zrnic's filter. The orders and the split
were chosen by measuring fits per budget (``benchmarks/filter_capacity.py``): orders sharing δ_R equally cost
Gaussian workloads several fits per budget (log k/(α* − 1) of ε at α*); the 1% share of the second order costs
them at most one fit in 83 and lets pure-dominated fits (objective perturbation) use their budget; the free
order-∞ certificate keeps pure/Laplace workloads at their basic-composition count.

**What the ledger reports.** :meth:`PrivacyFilter.measure` gives the share of the budget that a set of committed
fits uses by the filter's certificates: min(min_j S(α_j)/ρ_j, E_∞/ε_max, M/μ_G²) with ρ_j = ε_max − c_{α_j}(δ_j) the
RDP the α_j certificate allows (+∞ if (a1) or (a2) fails). Each certificate's share is additive over fits, so the
share tells how many more fits of the same kind fit; admission is exactly "share of committed + fit ≤ 1". The API shows
ε_max × share as "committed ε" and ε_max − committed as "remaining ε", and says that it is the filter's measure:
not an (ε, δ) guarantee of its own — the guarantee is (ε_max, δ_max) for whatever admitted sequence the analysts
choose. A fit's own ε (its cost converted at δ_max over the whole grid) remains the (ε, δ_max)-DP statement of that
fit alone; under RDP composition it is larger than its share of ε_max (82 Gaussian fits of own ε = 0.1 fill
(ε, δ) = (1, 10⁻⁶)).

**The allowance.** Solvers with δ-only parts size them before admission from :meth:`PrivacyFilter.allowance`:
half of what the committed fits left of δ_D for the δ of an (ε, δ) charge, and half of what they left of δ_S for an
approximate-RDP slack (in pot units; ÷ k (1 + e^{ε_max}) for the slack itself). Each such fit halves what is left
of its pot, so δ parts alone never exhaust it.

Numerics round against the user: shares are rounded up by a relative 1e-12 before they are compared with 1.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from .cost import PrivacyCost, compose_deltas
from .errors import PrivacyParameterError, require_non_negative, require_open_unit, require_positive
from .gaussian_dp import gdp_mu_for
from .orders import OrderGrid

FILTER_VERSION_V2 = "filter:rdp-orders+pure+split-delta-pot/v2"
"""The rule of budgets created before the GDP certificate: v1 checked D + k(1 + e^ε)A ≤ δ_A on the realised path;
v2 checks (a1) D ≤ δ_A − δ_S and (a2) k(1 + e^ε)A ≤ δ_S (migration 0009). A v2 filter has δ_G = 0."""

FILTER_VERSION = "filter:rdp-orders+pure+gdp+split-delta-pot/v3"
"""Names the admission rule of the module docstring (stored with every budget): v2 plus the GDP certificate."""

DEFAULT_GDP_SHARE = 0.5
"""The share of δ_R given to the GDP certificate in a new budget (module docstring; chosen by
``benchmarks/filter_capacity.py``)."""

DEFAULT_APPROXIMATE_DELTA_SHARE = 0.1
"""The share of δ_max set apart for δ-only parts when the owner does not choose (module docstring)."""

DEFAULT_SLACK_SHARE = 0.5
"""The share of δ_A set apart for approximate-RDP slacks (δ_S) when the owner does not choose (module docstring)."""

SECOND_ORDER_FACTOR = 10.0
"""The second pinned order is the grid order nearest this multiple of α* (module docstring)."""

SECOND_ORDER_SHARE = 0.01
"""The share of δ_R given to the second pinned order."""

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
        share: the share of the budget used, min(order_share, pure_share, gdp_share); +∞ when the δ pot is
            exceeded.
        epsilon: ε_max × share, the "committed ε" the API shows (module docstring).
        order_share: min_j S(α_j)/ρ_j, the best RDP certificate's share (+∞ if the curve has no bound at any
            pinned order, or nothing is allowed there).
        pure_share: E_∞/ε_max, the order-∞ certificate's share (+∞ if some fit has no pure bound).
        gdp_share: M/μ_G², the GDP certificate's share (+∞ if some fit is not Gaussian, or the filter has none).
        certificate: ``"order"``, ``"pure"`` or ``"gaussian"``, whichever gives ``share`` (None when it is +∞).
        certifying_order: the pinned order α_j that gives ``order_share`` when ``certificate`` is ``"order"``.
        delta_used: D + k (1 + e^{ε_max}) A, the δ pot δ_A in use (both parts).
        delta_fits: whether (a1) D ≤ δ_D and (a2) k (1 + e^{ε_max}) A ≤ δ_S hold.
        delta_parts: D, the composed δ parts (checked against δ_D by (a1)).
        slack_used: k (1 + e^{ε_max}) A, the weighted slacks (checked against δ_S by (a2)).
    """

    share: float
    epsilon: float
    order_share: float
    pure_share: float
    gdp_share: float
    certificate: str | None
    certifying_order: float | None
    delta_used: float
    delta_fits: bool
    delta_parts: float
    slack_used: float


@dataclass(frozen=True)
class DeltaAllowance:
    """How much of each part of the δ pot one more fit may use (module docstring, "The allowance"): ``delta`` of
    δ_D for the δ of an (ε, δ) charge; ``slack`` of δ_S, in pot units, for approximate-RDP slacks, where a slack a
    counts ``slack_weight`` · a (= k (1 + e^{ε_max}) a). Solvers with δ-only parts size them within it."""

    delta: float
    slack: float
    slack_weight: float

    @property
    def max_slack(self) -> float:
        """The largest total approximate-RDP slack within the allowance: ``slack`` / ``slack_weight``."""
        return self.slack / self.slack_weight


@dataclass(frozen=True)
class PrivacyFilter:
    """A dataset's admission rule (module docstring): public, fixed when the dataset is created."""

    epsilon_max: float
    delta_max: float
    grid: OrderGrid
    orders: tuple[float, ...]
    order_deltas: tuple[float, ...]
    approximate_delta: float
    slack_delta: float
    gdp_delta: float = 0.0
    version: str = FILTER_VERSION

    def __post_init__(self) -> None:
        require_positive("epsilon_max", self.epsilon_max)
        require_open_unit("delta_max", self.delta_max)
        require_non_negative("approximate_delta", self.approximate_delta)
        object.__setattr__(self, "slack_delta", _require_slack_delta(self.slack_delta, self.approximate_delta))
        object.__setattr__(self, "orders", tuple(float(a) for a in self.orders))
        object.__setattr__(self, "order_deltas", tuple(float(d) for d in self.order_deltas))
        if not self.orders or len(self.orders) != len(self.order_deltas):
            raise PrivacyParameterError("orders", "give one δ share per pinned order, and at least one order")
        for order, delta in zip(self.orders, self.order_deltas, strict=True):
            require_open_unit("order_deltas", delta)
            if not (order > _MIN_ORDER and np.isclose(self.grid.orders, order, rtol=0, atol=1e-12).any()):
                raise PrivacyParameterError("orders", f"{order!r} is not an order > 1.01 of grid {self.grid.name!r}")
        gdp_delta = require_non_negative("gdp_delta", self.gdp_delta)
        if gdp_delta > 0.0 and self.version == FILTER_VERSION_V2:
            raise PrivacyParameterError("gdp_delta", "a v2 filter has no GDP certificate")
        if self.rdp_delta + self.approximate_delta + gdp_delta > self.delta_max * (1.0 + 1e-12):
            raise PrivacyParameterError("approximate_delta", "the δ split must not exceed δ_max")
        object.__setattr__(self, "gdp_delta", float(gdp_delta))

    @classmethod
    def for_budget(
        cls,
        epsilon_max: float,
        delta_max: float,
        grid: OrderGrid,
        approximate_delta: float | None = None,
        slack_delta: float | None = None,
        gdp_share: float = DEFAULT_GDP_SHARE,
    ) -> PrivacyFilter:
        """The filter of a new budget: δ_A = ``approximate_delta`` (default δ_max/10), of which δ_S =
        ``slack_delta`` (default δ_A/2) for approximate-RDP slacks, δ_R = δ_max − δ_A, of which δ_G =
        :data:`DEFAULT_GDP_SHARE` · δ_R for the GDP certificate and the rest, δ_O, for the orders: the
        Gaussian-exhausting order α* at (ε_max, δ_O) with 99% of δ_O and the grid order nearest 10·α* with 1% (just
        α* with all of δ_O when there is no larger order). ``gdp_share`` = 0 gives the v2 filter (no GDP
        certificate), as budgets created before v3 have."""
        epsilon_max = require_positive("epsilon_max", epsilon_max)
        delta_max = require_open_unit("delta_max", delta_max)
        pot = DEFAULT_APPROXIMATE_DELTA_SHARE * delta_max if approximate_delta is None else approximate_delta
        pot = require_non_negative("approximate_delta", pot)
        if not pot < delta_max:
            raise PrivacyParameterError(
                "approximate_delta", f"must be below the budget's δ = {delta_max:g} (the rest goes to RDP), got {pot:g}"
            )
        slack = DEFAULT_SLACK_SHARE * pot if slack_delta is None else _require_slack_delta(slack_delta, pot)
        if not 0.0 <= gdp_share < 1.0:
            raise PrivacyParameterError("gdp_share", f"must lie in [0, 1), got {gdp_share!r}")
        gdp_delta = gdp_share * (delta_max - pot)
        rdp_delta = delta_max - pot - gdp_delta
        version = FILTER_VERSION if gdp_delta > 0.0 else FILTER_VERSION_V2
        first = gaussian_exhausting_order(grid, epsilon_max, rdp_delta)
        second = float(grid.orders[int(np.argmin(np.abs(grid.orders - SECOND_ORDER_FACTOR * first)))])
        if not second > first:
            return cls(epsilon_max, delta_max, grid, (first,), (rdp_delta,), pot, slack, gdp_delta, version)
        shares = ((1.0 - SECOND_ORDER_SHARE) * rdp_delta, SECOND_ORDER_SHARE * rdp_delta)
        return cls(epsilon_max, delta_max, grid, (first, second), shares, pot, slack, gdp_delta, version)

    @property
    def order(self) -> float:
        """α*, the first pinned order."""
        return self.orders[0]

    @property
    def rdp_delta(self) -> float:
        """δ_R: the δ of all the pinned orders."""
        return math.fsum(self.order_deltas)

    @property
    def parts_delta(self) -> float:
        """δ_D = δ_A − δ_S: the pot of the δ parts of (ε, δ) charges (condition (a1))."""
        return self.approximate_delta - self.slack_delta

    @functools.cached_property
    def gdp_mu(self) -> float:
        """μ_G: the largest GDP μ the GDP certificate allows (0 when the filter has none, δ_G = 0)."""
        return gdp_mu_for(self.epsilon_max, self.gdp_delta) if self.gdp_delta > 0.0 else 0.0

    @property
    def order_indices(self) -> tuple[int, ...]:
        """Indices of the pinned orders in the grid."""
        return tuple(int(np.argmin(np.abs(self.grid.orders - order))) for order in self.orders)

    @property
    def order_budgets(self) -> tuple[float, ...]:
        """ρ_j = ε_max − c_{α_j}(δ_j): the RDP each pinned order allows."""
        return tuple(
            self.epsilon_max - conversion_offset(order, delta)
            for order, delta in zip(self.orders, self.order_deltas, strict=True)
        )

    @property
    def order_budget(self) -> float:
        """ρ at α*: the RDP the first pinned order allows."""
        return self.order_budgets[0]

    @property
    def slack_weight(self) -> float:
        """k (1 + e^{ε_max}): the weight of an approximate-RDP slack in the δ pot (proof, step 1)."""
        return len(self.orders) * (1.0 + math.exp(min(self.epsilon_max, 700.0)))

    def delta_parts(self, cost: PrivacyCost) -> float:
        """D of ``cost``: its composed δ parts (condition (a1))."""
        return compose_deltas([cost.extra_delta])

    def slack_used(self, cost: PrivacyCost) -> float:
        """k (1 + e^{ε_max}) A of ``cost``: its weighted approximate-RDP slacks (condition (a2))."""
        return self.slack_weight * cost.approx_delta

    def delta_used(self, cost: PrivacyCost) -> float:
        """D + k (1 + e^{ε_max}) A of ``cost``: the δ pot δ_A in use, both parts together (shown, not checked)."""
        return self.delta_parts(cost) + self.slack_used(cost)

    def delta_fits(self, cost: PrivacyCost) -> bool:
        """Conditions (a1) D ≤ δ_D and (a2) k (1 + e^{ε_max}) A ≤ δ_S for ``cost``."""
        return self._parts_fit(self.delta_parts(cost), self.slack_used(cost))

    def _parts_fit(self, parts: float, slack: float) -> bool:
        """(a1) ``parts`` ≤ δ_D and (a2) ``slack`` ≤ δ_S, for D and k (1 + e^{ε_max}) A already computed."""
        return parts <= self.parts_delta and slack <= self.slack_delta

    def measure(self, cost: PrivacyCost) -> FilterReading:
        """What the certificates say of ``cost`` (usually the composition of the committed fits)."""
        if cost.grid != self.grid:
            raise PrivacyParameterError("grid", f"cost is on grid {cost.grid.name!r}, the filter on {self.grid.name!r}")
        shares = [
            _share(float(cost.rdp[index]), budget)
            for index, budget in zip(self.order_indices, self.order_budgets, strict=True)
        ]
        best_order = int(np.argmin(shares))
        order_share = shares[best_order]
        pure_share = _share(cost.pure_epsilon, self.epsilon_max)
        gdp_share = _share(cost.gdp_mu_squared, self.gdp_mu**2)
        parts, slack = self.delta_parts(cost), self.slack_used(cost)
        fits = self._parts_fit(parts, slack)
        best = min(order_share, pure_share, gdp_share) if fits else math.inf
        certificate = None
        if math.isfinite(best):
            certificate = "order" if order_share == best else ("pure" if pure_share == best else "gaussian")
        return FilterReading(
            share=best, epsilon=self.epsilon_max * best, order_share=order_share, pure_share=pure_share,
            gdp_share=gdp_share, certificate=certificate,
            certifying_order=self.orders[best_order] if certificate == "order" else None, delta_used=parts + slack,
            delta_fits=fits, delta_parts=parts, slack_used=slack,
        )  # fmt: skip

    def admits(self, cost: PrivacyCost) -> bool:
        """Conditions (a1), (a2) and (b) for ``cost`` = committed + the new fit."""
        return self.measure(cost).share <= 1.0

    def allowance(self, committed: PrivacyCost) -> DeltaAllowance:
        """Half of each part of the δ pot still unused: what the next fit's δ parts may take of δ_D, and its
        weighted slacks of δ_S (each fit halves what is left of its part, so δ parts alone never exhaust it). Zero
        for a part used up or empty."""
        parts_left = max(self.parts_delta - self.delta_parts(committed), 0.0)
        slack_left = max(self.slack_delta - self.slack_used(committed), 0.0)
        return DeltaAllowance(delta=parts_left / 2.0, slack=slack_left / 2.0, slack_weight=self.slack_weight)


def _require_slack_delta(slack_delta: float, approximate_delta: float) -> float:
    """δ_S must lie in [0, δ_A] (:class:`PrivacyParameterError` naming ``slack_delta`` otherwise)."""
    value = require_non_negative("slack_delta", slack_delta)
    if not value <= approximate_delta:
        raise PrivacyParameterError(
            "slack_delta", f"must be at most the budget's approximate_delta = {approximate_delta:g}, got {value:g}"
        )
    return value
