"""``validate`` runs the very checks ``import`` runs: the same bad files give the same problems,
word for word (both call :func:`preflab.io.importer.checks.check_record`)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from preflab.io.importer import ImportFailed, ImportOptions, import_files, validate_files
from preflab.store import db, repo, transaction

FIXTURES = Path(__file__).resolve().parent.parent / "data"
ALL_KINDS = ("pairwise", "ranking", "rubric", "unary", "steps", "demonstration")
PROV = {"rater_id": "r1"}


def bad_file(tmp_path: Path) -> Path:
    """One problem of each kind a file can show about itself, among good records."""
    records = [
        {
            "id": "q",
            "prompt": "p",
            "candidates": [{"id": "a", "text": "A"}, {"id": "b", "text": "B"}],
        },
        {"kind": "unary", "item_id": "q", "candidate_id": "a", "label": True, "provenance": PROV},
        # a candidate the item does not have
        {
            "kind": "pairwise",
            "item_id": "q",
            "shown_order": ["a", "z"],
            "winner": "a",
            "strength": 1,
            "provenance": PROV,
        },
        # the same id with other content
        {"id": "q", "prompt": "another prompt", "candidates": ["a", "b"]},
        # another id, the same content as q: an alias of q; then that alias with other content
        {
            "id": "q2",
            "prompt": "p",
            "candidates": [{"id": "a", "text": "A"}, {"id": "b", "text": "B"}],
        },
        {
            "id": "q2",
            "prompt": "p",
            "candidates": [{"id": "a", "text": "A"}, {"id": "c", "text": "C"}],
        },
        # wrong types, an unknown field, a lean comparison that is not one
        {"prompt": "p", "chosen": "a", "rejected": 3},
        {"prompt": "p", "chosen": "x", "rejected": "y", "labeler": "r1", "vendor": "acme"},
        {"prompt": "p", "chosen": "same", "rejected": "same"},
    ]
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records) + b'{"prompt": "p", \n')
    return path


@pytest.fixture
def engine(db_url):
    engine = db.open_db(db_url)
    with transaction(engine) as s:
        repo.create_project(s, "p", kinds=ALL_KINDS)
    yield engine
    engine.dispose()


def import_problems(engine, paths) -> list[str]:
    with pytest.raises(ImportFailed) as failed:
        import_files(engine, "p", paths, ImportOptions(max_errors=100))
    assert failed.value.total == len(failed.value.problems)
    return [str(p) for p in failed.value.problems]


def validate_problems(paths) -> list[str]:
    report = validate_files(paths, ImportOptions(max_errors=100))
    assert report.total_problems == len(report.problems)
    return [str(p) for p in report.problems]


def test_validate_and_import_report_the_same_problems_in_the_same_words(engine, tmp_path):
    paths = [bad_file(tmp_path)]
    from_import = import_problems(engine, paths)
    assert len(from_import) == 7, from_import  # every bad record above is found
    assert validate_problems(paths) == from_import


def test_the_same_for_a_real_data_set_with_bad_records(engine):
    paths = [FIXTURES / "pandalm-170.json"]
    from_import = import_problems(engine, paths)
    assert len(from_import) == 6
    assert validate_problems(paths) == from_import
