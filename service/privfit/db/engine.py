"""Engine and session setup for SQLite (embedded default) and PostgreSQL.

SQLite: WAL, foreign keys, a busy timeout, and Python's sqlite3 driver put in autocommit mode so SQLAlchemy emits
the ``BEGIN`` itself — ``BEGIN IMMEDIATE`` for write transactions (a deferred BEGIN that reads then writes can
fail with SQLITE_BUSY), following the SQLAlchemy documentation's pysqlite transaction recipe. PostgreSQL: READ
COMMITTED, and write transactions lock the rows they decide on with ``SELECT … FOR UPDATE``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

_IMMEDIATE = "privfit_sqlite_immediate"


@dataclass
class Database:
    """An engine plus two session factories: ``read()`` and ``write()`` (``BEGIN IMMEDIATE`` on SQLite)."""

    engine: Engine
    _reader: sessionmaker[Session]
    _writer: sessionmaker[Session]

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
        """A session whose transaction commits at the end (or rolls back on error); SQLite begins IMMEDIATE."""
        with self._writer() as session, session.begin():
            yield session

    def dispose(self) -> None:
        self.engine.dispose()


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


def make_database(url: str, *, pool_size: int = 10) -> Database:
    """Create the engine for ``url`` (``sqlite:///path`` or ``postgresql+psycopg://…``) and its session factories."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 60})
        _configure_sqlite(engine)
    else:
        if parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")
        engine = create_engine(parsed, pool_size=pool_size, max_overflow=pool_size * 2, pool_pre_ping=True,
                               isolation_level="READ COMMITTED")  # fmt: skip
    reader = sessionmaker(engine, expire_on_commit=False)
    writer = sessionmaker(engine.execution_options(**{_IMMEDIATE: True}), expire_on_commit=False)
    return Database(engine, reader, writer)
