"""The FastAPI application factory: routers, problem+json errors, body limit, database, store, workers."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import FastAPI
from fastapi.concurrency import run_in_threadpool

from privfit import __version__
from privfit.datasets.lifecycle import StoreMismatchError, check_store
from privfit.datasets.store import make_store
from privfit.db import make_database
from privfit.db.migrate import upgrade
from privfit.jobs import WorkerPool
from privfit.jobs.dispatch import PollingDispatcher, make_dispatcher
from privfit.jobs.sweeper import OrphanSweeper
from privfit.privacy.noise import configure_sampler
from privfit.scaleout.source import row_source
from privfit.settings import Settings, get_settings
from privfit.solvers.design_cache import configure_design_cache
from privfit.ui import mount_ui

from .admission import AdmissionGroups
from .events import EventStreams
from .headroom import HeadroomCache
from .limits import BodySizeLimit, UploadConcurrencyLimit
from .planning import EstimateCache, PlanCache
from .problems import finish_openapi, install_problem_handlers
from .reference import install_api_reference
from .routers import allocations, datasets, evaluations, fits, health, keys, ledger_export, solvers

log = logging.getLogger("privfit.api")


def create_app(settings: Settings | None = None, *, run_workers: bool | None = None) -> FastAPI:
    """Build the app. With SQLite the schema is migrated at start-up; with ``queue == "embedded"`` (default)
    a worker pool runs inside the process (``run_workers`` overrides this, e.g. for tests); with ``"celery"``
    new jobs are published to the broker after their row is committed (:mod:`privfit.jobs.dispatch`). At start-up
    the dataset store is checked against the database (:func:`~privfit.datasets.lifecycle.check_store`) and orphaned
    data is swept, then every ``orphan_sweep_seconds``."""
    settings = settings or get_settings()
    start_pool = settings.queue == "embedded" if run_workers is None else run_workers

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        anyio.to_thread.current_default_thread_limiter().total_tokens = settings.api_threads
        previous_sampler = configure_sampler(settings.noise_sampler)  # the process's noise (privacy/noise.py)
        previous_designs = configure_design_cache(settings.design_cache_bytes)  # dp_gd's shared designs
        db = make_database(
            settings.database_url,
            retry_attempts=settings.db_retry_attempts,
            retry_backoff=settings.db_retry_backoff_seconds,
        )
        if db.is_sqlite:
            upgrade(settings.database_url)
        app.state.db = db
        app.state.admissions = AdmissionGroups(db)
        app.state.store = make_store(settings, db)
        # A data directory that holds none of the live datasets while another does: refuse to start (clear error).
        try:
            await run_in_threadpool(check_store, db, app.state.store)
        except StoreMismatchError as error:
            log.error("refusing to start: %s", error)
            db.dispose()
            raise
        app.state.orphans = OrphanSweeper(db, app.state.store, settings)
        await run_in_threadpool(app.state.orphans.sweep)  # what a crash left behind, before serving
        app.state.orphans.start()
        app.state.workers = None
        app.state.dispatcher = make_dispatcher(settings)
        if start_pool:
            app.state.workers = WorkerPool(
                db, app.state.store, size=settings.workers, lease_seconds=settings.lease_seconds,
                heartbeat_seconds=settings.heartbeat_seconds, poll_seconds=settings.poll_seconds,
                cancel_poll_seconds=settings.cancel_poll_seconds, max_attempts=settings.fit_max_attempts,
                rows=row_source(settings),
            )  # fmt: skip
            app.state.workers.start()
            app.state.dispatcher = PollingDispatcher(app.state.workers)
            if settings.preload_kernels:
                from privfit.solvers.warmup import preload_in_background

                preload_in_background()
        try:
            yield
        finally:
            app.state.orphans.stop()
            if app.state.workers is not None:  # running fits go back to the queue within the grace period
                await run_in_threadpool(app.state.workers.stop, settings.stop_grace_seconds)
            db.dispose()
            configure_sampler(previous_sampler)
            configure_design_cache(previous_designs)

    app = FastAPI(
        title="privfit",
        version=__version__,
        summary="Differentially private model fitting with a Rényi-DP privacy ledger.",
        lifespan=lifespan,
        docs_url=None,  # FastAPI's /docs and /redoc load from a CDN: install_api_reference serves /docs offline
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.plans = PlanCache()  # fit plans by their public inputs (estimates and admissions)
    app.state.headroom = HeadroomCache()  # the largest admissible ε of a fit request, by its public inputs
    app.state.estimates = EstimateCache()  # estimate answers, by the plan's inputs and the filters' state
    # GET /v1/fits/{id}/events: the open streams of this process, bounded (api/events.py)
    app.state.event_streams = EventStreams(settings.max_event_streams, settings.event_poll_seconds,
                                           settings.event_stream_seconds)  # fmt: skip
    app.openapi = finish_openapi(app)  # type: ignore[method-assign]
    install_problem_handlers(app)
    for router in (health.router, keys.router, datasets.router, allocations.router, ledger_export.router, fits.router,
                   evaluations.router, solvers.router):  # fmt: skip
        app.include_router(router)
    mount_ui(app)
    install_api_reference(app)
    app.add_middleware(BodySizeLimit, limit=settings.max_upload_bytes, json_limit=settings.max_json_bytes,
                       predict_limit=settings.max_predict_bytes)  # fmt: skip
    app.add_middleware(UploadConcurrencyLimit, limit=settings.max_concurrent_uploads)  # outermost: before any read
    return app
