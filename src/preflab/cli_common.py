"""What every ``preflab`` command line shares: the consoles, the common options, one-line
failures with their exit status, the checked ``--db`` and the help's conventions.

The top CLI (:mod:`preflab.cli`) and the sub-CLIs of the packages (server, evaluate, train,
verify) import from here, so none of them imports another CLI module (no import circle).

Exit status: 0 success, 1 failure, 2 bad input (a bad option value, a file that is not there,
an invalid record, a name that already exists).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated, Any, NoReturn

import orjson
import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, TaskID
from typer.core import TyperGroup

from .settings import LOG_LEVELS, Settings, get_settings

out = Console()
err = Console(stderr=True)

DbOption = Annotated[
    str | None,
    # show_default as text: Rich would read "[default: ...]" inside the help string as markup and drop it
    typer.Option(
        "--db",
        help="Database URL or SQLite path (env var PREFLAB_DB).",
        show_default="./preflab.db",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
LogLevelOption = Annotated[
    str | None,
    typer.Option(
        "--log-level",
        help=f"{', '.join(LOG_LEVELS)} (env var PREFLAB_LOG_LEVEL; default warning).",
    ),
]
LogFormatOption = Annotated[
    str | None,
    typer.Option("--log-format", help="text or json (env var PREFLAB_LOG_FORMAT; default text)."),
]


def fail(message: str, code: int = 1) -> NoReturn:
    err.print(
        f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True
    )  # one line, however narrow
    raise typer.Exit(code)


def loaded_settings(**options: Any) -> Settings:
    """The settings with these command-line options; a bad value (option or environment) ends
    the command with one line per problem naming the variable (exit 2)."""
    from pydantic import ValidationError

    try:
        return get_settings(**options)
    except ValidationError as exc:
        problems = "; ".join(
            f"{_setting_source(str(e['loc'][0]), options)}={e['input']!r}: {e['msg']}"
            for e in exc.errors()
        )
        fail(f"{problems}; see `preflab config show --help` and docs/settings.md", 2)


def _setting_source(name: str, options: dict[str, Any]) -> str:
    from .settings import env_var

    return f"--{name.replace('_', '-')}" if options.get(name) is not None else env_var(name)


def print_json(value: Any) -> None:
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2, default=str).decode() + "\n")


def engine_for(db: str | None, *, create: bool = False):
    """An engine with the schema migrated to the latest revision. Only ``create`` (``init``)
    makes a new SQLite file; a bad, missing or unreachable ``--db`` ends the
    command with one line naming the problem and the fix (exit 2), never a traceback."""
    from sqlalchemy.exc import DBAPIError

    from .store.db import open_db

    url = checked_db_url(db, create=create)
    try:
        return open_db(url.render_as_string(hide_password=False))
    except DBAPIError as exc:
        shown = url.render_as_string(hide_password=True)
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else type(exc).__name__
        fix = (
            "check that PostgreSQL is running there and the user, password and database name are right"
            if url.get_backend_name() == "postgresql"
            else "check the path and that the file is a preflab database"
        )
        fail(f"--db {shown}: cannot open the database ({reason}); {fix}", 2)


SUPPORTED_DB = ("sqlite", "postgresql")


def checked_db_url(db: str | None, *, create: bool = False):
    """``--db`` (or ``$PREFLAB_DB``, or ./preflab.db) as a SQLAlchemy URL, checked before anything
    connects: a known scheme, an installed driver, and for SQLite an existing file (or, with
    ``create``, an existing directory)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    from .store.db import default_url, normalise_url

    raw = db or default_url()
    try:
        url = make_url(normalise_url(raw))
    except ArgumentError:
        fail(
            f"--db {raw!r} is not a database URL; give a SQLite path (./preflab.db) or "
            "postgresql://user@host:5432/dbname",
            2,
        )
    backend = url.get_backend_name()
    if backend not in SUPPORTED_DB:
        fail(
            f"--db {raw!r}: {backend} databases are not supported; use a SQLite path or a postgresql:// URL",
            2,
        )
    if backend == "postgresql":
        try:
            url.get_dialect().import_dbapi()
        except ImportError:
            fail(
                f"--db {raw!r}: the PostgreSQL driver is not installed; pip install 'preflab[postgres]'",
                2,
            )
        return url
    path = Path(url.database or "")
    if not url.database or url.database == ":memory:":
        fail(f"--db {raw!r}: give a SQLite file path, e.g. ./preflab.db", 2)
    if path.is_dir():
        fail(
            f"--db {raw!r} is a directory; give the database file's path, e.g. "
            f"{path / 'preflab.db'} (`preflab init --db {path / 'preflab.db'}` creates it)",
            2,
        )
    if create and not path.parent.exists():
        fail(
            f"--db {raw!r}: directory {path.parent} does not exist; create it first (mkdir -p {path.parent})",
            2,
        )
    if not create and not path.is_file():
        fail(
            f"--db {raw!r}: no database at {path}; create one with `preflab init --db {raw}` or fix the path",
            2,
        )
    return url


# -- the help's conventions -------------------------------------------------------------------
#
# Typer 0.2x prints a parameter's type as `<str>`, `<int>`, `<bool>` (even for an on/off flag,
# which takes no value) and a required argument as `{project}` in the usage line. preflab's help
# follows the convention of click and of most Unix tools instead: a value's kind in capitals
# (TEXT, INTEGER, PATH), nothing for a flag, arguments in capitals (`PROJECT`, `[FILES]...`).
# Typer exposes no setting for it, so the three display methods are replaced once, here;
# `tests/test_cli_help.py` reads every command's help and fails if a `<type>` comes back.

