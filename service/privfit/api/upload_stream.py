"""Dataset uploads encoded while their body arrives (issue 40): the multipart body of ``POST /v1/datasets`` is parsed
as it streams in, and the file part's bytes go through a bounded pipe to one thread that spools them to disk and,
for a CSV whose schema came first, encodes them on the way (:func:`privfit.datasets.columnar.encode_csv_stream`).

Without this, Starlette parses the whole form first — the file part written to a spooled temporary file one
network chunk at a time, each write a trip to the threadpool — and the endpoint then reads that file again, twice
for a CSV (the pre-scan, then Arrow). Here:

* :class:`StreamingUploadRoute` is the route class of the upload: before FastAPI's own handler it authenticates
  the caller (an owner key; anyone else gets FastAPI's ordinary parsing and its 401/403, no work is done for them)
  and parses the form with :class:`StreamingFormParser`, a subclass of Starlette's parser with its limits and
  errors (400 for a malformed form), whose result FastAPI then takes as the parsed form (the request's cached
  form). Validation, dependencies, the endpoint and the OpenAPI document are FastAPI's, unchanged.
* The first part named ``file`` becomes a :class:`StreamedUpload` (an ``UploadFile``): the event loop only hands
  its chunks to :class:`BodyPipe` (at most :data:`PIPE_BYTES` buffered; the loop awaits when it is full, so
  TCP's flow control slows the client down), and a thread of its own reads them, writes each to an anonymous
  temporary file (deleted by the OS when closed, or when the process dies: a crash leaves nothing) and, if the
  schema field was sent before the file as text, is valid and declares a CSV, encodes them with Arrow as they
  come. Nothing CPU- or IO-bound runs on the event loop beyond the multipart parsing Starlette does there too.
* The endpoint (:func:`privfit.api.routers.datasets.upload_dataset`) asks :meth:`StreamedUpload.encoded` for the
  result. It gets it only when it was computed from the very schema text the endpoint validated, with the same
  caps; otherwise (Parquet: its footer is at the end; a schema sent after the file or as a file part; any problem
  the streamed encoding declined: an invalid cell, a cap, a too large matrix, quoting) it encodes the spooled
  file exactly as before, which reports the first problem with the same 4xx as always. The streamed result is
  by construction the one that encoding gives (the Arrow path's own acceptance rules, checked before any
  byte reaches Arrow).

Memory: the pipe's bytes, Arrow's blocks and the encoded matrix, as for an upload encoded from its spooled file
(the matrix is allocated for the most rows the declared body can hold: address space, written pages only).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
import threading
from collections import deque
from collections.abc import AsyncGenerator, Callable, Coroutine
from typing import IO, Any, NamedTuple

import numpy as np
from fastapi import HTTPException
from fastapi.concurrency import run_in_threadpool
from fastapi.routing import APIRoute
from starlette.datastructures import Headers, UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.requests import Request
from starlette.responses import Response

from privfit.datasets import DatasetSchema, EncodedDataset, is_parquet_upload
from privfit.datasets.columnar import encode_csv_stream
from privfit.datasets.preprocessing import BatchCounts
from privfit.datasets.schema import counting_clipped_cells
from privfit.settings import Settings

from .auth import authenticate
from .limits import loads_limited

__all__ = [
    "PIPE_BYTES",
    "BodyPipe",
    "StreamedOutcome",
    "StreamedUpload",
    "StreamingFormParser",
    "StreamingUploadRoute",
]

log = logging.getLogger("privfit.api")

#: Bytes of a file part buffered between the event loop and the upload's thread before the loop waits.
PIPE_BYTES = 8 * 1024 * 1024
#: Bytes the upload's thread reads from the pipe at a time when it only spools (Parquet, or after declining).
_SPOOL_BLOCK = 1 << 20


class _Aborted(Exception):
    """The request ended before the file part did (a client that went away, a body over its limit)."""


class BodyPipe:
    """Bytes from the event loop (:meth:`put`, :meth:`finish`, :meth:`abort`) to one thread (:meth:`read`), at
    most ``limit`` bytes buffered: :meth:`put` awaits while the buffer is full (the thread wakes it through the
    loop), :meth:`read` blocks until there are bytes, the end, or an abort (then it raises :class:`_Aborted`).

    Every byte :meth:`read` returns is first written to ``spool`` (the upload's temporary file), so the file holds
    exactly what was read, in order, whatever the reader does with it (unless :attr:`spool_error` says the file
    could not be written)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, spool: IO[bytes], limit: int = PIPE_BYTES) -> None:
        self._loop, self._spool, self._limit = loop, spool, limit
        self._lock = threading.Condition()
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self._ended = False
        self._aborted = False
        self._space = asyncio.Event()
        self._waiting = False  # put() waits for space: read() wakes it
        #: the first error writing the spool (e.g. a full disk): the spool is incomplete, the upload answers 503
        self.spool_error: OSError | None = None

    async def put(self, data: bytes) -> None:
        """Append ``data`` (event loop); waits while ``limit`` bytes are buffered."""
        while True:
            with self._lock:
                if self._aborted:
                    return
                if self._size < self._limit:
                    self._chunks.append(data)
                    self._size += len(data)
                    self._lock.notify()
                    return
                self._space.clear()
                self._waiting = True
            await self._space.wait()

    def finish(self) -> None:
        """The part's end: :meth:`read` returns ``b""`` once the buffer is empty."""
        with self._lock:
            self._ended = True
            self._lock.notify()

    def abort(self) -> None:
        """The request is over before the part ended, or its upload is closed: :meth:`read` raises from now on and
        :meth:`put` drops what it gets. Safe to call from any thread, more than once."""
        with self._lock:
            self._aborted = True
            self._chunks.clear()
            self._size = 0
            self._lock.notify()
        self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
            self._loop.call_soon_threadsafe(self._space.set)

    def read(self, size: int) -> bytes:
        """The next ``size`` bytes (fewer only at the end; ``b""`` there), blocking until they arrived, after
        writing them to the spool (the upload's thread)."""
        parts: list[bytes] = []
        have = 0
        with self._lock:
            while have < size:
                while not self._chunks and not self._ended and not self._aborted:
                    self._lock.wait()
                if self._aborted:
                    raise _Aborted
                if not self._chunks:
                    break  # the end
                chunk = self._chunks.popleft()
                if have + len(chunk) > size:
                    cut = size - have
                    self._chunks.appendleft(chunk[cut:])
                    chunk = chunk[:cut]
                parts.append(chunk)
                have += len(chunk)
                self._size -= len(chunk)
            if self._waiting and self._size < self._limit:
                self._waiting = False
                self._wake()
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        if data and self.spool_error is None:
            try:
                self._spool.write(data)
            except OSError as error:  # recorded, never raised: a reader inside Arrow would take it for a decline
                self.spool_error = error
        return data


