"""On SQLite the converting process stages plain comparisons in a SQLite image and the writer
moves them with ``INSERT ... SELECT`` (:mod:`preflab.io.importer.stage`): the same rows, keys
included, as the rows bound in one process; the same checks; nothing left behind on failure."""

from __future__ import annotations

import pickle
import sqlite3
from contextlib import closing
from pathlib import Path

import orjson
import pytest
from sqlalchemy import text

from preflab.io.importer import ImportFailed, ImportOptions, import_files
from preflab.io.importer import loader as importer_loader
from preflab.io.importer import stage as importer_stage
from preflab.io.importer import worker as importer_worker
from preflab.io.importer.stage import _segments
from preflab.io.importer.worker import CHUNK
from preflab.store import db, repo, transaction

#: Every column but ``created_at`` (the import's clock) and the rater hash (keyed by the
#: project's secret), surrogate keys included.
TABLES = {
    "items": "SELECT pk, project_pk, item_key, content_hash, prompt, domains, reference, gold, "
    "metadata, batch_pk FROM items ORDER BY pk",
    "candidates": "SELECT pk, item_pk, candidate_key, position, text, messages, model, source, "
    "metadata FROM candidates ORDER BY pk",
    "judgments": "SELECT pk, project_pk, item_pk, rater_pk, kind, body, rationale, pair_lo, "
    "pair_hi, score, shown_order, rubric_key, rubric_version, guideline_version, review_pass, "
    "source, started_at, submitted_at, telemetry, idempotency_key, content_hash, batch_pk, "
    "excluded, supersedes_pk FROM judgments ORDER BY pk",
    "raters": "SELECT pk, project_pk, rater_key FROM raters ORDER BY pk",  # (hash: per project secret)
    "item_aliases": "SELECT pk, project_pk, alias_key, item_pk FROM item_aliases ORDER BY pk",
}


def plain(i: int, **extra) -> dict:
    return {
        "prompt": f"q{i}",
        "chosen": f"good {i}",
        "rejected": f"bad {i}",
        "labeler": f"r{i % 7}",
    } | extra


def write(path: Path, records: list[dict | bytes]) -> Path:
    path.write_bytes(
        b"".join((r if isinstance(r, bytes) else orjson.dumps(r)) + b"\n" for r in records)
    )
    return path


def big_file(tmp_path: Path) -> Path:
    """More than a chunk of plain comparisons, with everything that takes one off the fast path
    or out of a run: items already in the database, repeats, strengths, other shapes, an alias, and
    (for ``skip_invalid``) bad records."""
    records: list[dict | bytes] = []
    for i in range(CHUNK + 1500):
        records.append(plain(i, strength=3) if i % 11 == 0 else plain(i))
        if i % 500 == 7:
            records.append(plain(i))  # the same comparison again: an existing judgment
            records.append(plain(i, labeler="someone else"))  # a new judgment of a known item
            records.append({"prompt": f"rank {i}", "candidates": [f"x{i}", f"y{i}", f"z{i}"]})
            records.append({"id": f"alias-{i}", **plain(i)})  # another id for a known item
            records.append(b"{not json")
            records.append({"prompt": "q", "chosen": "same", "rejected": "same"})
    return write(tmp_path / "big.jsonl", records)


def earlier_file(tmp_path: Path) -> Path:
    """Imported first: items the big file brings again (the staged rows' generic path)."""
    return write(tmp_path / "earlier.jsonl", [plain(i) for i in range(0, CHUNK + 1500, 97)])


def rows(path: Path) -> dict[str, list[tuple]]:
    with closing(sqlite3.connect(path)) as conn:
        return {name: conn.execute(sql).fetchall() for name, sql in TABLES.items()}


def fresh(path: Path):
    engine = db.open_db(f"sqlite:///{path}")
    with transaction(engine) as s:
        repo.create_project(s, "p", kinds=["pairwise", "ranking"])
    return engine


