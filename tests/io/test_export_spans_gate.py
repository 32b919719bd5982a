"""``policy.require_spans``, the DPO floor's critique spans (docs/critiques.md, docs/gates.md):
the pair exports keep a pair only when a label of its item marked a span on one of its two
answers, the drops counted in the manifest; the streamed and the in-memory paths write the same
bytes; off, the files are byte-identical to those of the same labels without spans."""

from __future__ import annotations

from pathlib import Path

import pytest

from preflab.io.export import ExportOptions, export_project, pipeline, stream
from preflab.schema import Item, parse_judgment
from preflab.store import db, repo, transaction

N = 8
SPANNED = {0, 3, 5}  # the items whose first rater marks a span (on the rejected answer of 5)


def build(url: str, name: str, *, require: bool, spans: bool = True):
    engine = db.open_db(url)
    policy = {"span_categories": ["factual_error"], "require_spans": require}
    with transaction(engine) as s:
        project = repo.create_project(s, name, kinds=["pairwise"], settings={"policy": policy})
        for i in range(N):
            repo.add_item(
                s,
                project,
                Item(
                    id=f"q{i}",
                    prompt=f"Question {i}?",
                    candidates=[
                        {"id": "a", "text": f"Answer A {i}."},
                        {"id": "b", "text": f"B {i}"},
                    ],
                ),
            )
            winner = "a" if i % 3 else "b"
            for rater in ("r1", "r2"):
                data = {
                    "kind": "pairwise", "item_id": f"q{i}", "shown_order": ["a", "b"],
                    "winner": winner, "strength": 2, "provenance": {"rater_id": rater},
                }  # fmt: skip
                if spans and rater == "r1" and i in SPANNED:
                    marked = "b" if winner == "a" else "a"
                    data["spans"] = [
                        {"candidate_id": marked, "start": 0, "end": 1, "category": "factual_error"}
                    ]
                repo.add_judgment(s, project, parse_judgment(data))
    return engine


def export(engine, name: str, out: Path, fmt: str = "trl-preference") -> dict:
    options = ExportOptions(format=fmt, out=out, force=True, length_gate=None)
    return export_project(engine, name, options)


def files(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


@pytest.fixture(autouse=True)
def _clock(frozen_clock):
    """Every test here compares files: the clock frozen for all (``conftest.py``)."""


@pytest.mark.postgres
@pytest.mark.parametrize("fmt", ["trl-preference", "trl-reward", "openrlhf"])
def test_pairs_without_a_span_are_dropped_alike_streamed_and_in_memory(
    db_url, tmp_path, monkeypatch, fmt
):
    engine = build(db_url, "req", require=True)
    monkeypatch.setattr(stream, "CHUNK_ITEMS", 3)
    streamed = export(engine, "req", tmp_path / "s" / "out", fmt)
    monkeypatch.setattr(pipeline, "streamable", lambda *a: False)
    in_memory = export(engine, "req", tmp_path / "m" / "out", fmt)
    assert files(tmp_path / "s" / "out") == files(tmp_path / "m" / "out")
    assert streamed == in_memory
    gate = streamed["gates"]["spans"]
    assert gate["required"] is True
    assert gate["dropped"] == N - len(SPANNED)
    assert gate["reasons"] == {"no-critique-span": N - len(SPANNED)}
    rows = (tmp_path / "s" / "out" / "train.jsonl").read_bytes().splitlines()
    assert len(rows) == len(SPANNED)
    engine.dispose()


@pytest.mark.postgres
def test_off_the_files_are_those_of_the_same_labels_without_spans(db_url, tmp_path):
    engine = build(db_url, "off", require=False)
    build(db_url, "plain", require=False, spans=False).dispose()
    m1 = export(engine, "off", tmp_path / "off")
    m2 = export(engine, "plain", tmp_path / "plain")
    assert "spans" not in m1["gates"]
    one, two = files(tmp_path / "off"), files(tmp_path / "plain")
    assert one["train.jsonl"] == two["train.jsonl"]
    assert len(one["train.jsonl"].splitlines()) == N
    assert m1["gates"] == m2["gates"] and m1["counts"] == m2["counts"]
    engine.dispose()