class StreamedUpload(UploadFile):
    """The ``file`` part of an upload, spooled (and, for a CSV whose schema came first, encoded) by a thread of its
    own while the body arrives (module docstring). ``file`` is the spool; use it only after :meth:`encoded`
    returned (the thread then no longer writes to it)."""

    def __init__(self, *, filename: str | None, headers: Headers, schema_text: str | None, settings: Settings,
                 body_bytes: int) -> None:  # fmt: skip
        spool = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close(); anonymous: a crash leaves nothing
        super().__init__(file=spool, size=0, filename=filename, headers=headers)
        self._pipe = BodyPipe(asyncio.get_running_loop(), spool)
        self._settings = settings
        self._schema_text = schema_text
        self._parquet = is_parquet_upload(headers.get("content-type"), filename)
        self._body_bytes = body_bytes
        self._done = threading.Event()
        self._outcome: StreamedOutcome | None = None
        self._thread = threading.Thread(target=self._run, name="privfit-upload", daemon=True)
        self._thread.start()

    # the event loop's side (Starlette's parser)

    async def write(self, data: bytes) -> None:
        if self.size is not None:
            self.size += len(data)
        await self._pipe.put(data)

    async def seek(self, offset: int) -> None:
        """Starlette's parser seeks a file part to its start when the part ends: here that is the pipe's end (the
        spool is rewound by whoever reads it, after :meth:`encoded`)."""
        self._pipe.finish()

    async def close(self) -> None:
        """Stop the thread (if the endpoint did not wait for it) and delete the spool."""
        self._pipe.abort()
        if self._thread.is_alive():
            await run_in_threadpool(self._thread.join)
        self.file.close()

    # the upload's thread

    def _run(self) -> None:
        """The thread: encode while the part arrives (when :meth:`_declared` allows), then spool the rest. It reads
        the pipe to its end whatever happens (the event loop must never wait for room forever)."""
        try:
            declared = self._declared()
            if declared is not None:
                try:
                    counts = BatchCounts(declared)
                    with counting_clipped_cells() as clipped:
                        encoded = encode_csv_stream(
                            self._pipe, declared, max_bytes=self._body_bytes,
                            max_matrix_bytes=self._settings.max_matrix_bytes,
                            max_cell_bytes=self._settings.max_cell_bytes, on_rows=counts.add,
                        )  # fmt: skip
                    if encoded is not None:
                        self._outcome = StreamedOutcome(encoded, dict(clipped), counts.totals())
                except _Aborted:
                    raise
                except Exception:  # MemoryError, anything unforeseen: the endpoint's encoding of the spool answers
                    log.debug("streamed encoding declined", exc_info=True)
            while self._pipe.read(_SPOOL_BLOCK):  # the rest of the part, to the spool (all of it, if declined)
                pass
            if self._pipe.spool_error is None:
                try:
                    self.file.flush()
                except OSError as error:
                    self._pipe.spool_error = error
        except _Aborted:
            self._outcome = None
        finally:
            self._done.set()

    def _declared(self) -> DatasetSchema | None:
        """The schema to encode with while the body arrives: only for a CSV whose schema came as text before the
        file, valid and within ``max_json_bytes`` and ``max_features`` (else the endpoint refuses it or encodes
        the spooled file itself)."""
        text, settings = self._schema_text, self._settings
        if self._parquet or text is None or len(text) > settings.max_json_bytes:
            return None
        try:
            declared = DatasetSchema.model_validate(loads_limited(text))
        except Exception:  # the endpoint reports it (422 naming the field)
            return None
        if len(declared.features) > settings.max_features or declared.dimension > settings.max_features:
            return None
        return declared

    # the endpoint's side

    def encoded(self, schema_text: str) -> StreamedOutcome | None:
        """Wait for the thread; what it encoded if it encoded the part from exactly ``schema_text`` (the schema the
        endpoint validated), else None: encode :attr:`file` (the whole part, spooled). 503 (retry) if the part
        could not be spooled. Blocks: call it from the threadpool."""
        self._done.wait()
        if self._pipe.spool_error is not None:
            log.warning("upload spool failed", extra={"error_type": type(self._pipe.spool_error).__name__})
            raise HTTPException(503, "the server could not store the upload's body now; retry later",
                                headers={"Retry-After": "30"})  # fmt: skip
        outcome, self._outcome = self._outcome, None  # taken once: the matrix is the endpoint's from now on
        if outcome is None or schema_text != self._schema_text:
            return None
        return outcome


