"""Pages of the list endpoints (issue 38, item 4): ``?limit=N&cursor=…``, the next page in a ``Link`` header.

Every list endpoint that can grow with use answers one page at a time: at most ``limit`` items (default
:data:`DEFAULT_PAGE_SIZE`, at most :data:`MAX_PAGE_SIZE`; more is a 422 naming ``limit``), oldest first by creation
time with the id as tie-breaker. The body stays the JSON list it always was; when more items follow, the answer
carries an RFC 8288 ``Link: </v1/fits?limit=100&cursor=…>; rel="next"`` header — the same request with the cursor of
the page's last item — and the last page has none. No total is counted (``X-Total-Count`` would cost a count of
every visible row per page).

Keyset, not offset: a cursor names the position after the last item shown — its ``(created_at, id)`` — and the next
page is ``WHERE (created_at, id) > (…) ORDER BY created_at, id LIMIT n`` on an index, so a page costs the same at
any depth, and items created or deleted between two requests neither repeat nor skip an item of the listing: new
items (created now, later than every cursor) come on later pages, and a deleted one is simply not there. (``created_at``
is the creating process's clock: an item created by a process whose clock lags a walk's cursor comes before it, and
that walk does not show it; a new walk does.)

A cursor is opaque to clients (base64url of a small JSON array: a format version, the listing it belongs to, and
the position) and is checked before any query: a malformed cursor, or one from another listing — another endpoint,
dataset, fit or filter — is a 422 naming ``cursor``. It carries no authority: every page applies the caller's
visibility again, so a forged cursor only moves where a page of what the caller may see starts. A query parameter
a paged list does not take is a 422 naming it: a misspelt filter (``?stauts=failed``) would otherwise list everything.

The ledger (``GET /v1/datasets/{id}/ledger``) keeps its ``limit``/``offset`` page with ``total`` (append-only and
ordered by entry id, an offset never shifts) and gets the same ``Link`` header; the solver catalogue
(``GET /v1/solvers``) is not paged: it lists the solvers this server's code registers, a dozen, whatever the data.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Generic, TypeVar
from urllib.parse import urlencode

from fastapi import Depends, Query, Request, Response
from fastapi.routing import APIRoute
from sqlalchemy import Select, literal, tuple_
from sqlalchemy.orm import InstrumentedAttribute

from .encoding import utc
from .identifiers import is_resource_id, normalize_id
from .problems import Problem

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000
#: far above any cursor the API issues (about 150 characters)
MAX_CURSOR_LENGTH = 512
_VERSION = 1

LIMIT_HELP = (
    f"Items per page: {DEFAULT_PAGE_SIZE} by default, at most {MAX_PAGE_SIZE} (more is a 422 naming `limit`). The "
    'answer\'s `Link` header names the next page (rel="next"); the last page has none.'
)
CURSOR_HELP = (
    'Where the page starts: the `cursor` of the previous answer\'s `Link: <…>; rel="next"` URL, passed as it is '
    "(opaque). Omit it for the first page. A cursor another listing (endpoint, dataset, fit or filter) issued, or a "
    "malformed one, is a 422 naming `cursor`."
)

#: The ``headers`` of a paged list's 200 answer in the OpenAPI document.
LINK_HEADER = {
    "Link": {
        "description": 'RFC 8288: `<URL>; rel="next"`, the next page (this request with the cursor after this page\'s '
        "last item); absent on the last page.",
        "schema": {"type": "string"},
    }
}


def paged(description: str = "One page of the list, oldest first.") -> dict[int | str, dict[str, Any]]:
    """The ``responses=`` entry of a paged list's 200 answer: its ``Link`` header."""
    return {200: {"description": description, "headers": LINK_HEADER}}


@dataclass(frozen=True)
class PageRequest:
    """The ``limit`` and ``cursor`` query parameters of a paged list, and the 422 of a query parameter the list does
    not take (raised by :class:`Keyset`, in the endpoint: after authentication and the role check)."""

    limit: int
    cursor: str | None
    refused: Problem | None = None


def page_request(
    request: Request,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE, description=LIMIT_HELP)] = DEFAULT_PAGE_SIZE,
    cursor: Annotated[str | None, Query(min_length=1, max_length=MAX_CURSOR_LENGTH, description=CURSOR_HELP)] = None,
) -> PageRequest:
    """The page asked for; a query parameter the list does not take is a 422 naming it (a misspelt filter,
    ``?stauts=failed``, would otherwise list everything)."""
    route = request.scope.get("route")
    if isinstance(route, APIRoute):
        known = _query_parameters(route)
        unknown = [name for name in request.query_params if name not in known]
        if unknown:
            message = f"this list takes no such parameter; it takes {', '.join(sorted(known))}"
            name = unknown[0] if len(unknown[0]) <= 80 else f"{unknown[0][:80]}…"  # echoed, at most 80 characters
            return PageRequest(limit, cursor, query_problem(name, message))
    return PageRequest(limit, cursor)


def _query_parameters(route: APIRoute) -> frozenset[str]:
    """The names of the query parameters ``route`` declares, its dependencies' included (cached on the route)."""
    cached = route.__dict__.get("_privfit_query_parameters")
    if cached is None:
        names: set[str] = set()
        pending = [route.dependant]
        while pending:
            dependant = pending.pop()
            names.update(field.alias for field in dependant.query_params)
            pending.extend(dependant.dependencies)
        cached = route.__dict__["_privfit_query_parameters"] = frozenset(names)
    return cached


