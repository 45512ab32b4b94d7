"""Exact samplers of the discrete Laplace and discrete Gaussian on the integers, compiled with numba.

These are Algorithms 1–3 of Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential Privacy",
NeurIPS 2020 (CKS) — the algorithms OpenDP implements — run draw by draw in a compiled kernel (``nogil``: a
background thread drawing noise runs beside the solver's own kernel). The discrete Laplace decides everything in
integer arithmetic on exactly uniform integers. The discrete Gaussian decides each comparison "V < e^{−γ}" of a
uniform V in floating point only where a proven error bound settles it, and settles the rest (about 2^{−40} of
them) exactly on the same V (:mod:`.exact_comparison`). Either way the output distribution is exactly the target,
whatever the rounding of any float.

**Uniform integers.** The caller's numpy ``Generator`` supplies raw 64-bit words, i.i.d. uniform on [0, 2^64):
its bit generator's ``random_raw`` words — for PCG64DXSM (the service's generators) the same words made in
compiled code from its state (:func:`_pcg64dxsm_fill`, numpy's output and step functions, checked word for word
against ``random_raw``), under the bit generator's lock, its state then advanced past them. :func:`_uniform` turns
them into integers uniform on [0, m), 1 ≤ m < 2^63, by Lemire's multiply-and-reject (Lemire, "Fast Random Integer
Generation in an Interval", ACM TOMACS 2019, Alg. 5): with the 128-bit product x·m = hi·2^64 + lo, accept x when lo
≥ T = 2^64 mod m and return hi, else take the next word. Unbiased: the words with hi = j are those with j·2^64 ≤ x·m
< (j + 1)·2^64, on which lo = x·m − j·2^64 grows with x, so the accepted ones are x ∈ [⌈(j·2^64 + T)/m⌉, ⌈(j +
1)·2^64/m⌉). Writing 2^64 = Q·m + T, j·2^64 + T = jQ·m + (j + 1)·T and (j + 1)·2^64 = (j + 1)Q·m + (j + 1)·T: the
two ends are jQ and (j + 1)Q plus the same ⌈(j + 1)·T/m⌉, so every j ∈ [0, m) has exactly Q = ⌊2^64/m⌋ accepted
words, and the accepted word is uniform over those Q·m words. The product is one 128-bit multiplication
(:func:`_wide_multiply`, LLVM's ``mul i128`` on zero-extended operands: exact). No float enters any decision.

**The algorithms**, each draw in scalar code (γ = num/den a non-negative rational, integers below 2^63):

* :func:`_bernoulli_exp_fraction` — Bernoulli(exp(−γ)) for γ ∈ [0, 1] (CKS Alg. 1): draw A_k ~ Bernoulli(γ/k)
  for k = 1, 2, … until the first failure; the number of draws K is odd with probability e^{−γ}. Bernoulli(γ/k) is
  one uniform integer on [0, den·k) below num while den·k < 2^63, else the product of independent
  Bernoulli(num/den) and Bernoulli(1/k). While 6·den³ < 2^63 (the discrete Laplace's γ = U/t for t ≤ 2^20 + 1)
  the first three draws are read off one uniform W on [0, 6·den³): A_1 … A_k all succeed with probability
  γ^k/k!, and "K > k" is the event W < 6·den³·γ^k/k! (the integers 6·den²·num, 3·den·num², num³, nested as
  γ ≤ 1): nested events with the exact probabilities, so K ∧ 4 has its law; K > 3 continues the series.
* :func:`_bernoulli_exp_minus_one` — Bernoulli(e^{−1}) (CKS Alg. 1 at γ = 1) from one uniform U on [0, N!),
  N = 18: the draws A_k ~ Bernoulli(1/k) all succeed up to k with probability 1/k!, so "K > k" is the event
  U < N!/k! (an integer; exact for k ≤ N), and U = 0 (K > N, probability 1/18!) continues the series one
  Bernoulli(1/k) at a time.
* :func:`discrete_laplace` — P(z) ∝ e^{−|z|/t} for an integer t ≥ 1 (CKS Alg. 2): U uniform on [0, t), kept with
  probability exp(−U/t); V the number of Bernoulli(e^{−1}) successes before the first failure; X = U + t·V and a
  fair sign B, rejecting B = 1 with X = 0. A run V ≥ 2^22 (probability e^{−2^22}) raises ``OverflowError``; below
  it X < 2^63.
* :func:`discrete_gaussian` — P(z) ∝ e^{−z²/(2S)} for an integer variance parameter S ≥ 1 (CKS Alg. 3): propose
  Y from the discrete Laplace with t = ⌊√S⌋ + 1 and accept with probability exp(−(|Y| − S/t)²/(2S)). An attempt
  reads two words. The first's lowest bit is the sign B and its top 63 bits are a uniform V₁ (with the bits of
  later words, if needed, below them): the magnitude is G = #{k ≥ 1 : V₁ < q^k} = ⌊−t·ln V₁⌋, q = e^{−1/t}, so
  P(G = k) = (1 − q)q^k; rejecting B = 1 with G = 0 leaves Y = ±G with P(y) ∝ q^{|y|}, CKS Alg. 2's law. The
  second word's top 63 bits are the acceptance's uniform V₂: accept when V₂ < e^{−γ}, γ = w²/(2St²),
  w = |Y|·t − S.

**The float fast path** (:func:`_gaussian_kernel`, :func:`_gaussian_attempt`; u = 2^{−53}, IEEE-754 binary64 with
round-to-nearest, no fast-math: each +, −, ×, / and integer conversion errs by a relative u at most).
:func:`_exp_negative` returns e^{−x} for 0 ≤ x < 64 within a relative 20u: r = x − ⌊1024x⌋/1024 is exact (Sterbenz);
the tables of e^{−a} and e^{−b/1024} are correctly rounded (Decimal at 40 digits, then float(): u each); the Taylor
polynomial of degree 4 of e^{−r}, r < 2^{−10}, truncates by r⁵/5! < 0.07u, its float coefficients add u·e^r and
Horner's rule γ₈·e^r < 8.1u, so 9.2u relative to e^{−r} ≥ 0.999; the two products add 2u (13.2u in all). The
argument's own rounding adds e^{|Δx|} − 1: x = guess·fl(1/t) (two roundings, x < 44.4 as V₁ ≥ 2^{−64}) errs by 89u;
γ = (fl(w)·fl(1/t))²·fl(1/(2S)) (w exact below 2^53; five roundings, relative 7.1u) by 284u for γ < 40. The
magnitude's bound q^{k+1} takes one more product with q̂ = e^{−fl(1/t)} (21u). So every computed value is within a
relative 305u of the true one, and the kernel decides only with the relative margin ρ = 2^{−43} = 1,024u
(:data:`GAUSSIAN_MARGIN`) on top, after the comparison's own three roundings: G = guess when the whole cell [x, x +
1)·2^{−63} of V₁'s top bits x lies in [q^{guess+1}, q^{guess}) (the guess itself, ⌊−t·ln⌋ of the cell's middle by
libm, is only a guess: the check is what is proven); accept when (x₂ + 1)·2^{−63} ≤ e^{−γ}(1 − ρ), reject when
x₂·2^{−63} ≥ e^{−γ}(1 + ρ), and reject at once when γ ≥ 40 and x₂ ≥ 64 (V₂ ≥ 2^{−57} > e^{−40(1 − 8u)}). Anything
else — the cell straddles a boundary within the margin, x = 0 — goes to the slow path. The kernel makes these
decisions for a run of attempts without a branch on their outcome: the draws are the accepted attempts in order, so
it writes each attempt's ±G to the next slot and advances the slot only on acceptance.

**The slow path** (:class:`_SlowPath`): the kernel stops at that attempt (status :data:`_SLOW`) with the
comparison's inputs; :mod:`.exact_comparison` settles it on the same V, its bits continuing with the words after the
attempt's two (in integer arithmetic with rigorous brackets of e^{−γ}), and the attempt runs again from its start
with the answer (the words are the same, so it reaches the same comparison, checked by its position). A decision is
thus a fixed function of the words whatever the margin; the tests check it draw for draw against ρ = 1/2, where most
comparisons take the slow path. |Y| > 2^31 (V₁ < e^{−1024}) raises ``OverflowError``: below it, |Y|·t < 2^52 and
every float and integer above is exact where claimed.

Sub-draws are independent because each takes fresh words; evaluating a product of independent Bernoulli trials
left to right and stopping at the first failure is the product's law.

**Words running out.** A call asks for about the words its draws need on average (at most :data:`_BLOCK_WORDS`
at a time) and runs the kernel over them. A draw (a discrete Gaussian's attempt) that reaches the end of the buffer
is not discarded (discarding it would favour draws that take few words, i.e. bias the law): the kernel returns the
position where it started, and the wrapper keeps the words from there, appends at least as many fresh ones and runs
it again from its start. A draw is a fixed function of the words it reads in order, so the output is exactly that
of one infinite stream of words, the concatenation of every block (the tests check it draw for draw against one
large block); the words after the last draw are dropped.

**Two threads.** A call of :data:`_SPLIT_DRAWS` draws or more draws its first half from the words of one child of
the caller's generator (``Generator.spawn(2)``) and its second half from the other's, in a worker thread: two
independent streams, so the halves are independent exact draws, and the result depends on the generator alone,
not on the threads' timing.

Why not OpenDP's sampler itself: it draws these distributions exactly too, but at about 11 µs per coordinate
(measured: 21,000 draws in 0.24 s); the discrete Gaussian kernel takes about 43 ns of CPU per draw on one
thread at S ≈ 2^30 … 2^40 (2.63 words; ``benchmarks/otb_exact_scaling.py`` prints it), its all-integer predecessor
about 0.14 µs (about 16 words) and the numpy-vectorised one before that about 0.5 µs. The tests compare this module with
OpenDP's sampler in distribution and with the exact pmfs (``tests/privacy/test_noise_samplers.py``).

Randomness: the caller's numpy ``Generator`` (:func:`~privfit.privacy.randomness.secure_generator`, PCG64DXSM
seeded with 256 bits from the operating system, for fits on private data).

Timing: the number of words and rejection rounds depends on the noise drawn (never on the data, which the noise
is added to later); the noise of a fit is drawn in blocks of thousands of coordinates, so a block's time reflects
the total of its draws' rounds, not any single coordinate's value. The Gaussian's slow path (about 0.1 ms) runs
for about one comparison in 2^{40}: at most it tells that some coordinate of a block of thousands drew a uniform
within 2^{−43} of a boundary, not which one nor its value.
"""

