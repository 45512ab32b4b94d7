"""RFC 9457 problem+json responses for every error the API returns, and their place in the OpenAPI contract.

Messages are written for the client and never quote private row values (DESIGN §1.3): dataset validation
errors name the column and line only, solver failures say that the fit failed, not why in data terms.

A transient database fault (:func:`privfit.db.engine.is_transient`) that outlived the retries of the idempotent
operations is a 503 with ``Retry-After: 1``; a value the database refuses (``DataError``) is a 422.

Every route declares each error status it can return with :func:`problem_responses` (``application/problem+json``
with the :class:`ProblemDetails` schema); :func:`finish_openapi` adds that schema to the document and drops the
``422 HTTPValidationError`` FastAPI would otherwise add to routes that cannot return it.

Resources a caller may not see answer exactly like resources that do not exist (:func:`dataset_not_found`,
:func:`fit_not_found`): same status, title, ``code`` and headers; only the requested id is echoed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.exc import DataError, SQLAlchemyError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from privfit.datasets import DatasetValidationError
from privfit.db.engine import is_transient
from privfit.errors import ParameterError
from privfit.ledger import BudgetExceededError

from .encoding import public_json
from .identifiers import MalformedId, malformed_path_id
from .limits import JsonLimitError, loads_limited

PROBLEM_JSON = "application/problem+json"
PROBLEM_SCHEMA_REF = "#/components/schemas/ProblemDetails"


class ProblemError(BaseModel):
    """One validation error: where (``loc``: ``body``/``query``/``path`` then the field's path), what and why."""

    loc: list[str]
    msg: str
    type: str | None = None


class ProblemDetails(BaseModel):
    """An RFC 9457 problem document: every error answer of the API (``application/problem+json``).

    The members below are always (``type``, ``title``, ``status``, ``detail``) or often present; an error may add
    other public members (e.g. ``remaining_epsilon`` of a budget refusal, ``existing_dataset_id`` of a duplicate
    upload, ``setting`` and ``limit`` of a size limit). None of them ever quotes a private row value.
    """

    model_config = ConfigDict(extra="allow")

    type: str = Field("about:blank", description="A URI reference identifying the problem type.")
    title: str = Field(description="A short summary of the problem type.")
    status: int = Field(description="The HTTP status code.")
    detail: str = Field(description="What went wrong in this request, for a person.")
    instance: str | None = Field(None, description="The request path.")
    code: str | None = Field(
        None,
        description="A stable machine-readable code where the problem has one: dataset_not_found, fit_not_found, "
        "key_not_found, grant_not_found; malformed_id (404: the path has something other than an id where an id "
        "belongs, e.g. a dataset's name).",
    )
    errors: list[ProblemError] | None = Field(
        None, description="422: each invalid field; 404 malformed_id: the path parameter (`loc` path, name)."
    )
    field: str | None = Field(None, description="The request field the problem is about.")
    parameter: str | None = Field(None, description="422 Invalid parameter: the solver parameter at fault.")
    setting: str | None = Field(None, description="413/429: the server setting whose limit was reached.")
    limit: int | None = Field(None, description="413/429: that setting's value.")
    max_admissible_epsilon: float | None = Field(
        None,
        description="409 Privacy budget exceeded (a fit): the largest target ε (privacy.epsilon) at which the "
        "dataset's privacy filter would admit the same solver, model and parameters now, rounded down to 4 "
        "significant digits (0 when none is admissible); as in a fit estimate.",
    )
    scope: str | None = Field(
        None,
        description="409 Privacy budget exceeded: `dataset` when the dataset's privacy filter refused, `allocation` "
        "when the caller's allocation's filter did (the ε and δ numbers are then the allocation's).",
    )


#: What each status means across the API (the OpenAPI description of that response).
STATUS_DESCRIPTIONS: dict[int, str] = {
    400: "The request body could not be read (a malformed multipart or JSON stream).",
    401: "Missing, malformed, unknown or revoked API key.",
    403: "The key's role may not do this.",
    404: "No such resource, or one this key may not see (both answer alike).",
    409: "Refused by the server's current state.",
    410: "The dataset was deleted: its data is purged; its ledger stays readable by its owner and admins.",
    413: "The request body, schema or dataset is over a configured size limit (`setting`, `limit`).",
    422: "A field, solver parameter, schema or CSV is invalid; `errors`/`parameter`/`field` say which.",
    429: "Too many concurrent uploads; retry after `Retry-After` seconds.",
    503: "The service cannot complete the request now (e.g. its database is unavailable); retry after "
    "`Retry-After` seconds.",
}

_RETRY_AFTER = {
    "Retry-After": {"description": "Seconds to wait before retrying.", "schema": {"type": "string"}},
}


def problem_responses(*statuses: int, **descriptions: str) -> dict[int | str, dict[str, Any]]:
    """``responses=`` entries for a route: each status as ``application/problem+json`` with the
    :class:`ProblemDetails` schema. ``descriptions`` (``s404="…"``) replace the generic description of a status."""
    responses: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        entry: dict[str, Any] = {
            "description": descriptions.get(f"s{status}", STATUS_DESCRIPTIONS.get(status, _title(status))),
            "content": {PROBLEM_JSON: {"schema": {"$ref": PROBLEM_SCHEMA_REF}}},
        }
        if status in (429, 503):
            entry["headers"] = dict(_RETRY_AFTER)
        responses[status] = entry
    return responses


log = logging.getLogger("privfit.api")

#: ``Retry-After`` of a 503 for a transient database fault (the request changed nothing, or is safe to repeat)
RETRY_AFTER_SECONDS = "1"
DATABASE_UNAVAILABLE = (
    "the database is unavailable for a moment (a dropped connection or a restart); the request was not completed "
    "and can be sent again (with the same Idempotency-Key for a fit)"
)


class Problem(Exception):
    """An error response: HTTP ``status``, a short ``title``, a human ``detail``, extra public members and
    response ``headers``."""

    def __init__(self, status: int, title: str, detail: str, *, headers: dict[str, str] | None = None,
                 **extra: Any) -> None:  # fmt: skip
        super().__init__(detail)
        self.status, self.title, self.detail, self.extra = status, title, detail, extra
        self.headers = dict(headers or {})


def dataset_not_found(dataset_id: str) -> Problem:
    """The one answer for a dataset that does not exist, is deleted (to those who may not read it) or is not
    visible to the caller: nothing in it depends on which."""
    return Problem(404, "Not Found", f"dataset {dataset_id} does not exist", code="dataset_not_found")


def fit_not_found(fit_id: str) -> Problem:
    """The one answer for a fit that does not exist or is not visible to the caller."""
    return Problem(404, "Not Found", f"fit {fit_id} does not exist", code="fit_not_found")


def key_not_found(key_id: str) -> Problem:
    return Problem(404, "Not Found", f"API key {key_id} does not exist", code="key_not_found")


def grant_not_found(dataset_id: str, api_key_id: str) -> Problem:
    return Problem(404, "Not Found", f"dataset {dataset_id} has no grant for API key {api_key_id}",
                   code="grant_not_found")  # fmt: skip


def problem_response(status: int, title: str, detail: str, instance: str | None = None, **extra: Any) -> JSONResponse:
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail, **extra}
    if instance:
        body["instance"] = instance
    return JSONResponse(body, status_code=status, media_type=PROBLEM_JSON)


