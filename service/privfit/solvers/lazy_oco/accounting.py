"""Paper-faithful (ε, δ) accounting and parameter recipes for ``dp_lazy_oco`` (P-COMW).

Agarwal, Kale, Singh & Thakurta, "Improved Differentially Private and Lazy Online Convex Optimization":
Theorem ``thm:dp`` (App. D, Claim D.1 + Lemma A.1), Lemma ``lem:densityratio``, Theorem ``thm:regret`` and
Theorem 4.1.  Implementation spec: ``seed-003-lazy-oco.md`` §2.4 (recipes R1, R3), §3.1–3.3 (accountant, with the
corrections I1/I2: the *uncollapsed* Σε_t² bound and the *full* δ sum), §4.1 (regret bound), §4.3 (calibration).

Only the paper's accountant (mode ``"paper"``) is implemented here.  The spec's §3.4 per-history RDP decomposition
is deliberately NOT used for any cost (it awaits a DP reviewer's sign-off).

Everything here is a pure function of public quantities (ε, δ, T, G, D, d); no data is read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from privfit.solvers.base import SolverParameterError

__all__ = [
    "LazyOcoParameters",
    "PaperAccount",
    "calibrate_paper",
    "log_phi_density_ratio",
    "paper_accountant",
    "paper_log_phi",
    "regret_bound",
    "switch_budget",
    "theorem_4_1_parameters",
]

#: Lemma A.1 is applied with δ'' = δ/2 (App. D), so the composition's δ'' is half the target.
_COMPOSITION_DELTA_FRACTION = 0.5
#: thm:dp: δ' = δ / (60 T²).
_DELTA_PRIME_DIVISOR = 60.0
#: thm:dp: the fresh-draw closeness is needed for a 3G-Lipschitz difference (spec §2.7 item 4).
_G_PRIME_FACTOR = 3.0
#: §4.3 calibration: log-grid of forced-switch probabilities p searched by :func:`calibrate_paper`.
_P_GRID_MIN, _P_GRID_MAX, _P_GRID_SIZE = 1e-4, 0.5, 200


def _check_positive(name: str, value: float) -> float:
    value = float(value)
    if not math.isfinite(value) or value <= 0.0:
        raise SolverParameterError(name, f"must be a finite number > 0, got {value!r}")
    return value


def _check_delta(value: float) -> float:
    value = _check_positive("delta", value)
    if value > 0.5:
        raise SolverParameterError("delta", f"must be in (0, 1/2] (thm:dp), got {value!r}")
    return value


def _check_horizon(T: int, delta: float) -> int:
    if isinstance(T, bool) or int(T) != T or T < 2:
        raise SolverParameterError("T", f"must be an integer ≥ 2, got {T!r}")
    horizon = int(T)
    minimum = 12.0 * math.log(1.0 / delta)
    if horizon < minimum:
        raise SolverParameterError("T", f"thm:dp needs T ≥ 12 log(1/δ) = {minimum:.1f}, got {horizon}")
    return horizon


def _check_dimension(d: int) -> int:
    if isinstance(d, bool) or int(d) != d or d < 1:
        raise SolverParameterError("d", f"must be an integer ≥ 1, got {d!r}")
    return int(d)


def log_phi_density_ratio(u: float, delta: float, lipschitz_factor: float = 1.0) -> float:
    """log Φ of Lemma ``lem:densityratio``: ``2u' + sqrt(8 u' log(2/δ))`` with ``u' = c² u``, ``u = βG²/λ``.

    ``lipschitz_factor`` c scales G (c = 3 for the 3G-Lipschitz difference of thm:dp, spec §2.1 / §2.7 item 4).
    """
    uc = lipschitz_factor**2 * u
    return 2.0 * uc + math.sqrt(8.0 * uc * math.log(2.0 / delta))


def paper_log_phi(u: float, T: int, delta: float) -> float:
    """The algorithm's log Φ in the paper's accountant: Φ = Φ'², Φ' = lem:densityratio at (3G, δ' = δ/(60T²)).

    Spec §2.4 (R1) lines ``δ' = δ/(60T²); G' = 3G; Φ = Φ'²``.  thm:dp needs exactly this closeness, so in mode
    ``"paper"`` Φ is *not* a free utility knob (unlike §3.4, where it is).
    """
    delta_prime = delta / (_DELTA_PRIME_DIVISOR * T * T)
    return 2.0 * log_phi_density_ratio(u, delta_prime, _G_PRIME_FACTOR)


def switch_budget(p: float, log_phi: float, T: int) -> tuple[float, int]:
    """``(B, B_int)`` with ``p̃ = p + 1 − Φ^{-2}``, ``B = 3p̃T`` (Alg. 1 / thm:regret) and ``B_int = ceil(B)``.

    Spec §2.7 item 2: b_t is an integer, so the real cap 3p̃T allows ceil(B) switches; the accountant uses the same
    integer.
    """
    p_tilde = p - math.expm1(-2.0 * log_phi)
    B = 3.0 * p_tilde * T
    return B, math.ceil(B)


@dataclass(frozen=True)
class PaperAccount:
    """thm:dp's guarantee, uncollapsed (spec §3.1, §3.2 I1/I2).

    ``eps_sq_sum`` = ``4log²Φ/p² + 2·B_int·log²Φ + 8u²T/p²`` (bound on Σ_t ε_t², Claim D.1);
    ``epsilon`` = ``(3/2)Σε_t² + sqrt(6 Σε_t² log(1/δ''))`` with δ'' = δ/2 (Lemma A.1);
    ``delta_total`` = ``δ/2 + T(4δ' + 9δ'T + 3e^{−p̃T})`` (the FULL δ sum, issue I1).
    """

    epsilon: float
    delta_total: float
    eps_sq_sum: float
    delta_composition: float
    delta_prime: float
    p_tilde: float
    B_int: int


def paper_accountant(u: float, p: float, log_phi: float, T: int, delta: float) -> PaperAccount:
    """The thm:dp accountant with the uncollapsed Σε_t² and full δ sums (spec §3.1, §3.2 I1–I2, §3.3 mode "paper").

    ``u = βG²/λ``; ``log_phi`` is the algorithm's log Φ (which must make fresh draws (Φ, δ')-close for 3G-Lipschitz
    differences, e.g. :func:`paper_log_phi`); ``delta`` is the *target* δ from which δ'' = δ/2 and δ' = δ/(60T²).
    The charge to record is ``(epsilon, delta_total)`` as an approximate-DP pair (spec §3.3).
    """
    if not (0.0 < p <= 1.0):
        raise SolverParameterError("p", f"must be in (0, 1] (p = 0 is not private, spec §2.4 R2), got {p!r}")
    _check_positive("u", u)
    _check_positive("log_phi", log_phi)
    delta_prime = delta / (_DELTA_PRIME_DIVISOR * T * T)
    delta_comp = _COMPOSITION_DELTA_FRACTION * delta
    p_tilde = p - math.expm1(-2.0 * log_phi)
    _, B_int = switch_budget(p, log_phi, T)
    eps_sq = 4.0 * log_phi**2 / p**2 + 2.0 * B_int * log_phi**2 + 8.0 * u * u * T / p**2
    epsilon = 1.5 * eps_sq + math.sqrt(6.0 * eps_sq * math.log(1.0 / delta_comp))
    delta_total = delta_comp + T * (4.0 * delta_prime + 9.0 * delta_prime * T + 3.0 * math.exp(-p_tilde * T))
    return PaperAccount(
        epsilon=epsilon,
        delta_total=delta_total,
        eps_sq_sum=eps_sq,
        delta_composition=delta_comp,
        delta_prime=delta_prime,
        p_tilde=p_tilde,
        B_int=B_int,
    )


@dataclass(frozen=True)
class LazyOcoParameters:
    """Algorithm 1's inputs plus the guarantee they carry.

    ``beta`` (inverse temperature), ``lam`` (ridge λ), ``p`` (forced-switch probability), ``log_phi`` (log Φ),
    ``B`` (real budget 3p̃T) and ``B_int = ceil(B)`` (the cap actually enforced); ``u = βG²/λ``.
    ``epsilon``/``delta`` are the approximate-DP pair to charge (uncollapsed thm:dp); ``closeness_delta`` is the δ
    with which consecutive Gibbs measures are (Φ, δ)-close, used by the regret bound (thm:regret).
    """

    mode: str
    T: int
    d: int
    G: float
    D: float
    beta: float
    lam: float
    p: float
    log_phi: float
    B: float
    B_int: int
    u: float
    epsilon: float
    delta: float
    closeness_delta: float
    epsilon_theorem: float | None = None


def theorem_4_1_parameters(epsilon: float, delta: float, T: int, G: float, D: float, d: int) -> LazyOcoParameters:
    """Recipe R1 (Theorem 4.1 + thm:dp), verbatim; for reproduction only (spec §2.4 R1, mode ``"theorem_4_1"``).

    ``epsilon`` of the result is the *uncollapsed* thm:dp ε (I2); ``epsilon_theorem`` keeps the paper's collapsed
    ``3ε'/2 + sqrt(6ε' log(2/δ))``.  ``delta`` is the full sum (I1).  Spec Appendix A: at T = 1e6, d = 100,
    ε = 1, δ = 1e-6, G = D = 1: λ = 4.91e7, β = 2.04e-5, log Φ = 7.43e-5, p = 0.01, B_int = 30 446,
    ε_thm = 0.185, uncollapsed 0.221.
    """
    epsilon = _check_positive("epsilon", epsilon)
    if epsilon > 1.0:
        raise SolverParameterError("epsilon", f"Theorem 4.1 needs ε ≤ 1, got {epsilon!r}")
    delta = _check_delta(delta)
    T = _check_horizon(T, delta)
    G, D, d = _check_positive("G", G), _check_positive("D", D), _check_dimension(d)
    Lg = math.log(T / delta)
    lam = (G / D) * max(
        1.0 / (2.0 * math.sqrt(T)),
        1e3 * T ** (1 / 3) * math.sqrt(d) * Lg / epsilon,
        1e3 * T ** (3 / 8) * math.sqrt(d) * Lg / epsilon**0.75,
    )
    beta = lam / (1e5 * G**2 * Lg**2) * min(epsilon**2 / T ** (2 / 3), epsilon**1.5 / T**0.75)
    u = beta * G**2 / lam
    log_phi = paper_log_phi(u, T, delta)
    p = min(1.0, max(T ** (-1 / 3), (u**2 / log_phi**2) ** (1 / 3)))
    B, B_int = switch_budget(p, log_phi, T)
    acct = paper_accountant(u, p, log_phi, T, delta)
    eps_collapsed = (
        7.0 * T ** (2 / 3) * log_phi**2 + 12.0 * log_phi**3 * T + 11.0 * (u**2) ** (1 / 3) * log_phi ** (4 / 3) * T
    )
    eps_thm = 1.5 * eps_collapsed + math.sqrt(6.0 * eps_collapsed * math.log(2.0 / delta))
    return LazyOcoParameters(
        mode="theorem_4_1",
        T=T,
        d=d,
        G=G,
        D=D,
        beta=beta,
        lam=lam,
        p=p,
        log_phi=log_phi,
        B=B,
        B_int=B_int,
        u=u,
        epsilon=acct.epsilon,
        delta=acct.delta_total,
        closeness_delta=acct.delta_prime,
        epsilon_theorem=eps_thm,
    )


def _largest_u(p: float, T: int, epsilon: float, delta: float) -> float:
    """Largest u (by bisection in log u) with paper_accountant(u, p, paper_log_phi(u)) within (ε, δ); 0 if none.

    The accountant's ε and δ_total are monotone in u (log Φ increases with u, hence B_int and every term of Σε_t²;
    p̃ increases, so e^{−p̃T} decreases — δ_total is checked at the end).
    """

    def ok(u: float) -> bool:
        acct = paper_accountant(u, p, paper_log_phi(u, T, delta), T, delta)
        return acct.epsilon <= epsilon and acct.delta_total <= delta

    lo, hi = 1e-300, 1.0
    if not ok(lo):
        return 0.0
    if ok(hi):
        return hi
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if ok(mid):
            lo = mid
        else:
            hi = mid
        if hi / lo < 1 + 1e-12:
            break
    return lo


def calibrate_paper(epsilon: float, delta: float, T: int, G: float, D: float, d: int) -> LazyOcoParameters:
    """Recipe R3 with the paper's accountant (spec §2.4 R3, §4.3, §5.3 "Parameters" item 3, mode ``"paper"``).

    1. For each p on a log grid [1e-4, 0.5], the largest u = βG²/λ whose uncollapsed thm:dp (ε, δ_total) is
       ≤ (ε, δ), with log Φ = :func:`paper_log_phi` (Φ = Φ'², 3G, δ'); keep the (u, p) with the largest u.
    2. ``λ = G·sqrt(2(T + d log T/u))/D``, ``β = uλ/G²`` (minimiser of the §4.1 bound's first three terms),
       ``B_int = ceil(3(p + 1 − Φ^{-2})T)``.

    Spec §4.3 (ε = 1, δ = 1e-6, G = D = 1): u ≈ 2.2e-10 / 4.1e-11 / 8.0e-12 at T = 1e4 / 1e5 / 1e6 and average
    regret bound ≈ 92 / 24 / 5.9 (d = 10), 292 / 75 / 19 (d = 100).
    The returned (epsilon, delta) are recomputed from the final parameters and are ≤ the targets.
    """
    epsilon = _check_positive("epsilon", epsilon)
    delta = _check_delta(delta)
    T = _check_horizon(T, delta)
    G, D, d = _check_positive("G", G), _check_positive("D", D), _check_dimension(d)
    best_u, best_p = 0.0, 0.0
    ratio = (_P_GRID_MAX / _P_GRID_MIN) ** (1.0 / (_P_GRID_SIZE - 1))
    for i in range(_P_GRID_SIZE):
        p = _P_GRID_MIN * ratio**i
        u = _largest_u(p, T, epsilon, delta)
        if u > best_u:
            best_u, best_p = u, p
    if best_u <= 0.0:
        raise SolverParameterError("epsilon", f"no parameters meet (ε={epsilon}, δ={delta}) at T={T}")
    u, p = best_u, best_p
    lam = G * math.sqrt(2.0 * (T + d * math.log(T) / u)) / D
    beta = u * lam / G**2
    log_phi = paper_log_phi(u, T, delta)
    B, B_int = switch_budget(p, log_phi, T)
    acct = paper_accountant(u, p, log_phi, T, delta)
    if not (acct.epsilon <= epsilon and acct.delta_total <= delta):  # pragma: no cover - guarded by bisection
        raise SolverParameterError("epsilon", "calibration failed to meet the target")
    return LazyOcoParameters(
        mode="paper",
        T=T,
        d=d,
        G=G,
        D=D,
        beta=beta,
        lam=lam,
        p=p,
        log_phi=log_phi,
        B=B,
        B_int=B_int,
        u=u,
        epsilon=acct.epsilon,
        delta=acct.delta_total,
        closeness_delta=acct.delta_prime,
    )


def regret_bound(
    *,
    beta: float,
    lam: float,
    p: float,
    log_phi: float,
    closeness_delta: float,
    T: int,
    G: float,
    D: float,
    d: int,
    capped: bool = True,
) -> float:
    """Theorem ``thm:regret``'s expected-regret bound from public parameters only (spec §4.1).

    capped (B = 3p̃T): ``λD²/2 + G²T/λ + d log T/β + 2GDT(e^{−p̃T} + 3δT) + GD``;
    uncapped (B = ∞):  ``λD²/2 + G²T/λ + d log T/β + GD + 6GDδT²``,
    where consecutive Gibbs measures are (Φ, δ)-close with δ = ``closeness_delta`` and p̃ = p + 1 − Φ^{-2}.
    Never an empirical regret on private rows (spec §6.1).
    """
    base = lam * D * D / 2.0 + G * G * T / lam + d * math.log(T) / beta
    if capped:
        p_tilde = p - math.expm1(-2.0 * log_phi)
        return base + 2.0 * G * D * T * (math.exp(-p_tilde * T) + 3.0 * closeness_delta * T) + G * D
    return base + G * D + 6.0 * G * D * closeness_delta * T * T