#: A paged endpoint's ``limit`` and ``cursor`` (a dependency: both appear as query parameters).
Paging = Annotated[PageRequest, Depends(page_request)]


def query_problem(name: str, message: str) -> Problem:
    """A 422 about the query parameter ``name``, shaped as FastAPI's own (``errors`` with ``loc`` ``["query",
    name]``) and naming it in ``field``."""
    return Problem(422, "Invalid request", f"query.{name}: {message}", field=name,
                   errors=[{"loc": ["query", name], "msg": message, "type": "value_error"}])  # fmt: skip


def _bad_cursor(reason: str) -> Problem:
    return query_problem("cursor", f"{reason}; pass the cursor of the previous page's Link: rel=\"next\" as it is, or "
                         "omit it for the first page")  # fmt: skip


Position = tuple[datetime, Any]
"""Where an item sits in a listing: its ``(created_at, id)``."""

T = TypeVar("T")


class Keyset(Generic[T]):
    """One paged listing ordered by ``(created_at, id)``: the page request checked against the listing's ``scope``
    (the endpoint and every filter or path id, so a cursor of another listing is refused), its ``WHERE``/``ORDER
    BY``/``LIMIT`` and the cursor after the page.

    ``integer_ids``: the listing's ids are integers (grants, allocations) rather than UUIDs."""

    def __init__(self, paging: PageRequest, scope: Sequence[object], *, integer_ids: bool = False) -> None:
        if paging.refused is not None:
            raise paging.refused
        self.limit = paging.limit
        self.integer_ids = integer_ids
        self.scope = hashlib.sha256(json.dumps([str(part) for part in scope]).encode()).hexdigest()[:16]
        self.after: Position | None = None if paging.cursor is None else self._decode(paging.cursor)

    # --- cursors --------------------------------------------------------------------------------------------
    def cursor(self, position: Position) -> str:
        created, key = position
        document = [_VERSION, self.scope, utc(created).isoformat(), key]
        return base64.urlsafe_b64encode(json.dumps(document, separators=(",", ":")).encode()).decode().rstrip("=")

    def _decode(self, cursor: str) -> Position:
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
            document = json.loads(raw.decode("utf-8"))
        except (binascii.Error, ValueError):
            raise _bad_cursor("not a cursor this API issued") from None
        if not (isinstance(document, list) and len(document) == 4 and document[0] == _VERSION):
            raise _bad_cursor("not a cursor this API issued")
        _, scope, created, key = document
        if scope != self.scope:
            raise _bad_cursor("this cursor belongs to another listing (another endpoint, dataset, fit or filter)")
        try:
            position = utc(datetime.fromisoformat(created))
        except (TypeError, ValueError):
            raise _bad_cursor("not a cursor this API issued") from None
        if self.integer_ids:
            if not (type(key) is int and 0 <= key < 2**63):
                raise _bad_cursor("not a cursor this API issued")
        elif not (isinstance(key, str) and is_resource_id(key)):
            raise _bad_cursor("not a cursor this API issued")
        else:
            key = normalize_id(key)
        return position, key

    # --- queries --------------------------------------------------------------------------------------------
    def select(self, query: Select[Any], created: InstrumentedAttribute[Any], key: InstrumentedAttribute[Any]) -> Any:
        """``query`` restricted to the items after the cursor, in listing order, one more than a page (to know
        whether another page follows). ``created >= t`` beside the row comparison keeps the condition a range of the
        ``(…, created_at, id)`` index on either database."""
        if self.after is not None:
            at, last = self.after
            query = query.where(
                created >= literal(at, created.type),
                tuple_(created, key) > tuple_(literal(at, created.type), literal(last, key.type)),
            )
        return query.order_by(created, key).limit(self.limit + 1)

    def page(self, rows: Sequence[T], position: Callable[[T], Position]) -> tuple[list[T], str | None]:
        """The page of ``rows`` (as :meth:`select` fetched them, or a whole listing's items in order, filtered by
        :meth:`follows`) and the cursor of the next page (None on the last)."""
        items = list(rows[: self.limit])
        more = len(rows) > self.limit
        return items, (self.cursor(position(items[-1])) if more and items else None)

    def follows(self, position: Position) -> bool:
        """Whether an item at ``position`` comes after the cursor (for listings ordered in Python)."""
        if self.after is None:
            return True
        at, last = self.after
        created = utc(position[0])
        return created > at or (created == at and position[1] > last)


def link_next(request: Request, response: Response, cursor: str | None, **replace: Any) -> None:
    """Set ``Link: <…>; rel="next"`` on ``response`` when ``cursor`` (or, for an offset page, ``replace``) names a
    next page: the request's own path and query with ``cursor`` (and ``replace``) put in."""
    if cursor is None and not replace:
        return
    changes = {**replace, **({"cursor": cursor} if cursor is not None else {})}
    kept = [(name, value) for name, value in request.query_params.multi_items() if name not in changes]
    query = urlencode(kept + [(name, str(value)) for name, value in changes.items()])
    response.headers["Link"] = f'<{request.url.path}?{query}>; rel="next"'
