"""Hostile input against real ``privfit serve`` processes: the event loop stays responsive, memory stays in
proportion to the encoded matrix, limits answer 413/422/429 problem+json, and nothing is a 500.

The DoS tests check that ``/healthz`` keeps answering while the hostile request is processed by the same (single)
API process, by ordering and in proportion to the request itself, never against a wall-clock limit (issue #35: a
0.5 s limit failed on a machine at load 30): a ``/healthz`` sent after the hostile body was all sent is answered
before the hostile request, and none waits for half the server's processing time — which is what a decode on the
event loop would make it do.

Every test releases the upload slots it takes (``max_concurrent_uploads``) before it ends, even when it fails: a
request running in a thread is always awaited, a held upload is aborted. A slot is freed by the server just after
its answer (or the client's disconnection), so an upload that finds the slots taken is retried for up to
:data:`SLOTS_FREE_WITHIN` seconds; a slot that is never freed fails the test that needs it with a clear message.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from api_helpers import SMALL_SCHEMA, small_csv
from process_helpers import LiveServer, listening_pid, sqlite_server, status_kib

MiB = 1024 * 1024
#: The module's server admits this many concurrent uploads (``PRIVFIT_MAX_CONCURRENT_UPLOADS``).
UPLOAD_SLOTS = 2
#: How long an upload waits for a slot taken by an upload that just ended (a wait bound, generous for a busy
#: machine: the server frees a slot within milliseconds of its answer when it is quiet).
SLOTS_FREE_WITHIN = 120.0
#: A bound on every request of this module (httpx's per-operation timeout): only for a server that hangs.
REQUEST_TIMEOUT = 300.0


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One server for the whole module; limits raised so that the hostile requests are processed in full."""
    with sqlite_server(
        tmp_path_factory.mktemp("hostile"), PRIVFIT_MAX_FEATURES="100000",
        PRIVFIT_MAX_CONCURRENT_UPLOADS=str(UPLOAD_SLOTS),
        PRIVFIT_MAX_JSON_BYTES=str(8 * MiB), PRIVFIT_WORKERS="1", PRIVFIT_MAX_UPLOAD_BYTES=str(64 * MiB),
    ) as server:  # fmt: skip
        yield server


def owner(live: LiveServer) -> dict[str, str]:
    return {"Authorization": f"Bearer {live.owner}"}


def assert_problem(response: httpx.Response, status: int, *needles: str) -> dict:
    assert response.status_code == status, response.text[:2000]
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert body["status"] == status
    for needle in needles:
        assert needle in json.dumps(body), body
    return body


def reset_peak(pid: int) -> bool:
    """Reset the process's VmHWM to its current RSS (Linux ≥ 4.0: write 5 to clear_refs); False if not allowed."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True


@dataclass
class Timeline:
    """When a request started, when its body was all sent and when its answer was in (``time.monotonic()``). Passed
    to httpx as the request's ``trace`` extension it hears httpcore's events (``body_sent``); :func:`while_running`
    sets the others."""

    started: float | None = None
    body_sent: float | None = None
    answered: float | None = None

    def __call__(self, event: str, info: dict[str, Any]) -> None:
        if event == "http11.send_request_body.complete":
            self.body_sent = time.monotonic()


class HealthProbe:
    """``GET /healthz``, one request per call (it must answer 200); remembers when each was sent and answered."""

    def __init__(self, live: LiveServer) -> None:
        self.base = live.base
        self.samples: list[tuple[float, float]] = []

    def __call__(self) -> None:
        sent = time.monotonic()
        response = httpx.get(f"{self.base}/healthz", timeout=REQUEST_TIMEOUT)
        assert response.status_code == 200, response.text[:1000]
        self.samples.append((sent, time.monotonic()))

    def check(self, timeline: Timeline) -> None:
        """The server answered ``/healthz`` while it processed the hostile request, from its body's last byte (or the
        request's start, if the request did not report it) to its answer (``processing`` seconds, which the machine's
        load stretches as it stretches /healthz):

        * by ordering: a /healthz sent after the hostile body was all sent was answered before the hostile request;
        * in proportion: no /healthz in flight then took half of ``processing``.

        A decode on the event loop fails both: every request sent during it waits until the upload's answer."""
        start, end = timeline.body_sent or timeline.started, timeline.answered
        assert start is not None and end is not None, timeline
        processing = end - start
        inside = [(sent, answered) for sent, answered in self.samples if sent >= start and answered <= end]
        overlapping = [answered - sent for sent, answered in self.samples if answered > start and sent < end]
        latencies = ", ".join(f"{latency:.2f}" for latency in overlapping) or "none"
        since = "its body was sent" if timeline.body_sent else "it started"
        seen = f"the request was answered {processing:.2f} s after {since}; /healthz latencies meanwhile: {latencies}"
        assert inside, f"no /healthz sent after the hostile body was answered before the hostile request ({seen})"
        assert max(overlapping) < processing / 2, f"a /healthz waited for the hostile request ({seen})"


