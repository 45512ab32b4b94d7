"""Database faults under load: retried where the operation is idempotent, 503 with Retry-After otherwise, never
another 5xx, never a connection reset, and no fit lost (issue 20).

A real ``privfit serve`` (embedded workers) on PostgreSQL; a chaos thread terminates every backend of the service's
database (``pg_terminate_backend``) every 0.5–1 s while client threads upload datasets, ask for estimates, submit
fits (with an Idempotency-Key, re-sent on a 503), read fits, lists, budgets and ledgers. Afterwards every submitted
fit must reach ``succeeded`` with its result.
"""

from __future__ import annotations

import json
import random
import sqlite3
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
from api_helpers import SMALL_SCHEMA, make_client, small_csv
from fastapi import FastAPI
from fastapi.testclient import TestClient
from process_helpers import keys_for, register, server
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DataError, OperationalError

from privfit.api.auth import create_api_key
from privfit.api.problems import install_problem_handlers

#: The chaos lasts at least CHAOS_SECONDS, and until the clients submitted MIN_FITS fits and MIN_KILLED backends were
#: terminated (a busy machine does less in the same time; what the test needs is an amount of chaos, not a duration),
#: but at most CHAOS_LIMIT seconds. Waits after it (clients ending, fits draining) are bounded by WAIT_SECONDS.
CHAOS_SECONDS = 10.0
MIN_FITS = MIN_KILLED = 10
CHAOS_LIMIT = 300.0
WAIT_SECONDS = 300.0
CLIENTS = 4
FIT = {"solver": "dp_gd", "privacy": {"epsilon": 0.02}, "params": {"steps": 40}}


@dataclass
class Tally:
    """What the clients saw (shared by the threads; guarded by ``lock``)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    statuses: Counter = field(default_factory=Counter)
    unavailable: Counter = field(default_factory=Counter)  # 503s by action
    bad: list[str] = field(default_factory=list)
    fits: list[str] = field(default_factory=list)
    datasets: list[str] = field(default_factory=list)

    def record(self, what: str, response: httpx.Response) -> None:
        with self.lock:
            self.statuses[response.status_code] += 1
            if response.status_code == 503:
                self.unavailable[what] += 1
            if response.status_code >= 500 and not (
                response.status_code == 503 and response.headers.get("retry-after") == "1"
            ):
                self.bad.append(f"{what}: {response.status_code} {response.headers} {response.text[:300]}")

    def transport_error(self, what: str, error: Exception) -> None:
        with self.lock:
            self.bad.append(f"{what}: {type(error).__name__}: {error}")


def _terminator(admin_url: str, database: str, stop: threading.Event, counts: Counter) -> None:
    """Terminate every backend of ``database`` (the service's connections) every 0.5–1 s until ``stop``."""
    engine = create_engine(admin_url, isolation_level="AUTOCOMMIT", pool_size=1)
    rng = random.Random(7)
    try:
        while not stop.wait(rng.uniform(0.5, 1.0)):
            with engine.connect() as connection:
                killed = connection.execute(
                    text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = :name AND pid <> pg_backend_pid()"
                    ),
                    {"name": database},
                ).all()
            counts["rounds"] += 1
            counts["backends"] += sum(1 for (ok,) in killed if ok)
    finally:
        engine.dispose()


def _request(
    client: httpx.Client, tally: Tally, what: str, method: str, url: str, **kwargs: Any
) -> httpx.Response | None:
    try:
        response = client.request(method, url, **kwargs)
    except httpx.HTTPError as error:
        tally.transport_error(what, error)
        return None
    tally.record(what, response)
    return response


def _until_answered(
    client: httpx.Client, tally: Tally, what: str, method: str, url: str, **kwargs: Any
) -> httpx.Response:
    """The request, re-sent after ``Retry-After`` while it is answered 503 (the client's part of the contract)."""
    for _ in range(60):
        response = _request(client, tally, what, method, url, **kwargs)
        if response is not None and response.status_code != 503:
            return response
        time.sleep(float(response.headers["retry-after"]) if response is not None else 1.0)
    raise AssertionError(f"{what}: still 503 after 60 attempts")


def _client_loop(base: str, owner: str, seed: int, stop: threading.Event, tally: Tally) -> None:
    try:
        _client_actions(base, owner, seed, stop, tally)
    except Exception as error:  # reported by the test, not lost in a thread
        tally.transport_error("client thread", error)


