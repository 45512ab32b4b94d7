"""Start and stop of ``privfit serve`` on a quiet and on a loaded machine (issue 35).

For ``privfit serve --workers 2`` (gunicorn supervising two uvicorn workers), its peer in the same run ``--workers
1`` (one uvicorn process) and, with ``--uvicorn-peer``, the start that issue 35 found failing (``uvicorn --workers 2``:
uvicorn's own supervisor), each on a fresh migrated SQLite database with ``PRIVFIT_QUEUE=none``, quiet and beside
``--load`` busy-looping processes, this prints:

- the seconds from the command's start to the first 200 from ``GET /healthz``;
- the seconds until every process is ready (the supervisor's ``all N API processes ready`` line; uvicorn's
  supervisor: its N-th ``Application startup complete.``), or ``—`` if not within ``--timeout``;
- the process deaths logged while starting (gunicorn: ``WORKER TIMEOUT``, ``was sent``, ``exited with code``;
  uvicorn: ``died``);
- the seconds from SIGTERM of the idle server to its exit, and the exit status;
- the 1-minute load average when the start ended (the machine may be shared);
- the per-process start-up lines' figures (``privfit serve`` only): the app's lifespan and the import of
  ``privfit.api.app``.

Then the import of ``privfit.api.app`` on the quiet machine, split by ``python -X importtime`` into its largest
parts. Times, not thresholds: the rows compare against each other in the same run.

Run: ``.venv/bin/python benchmarks/start_stop.py [--load 4] [--timeout 240] [--uvicorn-peer]``.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import httpx
from services import PRIVFIT, environment, free_port, process, tail

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "api"))
from process_helpers import cpu_load

from privfit.db.migrate import upgrade

DEATHS = ("WORKER TIMEOUT", "was sent", "exited with code", "died")


@dataclass
class Run:
    label: str
    load: int
    load_average: float
    first_answer: float | None
    all_ready: float | None
    deaths: int
    stop: float | None
    status: int | None
    lifespans: list[float]
    import_seconds: float | None


def command(kind: str, port: int) -> tuple[list[str], int]:
    """The command line of ``kind`` and its number of processes."""
    if kind == "uvicorn":
        args = [sys.executable, "-m", "uvicorn", "--factory", "privfit.api.app:create_app", "--workers", "2"]
        return [*args, "--port", str(port)], 2
    workers = int(kind.removeprefix("privfit-"))
    return [*PRIVFIT, "serve", "--port", str(port), "--workers", str(workers)], workers


def all_ready(kind: str, log_text: str, workers: int) -> bool:
    if kind == "uvicorn":
        return log_text.count("Application startup complete.") >= workers
    if workers == 1:
        return "API process" in log_text and " ready " in log_text
    return f"all {workers} API processes ready" in log_text


def measure(kind: str, load: int, workdir: Path, timeout: float) -> Run:
    """Start ``kind`` beside ``load`` busy processes, wait for its answers and readiness, then SIGTERM it idle."""
    workdir.mkdir(parents=True)
    url = f"sqlite:///{workdir / 'privfit.db'}"
    upgrade(url)
    port, log = free_port(), workdir / "serve.log"
    args, workers = command(kind, port)
    env = environment(url, workdir, PRIVFIT_QUEUE="none")
    first = ready = stop = status = None
    with ExitStack() as stack:
        if load:
            stack.enter_context(cpu_load(load))
        began = time.monotonic()
        proc = stack.enter_context(process(args, env, log))
        deadline = began + timeout
        while (first is None or ready is None) and time.monotonic() < deadline and proc.poll() is None:
            if first is None:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                        first = time.monotonic() - began
                except httpx.HTTPError:
                    pass
            if ready is None and all_ready(kind, log.read_text(errors="replace"), workers):
                ready = time.monotonic() - began
            time.sleep(0.05)
        deaths = sum(any(word in line for word in DEATHS) for line in log.read_text(errors="replace").splitlines())
        load_average = os.getloadavg()[0]  # the machine is shared: what the row ran beside, busy loops included
        stack.close()  # the load ends before the stop is measured: the stop is of an idle server on a quiet machine
    if first is not None and ready is not None:
        with process(args, env, workdir / "stop.log") as proc:
            while not all_ready(kind, (workdir / "stop.log").read_text(errors="replace"), workers):
                if proc.poll() is not None:
                    raise RuntimeError(f"{kind} exited: {tail(workdir / 'stop.log')}")
                time.sleep(0.05)
            began = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            try:
                status = proc.wait(120)
                stop = time.monotonic() - began
            except subprocess.TimeoutExpired:
                pass
    text = log.read_text(errors="replace")
    lifespans = [float(x) for x in re.findall(r"the app's start-up \(lifespan\) ([\d.]+) s", text)]
    imported = re.search(r"imported privfit\.api\.app in ([\d.]+) s", text)
    import_seconds = float(imported[1]) if imported else None
    return Run(kind, load, load_average, first, ready, deaths, stop, status, lifespans, import_seconds)


def fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def import_breakdown() -> list[tuple[str, float]]:
    """``python -X importtime -c 'import privfit.api.app'``: the total and its largest parts (cumulative seconds)."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", "import privfit.api.app"], capture_output=True,
                          text=True, check=True)  # fmt: skip
    cumulative: dict[str, float] = {}
    for line in done.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            cumulative.setdefault(parts[2].strip(), int(parts[1]) / 1e6)
    names = ("privfit.api.app", "privfit.jobs", "privfit.solvers", "privfit.privacy", "privfit.datasets.lifecycle",
             "fastapi", "privfit.db.migrate", "numba", "scipy.optimize", "scipy.stats", "numpy", "pyarrow")  # fmt: skip
    return [(name, cumulative[name]) for name in names if name in cumulative]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load", type=int, default=4, help="busy-looping processes beside the loaded runs")
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds to wait for a start")
    parser.add_argument("--uvicorn-peer", action="store_true", help="also run uvicorn's own supervisor (issue 35)")
    args = parser.parse_args()
    kinds = ["privfit-2", "privfit-1"] + (["uvicorn"] if args.uvicorn_peer else [])
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for load in (0, args.load):
            for kind in kinds:
                run = measure(kind, load, Path(tmp) / f"{kind}-{load}", args.timeout)
                runs.append(run)
                print(f"{kind} beside {load} busy processes: first answer {fmt(run.first_answer)} s, all ready "
                      f"{fmt(run.all_ready)} s, {run.deaths} deaths, stop {fmt(run.stop)} s (status {run.status})",
                      flush=True)  # fmt: skip
    labels = {"privfit-2": "`privfit serve --workers 2` (gunicorn)", "privfit-1": "`privfit serve --workers 1`",
              "uvicorn": "`uvicorn --workers 2` (uvicorn's supervisor)"}  # fmt: skip
    print(
        "\n| start | busy processes | load average | first /healthz s | all ready s | deaths | lifespan s | import s "
        "| SIGTERM → exit s | status |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for run in runs:
        lifespan = "/".join(f"{x:.1f}" for x in run.lifespans) or "—"
        print(f"| {labels[run.label]} | {run.load} | {run.load_average:.1f} | {fmt(run.first_answer)} "
              f"| {fmt(run.all_ready)} | {run.deaths} | {lifespan} | {fmt(run.import_seconds)} | {fmt(run.stop)} "
              f"| {run.status} |")  # fmt: skip
    print(f"\nimport of privfit.api.app without busy processes (load average {os.getloadavg()[0]:.1f}; cumulative s, "
          "python -X importtime):")  # fmt: skip
    for name, seconds in import_breakdown():
        print(f"  {name:28s} {seconds:6.2f}")


if __name__ == "__main__":
    main()
