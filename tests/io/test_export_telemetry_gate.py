"""Labels with a telemetry flag stay out of exports by default (issue 16 §2): trajectories whose
telemetry looks scripted are imported, then exported as TRL stepwise rows."""

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
    source = tmp_path / "in.jsonl"
    records = [
        trajectory("human"),
        trajectory("scripted", iki_cv=0.02),
        trajectory("pasted", untrusted_paste_chars=1500),
        trajectory("both", iki_cv=0.02, revision_ratio=0.0),
    ]
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    for project in ("traj", "lenient"):
        import_files(engine, project, [source])
    yield engine
    engine.dispose()


def export(engine, project, out, **kw):
    manifest = export_project(engine, project, ExportOptions(format="trl-stepwise", out=out, **kw))
    rows = [json.loads(line) for line in (out / "train.jsonl").read_text().splitlines()]
    return manifest, rows


def test_flagged_labels_are_excluded_and_counted_per_flag(engine, tmp_path):
    manifest, rows = export(engine, "traj", tmp_path / "o")
    assert len(rows) == 1
    gate = manifest["gates"]["telemetry"]
    assert gate["dropped"] == 3
    assert gate["reasons"] == {
        "machine_typing": 1,
        "untrusted_paste": 1,
        "machine_typing+no_revision": 1,
    }
    assert gate["sample_item_ids"]["machine_typing"] == ["scripted"]


def test_include_flagged_keeps_them(engine, tmp_path):
    manifest, rows = export(engine, "traj", tmp_path / "o", include_flagged=True)
    assert len(rows) == 4 and "telemetry" not in manifest["gates"]


def test_the_project_policy_sets_the_thresholds(engine, tmp_path):
    manifest, rows = export(engine, "lenient", tmp_path / "o")
    assert manifest["gates"]["telemetry"]["reasons"] == {"untrusted_paste": 1, "no_revision": 1}
    assert len(rows) == 2


def test_cli_include_flagged(engine, tmp_path, db_url):
    from typer.testing import CliRunner

    from preflab.cli import app

    runner = CliRunner()
    args = ["export", "traj", "-f", "trl-stepwise", "--db", db_url, "--json"]
    default = runner.invoke(app, [*args, "-o", str(tmp_path / "a")])
    assert default.exit_code == 0, default.output
    assert json.loads(default.output)["gates"]["telemetry"]["dropped"] == 3
    kept = runner.invoke(app, [*args, "-o", str(tmp_path / "b"), "--include-flagged"])
    assert kept.exit_code == 0, kept.output
    assert "telemetry" not in json.loads(kept.output)["gates"]
