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
