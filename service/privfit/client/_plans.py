"""The client's requests without their IO: every v1 endpoint as a *plan*, shared by :class:`~privfit.client.Client`
(blocking, ``httpx.Client``) and :class:`~privfit.client.AsyncClient` (asyncio, ``httpx.AsyncClient``).

A plan is a generator (the "sans-IO" pattern, as in h11 and httpx's own core): it yields the IO it needs as a
:data:`Step` — :class:`Send` (one HTTP exchange), :class:`Pause` (a back-off), :class:`Stream` (a streamed answer fed
to a sink) — and the driver answers each step with its outcome, the value sent back into the generator or the
exception thrown into it at the ``yield``. The plan's return value is the method's answer. So every method's logic —
the request it builds, the retry policy, name resolution, paging, waiting, the typed errors — is written once, here,
and the two clients differ only in how they perform a step (``Client._perform`` blocks, ``AsyncClient._perform``
awaits). A plan that reads a page of a list returns a :class:`Batch`: its items and the plan of the next batch.

Retries (``retries`` extra attempts, exponential back-off from ``backoff`` seconds, ``Retry-After`` honoured):

* a request that never reached the server (connection refused, connect timeout) is retried whatever it is;
* requests without side effects (GET, estimate, predict, cancel) are also retried on read timeouts, dropped
  connections and 429 / 502 / 503 / 504;
* fit creation is retried in the same cases, always with the same ``Idempotency-Key`` (a fresh UUID unless the
  caller passes one): the server answers a repeat with the fit it already admitted, so a retry can never charge
  the budget twice;
* an evaluation is retried like fit creation, with one ``Idempotency-Key``: charged at most once;
* key revocation is retried like a request without side effects: revoking a revoked key changes nothing;
* uploads, deletes (of datasets, grants and allocations), key creation and setting an allocation (a repeat would
  be a 409: an allocation is fixed once set) are not retried once sent.

Names or ids: every method that takes a dataset (``dataset_id``) accepts its id or its name
(:func:`resolve_dataset`). A value in the form of an id (a UUID) is sent as it is; anything else is looked up among
the datasets this key may see (``GET /v1/datasets``, live datasets only): exactly one with that name is used, none
raises :class:`UnknownDatasetNameError` (a :class:`~privfit.client.errors.NotFoundError`), several raise
:class:`AmbiguousDatasetNameError` listing their ids. The API itself takes ids only.
"""

from __future__ import annotations

import difflib
import io
import json
import math
import re
import time
import unicodedata
import uuid
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO, Generic, TypeVar, cast
from urllib.parse import parse_qs, urlsplit

import httpx

from privfit import __version__

from .errors import (
    ApiError,
    ConflictError,
    FitFailedError,
    NotFoundError,
    PrivfitError,
    TransportError,
    WaitTimeoutError,
    error_for,
)
from .events import HEARTBEAT_SECONDS, EventParser
from .models import (
    Allocation,
    ApiKeyInfo,
    ApiObject,
    Budget,
    CreatedKey,
    Dataset,
    Estimate,
    Evaluation,
    EvaluationEstimate,
    Fit,
    FitPrivacy,
    FitResult,
    Grant,
    LedgerEntry,
    LedgerPage,
    Me,
    Page,
    Prediction,
    SolverInfo,
)

RETRY_STATUSES = frozenset({429, 502, 503, 504})

#: The page size the list methods ask for while iterating every page: the API's maximum (docs/client.md, "Pages").
PAGE_SIZE = 1000

T = TypeVar("T")
_Item = TypeVar("_Item", bound=ApiObject)

#: What ``upload_dataset`` accepts as data: a path (CSV or ``.parquet``), CSV or Parquet bytes or CSV text, a binary
#: file, or a pandas DataFrame.
CsvSource = str | Path | bytes | BinaryIO | Any
#: The ``Content-Type`` a Parquet upload is sent with (the server also recognises a ``.parquet`` file name).
PARQUET_CONTENT_TYPE = "application/vnd.apache.parquet"
_PARQUET_MAGIC = b"PAR1"
#: What ``upload_dataset`` accepts as schema: a dict, a JSON string, or a path to a JSON file.
SchemaSource = Mapping[str, Any] | str | Path

#: The form of every id the service issues (``str(uuid.uuid4())``, either case): such a value is always an id.
_ID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
#: How to see the names this key may use, in the messages of the two errors below.
_HOW_TO_LIST = "list them with `privfit datasets list` (GET /v1/datasets)"


# --- steps: the IO a plan asks its driver for ---------------------------------------------------------------------
@dataclass(frozen=True)
class Send:
    """One HTTP exchange, ``httpx.Client.request(method, path, **options)``: answered with the ``httpx.Response``
    (whatever its status), or the transport's exception is thrown into the plan."""

    method: str
    path: str
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Pause:
    """Wait ``seconds`` (``time.sleep`` or ``asyncio.sleep``): a back-off between attempts or polls."""

    seconds: float


#: A sink reads a streamed answer: created with the response (its headers; its body already read if the status is
#: 400 or more), it is sent each piece of the body (text lines or byte chunks), then None at the end, and returns
#: (``StopIteration.value``) the step's answer — at the end or earlier, which closes the stream.
Sink = Generator[None, Any, Any]


