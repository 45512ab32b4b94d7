"""A privacy cost: an RDP curve on a named grid plus two kinds of δ, and their composition.

This is the unit the ledger stores and sums (DESIGN §2). Three ingredients:

* ``rdp``: an RDP curve ε(α) on the grid's orders; ``+∞`` at an order means "no bound there" (an approximate-RDP
  guarantee valid only below an order cap, e.g. ``resque_localized``).
* ``extra_delta`` (δ_m): a mechanism that is only known to be (ε, δ)-DP enters as the pure-DP curve of its ε
  (:func:`~privfit.privacy.mechanisms.pure_dp_rdp`) plus its δ here. By Kairouz, Oh & Viswanath (2015), every
  (ε, δ)-DP pair of output laws is a post-processing of one that reveals the data with probability δ in BOTH
  worlds and is otherwise ε-randomised response; conditioned on no reveal, the event is pure ε-DP. These δ parts
  compose as ``1 − Π(1 − δ_i)`` (the probability that some event reveals).
* ``approx_delta`` (δ_a): the slack of APPROXIMATE RDP (Bun, Dwork, Rothblum & Steinke 2018; Carmon et al. 2023,
  Sec. 4.1): laws P, Q with D_α(P'‖Q') ≤ ε(α) for some P', Q' within total variation δ_a of P, Q. These compose
  additively with RDP curves at every order (Carmon et al., Lemma 3: (α, ε₁, δ₁) ∘ (α, ε₂, δ₂) = (α, ε₁ + ε₂,
  δ₁ + δ₂)), so the slacks add.
* ``pure_epsilon`` (ε_∞): a bound on the privacy loss of every outcome — the RDP of order ∞ — for mechanisms that
  have one (Laplace: Δ/b; a pure ε-DP release: ε; the ε of an (ε, δ)-DP event once its δ part is set apart), and
  ``+∞`` otherwise (Gaussian noise). The grid's largest order is below ∞, so this bound cannot be read off the
  curve: mechanisms that have it say so (:meth:`PrivacyCost.pure_dp`, :meth:`PrivacyCost.laplace`). Pure ε
  composes by addition (Dwork, McSherry, Nissim & Smith 2006), adaptively too; the ledger's filter uses it as its
  order-∞ certificate (:mod:`privfit.privacy.filter`). Forgetting it is safe: +∞ only forgoes that certificate.
* ``gdp_mu_squared`` (Σ μ²): for a cost made only of Gaussian releases, the sum of their μ² = (Δ/σ)² (plus the
  lattice term of :mod:`privfit.privacy.gaussian_dp`): the composition is √(Σ μ²)-GDP (Dong, Roth & Su 2022),
  adaptively too (Smith & Thakurta 2022). ``+∞`` for everything else; only :meth:`PrivacyCost.gaussian` sets it.
  The filter's GDP certificate uses it; forgetting it is safe, as for ``pure_epsilon``.

Conversion at a target δ. Conditioned on no reveal (probability ≥ 1 − δ_m in both worlds), the composition is
approximate RDP; any RDP → DP conversion applied to (P', Q') at δ' then gives, for every event S,
P(S) ≤ P'(S) + δ_a ≤ e^ε (Q(S) + δ_a) + δ' + δ_a (Carmon et al., Cor. 1). Altogether

    δ = δ_m + (1 − δ_m) · (δ' + (1 + e^ε) δ_a),

so the RDP part must meet δ' = 1 − (1 − δ)/(1 − δ_m) − (1 + e^ε) δ_a, which depends on the ε sought. Without
approximate slack this is dp_accounting's handling of its extra δ. With it, :meth:`PrivacyCost.epsilon` finds the
least ε with g(ε) ≤ ε, where g(ε) is the conversion at δ'(ε): g is non-decreasing, so iterating ε ← g(ε) from the
slack-free conversion climbs to its least fixed point, and any ε with g(ε) ≤ ε is a valid (ε, δ) statement.
If δ_m ≥ δ, or δ' ≤ 0 for every ε tried, no ε is achievable and ε = ∞.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from .conversion import Conversion, epsilon_at_delta
from .errors import PrivacyParameterError, require_count, require_non_negative, require_open_unit
from .gaussian_dp import gaussian_mu_squared, gdp_epsilon
from .mechanisms import gaussian_rdp, laplace_rdp, pure_dp_rdp
from .orders import DEFAULT_GRID, OrderGrid


def compose_deltas(deltas: Iterable[float] | np.ndarray) -> float:
    """``1 − Π(1 − δ_i)`` computed stably as ``−expm1(Σ log1p(−δ_i))``."""
    values = np.asarray(list(deltas) if not isinstance(deltas, np.ndarray) else deltas, dtype=np.float64)
    if values.size == 0:
        return 0.0
    if np.isnan(values).any() or (values < 0).any() or (values > 1).any():
        raise PrivacyParameterError("delta", "every δ must lie in [0, 1]")
    return float(-np.expm1(np.sum(np.log1p(-values))))


def curve_to_json(rdp: np.ndarray) -> list[float | None]:
    """A curve as JSON values: floats, with ``None`` (JSON null) for +∞ ("no bound at this order")."""
    return [float(v) if math.isfinite(v) else None for v in np.asarray(rdp, dtype=np.float64)]


def curve_from_json(values: Iterable[float | None]) -> np.ndarray:
    """The inverse of :func:`curve_to_json`: ``None`` becomes +∞."""
    return np.asarray([math.inf if v is None else float(v) for v in values], dtype=np.float64)


def unbounded_to_json(value: float) -> float | None:
    """A bound that may be +∞ (a pure ε, a GDP Σ μ²) as JSON: the float, or ``None`` for +∞ (no bound)."""
    return float(value) if math.isfinite(value) else None


def unbounded_from_json(value: float | None) -> float:
    """The inverse of :func:`unbounded_to_json`."""
    return math.inf if value is None else float(value)


pure_epsilon_to_json = unbounded_to_json
pure_epsilon_from_json = unbounded_from_json


def rdp_part_delta(delta: float, extra_delta: float) -> float:
    """The δ' left for the RDP part when approximate-DP events already used ``extra_delta`` (0 if none left)."""
    if extra_delta <= 0.0:
        return delta
    if extra_delta >= delta:
        return 0.0
    return 1.0 - (1.0 - delta) / (1.0 - extra_delta)


