"""``privfit compile`` (privfit.solvers.warmup, issue 40): the warm-up compiles every numba specialisation a fit then
needs, so that a fresh server's first fit compiles nothing."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from numba.core.registry import CPUDispatcher

from privfit.cli import main
from privfit.privacy import make_generator
from privfit.privacy.noise import using_sampler
from privfit.solvers import PublicMetadata, get_solver

#: the numba functions a fit calls from Python (the others are called from these and compiled into them)
ENTRY_POINTS = {
    "privfit.solvers.online_to_batch.kernel.online_to_batch_block",
    "privfit.solvers.baselines.glm_design.gradient_sum_kernel",
    "privfit.solvers.lazy_oco.sampling._sample_log_concave",
    "privfit.privacy.exact_sampling._gaussian_kernel",
    "privfit.privacy.exact_sampling._laplace_kernel",
}


def specialisations() -> dict[str, int]:
    """Every numba function of privfit's loaded modules and how many argument-type signatures it has (compiled here
    or loaded from numba's cache: a function called only from compiled code has none, being part of its caller)."""
    found = {}
    for name, module in list(sys.modules.items()):
        if name.startswith("privfit."):
            for attribute, value in vars(module).items():
                if isinstance(value, CPUDispatcher) and value.__module__ == name:
                    found[f"{name}.{attribute}"] = len(value.signatures)
    return found


def test_after_the_warm_up_a_fit_on_other_data_compiles_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compile"]) == 0
    printed = capsys.readouterr().out
    assert "dp_otb logistic (exact noise):" in printed and "warm-up fits in" in printed
    warmed = specialisations()
    assert all(warmed[name] >= 1 for name in ENTRY_POINTS), warmed
    # fits of other shapes and settings, as the service runs them (C-ordered float64 rows from the encoder)
    rng = np.random.default_rng(5)
    X = rng.uniform(-1, 1, size=(400, 6)) / np.sqrt(6)
    y = np.where(rng.random(400) < 0.5, 1.0, -1.0)
    meta = PublicMetadata(n=400, d=6, row_norm_bound=1.0)
    fits = [("dp_otb", {"model": "svm", "learner": "adagrad_diagonal"}, "exact"),
            ("dp_otb", {"model": "logistic", "fit_intercept": False}, "float"),
            ("objective_perturbation", {"model": "huber"}, "float"),
            ("output_perturbation", {"model": "logistic"}, "exact"),
            ("dp_lazy_oco", {"model": "linear_loss"}, "float"),
            ("dp_lazy_oco", {"model": "mean"}, "float")]  # fmt: skip
    for name, params, sampler in fits:
        solver = get_solver(name)
        with using_sampler(sampler):
            resolved = solver.resolve(params, meta, target_epsilon=1.0, delta=1e-6)
            solver.fit(X, y, meta, resolved, make_generator(1, data_is_public=True))
    # a categorical label (the multinomial kernels) of another number of classes and shape
    classes = rng.integers(0, 4, size=400).astype(np.float64)
    meta_k = PublicMetadata(n=400, d=6, row_norm_bound=1.0, label_bound=3.0, classes=("a", "b", "c", "d"))
    for name in ("dp_gd", "dp_sgd"):
        solver = get_solver(name)
        resolved = solver.resolve({"model": "logistic"}, meta_k, target_epsilon=1.0, delta=1e-6)
        solver.fit(X, classes, meta_k, resolved, make_generator(1, data_is_public=True))
    assert specialisations() == warmed  # no new specialisation: nothing was compiled by these fits


def test_a_starting_process_loads_its_kernels_in_the_background() -> None:
    """PRIVFIT_PRELOAD_KERNELS (on by default): in a fresh process the preload thread brings every entry point in
    (from numba's cache here, which the install's `privfit compile` filled), under the configured sampler only."""
    probe = (
        "from numba.core.registry import CPUDispatcher\n"
        "import importlib\n"
        "from privfit.solvers.warmup import preload_in_background\n"
        "preload_in_background().join()\n"
        f"for entry in {sorted(ENTRY_POINTS)!r}:\n"
        "    module, name = entry.rsplit('.', 1)\n"
        "    print(entry, len(getattr(importlib.import_module(module), name).signatures))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=300).stdout
    loaded = dict(line.rsplit(" ", 1) for line in out.splitlines())
    assert set(loaded) == ENTRY_POINTS and all(int(count) >= 1 for count in loaded.values()), out


def test_the_settings_turn_the_preload_on_by_default() -> None:
    from privfit.settings import Settings

    assert Settings.model_fields["preload_kernels"].default is True


def test_compile_removes_a_cache_older_than_any_source_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """numba checks a cached kernel against its own file only: `privfit compile` drops the whole cache when any entry
    is older than the newest source (a callee inlined into a cached kernel may have changed), and keeps a current one
    — beside the sources and under NUMBA_CACHE_DIR."""
    import os

    from privfit.solvers.warmup import clear_stale_kernel_cache

    package = tmp_path / "privfit"
    (package / "solvers" / "__pycache__").mkdir(parents=True)
    kernel, callee = package / "solvers" / "kernel.py", package / "solvers" / "callee.py"
    kernel.write_text("")
    callee.write_text("")
    beside = package / "solvers" / "__pycache__" / "kernel.f-1.py311.nbi"
    mirrored = tmp_path / "cache" / "x" / "privfit" / "solvers" / "kernel.f-1.py311.nbc"
    mirrored.parent.mkdir(parents=True)
    for entry in (beside, mirrored):
        entry.write_bytes(b"cached")
    for path, when in ((kernel, 100), (callee, 100), (beside, 200), (mirrored, 200)):
        os.utime(path, (when, when))
    assert clear_stale_kernel_cache(package, str(tmp_path / "cache")) == 0 and beside.exists() and mirrored.exists()
    os.utime(callee, (300, 300))  # the callee changed after the kernel was cached
    assert clear_stale_kernel_cache(package, str(tmp_path / "cache")) == 2
    assert not beside.exists() and not mirrored.exists()
