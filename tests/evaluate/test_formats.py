"""The classic pipeline's files: ``rollouts.jsonl`` and ``human_eval.jsonl`` read (validate, import)
with line-exact errors; ``to_label.jsonl`` written from a project's unlabelled pairs."""

from __future__ import annotations

import json
from pathlib import Path

import orjson

from preflab.io.export import ExportOptions, export_project
from preflab.io.importer import ImportOptions, import_files, validate_files
from preflab.schema import Candidate
from preflab.store import open_db, repo, transaction


def jsonl(path: Path, rows: list) -> Path:
    path.write_text(
        "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8"
    )
    return path


def test_rollouts_and_human_eval_validate_line_by_line(tmp_path):
    path = jsonl(
        tmp_path / "mixed.jsonl",
        [
            {"prompt": "Hi", "response": "Hello", "reward": 1.5, "model": "v1"},
            {"prompt": " ", "response": "", "model": "v1"},
            {"prompt": "Hi", "response": "Yo", "reward": "high"},
            {"prompt": "Hi", "response": "Yo", "reward": 1, "scores": [1]},
            {
                "prompt": "Q",
                "answer_1": "A",
                "answer_2": "B",
                "human_prefers": "tie",
                "model_1": "v1",
                "model_2": "v2",
            },
            {
                "prompt": "Q",
                "answer_1": "A",
                "answer_2": "B",
                "human_prefers": "left",
                "model_1": "v1",
                "model_2": "v2",
            },
            {
                "prompt": "Q",
                "answer_1": "A",
                "answer_2": "A",
                "human_prefers": 1,
                "model_1": "v1",
                "model_2": "v2",
            },
        ],
    )
    report = validate_files([path], ImportOptions())
    assert [str(p) for p in report.problems] == [
        f"{path}:2: prompt: empty; expected the text (or a list of chat messages)",
        f"{path}:3: reward: expected a number, got str",
        f"{path}:4: scores: unknown field (known: domains, id, metadata, model, prompt, response, reward); "
        "pass --keep-extra to keep unknown fields in the item's metadata",
        f'{path}:6: human_prefers: expected "answer_1", "answer_2" or "tie" (or 1, 2, 0), got \'left\'',
        f"{path}:7: answer_2: identical to 'answer_1'; a comparison needs two different answers",
    ]
    assert report.formats == {"rollout": 1, "human_eval": 1}  # the valid records


def test_rollouts_import_as_one_answer_items_and_human_eval_as_verdicts(tmp_path, sqlite_url):
    engine = open_db(sqlite_url)
    with transaction(engine) as s:
        repo.create_project(s, "p", kinds=["pairwise", "unary"])
    path = jsonl(
        tmp_path / "in.jsonl",
        [
            {"prompt": "Hi", "response": "Hello", "reward": 1.5, "model": "v1"},
            {
                "prompt": "Hi",
                "response": "Hello",
                "reward": 1.5,
                "model": "v2",
            },  # same answer, another model
            {"prompt": "Hi", "response": "", "model": "v3"},  # an empty answer is an answer
            {
                "prompt": "Q",
                "answer_1": "A",
                "answer_2": "B",
                "human_prefers": "tie",
                "model_1": "v1",
                "model_2": "v2",
                "labeler": "carol",
            },
        ],
    )
    report = import_files(engine, "p", [path])
    assert (report.items_added, report.judgments_added) == (4, 1)
    with transaction(engine) as s:
        stored = list(repo.iter_items_with_judgments(s, repo.get_project(s, "p")))
    got = {i.item.prompt: i for i in stored}
    rollouts = [i.item for i in stored if i.item.prompt == "Hi"]
    assert [(r.candidates[0].text, r.candidates[0].model, r.metadata) for r in rollouts] == [
        ("Hello", "v1", {"reward": 1.5}),
        ("Hello", "v2", {"reward": 1.5}),
        ("", "v3", {}),
    ]
    assert import_files(engine, "p", [path]).already_imported
    pair = got["Q"]
    assert [(c.text, c.model) for c in pair.item.candidates] == [("A", "v1"), ("B", "v2")]
    (j,) = pair.judgments
    assert (j.winner, j.strength, j.provenance.rater_id, j.provenance.source) == (
        "tie",
        0,
        "carol",
        "human",
    )
    assert j.shown_order == (pair.item.candidates[0].id, pair.item.candidates[1].id)


