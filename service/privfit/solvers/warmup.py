"""Compile the solvers' numba kernels ahead of time (issue 40): ``privfit compile``.

``dp_otb``'s one-pass loop, ``dp_lazy_oco``'s exact samplers and the ERM gradient kernel of objective and output
perturbation are numba functions compiled on first call (``cache=True``: the machine code is kept in numba's cache
directory, ``__pycache__`` beside the source or ``NUMBA_CACHE_DIR``, and loaded by later processes). Without a cache
the first such fit on a fresh install pays the compilation: seconds to tens of seconds, on the request path of the
first analyst. :func:`compile_kernels` fits every registered solver (``auto`` aside, which only runs the others)
once per model and per noise sampler it runs under, on a few public synthetic rows: the same calls, with the same
argument types, as a real fit, so that every specialisation a fit can need is compiled and cached; then the exact
noise samplers' kernels (:mod:`privfit.privacy.exact_sampling`) directly. ``scripts/setup-
venv.sh`` runs it after each install and ``docker/install.sh`` in the image, so a fresh server's first fit loads the
cached code (``benchmarks/first_fit.py`` measures it).

**Stale entries.** numba checks a cached kernel against its own source file only: a kernel that calls another
(the GLM slopes of :mod:`privfit.solvers.compiled_losses`, inlined into the ERM and ``dp_otb`` kernels) would keep the
machine code of the callee it was compiled with after that callee's file changed. :func:`clear_stale_kernel_cache`
(run by ``privfit compile`` first) removes privfit's whole numba cache when any entry is older than the newest
source file of the package, so an install or an upgrade recompiles every kernel from the code it ships.

The rows are synthetic and public (:func:`~privfit.privacy.make_generator` with ``data_is_public=True``): nothing
here touches a dataset or the ledger.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from privfit.errors import ParameterError
from privfit.privacy import make_generator
from privfit.privacy.exact_sampling import discrete_gaussian, discrete_laplace
from privfit.privacy.noise import SAMPLERS, current_sampler, using_sampler

from .base import PublicMetadata, Solver, sampler_refusal
from .registry import list_solvers

__all__ = ["Warmed", "clear_stale_kernel_cache", "compile_kernels", "preload_in_background"]

log = logging.getLogger("privfit.solvers")

ROWS, FEATURES = 2000, 3


@dataclass(frozen=True)
class Warmed:
    """One warm-up fit: the solver, model and sampler, and its seconds, or why it did not run."""

    solver: str
    model: str
    sampler: str
    seconds: float | None
    refused: str | None = None


#: privfit's package folder, whose sources the cached kernels were compiled from
PACKAGE = Path(__file__).resolve().parents[1]


def _kernel_cache_files(package: Path, cache_dir: str | None) -> list[Path]:
    """privfit's entries in numba's cache: the index (.nbi) and code (.nbc) files beside the package's sources, or
    under ``cache_dir`` (``NUMBA_CACHE_DIR``, where numba mirrors the source paths) when it is set."""
    found = [path for path in package.rglob("__pycache__/*") if path.suffix in (".nbi", ".nbc")]
    if cache_dir:
        found += [path for path in Path(cache_dir).rglob("*.nb[ic]") if package.name in path.parts]
    return found


def clear_stale_kernel_cache(package: Path = PACKAGE, cache_dir: str | None = None) -> int:
    """Remove privfit's numba cache when any of its entries is older than the newest ``.py`` file of ``package``
    (module docstring, "Stale entries"); returns the number of files removed (0: the cache was current).
    ``cache_dir``: numba's cache folder (default: ``NUMBA_CACHE_DIR``)."""
    newest_source = max(path.stat().st_mtime for path in package.rglob("*.py"))
    entries = _kernel_cache_files(package, cache_dir if cache_dir is not None else os.environ.get("NUMBA_CACHE_DIR"))
    if all(path.stat().st_mtime >= newest_source for path in entries):
        return 0
    for path in entries:
        path.unlink(missing_ok=True)
    return len(entries)


