"""Celery dispatch against the machine's real Redis and RabbitMQ, with real ``privfit serve`` and ``privfit worker``
processes on PostgreSQL: fits on two workers, and the faults of issue #7 — a worker SIGKILLed mid-fit, a message
delivered twice, the broker restarted while jobs are queued, the database connections dropped during a job. Each
ends with the same check (:func:`assert_ledger_exact`): the ledger's committed curve is the sum of the charged
jobs' curves, no job is charged twice, no result is written twice.

Every worker runs in its own empty working directory with its own (unused) data directory and knows only the
database, broker and store settings (``PRIVFIT_STORE=database``). Each test uses its own broker queue, deleted
afterwards, so concurrent runs on one machine do not exchange messages.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import numpy as np
import pytest
from process_helpers import PRIVFIT, environment, free_port, keys_for, process, read_fit_events, register, server
from sqlalchemy import create_engine, select, text
from sqlalchemy.engine import make_url

from privfit.db import Job, make_database
from privfit.jobs.celery_app import RUN_JOB_TASK, broker_problem, delete_queue, make_celery
from privfit.settings import Settings

BROKERS = {"redis": "redis://127.0.0.1:6379/0", "rabbitmq": "amqp://guest:guest@127.0.0.1:5672//"}
TERMINAL = {"succeeded", "failed", "cancelled"}
FAST = {"PRIVFIT_LEASE_SECONDS": "3", "PRIVFIT_HEARTBEAT_SECONDS": "0.2", "PRIVFIT_POLL_SECONDS": "0.2",
        "PRIVFIT_REDISPATCH_SECONDS": "1"}  # fmt: skip
#: How long a test waits for a process to be ready or a fit to reach a state: a wait bound, generous for a busy
#: machine (every wait ends as soon as its condition holds, and a process that exits is reported at once).
WAIT_SECONDS = 300.0
#: dp_gd steps on the small dataset for about 5 s of a quiet machine: long enough to be seen running and stopped
LONG_STEPS = 30_000


@pytest.fixture(params=sorted(BROKERS))
def broker(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """(broker URL, a fresh queue name); the queue is deleted afterwards."""
    url = BROKERS[request.param]
    problem = broker_problem(url)
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{request.param} is required under CI=true and is not reachable at {url}: {problem}")
        pytest.skip(f"{request.param} not reachable at {url}: {problem}")
    queue = f"privfit-test-{uuid.uuid4().hex[:10]}"
    yield url, queue
    delete_queue(url, queue)


def celery_settings(broker_url: str, queue: str, **extra: str) -> dict[str, str]:
    return {"PRIVFIT_QUEUE": "celery", "PRIVFIT_BROKER_URL": broker_url, "PRIVFIT_CELERY_QUEUE": queue,
            "PRIVFIT_STORE": "database", **FAST, **extra}  # fmt: skip


@contextmanager
def celery_worker(database_url: str, tmp_path: Path, name: str, settings: dict[str, str]) -> Iterator[subprocess.Popen]:
    """``privfit worker`` (Celery, one thread) in its own empty directory; returns once it consumes (Celery's
    ``ready.`` line in its log); fails with the log if it exits first or is not ready within WAIT_SECONDS."""
    home = tmp_path / name
    home.mkdir()
    env = environment(database_url, home, **settings)
    log = tmp_path / f"{name}.log"
    with process([*PRIVFIT, "worker", "--concurrency", "1"], env, log, cwd=home) as proc:
        deadline = time.monotonic() + WAIT_SECONDS
        while "ready." not in log.read_text(errors="replace"):
            assert proc.poll() is None and time.monotonic() < deadline, (
                f"worker {name} did not start: {log.read_text(errors='replace')[-3000:]}"
            )
            time.sleep(0.1)
        yield proc


def submit(base: str, headers: dict[str, str], dataset_id: str, epsilon: float = 0.2, **params: object) -> str:
    request = {"dataset_id": dataset_id, "privacy": {"epsilon": epsilon}, "params": params}
    response = httpx.post(f"{base}/v1/fits", headers=headers, json=request, timeout=30)
    assert response.status_code == 202, response.text
    return response.json()["id"]


def wait_terminal(base: str, headers: dict[str, str], ids: list[str], timeout: float = WAIT_SECONDS) -> dict[str, dict]:
    deadline = time.monotonic() + timeout
    bodies: dict[str, dict] = {}
    while time.monotonic() < deadline:
        bodies = {i: httpx.get(f"{base}/v1/fits/{i}", headers=headers, timeout=10).json() for i in ids}
        if all(body["status"] in TERMINAL for body in bodies.values()):
            return bodies
        time.sleep(0.2)
    raise AssertionError(f"fits did not finish in {timeout:.0f} s: {[(i, b['status']) for i, b in bodies.items()]}")


def wait_running(base: str, headers: dict[str, str], fit_id: str, timeout: float = WAIT_SECONDS) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = httpx.get(f"{base}/v1/fits/{fit_id}", headers=headers, timeout=10).json()
        if body["status"] == "running" and body["progress"] > 0:
            return body
        time.sleep(0.1)
    raise AssertionError(f"fit {fit_id} was not seen running in {timeout:.0f} s: {body}")


def job_rows(database_url: str, ids: list[str]) -> dict[str, Job]:
    db = make_database(database_url)
    try:
        with db.read() as session:
            return {job.id: job for job in session.execute(select(Job).where(Job.id.in_(ids))).scalars()}
    finally:
        db.dispose()


def assert_ledger_exact(base: str, headers: dict[str, str], dataset_id: str, bodies: dict[str, dict]) -> None:
    """Each job: one reservation; one charge iff it started; the committed curve = Σ charges + live reservations."""
    entries = httpx.get(f"{base}/v1/datasets/{dataset_id}/ledger?limit=1000&include=rdp", headers=headers,
                        timeout=WAIT_SECONDS).json()["entries"]  # fmt: skip
    kinds: dict[str, list[str]] = {}
    for entry in entries:
        kinds.setdefault(entry["job_id"], []).append(entry["kind"])
    committed = np.zeros(len(entries[0]["rdp"]))
    for job_id, body in bodies.items():
        job_kinds = kinds.get(job_id, [])
        assert job_kinds.count("reservation") == 1, (job_id, job_kinds)
        assert job_kinds.count("charge") == (1 if body["started_at"] is not None or body["status"] != "cancelled"
                                              else 0), (job_id, body["status"], job_kinds)  # fmt: skip
        if body["status"] == "succeeded":
            assert "result" in body
        else:
            assert "result" not in body, body
    for entry in entries:
        if entry["kind"] == "charge" or (entry["kind"] == "reservation" and kinds[entry["job_id"]] == ["reservation"]):
            committed += np.array(entry["rdp"])
    budget = httpx.get(f"{base}/v1/datasets/{dataset_id}/budget?include=rdp", headers=headers,
                       timeout=WAIT_SECONDS).json()  # fmt: skip
    np.testing.assert_allclose(budget["committed_rdp"], committed, rtol=1e-12, atol=1e-15)


@contextmanager
def stack(database_url: str, tmp_path: Path, settings: dict[str, str]) -> Iterator[tuple[str, dict[str, str], str]]:
    """A server publishing to the broker, an owner key and a registered dataset: (base URL, headers, dataset)."""
    owner, _ = keys_for(database_url)
    headers = {"Authorization": f"Bearer {owner}"}
    with server(database_url, tmp_path, **settings) as base:
        yield base, headers, register(base, owner, 50.0)


def test_fits_run_on_two_separate_workers_with_an_exact_ledger(broker, postgresql_url: str, tmp_path: Path):
    broker_url, queue = broker
    settings = celery_settings(broker_url, queue)
    with stack(postgresql_url, tmp_path, settings) as (base, headers, dataset_id), ExitStack() as workers:
        procs = [workers.enter_context(celery_worker(postgresql_url, tmp_path, f"w{i}", settings)) for i in (1, 2)]
        ids = [submit(base, headers, dataset_id, epsilon=2.0, steps=300) for _ in range(8)]
        events = read_fit_events(base, headers, ids[-1])  # live events of a fit a Celery worker runs (issue 38)
        bodies = wait_terminal(base, headers, ids)
        assert_ledger_exact(base, headers, dataset_id, bodies)
    assert {body["status"] for body in bodies.values()} == {"succeeded"}
    for body in bodies.values():  # correct results: the planted rule y = sign(2·x1 − x2 + noise)
        coefficients = body["result"]["coefficients"]
        assert coefficients[0] > 0.5 and coefficients[1] < -0.1 and coefficients[0] > -coefficients[1]
    owners = {job.lease_owner.split(":")[1] for job in job_rows(postgresql_url, ids).values()}
    assert owners == {str(proc.pid) for proc in procs}  # both worker processes ran fits
    assert {job.attempt for job in job_rows(postgresql_url, ids).values()} == {1}
    assert events[-1] == ("end", {"reason": "finished"}) and events[-2][1]["status"] == "succeeded"
    progress = [data["progress"] for name, data in events if name == "fit"]
    assert progress == sorted(progress) and progress[-1] == 1.0


def test_a_worker_killed_mid_fit_runs_it_again_on_another_worker_charged_once(
    broker, postgresql_url: str, tmp_path: Path
):
    """SIGKILL of the worker process at a random moment of a running fit: its lease expires, the other worker's
    sweeper queues it again and publishes it, and it runs again from the start — one charge, one result."""
    broker_url, queue = broker
    settings = celery_settings(broker_url, queue)
    with stack(postgresql_url, tmp_path, settings) as (base, headers, dataset_id), ExitStack() as workers:
        procs = {str(p.pid): p for p in (workers.enter_context(celery_worker(postgresql_url, tmp_path, f"w{i}",
                                                                              settings)) for i in (1, 2))}  # fmt: skip
        long_id = submit(base, headers, dataset_id, steps=LONG_STEPS)
        wait_running(base, headers, long_id)
        time.sleep(random.uniform(0.0, 1.0))  # a random moment of the run
        victim = job_rows(postgresql_url, [long_id])[long_id].lease_owner.split(":")[1]
        os.killpg(procs[victim].pid, signal.SIGKILL)
        procs[victim].wait(10)
        after = [submit(base, headers, dataset_id, steps=100) for _ in range(2)]
        bodies = wait_terminal(base, headers, [long_id, *after], timeout=300)
        assert_ledger_exact(base, headers, dataset_id, bodies)
    assert {body["status"] for body in bodies.values()} == {"succeeded"}
    rows = job_rows(postgresql_url, [long_id, *after])
    assert rows[long_id].attempt == 2 and rows[long_id].lease_owner.split(":")[1] != victim
    assert {rows[i].lease_owner.split(":")[1] for i in after} == set(procs) - {victim}


def test_a_message_delivered_twice_runs_the_fit_once(broker, postgresql_url: str, tmp_path: Path):
    broker_url, queue = broker
    settings = celery_settings(broker_url, queue)
    publisher = make_celery(Settings(broker_url=broker_url, celery_queue=queue))
    with stack(postgresql_url, tmp_path, settings) as (base, headers, dataset_id):
        ids = [submit(base, headers, dataset_id, steps=200) for _ in range(3)]
        for job_id in ids:  # two more copies of each message before any worker runs
            for _ in range(2):
                publisher.send_task(RUN_JOB_TASK, args=[job_id], queue=queue)
        with celery_worker(postgresql_url, tmp_path, "w1", settings):
            first = wait_terminal(base, headers, ids)
            finished = {i: first[i]["finished_at"] for i in ids}
            for job_id in ids:  # and a copy after the result was written
                publisher.send_task(RUN_JOB_TASK, args=[job_id], queue=queue)
            time.sleep(2)
            bodies = wait_terminal(base, headers, ids)
            assert_ledger_exact(base, headers, dataset_id, bodies)
    assert {body["status"] for body in bodies.values()} == {"succeeded"}
    assert {i: bodies[i]["finished_at"] for i in ids} == finished  # no result written twice
    assert {i: bodies[i]["result"] for i in ids} == {i: first[i]["result"] for i in ids}
    assert {job.attempt for job in job_rows(postgresql_url, ids).values()} == {1}


@contextmanager
def private_redis(tmp_path: Path, port: int, name: str) -> Iterator[subprocess.Popen]:
    """A redis-server of our own (no persistence), so the test can restart it."""
    args = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", str(tmp_path)]  # fmt: skip
    with process(args, dict(os.environ), tmp_path / f"{name}.log") as proc:
        deadline = time.monotonic() + WAIT_SECONDS
        while broker_problem(f"redis://127.0.0.1:{port}/0") is not None:
            assert proc.poll() is None and time.monotonic() < deadline, (
                f"redis-server did not start: {(tmp_path / f'{name}.log').read_text(errors='replace')[-3000:]}"
            )
            time.sleep(0.1)
        yield proc


def test_jobs_queued_while_the_broker_restarts_still_run_once(postgresql_url: str, tmp_path: Path):
    try:
        subprocess.run(["redis-server", "--version"], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as error:
        if os.environ.get("CI") == "true":
            pytest.fail(f"redis-server is required under CI=true: {error}")
        pytest.skip(f"redis-server not available: {error}")
    port = free_port()
    settings = celery_settings(f"redis://127.0.0.1:{port}/0", "privfit-restart")
    with ExitStack() as first_broker:
        first_broker.enter_context(private_redis(tmp_path, port, "redis1"))
        with stack(postgresql_url, tmp_path, settings) as (base, headers, dataset_id):
            ids = [submit(base, headers, dataset_id, steps=100) for _ in range(3)]
            first_broker.close()  # the broker stops, and its queued messages are lost (no persistence)
            ids.append(submit(base, headers, dataset_id, steps=100))  # accepted while the broker is down
            with private_redis(tmp_path, port, "redis2"), celery_worker(postgresql_url, tmp_path, "w1", settings):
                bodies = wait_terminal(base, headers, ids)
                assert_ledger_exact(base, headers, dataset_id, bodies)
    assert {body["status"] for body in bodies.values()} == {"succeeded"}
    assert {job.attempt for job in job_rows(postgresql_url, ids).values()} == {1}


def test_database_connections_dropped_during_a_job(postgresql_url: str, tmp_path: Path):
    broker_url = BROKERS["redis"]
    if broker_problem(broker_url) is not None:
        pytest.skip("Redis not reachable")
    queue = f"privfit-test-{uuid.uuid4().hex[:10]}"
    settings = celery_settings(broker_url, queue)
    database = make_url(postgresql_url).database
    admin = create_engine(make_url(postgresql_url).set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        with (
            stack(postgresql_url, tmp_path, settings) as (base, headers, dataset_id),
            celery_worker(postgresql_url, tmp_path, "w1", settings),
        ):
            fit_id = submit(base, headers, dataset_id, steps=LONG_STEPS)  # long enough to be seen running
            wait_running(base, headers, fit_id)
            with admin.connect() as connection:
                dropped = connection.execute(
                    text("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                         "WHERE datname = :name AND pid <> pg_backend_pid()"), {"name": database},
                ).scalar()  # fmt: skip
            assert dropped >= 1
            later = submit(base, headers, dataset_id, steps=100)
            bodies = wait_terminal(base, headers, [fit_id, later])
            assert_ledger_exact(base, headers, dataset_id, bodies)
    finally:
        admin.dispose()
        delete_queue(broker_url, queue)
    assert {body["status"] for body in bodies.values()} == {"succeeded"}
    assert {job.attempt for job in job_rows(postgresql_url, [fit_id, later]).values()} == {1}


def test_sigterm_queues_the_running_fit_again_and_the_worker_exits(postgresql_url: str, tmp_path: Path):
    """Graceful shutdown (a scaled-down or redeployed worker): Celery's warm shutdown stops consuming, the running
    fit stops at its next step and goes back to the queue with its charge (published again at once), and the worker
    exits 0 long before the fit would have finished; another worker runs both fits, each charged once."""
    broker_url = BROKERS["redis"]
    if broker_problem(broker_url) is not None:
        pytest.skip("Redis not reachable")
    queue = f"privfit-test-{uuid.uuid4().hex[:10]}"
    settings = celery_settings(broker_url, queue)
    try:
        with stack(postgresql_url, tmp_path, settings) as (base, headers, dataset_id):
            with celery_worker(postgresql_url, tmp_path, "w1", settings) as proc:
                running = submit(base, headers, dataset_id, steps=LONG_STEPS)
                wait_running(base, headers, running)
                waiting = submit(base, headers, dataset_id, steps=100)
                os.kill(proc.pid, signal.SIGTERM)
                assert proc.wait(120) == 0
                stopped = httpx.get(f"{base}/v1/fits/{running}", headers=headers).json()
                assert stopped["status"] == "queued" and stopped["progress"] == 0.0 and "result" not in stopped
                assert httpx.get(f"{base}/v1/fits/{waiting}", headers=headers).json()["status"] == "queued"
            with celery_worker(postgresql_url, tmp_path, "w2", settings):
                bodies = wait_terminal(base, headers, [running, waiting], timeout=300)
                assert_ledger_exact(base, headers, dataset_id, bodies)
    finally:
        delete_queue(broker_url, queue)
    assert {body["status"] for body in bodies.values()} == {"succeeded"}
    assert job_rows(postgresql_url, [running])[running].attempt == 2
