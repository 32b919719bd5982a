"""The ``preflab`` command line. Thin: parse, call the layers, print with Rich.

Exit status: 0 success, 1 failure, 2 bad input (e.g. an import with invalid lines).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Column, Table

from . import __version__
from .cli_common import (
    DbOption,
    JsonOption,
    LineProgress,
    LogFormatOption,
    LogLevelOption,
    engine_for,
    err,
    fail,
    loaded_settings,
    out,
    print_json,
)
from .cli_lazy import LazyCommand, LazyGroup
from .logs import configure_logging
from .settings import effective_settings

# -- the packages' commands: imported when they run -------------------------------------------
#
# Each lives with its package and pulls in that package's dependencies (scipy, pyarrow, HTTP
# clients, ...): mounted lazily (`cli_lazy.py`), a command costs only its own imports and
# `preflab --help` imports none of them. The help is the first sentence of the command's own
# (tests/test_cli_lazy.py fails when they differ).

LAZY_COMMANDS = (
    LazyCommand("serve", "preflab.server.cli:serve", "Run the collection server (uvicorn)."),
    LazyCommand(
        "user", "preflab.server.cli:user_app", "Accounts of the collection server.", group=True
    ),
    LazyCommand(
        "eval",
        "preflab.evaluate.cli:eval_app",
        "Blind side-by-side evaluation of model versions by people.",
        group=True,
    ),
    LazyCommand(
        "judge",
        "preflab.judge.cli:judge_app",
        "Label a project with a model judge (source: ai) and audit it against the people.",
        group=True,
    ),
    LazyCommand(
        "criteria",
        "preflab.criteria_cli:criteria_app",
        "An item's own criteria (a per-item rubric): written, approved by someone else, graded.",
        group=True,
    ),
    LazyCommand(
        "verify",
        "preflab.verify.cli:verify_app",
        "Score code, SQL and math completions with sandboxed verifiers.",
        group=True,
    ),
    LazyCommand(
        "scale",
        "preflab.scale.cli:scale_app",
        "Statistics and the unary (KTO) export over Parquet shards, in-process or on Dask.",
        group=True,
    ),
    LazyCommand(
        "rm",
        "preflab.train.cli:rm_app",
        "Reward model: train on an export, evaluate against baselines, score answers.",
        group=True,
    ),
    LazyCommand(
        "bestofn",
        "preflab.train.cli:bestofn",
        "Best-of-N (rejection sampling): keep the reward model's best answer per prompt as SFT rows.",
    ),
    LazyCommand(
        "rl",
        "preflab.train.cli:rl",
        "RL with TRL GRPO and a KL anchor against the verifiers, a reward model or both; reports "
        "reward, KL, entropy, length, zero-variance groups and language drift per step.",
    ),
    LazyCommand(
        "sample",
        "preflab.train.stage_cli:sample_command",
        "Sample N answers per prompt from an endpoint or a local model into rollouts.jsonl.",
    ),
    LazyCommand(
        "advise",
        "preflab.train.stage_cli:advise_command",
        "Decide each domain's stage from pass@k (cold start SFT, stop SFT, preference data, "
        "GRPO) and write the prompt lists: demonstrations, grpo, preference, drop.",
    ),
)


class PreflabGroup(LazyGroup):
    """The top group: one-line usage errors, the packages' commands imported when they run."""

    lazy = {entry.name: entry for entry in LAZY_COMMANDS}


app = typer.Typer(
    name="preflab",
    help="Auditable human feedback data for post-training: import, label, measure, export.",
    no_args_is_help=True,
    cls=PreflabGroup,
    context_settings={"max_content_width": 120},
    rich_markup_mode=None,  # help text is literal: "[default: x]" or "[CLS]" must not be read as markup
)
project_app = typer.Typer(help="Create, list and inspect projects.", no_args_is_help=True)
rubric_app = typer.Typer(help="Versioned rubrics.", no_args_is_help=True)
schema_app = typer.Typer(help="JSON Schemas of the wire formats.", no_args_is_help=True)
quality_app = typer.Typer(
    help="Agreement, gold, bias audits and the quality report.", no_args_is_help=True
)
app.add_typer(project_app, name="project")
app.add_typer(rubric_app, name="rubric")
app.add_typer(schema_app, name="schema")
app.add_typer(quality_app, name="quality")