def _rows() -> tuple[np.ndarray, np.ndarray]:
    """Public synthetic rows within the unit ball and labels ±1 (valid for every model: binary and numeric)."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-1.0, 1.0, size=(ROWS, FEATURES)) / np.sqrt(FEATURES)
    return X, np.where(X[:, 0] > 0.0, 1.0, -1.0)


def compile_kernels(
    report: Callable[[Warmed], None] | None = None, *, every_model: bool = True, samplers: Sequence[str] = SAMPLERS
) -> list[Warmed]:
    """Fit every solver but ``auto`` on :data:`ROWS` public rows, once per model and per sampler it runs under
    (module docstring), then draw by ``dp_lazy_oco``'s reduction path; returns (and hands to ``report`` as they
    finish) the steps, with their seconds — the first to reach a kernel compiles it — or the reason a combination was
    refused (a solver's feasibility guard on these rows). ``every_model=False``: each solver's first model only (a
    model is a runtime argument of the kernels, not a type); ``samplers``: those to fit under."""
    X, y = _rows()
    meta = PublicMetadata(n=ROWS, d=FEATURES, row_norm_bound=1.0)
    done: list[Warmed] = []
    for solver in list_solvers():
        if solver.name == "auto":
            continue
        for sampler in samplers:
            if sampler not in SAMPLERS or sampler_refusal(solver, sampler) is not None:
                continue
            for model in solver.models if every_model else solver.models[:1]:
                done.append(_warm(solver, model, model, sampler, meta, X, y))
                if report is not None:
                    report(done[-1])
    for warmed in _multiclass_fits(samplers):
        done.append(warmed)
        if report is not None:
            report(warmed)
    for step in (_lazy_oco_reduction(), _exact_samplers()):
        done.append(step)
        if report is not None:
            report(step)
    return done


def _multiclass_fits(samplers: Sequence[str]) -> list[Warmed]:
    """One fit of each multiclass solver (``auto`` aside) with a categorical label of 3 classes on the public rows,
    under each sampler it runs under: the multinomial kernels (e.g. ``dp_gd``'s float32 pass) are other functions."""
    X, _ = _rows()
    classes = np.digitize(X[:, 1], [-0.2, 0.2]).astype(np.float64)
    meta = PublicMetadata(n=ROWS, d=FEATURES, row_norm_bound=1.0, label_bound=2.0, classes=("a", "b", "c"))
    return [
        _warm(solver, "logistic", "logistic, 3 classes", sampler, meta, X, classes)
        for solver in list_solvers()
        if solver.name != "auto" and solver.multiclass
        for sampler in samplers
        if sampler in SAMPLERS and sampler_refusal(solver, sampler) is None
    ]


def _warm(
    solver: Solver[Any, Any], model: str, label: str, sampler: str, meta: PublicMetadata, X: np.ndarray, y: np.ndarray
) -> Warmed:
    """One warm-up fit of ``solver``'s ``model`` at its defaults under ``sampler``, timed, or why it was refused."""
    began = time.perf_counter()
    try:
        with using_sampler(sampler):
            resolved = solver.resolve({"model": model}, meta, target_epsilon=1.0, delta=1e-6)
            solver.fit(X, y, meta, resolved, make_generator(0, data_is_public=True))
    except ParameterError as refusal:
        return Warmed(solver.name, label, sampler, None, str(refusal))
    return Warmed(solver.name, label, sampler, time.perf_counter() - began)


def _lazy_oco_reduction() -> Warmed:
    """``dp_lazy_oco``'s truncated-Gaussian draws by the exact 2-D reduction, whose kernels a fit reaches only when its
    public plan picks that path (a dimension too large for naive rejection): one draw on the public unit ball."""
    from .lazy_oco.sampling import TruncatedGaussianSampler

    began = time.perf_counter()
    sampler = TruncatedGaussianSampler.plan(FEATURES, 1.0, 0.0, -40.0, path="reduction")
    sampler.draw(np.full(FEATURES, 0.1), 0.5, 4, make_generator(0, data_is_public=True))
    return Warmed("dp_lazy_oco", "truncated Gaussian, reduction path", "float", time.perf_counter() - began)


def _exact_samplers() -> Warmed:
    """The exact discrete Gaussian and Laplace kernels (:mod:`privfit.privacy.exact_sampling`), called directly: a
    process whose sampler is ``float`` then still has them (a fit may switch to ``exact``, and private evaluation
    and histograms draw from them), with one and with per-draw parameters."""
    began = time.perf_counter()
    rng = make_generator(0, data_is_public=True)
    for parameters in (2**40, np.array([2**40, 5] * 8, dtype=np.int64)):
        discrete_gaussian(rng, parameters, 16)
        discrete_laplace(rng, parameters, 16)
    return Warmed("exact noise", "discrete Gaussian and Laplace", "exact", time.perf_counter() - began)


def preload_in_background() -> threading.Thread:
    """Start a daemon thread that brings this process's kernels into memory (setting ``preload_kernels``): one
    warm-up fit per solver under the sampler in force, which loads each kernel from numba's cache (compiling it where
    nothing is cached). A fit that starts meanwhile waits for a kernel only as long as it would have anyway. Public
    synthetic rows only, so what it costs depends on nothing private; a failure is logged, never raised."""

    def preload() -> None:
        began = time.perf_counter()
        try:
            steps = compile_kernels(every_model=False, samplers=(current_sampler(),))
        except Exception:  # the process runs fits regardless: the first of each solver then loads its kernels
            log.warning("preloading the solvers' kernels failed", exc_info=True)
            return
        log.info("solvers' kernels loaded", extra={"fits": len(steps), "seconds": time.perf_counter() - began})

    thread = threading.Thread(target=preload, name="privfit-preload-kernels", daemon=True)
    thread.start()
    return thread
