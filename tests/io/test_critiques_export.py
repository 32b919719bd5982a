"""The ``critiques`` export (docs/critiques.md) on SQLite and PostgreSQL: one row per rater and
answer with spans, offsets that index the answer column, the AI gate, and ``datasets`` loading
(an empty export too, from the declared features)."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest

from preflab.io.export import ExportOptions, export_project
from preflab.schema import Item, parse_judgment
from preflab.store import db, repo, transaction

SETTINGS = {"policy": {"span_categories": ["factual_error", "unsafe", "style"]}}
ITEMS = [
    Item(
        id="q1",
        prompt="Capital of France?",
        candidates=[
            {"id": "a", "text": "Paris 🙂 is the capital."},
            {"id": "b", "messages": [{"role": "assistant", "content": "Lyon, café."}]},
        ],
    ),
    Item(id="q2", prompt="2+2?", candidates=[{"id": "x", "text": "5"}]),
]


def span(cand: str, start: int, end: int, category: str = "factual_error", note: str = "") -> dict:
    return {"candidate_id": cand, "start": start, "end": end, "category": category, "note": note}


def judgment(item: str, body: dict, rater: str, spans: list[dict] | None, source: str = "human"):
    data = {**body, "item_id": item, "provenance": {"rater_id": rater, "source": source}}
    if spans is not None:
        data["spans"] = spans
    return parse_judgment(data)


PAIR = {"kind": "pairwise", "shown_order": ["a", "b"], "winner": "a", "strength": 2}
THUMB = {"kind": "unary", "candidate_id": "x", "label": False}


def build(url: str, with_judgments: bool = True):
    engine = db.open_db(url)
    with transaction(engine) as s:
        project = repo.create_project(s, "crit", kinds=["pairwise", "unary"], settings=SETTINGS)
        for item in ITEMS:
            repo.add_item(s, project, item)
        if with_judgments:
            for j in (
                judgment(
                    "q1", PAIR, "r1", [span("b", 0, 4, note="Paris"), span("a", 6, 7, "style")]
                ),
                judgment("q1", PAIR, "r2", [span("b", 0, 11)]),
                judgment("q1", PAIR, "r3", None),  # no spans: no row
                judgment("q1", PAIR, "judge-1", [span("b", 6, 10, "unsafe")], source="ai"),
                judgment("q2", THUMB, "r1", [span("x", 0, 1, note="2+2 is 4")]),
            ):
                repo.add_judgment(s, project, j)
    return engine


def export(engine, out: Path, **kw) -> dict:
    return export_project(engine, "crit", ExportOptions(format="critiques", out=out, **kw))


def lines(out: Path) -> list[dict]:
    return [orjson.loads(line) for line in (out / "train.jsonl").read_bytes().splitlines()]


def hashes(engine) -> dict[str, str]:
    with transaction(engine) as s:
        project = repo.get_project(s, "crit")
        return {
            j.provenance.rater_id: j.provenance.rater_hash or ""
            for e in repo.iter_items_with_judgments(s, project)
            for j in e.judgments
        }


def test_one_row_per_rater_and_answer_with_offsets_into_the_answer(db_url, tmp_path):
    engine = build(db_url)
    try:
        manifest = export(engine, tmp_path / "c")
        rows = lines(tmp_path / "c")
        h = hashes(engine)
    finally:
        engine.dispose()
    assert manifest["counts"]["rows_out"] == len(rows) == 4
    got = sorted(
        (r["item_id"], r["candidate_id"], r["rater_hash"], r["source"], r["kind"]) for r in rows
    )
    assert got == sorted(
        [
            ("q1", "a", h["r1"], "human", "pairwise"),
            ("q1", "b", h["r1"], "human", "pairwise"),
            ("q1", "b", h["r2"], "human", "pairwise"),
            ("q2", "x", h["r1"], "human", "unary"),
        ]
    )
    marked = sorted(
        (r["candidate_id"], r["answer"][s["start"] : s["end"]], s["category"], s["note"])
        for r in rows
        for s in r["spans"]
    )
    assert marked == [
        ("a", "🙂", "style", ""),
        ("b", "Lyon", "factual_error", "Paris"),
        ("b", "Lyon, café.", "factual_error", ""),
        ("x", "5", "factual_error", "2+2 is 4"),
    ]
    prompts = {r["item_id"]: r["prompt"] for r in rows}
    assert prompts == {"q1": "Capital of France?", "q2": "2+2?"}
    assert not any("rater_id" in r for r in rows)  # raters only as their hash


def test_ai_critiques_only_with_include_ai(db_url, tmp_path):
    engine = build(db_url)
    try:
        export(engine, tmp_path / "ai", include_ai=True)
        rows = lines(tmp_path / "ai")
    finally:
        engine.dispose()
    ai = [r for r in rows if r["source"] == "ai"]
    assert len(rows) == 5 and len(ai) == 1
    assert [ai[0]["answer"][s["start"] : s["end"]] for s in ai[0]["spans"]] == ["café"]


def test_the_export_loads_with_datasets_in_jsonl_and_parquet(sqlite_url, tmp_path):
    import datasets

    engine = build(sqlite_url)
    try:
        export(engine, tmp_path / "j")
        export(engine, tmp_path / "p", file_format="parquet")
    finally:
        engine.dispose()
    ds = datasets.load_dataset(
        "json", data_files=str(tmp_path / "j" / "train.jsonl"), split="train"
    )
    assert ds.num_rows == 4 and set(ds[0]["spans"][0]) == {"start", "end", "category", "note"}
    assert sorted(ds["candidate_id"]) == ["a", "b", "b", "x"]
    table = pq.read_table(tmp_path / "p" / "train.parquet")
    assert table.num_rows == 4 and table.schema.field("spans").type.value_type.num_fields == 4


@pytest.mark.parametrize("file_format", ["jsonl", "parquet"])
def test_an_empty_export_loads_from_its_card(sqlite_url, tmp_path, file_format):
    engine = build(sqlite_url, with_judgments=False)
    try:
        manifest = export(engine, tmp_path / "e", file_format=file_format)
    finally:
        engine.dispose()
    assert manifest["counts"]["rows_out"] == 0 and manifest["features"]
    card = (tmp_path / "e" / "README.md").read_text()
    code = re.search(r"## Loading\n\n```python\n(.*?)```", card, re.S).group(1)
    scope: dict = {}
    exec(code.replace("path/to/export", str(tmp_path / "e")), scope)  # the card's own lines
    ds = scope["ds"]
    assert len(ds) == 0 and list(ds.features) == [
        "item_id",
        "candidate_id",
        "kind",
        "rater_hash",
        "source",
        "prompt",
        "answer",
        "spans",
    ]
