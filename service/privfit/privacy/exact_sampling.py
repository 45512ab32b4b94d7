"""Exact samplers of the discrete Laplace and discrete Gaussian on the integers, compiled with numba.

These are Algorithms 1–3 of Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential Privacy",
NeurIPS 2020 (CKS) — the algorithms OpenDP implements — run draw by draw in a compiled kernel (``nogil``: a
background thread drawing noise runs beside the solver's own kernel). Every decision is integer arithmetic on
exactly uniform integers: no floating-point number is computed, so the output distribution is exactly the target,
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
* :func:`_bernoulli_exp` — Bernoulli(exp(−γ)) for any γ ≥ 0 (CKS Alg. 1): the fraction γ − ⌊γ⌋ by the series,
  then ⌊γ⌋ Bernoulli(e^{−1}) trials that must all succeed.
* :func:`discrete_laplace` — P(z) ∝ e^{−|z|/t} for an integer t ≥ 1 (CKS Alg. 2): U uniform on [0, t), kept with
  probability exp(−U/t); V the number of Bernoulli(e^{−1}) successes before the first failure; X = U + t·V and a
  fair sign B, rejecting B = 1 with X = 0.
* :func:`discrete_gaussian` — P(z) ∝ e^{−z²/(2S)} for an integer variance parameter S ≥ 1 (CKS Alg. 3): propose
  Y from the discrete Laplace with t = ⌊√S⌋ + 1 and accept with probability exp(−(|Y| − S/t)²/(2S)). With
  |Y|·t − S = w, |w| = qt + r (0 ≤ r < t), the exponent is q²/(2S) + qr/(St) + r²/(2St²) and the acceptance is
  the product of independent Bernoulli(exp(−·)): of the first two terms as one fraction (q²t + 2qr)/(2St) while
  its integers stay below 2^63 (:func:`_merge_limit`), else of each; and of the last, whose series draws
  Bernoulli(1/(2S·k)) · Bernoulli(r/t)². Every integer stays below 2^63 for S < 2^42 and proposals |Y| ≤ 2^31 (a
  larger proposal, of probability below e^{−1024}, raises ``OverflowError``; so does a discrete Laplace run
  V ≥ 2^22, of probability e^{−2^22}, below which X = U + t·V < 2^63).

Sub-draws are independent because each takes fresh words; evaluating a product of independent Bernoulli trials
left to right and stopping at the first failure is the product's law.

**Words running out.** A call asks for about the words its draws need on average (at most :data:`_BLOCK_WORDS`
at a time) and runs the kernel over them. A draw that reaches the end of the buffer is not discarded (discarding
it would favour draws that take few words, i.e. bias the law): the kernel returns the position where that draw
started, and the wrapper keeps the words from there, appends at least as many fresh ones and runs the draw again
from its start. A draw is a fixed function of the words it reads in order, so the output is exactly that of one
infinite stream of words, the concatenation of every block (the tests check it draw for draw against one large
block); the words after the last draw are dropped.

**Two threads.** A call of :data:`_SPLIT_DRAWS` draws or more draws its first half from the words of one child of
the caller's generator (``Generator.spawn(2)``) and its second half from the other's, in a worker thread: two
independent streams, so the halves are independent exact draws, and the result depends on the generator alone,
not on the threads' timing.

Why not OpenDP's sampler itself: it draws these distributions exactly too, but at about 11 µs per coordinate
(measured: 21,000 draws in 0.24 s); these kernels take about 0.1 µs of CPU per discrete Gaussian draw at
S ≈ 2^30 … 2^40 (about 11 words; ``benchmarks/otb_exact_scaling.py`` prints it), the numpy-vectorised version of
the same algorithms they replaced about 0.5 µs. The tests compare this module with
OpenDP's sampler in distribution and with the exact pmfs (``tests/privacy/test_noise_samplers.py``).

Randomness: the caller's numpy ``Generator`` (:func:`~privfit.privacy.randomness.secure_generator`, PCG64DXSM
seeded with 256 bits from the operating system, for fits on private data).

Timing: the number of words and rejection rounds depends on the noise drawn (never on the data, which the noise
is added to later); the noise of a fit is drawn in blocks of thousands of coordinates, so a block's time reflects
the total of its draws' rounds, not any single coordinate's value.
"""

from __future__ import annotations

import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numba
import numpy as np
from llvmlite import ir  # type: ignore[import-untyped]
from numba import types
from numba.extending import intrinsic