@pytest.mark.slow
def test_staged_rows_are_the_rows_bound_in_one_process(tmp_path, monkeypatch):
    moved = []
    move_items = importer_stage.Mover.items

    def spy(self, stage, seqs, pks, same):
        moved.append(len(seqs))
        move_items(self, stage, seqs, pks, same)

    monkeypatch.setattr(importer_stage.Mover, "items", spy)
    # the writing process converts the first 700 records itself while the other one starts
    monkeypatch.setattr(importer_worker, "HEAD", 700)
    big, earlier = big_file(tmp_path), earlier_file(tmp_path)
    reports, written = [], []
    for worker in ("0", "1"):
        monkeypatch.setenv("PREFLAB_IMPORT_WORKER", worker)
        engine = fresh(tmp_path / f"w{worker}.db")
        import_files(engine, "p", [earlier])
        reports.append(import_files(engine, "p", [big], ImportOptions(skip_invalid=True)))
        engine.dispose()
        written.append(rows(tmp_path / f"w{worker}.db"))
    in_process, staged = reports
    assert sum(moved) > CHUNK, "the second import went through the stage"
    assert staged.items_added == in_process.items_added == CHUNK + 1500 - 119 + 23
    assert staged.judgments_existing == in_process.judgments_existing
    assert [str(p) for p in staged.skipped] == [str(p) for p in in_process.skipped]
    assert len(staged.skipped) == 2 * 23
    assert written[1] == written[0]
    assert len(written[1]["item_aliases"]) == 23


def test_a_failed_staged_import_writes_nothing_and_leaves_no_stage_attached(tmp_path, monkeypatch):
    monkeypatch.setenv("PREFLAB_IMPORT_WORKER", "1")
    monkeypatch.setattr(importer_worker, "HEAD", 100)
    engine = fresh(tmp_path / "f.db")
    bad = write(
        tmp_path / "bad.jsonl",
        [plain(i) for i in range(300)] + [{"prompt": "q", "chosen": "x", "rejected": "x"}],
    )
    with pytest.raises(ImportFailed, match=rf"{bad}:301: rejected:"):
        import_files(engine, "p", [bad])
    good = write(tmp_path / "good.jsonl", [plain(i) for i in range(300)])
    assert import_files(engine, "p", [good]).judgments_added == 300
    with engine.connect() as conn:  # the pool's one connection, the import's own
        attached = [row[1] for row in conn.execute(text("PRAGMA database_list"))]
    engine.dispose()
    assert "main" in attached and importer_stage.SCHEMA not in attached
    assert len(rows(tmp_path / "f.db")["judgments"]) == 300


@pytest.mark.parametrize(
    "seqs, pks",
    [
        ([0, 1, 2, 3], [10, 11, 12, 13]),
        ([0, 1, 3, 4, 5, 9], [10, 11, 12, 13, 14, 15]),
        ([0, 1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 9, 10, 11]),
        (list(range(0, 10_000, 3)), list(range(5, 5 + 3334))),
        ([], []),
    ],
)
def test_segments_move_every_row_once_in_order_with_its_own_key(seqs, pks):
    segments = _segments(seqs, pks)
    moved = [(seq, seq + delta) for lo, hi, delta in segments for seq in range(lo, hi + 1)]
    assert moved == list(zip(seqs, pks, strict=True))
    for (_, hi, delta), (lo, _, next_delta) in zip(segments, segments[1:]):
        assert not (hi + 1 == lo and delta == next_delta), "neighbours that continue are one"


