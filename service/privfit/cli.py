"""The ``privfit`` command: the server side (``serve``, ``worker``, ``migrate``, ``compile``, ``keys create``) and
the client commands of :mod:`privfit.client.cli` (``datasets``, ``fit``, ``estimate``, ``fits``, ``predict``,
``budget``, ``ledger``, ``solvers``, ``whoami``), and ``schema draft``, which runs locally
(:mod:`privfit.client.schema_cli`).

Start-up cost: ``privfit --help`` and the client commands import only what they use. This module imports nothing
but :mod:`argparse` and the client's command table (:mod:`privfit.client.cli`, which needs httpx and rich only
when a command runs); each server command imports the service (settings, database, numpy, scipy, …) inside its
handler. ``benchmarks/cli_start.py`` measures it; ``tests/api/test_cli_start.py`` keeps the heavy packages out of
``--help``.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from privfit.client.cli import add_client_commands, add_global_options

if TYPE_CHECKING:
    from privfit.settings import Settings


def _serve(args: argparse.Namespace) -> int:
    """The API in ``--workers`` processes (default ``PRIVFIT_API_WORKERS``, 2; one for an in-memory SQLite database,
    which processes cannot share): one uvicorn process, or gunicorn supervising uvicorn workers
    (:mod:`privfit.api.serving`: start, readiness and stop). With several processes, the start-up work that must
    happen once or that must fail the command runs here first, before the workers are forked: SQLite's migrations
    (not N processes racing), and the check that this process's dataset store holds the live datasets."""
    from privfit.api.serving import serve
    from privfit.settings import get_settings

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
    import signal
    import threading

    from privfit.datasets.lifecycle import check_store
    from privfit.datasets.store import make_store
    from privfit.db import make_database
    from privfit.jobs import WorkerPool
    from privfit.privacy.noise import configure_sampler
    from privfit.scaleout.source import row_source
    from privfit.settings import get_settings
    from privfit.solvers.design_cache import configure_design_cache

    settings = get_settings()
    configure_sampler(settings.noise_sampler)
    configure_design_cache(settings.design_cache_bytes)
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
        max_attempts=settings.fit_max_attempts, rows=row_source(settings),
    )  # fmt: skip
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    pool.start()
    if settings.preload_kernels:
        from privfit.solvers.warmup import preload_in_background

        preload_in_background()
    print(f"privfit worker {pool.name}: {pool.size} threads on {db.engine.url.render_as_string()}", flush=True)
    stop.wait()
    pool.stop(settings.stop_grace_seconds)  # running fits go back to the queue (daemon threads past the grace)
    db.dispose()
    return 0


def _migrate(_: argparse.Namespace) -> int:
    from privfit.db.migrate import upgrade
    from privfit.settings import get_settings

    upgrade(get_settings().database_url)
    print("database migrated to the latest revision")
    return 0


def _compile(_: argparse.Namespace) -> int:
    """Compile and cache the solvers' numba kernels (:mod:`privfit.solvers.warmup`), one line per warm-up fit."""
    import time

    from privfit.solvers.warmup import Warmed, clear_stale_kernel_cache, compile_kernels

    def show(step: Warmed) -> None:
        outcome = f"{step.seconds:.2f} s" if step.seconds is not None else f"not run here: {step.refused}"
        print(f"{step.solver} {step.model} ({step.sampler} noise): {outcome}")

    began = time.perf_counter()
    removed = clear_stale_kernel_cache()
    if removed:
        print(f"removed {removed} cached kernel files older than the package's sources (recompiling them)")
    steps = compile_kernels(show)
    print(f"{sum(s.seconds is not None for s in steps)} warm-up fits in {time.perf_counter() - began:.1f} s; the "
          "compiled kernels are cached for every later process")  # fmt: skip
    return 0


def _store_migrate(args: argparse.Namespace) -> int:
    """Move every live dataset from the store ``--from`` names into the one the settings name (PRIVFIT_STORE…)."""
    from pathlib import Path

    from privfit.datasets.store import make_store
    from privfit.datasets.store_migration import migrate_store
    from privfit.db import make_database
    from privfit.settings import get_settings

    settings = get_settings()
    source_settings = settings.model_copy(update={
        "store": args.source, "data_dir": Path(args.from_data_dir) if args.from_data_dir else settings.data_dir,
        "store_url": args.from_url or settings.store_url,
    })  # fmt: skip
    db = make_database(settings.database_url)
    try:
        source, target = make_store(source_settings, db), make_store(settings, db)
        report = migrate_store(db, source, target)
    finally:
        db.dispose()
    print(f"{len(report.migrated)} datasets moved to {target.identity}; {len(report.released)} keys released in the "
          f"source ({source.identity})")  # fmt: skip
    for dataset_id, reason in report.failed.items():
        print(f"dataset {dataset_id} left in the source: {reason}", file=sys.stderr)
    return 1 if report.failed else 0


