"""Issue 40's peer table in one run: privfit next to Opacus (CPU), dp_accounting, diffprivlib and scikit-learn.

    .venv/bin/python benchmarks/peers.py [--seeds 3] [--repeats 5] [--epsilon 1] [--delta 1e-6] [--quick]

Needs ``pip install -e '.[peers]'`` (scikit-learn, diffprivlib, dp-accounting, torch, opacus; install torch's CPU
build first where one is at hand, the default Linux wheel pulls the CUDA libraries). A peer that cannot be imported
is reported as "not installed" in its rows; the others still run. Skips with a message (exit 0) when UCI Adult is
not under ``../shared/data/adult``.

What it measures, every row as privfit's side, the peer's side and the ratio privfit / peer (below 1: privfit is
faster, or certifies a smaller σ):

1. **DP-SGD on Adult**: ``dp_sgd`` at its defaults, planned as the service does (``solver.resolve({"model":
   "logistic"}, meta, target_epsilon=ε, delta=δ)``, charged ε ≤ target checked, then ``solver.fit(X, y, meta,
   resolved, make_generator(seed, data_is_public=True))``), against Opacus given EXACTLY the resolved settings: the
   same T steps, Poisson sampling at the same rate q = m/n (``DPDataLoader``), the same clipping norm C and noise
   multiplier z (noise N(0, (zC)²) on each clipped batch sum, the sum divided by the same public m: ``DPOptimizer``
   with ``expected_batch_size=m``), the same model (``nn.Linear`` with a bias, zero start, ``BCEWithLogitsLoss``:
   the logistic loss), the same constant step η and L2 term, privfit's projection on the ball of radius R after
   each step and the same release (last iterate or suffix average). Opacus runs on the CPU in float32 with
   ``torch.set_num_threads(os.cpu_count())``. Both sides are timed fit + predict on ``adult.test``; test accuracy
   is printed next to the times. The noise is privfit's (calibrated for its replace-one relation), so both fits
   are equally private; Opacus's own accountant is not used here.
2. **DP-GD against non-private scikit-learn**: ``dp_gd`` at its defaults (same planning) against
   ``LogisticRegression(C=1, max_iter=2000)``.
3. **Objective perturbation**: ``objective_perturbation`` at its defaults, (ε, δ), against diffprivlib's
   ``LogisticRegression`` (objective perturbation, pure ε-DP, C = 1, ``data_norm`` = the public row-norm bound).
4. **Calibration speed**: the noise multiplier z of T Poisson-subsampled Gaussian steps for a target (ε, δ), under
   the add/remove relation so that all three calibrators certify the same z: privfit's
   ``poisson_noise_multiplier(relation="add_remove")`` with every calibration cache cleared before each call
   (cold), dp_accounting's RDP accountant (privfit's 156 orders) bisected by ``calibrate_dp_mechanism``, and
   Opacus's ``get_noise_multiplier(accountant="rdp")`` (its defaults: its orders, ε tolerance 0.01). Median of
   ``--repeats`` after one untimed call. The note gives privfit's replace-one z (what ``dp_sgd`` charges) and its
   time. Settings: the resolved ``dp_sgd`` settings on Adult at ε ∈ {0.5, ε, 2} (δ of the run) and q = 0.01,
   T = 10,000, ε = 2, δ = 1e-5 (``accounting.py``'s).
5. **σ tightness**: on the same settings, z from privfit's RDP calibration against z from dp_accounting's PLD
   accountant (``PLDAccountant()``, its default discretisation, bisected by ``calibrate_dp_mechanism``, tolerance
   1e-6 in z) and from Opacus's PRV accountant (``get_noise_multiplier(accountant="prv", epsilon_tolerance=1e-3)``,
   a finer bisection than its default 0.01 so the tolerance does not hide the accountant's tightness). Each is
   computed once; its time is in the note.

Every privfit solver and the Opacus loop are warmed up once on the first 2,000 rows before anything is timed
(numba compile time, torch's first calls are excluded). Printed with the table: library versions, ``platform``,
the core count and ``os.getloadavg()`` before and after. Progress goes to stderr. ``--quick``: 1 seed, 1 repeat,
only the setting of the run's ε (smoke run). Run it with ``nice -n 10`` on a shared machine.

No thresholds: this reports, it does not judge. The recorded run is in docs/benchmarks.md ("Peers in one run").
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib
import importlib.metadata
import logging
import math
import os
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from adult_all_solvers import Row, progress, run_diffprivlib, run_privfit
from common import ADULT_DIR, WARMUP_ROWS, import_diffprivlib_logistic, library_versions, load_adult, resolve_checked
from common import timed as timed_call
from dp_gd_speed import median_seconds

import privfit
from privfit.privacy import DEFAULT_GRID, poisson_noise_multiplier
from privfit.privacy.calibration import clear_calibration_caches
from privfit.solvers import PublicMetadata, get_solver

MODEL = "logistic"
#: the calibration settings besides the resolved dp_sgd ones on Adult: accounting.py's (ε, δ, q, T)
EXTRA_SETTING: tuple[float, float, float, int] = (2.0, 1e-5, 0.01, 10_000)
#: the ε of the other Adult dp_sgd settings calibrated (besides the run's ε)
OTHER_EPSILONS: tuple[float, ...] = (0.5, 2.0)
#: Opacus's bisection tolerance in ε for the tightness rows (its default, 0.01, is used for the timing rows)
PRV_EPSILON_TOLERANCE = 1e-3
PEER_PACKAGES: tuple[str, ...] = ("numpy", "dp-accounting", "torch", "opacus", "privfit")

START = time.perf_counter()


@dataclasses.dataclass(frozen=True)
class Setting:
    """One calibration problem: T Poisson-subsampled Gaussian steps at rate q, target (ε, δ)."""

    epsilon: float
    delta: float
    q: float
    steps: int
    origin: str

    def label(self) -> str:
        return f"ε = {self.epsilon:g}, δ = {self.delta:g}, q = {self.q:.5g}, T = {self.steps} ({self.origin})"


@dataclasses.dataclass
class Line:
    """One row of the printed table."""

    comparison: str
    setting: str
    privfit: str
    peer: str
    ratio: str = "—"
    note: str = ""


def not_installed(module: str) -> str | None:
    """None when ``module`` imports, else why not (its rows then say "not installed")."""
    try:
        importlib.import_module(module)
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return None


def versions() -> str:
    """scikit-learn and diffprivlib as ``common.library_versions`` reports them, then the other peers."""
    found = [library_versions()]
    for package in PEER_PACKAGES:
        try:
            found.append(f"{package} {importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{package} not installed")
    return ", ".join(found)


def load_text() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f}, {five:.2f}, {fifteen:.2f}"


def fmean_or_none(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def fit_cell(name: str, row: Row | None, epsilon: float) -> str:
    """``name: s/fit, accuracy %`` (mean over the seeds) or why there is none."""
    if row is None:
        return f"{name}: not installed"
    if epsilon in row.refused:
        return f"{name}: refused ({row.refused[epsilon]})"
    seconds, accuracies = fmean_or_none(row.seconds), row.accuracies.get(epsilon, [])
    if seconds is None or not accuracies:
        return f"{name}: —"
    spread = f" ± {100 * statistics.stdev(accuracies):.2f}" if len(accuracies) > 1 else ""
    return f"{name}: {seconds:.3f} s, {100 * statistics.fmean(accuracies):.2f}{spread} %"


def fit_line(comparison: str, setting: str, ours: tuple[str, Row], theirs: tuple[str, Row | None], eps: float) -> Line:
    """A fit row: mean seconds and accuracy of each side, ratio of the mean times."""
    ours_seconds = fmean_or_none(ours[1].seconds)
    theirs_seconds = fmean_or_none(theirs[1].seconds) if theirs[1] is not None else None
    line = Line(comparison, setting, fit_cell(*ours, eps), fit_cell(*theirs, eps))
    if ours_seconds is not None and theirs_seconds is not None:
        line.ratio = f"{ours_seconds / theirs_seconds:.3f}"
        line.note = f"peer / privfit = {theirs_seconds / ours_seconds:.1f} ×"
    return line


# --- Opacus: the same DP-SGD as the resolved dp_sgd ------------------------------------------------------------


def torch_rows(data: Any) -> tuple[Any, Any]:
    """(features as float32, labels in {0, 1} as float32) of an encoded dataset (labels there are ±1)."""
    import torch

    return torch.as_tensor(data.X, dtype=torch.float32), torch.as_tensor(data.y > 0, dtype=torch.float32)


def opacus_predictions(resolved: Any, rows: tuple[Any, Any], test_X: Any, seed: int, steps: int | None = None) -> Any:
    """Opacus DP-SGD with the resolved dp_sgd settings (module docstring, row 1); predictions (±1) on ``test_X``.

    ``steps`` overrides T (the warm-up)."""
    import torch
    from opacus import GradSampleModule
    from opacus.data_loader import DPDataLoader
    from opacus.optimizers import DPOptimizer

    if resolved.lr_schedule != "constant":
        raise ValueError(f"the Opacus replica takes a constant step, got {resolved.lr_schedule!r}")
    total = resolved.steps if steps is None else steps
    generator = torch.Generator().manual_seed(seed)
    model = torch.nn.Linear(rows[0].shape[1], 1, bias=resolved.fit_intercept)
    params = list(model.parameters())
    with torch.no_grad():
        for p in params:
            p.zero_()  # θ_1 = 0, as dp_sgd starts
    module = GradSampleModule(model)
    optimizer = DPOptimizer(
        torch.optim.SGD(params, lr=resolved.step_size, weight_decay=resolved.l2),  # λθ added after the noise
        noise_multiplier=resolved.noise_multiplier,
        max_grad_norm=resolved.clip_norm,
        expected_batch_size=resolved.batch_size,  # divides the noisy sum by the public m
        generator=generator,
    )
    loader = DPDataLoader(
        torch.utils.data.TensorDataset(*rows), sample_rate=resolved.sampling_rate, generator=generator
    )
    loss = torch.nn.BCEWithLogitsLoss()
    tail = math.ceil(total / 2)
    average = [torch.zeros_like(p) for p in params] if resolved.output == "suffix_average" else None
    step = 0
    while step < total:
        for features, labels in loader:
            optimizer.zero_grad()
            loss(module(features).squeeze(1), labels).backward()
            optimizer.step()
            with torch.no_grad():
                norm = float(torch.sqrt(sum((p * p).sum() for p in params)))
                if norm > resolved.radius:  # Π_R on (weights, bias) together, as dp_sgd projects θ
                    for p in params:
                        p.mul_(resolved.radius / norm)
                if average is not None and step >= total - tail:
                    for a, p in zip(average, params, strict=True):
                        a.add_(p)
            step += 1
            if step == total:
                break
    with torch.no_grad():
        if average is not None:
            for a, p in zip(average, params, strict=True):
                p.copy_(a / tail)
        margins = model(torch.as_tensor(test_X, dtype=torch.float32)).squeeze(1).numpy()
    return np.where(margins > 0, 1.0, -1.0)


def run_opacus(resolved: Any, train: Any, test: Any, epsilon: float, seeds: int) -> Row:
    """Opacus fits (fit + predict timed) over the seeds, after one untimed 20-step warm-up on the first rows."""
    import torch

    torch.set_num_threads(os.cpu_count() or 1)
    rows = torch_rows(train)
    warm = (rows[0][:WARMUP_ROWS], rows[1][:WARMUP_ROWS])
    opacus_predictions(resolved, warm, test.X, seed=0, steps=20)
    row = Row("Opacus")
    runs = [timed_call(functools.partial(opacus_predictions, resolved, rows, test.X, seed)) for seed in range(seeds)]
    row.accuracies[epsilon] = [float(np.mean(predictions == test.y)) for predictions, _ in runs]
    row.seconds.extend(seconds for _, seconds in runs)
    progress(f"Opacus: {seeds} fit(s), {statistics.fmean(row.seconds):.2f} s/fit")
    return row


def run_sklearn(train: Any, test: Any, epsilon: float, repeats: int) -> Row:
    """scikit-learn's non-private ``LogisticRegression(C=1, max_iter=2000)`` (deterministic), timed ``repeats``
    times; its accuracy filed under ``epsilon`` so the row formats like the private ones."""
    from sklearn.linear_model import LogisticRegression

    row = Row("scikit-learn")
    runs = [
        timed_call(lambda: LogisticRegression(C=1.0, max_iter=2000).fit(train.X, train.y).predict(test.X))
        for _ in range(repeats)
    ]
    row.accuracies[epsilon] = [float(np.mean(predictions == test.y)) for predictions, _ in runs]
    row.seconds.extend(seconds for _, seconds in runs)
    progress(f"scikit-learn: {repeats} fit(s), {statistics.fmean(row.seconds):.2f} s/fit")
    return row


# --- calibration: privfit, dp_accounting (RDP, PLD), Opacus (RDP, PRV) -------------------------------------------


def privfit_z(setting: Setting, relation: str = "add_remove") -> float:
    """privfit's cold calibration (every cache cleared first: the first request with these inputs)."""
    clear_calibration_caches()
    return poisson_noise_multiplier(
        setting.epsilon, setting.delta, q=setting.q, steps=setting.steps, relation=relation
    ).noise