def _client_actions(base: str, owner: str, seed: int, stop: threading.Event, tally: Tally) -> None:
    rng = random.Random(seed)
    headers = {"Authorization": f"Bearer {owner}"}
    upload_schema = json.loads(json.dumps(SMALL_SCHEMA))
    upload_schema["budget"]["epsilon"] = 5.0
    csv = small_csv(300, seed=seed)
    with httpx.Client(base_url=base, headers=headers, timeout=WAIT_SECONDS) as client:
        while not stop.is_set():
            with tally.lock:
                dataset_id = rng.choice(tally.datasets)
                fit_id = rng.choice(tally.fits) if tally.fits else None
            action = rng.choices(
                ["upload", "estimate", "fit", "get_fit", "list_fits", "budget", "ledger", "datasets"],
                weights=[1, 3, 3, 4, 1, 1, 1, 1],
            )[0]
            if action == "upload":
                response = _request(client, tally, action, "POST", "/v1/datasets", files={"file": ("d.csv", csv)},
                                    data={"schema": json.dumps(upload_schema), "allow_duplicate": "true"})  # fmt: skip
                if response is not None and response.status_code == 201:
                    with tally.lock:
                        tally.datasets.append(response.json()["id"])
            elif action == "estimate":
                _request(client, tally, action, "POST", "/v1/fits/estimate", json={"dataset_id": dataset_id, **FIT})
            elif action == "fit":  # a 503 is re-sent with the same Idempotency-Key: one fit, whatever happened
                key = str(uuid.uuid4())
                request = {"dataset_id": dataset_id, **FIT}
                idempotency = {"Idempotency-Key": key}
                response = _until_answered(client, tally, action, "POST", "/v1/fits", json=request, headers=idempotency)
                with tally.lock:
                    if response.status_code == 202:
                        tally.fits.append(response.json()["id"])
                    else:
                        tally.bad.append(f"fit submission answered {response.status_code}: {response.text[:300]}")
            elif action == "get_fit" and fit_id is not None:
                _request(client, tally, action, "GET", f"/v1/fits/{fit_id}")
            elif action == "list_fits":
                _request(client, tally, action, "GET", "/v1/fits", params={"dataset_id": dataset_id})
            elif action in ("budget", "ledger"):
                _request(client, tally, action, "GET", f"/v1/datasets/{dataset_id}/{action}")
            elif action == "datasets":
                _request(client, tally, action, "GET", "/v1/datasets")


def test_database_faults_under_load_are_retried_or_503_and_no_fit_is_lost(postgresql_url: str, tmp_path: Path) -> None:
    owner, _ = keys_for(postgresql_url)
    database = make_url(postgresql_url).database
    admin_url = make_url(postgresql_url).set(database="postgres").render_as_string(hide_password=False)
    env = {"PRIVFIT_WORKERS": "2", "PRIVFIT_POLL_SECONDS": "0.2", "PRIVFIT_HEARTBEAT_SECONDS": "1",
           "PRIVFIT_LEASE_SECONDS": "10"}  # fmt: skip
    with server(postgresql_url, tmp_path, **env) as base:
        tally = Tally()
        tally.datasets.append(register(base, owner, epsilon=50.0))
        stop, kills = threading.Event(), Counter()
        chaos = threading.Thread(target=_terminator, args=(admin_url, database, stop, kills), daemon=True)
        chaos.start()
        clients_stop = threading.Event()
        clients = [threading.Thread(target=_client_loop, args=(base, owner, seed, clients_stop, tally), daemon=True)
                   for seed in range(CLIENTS)]  # fmt: skip
        started = time.monotonic()
        for thread in clients:
            thread.start()
        while time.monotonic() - started < CHAOS_LIMIT and not (
            time.monotonic() - started >= CHAOS_SECONDS
            and len(tally.fits) >= MIN_FITS
            and kills["backends"] >= MIN_KILLED
        ):
            time.sleep(0.5)
        clients_stop.set()
        for thread in clients:
            thread.join(WAIT_SECONDS)
        stop.set()
        chaos.join(WAIT_SECONDS)
        # every submitted fit succeeds with its result (polled with the client's retries on 503)
        finished: Counter = Counter()
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {owner}"}, timeout=WAIT_SECONDS) as client:
            drain = time.monotonic() + WAIT_SECONDS
            for fit_id in tally.fits:
                while True:
                    body = _until_answered(client, tally, "poll", "GET", f"/v1/fits/{fit_id}").json()
                    if body["status"] in ("succeeded", "failed", "cancelled") or time.monotonic() > drain:
                        break
                    time.sleep(0.2)
                ok = body["status"] == "succeeded" and bool(body.get("result", {}).get("coefficients"))
                finished["succeeded with result" if ok else body["status"]] += 1
                if not ok:
                    tally.bad.append(f"fit {fit_id} ended {body['status']}: {body.get('error')}")
            # one fit per submission, whatever was retried: no admission was written twice
            listed = [
                fit["id"]
                for dataset_id in tally.datasets
                for fit in _until_answered(client, tally, "list", "GET", "/v1/fits", params={"dataset_id": dataset_id})
                .json()
            ]  # fmt: skip
        assert sorted(listed) == sorted(tally.fits), (len(listed), len(tally.fits))
        answers = sum(tally.statuses.values())
        summary = (f"{kills['rounds']} termination rounds ({kills['backends']} backends), {answers} answers "
                   f"{dict(sorted(tally.statuses.items()))}, 503s by action {dict(tally.unavailable)}, "
                   f"fits {dict(finished)}")  # fmt: skip
        print(f"\nfaults: {summary}")
        (tmp_path / "faults-summary.txt").write_text(summary + "\n" + "\n".join(tally.bad))
        assert not tally.bad, f"{len(tally.bad)} bad answers ({summary}):\n" + "\n".join(tally.bad[:20])
        assert kills["backends"] >= MIN_KILLED and len(tally.fits) >= MIN_FITS, summary
        assert finished["succeeded with result"] == len(tally.fits), summary


