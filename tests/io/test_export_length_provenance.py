"""Issue 16 §1, §3, §4: token-length parity on by default (per cohort), the token-ratio
verbosity penalty on every margin, sources and provenance columns, the guideline version a rater
saw, and gold accuracy with every delivery."""

from __future__ import annotations

import math

import orjson
import pytest
from typer.testing import CliRunner

from preflab.cli import app
from preflab.io.export import ExportOptions, export_project
from preflab.io.export.length_gate import VerbosityPenalty
from preflab.quality.bias import default_token_length
from preflab.schema import Item, PairwiseJudgment, UnaryJudgment
from preflab.store import make_engine, transaction
from preflab.store.db import upgrade
from preflab.store.repo import add_item, add_judgment, create_project

NO_FLOOR = {"min_alpha": 0}


def pw(item, winner, rater, strength=3, **prov):
    return PairwiseJudgment(
        item_id=item,
        shown_order=("a", "b"),
        winner=winner,
        strength=strength,
        provenance={"rater_id": rater, **prov},
    )


def item(iid, a, b, **kw):
    return Item(
        id=iid,
        prompt=f"Question {iid}?",
        candidates=[{"id": "a", "text": a}, {"id": "b", "text": b}],
        **kw,
    )


def project(db_url, items, judgments, policy=None, name="p"):
    engine = make_engine(db_url)
    upgrade(engine)  # the migrations, as the CLI expects (0010 included)
    with transaction(engine) as s:
        proj = create_project(
            s,
            name,
            kinds=["pairwise", "unary"],
            settings={"policy": {**NO_FLOOR, **(policy or {})}},
        )
        for it in items:
            add_item(s, proj, it)
        for j in judgments:
            add_judgment(s, proj, j)
    return engine


def rows(out):
    return [orjson.loads(line) for line in (out / "train.jsonl").read_bytes().splitlines()]


# one word each, but "internationalization" is several WordPiece tokens: words call the pair
# equal, tokens do not
WORDY = ("internationalization", "cat")


def test_length_gate_is_on_by_default_and_measures_tokens(db_url, tmp_path):
    count = default_token_length()
    assert count(WORDY[0]) / count(WORDY[1]) > 1.2  # the premise: unequal in tokens
    engine = project(
        db_url,
        [item("even", "the cat sat", "a dog ran"), item("long", *WORDY)],
        [pw("even", "a", "r1"), pw("long", "a", "r1")],
    )
    manifest = export_project(
        engine, "p", ExportOptions(format="trl-preference", out=tmp_path / "o")
    )
    gate = manifest["gates"]["length_parity"]
    assert gate["enabled"] and gate["bounds"] == [0.85, 1.2]
    assert gate["dropped"] == 1 and gate["reasons"] == {"chosen_too_long": 1}
    # by name and hash, never by a path on this machine
    assert gate["length"].startswith("tokens of all-MiniLM-L6-v2 tokenizer.json")
    assert "sha256:" in gate["length"] and "/" not in gate["length"]
    assert [r["chosen"] for r in rows(tmp_path / "o")] == ["the cat sat"]
    card = (tmp_path / "o" / "README.md").read_text()
    assert "Length-parity gate: keep pairs with 0.85 <= len(chosen)/len(rejected) <= 1.2" in card

    # in words the same pair passes: the unit matters
    words = export_project(
        engine, "p", ExportOptions(format="trl-preference", out=tmp_path / "w", length_unit="words")
    )
    assert words["gates"]["length_parity"]["dropped"] == 0


def test_no_length_gate_turns_it_off_from_the_cli(db_url, tmp_path):
    project(db_url, [item("long", *WORDY)], [pw("long", "a", "r1")])
    args = ["export", "p", "-f", "trl-preference", "--db", db_url, "--json"]
    on = CliRunner().invoke(app, [*args, "-o", str(tmp_path / "on")])
    off = CliRunner().invoke(app, [*args, "-o", str(tmp_path / "off"), "--no-length-gate"])
    assert on.exit_code == 0 and off.exit_code == 0, on.output + off.output
    assert orjson.loads(on.stdout)["counts"]["rows_out"] == 0
    manifest = orjson.loads(off.stdout)
    assert manifest["counts"]["rows_out"] == 1
    assert manifest["gates"]["length_parity"]["enabled"] is False
    assert "Length-parity gate: off" in (tmp_path / "off" / "README.md").read_text()
    both = CliRunner().invoke(
        app, [*args, "-o", str(tmp_path / "x"), "--no-length-gate", "--length-gate", "0.9:1.1"]
    )
    assert both.exit_code == 2 and "give one of them" in both.output
    unit = CliRunner().invoke(app, [*args, "-o", str(tmp_path / "u"), "--length-unit", "lines"])
    assert unit.exit_code == 2 and "length unit 'lines': choose tokens" in unit.output


