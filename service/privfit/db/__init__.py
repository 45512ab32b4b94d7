"""Database layer: SQLAlchemy 2 models and engine/session setup for SQLite (default) and PostgreSQL."""

from .engine import Database, make_database
from .models import ApiKey, Base, Budget, Dataset, DatasetBlob, DatasetGrant, Evaluation, Job, LedgerEntry

__all__ = [
    "ApiKey",
    "Base",
    "Budget",
    "Database",
    "Dataset",
    "DatasetBlob",
    "DatasetGrant",
    "Evaluation",
    "Job",
    "LedgerEntry",
    "make_database",
]
