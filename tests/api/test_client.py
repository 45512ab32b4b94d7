"""``privfit.client.Client`` and ``AsyncClient`` (each test runs on both, client_kinds.py): against a live ``privfit
serve`` subprocess (the example of docs/client.md, uploads of every kind, typed errors, waiting, paging, an idempotent
retry over a dropped connection), and their retry policy against scripted transports."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest
from api_helpers import SMALL_SCHEMA, small_csv
from client_kinds import KINDS, connect
from process_helpers import sqlite_server
from walkthrough import run_python_example

from privfit.client import (
    ApiError,
    AuthenticationError,
    BudgetExceededError,
    Client,
    ConflictError,
    FitFailedError,
    InvalidRequestError,
    NotFoundError,
    PermissionDeniedError,
    ServerError,
    TransportError,
    WaitTimeoutError,
)

REPO = Path(__file__).resolve().parents[2]
SLOW = {"steps": 100_000}  # tens of seconds on 4000 rows; the tests cancel it


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    with sqlite_server(tmp_path_factory.mktemp("client")) as running:
        yield {"base": running.base, "owner": running.owner, "admin": running.admin}


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    """Which client the test runs on (client_kinds.KINDS)."""
    return request.param


@pytest.fixture
def owner(live: dict[str, str], kind: str) -> Iterator[Client]:
    with connect(kind, live["base"], live["owner"], retries=0) as client:
        yield client


def schema(epsilon: float) -> dict:
    return {**SMALL_SCHEMA, "budget": {"epsilon": epsilon, "delta": 1e-6}}


def test_the_docs_python_example_runs(live: dict[str, str], capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch, clone: Path):  # fmt: skip
    """docs/client.md's Python block as printed (issue 24): the server and key from PRIVFIT_URL and PRIVFIT_API_KEY,
    the example's paths relative to a fresh clone with nothing beside it (issue 36)."""
    monkeypatch.chdir(clone)
    monkeypatch.setenv("PRIVFIT_URL", live["base"])
    monkeypatch.setenv("PRIVFIT_API_KEY", live["owner"])
    run_python_example(clone / "docs" / "client.md", "## Python client")
    printed = capsys.readouterr().out
    assert "succeeded 100%" in printed and "Privacy budget exceeded" not in printed  # detail, not the title
    assert "this fit costs ε = 5" in printed


def test_uploads_from_a_path_bytes_a_file_and_a_dataframe_give_the_same_dataset(owner: Client, tmp_path: Path):
    csv_path = tmp_path / "small.csv"
    csv_path.write_bytes(small_csv())
    schema_path = tmp_path / "schema.json"
    schema_path.write_text(json.dumps(schema(1.0)))
    uploaded = [
        owner.upload_dataset(csv_path, schema_path, allow_duplicate=True),
        owner.upload_dataset(small_csv(), json.dumps(schema(1.0)), name="bytes", allow_duplicate=True),
        owner.upload_dataset(io.BytesIO(small_csv()), schema(1.0), name="file", allow_duplicate=True),
        owner.upload_dataset(pd.read_csv(csv_path), schema(1.0), name="frame", allow_duplicate=True),
    ]
    assert [d.name for d in uploaded] == ["small.csv", "bytes", "file", "frame"]
    assert {(d.n, d.d, tuple(d.feature_names)) for d in uploaded} == {(4000, 5, tuple(uploaded[0].feature_names))}
    assert len({d.content_hash for d in uploaded}) == 1  # the same encoded rows, whatever the source
    assert {d.id for d in owner.datasets()} >= {d.id for d in uploaded}
    assert owner.dataset(uploaded[0].id).created_at is not None
    assert uploaded[0].clipped_cells == {"x1": 0, "x2": 0}  # the upload's answer counts clipped cells (issue 24)
    assert owner.dataset(uploaded[0].id).clipped_cells is None  # never shown again


