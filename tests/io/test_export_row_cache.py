"""The pair formats read the project once (issue 27): pass 1 builds the rows, pass 2 writes them.

:mod:`preflab.io.export.row_cache` keeps each chunk's rows as pass 1 built them; pass 2 reads the
project again only when they cannot serve (a chat item or an AI label first met in a later
chunk changes the columns). Either way the files are the reference's bytes.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import orjson
import pytest

from preflab.io.export import columnar, stream
from preflab.io.importer import ImportOptions, import_files
from preflab.store import db, repo, transaction

HERE = Path(__file__).resolve().parent


def _module(name: str, file: str):
    """A helper module beside this file (``tests/io`` is not a package)."""
    spec = importlib.util.spec_from_file_location(name, HERE / file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_streaming = _module("export_streaming_helpers", "test_export_streaming.py")
assert_identical = _streaming.assert_identical
STREAMED = _streaming.STREAMED


def _record(n: int, rater: str, *, chat: bool = False, ai: bool = False) -> dict:
    prompt = [{"role": "user", "content": f"Question {n}?"}] if chat else f"Question {n}?"
    record = {
        "prompt": prompt,
        "chosen": f"a fine answer to question {n}",
        "rejected": f"a poor answer to question {n}",
        "labeler": rater,
        "strength": 1 + n % 3,
    }
    if chat:
        record["chosen"] = [{"role": "assistant", "content": record["chosen"]}]
        record["rejected"] = [{"role": "assistant", "content": record["rejected"]}]
    if ai:
        record["source"] = "ai"
    return record


def _project(db_url: str, tmp_path: Path, *, chat_at: int = -1, ai_at: int = -1):
    """Eight items judged by two raters; item ``chat_at`` a chat, ``ai_at`` labelled by a model."""
    engine = db.open_db(db_url)
    with transaction(engine) as s:
        repo.create_project(s, "rc", kinds=["pairwise"])
    records = [
        _record(n, rater, chat=n == chat_at, ai=n == ai_at and rater == "v")
        for n in range(8)
        for rater in ("u", "v")
    ]
    path = tmp_path / "rc.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    import_files(engine, "rc", [path], ImportOptions())
    return engine


@pytest.fixture
def reads(monkeypatch):
    """The passes that read the project (calls of the streamed export's reader)."""
    calls: list[int] = []
    reader = stream.iter_items_with_judgments

    def counted(*args, **kw):
        calls.append(1)
        return reader(*args, **kw)

    monkeypatch.setattr(stream, "iter_items_with_judgments", counted)
    # the items of plain pairwise labels read from their rows (.columnar): the same one read
    rows_reader = columnar.plain_chunks

    def counted_rows(*args, **kw):
        calls.append(1)
        return rows_reader(*args, **kw)

    monkeypatch.setattr(columnar, "plain_chunks", counted_rows)
    monkeypatch.setattr(stream, "CHUNK_ITEMS", 3)
    return calls


def _export_each(engine, tmp_path: Path, reads: list[int], kw: dict) -> list[int]:
    """Every pair format to JSONL, Parquet and ``hf``, each the reference's bytes; the reads
    each export made."""
    out = []
    for fmt in STREAMED:
        for file_format in ("jsonl", "parquet", "hf"):
            before = len(reads)
            assert assert_identical(engine, "rc", fmt, file_format, kw, "majority", tmp_path)
            out.append(len(reads) - before)
    written = [p for p in (tmp_path / "new").rglob("train.jsonl")]
    assert written and all(len(p.read_bytes().splitlines()) == 8 for p in written)
    return out


def test_a_text_project_is_read_once(db_url, tmp_path, frozen_clock, reads):
    engine = _project(db_url, tmp_path)
    assert _export_each(engine, tmp_path, reads, {}) == [1] * 9
    engine.dispose()


def test_ai_labels_from_the_first_chunk_on_are_read_once(db_url, tmp_path, frozen_clock, reads):
    """The ``source`` column is built from the first chunk: every chunk's rows have it."""
    engine = _project(db_url, tmp_path, ai_at=0)
    assert _export_each(engine, tmp_path, reads, {"include_ai": True}) == [1] * 9
    engine.dispose()


@pytest.mark.parametrize("late", ["chat", "ai"])
def test_a_change_of_columns_in_a_later_chunk_reads_again(
    db_url, tmp_path, frozen_clock, reads, late
):
    """A chat item (conversational columns) or an AI label (a ``source`` column) first met in
    the last chunk: the earlier chunks' rows do not serve, pass 2 reads the project again."""
    where = {"chat_at": 7} if late == "chat" else {"ai_at": 7}
    engine = _project(db_url, tmp_path, **where)
    kw = {"include_ai": True} if late == "ai" else {}
    assert _export_each(engine, tmp_path, reads, kw) == [2] * 9
    engine.dispose()


def test_provenance_columns_are_read_once(db_url, tmp_path, frozen_clock, reads):
    engine = _project(db_url, tmp_path)
    kw = {"provenance_columns": True}
    assert _export_each(engine, tmp_path, reads, kw) == [1] * 9
    engine.dispose()
