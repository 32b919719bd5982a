"""Specification of the judgment wire formats."""

import pytest
from pydantic import ValidationError

from preflab.schema import (
    JUDGMENT_KINDS,
    PairwiseJudgment,
    RankingJudgment,
    StepsJudgment,
    dump_judgment,
    parse_judgment,
    rater_hash,
)

PROV = {"rater_id": "r1"}


@pytest.mark.parametrize(
    ("shown", "winner", "strength", "score", "chosen"),
    [
        (("x", "y"), "a", 3, -3, "x"),  # first canonical shown first and chosen: negative
        (("y", "x"), "a", 2, 2, "y"),  # shown reversed: chosen y is canonical second: positive
        (("y", "x"), "b", 1, -1, "x"),
        (("x", "y"), "tie", 0, 0, None),
    ],
)
def test_pairwise_canonical_signed_score(shown, winner, strength, score, chosen):
    j = PairwiseJudgment(
        item_id="i", shown_order=shown, winner=winner, strength=strength, provenance=PROV
    )
    assert j.pair == ("x", "y")
    assert j.score == score
    assert j.chosen == chosen
    back = PairwiseJudgment.from_canonical("i", j.pair, j.score, PROV, shown_order=shown)
    assert (back.winner, back.strength, back.shown_order) == (winner, strength, shown)


@pytest.mark.parametrize(("winner", "strength"), [("tie", 2), ("a", 0), ("a", 4), ("c", 1)])
def test_pairwise_rejects_inconsistent_strength(winner, strength):
    with pytest.raises(ValidationError):
        PairwiseJudgment(
            item_id="i", shown_order=("x", "y"), winner=winner, strength=strength, provenance=PROV
        )


def test_every_kind_round_trips_through_its_dict():
    examples = [
        {
            "kind": "pairwise",
            "item_id": "i",
            "shown_order": ["a", "b"],
            "winner": "b",
            "strength": 1,
        },
        {"kind": "ranking", "item_id": "i", "order": [["c"], ["a", "b"]]},
        {
            "kind": "rubric",
            "item_id": "i",
            "candidate_id": "a",
            "scores": {"helpful": 4},
            "vetoes_failed": ["unsafe"],
        },
        {"kind": "unary", "item_id": "i", "candidate_id": "a", "label": False},
        {
            "kind": "steps",
            "item_id": "i",
            "candidate_id": "a",
            "steps": ["s1", "s2", "s3"],
            "verdicts": [1, 0, -1],
        },
        {
            "kind": "demonstration",
            "item_id": "i",
            "text": "An expert answer.",
            "status": "accepted",
        },
        {
            "kind": "criteria",
            "item_id": "i",
            "candidate_id": "a",
            "criteria_version": 2,
            "met": {"dose": True, "doctor": False},
        },
    ]
    assert sorted(e["kind"] for e in examples) == sorted(JUDGMENT_KINDS)
    for example in examples:
        data = {**example, "provenance": PROV, "rationale": "because"}
        j = parse_judgment(data)
        assert type(j) is JUDGMENT_KINDS[example["kind"]]
        assert parse_judgment(dump_judgment(j)) == j


def test_ranking_induces_pairs_with_ties():
    j = RankingJudgment(item_id="i", order=[["b"], ["a", "c"]], provenance=PROV)
    assert j.induced_pairs() == [("a", "b", 1), ("a", "c", 0), ("b", "c", -1)]
    with pytest.raises(ValidationError, match="more than once"):
        RankingJudgment(item_id="i", order=[["a"], ["a"]], provenance=PROV)


def test_steps_stop_at_first_error():
    j = StepsJudgment(
        item_id="i", candidate_id="c", steps=["a", "b", "c"], verdicts=[1, -1], provenance=PROV
    )
    assert j.first_error == 1
    with pytest.raises(ValidationError, match="stop at the first error"):
        StepsJudgment(
            item_id="i", candidate_id="c", steps=["a", "b", "c"], verdicts=[-1, 1], provenance=PROV
        )
    with pytest.raises(ValidationError, match="every step"):
        StepsJudgment(
            item_id="i", candidate_id="c", steps=["a", "b"], verdicts=[1], provenance=PROV
        )


def test_rater_hash_is_keyed_and_stable():
    h = rater_hash("alice", "secret-1")
    assert h == rater_hash("alice", "secret-1")
    assert h != rater_hash("alice", "secret-2")
    # RFC 4231-style check against the standard library's HMAC of the same inputs
    import hashlib
    import hmac

    assert h == "hmac_sha256:" + hmac.new(b"secret-1", b"alice", hashlib.sha256).hexdigest()
