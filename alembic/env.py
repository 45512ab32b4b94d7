"""Alembic environment: migrations are the only way privfit's schema changes (SQLite and PostgreSQL)."""

from __future__ import annotations

import os

from alembic import context
from privfit.db.engine import make_database
from privfit.db.models import Base

DEFAULT_URL = "sqlite:///./privfit.db"


def database_url() -> str:
    return (
        context.get_x_argument(as_dictionary=True).get("url")
        or context.config.attributes.get("url")
        or os.environ.get("PRIVFIT_DATABASE_URL")
        or DEFAULT_URL
    )


def run_migrations_offline() -> None:
    context.configure(url=database_url(), target_metadata=Base.metadata, literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    database = make_database(database_url(), pool_size=1)
    try:
        with database.engine.connect() as connection:
            _run(connection)
    finally:
        database.dispose()


def _run(connection) -> None:  # type: ignore[no-untyped-def]
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