def test_to_label_writes_unlabelled_pairs_blind_and_reimports_as_the_same_items(
    tmp_path, sqlite_url
):
    engine = open_db(sqlite_url)
    with transaction(engine) as s:
        repo.create_project(s, "p")
        repo.create_project(s, "copy")
    items = [
        {
            "id": f"it-{i}",
            "prompt": f"Q{i}",
            "answer_a": f"A{i}",
            "answer_b": f"B{i}",
            "model_a": "secret-a",
            "model_b": "secret-b",
        }
        for i in range(4)
    ]
    items.append({"id": "three", "prompt": "Q", "candidates": ["x", "y", "z"]})
    a0, b0 = Candidate(text="A0").id, Candidate(text="B0").id
    labelled = {
        "kind": "pairwise",
        "item_id": "it-0",
        "shown_order": [a0, b0],
        "winner": "a",
        "strength": 2,
        "provenance": {"rater_id": "dana"},
    }
    import_files(engine, "p", [jsonl(tmp_path / "items.jsonl", items)])
    import_files(engine, "p", [jsonl(tmp_path / "labels.jsonl", [labelled])])
    manifest = export_project(engine, "p", ExportOptions(format="to-label", out=tmp_path / "out"))
    lines = (tmp_path / "out" / "train.jsonl").read_bytes().splitlines()
    rows = [orjson.loads(x) for x in lines]
    assert rows == [
        {"id": f"it-{i}", "prompt": f"Q{i}", "answer_a": f"A{i}", "answer_b": f"B{i}"}
        for i in (1, 2, 3)
    ]
    assert b"secret" not in b"".join(lines)
    assert manifest["gates"]["to_label"]["reasons"] == {"labelled": 1, "not_two_candidates": 1}
    import_files(engine, "copy", [tmp_path / "out" / "train.jsonl"])
    with transaction(engine) as s:
        copied = {
            i.item.id: i.item
            for i in repo.iter_items_with_judgments(s, repo.get_project(s, "copy"))
        }
        original = {
            i.item.id: i.item for i in repo.iter_items_with_judgments(s, repo.get_project(s, "p"))
        }
    for r in rows:
        assert [c.text for c in copied[r["id"]].candidates] == [
            c.text for c in original[r["id"]].candidates
        ]


def test_rollouts_export_writes_every_answer_once_with_model_and_reward(tmp_path, sqlite_url):
    engine = open_db(sqlite_url)
    with transaction(engine) as s:
        repo.create_project(s, "p")
    rows = [
        {"prompt": "Q1", "answer_a": "A", "answer_b": "B", "model_a": "v1", "model_b": "v2"},
        {
            "id": "again",
            "prompt": "Q1",
            "answer_a": "A",
            "answer_b": "C",
            "model_a": "v1",
            "model_b": "v3",
        },
        {"prompt": "Q2", "response": "R", "reward": 0.25, "model": "v1"},
    ]
    import_files(engine, "p", [jsonl(tmp_path / "in.jsonl", rows)])
    export_project(engine, "p", ExportOptions(format="rollouts", out=tmp_path / "out"))
    out = [orjson.loads(x) for x in (tmp_path / "out" / "train.jsonl").read_bytes().splitlines()]
    assert sorted(out, key=lambda r: (r["prompt"], r["response"])) == [
        {
            "prompt": "Q1",
            "response": "A",
            "reward": None,
            "model": "v1",
        },  # on two items, written once
        {"prompt": "Q1", "response": "B", "reward": None, "model": "v2"},
        {"prompt": "Q1", "response": "C", "reward": None, "model": "v3"},
        {"prompt": "Q2", "response": "R", "reward": 0.25, "model": "v1"},
    ]
    assert validate_files([tmp_path / "out" / "train.jsonl"], ImportOptions()).formats == {
        "rollout": 4
    }
