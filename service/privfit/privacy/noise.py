"""The noise layer: every draw that reaches a release goes through here, from an exact or a float sampler.

Two samplers, chosen per server (``PRIVFIT_NOISE_SAMPLER``, :func:`configure_sampler`) or per block of code
(:func:`using_sampler`):

* ``exact`` — the default of the service for fits on private data. A release of ``values`` with Gaussian noise
  of standard deviation σ is the **discrete Gaussian mechanism on the lattice 2^k·Z** (Canonne, Kamath &
  Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS 2020, CKS):

  1. ``v = rint(clip(values, −B, B) / 2^k)``: the values rounded to the nearest lattice point, as integers. B is a
     *public* bound on the coordinates (clipping to it is a contraction, so it never adds sensitivity); 2^k and
     v/2^k are powers of two and integers below 2^51, so this is exact floating-point arithmetic.
  2. ``Z ~ N_Z(0, S)`` per coordinate — P(z) ∝ e^{−z²/(2S)} with the integer S = ⌈σ_g² + τ²⌉, σ_g = σ'/2^k —
     drawn exactly (:func:`~privfit.privacy.exact_sampling.discrete_gaussian`: CKS Alg. 3, every decision proven,
     from a child of the fit's generator). The lattice is chosen so that σ_g ∈ (2^19, 2^20] (S ≈ 2^40).
  3. The release is ``float(v + Z) · 2^k`` — the integer sum is exact (int64) and the rest is a fixed function of
     it, so the released floats are a **post-processing** of the exact mechanism v ↦ v + Z: no low bit of a float
     sampler or of a floating-point addition can carry information about ``values``.

  Privacy of the lattice mechanism. Rounding moves each coordinate by ≤ 2^{k−1}, so neighbouring inputs with
  ‖x − x'‖₂ ≤ Δ give ‖v − v'‖₂ ≤ (Δ + √d·2^k)/2^k = Δ'/2^k (d coordinates per release). The layer draws with
  σ' = σ·Δ'/Δ, so that σ'/Δ' = σ/Δ: the noise multiplier the caller calibrated and charged for. Two facts make
  *every* Gaussian curve of privfit valid for the lattice mechanism — the plain Gaussian's, and also the
  subsampled (Poisson: Mironov, Talwar & Zhang 2019; fixed size: Wang, Balle & Kasiviswanathan 2019) and
  tree-aggregation curves, which are proven for continuous Gaussian noise only:

  a. (CKS 2020, Prop. 5) For integer shifts, ``D_α(N_Z(v, s²)‖N_Z(v', s²)) ≤ α‖v − v'‖²/(2s²)`` at every order:
     the continuous Gaussian's curve, for the plain (not subsampled) mechanism.
  b. (Domination, ours; for every mechanism built on the release.) Let s² = S and σ''² = S − τ² ≥ σ_g², with
     τ = :data:`SMOOTHING_SCALE` = 4 (σ'' ≥ σ_g: its continuous curve is no larger than σ_g's). Post-process a
     continuous release y = v + N(0, σ''²) by drawing z ~ N_Z(y, τ²) per coordinate (a discrete Gaussian centred
     at the real y). With
     Θ(u) = Σ_j e^{−(j−u)²/(2τ²)} = √(2π)τ(1 + 2Σ_{m≥1} e^{−2π²τ²m²} cos 2πmu) (Poisson summation), z's law is
     f(z − v) with f(w) = ∫ φ_{σ''}(x) e^{−(w−x)²/(2τ²)}/Θ(x) dx, within a factor 1 ± ε_τ of the continuous
     density φ_s(w), ε_τ = 2Σ_{m≥1} e^{−2π²τ²m²} < 10⁻¹³⁶; and N_Z(0, s²)(w) = φ_s(w)·√(2π)s/Θ_s(0) is within
     the same factor of φ_s(w). So the mechanism used, P, and a post-processing Q of the continuous Gaussian
     mechanism satisfy e^{−dη} ≤ P/Q ≤ e^{dη} pointwise with η = log((1 + ε_τ)/(1 − ε_τ)) < 10⁻¹³⁵, for every
     input — hence also for every mixture over secret batches (subsampling) and every composition. For
     P ≤ e^{dη}Q and R ≥ e^{−dη}R' pointwise, ``D_α(P‖R) ≤ D_α(Q‖R') + (2α − 1)dη/(α − 1)``, and D_α(Q‖R') is
     at most the continuous curve (post-processing). The extra (2α − 1)dη/(α − 1) is below 10⁻¹²⁵ for every
     order of every grid (α ≥ 1.01, d ≤ 10⁸): thousands of orders of magnitude below the margin every
     calibration already leaves (σ is rounded up by a relative ~10⁻⁷, :mod:`.calibration`), so the
     charged curves stand as they are (``tests/privacy/test_noise_domination.py`` checks ε_τ and the margin).

  The Laplace release is the same construction with the exact **discrete Laplace** (P(z) ∝ e^{−|z|/t},
  :func:`~privfit.privacy.exact_sampling.discrete_laplace`): with the L1 shift ‖v − v'‖₁ ≤ (Δ₁ + d·2^k)/2^k and
  the integer t = ⌈b'/2^k⌉, it is pure (Δ₁/b)-DP when b' = b·Δ₁'/Δ₁ (the ratio of two discrete Laplace masses at
  integer points is ≤ e^{|shift|/t}). Its charged curve must be
  the pure-DP one (:meth:`~privfit.privacy.PrivacyCost.pure_dp`), not the continuous Laplace's
  (:func:`laplace_cost`).

* ``float`` — numpy's samplers (``standard_normal``, ``laplace``) on the caller's generator, as before this layer:
  reproducible from a seed (tests, audits, synthetic and public data), but exposed to floating-point attacks
  (Mironov, CCS 2012; Jin et al., IEEE S&P 2022).

The exact samplers are numba-compiled implementations of CKS's algorithms (:mod:`.exact_sampling`, about 43 ns
of CPU per Gaussian coordinate, large calls split over two threads), not OpenDP's (about 11 µs per coordinate:
dp_sgd's 67,200 draws on Adult would take 0.75 s against a 0.1 s fit); the tests check them against OpenDP's
sampler and privacy maps. A stream of releases (:class:`NoisyReleases`) draws its noise ahead in a background
thread, from its own child generator: the noise does not depend on the data, so it is drawn while the solver
computes.
"""