MAX_GAUSSIAN_VARIANCE = 2**42 - 1
"""The largest S for which every intermediate integer of :func:`discrete_gaussian` stays below 2^63 (module
docstring; the largest is S·t, t = ⌊√S⌋ + 1: 2^63 − 2^21 here, 2^63 + 2^42 at S = 2^42, beyond int64); the
noise layer keeps S near 2^40."""
MAX_LAPLACE_SCALE = 2**40
_MAX_PROPOSAL = 2**31
"""|Y| ≤ 2^31 keeps q ≤ |Y| + S/t < 2^31 + 2^21 in :func:`discrete_gaussian`, so q² < 2^63 and |Y|·t < 2^53."""
_INT64_MAX = 2**63 - 1
_MAX_LAPLACE_RUN = 2**22
_FACTORIAL_TOP = 18
_FACTORIAL = math.factorial(_FACTORIAL_TOP)
_FACTORIAL_THRESHOLDS = np.array([_FACTORIAL // math.factorial(k) for k in range(_FACTORIAL_TOP + 1)], dtype=np.int64)
"""N!/k! for k = 0 … N, N = 18 (entry k: "K > k" is U < N!/k!)."""

_DONE, _WORDS_OUT, _OVERFLOW = 0, 1, 2
"""The kernels' status: all draws made; the words ran out in the middle of a draw; a proposal beyond the range."""
_GAUSSIAN_WORDS, _LAPLACE_WORDS = 20, 10
"""Words asked for per draw: above the mean at the layer's scales (measured ≈ 16 and ≈ 7.5), so that a call
mostly runs the kernel once."""
_SPARE_WORDS = 256
_SMALL_DEN, _SMALL_K = 2**43, 2**20 - 1
"""den·k < 2^63 when den ≤ 2^43 and k < 2^20: no division needed to know that the series' product fits."""
_WHOLE_BY_SUBTRACTION = 8
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
def _bernoulli_exp(words: np.ndarray, pos: int, num: int, den: int) -> tuple[bool, int]:  # pragma: no cover
    """Bernoulli(exp(−num/den)) for 0 ≤ num < 2^63, 1 ≤ den < 2^63 (CKS Alg. 1): the fractional part by the
    series, then ⌊num/den⌋ Bernoulli(e^{−1}) trials that must all succeed."""
    whole = 0
    if num >= _WHOLE_BY_SUBTRACTION * den:
        whole = num // den
        num -= whole * den
    while num >= den:  # γ < 8 (nearly always): ⌊γ⌋ by subtraction, no division
        num -= den
        whole += 1
    success, pos = _bernoulli_exp_fraction(words, pos, num, den)
    n = words.shape[0]
    trial = 0
    while success and trial < whole and pos <= n:
        success, pos = _bernoulli_exp_minus_one(words, pos)
        trial += 1
    return success, pos


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
def _divide(w: int, t: int, reciprocal: np.uint64) -> tuple[Any, Any]:  # pragma: no cover - numba
    """(⌊w/t⌋, w mod t) for 0 ≤ w < 2^63, 2 ≤ t < 2^63, from M = ``reciprocal`` = ⌊2^64/t⌋ without a division:
    q' = ⌊w·M/2^64⌋ satisfies q − 1 ≤ q' ≤ q (M > 2^64/t − 1, so w·M/2^64 > w/t − w/2^64 > w/t − 1, and
    M ≤ 2^64/t), so one correction step gives q exactly."""
    high, _ = _wide_multiply(np.uint64(w), reciprocal)
    q = np.int64(high)
    r = w - q * t
    if r >= t:
        q += 1
        r -= t
    return q, r


@numba.njit(cache=True, nogil=True)
def _last_factor(words: np.ndarray, pos: int, r: int, t: int, s: int) -> tuple[bool, int]:  # pragma: no cover
    """Bernoulli(exp(−r²/(2St²))), 0 ≤ r < t (CKS Alg. 1 by the series, with Bernoulli(γ/k) the product of
    Bernoulli(1/(2S·k)) and two Bernoulli(r/t))."""
    if r == 0:
        return True, pos
    u, pos = _uniform(words, pos, 2 * s)  # k = 1: Bernoulli(1/(2S)) first, it nearly always fails
    if u != 0:
        return True, pos  # K = 1
    u, pos = _uniform(words, pos, t)
    if u >= r:
        return True, pos
    u, pos = _uniform(words, pos, t)
    if u >= r:
        return True, pos
    n = words.shape[0]
    k = 2
    while pos <= n:
        if 2 * s <= _INT64_MAX // k:
            u, pos = _uniform(words, pos, 2 * s * k)
            success = u == 0
        else:
            u, pos = _uniform(words, pos, 2 * s)
            success = u == 0
            if success:
                u, pos = _uniform(words, pos, k)
                success = u == 0
        if success:
            u, pos = _uniform(words, pos, t)
            success = u < r
        if success:
            u, pos = _uniform(words, pos, t)
            success = u < r
        if not success:
            break
        k += 1
    return k % 2 == 1, pos


@numba.njit(cache=True, nogil=True)
def _gaussian_draw(
    words: np.ndarray, pos: int, s: int, t: int, q_top: int, reciprocal: np.uint64
) -> tuple[int, int, int]:  # pragma: no cover - numba
    """(Z, next position, status): one draw of P(z) ∝ e^{−z²/(2S)}, 1 ≤ S < 2^42, t = ⌊√S⌋ + 1 (CKS Alg. 3).
    ``q_top``: the largest q for which the first two terms are drawn as one, (q²t + 2qr)/(2St) (−1: never;
    :func:`_merge_limit`); ``reciprocal``: ⌊2^64/t⌋ (:func:`_divide`)."""
    n = words.shape[0]
    while pos <= n:
        y, pos, status = _laplace_draw(words, pos, t)
        if status != _DONE or pos > n:
            return 0, pos, status
        magnitude = abs(y)
        if magnitude > _MAX_PROPOSAL:  # probability below e^{−2^31/t} ≤ e^{−1024}
            return 0, pos, _OVERFLOW
        w = abs(magnitude * t - s)
        q, r = _divide(w, t, reciprocal)
        # (|Y| − S/t)²/(2S) = q²/(2S) + qr/(St) + r²/(2St²), each term's Bernoulli(exp(−·)) independent.
        if q <= q_top:
            accept, pos = _bernoulli_exp(words, pos, q * q * t + 2 * q * r, 2 * s * t)
        else:
            accept, pos = _bernoulli_exp(words, pos, q * q, 2 * s)
            if accept:
                accept, pos = _bernoulli_exp(words, pos, q * r, s * t)
        if accept:
            accept, pos = _last_factor(words, pos, r, t, s)
        if accept and pos <= n:
            return y, pos, _DONE
    return 0, pos, _WORDS_OUT


def _merge_limit(s: int, t: int) -> int:
    """The largest q for which :func:`_gaussian_draw` draws q²/(2S) + qr/(St) as one fraction (q²t + 2qr)/(2St):
    ⌊√(2^61/t)⌋ when 2St < 2^63, else −1. Then q²t ≤ 2^61 and 2qr < 2qt ≤ 2^31.5·√t ≤ 2^42, so the numerator
    stays below 2^63 too."""
    return math.isqrt(2**61 // t) if 2 * s * t <= _INT64_MAX else -1


@numba.njit(cache=True, nogil=True)
def _gaussian_kernel(
    words: np.ndarray,
    out: np.ndarray,
    filled: int,
    variances: np.ndarray,
    roots: np.ndarray,
    q_tops: np.ndarray,
    reciprocals: np.ndarray,
    per_draw: bool,
) -> tuple[int, int, int]:  # pragma: no cover - numba
    """Fill ``out[filled:]`` with discrete Gaussian draws (variance ``variances[i]``, t = ``roots[i]``, merge
    limit ``q_tops[i]``, ⌊2^64/t⌋ = ``reciprocals[i]``; entry 0 for all when not ``per_draw``) from ``words``;
    returns (draws made, where the next draw starts, status)."""
    n = words.shape[0]
    pos = 0
    for i in range(filled, out.shape[0]):
        j = i if per_draw else 0
        start = pos
        value, pos, status = _gaussian_draw(words, pos, variances[j], roots[j], q_tops[j], reciprocals[j])
        if pos > n:
            return i, start, _WORDS_OUT
        if status != _DONE:
            return i, start, status
        out[i] = value
    return out.shape[0], pos, _DONE


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
    """Fill ``out`` by ``kernel`` from the words ``fresh(count)`` makes (:func:`_draw_words`)."""
    size = out.shape[0]
    words = fresh(min(rate * size + _SPARE_WORDS, _BLOCK_WORDS))
    filled = 0
    while True:
        filled, position, status = kernel(words, out, filled, *parameters, per_draw)
        if status == _OVERFLOW:
            raise OverflowError("a discrete Laplace draw beyond the sampler's integer range (module docstring)")
        if filled == size:
            return
        tail = words[position:]
        words = np.concatenate((tail, fresh(max(tail.size, min(rate * (size - filled) + _SPARE_WORDS, _BLOCK_WORDS)))))


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
    exactly (CKS Alg. 3)."""
    variances, per_draw = _parameters(variance, size, MAX_GAUSSIAN_VARIANCE, "discrete Gaussian variances")
    unique, where = np.unique(variances, return_inverse=True)
    roots = [math.isqrt(int(v)) + 1 for v in unique]
    limits = [_merge_limit(int(v), t) for v, t in zip(unique, roots, strict=True)]
    where = where.reshape(-1)
    parameters = (
        variances,
        np.asarray(roots, dtype=np.int64)[where],
        np.asarray(limits, dtype=np.int64)[where],
        np.asarray([2**64 // t for t in roots], dtype=np.uint64)[where],
    )
    return _draw(_gaussian_kernel, rng, size, parameters, per_draw, _GAUSSIAN_WORDS)
