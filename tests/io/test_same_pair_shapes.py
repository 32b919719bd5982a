"""The same pair in two shapes (issue 28 section 4): an item whose candidates have their own ids
and records of the same prompt and answers without them (TRL rows, pairs to label) cannot be one
item without renaming the candidates inside every judgment, so the import refuses the second
shape with a line-exact error that says what to do, in either order, in one file or across
imports, on the lean and the staged path; ``validate`` says the same."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from sqlalchemy import select

from preflab.io.importer import ImportFailed, import_files, validate_files
from preflab.io.importer import worker as importer_worker
from preflab.store import db, repo, transaction
from preflab.store.models import ItemRow

ITEM = {
    "id": "q1",
    "prompt": "Which is better?",
    "candidates": [{"id": "a", "text": "Answer one."}, {"id": "b", "text": "Answer two."}],
}
ALICE = {
    "kind": "pairwise",
    "item_id": "q1",
    "shown_order": ["a", "b"],
    "winner": "a",
    "strength": 2,
    "provenance": {"rater_id": "alice"},
}
BOB = {
    "prompt": "Which is better?",
    "chosen": "Answer one.",
    "rejected": "Answer two.",
    "labeler": "bob",
}
CAROL = {
    "prompt": "Which is better?",
    "chosen": "Answer two.",
    "rejected": "Answer one.",
    "labeler": "carol",
}


@pytest.fixture
def engine(db_url):
    engine = db.open_db(db_url)
    with transaction(engine) as s:
        repo.create_project(s, "p", kinds=("pairwise", "ranking"))
    yield engine
    engine.dispose()


def jsonl(path: Path, *records) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


def item_keys(engine) -> list[str]:
    with engine.connect() as conn:
        return sorted(conn.execute(select(ItemRow.item_key)).scalars())


def refused(engine, path: Path) -> list[str]:
    with pytest.raises(ImportFailed) as failed:
        import_files(engine, "p", [path])
    return [str(p) for p in failed.value.problems]


@pytest.mark.parametrize("worker", ["0", "1"])
def test_trl_rows_of_an_item_with_candidate_ids_are_refused_in_one_file(
    engine, tmp_path, monkeypatch, worker
):
    # before: two items (q1 and the TRL rows' itm_...), one claiming n_raters 1, agreement 1.0
    monkeypatch.setenv("PREFLAB_IMPORT_WORKER", worker)
    monkeypatch.setattr(
        importer_worker, "HEAD", 1
    )  # the comparisons converted by the other process
    path = jsonl(tmp_path / "mixed.jsonl", ITEM, ALICE, BOB, CAROL)
    problems = refused(engine, path)
    assert len(problems) == 2
    assert problems[0].startswith(f"{path}:3: id: the same prompt and answers are item 'q1'")
    assert problems[1].startswith(f"{path}:4: id: the same prompt and answers are item 'q1'")
    assert "'a', 'b'" in problems[0] and "item_id" in problems[0]
    assert item_keys(engine) == []  # all or nothing


@pytest.mark.parametrize("worker", ["0", "1"])
def test_trl_rows_imported_later_are_refused(engine, tmp_path, monkeypatch, worker):
    monkeypatch.setenv("PREFLAB_IMPORT_WORKER", worker)
    monkeypatch.setattr(importer_worker, "HEAD", 0)
    import_files(engine, "p", [jsonl(tmp_path / "item.jsonl", ITEM, ALICE)])
    path = jsonl(tmp_path / "trl.jsonl", BOB, CAROL)
    problems = refused(engine, path)
    assert [p.split(": ")[0:2] for p in problems] == [[f"{path}:1", "id"], [f"{path}:2", "id"]]
    assert "item 'q1'" in problems[0]
    assert item_keys(engine) == ["q1"]


@pytest.mark.parametrize("worker", ["0", "1"])
def test_an_item_with_candidate_ids_after_trl_rows_is_refused(
    engine, tmp_path, monkeypatch, worker
):
    monkeypatch.setenv("PREFLAB_IMPORT_WORKER", worker)
    monkeypatch.setattr(importer_worker, "HEAD", 0)
    import_files(engine, "p", [jsonl(tmp_path / "trl.jsonl", BOB, CAROL)])
    (derived,) = item_keys(engine)
    path = jsonl(tmp_path / "item.jsonl", ITEM, ALICE)
    problems = refused(engine, path)
    assert problems[0].startswith(
        f"{path}:1: candidates: the same prompt and answers are already item {derived!r}"
    )
    # the judgment of the refused item has no item either
    assert problems[1].startswith(f"{path}:2: item_id: no item 'q1'")
    # in one file, the same
    path = jsonl(tmp_path / "both.jsonl", BOB, ITEM)
    fresh = refused(engine, path)
    assert fresh[0].startswith(
        f"{path}:2: candidates: the same prompt and answers are already item"
    )


def test_two_sets_of_own_candidate_ids_stay_two_items_and_the_idless_shape_is_refused(
    engine, tmp_path
):
    # as before: a gold copy of a production pair, or two data sets' own ids, are two items
    other = {
        **ITEM,
        "id": "q2",
        "candidates": [
            {"id": "first", "text": "Answer two."},
            {"id": "second", "text": "Answer one."},
        ],
    }
    import_files(engine, "p", [jsonl(tmp_path / "two.jsonl", ITEM, other)])
    assert item_keys(engine) == ["q1", "q2"]
    # a record without candidate ids is refused, naming the first
    path = jsonl(tmp_path / "trl.jsonl", BOB)
    (problem,) = refused(engine, path)
    assert problem.startswith(f"{path}:1: id: the same prompt and answers are item 'q1'")


def test_an_own_item_id_with_derived_candidate_ids_is_the_idless_shape(engine, tmp_path):
    named = {"id": "z", "prompt": ITEM["prompt"], "candidates": ["Answer one.", "Answer two."]}
    import_files(engine, "p", [jsonl(tmp_path / "item.jsonl", ITEM)])
    path = jsonl(tmp_path / "named.jsonl", named)
    (problem,) = refused(engine, path)
    assert problem.startswith(f"{path}:1: id: the same prompt and answers are item 'q1'")
    # the other order: the item with its own candidate ids is refused
    path = jsonl(tmp_path / "both.jsonl", named, {**ITEM, "id": "q9"})
    fresh = refused(engine, path)
    assert fresh[0].startswith(f"{path}:1: id: the same prompt and answers are item 'q1'")


def test_the_labels_written_as_judgments_of_the_item_are_one_item(engine, tmp_path):
    # what the error says to do: the TRL rows as judgments of q1
    bob = {**ALICE, "winner": "a", "strength": None, "provenance": {"rater_id": "bob"}}
    carol = {**ALICE, "winner": "b", "strength": None, "provenance": {"rater_id": "carol"}}
    import_files(engine, "p", [jsonl(tmp_path / "ok.jsonl", ITEM, ALICE, bob, carol)])
    assert item_keys(engine) == ["q1"]


def test_the_same_item_again_and_derived_candidate_ids_still_join(engine, tmp_path):
    import_files(engine, "p", [jsonl(tmp_path / "a.jsonl", ITEM, ALICE)])
    again = import_files(engine, "p", [jsonl(tmp_path / "b.jsonl", {**ITEM}, {**ALICE})])
    assert (again.items_added, again.judgments_added) == (0, 0)
    # an item with an id but without candidate ids is the TRL rows' pair: it joins them
    named = {"id": "z", "prompt": "Q", "candidates": ["A", "B"]}
    import_files(
        engine,
        "p",
        [
            jsonl(
                tmp_path / "c.jsonl",
                {"prompt": "Q", "chosen": "A", "rejected": "B", "labeler": "x"},
                named,
            )
        ],
    )
    assert len(item_keys(engine)) == 2


def test_validate_says_what_import_says(tmp_path):
    path = jsonl(tmp_path / "mixed.jsonl", ITEM, ALICE, BOB)
    report = validate_files([path])
    assert [str(p) for p in report.problems][0].startswith(
        f"{path}:3: id: the same prompt and answers are item 'q1'"
    )
    path = jsonl(tmp_path / "other.jsonl", BOB, ITEM)
    report = validate_files([path])
    assert str(report.problems[0]).startswith(
        f"{path}:2: candidates: the same prompt and answers are already item"
    )


def test_samples_and_model_comparisons_keep_their_own_ids(engine, tmp_path):
    # tulu-style / human_eval comparisons of named models are not refused: the models tell them apart
    ev = {
        "prompt": "Which is better?",
        "answer_1": "Answer one.",
        "answer_2": "Answer two.",
        "human_prefers": "answer_1",
        "model_1": "m1",
        "model_2": "m2",
        "labeler": "dan",
    }
    import_files(engine, "p", [jsonl(tmp_path / "ev.jsonl", ITEM, ev, {**ev, "model_2": "m3"})])
    assert len(item_keys(engine)) == 3
