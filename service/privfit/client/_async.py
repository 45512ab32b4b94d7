"""``AsyncClient``: the asyncio privfit client — an ``httpx.AsyncClient`` driving the same plans as
:class:`~privfit.client.Client` (:mod:`privfit.client._plans`): the same methods with the same arguments, answers,
typed errors, retry policy and dataset names, each a coroutine (``await client.fit(…)``); ``iter_fits`` and
``iter_ledger`` are async iterators (``async for``). Back-offs and polls wait with ``asyncio.sleep``: one event loop
can wait on many fits at once (``asyncio.gather``).

Local work stays where the blocking client does it: reading a file to upload happens as httpx streams it, and
``to_sklearn`` builds its pipeline in the calling thread (a few milliseconds); callbacks (``wait``'s
``on_progress``) are plain functions.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

import httpx

from . import _plans as plans
from ._plans import Batch, Pause, Plan, Send, Session, Step, Stream, feed, start

__all__ = ["AsyncClient"]

P = ParamSpec("P")
T = TypeVar("T")


def awaiting(plan: Callable[Concatenate[Session, P], Plan[T]]) -> Callable[Concatenate[AsyncClient, P], Awaitable[T]]:
    """A plan as an :class:`AsyncClient` method: a coroutine that runs it to its answer (same signature and
    docstring)."""

    @functools.wraps(plan)
    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._run(plan(self, *args, **kwargs))

    return method


def async_batches(
    plan: Callable[Concatenate[Session, P], Plan[Batch[T]]],
) -> Callable[Concatenate[AsyncClient, P], AsyncIterator[T]]:
    """A listing plan as an :class:`AsyncClient` method: an async iterator that reads each next page as it is
    reached."""

    @functools.wraps(plan)
    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> AsyncIterator[T]:
        following: Plan[Batch[T]] | None = plan(self, *args, **kwargs)
        while following is not None:
            batch = await self._run(following)
            for item in batch.items:
                yield item
            following = batch.following

    return method


class AsyncClient(Session):
    """A privfit API client for asyncio, with the methods of :class:`~privfit.client.Client`.

    >>> async with AsyncClient("http://127.0.0.1:8000", api_key) as client:   # doctest: +SKIP
    ...     fits = [await client.fit("adult", epsilon=0.5) for _ in range(3)]
    ...     done = await asyncio.gather(*(client.wait(f) for f in fits))

    Args: as :class:`~privfit.client.Client`'s; ``transport`` is an ``httpx.AsyncBaseTransport`` (tests use
    ``httpx.MockTransport`` or ``httpx.ASGITransport``).
    """

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.5,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(url, timeout=timeout, retries=retries, backoff=backoff)
        self._http = httpx.AsyncClient(base_url=self.url, headers=self.headers(api_key), timeout=timeout,
                                       transport=transport)  # fmt: skip

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    # --- the driver: each step of a plan performed, awaited -------------------------------------------------------
    async def _run(self, plan: Plan[T]) -> T:
        """Drive ``plan`` to its answer: each step's outcome is sent into it, or its exception thrown into it."""
        reply: Any = None
        failure: Exception | None = None
        while True:
            try:
                step = plan.send(reply) if failure is None else plan.throw(failure)
            except StopIteration as done:
                return done.value
            try:
                reply, failure = await self._perform(step), None
            except Exception as error:
                reply, failure = None, error

    async def _perform(self, step: Step) -> Any:
        if isinstance(step, Send):
            return await self._http.request(step.method, step.path, **step.options)
        if isinstance(step, Pause):
            await asyncio.sleep(step.seconds)
            return None
        return await self._stream(step)

    async def _stream(self, step: Stream) -> Any:
        async with self._http.stream(step.method, step.path, **step.options) as response:
            if response.status_code >= 400:
                await response.aread()  # an error's problem document, for the sink to raise
            sink = step.sink(response)
            finished, answer = start(sink)
            pieces = response.aiter_lines() if step.lines else response.aiter_bytes()
            while not finished:
                finished, answer = feed(sink, await anext(pieces, None))
            return answer

    # --- the methods: every v1 endpoint (privfit.client._plans) ---------------------------------------------------
    health = awaiting(plans.health)
    ready = awaiting(plans.ready)
    me = awaiting(plans.me)
    create_key = awaiting(plans.create_key)
    keys = awaiting(plans.keys)
    revoke_key = awaiting(plans.revoke_key)
    solvers = awaiting(plans.solvers)
    upload_dataset = awaiting(plans.upload_dataset)
    datasets = awaiting(plans.datasets)
    datasets_page = awaiting(plans.datasets_page)
    resolve_dataset = awaiting(plans.resolve_dataset)
    dataset = awaiting(plans.dataset)
    delete_dataset = awaiting(plans.delete_dataset)
    grant = awaiting(plans.grant)
    grants = awaiting(plans.grants)
    revoke_grant = awaiting(plans.revoke_grant)
    allocate = awaiting(plans.allocate)
    allocations = awaiting(plans.allocations)
    remove_allocation = awaiting(plans.remove_allocation)
    budget = awaiting(plans.budget)
    ledger = awaiting(plans.ledger)
    iter_ledger = async_batches(plans.iter_ledger)
    export_ledger = awaiting(plans.export_ledger)
    estimate = awaiting(plans.estimate)
    fit = awaiting(plans.fit)
    fits = awaiting(plans.fits)
    iter_fits = async_batches(plans.iter_fits)
    fits_page = awaiting(plans.fits_page)
    get_fit = awaiting(plans.get_fit)
    fit_privacy = awaiting(plans.fit_privacy)
    cancel = awaiting(plans.cancel)
    wait = awaiting(plans.wait)
    predict = awaiting(plans.predict)
    evaluate = awaiting(plans.evaluate)
    estimate_evaluation = awaiting(plans.estimate_evaluation)
    evaluations = awaiting(plans.evaluations)
    fit_result = awaiting(plans.fit_result)
    to_sklearn = awaiting(plans.to_sklearn)
    export_onnx = awaiting(plans.export_onnx)
