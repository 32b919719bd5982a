"""AI assistance in exports (issue 30 item 3): a label made with a suggestion in view is
``ai_assisted`` in every export's ``source`` column and keeps ``provenance.assisted_by`` in the
raw export (and through a re-import); ``--include-ai`` rules are unchanged (the judge's own
``ai`` labels stay out unless asked for; ``ai_assisted`` labels are kept by default)."""

from __future__ import annotations

import orjson
import pytest

from preflab.io.export import ExportOptions, export_project
from preflab.io.importer import import_files
from preflab.schema import Item, PairwiseJudgment
from preflab.store import db, repo, transaction
from preflab.store.models import JudgmentRow

JUDGE = "m1"


@pytest.fixture
def engine(db_url):
    engine = db.open_db(db_url)
    with transaction(engine) as s:
        repo.create_project(s, "p", kinds=["pairwise"])
        repo.create_project(s, "again", kinds=["pairwise"])
    yield engine
    engine.dispose()


def two(item_id: str) -> Item:
    return Item(
        id=item_id,
        prompt=f"{item_id}?",
        candidates=[{"id": c, "text": f"{item_id} answer {c}."} for c in ("x", "y")],
    )


def pw(item: str, rater: str, winner: str, **prov) -> PairwiseJudgment:
    return PairwiseJudgment(
        item_id=item,
        shown_order=("x", "y"),
        winner=winner,
        strength=2,
        provenance={"rater_id": rater, **prov},
    )


def assisted(item: str, rater: str, judge_pk: int) -> PairwiseJudgment:
    record = {"origin": "judge", "content_hash": "c" * 64, "judgment_id": judge_pk, "judge": JUDGE}
    return pw(item, rater, "a", source="ai_assisted", assisted_by=[record])


def fill(engine) -> None:
    with transaction(engine) as s:
        p = repo.get_project(s, "p")
        assert p is not None
        for item in ("helped", "alone"):
            repo.add_item(s, p, two(item))
        judge_row, _ = repo.add_judgment(s, p, pw("helped", f"judge:{JUDGE}", "a", source="ai"))
        repo.add_judgment(s, p, assisted("helped", "r1", judge_row.pk))
        repo.add_judgment(s, p, pw("alone", "r2", "b"))


def export(engine, tmp_path, fmt: str, sub: str, **kw) -> list[dict]:
    out = tmp_path / sub
    export_project(
        engine, "p", ExportOptions(format=fmt, out=out, length_gate=None, force=True, **kw)
    )
    return [orjson.loads(x) for x in (out / "train.jsonl").read_bytes().splitlines()]


def test_assisted_labels_say_so_in_the_source_column(engine, tmp_path):
    fill(engine)
    for fmt in ("trl-preference", "trl-reward", "openrlhf"):
        rows = export(engine, tmp_path, fmt, fmt)
        by_prompt = {str(r.get("prompt")): r["source"] for r in rows}
        assert sorted(by_prompt.values()) == ["ai_assisted", "human"], (fmt, rows)


def test_include_ai_rules_are_unchanged(engine, tmp_path):
    fill(engine)
    default = export(engine, tmp_path, "trl-preference", "default")
    assert "ai" not in {r["source"] for r in default}, "the judge's own label stays out"
    with_ai = export(engine, tmp_path, "trl-preference", "with-ai", include_ai=True)
    assert {r["source"] for r in with_ai} == {"ai+ai_assisted", "human"}


def test_the_raw_export_carries_assisted_by_and_a_reimport_keeps_it(engine, tmp_path):
    fill(engine)
    rows = export(engine, tmp_path, "raw", "raw")
    labels = [j for r in rows for j in r["judgments"]] if "judgments" in rows[0] else rows
    mine = [j for j in labels if j["provenance"]["source"] == "ai_assisted"]
    assert len(mine) == 1
    (record,) = mine[0]["provenance"]["assisted_by"]
    assert record["origin"] == "judge" and record["judge"] == JUDGE
    unassisted = [j for j in labels if j["provenance"]["source"] == "human"]
    assert unassisted and all("assisted_by" not in j["provenance"] for j in unassisted)
    import_files(engine, "again", [tmp_path / "raw" / "train.jsonl"])
    with transaction(engine) as s:
        again = repo.get_project(s, "again")
        assert again is not None
        stored = [
            (j.source, j.assisted_by)
            for j in s.query(JudgmentRow).filter(JudgmentRow.project_pk == again.pk)
        ]
    assert ("ai_assisted", [record]) in stored
