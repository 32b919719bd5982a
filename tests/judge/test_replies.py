"""The judge's strict reply parsing: one JSON object, validated, never guessed."""

from __future__ import annotations

import pytest

from preflab.judge.replies import Malformed, parse_reply
from preflab.judge.templates import TemplateError, load_template, shipped
from preflab.quality.family import model_family, parse_family_options


@pytest.mark.parametrize(
    ("text", "kind", "expected"),
    [
        ('{"winner": "A", "strength": 2, "rationale": "r"}', "pairwise", {"winner": "A", "strength": 2, "rationale": "r"}),
        ('  \n{"winner": "tie", "strength": 0}\n', "pairwise", {"winner": "tie", "strength": 0, "rationale": ""}),
        ('```json\n{"acceptable": false}\n```', "unary", {"acceptable": False, "rationale": ""}),
        ('{"score": 4}', "rubric", {"score": 4.0, "rationale": ""}),
        ('{"verdicts": [1, 0, -1]}', "steps", {"verdicts": [1, 0, -1], "rationale": ""}),
    ],
)  # fmt: skip
def test_valid_replies(text, kind, expected):
    assert parse_reply(text, kind) == expected


@pytest.mark.parametrize(
    ("text", "kind", "why"),
    [
        ("A is better", "pairwise", "not a JSON object"),
        ('Sure! {"winner": "A", "strength": 2}', "pairwise", "not a JSON object"),
        ('[{"winner": "A", "strength": 2}]', "pairwise", "not a JSON object"),
        ('{"winner": "a", "strength": 2}', "pairwise", "winner"),
        ('{"winner": "A", "strength": "2"}', "pairwise", "strength"),
        ('{"winner": "A", "strength": 4}', "pairwise", "strength"),
        ('{"winner": "tie", "strength": 1}', "pairwise", "strength 0"),
        ('{"winner": "A", "strength": 1, "confidence": 0.9}', "pairwise", "confidence"),
        ('{"acceptable": "yes"}', "unary", "acceptable"),
        ('{"score": true}', "rubric", "score"),
        ('{"verdicts": [2]}', "steps", "verdicts"),
        ('{"verdicts": []}', "steps", "verdicts"),
    ],
)  # fmt: skip
def test_malformed_replies_say_why(text, kind, why):
    with pytest.raises(Malformed, match=why):
        parse_reply(text, kind)


def test_templates_are_versioned_and_checked(tmp_path):
    names = {t.label for t in shipped()}
    assert {"pairwise@1", "rubric@1", "unary@1", "steps@1"} <= names
    assert load_template("pairwise").label == "pairwise@2"
    assert load_template("unary@1").kind == "unary"
    with pytest.raises(TemplateError, match="no such template"):
        load_template("pairwise@9")
    own = tmp_path / "mine.json"
    own.write_text(
        '{"name": "mine", "version": 2, "kind": "unary", "system": "s", "user": "$prompt $answer"}'
    )
    assert load_template(str(own)).label == "mine@2"
    own.write_text(
        '{"name": "mine", "version": 2, "kind": "unary", "system": "s", "user": "$answer_a"}'
    )
    with pytest.raises(TemplateError, match="unknown placeholder"):
        load_template(str(own))


def test_model_family_rule_and_mapping():
    assert model_family("gpt-4o-mini") == model_family("gpt-4.1") == "gpt"
    assert model_family("meta-llama/Llama-3.1-8B-Instruct") == "llama"
    assert model_family("Qwen/Qwen2.5-72B-Instruct") == model_family("qwen3:8b") == "qwen"
    assert model_family("claude-3-5-sonnet") == "claude"
    assert model_family(None) is None and model_family("") is None
    assert model_family("42-model") == "42-model"
    mapping = parse_family_options(["mixtral=mistral", "Mi=other"])
    assert model_family("mistralai/Mixtral-8x7B", mapping) == "mistral"  # the longest prefix
    assert model_family("minimax-01", mapping) == "other"
    with pytest.raises(ValueError, match="PREFIX=FAMILY"):
        parse_family_options(["mixtral"])