#: The :class:`Timeline` of the request :func:`while_running` runs in this thread (:func:`post_upload` traces it).
_running = threading.local()


def while_running(request: Callable[[], httpx.Response], probe: HealthProbe) -> httpx.Response:
    """Run ``request`` in a thread and call ``probe`` repeatedly until it finishes; then check the probe against the
    request's :class:`Timeline` (which :func:`post_upload` traces); the request's response.

    The request is always awaited (its own timeout bounds it), even when a probe fails: until it is answered it
    holds an upload slot and memory on the server, which the next test would find taken."""
    timeline = Timeline()
    result: dict[str, httpx.Response | BaseException] = {}

    def run() -> None:
        _running.timeline = timeline
        timeline.started = time.monotonic()
        try:
            result["response"] = request()
        except BaseException as error:
            result["response"] = error
        finally:
            timeline.answered = time.monotonic()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        while thread.is_alive():
            probe()
            time.sleep(0.02)
    finally:
        thread.join()
    response = result["response"]
    if isinstance(response, BaseException):
        raise response
    probe.check(timeline)
    return response


def healthz_within(live: LiveServer) -> HealthProbe:
    """A /healthz probe for :func:`while_running`: the event loop answers within the hostile request's processing."""
    return HealthProbe(live)


def wide_schema(features: int) -> dict:
    return {
        "label": {"name": "y", "type": "binary", "positive": "yes", "negative": "no"},
        "features": [{"name": f"f{i}", "type": "numeric", "lower": 0, "upper": 1} for i in range(features)],
        "budget": {"epsilon": 1.0, "delta": 1e-6},
    }


