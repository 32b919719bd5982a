"""Counts and provenance in the manifest (issue 28 section 7, second part): labels of pairs that
``--drop-disagreement`` drops are not ``judgments_used``; a demonstration accepted by the file it
was imported from says so (``accepted_by: import``); KTO completions marked both desirable and
undesirable are counted and dropped by default (``--kto-conflicts drop|keep``)."""

from __future__ import annotations

import orjson
import pytest
from typer.testing import CliRunner

from preflab.cli import app
from preflab.io.export import ExportError, ExportOptions, export_project
from preflab.io.importer import import_files
from preflab.schema import Item, PairwiseJudgment, UnaryJudgment
from preflab.store import db, repo, transaction

ALL = ("pairwise", "ranking", "rubric", "unary", "demonstration")


@pytest.fixture
def engine(db_url):
    engine = db.open_db(db_url)
    with transaction(engine) as s:
        repo.create_project(s, "p", kinds=ALL)
    yield engine
    engine.dispose()


def add(engine, item: Item, *judgments) -> None:
    with transaction(engine) as s:
        p = repo.get_project(s, "p")
        repo.add_item(s, p, item)
        for j in judgments:
            repo.add_judgment(s, p, j)


def pw(item: str, rater: str, winner: str, order=("x", "y")) -> PairwiseJudgment:
    return PairwiseJudgment(
        item_id=item,
        shown_order=order,
        winner=winner,
        strength=2,
        provenance={"rater_id": rater},
    )


def two(item_id: str, prompt: str, ids=("x", "y")) -> Item:
    return Item(
        id=item_id,
        prompt=prompt,
        candidates=[{"id": c, "text": f"{prompt} answer {c}."} for c in ids],
    )


def export(engine, tmp_path, fmt: str, sub: str, **kw) -> tuple[list[dict], dict]:
    out = tmp_path / sub
    manifest = export_project(
        engine, "p", ExportOptions(format=fmt, out=out, length_gate=None, force=True, **kw)
    )
    rows = [orjson.loads(x) for x in (out / "train.jsonl").read_bytes().splitlines()]
    return rows, manifest


def test_labels_of_pairs_dropped_for_disagreement_are_not_used(engine, tmp_path):
    add(
        engine,
        two("split", "Split?"),
        pw("split", "r1", "a"),
        pw("split", "r2", "a"),
        pw("split", "r3", "b"),
    )
    add(engine, two("clear", "Clear?"), pw("clear", "r1", "a"), pw("clear", "r2", "a"))
    rows, manifest = export(engine, tmp_path, "trl-preference", "d", drop_disagreement=0.75)
    assert [r["prompt"] for r in rows] == ["Clear?"]
    counts = manifest["counts"]
    assert manifest["gates"]["disagreement"]["dropped"] == 1
    # before: 5 used (the three labels of the dropped pair counted)
    assert (counts["judgments_in"], counts["judgments_used"]) == (5, 2)
    assert counts["judgments_used_by_kind"] == {"pairwise": 2}
    assert counts["judgments_used_by_source"] == {"human": 2}
    _, kept = export(engine, tmp_path, "trl-preference", "all")
    assert kept["counts"]["judgments_used"] == 5


def test_a_ranking_that_still_reaches_a_row_stays_used(engine, tmp_path):
    from preflab.schema import RankingJudgment

    item = two("three", "Three?", ids=("x", "y", "z"))
    add(
        engine,
        item,
        # x-y split 2:1 (dropped at 0.75); x > z and y > z unanimous (kept)
        RankingJudgment(
            item_id="three", order=[["x"], ["y"], ["z"]], provenance={"rater_id": "r1"}
        ),
        RankingJudgment(
            item_id="three", order=[["x"], ["y"], ["z"]], provenance={"rater_id": "r2"}
        ),
        RankingJudgment(
            item_id="three", order=[["y"], ["x"], ["z"]], provenance={"rater_id": "r3"}
        ),
    )
    rows, manifest = export(engine, tmp_path, "trl-preference", "r", drop_disagreement=0.75)
    assert len(rows) == 2 and manifest["counts"]["judgments_used"] == 3


