"""The RLHF-2026.11 ``rubric`` block becomes rubric scores (issue 13, section 3).

Dimensions ``reasoning_validity``, ``constraint_obedience`` and ``verbosity_penalty`` under the
rubric ``rlhf-2026.11-trajectory`` v1, which the import registers in a project that collects
rubric grades; agreement (the label table) and the raw export see the scores. A project that does
not collect rubric grades still imports the trajectory (the record stays whole in the item's
metadata, so nothing is lost) and the import report counts the scores left out."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from preflab.io.export import ExportOptions, export_project
from preflab.io.importer import ImportFailed, import_files
from preflab.schema import Rubric
from preflab.store import db, repo, transaction

NORMATIVE = Path(__file__).resolve().parent.parent / "data" / "trajectory-rlhf-2026.11.json"
RUBRIC_BLOCK = {"reasoning_validity": 1.0, "constraint_obedience": 1.0, "verbosity_penalty": -0.02}


@pytest.fixture
def engine(db_url):
    engine = db.open_db(db_url)
    with transaction(engine) as s:
        repo.create_project(s, "graded", kinds=["steps", "rubric"])
        repo.create_project(s, "steps_only", kinds=["steps"])
    yield engine
    engine.dispose()


def judgments(engine, project: str) -> list:
    with transaction(engine) as s:
        p = repo.get_project(s, project)
        return [j for e in repo.iter_items_with_judgments(s, p) for j in e.judgments]


def test_the_rubric_block_becomes_rubric_scores_under_a_registered_rubric(engine):
    assert orjson.loads(NORMATIVE.read_bytes())["rubric"] == RUBRIC_BLOCK
    report = import_files(engine, "graded", [NORMATIVE])
    assert report.judgments_added == 2 and report.judgments_not_collected == 0
    [rubric] = [j for j in judgments(engine, "graded") if j.kind == "rubric"]
    assert rubric.candidate_id == "trajectory" and rubric.scores == RUBRIC_BLOCK
    assert (rubric.provenance.rubric_id, rubric.provenance.rubric_version) == (
        "rlhf-2026.11-trajectory",
        1,
    )
    assert rubric.provenance.rater_id == "hmac_sha256:77a1e09c"  # the annotator, as for the steps
    with transaction(engine) as s:
        stored = repo.get_rubric(s, repo.get_project(s, "graded"), "rlhf-2026.11-trajectory", 1)
    assert isinstance(stored, Rubric)
    assert [d.name for d in stored.dimensions] == [
        "reasoning_validity",
        "constraint_obedience",
        "verbosity_penalty",
    ]
    # the penalty has weight 0: the reward is the mean of the quality dimensions, as graded
    assert stored.reward(RUBRIC_BLOCK) == pytest.approx(1.0)


def test_agreement_and_the_raw_export_see_the_scores(engine, tmp_path):
    import_files(engine, "graded", [NORMATIVE])
    rows = {
        (r.unit, r.dimension): r.value for j in judgments(engine, "graded") for r in j.label_rows()
    }
    unit = "traj_swe_prm_9041::trajectory"
    assert rows[(unit, "reasoning_validity")] == 1.0 and rows[(unit, "verbosity_penalty")] == -0.02
    out = tmp_path / "raw"
    export_project(engine, "graded", ExportOptions(format="raw", out=out))
    exported = [orjson.loads(x) for x in (out / "train.jsonl").read_bytes().splitlines()]
    [graded] = [r for r in exported if r["kind"] == "rubric"]
    assert graded["scores"] == RUBRIC_BLOCK
    assert graded["provenance"]["rubric_id"] == "rlhf-2026.11-trajectory"


def test_a_steps_only_project_still_imports_the_trajectory(engine, tmp_path):
    report = import_files(engine, "steps_only", [NORMATIVE])
    assert report.items_added == 1 and report.judgments_added == 1
    assert report.judgments_not_collected == 1  # the rubric scores, left out and counted
    assert [j.kind for j in judgments(engine, "steps_only")] == ["steps"]
    with transaction(engine) as s:
        project = repo.get_project(s, "steps_only")
        assert repo.get_rubric(s, project, "rlhf-2026.11-trajectory") is None
        assert project.rubric_key is None
    # the block itself is kept: the record round-trips with its rubric
    out = tmp_path / "traj"
    export_project(engine, "steps_only", ExportOptions(format="rlhf-2026.11", out=out))
    assert orjson.loads((out / "train.jsonl").read_bytes())["rubric"] == RUBRIC_BLOCK


def test_scores_off_the_rubric_are_an_error_that_says_where(engine, tmp_path):
    record = orjson.loads(NORMATIVE.read_bytes())
    record["rubric"] = {**RUBRIC_BLOCK, "reasoning_validity": 1.5}
    path = tmp_path / "bad.jsonl"
    path.write_bytes(orjson.dumps(record) + b"\n")
    with pytest.raises(ImportFailed) as info:
        import_files(engine, "graded", [path])
    assert f"{path}:1: scores.reasoning_validity: 1.5 is outside [0, 1]" in str(info.value)
    assert judgments(engine, "graded") == []
