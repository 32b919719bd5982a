"""No invented margins (issue 15 §1): a strength nobody gave stays unknown, end to end.

PandaLM, hh-rlhf (tests/data samples, licences in tests/data/LICENSE-DATA) and comparison
records without ``strength`` record only the winner. Before issue 15 the importer stored
strength 2 and every ``trl-reward`` / ``openrlhf`` margin was 2.0 (TRL's reward loss on such a
row is exactly log(1 + e²) = 2.127 at equal rewards): a constant that shifts the loss and says
nothing. Tulu-1's 5-level preference records strengths, and keeps them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from sqlalchemy import select

from preflab.io.export import ExportOptions, export_project
from preflab.io.export.resolve import PairVote, aggregate_pairwise
from preflab.io.importer import ImportOptions, import_files
from preflab.schema import PairwiseJudgment
from preflab.store import db, transaction
from preflab.store.models import ImportBatch, JudgmentRow
from preflab.store.repo import create_project
from preflab.store.rows import pair_rows, pairwise_rows

DATA = Path(__file__).resolve().parents[1] / "data"


def _project(db_url: str, name: str = "p", kinds: tuple[str, ...] = ("pairwise",)):
    engine = db.open_db(db_url)
    with transaction(engine) as s:
        create_project(s, name, kinds=list(kinds))
    return engine


def _pairwise_bodies(engine) -> list[dict]:
    with engine.connect() as conn:
        return list(
            conn.execute(select(JudgmentRow.body).where(JudgmentRow.kind == "pairwise")).scalars()
        )


def _jsonl(path: Path, *records: dict) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_a_judgment_without_strength_has_a_winner_and_no_strength_row():
    j = PairwiseJudgment(
        item_id="i", shown_order=("y", "x"), winner="a", provenance={"rater_id": "r"}
    )
    assert (j.strength, j.score, j.direction, j.chosen) == (None, None, 1, "y")
    assert [r.dimension for r in j.label_rows()] == [
        "winner"
    ]  # no made-up strength in the label table
    with pytest.raises(ValueError, match="tie has strength 0"):
        PairwiseJudgment(
            item_id="i", shown_order=("x", "y"), winner="tie", provenance={"rater_id": "r"}
        )


@pytest.mark.parametrize("source", ["pandalm-60.json", "hh-rlhf-sample.jsonl.gz"])
def test_sources_without_strength_are_stored_with_strength_unknown(db_url, source):
    engine = _project(db_url)
    import_files(engine, "p", [DATA / source], ImportOptions(skip_invalid=True))
    bodies = _pairwise_bodies(engine)
    assert bodies and all("strength" not in b for b in bodies if b["winner"] != "tie")
    assert all(b["strength"] == 0 for b in bodies if b["winner"] == "tie")
    engine.dispose()


def test_tulu_five_level_preference_keeps_its_strengths(sqlite_url):
    engine = _project(sqlite_url, kinds=("pairwise", "unary"))
    import_files(engine, "p", [DATA / "tulu1-sample.jsonl"], ImportOptions(skip_invalid=True))
    strengths = {b.get("strength") for b in _pairwise_bodies(engine)}
    assert None not in strengths and strengths <= {0, 1, 2} and strengths - {0}
    engine.dispose()


def test_the_fast_and_general_import_paths_store_the_same_unknown_strength():
    fast = pair_rows("Q?", "yes", "no", "r1", None, "human")
    general = pairwise_rows(fast.item_key, fast.shown_order, fast.winner, None, "r1", "human")
    assert (
        fast.judgment_rows().values == general.values and fast.content_hash == general.content_hash
    )
    assert json.loads(fast.body_json) == general.values["body"] and general.values["score"] is None


def test_the_median_strength_counts_known_strengths_only():
    def vote(rater, score):
        return PairVote("i", "a", "b", rater, "h" + rater, score, "pairwise", 0, (0, None, 0))

    inf = float("inf")
    [both] = aggregate_pairwise([vote("1", -3), vote("2", -inf), vote("3", -inf)])
    assert (both.chosen_id, both.strength, both.n_raters) == ("a", 3.0, 3)
    [unknown] = aggregate_pairwise([vote("1", inf), vote("2", inf)])
    assert (unknown.chosen_id, unknown.strength) == ("b", None)


def test_pandalm_reward_exports_carry_no_margin_and_say_why(sqlite_url, tmp_path):
    engine = _project(sqlite_url)
    import_files(engine, "p", [DATA / "pandalm-60.json"])
    for fmt in ("trl-reward", "openrlhf"):
        out = tmp_path / fmt
        manifest = export_project(
            # margins, not length: every pair, the gate (on by default) off
            engine,
            "p",
            ExportOptions(format=fmt, out=out, file_format="parquet", length_gate=None),
        )
        assert pq.read_schema(out / "train.parquet").names == ["prompt", "chosen", "rejected"]
        note = manifest["format_notes"]["margin"]
        assert (note["written"], note["rows_with_margin"]) == (False, 0) and note["rows"] > 30
        assert "no margin is invented" in note["why"]
        assert f"0 of {note['rows']} rows carry a real margin" in (out / "README.md").read_text()
    engine.dispose()


def test_a_mix_of_known_and_unknown_strengths(sqlite_url, tmp_path):
    engine = _project(sqlite_url)
    import_files(
        engine,
        "p",
        [
            _jsonl(
                tmp_path / "c.jsonl",
                {"prompt": "A?", "chosen": "a1", "rejected": "a2", "strength": 3},
                {"prompt": "B?", "chosen": "b1", "rejected": "b2"},
            )
        ],
    )
    # OpenRLHF reads a null margin as 0 (the plain loss): the real margin is kept, the other null
    # (margins, not length: the gate, on by default, is off here)
    out = tmp_path / "o"
    manifest = export_project(
        engine, "p", ExportOptions(format="openrlhf", out=out, length_gate=None)
    )
    rows = {
        r["prompt"]: r["margin"]
        for r in map(json.loads, (out / "train.jsonl").read_text().splitlines())
    }
    assert rows == {"A?": 3.0, "B?": None}
    assert manifest["format_notes"]["margin"]["rows_with_margin"] == 1
    # TRL's collator needs a margin on every row or none: the column is left out, and the manifest says why
    out = tmp_path / "t"
    manifest = export_project(
        engine, "p", ExportOptions(format="trl-reward", out=out, length_gate=None)
    )
    assert all(
        "margin" not in json.loads(line) for line in (out / "train.jsonl").read_text().splitlines()
    )
    assert (
        "TRL's RewardTrainer needs a margin on every row"
        in manifest["format_notes"]["margin"]["why"]
    )
    # issue 31: both cards count the same rows (the trl-reward card said 0 where openrlhf said 1)
    for card in (tmp_path / "o" / "README.md", out / "README.md"):
        assert "Margin: 1 of 2 rows carry a real margin" in card.read_text(), card
    engine.dispose()


def test_migration_0006_removes_the_old_default_from_sources_without_strength_only(
    sqlite_url, tmp_path
):
    engine = _project(sqlite_url)
    import_files(engine, "p", [DATA / "pandalm-60.json"])
    import_files(
        engine,
        "p",
        [
            _jsonl(
                tmp_path / "c.jsonl",
                {"prompt": "A?", "chosen": "a1", "rejected": "a2", "strength": 2},
            )
        ],
    )
    with engine.connect() as conn:
        before = dict(conn.execute(select(JudgmentRow.pk, JudgmentRow.content_hash)).all())
    db.downgrade(engine, "0006_item_skips")  # the stored form of before issue 15: strength 2
    bodies = _pairwise_bodies(engine)
    assert {b["strength"] for b in bodies if b["winner"] != "tie"} == {2}
    db.upgrade(engine)
    with engine.connect() as conn:
        after = dict(conn.execute(select(JudgmentRow.pk, JudgmentRow.content_hash)).all())
        explicit = conn.execute(
            select(JudgmentRow.body, JudgmentRow.score)
            .join(ImportBatch)
            .where(ImportBatch.format == "comparison")
        ).one()
    assert after == before  # the hashes the importer gives these judgments today
    assert explicit.body["strength"] == 2 and abs(explicit.score) == 2  # said by the record: kept
    unknown = [b for b in _pairwise_bodies(engine) if "strength" not in b]
    assert len(unknown) == len(bodies) - 1 - sum(
        b["winner"] == "tie" for b in bodies
    )  # every PandaLM non-tie
    engine.dispose()
