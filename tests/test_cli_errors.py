"""Issue 11, CLI: a wrong or unreachable ``--db`` and other bad input end with one line that
names the problem and the fix, exit status 2 and no traceback; ``status`` never creates a
database; help shows the defaults. Exit codes: 0 ok, 1 the work failed, 2 bad usage or input."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from preflab.cli import app

runner = CliRunner()


def _refused_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "ok.db")
    assert runner.invoke(app, ["init", "--db", path]).exit_code == 0
    assert runner.invoke(app, ["project", "create", "p", "--db", path]).exit_code == 0
    return path


def one_line_error(args: list[str], code: int = 2) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, f"one line, got {lines}"
    assert lines[0].startswith("error: ")
    return lines[0]


def test_status_on_a_mistyped_sqlite_path_fails_and_creates_nothing(tmp_path):
    missing = tmp_path / "typo.db"
    line = one_line_error(["status", "p", "--db", str(missing)])
    assert "no database at" in line and "preflab init --db" in line
    assert not missing.exists(), "only init makes a database"


@pytest.mark.parametrize(
    "command",
    [
        ["status", "p"],
        ["project", "list"],
        ["project", "show", "p"],
        ["export", "p", "-f", "raw", "-o", "out"],
        ["quality", "report", "p"],
        ["demonstrations", "list", "p"],
        ["project", "create", "p"],
        ["rubric", "add", "p", "rubric.yaml"],
        ["import", "p", "items.jsonl"],
        ["user", "create", "alice"],
        ["user", "token", "alice"],
        ["user", "reset-link", "alice"],
        # an address that cannot be bound: were the check gone, serve would fail, not hang
        ["serve", "--host", "256.256.256.256"],
        ["eval", "create", "e", "--model-a", "a.jsonl", "--model-b", "b.jsonl"],
        ["eval", "report", "e"],
        ["verify", "project", "p"],
        ["rm", "train", "p", "--out", "model"],
    ],
)
def test_every_command_but_init_refuses_a_missing_database(command, tmp_path):
    missing = tmp_path / "nope.db"
    from preflab.io.formats.generic import TRAJECTORY_RUBRIC

    # valid input files: the missing database is the only problem
    (tmp_path / "rubric.yaml").write_text(TRAJECTORY_RUBRIC.model_dump_json())
    (tmp_path / "items.jsonl").write_text('{"prompt": "p", "completion": "c", "label": true}\n')
    for model in "ab":
        (tmp_path / f"{model}.jsonl").write_text(
            f'{{"prompt": "Q", "response": "R{model}", "model": "m-{model}"}}\n'
        )
    command = [str(tmp_path / a) if a.endswith((".yaml", ".jsonl")) else a for a in command]
    line = one_line_error([*command, "--db", str(missing)])
    assert "no database at" in line
    assert not missing.exists()


def test_init_in_a_missing_directory_names_the_fix(tmp_path):
    line = one_line_error(["init", "--db", str(tmp_path / "no" / "such" / "x.db")])
    assert "does not exist; create it first (mkdir -p" in line


def test_refused_postgresql_names_the_host_and_the_fix():
    port = _refused_port()
    line = one_line_error(
        ["status", "p", "--db", f"postgresql://someone:s3cret@127.0.0.1:{port}/x"]
    )
    assert "Connection refused" in line and f"port {port}" in line
    assert "check that PostgreSQL is running" in line
    assert "s3cret" not in line, "never print the password"


def test_an_unsupported_scheme_or_a_file_that_is_no_database(tmp_path):
    assert "mysql databases are not supported" in one_line_error(
        ["status", "p", "--db", "mysql://u@h/db"]
    )
    junk = tmp_path / "notes.db"
    junk.write_text("not sqlite")
    assert "file is not a database" in one_line_error(["status", "p", "--db", str(junk)])


def test_bad_input_exits_2_with_one_line(db):
    assert "unknown file format 'csv'" in one_line_error(
        ["export", "p", "-f", "trl-preference", "-o", "out", "--file-format", "csv", "--db", db]
    )
    assert "no project 'nope'" in one_line_error(["status", "nope", "--db", db])
    assert "no project 'nope'" in one_line_error(["project", "show", "nope", "--db", db])
    assert "unknown format" in one_line_error(
        ["export", "p", "-f", "nope", "-o", "out", "--db", db]
    )
    assert "no demonstration 42" in one_line_error(
        ["demonstrations", "accept", "p", "42", "--reviewer", "me", "--db", db]
    )


def test_success_exits_0(db, tmp_path):
    for args in (
        ["status", "p"],
        ["project", "list"],
        ["project", "show", "p"],
        ["demonstrations", "list", "p"],
        ["export", "p", "-f", "raw", "-o", str(tmp_path / "out")],
    ):
        result = runner.invoke(app, [*args, "--db", db])
        assert result.exit_code == 0, (args, result.output)


def test_help_shows_the_default_database():
    result = runner.invoke(app, ["status", "--help"], terminal_width=200)
    assert "[default: (./preflab.db)]" in result.output
    assert "PREFLAB_DB" in result.output


def test_user_reset_link_prints_a_single_use_link_that_sets_a_new_password(db):
    from preflab.server.auth import Gone, claim_reset_link, create_user
    from preflab.server.database import Database

    database = Database(db, pool_size=1, max_overflow=1)
    with database.writing() as s:
        create_user(s, "alice", password="first-password-123")
    result = runner.invoke(
        app, ["user", "reset-link", "alice", "--base-url", "https://label.example.org/", "--db", db]
    )
    assert result.exit_code == 0, result.output
    link = result.stdout.strip()
    assert link.startswith("https://label.example.org/reset/"), link
    token = link.rsplit("/", 1)[1]
    with database.writing() as s:
        assert claim_reset_link(s, token, "second-password-456").username == "alice"
    with pytest.raises(Gone, match="already used"), database.writing() as s:
        claim_reset_link(s, token, "third-password-789")
    database.dispose()


def test_user_reset_link_for_an_unknown_user_is_bad_input(db):
    line = one_line_error(["user", "reset-link", "bob", "--db", db])
    assert "no user 'bob'" in line and "preflab user create bob" in line