def numeric_csv(target_bytes: int, columns: int = 10) -> tuple[bytes, int]:
    """A CSV of about ``target_bytes``: ``columns`` numeric features x0.. in [-1, 1] and label y; (bytes, rows)."""
    header = ",".join(f"x{i}" for i in range(columns)) + ",y\n"
    row = ",".join("0.123456" if i % 2 else "-0.65432" for i in range(columns)) + ",yes\n"
    rows = max(1, (target_bytes - len(header)) // len(row))
    return (header + row * rows).encode(), rows


def numeric_schema(columns: int = 10) -> dict:
    return {
        "label": {"name": "y", "type": "binary", "positive": "yes", "negative": "no"},
        "features": [{"name": f"x{i}", "type": "numeric", "lower": -1, "upper": 1} for i in range(columns)],
        "budget": {"epsilon": 1.0, "delta": 1e-6},
    }


def is_busy(response: httpx.Response) -> bool:
    """The upload was refused because the server's upload slots were all taken (429 max_concurrent_uploads)."""
    return response.status_code == 429 and "max_concurrent_uploads" in response.text


def send_upload(send: Callable[[httpx.Client], httpx.Response], *, timeout: float = REQUEST_TIMEOUT,
                retry_busy: bool = True) -> httpx.Response:  # fmt: skip
    """``send(client)``, a POST /v1/datasets; sent again while it finds the upload slots taken (``retry_busy``),
    for up to :data:`SLOTS_FREE_WITHIN` s: the slot of an upload that was just answered or aborted is freed by the
    server a moment later (a client's part of the 429 contract, Retry-After shortened for the test)."""
    deadline = time.monotonic() + SLOTS_FREE_WITHIN
    with httpx.Client(timeout=timeout) as client:
        while True:
            response = send(client)
            if not (retry_busy and is_busy(response)):
                return response
            assert time.monotonic() < deadline, (
                f"the upload slots were still taken after {SLOTS_FREE_WITHIN:.0f} s: {response.text[:500]}"
            )
            time.sleep(0.2)


def post_upload(live: LiveServer, content: bytes, schema: dict | str, timeout: float = REQUEST_TIMEOUT, *,
                retry_busy: bool = True) -> httpx.Response:  # fmt: skip
    """POST the CSV with its schema, as a text field (a file part if the schema exceeds 512 KiB, as the form
    parser caps a text field at 1 MiB); :func:`send_upload` retries it while the upload slots are taken (unless
    ``retry_busy`` is False). Run by :func:`while_running`, it reports its progress to the run's :class:`Timeline`."""
    text = schema if isinstance(schema, str) else json.dumps(schema)
    files: dict[str, tuple[str, bytes]] = {"file": ("d.csv", content)}
    form: dict[str, Any] = {"files": files, "data": {"schema": text}}
    if len(text) > 512 * 1024:
        form = {"files": {**files, "schema": ("schema.json", text.encode())}}
    trace = getattr(_running, "timeline", None)
    extensions = {} if trace is None else {"trace": trace}

    def send(client: httpx.Client) -> httpx.Response:
        return client.post(f"{live.base}/v1/datasets", headers=owner(live), extensions=extensions, **form)

    return send_upload(send, timeout=timeout, retry_busy=retry_busy)


@contextmanager
def held_upload(live: LiveServer) -> Iterator[int]:
    """An upload that stops sending its body until the block ends, when its client aborts it (closes the connection
    mid-body); yields the server's first answer: 100 once the server admitted it and reads its body (it is sent with
    ``Expect: 100-continue``, which uvicorn answers on the application's first read, past the concurrency limit),
    or the status of a refusal (429 when the slots are taken)."""
    host, port = live.base.removeprefix("http://").rsplit(":", 1)
    boundary = "heldboundary"
    head = (f"POST /v1/datasets HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {live.owner}\r\n"
            f"Content-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {MiB}\r\n"
            "Expect: 100-continue\r\n\r\n")  # fmt: skip
    part = f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="d.csv"\r\n\r\nx1,x2,color,y\n'
    with socket.create_connection((host, int(port)), timeout=REQUEST_TIMEOUT) as connection:
        connection.sendall(head.encode())
        answer = b""
        while b"\r\n" not in answer:
            chunk = connection.recv(4096)
            assert chunk, f"the server closed the connection without an answer: {answer!r}"
            answer += chunk
        status = int(answer.split(b" ", 2)[1])
        if status == 100:
            connection.sendall(part.encode())  # the server now waits for the rest of the body
        yield status


@contextmanager
def all_slots_held(live: LiveServer, count: int = UPLOAD_SLOTS) -> Iterator[None]:
    """``count`` uploads admitted together and held mid-body (:func:`held_upload`) until the block ends, when they
    are aborted. Tried again while one is refused, for up to :data:`SLOTS_FREE_WITHIN` s (a slot freed just now,
    or never: then the test fails)."""
    deadline = time.monotonic() + SLOTS_FREE_WITHIN
    while True:
        with ExitStack() as uploads:
            statuses = [uploads.enter_context(held_upload(live)) for _ in range(count)]
            if all(status == 100 for status in statuses):
                yield
                return
        assert time.monotonic() < deadline, (
            f"{count} uploads were not admitted together within {SLOTS_FREE_WITHIN:.0f} s (answers {statuses}): "
            "upload slots stay taken"
        )
        time.sleep(0.2)


# ---- the event loop stays free ------------------------------------------------------------------------------


def test_healthz_answers_while_a_30000_feature_schema_is_uploaded(live):
    """Before: duplicate-name checks were quadratic and the schema was parsed on the event loop (14 s frozen)."""
    schema = wide_schema(30_000)
    header = ",".join(f"f{i}" for i in range(30_000)) + ",y\n"
    content = (header + ("0.5," * 30_000 + "yes\n") * 20).encode()
    response = while_running(lambda: post_upload(live, content, schema), healthz_within(live))
    assert response.status_code == 201, response.text[:1000]
    assert response.json()["d"] == 30_000 and response.json()["n"] == 20


def test_healthz_answers_while_a_64_mib_csv_is_uploaded(live):
    content, rows = numeric_csv(64 * MiB - 4096)
    response = while_running(lambda: post_upload(live, content, numeric_schema()), healthz_within(live))
    assert response.status_code == 201, response.text[:1000]
    assert response.json()["n"] == rows


# ---- memory --------------------------------------------------------------------------------------------------


def test_upload_peak_memory_is_in_proportion_to_the_encoded_matrix(live):
    """Before: a 64 MiB CSV raised the server's RSS by 1.9 GiB (bytes + str + a Python str per cell)."""
    pid = listening_pid(live.base)
    content, rows = numeric_csv(32 * MiB, columns=10)
    encoded = rows * (10 + 1) * 8
    if not reset_peak(pid):
        pytest.skip("cannot reset VmHWM of the server process (/proc/<pid>/clear_refs not writable)")
    before = status_kib(pid, "VmHWM") * 1024
    response = post_upload(live, content, numeric_schema())
    assert response.status_code == 201, response.text[:1000]
    growth = status_kib(pid, "VmHWM") * 1024 - before
    print(f"upload peak RSS growth {growth / MiB:.0f} MiB for an encoded matrix of {encoded / MiB:.0f} MiB")
    assert growth <= 3 * encoded + 256 * MiB, (growth / MiB, encoded / MiB)


def test_wide_one_hot_is_refused_before_allocation(live):
    """Before: 100,000 declared levels × 3,000 rows (a 300 KB CSV) made a 2.4 GB dense matrix → 500 MemoryError.
    Now n·(d + 1)·8 is checked against max_matrix_bytes (default 2 GiB) before the rows' memory is allocated."""
    pid = listening_pid(live.base)
    schema = {
        "label": {"name": "y", "type": "binary", "positive": "yes", "negative": "no"},
        "features": [{"name": "c", "type": "categorical", "levels": [f"l{i}" for i in range(100_000)]}],
        "budget": {"epsilon": 1.0, "delta": 1e-6},
    }
    content = ("c,y\n" + "l7,yes\n" * 3000).encode()
    if not reset_peak(pid):
        pytest.skip("cannot reset VmHWM of the server process (/proc/<pid>/clear_refs not writable)")
    before = status_kib(pid, "VmHWM") * 1024
    body = assert_problem(post_upload(live, content, schema), 413, "max_matrix_bytes")
    assert body["setting"] == "max_matrix_bytes" and body["limit"] == 2 * 1024**3
    assert status_kib(pid, "VmHWM") * 1024 - before < 256 * MiB


def test_too_many_features_is_413_naming_the_setting(tmp_path):
    with sqlite_server(tmp_path) as default:  # default max_features
        body = assert_problem(post_upload(default, b"x\n", wide_schema(10_001)), 413, "max_features")
        assert body["setting"] == "max_features"


# ---- body limits ---------------------------------------------------------------------------------------------


def chunked(total: int, piece: int = 1 * MiB) -> Iterator[bytes]:
    sent = 0
    while sent < total:
        yield b"a" * min(piece, total - sent)
        sent += piece


def test_chunked_upload_over_the_limit_is_413(live):
    """Before: the form parser swallowed the limit's exception and answered 400 "error parsing the body"."""
    boundary = "hostileboundary"
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"d.csv\"\r\n"
            "Content-Type: text/csv\r\n\r\n").encode()  # fmt: skip

    def body() -> Iterator[bytes]:
        yield head
        yield from chunked(70 * MiB)

    headers = {**owner(live), "content-type": f"multipart/form-data; boundary={boundary}"}
    response = send_upload(lambda client: client.post(f"{live.base}/v1/datasets", headers=headers, content=body()))
    assert "content-length" not in response.request.headers
    assert_problem(response, 413, "max_upload_bytes")


