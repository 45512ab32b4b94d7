"""Synthetic benchmark of ``dp_lazy_oco`` (P-COMW-TG, private lazy OCO) next to the Gaussian mechanism and dp_otb.

    .venv/bin/python benchmarks/lazy_oco.py [--n 100000] [--seeds 3] [--epsilons 0.5 1 2] [--delta 1e-6]
                                            [--test-rows 20000] [--repeats 2] [--quick]

Everything runs in one process on seeded synthetic rows (public, so seeded noise is allowed:
``make_generator(seed, data_is_public=True)``). Each privfit fit goes through the public solver interface as the
service does: ``solver.plan(params, meta, target_epsilon=ε, delta=δ)``, a check that the charged
``plan.cost.epsilon(δ).epsilon`` is ≤ ε (the run stops otherwise), then ``solver.fit(X, y, meta, plan.resolved,
generator)``. ``PublicMetadata(n, d, row_norm_bound=1, label_bound=1)``: every row has ‖x‖ ≤ 1 and |y| ≤ 1, so the
vector each row contributes (x or y·x) has norm ≤ C = 1. Seed i draws new rows (parts 1-2) and seeds every
method's noise with i, the same i at every ε (common random numbers: the columns of one table are correlated).

Part 1 (mean estimation). n rows in d = 10: μ + N(0, 0.4²/d·I) with ‖μ‖ = 0.5, rows outside the unit ball scaled
onto it. Error ‖θ̂ − z̄‖₂ against the EMPIRICAL mean z̄ of the rows (mean ± sd over the seeds) for
* ``dp_lazy_oco`` ``{"model": "mean"}`` (z = "x"; defaults: K = the unit ball, G = R + C = 2, D = 2);
* the Gaussian mechanism z̄ + N(0, σ²I), σ = privfit's ``gaussian_sigma(ε, δ, sensitivity=2/n).noise`` (replace-one
  neighbours: replacing one row of norm ≤ 1 moves the mean by ≤ 2/n; privfit's default RDP order grid);
* ``dp_otb``: n/a. dp_otb fits GLMs only (losses ℓ(⟨θ, x⟩, y) of a margin); ½‖θ − x‖² is not a function of
  ⟨θ, x⟩, so dp_otb has no mean model (its model registry refuses it) and there is nothing to run.
Also printed: ‖z̄‖ (= the error of the trivial estimate θ = 0), the ratios error(lazy)/error(Gaussian) and
error(lazy)/‖z̄‖, and the "bias-only" prediction (1 − s)‖z̄‖, where s = (1/T)Σ_{t<T} t/(λ + t) is how far the
Gibbs means m_t = Σ_{τ<t} z_τ/(λ + t − 1) move from 0 towards z̄ on average (ball truncation, the lazy holding
and the noise of the draws ignored).

Part 2 (quadratic-loss regression). x uniform on the unit sphere in d = 10 (so E[xxᵀ] = I/d, public), y =
clip(⟨w*, x⟩ + N(0, 0.1²), −1, 1) with ‖w*‖ = 0.8 (a new random direction per seed; the fraction of labels
clipped is printed, it is ~0); a fresh test set of 20 000 rows. Test excess MSE over non-private OLS
(``numpy.linalg.lstsq`` on the training rows, no intercept) of
* ``dp_lazy_oco`` ``{"model": "mean", "z": "yx"}``: the loss ½‖θ‖² − y⟨x, θ⟩, whose minimiser is E[yx] =
  E[xxᵀ]w = w/d; θ̂ = d·(released coefficients) — a public rescaling by the KNOWN design covariance I/d (it would
  be wrong for a non-isotropic design);
* the Gaussian mechanism on the mean of y·x (‖yx‖ ≤ 1, sensitivity 2/n), θ̂ = d·(noisy mean);
* ``dp_otb`` ``{"model": "linear", "fit_intercept": False}`` with every other setting at its default (radius 1 ≥
  ‖w*‖) on the same rows;
* two references: θ = 0 (the trivial predictor) and the non-private d·mean(yx) (the floor of the rescaled-mean
  estimators: their excess over OLS without any noise).

Part 3 (throughput). n rows of the part-2 design at d ∈ {10, 100}, ε = 1: seconds of ``plan`` and of ``fit``
(``time.perf_counter`` around the call only, data generation excluded; best of ``--repeats``) and fit rows/s for
dp_lazy_oco (mean, z = "yx"), dp_otb (linear) and the Gaussian mechanism (plan = the σ calibration, fit = mean of
y·x + noise), with rows/s relative to dp_otb's. Every solver is warmed up once on 2 000 rows first (numba
compilation, first-call imports).

Also printed: dp_lazy_oco's resolved public parameters per ε (``plan.resolved``): the charged ε (ledger) and the
paper's (ε, δ_total), u = βG²/λ, p, the switch cap B_int, the mean number of switches of the fits (released
with ``report_switches``, post-processing), λ, β, the sd (βλ)^{-1/2} of a Gibbs draw per coordinate, the shrink
s, thm:regret's average bound R_T/T, R_T/(T·GD) (the unit of the spec's §4.3 table) and the error bound √(2R_T/T)
it implies for the mean (½‖θ − z̄‖² is θ's excess empirical risk). And the Gaussian σ next to the σ of
``dp_accounting``'s ``RdpAccountant`` (REPLACE_ONE, ``GaussianDpEvent(σ/Δ)``, its default orders — the same grid
as privfit's default; smallest σ with ε ≤ target, by bisection).

Why the numbers look as they do (spec seed-003 §4.3). The paper's accountant (thm:dp) charges 8u²T/p² plus
log²Φ per switch with log Φ ≈ 2·sqrt(72u·log(2/δ')), so at T = 1e5 the calibration forces u ≈ 4e-11 (ε = 1);
then λ = G·sqrt(2(T + d log T/u))/D ≈ 2.4e6 ≫ T. Two consequences: the Gibbs means only move s ≈ T/(2λ) ≈ 2% of
the way from 0 to the data, so the release is ≈ 0 and the error is ≈ ‖z̄‖ (that of θ = 0) — the measured error
matches the bias-only prediction (1 − s)‖z̄‖ to < 0.5%; and βλ ≈ 2d·log T/D² does not depend on ε, so every
draw has per-coordinate sd ≈ 0.13 whatever the budget (averaging ~2 500 switches leaves ~0.004). The bound
R_T/(T·GD) ≈ 24 at ε = 1 is the spec's number, and √(2R_T/T) ≫ D: the guarantee is vacuous at this T. This is
the price of releasing all T iterates privately; the one-shot Gaussian mechanism is 3-4 orders of magnitude more
accurate, as the spec says (§4.3 take-away 5). At n = 10 000 (``--quick``) s ≈ 0.5% and the draws' noise can make
the regression excess exceed θ = 0's.

``--quick``: n = 10 000, 1 seed, 5 000 test rows, 1 timing repeat (smoke run). No thresholds: this reports, it
does not judge.

Recorded run (default arguments; 2-core AMD EPYC VM, Python 3.11.7, numpy 2.4.6, dp_accounting 0.6.0):

    warm-up: one fit of dp_lazy_oco and dp_otb on 2000 rows, 0.45 s (untimed)

    Gaussian mechanism calibration: sensitivity Δ = 2C/n = 2e-05 (replace-one), δ = 1e-06

    | ε | σ privfit (gaussian_sigma) | σ dp_accounting (RdpAccountant) | privfit / dp_accounting |
    |---:|---:|---:|---:|
    | 0.5 | 1.735328e-04 | 1.735327e-04 | 1.00000 |
    | 1 | 9.061759e-05 | 9.061757e-05 | 1.00000 |
    | 2 | 4.765157e-05 | 4.765155e-05 | 1.00000 |

    ## Part 1: private mean estimation

    n = 100000, d = 10, δ = 1e-06, 3 seed(s); ‖z̄‖ = 5.0015e-01 ± 2.7e-04

    error ‖θ̂ − z̄‖₂ (mean ± sd over seeds)

    | method | ε = 0.5 | ε = 1 | ε = 2 |
    |---|---:|---:|---:|
    | dp_lazy_oco (mean, z = x) | 4.936e-01 ± 5.8e-03 | 4.888e-01 ± 5.3e-03 | 4.796e-01 ± 4.5e-03 |
    | Gaussian mechanism | 5.262e-04 ± 3.2e-05 | 2.748e-04 ± 1.7e-05 | 1.445e-04 ± 8.7e-06 |
    | dp_otb | n/a (not a GLM) | n/a (not a GLM) | n/a (not a GLM) |
    | θ = 0 (error = ‖z̄‖) | 5.001e-01 ± 2.7e-04 | 5.001e-01 ± 2.7e-04 | 5.001e-01 ± 2.7e-04 |
    | bias-only prediction (1 − s)‖z̄‖ | 4.950e-01 ± 2.7e-04 | 4.902e-01 ± 2.7e-04 | 4.812e-01 ± 2.6e-04 |
    | error lazy / Gaussian | 938 | 1.78e+03 | 3.32e+03 |
    | error lazy / ‖z̄‖ | 0.987 | 0.977 | 0.959 |

    dp_lazy_oco resolved parameters (model mean, z = x)

    | ε | charged ε | paper ε | paper δ_total | u = βG²/λ | p | switch cap | switches (mean) |
    |---:|---:|---:|---:|---:|---:|---:|---:|
    | 0.5 | 0.4997 | 0.4940 | 3.25e-07 | 9.928e-12 | 0.0239 | 7393 | 2426 |
    | 1 | 0.9997 | 0.9939 | 3.25e-07 | 3.882e-11 | 0.0239 | 7597 | 2472 |
    | 2 | 1.9997 | 1.9937 | 3.25e-07 | 1.464e-10 | 0.0239 | 7985 | 2536 |

    | ε | λ | β | Gibbs sd (βλ)^-½ | shrink s | R_T/T | R_T/(T·GD) | √(2R_T/T) |
    |---:|---:|---:|---:|---:|---:|---:|---:|
    | 0.5 | 4.816e+06 | 1.195e-05 | 0.1318 | 0.0102 | 193 | 48.2 | 19.6 |
    | 1 | 2.436e+06 | 2.364e-05 | 0.1318 | 0.0200 | 97.4 | 24.4 | 14 |
    | 2 | 1.254e+06 | 4.59e-05 | 0.1318 | 0.0379 | 50.2 | 12.5 | 10 |

    T = n = 100000, d = 10, R = 1, C = 1, G = 2, D = 2 (GD = 4), δ_cal = 5e-07;
    R_T/T = thm:regret's bound per round (the spec's §4.3 table is R_T/(T·GD))

    ## Part 2: quadratic-loss regression (isotropic design)

    n = 100000 train, 20000 test, d = 10, x uniform on the unit sphere, ‖w*‖ = 0.8, label noise sd 0.1;
    labels clipped: 3.33e-06; OLS test MSE 1.0033e-02 ± 9.0e-05

    test excess MSE over OLS (mean ± sd over seeds)

    | method | ε = 0.5 | ε = 1 | ε = 2 |
    |---|---:|---:|---:|
    | dp_lazy_oco (z = yx), θ̂ = d·coef | 6.281e-02 ± 1.9e-03 | 6.134e-02 ± 1.6e-03 | 6.011e-02 ± 5.5e-04 |
    | Gaussian on mean(yx), θ̂ = d·mean | 5.370e-06 ± 2.1e-06 | 3.596e-06 ± 2.4e-06 | 3.171e-06 ± 2.5e-06 |
    | dp_otb (linear, defaults) | 9.580e-03 ± 3.4e-04 | 3.483e-03 ± 3.3e-04 | 1.081e-03 ± 2.4e-04 |
    | θ = 0 (ref.) | 6.396e-02 ± 5.8e-04 | 6.396e-02 ± 5.8e-04 | 6.396e-02 ± 5.8e-04 |
    | d·mean(yx) non-private (ref.) | 3.095e-06 ± 2.6e-06 | 3.095e-06 ± 2.6e-06 | 3.095e-06 ± 2.6e-06 |
    | excess lazy / Gaussian | 1.17e+04 | 1.71e+04 | 1.9e+04 |
    | excess lazy / dp_otb | 6.56 | 17.6 | 55.6 |
    | excess lazy / θ = 0 | 0.982 | 0.959 | 0.94 |

    dp_lazy_oco resolved parameters (model mean, z = yx)

    | ε | charged ε | paper ε | paper δ_total | u = βG²/λ | p | switch cap | switches (mean) |
    |---:|---:|---:|---:|---:|---:|---:|---:|
    | 0.5 | 0.4997 | 0.4940 | 3.25e-07 | 9.928e-12 | 0.0239 | 7393 | 2425 |
    | 1 | 0.9997 | 0.9939 | 3.25e-07 | 3.882e-11 | 0.0239 | 7597 | 2471 |
    | 2 | 1.9997 | 1.9937 | 3.25e-07 | 1.464e-10 | 0.0239 | 7985 | 2536 |

    | ε | λ | β | Gibbs sd (βλ)^-½ | shrink s | R_T/T | R_T/(T·GD) | √(2R_T/T) |
    |---:|---:|---:|---:|---:|---:|---:|---:|
    | 0.5 | 4.816e+06 | 1.195e-05 | 0.1318 | 0.0102 | 193 | 48.2 | 19.6 |
    | 1 | 2.436e+06 | 2.364e-05 | 0.1318 | 0.0200 | 97.4 | 24.4 | 14 |
    | 2 | 1.254e+06 | 4.59e-05 | 0.1318 | 0.0379 | 50.2 | 12.5 | 10 |

    T = n = 100000, d = 10, R = 1, C = 1, G = 2, D = 2 (GD = 4), δ_cal = 5e-07;
    R_T/T = thm:regret's bound per round (the spec's §4.3 table is R_T/(T·GD))

    ## Part 3: throughput

    n = 100000 rows (part-2 design), ε = 1, δ = 1e-06; best of 2; fit = solver.fit only (data generation excluded)

    | d | method | plan s | fit s | fit rows/s | rows/s ÷ dp_otb |
    |---:|---|---:|---:|---:|---:|
    | 10 | dp_lazy_oco (mean, z = yx) | 0.0382 | 0.4415 | 226,494 | 0.101 |
    | 10 | dp_otb (linear) | 0.0021 | 0.0448 | 2,233,539 | 1 |
    | 10 | Gaussian mechanism (mean of yx) | 0.0027 | 0.0042 | 23,548,910 | 10.5 |
    | 100 | dp_lazy_oco (mean, z = yx) | 0.0386 | 1.1534 | 86,703 | 0.14 |
    | 100 | dp_otb (linear) | 0.0015 | 0.1620 | 617,370 | 1 |
    | 100 | Gaussian mechanism (mean of yx) | 0.0030 | 0.0283 | 3,536,222 | 5.73 |

    total 16.0 s

(wall clock 18.3 s including imports, on a quiet machine. Part-3 rows/s vary by up to 2x between runs when the
machine is shared. Before the sampler's first-batch shortcut (one ncx2.logcdf per Gibbs draw) dp_lazy_oco ran
at 73,777 / 41,892 rows/s at d = 10 / 100; parts 1-2 are unchanged by it, bit for bit.)
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import dp_accounting
import numpy as np

from privfit.privacy import gaussian_sigma, make_generator
from privfit.solvers import PublicMetadata, get_solver

DEFAULT_EPSILONS: tuple[float, ...] = (0.5, 1.0, 2.0)
MEAN_D = 10
#: ‖μ‖ and the per-row spread (total sd over all d coordinates) of part 1's rows
MEAN_NORM = 0.5
MEAN_SPREAD = 0.4
REGRESSION_D = 10
#: ‖w*‖ and the label noise sd of part 2
W_NORM = 0.8
LABEL_NOISE = 0.1
THROUGHPUT_DS: tuple[int, ...] = (10, 100)
THROUGHPUT_EPSILON = 1.0
WARMUP_ROWS = 2000
#: L2 bound of the vector each row contributes (x or y·x): the declared row-norm bound × label bound
Z_BOUND = 1.0

_START = time.perf_counter()

#: an estimator maps (data, ε, seed) to θ̂; None marks a peer that does not apply (printed as n/a)
Estimator = Callable[["Synthetic", float, int], np.ndarray]


def progress(message: str) -> None:
    """Elapsed seconds and a message on stderr (the tables go to stdout)."""
    print(f"[{time.perf_counter() - _START:7.1f} s] {message}", file=sys.stderr, flush=True)


@dataclasses.dataclass(frozen=True)
class Synthetic:
    """One seed's rows: the design, labels, the per-row vector z (x or y·x) and what the error is measured on."""

    X: np.ndarray
    y: np.ndarray
    meta: PublicMetadata
    z_kind: str  # "x" or "yx": dp_lazy_oco's parameter z and the rows the Gaussian mechanism averages
    scale: float  # θ̂ = scale · (estimate of E[z]): 1 for the mean, d for the isotropic regression
    reference: np.ndarray  # z̄ (part 1) or the OLS coefficients (part 2)
    X_test: np.ndarray | None = None
    y_test: np.ndarray | None = None

    @property
    def z(self) -> np.ndarray:
        """The vectors the mean-based estimators average."""
        return self.X if self.z_kind == "x" else self.y[:, None] * self.X