@dataclass(frozen=True)
class Stream:
    """A streamed exchange (``httpx.Client.stream``): the body is fed to ``sink(response)`` as ``lines`` of text or
    byte chunks; answered with what the sink returns. The stream is closed before the answer reaches the plan."""

    method: str
    path: str
    sink: Callable[[httpx.Response], Sink]
    options: Mapping[str, Any] = field(default_factory=dict)
    lines: bool = True


Step = Send | Pause | Stream
#: A method's logic: yields steps, is sent their outcomes, returns the method's answer.
Plan = Generator[Step, Any, T]


@dataclass(frozen=True)
class Batch(Generic[T]):
    """One page's items and the plan that reads the next page (None after the last): what the ``iter_*`` methods'
    plans return, iterated by the clients one request at a time."""

    items: list[T]
    following: Plan[Batch[T]] | None


def feed(sink: Sink, piece: Any) -> tuple[bool, Any]:
    """Send one piece (None: the end) to a started sink: (True, its answer) once it has returned, else (False, None).
    A sink that has not returned at the end answers None."""
    try:
        sink.send(piece)
    except StopIteration as done:
        return True, done.value
    return piece is None, None


def start(sink: Sink) -> tuple[bool, Any]:
    """Start a sink (up to its first ``yield``): (True, its answer) if it returned at once, else (False, None)."""
    try:
        next(sink)
    except StopIteration as done:
        return True, done.value
    return False, None