def test_a_chunk_crosses_the_pipe_whole_either_way(tmp_path):
    """``encode_chunk``/``decode_chunk``: PostgreSQL gets every value of a comparison, SQLite its
    keys and a stage that gives back the same rows for the generic checks."""
    from preflab.io.importer.convert import Pair, Record, records
    from preflab.io.importer.worker import decode_chunk, encode_chunk
    from preflab.store.rows import PairRows

    path = write(
        tmp_path / "few.jsonl",
        [
            plain(1),
            plain(2, strength=2),
            b"{not json",
            {"prompt": "rank", "candidates": ["x", "y"]},
        ],
    )
    chunk = list(records([path], ImportOptions(), None))
    originals = [r.rows for r in chunk if isinstance(r, Pair)]
    for stage in (False, True):
        _, _, *body = pickle.loads(encode_chunk(chunk, 0, stage))
        decoded = decode_chunk(*body)
        assert isinstance(decoded, list)  # other records in it: never accepted whole
        assert [(r.file, r.line, type(r)) for r in decoded] == [
            (r.file, r.line, type(r)) for r in chunk
        ]
        assert [r.problems for r in decoded if isinstance(r, Record)] == [
            r.problems for r in chunk if isinstance(r, Record)
        ]
        rows = [r.rows for r in decoded if isinstance(r, Pair)]
        assert all(type(r) is (importer_stage.StagedRows if stage else PairRows) for r in rows)
        for got, original in zip(rows, originals, strict=True):
            assert (got.item_key, got.item_hash, got.candidate_keys, got.content_hash) == (
                original.item_key,
                original.item_hash,
                original.candidate_keys,
                original.content_hash,
            )
            assert got.item_rows() == original.item_rows()
            assert got.judgment_rows() == original.judgment_rows()


def _decoded(path, seen=None):
    from preflab.io.importer.convert import records
    from preflab.io.importer.worker import decode_chunk, encode_chunk

    chunk = list(records([path], ImportOptions(), None))
    _, _, *body = pickle.loads(encode_chunk(chunk, 0, True, seen))
    return chunk, decode_chunk(*body)


def test_a_chunk_of_new_comparisons_comes_whole_with_its_raters_and_keys(tmp_path):
    """Plain comparisons that repeat no item, content or judgment come as a ``StagedChunk``
    (keys, raters, size) that still gives back the same records row by row; one repeat, or a
    record of another shape, and the chunk comes as records."""
    from preflab.io.importer.worker import StagedChunk

    chunk, whole = _decoded(write(tmp_path / "new.jsonl", [plain(i) for i in range(30)]))
    assert isinstance(whole, StagedChunk)
    assert whole.size == 30
    assert whole.raters == sorted({f"r{i % 7}" for i in range(30)})
    assert whole.keys() == [r.rows.item_key for r in chunk]
    again = whole.records()
    assert [(r.file, r.line, r.rows.item_key, r.rows.content_hash) for r in again] == [
        (r.file, r.line, r.rows.item_key, r.rows.content_hash) for r in chunk
    ]
    for repeated in (
        [plain(1), plain(2), plain(1)],  # the same judgment twice
        [plain(1), plain(2), plain(1, labeler="x")],  # the same item, two raters
        [plain(1), plain(2), {"prompt": "rank", "candidates": ["x", "y"]}],
    ):
        _, decoded = _decoded(write(tmp_path / "again.jsonl", repeated))
        assert isinstance(decoded, list)


def test_the_converting_process_names_the_keys_it_saw_before(tmp_path):
    """``Stage.repeats``: the keys of a staged chunk that earlier chunks had, from the filter the
    converting process keeps across chunks (items of other records included)."""
    seen = importer_stage.WrittenKeys()
    first = [plain(i) for i in range(5)] + [{"prompt": "q9", "candidates": ["good 9", "bad 9"]}]
    _decoded(write(tmp_path / "one.jsonl", first), seen)
    chunk, second = _decoded(write(tmp_path / "two.jsonl", [plain(3), plain(7), plain(9)]), seen)
    keys = [r.rows.item_key for r in chunk]
    assert second.stage.repeats == [keys[0], keys[2]]


def test_an_import_takes_over_a_stage_left_attached_to_its_connection(tmp_path, monkeypatch):
    """Closing the stage is never in the way of an import's outcome; should it fail, the stage
    stays attached to the pooled connection and the next import there uses it."""
    monkeypatch.setenv("PREFLAB_IMPORT_WORKER", "1")
    monkeypatch.setattr(importer_worker, "HEAD", 10)
    engine = fresh(tmp_path / "left.db")
    with engine.connect() as conn:
        conn.exec_driver_sql(f"ATTACH DATABASE ':memory:' AS {importer_stage.SCHEMA}")
    path = write(tmp_path / "few.jsonl", [plain(i) for i in range(50)])
    assert import_files(engine, "p", [path]).judgments_added == 50
    engine.dispose()
    assert len(rows(tmp_path / "left.db")["candidates"]) == 100


