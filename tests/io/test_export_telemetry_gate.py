"""The telemetry gate of exports (issue 16 §2, issue 28 §1): trajectories whose telemetry looks
scripted are imported, then exported as TRL stepwise rows. Only strong evidence (a pasted answer,
several independent signals together) keeps a label out; a weak flag is exported and counted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from preflab.io.export import ExportOptions, export_project
from preflab.io.importer import import_files
from preflab.store import db, repo, transaction

NORMATIVE = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "trajectory-rlhf-2026.11.json").read_text()
)


def trajectory(tid: str, **telemetry) -> dict:
    return {**NORMATIVE, "trajectory_id": tid, "telemetry": {**NORMATIVE["telemetry"], **telemetry}}


@pytest.fixture
def engine(db_url, tmp_path):
    engine = db.open_db(db_url)
    with transaction(engine) as s:
        repo.create_project(s, "traj", kinds=["steps"])
        repo.create_project(
            s, "lenient", kinds=["steps"], settings={"policy": {"telemetry": {"min_iki_cv": 0.01}}}
        )
        repo.create_project(
            s, "strict", kinds=["steps"], settings={"policy": {"telemetry": {"exclude_signals": 1}}}
        )
    source = tmp_path / "in.jsonl"
    records = [
        trajectory("human"),
        trajectory("scripted", iki_cv=0.02),  # one signal: weak
        trajectory("clean", revision_ratio=0.0),  # one signal: weak (a clean typist)
        trajectory("pasted", untrusted_paste_chars=1500),  # a pasted answer: strong
        trajectory("both", iki_cv=0.02, revision_ratio=0.0),  # machine rhythm + 1 more: strong
    ]
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    for project in ("traj", "lenient", "strict"):
        import_files(engine, project, [source])
    yield engine
    engine.dispose()


def export(engine, project, out, **kw):
    manifest = export_project(engine, project, ExportOptions(format="trl-stepwise", out=out, **kw))
    rows = [json.loads(line) for line in (out / "train.jsonl").read_text().splitlines()]
    return manifest, rows


def test_only_strong_evidence_keeps_a_label_out(engine, tmp_path):
    # Issue 28 §1: before, every flag removed its label (4 of 5 here); one weak signal never does.
    manifest, rows = export(engine, "traj", tmp_path / "o")
    assert len(rows) == 3
    gate = manifest["gates"]["telemetry"]
    assert gate["dropped"] == 2
    assert gate["reasons"] == {"pasted_answer": 1, "machine_typing+no_revision": 1}
    assert gate["sample_item_ids"]["pasted_answer"] == ["pasted"]
    assert gate["kept_weak"] == {"machine_typing": 1, "no_revision": 1}
    assert gate["kept_by_reviewer"] == {} and gate["include_flagged"] is False
    assert "strong evidence" in gate["rule"]
    assert manifest["filter"]["exclude_flagged"] is True


def test_include_flagged_keeps_them(engine, tmp_path):
    manifest, rows = export(engine, "traj", tmp_path / "o", include_flagged=True)
    assert len(rows) == 5
    assert manifest["gates"]["telemetry"]["dropped"] == 0
    assert manifest["gates"]["telemetry"]["include_flagged"] is True
    assert manifest["filter"]["exclude_flagged"] is False


def test_the_project_policy_sets_the_thresholds(engine, tmp_path):
    manifest, rows = export(engine, "lenient", tmp_path / "o")
    assert manifest["gates"]["telemetry"]["reasons"] == {"pasted_answer": 1}
    assert manifest["gates"]["telemetry"]["kept_weak"] == {"no_revision": 2}
    assert len(rows) == 4
    # a project may ask for less evidence: one signal then keeps a label out
    manifest, rows = export(engine, "strict", tmp_path / "s")
    assert manifest["gates"]["telemetry"]["dropped"] == 4 and len(rows) == 1


def test_cli_include_flagged(engine, tmp_path, db_url):
    from typer.testing import CliRunner

    from preflab.cli import app

    runner = CliRunner()
    args = ["export", "traj", "-f", "trl-stepwise", "--db", db_url, "--json"]
    default = runner.invoke(app, [*args, "-o", str(tmp_path / "a")])
    assert default.exit_code == 0, default.output
    assert json.loads(default.output)["gates"]["telemetry"]["dropped"] == 2
    kept = runner.invoke(app, [*args, "-o", str(tmp_path / "b"), "--include-flagged"])
    assert kept.exit_code == 0, kept.output
    assert json.loads(kept.output)["gates"]["telemetry"]["dropped"] == 0


def test_an_empty_or_mostly_dropped_export_says_so_on_every_surface(db_url, tmp_path):
    from typer.testing import CliRunner

    from preflab.cli import app

    engine = db.open_db(db_url)
    try:
        with transaction(engine) as s:
            repo.create_project(s, "pasted", kinds=["steps"])
            repo.create_project(s, "mostly", kinds=["steps"])
        pasted = [trajectory(f"p{n}", untrusted_paste_chars=1500) for n in range(3)]
        source = tmp_path / "pasted.jsonl"
        source.write_text("".join(json.dumps(r) + "\n" for r in pasted))
        import_files(engine, "pasted", [source])
        mostly = tmp_path / "mostly.jsonl"
        mostly.write_text("".join(json.dumps(r) + "\n" for r in [*pasted, trajectory("ok")]))
        import_files(engine, "mostly", [mostly])
    finally:
        engine.dispose()
    runner = CliRunner()
    out = tmp_path / "empty"
    args = ["export", "pasted", "-f", "trl-stepwise", "--db", db_url, "-o", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "WARNING: This export has 0 rows: gate telemetry dropped 3 (pasted_answer 3)" in text
    assert "--include-flagged" in text
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["warnings"][0].startswith("This export has 0 rows")
    card = (out / "README.md").read_text()
    assert "> **Warning:** This export has 0 rows: gate telemetry dropped 3" in card
    out = tmp_path / "mostly-out"
    args = ["export", "mostly", "-f", "trl-stepwise", "--db", db_url, "-o", str(out), "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    (warning,) = json.loads(result.output)["warnings"]
    assert warning.startswith("Most labels were left out: 1 of 4 judgments used; gate telemetry")