class Session:
    """What a client is configured with (the base URL, the request timeout, the retry policy) and the headers of
    every request; the plans read it. :class:`~privfit.client.Client` and :class:`~privfit.client.AsyncClient` add
    an httpx client and a driver."""

    def __init__(self, url: str, *, timeout: float, retries: int, backoff: float) -> None:
        if retries < 0:
            raise ValueError("retries must be >= 0")
        self.url = url.rstrip("/")
        self.timeout, self.retries, self.backoff = timeout, retries, backoff

    @staticmethod
    def headers(api_key: str | None) -> dict[str, str]:
        """The headers every request carries: the client's name and version, JSON answers, the key if any."""
        headers = {"User-Agent": f"privfit-client/{__version__}", "Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        return headers


# --- the transport: one request with the retry policy (module docstring) -------------------------------------------
def request(s: Session, method: str, path: str, *, retry: bool, **options: Any) -> Plan[httpx.Response]:
    """Send with the retry policy of the module docstring; raise the typed error for a 4xx/5xx answer."""
    attempt = 0
    while True:
        try:
            response = yield Send(method, path, options)
        except (httpx.ConnectError, httpx.ConnectTimeout) as error:  # never reached the server
            if attempt >= s.retries:
                raise TransportError(f"cannot reach {s.url}: {error}") from error
        except httpx.TransportError as error:
            if not retry or attempt >= s.retries:
                raise TransportError(f"{method} {path} to {s.url} failed: {error}") from error
        else:
            if response.status_code < 400:
                return response
            if not (retry and response.status_code in RETRY_STATUSES and attempt < s.retries):
                raise _error(response)
            if delay := _retry_after(response):
                yield Pause(delay)
        yield Pause(min(10.0, s.backoff * 2**attempt))
        attempt += 1


def call(s: Session, method: str, path: str, *, retry: bool = True, **options: Any) -> Plan[Any]:
    """A request's JSON answer."""
    response = yield from request(s, method, path, retry=retry, **options)
    return response.json()


def _page(s: Session, path: str, model: type[_Item], params: Mapping[str, Any] | None = None) -> Plan[Page[_Item]]:
    """One page of a list endpoint: its items and the ``Link: <…>; rel="next"`` of the answer (URL and cursor)."""
    response = yield from request(s, "GET", path, retry=True, params=params)
    following = response.links.get("next", {}).get("url")
    cursor = parse_qs(urlsplit(following).query).get("cursor", [None])[0] if following else None
    return Page([model.from_json(item) for item in response.json()], following, cursor)


def _batches(s: Session, path: str, model: type[_Item], params: Mapping[str, Any] | None) -> Plan[Batch[_Item]]:
    """A list endpoint from its first page of :data:`PAGE_SIZE` items (``params`` given) or from a ``rel="next"``
    link (``params`` None), each next page following the answer's link: oldest first, each item once, also while
    items are created meanwhile (later ones come on later pages)."""
    query = None if params is None else {**params, "limit": PAGE_SIZE}
    page = yield from _page(s, path, model, query)
    return Batch(page.items, None if page.next is None else _batches(s, page.next, model, None))


def every(first: Plan[Batch[T]]) -> Plan[list[T]]:
    """Every item of a listing, all its batches read one after the other."""
    batch = yield from first
    items = list(batch.items)
    while batch.following is not None:
        batch = yield from batch.following
        items.extend(batch.items)
    return items


# --- service -----------------------------------------------------------------------------------------------------
def health(s: Session) -> Plan[bool]:
    """``GET /healthz``: the process is up."""
    answer = yield from call(s, "GET", "/healthz")
    return answer.get("status") == "ok"


def ready(s: Session) -> Plan[dict[str, Any]]:
    """``GET /readyz``: the database (and broker) answer and the schema is current; raises if not."""
    return (yield from call(s, "GET", "/readyz"))


def me(s: Session) -> Plan[Me]:
    """``GET /v1/me``: the key's id, role and name."""
    return Me.from_json((yield from call(s, "GET", "/v1/me")))


def create_key(s: Session, role: str, name: str = "") -> Plan[CreatedKey]:
    """``POST /v1/keys`` (admins): a new key of ``role``; its secret is in the answer only."""
    answer = yield from call(s, "POST", "/v1/keys", retry=False, json={"role": role, "name": name})
    return CreatedKey.from_json(answer)


def keys(s: Session) -> Plan[list[ApiKeyInfo]]:
    """``GET /v1/keys`` (admins): every API key, oldest first, with its role, name and revocation time; never a
    secret (every page)."""
    return (yield from every(_batches(s, "/v1/keys", ApiKeyInfo, {})))


def revoke_key(s: Session, key_id: str) -> Plan[None]:
    """``DELETE /v1/keys/{id}`` (admins): the key is refused (401) from its next request on, in every API
    process; its queued fits are cancelled (reservations released) and its running fits stop at their next step
    (a fit that read rows keeps its charge). Idempotent; a key cannot revoke itself (409)."""
    yield from request(s, "DELETE", f"/v1/keys/{key_id}", retry=True)


def solvers(s: Session) -> Plan[list[SolverInfo]]:
    """``GET /v1/solvers``: every enabled solver with its models and parameter schema."""
    return [SolverInfo.from_json(item) for item in (yield from call(s, "GET", "/v1/solvers"))]


# --- datasets ----------------------------------------------------------------------------------------------------
def upload_dataset(
    s: Session,
    data: CsvSource,
    schema: SchemaSource,
    *,
    name: str | None = None,
    allow_duplicate: bool = False,
    privacy_domain: str | None = None,
) -> Plan[Dataset]:
    """``POST /v1/datasets`` (owners): a CSV or Parquet file with its declared public schema and budget.

    ``data`` is a path, CSV or Parquet bytes, a binary file object, or a pandas DataFrame (written with
    ``to_csv``, without its index; its column names must be the schema's). A path or file whose name ends in
    ``.parquet``, or bytes or a seekable file starting with Parquet's magic ``PAR1``, is sent as Parquet; a path
    or binary file is streamed, not read into memory first. ``schema`` is a dict, a JSON string or a path
    to a JSON file. ``name`` defaults to the file's name. Content this owner already uploaded (a live dataset
    with the same encoded data) is refused with :class:`ConflictError` naming the existing dataset
    (``existing_dataset_id``) unless ``allow_duplicate`` — the copy would get a separate, fresh budget — or
    unless it joins that dataset's privacy domain. ``privacy_domain`` (a dataset of yours, by id or name) registers
    the data into that dataset's privacy domain: both then spend one budget (docs/governance.md).
    """
    form = {"schema": _schema_json(schema)}
    if allow_duplicate:
        form["allow_duplicate"] = "true"
    if privacy_domain is not None:
        form["privacy_domain"] = yield from resolve_dataset(s, privacy_domain)
    filename, content = _upload_payload(data)
    form["name"] = name if name is not None else filename
    parquet = filename.lower().endswith(".parquet")
    files = {"file": (filename, content, PARQUET_CONTENT_TYPE if parquet else "text/csv")}
    try:
        return Dataset.from_json((yield from call(s, "POST", "/v1/datasets", retry=False, data=form, files=files)))
    finally:
        if isinstance(data, str | Path) and not isinstance(content, bytes):
            content.close()  # the file this method opened


def datasets(s: Session) -> Plan[list[Dataset]]:
    """``GET /v1/datasets``: the (live) datasets this key may see, oldest first (every page)."""
    return (yield from every(_batches(s, "/v1/datasets", Dataset, {})))


def datasets_page(s: Session, *, limit: int | None = None, cursor: str | None = None) -> Plan[Page[Dataset]]:
    """One page of ``GET /v1/datasets``: ``limit`` datasets (the server's default 100, at most 1000) after
    ``cursor`` (a previous page's ``Page.cursor``; None: the first page)."""
    return (yield from _page(s, "/v1/datasets", Dataset, _page_params({}, limit, cursor)))


def resolve_dataset(s: Session, dataset: str) -> Plan[str]:
    """The id of ``dataset``, given as an id or as a name (every ``dataset_id`` argument goes through this).

    A value in the form of an id (a UUID) is returned as it is, with no request: the server says whether it
    exists. Any other value is a name, looked up among the datasets this key may see (``GET /v1/datasets``:
    live datasets; a deleted one is reached by its id) by exact match in Unicode NFC, the form names are stored
    in. Raises :class:`UnknownDatasetNameError` (a :class:`~privfit.client.errors.NotFoundError`; with up to
    three similar names) if none has it, and :class:`AmbiguousDatasetNameError` (listing their ids) if several
    do: a name never silently picks one of several datasets, as the budget spent would then be another's.
    """
    if is_id(dataset):
        return dataset
    name = unicodedata.normalize("NFC", dataset)
    visible = yield from datasets(s)
    matches = [d for d in visible if d.name == name]
    if len(matches) == 1:
        return matches[0].id
    if matches:
        raise AmbiguousDatasetNameError(name, matches)
    names = sorted({d.name for d in visible})
    similar = [n for n in names if n.casefold() == name.casefold()] or difflib.get_close_matches(name, names, 3)
    raise UnknownDatasetNameError(name, similar, url=f"{s.url}/v1/datasets")


def _dataset_path(s: Session, dataset_id: str, rest: str = "") -> Plan[str]:
    """``/v1/datasets/{id}`` + ``rest`` of a dataset given by id or name."""
    return f"/v1/datasets/{(yield from resolve_dataset(s, dataset_id))}{rest}"


def dataset(s: Session, dataset_id: str) -> Plan[Dataset]:
    """``GET /v1/datasets/{id}``: public metadata (``dataset_id``: an id or a name)."""
    return Dataset.from_json((yield from call(s, "GET", (yield from _dataset_path(s, dataset_id)))))


def delete_dataset(s: Session, dataset_id: str) -> Plan[None]:
    """``DELETE /v1/datasets/{id}`` (its owner): purge the rows; the ledger is kept."""
    yield from request(s, "DELETE", (yield from _dataset_path(s, dataset_id)), retry=False)


def grant(s: Session, dataset_id: str, api_key_id: str) -> Plan[None]:
    """``POST /v1/datasets/{id}/grants`` (its owner): let an analyst key fit the dataset (idempotent)."""
    path = yield from _dataset_path(s, dataset_id, "/grants")
    yield from request(s, "POST", path, retry=True, json={"api_key_id": api_key_id})


def grants(s: Session, dataset_id: str) -> Plan[list[Grant]]:
    """``GET /v1/datasets/{id}/grants`` (its owner, admins): the analyst keys granted the dataset (every page)."""
    return (yield from every(_batches(s, (yield from _dataset_path(s, dataset_id, "/grants")), Grant, {})))


def revoke_grant(s: Session, dataset_id: str, api_key_id: str) -> Plan[None]:
    """``DELETE /v1/datasets/{id}/grants/{key id}`` (its owner, admins): the analyst can no longer see or fit
    the dataset; its queued fits on it are cancelled and its running ones stop (a fit that read rows keeps its
    charge). A grant that does not exist is :class:`~privfit.client.errors.NotFoundError`."""
    yield from request(s, "DELETE", (yield from _dataset_path(s, dataset_id, f"/grants/{api_key_id}")), retry=False)


def allocate(s: Session, dataset_id: str, api_key_id: str, epsilon: float, delta: float) -> Plan[Allocation]:
    """``PUT /v1/datasets/{id}/allocations/{key id}`` (its owner, admins): give a granted analyst key the share
    (``epsilon``, ``delta``) of the dataset's budget; from then on its fits and evaluations on the dataset are
    admitted only within both the allocation and the dataset's budget. An allocation is fixed once set: a
    second one is :class:`~privfit.client.errors.ConflictError` (``remove_allocation`` first); a share over the
    dataset's budget or a key not granted the dataset is
    :class:`~privfit.client.errors.InvalidRequestError` naming the ``field``."""
    path = yield from _dataset_path(s, dataset_id, f"/allocations/{api_key_id}")
    body = {"epsilon": float(epsilon), "delta": float(delta)}
    return Allocation.from_json((yield from call(s, "PUT", path, retry=False, json=body)))


def allocations(s: Session, dataset_id: str) -> Plan[list[Allocation]]:
    """``GET /v1/datasets/{id}/allocations``: every allocation of the dataset's budget, with what each analyst
    has used and has left (its owner, admins), or the caller's own (an analyst: an empty list when it has none)."""
    return (yield from every(_batches(s, (yield from _dataset_path(s, dataset_id, "/allocations")), Allocation, {})))


def remove_allocation(s: Session, dataset_id: str, api_key_id: str) -> Plan[None]:
    """``DELETE /v1/datasets/{id}/allocations/{key id}`` (its owner, admins): the analyst then spends from the
    dataset's budget alone; its fits stay in the ledger. An allocation that does not exist is
    :class:`~privfit.client.errors.NotFoundError`."""
    path = yield from _dataset_path(s, dataset_id, f"/allocations/{api_key_id}")
    yield from request(s, "DELETE", path, retry=False)


def budget(s: Session, dataset_id: str, *, rdp: bool = False) -> Plan[Budget]:
    """``GET /v1/datasets/{id}/budget``: limits, spent / reserved / remaining ε and the caller's own allocation
    (``Budget.allocation``); with ``rdp`` also the grid's orders and the committed RDP curve (``include=rdp``)."""
    path = yield from _dataset_path(s, dataset_id, "/budget")
    return Budget.from_json((yield from call(s, "GET", path, params=_include(rdp))))


def ledger(s: Session, dataset_id: str, *, limit: int = 100, offset: int = 0, rdp: bool = False) -> Plan[LedgerPage]:
    """``GET /v1/datasets/{id}/ledger``: one page of entries, oldest first; with ``rdp`` each entry's RDP
    curve too."""
    params = {"limit": limit, "offset": offset, **_include(rdp)}
    path = yield from _dataset_path(s, dataset_id, "/ledger")
    return LedgerPage.from_json((yield from call(s, "GET", path, params=params)))


def iter_ledger(s: Session, dataset_id: str, *, page_size: int = 1000, rdp: bool = False) -> Plan[Batch[LedgerEntry]]:
    """Every ledger entry of the dataset, oldest first, fetched page by page (with their curves if ``rdp``)."""
    dataset_id = yield from resolve_dataset(s, dataset_id)  # once, not per page
    return (yield from _ledger_batches(s, dataset_id, page_size, 0, rdp))


def _ledger_batches(s: Session, dataset_id: str, page_size: int, offset: int, rdp: bool) -> Plan[Batch[LedgerEntry]]:
    page = yield from ledger(s, dataset_id, limit=page_size, offset=offset, rdp=rdp)
    offset += len(page.entries)
    last = not page.entries or offset >= page.total
    return Batch(page.entries, None if last else _ledger_batches(s, dataset_id, page_size, offset, rdp))


def export_ledger(s: Session, dataset_id: str, destination: BinaryIO) -> Plan[int]:
    """``GET /v1/datasets/{id}/ledger/export`` (owners, admins): the ledger with its hash chain as JSON lines,
    streamed into ``destination`` (a binary file); the number of bytes written. Check the file offline with
    :func:`privfit.ledger.chain.verify` (``privfit ledger verify FILE``). Not retried once bytes were written."""
    path = yield from _dataset_path(s, dataset_id, "/ledger/export")
    written = 0

    def write(response: httpx.Response) -> Sink:
        nonlocal written
        if response.status_code >= 400:
            raise _error(response)
        while (chunk := (yield)) is not None:
            destination.write(chunk)
            written += len(chunk)
        return written

    try:
        return cast(int, (yield Stream("GET", path, write, lines=False)))
    except httpx.TransportError as error:
        raise TransportError(f"GET {path} to {s.url} failed after {written} bytes: {error}") from error


# --- fits --------------------------------------------------------------------------------------------------------
def estimate(
    s: Session,
    dataset_id: str,
    *,
    model: str = "logistic",
    solver: str = "dp_gd",
    epsilon: float | None = None,
    params: Mapping[str, Any] | None = None,
    rdp: bool = False,
) -> Plan[Estimate]:
    """``POST /v1/fits/estimate``: the cost of a proposed fit and what would remain (of the caller's allocation
    too: ``Estimate.allocation``); charges nothing. With ``rdp``, the cost carries its RDP curve
    (``include=rdp``)."""
    body = _fit_body((yield from resolve_dataset(s, dataset_id)), model, solver, epsilon, params)
    return Estimate.from_json((yield from call(s, "POST", "/v1/fits/estimate", json=body, params=_include(rdp))))


def fit(
    s: Session,
    dataset_id: str,
    *,
    model: str = "logistic",
    solver: str = "dp_gd",
    epsilon: float | None = None,
    params: Mapping[str, Any] | None = None,
    idempotency_key: str | None = None,
) -> Plan[Fit]:
    """``POST /v1/fits``: request a fit. The ledger admits it (a queued :class:`Fit`) or refuses it
    (:class:`~privfit.client.errors.BudgetExceededError`). Retried safely with one ``Idempotency-Key``."""
    body = _fit_body((yield from resolve_dataset(s, dataset_id)), model, solver, epsilon, params)
    headers = {"Idempotency-Key": idempotency_key or str(uuid.uuid4())}
    return Fit.from_json((yield from call(s, "POST", "/v1/fits", json=body, headers=headers)))


def fits(
    s: Session, dataset_id: str | None = None, *, status: str | None = None, solver: str | None = None
) -> Plan[list[Fit]]:
    """``GET /v1/fits``: every fit this key may see (every page), oldest first — a dataset's (``dataset_id``, an
    id or a name) or all of them (an analyst's own, an owner's on its datasets, every fit to admins) — in
    ``status`` (queued, running, succeeded, failed, cancelled) and of ``solver`` if given. ``iter_fits``
    yields them page by page; ``fits_page`` gets one page."""
    return (yield from every(iter_fits(s, dataset_id, status=status, solver=solver)))


def iter_fits(
    s: Session, dataset_id: str | None = None, *, status: str | None = None, solver: str | None = None
) -> Plan[Batch[Fit]]:
    """The fits of ``fits``, fetched a page (1000 fits) at a time as the iteration reaches them."""
    filters = yield from _fit_filters(s, dataset_id, status, solver)
    return (yield from _batches(s, "/v1/fits", Fit, filters))


def fits_page(
    s: Session,
    dataset_id: str | None = None,
    *,
    status: str | None = None,
    solver: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Plan[Page[Fit]]:
    """One page of ``fits``: ``limit`` fits (the server's default 100, at most 1000) after ``cursor`` (the
    ``Page.cursor`` of the previous page, with the same filters; None: the first page)."""
    filters = yield from _fit_filters(s, dataset_id, status, solver)
    return (yield from _page(s, "/v1/fits", Fit, _page_params(filters, limit, cursor)))


def _fit_filters(s: Session, dataset_id: str | None, status: str | None, solver: str | None) -> Plan[dict[str, str]]:
    resolved = None if dataset_id is None else (yield from resolve_dataset(s, dataset_id))
    filters = {"dataset_id": resolved, "status": status, "solver": solver}
    return {name: value for name, value in filters.items() if value is not None}


def get_fit(s: Session, fit_id: str, *, rdp: bool = False) -> Plan[Fit]:
    """``GET /v1/fits/{id}``: status, progress and, when succeeded, the result; with ``rdp`` the cost's RDP
    curve too (``include=rdp``)."""
    return Fit.from_json((yield from call(s, "GET", f"/v1/fits/{fit_id}", params=_include(rdp))))


def fit_privacy(s: Session, fit_id: str) -> Plan[FitPrivacy]:
    """``GET /v1/fits/{id}/privacy``: the fit's whole cost, its RDP curve with the grid's orders."""
    return FitPrivacy.from_json((yield from call(s, "GET", f"/v1/fits/{fit_id}/privacy")))


def cancel(s: Session, fit_id: str) -> Plan[Fit]:
    """``POST /v1/fits/{id}/cancel``: a queued fit is released, a running one stops (its charge is kept once it
    has read rows, refunded before)."""
    return Fit.from_json((yield from call(s, "POST", f"/v1/fits/{fit_id}/cancel")))


def wait(
    s: Session,
    fit: Fit | str,
    *,
    timeout: float | None = None,
    poll_interval: float = 0.25,
    max_poll_interval: float = 2.0,
    on_progress: Callable[[Fit], None] | None = None,
    raise_on_failure: bool = True,
) -> Plan[Fit]:
    """Follow a fit until it finishes: its live events (``GET /v1/fits/{id}/events``), or polling where a stream
    cannot say; ``on_progress(fit)`` (a plain function) is called with every state seen.

    Returns the finished fit. Raises :class:`~privfit.client.errors.FitFailedError` if it failed or was
    cancelled (unless ``raise_on_failure`` is false) and :class:`~privfit.client.errors.WaitTimeoutError`
    after ``timeout`` seconds (the fit goes on running).
    """
    fit_id = fit if isinstance(fit, str) else fit.id
    deadline = None if timeout is None else time.monotonic() + timeout
    streamed = yield from _wait_streamed(s, fit_id, deadline, on_progress)
    if streamed is not None:
        if raise_on_failure and streamed.status != "succeeded":
            raise FitFailedError(streamed)
        return streamed
    interval = poll_interval
    while True:
        current = yield from get_fit(s, fit_id)
        if on_progress is not None:
            on_progress(current)
        if current.finished:
            if raise_on_failure and current.status != "succeeded":
                raise FitFailedError(current)
            return current
        if deadline is not None and time.monotonic() >= deadline:
            raise WaitTimeoutError(current, timeout or 0.0)
        yield Pause(interval if deadline is None else max(0.0, min(interval, deadline - time.monotonic())))
        interval = min(max_poll_interval, interval * 1.5)


def _wait_streamed(
    s: Session, fit_id: str, deadline: float | None, on_progress: Callable[[Fit], None] | None
) -> Plan[Fit | None]:
    """Follow ``GET /v1/fits/{id}/events`` until the fit finishes: the finished fit, or None when the stream
    cannot say (a server without events, every stream slot taken (429), the stream ended early — timeout or a
    stopping server —, a dropped connection, the deadline inside a quiet stretch): the caller then polls, which
    also raises the errors of a fit that cannot be read. ``on_progress`` sees every state the stream sends."""
    remaining = None if deadline is None else deadline - time.monotonic()
    read_timeout = 2 * HEARTBEAT_SECONDS if remaining is None else max(0.1, min(2 * HEARTBEAT_SECONDS, remaining))

    def follow(response: httpx.Response) -> Sink:
        if response.status_code != 200:
            return None
        parser = EventParser()
        while (line := (yield)) is not None:
            event = parser.feed(line)
            if event is None:
                continue
            if event.event != "fit":
                return None  # "end" before a terminal state: poll
            current = Fit.from_json(json.loads(event.data))
            if on_progress is not None:
                on_progress(current)
            if current.finished:
                return current
            if deadline is not None and time.monotonic() >= deadline:
                return None
        return None

    options = {"headers": {"Accept": "text/event-stream"}, "timeout": httpx.Timeout(s.timeout, read=read_timeout)}
    try:
        return cast("Fit | None", (yield Stream("GET", f"/v1/fits/{fit_id}/events", follow, options)))
    except (httpx.TransportError, ValueError):
        return None


def predict(
    s: Session, fit_id: str, rows: Sequence[Mapping[str, Any]] | Any, *, unknown_category: str = "error"
) -> Plan[Prediction]:
    """``POST /v1/fits/{id}/predict``: predictions for your own rows (dicts by column, or a DataFrame).
    ``unknown_category="ignore"`` encodes a level the dataset's schema does not declare as an all-zero one-hot
    block instead of refusing the rows (the default, ``"error"``)."""
    body = {"rows": _rows(rows), "unknown_category": unknown_category}
    return Prediction.from_json((yield from call(s, "POST", f"/v1/fits/{fit_id}/predict", json=body)))


def evaluate(
    s: Session,
    fit_id: str,
    *,
    epsilon: float,
    metrics: Sequence[str] | None = None,
    confidence: float | None = None,
    idempotency_key: str | None = None,
) -> Plan[Evaluation]:
    """``POST /v1/fits/{id}/evaluate``: DP metrics of a succeeded fit on its dataset's private validation rows,
    each with an interval, charged ``epsilon`` on the dataset's ledger (or refused:
    :class:`~privfit.client.errors.BudgetExceededError`). ``metrics`` default to all that apply. Retried safely
    with one ``Idempotency-Key``."""
    body = _evaluation_body(epsilon, metrics, confidence)
    headers = {"Idempotency-Key": idempotency_key or str(uuid.uuid4())}
    return Evaluation.from_json((yield from call(s, "POST", f"/v1/fits/{fit_id}/evaluate", json=body, headers=headers)))


def estimate_evaluation(
    s: Session, fit_id: str, *, epsilon: float, metrics: Sequence[str] | None = None
) -> Plan[EvaluationEstimate]:
    """``POST /v1/fits/{id}/evaluate/estimate``: what ``evaluate`` would cost and whether the budget admits
    it; charges nothing."""
    body = _evaluation_body(epsilon, metrics, None)
    return EvaluationEstimate.from_json((yield from call(s, "POST", f"/v1/fits/{fit_id}/evaluate/estimate", json=body)))


def evaluations(s: Session, fit_id: str) -> Plan[list[Evaluation]]:
    """``GET /v1/fits/{id}/evaluations``: the fit's private evaluations, oldest first (every page)."""
    return (yield from every(_batches(s, f"/v1/fits/{fit_id}/evaluations", Evaluation, {})))


def fit_result(s: Session, fit_id: str) -> Plan[FitResult]:
    """A succeeded fit's release (``GET /v1/fits/{id}``) with its dataset's schema attached (``GET
    /v1/datasets/{id}``: the declared schema with the transforms derived by private preprocessing), so that
    ``client.fit_result(fit_id).to_sklearn()`` needs no argument. A fit that has not succeeded is a
    :class:`~privfit.client.errors.ConflictError` (409 "Fit not finished", as ``/predict`` answers)."""
    current = yield from get_fit(s, fit_id)
    if current.status != "succeeded" or current.result is None:
        detail = f"fit {current.id} is {current.status}; a scikit-learn model needs a succeeded fit"
        problem = {"type": "about:blank", "title": "Fit not finished", "status": 409, "detail": detail}
        raise ConflictError(409, problem, method="GET", url=f"{s.url}/v1/fits/{current.id}")
    described = yield from dataset(s, current.dataset_id)
    return replace(current.result, _dataset_schema=described.schema)


def to_sklearn(s: Session, fit_id: str, *, unknown_category: str = "error") -> Plan[Any]:
    """A succeeded fit as a fitted scikit-learn ``Pipeline`` predicting what ``/predict`` answers:
    ``fit_result(fit_id).to_sklearn()`` (:func:`privfit.client.sklearn_export.to_sklearn`; the ``sklearn``
    extra). A fit that estimated a statistic (``dp_lazy_oco``'s ``mean``) is a
    :class:`~privfit.client.errors.ConflictError` (409 "Not a predictor", as ``/predict`` answers)."""
    result = yield from fit_result(s, fit_id)
    if not result.predictor:
        detail = f"fit {fit_id} estimated a statistic of the features (model {result.model!r}); it does not predict"
        problem = {"type": "about:blank", "title": "Not a predictor", "status": 409, "detail": detail}
        raise ConflictError(409, problem, method="GET", url=f"{s.url}/v1/fits/{fit_id}")
    return result.to_sklearn(unknown_category=unknown_category)


def export_onnx(
    s: Session, fit_id: str, destination: str | Path | BinaryIO, *, unknown_category: str = "error"
) -> Plan[int]:
    """``GET /v1/fits/{id}/model.onnx``: a succeeded fit as an ONNX model (its dataset's encoding and the released
    model in one graph; onnxruntime's ``scores``, ``label`` and ``probabilities`` are ``/predict``'s answers),
    written to ``destination`` — a path (under a ``.partial`` name until it is whole) or a binary file —; the
    number of bytes written. ``unknown_category="ignore"`` encodes an undeclared level as an all-zero one-hot
    block; by default the model refuses the row (NaN scores, an empty label). 409 (not succeeded, not a
    predictor) and 410 (dataset deleted) as for ``predict``. Running the model needs onnxruntime (the
    ``onnx`` extra); docs/client.md, "An ONNX model"."""
    accept = {"Accept": "application/octet-stream, application/problem+json"}
    response = yield from request(s, "GET", f"/v1/fits/{fit_id}/model.onnx", retry=True, headers=accept,
                                  params={"unknown_category": unknown_category})  # fmt: skip
    content = response.content
    if not isinstance(destination, str | Path):
        destination.write(content)
        return len(content)
    target = Path(destination)
    partial = target.with_name(target.name + ".partial")
    try:
        partial.write_bytes(content)
        partial.replace(target)  # a file named as asked only once the whole model is in it
    finally:
        partial.unlink(missing_ok=True)
    return len(content)


# --- errors of dataset names ---------------------------------------------------------------------------------------
def is_id(value: str) -> bool:
    """Whether ``value`` has the form of an id the service issues (a UUID): then it is never read as a name."""
    return _ID.fullmatch(value) is not None


class UnknownDatasetNameError(NotFoundError):
    """No dataset this key may see has the name given where a dataset was expected (raised by the client after
    ``GET /v1/datasets``, with a problem document of the API's shape: ``title``, ``detail``, ``name``,
    ``similar``). A :class:`~privfit.client.errors.NotFoundError`, like the 404 an unknown id gets."""

    def __init__(self, name: str, similar: Sequence[str] = (), *, url: str = "") -> None:
        hint = f"; did you mean {', '.join(repr(s) for s in similar)}?" if similar else ""
        detail = (f"no dataset named {name!r} among the datasets this key may see{hint} ({_HOW_TO_LIST}, or pass "
                  "the dataset's id)")  # fmt: skip
        problem = {"type": "about:blank", "title": "No dataset of that name", "status": 404, "detail": detail,
                   "name": name, "similar": list(similar)}  # fmt: skip
        super().__init__(404, problem, method="GET", url=url)
        self.args = (detail,)  # a client-side finding: no HTTP status in the message
        self.name, self.similar = name, list(similar)


class AmbiguousDatasetNameError(PrivfitError, LookupError):
    """Several datasets this key may see have the name given where one dataset was expected; ``matches`` are
    those datasets (oldest first): pass one of their ids instead."""

    def __init__(self, name: str, matches: Sequence[Dataset]) -> None:
        self.name, self.matches = name, list(matches)
        listed = "; ".join(f"{d.id} (created {_created(d)}, n = {d.n})" for d in self.matches)
        super().__init__(f"{len(self.matches)} datasets this key may see are named {name!r}: {listed}; pass the id "
                         "of the one you mean")  # fmt: skip


def _created(dataset: Dataset) -> str:
    return dataset.created_at.isoformat(sep=" ", timespec="seconds") if dataset.created_at else "?"


def _page_params(filters: Mapping[str, Any], limit: int | None, cursor: str | None) -> dict[str, Any]:
    """A list request's query: its filters, and ``limit`` and ``cursor`` when given."""
    paging = {"limit": limit, "cursor": cursor}
    return {**filters, **{name: value for name, value in paging.items() if value is not None}}


def _include(rdp: bool) -> dict[str, str]:
    """The query of an answer with its RDP arrays (``include=rdp``) or without them (the API's lean default)."""
    return {"include": "rdp"} if rdp else {}


def _evaluation_body(epsilon: float, metrics: Sequence[str] | None, confidence: float | None) -> dict[str, Any]:
    body: dict[str, Any] = {"privacy": {"epsilon": float(epsilon)}}
    if metrics is not None:
        body["metrics"] = list(metrics)
    if confidence is not None:
        body["confidence"] = float(confidence)
    return body


def _error(response: httpx.Response) -> ApiError:
    try:
        problem = response.json()
    except ValueError:
        problem = None
    if not isinstance(problem, dict):
        problem = {"title": response.reason_phrase or "Error", "status": response.status_code,
                   "detail": response.text[:500]}  # fmt: skip
    return error_for(response.status_code, problem, method=response.request.method, url=str(response.request.url))


def _retry_after(response: httpx.Response) -> float:
    """A numeric ``Retry-After`` (capped at 30 s), waited before the regular back-off; 0 without one."""
    value = response.headers.get("retry-after", "")
    return float(min(30, int(value))) if value.isdigit() else 0.0


def _fit_body(
    dataset_id: str, model: str, solver: str, epsilon: float | None, params: Mapping[str, Any] | None
) -> dict[str, Any]:
    privacy = {} if epsilon is None else {"epsilon": float(epsilon)}
    return {
        "dataset_id": dataset_id,
        "model": model,
        "solver": solver,
        "privacy": privacy,
        "params": dict(params or {}),
    }


def _upload_payload(data: CsvSource) -> tuple[str, bytes | BinaryIO]:
    """(file name, bytes or an open binary file) of an upload source; a path is opened, not read."""
    if hasattr(data, "to_csv"):  # a pandas DataFrame
        return "dataframe.csv", data.to_csv(index=False).encode()
    if isinstance(data, str | Path):
        path = Path(data)
        return path.name, path.open("rb")
    if isinstance(data, bytes):
        return ("data.parquet" if data.startswith(_PARQUET_MAGIC) else "data.csv"), data
    if isinstance(data, io.IOBase) or hasattr(data, "read"):
        name = Path(str(getattr(data, "name", "data.csv"))).name
        if isinstance(data, io.TextIOBase):
            return name, data.read().encode()
        stream = cast(BinaryIO, data)
        if not name.lower().endswith(".parquet") and getattr(stream, "seekable", lambda: False)():
            start = stream.tell()
            if stream.read(len(_PARQUET_MAGIC)) == _PARQUET_MAGIC:
                name = f"{Path(name).stem}.parquet"
            stream.seek(start)
        return name, stream
    raise TypeError("data must be a path, bytes, a binary file or a pandas DataFrame")


def _schema_json(schema: SchemaSource) -> str:
    """The schema as a JSON string (a dict, a JSON string, or a path to a JSON file)."""
    if isinstance(schema, Mapping):
        return json.dumps(schema)
    if isinstance(schema, Path) or (isinstance(schema, str) and not schema.lstrip().startswith("{")):
        return Path(schema).read_text()
    return schema


def _rows(rows: Sequence[Mapping[str, Any]] | Any) -> list[dict[str, Any]]:
    """Rows as JSON-ready dicts; a DataFrame's missing values (NaN) become null."""
    records = rows.to_dict(orient="records") if hasattr(rows, "to_dict") else rows
    return [{k: _json_value(v) for k, v in dict(record).items()} for record in records]


def _json_value(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value
