"""A verdict is an event (issue 28 section 5): ``human_eval.jsonl`` imported, written out by
``eval report`` and imported again into a fresh project keeps every verdict, with the models that
wrote the answers, so battles and Arena ratings are equal. Before: answers with the same text
from different model pairs merged into one item (the content hash ignores models), a rater's
later verdict replaced the earlier one, and rows without a labeler were one "anonymous" rater."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from preflab.evaluate.create import plan_evaluation
from preflab.evaluate.outputs import read_all_outputs
from preflab.evaluate.report import build_report, load_verdicts, write_human_eval
from preflab.io.importer import import_files
from preflab.store import open_db, repo, transaction

from .conftest import V1, V2, outputs, write_outputs

MODELS = ("v1", "v2", "v3")


def answer(model: str, i: int) -> str:
    # v2 and v3 write the same text on even prompts: (v1, v2) and (v1, v3) are the same texts
    return f"v2/v3 say {i}" if model in ("v2", "v3") and i % 2 == 0 else f"{model} says {i}"


def rows() -> list[dict]:
    out = []
    prefers = ("answer_1", "answer_2", "tie")
    for i in range(12):
        for left, right in (("v1", "v2"), ("v1", "v3"), ("v2", "v3")):
            if answer(left, i) == answer(right, i):
                continue
            for r, rater in enumerate(("alice", "bob", "carol")):
                out.append(
                    {
                        "prompt": f"Prompt {i}",
                        "answer_1": answer(left, i),
                        "answer_2": answer(right, i),
                        "human_prefers": prefers[(i + r + len(left + right)) % 3],
                        "model_1": left,
                        "model_2": right,
                        "labeler": rater,
                    }
                )
    # two people who gave no name, with different verdicts on one comparison
    base = {k: v for k, v in out[0].items() if k != "labeler"}
    out.append({**base, "human_prefers": "answer_1"})
    out.append({**base, "human_prefers": "answer_2"})
    return out


def jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def battles(data) -> Counter:
    return Counter((v.prompt, v.models, v.answers, v.winner) for v in data.verdicts)


@pytest.fixture
def engine(db_url):
    engine = open_db(db_url)
    with transaction(engine) as s:
        repo.create_project(s, "ev")
        repo.create_project(s, "again")
    yield engine
    engine.dispose()


def test_every_verdict_survives_import_export_and_reimport(engine, tmp_path):
    records = rows()
    import_files(engine, "ev", [jsonl(tmp_path / "human_eval.jsonl", records)])
    data = load_verdicts(engine, "ev")
    assert len(data.verdicts) == len(records)  # before: the merged items lost verdicts
    expected = Counter(
        (
            r["prompt"],
            (r["model_1"], r["model_2"]),
            (r["answer_1"], r["answer_2"]),
            {"answer_1": "model_a", "answer_2": "model_b", "tie": "tie"}[r["human_prefers"]],
        )
        for r in records
    )
    assert battles(data) == expected
    out = tmp_path / "out" / "human_eval.jsonl"
    assert write_human_eval(data, out) == len(records)
    import_files(engine, "again", [out])
    again = load_verdicts(engine, "again")
    assert battles(again) == battles(data)
    first, second = build_report(data, rounds=50), build_report(again, rounds=50)
    assert first["ratings"] == second["ratings"]
    assert first["pairs"] == second["pairs"]


def test_the_same_texts_of_two_model_pairs_are_two_items(engine, tmp_path):
    same = {"prompt": "P", "answer_1": "x", "answer_2": "y", "human_prefers": "answer_1"}
    import_files(
        engine,
        "ev",
        [
            jsonl(
                tmp_path / "h.jsonl",
                [
                    {**same, "model_1": "v1", "model_2": "v2", "labeler": "alice"},
                    {**same, "model_1": "v1", "model_2": "v3", "labeler": "alice"},
                ],
            )
        ],
    )
    data = load_verdicts(engine, "ev")
    assert sorted(v.models for v in data.verdicts) == [("v1", "v2"), ("v1", "v3")]
    assert len({v.item_id for v in data.verdicts}) == 2


def test_a_row_without_id_gets_the_id_eval_create_gives_its_comparison(engine, tmp_path):
    paths = [
        write_outputs(tmp_path / "a.jsonl", outputs(V1, 4)),
        write_outputs(tmp_path / "b.jsonl", outputs(V2, 4, better=True)),
    ]
    plan = plan_evaluation(read_all_outputs([(None, p) for p in paths]), seed=0)
    records = [
        {
            "prompt": item.prompt,
            "answer_1": item.candidates[1].text,
            "answer_2": item.candidates[0].text,
            "model_1": item.candidates[1].model,
            "model_2": item.candidates[0].model,
            "human_prefers": "tie",
            "labeler": "dan",
        }
        for item in plan.items
    ]
    import_files(engine, "ev", [jsonl(tmp_path / "h.jsonl", records)])
    from preflab.io.formats.evaluation import comparison_id

    assert {v.item_id for v in load_verdicts(engine, "ev").verdicts} == {i.id for i in plan.items}
    assert comparison_id("P", [("v1", "x"), ("v2", "y")]) != comparison_id(
        "P", [("v1", "x"), ("v3", "y")]
    )
