"""The process configuration: one settings object, read when needed, shown with secrets masked."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError
from sqlalchemy import text
from typer.testing import CliRunner

from preflab.cli import app
from preflab.settings import DEFAULT_DB_URL, Settings, effective_settings, env_var, get_settings
from preflab.store.db import default_url, make_engine

runner = CliRunner()


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    """No PREFLAB_* variable of the machine running the tests leaks in."""
    for name in Settings.model_fields:
        monkeypatch.delenv(env_var(name), raising=False)


def test_defaults_without_environment():
    settings = get_settings()
    assert settings.db == DEFAULT_DB_URL == "sqlite:///preflab.db"
    assert (settings.log_level, settings.log_format) == ("warning", "text")
    assert settings.sqlite_page_size == 4096 and settings.import_worker is None


def test_the_environment_is_read_when_asked_not_at_import(monkeypatch):
    # preflab.store.db was imported above, before the variable existed
    monkeypatch.setenv("PREFLAB_DB", "postgresql://u@h/d")
    assert default_url() == "postgresql://u@h/d"


def test_options_win_over_the_environment(monkeypatch):
    monkeypatch.setenv("PREFLAB_LOG_LEVEL", "ERROR")  # case does not matter
    assert get_settings().log_level == "error"
    assert get_settings(log_level="debug", log_format=None).log_level == "debug"


def test_a_bad_value_names_the_variable(monkeypatch):
    monkeypatch.setenv("PREFLAB_SQLITE_PAGE_SIZE", "huge")
    with pytest.raises(ValidationError, match="sqlite_page_size"):
        get_settings()


def test_an_empty_variable_counts_as_unset(monkeypatch):
    monkeypatch.setenv("PREFLAB_IMPORT_WORKER", "")
    assert get_settings().import_worker is None


def test_sqlite_page_size_set_after_import_reaches_a_new_database(tmp_path, monkeypatch):
    # regression: the page size was read once, when preflab.store.db was imported
    monkeypatch.setenv("PREFLAB_SQLITE_PAGE_SIZE", "16384")
    engine = make_engine(f"sqlite:///{tmp_path / 'new.db'}")
    with engine.connect() as conn:
        conn.execute(text("CREATE TABLE t (x)"))
        assert conn.execute(text("PRAGMA page_size")).scalar() == 16384
    engine.dispose()


def test_import_cache_set_after_import_is_used_by_the_next_import(tmp_path, monkeypatch):
    # regression: the importer read $PREFLAB_IMPORT_CACHE_KIB once, at import time
    from preflab.io.importer import api as importer

    monkeypatch.setenv("PREFLAB_IMPORT_CACHE_KIB", "1234")
    engine = make_engine(f"sqlite:///{tmp_path / 'cache.db'}")
    with engine.connect() as conn, importer._import_cache(conn):
        assert conn.execute(text("PRAGMA cache_size")).scalar() == -1234
    engine.dispose()


def test_the_server_default_database_is_the_one_default(monkeypatch):
    from preflab.server.app import ServerConfig, app_from_env

    assert ServerConfig().db_url == DEFAULT_DB_URL
    monkeypatch.setenv("PREFLAB_DB", "sqlite:///elsewhere.db")
    monkeypatch.setattr("preflab.server.app.create_app", lambda config: config)
    assert app_from_env().db_url == "sqlite:///elsewhere.db"


def test_effective_settings_say_where_each_value_came_from(monkeypatch):
    monkeypatch.setenv("PREFLAB_IMPORT_WORKER", "1")
    rows = {r.name: r for r in effective_settings(log_format="json")}
    assert set(rows) == set(Settings.model_fields)
    assert (rows["import_worker"].value, rows["import_worker"].source) == (True, "env")
    assert (rows["log_format"].value, rows["log_format"].source) == ("json", "option")
    assert (rows["db"].value, rows["db"].source) == (DEFAULT_DB_URL, "default")
    assert rows["db"].env_var == "PREFLAB_DB"


def test_config_show_masks_secrets(monkeypatch):
    monkeypatch.setenv("PREFLAB_DB", "postgresql://alice:s3cret-pw@db.example:5432/labels")
    monkeypatch.setenv("PREFLAB_SERVER_CONFIG", '{"db_url": "postgresql://alice:s3cret-pw@x/y"}')
    result = runner.invoke(app, ["config", "show", "--json"])
    assert result.exit_code == 0, result.output
    assert "s3cret-pw" not in result.output
    shown = json.loads(result.output)
    assert shown["db"] == {
        "value": "postgresql://alice:***@db.example:5432/labels",
        "source": "env",
        "env": "PREFLAB_DB",
    }
    assert shown["server_config"]["value"] == "***"
    # the table's width follows the terminal Rich found at import time (80 columns under xdist):
    # the exact masked value is checked in the JSON above, the table must only never leak it
    table = runner.invoke(app, ["config", "show"])
    assert table.exit_code == 0 and "s3cret-pw" not in table.output
    assert "***" in table.output


def test_config_show_reports_options_global_and_its_own():
    result = runner.invoke(
        app, ["--log-level", "info", "config", "show", "--db", "other.db", "--json"]
    )
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert shown["log_level"] == {"value": "info", "source": "option", "env": "PREFLAB_LOG_LEVEL"}
    assert shown["db"]["value"] == "other.db" and shown["db"]["source"] == "option"
    assert shown["log_format"]["source"] == "default"


def test_a_bad_variable_stops_every_command_with_its_name(monkeypatch):
    monkeypatch.setenv("PREFLAB_LOG_FORMAT", "xml")
    result = runner.invoke(app, ["config", "show"])
    assert result.exit_code == 2
    assert "PREFLAB_LOG_FORMAT='xml'" in result.output and "'text' or 'json'" in result.output
    bad_option = runner.invoke(app, ["--log-level", "loud", "config", "show"])
    assert bad_option.exit_code == 2 and "--log-level='loud'" in bad_option.output
