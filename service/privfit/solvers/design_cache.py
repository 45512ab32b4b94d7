r"""A dataset's float32 design, built once per process and shared by its fits (issue 40, target 5).

A ``dp_gd`` fit on float32 rows (:mod:`privfit.solvers.float32_design`) needs X̃ = fl32 of the design matrix and the
row norms: a pass over the n·d float64 entries, n·d·4 bytes, and before it the float64 design matrix itself (the
declared bounds enforced, the intercept column appended: :meth:`~privfit.solvers.base.Solver.fit`). All of it is a
deterministic function of three things: the stored rows, the declared row-norm bound B_x
(:func:`~privfit.solvers.base.enforce_declared_bounds`) and whether the design has an intercept column. So when the
caller names the rows (:attr:`~privfit.solvers.base.FitRun.dataset_key`: the job runner passes the dataset's id and
the storage key its rows were read and hash-checked under), :func:`shared_float32_design` keeps X̃ under

    (dataset key, B_x, intercept, n, columns)

in a process-wide least-recently-used cache bounded in bytes (:func:`configure_design_cache`; the server's setting
``design_cache_bytes``), and a later fit of the same dataset in the same process takes it as it is: it prepares
neither the float64 design matrix (:attr:`~privfit.solvers.base.FitRun.X` is prepared on first read, and such a fit
never reads it) nor X̃. A fit without a key (a library call, ``auto``'s fits on a split of the rows) builds its own.

**Privacy.** The cached X̃ is the value the fit would compute from its own rows — the same function of the same
stored rows (their hash is the storage key) and the same public constants — so a fit's release is the same bit for
bit with or without the cache; nothing in any proof changes. **Observables** (DESIGN §4): whether a fit finds its
design cached depends on which fits this process ran before, on the byte budget and on the entries' sizes (public:
:meth:`~privfit.solvers.float32_design.Float32Design.nbytes_for` of n and d), never on a value. The key holds the
dataset's id and not only its content hash, so two datasets whose rows happen to be equal do not share an entry: a
faster fit must not tell an analyst that they are.

**Deletion.** A deleted dataset's design leaves memory: the API process drops it when the dataset is deleted, and
every worker, before each job it runs, drops the entries of datasets that are deleted (their storage key no longer the
one in the entry's key: :func:`privfit.jobs.runner.forget_deleted_designs`). A worker that runs no further job keeps
them in memory (never on disk) until it runs one or stops.

**Memory.** An entry costs 4·⌈n/64⌉·64·d + 8·n bytes (known before it is built). Entries are dropped least recently
used first to keep the total within the budget; an entry larger than the budget is built for its fit and not kept.
Fits of the same key wait for one build instead of building twice.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

from .base import FitRun
from .float32_design import Float32Design

__all__ = [
    "DEFAULT_DESIGN_CACHE_BYTES",
    "DesignCache",
    "configure_design_cache",
    "design_cache",
    "shared_float32_design",
]

#: the default budget: the float32 design of the largest matrix an upload may hold in memory (2 GiB of float64)
DEFAULT_DESIGN_CACHE_BYTES = 1024**3


class DesignCache:
    """A thread-safe least-recently-used map of designs, bounded by the sum of their public sizes in bytes."""

    def __init__(self, max_bytes: int) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, tuple[Float32Design, int]] = OrderedDict()
        self._building: dict[Hashable, threading.Lock] = {}
        self._bytes = 0
        self._max_bytes = max(0, int(max_bytes))

    @property
    def max_bytes(self) -> int:
        return self._max_bytes

    @property
    def nbytes(self) -> int:
        """The bytes the kept entries hold (their declared sizes)."""
        return self._bytes

    def keys(self) -> list[Hashable]:
        """The kept keys, least recently used first."""
        with self._lock:
            return list(self._entries)

    def resize(self, max_bytes: int) -> int:
        """Set the budget (0: keep nothing), dropping the least recently used entries beyond it; returns the old one."""
        with self._lock:
            previous, self._max_bytes = self._max_bytes, max(0, int(max_bytes))
            self._evict(0)
        return previous

    def dataset_keys(self) -> set[Hashable]:
        """The dataset keys (:attr:`~privfit.solvers.base.FitRun.dataset_key`) of the kept entries."""
        with self._lock:
            return {key[1] for key in self._entries if isinstance(key, tuple) and len(key) > 1}

    def forget(self, dataset_keys: set[Hashable]) -> int:
        """Drop the entries of these dataset keys (a deleted dataset's rows leave the process's memory); returns how
        many were dropped."""
        with self._lock:
            gone = [key for key in self._entries if isinstance(key, tuple) and len(key) > 1 and key[1] in dataset_keys]
            for key in gone:
                self._bytes -= self._entries.pop(key)[1]
            return len(gone)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def get(self, key: Hashable, nbytes: int, build: Callable[[], Float32Design]) -> Float32Design:
        """The entry under ``key``, built by ``build`` (and kept, if ``nbytes`` fits the budget) when absent."""
        if nbytes > self._max_bytes:
            return build()
        with self._lock:
            found = self._found(key)
            if found is not None:
                return found
            gate = self._building.setdefault(key, threading.Lock())
        with gate:  # one build per key: a concurrent fit of the same dataset waits for it
            try:
                with self._lock:
                    found = self._found(key)
                if found is not None:
                    return found
                design = build()
                with self._lock:
                    if nbytes <= self._max_bytes:
                        self._evict(nbytes)
                        self._entries[key] = (design, nbytes)
                        self._bytes += nbytes
                return design
            finally:
                with self._lock:
                    self._building.pop(key, None)

    def _found(self, key: Hashable) -> Float32Design | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry[0]

    def _evict(self, room: int) -> None:
        while self._entries and self._bytes + room > self._max_bytes:
            _, (_, size) = self._entries.popitem(last=False)
            self._bytes -= size


_CACHE = DesignCache(DEFAULT_DESIGN_CACHE_BYTES)


def design_cache() -> DesignCache:
    """This process's cache of designs."""
    return _CACHE


def configure_design_cache(max_bytes: int) -> int:
    """Set this process's budget (the server and workers call it at start-up with ``Settings.design_cache_bytes``);
    returns the previous one."""
    return _CACHE.resize(max_bytes)


def shared_float32_design(run: FitRun, fit_intercept: bool) -> Float32Design:
    """The float32 design of ``run.X`` (:meth:`~privfit.solvers.float32_design.Float32Design.of`), from the
    process's cache when ``run.dataset_key`` names the rows (module docstring), else built from ``run.X``.
    ``fit_intercept``: whether ``run.X`` has the intercept column (the fit's resolved ``fit_intercept``). For a
    row-level fit held in memory (``run.units`` and ``run.partitions`` None)."""
    if run.dataset_key is None:
        return Float32Design.of(run.X)
    n, columns = run.meta.n, run.meta.d + int(fit_intercept)
    key = ("float32 design", run.dataset_key, run.meta.row_norm_bound, bool(fit_intercept), n, columns)
    return _CACHE.get(key, Float32Design.nbytes_for(n, columns), lambda: Float32Design.of(run.X))
