"""CLI start-up (issue 36, item 6): the CPU time of ``privfit --help`` and of a client command, next to peers.

    python benchmarks/cli_start.py [--runs 15] [--limit 0.3]

Each command runs ``--runs`` times in a fresh process, the commands taking turns (round-robin, so that a change of
the machine's load touches all of them alike). A run's CPU time is the user + system time of the child process
(``resource.getrusage(RUSAGE_CHILDREN)`` before and after: the interpreter's start, its imports and the command,
never the parent's own work). The commands:

* ``python -c pass`` — the interpreter alone (the floor);
* ``python -c "import httpx"`` — the peer: what any httpx-based client pays to start;
* ``privfit --help`` and ``privfit solvers --help`` — the entry point the virtual environment installs;
* ``privfit whoami`` against a trivial endpoint: a stdlib HTTP server in this process answering ``GET /v1/me`` with
  a fixed document (its CPU is this process's, not counted), so the row is the client command's own start, request
  and table;
* the imports of ``privfit.cli`` before issue 36 (the privacy core with numpy and scipy, the settings with pydantic,
  the client with httpx and rich) — what ``--help`` used to pay, for scale.

Prints the machine, its load average before and after, and per command the median and minimum CPU seconds, the
median wall seconds and the ratios of the median CPU to the two peers. Exits 1 if the median CPU of
``privfit --help`` is over ``--limit`` seconds (default 0.3, the issue's bound for a quiet machine).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

#: What ``privfit.cli`` imported at start-up before issue 36 (``privfit.privacy.noise``, ``privfit.settings``, the
#: client with httpx, rich's console, progress, table and text), for the reference row.
BEFORE_IMPORTS = (
    "import privfit.logs, privfit.privacy.noise, privfit.settings, privfit.client._client, rich.console, "
    "rich.progress, rich.table, rich.text"
)


class _Me(BaseHTTPRequestHandler):
    """``GET /v1/me``: a fixed answer, the cheapest endpoint a client command can call."""

    def do_GET(self) -> None:
        body = json.dumps({"key_id": "0" * 8, "role": "analyst", "name": "benchmark"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


def privfit_command() -> list[str]:
    """The ``privfit`` entry point beside this interpreter (what a user runs), else ``python -m privfit.cli``."""
    script = Path(sys.executable).parent / "privfit"
    return [str(script)] if script.exists() else [sys.executable, "-m", "privfit.cli"]


def run_once(command: list[str]) -> tuple[float, float]:
    """(CPU seconds of the child, wall seconds) of one run; the command must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.decode()[-500:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="runs of each command (default 15)")
    parser.add_argument("--limit", type=float, default=0.3, help="median CPU seconds allowed for privfit --help")
    args = parser.parse_args()

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Me)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}"
    privfit = privfit_command()
    env_free = {k: v for k, v in os.environ.items() if not k.startswith("PRIVFIT_")}
    os.environ.clear()
    os.environ.update(env_free)  # the child processes: no inherited PRIVFIT_* settings
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "python -c 'import httpx'": [sys.executable, "-c", "import httpx"],
        "privfit --help": [*privfit, "--help"],
        "privfit solvers --help": [*privfit, "solvers", "--help"],
        "privfit whoami (trivial endpoint)": [*privfit, "whoami", "--url", url, "--api-key", "pf_benchmark"],
        "imports of privfit.cli before issue 36": [sys.executable, "-c", BEFORE_IMPORTS],
    }
    for command in commands.values():  # warm the file cache and the bytecode once, uncounted
        run_once(command)
    load_before = os.getloadavg()
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, command in commands.items():
            samples[name].append(run_once(command))
    load_after = os.getloadavg()
    server.shutdown()

    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}, Python "
          f"{platform.python_version()}")  # fmt: skip
    print(f"load average (1, 5, 15 min): before {', '.join(f'{v:.2f}' for v in load_before)}; after "
          f"{', '.join(f'{v:.2f}' for v in load_after)}; {args.runs} runs of each command, round-robin")  # fmt: skip
    median = {name: statistics.median(cpu for cpu, _ in runs) for name, runs in samples.items()}
    floor, peer = median["python -c pass"], median["python -c 'import httpx'"]
    print()
    print("| command | median CPU s | min CPU s | median wall s | × `python -c pass` | × `import httpx` |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, runs in samples.items():
        cpu = [c for c, _ in runs]
        wall = statistics.median(w for _, w in runs)
        print(f"| `{name}` | {median[name]:.3f} | {min(cpu):.3f} | {wall:.3f} | {median[name] / floor:.1f} | "
              f"{median[name] / peer:.2f} |")  # fmt: skip
    help_cpu = median["privfit --help"]
    print()
    if help_cpu > args.limit:
        print(f"privfit --help: median CPU {help_cpu:.3f} s, over --limit {args.limit} s")
        return 1
    print(f"privfit --help: median CPU {help_cpu:.3f} s, within --limit {args.limit} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
