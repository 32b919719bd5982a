"""Commands of ``preflab`` whose module is imported only when they run (issue 27).

The sub-CLIs of the packages (``judge``, ``train``, ``verify``, ``scale``, the server, ...) pull
in scipy, pyarrow, HTTP clients and more when imported; mounted eagerly they cost every command,
``preflab --help`` included, seconds of start-up. Click's documented answer is a group whose
``get_command`` imports on demand ("lazily loading subcommands"); Typer, built on click, has no
mechanism of its own, so :class:`LazyGroup` is that group for a Typer app:

- each lazy command is a :class:`LazyCommand` in a registry: its name, where it lives
  (``module:attribute``, a ``typer.Typer`` for a group or a command function) and its one-line
  help, the first sentence of its real help (``tests/test_cli_lazy.py`` imports every one and
  fails when the two differ, and compares ``preflab --help`` with every command loaded);
- :meth:`LazyCommand.hold_place` registers a stand-in with the Typer app (a command or an empty
  group carrying that one-line help), so Typer orders the listing as it always did;
- the group's table of commands (:class:`LazyCommands`) swaps the stand-in for the real command,
  built by Typer from the imported module, the first time the command is looked up; the names
  are known without importing, so usage errors ("No such command", "Did you mean") read as
  before; listing the commands (``preflab --help``, shell completion of ``preflab <TAB>``)
  reads the stand-ins and imports nothing.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

import typer
import typer.main
from typer.core import MarkupMode, TyperGroup

from .cli_common import OneLineErrors


@dataclass(frozen=True)
class LazyCommand:
    """A command (or a group, ``group=True``) of the top app, imported when it runs."""

    name: str
    #: ``package.module:attribute``: a ``typer.Typer`` (a group) or a command function
    target: str
    #: what ``preflab --help`` shows: the first sentence of the command's real help
    help: str
    group: bool = False

    @property
    def module(self) -> str:
        return self.target.partition(":")[0]

    def hold_place(self, app: typer.Typer) -> None:
        """Register a stand-in with ``app``: the command's place in the listing and its help."""
        if self.group:
            app.add_typer(typer.Typer(), name=self.name, help=self.help)
        else:
            app.command(self.name, help=self.help)(_stand_in)

    def imported(self) -> Any:
        """Import the module: the ``typer.Typer`` or the command function it names."""
        module, _, attribute = self.target.partition(":")
        return getattr(importlib.import_module(module), attribute)

    def load(self, rich_markup_mode: MarkupMode) -> Any:
        """The click command, built by Typer as mounting it on the app would build it."""
        app = typer.Typer(add_completion=False, rich_markup_mode=rich_markup_mode)
        app.callback()(_stand_in)  # a group, whatever it holds, so the command is one of its own
        if self.group:
            app.add_typer(self.imported(), name=self.name)
        else:
            app.command(self.name)(self.imported())
        group = typer.main.get_command(app)
        assert isinstance(group, TyperGroup)
        return group.commands[self.name]


def _stand_in() -> None:
    """Never runs: the real command replaces it when it is looked up."""


class LazyCommands(MutableMapping[str, Any]):
    """The group's commands by name, in the listing's order; a lazy one's module is imported
    when its command is first read (inside :meth:`listing`: its stand-in, nothing imported)."""

    def __init__(
        self,
        commands: MutableMapping[str, Any],
        lazy: dict[str, LazyCommand],
        rich_markup_mode: MarkupMode,
    ):
        self._commands = dict(commands)
        self._pending = {name: lazy[name] for name in self._commands if name in lazy}
        self._rich_markup_mode = rich_markup_mode
        self._listing = False

    def __getitem__(self, name: str) -> Any:
        entry = self._pending.get(name)
        if entry is not None and not self._listing:
            self._commands[name] = entry.load(self._rich_markup_mode)  # keeps its place
            del self._pending[name]
        return self._commands[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._pending.pop(name, None)
        self._commands[name] = command

    def __delitem__(self, name: str) -> None:
        self._pending.pop(name, None)
        del self._commands[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._commands)

    def __len__(self) -> int:
        return len(self._commands)

    @contextmanager
    def listing(self) -> Iterator[None]:
        """Within: a command not loaded yet reads as its stand-in (name and one-line help)."""
        self._listing = True
        try:
            yield
        finally:
            self._listing = False


class LazyGroup(OneLineErrors):
    """The top group: :class:`OneLineErrors` whose commands named in :attr:`lazy` are imported
    when they run. A subclass names its registry: ``class Top(LazyGroup): lazy = {...}``."""

    lazy: ClassVar[dict[str, LazyCommand]] = {}

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.table = LazyCommands(self.commands, self.lazy, self.rich_markup_mode)
        self.commands = self.table

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        with self.table.listing():  # the help lists names and one-line helps: nothing imported
            super().format_commands(ctx, formatter)

    def shell_complete(self, ctx: Any, incomplete: str) -> list[Any]:
        with self.table.listing():  # `preflab <TAB>`: the names and their one-line helps
            return super().shell_complete(ctx, incomplete)
