"""Logging: one configuration for the CLI and the server, text or JSON lines."""

from __future__ import annotations

import io
import json
import logging

import pytest
from typer.testing import CliRunner

from preflab.cli import app
from preflab.logs import configure_logging


@pytest.fixture
def restore_root_logger():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def json_lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_lines_hold_time_level_logger_message_and_extra_fields(restore_root_logger):
    stream = io.StringIO()
    configure_logging("info", json=True, stream=stream)
    logging.getLogger("preflab.io.importer").info(
        "imported %d judgments", 3, extra={"project": "p", "batch": 7}
    )
    (entry,) = json_lines(stream)
    assert entry["level"] == "info" and entry["logger"] == "preflab.io.importer"
    assert entry["message"] == "imported 3 judgments"
    assert (entry["project"], entry["batch"]) == ("p", 7)
    assert entry["time"].endswith("+00:00") and "T" in entry["time"]  # ISO 8601, UTC


def test_level_filters_records_below_it(restore_root_logger):
    stream = io.StringIO()
    configure_logging("warning", json=True, stream=stream)
    log = logging.getLogger("preflab.test")
    log.info("not written")
    log.warning("written")
    assert [e["message"] for e in json_lines(stream)] == ["written"]


def test_an_exception_is_one_json_line_with_its_traceback(restore_root_logger):
    stream = io.StringIO()
    configure_logging("error", json=True, stream=stream)
    try:
        raise ValueError("bad value")
    except ValueError:
        logging.getLogger("preflab.test").exception("failed", extra={"path": object()})
    (entry,) = json_lines(stream)
    assert "ValueError: bad value" in entry["exception"]
    assert entry["path"].startswith("<object")  # what JSON cannot hold is written as str


def test_configuring_again_replaces_the_handler_instead_of_adding_one(restore_root_logger):
    first, second = io.StringIO(), io.StringIO()
    configure_logging("info", json=True, stream=first)
    configure_logging("info", json=False, stream=second)
    logging.getLogger("preflab.test").info("once")
    assert first.getvalue() == ""
    assert second.getvalue().count("once") == 1
    assert " INFO preflab.test: once" in second.getvalue()


def test_an_unknown_level_is_refused():
    with pytest.raises(ValueError, match="log level 'loud'"):
        configure_logging("loud")


def test_the_cli_writes_json_logs_of_library_modules(tmp_path, restore_root_logger):
    result = CliRunner().invoke(
        app,
        ["--log-level", "info", "--log-format", "json", "init", "--db", str(tmp_path / "x.db")],
    )
    assert result.exit_code == 0, result.output
    entries = [json.loads(line) for line in result.output.splitlines() if line.startswith("{")]
    migrated = [e for e in entries if e["logger"] == "preflab.store.db"]
    assert migrated and migrated[-1]["message"] == "schema upgrade to head"
    assert migrated[-1]["database"].endswith("x.db")


def test_a_server_worker_takes_its_log_format_from_the_environment(
    monkeypatch, restore_root_logger
):
    # `preflab serve` hands --log-level/--log-format to its worker processes this way
    from preflab.logs import JsonFormatter
    from preflab.server import app as server_app

    monkeypatch.setenv("PREFLAB_LOG_FORMAT", "json")
    monkeypatch.setenv("PREFLAB_LOG_LEVEL", "info")
    monkeypatch.delenv("PREFLAB_SERVER_CONFIG", raising=False)
    monkeypatch.setattr(server_app, "create_app", lambda config: config)
    server_app.app_from_env()
    root = logging.getLogger()
    assert root.level == logging.INFO
    assert any(isinstance(h.formatter, JsonFormatter) for h in root.handlers)
