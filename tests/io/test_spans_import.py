"""Critique spans through ``preflab import`` (docs/critiques.md): an offset past the end of its
answer is refused as ``file:line: spans.N.end: reason`` with nothing written (an item of the same
file, and a stored one); a raw export re-imports with the same spans, on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from preflab.io.export import ExportOptions, export_project
from preflab.io.importer import ImportFailed, import_files
from preflab.store import db, repo, transaction

from .test_critiques_export import SETTINGS, build

TEXT = "😀 **Lyon** is the capital."  # 26 code points, 27 UTF-16 units, 30 UTF-8 bytes


def write(path: Path, recs: list[dict]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    return path


def record(item_id: str, end: int, with_item: bool = True) -> dict:
    judgment = {
        "kind": "unary",
        "item_id": item_id,
        "candidate_id": "x",
        "label": False,
        "spans": [{"candidate_id": "x", "start": 2, "end": end, "category": "factual_error"}],
        "provenance": {"rater_id": "r1"},
    }
    if not with_item:
        return judgment
    item = {"id": item_id, "prompt": "Capital?", "candidates": [{"id": "x", "text": TEXT}]}
    return {**judgment, "item": item}


def counts(engine) -> tuple[int, int]:
    with transaction(engine) as s:
        project = repo.get_project(s, "p")
        entries = list(repo.iter_items_with_judgments(s, project))
        return len(entries), sum(len(e.judgments) for e in entries)


@pytest.mark.postgres
def test_a_span_past_the_answer_is_refused_and_nothing_is_written(db_url, tmp_path):
    engine = db.open_db(db_url)
    with transaction(engine) as s:
        repo.create_project(s, "p", kinds=["unary"], settings=SETTINGS)
    ok = write(tmp_path / "ok.jsonl", [record("q1", len(TEXT))])  # up to the last code point
    assert import_files(engine, "p", [ok]).judgments_added == 1
    # the same file's item, and a stored item (q1, judged again by another rater)
    again = record("q1", len(TEXT) + 1, with_item=False)
    again["provenance"] = {"rater_id": "r2"}
    bad = write(tmp_path / "bad.jsonl", [record("q2", 9), record("q3", 27), again])
    with pytest.raises(ImportFailed) as failed:
        import_files(engine, "p", [bad])
    lines = str(failed.value).splitlines()[1:]
    assert lines == [
        f"{bad}:2: spans.0.end: 27 is past the end of answer 'x' (26 characters); "
        "offsets count code points of the answer's text",
        f"{bad}:3: spans.0.end: 27 is past the end of answer 'x' (26 characters); "
        "offsets count code points of the answer's text",
    ]
    assert counts(engine) == (1, 1)  # nothing of the bad file
    engine.dispose()


@pytest.mark.postgres
def test_spans_round_trip_through_raw_export_and_import(db_url, tmp_path):
    engine = build(db_url)
    out = tmp_path / "raw"
    export_project(engine, "crit", ExportOptions(format="raw", out=out, include_ai=True))
    with transaction(engine) as s:
        repo.create_project(s, "again", kinds=["pairwise", "unary"], settings=SETTINGS)
    report = import_files(engine, "again", [out / "train.jsonl"])
    assert report.judgments_added == 5

    def spans(project: str) -> list[tuple[str, str, list[dict]]]:
        """(item, judgment kind, its spans) of every judgment, sorted: the raters' keys differ
        between the projects (the raw export names raters by their hash)."""
        with transaction(engine) as s:
            p = repo.get_project(s, project)
            rows = [
                (e.item.id, j.kind, [sp.model_dump() for sp in j.spans or []])
                for e in repo.iter_items_with_judgments(s, p)
                for j in e.judgments
            ]
        return sorted(rows, key=lambda r: (r[0], r[1], orjson.dumps(r[2])))

    assert spans("again") == spans("crit")
    assert sum(1 for *_, sp in spans("again") if sp) == 4
    again = tmp_path / "again"
    export_project(engine, "again", ExportOptions(format="raw", out=again, include_ai=True))
    assert (again / "train.jsonl").read_bytes() == (out / "train.jsonl").read_bytes()
    engine.dispose()
