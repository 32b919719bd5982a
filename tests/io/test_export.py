"""Exports from a real database (SQLite and PostgreSQL): rows, gates, manifest, atomicity.

Formats are checked against the documented dataset formats: TRL
(https://huggingface.co/docs/trl/dataset_formats), OpenRLHF (openrlhf/datasets/reward_dataset.py)
and verl (https://verl.readthedocs.io/en/latest/preparation/prepare_data.html).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest
from sqlalchemy import select, update

from preflab.io.export import EXPORT_FORMATS, ExportError, ExportOptions, export_project
from preflab.io.export import writers as export_writers
from preflab.schema import (
    JUDGMENT_KINDS,
    DemonstrationJudgment,
    Dimension,
    Item,
    PairwiseJudgment,
    RankingJudgment,
    Rubric,
    RubricJudgment,
    StepsJudgment,
    UnaryJudgment,
    Veto,
    parse_judgment,
)
from preflab.store import Base, ExportLog, JudgmentRow, make_engine, transaction
from preflab.store.repo import add_item, add_judgment, add_rubric, create_project

RUBRIC = Rubric(
    id="quality",
    version=1,
    dimensions=[
        Dimension(name="accuracy", scale="ordinal", points=5, weight=2),
        Dimension(name="clarity", scale="binary"),
    ],
    vetoes=[Veto(name="fabrication")],
)


def prov(rater, **kw):
    return {"rater_id": rater, **kw}


def pw(item, shown, winner, strength, rater, **kw):
    return PairwiseJudgment(
        item_id=item,
        shown_order=shown,
        winner=winner,
        strength=strength,
        provenance=prov(rater, **kw),
    )


def demo_items() -> list[Item]:
    return [
        Item(
            id="p1",
            prompt="Name a colour.",
            candidates=[{"id": "a", "text": "Red."}, {"id": "b", "text": "Blue, like the sky."}],
        ),
        Item(
            id="p2",
            prompt="Two plus two?",
            candidates=[{"id": "x", "text": "Four."}, {"id": "y", "text": "It is four."}],
        ),
        Item(
            id="p3",
            prompt="Rank these.",
            candidates=[{"id": f"c{k}", "text": f"answer {k}"} for k in (1, 2, 3)],
        ),
        Item(
            id="p4",
            prompt="Summarise.",
            candidates=[
                {"id": "s1", "text": "A summary."},
                {"id": "s2", "text": "Another summary."},
            ],
        ),
        Item(
            id="p5",
            prompt="Say hi.",
            candidates=[{"id": "h1", "text": "Hi!"}, {"id": "h2", "text": "Go away."}],
        ),
        Item(
            id="p6",
            prompt="Solve 3*4+1.",
            candidates=[{"id": "m", "text": "3*4=12. 12+1=14. So 14."}],
        ),
        Item(
            id="p7",
            prompt="Write a haiku.",
            candidates=[
                {"id": "g", "text": "placeholder"},
                {"id": "hum", "text": "An old silent pond", "source": "human"},
            ],
        ),
        Item(
            id="p8",
            prompt="What is the capital of France?",
            reference="Paris",
            domains=["Geography"],
            candidates=[{"id": "q", "text": "Paris"}],
            metadata={"source": "geo-quiz"},
        ),
    ]


def demo_judgments() -> list:
    t = datetime(2025, 3, 1, tzinfo=UTC)
    return [
        # p1: r1 saw (b, a) and picked A = b; r2 picked b; r3 picked a -> b, median(2, 3)
        pw("p1", ("b", "a"), "a", 2, "r1", submitted_at=t),
        pw("p1", ("a", "b"), "b", 3, "r2"),
        pw("p1", ("a", "b"), "a", 1, "r3"),
        # three AI judges prefer a: excluded unless include_ai (then a wins 4:2)
        *[pw("p1", ("a", "b"), "a", 3, f"judge-{k}", source="ai") for k in range(3)],
        # p2: production says x, the adjudicator says y
        pw("p2", ("x", "y"), "a", 3, "r1"),
        pw("p2", ("y", "x"), "b", 2, "r2", source="ai_assisted"),
        pw("p2", ("x", "y"), "b", 1, "senior", review_pass=2),
        # p3: a ranking (c2 > c1 = c3)
        RankingJudgment(item_id="p3", order=[["c2"], ["c1", "c3"]], provenance=prov("r1")),
        # p4: rubric grades; s1 scores higher but fails the veto for r1
        RubricJudgment(
            item_id="p4",
            candidate_id="s1",
            scores={"accuracy": 5, "clarity": 1},
            vetoes_failed=["fabrication"],
            provenance=prov("r1", rubric_id="quality", rubric_version=1),
        ),
        RubricJudgment(
            item_id="p4",
            candidate_id="s2",
            scores={"accuracy": 3, "clarity": 1},
            provenance=prov("r1", rubric_id="quality", rubric_version=1),
        ),
        # p5: thumbs
        UnaryJudgment(item_id="p5", candidate_id="h1", label=True, provenance=prov("r1")),
        UnaryJudgment(item_id="p5", candidate_id="h1", label=True, provenance=prov("r2")),
        UnaryJudgment(item_id="p5", candidate_id="h2", label=False, provenance=prov("r1")),
        # p6: steps, error on step 2
        StepsJudgment(
            item_id="p6",
            candidate_id="m",
            steps=["3*4=12.", "12+1=14.", "So 14."],
            verdicts=[1, -1],
            provenance=prov("r1"),
        ),
        # p7: one accepted demonstration, one pending
        DemonstrationJudgment(
            item_id="p7", text="Frog jumps in the pond", status="accepted", provenance=prov("r1")
        ),
        DemonstrationJudgment(item_id="p7", text="draft", status="pending", provenance=prov("r2")),
        # flagged later in the test database: excluded from every export
        pw("p2", ("x", "y"), "a", 3, "r9"),
    ]


def build(db_url: str, name: str = "demo", items=None, judgments=None):
    engine = make_engine(db_url)
    Base.metadata.create_all(engine)
    with transaction(engine) as s:
        # the demo data disagree on purpose (they exercise resolution), so no agreement floor;
        # the floor itself: tests/io/test_export_agreement_gate.py
        project = create_project(
            s, name, kinds=list(JUDGMENT_KINDS), settings={"policy": {"min_alpha": 0}}
        )
        add_rubric(s, project, RUBRIC)
        for item in items if items is not None else demo_items():
            add_item(s, project, item)
        for j in judgments if judgments is not None else demo_judgments():
            add_judgment(s, project, j)
        s.flush()
        rater9 = [r.pk for r in s.scalars(select(JudgmentRow)) if r.rater.rater_key == "r9"]
        s.execute(
            update(JudgmentRow)
            .where(JudgmentRow.pk.in_(rater9))
            .values(excluded=True, exclusion_reason="gold-drift")
        )
    return engine


@pytest.fixture
def engine(db_url):
    engine = build(db_url)
    yield engine
    engine.dispose()


def read_rows(out: Path, file_format: str, split: str = "train") -> list[dict]:
    if file_format == "jsonl":
        return [orjson.loads(line) for line in (out / f"{split}.jsonl").read_bytes().splitlines()]
    if file_format == "parquet":
        return pq.read_table(out / f"{split}.parquet").to_pylist()
    import datasets

    return list(datasets.load_from_disk(str(out))[split])


def export(engine, tmp_path, fmt, name="demo", sub=None, **kw):
    out = tmp_path / (sub or f"{fmt}-{kw.get('file_format', 'jsonl')}")
    # these fixtures exercise resolution and formats: the length gate (on by default) has its
    # own tests (below and tests/io/test_export_length_provenance.py)
    kw.setdefault("length_gate", None)
    manifest = export_project(engine, name, ExportOptions(format=fmt, out=out, **kw))
    return out, manifest


MSG = {"role": str, "content": str}


def is_messages(value) -> bool:
    return isinstance(value, list) and all(
        isinstance(m, dict) and m.keys() == MSG.keys() and all(isinstance(m[k], str) for k in MSG)
        for m in value
    )


# documented keys and value checks per format (standard, i.e. string prompts)
EXPECTED = {
    "trl-preference": {"prompt": str, "chosen": str, "rejected": str},
    "trl-reward": {"prompt": str, "chosen": str, "rejected": str, "margin": float},
    "openrlhf": {"prompt": str, "chosen": str, "rejected": str, "margin": float},
    "trl-kto": {"prompt": str, "completion": str, "label": bool},
    "trl-sft": {"prompt": str, "completion": str},
    "trl-stepwise": {"prompt": str, "completions": list, "labels": list},
    "verl": {
        "data_source": str,
        "prompt": is_messages,
        "ability": str,
        "reward_model": dict,
        "extra_info": dict,
    },
}


def check_value(check, value) -> bool:
    return check(value) if callable(check) and not isinstance(check, type) else type(value) is check


@pytest.mark.parametrize("file_format", ["jsonl", "parquet", "hf"])
def test_every_format_has_exactly_the_documented_keys_and_types(engine, tmp_path, file_format):
    for fmt, expected in EXPECTED.items():
        out, manifest = export(engine, tmp_path, fmt, file_format=file_format)
        rows = read_rows(out, file_format)
        assert rows, fmt
        assert manifest["counts"]["rows_out"] == len(rows)
        for row in rows:
            assert list(row) == list(expected), (fmt, row)
            for key, check in expected.items():
                assert check_value(check, row[key]), (fmt, key, row[key])
        if fmt == "trl-stepwise":
            assert all(type(s) is str for r in rows for s in r["completions"])
            assert all(
                type(b) is bool and len(r["labels"]) == len(r["completions"])
                for r in rows
                for b in r["labels"]
            )
        if fmt == "verl":
            assert all(list(r["reward_model"]) == ["style", "ground_truth"] for r in rows)
            assert all(
                list(r["extra_info"])
                == ["split", "index", "item_id", "style", "verifier", "prompt_text", "verify_task"]
                for r in rows
            )
    out, _ = export(engine, tmp_path, "raw", file_format=file_format)
    raw_keys = ["kind", "item_id", "rater_hash", "source", "review_pass", "judgment", "item"]
    rows = read_rows(out, file_format)
    if file_format == "jsonl":
        assert all("item" in r and "provenance" in r for r in rows)
    else:
        assert all(list(r) == raw_keys and type(r["review_pass"]) is int for r in rows)


def test_trl_preference_rows_resolve_labels(engine, tmp_path):
    out, manifest = export(engine, tmp_path, "trl-preference")
    rows = read_rows(out, "jsonl")
    assert rows == [
        # p1: r1 saw the pair reversed; majority b (2 of 3 humans)
        {"prompt": "Name a colour.", "chosen": "Blue, like the sky.", "rejected": "Red."},
        # p2: the adjudicator's y overrides two production votes for x
        {"prompt": "Two plus two?", "chosen": "It is four.", "rejected": "Four."},
        # p3: ranking c2 > c1 = c3: induced pairs, the tie dropped
        {"prompt": "Rank these.", "chosen": "answer 2", "rejected": "answer 1"},
        {"prompt": "Rank these.", "chosen": "answer 2", "rejected": "answer 3"},
        # p4: s1's veto gates its reward to 0, so s2 wins
        {"prompt": "Summarise.", "chosen": "Another summary.", "rejected": "A summary."},
    ]
    gates = manifest["gates"]
    assert gates["source"]["reasons"] == {"ai": 3} and gates["source"]["sample_item_ids"] == {
        "ai": ["p1"]
    }
    assert gates["excluded"]["reasons"] == {"gold-drift": 1}
    assert gates["aggregation"]["reasons"] == {"tie": 1}
    assert manifest["rubrics"] == [
        {"id": "quality", "version": 1, "content_hash": RUBRIC.content_hash()}
    ]
    # p2's AI-assisted label was set aside by the adjudication: the export did not use it
    # (issue 28 section 7: counts are of the labels the export read)
    assert manifest["flags"]["ai_assisted_judgments"] == 0
    assert manifest["counts"]["judgments_in"] == len(demo_judgments())
    assert (
        manifest["raters"]["in"] == 4
    )  # r1 r2 r3 senior (judges and the excluded r9 do not count)


def test_ai_labels_are_excluded_by_default_and_can_be_included(engine, tmp_path):
    out, _ = export(engine, tmp_path, "trl-reward", sub="with-ai", include_ai=True)
    p1 = read_rows(out, "jsonl")[0]
    assert (p1["chosen"], p1["rejected"], p1["margin"]) == ("Red.", "Blue, like the sky.", 3.0)
    out, _ = export(engine, tmp_path, "trl-reward", sub="human")
    p1 = read_rows(out, "jsonl")[0]
    # the raters' median strength 2.5, less the verbosity penalty: the chosen answer is more
    # than e times as long in tokens, so the capped 1.0 (preflab.io.export.length_gate)
    assert (p1["chosen"], p1["margin"]) == ("Blue, like the sky.", 1.5)


def test_kto_stepwise_sft_and_verl_rows(engine, tmp_path):
    kto = read_rows(export(engine, tmp_path, "trl-kto")[0], "jsonl")
    assert [(r["prompt"], r["completion"], r["label"]) for r in kto] == [
        ("Name a colour.", "Blue, like the sky.", True),
        ("Name a colour.", "Red.", False),
        ("Two plus two?", "It is four.", True),
        ("Two plus two?", "Four.", False),
        ("Rank these.", "answer 2", True),
        ("Rank these.", "answer 1", False),
        ("Rank these.", "answer 2", True),
        ("Rank these.", "answer 3", False),
        ("Summarise.", "Another summary.", True),
        ("Summarise.", "A summary.", False),
        ("Say hi.", "Hi!", True),
        ("Say hi.", "Go away.", False),
    ]
    steps = read_rows(export(engine, tmp_path, "trl-stepwise")[0], "jsonl")
    assert steps == [
        {"prompt": "Solve 3*4+1.", "completions": ["3*4=12.", "12+1=14."], "labels": [True, False]}
    ]
    sft = read_rows(export(engine, tmp_path, "trl-sft")[0], "jsonl")
    assert sft == [{"prompt": "Write a haiku.", "completion": "Frog jumps in the pond"}]
    sft_h = read_rows(
        export(engine, tmp_path, "trl-sft", sub="sft-h", params={"human_candidates": True})[0],
        "jsonl",
    )
    assert [r["completion"] for r in sft_h] == ["Frog jumps in the pond", "An old silent pond"]
    verl = read_rows(export(engine, tmp_path, "verl")[0], "jsonl")
    assert len(verl) == 8
    assert verl[7] == {
        "data_source": "geo-quiz",
        "prompt": [{"role": "user", "content": "What is the capital of France?"}],
        "ability": "geography",
        "reward_model": {"style": "rule", "ground_truth": "Paris"},
        "extra_info": {
            "split": "train",
            "index": 7,
            "item_id": "p8",
            "style": "rule",
            "verifier": "preflab.verify:exact",
            "prompt_text": None,
            "verify_task": None,
        },
    }
    assert verl[0]["reward_model"] == {"style": "model", "ground_truth": None}
    assert verl[0]["data_source"] == "demo" and verl[0]["ability"] == "general"


def test_conversational_is_automatic_for_chat_prompts_and_can_be_forced(db_url, tmp_path):
    chat = Item(
        id="c1",
        prompt=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}],
        candidates=[
            {"id": "a", "text": "Hello."},
            {"id": "b", "messages": [{"role": "assistant", "content": "Hey."}]},
        ],
    )
    engine = build(
        db_url,
        "chat",
        items=[chat, demo_items()[0]],
        judgments=[pw("c1", ("a", "b"), "b", 2, "r1"), pw("p1", ("a", "b"), "a", 1, "r1")],
    )
    try:
        out, manifest = export(
            engine, tmp_path, "trl-preference", name="chat", file_format="parquet"
        )
        rows = read_rows(out, "parquet")
        assert manifest["conversational"] is True
        assert rows[0] == {
            "prompt": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Hi?"},
            ],
            "chosen": [{"role": "assistant", "content": "Hey."}],
            "rejected": [{"role": "assistant", "content": "Hello."}],
        }
        assert rows[1]["prompt"] == [{"role": "user", "content": "Name a colour."}]
        out, _ = export(
            engine, tmp_path, "trl-preference", name="chat", sub="flat", conversational=False
        )
        assert read_rows(out, "jsonl")[0] == {
            "prompt": "system: Be brief.\n\nuser: Hi?",
            "chosen": "Hey.",
            "rejected": "Hello.",
        }
        # the demo project's string prompts become one user turn when forced
        out, _ = export(
            engine, tmp_path, "trl-kto", name="chat", sub="kto-chat", conversational=True
        )
        assert read_rows(out, "jsonl")[2]["completion"] == [
            {"role": "assistant", "content": "Red."}
        ]
    finally:
        engine.dispose()


def test_min_raters_and_length_parity_gates(engine, tmp_path):
    out, manifest = export(engine, tmp_path, "trl-preference", sub="min2", min_raters=2)
    assert [r["chosen"] for r in read_rows(out, "jsonl")] == ["Blue, like the sky."]
    assert manifest["gates"]["min_raters"]["dropped"] == 4
    assert manifest["gates"]["min_raters"]["sample_item_ids"] == {
        "fewer-than-2-raters": ["p2", "p3", "p4"]
    }
    out, manifest = export(
        engine,
        tmp_path,
        "trl-preference",
        sub="parity",
        length_gate=(0.85, 1.20),
        length_unit="words",
    )
    # p1 4 words vs 1: too long; p2 3 vs 1: too long; p3 equal lengths kept; p4 2 vs 2 kept
    assert [r["prompt"] for r in read_rows(out, "jsonl")] == [
        "Rank these.",
        "Rank these.",
        "Summarise.",
    ]
    assert manifest["gates"]["length_parity"]["reasons"] == {"chosen_too_long": 2}
    assert manifest["gates"]["length_parity"]["length"] == "words"
    chars = export_project(
        engine,
        "demo",
        ExportOptions(format="trl-preference", out=tmp_path / "chars", length_gate=(0.5, 1.0)),
        length_fn=len,
    )
    assert chars["gates"]["length_parity"]["length"] == "len"


def test_manifest_hashes_match_the_files_and_an_export_log_is_written(engine, tmp_path):
    for file_format in ("jsonl", "parquet", "hf"):
        out, manifest = export(engine, tmp_path, "trl-reward", file_format=file_format)
        on_disk = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()} - {
            "manifest.json"
        }
        assert set(manifest["files"]) == on_disk and "README.md" in on_disk
        for rel, info in manifest["files"].items():
            assert hashlib.sha256((out / rel).read_bytes()).hexdigest() == info["sha256"]
            assert (out / rel).stat().st_size == info["bytes"]
        assert json.loads((out / "manifest.json").read_text()) == manifest
    with transaction(engine) as s:
        logs = s.scalars(select(ExportLog).order_by(ExportLog.pk)).all()
        assert [log.format for log in logs] == ["trl-reward"] * 3
        assert logs[-1].manifest["files"] == manifest["files"] and logs[-1].path == str(
            out.absolute()
        )


def test_dataset_card_has_front_matter_and_loading_instructions(engine, tmp_path):
    out, manifest = export(engine, tmp_path, "trl-preference", file_format="parquet")
    card = (out / "README.md").read_text()
    import yaml

    front = yaml.safe_load(card.split("---\n")[1])
    assert front["license"] == "other" and front["size_categories"] == ["n<1K"]
    assert front["configs"][0]["data_files"] == [{"split": "train", "path": "train.parquet"}]
    for text in (
        "## Aggregation",
        "## Gates",
        "quality` v1",
        'load_dataset("parquet"',
        "| source | 3 | ai: 3 |",
    ):
        assert text in card, text
    import datasets

    ds = datasets.load_dataset("parquet", data_files=str(out / "train.parquet"), split="train")
    assert ds.num_rows == manifest["counts"]["rows_out"] == 5


def test_raw_lines_parse_as_judgments_with_their_item_and_hide_rater_ids(engine, tmp_path):
    out, manifest = export(engine, tmp_path, "raw")
    lines = read_rows(out, "jsonl")
    assert (
        len(lines) == manifest["counts"]["rows_out"] == len(demo_judgments()) - 3 - 1
    )  # no AI, no flagged
    for rec in lines:
        item = Item.model_validate(rec.pop("item"))
        judgment = parse_judgment(rec)
        assert judgment.item_id == item.id
        assert judgment.provenance.rater_id == judgment.provenance.rater_hash
        assert judgment.provenance.rater_hash.startswith("hmac_sha256:")
    assert {rec["provenance"]["source"] for rec in lines} == {"human", "ai_assisted"}
    p8 = [rec for rec in read_rows(out, "jsonl") if rec["item_id"] == "p8"]
    assert p8 == []  # no judgments on p8
    out, _ = export(engine, tmp_path, "raw", sub="ids", include_rater_ids=True, include_ai=True)
    raters = {rec["provenance"]["rater_id"] for rec in read_rows(out, "jsonl")}
    assert raters == {"r1", "r2", "r3", "senior", "judge-0", "judge-1", "judge-2"}
    out, _ = export(engine, tmp_path, "raw", file_format="parquet")
    row = read_rows(out, "parquet")[0]
    assert parse_judgment(orjson.loads(row["judgment"])).kind == row["kind"] == "pairwise"
    assert Item.model_validate_json(row["item"]).id == row["item_id"] == "p1"


def test_a_failure_mid_export_leaves_nothing_and_keeps_the_previous_export(
    engine, tmp_path, monkeypatch
):
    out = tmp_path / "export"
    first = export_project(engine, "demo", ExportOptions(format="trl-preference", out=out))
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    real = export_writers.write_jsonl

    def broken(path, batches, schema, exporter):
        real(path, batches, schema, exporter)  # the data file is complete...
        raise OSError("disk full")  # ...then the export fails

    monkeypatch.setattr(export_writers, "write_jsonl", broken)
    with pytest.raises(OSError, match="disk full"):
        export_project(engine, "demo", ExportOptions(format="trl-reward", out=out))
    with pytest.raises(OSError, match="disk full"):
        export_project(engine, "demo", ExportOptions(format="trl-reward", out=tmp_path / "fresh"))
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert not (tmp_path / "fresh").exists()
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    with transaction(engine) as s:
        assert len(s.scalars(select(ExportLog)).all()) == 1
    assert first["format"] == "trl-preference"


def test_a_failing_log_write_unpublishes_the_export(engine, tmp_path, monkeypatch):
    from preflab.io.export import pipeline

    def no_project(*a, **k):
        raise RuntimeError("database went away")

    real_get = pipeline.get_project
    calls = {"n": 0}

    def second_call_fails(session, name):
        calls["n"] += 1
        if calls["n"] == 2:
            no_project()
        return real_get(session, name)

    monkeypatch.setattr(pipeline, "get_project", second_call_fails)
    with pytest.raises(RuntimeError):
        export_project(engine, "demo", ExportOptions(format="verl", out=tmp_path / "v"))
    assert not (tmp_path / "v").exists()
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_helpful_errors(engine, tmp_path):
    with pytest.raises(
        ExportError,
        match="choose one of: critiques, openrlhf, raw, rlhf-2026.11, rollouts, to-label, trl-kto",
    ):
        export_project(engine, "demo", ExportOptions(format="dpo", out=tmp_path / "x"))
    with pytest.raises(ExportError, match="jsonl, parquet, hf"):
        export_project(
            engine, "demo", ExportOptions(format="raw", out=tmp_path / "x", file_format="csv")
        )
    with pytest.raises(ExportError, match="takes no option 'bogus'"):
        export_project(
            engine, "demo", ExportOptions(format="trl-sft", out=tmp_path / "x", params={"bogus": 1})
        )
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(ExportError, match="not a preflab export"):
        export_project(engine, "demo", ExportOptions(format="raw", out=tmp_path / "busy"))
    assert sorted(EXPORT_FORMATS) == [
        "critiques",
        "openrlhf",
        "raw",
        "rlhf-2026.11",
        "rollouts",
        "to-label",
        "trl-kto",
        "trl-preference",
        "trl-reward",
        "trl-sft",
        "trl-sft-agent",
        "trl-stepwise",
        "verl",
    ]
    assert all(e.description for e in EXPORT_FORMATS.values())


# -- real data ------------------------------------------------------------------------------


DATA = Path(__file__).resolve().parents[1] / "data"  # excerpts of the public sets, see LICENSE-DATA


def converted(fmt: str, records):
    from preflab.io.formats import FORMATS, ConvertOptions, RecordError

    items, judgments = [], []
    for record in records:
        try:
            c = FORMATS[fmt].convert(record, ConvertOptions())
        except RecordError:  # PandaLM has a few boolean responses: not our concern here
            continue
        items += c.items
        judgments += c.judgments
    return items, judgments


def test_pandalm_three_raters_resolve_to_the_plurality(db_url, tmp_path):
    """PandaLM test set (Apache-2.0): 3 annotators per pair, 0 tie / 1 response1 / 2 response2."""
    records = json.loads((DATA / "pandalm-170.json").read_text())[:80]
    items, judgments = converted("pandalm", records)
    expected, reasons = [], {"tie": 0, "no-majority": 0}
    by_id = {i.id: i for i in items}
    for rec in records:
        item = by_id.get(f"pandalm-{rec['idx']}")
        if item is None:
            continue
        votes = [rec[f"annotator{n}"] for n in (1, 2, 3)]
        counts = sorted(((votes.count(v), v) for v in (0, 1, 2)), reverse=True)
        if counts[0][0] == counts[1][0]:
            reasons["no-majority"] += 1
        elif counts[0][1] == 0:
            reasons["tie"] += 1
        else:
            win = counts[0][1]
            expected.append(
                (item.candidates[win - 1].text, item.candidates[2 - win].text, counts[0][0] / 3)
            )
    engine = build(db_url, "pandalm", items=items, judgments=judgments)
    try:
        out, manifest = export(
            engine, tmp_path, "trl-reward", name="pandalm", file_format="parquet"
        )
        rows = read_rows(out, "parquet")
        assert [(r["chosen"], r["rejected"]) for r in rows] == [(c, r) for c, r, _ in expected]
        # PandaLM records no strength: no margin is invented (issue 15), the manifest says why
        assert all("margin" not in r for r in rows)
        assert manifest["format_notes"]["margin"]["written"] is False
        assert manifest["gates"]["aggregation"]["reasons"] == {
            k: v for k, v in reasons.items() if v
        }
        assert manifest["raters"] == {"in": 3, "out": 3}
        assert len(rows) > 60
    finally:
        engine.dispose()


def test_squality_rubric_grades_become_pairs(db_url, tmp_path):
    """SQuALITY human eval (CC BY): 3 workers grade each summary on 3 dimensions, 0-100."""
    from preflab.io.formats.shared_datasets import SQUALITY_RUBRIC

    records = [
        json.loads(line) for line in (DATA / "squality-sample.jsonl").read_text().splitlines()
    ]
    items, judgments = converted("squality", records)
    # independent reward: equal weights over 3 interval dimensions on [0, 100]; each worker who
    # graded both summaries votes for the one they graded higher; a strict plurality wins
    reward: dict[tuple[str, str, str], float] = {}
    for j in judgments:
        reward[(j.item_id, j.candidate_id, j.provenance.rater_id)] = sum(j.scores.values()) / 300
    workers = {w for _, _, w in reward}
    expected = []
    for item in items:
        ids = sorted({c for i, c, _ in reward if i == item.id})
        for k, a in enumerate(ids):
            for b in ids[k + 1 :]:
                votes = Counter()
                for w in workers:
                    if (item.id, a, w) in reward and (item.id, b, w) in reward:
                        d = reward[(item.id, a, w)] - reward[(item.id, b, w)]
                        votes[(d > 0) - (d < 0)] += 1
                (top, n), *rest = votes.most_common() or [(0, 0)]
                if top != 0 and not (rest and rest[0][1] == n):
                    expected.append((item.id, *((a, b) if top > 0 else (b, a))))
    engine = make_engine(db_url)
    Base.metadata.create_all(engine)
    with transaction(engine) as s:
        # SQuALITY's graders disagree (alpha 0.56-0.69): the floor is off, this checks grades -> pairs
        project = create_project(
            s, "squality", kinds=["rubric"], settings={"policy": {"min_alpha": 0}}
        )
        add_rubric(s, project, SQUALITY_RUBRIC)
        for item in items:
            add_item(s, project, item)
        for j in judgments:
            add_judgment(s, project, j)
    try:
        out, manifest = export(engine, tmp_path, "trl-preference", name="squality")
        rows = read_rows(out, "jsonl")
        texts = {(i.id, c.id): c.text for i in items for c in i.candidates}
        assert [(r["chosen"], r["rejected"]) for r in rows] == [
            (texts[(i, c)], texts[(i, r)]) for i, c, r in expected
        ]
        assert manifest["rubrics"][0]["id"] == "squality" and len(rows) >= 10
    finally:
        engine.dispose()


@pytest.mark.parametrize("file_format", ["jsonl", "parquet", "hf"])
def test_an_export_with_no_rows_is_still_a_valid_dataset(db_url, tmp_path, file_format):
    engine = build(db_url, "empty", items=demo_items()[:2], judgments=[])
    try:
        out, manifest = export(
            engine, tmp_path, "trl-reward", name="empty", file_format=file_format
        )
        assert read_rows(out, file_format) == [] and manifest["counts"]["rows_out"] == 0
        if file_format == "parquet":
            # no row, so no known strength: the margin column is left out (issue 15)
            assert pq.read_schema(out / "train.parquet").names == ["prompt", "chosen", "rejected"]
    finally:
        engine.dispose()


@pytest.mark.parametrize("file_format", ["jsonl", "parquet"])
@pytest.mark.parametrize("fmt", ["trl-sft", "trl-stepwise", "trl-preference"])
def test_the_card_of_an_empty_export_loads(sqlite_url, tmp_path, fmt, file_format):
    """Issue 31: an empty trl-sft / trl-stepwise export failed its card's own `load_dataset`
    line (datasets cannot read an empty file). The card's Loading block now builds the empty
    split from the features the manifest declares; it is run here as written."""
    import re

    engine = build(sqlite_url, "empty", items=demo_items()[:2], judgments=[])
    try:
        out, manifest = export(engine, tmp_path, fmt, name="empty", file_format=file_format)
    finally:
        engine.dispose()
    assert manifest["counts"]["rows_out"] == 0 and manifest["features"]
    card = (out / "README.md").read_text()
    code = re.search(r"## Loading\n\n```python\n(.*?)```", card, re.S).group(1)
    assert "load_dataset" not in code.replace("load_dataset cannot", "")
    scope: dict = {}
    exec(code.replace("path/to/export", str(out)), scope)  # the card's lines, as a user runs them
    ds = scope["ds"]
    assert len(ds) == 0 and list(ds.features) == list(manifest["schema"])
