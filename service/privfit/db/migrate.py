"""Apply and check Alembic migrations programmatically (used by ``privfit migrate``, ``serve`` and the tests)."""

from __future__ import annotations

import os
from pathlib import Path

from alembic.config import Config

from alembic import command

ALEMBIC_INI = Path(__file__).resolve().parents[3] / "alembic.ini"


def alembic_ini() -> Path:
    """The source checkout's ``alembic.ini``; an installed (non-editable) privfit, e.g. the container image, has no
    checkout around it and names the copy shipped next to it in ``PRIVFIT_ALEMBIC_INI``."""
    return Path(os.environ.get("PRIVFIT_ALEMBIC_INI") or ALEMBIC_INI)


def alembic_config(url: str) -> Config:
    """The project's Alembic configuration pointed at ``url``."""
    ini = alembic_ini()
    if not ini.exists():
        raise FileNotFoundError(
            f"alembic.ini not found at {ini}; run from a privfit source checkout or set PRIVFIT_ALEMBIC_INI"
        )
    config = Config(str(ini))
    config.attributes["url"] = url
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Migrate the database at ``url`` to ``revision``."""
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    """Migrate the database at ``url`` down to ``revision``."""
    command.downgrade(alembic_config(url), revision)


def check(url: str) -> None:
    """Raise if the models and the migrated schema differ (``alembic check``)."""
    command.check(alembic_config(url))


LEDGER_TRIGGERS = {  # the append-only triggers of revision 0001 on SQLite: name → when
    "ledger_entries_no_update": "BEFORE UPDATE ON ledger_entries",
    "ledger_entries_no_delete": "BEFORE DELETE ON ledger_entries",
}


def recreate_sqlite_ledger_triggers() -> None:
    """Inside a migration: create the ledger's append-only triggers again on SQLite, with the names and bodies of
    revision 0001 (a batch-mode rebuild of ``ledger_entries`` drops them; PostgreSQL alters the table in place and
    keeps its trigger)."""
    from alembic import op

    if op.get_bind().dialect.name == "sqlite":
        for name, when in LEDGER_TRIGGERS.items():
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
            op.execute(f"CREATE TRIGGER {name} {when} BEGIN SELECT RAISE(ABORT, 'ledger_entries is append-only'); END")