@dataclass(frozen=True)
class PrivacyCost:
    """An RDP curve on ``grid`` plus an approximate-DP δ, an approximate-RDP slack, a pure-ε bound and a GDP Σ μ²
    (module docstring); composition is ``+`` and k-fold is ``* k``."""

    rdp: np.ndarray = field(repr=False)
    grid: OrderGrid = DEFAULT_GRID
    extra_delta: float = 0.0
    approx_delta: float = 0.0
    pure_epsilon: float = math.inf
    gdp_mu_squared: float = math.inf

    def __post_init__(self) -> None:
        curve = np.array(self.rdp, dtype=np.float64)
        if curve.shape != self.grid.orders.shape:
            raise PrivacyParameterError(
                "rdp", f"curve has {curve.size} values but grid {self.grid.name!r} has {len(self.grid)} orders"
            )
        if np.isnan(curve).any() or (curve < 0).any():
            raise PrivacyParameterError("rdp", "an RDP curve must be ≥ 0 and contain no NaN")
        for name in ("extra_delta", "approx_delta"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0 or math.isnan(value):
                raise PrivacyParameterError(name, f"must lie in [0, 1), got {value!r}")
        if math.isnan(self.pure_epsilon) or self.pure_epsilon < 0.0:
            raise PrivacyParameterError("pure_epsilon", f"must be ≥ 0 (+∞ for none), got {self.pure_epsilon!r}")
        object.__setattr__(self, "pure_epsilon", float(self.pure_epsilon))
        if math.isnan(self.gdp_mu_squared) or self.gdp_mu_squared < 0.0:
            raise PrivacyParameterError("gdp_mu_squared", f"must be ≥ 0 (+∞ for none), got {self.gdp_mu_squared!r}")
        if math.isfinite(self.gdp_mu_squared) and (self.extra_delta > 0.0 or self.approx_delta > 0.0):
            raise PrivacyParameterError("gdp_mu_squared", "a cost with δ parts or slacks is not Gaussian-DP")
        object.__setattr__(self, "gdp_mu_squared", float(self.gdp_mu_squared))
        curve.setflags(write=False)
        object.__setattr__(self, "rdp", curve)

    @classmethod
    def zero(cls, grid: OrderGrid = DEFAULT_GRID) -> PrivacyCost:
        """The cost of releasing nothing."""
        return cls(np.zeros(len(grid)), grid, pure_epsilon=0.0, gdp_mu_squared=0.0)

    @classmethod
    def pure_dp(cls, epsilon: float, grid: OrderGrid = DEFAULT_GRID) -> PrivacyCost:
        """A pure ε-DP release: the tight curve of randomized response and the order-∞ bound ε."""
        epsilon = require_non_negative("epsilon", epsilon)
        return cls(pure_dp_rdp(grid, epsilon=epsilon), grid, pure_epsilon=epsilon)

    @classmethod
    def laplace(
        cls, grid: OrderGrid = DEFAULT_GRID, *, scale: float, sensitivity: float = 1.0, count: int = 1
    ) -> PrivacyCost:
        """``count`` Laplace releases of L1 sensitivity Δ and scale b: the exact curve (Mironov 2017, Prop. 6) and
        the order-∞ bound count·Δ/b."""
        count = require_count("count", count)
        curve = laplace_rdp(grid, scale=scale, sensitivity=sensitivity)
        return cls(count * curve, grid, pure_epsilon=count * (float(sensitivity) / float(scale)))

    @classmethod
    def gaussian(
        cls,
        grid: OrderGrid = DEFAULT_GRID,
        *,
        sigma: float,
        sensitivity: float = 1.0,
        count: int = 1,
        coordinates: int,
    ) -> PrivacyCost:
        """``count`` Gaussian releases of L2 sensitivity Δ, standard deviation σ and at most ``coordinates``
        coordinates each (the continuous or the exact lattice sampler: :mod:`privfit.privacy.noise`): the curve
        count·αΔ²/(2σ²) and the GDP Σ μ² = count·((Δ/σ)² + coordinates·κ) (:mod:`privfit.privacy.gaussian_dp`)."""
        count = require_count("count", count)
        curve = gaussian_rdp(grid, sigma=sigma, sensitivity=sensitivity)
        mu_squared = gaussian_mu_squared(sigma=sigma, sensitivity=sensitivity, count=count, coordinates=coordinates)
        return cls(count * curve, grid, gdp_mu_squared=mu_squared)

    @classmethod
    def approximate_dp(cls, epsilon: float, delta: float, grid: OrderGrid = DEFAULT_GRID) -> PrivacyCost:
        """An (ε, δ)-DP event: ε enters as the tight pure-DP curve, δ as the approximate part."""
        epsilon = require_non_negative("epsilon", epsilon)
        delta = require_non_negative("delta", delta)
        if delta >= 1.0:
            raise PrivacyParameterError("delta", f"must lie in [0, 1), got {delta!r}")
        return cls(pure_dp_rdp(grid, epsilon=epsilon), grid, delta, pure_epsilon=epsilon)

    @classmethod
    def approximate_rdp(
        cls, rdp: np.ndarray, approx_delta: float, grid: OrderGrid = DEFAULT_GRID, *, order_cap: float = math.inf
    ) -> PrivacyCost:
        """An approximate-RDP event (α, ε(α), δ_a) valid for orders α < ``order_cap``; ε = +∞ at the others."""
        approx_delta = require_non_negative("approx_delta", approx_delta)
        curve = np.where(grid.orders < order_cap, np.asarray(rdp, dtype=np.float64), np.inf)
        return cls(curve, grid, 0.0, approx_delta)

    def __add__(self, other: PrivacyCost) -> PrivacyCost:
        if not isinstance(other, PrivacyCost):
            return NotImplemented
        if other.grid != self.grid:
            raise PrivacyParameterError(
                "grid", f"cannot compose costs on grids {self.grid.name!r} and {other.grid.name!r}"
            )
        return PrivacyCost(
            self.rdp + other.rdp,
            self.grid,
            compose_deltas([self.extra_delta, other.extra_delta]),
            self.approx_delta + other.approx_delta,
            self.pure_epsilon + other.pure_epsilon,
            self.gdp_mu_squared + other.gdp_mu_squared,
        )

    def __mul__(self, count: int) -> PrivacyCost:
        count = require_count("count", count, minimum=0)
        if count == 0:
            return PrivacyCost.zero(self.grid)
        extra = float(-np.expm1(count * np.log1p(-self.extra_delta)))
        return PrivacyCost(
            count * self.rdp, self.grid, extra, count * self.approx_delta, count * self.pure_epsilon,
            count * self.gdp_mu_squared,
        )  # fmt: skip

    __rmul__ = __mul__

    def epsilon(self, delta: float) -> Conversion:
        """ε at ``delta`` of this cost, with the optimal order (module docstring: δ' = 1 − (1 − δ)/(1 − δ_m) − (1 +
        e^ε) δ_a for the RDP part, the least ε consistent with its own δ'). A cost with a GDP bound is also
        (ε_G, δ)-DP with ε_G from the exact Gaussian curve (:func:`~privfit.privacy.gaussian_dp.gdp_epsilon`);
        when that is smaller it is the answer, with ``optimal_order`` = +∞ (no RDP order: the exact curve)."""
        delta = require_open_unit("delta", delta)
        rdp = self._rdp_epsilon(delta)
        if math.isfinite(self.gdp_mu_squared):
            exact = gdp_epsilon(self.gdp_mu_squared, delta)
            if exact < rdp.epsilon:
                return Conversion(exact, delta, math.inf, False)
        return rdp

    def _rdp_epsilon(self, delta: float) -> Conversion:
        """ε at ``delta`` by RDP conversion of the curve and the δ parts (:meth:`epsilon`)."""
        rdp_delta = rdp_part_delta(delta, self.extra_delta)
        if rdp_delta <= 0.0:
            return Conversion(math.inf, delta, float(self.grid.orders[-1]), True)
        result = epsilon_at_delta(self.grid, self.rdp, rdp_delta)
        if self.approx_delta > 0.0:
            result = self._with_approximate_slack(rdp_delta, result)
        return Conversion(result.epsilon, delta, result.optimal_order, result.at_grid_edge)

    def _with_approximate_slack(self, rdp_delta: float, slack_free: Conversion) -> Conversion:
        """The least ε with g(ε) ≤ ε, g(ε) = conversion at δ'(ε) = rdp_delta − (1 + e^ε) δ_a (module docstring)."""

        def conversion_at(epsilon: float) -> Conversion | None:
            if not math.isfinite(epsilon) or epsilon > _MAX_SLACK_EPSILON:
                return None
            remaining = rdp_delta - (1.0 + math.exp(epsilon)) * self.approx_delta
            return epsilon_at_delta(self.grid, self.rdp, remaining) if remaining > 0.0 else None

        epsilon = slack_free.epsilon
        for _ in range(_SLACK_ITERATIONS):
            step = conversion_at(epsilon)
            if step is None:
                break
            if step.epsilon <= epsilon:  # g(ε) ≤ ε: a valid statement, and ε ≤ the least fixed point + tolerance
                return Conversion(epsilon, rdp_delta, step.optimal_order, step.at_grid_edge)
            # climb towards the least fixed point; the small inflation makes g(ε) ≤ ε reachable in floating point
            epsilon = step.epsilon * (1.0 + _SLACK_RELATIVE_STEP) + _SLACK_ABSOLUTE_STEP
        return Conversion(math.inf, rdp_delta, float(self.grid.orders[-1]), True)


#: Fixed-point search of :meth:`PrivacyCost.epsilon` with approximate-RDP slack.
_SLACK_ITERATIONS = 200
_SLACK_RELATIVE_STEP = 1e-9
_SLACK_ABSOLUTE_STEP = 1e-12
_MAX_SLACK_EPSILON = 700.0  # e^ε overflows beyond; such an ε is useless anyway


def total_epsilon(
    curves: np.ndarray,
    extra_deltas: np.ndarray | None,
    delta: float,
    grid: OrderGrid = DEFAULT_GRID,
    approx_deltas: np.ndarray | None = None,
) -> Conversion:
    """ε at ``delta`` of a whole ledger: ``curves`` (n_entries × n_orders) summed, δ parts composed (the
    approximate-RDP slacks ``approx_deltas`` added).

    One vectorised pass (a column sum and one conversion), fast enough for 10⁴-entry ledgers on every debit.
    """
    matrix = np.asarray(curves, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[1] != len(grid):
        raise PrivacyParameterError("curves", f"expected shape (entries, {len(grid)}), got {matrix.shape}")
    extra = 0.0 if extra_deltas is None else compose_deltas(np.asarray(extra_deltas, dtype=np.float64))
    approx = 0.0 if approx_deltas is None else float(np.sum(np.asarray(approx_deltas, dtype=np.float64)))
    return PrivacyCost(matrix.sum(axis=0), grid, extra, approx).epsilon(delta)
