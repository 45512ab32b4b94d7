"""Real processes: `privfit serve` under 64 concurrent clients (a `privfit worker` killed mid-fit is in
test_api_reruns.py); the start and stop of `privfit serve` (issue 35): two processes start beside CPU-bound load, a
killed supervisor takes its processes with it, SIGTERM stops with status 0."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import pytest
from process_helpers import (
    PRIVFIT,
    alive,
    children,
    connection_owner,
    cpu_load,
    environment,
    free_port,
    keys_for,
    process,
    refuses,
    register,
    server,
    wait_for_line,
    wait_ready,
)

from privfit.privacy import PrivacyCost, get_grid

#: what gunicorn logs when a worker dies or is killed (and uvicorn's supervisor logged: "Child process [N] died")
DEATHS = ("WORKER TIMEOUT", "was sent", "exited with code", "died")


@pytest.mark.parametrize("api_workers", [1, 2])
@pytest.mark.parametrize("admitted", [5])
def test_64_concurrent_fit_requests_admit_exactly_k(database_url: str, tmp_path: Path, admitted: int, api_workers: int):
    """64 concurrent admissions against a budget that holds exactly K, through one API process or two (each
    grouping the admissions it receives into shared transactions, the two competing for the budget's lock)."""
    owner, _ = keys_for(database_url)
    headers = {"Authorization": f"Bearer {owner}"}
    fit = {"model": "logistic", "solver": "dp_gd", "privacy": {"epsilon": 0.3}}
    with server(database_url, tmp_path, PRIVFIT_QUEUE="none", PRIVFIT_API_WORKERS=str(api_workers)) as base:
        probe = register(base, owner, 100.0)
        estimate = httpx.post(f"{base}/v1/fits/estimate", headers=headers, params={"include": "rdp"},
                              json={"dataset_id": probe, **fit})  # fmt: skip
        cost = estimate.json()["cost"]
        one = PrivacyCost(np.array(cost["rdp"]), get_grid(cost["grid"]))
        limit = ((one * admitted).epsilon(1e-6).epsilon + (one * (admitted + 1)).epsilon(1e-6).epsilon) / 2
        dataset_id = register(base, owner, limit)

        def request(_: int) -> int:
            with httpx.Client(timeout=60) as client:
                return client.post(
                    f"{base}/v1/fits", headers=headers, json={"dataset_id": dataset_id, **fit}
                ).status_code

        with ThreadPoolExecutor(64) as pool:
            statuses = list(pool.map(request, range(64)))
        budget = httpx.get(f"{base}/v1/datasets/{dataset_id}/budget", headers=headers).json()
        ledger = httpx.get(f"{base}/v1/datasets/{dataset_id}/ledger", headers=headers).json()
    assert statuses.count(202) == admitted and statuses.count(409) == 64 - admitted, statuses
    assert budget["committed_epsilon"] <= budget["epsilon_max"]
    assert ledger["total"] == admitted


@dataclass(frozen=True)
class Served:
    proc: subprocess.Popen
    base: str
    port: int
    log: Path


@contextmanager
def serve(tmp_path: Path, workers: int) -> Iterator[Served]:
    """`privfit serve --workers N` on a fresh SQLite database, no worker pool, log level info; yields once `/readyz`
    answered and, with several processes, the supervisor logged that all are ready (generous bounds)."""
    port, log = free_port(), tmp_path / "serve.log"
    env = environment(f"sqlite:///{tmp_path / 'privfit.db'}", tmp_path, PRIVFIT_QUEUE="none")
    with process([*PRIVFIT, "serve", "--port", str(port), "--workers", str(workers)], env, log) as proc:
        served = Served(proc, f"http://127.0.0.1:{port}", port, log)
        wait_ready(proc, served.base, log)
        if workers > 1:
            wait_for_line(proc, log, f"all {workers} API processes ready")
        yield served


def accepting_pids(port: int, rounds: int = 20, connections: int = 16) -> set[int]:
    """The pids of the processes that accepted and answered rounds of ``connections`` concurrent connections to
    ``port`` (``GET /healthz`` on each, all open at once), until two processes were seen or ``rounds`` ran."""
    owners: set[int] = set()
    for _ in range(rounds):
        opened = [socket.create_connection(("127.0.0.1", port), timeout=120) for _ in range(connections)]
        try:
            for connection in opened:
                connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
            for connection in opened:
                assert connection.recv(4096).startswith(b"HTTP/1.1 200")
                owners.add(connection_owner(port, connection.getsockname()[1]) or 0)
        finally:
            for connection in opened:
                connection.close()
        if len(owners - {0}) >= 2:
            break
    return owners - {0}


def wait_gone(pids: set[int], timeout: float = 120) -> set[int]:
    """Wait (at most ``timeout`` s, a generous bound) until no process of ``pids`` runs; those still running."""
    deadline = time.monotonic() + timeout
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return {pid for pid in pids if alive(pid)}


def test_two_processes_start_and_serve_beside_four_busy_processes(tmp_path: Path):
    """Issue 35: on a loaded machine, uvicorn's supervisor killed its children every 5 s while they were still
    importing, and the server never answered. With four CPU-bound processes beside it, `privfit serve --workers 2`
    answers, both processes accept connections, and no process died."""
    with cpu_load(4), serve(tmp_path, 2) as served:
        assert httpx.get(f"{served.base}/healthz", timeout=120).json() == {"status": "ok"}
        workers = children(served.proc.pid)
        assert len(workers) == 2
        assert accepting_pids(served.port) == workers
        deaths = [line for line in served.log.read_text().splitlines() if any(word in line for word in DEATHS)]
    assert not deaths, deaths


def test_a_killed_supervisor_takes_its_processes_with_it(tmp_path: Path):
    """SIGKILL of the `privfit serve` process: its two API processes stop too (PR_SET_PDEATHSIG sends them
    SIGTERM) and the port refuses connections, where uvicorn's left both listening and serving."""
    with serve(tmp_path, 2) as served:
        workers = children(served.proc.pid)
        assert len(workers) == 2
        served.proc.kill()
        served.proc.wait(10)
        assert not wait_gone(workers), served.log.read_text()[-3000:]
        assert refuses(served.port)


@pytest.mark.parametrize("workers", [1, 2])
def test_sigterm_stops_an_idle_server_with_status_0(tmp_path: Path, workers: int):
    """SIGTERM: the server (one process, or the supervisor and its processes) exits 0 and releases the port."""
    with serve(tmp_path, workers) as served:
        spawned = children(served.proc.pid)
        served.proc.send_signal(signal.SIGTERM)
        assert served.proc.wait(120) == 0, served.log.read_text()[-3000:]
        assert not wait_gone(spawned)
        assert refuses(served.port)
        assert "Application shutdown complete" in served.log.read_text()