from __future__ import annotations

import contextlib
import math
import queue
import threading
import weakref
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

import numpy as np

from .cost import PrivacyCost
from .errors import PrivacyParameterError, require_count, require_positive
from .exact_sampling import MAX_GAUSSIAN_VARIANCE, MAX_LAPLACE_SCALE, discrete_gaussian, discrete_laplace
from .orders import OrderGrid

SamplerName = Literal["exact", "float"]
SAMPLERS: tuple[SamplerName, ...] = ("exact", "float")

SMOOTHING_SCALE = 4.0
"""τ of the domination argument (module docstring, b): the exact Gaussian's integer scale is √(σ_g² + τ²)."""
NOISE_BITS = 20
"""The lattice puts the noise scale in (2^19, 2^20] lattice units: the rounding then inflates the sensitivity by
√d·2^k/Δ ≤ √d·(σ/Δ)·2^−19 (relative), and every integer of the exact samplers fits in int64."""
_INTEGER_BITS = 50
"""Lattice integers (public bound and σ) stay below 2^50: int64 sums cannot overflow, float64 holds them exactly."""
_FIRST_BLOCK = 4_096
_LARGEST_BLOCK = 262_144
"""A background stream's blocks grow ×4 from the first (soon ready) to the largest (2 MiB of int64): one
vectorised call per block, so fewer, larger calls cost less per draw."""
_QUEUE_BLOCKS = 4

_configured: SamplerName = "float"
_override: ContextVar[SamplerName | None] = ContextVar("privfit_noise_sampler", default=None)


def _checked(name: str) -> SamplerName:
    if name == "exact":
        return "exact"
    if name == "float":
        return "float"
    raise PrivacyParameterError("noise_sampler", f"must be one of {', '.join(SAMPLERS)}, got {name!r}")


def configure_sampler(name: str) -> SamplerName:
    """Set this process's sampler (the server and workers call it at start-up with ``Settings.noise_sampler``);
    returns the previous one (an app restores it at shutdown)."""
    global _configured
    previous, _configured = _configured, _checked(name)
    return previous


def current_sampler() -> SamplerName:
    """The sampler in force: a :func:`using_sampler` block's, else the process's (``float`` in a plain library)."""
    return _override.get() or _configured