from __future__ import annotations

import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal, localcontext
from typing import Any

import numba
import numpy as np
from llvmlite import ir  # type: ignore[import-untyped]
from numba import types
from numba.extending import intrinsic

from .exact_comparison import below_exp_neg, geometric_count

MAX_GAUSSIAN_VARIANCE = 2**42 - 1
"""The largest S :func:`discrete_gaussian` accepts: t = ⌊√S⌋ + 1 ≤ 2^21, so a proposal |Y| ≤ 2^31 keeps |Y|·t and
w = |Y|·t − S below 2^52, exact in int64 and in float (module docstring); the noise layer keeps S near 2^40."""
MAX_LAPLACE_SCALE = 2**40
_MAX_PROPOSAL = 2**31
"""|Y| ≤ 2^31 keeps |Y|·t < 2^52 in :func:`discrete_gaussian` (t ≤ 2^21); a larger proposal raises."""
_INT64_MAX = 2**63 - 1
_MAX_LAPLACE_RUN = 2**22
_FACTORIAL_TOP = 18
_FACTORIAL = math.factorial(_FACTORIAL_TOP)
_FACTORIAL_THRESHOLDS = np.array([_FACTORIAL // math.factorial(k) for k in range(_FACTORIAL_TOP + 1)], dtype=np.int64)
"""N!/k! for k = 0 … N, N = 18 (entry k: "K > k" is U < N!/k!)."""

_DONE, _WORDS_OUT, _OVERFLOW, _SLOW = 0, 1, 2, 3
"""The kernels' status: all draws made; the words ran out in the middle of a draw; a proposal beyond the range; a
comparison the fast path left undecided waits for :class:`_SlowPath`."""
_SLOW_GEOMETRIC, _SLOW_ACCEPT = 0, 1
_GAUSSIAN_WORDS, _LAPLACE_WORDS = 4, 10
"""Words asked for per draw: above the mean at the layer's scales (measured ≈ 2.63 and ≈ 7.5), so that a call
mostly runs the kernel once."""
GAUSSIAN_MARGIN = 2.0**-43
"""ρ, the discrete Gaussian's fast path's relative margin: 1,024u (u = 2^{−53}), above the 305u bound of its
floating-point error (module docstring, "The float fast path")."""
_TOP_SCALE = 2.0**-63
_EXP_CUTOFF = 40.0
"""Acceptances with γ ≥ 40 are rejected at once when V ≥ 2^{−57} > e^{−40(1 − 8u)}: e^{−γ} is below it."""
_CUTOFF_TOP = np.uint64(64)
_ATTEMPT_BLOCK = 64
"""Attempts :func:`_gaussian_kernel` decides before it takes their outcomes in order (one variance for all)."""
_TAYLOR_3, _TAYLOR_4 = 1.0 / 6.0, 1.0 / 24.0


def _exp_table(points: list[Decimal]) -> np.ndarray:
    """e^{−x} at ``points``, each correctly rounded to a float (Decimal's exp is correctly rounded at 40 digits,
    and float() of a Decimal is correctly rounded: relative error ≤ u + 10^{−39})."""
    with localcontext() as context:
        context.prec = 40
        return np.array([float((-x).exp()) for x in points], dtype=np.float64)


_EXP_WHOLE = _exp_table([Decimal(a) for a in range(64)])
_EXP_FRACTIONS = _exp_table([Decimal(b) / 1024 for b in range(1024)])
_SPARE_WORDS = 256
_SMALL_DEN, _SMALL_K = 2**43, 2**20 - 1
"""den·k < 2^63 when den ≤ 2^43 and k < 2^20: no division needed to know that the series' product fits."""
_CUBE_DEN = 1_154_107
"""The largest den with 6·den³ < 2^63 (:func:`_bernoulli_exp_fraction`'s one-word path; t ≤ 2^20 + 1 takes it)."""
_BLOCK_WORDS = 1 << 15
"""At most this many words (256 KiB) per ``random_raw`` call: a buffer that stays in cache."""
_SPLIT_DRAWS = 1 << 14
"""From this many draws on, a call draws two halves in two threads (:func:`_draw`)."""
_MASK64 = 2**64 - 1
_PCG_CHEAP_MULTIPLIER = np.uint64(0xDA942042E4DD58B5)
_WORKER: ThreadPoolExecutor | None = None
_WORKER_PID = 0
_WORKER_LOCK = threading.Lock()


def _wide_product(typingctx: Any, a: Any, b: Any) -> Any:
    """The typing and code of :func:`_wide_multiply`."""
    if a != types.uint64 or b != types.uint64:
        return None
    signature = types.UniTuple(types.uint64, 2)(types.uint64, types.uint64)  # type: ignore[no-untyped-call]

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        wide = ir.IntType(128)
        product = builder.mul(builder.zext(args[0], wide), builder.zext(args[1], wide))
        high = builder.trunc(builder.lshr(product, ir.Constant(wide, 64)), ir.IntType(64))
        low = builder.trunc(product, ir.IntType(64))
        return context.make_tuple(builder, sig.return_type, (high, low))

    return signature, codegen


_wide_multiply: Any = intrinsic(_wide_product)
"""(hi, lo) = ``_wide_multiply(a, b)`` in compiled code: the 128-bit product a·b = hi·2^64 + lo of two uint64 (LLVM
``mul i128`` on the zero-extended operands; exact)."""


@numba.njit(cache=True, nogil=True)
def _uniform(words: np.ndarray, pos: int, m: int) -> tuple[Any, int]:  # pragma: no cover - numba
    """(U, next position): U uniform on [0, m), 1 ≤ m < 2^63, from the words at ``pos`` on (Lemire's
    multiply-and-reject, module docstring). Past the last word: (0, len(words) + 1), "ran out"."""
    n = words.shape[0]
    if pos >= n:
        return 0, n + 1
    modulus = np.uint64(m)
    high, low = _wide_multiply(words[pos], modulus)
    pos += 1
    if low < modulus:  # only then can low be below T = 2^64 mod m (< m): compute T
        threshold = (np.uint64(0) - modulus) % modulus
        while low < threshold:
            if pos >= n:
                return 0, n + 1
            high, low = _wide_multiply(words[pos], modulus)
            pos += 1
    return np.int64(high), pos


@numba.njit(cache=True, nogil=True)
def _bernoulli_exp_fraction(words: np.ndarray, pos: int, num: int, den: int) -> tuple[bool, int]:  # pragma: no cover
    """Bernoulli(exp(−num/den)) for 0 ≤ num ≤ den < 2^63 (CKS Alg. 1, γ ≤ 1; module docstring). When
    6·den³ < 2^63 the series' first three draws come from one uniform W on [0, 6·den³): "K > k" is W < 6·den³·γ^k/k!
    (6·den²·num, 3·den·num², num³: nested, as γ ≤ 1), the exact probabilities of the nested events."""
    if num == 0:
        return True, pos
    if den <= _CUBE_DEN:
        square = den * den
        w, pos = _uniform(words, pos, 6 * square * den)
        if w >= num * num * num:  # K ≤ 3: K = 1 (W ≥ 6·den²·num) or K = 3 (W < 3·den·num²) is odd
            return (w >= 6 * square * num) or (w < 3 * den * num * num), pos
        return _series(words, pos, num, den, 4)
    u, pos = _uniform(words, pos, den)  # A_1 ~ Bernoulli(num/den)
    if u >= num:
        return True, pos  # K = 1
    return _series(words, pos, num, den, 2)


@numba.njit(cache=True, nogil=True)
def _series(words: np.ndarray, pos: int, num: int, den: int, k: int) -> tuple[bool, int]:  # pragma: no cover
    """The rest of CKS Alg. 1's series for γ = num/den ≤ 1 once A_1 … A_{k−1} succeeded: A_k ~ Bernoulli(γ/k),
    k, k + 1, … until the first failure; returns "K odd"."""
    n = words.shape[0]
    combined = _SMALL_K if den <= _SMALL_DEN else _INT64_MAX // den  # den·k < 2^63 for k ≤ this
    while pos <= n:
        if k <= combined:  # Bernoulli(num/(den·k)) in one uniform integer
            u, pos = _uniform(words, pos, den * k)
            success = u < num
        else:  # Bernoulli(num/den)·Bernoulli(1/k)
            u, pos = _uniform(words, pos, den)
            success = u < num
            if success:
                u, pos = _uniform(words, pos, k)
                success = u == 0
        if not success:
            break
        k += 1
    return k % 2 == 1, pos


@numba.njit(cache=True, nogil=True)
def _bernoulli_exp_minus_one(words: np.ndarray, pos: int) -> tuple[bool, int]:  # pragma: no cover - numba
    """Bernoulli(e^{−1}) (CKS Alg. 1 at γ = 1, the series' length K read off one uniform U on [0, 18!); module
    docstring): K is the first k ≥ 2 with U ≥ 18!/k! (the thresholds descend, so K − 2 is the number of
    k ∈ [2, 18] with U < 18!/k!, counted without branches), and the answer is "K odd"."""
    u, pos = _uniform(words, pos, _FACTORIAL)
    if u >= _FACTORIAL_THRESHOLDS[3]:  # K ∈ {2, 3} (probability 5/6): K = 3 when U < 18!/2!
        return u < _FACTORIAL_THRESHOLDS[2], pos
    below = 0
    for k in range(2, _FACTORIAL_TOP + 1):
        below += u < _FACTORIAL_THRESHOLDS[k]
    k = below + 2
    if k > _FACTORIAL_TOP:  # U = 0: K > N, draw A_{N+1}, A_{N+2}, … ~ Bernoulli(1/k) until one fails
        n = words.shape[0]
        while pos <= n:
            u, pos = _uniform(words, pos, k)
            if u != 0:
                break
            k += 1
    return k % 2 == 1, pos


@numba.njit(cache=True, nogil=True)
def _laplace_draw(words: np.ndarray, pos: int, t: int) -> tuple[int, int, int]:  # pragma: no cover - numba
    """(Z, next position, status): one draw of P(z) ∝ e^{−|z|/t}, 1 ≤ t ≤ 2^40 (CKS Alg. 2)."""
    n = words.shape[0]
    while pos <= n:
        u, pos = _uniform(words, pos, t)
        keep, pos = _bernoulli_exp_fraction(words, pos, u, t)  # Bernoulli(exp(−U/t))
        if not keep:
            continue
        v = 0  # V: Bernoulli(e^{−1}) successes before the first failure, P(V ≥ v) = e^{−v}
        while pos <= n:
            success, pos = _bernoulli_exp_minus_one(words, pos)
            if not success:
                break
            v += 1
        if v >= _MAX_LAPLACE_RUN:  # probability e^{−2^22}; below it, X < 2^40 + 2^40·2^22 < 2^63
            return 0, pos, _OVERFLOW
        x = u + t * v
        sign, pos = _uniform(words, pos, 2)
        if sign == 1 and x == 0:
            continue
        return (-x if sign == 1 else x), pos, _DONE
    return 0, pos, _WORDS_OUT


@numba.njit(cache=True, nogil=True)
def _exp_negative(x: float) -> float:  # pragma: no cover - numba
    """e^{−x} for 0 ≤ x < 64, within a relative 20u (u = 2^{−53}; module docstring, "The float fast path"):
    e^{−⌊1024x⌋/1024} from two tables and e^{−r}, r = x − ⌊1024x⌋/1024 ∈ [0, 2^{−10}) (exact, Sterbenz), by its
    Taylor polynomial of degree 4 in Horner form."""
    j = np.int64(x * 1024.0)
    r = x - j * 0.0009765625
    series = 1.0 - r * (1.0 - r * (0.5 - r * (_TAYLOR_3 - r * _TAYLOR_4)))
    return float(_EXP_WHOLE[j >> 10] * _EXP_FRACTIONS[j & 1023] * series)


@numba.njit(cache=True, nogil=True)
def _slow_decision(
    resolved: np.ndarray, count: int, cursor: int, request: np.ndarray, kind: int, pos: int, top: Any, a: int,
    b: int, c: int,
) -> tuple[bool, int, int]:  # pragma: no cover - numba  # fmt: skip
    """(found, value, next position) of the draw's ``cursor``-th undecided comparison, of kind ``kind``
    (:data:`_SLOW_GEOMETRIC` with (a, b) = (t, guess), or :data:`_SLOW_ACCEPT` with (a, b, c) = (w, S, t)), whose
    extra words start at ``pos``: row ``cursor`` of ``resolved[:count]``, which :class:`_SlowPath` filled in exact
    arithmetic for this draw (its key 2·pos + kind checked); not there yet: the request is written to ``request``
    for it."""
    if cursor < count:
        if resolved[cursor, 0] != 2 * pos + kind:
            raise AssertionError("a settled comparison does not match the draw run again")
        return True, resolved[cursor, 1], resolved[cursor, 2]
    request[0], request[1], request[2] = kind, pos, np.int64(top)
    request[3], request[4], request[5] = a, b, c
    return False, 0, pos


@numba.njit(cache=True, nogil=True)
def _gaussian_attempt(
    words: np.ndarray, pos: int, s: int, t: int, inverse_t: float, inverse_double_s: float, q_hat: float,
    margin: float, resolved: np.ndarray, count_resolved: int, request: np.ndarray,
) -> tuple[int, bool, int, int]:  # pragma: no cover - numba  # fmt: skip
    """(±G, accepted, next position, status): one attempt of the discrete Gaussian P(z) ∝ e^{−z²/(2S)},
    1 ≤ S < 2^42, t = ⌊√S⌋ + 1 (CKS Alg. 3 with the discrete Laplace proposal by inversion; module docstring), from
    the two words at ``pos``, settling what the fast path leaves open from the rows of ``resolved[:count_resolved]``
    (:func:`_slow_decision`; status :data:`_SLOW` when a comparison waits for one). ``inverse_t`` = fl(1/t),
    ``inverse_double_s`` = fl(1/(2S)), ``q_hat`` = :func:`_exp_negative` (fl(1/t)), ``margin`` = the relative
    margin ρ. :func:`_gaussian_kernel` runs the same decisions inline, without the rows."""
    n = words.shape[0]
    if pos + 2 > n:
        return 0, False, n + 1, _WORDS_OUT
    below_factor, above_factor = 1.0 - margin, 1.0 + margin
    cursor = 0
    first, second = words[pos], words[pos + 1]
    pos += 2
    top = first >> np.uint64(1)
    negative = (first & np.uint64(1)) == np.uint64(1)
    found = True
    guess = int(-t * math.log((np.float64(top) + 0.5) * _TOP_SCALE))  # top = 0: about 44.4t, a start
    at_guess = _exp_negative(guess * inverse_t)  # ≈ q^guess
    if (
        np.float64(top) * _TOP_SCALE >= at_guess * q_hat * above_factor
        and np.float64(top + np.uint64(1)) * _TOP_SCALE <= at_guess * below_factor
    ):
        count = guess  # q^{guess+1} ≤ V < q^guess for every V of the word's cell (never when top = 0)
    else:
        found, count, pos = _slow_decision(
            resolved, count_resolved, cursor, request, _SLOW_GEOMETRIC, pos, top, t, guess, 0
        )
        cursor += 1
    if not found:
        return 0, False, pos, _SLOW
    if pos > n:
        return 0, False, pos, _WORDS_OUT
    if count > _MAX_PROPOSAL:
        return 0, False, pos, _OVERFLOW
    value = -count if negative else count
    if negative and count == 0:
        return value, False, pos, _DONE
    w = abs(count * t - s)
    scaled = np.float64(w) * inverse_t
    gamma = scaled * scaled * inverse_double_s  # (|Y| − S/t)²/(2S)
    uniform = second >> np.uint64(1)
    if gamma >= _EXP_CUTOFF:
        if uniform >= _CUTOFF_TOP:  # V ≥ 2^{−57} > e^{−γ}
            return value, False, pos, _DONE
        found, accept, pos = _slow_decision(
            resolved, count_resolved, cursor, request, _SLOW_ACCEPT, pos, uniform, w, s, t
        )
    else:
        acceptance = _exp_negative(gamma)
        if np.float64(uniform + np.uint64(1)) * _TOP_SCALE <= acceptance * below_factor:
            accept = 1
        elif np.float64(uniform) * _TOP_SCALE >= acceptance * above_factor:
            accept = 0
        else:
            found, accept, pos = _slow_decision(
                resolved, count_resolved, cursor, request, _SLOW_ACCEPT, pos, uniform, w, s, t
            )
    if not found:
        return 0, False, pos, _SLOW
    if pos > n:
        return 0, False, pos, _WORDS_OUT
    return value, accept == 1, pos, _DONE


@numba.njit(cache=True, nogil=True)
def _fast_attempt(
    first: Any, second: Any, s: int, t: int, inverse_t: float, inverse_double_s: float, q_hat: float,
    below_factor: float, above_factor: float,
) -> tuple[int, bool, bool]:  # pragma: no cover - numba  # fmt: skip
    """(±G, accepted, decided): :func:`_gaussian_attempt`'s decisions on the words ``first`` and ``second`` by the
    float fast path alone, with no branch on their outcome; ``decided`` is false when any of them needs the slow
    path (then the other two mean nothing)."""
    top = np.float64(np.int64(first >> np.uint64(1)))  # < 2^63: a signed conversion, one instruction
    guess = int(-t * math.log((top + 0.5) * _TOP_SCALE))
    at_guess = _exp_negative(guess * inverse_t)
    geometric_known = (top * _TOP_SCALE >= at_guess * q_hat * above_factor) & (
        (top + 1.0) * _TOP_SCALE <= at_guess * below_factor
    )
    negative = (first & np.uint64(1)) == np.uint64(1)
    sign_rejects = negative & (guess == 0)
    scaled = np.float64(abs(guess * t - s)) * inverse_t
    gamma = scaled * scaled * inverse_double_s
    uniform = np.float64(np.int64(second >> np.uint64(1)))
    acceptance = _exp_negative(min(gamma, _EXP_CUTOFF))  # in range; unused from the cutoff on
    small = gamma < _EXP_CUTOFF
    accepts = small & ((uniform + 1.0) * _TOP_SCALE <= acceptance * below_factor)
    rejects = (small & (uniform * _TOP_SCALE >= acceptance * above_factor)) | (
        (gamma >= _EXP_CUTOFF) & (uniform >= 64.0)
    )
    decided = geometric_known & (sign_rejects | accepts | rejects)
    return (-guess if negative else guess), bool(accepts and not sign_rejects), bool(decided)


@numba.njit(cache=True, nogil=True)
def _gaussian_kernel(
    words: np.ndarray,
    out: np.ndarray,
    filled: int,
    variances: np.ndarray,
    roots: np.ndarray,
    inverse_roots: np.ndarray,
    inverse_doubles: np.ndarray,
    q_hats: np.ndarray,
    margins: np.ndarray,
    per_draw: bool,
    resolved: np.ndarray,
    count_resolved: int,
    request: np.ndarray,
) -> tuple[int, int, int]:  # pragma: no cover - numba
    """Fill ``out[filled:]`` with discrete Gaussian draws (variance ``variances[i]``, t = ``roots[i]``, the
    floats of :func:`_gaussian_attempt` in the next three, the relative margin ``margins[i]``; entry 0 for all
    when not ``per_draw``; the last three: :class:`_SlowPath`'s, whose rows belong to the attempt the words start
    with) from ``words``; returns (draws made, where the next attempt starts, status).

    The draws are the accepted attempts in order, so the kernel runs attempts, not draws: each writes its ±G to
    the next slot and moves on by one slot only when accepted, and the words it stops at — ran out, a comparison
    for the slow path — are an attempt's start. It makes :func:`_gaussian_attempt`'s decisions by
    :func:`_fast_attempt`, with no branch on the outcome (a rejection is as cheap as an acceptance, no
    misprediction); with one variance for all draws it decides a block of :data:`_ATTEMPT_BLOCK` attempts first
    (independent of one another, so the processor overlaps them) and then takes their outcomes in order. An
    attempt the fast path cannot decide is left to :func:`_gaussian_attempt`, which writes the slow path's
    request."""
    n = words.shape[0]
    size = out.shape[0]
    pos = 0
    if count_resolved > 0 and filled < size:  # the attempt the settled rows belong to (rare)
        j = filled if per_draw else 0
        value, accepted, pos, status = _gaussian_attempt(
            words, pos, variances[j], roots[j], inverse_roots[j], inverse_doubles[j], q_hats[j], margins[j],
            resolved, count_resolved, request,
        )  # fmt: skip
        if status != _DONE:
            return filled, 0, status
        out[filled] = value
        filled += 1 if accepted else 0
    values = np.empty(_ATTEMPT_BLOCK, dtype=np.int64)
    accepted_flags = np.empty(_ATTEMPT_BLOCK, dtype=np.bool_)
    decided_flags = np.empty(_ATTEMPT_BLOCK, dtype=np.bool_)
    while filled < size:
        j = filled if per_draw else 0
        s, t, inverse_t, q_hat = variances[j], roots[j], inverse_roots[j], q_hats[j]
        inverse_double_s, margin = inverse_doubles[j], margins[j]
        below_factor, above_factor = 1.0 - margin, 1.0 + margin
        block = min(1 if per_draw else _ATTEMPT_BLOCK, (n - pos) // 2)
        if block == 0:
            return filled, pos, _WORDS_OUT
        for k in range(block):
            values[k], accepted_flags[k], decided_flags[k] = _fast_attempt(
                words[pos + 2 * k], words[pos + 2 * k + 1], s, t, inverse_t, inverse_double_s, q_hat,
                below_factor, above_factor,
            )  # fmt: skip
        for k in range(block):
            if not decided_flags[k]:
                _, _, _, status = _gaussian_attempt(
                    words, pos, s, t, inverse_t, inverse_double_s, q_hat, margin, resolved, 0, request
                )
                if status == _DONE:
                    raise AssertionError("the fast path's decisions and _gaussian_attempt's differ")
                return filled, pos, status
            out[filled] = values[k]
            filled += 1 if accepted_flags[k] else 0
            pos += 2
            if filled == size:
                break
    return size, pos, _DONE


@numba.njit(cache=True, nogil=True)
def _laplace_kernel(
    words: np.ndarray, out: np.ndarray, filled: int, scales: np.ndarray, per_draw: bool
) -> tuple[int, int, int]:  # pragma: no cover - numba
    """:func:`_gaussian_kernel` for the discrete Laplace of scale ``scales[i]``."""
    n = words.shape[0]
    pos = 0
    for i in range(filled, out.shape[0]):
        start = pos
        value, pos, status = _laplace_draw(words, pos, scales[i if per_draw else 0])
        if pos > n:
            return i, start, _WORDS_OUT
        if status != _DONE:
            return i, start, status
        out[i] = value
    return out.shape[0], pos, _DONE


def _parameters(value: int | np.ndarray, size: int, top: int, what: str) -> tuple[np.ndarray, bool]:
    """``value`` checked to lie in [1, top], as a contiguous int64 array: one entry when it is the same for every
    draw (then ``False``), else one per draw (``True``)."""
    array = np.broadcast_to(np.asarray(value, dtype=np.int64), (size,))
    if size == 0:
        return np.ones(1, dtype=np.int64), False
    low, high = int(array.min()), int(array.max())
    if low < 1 or high > top:
        raise ValueError(f"the {what} must be integers in [1, {top}]")
    if low == high:
        return np.full(1, low, dtype=np.int64), False
    return np.ascontiguousarray(array), True


def _draw(
    kernel: Any, rng: np.random.Generator, size: int, parameters: tuple[np.ndarray, ...], per_draw: bool, rate: int
) -> np.ndarray:
    """``size`` draws of ``kernel`` (with ``parameters``: one entry for all draws, or one per draw when
    ``per_draw``) from ``rng``: from :data:`_SPLIT_DRAWS` draws on, the first half from the words of one child of
    ``rng`` (``Generator.spawn``) in this thread and the second from another child's in a worker thread (the
    kernels release the GIL); else serially (:func:`_draw_words`)."""
    if size < _SPLIT_DRAWS:
        return _draw_words(kernel, rng.bit_generator, size, parameters, per_draw, rate)
    try:
        children = rng.spawn(2)
    except TypeError:  # a generator without a SeedSequence: one stream
        return _draw_words(kernel, rng.bit_generator, size, parameters, per_draw, rate)
    half = size // 2
    halves = (
        [tuple(p[:half] for p in parameters), tuple(p[half:] for p in parameters)] if per_draw else [parameters] * 2
    )
    second = _worker().submit(_draw_words, kernel, children[1].bit_generator, size - half, halves[1], per_draw, rate)
    first = _draw_words(kernel, children[0].bit_generator, half, halves[0], per_draw, rate)
    return np.concatenate((first, second.result()))


def _worker() -> ThreadPoolExecutor:
    """The worker threads of :func:`_draw`, made in this process (a process forked from one that had them has
    none of their threads, so it makes its own)."""
    global _WORKER, _WORKER_PID
    with _WORKER_LOCK:
        if _WORKER is None or os.getpid() != _WORKER_PID:
            _WORKER = ThreadPoolExecutor(max_workers=2, thread_name_prefix="privfit-exact-sampler")
            _WORKER_PID = os.getpid()
        return _WORKER


def _draw_words(
    kernel: Any, source: np.random.BitGenerator, size: int, parameters: tuple[np.ndarray, ...], per_draw: bool,
    rate: int,
) -> np.ndarray:  # fmt: skip
    """``size`` draws of ``kernel`` from the raw words of ``source``, in blocks of at most :data:`_BLOCK_WORDS`
    words, ``rate`` words asked for per missing draw; a draw that ran out of words runs again from its start on
    its words and fresh ones (module docstring, "Words running out"). A PCG64DXSM source's words are made by
    :func:`_pcg64dxsm_fill` from its state, under its lock, and its state is advanced past them, as
    ``random_raw`` would; any other's come from ``random_raw``."""
    out = np.empty(size, dtype=np.int64)
    if size == 0:
        return out
    if not isinstance(source, np.random.PCG64DXSM):
        _fill_out(kernel, source.random_raw, out, parameters, per_draw, rate)
        return out
    with source.lock:
        state = source.state
        lcg_state, increment = state["state"]["state"], state["state"]["inc"]
        lcg = np.array([lcg_state >> 64, lcg_state & _MASK64, increment >> 64, increment & _MASK64], dtype=np.uint64)

        def fresh(count: int) -> np.ndarray:
            words = np.empty(count, dtype=np.uint64)
            _pcg64dxsm_fill(lcg, words)
            return words

        try:
            _fill_out(kernel, fresh, out, parameters, per_draw, rate)
        finally:
            state["state"]["state"] = int(lcg[0]) << 64 | int(lcg[1])
            source.state = state
    return out


def _fill_out(
    kernel: Any, fresh: Any, out: np.ndarray, parameters: tuple[np.ndarray, ...], per_draw: bool, rate: int
) -> None:
    """Fill ``out`` by ``kernel`` from the words ``fresh(count)`` makes (:func:`_draw_words`); the Gaussian
    kernel's undecided comparisons are settled by a :class:`_SlowPath` and the draw run again from its start."""
    size = out.shape[0]
    words = fresh(min(rate * size + _SPARE_WORDS, _BLOCK_WORDS))
    slow = _SlowPath() if kernel is _gaussian_kernel else None
    filled = 0
    while True:
        arguments = () if slow is None else slow.arguments()
        filled, position, status = kernel(words, out, filled, *parameters, per_draw, *arguments)
        if status == _OVERFLOW:
            raise OverflowError("a discrete Laplace draw beyond the sampler's integer range (module docstring)")
        if filled == size:
            return
        tail = words[position:]
        if slow is not None:
            slow.shift(position)
            if status == _SLOW and slow.settle(tail):
                words = tail
                continue
        words = np.concatenate((tail, fresh(max(tail.size, min(rate * (size - filled) + _SPARE_WORDS, _BLOCK_WORDS)))))


class _SlowPath:
    """The comparisons the Gaussian kernel's float fast path left undecided, settled exactly in Python
    (:mod:`.exact_comparison`) on the same words: rows (2·position + kind, value, next position) that the kernel
    reads when it runs the draw again (:func:`_slow_decision`). Positions are in the kernel's current words;
    :meth:`shift` follows the words when the caller drops a prefix of them."""

    def __init__(self) -> None:
        self.table = np.zeros((8, 3), dtype=np.int64)
        self.count = 0
        self.request = np.zeros(6, dtype=np.int64)

    def arguments(self) -> tuple[np.ndarray, int, np.ndarray]:
        return self.table, self.count, self.request

    def shift(self, offset: int) -> None:
        """The words now start at ``offset`` of the old ones (the draw under way starts there): rows of earlier
        draws go, the rest move."""
        self.request[1] -= offset
        keep = self.table[: self.count, 0] // 2 > offset
        rows = self.table[: self.count][keep] - np.array([2 * offset, 0, offset], dtype=np.int64)
        self.count = rows.shape[0]
        self.table[: self.count] = rows

    def settle(self, words: np.ndarray) -> bool:
        """Settle the kernel's request on ``words`` and store its row; ``False`` when the words ran out first."""
        kind, position, top, a, b, c = (int(v) for v in self.request)
        if kind == _SLOW_GEOMETRIC:
            value, following = geometric_count(words, position, top, a, b)
        else:
            value, following = below_exp_neg(words, position, top, a * a, 2 * b * c * c)
        if following > words.shape[0]:
            return False
        if self.count == self.table.shape[0]:
            self.table = np.concatenate((self.table, np.zeros_like(self.table)))
        self.table[self.count] = (2 * position + kind, value, following)
        self.count += 1
        return True


@numba.njit(cache=True, nogil=True)
def _pcg64dxsm_fill(lcg: np.ndarray, words: np.ndarray) -> None:  # pragma: no cover - numba
    """``words`` = the next raw outputs of numpy's PCG64DXSM whose 128-bit LCG state and increment are
    ``lcg`` = [state_hi, state_lo, inc_hi, inc_lo], and ``lcg`` advanced past them: numpy's ``pcg_cm_random_r``,
    the DXSM output of the state before each step (hi ^= hi >> 32; hi *= M; hi ^= hi >> 48; hi *= lo | 1), then
    the step state = state·M + inc mod 2^128, M = 0xda942042e4dd58b5 (the tests check it word for word against
    ``random_raw``)."""
    multiplier = _PCG_CHEAP_MULTIPLIER
    high, low, increment_high, increment_low = lcg[0], lcg[1], lcg[2], lcg[3]
    for i in range(words.shape[0]):
        output = high ^ (high >> np.uint64(32))
        output *= multiplier
        output ^= output >> np.uint64(48)
        words[i] = output * (low | np.uint64(1))
        product_high, product_low = _wide_multiply(low, multiplier)
        low = product_low + increment_low
        high = product_high + high * multiplier + increment_high + (np.uint64(1) if low < product_low else np.uint64(0))
    lcg[0] = high
    lcg[1] = low


def discrete_laplace(rng: np.random.Generator, scale: int | np.ndarray, size: int) -> np.ndarray:
    """``size`` draws of P(z) ∝ e^{−|z|/t}, t = ``scale`` (an integer in [1, 2^40], or one per draw), exactly
    (CKS Alg. 2)."""
    scales, per_draw = _parameters(scale, size, MAX_LAPLACE_SCALE, "discrete Laplace scales")
    return _draw(_laplace_kernel, rng, size, (scales,), per_draw, _LAPLACE_WORDS)


def discrete_gaussian(rng: np.random.Generator, variance: int | np.ndarray, size: int) -> np.ndarray:
    """``size`` draws of P(z) ∝ e^{−z²/(2S)}, S = ``variance`` (an integer in [1, 2^42 − 1], or one per draw),
    exactly (CKS Alg. 3; module docstring)."""
    return _discrete_gaussian(rng, variance, size, GAUSSIAN_MARGIN)


def _discrete_gaussian(rng: np.random.Generator, variance: int | np.ndarray, size: int, margin: float) -> np.ndarray:
    """:func:`discrete_gaussian` with the fast path's relative margin ρ = ``margin`` (the tests widen it, sending
    more decisions to the exact slow path; any ρ ∈ [GAUSSIAN_MARGIN, 1) gives the same law)."""
    if not GAUSSIAN_MARGIN <= margin < 1.0:
        raise ValueError(f"the margin must lie in [{GAUSSIAN_MARGIN}, 1)")
    variances, per_draw = _parameters(variance, size, MAX_GAUSSIAN_VARIANCE, "discrete Gaussian variances")
    unique, where = np.unique(variances, return_inverse=True)
    roots = [math.isqrt(int(v)) + 1 for v in unique]
    where = where.reshape(-1)
    inverse_roots = [1.0 / t for t in roots]
    parameters = (
        variances,
        np.asarray(roots, dtype=np.int64)[where],
        np.asarray(inverse_roots, dtype=np.float64)[where],
        np.asarray([1.0 / (2.0 * int(v)) for v in unique], dtype=np.float64)[where],
        np.asarray([_exp_negative(x) for x in inverse_roots], dtype=np.float64)[where],
        np.full(unique.size, margin, dtype=np.float64)[where],
    )
    return _draw(_gaussian_kernel, rng, size, parameters, per_draw, _GAUSSIAN_WORDS)
