"""The truth gate (issue 13, section 2): a candidate or trajectory whose verifier failed, or
whose harness check failed, is never chosen, never a positive KTO label, never an all-correct
process label and never an SFT row, whatever people said; the manifest counts the drops."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from preflab.io.export import ExportOptions, export_project
from preflab.io.importer import import_files
from preflab.schema import Item, PairwiseJudgment, UnaryJudgment
from preflab.store import db, transaction
from preflab.store.repo import add_item, add_judgment, create_project

NORMATIVE = Path(__file__).resolve().parent.parent / "data" / "trajectory-rlhf-2026.11.json"
FAILED = {"f2p_exit": 1, "p2p_exit": 0, "harness_sha256_verified": True, "terminal_reward": 0.0}
TAMPERED = {"f2p_exit": 0, "p2p_exit": 0, "harness_sha256_verified": False, "terminal_reward": 1.0}
PASSED = {"f2p_exit": 0, "p2p_exit": 0, "harness_sha256_verified": True, "terminal_reward": 1.0}


@pytest.fixture
def engine(db_url):
    engine = db.open_db(db_url)
    with transaction(engine) as s:
        project = create_project(s, "p", kinds=["pairwise", "unary", "steps"])
        item = Item(
            id="i",
            prompt="write add()",
            candidates=[
                {
                    "id": "bad",
                    "text": "def add(a, b): return 0",
                    "source": "human",
                    "metadata": {"verifier": FAILED},
                },
                {
                    "id": "good",
                    "text": "def add(a, b): return a + b",
                    "source": "human",
                    "metadata": {"verifier": PASSED},
                },
                {
                    "id": "hacked",
                    "text": "import os; os._exit(0)",
                    "source": "human",
                    "metadata": {"verifier": TAMPERED},
                },
            ],
        )
        add_item(s, project, item)
        for rater in ("r1", "r2", "r3"):  # people prefer the failed and the hacked answers
            add_judgment(
                s,
                project,
                PairwiseJudgment(
                    item_id="i",
                    shown_order=("bad", "good"),
                    winner="a",
                    strength=2,
                    provenance={"rater_id": rater},
                ),
            )
            add_judgment(
                s,
                project,
                PairwiseJudgment(
                    item_id="i",
                    shown_order=("hacked", "good"),
                    winner="a",
                    strength=1,
                    provenance={"rater_id": rater},
                ),
            )
            for cid in ("bad", "good", "hacked"):
                add_judgment(
                    s,
                    project,
                    UnaryJudgment(
                        item_id="i", candidate_id=cid, label=True, provenance={"rater_id": rater}
                    ),
                )
    yield engine
    engine.dispose()


def rows(out: Path) -> list[dict]:
    return [orjson.loads(x) for x in (out / "train.jsonl").read_bytes().splitlines()]


def truth_drops(out: Path) -> dict:
    """The manifest's counts for gate ``truth``, wherever the manifest nests its drops."""
    manifest = json.loads((out / "manifest.json").read_text())
    found = {}

    def walk(node):
        if isinstance(node, dict):
            if "truth" in node and isinstance(node["truth"], dict):
                found.update(node["truth"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(manifest)
    return found


def test_a_failed_or_hacked_answer_is_never_chosen(engine, tmp_path):
    out = tmp_path / "pref"
    export_project(engine, "p", ExportOptions(format="trl-preference", out=out))
    assert rows(out) == []
    drops = json.dumps(truth_drops(out))
    assert "fail-to-pass tests failed" in drops and "harness check failed" in drops


def test_a_failed_answer_is_never_a_positive_kto_label(engine, tmp_path):
    out = tmp_path / "kto"
    export_project(engine, "p", ExportOptions(format="trl-kto", out=out))
    positives = [r["completion"] for r in rows(out) if r["label"]]
    assert positives == ["def add(a, b): return a + b"]


def test_a_failed_answer_is_never_an_sft_row(engine, tmp_path):
    out = tmp_path / "sft"
    export_project(
        engine, "p", ExportOptions(format="trl-sft", out=out, params={"human_candidates": True})
    )
    assert [r["completion"] for r in rows(out)] == ["def add(a, b): return a + b"]
    assert "SFT answer" in json.dumps(truth_drops(out))


@pytest.mark.parametrize("verifier, exported", [(PASSED, True), (FAILED, False), (TAMPERED, False)])
def test_a_trajectory_whose_verifier_failed_gives_no_all_correct_step_labels(
    engine, tmp_path, verifier, exported
):
    record = orjson.loads(NORMATIVE.read_bytes())
    record["verifier"] = verifier
    source = tmp_path / "t.jsonl"
    source.write_bytes(orjson.dumps(record) + b"\n")
    with transaction(engine) as s:
        create_project(s, "agents", kinds=["steps"])
    import_files(engine, "agents", [source])
    out = tmp_path / "steps"
    export_project(engine, "agents", ExportOptions(format="trl-stepwise", out=out))
    assert len(rows(out)) == (1 if exported else 0)
    assert bool(truth_drops(out)) is (not exported)


def test_verl_rows_of_verifiable_items_are_rule_rows_the_verifier_scores(tmp_path, sqlite_url):
    from preflab.verify.adapters import compute_score

    engine = db.open_db(sqlite_url)
    task = {"task_id": "half", "kind": "math", "answer": r"\frac{1}{2}"}
    with transaction(engine) as s:
        project = create_project(s, "rl", kinds=["pairwise"])
        add_item(
            s,
            project,
            Item(
                id="m",
                prompt="half of one?",
                candidates=[{"id": "c", "text": "1/2"}],
                metadata={"verifiable": "math", "verify_task": task},
            ),
        )
        add_item(
            s, project, Item(id="plain", prompt="a poem", candidates=[{"id": "c", "text": "roses"}])
        )
    out = tmp_path / "verl"
    export_project(engine, "rl", ExportOptions(format="verl", out=out))
    by_id = {r["extra_info"]["item_id"]: r for r in rows(out)}
    assert by_id["m"]["reward_model"] == {"style": "rule", "ground_truth": r"\frac{1}{2}"}
    assert by_id["m"]["extra_info"]["verifier"] == "preflab.verify:math"
    assert by_id["plain"]["reward_model"] == {"style": "model", "ground_truth": None}
    assert (by_id["plain"]["extra_info"]["style"], by_id["plain"]["extra_info"]["verifier"]) == (
        "model",
        None,
    )
    row = by_id["m"]  # verl calls the reward function with the row's fields
    assert (
        compute_score(
            row["data_source"],
            r"\boxed{0.5}",
            row["reward_model"]["ground_truth"],
            row["extra_info"],
        )["score"]
        == 1.0
    )
    parquet = tmp_path / "verl-parquet"
    export_project(engine, "rl", ExportOptions(format="verl", out=parquet, file_format="parquet"))
    import pyarrow.parquet as pq

    [data_file] = parquet.glob("*.parquet")
    infos = {r["item_id"]: r for r in pq.read_table(data_file).column("extra_info").to_pylist()}
    assert (infos["m"]["verifier"], infos["plain"]["verifier"]) == ("preflab.verify:math", None)
    engine.dispose()