def _version(value: bool) -> None:
    if value:
        out.print(f"preflab {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
    log_level: LogLevelOption = None,
    log_format: LogFormatOption = None,
) -> None:
    """preflab: preference data people can trust."""
    ctx.obj = {"log_level": log_level, "log_format": log_format}  # for `config show`
    settings = loaded_settings(**ctx.obj)
    configure_logging(settings.log_level, json=settings.log_format == "json")


# -- database and projects ------------------------------------------------------------


@app.command()
def init(db: DbOption = None) -> None:
    """Create the database (or migrate it to the latest schema)."""
    from .store.db import current_revision

    engine = engine_for(db, create=True)
    out.print(
        f"database ready: {engine.url.render_as_string(hide_password=True)} "
        f"(schema {current_revision(engine)})",
        highlight=False,
    )


db_app = typer.Typer(help="Database maintenance.", no_args_is_help=True)
app.add_typer(db_app, name="db")


@db_app.command("text-stats")
def db_text_stats(
    db: DbOption = None,
    batch: Annotated[int, typer.Option(min=1, help="Candidates a batch (one commit each).")] = 5000,
) -> None:
    """Compute the stored text statistics (token count, word length, formatting features) of
    every candidate that has none: a database written before they existed. Batches in pk
    order, each committed: stop it any time and run it again to resume; a second run does
    nothing. Exports and reports are right with or without it (they compute what is missing)."""
    from .io import text_stats
    from .store.db import session_factory

    engine = engine_for(db)
    with session_factory(engine)() as session:  # each batch commits (fill(commit=True))
        done = text_stats.fill(session, batch=batch, commit=True)
    out.print(f"text statistics computed for {done} candidate(s)", highlight=False)