@contextlib.contextmanager
def using_sampler(name: str) -> Iterator[None]:
    """Use sampler ``name`` inside the block (this thread and contexts copied from it)."""
    token = _override.set(_checked(name))
    try:
        yield
    finally:
        _override.reset(token)


def describe_sampler(name: SamplerName | None = None) -> dict[str, Any]:
    """What a result's metadata says about the noise: the sampler's name and, for ``exact``, the mechanism."""
    name = name or current_sampler()
    if name == "float":
        return {
            "name": "float",
            "gaussian": "numpy Generator.standard_normal (PCG64DXSM, OS-seeded)",
            "laplace": "numpy Generator.laplace (PCG64DXSM, OS-seeded)",
        }
    return {
        "name": "exact",
        "gaussian": "discrete Gaussian on 2^k·Z (CKS 2020, Alg. 3)",
        "laplace": "discrete Laplace on 2^k·Z (CKS 2020, Alg. 2)",
        "noise_bits": NOISE_BITS,
    }


@dataclass(frozen=True)
class Lattice:
    """The public lattice of one kind of release: spacing 2^``exponent``, the rounding's sensitivity factor
    ``inflation`` = Δ'/Δ ≥ 1, the exact sampler's integer parameter (the variance S of the discrete Gaussian, or
    the scale t of the discrete Laplace, in lattice units) and the public bound B on the coordinates."""

    kind: Literal["gaussian", "laplace"]
    exponent: int
    inflation: float
    integer_parameter: int
    bound: float

    @property
    def spacing(self) -> float:
        return math.ldexp(1.0, self.exponent)

    @property
    def noise_scale(self) -> float:
        """The noise's scale in the values' units: 2^k·√S (Gaussian) or 2^k·t (Laplace)."""
        units = math.sqrt(self.integer_parameter) if self.kind == "gaussian" else float(self.integer_parameter)
        return units * self.spacing


def _lattice(
    kind: Literal["gaussian", "laplace"], scale: float, sensitivity: float, rounding_growth: float, bound: float
) -> Lattice:
    """The lattice for noise ``scale`` on values of ``sensitivity`` whose rounding adds ``rounding_growth``·2^k
    to it (√d for L2, d for L1), with coordinates clipped to ``bound`` (all public; module docstring)."""
    scale = require_positive("scale", scale)
    sensitivity = require_positive("sensitivity", sensitivity)
    bound = require_positive("bound", bound)
    exponent = max(math.ceil(math.log2(scale)) - NOISE_BITS, math.ceil(math.log2(bound)) - _INTEGER_BITS)
    spacing = math.ldexp(1.0, exponent)
    inflation = (1.0 + rounding_growth * spacing / sensitivity) * (1.0 + 2.0**-50)
    units = Fraction(scale * inflation / spacing)  # ≥ the exact σ'/2^k: the 2^−50 factor covers the roundings
    smoothing = Fraction(SMOOTHING_SCALE) ** 2
    parameter = math.ceil(units * units + smoothing) if kind == "gaussian" else math.ceil(units)
    top = MAX_GAUSSIAN_VARIANCE if kind == "gaussian" else MAX_LAPLACE_SCALE
    if parameter > top:  # units ≥ rounding_growth·scale/sensitivity whatever the lattice
        raise PrivacyParameterError(
            "noise_multiplier",
            f"the noise multiplier {scale / sensitivity:.3g} times the rounding growth {rounding_growth:.3g} (√d or "
            "d) exceeds what the exact sampler's 64-bit integers hold (about 2^21); noise that large drowns any "
            "signal: lower the noise multiplier",
        )
    return Lattice(kind, exponent, inflation, max(parameter, 1), float(bound))


def gaussian_lattice(sigma: float, l2_sensitivity: float, dimension: int, bound: float) -> Lattice:
    """The lattice of a Gaussian release of ``dimension`` coordinates (module docstring)."""
    dimension = require_count("dimension", dimension)
    return _lattice("gaussian", sigma, l2_sensitivity, math.sqrt(dimension), bound)


def laplace_lattice(scale: float, l1_sensitivity: float, dimension: int, bound: float) -> Lattice:
    """The lattice of a Laplace release of ``dimension`` coordinates (module docstring)."""
    dimension = require_count("dimension", dimension)
    return _lattice("laplace", scale, l1_sensitivity, float(dimension), bound)


