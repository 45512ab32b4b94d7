"""Real ``privfit`` processes for tests: a server, workers, their environments, and a registered dataset."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from api_helpers import SMALL_SCHEMA, small_csv

from privfit.api.auth import create_api_key
from privfit.db import make_database
from privfit.db.migrate import upgrade

PRIVFIT = [sys.executable, "-m", "privfit.cli"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def environment(database_url: str, tmp_path: Path, **extra: str) -> dict[str, str]:
    """The test's environment without inherited ``PRIVFIT_*``, plus the database, a data dir and ``extra``. One API
    process unless ``extra`` says otherwise: tests read the listening process's memory and state (the default of 2
    is exercised where a test asks for it, e.g. test_api_processes.py)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRIVFIT_")}
    env.update(PRIVFIT_DATABASE_URL=database_url, PRIVFIT_DATA_DIR=str(tmp_path / "store"), PRIVFIT_API_WORKERS="1")
    env.update(extra)
    return env


@contextmanager
def process(args: list[str], env: dict[str, str], log: Path, cwd: Path | None = None) -> Iterator[subprocess.Popen]:
    with log.open("wb") as output:
        proc = subprocess.Popen(args, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True, cwd=cwd)
        try:
            yield proc
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@contextmanager
def serving(command: list[str], env: dict[str, str], tmp_path: Path, port: int, *, timeout: float = 30,
            cwd: Path | None = None) -> Iterator[str]:  # fmt: skip
    """Run ``command`` (a server listening on ``port``) until the block ends; its URL once ``/readyz`` answers 200
    (the log, ``tmp_path/serve.log``, is shown if it never does within ``timeout`` seconds)."""
    with process(command, env, tmp_path / "serve.log", cwd=cwd):
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                    yield base
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"server did not start: {(tmp_path / 'serve.log').read_text()[-2000:]}")


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


def listening_pid(base: str) -> int:
    """The pid of the process that listens on ``base``'s port (``privfit serve`` runs uvicorn in-process), from
    /proc (Linux): the LISTEN socket's inode in /proc/net/tcp{,6}, then the process holding it."""
    port = int(base.rsplit(":", 1)[1])
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].split(":")[1], 16) == port and fields[3] == "0A":  # LISTEN
                inodes.add(fields[9])
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                target = str(fd.readlink())
                if target.startswith("socket:[") and target[8:-1] in inodes:
                    return int(proc.name)
        except OSError:
            continue
    raise RuntimeError(f"no process listens on port {port}")


def status_kib(pid: int, field: str) -> int:
    """A ``kB`` field of /proc/<pid>/status (e.g. ``VmHWM``, the peak resident set)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/{pid}/status")
