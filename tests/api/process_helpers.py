"""Real ``privfit`` processes for tests: a server, workers, their environments, and a registered dataset."""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import httpx
from api_helpers import SMALL_SCHEMA, small_csv

from privfit.api.auth import create_api_key
from privfit.db import make_database
from privfit.db.migrate import upgrade

PRIVFIT = [sys.executable, "-m", "privfit.cli"]


#: The ports :func:`free_port` hands out: below Linux's ephemeral range (32768-60999, where ``bind(port 0)`` and
#: outgoing connections take theirs), split between the pytest-xdist workers. A port chosen by ``bind(port 0)`` is
#: free only until the server started with it binds it, seconds later on a busy machine: meanwhile another worker's
#: server or any connection could take it. Here each worker (``PYTEST_XDIST_WORKER`` gwN) cycles through its own share.
SERVER_PORTS = range(20000, 32768)


def _port_sequence() -> Iterator[int]:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    workers = max(int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")), 1)
    index = int(worker) % workers if worker.isdigit() else 0
    share = len(SERVER_PORTS) // workers
    first = SERVER_PORTS.start + index * share
    offset = random.SystemRandom().randrange(share)  # another run's workers start elsewhere in the share
    for step in itertools.count():
        yield first + (offset + step) % share


_PORTS = _port_sequence()


def free_port() -> int:
    """A port of this worker's share of :data:`SERVER_PORTS` that nothing holds now (one bind tries it); the next
    call gives another (the whole share is used before a port comes round again)."""
    for _ in range(1000):
        port = next(_PORTS)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:  # a listening service (e.g. RabbitMQ's 25672) or a socket still closing
                continue
        return port
    raise RuntimeError(f"no free port in this worker's share of {SERVER_PORTS}")


def environment(database_url: str, tmp_path: Path, **extra: str) -> dict[str, str]:
    """The test's environment without inherited ``PRIVFIT_*``, plus the database, a data dir and ``extra``. One API
    process unless ``extra`` says otherwise: tests read the listening process's memory and state (the default of 2
    is exercised where a test asks for it, e.g. test_api_processes.py)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRIVFIT_")}
    env.update(PRIVFIT_DATABASE_URL=database_url, PRIVFIT_DATA_DIR=str(tmp_path / "store"), PRIVFIT_API_WORKERS="1")
    env.update(extra)
    return env


#: how long a test waits for a started server to answer: generous, since a loaded machine (issue 35: load 17-31 on
#: 2 cores) starts a process in tens of seconds; a server that exits is reported at once, not after this
READY_TIMEOUT = 240.0


@contextmanager
def process(args: list[str], env: dict[str, str], log: Path, cwd: Path | None = None) -> Iterator[subprocess.Popen]:
    """``args`` in a new session (its own process group), output to ``log``; on exit the whole group is killed —
    also children that outlived the process (a supervisor's workers)."""
    with log.open("wb") as output:
        proc = subprocess.Popen(args, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True, cwd=cwd)
        try:
            yield proc
        finally:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def wait_ready(proc: subprocess.Popen, base: str, log: Path, timeout: float = READY_TIMEOUT) -> None:
    """Wait until ``base``'s ``/readyz`` answers 200 (it answers only once the app's start-up finished); fails with
    the end of ``log`` if ``proc`` exits first or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    state = f"exited with {proc.returncode}" if proc.poll() is not None else f"not ready after {timeout:.0f} s"
    raise AssertionError(f"server did not start ({state}): {log.read_text(errors='replace')[-3000:]}")


def wait_for_line(proc: subprocess.Popen, log: Path, text: str, timeout: float = READY_TIMEOUT) -> None:
    """Wait until ``log`` holds ``text`` (e.g. the supervisor's ``all 2 API processes ready``); fails with the end of
    ``log`` if ``proc`` exits first or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while text not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"no {text!r} in the log: {log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.1)


@contextmanager
def cpu_load(processes: int) -> Iterator[list[subprocess.Popen]]:
    """``processes`` busy-looping Python processes (a loaded machine) until the block ends."""
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)]
    try:
        yield busy
    finally:
        for proc in busy:
            proc.kill()
            proc.wait(10)


def refuses(port: int) -> bool:
    """Whether a TCP connection to 127.0.0.1:``port`` is refused (nothing listens there any more)."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    except OSError:  # e.g. a timeout: something holds the port but does not accept
        return False
    return False


@contextmanager
def serving(command: list[str], env: dict[str, str], tmp_path: Path, port: int, *, timeout: float = READY_TIMEOUT,
            cwd: Path | None = None) -> Iterator[str]:  # fmt: skip
    """Run ``command`` (a server listening on ``port``) until the block ends; its URL once ``/readyz`` answers 200
    (:func:`wait_ready`; the log is ``tmp_path/serve.log``)."""
    log = tmp_path / "serve.log"
    with process(command, env, log, cwd=cwd) as proc:
        base = f"http://127.0.0.1:{port}"
        wait_ready(proc, base, log, timeout)
        yield base


@contextmanager
def server(database_url: str, tmp_path: Path, **extra: str) -> Iterator[str]:
    port = free_port()
    env = environment(database_url, tmp_path, **extra)
    with serving([*PRIVFIT, "serve", "--port", str(port), "--log-level", "warning"], env, tmp_path, port) as base:
        yield base


def register(base: str, owner: str, epsilon: float, name: str = "", validation_fraction: float | None = None) -> str:
    """Upload the small public dataset with budget ``epsilon`` (and a display ``name``, duplicates allowed, and a
    ``validation_fraction`` if given); its id."""
    declared = json.loads(json.dumps(SMALL_SCHEMA))
    declared["budget"]["epsilon"] = epsilon
    if validation_fraction is not None:
        declared["validation_fraction"] = validation_fraction
    response = httpx.post(
        f"{base}/v1/datasets", headers={"Authorization": f"Bearer {owner}"}, files={"file": ("d.csv", small_csv())},
        data={"schema": json.dumps(declared), "name": name, "allow_duplicate": "true"}, timeout=30,
    )  # fmt: skip
    assert response.status_code == 201, response.text
    return response.json()["id"]


def keys_for(database_url: str) -> tuple[str, str]:
    upgrade(database_url)
    db = make_database(database_url)
    try:
        return create_api_key(db, "owner")[1], create_api_key(db, "admin")[1]
    finally:
        db.dispose()


@dataclass(frozen=True)
class LiveServer:
    """A running ``privfit serve`` on its own SQLite database, with an owner and an admin key."""

    base: str
    database_url: str
    tmp_path: Path
    owner: str
    admin: str


@contextmanager
def sqlite_server(tmp_path: Path, **extra: str) -> Iterator[LiveServer]:
    """``privfit serve`` on a fresh SQLite database under ``tmp_path`` (for module-scoped fixtures)."""
    url = f"sqlite:///{tmp_path / 'privfit.db'}"
    owner, admin = keys_for(url)
    with server(url, tmp_path, **extra) as base:
        yield LiveServer(base, url, tmp_path, owner, admin)


def _tcp_inodes(port: int, state: str, remote_port: int | None = None) -> set[str]:
    """Inodes of the TCP sockets of local ``port`` in ``state`` (hex, e.g. ``0A`` LISTEN, ``01`` ESTABLISHED), and
    of remote ``remote_port`` if given, from /proc/net/tcp{,6} (Linux)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if (
                int(fields[1].split(":")[1], 16) == port
                and fields[3] == state
                and (remote_port is None or int(fields[2].split(":")[1], 16) == remote_port)
            ):
                inodes.add(fields[9])
    return inodes


def _socket_holders(inodes: set[str]) -> list[int]:
    """The pids of the processes that hold a socket of ``inodes`` (from their /proc/<pid>/fd), in /proc's order."""
    holders = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            targets = (str(fd.readlink()) for fd in (proc / "fd").iterdir())
            if any(target.startswith("socket:[") and target[8:-1] in inodes for target in targets):
                holders.append(int(proc.name))
        except OSError:
            continue
    return holders


def listening_pid(base: str) -> int:
    """The pid of the process that listens on ``base``'s port (``privfit serve`` with one process runs uvicorn
    in-process), from /proc (Linux): the LISTEN socket's inode in /proc/net/tcp{,6}, then the process holding it."""
    port = int(base.rsplit(":", 1)[1])
    holders = _socket_holders(_tcp_inodes(port, "0A"))
    if not holders:
        raise RuntimeError(f"no process listens on port {port}")
    return holders[0]


def connection_owner(server_port: int, client_port: int) -> int | None:
    """The pid of the process holding the server side of the open TCP connection from ``client_port`` to
    ``server_port`` on this machine (which API process accepted it), or None."""
    holders = _socket_holders(_tcp_inodes(server_port, "01", client_port))
    return holders[0] if holders else None


def children(pid: int) -> set[int]:
    """The pids of the live children of ``pid`` (/proc/<pid>/task/*/children, Linux)."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found.update(int(child) for child in (task / "children").read_text().split())
        except OSError:
            continue
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` is a running process (a zombie, dead but not yet reaped by its parent, is not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def status_kib(pid: int, field: str) -> int:
    """A ``kB`` field of /proc/<pid>/status (e.g. ``VmHWM``, the peak resident set)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/{pid}/status")


def read_fit_events(base: str, headers: dict[str, str], fit_id: str, timeout: float = READY_TIMEOUT) -> list[tuple]:
    """Follow ``GET /v1/fits/{id}/events`` of a live server until it ends: its events as (event, data) pairs."""
    from privfit.client.events import server_events

    events: list[tuple] = []
    with httpx.stream("GET", f"{base}/v1/fits/{fit_id}/events", headers=headers, timeout=timeout) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        for event in server_events(response.iter_lines()):
            events.append((event.event, json.loads(event.data)))
            if event.event == "end":
                break
    return events