def install_problem_handlers(app: FastAPI) -> None:
    """Map every error type the layers raise to a problem+json response; nothing escapes as a bare 500."""

    @app.exception_handler(Problem)
    async def _problem(request: Request, error: Problem) -> JSONResponse:
        response = problem_response(error.status, error.title, error.detail, str(request.url.path), **error.extra)
        response.headers.update(error.headers)
        return response

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, error: StarletteHTTPException) -> JSONResponse:
        if _is_json_limit_failure(error):
            return await _json_limit_problem(request)
        if error.status_code == 404 and (malformed := _malformed_id(request)) is not None:  # no route: a bad id?
            return problem_response(404, "Not Found", malformed.detail, request.url.path, **malformed.problem_members())
        response = problem_response(error.status_code, _title(error.status_code), str(error.detail), request.url.path)
        for name, value in (error.headers or {}).items():
            response.headers[name] = value
        if error.status_code == 405:  # Starlette names only the first route matching the path
            response.headers["Allow"] = ", ".join(_allowed_methods(request))
        return response

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, error: RequestValidationError) -> JSONResponse:
        form, content_type = _is_form(request), _content_type(request)
        errors = [
            {"loc": [str(part) for part in item.get("loc", ())], "msg": _message(item, form, content_type),
             "type": item.get("type")}
            for item in error.errors()
        ]  # fmt: skip
        detail = "; ".join(f"{'.'.join(e['loc'])}: {e['msg']}" for e in errors) or "invalid request"
        return problem_response(422, "Invalid request", detail, request.url.path, errors=errors)

    @app.exception_handler(ParameterError)
    async def _parameter(request: Request, error: ParameterError) -> JSONResponse:
        return problem_response(422, "Invalid parameter", str(error), request.url.path, parameter=error.parameter)

    @app.exception_handler(DatasetValidationError)
    async def _dataset(request: Request, error: DatasetValidationError) -> JSONResponse:
        return problem_response(
            422, "Invalid dataset", str(error), request.url.path, column=error.column, line=error.line
        )

    @app.exception_handler(BudgetExceededError)
    async def _budget(request: Request, error: BudgetExceededError) -> JSONResponse:
        fields = public_json(error.problem_fields())
        return problem_response(409, "Privacy budget exceeded", str(error), request.url.path, **fields)

    @app.exception_handler(SQLAlchemyError)
    async def _database(request: Request, error: SQLAlchemyError) -> JSONResponse:
        if isinstance(error, DataError):  # a value the database refuses (e.g. a NUL character, a number overflow)
            return problem_response(422, "Invalid value", "a value of the request cannot be stored (e.g. a NUL "
                                    "character in a string, or a number out of range)", request.url.path)  # fmt: skip
        if is_transient(error):  # after the retries of the idempotent operations: the client may try again
            log.warning("database unavailable", extra={"path": request.url.path, "error_type": type(error).__name__})
            response = problem_response(503, "Service Unavailable", DATABASE_UNAVAILABLE, request.url.path)
            response.headers["Retry-After"] = RETRY_AFTER_SECONDS
            return response
        raise error  # anything else is unexpected: the 500 below, logged with its traceback

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, error: Exception) -> JSONResponse:
        return problem_response(500, "Internal error", "an unexpected error occurred; the request was not completed",
                                request.url.path)  # fmt: skip


