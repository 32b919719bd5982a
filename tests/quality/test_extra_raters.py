"""The adaptive-overlap disagreement rule (``preflab.quality.extra_raters``), kind by kind."""

from __future__ import annotations

import pytest

from preflab.quality.extra_raters import Label, disagreement, majority_share
from preflab.schema.policy import AdaptiveOverlap, Policy, PolicyError, stored_policy

RULE = AdaptiveOverlap(max_extra=2)


def pair(score: int, lo: str = "a", hi: str = "b") -> Label:
    return Label("pairwise", {}, lo, hi, score)


def test_pairwise_majority_share_with_ties_as_a_side() -> None:
    assert disagreement([pair(2), pair(1)], RULE) == []  # both: "a" side (sign of the score)
    assert disagreement([pair(2), pair(-1)], RULE) == ["pairwise a|b: majority 0.50 < 0.75"]
    # a tie is its own side (the export's plurality): 2 of 3 is no 0.75 majority
    assert disagreement([pair(1), pair(3), pair(0)], RULE) == ["pairwise a|b: majority 0.67 < 0.75"]
    assert disagreement([pair(1), pair(3), pair(2), pair(0)], RULE) == []  # 0.75: agrees
    # each canonical pair is its own unit
    assert disagreement([pair(1), pair(1), pair(1, "a", "c"), pair(-1, "a", "c")], RULE) == [
        "pairwise a|c: majority 0.50 < 0.75"
    ]
    # a stricter project asks for unanimity
    strict = AdaptiveOverlap(max_extra=1, pairwise_min_majority=1.0)
    assert disagreement([pair(1), pair(1), pair(1), pair(0)], strict) != []


def test_a_single_label_or_none_never_disagrees() -> None:
    assert disagreement([], RULE) == []
    assert disagreement([pair(1)], RULE) == []
    assert disagreement([Label("demonstration", {"text": "x"})] * 3, RULE) == []


def test_unary_thumbs_split() -> None:
    up = Label("unary", {"candidate_id": "a", "label": True})
    down = Label("unary", {"candidate_id": "a", "label": False})
    other = Label("unary", {"candidate_id": "b", "label": False})
    assert disagreement([up, up, other], RULE) == []
    assert disagreement([up, down], RULE) == ["unary a: thumbs 0.50 < 0.75"]
    assert disagreement([up, up, up, down], RULE) == []


def test_ranking_top_choice_split() -> None:
    def rank(*order: list[str]) -> Label:
        return Label("ranking", {"order": [list(t) for t in order]})

    same_top = [rank(["a"], ["b"], ["c"]), rank(["a"], ["c"], ["b"])]
    assert disagreement(same_top, RULE) == []  # swaps below the top do not count
    assert disagreement([rank(["a"], ["b"]), rank(["b"], ["a"])], RULE) == [
        "ranking: top choice 0.50 < 0.75"
    ]
    # a tied first tier is one choice, whatever its order
    assert disagreement([rank(["a", "b"]), rank(["b", "a"])], RULE) == []


def test_rubric_dimension_range() -> None:
    def grade(cand: str, **scores: float) -> Label:
        return Label("rubric", {"candidate_id": cand, "scores": scores})

    assert disagreement([grade("a", helpful=4, safe=5), grade("a", helpful=2, safe=5)], RULE) == []
    assert disagreement([grade("a", helpful=5), grade("a", helpful=2)], RULE) == [
        "rubric a helpful: range 3 > 2"
    ]
    # scores of different answers are not compared
    assert disagreement([grade("a", helpful=5), grade("b", helpful=1)], RULE) == []


def test_steps_any_split() -> None:
    def steps(*verdicts: int) -> Label:
        return Label("steps", {"candidate_id": "a", "verdicts": list(verdicts)})

    assert disagreement([steps(1, 1, 1), steps(1, 1, 1)], RULE) == []
    assert disagreement([steps(1, 0, 1), steps(1, 1, 1)], RULE) == ["steps a: verdicts split"]
    # a different first error: one rater stops at step 2, the other finds none
    assert disagreement([steps(1, -1), steps(1, 1, 1)], RULE) == ["steps a: verdicts split"]


def test_majority_share() -> None:
    assert majority_share([]) == 1.0
    assert majority_share([1, 1, -1, 0]) == 0.5


def test_policy_off_by_default_and_max_extra_within_k() -> None:
    policy = Policy()
    assert policy.adaptive_overlap.max_extra == 0 and not policy.adaptive_overlap.enabled
    assert Policy(overlap_k=3, adaptive_overlap={"max_extra": 3}).adaptive_overlap.enabled
    with pytest.raises(ValueError, match="max_extra 4 is more than overlap_k 3"):
        Policy(overlap_k=3, adaptive_overlap={"max_extra": 4})
    with pytest.raises(PolicyError, match="adaptive_overlap"):
        stored_policy({"policy": {"adaptive_overlap": {"max_extras": 1}}})
