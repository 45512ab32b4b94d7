"""``Client``: the blocking privfit client — an ``httpx.Client`` driving the plans of :mod:`privfit.client._plans`,
a typed method for every v1 endpoint. :class:`~privfit.client.AsyncClient` has the same methods for asyncio.

Errors come back as the typed exceptions of :mod:`privfit.client.errors`, carrying the server's problem+json. The
retry policy and the dataset names a method accepts are described in :mod:`privfit.client._plans`.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from typing import Any, Concatenate, ParamSpec, TypeVar

import httpx

from . import _plans as plans
from ._plans import (
    PAGE_SIZE,
    AmbiguousDatasetNameError,
    Batch,
    CsvSource,
    Pause,
    Plan,
    SchemaSource,
    Send,
    Session,
    Step,
    Stream,
    UnknownDatasetNameError,
    feed,
    is_id,
    start,
)

__all__ = [
    "PAGE_SIZE",
    "AmbiguousDatasetNameError",
    "Client",
    "CsvSource",
    "SchemaSource",
    "UnknownDatasetNameError",
    "is_id",
]

P = ParamSpec("P")
T = TypeVar("T")


def blocking(plan: Callable[Concatenate[Session, P], Plan[T]]) -> Callable[Concatenate[Client, P], T]:
    """A plan as a :class:`Client` method: run to its answer (same signature and docstring)."""

    @functools.wraps(plan)
    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._run(plan(self, *args, **kwargs))

    return method


def blocking_batches(
    plan: Callable[Concatenate[Session, P], Plan[Batch[T]]],
) -> Callable[Concatenate[Client, P], Iterator[T]]:
    """A listing plan as a :class:`Client` method: an iterator that reads each next page as it is reached."""

    @functools.wraps(plan)
    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
        following: Plan[Batch[T]] | None = plan(self, *args, **kwargs)
        while following is not None:
            batch = self._run(following)
            yield from batch.items
            following = batch.following

    return method


class Client(Session):
    """A privfit API client.

    >>> with Client("http://127.0.0.1:8000", api_key) as client:           # doctest: +SKIP
    ...     dataset = client.upload_dataset("adult.data", "adult-schema.json", name="adult")
    ...     fit = client.wait(client.fit(dataset.id, model="logistic", solver="dp_gd", epsilon=1.0))
    ...     fit.result.coefficient_table()

    Args:
        url: the service's base URL.
        api_key: an API key (``pf_…``); sent as ``Authorization: Bearer``.
        timeout: seconds per request (uploads of large files may need more).
        retries: extra attempts for retryable failures (see :mod:`privfit.client._plans`); 0 disables retries.
        backoff: the first back-off in seconds; doubled per attempt, capped at 10 s.
        transport: an httpx transport (tests use ``httpx.MockTransport`` or a WSGI/ASGI transport).
    """

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.5,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(url, timeout=timeout, retries=retries, backoff=backoff)
        self._http = httpx.Client(base_url=self.url, headers=self.headers(api_key), timeout=timeout,
                                  transport=transport)  # fmt: skip

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- the driver: each step of a plan performed, blocking ------------------------------------------------------
    def _run(self, plan: Plan[T]) -> T:
        """Drive ``plan`` to its answer: each step's outcome is sent into it, or its exception thrown into it."""
        reply: Any = None
        failure: Exception | None = None
        while True:
            try:
                step = plan.send(reply) if failure is None else plan.throw(failure)
            except StopIteration as done:
                return done.value
            try:
                reply, failure = self._perform(step), None
            except Exception as error:
                reply, failure = None, error

    def _perform(self, step: Step) -> Any:
        if isinstance(step, Send):
            return self._http.request(step.method, step.path, **step.options)
        if isinstance(step, Pause):
            time.sleep(step.seconds)
            return None
        return self._stream(step)

    def _stream(self, step: Stream) -> Any:
        with self._http.stream(step.method, step.path, **step.options) as response:
            if response.status_code >= 400:
                response.read()  # an error's problem document, for the sink to raise
            sink = step.sink(response)
            finished, answer = start(sink)
            pieces = response.iter_lines() if step.lines else response.iter_bytes()
            while not finished:
                finished, answer = feed(sink, next(pieces, None))
            return answer

    # --- the methods: every v1 endpoint (privfit.client._plans) ---------------------------------------------------
    health = blocking(plans.health)
    ready = blocking(plans.ready)
    me = blocking(plans.me)
    create_key = blocking(plans.create_key)
    keys = blocking(plans.keys)
    revoke_key = blocking(plans.revoke_key)
    solvers = blocking(plans.solvers)
    upload_dataset = blocking(plans.upload_dataset)
    datasets = blocking(plans.datasets)
    datasets_page = blocking(plans.datasets_page)
    resolve_dataset = blocking(plans.resolve_dataset)
    dataset = blocking(plans.dataset)
    delete_dataset = blocking(plans.delete_dataset)
    grant = blocking(plans.grant)
    grants = blocking(plans.grants)
    revoke_grant = blocking(plans.revoke_grant)
    allocate = blocking(plans.allocate)
    allocations = blocking(plans.allocations)
    remove_allocation = blocking(plans.remove_allocation)
    budget = blocking(plans.budget)
    ledger = blocking(plans.ledger)
    iter_ledger = blocking_batches(plans.iter_ledger)
    export_ledger = blocking(plans.export_ledger)
    estimate = blocking(plans.estimate)
    fit = blocking(plans.fit)
    fits = blocking(plans.fits)
    iter_fits = blocking_batches(plans.iter_fits)
    fits_page = blocking(plans.fits_page)
    get_fit = blocking(plans.get_fit)
    fit_privacy = blocking(plans.fit_privacy)
    cancel = blocking(plans.cancel)
    wait = blocking(plans.wait)
    predict = blocking(plans.predict)
    evaluate = blocking(plans.evaluate)
    estimate_evaluation = blocking(plans.estimate_evaluation)
    evaluations = blocking(plans.evaluations)
    fit_result = blocking(plans.fit_result)
    to_sklearn = blocking(plans.to_sklearn)
    export_onnx = blocking(plans.export_onnx)
