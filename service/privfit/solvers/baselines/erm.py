r"""The regularised GLM minimiser behind output and objective perturbation: a PUBLIC number of accelerated
gradient steps, a certified gradient norm, and a public floor on the tolerance.

Both perturbation mechanisms are stated for the exact minimiser of a strongly convex objective

    F(θ) = (1/n) Σ_i φ(⟨θ, x_i⟩, y_i) + (λ/2)‖θ‖² + (1/n)⟨b, θ⟩,        θ ∈ R^d, λ > 0,               (1)

(b = 0 for output perturbation; b the noise vector for objective perturbation). A numerical solver returns an
approximate θ̂ instead. Since F is λ-strongly convex, ‖θ̂ − θ*‖ ≤ ‖∇F(θ̂)‖ / λ, so a bound γ on the gradient
norm at θ̂ bounds the distance to the exact minimiser by γ/λ — which the solvers turn into an extra, accounted
sensitivity term (Iyengar et al., "Towards Practical Differentially Private Convex Optimization", IEEE S&P
2019, the approximate-minima idea).

**Nothing the analyst can see depends on the rows** (DESIGN §4, issue 18 part 2). The number of iterations,
the work per iteration and the progress sequence are functions of public constants only, and the outcome of
the certificate below is the same on every dataset within the declared bounds (in exact arithmetic).

**The method** (:func:`minimize_regularized_glm`). F is μ-strongly convex with μ = λ and L-smooth with
L = β + λ, β = c·B² the public smoothness of the loss (B: the design-row bound); κ = L/μ. Nesterov's accelerated
gradient method for this class, in the form of Bubeck (*Convex Optimization: Algorithms and Complexity*, 2015,
§3.7.1), from x_1 = y_1 = θ₀:

    y_{s+1} = x_s − ∇F(x_s)/L,      x_{s+1} = y_{s+1} + ((√κ − 1)/(√κ + 1)) (y_{s+1} − y_s),               (2)

runs exactly N steps and returns θ̂ = y_{N+1}. Its potential-function proof (Bubeck 2015, Thm 3.18; Nesterov,
*Introductory Lectures on Convex Optimization*, 2004, Thm 2.2.3 for the constant-step scheme) gives

    F(y_{N+1}) − F* ≤ (1 − 1/√κ)^N · (F(θ₀) − F* + (μ/2)‖θ₀ − θ*‖²) ≤ 2 (1 − 1/√κ)^N Δ₀,                 (3)

with Δ₀ ≥ F(θ₀) − F* public ((μ/2)‖θ₀ − θ*‖² ≤ F(θ₀) − F* by strong convexity). For an L-smooth convex F on
R^d, ‖∇F(θ)‖² ≤ 2L (F(θ) − F*) (Nesterov 2004, Thm 2.1.5, (2.1.7) with y = θ*), hence

    ‖∇F(θ̂)‖² ≤ 4 L Δ₀ (1 − 1/√κ)^N ≤ (γ/2)²    as soon as    N ≥ log(16 L Δ₀/γ²) / (−log(1 − 1/√κ)).      (4)

N (:attr:`MinimiserProblem.steps`) is that bound rounded up, plus one step of slack for the rounding of the
logarithms: a function of the public constants (β, λ, Δ₀, γ) only, so the iteration count, the work
N·n·d and the progress sequence are the same on every dataset.

**The triple momentum method** (the default where the public rule below allows it; issue 40). Van Scoy, Freeman &
Lynch, "The fastest known globally convergent first-order method for minimizing strongly convex functions", IEEE
Control Systems Letters 2(1), 2018: with ρ = 1 − 1/√κ and (a, b, c, e) = ((1 + ρ)/L, ρ²/(2 − ρ),
ρ²/((1 + ρ)(2 − ρ)), ρ²/(1 − ρ²)), from ξ₀ = ξ₁ = y₁ = θ₀, for s = 1 … N:

    ξ_{s+1} = (1 + b)ξ_s − bξ_{s−1} − a∇F(y_s),  y_{s+1} = (1 + c)ξ_{s+1} − cξ_s,  x_{s+1} = (1 + e)ξ_{s+1} − eξ_s, (2')

N gradient evaluations, θ̂ = x_{N+1}. Their Theorem 1 (eq. 4), as PEPit states it and checks it against the exact
worst case over the class computed by semidefinite programming (Goujaud, Moucer, Glineur, Hendrickx, Taylor &
Dieuleveut, PEPit, Math. Prog. Comp. 2024; example ``wc_triple_momentum``, this iteration and output point):
F(θ̂) − F* ≤ ρ^{2N}(Lκ/2)‖θ₀ − θ*‖². privfit takes TWICE that bound (a margin for the indexing of the published
statement and for the SDP's tolerance, which matched it to 4·10⁻⁵), with ‖θ₀ − θ*‖² ≤ 2Δ₀/μ and
‖∇F‖² ≤ 2L(F − F*):

    ‖∇F(θ̂)‖² ≤ 4Lκ²Δ₀ρ^{2N} ≤ (γ/2)²    as soon as    N ≥ log(16Lκ²Δ₀/γ²) / (−2 log(1 − 1/√κ)),         (4')

plus one step of slack as in (4). Per step the bound contracts by ρ² where (3) contracts by ρ, against a constant
κ² larger: on UCI Adult's defaults (κ from 290 to 11,600) (4') asks 30–37 % fewer steps than (4). The last point
extrapolates, x = ξ_{N+1} + e(ξ_{N+1} − ξ_N) with e ≈ √κ/2, which multiplies the iterates' rounding by about √κ/2:
a gradient error ≈ u·√κ·β·Θ/2 at ‖θ‖ ≤ Θ, against the certificate's own rounding bound ≈ 4u·d·β·Θ. The public rule
(:attr:`MinimiserProblem.preferred_method`) takes (2') when √κ ≤ 8·d, where that error stays below the rounding
bound the floor's margin already covers (module docstring, "The public floor"); (2) otherwise. The method is part of
the resolved settings (``minimiser``), so a fit replays with the method and N it was planned with.

The public start and its gap bound:

* θ₀ = −b/(nλ), the minimiser of the data-free part (λ/2)‖θ‖² + ⟨b, θ⟩/n. Then ∇F(θ₀) = (1/n)Σ φ'_i x_i, so
  ‖∇F(θ₀)‖ ≤ G₀ = sup|φ'|·B over margins |z| ≤ ‖θ₀‖B (``loss.lipschitz(B, B_y, ‖θ₀‖)``: a·B for the
  globally Lipschitz losses, B_y·B for the squared loss at θ₀ = 0), whatever b is — N does NOT depend on the
  noise either. Strong convexity gives F(θ₀) − F* ≤ ‖∇F(θ₀)‖²/(2λ) ≤ G₀²/(2λ) (the Polyak–Łojasiewicz bound).
* Output perturbation (b = 0, θ₀ = 0) may also use F(0) − F* ≤ F(0) ≤ ℓ_max(0) (φ ≥ 0): Δ₀ is the smaller.

Every iteration computes the full gradient in one compiled pass over the rows (:func:`_gradient_sum`: a fixed
loop of public length in 4 fixed row chunks, run on up to 4 threads and added in a fixed order, so the result does
not depend on the thread count; no data-dependent branch beyond the elementwise slope). The rows are stored by
their public column layout (:mod:`privfit.solvers.baselines.glm_design`): dense columns, whose margins are SIMD dot
products, and one (column, value) pair per declared one-hot block — the same X for the rows the encoder writes, at
p + g products per row instead of d (UCI Adult: 15 instead of 105).

**The certificate.** At θ̂ the gradient is recomputed and its norm plus a bound on that computation's own
rounding error (:func:`gradient_rounding_bound`) must be ≤ γ: only then does θ̂ satisfy ‖∇F(θ̂)‖ ≤ γ for the
privacy proof. By (4) the EXACT gradient norm is ≤ γ/2 on every dataset; the other γ/2 covers floating point.

**The public floor on γ** (:meth:`MinimiserProblem.tolerance_floor`). The rounding bound at the returned point
is at most ρ(Θ) with Θ a public bound on ‖θ̂‖: ‖θ*‖ ≤ min(R*, ‖θ₀‖ + G₀/λ) (R* when the caller knows a minimiser
radius; ‖θ₀ − θ*‖ ≤ ‖∇F(θ₀)‖/λ) and ‖θ̂ − θ*‖ ≤ γ/λ; ‖b‖ and ‖θ₀‖ are bounded at a public (1 − 2⁻⁴⁰) quantile of
the noise law. ρ is affine in Θ, ρ(Θ) = A + CΘ, and the floor is the least γ with γ ≥ 64·ρ(Θ₀ + γ/λ):

    γ_min = 64 · ρ(Θ₀) / (1 − 64·C/λ)          (refused when 64·C/λ ≥ 1/2: λ too small for double precision).

A request below γ_min is refused at resolve time (a 422 naming ``gradient_tolerance`` whose message states
γ_min); the default γ is never below it. At γ ≥ γ_min the computed gradient may deviate from the exact one
by up to 31ρ(Θ) before the certificate can fail; measured, the computed gradient norm after N steps is
2·10⁻⁵·ρ on UCI Adult and at most 6·10⁻³·ρ on the extreme datasets of ``tests/solvers`` (every row on the
bound, alternating signs, one class, zero rows; logistic, squared, Huber, smoothed hinge; ε from 0.1 to 8):
the rounding errors of the iterates do not accumulate in (2) for a strongly convex F.

**The guard** (a case the proof excludes). If the certificate still fails — only possible through floating-
point effects beyond the margin above, or a non-finite value — :class:`ERMSolution` says so
(``certified=False``) and the solvers release the same noise around the public point 0 instead of around θ̂:
the observable shape (status, progress, draws, metadata) equals a success, and the release is data-
independent. No exception is raised from the row values.

**Work cap.** A request whose N·n·d exceeds :data:`MAX_MINIMISER_WORK` (or N > :data:`MAX_MINIMISER_STEPS`) is
refused at resolve time, naming ``l2`` (κ grows as λ shrinks) and ``gradient_tolerance``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from privfit.solvers.base import ProgressReporter, SolverParameterError
from privfit.solvers.baselines.glm_design import GLMDesign, gradient_sum_kernel
from privfit.solvers.compiled_losses import LOSS_KINDS
from privfit.solvers.losses import GLMLoss, RegularizedLoss

__all__ = [
    "FLOOR_FACTOR",
    "MAX_MINIMISER_STEPS",
    "MAX_MINIMISER_WORK",
    "MINIMISERS",
    "ERMSolution",
    "Minimiser",
    "MinimiserProblem",
    "gradient_rounding_bound",
    "minimize_regularized_glm",
]

FloatArray = NDArray[np.float64]

_UNIT_ROUNDOFF = 2.0**-53
#: γ must be at least this multiple of the worst-case rounding bound ρ of the certificate's gradient.
FLOOR_FACTOR = 64.0
#: N·n·d above this is refused at resolve time (≈ 20 minutes of gradient passes on a 2-core machine).
MAX_MINIMISER_WORK = 1e12
#: N above this is refused at resolve time.
MAX_MINIMISER_STEPS = 10_000_000
#: The iterations of the minimiser: (2) and (2') of the module docstring.
Minimiser = Literal["nesterov", "triple_momentum"]
MINIMISERS: tuple[Minimiser, ...] = ("nesterov", "triple_momentum")
#: The gradient sum is computed over this many fixed row chunks, added in a fixed order (so the result does not
#: depend on how many threads run them), by up to this many threads (the compiled pass releases the GIL).
_GRADIENT_CHUNKS = 4


@dataclass(frozen=True)
class ERMSolution:
    """θ̂ after the public number of steps and its certificate.

    ``certified`` is True iff the computed gradient norm plus its rounding bound, ``gradient_bound``, is ≤ γ
    (and everything is finite): then ‖∇F(θ̂)‖ ≤ γ exactly. These values are computed from private rows and must
    never be released; only ``steps`` is public.
    """

    theta: FloatArray
    gradient_norm: float
    gradient_bound: float
    steps: int
    certified: bool


def gradient_rounding_bound(
    n: int, d: int, *, lipschitz: float, smoothness: float, l2: float, theta_norm: float, linear_term_norm: float
) -> float:
    r"""A bound on |‖∇F(θ)‖ computed − ‖∇F(θ)‖ exact| for (1), in IEEE double precision.

    Each coordinate of Xᵀφ' is a sum of n products, so its rounding error is ≤ n·u·Σ_i |φ'_i||x_ij| (Higham,
    *Accuracy and Stability of Numerical Algorithms*, §3.1, any summation order); in 2-norm over coordinates
    this is ≤ n·u·Σ_i |φ'_i|‖x_i‖ ≤ n·u·n·G, i.e. ≤ n·u·G after the division by n. The margins ⟨θ, x_i⟩ carry an
    error ≤ d·u·B‖θ‖, which moves φ' by ≤ c·d·u·B‖θ‖ (φ' is c-Lipschitz) and the gradient by ≤ β·d·u‖θ‖ with
    β = c·B². The regulariser and the linear term add ≤ u(λ‖θ‖ + ‖b‖/n) each. A factor 4 covers the slope's own
    evaluation error (a few ulps of |φ'|), the final norm and the additions. ``lipschitz`` must bound |φ'|·B at
    the margins of θ (for the squared loss it grows with ‖θ‖: :meth:`MinimiserProblem.rounding_bound`).
    """
    u = _UNIT_ROUNDOFF
    return 4.0 * u * ((n + d) * lipschitz + d * smoothness * theta_norm + l2 * theta_norm + linear_term_norm)


@dataclass(frozen=True)
class _Threads:
    """Threads for :func:`_gradient_sum`: the chunk indices ``groups`` — contiguous, in order — the last run by the
    calling thread and each other by one of ``executor``'s (a thread of its own saves a hand-off per step)."""

    executor: ThreadPoolExecutor
    groups: tuple[tuple[int, ...], ...]

    @classmethod
    def for_machine(cls) -> _Threads | None:
        """One group per core, up to :data:`_GRADIENT_CHUNKS`; None on one core."""
        workers = min(_GRADIENT_CHUNKS, os.cpu_count() or 1)
        if workers < 2:
            return None
        groups = tuple(tuple(int(i) for i in g) for g in np.array_split(np.arange(_GRADIENT_CHUNKS), workers))
        return cls(ThreadPoolExecutor(max_workers=workers - 1, thread_name_prefix="privfit-erm"), groups)


def _gradient_sum(
    design: GLMDesign,
    y: FloatArray,
    theta: FloatArray,
    kind: int,
    parameter: float,
    threads: _Threads | None = None,
) -> FloatArray:
    """Σ_i φ'(⟨θ, x̃_i⟩, y_i) x̃_i (the data term of ∇F times n): the compiled pass
    (:func:`~privfit.solvers.baselines.glm_design.gradient_sum_kernel`) over :data:`_GRADIENT_CHUNKS` fixed row
    chunks, on ``threads`` when given, the partial sums added in order (the same bits whatever the threads)."""
    n = design.n
    partial = np.empty((_GRADIENT_CHUNKS, design.dimension))

    def run(indices: tuple[int, ...]) -> None:
        for index in indices:
            start, stop = index * n // _GRADIENT_CHUNKS, (index + 1) * n // _GRADIENT_CHUNKS
            dense, columns, values = design.rows(start, stop)
            gradient_sum_kernel(
                dense, design.dense_columns, columns, values, y[start:stop], theta, kind, parameter, partial[index]
            )

    if threads is None:
        run(tuple(range(_GRADIENT_CHUNKS)))
    else:
        others = [threads.executor.submit(run, group) for group in threads.groups[:-1]]
        run(threads.groups[-1])
        for other in others:
            other.result()
    return np.asarray(partial.sum(axis=0), dtype=np.float64)


def _loss_kernel(loss: GLMLoss) -> tuple[int, float]:
    """The compiled slope's (kind, parameter) of ``loss`` (:func:`~privfit.solvers.compiled_losses.glm_slope`)."""
    return LOSS_KINDS[loss.name], float(next(iter(loss.public_params().values()), 0.0))


@dataclass(frozen=True)
class MinimiserProblem:
    """The PUBLIC description of objective (1) that the step count, the floor and the certificate come from.

    Attributes:
        n: rows; ``dimension``: length of θ (with the intercept column).
        loss: the unregularised GLM loss; ``l2``: λ > 0.
        design_norm_bound: B ≥ ‖x_i‖ (with the intercept column); ``label_bound``: B_y ≥ |y_i|.
        linear_term_norm_bound: a public bound on ‖b‖ (a high quantile of the noise law; 0 without b). It
            enters only the floor: the start bound ‖θ₀‖ ≤ it/(nλ) and the rounding of ⟨b, θ⟩/n.
        minimizer_norm_bound: a public radius known to contain θ* (R* of output perturbation), or ``inf``.
        initial_gap_bound: a public bound on F(θ₀) − F* besides G₀²/(2λ) (ℓ_max(0) when b = 0), or ``None``.
        method: the iteration, (2) ``"nesterov"`` or (2') ``"triple_momentum"``; ``None``: the public rule
            (:attr:`preferred_method`). The resolved settings record the one chosen.
    """

    n: int
    dimension: int
    loss: GLMLoss
    l2: float
    design_norm_bound: float
    label_bound: float
    linear_term_norm_bound: float = 0.0
    minimizer_norm_bound: float = math.inf
    initial_gap_bound: float | None = None
    method: Minimiser | None = None

    def __post_init__(self) -> None:
        if isinstance(self.loss, RegularizedLoss):
            raise SolverParameterError("loss", "pass the unregularised loss; λ is the l2 argument")
        if not (self.l2 > 0.0 and math.isfinite(self.l2)):
            raise SolverParameterError("l2", f"the objective must be strongly convex: l2 > 0, got {self.l2!r}")
        if self.method is None:
            object.__setattr__(self, "method", self.preferred_method)
        elif self.method not in MINIMISERS:
            raise SolverParameterError("minimiser", f"must be one of {MINIMISERS}, got {self.method!r}")

    # --- public constants ------------------------------------------------------------------------------
    @property
    def smoothness(self) -> float:
        """β = c·B² of the data term."""
        return self.loss.smoothness(self.design_norm_bound)

    @property
    def start_norm_bound(self) -> float:
        """A public bound on ‖θ₀‖ = ‖b‖/(nλ)."""
        return self.linear_term_norm_bound / (self.n * self.l2)

    @property
    def start_gradient_bound(self) -> float:
        """G₀ ≥ ‖∇F(θ₀)‖ = ‖(1/n) Σ φ'_i x_i‖: sup |φ'| · B over the margins |z| ≤ ‖θ₀‖·B."""
        return self.loss.lipschitz(self.design_norm_bound, self.label_bound, self.start_norm_bound)

    @property
    def gap_bound(self) -> float:
        """Δ₀ ≥ F(θ₀) − F*: G₀²/(2λ), or the caller's bound when smaller."""
        gap = self.start_gradient_bound**2 / (2.0 * self.l2)
        return gap if self.initial_gap_bound is None else min(gap, self.initial_gap_bound)

    @property
    def momentum(self) -> float:
        """(√κ − 1)/(√κ + 1) = (κ − 1)/(√κ + 1)², computed without cancellation."""
        ratio = self.smoothness / self.l2  # κ − 1
        return ratio / (math.sqrt(1.0 + ratio) + 1.0) ** 2

    @property
    def preferred_method(self) -> Minimiser:
        """The public rule of the module docstring: (2') when √κ ≤ 8·d, where its extrapolation's rounding stays
        below the certificate's own rounding bound; (2) otherwise."""
        kappa = 1.0 + self.smoothness / self.l2
        return "triple_momentum" if math.sqrt(kappa) <= 8.0 * self.dimension else "nesterov"

    def steps(self, tolerance: float) -> int:
        """N of (4) — the least integer with 4LΔ₀(1 − 1/√κ)^N ≤ (γ/2)² — or, for the triple momentum method, of
        (4') — with 4Lκ²Δ₀(1 − 1/√κ)^{2N} ≤ (γ/2)²; plus one (rounding of the logarithms)."""
        beta, lam = self.smoothness, self.l2
        gap = self.gap_bound
        if beta == 0.0 or gap == 0.0:
            return 1
        root = math.sqrt(1.0 + beta / lam)
        # log(1 − 1/√κ) = log(κ − 1) − log √κ − log(√κ + 1): no cancellation for κ near 1
        log_rate = math.log(beta / lam) - math.log(root) - math.log1p(root)
        log_needed = math.log(16.0 * (beta + lam) * gap) - 2.0 * math.log(tolerance)
        if self.method == "triple_momentum":
            log_needed += 4.0 * math.log(root)  # κ² in (4')
            log_rate *= 2.0  # ρ^{2N}
        if log_needed <= 0.0:
            return 1
        return math.ceil(log_needed / -log_rate) + 1

    def rounding_bound(self, theta_norm: float, linear_term_norm: float) -> float:
        """ρ at a point of norm ``theta_norm`` (:func:`gradient_rounding_bound`; |φ'|·B bounded at its margins)."""
        lipschitz = self.loss.lipschitz(self.design_norm_bound, self.label_bound, theta_norm)
        return gradient_rounding_bound(
            self.n, self.dimension, lipschitz=lipschitz, smoothness=self.smoothness, l2=self.l2,
            theta_norm=theta_norm, linear_term_norm=linear_term_norm,
        )  # fmt: skip

    def tolerance_floor(self) -> float:
        """γ_min = 64·ρ(Θ₀)/(1 − 64·C/λ) (module docstring), with Θ₀ ≥ ‖θ*‖ and ρ(Θ) = A + CΘ."""
        minimizer = min(self.minimizer_norm_bound, self.start_norm_bound + self.start_gradient_bound / self.l2)
        b = self.linear_term_norm_bound
        at_minimizer = self.rounding_bound(minimizer, b)
        slope = (self.rounding_bound(minimizer + 1.0, b) - at_minimizer) * (1.0 + 1e-6)  # C (ρ is affine)
        shrink = 1.0 - FLOOR_FACTOR * slope / self.l2
        if not shrink >= 0.5:
            raise SolverParameterError(
                "l2",
                f"l2 = {self.l2:g} is too small for a certified minimiser in double precision (the rounding of the "
                "gradient grows faster with the distance γ/λ than γ itself); use a larger l2",
            )
        return FLOOR_FACTOR * at_minimizer * (1.0 + 1e-6) / shrink

    def check_tolerance(self, tolerance: float) -> int:
        """The step count N for γ = ``tolerance``, after the public checks: γ ≥ the floor, N·n·d ≤ the work cap.

        Raises:
            SolverParameterError: on ``gradient_tolerance`` (below the floor, the message states it) or ``l2``
                (too much work; the message states N and the cap). Public inputs only.
        """
        if not (tolerance > 0.0 and math.isfinite(tolerance)):
            raise SolverParameterError("gradient_tolerance", f"must be > 0, got {tolerance!r}")
        floor = self.tolerance_floor()
        if tolerance < floor:
            raise SolverParameterError(
                "gradient_tolerance",
                f"gradient_tolerance = {tolerance:g} is below this fit's floor {floor:.6g}: the certificate "
                f"‖∇F‖ + rounding bound ≤ γ needs γ ≥ {FLOOR_FACTOR:g} × the double-precision rounding bound of the "
                "gradient at the public worst case (n, d, the declared bounds, l2); use gradient_tolerance ≥ "
                f"{floor:.6g} or omit it",
            )
        steps = self.steps(tolerance)
        work = float(steps) * self.n * self.dimension
        if steps > MAX_MINIMISER_STEPS or work > MAX_MINIMISER_WORK:
            raise SolverParameterError(
                "l2",
                f"the certified minimiser needs N = {steps} accelerated gradient passes (κ = "
                f"{1.0 + self.smoothness / self.l2:.4g}, gradient_tolerance = {tolerance:g}), i.e. N·n·d = "
                f"{work:.3g} > this server's cap of {MAX_MINIMISER_WORK:.3g} (or N > {MAX_MINIMISER_STEPS}); use a "
                "larger l2 or gradient_tolerance",
            )
        return steps


def minimize_regularized_glm(
    X: FloatArray,
    y: FloatArray,
    problem: MinimiserProblem,
    tolerance: float,
    *,
    linear_term: FloatArray | None = None,
    reporter: ProgressReporter | None = None,
    one_hot_blocks: Sequence[tuple[int, int]] = (),
) -> ERMSolution:
    r"""N = ``problem.check_tolerance(tolerance)`` steps of (2) from θ₀ = −b/(nλ), then the certificate.

    ``X`` is the design matrix (n × dimension, rows of norm ≤ B), ``y`` the labels, ``linear_term`` the vector b
    (the objective adds ⟨b, θ⟩/n), ``one_hot_blocks`` the public column ranges of its one-hot blocks (the
    objective is then of X̃, :mod:`~privfit.solvers.baselines.glm_design` (1): X itself for one-hot rows).
    ``reporter`` (total N + 1) is polled for a stop and advanced once per step: the sequence is public. Never
    raises on row values: a failed certificate is ``certified=False``.
    """
    steps = problem.check_tolerance(tolerance)
    n, d = X.shape
    if (n, d) != (problem.n, problem.dimension):
        raise SolverParameterError("X", f"must have shape ({problem.n}, {problem.dimension}), got {X.shape}")
    design = GLMDesign.of(X, one_hot_blocks)
    labels = np.ascontiguousarray(y, dtype=np.float64)
    kind, parameter = _loss_kernel(problem.loss)
    lam = problem.l2
    b = np.zeros(d) if linear_term is None else np.asarray(linear_term, dtype=np.float64)
    b_over_n = b / n

    threads = _Threads.for_machine()

    def gradient(theta: FloatArray) -> FloatArray:
        data_part = _gradient_sum(design, labels, theta, kind, parameter, threads) / n
        return np.asarray(data_part + lam * theta + b_over_n, dtype=np.float64)

    try:
        return _iterate(problem, tolerance, steps, gradient, b, reporter)
    finally:
        if threads is not None:
            threads.executor.shutdown(wait=True)


class _Nesterov:
    """(2) from x_1 = y_1 = ``start``: :meth:`step` is one step, :attr:`point` is y_{s+1} after s of them."""

    def __init__(self, problem: MinimiserProblem, start: FloatArray) -> None:
        self.smoothness = problem.smoothness + problem.l2
        self.momentum = problem.momentum
        self.ahead = start  # x_s
        self.point = start.copy()  # y_s

    def step(self, gradient: Callable[[FloatArray], FloatArray]) -> None:
        following = self.ahead - gradient(self.ahead) / self.smoothness  # y_{s+1}
        self.ahead = following + self.momentum * (following - self.point)
        self.point = following


class _TripleMomentum:
    """(2') from ξ₀ = ξ₁ = y₁ = ``start``: :meth:`step` is one gradient evaluation, :attr:`point` is x_{s+1} after s
    of them (Van Scoy et al. 2018; the point of (4'))."""

    def __init__(self, problem: MinimiserProblem, start: FloatArray) -> None:
        rate = 1.0 - 1.0 / math.sqrt(1.0 + problem.smoothness / problem.l2)  # ρ
        self.step_size = (1.0 + rate) / (problem.smoothness + problem.l2)
        self.heavy = rate**2 / (2.0 - rate)
        self.gradient_point = rate**2 / ((1.0 + rate) * (2.0 - rate))
        self.output_point = rate**2 / ((1.0 - rate) * (1.0 + rate))
        self.current, self.previous, self.at = start, start.copy(), start.copy()  # ξ_s, ξ_{s−1}, y_s
        self.point = start

    def step(self, gradient: Callable[[FloatArray], FloatArray]) -> None:
        current = self.current
        following = current + self.heavy * (current - self.previous) - self.step_size * gradient(self.at)  # ξ_{s+1}
        self.at = following + self.gradient_point * (following - current)  # y_{s+1}
        self.point = following + self.output_point * (following - current)  # x_{s+1}
        self.previous, self.current = current, following


def _iterate(
    problem: MinimiserProblem,
    tolerance: float,
    steps: int,
    gradient: Callable[[FloatArray], FloatArray],
    b: FloatArray,
    reporter: ProgressReporter | None,
) -> ERMSolution:
    """The N steps of (2) or (2') from θ₀ = −b/(nλ), then the certificate (:func:`minimize_regularized_glm`)."""
    start = -b / (problem.n * problem.l2)
    method = _TripleMomentum(problem, start) if problem.method == "triple_momentum" else _Nesterov(problem, start)
    with np.errstate(all="ignore"):
        for step in range(steps):
            if reporter is not None:
                reporter.check_stop(step)
            method.step(gradient)
            if reporter is not None:
                reporter.report(step + 1)
        theta = method.point
        final = gradient(theta)
        gradient_norm = float(np.linalg.norm(final))
        theta_norm = float(np.linalg.norm(theta))
    bound = math.inf
    if math.isfinite(gradient_norm) and math.isfinite(theta_norm):
        bound = gradient_norm + problem.rounding_bound(theta_norm, float(np.linalg.norm(b)))
    certified = bool(bound <= tolerance)
    return ERMSolution(theta=theta, gradient_norm=gradient_norm, gradient_bound=bound, steps=steps,
                       certified=certified)  # fmt: skip
