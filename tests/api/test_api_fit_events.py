"""Live fit events (issue 38, item 5): ``GET /v1/fits/{id}/events`` as Server-Sent Events — the fit's JSON at the
start and at each change, closing with ``end`` at a terminal state; visibility as for the fit (404), a bounded number
of streams per process (429 with Retry-After, the slot freed when a stream ends), ``end`` on timeout and when the
process stops; the client's ``wait`` follows the stream; across two real API processes. Celery workers:
tests/api/test_api_celery.py follows a fit they run."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest
from api_helpers import Keys, make_client, make_keys, upload
from fastapi.testclient import TestClient
from process_helpers import (
    PRIVFIT,
    environment,
    free_port,
    keys_for,
    process,
    read_fit_events,
    register,
    server,
    wait_ready,
)

from privfit.api.events import HEARTBEAT_SECONDS
from privfit.client import Client
from privfit.client.events import HEARTBEAT_SECONDS as CLIENT_HEARTBEAT_SECONDS
from privfit.client.events import server_events

FIT = {"model": "logistic", "solver": "dp_gd", "privacy": {"epsilon": 0.5}, "params": {"steps": 200}}


def events_of(client: TestClient, headers: dict[str, str], fit_id: str) -> list[tuple[str, dict]]:
    with client.stream("GET", f"/v1/fits/{fit_id}/events", headers=headers) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        return [(e.event, json.loads(e.data)) for e in server_events(response.iter_lines())]


def test_a_stream_shows_the_fit_until_it_finishes(client: TestClient, keys: Keys):
    dataset = upload(client, keys)
    fit_id = client.post("/v1/fits", headers=keys.analyst, json={**FIT, "dataset_id": dataset}).json()["id"]
    events = events_of(client, keys.analyst, fit_id)
    assert events[-1] == ("end", {"reason": "finished"})
    fits = [data for name, data in events[:-1]]
    assert {name for name, _ in events[:-1]} == {"fit"} and fits[-1]["status"] == "succeeded"
    assert fits[-1] == client.get(f"/v1/fits/{fit_id}", headers=keys.analyst).json()  # as GET shows it
    progress = [f["progress"] for f in fits]
    assert progress == sorted(progress) and progress[-1] == 1.0
    states = [(f["status"], f["progress"], f["cancel_requested"]) for f in fits]
    assert len(set(states)) == len(states)  # an event per change, none repeated
    # a finished fit: one event and the end
    assert [name for name, _ in events_of(client, keys.analyst, fit_id)] == ["fit", "end"]


def test_who_may_not_read_the_fit_gets_a_404(client: TestClient, keys: Keys):
    dataset = upload(client, keys)
    fit_id = client.post("/v1/fits", headers=keys.analyst, json={**FIT, "dataset_id": dataset}).json()["id"]
    stranger = client.get(f"/v1/fits/{fit_id}/events", headers=keys.stranger_analyst)
    assert stranger.status_code == 404 and stranger.json()["status"] == 404
    assert client.get(f"/v1/fits/{fit_id}/events").status_code == 401


@pytest.fixture
def bounded(database_url: str, tmp_path: Path):
    """An app without workers (fits stay queued: a stream stays open), one stream slot, quick polls."""
    with make_client(database_url, tmp_path, workers=False, max_event_streams=1, event_poll_seconds=0.05,
                     event_stream_seconds=2.0) as client:  # fmt: skip
        keys = make_keys(client)
        dataset = upload(client, keys)
        fit_id = client.post("/v1/fits", headers=keys.analyst, json={**FIT, "dataset_id": dataset}).json()["id"]
        yield client, keys, fit_id


def test_streams_are_bounded_and_their_slot_is_freed(bounded):
    client, keys, fit_id = bounded
    streams = client.app.state.event_streams
    with client.stream("GET", f"/v1/fits/{fit_id}/events", headers=keys.analyst) as first:
        lines = first.iter_lines()
        assert next(lines) == "event: fit"  # the stream is open
        refused = client.get(f"/v1/fits/{fit_id}/events", headers=keys.analyst)
        assert refused.status_code == 429 and refused.headers["retry-after"] == "5", refused.text
        assert "max_event_streams = 1" in refused.json()["detail"]
    deadline = time.monotonic() + 30
    while streams.active and time.monotonic() < deadline:  # the closed stream's slot comes back
        time.sleep(0.02)
    assert streams.active == 0
    # the stream's longest life (event_stream_seconds = 2) ends it with reason "timeout"
    events = events_of(client, keys.analyst, fit_id)
    assert events[0][1]["status"] == "queued" and events[-1] == ("end", {"reason": "timeout"})
    assert streams.active == 0


def test_a_revoked_key_s_stream_ends(bounded):
    client, keys, fit_id = bounded
    client.app.state.event_streams.max_seconds = 600.0
    analyst_id = client.get("/v1/me", headers=keys.analyst).json()["key_id"]
    revoked: list[int] = []
    revoke = threading.Timer(0.5, lambda: revoked.append(
        client.delete(f"/v1/keys/{analyst_id}", headers=keys.admin).status_code))  # fmt: skip
    revoke.start()
    events = events_of(client, keys.analyst, fit_id)
    # the stream may end before the DELETE's answer is back: wait for it, or the app would be shut down under the
    # request still in flight (the test client's portal then never stops: the teardown hung until pytest-timeout)
    revoke.join(60)
    assert revoked == [204] and events[-1] == ("end", {"reason": "unauthorized"}) and len(events) >= 2
    assert client.get(f"/v1/fits/{fit_id}", headers=keys.analyst).status_code == 401


def test_a_stopping_process_ends_its_streams(bounded):
    client, keys, fit_id = bounded
    streams = client.app.state.event_streams
    streams.max_seconds = 600.0
    stop = threading.Timer(0.5, streams.stop)
    stop.start()
    started = time.monotonic()
    events = events_of(client, keys.analyst, fit_id)
    stop.join(60)
    assert events[-1] == ("end", {"reason": "server_stopping"}) and time.monotonic() - started < 60


def test_the_client_waits_on_the_stream(client: TestClient, keys: Keys):
    dataset = upload(client, keys)
    fit_id = client.post("/v1/fits", headers=keys.analyst, json={**FIT, "dataset_id": dataset}).json()["id"]
    requests: list[str] = []
    token = keys.analyst["Authorization"].removeprefix("Bearer ")
    with Client("http://testserver", token, transport=client._transport) as analyst:
        analyst._http.event_hooks["request"].append(lambda request: requests.append(request.url.path))
        seen: list[float] = []
        done = analyst.wait(fit_id, on_progress=lambda fit: seen.append(fit.progress))
    assert done.status == "succeeded" and seen[-1] == 1.0 and seen == sorted(seen)
    assert requests == [f"/v1/fits/{fit_id}/events"]  # one stream, no polling
    assert HEARTBEAT_SECONDS == CLIENT_HEARTBEAT_SECONDS


def test_events_across_two_api_processes(database_url: str, tmp_path: Path):
    """Two real API processes (gunicorn, PRIVFIT_API_WORKERS=2) on one database: streams opened on whichever process
    answers follow fits that either process's workers run."""
    owner, _ = keys_for(database_url)
    headers = {"Authorization": f"Bearer {owner}"}
    with server(database_url, tmp_path, PRIVFIT_API_WORKERS="2") as base:
        dataset = register(base, owner, 20.0)
        ids = [httpx.post(f"{base}/v1/fits", headers=headers, json={**FIT, "dataset_id": dataset}, timeout=30)
               .json()["id"] for _ in range(3)]  # fmt: skip
        results: dict[str, list] = {}
        threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, read_fit_events(base, headers, i)))
                   for i in ids]  # fmt: skip
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(300)
    for fit_id in ids:
        events = results[fit_id]
        assert events[-1] == ("end", {"reason": "finished"}) and events[-2][1]["status"] == "succeeded", events