def test_parquet_uploads_from_a_path_bytes_and_a_file_equal_the_csv_upload(owner: Client, tmp_path: Path):
    csv = small_csv(1000, seed=3)
    table = pa_csv.read_csv(io.BytesIO(csv), convert_options=pa_csv.ConvertOptions(
        column_types={"color": pa.string(), "y": pa.string()}))  # fmt: skip
    path = tmp_path / "small.parquet"
    pq.write_table(table, path)
    uploaded = [
        owner.upload_dataset(csv, schema(1.0), name="csv", allow_duplicate=True),
        owner.upload_dataset(path, schema(1.0), allow_duplicate=True),
        owner.upload_dataset(path.read_bytes(), schema(1.0), name="bytes", allow_duplicate=True),
        owner.upload_dataset(io.BytesIO(path.read_bytes()), schema(1.0), name="file", allow_duplicate=True),
    ]
    assert [d.name for d in uploaded] == ["csv", "small.parquet", "bytes", "file"]
    assert {(d.n, d.content_hash) for d in uploaded} == {(1000, uploaded[0].content_hash)}
    x1_as_text = [{"name": "x1", "type": "categorical", "levels": ["a"]}, *SMALL_SCHEMA["features"][1:]]
    with pytest.raises(InvalidRequestError, match="column 'x1' of the Parquet file has type double, expected a string"):
        owner.upload_dataset(path, {**schema(1.0), "features": x1_as_text})


def test_estimate_fit_wait_predict_budget_and_ledger(owner: Client):
    dataset = owner.upload_dataset(small_csv(), schema(2.0), name="flow", allow_duplicate=True)
    estimate = owner.estimate(dataset.id, epsilon=1.0)
    assert estimate.admissible and estimate.cost.epsilon == pytest.approx(1.0, rel=1e-3)
    seen: list[tuple[str, float]] = []
    fit = owner.wait(owner.fit(dataset.id, epsilon=1.0),
                     on_progress=lambda f: seen.append((f.status, f.progress)))  # fmt: skip
    assert fit.status == "succeeded" and seen[-1] == ("succeeded", 1.0)
    assert [p for _, p in seen] == sorted(p for _, p in seen)  # progress only moves forward
    table = fit.result.coefficient_table()
    assert table["x1"] > 0 > table["x2"]  # y = sign(2·x1 − x2 + noise)
    frame = pd.DataFrame({"x1": [0.9, -0.9], "x2": [-0.5, 0.5], "color": ["red", "blue"]})
    prediction = owner.predict(fit.id, frame)
    assert prediction.predictions == ["yes", "no"] and prediction.n == 2
    budget = owner.budget(dataset.id)
    assert budget.committed_epsilon == pytest.approx(estimate.committed_epsilon_after)
    assert budget.remaining_epsilon == pytest.approx(estimate.remaining_epsilon_after)
    entries = list(owner.iter_ledger(dataset.id, page_size=1))  # one request per entry
    assert [e.kind for e in entries] == ["reservation", "charge"]
    assert entries == owner.ledger(dataset.id).entries
    assert [f.id for f in owner.fits(dataset.id)] == [fit.id]


def test_an_evaluation_is_estimated_charged_and_listed(owner: Client):
    declared = {**schema(3.0), "validation_fraction": 0.25}
    dataset = owner.upload_dataset(small_csv(), declared, name="evaluated", allow_duplicate=True)
    assert dataset.raw["n_validation"] == 1000
    fit = owner.wait(owner.fit(dataset.id, epsilon=1.0))
    estimate = owner.estimate_evaluation(fit.id, epsilon=0.5, metrics=["accuracy"])
    assert estimate.admissible and estimate.n_validation == 1000 and estimate.cost.pure_epsilon == pytest.approx(0.5)
    assert [m["metric"] for m in estimate.metrics] == ["accuracy"] and estimate.metrics[0]["scale"] == pytest.approx(
        2.0
    )
    evaluation = owner.evaluate(fit.id, epsilon=0.5, metrics=["accuracy"])
    assert evaluation.status == "succeeded" and [r.metric for r in evaluation.results] == ["accuracy"]
    assert evaluation.results[0].value > 0.8  # the synthetic task is easy; Laplace sd 0.003 at n_val = 1000
    assert [e.id for e in owner.evaluations(fit.id)] == [evaluation.id]
    assert owner.budget(dataset.id).committed_epsilon == pytest.approx(estimate.committed_epsilon_after)