def dp_accounting_z(setting: Setting, accountant: str) -> float:
    """dp_accounting's ``calibrate_dp_mechanism`` over its RDP accountant (privfit's orders) or PLD accountant."""
    from dp_accounting import GaussianDpEvent, PoissonSampledDpEvent, SelfComposedDpEvent, calibrate_dp_mechanism
    from dp_accounting.pld import PLDAccountant
    from dp_accounting.rdp import RdpAccountant

    orders = list(DEFAULT_GRID.orders)
    fresh = {"rdp": lambda: RdpAccountant(orders), "pld": PLDAccountant}[accountant]
    return float(
        calibrate_dp_mechanism(
            fresh,
            lambda z: SelfComposedDpEvent(PoissonSampledDpEvent(setting.q, GaussianDpEvent(z)), setting.steps),
            setting.epsilon,
            setting.delta,
        )
    )


def opacus_z(setting: Setting, accountant: str, **options: float) -> float:
    from opacus.accountants.utils import get_noise_multiplier

    return float(
        get_noise_multiplier(
            target_epsilon=setting.epsilon,
            target_delta=setting.delta,
            sample_rate=setting.q,
            steps=setting.steps,
            accountant=accountant,
            **options,
        )
    )


def median_call(work: Callable[[], float], repeats: int) -> tuple[float, float]:
    """(value of one untimed call, median seconds over ``repeats`` further calls)."""
    value = work()
    return value, median_seconds(work, repeats)


