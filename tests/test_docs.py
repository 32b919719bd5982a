"""Everything a user can name is documented (in the style of datasette's ``tests/test_docs.py``).

The lists come from the code, not from a copy here: the Typer app is walked for its commands,
the registries give the export formats and judgment kinds, the settings model gives the project
settings. Add a command, a format, a kind or a setting without documenting it in ``README.md`` or
``docs/*.md`` and this fails, naming what is missing.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer.main
from pydantic import BaseModel

from preflab.cli import app
from preflab.io.export import EXPORT_FORMATS
from preflab.schema import JUDGMENT_KINDS
from preflab.server.policy import Settings
from preflab.settings import Settings as ProcessSettings
from preflab.settings import env_var

REPO = Path(__file__).resolve().parents[1]
DOC_FILES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def docs_text() -> str:
    return "\n".join(path.read_text(encoding="utf-8") for path in DOC_FILES)


def cli_commands(group, prefix: str = "preflab") -> list[str]:
    """Every leaf command's full name (``preflab project create``), walking nested groups.

    Typer may vendor its own click, so a group is whatever has ``commands``."""
    subcommands = getattr(group, "commands", None)
    if subcommands is None:
        return [prefix]
    names = []
    for name, command in sorted(subcommands.items()):
        if not command.hidden:
            names += cli_commands(command, f"{prefix} {name}")
    return names


def setting_paths(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Dotted names of every leaf setting (``policy.qualification.pass_bar``)."""
    paths = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            paths += setting_paths(annotation, f"{prefix}{name}.")
        else:
            paths.append(f"{prefix}{name}")
    return paths


def environment_variables() -> list[str]:
    """``PREFLAB_DB`` and the rest: one a field of :class:`preflab.settings.Settings`."""
    return [env_var(name) for name in ProcessSettings.model_fields]


def undocumented(names: list[str], *, pattern: str) -> list[str]:
    text = docs_text()
    return [name for name in names if not re.search(pattern.format(re.escape(name)), text)]


def where() -> str:
    return ", ".join(str(p.relative_to(REPO)) for p in DOC_FILES)


def test_the_lists_are_derived_from_the_code():
    # guards against a walk that finds nothing (and so documents nothing)
    commands = cli_commands(typer.main.get_command(app))
    assert {"preflab import", "preflab export", "preflab project create", "preflab serve"} <= set(
        commands
    )
    assert "policy.qualification.pass_bar" in setting_paths(Settings)
    assert "PREFLAB_DB" in environment_variables()
    assert "pairwise" in JUDGMENT_KINDS and "trl-preference" in EXPORT_FORMATS
    # and a name the docs do not hold is reported (a prefix of a documented name is not enough)
    assert undocumented(["trl-pref", "no-such-format"], pattern=r"`{}`") == [
        "trl-pref",
        "no-such-format",
    ]
    assert undocumented(["preflab expo"], pattern=r"{}(?![\w-])") == ["preflab expo"]


def test_every_cli_command_is_documented():
    # the command as typed: `preflab project create` followed by an argument, option or the end
    missing = undocumented(cli_commands(typer.main.get_command(app)), pattern=r"{}(?![\w-])")
    assert not missing, f"CLI commands not mentioned in {where()}: {missing}"


@pytest.mark.parametrize(
    ("what", "names"),
    [
        ("export formats", sorted(EXPORT_FORMATS)),
        ("judgment kinds", sorted(JUDGMENT_KINDS)),
    ],
)
def test_every_export_format_and_judgment_kind_is_documented(what, names):
    missing = undocumented(names, pattern=r"`{}`")
    assert not missing, f"{what} not documented as `name` in {where()}: {missing}"


def test_every_project_setting_is_documented():
    missing = undocumented(setting_paths(Settings), pattern=r"`{}`")
    assert not missing, f"project settings not documented as `dotted.name` in {where()}: {missing}"


def test_every_environment_variable_is_documented():
    missing = undocumented(environment_variables(), pattern=r"`{}`")
    assert not missing, f"environment variables not documented as `NAME` in {where()}: {missing}"


def test_the_evaluation_docs_figures_come_from_a_run(tmp_path):
    """Issue 31: docs/evaluation.md said 600 battles / 200 items when the demo held 567 / 189.
    The sentence is rebuilt from `preflab demo` + `preflab eval report` and must appear as is."""
    import json

    from typer.testing import CliRunner

    runner = CliRunner()
    demo = runner.invoke(app, ["demo", "--dir", str(tmp_path / "d")])
    assert demo.exit_code == 0, demo.output
    result = runner.invoke(
        app,
        ["eval", "report", "pandalm-demo", "--db", str(tmp_path / "d" / "preflab.db"), "--json"],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    per_item = report["battles"] // report["items"]
    assert per_item * report["items"] == report["battles"]
    ratings = ", ".join(
        f"{m['model']} {m['rating']:.0f} [{m['ci'][0]:.0f}, {m['ci'][1]:.0f}]"
        for m in report["ratings"]["models"]
    )
    sentence = (
        f"On the demo data (PandaLM test-set sample, {report['items']} items × {per_item} "
        f"annotators = {report['battles']} battles, 1000 bootstrap samples, seed 0): {ratings}."
    )
    text = (REPO / "docs" / "evaluation.md").read_text(encoding="utf-8")
    assert sentence in text, f"docs/evaluation.md should say:\n{sentence}"
