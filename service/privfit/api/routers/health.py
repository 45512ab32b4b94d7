"""Liveness and readiness: no authentication."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy import text

router = APIRouter(tags=["health"])


class Health(BaseModel):
    status: Literal["ok"]


class Readiness(BaseModel):
    status: Literal["ready", "not ready"]
    checks: dict[str, str] = Field(description="database, schema (and broker): 'ok' or what is wrong.")


@router.get("/healthz", response_model=Health, summary="The process is up")
def healthz() -> Health:
    return Health(status="ok")


@router.get(
    "/readyz",
    response_model=Readiness,
    summary="The database (and, with queue 'celery', the broker) is reachable; the schema is current",
    responses={503: {"model": Readiness, "description": "Not ready: `checks` says what is not."}},
)
def readyz(request: Request) -> JSONResponse:
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    from privfit.db.migrate import alembic_config

    db = request.app.state.db
    checks: dict[str, str] = {}
    try:
        with db.engine.connect() as connection:
            connection.execute(text("SELECT 1"))
            current = MigrationContext.configure(connection).get_current_revision()
        head = ScriptDirectory.from_config(alembic_config(str(db.engine.url))).get_current_head()
        checks["database"] = "ok"
        checks["schema"] = "ok" if current == head else f"at {current}, expected {head}"
    except Exception as error:
        checks["database"] = f"unreachable: {type(error).__name__}"
    settings = request.app.state.settings
    if settings.queue == "celery":
        from privfit.jobs.celery_app import broker_problem

        problem = broker_problem(settings.broker_url)
        checks["broker"] = "ok" if problem is None else f"unreachable: {problem.split(':')[0]}"
    ready = all(value == "ok" for value in checks.values()) and "schema" in checks
    return JSONResponse(
        {"status": "ready" if ready else "not ready", "checks": checks}, status_code=200 if ready else 503
    )