def test_sigterm_ends_an_open_stream_and_the_server_exits(database_url: str, tmp_path: Path):
    """A real ``privfit serve`` with a stream open on a long fit: SIGTERM ends the stream (``server_stopping``) at its
    next poll, and the process exits 0 within its grace — the stream does not hold the stop."""
    owner, _ = keys_for(database_url)
    headers = {"Authorization": f"Bearer {owner}"}
    port = free_port()
    env = environment(database_url, tmp_path, PRIVFIT_STOP_GRACE_SECONDS="20")
    log = tmp_path / "serve.log"
    with process([*PRIVFIT, "serve", "--port", str(port), "--log-level", "warning"], env, log) as proc:
        base = f"http://127.0.0.1:{port}"
        wait_ready(proc, base, log)
        dataset = register(base, owner, 20.0)
        long_fit = {**FIT, "dataset_id": dataset, "params": {"steps": 100_000}}
        fit_id = httpx.post(f"{base}/v1/fits", headers=headers, json=long_fit, timeout=30).json()["id"]
        events: list[tuple[str, dict]] = []
        stopped_at = None
        with httpx.stream("GET", f"{base}/v1/fits/{fit_id}/events", headers=headers, timeout=120) as response:
            for event in server_events(response.iter_lines()):
                events.append((event.event, json.loads(event.data)))
                if stopped_at is None and event.event == "fit" and events[-1][1]["status"] == "running":
                    stopped_at = time.monotonic()
                    proc.send_signal(signal.SIGTERM)  # the fit is running: stop the server
        assert stopped_at is not None and events[-1] == ("end", {"reason": "server_stopping"}), events[-3:]
        assert proc.wait(60) == 0 and time.monotonic() - stopped_at < 60
