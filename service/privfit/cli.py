"""The ``privfit`` command: the server side (``serve``, ``worker``, ``migrate``, ``keys create``) and the client
commands of :mod:`privfit.client.cli` (``datasets``, ``fit``, ``estimate``, ``fits``, ``predict``, ``budget``,
``ledger``, ``solvers``, ``whoami``)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from privfit.client.cli import add_client_commands, add_global_options
from privfit.logs import configure_logging
from privfit.privacy.noise import configure_sampler
from privfit.settings import Settings, get_settings


def _serve(args: argparse.Namespace) -> int:
    """The API in ``--workers`` processes (default ``PRIVFIT_API_WORKERS``, 2; one for an in-memory SQLite database,
    which processes cannot share): one uvicorn process, or gunicorn supervising uvicorn workers
    (:mod:`privfit.api.serving`: start, readiness and stop). With several processes, the start-up work that must
    happen once or that must fail the command runs here first, before the workers are forked: SQLite's migrations
    (not N processes racing), and the check that this process's dataset store holds the live datasets."""
    from privfit.api.serving import serve

    settings = get_settings()
    workers = args.workers or settings.api_workers
    if workers > 1 and _in_memory_sqlite(settings.database_url):
        workers = 1
    if workers > 1 and not _startup_checks(settings):
        return 1
    return serve(settings, host=args.host, port=args.port, workers=workers, log_level=args.log_level)


def _in_memory_sqlite(url: str) -> bool:
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    return parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:")


def _startup_checks(settings: Settings) -> bool:
    """SQLite's migrations, then :func:`~privfit.datasets.lifecycle.check_store`; False (logged) on a mismatch."""
    import logging

    from privfit.datasets.lifecycle import StoreMismatchError, check_store
    from privfit.datasets.store import make_store
    from privfit.db import make_database
    from privfit.db.migrate import upgrade

    db = make_database(settings.database_url)
    try:
        if db.is_sqlite:
            upgrade(settings.database_url)
        check_store(db, make_store(settings, db))
    except StoreMismatchError as error:
        logging.getLogger("privfit.api").error("refusing to start: %s", error)
        return False
    finally:
        db.dispose()
    return True


def _worker(args: argparse.Namespace) -> int:
    from privfit.datasets.lifecycle import check_store
    from privfit.datasets.store import make_store
    from privfit.db import make_database
    from privfit.jobs import WorkerPool

    settings = get_settings()
    configure_sampler(settings.noise_sampler)
    if settings.queue == "celery":
        from privfit.jobs.celery_app import run_worker

        run_worker(settings, args.concurrency or settings.workers)
        return 0
    db = make_database(
        settings.database_url,
        retry_attempts=settings.db_retry_attempts,
        retry_backoff=settings.db_retry_backoff_seconds,
    )
    store = make_store(settings, db)
    check_store(db, store)  # a data directory that holds none of the live datasets: refuse to start
    pool = WorkerPool(
        db, store, size=args.concurrency or settings.workers,
        lease_seconds=settings.lease_seconds, heartbeat_seconds=settings.heartbeat_seconds,
        poll_seconds=settings.poll_seconds, cancel_poll_seconds=settings.cancel_poll_seconds,
        max_attempts=settings.fit_max_attempts,
    )  # fmt: skip
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    pool.start()
    print(f"privfit worker {pool.name}: {pool.size} threads on {db.engine.url.render_as_string()}", flush=True)
    stop.wait()
    pool.stop(settings.stop_grace_seconds)  # running fits go back to the queue (daemon threads past the grace)
    db.dispose()
    return 0


def _migrate(_: argparse.Namespace) -> int:
    from privfit.db.migrate import upgrade

    upgrade(get_settings().database_url)
    print("database migrated to the latest revision")
    return 0


def _keys_create(args: argparse.Namespace) -> int:
    # the key is this command's output: Alembic's INFO lines (plugin set-up, one per migration) would bury it
    logging.getLogger("alembic").setLevel(logging.WARNING)
    from privfit.api.auth import create_api_key
    from privfit.db import make_database
    from privfit.db.migrate import upgrade

    settings = get_settings()
    db = make_database(settings.database_url)
    if db.is_sqlite:
        upgrade(settings.database_url)
    key_id, key = create_api_key(db, args.role, args.name)
    db.dispose()
    print(f"key id: {key_id}\nrole:   {args.role}\nkey:    {key}\n(the key is shown only now)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="privfit", description="Differentially private model fitting service.")
    add_global_options(parser)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the API with its embedded worker pool")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--log-level", default="info")
    serve.add_argument("--workers", type=int, default=0, help="processes (default: PRIVFIT_API_WORKERS)")
    serve.set_defaults(handler=_serve)
    worker = commands.add_parser(
        "worker", help="run a worker alone (no API): a polling pool, or a Celery worker with PRIVFIT_QUEUE=celery"
    )
    worker.add_argument("--concurrency", type=int, default=0, help="threads (default: PRIVFIT_WORKERS)")
    worker.set_defaults(handler=_worker)
    commands.add_parser("migrate", help="apply database migrations").set_defaults(handler=_migrate)
    keys = commands.add_parser("keys", help="manage API keys").add_subparsers(dest="keys_command", required=True)
    create = keys.add_parser("create", help="create an API key and print it once (on the server: its database)")
    create.add_argument("--role", required=True, choices=["owner", "analyst", "admin"])
    create.add_argument("--name", default="")
    create.set_defaults(handler=_keys_create)
    add_client_commands(commands, keys=keys)
    args = parser.parse_args(argv)
    if not getattr(args, "client_command", False):  # the server's logging; client commands print only results
        configure_logging(get_settings().log_format)
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
