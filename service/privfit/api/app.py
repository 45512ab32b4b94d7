"""The FastAPI application factory: routers, problem+json errors, body limit, database, store, workers."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from privfit import __version__
from privfit.datasets.store import make_store
from privfit.db import make_database
from privfit.db.migrate import upgrade
from privfit.jobs import WorkerPool
from privfit.jobs.dispatch import PollingDispatcher, make_dispatcher
from privfit.settings import Settings, get_settings
from privfit.ui import mount_ui

from .limits import BodySizeLimit
from .problems import install_problem_handlers
from .routers import datasets, fits, health, keys, solvers

log = logging.getLogger("privfit.api")


def create_app(settings: Settings | None = None, *, run_workers: bool | None = None) -> FastAPI:
    """Build the app. With SQLite the schema is migrated at start-up; with ``queue == "embedded"`` (default)
    a worker pool runs inside the process (``run_workers`` overrides this, e.g. for tests); with ``"celery"``
    new jobs are published to the broker after their row is committed (:mod:`privfit.jobs.dispatch`)."""
    settings = settings or get_settings()
    start_pool = settings.queue == "embedded" if run_workers is None else run_workers

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        db = make_database(settings.database_url)
        if db.is_sqlite:
            upgrade(settings.database_url)
        app.state.db = db
        app.state.store = make_store(settings, db)
        app.state.workers = None
        app.state.dispatcher = make_dispatcher(settings)
        if start_pool:
            app.state.workers = WorkerPool(
                db, app.state.store, size=settings.workers, lease_seconds=settings.lease_seconds,
                heartbeat_seconds=settings.heartbeat_seconds, poll_seconds=settings.poll_seconds,
            )  # fmt: skip
            app.state.workers.start()
            app.state.dispatcher = PollingDispatcher(app.state.workers)
        try:
            yield
        finally:
            if app.state.workers is not None:
                app.state.workers.stop()
            db.dispose()

    app = FastAPI(
        title="privfit",
        version=__version__,
        summary="Differentially private model fitting with a Rényi-DP privacy ledger.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    install_problem_handlers(app)
    for router in (health.router, keys.router, datasets.router, fits.router, solvers.router):
        app.include_router(router)
    mount_ui(app)
    app.add_middleware(BodySizeLimit, limit=settings.max_upload_bytes)
    return app
