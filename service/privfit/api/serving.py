"""How ``privfit serve`` runs the API processes: start, readiness, stop (issue 35).

**One process** (``--workers 1``, and always for an in-memory SQLite database): uvicorn's :class:`PrivfitServer`
in the command's own process. No supervisor, so nothing can time out its start, and a SIGKILL leaves nothing
behind; the port is bound only once the app's lifespan finished.

**Several processes**: gunicorn's arbiter (this process, the supervisor) and N uvicorn workers
(:class:`PrivfitWorker`). uvicorn's own supervisor was not used because it pings each child every few seconds and
kills one that does not answer within 5 s: on a loaded 2-core machine a child still importing numpy, scipy and
numba cannot answer, so it was killed and respawned forever (issue 35: 39 deaths, first answer after 370 s).
Here:

1. *Start.* The supervisor does the one-time work (``privfit.cli._startup_checks``: SQLite's migrations, the
   dataset store check), then imports :mod:`privfit.api.app` and builds the app once (gunicorn's
   ``preload_app``), binds the port and forks the workers, which inherit the imported modules: N processes do not
   import the scientific stack N times at once on a loaded machine. Nothing in that work starts a thread, opens a
   connection that outlives it or draws randomness (every noise generator is seeded from ``secrets`` per fit,
   :mod:`privfit.privacy.randomness`), so forking after it is safe. Each worker then runs the app's lifespan
   (database, store check, orphan sweep, worker pool) and logs one ``API process … ready`` line with its start-up
   time; the supervisor logs ``all N API processes ready`` once every worker has (each worker writes its pid to a
   pipe made before the fork). A worker is judged only by its heartbeat (every ``timeout / 2``, from its event
   loop, which privfit never blocks) and by ``PRIVFIT_WORKER_BOOT_TIMEOUT_SECONDS`` (120 s) for its start-up and
   its heartbeats: a worker that misses it is killed (``WORKER TIMEOUT``) and replaced. Every worker death is logged
   by gunicorn with its reason (exit code, signal, "Perhaps out of memory?" for a SIGKILL) through privfit's log
   format; a worker that fails its start-up (exit 3) stops the supervisor with status 3.
2. *Readiness.* ``GET /healthz`` answers only once a worker's lifespan finished. The supervisor's socket accepts
   connections from the start, so a request sent earlier waits in the listen backlog rather than being refused.
3. *Stop.* SIGTERM (or SIGINT) to the supervisor closes its listening socket and forwards SIGTERM to every worker,
   which stops accepting, lets requests in flight finish for up to half of ``PRIVFIT_STOP_GRACE_SECONDS``, then
   runs the app's lifespan shutdown (the worker pool's stop) and exits. Workers still running after
   ``PRIVFIT_STOP_GRACE_SECONDS`` are killed; the supervisor exits 0. SIGQUIT to a worker is taken as SIGTERM.
4. *Supervisor killed.* Each worker asks Linux to send it SIGTERM when its parent dies (``prctl(PR_SET_PDEATHSIG)``,
   :func:`die_with_parent`), so a SIGKILL of the supervisor stops its workers as a SIGTERM would: no orphan keeps
   listening and serving. With no supervisor left to enforce the grace, each worker enforces it on itself
   (:class:`PrivfitServer`: it exits 2 s after the grace at the latest).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import faulthandler
import logging
import math
import os
import signal
import struct
import sys
import threading
import time
from collections.abc import Callable, Collection
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import uvicorn
from gunicorn import glogging  # type: ignore[import-untyped]
from gunicorn.app.base import BaseApplication  # type: ignore[import-untyped]
from gunicorn.arbiter import Arbiter  # type: ignore[import-untyped]
from uvicorn_worker import UvicornWorker  # type: ignore[import-untyped]

from privfit.logs import uvicorn_log_config
from privfit.settings import Settings

if TYPE_CHECKING:
    from fastapi import FastAPI

log = logging.getLogger("privfit.api")

#: uvicorn's exit status for an app whose start-up failed (``uvicorn.run`` uses it too)
STARTUP_FAILURE = 3
#: how long after the grace a worker whose supervisor died exits on its own (the supervisor kills at the grace)
WATCHDOG_MARGIN_SECONDS = 2.0
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def serve(settings: Settings, *, host: str, port: int, workers: int, log_level: str) -> int:
    """Run the API until it is stopped: in this process if ``workers`` is 1, else under gunicorn (module
    docstring). Returns the exit status: 0 after a stop by signal, 3 if the app's start-up failed."""
    if workers == 1:
        return _serve_here(settings, host=host, port=port, log_level=log_level)
    supervisor = _Supervisor(settings, host=host, port=port, workers=workers, log_level=log_level)
    supervisor.run()  # exits the process (SystemExit) with gunicorn's status: 0 after SIGTERM
    return 0


