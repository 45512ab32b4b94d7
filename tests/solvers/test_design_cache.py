"""The float32 design shared by a dataset's dp_gd fits (privfit.solvers.design_cache, issue 40): built once per key,
the same release bit for bit as a fit that builds its own, kept within its byte budget, and the float64 design matrix
not prepared by a fit that finds it."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np
import pytest

import privfit.solvers.base as base
from privfit.privacy import make_generator
from privfit.solvers import PublicMetadata, get_solver
from privfit.solvers.design_cache import DesignCache, configure_design_cache, design_cache
from privfit.solvers.float32_design import Float32Design

SOLVER = get_solver("dp_gd")


@pytest.fixture(autouse=True)
def empty_cache() -> Iterator[None]:
    design_cache().clear()
    previous = configure_design_cache(2**30)
    yield
    configure_design_cache(previous)
    design_cache().clear()


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many float32 designs and bounded float64 design matrices the fits build."""
    counts = {"designs": 0, "bounded": 0}
    build, enforce = Float32Design.of.__func__, base.enforce_declared_bounds  # type: ignore[attr-defined]

    def of(cls: type[Float32Design], X: np.ndarray) -> Float32Design:
        counts["designs"] += 1
        return build(cls, X)

    def bounded(*args: object, **kwargs: object) -> tuple[np.ndarray, np.ndarray]:
        counts["bounded"] += 1
        return enforce(*args, **kwargs)

    monkeypatch.setattr(Float32Design, "of", classmethod(of))
    monkeypatch.setattr(base, "enforce_declared_bounds", bounded)
    return counts


def _data(n: int = 600, d: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray, PublicMetadata]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d)) / np.sqrt(d)
    y = np.where(X @ rng.normal(size=d) > 0, 1.0, -1.0)
    return X, y, PublicMetadata(n=n, d=d, row_norm_bound=1.0)


def _fit(X: np.ndarray, y: np.ndarray, meta: PublicMetadata, key: object = None, **params: object) -> np.ndarray:
    resolved = SOLVER.resolve({"steps": 8, "noise_multiplier": 2.0, **params}, meta)
    result = SOLVER.fit(X, y, meta, resolved, make_generator(3, data_is_public=True), dataset_key=key)
    intercept = [] if result.intercept is None else [result.intercept]
    return np.array([*result.coefficients, *intercept])


def test_the_second_fit_of_a_dataset_reuses_its_design_and_releases_the_same_bits(counted: dict[str, int]) -> None:
    X, y, meta = _data()
    alone = _fit(X, y, meta)  # no key: builds its own, shares nothing
    assert counted == {"designs": 1, "bounded": 1} and design_cache().keys() == []
    first = _fit(X, y, meta, key=("dataset-1", "a" * 64))
    second = _fit(X, y, meta, key=("dataset-1", "a" * 64))
    assert counted == {"designs": 2, "bounded": 2}  # the second fit prepared neither its design nor run.X
    np.testing.assert_array_equal(first, alone)
    np.testing.assert_array_equal(second, alone)
    assert len(design_cache().keys()) == 1
    assert design_cache().nbytes == Float32Design.nbytes_for(meta.n, meta.d + 1)


def test_the_key_holds_the_dataset_the_bound_and_the_intercept(counted: dict[str, int]) -> None:
    """Another dataset with equal rows, another declared bound or no intercept column: another design (the first so
    that a faster fit does not tell that two datasets' rows are equal)."""
    X, y, meta = _data()
    _fit(X, y, meta, key=("dataset-1", "a" * 64))
    _fit(X, y, meta, key=("dataset-2", "a" * 64))
    _fit(X, y, meta, key=("dataset-1", "a" * 64), fit_intercept=False)
    wider = PublicMetadata(n=meta.n, d=meta.d, row_norm_bound=2.0)
    released = _fit(X, y, wider, key=("dataset-1", "a" * 64))
    assert counted["designs"] == 4 and len(design_cache().keys()) == 4
    np.testing.assert_array_equal(released, _fit(X, y, wider))


def test_paths_that_do_not_use_the_design_prepare_the_rows_as_before(counted: dict[str, int]) -> None:
    """The float64 path (huge declared bounds: outside float32's public rule) reads run.X; nothing is cached."""
    X, y, _ = _data()
    huge = PublicMetadata(n=X.shape[0], d=X.shape[1], row_norm_bound=2.0**41)
    _fit(X, y, huge, key=("dataset-1", "a" * 64))
    assert counted == {"designs": 0, "bounded": 1} and design_cache().keys() == []


def test_a_zero_budget_keeps_nothing_and_the_oldest_entry_goes_first() -> None:
    cache = DesignCache(0)
    design = Float32Design.of(np.ones((10, 2)))
    size = Float32Design.nbytes_for(10, 2)
    builds: list[str] = []

    def build(name: str) -> Float32Design:
        builds.append(name)
        return design

    cache.get("a", size, lambda: build("a"))
    cache.get("a", size, lambda: build("a"))
    assert builds == ["a", "a"] and cache.keys() == []
    cache.resize(2 * size)
    for name in ("a", "b", "a", "c"):  # "a" used again before "c" comes: "b" goes
        cache.get(name, size, lambda name=name: build(name))
    assert cache.keys() == ["a", "c"] and cache.nbytes == 2 * size
    assert builds == ["a", "a", "a", "b", "c"]
    cache.get("huge", 3 * size, lambda: build("huge"))  # larger than the budget: built, not kept
    assert cache.keys() == ["a", "c"]
    assert cache.resize(size) == 2 * size and cache.keys() == ["c"]


def test_concurrent_fits_of_one_dataset_build_its_design_once() -> None:
    cache = DesignCache(2**20)
    started, release = threading.Event(), threading.Event()
    builds: list[int] = []
    design = Float32Design.of(np.ones((4, 2)))

    def build() -> Float32Design:
        builds.append(1)
        started.set()
        release.wait(5)
        return design

    found: list[Float32Design] = []
    threads = [threading.Thread(target=lambda: found.append(cache.get("k", 100, build))) for _ in range(3)]
    for thread in threads:
        thread.start()
    started.wait(5)
    release.set()
    for thread in threads:
        thread.join(5)
    assert builds == [1] and len(found) == 3 and all(each is design for each in found)