def calibration_lines(settings: list[Setting], repeats: int, missing: dict[str, str | None]) -> list[Line]:
    """Rows 4 (calibration speed) and 5 (σ tightness) for every setting."""
    speed, tightness = [], []
    for setting in settings:
        progress(f"calibrating: {setting.label()}")
        ours, ours_seconds = median_call(functools.partial(privfit_z, setting), repeats)
        replace_one, replace_seconds = median_call(functools.partial(privfit_z, setting, "replace_one"), repeats)
        ours_cell = f"z = {ours:.5f} in {ours_seconds * 1e3:.1f} ms"
        replace_note = f"privfit replace-one (dp_sgd's): z = {replace_one:.5f} in {replace_seconds * 1e3:.1f} ms"
        peers: list[tuple[str, str, Callable[[], float]]] = [
            ("dp_accounting RDP", "dp_accounting", functools.partial(dp_accounting_z, setting, "rdp")),
            ("Opacus RDP", "opacus", functools.partial(opacus_z, setting, "rdp")),
        ]
        for name, module, work in peers:
            line = Line("calibration time, add/remove", setting.label(), f"privfit {ours_cell}", "")
            if missing[module]:
                line.peer, line.note = f"{name}: not installed", replace_note
            else:
                theirs, seconds = median_call(work, repeats)
                line.peer = f"{name} z = {theirs:.5f} in {seconds * 1e3:.1f} ms"
                line.ratio = f"{ours_seconds / seconds:.4f}"
                line.note = f"peer / privfit = {seconds / ours_seconds:.0f} ×; {replace_note}"
            speed.append(line)
        tight: list[tuple[str, str, Callable[[], float]]] = [
            ("dp_accounting PLD", "dp_accounting", functools.partial(dp_accounting_z, setting, "pld")),
            (
                "Opacus PRV",
                "opacus",
                functools.partial(opacus_z, setting, "prv", epsilon_tolerance=PRV_EPSILON_TOLERANCE),
            ),
        ]
        for name, module, work in tight:
            line = Line("σ certified (z = σ/C), add/remove", setting.label(), f"privfit RDP z = {ours:.5f}", "")
            if missing[module]:
                line.peer = f"{name}: not installed"
            else:
                theirs, seconds = timed_call(work)  # computed once
                line.peer = f"{name} z = {theirs:.5f}"
                line.ratio = f"{ours / theirs:.4f}"
                line.note = f"peer z {100 * (theirs / ours - 1):+.1f} % against privfit's; one call {seconds:.2f} s"
            tightness.append(line)
    return speed + tightness