def drain_seconds(settings: Settings) -> int:
    """How long a stopping process lets requests in flight finish before it runs the lifespan's shutdown: half of
    ``stop_grace_seconds`` (whole seconds, uvicorn's unit), leaving the rest to the worker pool's stop."""
    return max(1, math.ceil(settings.stop_grace_seconds / 2))


def process_age() -> float | None:
    """Seconds since this process started (Linux ``/proc``: its start time in clock ticks since boot), or None."""
    try:
        start_ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def die_with_parent(parent: int) -> bool:
    """Ask Linux to send this process SIGTERM when its parent dies (``prctl(PR_SET_PDEATHSIG, SIGTERM)``), then
    exit at once if the parent ``parent`` already died before the request took effect (the race the kernel leaves:
    an orphan's parent is no longer ``parent``). False, with a warning, where the call is not available."""
    failed = "not Linux"
    if sys.platform.startswith("linux"):
        try:
            prctl = ctypes.CDLL(None, use_errno=True).prctl
            prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
            failed = "" if prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) == 0 else f"errno {ctypes.get_errno()}"
        except (OSError, AttributeError) as error:
            failed = str(error)
    if failed:
        log.warning("prctl(PR_SET_PDEATHSIG) unavailable (%s): this process would outlive a killed supervisor", failed)
        return False
    if os.getppid() != parent:
        os._exit(0)  # the supervisor is already gone: nobody would ever send the signal
    return True


def _load_app() -> tuple[FastAPI, float]:
    """Import :mod:`privfit.api.app` and build the app (logged with their durations); the app and the import's
    seconds (modules that earlier start-up work imported already are not counted again)."""
    began = time.monotonic()
    from privfit.api.app import create_app

    imported = time.monotonic()
    app = create_app()
    log.info("imported privfit.api.app in %.2f s, built the app in %.2f s", imported - began,
             time.monotonic() - imported, extra={"import_seconds": round(imported - began, 3)})  # fmt: skip
    return app, imported - began


def _exit_after(seconds: float) -> None:
    """A daemon thread that ends the process (status 1, logged) if it is still running ``seconds`` from now."""

    def watchdog() -> None:
        time.sleep(seconds)
        log.error("the stop outlasted PRIVFIT_STOP_GRACE_SECONDS + %.0f s (%.0f s): exiting now",
                  WATCHDOG_MARGIN_SECONDS, seconds)  # fmt: skip
        logging.shutdown()
        os._exit(1)

    threading.Thread(target=watchdog, name="privfit-stop-watchdog", daemon=True).start()