class StreamedOutcome(NamedTuple):
    """What the upload's thread computed from the rows as they arrived."""

    encoded: EncodedDataset
    #: per numeric column, the cells outside the declared bounds that were clipped (the owner's answer only)
    clipped: dict[str, int]
    #: private preprocessing's exact counts of all the rows (:func:`privfit.datasets.preprocessing.exact_counts`),
    #: summed batch by batch; None when the schema measures nothing or names a privacy unit (its rows are bounded
    #: first)
    counts: np.ndarray | None


class StreamingFormParser(MultiPartParser):
    """Starlette's multipart parser (same limits, same errors) whose first ``file`` part is a
    :class:`StreamedUpload`; the other file parts are spooled as Starlette does."""

    def __init__(self, headers: Headers, stream: AsyncGenerator[bytes, None], settings: Settings,
                 body_bytes: int) -> None:  # fmt: skip
        super().__init__(headers, stream)
        self._settings = settings
        self._body_bytes = body_bytes
        self._streamed: StreamedUpload | None = None

    def on_headers_finished(self) -> None:
        super().on_headers_finished()
        part = self._current_part
        if part.file is None or part.field_name != "file" or self._streamed is not None:
            return
        self._files_to_close_on_error.pop().close()  # Starlette's spooled file, not used
        schema_text = None  # the schema field so far (the last one, as FastAPI takes), if it is text
        for name, value in self.items:
            if name == "schema":
                schema_text = value if isinstance(value, str) else None
        upload = StreamedUpload(filename=part.file.filename, headers=part.file.headers, schema_text=schema_text,
                                settings=self._settings, body_bytes=self._body_bytes)  # fmt: skip
        part.file = self._streamed = upload  # closed by parse() if the body fails, else with the form

    async def parse(self) -> Any:
        """Starlette's parse; the streamed part is closed (its thread stopped, its spool deleted) if the body fails,
        or if the form does not hold it (a body that ended inside the part: FastAPI then refuses the form), else
        it is closed with the form after the request."""
        try:
            form = await super().parse()
        except BaseException:
            if self._streamed is not None:
                await self._streamed.close()
            raise
        if self._streamed is not None and not any(value is self._streamed for _, value in form.multi_items()):
            await self._streamed.close()
        return form


def _boundary_form(request: Request) -> bool:
    return request.headers.get("content-type", "").split(";")[0].strip().lower() == "multipart/form-data"


class StreamingUploadRoute(APIRoute):
    """The route of ``POST /v1/datasets``: an owner's multipart body is parsed by :class:`StreamingFormParser`
    before FastAPI's handler runs (which then finds the form parsed); every other request is FastAPI's as is."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def streaming_handler(request: Request) -> Response:
            if _boundary_form(request) and await _is_owner(request):
                settings: Settings = request.app.state.settings
                declared = request.headers.get("content-length", "")
                body_bytes = int(declared) if declared.isdigit() else settings.max_upload_bytes
                try:
                    async with contextlib.aclosing(request.stream()) as stream:
                        parser = StreamingFormParser(request.headers, stream, settings,
                                                     min(body_bytes, settings.max_upload_bytes))  # fmt: skip
                        request._form = await parser.parse()
                except MultiPartException as error:  # as Starlette's Request.form
                    raise HTTPException(400, error.message) from None
                except HTTPException:
                    raise
                except Exception as error:  # as FastAPI's handler (a body over its limit: BodySizeLimit's 413)
                    raise HTTPException(400, "There was an error parsing the body") from error
            return await handler(request)

        return streaming_handler


async def _is_owner(request: Request) -> bool:
    """Whether the request carries a valid owner key (checked again by the endpoint's dependency): only then is
    the body encoded while it arrives; anyone else's is parsed as FastAPI always does, then refused."""
    try:
        principal = await run_in_threadpool(authenticate, request.app.state.db, request.headers.get("authorization"))
    except Exception:
        return False
    return principal.role == "owner"