def test_parity_and_drops_are_reported_per_domain_cohort(db_url, tmp_path):
    items = [
        item("m1", "two plus two is four", "it is four", domains=["math"]),
        item("m2", "nine times nine is eighty one", "eighty one", domains=["math"]),
        item("g1", "Paris", "Lyon", domains=["geography"]),
    ]
    engine = project(db_url, items, [pw(i.id, "a", "r1") for i in items])
    manifest = export_project(
        engine, "p", ExportOptions(format="trl-preference", out=tmp_path / "o")
    )
    cohorts = manifest["gates"]["length_parity"]["cohorts"]
    assert cohorts["by"] == "domain"
    math_, geo = cohorts["cohorts"]["math"], cohorts["cohorts"]["geography"]
    # the gate removed every math pair (chosen much longer) and kept geography's
    assert (math_["pairs"], math_["dropped"], math_["removed_wholesale"]) == (2, 2, True)
    assert (geo["pairs"], geo["dropped"], geo["parity_share"]) == (1, 0, 1.0)
    assert math_["median_ratio_before"] > 1.2 and math_["median_ratio_after"] is None
    assert "| math (all dropped) | 2 | 2 | 0.0 |" in (tmp_path / "o" / "README.md").read_text()


def test_a_difficulty_field_makes_the_cohorts(db_url, tmp_path):
    items = [
        item("e", "Paris", "Lyon", domains=["geography"], metadata={"difficulty": "easy"}),
        item(
            "h",
            "the answer is Paris",
            "Lyon",
            domains=["geography"],
            metadata={"difficulty": "hard"},
        ),
    ]
    engine = project(db_url, items, [pw(i.id, "a", "r1") for i in items])
    manifest = export_project(
        engine, "p", ExportOptions(format="trl-preference", out=tmp_path / "o")
    )
    cohorts = manifest["gates"]["length_parity"]["cohorts"]
    assert cohorts["by"] == "difficulty"
    assert cohorts["cohorts"]["hard"]["removed_wholesale"]
    assert cohorts["cohorts"]["easy"]["kept"] == 1


def test_verbosity_penalty_is_a_capped_function_of_the_log_ratio():
    penalty = VerbosityPenalty()  # the documented defaults
    assert penalty(1.0) == 0.0 and penalty(0.5) == 0.0  # a shorter chosen answer costs nothing
    assert penalty(math.e) == pytest.approx(1.0)
    assert penalty(1.2) == pytest.approx(math.log(1.2))
    assert penalty(100.0) == 1.0  # capped: never outweighs the raters' verdict
    assert VerbosityPenalty(free_ratio=1.2)(1.2) == 0.0


def test_the_penalty_is_subtracted_from_every_pairwise_margin(db_url, tmp_path):
    count = default_token_length()
    a, b = "a long and winding answer about the sky", "the sky"
    ratio = count(a) / count(b)
    engine = project(db_url, [item("q", a, b)], [pw("q", "a", "r1", strength=3)])
    manifest = export_project(
        engine, "p", ExportOptions(format="trl-reward", out=tmp_path / "o", length_gate=None)
    )
    # a pairwise label, not a rubric grade: the penalty applies all the same
    (row,) = rows(tmp_path / "o")
    assert row["margin"] == pytest.approx(3 - min(1.0, math.log(ratio)))
    assert manifest["verbosity_penalty"]["pairs_penalized"] == 1
    assert "Verbosity penalty subtracted from margins" in (tmp_path / "o" / "README.md").read_text()

    # a project may set its own (0: off); an unknown key is an error that names it
    off = project(
        db_url,
        [item("q", a, b)],
        [pw("q", "a", "r1")],
        {"verbosity_penalty": {"per_log_ratio": 0}},
        "p2",
    )
    export_project(
        off, "p2", ExportOptions(format="trl-reward", out=tmp_path / "x", length_gate=None)
    )
    assert rows(tmp_path / "x")[0]["margin"] == 3
    bad = project(
        db_url, [item("q", a, b)], [pw("q", "a", "r1")], {"verbosity_penalty": {"slope": 1}}, "p3"
    )
    with pytest.raises(Exception, match="verbosity_penalty: unknown key 'slope'"):
        export_project(
            bad, "p3", ExportOptions(format="trl-reward", out=tmp_path / "y", length_gate=None)
        )


def test_every_row_says_its_source_when_ai_labels_are_included(db_url, tmp_path):
    items = [item("h", "Paris", "Lyon"), item("m", "Rome", "Pisa")]
    judgments = [pw("h", "a", "r1"), pw("m", "a", "r1", source="ai_assisted"), pw("m", "a", "r2")]
    engine = project(db_url, items, judgments)
    export_project(engine, "p", ExportOptions(format="trl-preference", out=tmp_path / "o"))
    assert [r["source"] for r in rows(tmp_path / "o")] == ["human", "ai_assisted+human"]
    # KTO rows too (each pair gives a chosen and a rejected row), with provenance columns
    export_project(
        engine,
        "p",
        ExportOptions(format="trl-kto", out=tmp_path / "k", provenance_columns=True),
    )
    kto = rows(tmp_path / "k")
    assert [r["source"] for r in kto] == [
        "human",
        "human",
        "ai_assisted+human",
        "ai_assisted+human",
    ]
    assert [len(r["rater_hash"]) for r in kto] == [1, 1, 2, 2]
    # all human: no source column
    human = project(db_url, items, [pw("h", "a", "r1")], name="h")
    export_project(human, "h", ExportOptions(format="trl-preference", out=tmp_path / "h"))
    assert "source" not in rows(tmp_path / "h")[0]


