"""``privfit.client.AsyncClient`` (issue 38, item 6): the same methods as ``Client`` — names, signatures and
docstrings, as coroutines and async iterators —, driven by the same plans (tests/api/test_client.py runs every client
test on both); here what only asyncio shows, against a live ``privfit serve``: fits followed at once on one event
loop while the loop stays free, the answers equal the blocking client's, paging with ``async for``, the exports."""

from __future__ import annotations

import asyncio
import inspect
import io
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from api_helpers import SMALL_SCHEMA, small_csv
from process_helpers import sqlite_server
from walkthrough import run_python_example

from privfit.client import (
    AsyncClient,
    BudgetExceededError,
    Client,
    InvalidRequestError,
    UnknownDatasetNameError,
    _plans,
)

REPO = Path(__file__).resolve().parents[2]

LIFECYCLE = {"close", "aclose"}


def public_methods(cls: type) -> dict[str, object]:
    return {name: member for name, member in vars(cls).items() if callable(member) and not name.startswith("_")}


def test_the_async_client_has_every_method_of_the_client_with_its_signature_and_docs():
    blocking = public_methods(Client)
    awaiting = public_methods(AsyncClient)
    assert set(blocking) - LIFECYCLE == set(awaiting) - LIFECYCLE and len(blocking) >= 39
    for name, method in blocking.items():
        if name in LIFECYCLE:
            continue
        twin = awaiting[name]
        assert inspect.signature(twin) == inspect.signature(method) and twin.__doc__ == method.__doc__, name
        if name.startswith("iter_"):
            assert inspect.isasyncgenfunction(twin) and inspect.isgeneratorfunction(method), name
        else:
            assert inspect.iscoroutinefunction(twin) and not inspect.iscoroutinefunction(method), name
        assert method.__wrapped__ is twin.__wrapped__ is getattr(_plans, name), name  # one plan for both


def schema(epsilon: float) -> dict:
    return {**SMALL_SCHEMA, "budget": {"epsilon": epsilon, "delta": 1e-6}}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    with sqlite_server(tmp_path_factory.mktemp("async-client")) as running:
        yield {"base": running.base, "owner": running.owner}


def test_fits_followed_at_once_on_one_loop_answer_as_the_blocking_client(live: dict[str, str],
                                                                         monkeypatch: pytest.MonkeyPatch):  # fmt: skip
    monkeypatch.setattr(_plans, "PAGE_SIZE", 2)  # the iterations below read several pages

    async def scenario() -> dict:
        async with AsyncClient(live["base"], live["owner"], retries=0) as client:
            dataset = await client.upload_dataset(small_csv(), schema(3.0), name="async-flow", allow_duplicate=True)
            assert (await client.resolve_dataset("async-flow")) == dataset.id
            with pytest.raises(UnknownDatasetNameError):
                await client.budget("async-flow-missing")
            fits = [await client.fit("async-flow", epsilon=0.5) for _ in range(3)]
            seen: list[tuple[str, float]] = []
            done = await asyncio.gather(*(client.wait(f, on_progress=lambda f: seen.append((f.id, f.progress)))
                                          for f in fits))  # fmt: skip
            with pytest.raises(BudgetExceededError):
                await client.fit(dataset.id, epsilon=5.0)
            frame = pd.DataFrame({"x1": [0.9, -0.9], "x2": [-0.5, 0.5], "color": ["red", "blue"]})
            exported = io.BytesIO()
            onnx = io.BytesIO()
            return {
                "dataset": dataset,
                "done": done,
                "seen": seen,
                "fits": [f async for f in client.iter_fits(dataset.id)],
                "ledger": [e async for e in client.iter_ledger(dataset.id, page_size=2)],
                "budget": await client.budget(dataset.id),
                "prediction": await client.predict(done[0].id, frame),
                "pipeline": await client.to_sklearn(done[0].id),
                "frame": frame,
                "ledger_bytes": (await client.export_ledger(dataset.id, exported), exported.getvalue()),
                "onnx_bytes": (await client.export_onnx(done[0].id, onnx), onnx.getvalue()),
            }

    answers = asyncio.run(scenario())
    done = answers["done"]
    assert [f.status for f in done] == ["succeeded"] * 3
    assert {fit_id for fit_id, _ in answers["seen"]} == {f.id for f in done}  # each stream's states reached its fit
    with Client(live["base"], live["owner"]) as blocking:
        dataset = answers["dataset"].id
        assert answers["fits"] == blocking.fits(dataset) and [f.id for f in answers["fits"]] == [f.id for f in done]
        assert answers["ledger"] == list(blocking.iter_ledger(dataset)) and len(answers["ledger"]) == 6
        assert answers["budget"] == blocking.budget(dataset)
        assert answers["prediction"] == blocking.predict(done[0].id, answers["frame"])
        exported = io.BytesIO()
        assert answers["ledger_bytes"] == (blocking.export_ledger(dataset, exported), exported.getvalue())
        onnx = io.BytesIO()
        assert answers["onnx_bytes"][0] == blocking.export_onnx(done[0].id, onnx) > 0
    assert list(answers["pipeline"].predict(answers["frame"])) == answers["prediction"].predictions == ["yes", "no"]