def test_a_demonstration_accepted_by_its_file_says_so(engine, tmp_path):
    path = tmp_path / "demos.jsonl"
    add(engine, two("d1", "Write a haiku."))
    add(engine, two("d2", "Write a limerick."))
    records = [
        {
            "kind": "demonstration",
            "item_id": "d1",
            "text": "Old pond, a frog jumps.",
            "status": "accepted",
            "provenance": {"rater_id": "writer"},
        },
        {
            "kind": "demonstration",
            "item_id": "d2",
            "text": "There once was a rater.",
            "status": "accepted",
            "reviewed_by": "lead",
            "provenance": {"rater_id": "writer"},
        },
    ]
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    import_files(engine, "p", [path])
    rows, manifest = export(engine, tmp_path, "trl-sft", "sft")
    assert len(rows) == 2
    # before: nothing said that no reviewer accepted d1
    assert manifest["format_notes"]["accepted_by"] == {"reviewer": 1, "import": 1}
    card = (tmp_path / "sft" / "README.md").read_text()
    assert "1 of 2 demonstrations were accepted by the file they were imported from" in card
    assert "`accepted_by: import`" in card


def kto_project(engine) -> None:
    # a > b > c: b is chosen against c and rejected against a
    add(
        engine,
        two("abc", "Rank?", ids=("a", "b", "c")),
        pw("abc", "r1", "a", ("a", "b")),
        pw("abc", "r1", "a", ("b", "c")),
        pw("abc", "r1", "a", ("a", "c")),
    )
    # a thumbs-up answer that lost a comparison
    add(
        engine,
        two("th", "Thumb?"),
        UnaryJudgment(item_id="th", candidate_id="x", label=True, provenance={"rater_id": "r1"}),
        pw("th", "r2", "b"),
    )


def test_kto_completions_marked_both_ways_are_counted_and_dropped_by_default(engine, tmp_path):
    kto_project(engine)
    rows, manifest = export(engine, tmp_path, "trl-kto", "kto")
    completions = [(r["prompt"], r["completion"], r["label"]) for r in rows]
    # before: ("Rank?", b, True) and ("Rank?", b, False) both written, and x True and False
    assert sorted(completions) == [
        ("Rank?", "Rank? answer a.", True),
        ("Rank?", "Rank? answer a.", True),
        ("Rank?", "Rank? answer c.", False),
        ("Rank?", "Rank? answer c.", False),
        ("Thumb?", "Thumb? answer y.", True),
    ]
    assert manifest["format_notes"]["kto_conflicts"] == {
        "completions": 2,
        "rows": 4,
        "mode": "drop",
    }
    assert manifest["gates"]["kto_conflict"]["dropped"] == 4
    kept_rows, kept = export(engine, tmp_path, "trl-kto", "keep", params={"kto_conflicts": "keep"})
    assert len(kept_rows) == 9
    assert kept["format_notes"]["kto_conflicts"] == {"completions": 2, "rows": 4, "mode": "keep"}
    with pytest.raises(ExportError, match="--kto-conflicts 'maybe'"):
        export(engine, tmp_path, "trl-kto", "bad", params={"kto_conflicts": "maybe"})


def test_kto_conflicts_on_the_command_line(engine, tmp_path, db_url):
    kto_project(engine)
    runner = CliRunner()
    args = ["export", "p", "--format", "trl-kto", "--no-length-gate", "--force", "--db", db_url]
    result = runner.invoke(
        app, [*args, "--out", str(tmp_path / "k"), "--kto-conflicts", "keep", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert '"mode": "keep"' in result.output
    bad = runner.invoke(app, [*args, "--out", str(tmp_path / "b"), "--kto-conflicts", "nope"])
    assert bad.exit_code == 2 and "--kto-conflicts 'nope'" in bad.output
