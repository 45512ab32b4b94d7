"""Celery dispatch: fits per minute on one vs two worker processes, and submit→start latency vs the embedded pool.

    python benchmarks/celery_throughput.py [--fits 40] [--broker redis|amqp]
        [--postgres postgresql+psycopg://postgres@127.0.0.1:5432/postgres]

Creates a fresh PostgreSQL database (dropped at the end), starts a real ``privfit serve`` with ``PRIVFIT_QUEUE=celery``
and ``PRIVFIT_STORE=database`` publishing to a new queue on the machine's Redis (or RabbitMQ with ``--broker amqp``),
registers a 2000-row synthetic dataset with a large budget, and submits batches of K small fits (dp_gd, logistic,
50 steps, ε = 0.1) from 4 concurrent clients:

* Celery, 1 worker process (``privfit worker --concurrency 1``, in its own empty working directory), then 2;
* the embedded backend (``PRIVFIT_QUEUE=embedded``, ``PRIVFIT_WORKERS=1``: one worker thread inside ``serve``) on
  the same database and dataset.

Each configuration first runs two warm-up fits per worker (not measured). It prints, per configuration:

* fits per minute: K / (the last fit's ``finished_at`` − the client clock just before the first submit);
* submit→start latency, ``started_at − created_at`` of each fit (both written by privfit, on this machine's clock),
  p50 and p95 over the batch, which includes the time a fit waits behind the earlier fits of its batch;
* start→finish, the p50 of ``finished_at − started_at`` (claim, dataset read, fit, result write): how much slower
  each fit runs when more of them share the cores;
* for Celery and the embedded backend with one worker, the same latency with the K fits submitted one at a time
  (each after the previous one finished): the dispatch overhead alone, without waiting behind other fits;

and the ratios 2 workers / 1 worker (fits per minute) and Celery / embedded (fits per minute, latency). It then
checks that every fit (warm-up included) succeeded and that the dataset's ledger holds exactly one charge per job
(and none for any other job), and exits with an error otherwise. The server, the workers, PostgreSQL and the broker
share the machine's cores (the output says how many). No thresholds. The broker queue is deleted at the end.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
import numpy as np
from services import celery_worker, owner_headers, register_dataset, server, temporary_database
from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError

from privfit.db import Job, make_database
from privfit.jobs.celery_app import broker_problem, delete_queue

BROKERS = {"redis": "redis://127.0.0.1:6379/0", "amqp": "amqp://guest:guest@127.0.0.1:5672//"}
TERMINAL = {"succeeded", "failed", "cancelled"}
EPSILON, STEPS, ROWS, CLIENTS = 0.1, 50, 2000, 4


class BenchmarkError(RuntimeError):
    """A fit that did not succeed, a ledger that is not one charge per job, a process that did not start."""


@dataclass
class Batch:
    """One batch of fits: throughput, submit→start latencies and start→finish run times (seconds)."""

    fits_per_minute: float | None
    latency: list[float]
    run: list[float]
    ids: list[str] = field(default_factory=list)


def timestamp(value: str) -> datetime:
    moment = datetime.fromisoformat(value)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def submit(client: httpx.Client, base: str, headers: dict[str, str], dataset_id: str) -> str:
    body = {"dataset_id": dataset_id, "model": "logistic", "solver": "dp_gd", "privacy": {"epsilon": EPSILON},
            "params": {"steps": STEPS}}  # fmt: skip
    response = client.post(f"{base}/v1/fits", headers=headers, json=body)
    if response.status_code != 202:
        raise BenchmarkError(f"fit not admitted: {response.status_code} {response.text[:300]}")
    return response.json()["id"]


def wait_succeeded(client: httpx.Client, base: str, headers: dict[str, str], ids: list[str],
                   timeout: float = 600.0, every: float = 0.1) -> list[dict]:  # fmt: skip
    """Poll until every fit of ``ids`` is terminal; raise unless all succeeded. Returns their bodies."""
    pending, bodies = list(ids), {}
    deadline = time.monotonic() + timeout
    while pending:
        for fit_id in list(pending):
            body = client.get(f"{base}/v1/fits/{fit_id}", headers=headers).json()
            if body["status"] in TERMINAL:
                bodies[fit_id] = body
                pending.remove(fit_id)
            else:
                break  # fits finish roughly in order: poll the first unfinished one until it is done
        if pending:
            if time.monotonic() > deadline:
                raise BenchmarkError(f"{len(pending)} fits not finished after {timeout:.0f} s")
            time.sleep(every)
    failed = {i: (b["status"], b.get("error")) for i, b in bodies.items() if b["status"] != "succeeded"}
    if failed:
        raise BenchmarkError(f"{len(failed)} of {len(ids)} fits did not succeed: {list(failed.items())[:5]}")
    return [bodies[i] for i in ids]


def between(bodies: list[dict], begin: str, end: str) -> list[float]:
    return [(timestamp(b[end]) - timestamp(b[begin])).total_seconds() for b in bodies]


def batch(base: str, headers: dict[str, str], dataset_id: str, fits: int) -> Batch:
    """``fits`` fits submitted at once by :data:`CLIENTS` concurrent clients; timed to the last ``finished_at``."""
    with httpx.Client(timeout=60) as client:
        start = datetime.now(UTC)
        with ThreadPoolExecutor(CLIENTS) as pool:
            ids = list(pool.map(lambda _: submit(client, base, headers, dataset_id), range(fits)))
        bodies = wait_succeeded(client, base, headers, ids)
    elapsed = (max(timestamp(b["finished_at"]) for b in bodies) - start).total_seconds()
    return Batch(60.0 * fits / elapsed, between(bodies, "created_at", "started_at"),
                 between(bodies, "started_at", "finished_at"), ids)  # fmt: skip


def one_at_a_time(base: str, headers: dict[str, str], dataset_id: str, fits: int) -> Batch:
    """``fits`` fits, each submitted once the previous one finished: latency without waiting behind other fits."""
    ids, bodies = [], []
    with httpx.Client(timeout=60) as client:
        for _ in range(fits):
            ids.append(submit(client, base, headers, dataset_id))
            bodies += wait_succeeded(client, base, headers, ids[-1:], every=0.02)
    return Batch(None, between(bodies, "created_at", "started_at"), between(bodies, "started_at", "finished_at"), ids)


def warm_up(base: str, headers: dict[str, str], dataset_id: str, fits: int) -> list[str]:
    return batch(base, headers, dataset_id, fits).ids


def fits_per_worker(database_url: str, ids: list[str]) -> list[int]:
    """How many of ``ids`` each worker process ran (from the jobs' lease owners ``host:pid:...``), most first."""
    db = make_database(database_url)
    try:
        with db.read() as session:
            owners = session.execute(select(Job.lease_owner).where(Job.id.in_(ids))).scalars().all()
    finally:
        db.dispose()
    return sorted(Counter(owner.split(":")[1] for owner in owners).values(), reverse=True)


def check_ledger(base: str, headers: dict[str, str], dataset_id: str, ids: list[str]) -> int:
    """Exactly one charge per job of ``ids`` and no charge for any other job; returns the number of entries."""
    entries: list[dict] = []
    with httpx.Client(timeout=60) as client:
        while True:
            page = client.get(f"{base}/v1/datasets/{dataset_id}/ledger", headers=headers,
                              params={"limit": 1000, "offset": len(entries)}).json()["entries"]  # fmt: skip
            entries += page
            if len(page) < 1000:
                break
    charges, jobs = Counter(entry["job_id"] for entry in entries if entry["kind"] == "charge"), set(ids)
    wrong = {i: charges.get(i, 0) for i in jobs | set(charges) if charges.get(i, 0) != 1 or i not in jobs}
    if wrong:
        raise BenchmarkError(f"ledger is not one charge per job ({len(wrong)} jobs): {list(wrong.items())[:5]}")
    return len(entries)


def check_broker(url: str) -> None:
    problem = broker_problem(url, timeout=5)
    if problem is not None:
        raise BenchmarkError(f"broker {url} not reachable: {problem}")


def ms(values: list[float], q: float) -> str:
    return f"{np.percentile(values, q) * 1e3:.1f}"


def run(broker: str, database_url: str, workdir: Path, fits: int) -> None:
    broker_url, queue = BROKERS[broker], f"privfit-bench-{uuid.uuid4().hex[:10]}"
    check_broker(broker_url)
    celery = {"PRIVFIT_QUEUE": "celery", "PRIVFIT_BROKER_URL": broker_url, "PRIVFIT_CELERY_QUEUE": queue,
              "PRIVFIT_STORE": "database"}  # fmt: skip
    headers = owner_headers(database_url)
    all_ids: list[str] = []
    began = time.perf_counter()
    try:
        with server(database_url, workdir / "celery-serve", **celery) as base, ExitStack() as workers:
            dataset_id = register_dataset(base, headers, rows=ROWS)
            workers.enter_context(celery_worker(database_url, workdir, "worker1", **celery))
            all_ids += warm_up(base, headers, dataset_id, 2)
            one = batch(base, headers, dataset_id, fits)
            one_idle = one_at_a_time(base, headers, dataset_id, fits)
            workers.enter_context(celery_worker(database_url, workdir, "worker2", **celery))
            all_ids += one.ids + one_idle.ids + warm_up(base, headers, dataset_id, 4)
            two = batch(base, headers, dataset_id, fits)
            all_ids += two.ids
            split = fits_per_worker(database_url, two.ids)
        embedded = {"PRIVFIT_QUEUE": "embedded", "PRIVFIT_WORKERS": "1", "PRIVFIT_STORE": "database"}
        with server(database_url, workdir / "embedded-serve", **embedded) as base:
            all_ids += warm_up(base, headers, dataset_id, 2)
            emb = batch(base, headers, dataset_id, fits)
            emb_idle = one_at_a_time(base, headers, dataset_id, fits)
            all_ids += emb.ids + emb_idle.ids
            entries = check_ledger(base, headers, dataset_id, all_ids)
    finally:
        try:
            delete_queue(broker_url, queue)
            deleted = True
        except Exception as error:
            print(f"warning: broker queue {queue} not deleted: {type(error).__name__}: {error}", file=sys.stderr)
            deleted = False
    seconds = time.perf_counter() - began

    print(f"privfit Celery dispatch: K = {fits} fits per batch (dp_gd, logistic, {STEPS} steps, ε = {EPSILON}, "
          f"{ROWS} rows × 10 features), PostgreSQL, broker {broker}, {CLIENTS} submitting clients")  # fmt: skip
    print(f"machine: {os.cpu_count()} cores, shared by the server, the workers, PostgreSQL and the broker\n")
    print("| backend | workers | fits/min | submit→start p50 / p95, batch (ms) | start→finish p50, batch (ms) "
          "| submit→start p50 / p95, one at a time (ms) |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|")

    def row(backend: str, workers: str, run: Batch, idle: Batch | None) -> None:
        alone = f"{ms(idle.latency, 50)} / {ms(idle.latency, 95)}" if idle is not None else "–"
        print(f"| {backend} | {workers} | {run.fits_per_minute:.0f} | {ms(run.latency, 50)} / {ms(run.latency, 95)} "
              f"| {ms(run.run, 50)} | {alone} |")  # fmt: skip

    row(f"Celery ({broker})", "1 process × 1 thread", one, one_idle)
    row(f"Celery ({broker})", f"2 processes × 1 thread (fits run: {' + '.join(map(str, split))})", two, None)
    row("embedded", "1 thread in `serve`", emb, emb_idle)

    def ratio(celery: Batch, embedded: Batch) -> str:
        p50, p95 = (np.percentile(celery.latency, q) / np.percentile(embedded.latency, q) for q in (50, 95))
        return f"p50 {p50:.2f}x, p95 {p95:.2f}x"

    print(f"\nCelery fits/min, 2 workers / 1 worker: {two.fits_per_minute / one.fits_per_minute:.2f}x")
    print(f"Celery (1 worker) / embedded (1 thread) fits/min: {one.fits_per_minute / emb.fits_per_minute:.2f}x")
    print(f"Celery (1 worker) / embedded (1 thread) submit→start, batch: {ratio(one, emb)}")
    print(f"Celery (1 worker) / embedded (1 thread) submit→start, one at a time: {ratio(one_idle, emb_idle)}")
    print(f"checked: all {len(all_ids)} fits succeeded (incl. warm-up); ledger {entries} entries, exactly one charge "
          f"per job; broker queue {queue} {'deleted' if deleted else 'NOT deleted'}; run {seconds:.0f} s")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fits", type=int, default=40, help="K, fits per batch")
    parser.add_argument("--broker", choices=sorted(BROKERS), default="redis")
    parser.add_argument("--postgres", default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres",
                        help="an administrative URL; the benchmark creates and drops its own database")  # fmt: skip
    args = parser.parse_args()
    if args.fits < 1:
        parser.error("--fits must be at least 1")
    try:
        with tempfile.TemporaryDirectory() as tmp, temporary_database(args.postgres) as database_url:
            run(args.broker, database_url, Path(tmp), args.fits)
    except (RuntimeError, SQLAlchemyError) as error:  # BenchmarkError, a process that did not start, no PostgreSQL
        sys.exit(f"error: {error}")


if __name__ == "__main__":
    main()
