"""Real processes (issue 35): a fit whose worker is killed or stopped runs again from the start with its one charge.

* ``privfit worker`` (polling) killed with SIGKILL at a random moment of a fit: the fit's lease expires, the next
  worker queues it again and runs it; one charge, one result, ``attempt`` 2.
* ``privfit serve`` (two processes with their embedded pools) sent SIGTERM during a fit: it stops taking work, the
  fit stops at its next step and goes back to the queue, and the supervisor exits 0 long before the fit would have
  ended; the next start runs it.

Celery workers on Redis and RabbitMQ: tests/api/test_api_celery.py. The state machine: tests/ledger/test_job_states.py.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from process_helpers import PRIVFIT, environment, free_port, keys_for, process, register, server, wait_ready
from sqlalchemy import select

from privfit.db import Job, make_database

#: dp_gd on the small dataset for about 5 s of a quiet machine (longer on a busy one): stopped within its first
#: second, then run again from the start to its end
LONG = {"privacy": {"epsilon": 0.5}, "params": {"steps": 30_000}}
FAST = {"PRIVFIT_LEASE_SECONDS": "2", "PRIVFIT_HEARTBEAT_SECONDS": "0.2", "PRIVFIT_POLL_SECONDS": "0.1"}


def wait_for(base: str, headers: dict[str, str], fit_id: str, done, timeout: float = 240.0) -> dict:
    """Poll the fit until ``done(body)`` (a generous bound: the machine may be busy)."""
    deadline = time.monotonic() + timeout
    body: dict = {}
    while time.monotonic() < deadline:
        body = httpx.get(f"{base}/v1/fits/{fit_id}", headers=headers, timeout=30).json()
        if done(body):
            return body
        time.sleep(0.1)
    raise AssertionError(f"fit {fit_id} never reached the expected state: {body}")


def running(body: dict) -> bool:
    return body["status"] == "running" and body["progress"] > 0


def terminal(body: dict) -> bool:
    return body["status"] in ("succeeded", "failed", "cancelled")


def ledger_kinds(base: str, headers: dict[str, str], dataset_id: str) -> dict[str, list[str]]:
    entries = httpx.get(f"{base}/v1/datasets/{dataset_id}/ledger?limit=1000", headers=headers).json()["entries"]
    kinds: dict[str, list[str]] = {}
    for entry in entries:
        kinds.setdefault(entry["job_id"], []).append(entry["kind"])
    return {job_id: sorted(k) for job_id, k in kinds.items()}


def attempts(database_url: str, fit_id: str) -> int:
    db = make_database(database_url)
    try:
        with db.read() as session:
            return int(session.execute(select(Job.attempt).where(Job.id == fit_id)).scalar_one())
    finally:
        db.dispose()


def test_a_worker_killed_mid_fit_runs_it_again_with_its_one_charge(database_url: str, tmp_path: Path):
    owner, _ = keys_for(database_url)
    headers = {"Authorization": f"Bearer {owner}"}
    worker_env = environment(database_url, tmp_path, **FAST)
    with server(database_url, tmp_path, PRIVFIT_QUEUE="none") as base:
        dataset_id = register(base, owner, 10.0)
        fit_id = httpx.post(f"{base}/v1/fits", headers=headers, json={"dataset_id": dataset_id, **LONG}).json()["id"]
        with process([*PRIVFIT, "worker", "--concurrency", "1"], worker_env, tmp_path / "worker1.log") as worker:
            wait_for(base, headers, fit_id, running)
            time.sleep(random.uniform(0.0, 1.0))  # a random moment of the run
            # A second fit waits in the queue behind the running one (one worker thread); cancelled while no
            # worker runs, it is released (it never started).
            short = {"dataset_id": dataset_id, "privacy": {"epsilon": 0.5}}
            queued_id = httpx.post(f"{base}/v1/fits", headers=headers, json=short).json()["id"]
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(10)
        assert httpx.post(f"{base}/v1/fits/{queued_id}/cancel", headers=headers).json()["status"] == "cancelled"
        with process([*PRIVFIT, "worker", "--concurrency", "1"], worker_env, tmp_path / "worker2.log"):
            body = wait_for(base, headers, fit_id, terminal)
        kinds = ledger_kinds(base, headers, dataset_id)
    assert body["status"] == "succeeded" and "result" in body
    assert attempts(database_url, fit_id) == 2
    assert kinds[fit_id] == ["charge", "reservation"] and kinds[queued_id] == ["release", "reservation"]


@contextmanager
def serve(database_url: str, tmp_path: Path, name: str, **extra: str) -> Iterator[tuple[str, object]]:
    """``privfit serve`` (the default start: two processes under their supervisor, each with its embedded worker
    pool) and the supervisor's process handle, once ``/readyz`` answers."""
    port = free_port()
    env = environment(database_url, tmp_path, **extra)
    command = [*PRIVFIT, "serve", "--port", str(port), "--workers", "2", "--log-level", "warning"]
    with process(command, env, tmp_path / f"{name}.log") as proc:
        base = f"http://127.0.0.1:{port}"
        wait_ready(proc, base, tmp_path / f"{name}.log")
        yield base, proc


def test_sigterm_stops_a_running_fit_at_its_next_step_and_the_next_start_runs_it(database_url: str, tmp_path: Path):
    owner, _ = keys_for(database_url)
    headers = {"Authorization": f"Bearer {owner}"}
    with serve(database_url, tmp_path, "serve1", PRIVFIT_STOP_GRACE_SECONDS="60", PRIVFIT_HEARTBEAT_SECONDS="0.2") as (
        base,
        proc,
    ):
        dataset_id = register(base, owner, 10.0)
        fit_id = httpx.post(f"{base}/v1/fits", headers=headers, json={"dataset_id": dataset_id, **LONG}).json()["id"]
        seen = wait_for(base, headers, fit_id, running)  # progress within a 0.2 s heartbeat
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(120) == 0  # a wait bound, not a timing
    db = make_database(database_url)
    try:
        with db.read() as session:
            job = session.get(Job, fit_id)
            assert job.status == "queued" and job.result is None and job.progress == 0.0 and job.attempt == 1
    finally:
        db.dispose()
    assert seen["progress"] < 1.0
    with serve(database_url, tmp_path, "serve2") as (base, _):
        body = wait_for(base, headers, fit_id, terminal)
        kinds = ledger_kinds(base, headers, dataset_id)
    assert body["status"] == "succeeded" and "result" in body
    assert attempts(database_url, fit_id) == 2
    assert kinds[fit_id] == ["charge", "reservation"]