_KIND_NAMES = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT", "bool": "BOOLEAN"}


def _conventional_type(label: str | None) -> str | None:
    """``<int>`` → ``INTEGER``, ``<path>`` → ``PATH``, ``<a|b>`` → ``[a|b]``; None stays None."""
    if not label:
        return label
    inner = label[1:-1] if label.startswith("<") and label.endswith(">") else label
    if "|" in inner:
        return f"[{inner}]"
    if inner.startswith("list[") and inner.endswith("]"):
        return f"{_KIND_NAMES.get(inner[5:-1], inner[5:-1].upper())}..."
    return _KIND_NAMES.get(inner, inner.upper())


def _apply_help_conventions() -> None:
    from typer import core

    plain_display_type = core._TyperParameter.display_type

    def display_type(self: Any, ctx: Any) -> str | None:
        if getattr(self, "is_flag", False) and getattr(self, "is_bool_flag", False):
            return None  # --x/--no-x takes no value
        return _conventional_type(plain_display_type(self, ctx))

    core._TyperParameter.display_type = display_type  # type: ignore[method-assign,assignment]

    def usage_name(self: Any) -> str:
        name = self.display_name_raw.upper()
        name = name if self.required else f"[{name}]"
        return f"{name}..." if self.nargs != 1 else name

    def rich_name(self: Any) -> str:
        name = self.display_name_raw.upper()
        return f"{name}..." if self.metavar is None and self.nargs != 1 else name

    core.TyperArgument._usage_display_name = usage_name  # type: ignore[method-assign]
    core.TyperArgument._rich_display_name = rich_name  # type: ignore[method-assign]


_apply_help_conventions()


class OneLineErrors(TyperGroup):
    """The top command group: a usage error (an unknown command, a missing argument, a file that
    is not there) is one line, ``error: ...; see `preflab import --help```, exit 2, as every
    other refusal of bad input is (click would print a usage block and a boxed message)."""

    def main(  # type: ignore[override]
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except typer.TyperException as exc:  # click's ClickException (typer vendors click)
            if exc.exit_code != 2:  # not a usage error: click's own words, one line
                err.print(f"error: {exc.format_message()}", markup=False, highlight=False)
                sys.exit(exc.exit_code)
            ctx = getattr(exc, "ctx", None)
            where = ctx.command_path if ctx is not None else (prog_name or "preflab")
            message = exc.format_message().rstrip(".")
            err.print(
                f"[bold red]error:[/] {escape(message)}; see `{escape(where)} --help`",
                highlight=False,
                soft_wrap=True,
            )
            sys.exit(2)
        except typer.Abort:
            err.print("aborted", highlight=False)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


# -- progress that a log can read -----------------------------------------------------------------


class LineProgress(Progress):
    """A Rich progress bar on a terminal; elsewhere (a log, a CI job, a pipe) one line per
    ``step`` percent of each task, ``verifying: 40% (2,000/5,000) 81 s``, so a 13-minute
    command is not silent. A task without a total says how far it got every ``every_s``.
    Nothing is printed in the first ``quiet_s`` seconds: a quick command prints no progress."""

    def __init__(
        self,
        *columns: Any,
        step: float = 10.0,
        every_s: float = 30.0,
        quiet_s: float = 2.0,
        **kw: Any,
    ):
        console: Console = kw.setdefault("console", err)
        self._lines = not console.is_terminal
        if self._lines:
            kw["disable"] = True  # no live display: the lines below are the output
        super().__init__(*columns, **kw)
        self._step, self._every_s = step, every_s
        #: a task that ends within this many seconds prints nothing (a quick command's stderr
        #: stays its own: one line for a refusal, nothing else)
        self._quiet_s = quiet_s
        self._started = time.monotonic()
        self._said: dict[TaskID, tuple[float, float]] = {}  # task: (last percent step, when)

    def add_task(self, description: str, *args: Any, **kw: Any) -> TaskID:
        task_id = super().add_task(description, *args, **kw)
        self._say(task_id)  # the start: "verifying: 0% (0/5,000) 0 s"
        return task_id

    def update(self, task_id: TaskID, **kw: Any) -> None:
        super().update(task_id, **kw)
        self._say(task_id)

    def advance(self, task_id: TaskID, advance: float = 1) -> None:
        super().advance(task_id, advance)
        self._say(task_id)

    def _say(self, task_id: TaskID) -> None:
        if not self._lines:
            return
        task = self._tasks[task_id]
        now = time.monotonic()
        if now - self._started < self._quiet_s:
            return
        last_pct, last_time = self._said.get(task_id, (-1.0, task.start_time or now))
        elapsed = task.elapsed or 0.0
        if task.total:
            pct = min(100.0, 100.0 * task.completed / task.total)
            reached = (pct // self._step) * self._step
            if reached <= last_pct and task.completed < task.total:
                return
            if reached <= last_pct:  # finished: say it once
                reached = 100.0
                if last_pct >= 100.0:
                    return
            self._said[task_id] = (reached, now)
            done = f"{task.completed:,.0f}/{task.total:,.0f}"
            self.console.print(
                f"{task.description}: {reached:.0f}% ({done}) {elapsed:.0f} s",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        elif now - last_time >= self._every_s:
            self._said[task_id] = (last_pct, now)
            self.console.print(
                f"{task.description}: {task.completed:,.0f} so far, {elapsed:.0f} s",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
