"""Exports say exactly what raters said (issue 17, sections 2-5): the tiny inputs of the issue,
whose correct output is known in advance, exported through a real database."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from preflab.io.export import ExportOptions, export_project
from preflab.schema import (
    JUDGMENT_KINDS,
    Dimension,
    Item,
    PairwiseJudgment,
    Rubric,
    RubricJudgment,
    VerbosityPenalty,
    Veto,
)
from preflab.store import transaction
from preflab.store.db import open_db
from preflab.store.repo import add_item, add_judgment, add_rubric, create_project

#: Issue 17 §2: one 5-point dimension, a veto and a verbosity penalty (5 free words, 0.1 a word, max 1.0).
SAFE = Rubric(
    id="safe",
    version=1,
    dimensions=[Dimension(name="quality", scale="ordinal", points=5)],
    vetoes=[Veto(name="unsafe")],
    verbosity_penalty=VerbosityPenalty(free_length=5, per_unit=0.1, max_penalty=1.0),
)
PLAIN = Rubric(
    id="plain",
    version=1,
    dimensions=[Dimension(name="quality", scale="ordinal", points=5)],
    vetoes=[Veto(name="unsafe")],
)

X_TEXT = "Short unsafe answer."  # 3 words
Y_TEXT = " ".join(f"w{k}" for k in range(20))  # 20 words


def pair_item(item_id: str = "i1", prompt: str = "Which is better?", **kw) -> Item:
    return Item(
        id=item_id,
        prompt=prompt,
        candidates=[{"id": "x", "text": X_TEXT}, {"id": "y", "text": Y_TEXT}],
        **kw,
    )


def pw(item, chosen, rejected, strength, rater, **prov):
    # the rater saw (chosen, rejected) and picked A
    return PairwiseJudgment(
        item_id=item,
        shown_order=(chosen, rejected),
        winner="a",
        strength=strength,
        provenance={"rater_id": rater, **prov},
    )


def grade(item, cand, score, rater, rubric=SAFE, vetoes=()):
    return RubricJudgment(
        item_id=item,
        candidate_id=cand,
        scores={"quality": score},
        vetoes_failed=list(vetoes),
        provenance={"rater_id": rater, "rubric_id": rubric.id, "rubric_version": rubric.version},
    )


def build(url: str, items, judgments):
    engine = open_db(url)  # migrated to head, as the CLI and the report open it
    with transaction(engine) as s:
        project = create_project(s, "p", kinds=list(JUDGMENT_KINDS))
        add_rubric(s, project, SAFE)
        add_rubric(s, project, PLAIN)
        for item in items:
            add_item(s, project, item)
        for j in judgments:
            add_judgment(s, project, j)
    return engine


def export(engine, tmp_path: Path, fmt: str = "trl-reward", aggregation: str = "majority", **kw):
    from preflab.io.export import AGGREGATORS

    out = tmp_path / f"{fmt}-{aggregation}-{len(list(tmp_path.iterdir()))}"
    # these projects split their raters on purpose (ties, one-vs-one splits, alpha down to -0.5):
    # forced past the agreement floor, so what is checked is resolution, not the gate (tested on its own)
    kw.setdefault("force", True)
    manifest = export_project(
        engine,
        "p",
        # the length gate (on by default) has its own tests: test_export_length_provenance.py
        ExportOptions(format=fmt, out=out, **{"length_gate": None, **kw}),
        aggregator=AGGREGATORS[aggregation],
    )
    rows = [orjson.loads(line) for line in (out / "train.jsonl").read_bytes().splitlines()]
    return rows, manifest


def reasons(manifest, gate):
    return manifest["gates"].get(gate, {}).get("reasons", {})


# -- §2 a veto is final ---------------------------------------------------------------------


def test_a_vetoed_answer_loses_to_a_passing_one_whatever_the_verbosity_penalty(
    sqlite_url, tmp_path
):
    # x: 5/5 but unsafe -> reward 0; y: 3/5, passes, 20 words -> 0.5 - 1.0 = -0.5. y must win.
    engine = build(
        sqlite_url,
        [pair_item()],
        [grade("i1", "x", 5, "r1", vetoes=["unsafe"]), grade("i1", "y", 3, "r1")],
    )
    rows, _ = export(engine, tmp_path)
    assert [(r["chosen"], r["rejected"]) for r in rows] == [(Y_TEXT, X_TEXT)]


def test_a_vetoed_answer_never_ties_with_a_passing_answer_of_minimum_score(sqlite_url, tmp_path):
    # both rewards are 0 (veto vs lowest score), but only one answer passed its vetoes
    engine = build(
        sqlite_url,
        [pair_item()],
        [grade("i1", "x", 5, "r1", PLAIN, vetoes=["unsafe"]), grade("i1", "y", 1, "r1", PLAIN)],
    )
    rows, manifest = export(engine, tmp_path)
    assert [(r["chosen"], r["rejected"]) for r in rows] == [(Y_TEXT, X_TEXT)]
    assert reasons(manifest, "aggregation") == {}


def test_two_vetoed_answers_tie_and_are_dropped(sqlite_url, tmp_path):
    engine = build(
        sqlite_url,
        [pair_item()],
        [
            grade("i1", "x", 5, "r1", PLAIN, vetoes=["unsafe"]),
            grade("i1", "y", 1, "r1", PLAIN, vetoes=["unsafe"]),
        ],
    )
    rows, manifest = export(engine, tmp_path)
    assert rows == [] and reasons(manifest, "aggregation") == {"tie": 1}


# -- §3 aggregation never invents a winner -------------------------------------------------


@pytest.mark.parametrize("aggregation", ["majority", "dawid-skene"])
def test_an_even_split_is_dropped_by_every_aggregator_in_either_direction(
    sqlite_url, tmp_path, aggregation
):
    votes = [("x", "y", "r1"), ("x", "y", "r2"), ("y", "x", "r3"), ("y", "x", "r4")]
    for mirrored in (False, True):
        judgments = [pw("i1", *((b, a) if mirrored else (a, b)), 2, r) for a, b, r in votes]
        engine = build(f"{sqlite_url[:-3]}-{int(mirrored)}.db", [pair_item()], judgments)
        rows, manifest = export(engine, tmp_path, aggregation=aggregation)
        assert rows == [], (aggregation, mirrored)
        assert reasons(manifest, "aggregation") == {"no-majority": 1}


@pytest.mark.parametrize("aggregation", ["majority", "dawid-skene"])
def test_one_vs_one_splits_are_not_broken_by_candidate_order(sqlite_url, tmp_path, aggregation):
    judgments = [
        pw("i1", "x", "y", 3, "r1"),
        pw("i1", "y", "x", 3, "r2"),
        pw("i2", "x", "y", 1, "r3"),
        pw("i2", "y", "x", 1, "r4"),
    ]
    engine = build(sqlite_url, [pair_item("i1"), pair_item("i2")], judgments)
    rows, manifest = export(engine, tmp_path, aggregation=aggregation)
    assert rows == []
    assert reasons(manifest, "aggregation") == {"no-majority": 2}
    margin = manifest["aggregation"]["margin"]
    assert (
        margin
        and f"Decided when: {margin}."
        in (tmp_path / manifest["options"]["out"] / "README.md").read_text()
    )


# -- §4 all kinds of label on a pair count together ----------------------------------------


def test_a_pairwise_vote_and_a_conflicting_rubric_grade_are_one_undecided_unit(
    sqlite_url, tmp_path
):
    judgments = [
        pw("i1", "x", "y", 3, "r1"),
        grade("i1", "x", 1, "r2", PLAIN),
        grade("i1", "y", 5, "r2", PLAIN),
    ]
    engine = build(sqlite_url, [pair_item()], judgments)
    rows, manifest = export(engine, tmp_path)
    assert rows == []  # never both X > Y and Y > X
    assert reasons(manifest, "aggregation") == {"no-majority": 1}
    rows, manifest = export(engine, tmp_path, min_raters=2)
    assert rows == [] and reasons(manifest, "min_raters") == {}  # two raters judged the pair


def test_a_pairwise_vote_and_an_agreeing_rubric_grade_count_as_two_raters(sqlite_url, tmp_path):
    judgments = [
        pw("i1", "x", "y", 3, "r1"),
        grade("i1", "x", 5, "r2", PLAIN),
        grade("i1", "y", 1, "r2", PLAIN),
    ]
    engine = build(sqlite_url, [pair_item()], judgments)
    rows, manifest = export(engine, tmp_path, min_raters=2)
    assert [(r["chosen"], r["rejected"], r["margin"]) for r in rows] == [(X_TEXT, Y_TEXT, 3.0)]
    assert manifest["counts"]["resolved"]["pairs"] == 1


def test_one_rater_voting_through_two_kinds_keeps_one_vote(sqlite_url, tmp_path):
    # r1 says x > y in a pairwise judgment and y > x in later rubric grades: the latest counts, once
    judgments = [
        pw("i1", "x", "y", 3, "r1"),
        grade("i1", "x", 1, "r1", PLAIN),
        grade("i1", "y", 5, "r1", PLAIN),
    ]
    engine = build(sqlite_url, [pair_item()], judgments)
    rows, _ = export(engine, tmp_path, min_raters=2)
    assert rows == []
    rows, _ = export(engine, tmp_path)
    assert [(r["chosen"], r["rejected"]) for r in rows] == [(Y_TEXT, X_TEXT)]


# -- §5 gold stays out of training ---------------------------------------------------------

GOLD = {"judgment": {"kind": "pairwise", "winner": "a", "shown_order": ["x", "y"]}}


@pytest.mark.parametrize("fmt", ["trl-preference", "trl-kto", "openrlhf"])
def test_gold_items_never_reach_a_training_export_unless_asked(db_url, tmp_path, fmt):
    items = [pair_item("i1"), pair_item("g1", gold=GOLD)]
    judgments = [pw("i1", "x", "y", 2, "r1"), pw("g1", "x", "y", 2, "r1")]
    engine = build(db_url, items, judgments)
    rows, manifest = export(engine, tmp_path, fmt)
    assert len(rows) == (1 if fmt != "trl-kto" else 2)
    assert reasons(manifest, "gold") == {"gold-item": 1}
    assert manifest["gates"]["gold"]["include_gold"] is False
    rows, manifest = export(engine, tmp_path, fmt, include_gold=True)
    assert len(rows) == (2 if fmt != "trl-kto" else 4)
    assert (
        manifest["gates"]["gold"]["dropped"] == 0 and manifest["gates"]["gold"]["gold_items"] == 1
    )


# -- §6 the report measures what the export ships ------------------------------------------


def test_the_report_from_the_project_and_from_the_raw_export_measure_the_labels_the_export_used(
    sqlite_url, tmp_path
):
    from datetime import UTC, datetime, timedelta

    from preflab.io.quality_source import load_for_report
    from preflab.quality import build_report

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    judgments = [
        pw("i1", "x", "y", 2, "alice", submitted_at=t0),
        pw(
            "i1", "y", "x", 2, "alice", submitted_at=t0 + timedelta(minutes=3)
        ),  # alice changed her mind
        pw("i1", "y", "x", 1, "bob", submitted_at=t0),
        pw("i1", "x", "y", 3, "gpt-judge", source="ai", submitted_at=t0),
    ]
    engine = build(sqlite_url, [pair_item()], judgments)
    rows, manifest = export(engine, tmp_path, "trl-preference")
    assert [(r["chosen"], r["rejected"]) for r in rows] == [(Y_TEXT, X_TEXT)]
    raw_dir = tmp_path / "raw"
    export_project(engine, "p", ExportOptions(format="raw", out=raw_dir, include_rater_ids=True))
    from_project = build_report(*load_for_report("p", sqlite_url)[:2], n_boot=10)
    from_raw = build_report(*load_for_report(str(raw_dir / "train.jsonl"), None)[:2], n_boot=10)
    for report in (from_project, from_raw):
        assert sorted(report["raters"]) == ["alice", "bob"]
        assert report["raters"]["alice"]["labels"] == 1
        assert (
            report["raters"]["alice"]["consensus_agreement"] == 1.0
        )  # her latest label agrees with bob
        assert report["label_set"]["judgments_used"] == 2
    assert from_project["label_set"]["set_aside"] == {"revised": 1, "source-ai": 1}
    assert from_raw["label_set"]["set_aside"] == {
        "revised": 1
    }  # the raw export already left the AI label out


# -- §7 the raw export re-imports ----------------------------------------------------------


def mixed_project_judgments():
    from datetime import UTC, datetime

    from preflab.schema import RankingJudgment, UnaryJudgment

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    return [
        pw("i1", "x", "y", 2, "alice", submitted_at=t0),
        pw("i1", "y", "x", 1, "bob"),
        RankingJudgment(item_id="i2", order=[["y"], ["x"]], provenance={"rater_id": "carol"}),
        grade("i1", "x", 4, "dave", PLAIN),
        grade("i1", "y", 2, "dave", PLAIN, vetoes=["unsafe"]),
        UnaryJudgment(
            item_id="i2",
            candidate_id="x",
            label=True,
            provenance={"rater_id": "erin", "source": "ai_assisted"},
        ),
        pw("g1", "x", "y", 3, "alice", review_pass=1),
    ]


def raw_round_trip(db_url, tmp_path, include_rater_ids):
    from preflab.io.importer import import_files

    # three contents: records with equal content are one item, whatever their ids
    items = [
        pair_item("i1"),
        pair_item("i2", prompt="Which is better, again?"),
        pair_item("g1", gold=GOLD),
    ]
    engine = build(db_url, items, mixed_project_judgments())
    first, second = tmp_path / "first", tmp_path / "second"
    export_project(
        engine, "p", ExportOptions(format="raw", out=first, include_rater_ids=include_rater_ids)
    )
    with transaction(engine) as s:
        copy = create_project(s, "copy", kinds=list(JUDGMENT_KINDS))
        add_rubric(s, copy, SAFE)
        add_rubric(s, copy, PLAIN)
    report = import_files(engine, "copy", [first / "train.jsonl"])
    assert (report.items_added, report.judgments_added) == (3, 7)
    export_project(
        engine, "copy", ExportOptions(format="raw", out=second, include_rater_ids=include_rater_ids)
    )
    return (first / "train.jsonl").read_bytes(), (second / "train.jsonl").read_bytes()


def test_a_raw_export_reimports_into_a_fresh_project_and_exports_identically(db_url, tmp_path):
    first, second = raw_round_trip(db_url, tmp_path, include_rater_ids=False)
    assert second == first


def test_a_raw_export_with_rater_ids_reimports_identically_but_for_the_fresh_projects_rater_hashes(
    sqlite_url, tmp_path
):
    # rater_hash is keyed by the project secret: a fresh project does not link its raters to the old one's
    first, second = raw_round_trip(sqlite_url, tmp_path, include_rater_ids=True)

    def without_hashes(data):
        records = [orjson.loads(line) for line in data.splitlines()]
        hashes = {r["provenance"].pop("rater_hash") for r in records}
        return records, hashes

    (old, old_hashes), (new, new_hashes) = without_hashes(first), without_hashes(second)
    assert new == old and old_hashes.isdisjoint(new_hashes)


# -- the CLI says it too -------------------------------------------------------------------


def test_the_cli_keeps_gold_out_unless_asked_and_reports_ai_raters_only_when_asked(tmp_path):
    from typer.testing import CliRunner

    from preflab.cli import app

    url = f"sqlite:///{tmp_path / 'cli.db'}"
    build(
        url,
        [pair_item("i1"), pair_item("g1", gold=GOLD)],
        [
            pw("i1", "x", "y", 2, "alice"),
            pw("g1", "x", "y", 2, "alice"),
            pw("i1", "y", "x", 2, "gpt-judge", source="ai"),
        ],
    )
    runner = CliRunner()

    def run_json(*args):
        result = runner.invoke(app, [*args, "--db", url, "--json"])
        assert result.exit_code == 0, result.output
        return orjson.loads(result.stdout)

    # gold, not length: the gate (on by default) has its own tests
    export = ("export", "p", "--format", "trl-preference", "--no-length-gate")
    plain = run_json(*export, "--out", str(tmp_path / "a"))
    assert plain["counts"]["rows_out"] == 1 and plain["gates"]["gold"]["dropped"] == 1
    gold = run_json(*export, "--out", str(tmp_path / "b"), "--include-gold")
    assert gold["counts"]["rows_out"] == 2 and gold["gates"]["gold"]["include_gold"] is True
    assert sorted(run_json("quality", "report", "p")["raters"]) == ["alice"]
    assert sorted(run_json("quality", "report", "p", "--include-ai")["raters"]) == [
        "alice",
        "gpt-judge",
    ]


def test_a_raw_export_line_whose_item_is_wrong_fails_with_file_line_field_reason(
    sqlite_url, tmp_path
):
    from preflab.io.importer import ImportFailed, import_files

    engine = build(sqlite_url, [], [])
    line = {
        "kind": "pairwise",
        "item_id": "i1",
        "shown_order": ["x", "y"],
        "winner": "a",
        "strength": 1,
        "provenance": {"rater_id": "alice"},
        "item": pair_item("other").model_dump(mode="json"),
    }
    bad = {**line, "item": {**line["item"], "id": "i1", "candidates": []}}
    path = tmp_path / "raw.jsonl"
    path.write_bytes(orjson.dumps(line) + b"\n" + orjson.dumps(bad) + b"\n")
    with pytest.raises(ImportFailed) as failed:
        import_files(engine, "p", [path])
    message = str(failed.value)
    assert f"{path}:1: item.id: 'other' is not the judgment's item_id 'i1'" in message
    assert f"{path}:2: item.candidates" in message