@project_app.command("create")
def project_create(
    name: str,
    kinds: Annotated[
        str, typer.Option(help="Comma-separated judgment kinds to collect.")
    ] = "pairwise",
    title: Annotated[str, typer.Option(help="Human-readable title.")] = "",
    rubric: Annotated[
        Path | None, typer.Option(help="Rubric file (YAML or JSON).", exists=True, dir_okay=False)
    ] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create a project in an existing database (`preflab init` creates one)."""
    from . import audit
    from .store import repo, transaction

    engine = engine_for(db)
    try:
        with transaction(engine) as session:
            project = repo.create_project(
                session, name, title=title, kinds=[k.strip() for k in kinds.split(",") if k.strip()]
            )
            if rubric is not None:
                repo.add_rubric(session, project, _load_rubric(rubric))
            info = _project_info(project)
            details = {"kinds": info["kinds"]}
            audit.record(session, audit.cli_actor(), "project.created", audit.target(name), details)
    except repo.StoreError as exc:
        fail(str(exc), 2)
    if as_json:
        print_json(info)
    else:
        out.print(f"created project [bold]{name}[/] collecting {', '.join(info['kinds'])}")


def _load_rubric(path: Path):
    from pydantic import ValidationError

    from .schema import Rubric

    try:
        return Rubric.load(path)
    except ValidationError as exc:
        problems = "\n".join(
            f"{path}: {'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()
        )
        fail(f"invalid rubric\n{problems}", 2)
    except ValueError as exc:  # the message starts with file:line
        fail(str(exc), 2)
    except OSError as exc:
        fail(f"{path}: {exc.strerror or exc}", 2)


def _project_info(project) -> dict[str, Any]:
    return {
        "name": project.name,
        "title": project.title,
        "kinds": list(project.kinds),
        "rubric": None
        if project.rubric_key is None
        else f"{project.rubric_key} v{project.rubric_version}",
        "settings": project.settings,
        "created_at": project.created_at.isoformat() if project.created_at else None,
    }


@project_app.command("list")
def project_list(db: DbOption = None, as_json: JsonOption = False) -> None:
    """List projects."""
    from .store import repo, transaction

    with transaction(engine_for(db)) as session:
        infos = [
            _project_info(p) | repo.project_counts(session, p) for p in repo.list_projects(session)
        ]
    if as_json:
        print_json(infos)
        return
    table = Table("project", "kinds", "rubric", "items", "judgments", "raters")
    for i in infos:
        table.add_row(
            i["name"],
            ", ".join(i["kinds"]),
            i["rubric"] or "-",
            str(i["items"]),
            str(i["judgments"]),
            str(i["raters"]),
        )
    out.print(table if infos else "no projects yet: `preflab project create NAME`")


@project_app.command("show")
def project_show(name: str, db: DbOption = None, as_json: JsonOption = False) -> None:
    """Show a project's settings and counts."""
    from .store import repo, transaction

    try:
        with transaction(engine_for(db)) as session:
            project = repo.get_project(session, name)
            info = _project_info(project) | repo.project_counts(session, project)
    except repo.NotFound as exc:
        fail(str(exc), 2)
    if as_json:
        print_json(info)
        return
    for key in ("name", "title", "kinds", "rubric", "items", "judgments", "raters", "created_at"):
        out.print(
            f"[bold]{key}[/]: {info[key] if not isinstance(info[key], list) else ', '.join(info[key])}",
            highlight=False,
        )


@rubric_app.command("add")
def rubric_add(
    project: str,
    path: Annotated[Path, typer.Argument(exists=True, dir_okay=False)],
    db: DbOption = None,
) -> None:
    """Add a rubric (a changed rubric becomes a new version; versions are immutable)."""
    from .store import repo, transaction

    rubric = _load_rubric(path)
    try:
        with transaction(engine_for(db)) as session:
            row = repo.add_rubric(session, repo.get_project(session, project), rubric)
            version = row.version
    except repo.StoreError as exc:  # an unknown project or a rubric the store refuses: bad input
        fail(str(exc), 2)
    out.print(f"project {project}: rubric [bold]{rubric.id}[/] is now version {version}")


# -- import, validate, export ---------------------------------------------------------


def _byte_progress(paths: list[Path]) -> Progress:
    return LineProgress(
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
    )


def _report_problems(problems: list[Any], total: int) -> None:
    for problem in problems:
        err.print(str(problem), highlight=False, markup=False)
    if total > len(problems):
        err.print(f"... and {total - len(problems)} more", highlight=False)


@app.command("import")
def import_(
    project: str,
    files: Annotated[
        list[Path],
        typer.Argument(exists=True, dir_okay=False, help="JSONL, JSON, Parquet, optionally .gz"),
    ],
    keep_extra: Annotated[
        bool, typer.Option(help="Keep unknown fields in item metadata instead of rejecting them.")
    ] = False,
    skip_invalid: Annotated[
        bool, typer.Option(help="Skip (and report) invalid records instead of failing the import.")
    ] = False,
    format: Annotated[
        str | None, typer.Option("--format", help="Force a record format instead of detecting it.")
    ] = None,
    ai_labeler: Annotated[
        list[str] | None,
        typer.Option(
            "--ai-labeler",
            help="A 'labeler' name (exact) that is a model: its labels are stored as source 'ai' "
            "unless the record states its source; repeatable. No name is a model otherwise.",
        ),
    ] = None,
    ai_labeler_pattern: Annotated[
        list[str] | None,
        typer.Option(
            "--ai-labeler-pattern",
            help="A shell-style glob of model 'labeler' names, matched case-insensitively against "
            "the whole name (e.g. 'gpt-*'); repeatable.",
        ),
    ] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Import items and judgments. All-or-nothing and idempotent."""
    from .io.importer import ImportFailed, ImportOptions, import_files, labeler_lines
    from .store.repo import StoreError

    engine = engine_for(db)
    options = ImportOptions(
        keep_extra=keep_extra,
        skip_invalid=skip_invalid,
        format=format,
        ai_labelers=tuple(ai_labeler or ()),
        ai_labeler_patterns=tuple(ai_labeler_pattern or ()),
    )
    total = sum(p.stat().st_size for p in files)
    with _byte_progress(files) as progress:
        task = progress.add_task("importing", total=total)
        try:
            report = import_files(
                engine, project, files, options, progress=lambda n: progress.advance(task, n)
            )
        except ImportFailed as exc:
            progress.stop()
            _report_problems(exc.problems, exc.total)
            fail(
                f"import failed: {exc.total} problem(s); nothing was imported. Fix the lines above "
                "(or pass --skip-invalid to import the valid records only).",
                2,
            )
        except StoreError as exc:
            progress.stop()
            fail(str(exc), 2)
    _audit_import(engine, project, files, report)
    data = report.__dict__ | {"skipped": [str(p) for p in report.skipped]}
    if as_json:
        print_json(data)
        return
    if report.already_imported:
        out.print("these files were already imported; nothing changed")
        return
    out.print(
        f"imported into [bold]{project}[/]: {report.items_added} items "
        f"(+{report.items_existing} already present), {report.judgments_added} judgments "
        f"(+{report.judgments_existing} already present); formats: "
        + ", ".join(f"{k} x{v}" for k, v in report.formats.items()),
        highlight=False,
    )
    if report.judgments_not_collected:
        out.print(
            f"left out {report.judgments_not_collected} judgment(s) of kinds the project does not collect "
            "(derived from records kept whole, e.g. a trajectory's rubric block)",
            highlight=False,
        )
    for line in labeler_lines(report):
        out.print(line, highlight=False)
    if report.formats.get("trajectory"):
        out.print(_step_verdicts_line(report.step_verdicts), highlight=False)
    if report.skipped:
        err.print(f"skipped {len(report.skipped)} invalid record(s):", highlight=False)
        _report_problems(report.skipped[:50], len(report.skipped))


def _audit_import(engine, project: str, files: list[Path], report) -> None:
    """One ``items.imported`` audit event by ``cli:<os user>`` (none when nothing changed)."""
    from . import audit

    if report.already_imported:
        return
    details = audit.import_details(report) | {"source": "cli", "files": [p.name for p in files]}
    audit.record_in(engine, audit.cli_actor(), "items.imported", audit.target(project), details)


def _audit_export(engine, project: str, fmt: str, out_path: Path, manifest: dict) -> None:
    from . import audit

    details = audit.export_details(fmt, out_path, manifest) | {"source": "cli"}
    audit.record_in(engine, audit.cli_actor(), "project.exported", audit.target(project), details)


def _step_verdicts_line(mode: str) -> str:
    """What imported ``prm_steps`` verdicts became (the project's ``policy.imported_step_verdicts``)."""
    if mode == "suggestion":
        return "trajectory step verdicts: kept as suggestions for raters to check (no label stored)"
    return (
        "trajectory step verdicts: stored as labels (the items count as labelled); set "
        "policy.imported_step_verdicts to 'suggestion' to have raters check them"
    )


@app.command()
def validate(
    files: Annotated[list[Path], typer.Argument(exists=True, dir_okay=False)],
    keep_extra: Annotated[
        bool, typer.Option(help="Accept unknown fields (they would go to metadata).")
    ] = False,
    format: Annotated[str | None, typer.Option("--format", help="Force a record format.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Check files without importing them (exit 2 when a record is invalid)."""
    from .io.importer import ImportOptions, validate_files

    report = validate_files(files, ImportOptions(keep_extra=keep_extra, format=format))
    counts = {
        "records": report.records,
        "items": report.items,
        "judgments": report.judgments,
        "formats": report.formats,
    }
    if as_json:
        print_json(
            {
                "ok": report.ok,
                "problems": [str(p) for p in report.problems],
                "total_problems": report.total_problems,
                **counts,
            }
        )
    elif not report.ok:
        _report_problems(report.problems, report.total_problems)
    else:
        out.print(
            f"ok: {report.records} records, {report.items} items, {report.judgments} judgments; formats: "
            + ", ".join(f"{k} x{v}" for k, v in report.formats.items()),
            highlight=False,
        )
    if not report.ok:
        raise typer.Exit(2)


def _parse_gate(value: str | None) -> tuple[float, float] | None:
    from .schema.export_options import length_gate_fits

    if value is None:
        return None
    try:
        lo, hi = (float(v) for v in value.split(":"))
    except ValueError:
        fail(f"--length-gate {value!r}: expected MIN:MAX, e.g. 0.85:1.20", 2)
    if not length_gate_fits((lo, hi)):
        fail(f"--length-gate {value!r}: need 0 < MIN <= 1 <= MAX", 2)
    return (lo, hi)


@app.command()
def export(
    project: str,
    format: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            help="Target: trl-preference, trl-reward, trl-kto, trl-sft, trl-stepwise, openrlhf, verl, raw.",
        ),
    ],
    out_path: Annotated[Path, typer.Option("--out", "-o", help="Output directory.")],
    file_format: Annotated[
        str, typer.Option(help="jsonl, parquet or hf (a datasets directory).")
    ] = "jsonl",
    conversational: Annotated[
        bool | None, typer.Option(help="Force chat-message rows (default: follow the prompts).")
    ] = None,
    length_gate: Annotated[
        str | None,
        typer.Option(
            help="Keep pairs with MIN <= len(chosen)/len(rejected) <= MAX (default 0.85:1.20, on)."
        ),
    ] = None,
    no_length_gate: Annotated[
        bool, typer.Option("--no-length-gate", help="Turn the length-parity gate off.")
    ] = False,
    provenance_columns: Annotated[
        bool,
        typer.Option(help="Add rater_hash, rubric_version and guideline_version columns."),
    ] = False,
    include_ai: Annotated[
        bool, typer.Option(help="Include AI-sourced labels (never as human).")
    ] = False,
    include_rater_ids: Annotated[
        bool, typer.Option(help="Raw export: rater ids instead of HMAC hashes.")
    ] = False,
    include_gold: Annotated[
        bool,
        typer.Option(help="Include gold (qualification / honeypot) items in a training export."),
    ] = False,
    min_raters: Annotated[
        int,
        typer.Option(
            help="Drop pairs / thumbs / step labels judged by fewer distinct raters (all label kinds together)."
        ),
    ] = 1,
    aggregation: Annotated[
        str,
        typer.Option(
            help="Several raters per pair: majority (plurality) or dawid-skene; undecided pairs are dropped, never broken by candidate order."
        ),
    ] = "majority",
    length_unit: Annotated[
        str, typer.Option(help="Length for the gate and margins: tokens, words or chars.")
    ] = "tokens",
    tokenizer: Annotated[
        str | None,
        typer.Option(
            help="Local Hugging Face tokenizer directory (default: policy.length_tokenizer, else MiniLM)."
        ),
    ] = None,
    require_reference: Annotated[
        bool, typer.Option(help="verl: export only items with a reference answer.")
    ] = False,
    data_source: Annotated[
        str | None,
        typer.Option(
            help="verl: this data_source on every row (default: the item's source, else the project)."
        ),
    ] = None,
    include_flagged: Annotated[
        bool,
        typer.Option(
            help="Keep labels held out by their telemetry (strong evidence: a pasted answer or "
            "several signals; a weak flag never removes a label; docs/telemetry.md)."
        ),
    ] = False,
    min_alpha: Annotated[
        float | None,
        typer.Option(
            help="Agreement floor per batch and dimension (default: policy.min_alpha, 0.84)."
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(help="Write even when agreement is below the floor (marked in the card)."),
    ] = False,
    drop_disagreement: Annotated[
        float | None,
        typer.Option(
            help="Drop pairs/thumbs whose raters' winning share is below this, e.g. 0.75."
        ),
    ] = None,
    kto_conflicts: Annotated[
        str | None,
        typer.Option(
            help="trl-kto: a completion marked both desirable and undesirable: drop (default) "
            "its rows, or keep them."
        ),
    ] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Export a project for a trainer, with manifest.json and a dataset card."""
    from .io.export import (
        AGGREGATORS,
        DEFAULT_LENGTH_GATE,
        EXPORT_FORMATS,
        ExportError,
        ExportOptions,
        export_project,
    )
    from .store.repo import StoreError

    if format not in EXPORT_FORMATS:
        fail(f"unknown format {format!r}; choose from: {', '.join(EXPORT_FORMATS)}", 2)
    if aggregation not in AGGREGATORS:
        fail(f"unknown aggregation {aggregation!r}; choose from: {', '.join(AGGREGATORS)}", 2)
    if no_length_gate and length_gate is not None:
        fail("--length-gate and --no-length-gate: give one of them", 2)
    options = ExportOptions(
        format=format,
        out=out_path,
        file_format=file_format,
        conversational=conversational,
        include_ai=include_ai,
        include_rater_ids=include_rater_ids,
        include_gold=include_gold,
        length_gate=None if no_length_gate else _parse_gate(length_gate) or DEFAULT_LENGTH_GATE,
        provenance_columns=provenance_columns,
        min_raters=min_raters,
        length_unit=length_unit,
        tokenizer=tokenizer,
        include_flagged=include_flagged,
        min_alpha=min_alpha,
        force=force,
        drop_disagreement=drop_disagreement,
        params=_verl_params(require_reference, data_source)
        | ({} if kto_conflicts is None else {"kto_conflicts": kto_conflicts}),
        aggregation=aggregation,
    )
    engine = engine_for(db)
    try:
        manifest = export_project(engine, project, options)
    except (StoreError, ExportError, ValueError) as exc:  # options, --out or project the user gave
        fail(str(exc), 2)
    _audit_export(engine, project, format, out_path, manifest)
    if as_json:
        print_json(manifest)
        return
    _print_manifest(manifest, out_path)
    for warning in manifest.get("format_notes", {}).get("warnings", []):
        err.print(f"warning: {warning}", highlight=False)


def _verl_params(require_reference: bool, data_source: str | None) -> dict[str, Any]:
    """``--require-reference`` / ``--data-source`` as exporter params (only verl takes them:
    any other format refuses them with a clear error)."""
    params: dict[str, Any] = {}
    if require_reference:
        params["require_reference"] = True
    if data_source is not None:
        params["data_source"] = data_source
    return params


def _print_manifest(manifest: dict[str, Any], out_path: Path) -> None:
    from .io.export.manifest import manifest_summary

    first, *rest = manifest_summary(manifest)
    out.print(f"wrote [bold]{manifest['format']}[/] export to {out_path}: {first}", highlight=False)
    for line in rest:
        out.print(f"  {line}", highlight=False)


@app.command()
def status(project: str, db: DbOption = None, as_json: JsonOption = False) -> None:
    """Counts per kind, per rater, per batch."""
    from .store import repo, transaction

    try:
        with transaction(engine_for(db)) as session:
            counts = repo.project_counts(session, repo.get_project(session, project))
    except repo.NotFound as exc:
        fail(str(exc), 2)
    if as_json:
        print_json(counts)
        return
    _print_status(counts)


def _print_status(counts: dict[str, Any]) -> None:
    out.print(
        f"[bold]{counts['project']}[/]: {counts['items']} items, {counts['judgments']} judgments "
        f"by {counts['raters']} raters",
        highlight=False,
    )
    for title, key in (("kind", "per_kind"), ("source", "per_source"), ("batch", "per_batch")):
        table = Table(title, "judgments", title=f"per {title}", title_justify="left")
        for k, v in counts[key].items():
            table.add_row(str(k), str(v))
        out.print(table)
    table = Table("rater", "judgments", title="per rater (top 10)", title_justify="left")
    for k, v in list(counts["per_rater"].items())[:10]:
        table.add_row(str(k), str(v))
    out.print(table)


# -- quality --------------------------------------------------------------------------


@quality_app.command("report")
def quality_report(
    source: Annotated[
        str, typer.Argument(help="A project name, or a JSONL of judgments (the raw export).")
    ],
    out_path: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write a self-contained HTML report here.")
    ] = None,
    window_days: Annotated[
        float | None,
        typer.Option(
            help="Report agreement per time window of this many days (by submission time) instead of per import batch."
        ),
    ] = None,
    include_ai: Annotated[
        bool,
        typer.Option(help="Measure AI-sourced labels too (left out by default, as in exports)."),
    ] = False,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Agreement, rater table, bias audits and the adjudication queue, over the labels exports use.

    Reads the project item by item in memory that does not grow with it: counts, alpha, percent
    agreement, Gwet's AC, the rater table and the bias audits are exact at any size; alpha's
    interval is bootstrapped on a seeded sample of 50,000 units above that many (the row says
    ``ci_sample``), and the other sampled figures say so too (docs/architecture.md, Quality).
    """
    from datetime import timedelta

    from .io.quality_source import report_for_source
    from .quality.report import render_html

    if not Path(source).is_file():  # a project name: the database must exist and open
        engine_for(db).dispose()
    if window_days is not None and window_days <= 0:
        fail("--window-days must be positive", 2)
    window = timedelta(days=window_days) if window_days is not None else None
    try:
        report = report_for_source(source, db, window=window, include_ai=include_ai)
    except (LookupError, ValueError, OSError) as exc:
        fail(str(exc), 2)
    if out_path is not None:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        # the page names what it measured: the project, or the file
        title = f"{Path(source).name if Path(source).is_file() else source}: quality report"
        out_path.write_text(render_html(report, title=title), encoding="utf-8")
        err.print(f"wrote {out_path}", highlight=False)
    if as_json or out_path is None:
        print_json(report)


@quality_app.command("snapshot")
def quality_snapshot(
    project: Annotated[
        str, typer.Argument(help="The project whose dashboard snapshot to compute.")
    ],
    force: Annotated[
        bool,
        typer.Option("--force", help="Take over a refresh the server started and still holds."),
    ] = False,
    db: DbOption = None,
) -> None:
    """Compute the dashboard's quality snapshot now (what the server starts in the background)."""
    from .server.snapshot import refresh
    from .store.repo import StoreError

    engine = engine_for(db)  # the database must exist and be at the newest schema
    url = engine.url.render_as_string(hide_password=False)
    engine.dispose()
    try:
        snap = refresh(url, project, force=force)
    except (StoreError, RuntimeError) as exc:
        fail(str(exc), 2)
    out.print(
        f"{project}: snapshot of {snap.labels} labels computed at "
        f"{snap.computed_at:%Y-%m-%d %H:%M:%S} UTC",
        highlight=False,
    )


# -- schemas and demo -----------------------------------------------------------------


@schema_app.command("export")
def schema_export(
    out_dir: Annotated[Path, typer.Option("--out", help="Directory for *.schema.json.")] = Path(
        "schemas"
    ),
) -> None:
    """Write the JSON Schema of every wire format."""
    from .schema.jsonschema import write_json_schemas

    for path in write_json_schemas(out_dir):
        out.print(f"wrote {path}", highlight=False)


@app.command()
def demo(
    directory: Annotated[
        Path, typer.Option("--dir", help="Where the demo database and exports go.")
    ] = Path("demo-output"),
    serve: Annotated[
        bool, typer.Option("--serve", help="Then start the web app with a demo labelling project.")
    ] = False,
    host: Annotated[str, typer.Option(help="With --serve: address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="With --serve: port.")] = 8000,
) -> None:
    """The main job end to end on SQLite: project, real data, status, quality report, TRL export.

    With --serve, then the collection server on SQLite with a ready PandaLM labelling project and
    demo accounts (admin, reviewer, rater1, rater2) whose generated passwords are printed.
    """
    from .demo import run_demo

    run_demo(directory, out)
    if serve:
        from .server.webdemo import serve_demo

        out.rule("[bold]web app")
        serve_demo(host, port, directory / "server")


# -- demonstrations: accept or reject before they reach trl-sft -------------------------------------

demonstrations_app = typer.Typer(
    help="Review expert demonstrations: only accepted ones reach trl-sft.", no_args_is_help=True
)
app.add_typer(demonstrations_app, name="demonstrations")


@demonstrations_app.command("list")
def demonstrations_list(project: str, db: DbOption = None, as_json: JsonOption = False) -> None:
    """Demonstrations waiting for a decision."""
    from .server.services.review import pending_demonstrations
    from .store import repo, transaction

    try:
        with transaction(engine_for(db)) as session:
            pending = pending_demonstrations(session, repo.get_project(session, project))
    except repo.NotFound as exc:
        fail(str(exc), 2)
    if as_json:
        print_json(pending)
        return
    if not pending:
        out.print(f"no demonstrations waiting for review in {project}", highlight=False)
    for d in pending:
        out.print(
            f"judgment {d['judgment_id']}  item {d['item_id']}  by {d['rater']}  {d['submitted_at'] or ''}",
            highlight=False,
        )


def _decide_demonstration(
    project: str,
    judgment_id: int,
    decision: str,
    reviewer: str,
    note: str,
    db: str | None,
    as_json: bool,
) -> None:
    from .audit import cli_actor
    from .server.errors import ServiceError
    from .server.services.review import decide_demonstration
    from .store import repo, transaction

    try:
        with transaction(engine_for(db)) as session:
            done = decide_demonstration(
                session,
                repo.get_project(session, project).pk,
                reviewer,
                judgment_id,
                decision,
                note,
                actor=cli_actor(),
            )
    except repo.NotFound as exc:
        fail(str(exc), 2)
    except ServiceError as exc:
        fail(exc.message, 2 if exc.status in (404, 422) else 1)
    if as_json:
        print_json(done)
        return
    out.print(
        f"demonstration {judgment_id} {decision} by {reviewer} (revision {done['judgment_id']})",
        highlight=False,
    )


ReviewerOption = Annotated[
    str, typer.Option("--reviewer", help="Who decides (stored with the decision).")
]


@demonstrations_app.command("accept")
def demonstrations_accept(
    project: str,
    judgment_id: int,
    reviewer: ReviewerOption,
    note: Annotated[str, typer.Option(help="Why (optional when accepting).")] = "",
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Accept a demonstration: trl-sft exports it."""
    _decide_demonstration(project, judgment_id, "accepted", reviewer, note, db, as_json)


@demonstrations_app.command("reject")
def demonstrations_reject(
    project: str,
    judgment_id: int,
    reviewer: ReviewerOption,
    note: Annotated[str, typer.Option(help="Why (required).")],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Reject a demonstration with a note: trl-sft leaves it out and its manifest says so."""
    _decide_demonstration(project, judgment_id, "rejected", reviewer, note, db, as_json)


# -- audit: who changed what, and when ------------------------------------------------------------

audit_app = typer.Typer(help="Read the audit log of state changes.", no_args_is_help=True)
app.add_typer(audit_app, name="audit")


@audit_app.command("list")
def audit_list(
    action: Annotated[
        str | None, typer.Option(help="Only this action, e.g. auth.login_failed.")
    ] = None,
    actor: Annotated[
        str | None, typer.Option(help="Only this actor: a username or cli:<user>.")
    ] = None,
    since: Annotated[
        str | None, typer.Option(help="From this UTC time on, e.g. 2026-11-30T18:00.")
    ] = None,
    limit: Annotated[
        int, typer.Option(min=1, max=100_000, help="At most this many, newest first.")
    ] = 100,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Audit events newest first: logins, role changes, suspensions, imports, exports, ..."""
    from . import audit
    from .store import transaction

    try:
        start = audit.parse_since(since) if since else None
    except ValueError as exc:
        fail(str(exc), 2)
    with transaction(engine_for(db)) as session:
        rows = audit.events(session, action=action, actor=actor, since=start, limit=limit)
    if as_json:
        print_json(rows)
        return
    for r in rows:
        details = " ".join(f"{k}={v}" for k, v in r["details"].items())
        out.print(
            f"{r['at']}  {r['actor']}  {r['action']}  {r['target']}  {details}",
            highlight=False,
            markup=False,
        )
    if not rows:
        err.print("no audit events match")


# the packages' commands (LAZY_COMMANDS, above) take their places here, where they were mounted
# before they were lazy: `preflab --help` lists them in the same order as ever
for _entry in LAZY_COMMANDS:
    _entry.hold_place(app)


# -- configuration ----------------------------------------------------------------------

config_app = typer.Typer(
    help="The process configuration (environment variables).", no_args_is_help=True
)
app.add_typer(config_app, name="config")


@config_app.command("show")
def config_show(
    ctx: typer.Context,
    db: Annotated[
        str | None,
        typer.Option("--db", help="Database URL or SQLite path, as other commands take it."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Print the effective configuration: each setting, its environment variable, its value
    (passwords and secrets masked) and where it came from (default, env or option: this
    command's --db, the global --log-level and --log-format)."""
    options = {**(ctx.obj or {}), "db": db}
    loaded_settings(**options)  # a bad value is reported as every command reports it
    rows = effective_settings(**options)
    if as_json:
        print_json({r.name: {"value": r.value, "source": r.source, "env": r.env_var} for r in rows})
        return
    table = Table(
        "setting",
        Column("environment variable", no_wrap=True),
        Column("value", overflow="fold"),
        "source",
    )
    for r in rows:
        table.add_row(r.name, r.env_var, "" if r.value is None else str(r.value), r.source)
    out.print(table)


if __name__ == "__main__":  # pragma: no cover
    app()