def test_provenance_columns_carry_rater_hash_rubric_and_guideline_version(db_url, tmp_path):
    judgments = [pw("q", "a", "r1", guideline_version=2), pw("q", "a", "r2", guideline_version=3)]
    engine = project(db_url, [item("q", "Paris", "Lyon")], judgments)
    manifest = export_project(
        engine,
        "p",
        ExportOptions(format="trl-preference", out=tmp_path / "o", provenance_columns=True),
    )
    (row,) = rows(tmp_path / "o")
    assert row["guideline_version"] == [2, 3]
    assert len(row["rater_hash"]) == 2 and all(
        h.startswith("hmac_sha256:") for h in row["rater_hash"]
    )
    assert row["rubric_version"] == []
    assert manifest["schema"]["guideline_version"] == "list<item: int64>"


def test_gold_accuracy_is_in_the_manifest_and_the_card(db_url, tmp_path):
    gold_item = item(
        "g",
        "Paris",
        "Lyon",
        gold={
            "judgment": {
                "kind": "pairwise",
                "shown_order": ["a", "b"],
                "winner": "a",
                "strength": 3,
            }
        },
    )
    judgments = [
        pw("g", "a", "r1"),
        pw("g", "a", "r2"),
        pw("g", "b", "r3"),
        pw("g", "a", "r4"),
        pw("q", "a", "r1"),
    ]
    engine = project(db_url, [gold_item, item("q", "Rome", "Pisa")], judgments)
    manifest = export_project(
        engine, "p", ExportOptions(format="trl-preference", out=tmp_path / "o")
    )
    gold = manifest["gold_accuracy"]
    assert (gold["correct"], gold["n"], gold["accuracy"]) == (3, 4, 0.75)
    assert gold["raters_graded"] == 4 and gold["raters_below_0.8"] == 1
    # Wilson 95% interval of 3/4 (statsmodels proportion_confint(3, 4, method="wilson"))
    assert (gold["low"], gold["high"]) == pytest.approx((0.3006, 0.9544), abs=1e-4)
    assert "gold (honeypot) accuracy: 0.750" in (tmp_path / "o" / "README.md").read_text()


def test_unary_labels_still_export_without_a_pair_length(db_url, tmp_path):
    engine = project(
        db_url,
        [item("u", "Paris", "Lyon")],
        [UnaryJudgment(item_id="u", candidate_id="a", label=True, provenance={"rater_id": "r1"})],
    )
    manifest = export_project(engine, "p", ExportOptions(format="trl-kto", out=tmp_path / "o"))
    assert manifest["counts"]["rows_out"] == 1


def test_sft_and_stepwise_rows_say_their_source_and_provenance(db_url, tmp_path):
    from preflab.schema import DemonstrationJudgment, StepsJudgment

    engine = make_engine(db_url)
    upgrade(engine)
    with transaction(engine) as s:
        proj = create_project(
            s, "d", kinds=["demonstration", "steps"], settings={"policy": NO_FLOOR}
        )
        add_item(s, proj, Item(id="m", prompt="3*4+1?", candidates=[{"id": "c", "text": "13"}]))
        for j in (
            DemonstrationJudgment(
                item_id="m",
                text="3*4 = 12, 12+1 = 13",
                status="accepted",
                provenance={"rater_id": "e1", "guideline_version": 4},
            ),
            DemonstrationJudgment(
                item_id="m",
                text="13",
                status="accepted",
                provenance={"rater_id": "e2", "source": "ai_assisted"},
            ),
            StepsJudgment(
                item_id="m",
                candidate_id="c",
                steps=["3*4=12", "12+1=13"],
                verdicts=[1, 1],
                provenance={"rater_id": "e1", "guideline_version": 4},
            ),
        ):
            add_judgment(s, proj, j)
    for fmt in ("trl-sft", "trl-stepwise"):
        export_project(
            engine, "d", ExportOptions(format=fmt, out=tmp_path / fmt, provenance_columns=True)
        )
    sft = rows(tmp_path / "trl-sft")
    assert [r["source"] for r in sft] == ["human", "ai_assisted"]
    assert [r["guideline_version"] for r in sft] == [[4], []]
    (step,) = rows(tmp_path / "trl-stepwise")
    assert step["source"] == "human" and step["guideline_version"] == [4]
    assert len(step["rater_hash"]) == 1