def integer_noise(lattice: Lattice, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` exact draws of the lattice's integer noise (:mod:`.exact_sampling`)."""
    if lattice.kind == "gaussian":
        return discrete_gaussian(rng, lattice.integer_parameter, size)
    return discrete_laplace(rng, lattice.integer_parameter, size)


def _on_lattice(values: np.ndarray, lattice: Lattice) -> np.ndarray:
    """rint(clip(values, −B, B) / 2^k) as int64 — exact (module docstring, step 1)."""
    clipped = np.clip(np.asarray(values, dtype=np.float64), -lattice.bound, lattice.bound)
    return np.rint(np.ldexp(clipped, -lattice.exponent)).astype(np.int64)


def _from_lattice(points: np.ndarray, lattice: Lattice) -> np.ndarray:
    return np.ldexp(points.astype(np.float64), lattice.exponent)


class _BackgroundDraws:
    """Exact integer draws made ahead of use by a daemon thread, in blocks, bounded in memory.

    The thread holds neither the owner nor the data; it stops when all ``total`` draws are made or when the owner
    is garbage-collected or closed (``weakref.finalize``). It draws from its own generator."""

    def __init__(self, lattice: Lattice, total: int, rng: np.random.Generator) -> None:
        self._queue: queue.Queue[np.ndarray | BaseException] = queue.Queue(maxsize=_QUEUE_BLOCKS)
        self._stop = threading.Event()
        self._buffer = np.zeros(0, dtype=np.int64)
        self._thread = threading.Thread(
            target=_produce, args=(lattice, total, rng, self._queue, self._stop), daemon=True,
            name="privfit-exact-noise",
        )  # fmt: skip
        self._thread.start()
        weakref.finalize(self, self._stop.set)

    def take(self, count: int) -> np.ndarray:
        if self._buffer.size >= count:  # views: no copy while the current block lasts
            out, self._buffer = self._buffer[:count], self._buffer[count:]
            return out
        parts = [self._buffer]
        have = self._buffer.size
        while have < count:
            block = self._queue.get()
            if isinstance(block, BaseException):
                raise block
            parts.append(block)
            have += block.size
        joined = np.concatenate(parts)
        self._buffer = joined[count:]
        return joined[:count]

    def close(self) -> None:
        self._stop.set()


def _produce(
    lattice: Lattice,
    total: int,
    rng: np.random.Generator,
    out: queue.Queue[np.ndarray | BaseException],
    stop: threading.Event,
) -> None:
    made, size = 0, _FIRST_BLOCK
    try:
        while made < total and not stop.is_set():
            block = integer_noise(lattice, min(size, total - made), rng)
            size = min(4 * size, _LARGEST_BLOCK)
            made += block.size
            while not stop.is_set():
                try:
                    out.put(block, timeout=0.5)
                    break
                except queue.Full:
                    continue
    except BaseException as error:
        out.put(error)


class NoisyReleases:
    """``count`` releases of arrays of ``shape`` (last axis: the coordinates of one release of the stated
    sensitivity), each ``values`` plus noise, from the sampler in force when it was created.

    ``float``: ``values + σ·rng.standard_normal(shape)`` (Gaussian) or ``values + rng.laplace(0, b, shape)`` — the
    same draws, in the same order, as the solvers made before this layer. ``exact``: the lattice mechanism
    (module docstring) with all ``count`` releases' draws made ahead in a background thread.
    """

    def __init__(
        self,
        rng: np.random.Generator,
        *,
        kind: Literal["gaussian", "laplace"],
        scale: float,
        sensitivity: float,
        shape: tuple[int, ...],
        count: int,
        bound: float,
    ) -> None:
        self.rng = rng
        self.kind = kind
        self.scale = float(scale)
        self.shape = tuple(int(s) for s in shape)
        self.sampler = current_sampler()
        self.released = 0
        self.count = int(count)
        self.closed = False
        size = int(np.prod(self.shape)) if self.shape else 1
        self._size = size
        self._draws: _BackgroundDraws | None = None
        self.lattice: Lattice | None = None
        if self.sampler == "exact":
            dimension = self.shape[-1] if self.shape else 1
            lattice_of = gaussian_lattice if kind == "gaussian" else laplace_lattice
            self.lattice = lattice_of(scale, sensitivity, dimension, bound)
            self._noise_rng = rng.spawn(1)[0]  # the stream's own generator: its draws do not interleave with rng's
            if self.count > 1 and size > 0:
                self._draws = _BackgroundDraws(self.lattice, self.count * size, self._noise_rng)

    def release(self, values: np.ndarray | float) -> np.ndarray:
        """The next release: ``values`` (of the declared shape) plus noise."""
        if self.released >= self.count:
            raise RuntimeError(f"all {self.count} releases of this noise stream are used")
        if self.closed:  # its producer has stopped: waiting for its draws would block forever
            raise RuntimeError("this noise stream is closed")
        self.released += 1
        array = np.asarray(values, dtype=np.float64)
        if self.lattice is None:
            if self.kind == "gaussian":
                return array + self.scale * self.rng.standard_normal(self.shape)
            return array + self.rng.laplace(0.0, self.scale, size=self.shape)
        if self._draws is None:
            noise = integer_noise(self.lattice, self._size, self._noise_rng).reshape(self.shape)
        else:
            noise = self._draws.take(self._size).reshape(self.shape)
        return _from_lattice(_on_lattice(array, self.lattice) + noise, self.lattice)

    def close(self) -> None:
        """Stop drawing ahead (a fit that ends early); the stream makes no further release."""
        self.closed = True
        if self._draws is not None:
            self._draws.close()


def gaussian_releases(
    rng: np.random.Generator,
    *,
    sigma: float,
    l2_sensitivity: float,
    shape: tuple[int, ...],
    count: int,
    bound: float,
) -> NoisyReleases:
    """``count`` Gaussian releases (σ, L2 sensitivity Δ per vector along the last axis, public bound B)."""
    return NoisyReleases(
        rng, kind="gaussian", scale=sigma, sensitivity=l2_sensitivity, shape=shape, count=count, bound=bound
    )


@contextlib.contextmanager
def gaussian_stream(
    rng: np.random.Generator,
    *,
    sigma: float,
    l2_sensitivity: float,
    shape: tuple[int, ...],
    count: int,
    bound: float,
) -> Iterator[NoisyReleases | None]:
    """:func:`gaussian_releases` for the block of an iterative solver, closed when the block ends (a cancelled
    fit stops the stream's background draws); None when ``sigma`` is 0 (the noiseless path of tests)."""
    if sigma <= 0.0:
        yield None
        return
    releases = gaussian_releases(rng, sigma=sigma, l2_sensitivity=l2_sensitivity, shape=shape, count=count, bound=bound)
    try:
        yield releases
    finally:
        releases.close()


def laplace_releases(
    rng: np.random.Generator,
    *,
    scale: float,
    l1_sensitivity: float,
    shape: tuple[int, ...],
    count: int,
    bound: float,
) -> NoisyReleases:
    """``count`` Laplace releases (scale b, L1 sensitivity Δ₁ per vector along the last axis, public bound B)."""
    return NoisyReleases(
        rng, kind="laplace", scale=scale, sensitivity=l1_sensitivity, shape=shape, count=count, bound=bound
    )


def gaussian_release(
    rng: np.random.Generator, values: np.ndarray | float, *, sigma: float, l2_sensitivity: float, bound: float
) -> np.ndarray:
    """One Gaussian release of ``values`` (see :class:`NoisyReleases`)."""
    shape = np.shape(values)
    return gaussian_releases(
        rng, sigma=sigma, l2_sensitivity=l2_sensitivity, shape=shape, count=1, bound=bound
    ).release(values)


def laplace_release(
    rng: np.random.Generator, values: np.ndarray | float, *, scale: float, l1_sensitivity: float, bound: float
) -> np.ndarray:
    """One Laplace release of ``values`` (see :class:`NoisyReleases`)."""
    shape = np.shape(values)
    return laplace_releases(rng, scale=scale, l1_sensitivity=l1_sensitivity, shape=shape, count=1, bound=bound).release(
        values
    )


def laplace_cost(
    grid: OrderGrid, *, scale: float, sensitivity: float = 1.0, count: int = 1, sampler: SamplerName | None = None
) -> PrivacyCost:
    """The cost of ``count`` Laplace releases under the sampler in force: the continuous Laplace's exact curve
    (``float``) or, for the discrete Laplace of ``exact``, the pure-DP curve of ε = count·Δ/b (valid for every
    ε-DP mechanism; module docstring)."""
    if (sampler or current_sampler()) == "float":
        return PrivacyCost.laplace(grid, scale=scale, sensitivity=sensitivity, count=count)
    return PrivacyCost.pure_dp(count * float(sensitivity) / float(scale), grid)
