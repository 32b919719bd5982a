"""``preflab verify ...``: run the verifiers from the command line."""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TimeElapsedColumn
from rich.table import Table

from ..cli_common import LineProgress, engine_for
from .pool import default_workers, load_solutions, result_row, verify_many
from .sandbox import SandboxUnavailable, check_available
from .tasks import CodeTask, StdioTask, TaskFileError, load_tasks

verify_app = typer.Typer(
    help="Score code, SQL and math completions with sandboxed verifiers.", no_args_is_help=True
)
console = Console(stderr=True)


@verify_app.command("run")
def run(
    tasks_file: Path = typer.Argument(..., exists=True, dir_okay=False, help="tasks JSONL"),
    solutions_file: Path = typer.Argument(..., exists=True, dir_okay=False, help="solutions JSONL"),
    out: Path = typer.Option(Path("verify-results.jsonl"), "--out", "-o", help="results JSONL"),
    workers: int = typer.Option(
        default_workers(), "--workers", "-w", min=1, help="worker processes"
    ),
) -> None:
    """Verify every solution against its task; write one JSON result per line to OUT."""
    try:
        tasks = load_tasks(tasks_file)
        submissions = load_solutions(solutions_file, tasks)
        if any(isinstance(tasks[s.task_id], CodeTask | StdioTask) for s in submissions):
            check_available()
    except (TaskFileError, SandboxUnavailable) as e:
        console.print(str(e), style="red", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(2) from e
    started = time.monotonic()
    progress = LineProgress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )
    with progress:
        bar = progress.add_task("verifying", total=len(submissions))
        verdicts = verify_many(
            tasks, submissions, workers=workers, on_done=lambda _: progress.advance(bar)
        )
    elapsed = time.monotonic() - started
    tmp = out.with_name(out.name + ".partial")
    with open(tmp, "wb") as f:  # written whole, then renamed: never a half-written results file
        for verdict, sub in zip(verdicts, submissions, strict=True):
            f.write(orjson.dumps(result_row(verdict, sub)) + b"\n")
    tmp.replace(out)
    _summary(verdicts, elapsed, workers, out)


