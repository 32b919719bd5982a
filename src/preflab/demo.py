"""``preflab demo``: the main job end to end on the embedded SQLite default.

Creates a project, imports a bundled sample of the PandaLM test set (real human judgments, three
annotators per item; Apache-2.0), prints its status and agreement, writes the quality report and a
TRL preference export with its manifest and dataset card.
"""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

from rich.console import Console

DEMO_PROJECT = "pandalm-demo"
#: the same name and title in the CLI demo and in the demo's web app (``preflab demo --serve``)
DEMO_TITLE = "PandaLM test set sample: which answer is better?"
#: what ``preflab demo`` writes under ``--dir`` and replaces on a second run (``server/``, the
#: web app's database of ``--serve``, is not among them)
OWNED = (
    "preflab.db",
    "preflab.db-wal",
    "preflab.db-shm",
    "preflab.db-journal",
    "quality-report.html",
    "trl-preference",
)


def bundled_sample() -> Path:
    return Path(str(resources.files("preflab") / "data" / "pandalm-sample.jsonl"))


def run_demo(directory: Path, console: Console) -> dict:
    from .io.export import ExportOptions, export_project
    from .io.export.manifest import manifest_summary
    from .io.importer import ImportOptions, import_files
    from .io.quality_source import load_project
    from .quality.report import build_report, render_html
    from .store import repo, transaction
    from .store.db import open_db

    directory = Path(directory)
    # replace what this command writes, nothing else: the web app's database under
    # `server/` (`--serve`) holds what people labelled and stays (issue 31)
    for owned in OWNED:
        path = directory / owned
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    directory.mkdir(parents=True, exist_ok=True)
    db_url = f"sqlite:///{(directory / 'preflab.db').resolve()}"
    engine = open_db(db_url)
    console.rule("[bold]preflab demo")
    console.print(f"database: {db_url}", highlight=False)

    with transaction(engine) as session:
        repo.create_project(session, DEMO_PROJECT, title=DEMO_TITLE, kinds=["pairwise"])
    console.print(f"1. created project [bold]{DEMO_PROJECT}[/] (pairwise comparisons)")

    sample = bundled_sample()
    report = import_files(engine, DEMO_PROJECT, [sample], ImportOptions())
    console.print(
        f"2. imported {sample.name}: {report.items_added} items, {report.judgments_added} judgments",
        highlight=False,
    )
    again = import_files(engine, DEMO_PROJECT, [sample], ImportOptions())
    console.print(
        f"   re-import of the same file adds nothing: already_imported={again.already_imported}",
        highlight=False,
    )

    with transaction(engine) as session:
        counts = repo.project_counts(session, repo.get_project(session, DEMO_PROJECT))
    console.print(
        f"3. status: {counts['items']} items, {counts['judgments']} judgments by {counts['raters']} raters: "
        + ", ".join(f"{k}={v}" for k, v in counts["per_rater"].items()),
        highlight=False,
    )

    judgments, items, batches = load_project(DEMO_PROJECT, db_url)
    quality = build_report(judgments, items=items, batches=batches)
    html_path = directory / "quality-report.html"
    html_path.write_text(
        render_html(quality, title=f"{DEMO_PROJECT}: quality report"), encoding="utf-8"
    )
    console.print(f"4. quality report: {html_path}", highlight=False)
    for line in _agreement_lines(quality):
        console.print(f"   {line}", highlight=False)

    out_dir = directory / "trl-preference"
    manifest = export_project(
        engine, DEMO_PROJECT, ExportOptions(format="trl-preference", out=out_dir)
    )
    first, *rest = manifest_summary(manifest)
    console.print(f"5. TRL preference export: {out_dir}: {first}", highlight=False)
    for line in rest:
        console.print(f"   {line}", highlight=False)
    console.print("files written:", highlight=False)
    for path in written_files(directory, db_url, html_path, out_dir, manifest):
        console.print(
            f"   {path}", highlight=False, soft_wrap=True
        )  # a path is copied whole, never wrapped
    console.rule("[bold green]done")
    return {"db": db_url, "manifest": manifest, "report": str(html_path)}


def written_files(
    directory: Path, db_url: str, report: Path, export_dir: Path, manifest: dict
) -> list[Path]:
    """Every file the demo wrote: the database, the report, the export's files and its manifest."""
    database = Path(db_url.removeprefix("sqlite:///"))
    exported = [export_dir / name for name in sorted(manifest.get("files", {}))]
    return [database, report, *exported, export_dir / "manifest.json"]


def _agreement_lines(report: dict) -> list[str]:
    """A few headline agreement figures from the report, whatever its exact layout."""
    lines = []
    agreement = report.get("agreement") or {}
    rows = (
        agreement
        if isinstance(agreement, list)
        else agreement.get("rows", agreement.get("dimensions", []))
    )
    for row in rows if isinstance(rows, list) else []:
        # alpha is None for a dimension without labels (PandaLM records no strength: issue 15)
        if isinstance(row, dict) and row.get("alpha") is not None:
            ci = row.get("ci") or row.get("alpha_ci")
            ci_text = (
                f" [{ci[0]:.3f}, {ci[1]:.3f}]"
                if isinstance(ci, (list, tuple)) and len(ci) == 2
                else ""
            )
            lines.append(
                f"Krippendorff's alpha {row.get('dimension', '')} {row.get('batch', '')}: {row['alpha']:.3f}{ci_text}"
            )
    return lines[:6]
