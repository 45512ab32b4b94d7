"""RFC 9457 problem+json responses for every error the API returns.

Messages are written for the client and never quote private row values (DESIGN §1.3): dataset validation
errors name the column and line only, solver failures say that the fit failed, not why in data terms.

A transient database fault (:func:`privfit.db.engine.is_transient`) that outlived the retries of the idempotent
operations is a 503 with ``Retry-After: 1``; a value the database refuses (``DataError``) is a 422.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError, SQLAlchemyError
from starlette.exceptions import HTTPException as StarletteHTTPException

from privfit.datasets import DatasetValidationError
from privfit.db.engine import is_transient
from privfit.errors import ParameterError
from privfit.ledger import BudgetExceededError

from .encoding import public_json
from .limits import JsonLimitError, loads_limited

PROBLEM_JSON = "application/problem+json"

log = logging.getLogger("privfit.api")

#: ``Retry-After`` of a 503 for a transient database fault (the request changed nothing, or is safe to repeat)
RETRY_AFTER_SECONDS = "1"
DATABASE_UNAVAILABLE = (
    "the database is unavailable for a moment (a dropped connection or a restart); the request was not completed "
    "and can be sent again (with the same Idempotency-Key for a fit)"
)


class Problem(Exception):
    """An error response: HTTP ``status``, a short ``title``, a human ``detail`` and extra public members."""

    def __init__(self, status: int, title: str, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.status, self.title, self.detail, self.extra = status, title, detail, extra


def problem_response(status: int, title: str, detail: str, instance: str | None = None, **extra: Any) -> JSONResponse:
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail, **extra}
    if instance:
        body["instance"] = instance
    return JSONResponse(body, status_code=status, media_type=PROBLEM_JSON)


def install_problem_handlers(app: FastAPI) -> None:
    """Map every error type the layers raise to a problem+json response; nothing escapes as a bare 500."""

    @app.exception_handler(Problem)
    async def _problem(request: Request, error: Problem) -> JSONResponse:
        return problem_response(error.status, error.title, error.detail, str(request.url.path), **error.extra)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, error: StarletteHTTPException) -> JSONResponse:
        if _is_json_limit_failure(error):
            return await _json_limit_problem(request)
        response = problem_response(error.status_code, _title(error.status_code), str(error.detail), request.url.path)
        for name, value in (error.headers or {}).items():
            response.headers[name] = value
        return response

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, error: RequestValidationError) -> JSONResponse:
        errors = [
            {"loc": [str(part) for part in item.get("loc", ())], "msg": item.get("msg", ""), "type": item.get("type")}
            for item in error.errors()
        ]
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


def _title(status: int) -> str:
    from http import HTTPStatus

    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"
