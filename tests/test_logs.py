"""Structured logs: the JSON formatter, the format setting, and the dict config handed to uvicorn."""

from __future__ import annotations

import io
import json
import logging
import logging.config
import sys
from datetime import timedelta

import pytest
from pydantic import ValidationError

from privfit.logs import JsonFormatter, configure_logging, make_formatter, uvicorn_log_config
from privfit.settings import Settings


def _record(message: str = "job started", *args: object, name: str = "privfit.jobs", **extra: object):
    record = logging.LogRecord(name, logging.INFO, __file__, 1, message, args or None, None)
    record.__dict__.update(extra)
    return record


def test_json_line_has_the_standard_fields_and_the_extra_ones():
    line = JsonFormatter().format(_record(job_id="e6d2eeaa", solver="dp_gd", attempt=1))
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["level"] == "INFO" and entry["logger"] == "privfit.jobs" and entry["message"] == "job started"
    assert entry["job_id"] == "e6d2eeaa" and entry["solver"] == "dp_gd" and entry["attempt"] == 1
    assert entry["timestamp"].endswith("+00:00")
    assert not {"args", "msg", "levelno", "pathname", "exc_info", "created"} & entry.keys()


def test_extra_through_a_real_logger_and_unserialisable_values_become_strings():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("privfit.test_logs")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("recovered lost jobs %d", 2, extra={"job_ids": ["a", "b"], "elapsed": timedelta(seconds=2)})
    finally:
        logger.removeHandler(handler)
        logger.propagate = True
    entry = json.loads(stream.getvalue())
    assert entry["message"] == "recovered lost jobs 2" and entry["level"] == "WARNING"
    assert entry["job_ids"] == ["a", "b"] and entry["elapsed"] == "0:00:02"


def test_an_exception_is_one_string_field():
    try:
        raise ValueError("bad parameter 'radius'")
    except ValueError:
        record = logging.LogRecord("privfit.jobs", logging.ERROR, __file__, 1, "job failed", None, sys.exc_info())
    record.job_id = "j-1"
    line = JsonFormatter().format(record)
    assert "\n" not in line
    entry = json.loads(line)
    assert isinstance(entry["exception"], str)
    assert entry["exception"].startswith("Traceback") and "ValueError: bad parameter 'radius'" in entry["exception"]
    assert entry["job_id"] == "j-1" and entry["level"] == "ERROR"


def test_uvicorn_access_lines_carry_their_request_fields():
    record = _record('%s - "%s %s HTTP/%s" %d', "10.0.0.2:5100", "GET", "/healthz", "1.1", 200, name="uvicorn.access")
    entry = json.loads(JsonFormatter().format(record))
    assert entry["message"] == '10.0.0.2:5100 - "GET /healthz HTTP/1.1" 200'
    assert entry["method"] == "GET" and entry["path"] == "/healthz" and entry["status"] == 200
    assert entry["client"] == "10.0.0.2:5100" and entry["http_version"] == "1.1"


def test_log_format_setting(monkeypatch):
    monkeypatch.delenv("PRIVFIT_LOG_FORMAT", raising=False)
    assert Settings().log_format == "text"
    monkeypatch.setenv("PRIVFIT_LOG_FORMAT", "json")
    assert Settings().log_format == "json"
    monkeypatch.setenv("PRIVFIT_LOG_FORMAT", "xml")
    with pytest.raises(ValidationError, match="log_format"):
        Settings()


def test_configure_logging_installs_the_chosen_format_once():
    root = logging.getLogger()
    level = root.level
    try:
        first = configure_logging(Settings(log_format="json").log_format)
        assert isinstance(first.formatter, JsonFormatter) and first in root.handlers
        second = configure_logging(Settings(log_format="text").log_format)
        assert first not in root.handlers and second in root.handlers
        assert not isinstance(second.formatter, JsonFormatter)
        assert second.formatter.format(_record()).endswith("INFO privfit.jobs job started")
    finally:
        root.removeHandler(second)
        root.setLevel(level)
    with pytest.raises(ValueError, match="unknown log format"):
        make_formatter("xml")  # type: ignore[arg-type]


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_uvicorn_config_routes_access_logs_through_the_same_format(log_format):
    config = uvicorn_log_config(log_format, "warning")
    assert config["loggers"]["uvicorn.access"]["handlers"] == ["privfit"]
    assert config["loggers"]["uvicorn.access"]["level"] == "WARNING"
    assert config["root"]["handlers"] == ["privfit"]
    formatter = logging.config.dictConfigClass(config).configure_formatter(config["formatters"]["privfit"])
    assert isinstance(formatter, JsonFormatter) == (log_format == "json")
