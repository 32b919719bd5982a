"""Issue 27, CLI start-up: the packages' commands are imported when they run.

``preflab --help`` lists every command with its one-line help from the registry
(``preflab.cli.LAZY_COMMANDS``) without importing them: each registry help must be the real
command's (checked here by importing every one), the help must read exactly as the eager app's
(every command mounted as before), and listing, completing or mistyping a command must import
none of the packages' command modules.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys

import pytest
import typer
from typer.core import TyperGroup
from typer.main import get_command
from typer.models import CommandInfo, TyperInfo
from typer.testing import CliRunner

from preflab.cli import LAZY_COMMANDS, app
from preflab.cli_common import OneLineErrors
from preflab.cli_lazy import LazyGroup

runner = CliRunner()
LAZY_MODULES = sorted({entry.module for entry in LAZY_COMMANDS})
#: what the packages' commands pull in and a listing must not
HEAVY = ("scipy", "pyarrow", "torch", "datasets", "trl", "transformers", "tokenizers", "httpx")


def eager_app() -> typer.Typer:
    """The app as it was before: each package's command mounted at its place, imported now."""
    entries = {entry.name: entry for entry in LAZY_COMMANDS}
    eager = typer.Typer(rich_markup_mode=app.rich_markup_mode)
    eager.info = copy.copy(app.info)
    eager.info.cls = OneLineErrors
    eager.registered_callback = app.registered_callback
    for info in app.registered_commands:
        entry = entries.get(info.name or "")
        eager.registered_commands.append(
            info if entry is None else CommandInfo(name=entry.name, callback=entry.imported())
        )
    for group in app.registered_groups:
        entry = entries.get(group.name or "")
        eager.registered_groups.append(
            group if entry is None else TyperInfo(entry.imported(), name=entry.name)
        )
    return eager


def test_the_registry_names_commands_the_app_lists():
    group = get_command(app)
    assert isinstance(group, TyperGroup)
    names = list(group.commands)
    assert {entry.name for entry in LAZY_COMMANDS} <= set(names)
    assert len(LAZY_COMMANDS) == 12 and "judge" in names and "status" in names


@pytest.mark.parametrize("entry", LAZY_COMMANDS, ids=lambda e: e.name)
def test_each_registry_help_is_the_commands_own(entry):
    real = entry.load(app.rich_markup_mode)
    assert real.name == entry.name
    assert isinstance(real, TyperGroup) == entry.group
    group = get_command(app)
    assert isinstance(group, LazyGroup)
    with group.table.listing():  # what the listing reads: the registry's stand-in
        stand_in = group.commands[entry.name]
    assert stand_in is not real and not hasattr(stand_in, "table")
    # what `preflab --help` and completion show, at every width the listing may have
    for limit in range(10, 240):
        assert stand_in.get_short_help_str(limit) == real.get_short_help_str(limit), limit
    assert entry.help == real.get_short_help_str(10**6)


@pytest.mark.parametrize("width", [40, 80, 120, 200])
def test_the_top_help_reads_as_the_eager_apps(width):
    lazy = runner.invoke(app, ["--help"], terminal_width=width)
    eager = runner.invoke(eager_app(), ["--help"], terminal_width=width)
    assert lazy.exit_code == eager.exit_code == 0, lazy.output
    assert lazy.output == eager.output
    for entry in LAZY_COMMANDS:
        assert f"\n  {entry.name} " in lazy.output


@pytest.mark.parametrize(
    "args", [["judge", "--help"], ["rm", "train", "--help"], ["serve", "--help"], ["frobnicate"]]
)
def test_a_command_reads_as_in_the_eager_app(args):
    lazy = runner.invoke(app, args, terminal_width=100)
    eager = runner.invoke(eager_app(), args, terminal_width=100)
    assert (lazy.exit_code, lazy.output) == (eager.exit_code, eager.output)


def _modules_after(*args: str, env: dict[str, str] | None = None) -> tuple[set[str], str]:
    """The modules a fresh ``preflab ARGS`` process has imported when it ends, and its stdout."""
    script = (
        "import sys\n"
        "from preflab.cli import app\n"
        "try:\n"
        f"    app({list(args)!r}, prog_name='preflab')\n"
        "except SystemExit:\n"
        "    pass\n"
        "sys.stderr.write('\\nMODULES ' + ' '.join(sorted(sys.modules)))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )
    tail = proc.stderr.rpartition("\nMODULES ")
    assert tail[1], proc.stderr
    return set(tail[2].split()), proc.stdout


def _top(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def test_the_help_imports_no_package_command():
    modules, out = _modules_after("--help")
    assert "judge" in out and "Label a project with a model judge" in out
    assert not modules & set(LAZY_MODULES)
    assert not _top(modules) & set(HEAVY)


def test_a_group_imports_its_own_module_only():
    modules, out = _modules_after("user", "--help")
    assert "create" in out
    assert "preflab.server.cli" in modules
    assert not modules & (set(LAZY_MODULES) - {"preflab.server.cli"})


def test_a_mistyped_command_is_named_without_importing_the_others():
    proc = subprocess.run(
        [sys.executable, "-m", "preflab.cli", "judg"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert "No such command 'judg'. Did you mean 'judge'?" in proc.stderr


def test_completion_lists_every_command_without_importing_them():
    env = {"_PREFLAB_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": "preflab "}
    modules, out = _modules_after(env=env)
    assert '"judge":"Label a project with a model judge' in out
    assert '"status":"Counts per kind, per rater, per batch."' in out
    assert not modules & set(LAZY_MODULES)
    env["_TYPER_COMPLETE_ARGS"] = "preflab judge "
    modules, out = _modules_after(env=env)
    assert '"run":' in out and '"templates":' in out
    assert "preflab.judge.cli" in modules