def test_the_written_keys_filter_answers_every_key_written_and_few_others():
    """A fresh project's staged chunks look up only the keys the converting process's
    ``WrittenKeys.maybe`` answers: it must never leave out a key it saw (the item would be
    written twice)."""
    from preflab.io.importer.stage import WrittenKeys

    written = WrittenKeys()
    keys = [f"itm_{i:016x}" for i in range(0, 300_000, 3)]
    for i in range(0, len(keys), 10_000):
        written.add(keys[i : i + 10_000])
    assert written.maybe(keys) == keys
    others = [f"itm_{i:016x}" for i in range(1, 300_000, 3)] + ["a plain id", ""]
    assert len(written.maybe(others)) < len(others) / 100
    assert WrittenKeys().maybe(keys) == []
    once = WrittenKeys()  # the converting process's way: asked, then added, one hash a key
    assert once.maybe_then_add(keys[:500]) == []
    assert once.maybe_then_add(keys[400:600] + keys[550:551]) == keys[400:500] + keys[550:551]
    assert once.maybe(keys[:600]) == keys[:600]


def _imported_in_one_and_two_processes(tmp_path, monkeypatch, records):
    """Each import's counts (added items and judgments, existing items and judgments) and its
    rows, without and with the converting process."""
    path = write(tmp_path / "again.jsonl", records)
    counts, written = [], []
    for worker in ("0", "1"):
        monkeypatch.setenv("PREFLAB_IMPORT_WORKER", worker)
        engine = fresh(tmp_path / f"w{worker}.db")
        r = import_files(engine, "p", [path])
        counts.append((r.items_added, r.judgments_added, r.items_existing, r.judgments_existing))
        engine.dispose()
        written.append(rows(tmp_path / f"w{worker}.db"))
    return counts, written


@pytest.mark.parametrize("kept_here", [50_000, 10], ids=["head-kept", "head-too-large"])
def test_a_fresh_projects_staged_chunk_finds_what_earlier_chunks_wrote(
    tmp_path, monkeypatch, kept_here
):
    """In a project with no items before the import, a staged chunk looks up only the keys an
    earlier chunk may have written: those the converting process says it saw before
    (``Stage.repeats``) and those the writer converted itself (the head, kept exactly; when there
    are more than it keeps, the staged chunks are joined with the items instead). Either way
    comparisons of earlier chunks come again and are found, as in one process."""
    monkeypatch.setattr(importer_worker, "HEAD", 100)
    monkeypatch.setattr(importer_loader, "WRITTEN_HERE_MAX", kept_here)
    records = [plain(i) for i in range(1300)] + [plain(500), plain(50), plain(7, labeler="x")]
    whole = []
    load_whole = importer_loader.Loader._load_whole
    monkeypatch.setattr(
        importer_loader.Loader,
        "_load_whole",
        lambda self, chunk: whole.append(load_whole(self, chunk)) or whole[-1],
    )
    counts, written = _imported_in_one_and_two_processes(tmp_path, monkeypatch, records)
    assert counts == [(1300, 1301, 3, 2)] * 2
    assert written[1] == written[0]
    # the first staged chunk new (written whole, when the head was kept), the second not
    assert whole == [kept_here > 100, False]


def test_a_staged_comparison_finds_an_item_another_record_wrote(tmp_path, monkeypatch):
    """An item written by a record of another shape (same content, so the same key) in an
    earlier staged chunk is found when a comparison of it comes later."""
    monkeypatch.setattr(importer_worker, "HEAD", 100)
    records: list = [plain(i) for i in range(1300)]
    records[300] = {"prompt": "q1250", "candidates": ["good 1250", "bad 1250"]}
    records.append(plain(300))
    counts, written = _imported_in_one_and_two_processes(tmp_path, monkeypatch, records)
    assert counts == [(1300, 1300, 1, 0)] * 2
    assert written[1] == written[0]
