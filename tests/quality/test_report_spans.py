"""The quality report's ``spans`` section (character-level F1 between raters, docs/critiques.md)
against a hand computation, on both report paths; no section without spans."""

from __future__ import annotations

import pytest

from preflab.quality import build_report
from preflab.quality.report import render_html, report_from_items
from preflab.quality.spans import char_f1
from preflab.schema import Item, parse_judgment

Q1 = Item(
    id="q1",
    prompt="p",
    candidates=[{"id": "a", "text": "x" * 30}, {"id": "b", "text": "y" * 10}],
)
Q2 = Item(id="q2", prompt="p", candidates=[{"id": "x", "text": "z" * 10}])


def span(cand, start, end, category="factual"):
    return {"candidate_id": cand, "start": start, "end": end, "category": category}


def pair(rater, spans, source="human"):
    return parse_judgment(
        {
            "kind": "pairwise",
            "item_id": "q1",
            "shown_order": ["a", "b"],
            "winner": "a",
            "strength": 1,
            "provenance": {"rater_id": rater, "source": source},
            **({"spans": spans} if spans else {}),
        }
    )


def thumb(rater, spans, source="human"):
    return parse_judgment(
        {
            "kind": "unary",
            "item_id": "q2",
            "candidate_id": "x",
            "label": False,
            "provenance": {"rater_id": rater, "source": source},
            **({"spans": spans} if spans else {}),
        }
    )


JUDGMENTS = [
    pair("r1", [span("a", 0, 10), span("a", 20, 25, "style")]),
    pair("r2", [span("a", 5, 15)]),
    # r3's two overlapping spans are one set of characters: 0..9
    pair("r3", [span("a", 0, 6), span("a", 3, 10), span("b", 0, 4, "unsafe")]),
    pair("r4", None),  # no spans: not a rater of any unit
    thumb("r1", [span("x", 0, 4)]),
    thumb("r2", [span("x", 2, 4)]),
    thumb("judge", [span("x", 5, 9)], source="ai"),  # AI labels are out unless include_ai
]


def test_char_f1_is_the_dice_coefficient_of_the_marked_characters():
    assert char_f1([(0, 10)], [(5, 15)]) == 0.5
    assert char_f1([(0, 4)], [(2, 4)]) == pytest.approx(2 / 3)
    assert char_f1([(0, 5)], []) == 0.0
    assert char_f1([], []) is None


def test_span_agreement_equals_the_hand_computation_on_both_paths():
    # q1/a (r1, r2, r3): factual: (r1,r2) 2*5/20 = 0.5, (r1,r3) 1.0, (r2,r3) 0.5 -> 2/3;
    #                    style: (r1,r2) 0, (r1,r3) 0, (r2,r3) neither marked it: skipped -> 0
    # q1/b: only r3 marked it -> not a unit
    # q2/x (r1, r2; the judge left out): factual: 2*2/(4+2) = 2/3
    expected = {
        "judgments_with_spans": 5,
        "units": 2,
        "f1": pytest.approx((2 / 3 + 0 + 2 / 3) / 3),
        "by_category": {
            "factual": {"units": 2, "f1": pytest.approx(2 / 3)},
            "style": {"units": 1, "f1": 0.0},
        },
    }
    whole = build_report(JUDGMENTS, items=[Q1, Q2], n_boot=10)["spans"]
    streamed = report_from_items([(JUDGMENTS[:4], Q1), (JUDGMENTS[4:], Q2)], n_boot=10)["spans"]
    for got in (whole, streamed):
        assert got.pop("measure").startswith("character-level F1")
        assert got == expected


def test_with_ai_the_judge_is_a_rater_of_its_unit():
    got = build_report(JUDGMENTS, items=[Q1, Q2], n_boot=10, include_ai=True)["spans"]
    # q2/x: (r1,r2) 2/3, (r1,judge) 0, (r2,judge) 0 -> 2/9
    assert got["by_category"]["factual"]["f1"] == pytest.approx((2 / 3 + 2 / 9) / 2)
    assert got["judgments_with_spans"] == 6


def test_no_spans_no_section():
    plain = [pair("r1", None), pair("r2", None)]
    assert "spans" not in build_report(plain, items=[Q1], n_boot=10)
    assert "spans" not in report_from_items([(plain, Q1)], n_boot=10)


def test_the_html_report_shows_the_section_only_with_spans():
    html = render_html(build_report(JUDGMENTS, items=[Q1, Q2], n_boot=10))
    assert (
        "Critique spans: agreement" in html and "<td>factual</td><td>0.667</td><td>2</td>" in html
    )
    plain = render_html(build_report([pair("r1", None), pair("r2", None)], items=[Q1], n_boot=10))
    assert "Critique spans" not in plain