def _keys_create(args: argparse.Namespace) -> int:
    import logging

    # the key is this command's output: Alembic's INFO lines (plugin set-up, one per migration) would bury it
    logging.getLogger("alembic").setLevel(logging.WARNING)
    from privfit.api.auth import create_api_key
    from privfit.db import make_database
    from privfit.db.migrate import upgrade
    from privfit.settings import get_settings

    settings = get_settings()
    db = make_database(settings.database_url)
    if db.is_sqlite:
        upgrade(settings.database_url)
    key_id, key = create_api_key(db, args.role, args.name)
    db.dispose()
    print(f"key id: {key_id}\nrole:   {args.role}\nkey:    {key}\n(the key is shown only now)")
    return 0


def _schema(args: argparse.Namespace) -> int:
    """``privfit schema draft FILE …``: runs locally, no server (:mod:`privfit.client.schema_cli`)."""
    from privfit.client.schema_cli import main as schema_main

    return schema_main(args.schema_args)


def build_parser() -> argparse.ArgumentParser:
    """The ``privfit`` command's parser: every command, with help text on every argument (building it imports
    nothing beyond the client's command table)."""
    parser = argparse.ArgumentParser(
        prog="privfit",
        description="Differentially private model fitting service: the server (serve, worker, migrate, compile, keys "
        "create) and its client. `privfit COMMAND --help` shows a command's arguments.",
    )
    add_global_options(parser)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve_help = "run the API with its embedded worker pool (settings from PRIVFIT_* variables)"
    serve = commands.add_parser("serve", help=serve_help, description=serve_help)
    serve.add_argument("--host", default="127.0.0.1", metavar="ADDRESS",
                       help="address to listen on (default 127.0.0.1: this machine only)")  # fmt: skip
    serve.add_argument("--port", type=int, default=8000, metavar="PORT", help="port to listen on (default 8000)")
    serve.add_argument("--log-level", default="info", metavar="LEVEL",
                       help="the HTTP server's log level: critical, error, warning, info, debug")  # fmt: skip
    serve.add_argument("--workers", type=int, default=0, metavar="N",
                       help="API processes (default: $PRIVFIT_API_WORKERS, 2)")  # fmt: skip
    serve.set_defaults(handler=_serve)
    worker_help = "run a worker alone (no API): a polling pool, or a Celery worker with PRIVFIT_QUEUE=celery"
    worker = commands.add_parser("worker", help=worker_help, description=worker_help)
    worker.add_argument("--concurrency", type=int, default=0, metavar="N",
                        help="fits run at once (default: $PRIVFIT_WORKERS)")  # fmt: skip
    worker.set_defaults(handler=_worker)
    commands.add_parser("migrate", help="apply database migrations").set_defaults(handler=_migrate)
    compile_help = ("compile the solvers' kernels ahead of the first fit and cache them (the install scripts run it): "
                    "warm-up fits on public synthetic rows")  # fmt: skip
    commands.add_parser("compile", help=compile_help, description=compile_help).set_defaults(handler=_compile)
    store_parser = commands.add_parser("store", help="manage the dataset store", description="manage the dataset store")
    store = store_parser.add_subparsers(dest="store_command", required=True)
    move_help = ("move every live dataset from another store into the one PRIVFIT_STORE (and PRIVFIT_DATA_DIR / "
                 "PRIVFIT_STORE_URL) names, e.g. to partitioned Parquet on an object store; run it with the API and "
                 "workers stopped")  # fmt: skip
    move = store.add_parser("migrate", help=move_help, description=move_help)
    move.add_argument("--from", dest="source", required=True, choices=["local", "database", "parquet"],
                      help="the store the datasets are in now")  # fmt: skip
    move.add_argument("--from-data-dir", metavar="PATH", help="--from local: its directory (default $PRIVFIT_DATA_DIR)")
    move.add_argument("--from-url", metavar="URL", help="--from parquet: its URL (default $PRIVFIT_STORE_URL)")
    move.set_defaults(handler=_store_migrate)
    keys_parser = commands.add_parser("keys", help="manage API keys", description="manage API keys")
    keys = keys_parser.add_subparsers(dest="keys_command", required=True)
    create_help = "create an API key and print it once (on the server: its database)"
    create = keys.add_parser("create", help=create_help, description=create_help)
    create.add_argument("--role", required=True, choices=["owner", "analyst", "admin"],
                        help="owner: uploads; analyst: fits the datasets granted to it; admin: keys")  # fmt: skip
    create.add_argument("--name", default="", metavar="NAME", help="a display name for the key (default: none)")
    create.set_defaults(handler=_keys_create)
    add_client_commands(commands, keys=keys)
    # `privfit schema …` hands every argument after `schema` to privfit.client.schema_cli, imported only when it
    # runs (a prefix char no argument uses: `schema --help` and `schema draft … --json` are its to parse)
    schema = commands.add_parser("schema", help="draft a dataset's schema from a CSV or Parquet file (locally)",
                                 add_help=False, prefix_chars="\0")  # fmt: skip
    schema.add_argument("schema_args", nargs=argparse.REMAINDER)
    schema.set_defaults(handler=_schema, client_command=True)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not getattr(args, "client_command", False):  # the server's logging; client commands print only results
        from privfit.logs import configure_logging
        from privfit.settings import get_settings

        configure_logging(get_settings().log_format)
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