def _dropped() -> OperationalError:
    return OperationalError("SELECT", {}, psycopg.OperationalError("server closed the connection"),
                            connection_invalidated=True)  # fmt: skip


def test_problem_handlers_answer_503_for_transient_faults_and_422_for_data_errors() -> None:
    app = FastAPI()
    install_problem_handlers(app)

    @app.get("/dropped")
    def dropped() -> None:
        raise _dropped()

    @app.get("/bad-value")
    def bad_value() -> None:
        raise DataError("SELECT", {}, psycopg.errors.CharacterNotInRepertoire("invalid byte sequence"))

    @app.get("/other")
    def other() -> None:
        raise OperationalError("SELECT", {}, sqlite3.OperationalError("no such table: jobs"))

    with TestClient(app, raise_server_exceptions=False) as client:
        unavailable = client.get("/dropped")
        assert unavailable.status_code == 503 and unavailable.headers["retry-after"] == "1"
        assert unavailable.headers["content-type"].startswith("application/problem+json")
        assert "sent again" in unavailable.json()["detail"]
        refused = client.get("/bad-value")
        assert refused.status_code == 422 and refused.headers["content-type"].startswith("application/problem+json")
        assert client.get("/other").status_code == 500  # not transient: a bug, not a 503


def test_a_read_that_keeps_failing_is_retried_then_answered_503(database_url: str, tmp_path: Path) -> None:
    """Past the retries (PRIVFIT_DB_RETRY_ATTEMPTS), a request whose database reads keep failing is a 503 with
    Retry-After; once the database is back the same request succeeds."""
    with make_client(database_url, tmp_path, workers=False, db_retry_attempts=3, db_retry_backoff_seconds=0) as client:
        db = client.app.state.db
        _, owner = create_api_key(db, "owner", "owner")
        headers = {"Authorization": f"Bearer {owner}"}
        declared = json.loads(json.dumps(SMALL_SCHEMA))
        created = client.post("/v1/datasets", headers=headers, files={"file": ("d.csv", small_csv(50))},
                              data={"schema": json.dumps(declared), "allow_duplicate": "true"})  # fmt: skip
        dataset_id = created.json()["id"]
        fit = client.post("/v1/fits", headers=headers, json={"dataset_id": dataset_id, **FIT}).json()
        reads: Counter = Counter()

        def drop_job_reads(conn, cursor, statement, parameters, context, executemany) -> None:
            if statement.lstrip().upper().startswith("SELECT") and "FROM jobs" in statement:
                reads["dropped"] += 1
                raise _dropped()

        event.listen(db.engine, "before_cursor_execute", drop_job_reads)
        try:
            unavailable = client.get(f"/v1/fits/{fit['id']}", headers=headers)
        finally:
            event.remove(db.engine, "before_cursor_execute", drop_job_reads)
        assert unavailable.status_code == 503 and unavailable.headers["retry-after"] == "1", unavailable.text
        assert reads["dropped"] == 3  # every try, then the answer
        assert client.get(f"/v1/fits/{fit['id']}", headers=headers).json()["status"] == "queued"