def test_typed_errors_carry_the_servers_message(live: dict[str, str], owner: Client, kind: str):
    dataset = owner.upload_dataset(small_csv(), schema(1.0), name="errors", allow_duplicate=True)
    with pytest.raises(BudgetExceededError) as refused:
        owner.fit(dataset.id, epsilon=5.0)
    assert refused.value.status == 409 and refused.value.remaining_epsilon == 1.0
    assert str(refused.value).startswith("409 Privacy budget exceeded: this fit costs ε = 5")
    with pytest.raises(InvalidRequestError) as invalid:
        owner.estimate(dataset.id, epsilon=0.1, params={"steps": -1})
    assert invalid.value.parameter == "steps" and invalid.value.title == "Invalid parameter"
    with pytest.raises(InvalidRequestError, match="Invalid schema"):
        owner.upload_dataset(small_csv(), {"label": {"name": "y"}}, allow_duplicate=True)
    with pytest.raises(NotFoundError, match="does not exist"):
        owner.budget("00000000-0000-0000-0000-000000000000")
    stranger = connect(kind, live["base"], "pf_0000_bad")
    with stranger as client, pytest.raises(AuthenticationError, match="invalid API key"):
        client.datasets()
    with connect(kind, live["base"], live["admin"]) as admin:
        analyst = admin.create_key("analyst", "ana")
    with connect(kind, live["base"], analyst.key) as client, pytest.raises(PermissionDeniedError, match="roles: owner"):
        client.upload_dataset(small_csv(), schema(1.0))
    slow = owner.fit(dataset.id, epsilon=0.1, params=SLOW)
    try:
        with pytest.raises(ConflictError, match="Fit not finished") as unfinished:
            owner.predict(slow.id, [{"x1": 0.0, "x2": 0.0, "color": "red"}])
        assert not isinstance(unfinished.value, BudgetExceededError)
    finally:
        owner.cancel(slow.id)
    nowhere = connect(kind, "http://127.0.0.1:9", "pf_x_y", retries=1, backoff=0.01)
    with nowhere as client, pytest.raises(TransportError, match="cannot reach"):
        client.solvers()


def test_wait_times_out_and_a_cancelled_fit_raises_fit_failed(owner: Client):
    dataset = owner.upload_dataset(small_csv(), schema(1.0), name="slow", allow_duplicate=True)
    fit = owner.fit(dataset.id, epsilon=0.1, params=SLOW)
    with pytest.raises(WaitTimeoutError) as late:
        owner.wait(fit, timeout=0.3)
    assert late.value.fit.id == fit.id and not late.value.fit.finished
    assert owner.cancel(fit.id).cancel_requested
    with pytest.raises(FitFailedError, match="cancelled") as failed:
        owner.wait(fit, timeout=60)
    assert failed.value.fit.status == "cancelled"
    assert owner.wait(fit, raise_on_failure=False).status == "cancelled"


class DropFirstFitResponse(httpx.HTTPTransport):
    """Delivers the first ``POST /v1/fits`` to the server, then loses its answer (a dropped connection)."""

    def __init__(self) -> None:
        super().__init__()
        self.fit_keys: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        response.read()
        return self.answer(request, response)

    def answer(self, request: httpx.Request, response: httpx.Response) -> httpx.Response:
        """``response`` (read), or the dropped connection of the first fit."""
        if request.method == "POST" and request.url.path == "/v1/fits":
            self.fit_keys.append(request.headers["Idempotency-Key"])
            if len(self.fit_keys) == 1:
                raise httpx.ReadError("connection dropped after the request was sent", request=request)
        return response


class AsyncDropFirstFitResponse(httpx.AsyncHTTPTransport):
    """:class:`DropFirstFitResponse` for the ``AsyncClient``."""

    def __init__(self) -> None:
        super().__init__()
        self.dropping = DropFirstFitResponse()
        self.fit_keys = self.dropping.fit_keys

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        await response.aread()
        return self.dropping.answer(request, response)