# --- data ------------------------------------------------------------------------------------------------------


def unit_sphere(rng: np.random.Generator, rows: int, d: int) -> np.ndarray:
    """Rows uniform on the unit sphere in R^d (E[xxᵀ] = I/d)."""
    X = rng.standard_normal((rows, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def mean_data(n: int, seed: int) -> Synthetic:
    """Part 1: μ + N(0, MEAN_SPREAD²/d·I), ‖μ‖ = MEAN_NORM along (1, …, 1), rows scaled into the unit ball."""
    rng = np.random.default_rng(1000 + seed)
    mu = np.full(MEAN_D, MEAN_NORM / math.sqrt(MEAN_D))
    X = mu + MEAN_SPREAD / math.sqrt(MEAN_D) * rng.standard_normal((n, MEAN_D))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    meta = PublicMetadata(n=n, d=MEAN_D, row_norm_bound=1.0, label_bound=1.0)
    return Synthetic(X, np.ones(n), meta, "x", 1.0, X.mean(axis=0))


def regression_rows(rng: np.random.Generator, w: np.ndarray, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Isotropic design on the unit sphere and y = clip(⟨w, x⟩ + N(0, LABEL_NOISE²), −1, 1)."""
    X = unit_sphere(rng, rows, w.size)
    return X, np.clip(X @ w + LABEL_NOISE * rng.standard_normal(rows), -1.0, 1.0)


def regression_data(n: int, d: int, test_rows: int, seed: int) -> Synthetic:
    """Part 2/3: train and test rows of the isotropic regression, ‖w*‖ = W_NORM; reference = OLS on train."""
    rng = np.random.default_rng(2000 + seed)
    w = W_NORM * unit_sphere(rng, 1, d)[0]
    X, y = regression_rows(rng, w, n)
    X_test, y_test = regression_rows(rng, w, test_rows)
    ols = np.linalg.lstsq(X, y, rcond=None)[0]
    meta = PublicMetadata(n=n, d=d, row_norm_bound=1.0, label_bound=1.0)
    return Synthetic(X, y, meta, "yx", float(d), ols, X_test, y_test)


# --- Gaussian mechanism and its cross-check --------------------------------------------------------------------


@functools.cache
def gaussian_noise(epsilon: float, delta: float, n: int) -> float:
    """σ of the Gaussian mechanism on a mean of n vectors of norm ≤ Z_BOUND (replace-one sensitivity 2C/n)."""
    return gaussian_sigma(epsilon, delta, sensitivity=2.0 * Z_BOUND / n).noise


def dp_accounting_noise(epsilon: float, delta: float, sensitivity: float) -> float:
    """Smallest σ with ε ≤ target by dp_accounting's RdpAccountant (REPLACE_ONE, GaussianDpEvent(σ/Δ))."""

    def epsilon_of(multiplier: float) -> float:
        accountant = dp_accounting.rdp.RdpAccountant(neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
        accountant.compose(dp_accounting.GaussianDpEvent(multiplier))
        return accountant.get_epsilon(delta)

    low, high = 1e-2, 1e4  # noise multipliers; ε(low) > target ≥ ε(high) for every ε printed here
    for _ in range(80):
        middle = math.sqrt(low * high)
        low, high = (low, middle) if epsilon_of(middle) <= epsilon else (middle, high)
    return high * sensitivity


def gaussian_estimate(data: Synthetic, epsilon: float, seed: int, delta: float) -> np.ndarray:
    """scale · (mean of z + N(0, σ²I)), noise from the seeded public-data generator."""
    sigma = gaussian_noise(epsilon, delta, data.meta.n)
    noise = make_generator(seed, data_is_public=True).normal(0.0, sigma, data.meta.d)
    return data.scale * (data.z.mean(axis=0) + noise)


# --- privfit solvers -------------------------------------------------------------------------------------------


def checked_plan(name: str, params: dict[str, Any], meta: PublicMetadata, epsilon: float, delta: float) -> Any:
    """``solver.plan`` then the service's check that the charged ε is within the target (raises otherwise)."""
    plan = get_solver(name).plan(params, meta, target_epsilon=epsilon, delta=delta)
    charged = plan.cost.epsilon(delta).epsilon
    if not charged <= epsilon:  # explicit raise, not assert: it must hold under python -O too
        raise AssertionError(f"{name}: charged ε = {charged!r} > target ε = {epsilon!r} at δ = {delta:g}")
    return plan


@dataclasses.dataclass
class LazyOCO:
    """dp_lazy_oco model mean on data.z_kind; θ̂ = data.scale · coefficients. Records plans and switch counts."""

    delta: float
    plans: dict[float, Any] = dataclasses.field(default_factory=dict)
    switches: dict[float, list[int]] = dataclasses.field(default_factory=dict)

    def __call__(self, data: Synthetic, epsilon: float, seed: int) -> np.ndarray:
        """Plan (checked), fit with a seeded generator, rescale."""
        params = {"model": "mean", "z": data.z_kind, "report_switches": True}
        plan = checked_plan("dp_lazy_oco", params, data.meta, epsilon, self.delta)
        generator = make_generator(seed, data_is_public=True)
        result = get_solver("dp_lazy_oco").fit(data.X, data.y, data.meta, plan.resolved, generator)
        self.plans[epsilon] = plan
        self.switches.setdefault(epsilon, []).append(int(result.metadata["num_switches"]))
        return data.scale * np.asarray(result.coefficients)


def dp_otb_estimate(data: Synthetic, epsilon: float, seed: int, delta: float) -> np.ndarray:
    """dp_otb linear regression without intercept at its defaults; the coefficients."""
    plan = checked_plan("dp_otb", {"model": "linear", "fit_intercept": False}, data.meta, epsilon, delta)
    result = get_solver("dp_otb").fit(
        data.X, data.y, data.meta, plan.resolved, make_generator(seed, data_is_public=True)
    )
    return np.asarray(result.coefficients)


def zero_estimate(data: Synthetic, epsilon: float, seed: int) -> np.ndarray:
    """The trivial predictor θ = 0."""
    return np.zeros(data.meta.d)


def nonprivate_mean_estimate(data: Synthetic, epsilon: float, seed: int) -> np.ndarray:
    """scale · mean of z without noise (the floor of the rescaled-mean estimators)."""
    return data.scale * data.z.mean(axis=0)


def warm_up(delta: float) -> float:
    """One untimed fit of each solver on WARMUP_ROWS rows (numba, first imports); its seconds."""
    start = time.perf_counter()
    data = regression_data(WARMUP_ROWS, REGRESSION_D, 10, 0)
    LazyOCO(delta)(data, 1.0, 0)
    dp_otb_estimate(data, 1.0, 0, delta)
    return time.perf_counter() - start


# --- evaluation and tables -------------------------------------------------------------------------------------


def mean_error(data: Synthetic, theta: np.ndarray) -> float:
    """‖θ̂ − z̄‖₂."""
    return float(np.linalg.norm(theta - data.reference))


def held_out_mse(data: Synthetic, theta: np.ndarray) -> float:
    """Mean squared error of ⟨θ, x⟩ on the test rows."""
    if data.X_test is None or data.y_test is None:
        raise ValueError("these rows have no test set")
    return float(np.mean((data.X_test @ theta - data.y_test) ** 2))


def excess_mse(data: Synthetic, theta: np.ndarray) -> float:
    """Test MSE of ⟨θ̂, x⟩ minus test MSE of OLS."""
    return held_out_mse(data, theta) - held_out_mse(data, data.reference)


Scores = dict[str, dict[float, list[float]]]


def evaluate(
    estimators: dict[str, Estimator | None],
    datasets: list[Synthetic],
    epsilons: list[float],
    score: Callable[[Synthetic, np.ndarray], float],
) -> Scores:
    """score(data, estimator(data, ε, seed)) for every estimator, ε and seed (dataset i has seed i)."""
    scores: Scores = {name: {epsilon: [] for epsilon in epsilons} for name in estimators}
    for seed, data in enumerate(datasets):
        for epsilon in epsilons:
            for name, estimator in estimators.items():
                if estimator is not None:
                    scores[name][epsilon].append(score(data, estimator(data, epsilon, seed)))
            progress(f"seed {seed}, ε = {epsilon:g} done")
    return scores


def cell(values: list[float], digits: int) -> str:
    """``mean ± sd`` in scientific notation, or n/a."""
    if not values:
        return f"{'n/a':>19}"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.{digits}e} ± {sd:.1e}"


def print_scores(title: str, scores: Scores, notes: dict[str, str], epsilons: list[float], digits: int) -> None:
    """A markdown table: one row per estimator, one column per ε; n/a rows carry their note."""
    print(f"\n{title}\n")
    print("| method | " + " | ".join(f"ε = {epsilon:g}" for epsilon in epsilons) + " |")
    print("|---|" + "---:|" * len(epsilons))
    for name, per_epsilon in scores.items():
        cells = [notes[name] if name in notes else cell(per_epsilon[epsilon], digits) for epsilon in epsilons]
        print(f"| {name} | " + " | ".join(cells) + " |")


def print_ratio(label: str, scores: Scores, numerator: str, denominator: str, epsilons: list[float]) -> None:
    """One markdown row: mean(numerator)/mean(denominator) per ε."""
    ratios = [
        statistics.fmean(scores[numerator][epsilon]) / statistics.fmean(scores[denominator][epsilon])
        for epsilon in epsilons
    ]
    print(f"| {label} | " + " | ".join(f"{value:.3g}" for value in ratios) + " |")


def shrink_factor(lam: float, horizon: int) -> float:
    """s = (1/T)Σ_{t<T} t/(λ + t): the average pull of the Gibbs means from 0 towards the data mean."""
    t = np.arange(horizon, dtype=np.float64)
    return float(np.mean(t / (lam + t)))


def print_lazy_parameters(title: str, lazy: LazyOCO, delta: float) -> None:
    """dp_lazy_oco's resolved public parameters per ε (privacy side, then utility side): why its error is what it is."""
    print(f"\n{title}\n")
    print("| ε | charged ε | paper ε | paper δ_total | u = βG²/λ | p | switch cap | switches (mean) |")
    print("|---:|" + "---:|" * 7)
    for epsilon, plan in lazy.plans.items():
        r = plan.resolved
        print(
            f"| {epsilon:g} | {plan.cost.epsilon(delta).epsilon:.4f} | {r.paper_epsilon:.4f} | {r.paper_delta:.2e} "
            f"| {r.u:.3e} | {r.p:.4f} | {r.switch_cap} | {statistics.fmean(lazy.switches[epsilon]):.0f} |"
        )
    print()
    print("| ε | λ | β | Gibbs sd (βλ)^-½ | shrink s | R_T/T | R_T/(T·GD) | √(2R_T/T) |")
    print("|---:|" + "---:|" * 7)
    for epsilon, plan in lazy.plans.items():
        r = plan.resolved
        average = r.average_regret_bound
        print(
            f"| {epsilon:g} | {r.lam:.4g} | {r.beta:.4g} | {(r.beta * r.lam) ** -0.5:.4f} "
            f"| {shrink_factor(r.lam, r.n):.4f} | {average:.3g} | {average / (2.0 * r.lipschitz * r.radius):.3g} "
            f"| {math.sqrt(2.0 * average):.3g} |"
        )
    r = next(iter(lazy.plans.values())).resolved
    print(
        f"\nT = n = {r.n}, d = {r.dimension}, R = {r.radius:g}, C = {r.clip_norm:g}, G = {r.lipschitz:g}, "
        f"D = {2 * r.radius:g} (GD = {r.lipschitz * 2 * r.radius:g}), δ_cal = {r.calibration_delta:g};\n"
        "R_T/T = thm:regret's bound per round (the spec's §4.3 table is R_T/(T·GD))"
    )


def print_calibration(epsilons: list[float], delta: float, n: int) -> None:
    """privfit's Gaussian σ next to dp_accounting's for the same (sensitivity, ε, δ)."""
    sensitivity = 2.0 * Z_BOUND / n
    print(f"\nGaussian mechanism calibration: sensitivity Δ = 2C/n = {sensitivity:.3g} (replace-one), δ = {delta:g}\n")
    print("| ε | σ privfit (gaussian_sigma) | σ dp_accounting (RdpAccountant) | privfit / dp_accounting |")
    print("|---:|---:|---:|---:|")
    for epsilon in epsilons:
        ours, theirs = gaussian_noise(epsilon, delta, n), dp_accounting_noise(epsilon, delta, sensitivity)
        print(f"| {epsilon:g} | {ours:.6e} | {theirs:.6e} | {ours / theirs:.5f} |")


# --- parts -----------------------------------------------------------------------------------------------------


def mean_part(args: argparse.Namespace) -> None:
    """Part 1: private mean estimation error, dp_lazy_oco next to the Gaussian mechanism."""
    datasets = [mean_data(args.n, seed) for seed in range(args.seeds)]
    norms = [float(np.linalg.norm(data.reference)) for data in datasets]
    print(f"n = {args.n}, d = {MEAN_D}, δ = {args.delta:g}, {args.seeds} seed(s); ‖z̄‖ = {cell(norms, 4)}")
    lazy = LazyOCO(args.delta)
    estimators: dict[str, Estimator | None] = {
        "dp_lazy_oco (mean, z = x)": lazy,
        "Gaussian mechanism": functools.partial(gaussian_estimate, delta=args.delta),
        "dp_otb": None,
        "θ = 0 (error = ‖z̄‖)": zero_estimate,
    }
    scores = evaluate(estimators, datasets, args.epsilons, mean_error)
    scores["bias-only prediction (1 − s)‖z̄‖"] = {
        epsilon: [(1.0 - shrink_factor(plan.resolved.lam, args.n)) * norm for norm in norms]
        for epsilon, plan in lazy.plans.items()
    }
    print_scores("error ‖θ̂ − z̄‖₂ (mean ± sd over seeds)", scores, {"dp_otb": "n/a (not a GLM)"}, args.epsilons, 3)
    print_ratio("error lazy / Gaussian", scores, "dp_lazy_oco (mean, z = x)", "Gaussian mechanism", args.epsilons)
    print_ratio("error lazy / ‖z̄‖", scores, "dp_lazy_oco (mean, z = x)", "θ = 0 (error = ‖z̄‖)", args.epsilons)
    print_lazy_parameters("dp_lazy_oco resolved parameters (model mean, z = x)", lazy, args.delta)


def regression_part(args: argparse.Namespace) -> None:
    """Part 2: isotropic quadratic-loss regression, test excess MSE over OLS."""
    datasets = [regression_data(args.n, REGRESSION_D, args.test_rows, seed) for seed in range(args.seeds)]
    clipped = statistics.fmean(float(np.mean(np.abs(data.y) >= 1.0)) for data in datasets)
    ols_mse = [held_out_mse(data, data.reference) for data in datasets]
    print(
        f"n = {args.n} train, {args.test_rows} test, d = {REGRESSION_D}, x uniform on the unit sphere, "
        f"‖w*‖ = {W_NORM}, label noise sd {LABEL_NOISE};\n"
        f"labels clipped: {clipped:.2e}; OLS test MSE {cell(ols_mse, 4)}"
    )
    lazy = LazyOCO(args.delta)
    estimators: dict[str, Estimator | None] = {
        "dp_lazy_oco (z = yx), θ̂ = d·coef": lazy,
        "Gaussian on mean(yx), θ̂ = d·mean": functools.partial(gaussian_estimate, delta=args.delta),
        "dp_otb (linear, defaults)": functools.partial(dp_otb_estimate, delta=args.delta),
        "θ = 0 (ref.)": zero_estimate,
        "d·mean(yx) non-private (ref.)": nonprivate_mean_estimate,
    }
    scores = evaluate(estimators, datasets, args.epsilons, excess_mse)
    print_scores("test excess MSE over OLS (mean ± sd over seeds)", scores, {}, args.epsilons, 3)
    names = list(estimators)
    print_ratio("excess lazy / Gaussian", scores, names[0], names[1], args.epsilons)
    print_ratio("excess lazy / dp_otb", scores, names[0], names[2], args.epsilons)
    print_ratio("excess lazy / θ = 0", scores, names[0], names[3], args.epsilons)
    print_lazy_parameters("dp_lazy_oco resolved parameters (model mean, z = yx)", lazy, args.delta)


def best_seconds(fn: Callable[[], Any], repeats: int) -> float:
    """Minimum wall-clock seconds of ``fn`` over ``repeats`` calls."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def time_solver(name: str, params: dict[str, Any], data: Synthetic, delta: float, repeats: int) -> tuple[float, float]:
    """(plan seconds, fit seconds) of one privfit solver on ``data`` at ε = THROUGHPUT_EPSILON."""
    meta, solver = data.meta, get_solver(name)
    plan_seconds = best_seconds(lambda: checked_plan(name, params, meta, THROUGHPUT_EPSILON, delta), repeats)
    plan = checked_plan(name, params, meta, THROUGHPUT_EPSILON, delta)
    fit_seconds = best_seconds(
        lambda: solver.fit(data.X, data.y, meta, plan.resolved, make_generator(0, data_is_public=True)), repeats
    )
    return plan_seconds, fit_seconds


def throughput_rows(data: Synthetic, delta: float, repeats: int) -> list[tuple[str, float, float]]:
    """(method, plan seconds, fit seconds) for dp_lazy_oco, dp_otb and the Gaussian mechanism on ``data``."""
    lazy = time_solver("dp_lazy_oco", {"model": "mean", "z": "yx"}, data, delta, repeats)
    otb = time_solver("dp_otb", {"model": "linear", "fit_intercept": False}, data, delta, repeats)
    gaussian_noise.cache_clear()  # time the calibration, not the cache
    sensitivity = 2.0 * Z_BOUND / data.meta.n
    gaussian = (
        best_seconds(lambda: gaussian_sigma(THROUGHPUT_EPSILON, delta, sensitivity=sensitivity), repeats),
        best_seconds(lambda: gaussian_estimate(data, THROUGHPUT_EPSILON, 0, delta), repeats),
    )
    return [
        ("dp_lazy_oco (mean, z = yx)", *lazy),
        ("dp_otb (linear)", *otb),
        ("Gaussian mechanism (mean of yx)", *gaussian),
    ]


def throughput_part(args: argparse.Namespace) -> None:
    """Part 3: plan and fit seconds, fit rows/s, at each d; ratio of rows/s lazy / dp_otb."""
    print(
        f"n = {args.n} rows (part-2 design), ε = {THROUGHPUT_EPSILON:g}, δ = {args.delta:g}; best of {args.repeats}; "
        "fit = solver.fit only (data generation excluded)\n"
    )
    print("| d | method | plan s | fit s | fit rows/s | rows/s ÷ dp_otb |")
    print("|---:|---|---:|---:|---:|---:|")
    for d in THROUGHPUT_DS:
        data = regression_data(args.n, d, 10, 0)
        rows = throughput_rows(data, args.delta, args.repeats)
        otb_rate = args.n / next(fit for label, _, fit in rows if label.startswith("dp_otb"))
        for label, plan_seconds, fit_seconds in rows:
            rate = args.n / fit_seconds
            print(f"| {d} | {label} | {plan_seconds:.4f} | {fit_seconds:.4f} | {rate:,.0f} | {rate / otb_rate:.3g} |")
        progress(f"throughput d = {d} done")


def main() -> None:
    """Parse the CLI, warm up, run the three parts and print the total time."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="training rows (= the horizon T)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epsilons", type=float, nargs="+", default=list(DEFAULT_EPSILONS))
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument("--test-rows", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=2, help="timed repeats in part 3 (best is reported)")
    parser.add_argument("--quick", action="store_true", help="smoke run: n = 10 000, 1 seed, 5 000 test rows")
    args = parser.parse_args()
    if args.quick:
        args.n, args.seeds, args.test_rows, args.repeats = 10_000, 1, 5_000, 1

    print(f"warm-up: one fit of dp_lazy_oco and dp_otb on {WARMUP_ROWS} rows, {warm_up(args.delta):.2f} s (untimed)")
    print_calibration(args.epsilons, args.delta, args.n)
    print("\n## Part 1: private mean estimation\n")
    mean_part(args)
    print("\n## Part 2: quadratic-loss regression (isotropic design)\n")
    regression_part(args)
    print("\n## Part 3: throughput\n")
    throughput_part(args)
    print(f"\ntotal {time.perf_counter() - _START:.1f} s")


if __name__ == "__main__":
    main()
