"""Limits that protect the API process from hostile requests, enforced before (or instead of) parsing.

* :class:`BodySizeLimit` — a request body over its limit is refused with 413 problem+json: at once when the
  declared Content-Length is too large, and while it streams in otherwise (chunked bodies), however the
  application reacts to the interrupted body. Dataset uploads (multipart POST /v1/datasets, spooled to disk) may be
  ``max_upload_bytes`` long, prediction rows (POST /v1/fits/{id}/predict, parsed in memory) ``max_predict_bytes``,
  every other body (JSON) ``max_json_bytes``.
* :class:`UploadConcurrencyLimit` — at most ``max_concurrent_uploads`` dataset uploads per process; one more is
  answered 429 with Retry-After before its body is read (a counter on the event loop; nothing blocks).
* :func:`loads_limited` — ``json.loads`` that turns the inputs Python's parser fails on with something other than
  a syntax error (nesting deeper than the recursion limit, number literals of thousands of digits) into a
  :class:`JsonLimitError` that names where the problem is, so that it becomes a 422, never a 500.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: Longest number literal accepted in a JSON document (characters, sign and exponent included). A float64 needs
#: at most ~25; Python refuses to convert integers of more than 4300 digits (CVE-2020-10735).
MAX_NUMBER_CHARS = 100

#: Seconds a client is told to wait after a 429 for too many concurrent uploads.
UPLOAD_RETRY_AFTER_SECONDS = 5

UPLOAD_PATH = "/v1/datasets"
PREDICT_SUFFIX = "/predict"


def _problem_messages(status: int, title: str, detail: str, headers: list[tuple[bytes, bytes]] | None = None,
                      **extra: Any) -> tuple[Message, Message]:  # fmt: skip
    body = json.dumps({"type": "about:blank", "title": title, "status": status, "detail": detail, **extra}).encode()
    start: Message = {
        "type": "http.response.start",
        "status": status,
        "headers": [
            (b"content-type", b"application/problem+json"),
            (b"content-length", str(len(body)).encode()),
            *(headers or []),
        ],
    }
    return start, {"type": "http.response.body", "body": body}


def _is_upload(scope: Scope) -> bool:
    return scope.get("method") == "POST" and str(scope.get("path", "")).rstrip("/") == UPLOAD_PATH


class BodySizeLimit:
    """Pure ASGI middleware: refuses a body over its limit with 413 problem+json, before the application parses
    a byte past the limit.

    A declared Content-Length over the limit is refused at once. A body without one (chunked) is counted as it
    streams; past the limit the application's ``receive`` raises, and whatever response the application then
    starts (FastAPI turns the interrupted form or JSON parse into a 400) is replaced by the 413.
    """

    def __init__(
        self, app: ASGIApp, limit: int, json_limit: int | None = None, predict_limit: int | None = None
    ) -> None:
        self.app, self.limit = app, limit
        self.json_limit = limit if json_limit is None else json_limit
        self.predict_limit = limit if predict_limit is None else predict_limit

    def _limit_for(self, scope: Scope, headers: dict[bytes, bytes]) -> tuple[int, str]:
        content_type = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
        if content_type == b"multipart/form-data" and _is_upload(scope):
            return self.limit, "max_upload_bytes"
        if scope.get("method") == "POST" and str(scope.get("path", "")).endswith(PREDICT_SUFFIX):
            return self.predict_limit, "max_predict_bytes"  # rows: a data body, not a small JSON request
        return self.json_limit, "max_json_bytes"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers", []))
        limit, setting = self._limit_for(scope, headers)
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._refuse(send, limit, setting)
            return
        received = 0
        exceeded = False
        started = False
        replaced = False

        async def limited_receive() -> Message:
            nonlocal received, exceeded
            if exceeded:
                raise _TooLarge
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    exceeded = True
                    raise _TooLarge
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started, replaced
            if message["type"] == "http.response.start" and exceeded and not started:
                replaced = True  # the application answered the interrupted body (e.g. 400): answer 413 instead
                await self._refuse(send, limit, setting)
            if replaced:
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except _TooLarge:
            if not started and not replaced:
                await self._refuse(send, limit, setting)

    @staticmethod
    async def _refuse(send: Send, limit: int, setting: str) -> None:
        start, body = _problem_messages(413, "Payload Too Large", f"request body exceeds the limit of {limit} bytes "
                                        f"({setting})", setting=setting, limit=limit)  # fmt: skip
        await send(start)
        await send(body)


class _TooLarge(Exception):
    pass


class UploadConcurrencyLimit:
    """Pure ASGI middleware: at most ``limit`` dataset uploads (POST /v1/datasets) in progress in this process.

    One more is answered 429 with ``Retry-After`` immediately, before its body is read, so a burst of large
    uploads cannot multiply the memory and disk an upload needs. The counter lives on the event loop (no lock:
    the check and the increment happen without an ``await`` in between).
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit
        self.active = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _is_upload(scope):
            await self.app(scope, receive, send)
            return
        if self.active >= self.limit:
            start, body = _problem_messages(
                429, "Too Many Requests",
                f"{self.active} dataset uploads are in progress (max_concurrent_uploads = {self.limit}); retry later",
                headers=[(b"retry-after", str(UPLOAD_RETRY_AFTER_SECONDS).encode())],
                setting="max_concurrent_uploads", limit=self.limit,
            )  # fmt: skip
            await send(start)
            await send(body)
            return
        self.active += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.active -= 1


