"""Issue 11, dead end 5: importing a trajectory's ``prm_steps`` verdicts is a project choice
(``policy.imported_step_verdicts``). ``label`` (the default, today's behaviour) stores them as a
steps judgment with its provenance, and the item counts as labelled; ``suggestion`` stores no
label, so the item still goes to a rater, whose verdicts are the label."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from .conftest import seed

DATA = Path(__file__).resolve().parents[1] / "data" / "trajectory-rlhf-2026.11.json"
TRAJECTORY_ID = "traj_swe_prm_9041"  # two steps, both verdict +1; telemetry.annotator_hash 77a1e09c


def _import_trajectory(url: str, mode: str | None) -> tuple[object, str]:
    """A steps project (with the setting when given), the reference trajectory imported."""
    from preflab.io.importer import import_files
    from preflab.server.database import Database

    policy = {} if mode is None else {"imported_step_verdicts": mode}
    seeded = seed(url, items=[], kinds=["steps"], raters=1, policy=policy)
    db = Database(url, pool_size=2, max_overflow=2)
    report = import_files(db.write_engine, seeded.project, [DATA])
    db.dispose()
    return report, seeded


def _stored(url: str) -> tuple[list[object], dict]:
    from preflab.server.database import Database
    from preflab.store.models import ImportBatch, JudgmentRow

    db = Database(url, pool_size=2, max_overflow=2)
    with db.reading() as s:
        judgments = list(s.scalars(select(JudgmentRow)))
        counts = s.scalar(select(ImportBatch.counts))
        for j in judgments:
            s.expunge(j)
    db.dispose()
    return judgments, counts


def _next_task(url: str, token: str) -> dict | None:
    from preflab.server.app import create_app

    with TestClient(create_app(url)) as c:
        r = c.post(
            "/api/v1/projects/demo/assignments/next",
            headers={"Authorization": f"Bearer {token}"},
        )
        assert r.status_code in (200, 201), r.text
        return r.json().get("task")


@pytest.mark.parametrize("mode", [None, "label"])
def test_imported_verdicts_count_as_a_label_by_default_with_their_provenance(db_url, mode):
    report, seeded = _import_trajectory(db_url, mode)
    assert report.step_verdicts == "label"
    judgments, counts = _stored(db_url)
    (steps,) = [j for j in judgments if j.kind == "steps"]
    assert steps.body["verdicts"] == [1, 1]
    assert steps.source == "human"
    assert counts["step_verdicts"] == "label", "the import batch records what the verdicts became"
    task = _next_task(db_url, seeded.tokens["rater000"])
    assert task is None, "the imported label fills the item's one slot: no rater sees it"


def test_imported_verdicts_as_suggestions_leave_the_item_to_raters(db_url):
    report, seeded = _import_trajectory(db_url, "suggestion")
    assert report.step_verdicts == "suggestion"
    judgments, counts = _stored(db_url)
    assert [j for j in judgments if j.kind == "steps"] == [], "a suggestion is not a label"
    assert counts["step_verdicts"] == "suggestion"
    task = _next_task(db_url, seeded.tokens["rater000"])
    assert task["item"]["id"] == TRAJECTORY_ID and task["assignment_id"]
    assert "verdict" not in str(task), "the API payload carries no imported verdicts"


def test_the_setting_takes_only_the_two_choices():
    from pydantic import ValidationError

    from preflab.server.policy import Policy

    assert Policy().imported_step_verdicts == "label"
    with pytest.raises(ValidationError, match="imported_step_verdicts"):
        Policy(imported_step_verdicts="ignore")


def test_the_cli_import_says_what_the_step_verdicts_became(tmp_path):
    from typer.testing import CliRunner

    from preflab.cli import app

    runner, db = CliRunner(), str(tmp_path / "cli.db")
    for args in (["init"], ["project", "create", "t", "--kinds", "steps"]):
        assert runner.invoke(app, [*args, "--db", db]).exit_code == 0
    result = runner.invoke(app, ["import", "t", str(DATA), "--db", db], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert "trajectory step verdicts: stored as labels" in result.output
    assert "policy.imported_step_verdicts" in result.output, "says how to choose the other way"
