"""``quality report`` grades raters on imported gold (honeypot) items and leaves adjudicated items
out of its queue (issue 16 §4)."""

from __future__ import annotations

from preflab.quality import build_report
from preflab.schema import Item, PairwiseJudgment


def item(item_id: str, gold_side: int | None = None) -> Item:
    gold = None
    if gold_side is not None:
        winner = "a" if gold_side < 0 else "b"
        gold = {
            "judgment": {
                "kind": "pairwise",
                "shown_order": ["a", "b"],
                "winner": winner,
                "strength": abs(gold_side),
            }
        }
    return Item(
        id=item_id,
        prompt="p",
        candidates=[{"id": "a", "text": "A"}, {"id": "b", "text": "B"}],
        gold=gold,
    )


def vote(item_id: str, rater: str, score: int, review_pass: int = 0) -> PairwiseJudgment:
    return PairwiseJudgment.from_canonical(
        item_id, ("a", "b"), score, {"rater_id": rater, "review_pass": review_pass}
    )


def test_gold_items_grade_the_raters_who_labelled_them():
    items = {i.id: i for i in [item("g1", -2), item("g2", 2), item("x")]}
    js = [
        vote("g1", "good", -1),
        vote("g2", "good", 3),
        vote("g1", "bad", 2),
        vote("g2", "bad", 1),
        vote("x", "good", 1),
        vote("x", "bad", 1),
    ]
    report = build_report(js, items=items)
    assert (
        report["raters"]["good"]["gold"]["correct"] == 2
        and report["raters"]["good"]["gold"]["n"] == 2
    )
    assert report["raters"]["bad"]["gold"]["correct"] == 1
    assert report["gold_accuracy"]["n"] == 4 and report["gold_accuracy"]["accuracy"] == 0.75


def test_adjudicated_items_leave_the_queue():
    items = {i.id: i for i in [item("split"), item("settled")]}
    js = [
        vote("split", "r1", -3),
        vote("split", "r2", 3),
        vote("settled", "r1", -3),
        vote("settled", "r2", 3),
    ]
    before = {q["item_id"] for q in build_report(js, items=items)["adjudication_queue"]}
    assert before == {"split", "settled"}
    after = build_report([*js, vote("settled", "senior", 3, review_pass=2)], items=items)
    assert {q["item_id"] for q in after["adjudication_queue"]} == {"split"}
    assert after["adjudication_total"] == 1


def test_report_audits_formatting_and_opening_sycophancy():
    # raters who always pick the answer that opens by validating the asker and uses bullets
    items, js = {}, []
    for n in range(6):
        flattering = "Great question! Here is why:\n- one\n- two"
        plain = "Because of one and two."
        items[f"i{n}"] = Item(
            id=f"i{n}",
            prompt="why?",
            candidates=[{"id": "a", "text": flattering}, {"id": "b", "text": plain}],
        )
        js.append(vote(f"i{n}", "r", -2))
    report = build_report(js, items=items)
    fb = report["formatting_bias"]
    assert fb["opening_validation"] == {
        "chosen_share": 1.0,
        "rejected_share": 0.0,
        "n_differ": 6,
        "chosen_more_share": 1.0,
    }
    assert fb["bullets"]["chosen_more_share"] == 1.0
    from preflab.quality import render_html

    assert "Formatting and sycophancy" in render_html(report)


def test_opening_validation_is_about_the_opening():
    from preflab.quality.bias import text_features

    assert (
        text_features("You're absolutely right, the loop is off by one.")["opening_validation"] == 1
    )
    assert text_features("Certainly! The answer is 4.")["opening_validation"] == 1
    assert text_features("The answer is 4. Great question though.")["opening_validation"] == 0
