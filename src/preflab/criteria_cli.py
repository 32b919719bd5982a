"""``preflab criteria add / approve / show``: an item's own criteria (docs/rubric-rewards.md).
Thin: parse, call :mod:`preflab.store.criteria`, print. ``preflab/cli.py`` mounts
:data:`criteria_app` as ``criteria``, lazily (``LAZY_COMMANDS``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from .cli_common import DbOption, JsonOption, engine_for, fail, out, print_json
from .schema.criteria import CriteriaSet, load_criteria_file
from .store import repo, transaction
from .store.criteria import add_criteria, approve_criteria, read_criteria

criteria_app = typer.Typer(
    help="An item's own criteria (a per-item rubric): written, approved by someone else, graded.",
    no_args_is_help=True,
)


def _print_set(item: str, cset: CriteriaSet) -> None:
    state = (
        f"approved by {cset.approved_by} at {cset.approved_at:%Y-%m-%d %H:%M} UTC"
        if cset.approved and cset.approved_at is not None
        else "not approved (only approved criteria grade and reward)"
    )
    out.print(
        f"item [bold]{item}[/]: criteria v{cset.version} by {cset.author}, {state}",
        highlight=False,
    )
    table = Table("id", "weight", "must-have", "text")
    for c in cset.criteria:
        table.add_row(c.id, f"{c.weight:g}", "yes" if c.must_have else "", c.text)
    out.print(table)


@criteria_app.command("add")
def add(
    project: str,
    item: str,
    path: Annotated[
        Path,
        typer.Argument(
            exists=True,
            dir_okay=False,
            help="YAML or JSON: a list of {id, text, weight, must_have}.",
        ),
    ],
    author: Annotated[str, typer.Option(help="Who wrote these criteria (recorded).")],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Write ITEM's criteria as a new version by AUTHOR. A new version is unapproved until
    someone else approves it (preflab criteria approve); the same criteria again change nothing."""
    try:
        criteria = load_criteria_file(path)
    except ValueError as exc:
        fail(str(exc), 2)
    except OSError as exc:
        fail(f"{path}: {exc.strerror or exc}", 2)
    try:
        with transaction(engine_for(db)) as session:
            cset, created = add_criteria(
                session, repo.get_project(session, project), item, criteria, author
            )
    except (repo.StoreError, ValueError) as exc:
        fail(str(exc), 2)
    if as_json:
        print_json({"item": item, "created": created, **cset.as_json()})
        return
    if created:
        out.print(f"item {item}: criteria v{cset.version} written by {author}, awaiting approval")
    else:
        out.print(f"item {item}: unchanged, the criteria are v{cset.version} already")


@criteria_app.command("approve")
def approve(
    project: str,
    item: str,
    approver: Annotated[str, typer.Option(help="Who approves (not the author; recorded).")],
    version: Annotated[
        int | None, typer.Option(min=1, help="The version approved (default: the current one).")
    ] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Approve ITEM's current criteria: from now on they grade and reward (judge runs, the
    label page's checklist, the verl export's rubric rows)."""
    try:
        with transaction(engine_for(db)) as session:
            cset = approve_criteria(
                session, repo.get_project(session, project), item, approver, version=version
            )
    except repo.StoreError as exc:
        fail(str(exc), 2)
    if as_json:
        print_json({"item": item, **cset.as_json()})
        return
    out.print(f"item {item}: criteria v{cset.version} approved by {cset.approved_by}")


@criteria_app.command("show")
def show(project: str, item: str, db: DbOption = None, as_json: JsonOption = False) -> None:
    """ITEM's criteria: version, author, approver and each criterion."""
    try:
        with transaction(engine_for(db)) as session:
            cset = read_criteria(session, repo.get_project(session, project), item)
    except repo.StoreError as exc:
        fail(str(exc), 2)
    if cset is None:
        if as_json:
            print_json({"item": item, "criteria": None})
            return
        out.print(f"item {item} has no criteria (preflab criteria add)")
        return
    if as_json:
        print_json({"item": item, **cset.as_json()})
        return
    _print_set(item, cset)