def test_chunked_json_body_over_max_json_bytes_is_413(live):
    """Before: a JSON body was buffered up to max_upload_bytes (64 MiB) before any limit applied."""
    response = httpx.post(f"{live.base}/v1/fits/estimate",
                          headers={**owner(live), "content-type": "application/json"},
                          content=chunked(12 * MiB, 64 * 1024), timeout=REQUEST_TIMEOUT)  # fmt: skip
    assert_problem(response, 413, "max_json_bytes")


# ---- concurrency ----------------------------------------------------------------------------------------------


def test_uploads_beyond_max_concurrent_uploads_are_429_with_retry_after(live):
    """Two uploads held mid-body take the two slots; a third is refused at once with Retry-After. Then both clients
    abort (close the connection mid-body): the server must free their slots — two uploads are admitted together
    again (a slot leaked by an aborted upload would refuse every later upload with this 429)."""
    with all_slots_held(live, UPLOAD_SLOTS):
        response = post_upload(live, small_csv(20), SMALL_SCHEMA, retry_busy=False)
        body = assert_problem(response, 429, "max_concurrent_uploads")
        assert int(response.headers["retry-after"]) > 0 and body["limit"] == UPLOAD_SLOTS
    with all_slots_held(live, UPLOAD_SLOTS):  # the aborted uploads' slots are free again
        pass
    assert post_upload(live, small_csv(20), SMALL_SCHEMA).status_code == 201  # and an upload completes


