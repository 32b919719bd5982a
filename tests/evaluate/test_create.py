"""``eval create``: one pairwise item per model pair and shared prompt, answer order drawn per
item from the seed and stored, models kept on the candidates only, bad files named line by line."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from preflab.evaluate.create import create_evaluation, plan_evaluation
from preflab.evaluate.outputs import OutputsInvalid, read_all_outputs, read_outputs
from preflab.store import open_db, repo, transaction

from .conftest import V1, V2, V3, outputs, write_outputs


def test_order_is_randomised_per_item_reproducibly_and_stored(two_models):
    models = read_all_outputs([(None, p) for p in two_models])
    plan = plan_evaluation(models, seed=0)
    assert plan.summary()["pairs"] == {
        f"{V1} vs {V2}": {"items": 11, "identical_skipped": 1, "prompts_in_one_only": 0}
    }
    first = [item.candidates[0].model for item in plan.items]
    assert set(first) == {V1, V2}  # both orders occur
    assert [i.candidates[0].model for i in plan_evaluation(models, seed=0).items] == first
    assert [i.candidates[0].model for i in plan_evaluation(models, seed=1).items] != first
    assert Counter(first) == plan.first_shown
    for item in plan.items:
        assert {c.model for c in item.candidates} == {V1, V2}
        assert all(V1 not in str(v) and V2 not in str(v) for v in item.public_view().values())
        assert V1 not in item.id and V2 not in item.id


def test_three_models_give_every_pair_and_count_unanswered_prompts(tmp_path):
    paths = [
        write_outputs(tmp_path / "a.jsonl", outputs(V1, 6)),
        write_outputs(tmp_path / "b.jsonl", outputs(V2, 6, better=True)),
        write_outputs(tmp_path / "c.jsonl", outputs(V3, 4, better=True)),
    ]
    plan = plan_evaluation(read_all_outputs([(None, p) for p in paths]), seed=0)
    assert plan.pairs[f"{V1} vs {V2}"]["items"] == 6
    assert plan.pairs[f"{V1} vs {V3}"] == {
        "items": 4,
        "identical_skipped": 0,
        "prompts_in_one_only": 2,
    }
    assert plan.pairs[f"{V2} vs {V3}"]["items"] == 4
    assert plan.unmatched == {V1: 2, V2: 2, V3: 0}


def test_names_come_from_the_option_the_records_or_the_file(tmp_path):
    rows = [{k: v for k, v in r.items() if k != "model"} for r in outputs(V1, 2)]
    path = write_outputs(tmp_path / "rollouts-v7.jsonl", rows)
    assert read_outputs(path)[0].name == "rollouts-v7"
    assert read_outputs(path, "named")[0].name == "named"
    assert read_outputs(write_outputs(tmp_path / "x.jsonl", outputs(V2, 2)))[0].name == V2


def test_bad_model_outputs_are_named_line_by_line(tmp_path):
    rows = outputs(V1, 3)
    rows[1] = {**rows[1], "model": "someone-else"}
    rows.append({"prompt": rows[0]["prompt"], "response": "again", "model": V1})
    rows.append({"prompt": "Q", "response": 3})
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in rows) + "{not json\n", encoding="utf-8")
    good = write_outputs(tmp_path / "good.jsonl", outputs(V2, 3))
    with pytest.raises(OutputsInvalid) as info:
        read_all_outputs([(None, bad), (None, good)])
    problems = [str(p) for p in info.value.problems]
    assert problems[:3] == [
        f"{bad}:2: model: 'someone-else' differs from '{V1}' on line 1; one file holds one model's outputs "
        "(split it, or name it with --model NAME=FILE)",
        f"{bad}:4: prompt: {V1} answered it already on line 1; keep one answer per prompt and model (or pass "
        "--first-answer to use the first)",
        f"{bad}:5: response: expected a string or a non-empty list of messages, got int",
    ]
    assert problems[3].startswith(f"{bad}:6: (line): invalid JSON: ") and len(problems) == 4
    with pytest.raises(OutputsInvalid, match="also the name of"):
        read_all_outputs([(None, good), (None, good)])


def test_create_writes_the_project_in_one_transaction(two_models, sqlite_url):
    engine = open_db(sqlite_url)
    summary = create_evaluation(
        engine,
        "blind",
        read_all_outputs([(None, p) for p in two_models]),
        seed=5,
        raters_per_item=3,
    )
    assert summary["items"] == 11 and summary["seed"] == 5
    assert all(len(m["sha256"]) == 64 for m in summary["models"])
    with transaction(engine) as s:
        project = repo.get_project(s, "blind")
        assert project.kinds == ["pairwise"]
        assert project.settings["policy"] == {
            "randomise_order": True,
            "overlap_share": 1.0,
            "overlap_k": 3,
        }
        stored = [i.item for i in repo.iter_items_with_judgments(s, project)]
    planned = plan_evaluation(read_all_outputs([(None, p) for p in two_models]), seed=5).items
    assert [[c.model for c in i.candidates] for i in stored] == [
        [c.model for c in i.candidates] for i in planned
    ]
    # domain tags are topics for the report, not routing (raters need no credentials) ...
    assert all(i.domains == [] for i in stored)
    assert {d for i in stored for d in i.metadata["evaluation"]["domains"]} == {
        "general",
        "physics",
    }
    # ... unless asked
    routed = plan_evaluation(
        read_all_outputs([(None, p) for p in two_models]), route_by_domain=True
    ).items
    assert {d for i in routed for d in i.domains} == {"general", "physics"}
    with pytest.raises(repo.Conflict):  # a second create never mixes two evaluations
        create_evaluation(engine, "blind", read_all_outputs([(None, p) for p in two_models]))


def test_a_project_name_or_title_that_names_a_model_is_refused(two_models, sqlite_url):
    engine = open_db(sqlite_url)
    models = read_all_outputs([(None, p) for p in two_models])
    with pytest.raises(ValueError, match="names the model 'acme-secret-v2', and raters see it"):
        create_evaluation(engine, "acme-secret-v2-check", models)
    with pytest.raises(ValueError, match="the title 'Is ACME-SECRET-V1 better"):
        create_evaluation(engine, "eval-1", models, title="Is ACME-SECRET-V1 better?")
    with transaction(engine) as s:
        assert repo.list_projects(s) == []
    short = read_all_outputs([("a", two_models[0]), ("b", two_models[1])])
    assert create_evaluation(engine, "eval-abba", short)["items"] == 11  # "a" as a word only


def test_one_file_with_several_models_and_several_answers_per_prompt(tmp_path):
    rows = (
        outputs(V1, 3)
        + outputs(V2, 3, better=True)
        + [
            {
                "prompt": "Question 0: why is the sky blue?",
                "response": "a second sample",
                "model": V2,
            }
        ]
    )
    mixed = write_outputs(tmp_path / "rollouts.jsonl", rows)
    with pytest.raises(
        OutputsInvalid, match=f"rollouts.jsonl:7: prompt: {V2} answered it already on line 4"
    ):
        read_all_outputs([], [mixed])
    models = read_all_outputs([], [mixed], first_answer=True)
    assert [(m.name, len(m.answers), m.extra_answers) for m in models] == [(V1, 3, 0), (V2, 3, 1)]
    assert plan_evaluation(models).pairs[f"{V1} vs {V2}"]["items"] == 3
    unnamed = write_outputs(tmp_path / "unnamed.jsonl", [{"prompt": "Q", "response": "R"}])
    with pytest.raises(
        OutputsInvalid, match="unnamed.jsonl:1: model: missing: rows of a file with several models"
    ):
        read_all_outputs([], [unnamed])