class JsonLimitError(ValueError):
    """A JSON document Python's parser cannot take (too deep, a number literal too long).

    ``loc`` is the path of the offending value from the document's root (keys and list indices) when it is
    known, else empty; the message states the limit, never the value.
    """

    def __init__(self, loc: list[str], message: str) -> None:
        super().__init__(message)
        self.loc, self.message = loc, message


class _LongNumber:
    """Placeholder for a number literal over :data:`MAX_NUMBER_CHARS`, located after parsing."""

    __slots__ = ("chars",)

    def __init__(self, chars: int) -> None:
        self.chars = chars


def loads_limited(document: str | bytes) -> Any:
    """``json.loads(document)``, but nesting past the interpreter's recursion limit, a number literal longer
    than :data:`MAX_NUMBER_CHARS` or invalid UTF-8 raise :class:`JsonLimitError` (a number's error names its
    path) instead of ``RecursionError`` / ``ValueError``. Syntax errors still raise ``json.JSONDecodeError``."""
    long_numbers = 0

    def number(convert: Any) -> Any:
        def parse(text: str) -> Any:
            nonlocal long_numbers
            if len(text) > MAX_NUMBER_CHARS:
                long_numbers += 1
                return _LongNumber(len(text))
            return convert(text)

        return parse

    try:
        value = json.loads(document, parse_int=number(int), parse_float=number(float))
    except RecursionError:
        raise JsonLimitError([], "JSON nesting is too deep") from None
    except UnicodeDecodeError:
        raise JsonLimitError([], "JSON document is not valid UTF-8") from None
    if long_numbers:
        loc, chars = _find_long_number(value)
        raise JsonLimitError(
            loc, f"number literal of {chars} characters exceeds the limit of {MAX_NUMBER_CHARS} characters"
        )
    return value


def _find_long_number(value: Any) -> tuple[list[str], int]:
    """Path and length of the first :class:`_LongNumber` in document order (iterative: no recursion)."""
    stack: list[tuple[list[str], Any]] = [([], value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, _LongNumber):
            return path, item.chars
        if isinstance(item, dict):
            stack.extend(([*path, str(k)], v) for k, v in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend(([*path, str(i)], v) for i, v in reversed(list(enumerate(item))))
    return [], 0  # pragma: no cover - only called when a placeholder exists