def test_a_wait_leaves_the_loop_free_and_a_caller_may_cancel_it(live: dict[str, str], tmp_path: Path):
    """While ``wait`` follows a long fit, the same loop and client upload, fit and cancel; the wait then ends with
    the cancelled fit. A second wait cancelled by its caller ends at once (its stream closed)."""
    path = tmp_path / "small.csv"
    path.write_bytes(small_csv())

    async def scenario() -> tuple:
        async with AsyncClient(live["base"], live["owner"], retries=0) as client:
            first = await client.upload_dataset(path, schema(1.0), allow_duplicate=True)
            slow = await client.fit(first.id, epsilon=0.1, params={"steps": 100_000})  # minutes unless cancelled
            waiting = asyncio.create_task(client.wait(slow, raise_on_failure=False))
            abandoned = asyncio.create_task(client.wait(slow))
            await asyncio.sleep(0)  # both waits start
            second = await client.upload_dataset(small_csv(), schema(1.0), name="meanwhile", allow_duplicate=True)
            quick = await client.wait(await client.fit(second.id, epsilon=0.5))
            pending = not waiting.done() and not abandoned.done()
            abandoned.cancel()
            with pytest.raises(asyncio.CancelledError):
                await abandoned
            cancelled = await client.cancel(slow.id)
            return first, quick, pending, cancelled, await asyncio.wait_for(waiting, 120)

    first, quick, pending, cancelled, finished = asyncio.run(scenario())
    assert first.name == "small.csv" and first.n == 4000 and quick.status == "succeeded" and pending
    assert cancelled.cancel_requested and finished.status == "cancelled" and finished.id == cancelled.id


def test_the_docs_examples_that_continue_the_python_client_s_run(live: dict[str, str],
                                                                capsys: pytest.CaptureFixture[str],
                                                                monkeypatch: pytest.MonkeyPatch):  # fmt: skip
    """docs/client.md's "Predictions and live events" and "Async client" blocks as printed, after the Python client's
    example uploaded ``loans`` (private preprocessing charged) and fitted it at ε = 1: the events of a fit, a
    prediction with an undeclared level ignored, then fits followed at once — what they print is what the blocking
    client reads."""
    with Client(live["base"], live["owner"]) as owner:
        loans = owner.upload_dataset(REPO / "examples" / "loans.csv", REPO / "examples" / "loans-schema.json",
                                     name="loans")  # fmt: skip
        owner.wait(owner.fit(loans.id, epsilon=1.0))
    monkeypatch.setenv("PRIVFIT_URL", live["base"])
    monkeypatch.setenv("PRIVFIT_API_KEY", live["owner"])
    run_python_example(REPO / "docs" / "client.md", "## Predictions and live events")
    *events, predicted = capsys.readouterr().out.splitlines()
    assert events[-1] == "event: end" and set(events[:-1]) == {"event: fit"} and len(events) >= 2, events
    prediction, classes, probabilities = predicted.split("] [")
    assert prediction in ("['yes'", "['no'") and classes == "'no', 'yes'", predicted
    assert sum(float(p) for p in probabilities.rstrip("]").split(", ")) == pytest.approx(1.0, abs=2e-3)
    with (
        Client(live["base"], live["owner"]) as owner,
        pytest.raises(InvalidRequestError, match="unknown category in column 'employment'"),
    ):
        owner.predict(owner.fits(loans.id)[-1].id, [{"age": 41, "income": 52000, "debt_ratio": 0.3,
                                                     "employment": "student"}])  # fmt: skip

    run_python_example(REPO / "docs" / "client.md", "## Async client")
    printed = capsys.readouterr().out.splitlines()
    assert printed[:2] == ["dp_gd succeeded 0.25", "dp_sgd succeeded 0.25"], printed
    with Client(live["base"], live["owner"]) as owner:
        assert float(printed[2]) == owner.budget("loans").remaining_epsilon
        assert printed[3:] == [f"{entry.kind} {round(entry.epsilon, 2)}" for entry in owner.iter_ledger("loans")]
    assert sorted(printed[-4:]) == ["charge 0.25", "charge 0.25", "reservation 0.25", "reservation 0.25"], printed