class PrivfitServer(uvicorn.Server):
    """uvicorn's server, plus: one INFO line when it is ready (its start-up time), a callback then (the worker's
    readiness report), and a bound on its stop — once it starts shutting down, the process exits at the latest
    ``stop_grace_seconds`` + 2 s later, so a worker whose supervisor died cannot outlive the grace either."""

    def __init__(self, config: uvicorn.Config, settings: Settings, *, import_seconds: float,
                 on_ready: Callable[[], None] | None = None) -> None:  # fmt: skip
        """``import_seconds``: the import of :mod:`privfit.api.app`; ``on_ready``: a worker's readiness report
        (None for the single process, which imported the app itself)."""
        super().__init__(config)
        self.settings = settings
        self.import_seconds = import_seconds
        self.on_ready = on_ready

    async def startup(self, sockets: list[Any] | None = None) -> None:
        began = time.monotonic()
        await super().startup(sockets)
        if not self.started:
            return
        lifespan = time.monotonic() - began
        age = process_age()
        imports = "the supervisor's import of privfit.api.app" if self.on_ready else "importing privfit.api.app"
        log.info(
            "API process %d ready %s after it started: the app's start-up (lifespan) %.2f s; %s %.2f s", os.getpid(),
            "?" if age is None else f"{age:.2f} s", lifespan, imports, self.import_seconds,
            extra={"startup_seconds": None if age is None else round(age, 3), "lifespan_seconds": round(lifespan, 3)},
        )  # fmt: skip
        if self.on_ready is not None:
            self.on_ready()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """The stop signal: the embedded worker pool takes no more jobs from this instant, not from the event loop's
        next turn, so a fit another process hands back as it stops is not taken up here (and counted) meanwhile."""
        self._begin_stopping_workers()
        super().handle_exit(sig, frame)

    async def shutdown(self, sockets: list[Any] | None = None) -> None:
        _exit_after(self.settings.stop_grace_seconds + WATCHDOG_MARGIN_SECONDS)
        # the embedded worker pool starts stopping now (if no signal began it), while requests in flight drain: its
        # running fits stop at their next step and go back to the queue within the grace (the lifespan's shutdown
        # then only waits)
        self._begin_stopping_workers()
        await super().shutdown(sockets)

    def _begin_stopping_workers(self) -> None:
        state = getattr(self.config.app, "state", None)
        workers = getattr(state, "workers", None)
        if workers is not None:
            workers.begin_stop()
        streams = getattr(state, "event_streams", None)
        if streams is not None:  # open fit-event streams end at their next poll (api/events.py)
            streams.stop()


class _Stopped(Exception):
    """Raised by the single process's SIGTERM handler once uvicorn has stopped: the stop asked for, status 0."""


def _stopped(signum: int, frame: object) -> None:
    raise _Stopped


def _serve_here(settings: Settings, *, host: str, port: int, log_level: str) -> int:
    """The API in this process. uvicorn re-raises the SIGTERM it handled once it has stopped; the handler installed
    here turns that into status 0 (Python's default action would end the process by the signal)."""
    app, import_seconds = _load_app()
    config = uvicorn.Config(
        app, host=host, port=port, log_level=log_level, log_config=uvicorn_log_config(settings.log_format, log_level),
        timeout_graceful_shutdown=drain_seconds(settings),
    )  # fmt: skip
    server = PrivfitServer(config, settings, import_seconds=import_seconds)
    signal.signal(signal.SIGTERM, _stopped)
    try:
        server.run()
    except _Stopped:
        return 0
    except KeyboardInterrupt:  # SIGINT outside uvicorn's own handling (before it started, after it stopped)
        return 0
    return 0 if server.started else STARTUP_FAILURE


class _Readiness:
    """Workers tell the supervisor that they are ready: each writes its pid (4 bytes: one atomic pipe write) to a
    pipe the supervisor made before forking; the supervisor reads it from its main loop (about once a second)."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        self.ready: set[int] = set()
        self.announced = False

    def in_worker(self) -> None:
        os.close(self.read_fd)

    def tell(self) -> None:
        with contextlib.suppress(OSError):  # the supervisor is gone (its read end closed)
            os.write(self.write_fd, struct.pack("=i", os.getpid()))

    def poll(self, workers: Collection[int], expected: int) -> None:
        """Read the reports; log once when ``expected`` live workers are ready (again after a worker was replaced)."""
        while True:
            try:
                chunk = os.read(self.read_fd, 4096)
            except BlockingIOError:
                break
            self.ready.update(pid for (pid,) in struct.iter_unpack("=i", chunk[: len(chunk) // 4 * 4]))
            if len(chunk) < 4096:
                break
        self.ready &= set(workers)
        if len(self.ready) >= expected and not self.announced:
            self.announced = True
            age = process_age()
            log.info("all %d API processes ready, %s after the supervisor started", expected,
                     "?" if age is None else f"{age:.2f} s", extra={"api_workers": expected})  # fmt: skip
        elif len(self.ready) < expected:
            self.announced = False


def _not_closed_twice(record: logging.LogRecord) -> bool:
    """False for gunicorn's "Error while closing socket [Errno 9]": a stopping worker's event loop has closed the
    listening socket already when gunicorn closes it again (harmless, but it read like a fault at every stop)."""
    return not record.getMessage().startswith("Error while closing socket [Errno 9]")


class _Logger(glogging.Logger):
    """gunicorn's logger with its own handlers removed: its records (``gunicorn.error``, e.g. a worker's death and
    its reason) propagate to the root logger, which :func:`privfit.logs.configure_logging` set up."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        for logger in (self.error_log, self.access_log):
            for handler in list(logger.handlers):
                logger.removeHandler(handler)
            logger.propagate = True
        self.access_log.setLevel(self.loglevel)  # as uvicorn's access log in one process: off below info
        if _not_closed_twice not in self.error_log.filters:
            self.error_log.addFilter(_not_closed_twice)


