"""``preflab verify rollouts``: the command (mounted on ``preflab verify`` by :mod:`.cli`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TimeElapsedColumn
from rich.table import Table

from ..cli_common import LineProgress
from .passk import DEFAULT_KS
from .pool import default_workers
from .sandbox import SandboxUnavailable, check_available
from .tasks import CodeTask, StdioTask, TaskFileError

console = Console(stderr=True)


def _cell(entry: dict[str, Any] | None) -> str:
    if not entry:
        return "-"
    lo, hi = entry["ci"]
    return f"{entry['value']:.3f} [{lo:.2f}-{hi:.2f}]"


def passk_table(report: dict[str, Any]) -> Table:
    """Overall and one row per domain: tasks, samples, pass@k with its bootstrap CI."""
    ks = report["ks"]
    level = int(round(report["bootstrap"]["level"] * 100))
    table = Table(title=f"pass@k (unbiased, Chen et al. 2021; {level}% bootstrap CI over tasks)")
    for column in ("domain", "tasks", "samples", *(f"pass@{k}" for k in ks)):
        table.add_column(column, no_wrap=True)
    groups = [("overall", report["overall"]), *report["domains"].items()]
    for name, g in groups:
        table.add_row(
            name, str(g["tasks"]), str(g["samples"]), *(_cell(g.get(f"pass@{k}")) for k in ks)
        )
    return table


def rollouts_command(
    tasks_file: Path = typer.Argument(..., exists=True, dir_okay=False, help="tasks JSONL"),
    rollouts_file: Path = typer.Argument(
        ..., exists=True, dir_okay=False, help="rollouts.jsonl (`preflab sample`)"
    ),
    out: Path = typer.Option(
        Path("rollouts.scored.jsonl"), "--out", "-o", help="the rollouts with their rewards"
    ),
    report_path: Path = typer.Option(
        Path("passk.json"), "--report", help="pass@k report (JSON; input of `preflab advise`)"
    ),
    k: list[int] = typer.Option(
        list(DEFAULT_KS), "--k", help="k of pass@k (repeatable; only k <= n is reported)"
    ),
    bootstrap: int = typer.Option(1000, "--bootstrap", min=0, help="bootstrap resamples"),
    seed: int = typer.Option(0, "--seed", help="bootstrap seed"),
    guess: bool = typer.Option(
        True, "--guess/--no-guess", help="run the guessability check (flagged tasks: no pass@k)"
    ),
    workers: int = typer.Option(
        default_workers(), "--workers", "-w", min=1, help="worker processes"
    ),
    as_json: bool = typer.Option(False, "--json", help="print the report as JSON"),
) -> None:
    """Score ROLLOUTS with the verifiers; pass@k per task, per domain and overall, with
    bootstrap CIs; tasks a trivial answer passes are flagged and left out."""
    from .rollouts import load_tasks_with_meta, read_rollouts, score_rollouts

    try:
        tasks, meta = load_tasks_with_meta(tasks_file)
        rollouts = read_rollouts(rollouts_file, tasks)
        if any(isinstance(tasks[r.task_id], CodeTask | StdioTask) for r in rollouts):
            check_available()
    except (TaskFileError, SandboxUnavailable) as e:
        console.print(str(e), style="red", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(2) from e
    if not rollouts:
        console.print(f"{rollouts_file}: no rollouts", style="red")
        raise typer.Exit(2)
    progress = LineProgress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    with progress:
        bar = progress.add_task("verifying", total=len(rollouts))
        result = score_rollouts(
            tasks,
            meta,
            rollouts,
            ks=k,
            resamples=bootstrap,
            seed=seed,
            workers=workers,
            guess=guess,
            on_done=lambda _: progress.advance(bar),
        )
    tmp = out.with_name(out.name + ".partial")
    with open(tmp, "wb") as f:
        for row in result.scored:
            f.write(orjson.dumps(row) + b"\n")
    tmp.replace(out)
    report_path.write_text(json.dumps(result.report, indent=2, ensure_ascii=False) + "\n")
    if as_json:
        print(json.dumps(result.report, indent=2, ensure_ascii=False))
        return
    Console().print(passk_table(result.report))
    flagged = result.report["guessability"]["flagged"]
    for task_id, labels in sorted(flagged.items()):
        console.print(
            f"guessable, left out of pass@k: {task_id} (passed by {', '.join(labels)})",
            markup=False,
            highlight=False,
        )
    console.print(
        f"{result.report['rollouts']} rollouts verified ({result.report['rollouts_per_s']}/s), "
        f"{result.report['passed']} passed -> {out}; report -> {report_path}",
        markup=False,
        highlight=False,
    )
