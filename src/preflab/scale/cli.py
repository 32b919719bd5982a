"""``preflab scale ...``: shard a project, run the statistics and the unary export on shards."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, NoReturn

import orjson
import typer
from rich.console import Console
from rich.table import Table

from ..io.export.base import ExportError
from ..store.db import default_url, open_db
from ..store.repo import NotFound
from .engine import Runner, SchedulerError
from .export import export_unary
from .shards import (
    DEFAULT_SHARDS,
    ShardError,
    generate_unary,
    open_shards,
    write_from_project,
    write_from_raw,
)
from .stats import run_stats

scale_app = typer.Typer(
    help="Statistics and the unary (KTO) export over Parquet shards, in-process or on Dask.",
    no_args_is_help=True,
)
out = Console()
err = Console(stderr=True)

SchedulerOption = typer.Option(
    "sync",
    "--scheduler",
    help="sync (this process, shard by shard), local:N (a Dask LocalCluster of N worker "
    "processes) or tcp://host:port (a running Dask scheduler).",
)


def fail(message: str, code: int = 1) -> NoReturn:
    err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True, markup=True)
    raise typer.Exit(code)


_SIZE = re.compile(r"(\d+(?:\.\d+)?)([kmb]?)$", re.IGNORECASE)


def parse_count(text: str) -> int:
    """``10m`` -> 10_000_000 (k, m, b suffixes)."""
    m = _SIZE.match(text.strip())
    if not m:
        raise typer.BadParameter(f"{text!r}: a count such as 500000, 10m or 1b")
    scale = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9}[m.group(2).lower()]
    return int(float(m.group(1)) * scale)


def existing_db(url: str) -> str:
    """``url``, after checking that a SQLite file exists (opening would create an empty one)."""
    path = url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else url
    if "://" not in path and not Path(path).is_file():
        fail(
            f"--db {path}: no such database file; give --db (or PREFLAB_DB) of a preflab database",
            2,
        )
    return url


@scale_app.command("shards")
def shards_cmd(
    source: str = typer.Argument(..., help="project name, or a raw export (JSONL)"),
    out_dir: Path = typer.Option(..., "--out", help="new or empty directory for the shards"),
    db: str | None = typer.Option(None, "--db", help="Database URL or SQLite path (PREFLAB_DB)."),
    n_shards: int = typer.Option(DEFAULT_SHARDS, "--shards", min=1, help="number of shards"),
    include_ai: bool = typer.Option(False, "--include-ai", help="keep source 'ai' labels"),
) -> None:
    """Write the resolved label set of SOURCE as Parquet shards (by a hash of item_id)."""
    path = Path(source)
    try:
        if path.suffix in {".jsonl", ".json"} or path.is_file():
            if not path.is_file():
                fail(f"{source}: no such file")
            layout = write_from_raw(path, out_dir, n_shards, include_ai)
        else:
            engine = open_db(existing_db(db or default_url()))
            try:
                layout = write_from_project(engine, source, out_dir, n_shards, include_ai)
            finally:
                engine.dispose()
    except NotFound as exc:
        fail(f"{exc} (or give the path of a raw export)")
    except (ShardError, ValueError) as exc:
        fail(str(exc))
    out.print(f"{layout['rows']} labels in {layout['n_shards']} shards: {out_dir}", highlight=False)


@scale_app.command("generate")
def generate_cmd(
    out_dir: Path = typer.Option(..., "--out", help="new or empty directory for the shards"),
    labels: str = typer.Option("1m", "--labels", help="how many thumbs (e.g. 10m)"),
    n_shards: int = typer.Option(DEFAULT_SHARDS, "--shards", min=1),
    seed: int = typer.Option(0, "--seed"),
) -> None:
    """Synthetic production thumbs in the shard layout (for benchmarks)."""
    try:
        layout = generate_unary(out_dir, parse_count(labels), n_shards, seed)
    except ShardError as exc:
        fail(str(exc))
    out.print(f"{layout['rows']} labels in {layout['n_shards']} shards: {out_dir}", highlight=False)


def _open(directory: Path) -> Any:
    try:
        return open_shards(directory)
    except ShardError as exc:
        fail(str(exc))


@scale_app.command("stats")
def stats_cmd(
    directory: Path = typer.Argument(..., help="a shard directory"),
    scheduler: str = SchedulerOption,
    json_path: Path | None = typer.Option(None, "--json", help="write every figure here"),
    dawid_skene: bool = typer.Option(
        True,
        "--dawid-skene/--no-dawid-skene",
        help="Dawid-Skene on the thumbs (one pass per EM iteration)",
    ),
) -> None:
    """Alpha and percent agreement per batch x dimension, per-rater counts, the thumbs
    resolution, Bradley-Terry and Dawid-Skene over the shards."""
    shards = _open(directory)
    started = time.perf_counter()
    try:
        with Runner(scheduler) as runner:
            figures = run_stats(
                shards, runner, dawid_skene=("unary", "thumb") if dawid_skene else None
            )
    except (SchedulerError, ShardError) as exc:
        fail(str(exc))
    figures["seconds"] = round(time.perf_counter() - started, 3)
    if json_path is not None:
        json_path.write_bytes(orjson.dumps(figures, option=orjson.OPT_INDENT_2) + b"\n")
    table = Table("batch", "kind", "dimension", "level", "labels", "units", "alpha", "% agree")
    for row in figures["agreement"]:
        table.add_row(
            row["batch"],
            row["kind"],
            row["dimension"],
            row["level"],
            str(row["n_labels"]),
            str(row["n_units"]),
            f"{row['alpha']:.4f}",
            f"{row['percent_agreement']:.4f}",
        )
    out.print(table)
    t = figures["thumbs"]
    if t.get("units"):
        out.print(
            f"thumbs: {t['labels']} labels on {t['units']} candidates; resolved "
            f"{t['resolved_up']} up, {t['resolved_down']} down; {t['no_majority']} even splits dropped",
            highlight=False,
        )
    out.print(
        f"{len(figures['raters'])} rater x dimension rows; {figures['seconds']} s", highlight=False
    )


@scale_app.command("export")
def export_cmd(
    directory: Path = typer.Argument(..., help="a shard directory"),
    out_dir: Path = typer.Option(..., "--out", help="output directory (replaced atomically)"),
    scheduler: str = SchedulerOption,
) -> None:
    """The unary (KTO) labels: per candidate the plurality thumb, one Parquet file per shard,
    manifest.json with counts, drops and SHA-256 of every file."""
    shards = _open(directory)
    try:
        with Runner(scheduler) as runner:
            manifest = export_unary(shards, out_dir, runner)
    except (SchedulerError, ShardError, ExportError) as exc:
        fail(str(exc))
    c = manifest["counts"]
    dropped = manifest["gates"]["aggregation"]["dropped"]
    out.print(
        f"{c['rows_out']} rows from {c['labels_in']} labels ({dropped} even splits dropped): {out_dir}",
        highlight=False,
    )
