"""Rubrics: scales, validation of scores, veto gating and verbosity penalty."""

import pytest
from pydantic import ValidationError

from preflab.schema import Rubric

RUBRIC = {
    "id": "helpfulness",
    "dimensions": [
        {"name": "correct", "scale": "binary", "weight": 2},
        {"name": "clarity", "scale": "ordinal", "points": 5, "labels": ["1", "2", "3", "4", "5"]},
        {"name": "tone", "scale": "ternary"},
        {"name": "coverage", "scale": "interval", "min": 0, "max": 100},
    ],
    "vetoes": [{"name": "unsafe"}, {"name": "factual_error"}],
    "verbosity_penalty": {"free_length": 100, "per_unit": 0.001, "max_penalty": 0.2},
}


def test_reward_is_the_weighted_mean_of_normalised_scores():
    r = Rubric.model_validate(RUBRIC)
    scores = {"correct": 1, "clarity": 3, "tone": 0, "coverage": 25}
    # (2*1 + 1*0.5 + 1*0.5 + 1*0.25) / 5 = 0.65
    assert r.reward(scores) == pytest.approx(0.65)
    assert r.reward(scores, length=150) == pytest.approx(0.65 - 0.05)
    assert r.reward(scores, length=10_000) == pytest.approx(0.65 - 0.2)


def test_a_failed_veto_gates_the_reward_to_zero():
    r = Rubric.model_validate(RUBRIC)
    perfect = {"correct": 1, "clarity": 5, "tone": 1, "coverage": 100}
    assert r.reward(perfect) == 1.0
    assert r.reward(perfect, ["factual_error"]) == 0.0


def test_check_scores_names_each_problem():
    r = Rubric.model_validate(RUBRIC)
    problems = r.check_scores({"correct": 2, "clarity": 2.5, "extra": 1}, ["rude"])
    assert "scores.extra: not a dimension of rubric helpfulness v1" in problems
    assert (
        "scores.correct: 2.0 is outside [0, 1]" in problems
        or "scores.correct: 2 is outside [0, 1]" in problems
    )
    assert any(p.startswith("scores.clarity: 2.5 is not a whole level") for p in problems)
    assert "scores.tone: missing" in problems
    assert any(p.startswith("vetoes_failed: 'rude'") for p in problems)


@pytest.mark.parametrize(
    "dimension",
    [
        {"name": "x", "scale": "ordinal"},
        {"name": "x", "scale": "interval", "min": 5, "max": 1},
        {"name": "x", "scale": "binary", "labels": ["a", "b", "c"]},
    ],
)
def test_bad_dimensions_are_rejected(dimension):
    with pytest.raises(ValidationError):
        Rubric.model_validate({"id": "r", "dimensions": [dimension]})


def test_content_hash_ignores_the_version_number():
    a = Rubric.model_validate(RUBRIC)
    b = Rubric.model_validate({**RUBRIC, "version": 7})
    c = Rubric.model_validate({**RUBRIC, "title": "changed"})
    assert a.content_hash() == b.content_hash() != c.content_hash()
