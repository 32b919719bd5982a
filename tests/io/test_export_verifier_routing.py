"""Routing in the export (issue 13, section 2): items an oracle can check are scored by their
verifier, not by people's preference labels, unless the project sends them to raters.

``preflab verify project`` verifies a project's verifiable items and stores each verdict (a
candidate's ``metadata.verifier``, a trajectory's ``verifier`` block) in one transaction; the
exports then build pairs and thumbs from the verdicts, and the truth gate applies."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from preflab.cli import app
from preflab.io.export import ExportOptions, export_project
from preflab.io.importer import import_files
from preflab.schema import Item, PairwiseJudgment, UnaryJudgment
from preflab.store import db, repo, transaction

NORMATIVE = Path(__file__).resolve().parent.parent / "data" / "trajectory-rlhf-2026.11.json"
RIGHT, ALSO_RIGHT, WRONG = "SELECT SUM(x) FROM t", "SELECT 6", "SELECT MAX(x) FROM t"


@pytest.fixture
def fixture_db(tmp_path) -> Path:
    path = tmp_path / "numbers.sqlite"
    with sqlite3.connect(path) as c:
        c.executescript("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1), (2), (3);")
    return path


@pytest.fixture
def project(db_url, fixture_db):
    """Item ``sum`` (verifiable SQL) whose wrong answer three people prefer and thumb up."""
    engine = db.open_db(db_url)
    task = {"kind": "sql", "fixture": str(fixture_db), "reference_query": RIGHT}
    with transaction(engine) as s:
        p = repo.create_project(s, "rl", kinds=["pairwise", "unary", "steps"])
        repo.add_item(
            s,
            p,
            Item(
                id="sum",
                prompt="sum of x in t?",
                metadata={"verifiable": "sql", "verify_task": task},
                candidates=[
                    {"id": "right", "text": RIGHT},
                    {"id": "wrong", "text": WRONG},
                    {"id": "also", "text": ALSO_RIGHT},
                ],
            ),
        )
        repo.add_item(
            s,
            p,
            Item(
                id="poem",
                prompt="a poem",
                candidates=[{"id": "a", "text": "roses"}, {"id": "b", "text": "violets"}],
            ),
        )
        for rater in ("r1", "r2", "r3"):
            for shown in (("wrong", "right"), ("wrong", "also")):
                repo.add_judgment(
                    s,
                    p,
                    PairwiseJudgment(
                        item_id="sum",
                        shown_order=shown,
                        winner="a",
                        strength=3,
                        provenance={"rater_id": rater},
                    ),
                )
            repo.add_judgment(
                s,
                p,
                UnaryJudgment(
                    item_id="sum", candidate_id="wrong", label=True, provenance={"rater_id": rater}
                ),
            )
            repo.add_judgment(
                s,
                p,
                PairwiseJudgment(
                    item_id="poem",
                    shown_order=("a", "b"),
                    winner="a",
                    strength=2,
                    provenance={"rater_id": rater},
                ),
            )
    yield engine, db_url
    engine.dispose()


def verify_project(url: str, name: str = "rl"):
    return CliRunner().invoke(app, ["verify", "project", name, "--db", url, "--workers", "1"])


def export(engine, tmp_path: Path, fmt: str, name: str = "rl", **kw) -> tuple[list[dict], dict]:
    out = tmp_path / f"{name}-{fmt}-{len(list(tmp_path.iterdir()))}"
    kw.setdefault("length_gate", None)  # resolution, not length: see test_export_length_provenance
    manifest = export_project(engine, name, ExportOptions(format=fmt, out=out, **kw))
    return [orjson.loads(x) for x in (out / "train.jsonl").read_bytes().splitlines()], manifest


def routing(manifest: dict) -> dict:
    return manifest["gates"]["routing"]["reasons"]


def test_verify_project_stores_each_candidates_verdict(project):
    engine, url = project
    result = verify_project(url)
    assert result.exit_code == 0, result.output
    assert "3 answers of 1 items verified: 2 passed" in result.output
    with transaction(engine) as s:
        item = repo.item_from_row(repo.get_item(s, repo.get_project(s, "rl"), "sum"))
        poem = repo.item_from_row(repo.get_item(s, repo.get_project(s, "rl"), "poem"))
    blocks = {c.id: c.metadata["verifier"] for c in item.candidates}
    assert {c: b["terminal_reward"] for c, b in blocks.items()} == {
        "right": 1.0,
        "also": 1.0,
        "wrong": 0.0,
    }
    assert all(c.metadata == {} for c in poem.candidates)  # not verifiable: untouched


def test_pairs_of_a_verifiable_item_come_from_its_verdicts_not_from_people(project, tmp_path):
    engine, url = project
    before, manifest = export(engine, tmp_path, "trl-preference")
    assert [r["chosen"] for r in before] == ["roses"]  # the poem only: "sum" is not verified yet
    assert "verifiable item not verified yet (run `preflab verify project`)" in routing(manifest)
    # 6 pairwise and 3 thumbs, all preferring the wrong answer
    assert (
        routing(manifest)["people's preference label on a verifiable item (its verifier scores it)"]
        == 9
    )

    assert verify_project(url).exit_code == 0
    rows, manifest = export(engine, tmp_path, "trl-preference", min_raters=3)
    pairs = sorted((r["chosen"], r["rejected"]) for r in rows if r["prompt"] == "sum of x in t?")
    assert pairs == [
        (ALSO_RIGHT, WRONG),
        (RIGHT, WRONG),
    ]  # passed beats failed, whatever people said
    assert "truth" not in manifest["gates"] or manifest["gates"]["truth"]["dropped"] == 0


def test_thumbs_of_a_verifiable_item_are_its_verdicts(project, tmp_path):
    engine, url = project
    assert verify_project(url).exit_code == 0
    rows, _ = export(engine, tmp_path, "trl-kto")
    labels = {r["completion"]: r["label"] for r in rows if r["prompt"] == "sum of x in t?"}
    assert labels == {RIGHT: True, ALSO_RIGHT: True, WRONG: False}


def test_rollout_rewards_of_verified_answers_are_the_verifiers(project, tmp_path):
    engine, url = project
    assert verify_project(url).exit_code == 0
    rows, _ = export(engine, tmp_path, "rollouts")
    rewards = {r["response"]: r["reward"] for r in rows}
    assert rewards == {RIGHT: 1.0, ALSO_RIGHT: 1.0, WRONG: 0.0, "roses": None, "violets": None}


def test_with_the_project_override_people_label_and_the_truth_gate_still_applies(project, tmp_path):
    engine, url = project
    with transaction(engine) as s:
        p = repo.get_project(s, "rl")
        p.settings = {**(p.settings or {}), "policy": {"verifiable_to_raters": True}}
    assert verify_project(url).exit_code == 0
    rows, manifest = export(engine, tmp_path, "trl-preference")
    assert [r["chosen"] for r in rows] == ["roses"]  # people chose the failed answer: gated
    assert manifest["gates"]["truth"]["dropped"] == 2
    assert "routing" not in manifest["gates"]


def test_a_trajectorys_verifier_block_is_filled_and_gates_its_steps(db_url, tmp_path):
    engine = db.open_db(db_url)
    record = orjson.loads(NORMATIVE.read_bytes())
    record["verify_task"] = {
        "task_id": "race",
        "kind": "math",
        "answer": "42",
    }  # an extra key, kept
    source = tmp_path / "t.jsonl"
    source.write_bytes(orjson.dumps(record) + b"\n")
    with transaction(engine) as s:
        repo.create_project(s, "agents", kinds=["steps"])
    import_files(engine, "agents", [source])
    assert (
        len(export(engine, tmp_path, "trl-stepwise", name="agents")[0]) == 1
    )  # as imported: passed
    assert verify_project(db_url, "agents").exit_code == 0
    [exported], _ = export(engine, tmp_path, "rlhf-2026.11", name="agents")
    assert exported["verifier"] == {
        "f2p_exit": 0,
        "p2p_exit": 0,
        "harness_sha256_verified": True,
        "terminal_reward": 0.0,
    }  # the answer is not 42: preflab's own run
    rows, manifest = export(engine, tmp_path, "trl-stepwise", name="agents")
    assert rows == [] and manifest["gates"]["truth"]["dropped"] == 1
    engine.dispose()


def test_a_bad_task_stores_nothing_and_says_which_item(project, tmp_path):
    engine, url = project
    with transaction(engine) as s:
        p = repo.get_project(s, "rl")
        repo.add_item(
            s,
            p,
            Item(
                id="broken",
                prompt="?",
                candidates=[{"id": "c", "text": "SELECT 1"}],
                metadata={"verifiable": "sql", "verify_task": {"fixture": "x.sqlite"}},
            ),
        )
    result = verify_project(url)
    assert result.exit_code == 2
    assert (
        "broken: metadata.verify_task:" in result.output and "nothing was stored" in result.output
    )
    with transaction(engine) as s:
        item = repo.item_from_row(repo.get_item(s, repo.get_project(s, "rl"), "sum"))
    assert all("verifier" not in c.metadata for c in item.candidates)
    assert json.dumps(item.metadata["verify_task"])  # the stored task is untouched