# ---- nesting and huge numbers --------------------------------------------------------------------------------


def test_deeply_nested_schema_is_422_naming_the_schema(live):
    nested = json.dumps(SMALL_SCHEMA).replace('"missing": "reject"', '"missing": ' + "[" * 50_000 + "]" * 50_000)
    body = assert_problem(post_upload(live, small_csv(20), nested), 422, "schema", "nesting")
    assert body["errors"][0]["loc"] == ["schema"]


def test_5000_digit_epsilon_in_the_schema_is_422_naming_the_field(live):
    schema = json.dumps(SMALL_SCHEMA).replace('"epsilon": 2.0', '"epsilon": 1' + "0" * 5000)
    body = assert_problem(post_upload(live, small_csv(20), schema), 422, "schema.budget.epsilon")
    assert body["errors"][0]["loc"] == ["schema", "budget", "epsilon"]


def test_huge_float_epsilon_in_the_schema_is_422(live):
    schema = json.dumps(SMALL_SCHEMA).replace('"epsilon": 2.0', '"epsilon": 1e999')
    assert_problem(post_upload(live, small_csv(20), schema), 422, "epsilon")


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ('{"dataset_id": "x", "privacy": {"epsilon": 1' + "0" * 5000 + "}}", "body.privacy.epsilon"),
        ('{"dataset_id": "x", "privacy": ' + "[" * 50_000 + "]" * 50_000 + "}", "nesting"),
    ],
    ids=["5000-digit epsilon", "deep nesting"],
)
def test_hostile_json_bodies_are_422(live, body, needle):
    """Before: FastAPI's ``request.json()`` raised ValueError / RecursionError → 400 "error parsing the body"."""
    response = httpx.post(f"{live.base}/v1/fits/estimate", headers={**owner(live), "content-type": "application/json"},
                          content=body, timeout=REQUEST_TIMEOUT)  # fmt: skip
    assert_problem(response, 422, needle)
