"""Log output: one JSON object per line (``PRIVFIT_LOG_FORMAT=json``, for containers) or plain text (default).

A JSON line holds ``timestamp`` (UTC, ISO 8601), ``level``, ``logger``, ``message``, the ``extra={...}`` fields the
code passed (``job_id``, ``solver``, ``attempt``…), and ``exception`` / ``stack`` as strings when present. Uvicorn's
access log lines also carry ``client``, ``method``, ``path``, ``http_version`` and ``status``.

What is logged is decided by the callers; the rule they follow: identifiers, settings, counts and error types,
never a row value of a dataset (a log line leaves the privacy boundary with no charge).
"""

from __future__ import annotations

import json
import logging
import logging.config
import sys
from datetime import UTC, datetime
from typing import Any, Literal

LogFormat = Literal["json", "text"]

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"

# The attributes every LogRecord has; anything else on a record came from ``extra=``.
_RECORD_ATTRIBUTES = frozenset(
    {
        *logging.LogRecord("", logging.INFO, "", 0, "", None, None).__dict__,
        "message",
        "asctime",
        "taskName",
        "color_message",  # uvicorn's coloured copy of the message
    }
)
_ACCESS_FIELDS = ("client", "method", "path", "http_version", "status")


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line; values that JSON cannot hold are rendered with ``str``."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "timestamp": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.name == "uvicorn.access" and isinstance(record.args, tuple) and len(record.args) == 5:
            entry.update(zip(_ACCESS_FIELDS, record.args, strict=True))
        for key, value in record.__dict__.items():
            if key not in _RECORD_ATTRIBUTES and key not in entry:
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


def make_formatter(log_format: LogFormat) -> logging.Formatter:
    if log_format == "json":
        return JsonFormatter()
    if log_format == "text":
        return logging.Formatter(TEXT_FORMAT)
    raise ValueError(f"unknown log format {log_format!r}: 'json' or 'text'")


class _PrivfitHandler(logging.StreamHandler):
    """The stderr handler :func:`configure_logging` installs (and replaces on a second call)."""


def configure_logging(log_format: LogFormat, level: int | str = logging.INFO) -> logging.Handler:
    """Send every record that reaches the root logger to stderr in ``log_format``; returns the handler."""
    handler = _PrivfitHandler(sys.stderr)
    handler.setFormatter(make_formatter(log_format))
    root = logging.getLogger()
    for previous in [h for h in root.handlers if isinstance(h, _PrivfitHandler)]:
        root.removeHandler(previous)
    root.addHandler(handler)
    root.setLevel(level)
    return handler


def uvicorn_log_config(log_format: LogFormat, level: str = "info") -> dict[str, Any]:
    """A ``logging.config.dictConfig`` for ``uvicorn.run(log_config=...)``: uvicorn's server and access logs and the
    root logger (privfit's own records) share one handler and format. Uvicorn applies it in every worker process
    it spawns, so ``--workers N`` logs the same way as one process."""
    make_formatter(log_format)  # refuses an unknown name here rather than in every worker process
    formatter: dict[str, Any] = {"()": f"{__name__}.JsonFormatter"} if log_format == "json" else {"format": TEXT_FORMAT}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"privfit": formatter},
        "handlers": {
            "privfit": {"class": "logging.StreamHandler", "formatter": "privfit", "stream": "ext://sys.stderr"}
        },
        "loggers": {
            "uvicorn": {"handlers": ["privfit"], "level": level.upper(), "propagate": False},
            "uvicorn.error": {"level": level.upper()},
            "uvicorn.access": {"handlers": ["privfit"], "level": level.upper(), "propagate": False},
        },
        "root": {"handlers": ["privfit"], "level": "INFO"},
    }
