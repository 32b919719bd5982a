"""Per-item criteria: the set's rules (approval by someone else, versions), the reward computed by
hand, and an item's identity unchanged by criteria."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from preflab.schema import (
    CriteriaJudgment,
    CriteriaSet,
    Criterion,
    Item,
    approved_criteria,
    criteria_reward,
    parse_judgment,
)
from preflab.schema.criteria import criteria_judgment_problems, load_criteria_file

CRITERIA = [
    {"id": "dose", "text": "States the adult dose", "weight": 5, "must_have": True},
    {"id": "refer", "text": "Says when to see a doctor", "weight": 2},
    {"id": "brief", "text": "Under 100 words", "weight": 1},
    {"id": "cite", "text": "Names a source", "weight": 0.5},
]
APPROVED = {
    "version": 1,
    "author": "dr_a",
    "approved_by": "dr_b",
    "approved_at": "2026-12-01T10:00:00Z",
    "criteria": CRITERIA,
}


def test_reward_by_hand():
    cs = [Criterion.model_validate(c) for c in CRITERIA]
    # total weight 8.5; met dose (5) + brief (1) = 6 -> 6 / 8.5
    assert criteria_reward(cs, {"dose": True, "refer": False, "brief": True, "cite": False}) == (
        pytest.approx(6 / 8.5, abs=1e-15)
    )
    assert criteria_reward(cs, dict.fromkeys(("dose", "refer", "brief", "cite"), True)) == 1.0
    # the must-have unmet: 0 however much else is met (7 / 8.5 without the veto)
    assert criteria_reward(cs, {"dose": False, "refer": True, "brief": True, "cite": True}) == 0.0
    # only the must-have met: 5 / 8.5
    assert criteria_reward(cs, {"dose": True, "refer": False, "brief": False, "cite": False}) == (
        pytest.approx(5 / 8.5, abs=1e-15)
    )
    with pytest.raises(ValueError, match=r"missing criteria \['cite'\]"):
        criteria_reward(cs, {"dose": True, "refer": True, "brief": True})
    with pytest.raises(ValueError, match=r"unknown criteria \['x'\]"):
        criteria_reward(cs, {"dose": True, "refer": True, "brief": True, "cite": True, "x": True})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"approved_by": "dr_a"}, "approver 'dr_a' is the author"),
        ({"approved_at": None}, "approved_by and approved_at go together"),
        ({"criteria": [*CRITERIA, CRITERIA[0]]}, "repeated: ['dose']"),
        ({"criteria": [{"id": "x", "text": "t", "weight": 0}]}, "greater than 0"),
        ({"criteria": [{"id": "x", "text": "t", "weight": -1}]}, "greater than 0"),
        ({"criteria": []}, "at least 1 item"),
        ({"version": 0}, "greater than or equal to 1"),
    ],
)
def test_a_bad_set_is_refused_with_its_field(change, message):
    with pytest.raises(ValidationError, match=message.replace("[", r"\[").replace("]", r"\]")):
        CriteriaSet.model_validate({**APPROVED, **change})


def test_a_new_version_resets_approval_and_approval_needs_someone_else():
    cs = CriteriaSet.model_validate(APPROVED)
    assert cs.approved and approved_criteria({"criteria": APPROVED}) == cs
    v2 = cs.revised([*CRITERIA[:2]], author="dr_c")
    assert (v2.version, v2.author, v2.approved, v2.approved_by) == (2, "dr_c", False, None)
    assert approved_criteria({"criteria": v2.as_json()}) is None
    with pytest.raises(ValueError, match="approval needs someone else"):
        v2.approve("dr_c")
    at = datetime(2026, 12, 2, tzinfo=UTC)
    assert v2.approve("dr_a", at=at).approved_at == at


def test_criteria_leave_the_item_id_and_hash_unchanged():
    base = {"prompt": "Dose of X?", "candidates": [{"id": "c", "text": "10 mg"}]}
    plain = Item.model_validate(base)
    carried = Item.model_validate({**base, "metadata": {"criteria": APPROVED}})
    assert (plain.id, plain.content_hash()) == (carried.id, carried.content_hash())


def test_an_item_with_bad_criteria_names_the_field():
    bad = {**APPROVED, "criteria": [*CRITERIA[:1], {"id": "y", "text": "t", "weight": -2}]}
    with pytest.raises(ValidationError) as info:
        Item.model_validate(
            {"prompt": "p", "candidates": [{"text": "a"}], "metadata": {"criteria": bad}}
        )
    assert "metadata.criteria.criteria.1.weight: Input should be greater than 0" in str(info.value)


def test_a_criteria_judgment_is_checked_against_the_approved_version():
    j = parse_judgment(
        {
            "kind": "criteria",
            "item_id": "q",
            "candidate_id": "c",
            "criteria_version": 1,
            "met": {"refer": True, "dose": False, "brief": True},
            "provenance": {"rater_id": "r"},
        }
    )
    assert isinstance(j, CriteriaJudgment)
    assert list(j.met) == ["brief", "dose", "refer"]  # canonical order
    assert [(r.unit, r.dimension, r.value) for r in j.label_rows()] == [
        ("q::c", "criterion:brief", 1.0),
        ("q::c", "criterion:dose", 0.0),
        ("q::c", "criterion:refer", 1.0),
    ]
    assert criteria_judgment_problems(j, {"criteria": APPROVED}) == [
        "met.cite: missing (say met or not)"
    ]
    unapproved = {k: v for k, v in APPROVED.items() if k not in ("approved_by", "approved_at")}
    assert "not approved yet" in criteria_judgment_problems(j, {"criteria": unapproved})[0]
    assert "no criteria" in criteria_judgment_problems(j, {})[0]
    v2 = {**APPROVED, "version": 2}
    assert (
        "is not the item's approved version 2" in criteria_judgment_problems(j, {"criteria": v2})[0]
    )


def test_a_criteria_file_names_the_bad_entry(tmp_path):
    good = tmp_path / "c.yaml"
    good.write_text("- {id: a, text: first, weight: 2, must_have: true}\n- {id: b, text: second}\n")
    assert [(c.id, c.weight, c.must_have) for c in load_criteria_file(good)] == [
        ("a", 2.0, True),
        ("b", 1.0, False),
    ]
    bad = tmp_path / "c.json"
    bad.write_text('{"criteria": [{"id": "a", "text": "t"}, {"id": "b", "text": "", "weight": 1}]}')
    with pytest.raises(
        ValueError, match=r"c.json: criteria\.1\.text: String should have at least 1"
    ):
        load_criteria_file(bad)
    broken = tmp_path / "d.json"
    broken.write_text('[\n{"id": "a",\n')
    with pytest.raises(ValueError, match=r"d.json:3: not valid JSON"):
        load_criteria_file(broken)