def adult_settings(meta: PublicMetadata, epsilon: float, delta: float, quick: bool) -> tuple[list[Setting], Any]:
    """The calibration settings (module docstring, row 4) and the resolved dp_sgd settings at the run's ε."""
    solver = get_solver("dp_sgd")
    epsilons = [epsilon] if quick else sorted({epsilon, *OTHER_EPSILONS})
    settings, at_run = [], None
    for eps in epsilons:
        resolved = resolve_checked(solver, MODEL, meta, eps, delta)
        settings.append(Setting(eps, delta, resolved.sampling_rate, resolved.steps, "dp_sgd on Adult"))
        if eps == epsilon:
            at_run = resolved
    if not quick:
        settings.append(Setting(*EXTRA_SETTING, "accounting.py"))
    return settings, at_run


# --- the table ---------------------------------------------------------------------------------------------------


def markdown_table(lines: list[Line]) -> str:
    header = ["comparison", "setting", "privfit", "peer", "privfit / peer", "note"]
    body = [
        [c.replace("|", "\\|") for c in (x.comparison, x.setting, x.privfit, x.peer, x.ratio, x.note)] for x in lines
    ]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        padded = [c.rjust(w) if i == 4 else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if i == 4 else "-" * (w + 2) for i, w in enumerate(widths)) + "|"
    return "\n".join([line(header), rule, *(line(cells) for cells in body)])