@verify_app.command("trajectories")
def trajectories(
    tasks_file: Path = typer.Argument(..., exists=True, dir_okay=False, help="tasks JSONL"),
    trajectories_file: Path = typer.Argument(
        ..., exists=True, dir_okay=False, help="RLHF-2026.11 trajectories JSONL"
    ),
    out: Path = typer.Option(..., "--out", "-o", help="trajectories JSONL with verifier blocks"),
) -> None:
    """Verify each trajectory's last answer against its task and fill its ``verifier`` block
    (f2p_exit, p2p_exit, harness_sha256_verified, terminal_reward); others pass unchanged."""
    from pydantic import ValidationError

    from .tasks import read_jsonl
    from .trajectories import verify_trajectory

    try:
        tasks = load_tasks(tasks_file)
        rows = read_jsonl(trajectories_file)
    except TaskFileError as e:
        console.print(str(e), style="red", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(2) from e
    lines, verified, errors = [], 0, []
    for number, record in rows:
        try:
            filled, verdict = verify_trajectory(record, tasks)
        except (ValidationError, ValueError) as e:
            errors.append(f"{trajectories_file}:{number}: (record): {e}")
            continue
        verified += verdict is not None
        lines.append(orjson.dumps(filled) + b"\n")
    if errors:
        console.print(
            "\n".join(errors) + "\nnothing was written",
            style="red",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(2)
    tmp = out.with_name(out.name + ".partial")
    tmp.write_bytes(b"".join(lines))
    tmp.replace(out)
    console.print(f"{verified} of {len(lines)} trajectories verified -> {out}")


def _summary(verdicts, elapsed: float, workers: int, out: Path) -> None:
    by_kind: dict[str, list] = defaultdict(list)
    for v in verdicts:
        by_kind[v.kind].append(v)
    table = Table(
        title=f"{len(verdicts)} verifications in {elapsed:.2f}s "
        f"({len(verdicts) / max(elapsed, 1e-9):.1f}/s, {workers} workers)"
    )
    for column in ("kind", "solutions", "reward 1", "reward 0", "harness not verified"):
        table.add_column(column)
    for kind, group in sorted(by_kind.items()):
        passed = sum(v.reward > 0 for v in group)
        tampered = sum(v.harness_sha256_verified is False for v in group)
        table.add_row(kind, str(len(group)), str(passed), str(len(group) - passed), str(tampered))
    Console().print(table)
    console.print(f"results: {out}")


def verify_project(
    engine, project_name: str, *, workers: int = 1, on_planned=None, on_done=None, guess=True
) -> dict:
    """Verify every verifiable item (and trajectory with a task) of a project and store the
    verdicts (candidates' ``metadata.verifier``, trajectories' ``verifier`` block) in one
    transaction: all of them or, on any error, none. Returns counts.

    Items are read, then verified outside any transaction (a code run takes seconds; no lock is
    held meanwhile), then written together."""
    from preflab.store import repo, transaction

    from .items import plan_project, verdicts_to_store

    with transaction(engine) as session:
        project = repo.get_project(session, project_name)
        items = [entry.item for entry in repo.iter_items_with_judgments(session, project)]
    plan = plan_project(items)
    if plan.errors:
        raise TaskFileError(
            "\n".join(plan.errors) + "\nfix these items' tasks and run again; nothing was stored"
        )
    if any(isinstance(t, CodeTask | StdioTask) for t in plan.tasks.values()):
        check_available()
    if on_planned:
        on_planned(len(plan.submissions))
    verdicts = verify_many(plan.tasks, plan.submissions, workers=workers, on_done=on_done)
    stored = verdicts_to_store(plan, verdicts)
    flagged: dict[str, list[str]] = {}
    if guess:
        flagged = guess_flags(items, plan, workers=workers)
        by_id = {i.id: i for i in items}
        for item_id in plan.tasks:
            if item_id in flagged or "guessable" in (by_id[item_id].metadata or {}):
                stored.items.setdefault(item_id, {})["guessable"] = flagged.get(item_id, [])
    with transaction(engine) as session:
        project = repo.get_project(session, project_name)
        repo.merge_metadata(session, project, stored.items, stored.candidates)
    return {
        "items": len(plan.tasks),
        "verified": len(verdicts),
        "passed": sum(v.passed for v in verdicts),
        "harness_not_verified": sum(v.harness_sha256_verified is False for v in verdicts),
        "guessable": sorted(flagged),
    }


def guess_flags(items, plan, *, workers: int = 1) -> dict[str, list[str]]:
    """The guessability check (:mod:`.guess`) on a project's verifiable items (not trajectories):
    item id -> the trivial answers its verifier passes. Stored as the item's
    ``metadata.guessable``; the ``verl`` export leaves such items out."""
    from preflab.schema import prompt_as_text

    from .guess import check_guessability

    by_id = {i.id: i for i in items}
    tasks = {t: task for t, task in plan.tasks.items() if t not in plan.trajectories}
    choices = {}
    for t in tasks:
        given = (by_id[t].metadata or {}).get("choices")
        choices[t] = given if isinstance(given, list) else None
    prompts: dict[str, Any] = {t: prompt_as_text(by_id[t].prompt) for t in tasks}
    return check_guessability(tasks, prompts, choices, workers=workers).flagged


@verify_app.command("project")
def project_command(
    name: str = typer.Argument(..., help="project name"),
    db: str | None = typer.Option(
        None,
        "--db",
        help="Database URL or SQLite path (env var PREFLAB_DB; default ./preflab.db).",
    ),
    workers: int = typer.Option(
        default_workers(), "--workers", "-w", min=1, help="worker processes"
    ),
    guess: bool = typer.Option(
        True,
        "--guess/--no-guess",
        help="Run the guessability check and store metadata.guessable (the verl export leaves "
        "flagged items out).",
    ),
) -> None:
    """Verify a project's verifiable items (metadata.verifiable: code / sql / math, and trajectories
    with a task) and store each verdict where the exports read it, in one transaction."""
    from preflab.store.repo import NotFound

    engine = engine_for(db)  # before the progress bar, so a refusal is its only line
    progress = LineProgress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )
    with progress:
        bar = progress.add_task("verifying", total=None)
        try:
            counts = verify_project(
                engine,
                name,
                workers=workers,
                on_planned=lambda n: progress.update(bar, total=n),
                on_done=lambda _: progress.advance(bar),
                guess=guess,
            )
        except (TaskFileError, SandboxUnavailable, NotFound) as e:
            progress.stop()
            console.print(str(e), style="red", markup=False, highlight=False, soft_wrap=True)
            raise typer.Exit(2) from e
    console.print(
        f"{counts['verified']} answers of {counts['items']} items verified: {counts['passed']} passed, "
        f"{counts['harness_not_verified']} with the harness changed; verdicts stored in project {name!r}"
    )
    if counts["guessable"]:
        console.print(
            f"guessable (a trivial answer passes; left out of the verl export): "
            f"{', '.join(counts['guessable'])}",
            markup=False,
            highlight=False,
        )


def _mount_rollouts_command() -> None:
    """``preflab verify rollouts`` (pass@k of sampled rollouts) lives in :mod:`.rollouts_cli`."""
    from .rollouts_cli import rollouts_command

    verify_app.command("rollouts")(rollouts_command)
    from .mc_steps_cli import steps_command

    verify_app.command("steps")(steps_command)


_mount_rollouts_command()