class PrivfitWorker(UvicornWorker):
    """uvicorn-worker's gunicorn worker running a :class:`PrivfitServer`: uvicorn's records propagate to privfit's
    handler, requests in flight get :func:`drain_seconds` at a stop, and SIGQUIT (gunicorn's quick stop, which
    uvicorn-worker ignores) stops the server as SIGTERM does."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in ("uvicorn.error", "uvicorn.access"):
            logger = logging.getLogger(name)
            logger.handlers = []
            logger.propagate = True
        self.config.timeout_graceful_shutdown = drain_seconds(self.app.settings)

    async def _serve(self) -> None:
        supervisor: _Supervisor = self.app
        self.config.app = self.wsgi
        server = PrivfitServer(self.config, supervisor.settings, import_seconds=supervisor.import_seconds,
                               on_ready=supervisor.readiness.tell)  # fmt: skip
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGQUIT, server.handle_exit, signal.SIGTERM, None)
        await server.serve(sockets=self.sockets)
        if not server.started:
            sys.exit(Arbiter.WORKER_BOOT_ERROR)


class _Arbiter(Arbiter):
    """gunicorn's arbiter, reading the workers' readiness reports at each turn of its main loop, and ending its
    process at once once it has stopped: its workers are gone and it holds nothing to clean up, while the
    interpreter's teardown of the preloaded scientific stack took seconds of a loaded machine's stop time."""

    def manage_workers(self) -> None:
        super().manage_workers()
        self.app.readiness.poll(self.WORKERS.keys(), self.num_workers)

    def halt(self, reason: str | None = None, exit_status: int = 0) -> None:
        try:
            super().halt(reason, exit_status)
        except SystemExit as stopped:
            logging.shutdown()
            os._exit(stopped.code if isinstance(stopped.code, int) else 1)


class _Supervisor(BaseApplication):
    """gunicorn configured from privfit's settings (no configuration file, no ``GUNICORN_CMD_ARGS``)."""

    def __init__(self, settings: Settings, *, host: str, port: int, workers: int, log_level: str) -> None:
        self.settings = settings
        self.readiness = _Readiness()
        self.import_seconds = 0.0
        self.options = {
            "bind": f"[{host}]:{port}" if ":" in host else f"{host}:{port}",
            "workers": workers,
            "worker_class": PrivfitWorker,
            "preload_app": True,
            "timeout": math.ceil(settings.worker_boot_timeout_seconds),  # gunicorn takes whole seconds
            "graceful_timeout": math.ceil(settings.stop_grace_seconds),
            "keepalive": 5,  # uvicorn's default keep-alive
            "loglevel": log_level,
            "logger_class": _Logger,
            "post_fork": self.post_fork,
            "control_socket_disable": True,  # no gunicornc socket file in the working directory
            "proc_name": "privfit",
        }
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self) -> FastAPI:
        app, self.import_seconds = _load_app()
        return app

    def post_fork(self, arbiter: Arbiter, worker: Any) -> None:
        """In the new worker, before anything else: SIGTERM back to its default (the supervisor's handler, copied
        by the fork, would only queue it), a SIGTERM when the supervisor dies, the boot timeout's clock started
        (gunicorn 27 counts it only from a worker's first heartbeat), tracebacks on SIGABRT (a timeout's kill)."""
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        die_with_parent(worker.ppid)
        self.readiness.in_worker()
        worker.notify()
        faulthandler.enable()

    def run(self) -> None:
        try:
            _Arbiter(self).run()
        except RuntimeError as error:  # as gunicorn's BaseApplication.run: a configuration it refuses
            log.error("gunicorn: %s", error)
            sys.exit(1)