def dp_sgd_setting(resolved: Any, epsilon: float, delta: float) -> str:
    return (
        f"Adult, ε = {epsilon:g}, δ = {delta:g}: T = {resolved.steps}, Poisson q = {resolved.sampling_rate:.5f} "
        f"(m = {resolved.batch_size}), C = {resolved.clip_norm:.4f}, z = {resolved.noise_multiplier:.4f}, "
        f"η = {resolved.step_size:.4f}, R = {resolved.radius:g}, λ = {resolved.l2:g}, {resolved.output}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3, help="fits per method (seeds 0, 1, …, seeds − 1)")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per calibrator (median)")
    parser.add_argument("--epsilon", type=float, default=1.0, help="target ε of the fits")
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 seed, 1 repeat, one calibration setting")
    parser.add_argument("--data", type=Path, default=ADULT_DIR)
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.repeats = 1, 1
    if args.seeds < 1 or args.repeats < 1:
        parser.error("--seeds and --repeats must be ≥ 1")
    if not ((args.data / "adult.data").is_file() and (args.data / "adult.test").is_file()):
        print(f"UCI Adult not found under {args.data.resolve()} (expected adult.data and adult.test); skipping")
        return
    warnings.filterwarnings("ignore")
    logging.getLogger("absl").setLevel(logging.ERROR)
    load_before = load_text()
    missing = {module: not_installed(module) for module in ("opacus", "dp_accounting", "sklearn")}
    for module, why in missing.items():
        if why:
            print(f"{module} not installed ({why}); its rows say so")

    progress("loading Adult")
    eps, delta = args.epsilon, args.delta
    train, test = load_adult(args.data, delta)
    meta = PublicMetadata.from_dataset(train)
    settings, resolved = adult_settings(meta, eps, delta, args.quick)
    privacy = f"ε = {eps:g}, δ = {delta:g}"

    progress("dp_sgd (warm-up, fits), then Opacus with the same settings")
    lines = [
        fit_line(
            "DP-SGD fit + predict",
            dp_sgd_setting(resolved, eps, delta),
            ("dp_sgd", run_privfit("dp_sgd", train, test, meta, [eps], args.seeds, delta)),
            ("Opacus", None if missing["opacus"] else run_opacus(resolved, train, test, eps, args.seeds)),
            eps,
        )
    ]
    progress("dp_gd, then scikit-learn")
    lines.append(
        fit_line(
            "DP-GD against non-private fit + predict",
            f"Adult, {privacy}, dp_gd defaults; LogisticRegression(C=1, max_iter=2000)",
            ("dp_gd", run_privfit("dp_gd", train, test, meta, [eps], args.seeds, delta)),
            ("scikit-learn", None if missing["sklearn"] else run_sklearn(train, test, eps, args.seeds)),
            eps,
        )
    )
    progress("objective_perturbation, then diffprivlib")
    dp_logistic = import_diffprivlib_logistic()
    lines.append(
        fit_line(
            "objective perturbation fit + predict",
            f"Adult, privfit {privacy}, defaults; diffprivlib pure ε = {eps:g}, C = 1, data_norm = "
            f"{meta.row_norm_bound:.4f}",
            (
                "objective_perturbation",
                run_privfit("objective_perturbation", train, test, meta, [eps], args.seeds, delta),
            ),
            (
                "diffprivlib",
                None if dp_logistic is None else run_diffprivlib(dp_logistic, train, test, [eps], args.seeds),
            ),
            eps,
        )
    )
    lines.extend(calibration_lines(settings, args.repeats, missing))

    print(f"\nUCI Adult: n = {meta.n} train rows, {test.n} test rows, d = {meta.d} (+ intercept)")
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    print(f"python {platform.python_version()}; {versions()}; privfit imported from {Path(privfit.__file__).parent}")
    print(f"platform: {platform.platform()}, {platform.machine()}, {os.cpu_count()} cores")
    print(f"load average (1, 5, 15 min): {load_before} before, {load_text()} after")
    print(
        f"fits: mean over {args.seeds} seed(s) of fit + predict seconds and test accuracy (± sd); calibrations: "
        f"median of {args.repeats} call(s) after an untimed one; ratio = privfit / peer\n"
    )
    print(markdown_table(lines))
    print(f"\ntotal run time: {time.perf_counter() - START:.1f} s")


if __name__ == "__main__":
    main()
