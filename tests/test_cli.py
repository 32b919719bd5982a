"""The CLI end to end on a SQLite file: what a user types and what they get back."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from preflab.cli import app

DATA = Path(__file__).resolve().parent / "data"
runner = CliRunner()


@pytest.fixture
def db(tmp_path: Path) -> str:
    """A fresh database (only `init` creates one)."""
    path = str(tmp_path / "cli.db")
    assert runner.invoke(app, ["init", "--db", path]).exit_code == 0
    return path


def run(*args: str, code: int = 0) -> str:
    """Run the CLI; return everything it printed (stdout and stderr)."""
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, f"exit {result.exit_code}, expected {code}:\n{result.output}"
    return result.output


def run_json(*args: str) -> object:
    """Run the CLI with ``--json``; stdout must be exactly one JSON document."""
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_help_and_version():
    assert "import" in run("--help")
    assert run("--version").startswith("preflab ")
    for command in ("import", "export", "validate", "status", "init"):
        assert "--help" in run(command, "--help") or "Usage" in run(command, "--help")


def test_project_import_status_export_round_trip(db: str, tmp_path: Path):
    run("init", "--db", db)
    created = run_json("project", "create", "panda", "--kinds", "pairwise", "--db", db)
    assert created["kinds"] == ["pairwise"]
    run("project", "create", "panda", "--db", db, code=2)  # exists: a clear error, not a traceback

    imported = run_json("import", "panda", str(DATA / "pandalm-60.json"), "--db", db)
    # 60 records, 57 pairs: three pairs of texts came from two model pairs each (idx 0/2, 1/3,
    # 19/25, same annotators, same verdicts): one item each, their repeated judgments not doubled
    assert imported["items_added"] == 57 and imported["judgments_added"] == 171
    again = run_json("import", "panda", str(DATA / "pandalm-60.json"), "--db", db)
    assert again["already_imported"] and again["items_added"] == 0

    status = run_json("status", "panda", "--db", db)
    assert status["items"] == 57 and status["judgments"] == 171 and status["raters"] == 3
    assert status["per_kind"] == {"pairwise": 171}

    listed = run_json("project", "list", "--db", db)
    assert [p["name"] for p in listed] == ["panda"]

    out_dir = tmp_path / "export"
    manifest = json.loads(
        run(
            "export",
            "panda",
            "--format",
            "trl-preference",
            "--out",
            str(out_dir),
            "--db",
            db,
            "--json",
        )
    )
    rows = [json.loads(line) for line in (out_dir / "train.jsonl").read_text().splitlines()]
    assert len(rows) == manifest["counts"]["rows_out"] > 0
    assert set(rows[0]) == {"prompt", "chosen", "rejected"}
    assert (out_dir / "README.md").is_file()


def test_bad_import_reports_file_line_field_and_changes_nothing(db: str):
    run("project", "create", "panda", "--db", db)
    result = runner.invoke(app, ["import", "panda", str(DATA / "pandalm-bad.json"), "--db", db])
    assert result.exit_code == 2
    assert (
        "pandalm-bad.json:" in result.output
        and "response" in result.output
        and "boolean" in result.output
    )
    assert "nothing was imported" in result.output
    status = run_json("status", "panda", "--db", db)
    assert status["items"] == 0 and status["judgments"] == 0


def test_validate_exit_codes():
    assert "ok:" in run("validate", str(DATA / "pandalm-60.json"))
    out = run("validate", str(DATA / "pandalm-bad.json"), code=2)
    assert "boolean" in out


def test_unknown_project_and_format_say_what_to_do(db: str, tmp_path: Path):
    run("project", "create", "p", "--db", db)
    out = run("status", "nope", "--db", db, code=2)  # an unknown project is bad input (issue 11)
    assert "no project 'nope'" in out
    out = run("export", "p", "--format", "bogus", "--out", str(tmp_path / "x"), "--db", db, code=2)
    assert "trl-preference" in out


def test_quality_report_on_a_project_and_on_a_raw_export(db: str, tmp_path: Path):
    run("project", "create", "panda", "--db", db)
    run("import", "panda", str(DATA / "pandalm-60.json"), "--db", db)
    html = tmp_path / "report.html"
    report = run_json("quality", "report", "panda", "--db", db, "--out", str(html))
    assert html.read_text().startswith("<!DOCTYPE html>") or "<html" in html.read_text()[:200]
    winner = [a for a in report["agreement"] if a["dimension"] == "winner"]
    assert winner and 0.5 < winner[0]["alpha"] <= 1

    raw = tmp_path / "raw"
    run("export", "panda", "--format", "raw", "--out", str(raw), "--db", db)
    raw_file = next(raw.glob("*.jsonl"))
    from_file = run_json("quality", "report", str(raw_file))
    winner_file = [a for a in from_file["agreement"] if a["dimension"] == "winner"]
    assert winner_file[0]["alpha"] == pytest.approx(winner[0]["alpha"], abs=1e-12)


def test_schema_export_writes_every_schema(tmp_path: Path):
    run("schema", "export", "--out", str(tmp_path))
    assert {p.name for p in tmp_path.glob("*.schema.json")} == {
        "item.schema.json",
        "judgment.schema.json",
        "rubric.schema.json",
        "trajectory.schema.json",
    }


def test_demo_runs_end_to_end(tmp_path: Path):
    out = run("demo", "--dir", str(tmp_path / "demo"))
    assert "done" in out
    assert (tmp_path / "demo" / "trl-preference" / "train.jsonl").stat().st_size > 0
    assert (tmp_path / "demo" / "quality-report.html").is_file()


def test_quality_report_per_import_batch_and_per_time_window(db: str, tmp_path: Path):
    """Agreement is reported per import batch by default, per time window on request."""
    run("project", "create", "mix", "--kinds", "pairwise,unary", "--db", db)
    run("import", "mix", str(DATA / "pandalm-60.json"), "--db", db)
    # Tulu-1 rows carry evaluators and timestamps (May 2023); its two blank rows are skipped
    run("import", "mix", str(DATA / "tulu1-sample.jsonl"), "--db", db, "--skip-invalid")
    report = run_json("quality", "report", "mix", "--db", db)
    batches = {a["batch"] for a in report["agreement"]}
    assert batches == {"batch 1", "batch 2"}, batches

    weekly = run_json("quality", "report", "mix", "--db", db, "--window-days", "7")
    windows = {a["batch"] for a in weekly["agreement"]}
    assert "undated" in windows  # PandaLM records carry no time
    dated = windows - {"undated"}
    assert dated and all(w.startswith("2023-") and "/" in w for w in dated), windows
