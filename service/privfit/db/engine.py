"""Engine and session setup for SQLite (embedded default) and PostgreSQL.

SQLite: WAL, foreign keys, a busy timeout, and Python's sqlite3 driver put in autocommit mode so SQLAlchemy emits
the ``BEGIN`` itself — ``BEGIN IMMEDIATE`` for write transactions (a deferred BEGIN that reads then writes can
fail with SQLITE_BUSY), following the SQLAlchemy documentation's pysqlite transaction recipe. PostgreSQL: READ
COMMITTED, connections pinged before use, reads in autocommit (no transaction round trips around them), and write
transactions lock the rows they decide on with ``SELECT … FOR UPDATE``.

Transient faults (a dropped connection, a server restart, a serialization failure, SQLite busy: :func:`is_transient`)
are retried by :meth:`Database.retrying` around idempotent operations; the API answers what still fails with 503.
"""

from __future__ import annotations

import fcntl
import logging
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

_IMMEDIATE = "privfit_sqlite_immediate"

log = logging.getLogger("privfit.db")

T = TypeVar("T")

#: SQLite's messages for a lock another connection holds past the busy timeout (retrying may succeed)
_SQLITE_BUSY = ("database is locked", "database table is locked", "database schema is locked")


def is_transient(error: BaseException) -> bool:
    """Whether ``error`` is a database fault a retry may cure, not a fault of the request or of the code.

    Transient: the connection was lost or refused (SQLAlchemy's ``connection_invalidated``, a DB-API error it
    classified as a disconnect, ``DisconnectionError``), every error psycopg classes as operational (server shutdown or
    restart — ``pg_terminate_backend`` is ``AdminShutdown`` —, a dropped connection, too many connections,
    serialization failures and deadlocks, a lock or statement timeout), a pool exhausted for longer than its timeout,
    and SQLite's "database is locked". Not transient: constraint violations, bad data (``DataError``), programming
    errors, SQLite's other operational errors ("no such table"). The chain of causes is searched (a psycopg error
    wrapped by SQLAlchemy, re-raised by a layer above).
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, sa_exc.DBAPIError) and current.connection_invalidated:
            return True
        if isinstance(current, sa_exc.DisconnectionError | sa_exc.TimeoutError):
            return True
        if _is_psycopg_operational(current):
            return True
        if isinstance(current, sqlite3.OperationalError) and any(m in str(current).lower() for m in _SQLITE_BUSY):
            return True
        orig = getattr(current, "orig", None) if isinstance(current, sa_exc.DBAPIError) else None
        current = orig if isinstance(orig, BaseException) else (current.__cause__ or current.__context__)
    return False


def _is_psycopg_operational(error: BaseException) -> bool:
    try:
        import psycopg
    except ImportError:  # pragma: no cover - psycopg is a dependency; SQLite-only installs may lack it
        return False
    return isinstance(error, psycopg.OperationalError | psycopg.InterfaceError)


class WriterGate:
    """Queues SQLite's writers before ``BEGIN IMMEDIATE`` instead of inside SQLite's busy handler.

    SQLite has one write lock per database file. A connection that finds it taken waits in SQLite's busy handler,
    which sleeps 1, 2, 5, 10, … up to 100 ms between tries: under 32 concurrent admissions the unlucky ones sleep
    again and again (p99 of seconds) while the lock is free most of the time. The gate lets one thread of this
    process at a time (a lock it waits on without sleeping) and one process at a time (an ``flock`` on
    ``<database>-privfit-writer.lock``, tried every 0.05–1 ms) reach ``BEGIN IMMEDIATE``, which then finds the lock
    free. It is only about waiting: SQLite's lock still makes every write transaction atomic and serial, gate or
    not (a process without it, e.g. an SQLite shell, only waits longer). Re-entrant within a thread. A writer that
    cannot pass within ``timeout`` seconds gets SQLite's "database is locked", a transient fault
    (:func:`is_transient`), as it would from SQLite's busy timeout. PostgreSQL needs no gate (its writers lock rows,
    not the database): there the gate is not ``enabled`` and lets everyone through.
    """

    def __init__(self, path: str | None, *, enabled: bool = False, timeout: float = 60.0) -> None:
        self.enabled, self.timeout = enabled, timeout
        self._lock = threading.RLock()
        self._depth = 0
        self._fd: int | None = None
        if enabled and path is not None:
            try:
                self._fd = os.open(f"{path}-privfit-writer.lock", os.O_RDWR | os.O_CREAT, 0o600)
            except OSError as error:  # a read-only directory: threads are still queued; processes rely on SQLite
                log.warning("no cross-process writer lock for %s: %s", path, error)

    @contextmanager
    def hold(self) -> Iterator[None]:
        if not self.enabled:
            yield
            return
        deadline = time.monotonic() + self.timeout
        if not self._lock.acquire(timeout=self.timeout):
            raise sqlite3.OperationalError("database is locked")
        try:
            self._depth += 1
            if self._depth == 1 and self._fd is not None:
                self._flock(deadline)
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0 and self._fd is not None:
                    fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self._lock.release()

    def _flock(self, deadline: float) -> None:
        assert self._fd is not None
        pause = 5e-5
        while True:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise sqlite3.OperationalError("database is locked") from None
                time.sleep(pause)
                pause = min(1e-3, pause * 2)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


@dataclass
class Database:
    """An engine plus two session factories: ``read()`` and ``write()`` (``BEGIN IMMEDIATE`` on SQLite), and the
    retry policy of :meth:`retrying` (``retry_attempts`` tries in all, backoff from ``retry_backoff`` seconds)."""

    engine: Engine
    _reader: sessionmaker[Session]
    _writer: sessionmaker[Session]
    retry_attempts: int = 5
    retry_backoff: float = 0.05
    gate: WriterGate = field(default_factory=lambda: WriterGate(None))

    @property
    def is_sqlite(self) -> bool:
        return self.engine.dialect.name == "sqlite"

    @contextmanager
    def read(self) -> Iterator[Session]:
        """A session for reads (its transaction is rolled back at the end)."""
        with self._reader() as session:
            yield session

    @contextmanager
    def write(self) -> Iterator[Session]:
        """A session whose transaction commits at the end (or rolls back on error); SQLite begins IMMEDIATE, once
        this thread holds the :class:`WriterGate` (one SQLite writer at a time, queued without sleeping)."""
        with self.gate.hold(), self._writer() as session, session.begin():
            yield session

    def retrying(
        self,
        operation: Callable[[], T],
        *,
        attempts: int | None = None,
        backoff: float | None = None,
        what: str = "database operation",
    ) -> T:
        """``operation()``, called again while it fails with a transient database fault (:func:`is_transient`).

        Only for IDEMPOTENT operations: reads, and transactions whose second run after a first one that committed
        (its answer lost with the connection) changes nothing — a conditional UPDATE whose WHERE no longer matches, an
        insert keyed by an id the first run wrote and the second checks for. Each call must open its own session
        (``with db.write()`` inside ``operation``), so a retry starts a fresh transaction on a fresh connection (the
        pool drops the dead ones: pre-ping on PostgreSQL). At most ``attempts`` calls (default
        :attr:`retry_attempts`), sleeping a jittered, doubling backoff between them (``backoff`` · 2^k · U(0.5, 1.5),
        capped at 2 s); the last transient error is re-raised, and the API answers it 503 with Retry-After.
        """
        attempts = max(1, self.retry_attempts if attempts is None else attempts)
        delay = self.retry_backoff if backoff is None else backoff
        for attempt in range(1, attempts + 1):
            try:
                return operation()
            except Exception as error:
                if attempt >= attempts or not is_transient(error):
                    raise
                pause = min(2.0, delay * 2 ** (attempt - 1)) * random.uniform(0.5, 1.5)
                log.warning(
                    "transient database error, retrying",
                    extra={"what": what, "attempt": attempt, "error_type": type(error).__name__},
                )
                time.sleep(pause)
        raise AssertionError("unreachable")  # pragma: no cover

    def dispose(self) -> None:
        self.engine.dispose()
        self.gate.close()


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # let SQLAlchemy emit BEGIN itself
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=60000")
        cursor.execute("PRAGMA synchronous=NORMAL")
        if engine.url.database not in (None, "", ":memory:"):
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        immediate = connection.get_execution_options().get(_IMMEDIATE, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def _read_only(engine: Engine) -> Engine:
    """The engine of :meth:`Database.read` sessions. PostgreSQL: in autocommit, so a read costs its statements alone,
    without the ``BEGIN`` and ``ROLLBACK`` round trips of a transaction around them (two of a one-query read's
    four). That changes nothing a read sees: under READ COMMITTED every statement takes its own snapshot, inside a
    transaction or not, and read sessions neither write nor lock (locks are taken in :meth:`Database.write`).
    SQLite: the engine itself (its read transaction is a WAL snapshot shared by the session's statements)."""
    if engine.dialect.name == "postgresql":
        return engine.execution_options(isolation_level="AUTOCOMMIT")
    return engine


def make_database(url: str, *, pool_size: int = 10, retry_attempts: int = 5, retry_backoff: float = 0.05) -> Database:
    """Create the engine for ``url`` (``sqlite:///path`` or ``postgresql+psycopg://…``) and its session factories.

    PostgreSQL connections are pinged when taken from the pool (``pool_pre_ping``): a connection the server dropped
    meanwhile (restart, failover, ``pg_terminate_backend``) is replaced before it is used; a disconnect seen during a
    statement invalidates the pool's older connections. ``retry_attempts`` and ``retry_backoff`` set
    :meth:`Database.retrying`'s policy (``PRIVFIT_DB_RETRY_ATTEMPTS``, ``PRIVFIT_DB_RETRY_BACKOFF_SECONDS``)."""
    parsed = make_url(url)
    gate = WriterGate(None)
    if parsed.get_backend_name() == "sqlite":
        # as many pooled connections as PostgreSQL's (pool + overflow): past QueuePool's default 5 + 10, every
        # request beyond would open a connection (and run the PRAGMAs) and close it again
        file = parsed.database not in (None, "", ":memory:") and not str(parsed.database).startswith("file:")
        pool = {"pool_size": pool_size, "max_overflow": pool_size * 2} if file else {}
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 60}, **pool)
        _configure_sqlite(engine)
        gate = WriterGate(os.path.abspath(str(parsed.database)) if file else None, enabled=True)
    else:
        if parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")
        engine = create_engine(parsed, pool_size=pool_size, max_overflow=pool_size * 2, pool_pre_ping=True,
                               isolation_level="READ COMMITTED")  # fmt: skip
    reader = sessionmaker(_read_only(engine), expire_on_commit=False)
    writer = sessionmaker(engine.execution_options(**{_IMMEDIATE: True}), expire_on_commit=False)
    return Database(engine, reader, writer, retry_attempts=retry_attempts, retry_backoff=retry_backoff, gate=gate)