def test_a_fit_whose_answer_is_lost_is_retried_with_its_key_and_charged_once(live: dict[str, str], owner: Client,
                                                                             kind: str):  # fmt: skip
    dataset = owner.upload_dataset(small_csv(), schema(2.0), name="retry", allow_duplicate=True)
    transport = DropFirstFitResponse() if kind == "Client" else AsyncDropFirstFitResponse()
    with connect(kind, live["base"], live["owner"], transport=transport, retries=2, backoff=0.01) as flaky:
        fit = flaky.fit(dataset.id, epsilon=0.5)
    assert len(transport.fit_keys) == 2 and transport.fit_keys[0] == transport.fit_keys[1]
    assert [f.id for f in owner.fits(dataset.id)] == [fit.id]  # the server admitted one fit …
    reservations = [e for e in owner.iter_ledger(dataset.id) if e.kind == "reservation"]
    assert len(reservations) == 1  # … and reserved its cost once
    assert owner.budget(dataset.id).committed_epsilon == pytest.approx(fit.cost.filter_epsilon)


# --- the retry policy, against scripted transports ------------------------------------------------
#: A dataset id (a name would first be looked up with GET /v1/datasets, an extra scripted answer)
DATASET_ID = "3fa85f64-5717-4562-b3fc-2c963f66afa6"


def scripted(*answers: int | type[Exception]) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    """A transport answering each request with the next status (a JSON body) or raising the next exception."""
    seen: list[httpx.Request] = []
    queue = list(answers)

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = queue.pop(0)
        if isinstance(answer, type):
            raise answer("scripted", request=request)
        body = {"id": "f1", "status": "queued"} if answer < 400 else {"title": "Unavailable", "detail": "later"}
        return httpx.Response(answer, json=body, headers={"Retry-After": "0"})

    return httpx.MockTransport(handler), seen


def test_fit_creation_retries_503_and_dropped_reads_with_one_idempotency_key(kind: str):
    transport, seen = scripted(503, httpx.ReadError, 202)
    with connect(kind, "http://privfit.test", "pf_a_b", transport=transport, backoff=0.001) as client:
        assert client.fit(DATASET_ID, epsilon=1.0, idempotency_key="mine").id == "f1"
    assert [r.headers["Idempotency-Key"] for r in seen] == ["mine"] * 3
    transport, seen = scripted(202)
    with connect(kind, "http://privfit.test", "pf_a_b", transport=transport) as client:
        client.fit(DATASET_ID, epsilon=1.0)
    assert re.fullmatch(r"[0-9a-f-]{36}", seen[0].headers["Idempotency-Key"])  # a fresh UUID by default


def test_uploads_are_retried_only_when_the_request_never_left(kind: str):
    transport, seen = scripted(httpx.ReadError)
    with (
        connect(kind, "http://privfit.test", transport=transport, backoff=0.001) as client,
        pytest.raises(TransportError, match="failed"),
    ):
        client.upload_dataset(b"a,b\n", {"label": {}})
    assert len(seen) == 1
    transport, seen = scripted(httpx.ConnectError, 201)
    with connect(kind, "http://privfit.test", transport=transport, backoff=0.001) as client:
        client.upload_dataset(b"a,b\n", {"label": {}})
    assert len(seen) == 2


def test_gives_up_after_the_allowed_retries_with_the_typed_error(kind: str):
    transport, seen = scripted(502, 502, 502)
    with (
        connect(kind, "http://privfit.test", transport=transport, retries=2, backoff=0.001) as client,
        pytest.raises(ServerError, match="502 Unavailable: later"),
    ):
        client.solvers()
    assert len(seen) == 3
    transport, seen = scripted(503)
    with connect(kind, "http://privfit.test", transport=transport, retries=0) as client, pytest.raises(ServerError):
        client.budget(DATASET_ID)
    assert len(seen) == 1


def test_a_non_json_error_body_still_raises_a_typed_error(kind: str):
    transport = httpx.MockTransport(lambda request: httpx.Response(418, text="<html>teapot</html>"))
    with connect(kind, "http://privfit.test", transport=transport) as client, pytest.raises(ApiError) as error:
        client.me()
    assert error.value.status == 418 and "teapot" in error.value.detail