def _is_json_limit_failure(error: StarletteHTTPException) -> bool:
    """FastAPI answers 400 "error parsing the body" when ``json.loads`` of a JSON body fails with something other
    than a syntax error: ``RecursionError`` (deep nesting) or ``ValueError`` (an integer of more than 4300 digits,
    invalid UTF-8). Those are the client's malformed input: 422, naming where."""
    cause = error.__cause__
    return (
        error.status_code == 400
        and isinstance(cause, (RecursionError, ValueError))
        and not isinstance(cause, json.JSONDecodeError)
    )


async def _json_limit_problem(request: Request) -> JSONResponse:
    """422 for a JSON body Python cannot parse; re-parsed (off the event loop) with :func:`loads_limited` to name
    the offending field. The body is the one FastAPI already read (≤ max_json_bytes), cached on the request."""
    body = getattr(request, "_body", None)
    loc: list[str] = []
    message = "the JSON body cannot be parsed (nested too deeply or a number literal too long)"
    if isinstance(body, bytes):
        try:
            await run_in_threadpool(loads_limited, body)
        except JsonLimitError as error:
            loc, message = error.loc, error.message
        except ValueError:
            pass
    where = ".".join(["body", *loc])
    errors = [{"loc": ["body", *loc], "msg": message, "type": "json_limit"}]
    return problem_response(422, "Invalid request", f"{where}: {message}", request.url.path, errors=errors)


#: What a missing or empty form field of an upload should hold (FastAPI reports both as "Field required").
_FORM_FIELDS = {
    "schema": "the dataset's public schema as JSON (label, features, missing, budget): a text field "
    "(-F schema=<schema.json) or a file part (-F schema=@schema.json)",
    "file": "the CSV file, as a file part (-F file=@data.csv)",
}


def _content_type(request: Request) -> str:
    """The request's media type, lower case, without parameters ("" without the header)."""
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


def _is_form(request: Request) -> bool:
    return _content_type(request) in ("multipart/form-data", "application/x-www-form-urlencoded")


def _malformed_id(request: Request) -> MalformedId | None:
    """For a 404 of the routing (no route matched): the id path parameter holding something else, if that is why
    (:func:`~privfit.api.identifiers.malformed_path_id`)."""
    root, path = str(request.scope.get("root_path", "")), request.url.path
    return malformed_path_id(_route_paths(request.app.router.routes), path.removeprefix(root) if root else path)


