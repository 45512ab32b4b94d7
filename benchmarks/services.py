"""Real ``privfit`` processes for the service benchmarks (``admission.py``, ``celery_throughput.py``); not a script.

A server, Celery workers, their environments, an owner key, a registered synthetic dataset and a temporary
PostgreSQL database. The scripts run as ``python benchmarks/<name>.py``, which puts this directory first on
``sys.path``, so they import these helpers with ``from services import ...``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import numpy as np
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from privfit.api.auth import create_api_key
from privfit.db import make_database
from privfit.db.migrate import upgrade

PRIVFIT = [sys.executable, "-m", "privfit.cli"]


def schema(epsilon: float = 1e6, delta: float = 1e-9) -> dict:
    """The declared schema of :func:`synthetic_csv`: ten numeric features in [-1, 1], label y ∈ {yes, no}; δ = 1e-9
    stays below 1/n (which the service requires) for the benchmarks' largest uploads (millions of rows)."""
    return {
        "label": {"name": "y", "type": "binary", "positive": "yes", "negative": "no"},
        "features": [{"name": f"x{i}", "type": "numeric", "lower": -1, "upper": 1} for i in range(10)],
        "missing": "reject",
        "budget": {"epsilon": epsilon, "delta": delta},
    }


def synthetic_csv(n: int = 2000) -> bytes:
    """``n`` rows of ten uniform features and the label ``x0 > 0`` (seeded: every run uploads the same file)."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, size=(n, 10))
    y = np.where(x[:, 0] > 0, "yes", "no")
    header = ",".join(f"x{i}" for i in range(10)) + ",y"
    return (
        header
        + "\n"
        + "\n".join(",".join(f"{v:.3f}" for v in row) + f",{label}" for row, label in zip(x, y, strict=True))
    ).encode()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def environment(database_url: str, workdir: Path, **extra: str) -> dict[str, str]:
    """This process's environment without any inherited ``PRIVFIT_*``, plus the database, a data dir and ``extra``.
    One API process unless ``extra`` sets ``PRIVFIT_API_WORKERS``: ``upload_memory.py`` reads the listening process's
    memory, and ``celery_throughput.py``'s embedded pool is one process's (``admission.py`` asks for its own)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRIVFIT_")}
    env.update(PRIVFIT_DATABASE_URL=database_url, PRIVFIT_DATA_DIR=str(workdir / "store"), PRIVFIT_API_WORKERS="1")
    env.update(extra)
    return env


def stop(proc: subprocess.Popen, timeout: float = 30.0) -> None:
    """SIGTERM to the process group, then SIGKILL if it has not exited after ``timeout`` seconds."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(10)


@contextmanager
def process(args: list[str], env: dict[str, str], log: Path, cwd: Path | None = None) -> Iterator[subprocess.Popen]:
    """``args`` in a new session, output to ``log``; stopped by :func:`stop` on exit."""
    with log.open("wb") as output:
        proc = subprocess.Popen(args, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True, cwd=cwd)
        try:
            yield proc
        finally:
            stop(proc)


def tail(log: Path, chars: int = 3000) -> str:
    return log.read_text(errors="replace")[-chars:] if log.exists() else ""


@contextmanager
def server(database_url: str, workdir: Path, **extra: str) -> Iterator[str]:
    """``privfit serve`` on a free port with ``extra`` settings (log in ``workdir/serve.log``); yields its base URL."""
    workdir.mkdir(parents=True, exist_ok=True)
    port, log = free_port(), workdir / "serve.log"
    args = [*PRIVFIT, "serve", "--port", str(port), "--log-level", "warning"]
    with process(args, environment(database_url, workdir, **extra), log) as proc:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"privfit serve did not start:\n{tail(log)}")
            time.sleep(0.1)
        yield base


@contextmanager
def celery_worker(database_url: str, workdir: Path, name: str, **extra: str) -> Iterator[subprocess.Popen]:
    """``privfit worker --concurrency 1`` in its own empty directory ``workdir/name``; yields once it consumes.

    ``extra`` must select the Celery backend (``PRIVFIT_QUEUE=celery``, broker, queue); the worker is given only
    the database URL and those settings, so with ``PRIVFIT_STORE=database`` it reads datasets from the database.
    """
    home = workdir / name
    home.mkdir(parents=True)
    log = workdir / f"{name}.log"
    with process([*PRIVFIT, "worker", "--concurrency", "1"], environment(database_url, home, **extra), log,
                 cwd=home) as proc:  # fmt: skip
        deadline = time.monotonic() + 60
        while "ready." not in tail(log, 100_000):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"privfit worker {name} did not start:\n{tail(log)}")
            time.sleep(0.1)
        yield proc


def owner_headers(database_url: str) -> dict[str, str]:
    """Migrate ``database_url`` and create an owner key: the request headers that carry it."""
    upgrade(database_url)
    db = make_database(database_url)
    try:
        _, owner = create_api_key(db, "owner")
    finally:
        db.dispose()
    return {"Authorization": f"Bearer {owner}"}


def register_dataset(base: str, headers: dict[str, str], rows: int = 2000, epsilon: float = 1e6) -> str:
    """Upload :func:`synthetic_csv` with budget ``epsilon``; returns the dataset id."""
    response = httpx.post(f"{base}/v1/datasets", headers=headers, files={"file": ("d.csv", synthetic_csv(rows))},
                          data={"schema": json.dumps(schema(epsilon))}, timeout=60)  # fmt: skip
    if response.status_code != 201:
        raise RuntimeError(f"dataset upload: {response.status_code} {response.text[:300]}")
    return response.json()["id"]


def create_database(admin_url: str) -> str:
    """Create a fresh database ``privfit_bench_<random>`` on the server of ``admin_url``; returns its URL."""
    name = f"privfit_bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        admin.dispose()
    return make_url(admin_url).set(database=name).render_as_string(hide_password=False)


def drop_database(admin_url: str, url: str) -> None:
    """Drop the database of ``url`` (made by :func:`create_database`), closing its remaining connections."""
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)'))
    finally:
        admin.dispose()


@contextmanager
def temporary_database(admin_url: str) -> Iterator[str]:
    """A fresh PostgreSQL database for the duration of the block; yields its URL."""
    url = create_database(admin_url)
    try:
        yield url
    finally:
        drop_database(admin_url, url)
