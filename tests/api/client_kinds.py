"""Both Python clients behind one blocking interface, so that a client test runs on ``Client`` and on
``AsyncClient`` (issue 38, item 6): :func:`connect` opens either; an ``AsyncClient`` is wrapped in
:class:`AsyncRunner`, which runs each of its coroutines to completion on the runner's own event loop."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from privfit.client import AsyncClient, Client

#: The two clients, by the name a parametrised test shows.
KINDS = ("Client", "AsyncClient")


class AsyncRunner:
    """An :class:`AsyncClient` called like a :class:`Client`: a coroutine method's call returns its answer (run on
    this runner's event loop; an exception propagates as raised), an async iterator's call returns its items as a
    list; attributes pass through."""

    def __init__(self, client: AsyncClient) -> None:
        self.client = client
        self.loop = asyncio.new_event_loop()

    def __getattr__(self, name: str) -> Any:
        member = getattr(self.client, name)
        if inspect.iscoroutinefunction(member):
            return lambda *args, **kwargs: self.loop.run_until_complete(member(*args, **kwargs))
        if inspect.isasyncgenfunction(member):
            return lambda *args, **kwargs: self.loop.run_until_complete(_collect(member(*args, **kwargs)))
        return member

    def close(self) -> None:
        self.loop.run_until_complete(self.client.aclose())
        self.loop.close()


async def _collect(items: Any) -> list[Any]:
    return [item async for item in items]


@contextmanager
def connect(kind: str, url: str, api_key: str | None = None, *, transport: Any = None, **options: Any) -> Iterator[Any]:
    """A client of ``kind`` (:data:`KINDS`) for ``url``, closed at the end; ``transport`` is given to either (an
    ``httpx.MockTransport`` serves both)."""
    if kind == "Client":
        with Client(url, api_key, transport=transport, **options) as client:
            yield client
        return
    runner = AsyncRunner(AsyncClient(url, api_key, transport=transport, **options))
    try:
        yield runner
    finally:
        runner.close()