def _route_paths(routes: list[Any]) -> list[str]:
    """The path templates of the app's routes, those of included routers too (which this FastAPI keeps nested:
    :func:`fastapi.routing.iter_route_contexts` walks them; older versions list them flat)."""
    try:
        from fastapi.routing import iter_route_contexts
    except ImportError:  # pragma: no cover - FastAPI before nested included routers
        return [path for route in routes if isinstance(path := getattr(route, "path", None), str)]
    return [path for context in iter_route_contexts(routes) if isinstance(path := context.path, str)]


#: FastAPI reads a body as JSON only when its Content-Type says JSON: anything else (curl -d sends
#: application/x-www-form-urlencoded; no header at all) reaches validation as bytes, "not an object".
_NOT_READ_AS_JSON = frozenset({"model_attributes_type", "dict_type", "model_type", "missing"})


def _message(item: Any, form: bool, content_type: str = "") -> str:
    """A validation error's message; a missing form field (which includes one sent empty) says what it must hold,
    and a JSON body sent without ``Content-Type: application/json`` says to send that header."""
    loc = tuple(item.get("loc", ()))
    json_sent = content_type == "application/json" or content_type.endswith("+json")
    if loc == ("body",) and item.get("type") in _NOT_READ_AS_JSON and not json_sent:
        sent = f"Content-Type: {content_type}" if content_type else "no Content-Type"
        return (
            f"{item.get('msg', '')}: the body must be a JSON object sent with the header Content-Type: "
            f"application/json (this request has {sent}; with curl: -H 'Content-Type: application/json')"
        )
    if form and item.get("type") == "missing" and len(loc) == 2 and loc[0] == "body":
        what = _FORM_FIELDS.get(str(loc[1]))
        if what:
            return f"the form field is missing or empty: send {what}"
        return "the form field is missing or empty"
    if item.get("type") == "extra_forbidden" and loc[-2:] in _EXTRA_FIELD_HINTS:
        return _EXTRA_FIELD_HINTS[loc[-2:]]
    return str(item.get("msg", ""))


#: Fields users send by analogy that the API does not take, with what to do instead (issue 24).
_EXTRA_FIELD_HINTS = {
    ("privacy", "delta"): "δ is not chosen per request: every fit and evaluation uses the δ of the dataset's budget "
    "(its delta_max, shown by GET /v1/datasets/{id}); send only privacy.epsilon",
}


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "QUERY")


def _allowed_methods(request: Request) -> list[str]:
    """Every method some route serves at the request's path (a 405's ``Allow``): the methods for which the app's
    routing fully matches the path (included routers answer for their own routes)."""
    routes = request.app.router.routes
    scope = dict(request.scope)
    return [
        method
        for method in _METHODS
        if any(route.matches({**scope, "method": method})[0] == Match.FULL for route in routes)
    ]


def finish_openapi(app: FastAPI) -> Callable[[], dict[str, Any]]:
    """The app's ``openapi()``: FastAPI's document plus the :class:`ProblemDetails` schema the error responses
    refer to, without the generic ``422 HTTPValidationError`` entries of routes that declare their own statuses
    (a route whose parameters cannot fail validation, e.g. an id path parameter, does not answer 422)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        document = get_openapi(
            title=app.title, version=app.version, summary=app.summary, description=app.description,
            routes=app.routes, separate_input_output_schemas=app.separate_input_output_schemas,
        )  # fmt: skip
        schemas = document.setdefault("components", {}).setdefault("schemas", {})
        problem = ProblemDetails.model_json_schema(ref_template="#/components/schemas/{model}", mode="serialization")
        schemas.update(problem.pop("$defs", {}))
        schemas["ProblemDetails"] = problem
        generic = {"$ref": "#/components/schemas/HTTPValidationError"}
        for path in document.get("paths", {}).values():
            for operation in path.values():
                responses = operation.get("responses", {})
                unprocessable = responses.get("422", {}).get("content", {}).get("application/json", {})
                if unprocessable.get("schema") == generic:
                    del responses["422"]
        if "HTTPValidationError" not in json.dumps(document["paths"]):
            schemas.pop("HTTPValidationError", None)
            schemas.pop("ValidationError", None)
        app.openapi_schema = document
        return document

    return openapi


def _title(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"
