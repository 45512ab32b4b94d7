"""Closed-form Rényi-DP curves of the basic mechanisms, vectorised over a grid of orders.

Each function returns ``ε(α)`` for every order α of the grid (a float64 array aligned with the grid) such
that the mechanism is (α, ε(α))-RDP. Unless a docstring says otherwise the curves hold for privfit's
neighbouring relation, **replace-one** (DESIGN §1.1): the caller passes the sensitivity of the released
quantity under replace-one (for a sum of per-row terms each of norm ≤ G that is 2G, not G).

Sources: Mironov, "Rényi Differential Privacy", CSF 2017 (Gaussian Prop. 7, Laplace Prop. 6, composition
Prop. 1); Bun & Steinke, "Concentrated Differential Privacy", TCC 2016 (zCDP ↔ RDP, pure DP → RDP via randomized
response); Kairouz, McMahan, Song, Thakkar, Thakurta, Xu, "Practical and Private (Deep) Learning without
Sampling or Shuffling", ICML 2021, App. D (tree aggregation).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import special

from .errors import (
    PrivacyParameterError,
    require_count,
    require_non_negative,
    require_orders,
    require_positive,
)
from .orders import OrderGrid

Orders = OrderGrid | Sequence[float] | np.ndarray


def as_orders(orders: Orders) -> np.ndarray:
    """Return the orders of a grid, or validate and return an array of orders."""
    if isinstance(orders, OrderGrid):
        return orders.orders
    return require_orders(orders)


def gaussian_rdp(orders: Orders, *, sigma: float, sensitivity: float = 1.0) -> np.ndarray:
    """RDP of the Gaussian mechanism: ``ε(α) = α Δ² / (2σ²)`` (Mironov 2017, Prop. 7).

    Relation: any, with ``sensitivity`` Δ the L2 sensitivity under that relation; exact (tight) at every α.
    """
    alphas = as_orders(orders)
    sigma = require_positive("sigma", sigma)
    sensitivity = require_non_negative("sensitivity", sensitivity)
    return alphas * (sensitivity**2 / (2.0 * sigma**2))


def objective_perturbation_rdp(orders: Orders, *, noise_multiplier: float, jacobian_ratio: float) -> np.ndarray:
    """RDP of Gaussian objective perturbation of a GLM (the minimiser θ_b of (1/n)Σℓ + (λ/2)‖θ‖² + ⟨b, θ⟩/n,
    b ~ N(0, σ²I)), replace-one:

        ε(α) = log(1 + κ) + r²/2 + log M((α − 1) r) / (α − 1),    M(t) = E e^{tχ₂} = 1 + t√(2π) e^{t²/2} Φ(t),

    with r = 1/``noise_multiplier`` = 2G/σ (G the bound on ‖∇ℓ‖, 2G the replace-one gradient gap) and
    κ = ``jacobian_ratio`` = c·B²/(nλ) (c ≥ φ'', B ≥ ‖x‖). At α = 1 the limit is log(1 + κ) + r²/2 + r√(π/2).

    Proof. b ↦ θ_b is a bijection with b_D(θ) = −Σ_i∇ℓ(θ; z_i) − nλθ, so under θ ~ P_D, b_D(θ) ~ N(0, σ²I) and
    p_D(θ) = ν(b_D(θ))·det A_D(θ), A_D = Σ_i φ''_i x_i x_iᵀ + nλI (Chaudhuri, Monteleoni & Sarwate 2011, Thm 9).
    For neighbours differing in row k, (i) det A_D/det A_D' ≤ 1 + κ by the matrix determinant lemma, and
    (ii) b_D'(θ) = b_D(θ) + u(θ) with u = φ'_k x_k − φ'_k' x'_k in the FIXED plane S = span(x_k, x'_k) and
    ‖u‖ ≤ 2G (Kifer, Smith & Thakurta 2012, Thm 2's rank argument), so
    log ν(b)/ν(b + u) = (⟨b, u⟩ + ‖u‖²/2)/σ² ≤ r‖P_S b‖/σ + r²/2 where ‖P_S b‖/σ is χ with ≤ 2 degrees of freedom
    (stochastically ≤ χ₂). Hence, for α > 1,
    E_{P_D}[(p_D/p_D')^{α−1}] ≤ (1 + κ)^{α−1} e^{(α−1)r²/2} M((α − 1)r), which is the curve; the bound is
    symmetric in D, D'. (The structure follows the RDP analysis of objective perturbation of Redberg, Koskela &
    Wang, NeurIPS 2023; the constants here are derived for privfit's replace-one relation and sum
    normalisation.) Evaluated in log space (``log_ndtr``) and rounded up by a relative 1e-12.
    """
    alphas = as_orders(orders)
    z = require_positive("noise_multiplier", noise_multiplier)
    kappa = require_non_negative("jacobian_ratio", jacobian_ratio)
    r = 1.0 / z
    t = (alphas - 1.0) * r
    with np.errstate(divide="ignore"):
        log_tail = np.log(t) + 0.5 * np.log(2.0 * np.pi) + t * t / 2.0 + special.log_ndtr(t)
    log_mgf = np.logaddexp(0.0, log_tail)
    with np.errstate(divide="ignore", invalid="ignore"):
        linear = np.where(t > 0.0, log_mgf / np.where(t > 0.0, alphas - 1.0, 1.0), r * np.sqrt(np.pi / 2.0))
    curve: np.ndarray = (np.log1p(kappa) + r * r / 2.0 + linear) * (1.0 + 1e-12)
    return curve


def zcdp_rdp(orders: Orders, *, rho: float, xi: float = 0.0) -> np.ndarray:
    """The RDP curve of (ξ, ρ)-zCDP: ``ε(α) = ξ + ρ α`` (Bun & Steinke 2016, Def. 1.1)."""
    alphas = as_orders(orders)
    rho = require_non_negative("rho", rho)
    xi = require_non_negative("xi", xi)
    return xi + rho * alphas


def laplace_rdp(orders: Orders, *, scale: float, sensitivity: float = 1.0) -> np.ndarray:
    """RDP of the Laplace mechanism with scale b and L1 sensitivity Δ (Mironov 2017, Prop. 6), exact.

    With ``ε₀ = Δ/b``: for α > 1, ``ε(α) = ε₀ + log1p((α−1)(exp((1−2α)ε₀) − 1)/(2α−1)) / (α−1)``, which is the
    closed form ``1/(α−1) · log(α/(2α−1)·e^{(α−1)ε₀} + (α−1)/(2α−1)·e^{−αε₀})`` rearranged for stability;
    α = 1 gives the KL limit ``ε₀ + e^{−ε₀} − 1`` and α = ∞ gives ε₀. Relation: any, Δ measured under it.
    """
    alphas = as_orders(orders)
    scale = require_positive("scale", scale)
    sensitivity = require_non_negative("sensitivity", sensitivity)
    eps0 = sensitivity / scale
    out = np.empty_like(alphas)
    kl = alphas == 1.0
    inf = np.isinf(alphas)
    mid = ~(kl | inf)
    a = alphas[mid]
    out[mid] = eps0 + np.log1p((a - 1.0) * np.expm1(eps0 * (1.0 - 2.0 * a)) / (2.0 * a - 1.0)) / (a - 1.0)
    out[kl] = eps0 + np.expm1(-eps0)
    out[inf] = eps0
    return out


def pure_dp_rdp(orders: Orders, *, epsilon: float) -> np.ndarray:
    """The tight RDP curve implied by pure ε-DP: that of binary randomized response.

    Every ε-DP mechanism is dominated by randomized response with parameter ε (Kairouz, Oh, Viswanath 2015),
    so ``ε(α) = 1/(α−1) · log((e^{αε} + e^{(1−α)ε}) / (1 + e^ε))`` (≤ min(ε, αε²/2); Bun & Steinke 2016,
    Prop. 3.3). α = 1 gives the KL limit ε·tanh(ε/2), α = ∞ gives ε. This equals dp_accounting's
    ``RandomizedResponseDpEvent(p = 2/(1+e^ε), k = 2)`` under REPLACE_ONE. Relation: any.
    """
    alphas = as_orders(orders)
    epsilon = require_non_negative("epsilon", epsilon)
    out = np.empty_like(alphas)
    if epsilon == 0.0:
        out.fill(0.0)
        return out
    kl = alphas == 1.0
    inf = np.isinf(alphas)
    mid = ~(kl | inf)
    a = alphas[mid]
    # (e^{αε} + e^{(1−α)ε}) / (1 + e^ε) = cosh((α − ½)ε) / cosh(ε/2): no cancellation for small ε.
    out[mid] = np.minimum((_log_cosh((a - 0.5) * epsilon) - _log_cosh(0.5 * epsilon)) / (a - 1.0), epsilon)
    out[kl] = epsilon * np.tanh(epsilon / 2.0)
    out[inf] = epsilon
    return np.asarray(np.maximum(out, 0.0), dtype=np.float64)


def _log_cosh(x: np.ndarray | float) -> np.ndarray:
    """log cosh(x) to full relative precision: log1p(2 sinh²(x/2)) near 0, |x| + log1p(e^{−2|x|}) − log 2 beyond."""
    x = np.abs(np.asarray(x, dtype=np.float64))
    small = x < 1.0
    near = np.log1p(2.0 * np.sinh(np.where(small, x, 0.0) / 2.0) ** 2)
    far = x + np.log1p(np.exp(-2.0 * x)) - np.log(2.0)
    return np.where(small, near, far)


def tree_aggregation_depth(steps: int) -> int:
    """Number of tree nodes a leaf contributes to in a binary tree over ``steps`` leaves: ⌈log2(T+1)⌉."""
    steps = require_count("steps", steps)
    # Exact integer arithmetic: ⌈log2(T+1)⌉ = bit length of T.
    return int(steps).bit_length()


def tree_aggregation_rdp(
    orders: Orders, *, sigma: float, steps: int | Sequence[int], sensitivity: float = 1.0
) -> np.ndarray:
    """RDP of one pass of Gaussian tree aggregation (binary-tree prefix sums, Dwork et al. 2010; Chan et al. 2011).

    Every node of the tree over T leaves gets fresh N(0, σ²) noise; one row enters exactly one leaf and hence
    ⌈log2(T+1)⌉ nodes, so the release is a Gaussian mechanism of sensitivity Δ·sqrt(depth):
    ``ε(α) = α · ⌈log2(T+1)⌉ · Δ² / (2σ²)`` (Kairouz et al. 2021, App. D; dp_accounting's
    ``SingleEpochTreeAggregationDpEvent``). ``steps`` may list the leaf counts of trees restarted within the
    pass (each row still enters one leaf of one tree): the deepest tree decides. ``sensitivity`` is the L2
    change of one leaf when one row is replaced (2G for a gradient of norm ≤ G); leaves may be chosen
    adaptively from earlier released prefix sums. For several passes, self-compose.
    """
    alphas = as_orders(orders)
    sigma = require_positive("sigma", sigma)
    sensitivity = require_non_negative("sensitivity", sensitivity)
    counts: list[int] = list(steps) if isinstance(steps, Sequence | np.ndarray) else [steps]
    if not counts:
        raise PrivacyParameterError("steps", "must be a positive integer or a non-empty list of them")
    depth = max(tree_aggregation_depth(count) for count in counts)
    return alphas * (depth * sensitivity**2 / (2.0 * sigma**2))


def compose(*curves: np.ndarray) -> np.ndarray:
    """Adaptive sequential composition: the pointwise sum of RDP curves (Mironov 2017, Prop. 1)."""
    if not curves:
        raise PrivacyParameterError("curves", "at least one curve is required")
    first = np.asarray(curves[0], dtype=np.float64)
    for other in curves[1:]:
        if np.shape(other) != first.shape:
            raise PrivacyParameterError("curves", "all curves must be aligned with the same grid")
    return np.asarray(np.sum(np.stack([np.asarray(c, dtype=np.float64) for c in curves]), axis=0), dtype=np.float64)


def self_compose(curve: np.ndarray, count: int) -> np.ndarray:
    """k-fold adaptive composition of one mechanism: ``k · ε(α)``."""
    count = require_count("count", count, minimum=0)
    return count * np.asarray(curve, dtype=np.float64)
