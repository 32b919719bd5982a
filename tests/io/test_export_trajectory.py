"""``rlhf-2026.11``: the normative trajectory round-trips import → store → export → import →
export with identical JSON, on SQLite and PostgreSQL (issue 13, section 3)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from preflab.io.export import ExportOptions, export_project
from preflab.io.importer import import_files
from preflab.store import db, repo, transaction

NORMATIVE = Path(__file__).resolve().parent.parent / "data" / "trajectory-rlhf-2026.11.json"


@pytest.fixture
def engine(db_url):
    engine = db.open_db(db_url)
    with transaction(engine) as s:
        for name in ("first", "second"):
            repo.create_project(s, name, kinds=["steps", "pairwise"])
    yield engine
    engine.dispose()


def export_lines(engine, project: str, out: Path, **kw) -> bytes:
    manifest = export_project(engine, project, ExportOptions(format="rlhf-2026.11", out=out, **kw))
    assert manifest["format"] == "rlhf-2026.11"
    return (out / "train.jsonl").read_bytes()


def test_the_normative_example_round_trips(engine, tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_bytes(NORMATIVE.read_bytes().strip() + b"\n")
    other = tmp_path / "pairs.jsonl"
    other.write_text('{"prompt": "p", "chosen": "a", "rejected": "b"}\n')
    import_files(engine, "first", [source, other])
    first = export_lines(engine, "first", tmp_path / "out1")
    assert [orjson.loads(line) for line in first.splitlines()] == [
        orjson.loads(NORMATIVE.read_bytes())
    ]
    if engine.dialect.name == "sqlite":
        # byte-equal too: models' keys come out in the schema's order; free-form objects
        # (rubric, args) keep their stored order, which PostgreSQL's JSONB normalises
        assert first == source.read_bytes()
    import_files(engine, "second", [tmp_path / "out1" / "train.jsonl"])
    assert export_lines(engine, "second", tmp_path / "out2") == first


def test_the_annotator_hash_is_kept_as_given_even_with_rater_ids_hidden(engine, tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_bytes(NORMATIVE.read_bytes().strip() + b"\n")
    import_files(engine, "first", [source])
    [record] = [orjson.loads(x) for x in export_lines(engine, "first", tmp_path / "o").splitlines()]
    assert record["telemetry"]["annotator_hash"] == "hmac_sha256:77a1e09c"
    assert record["turns"][1]["tool_call"] == {
        "name": "apply_patch_and_test",
        "args": {"diff_lines": 19},
    }
    assert [t["loss_mask"] for t in record["turns"]] == [0, 1, 0]


def test_items_that_are_not_trajectories_are_left_out_and_counted(engine, tmp_path):
    other = tmp_path / "pairs.jsonl"
    other.write_text('{"prompt": "p", "chosen": "a", "rejected": "b"}\n')
    import_files(engine, "first", [other])
    out = tmp_path / "o"
    manifest = export_project(engine, "first", ExportOptions(format="rlhf-2026.11", out=out))
    assert (out / "train.jsonl").read_bytes() == b""
    assert "not_trajectory" in orjson.dumps(manifest).decode()
