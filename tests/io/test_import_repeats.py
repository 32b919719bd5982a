"""Records that judge an item met before (items judged by several raters) take the import's fast
path and its staging, and write exactly the rows they wrote through the generic checks.

``EXPECTED``: the digest of every table after :func:`imports`, computed with the importer before
repeats had a fast path (commit 93c9a20: ``python tests/io/test_import_repeats.py``)."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy import select

from preflab.io.importer import ImportFailed, import_files
from preflab.io.importer import loader as importer_loader
from preflab.io.importer import stage as importer_stage
from preflab.io.importer import worker as importer_worker
from preflab.store import db, repo, transaction
from preflab.store.models import CandidateRow, ImportBatch, ItemAlias, ItemRow, JudgmentRow, Rater

#: sha256 of :func:`digest` after :func:`imports`, with the importer of 93c9a20.
EXPECTED = "c9c542fb783283dbd2ab99ce5942d3f76eab1eaab231fe25fb76d5a77c30aa1b"

N_ITEMS, PER_ITEM = 4000, 3


def plain(i: int, rater: int) -> dict:
    return {
        "prompt": f"q{i}",
        "chosen": f"good {i}",
        "rejected": f"bad {i}",
        "labeler": f"r{rater}",
    }


def records() -> list[dict | bytes]:
    """Each item judged by three raters, in random order (fixed seed): repeats in the same chunk
    and in later ones; with exact repeats (an existing judgment), strengths, other shapes of a
    known item (its candidates listed, another id: an alias), and an item named before by a
    record of another shape."""
    order = [i for i in range(N_ITEMS) for _ in range(PER_ITEM)]
    random.Random(27).shuffle(order)
    seen = [0] * N_ITEMS
    out: list[dict | bytes] = []
    for n, i in enumerate(order):
        rec = plain(i, (i + 5 * seen[i]) % 17)
        seen[i] += 1
        if i % 13 == 0:
            rec["strength"] = 1 + i % 3
        out.append(rec)
        if n % 211 == 5:
            out.append(dict(rec))  # the same judgment again
        if n % 307 == 11:
            out.append({"prompt": f"q{i}", "candidates": [f"good {i}", f"bad {i}"]})
        if n % 401 == 17:
            out.append({"id": f"alias-{i}", **plain(i, 99)})
    return out


def write(path: Path, recs: list[Any]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    return path


def imports(url: str, tmp_path: Path) -> list[tuple[int, int, int, int, bool]]:
    """Two overlapping files (the second brings items and judgments of the first again), the
    first again (already imported) and reversed (nothing new); each import's counts."""
    engine = db.open_db(url)
    with transaction(engine) as s:
        repo.create_project(s, "p", kinds=["pairwise", "ranking"])
    recs = records()
    third = len(recs) // 3
    first = write(tmp_path / "first.jsonl", recs[: 2 * third])
    second = write(tmp_path / "second.jsonl", recs[third:])
    again = write(tmp_path / "reversed.jsonl", recs[: 2 * third][::-1])
    counts = []
    for path in (first, second, first, again):
        r = import_files(engine, "p", [path])
        counts.append(
            (r.items_added, r.judgments_added, r.items_existing, r.judgments_existing,
             r.already_imported)
        )  # fmt: skip
    engine.dispose()
    return counts


def digest(url: str) -> str:
    """sha256 over every table the import writes, rows in key order, surrogate keys included;
    not ``created_at`` (the import's clock), the raters' hashes (the project's secret) or the
    batches' file names. JSON columns as their values, so SQLite and PostgreSQL compare."""
    engine = db.open_db(url)
    h = hashlib.sha256()
    with engine.connect() as conn:
        for model in (ItemRow, CandidateRow, ItemAlias, Rater, JudgmentRow, ImportBatch):
            table = model.__table__
            # judge (0016) and assisted_by (0018), NULL on every imported label, left out: the
            # digest predates them
            skip = ("created_at", "rater_hash", "sources", "judge", "assisted_by")
            columns = [c for c in table.c if c.name not in skip]
            for row in conn.execute(select(*columns).order_by(table.c.pk)):
                h.update(orjson.dumps(list(row), option=orjson.OPT_SORT_KEYS) + b"\n")
    engine.dispose()
    return h.hexdigest()


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 500 records (the converting process's first of 100), the writer converting the
    first 200: a file of a few thousand records crosses every path."""
    monkeypatch.setattr(importer_worker, "CHUNK", 500)
    monkeypatch.setattr(importer_worker, "FIRST_CHUNK", 100)
    monkeypatch.setattr(importer_worker, "HEAD", 200)


@pytest.mark.slow
@pytest.mark.parametrize("worker", ["0", "1"], ids=["in-process", "converting-process"])
def test_repeated_items_write_todays_rows(db_url, tmp_path, monkeypatch, small_chunks, worker):
    """On SQLite the converting process stages the comparisons (the staged fast path); on
    PostgreSQL it sends them (``COPY``)."""
    monkeypatch.setenv("PREFLAB_IMPORT_WORKER", worker)
    fast = []
    check = importer_loader.Loader._check
    monkeypatch.setattr(
        importer_loader.Loader,
        "_check",
        lambda self, rec, state: fast.append(rec) or check(self, rec, state),
    )
    picked = []
    pick = importer_stage._picked
    monkeypatch.setattr(importer_stage, "_picked", lambda *a: picked.append(1) or pick(*a))
    counts = imports(db_url, tmp_path)
    # staged rows scattered by the repeats were moved each with its keys (SQLite's stage)
    assert bool(picked) == (worker == "1" and db_url.startswith("sqlite"))
    assert counts[2][4] and counts[3][:2] == (0, 0)
    assert digest(db_url) == EXPECTED
    # no plain comparison took the generic checks: only the records of other shapes
    assert fast and not any(
        rec.format == "comparison" and rec.items[0].key.startswith("itm_") for rec in fast
    )


@pytest.mark.slow
def test_a_staged_import_lets_go_of_each_chunks_stage(tmp_path, monkeypatch, small_chunks):
    """Every chunk's stage is closed once the chunk is written: a reader left open outlived its
    chunk (memory grew a chunk's image a chunk)."""
    monkeypatch.setenv("PREFLAB_IMPORT_WORKER", "1")
    stages: list[importer_stage.Stage] = []
    init = importer_stage.Stage.__init__

    def keep(self, image, repeats):
        init(self, image, repeats)
        stages.append(self)

    load = importer_loader.Loader.load

    def loaded(self, chunk):
        load(self, chunk)
        assert all(s._reader is None for s in stages)

    monkeypatch.setattr(importer_stage.Stage, "__init__", keep)
    monkeypatch.setattr(importer_loader.Loader, "load", loaded)
    imports(f"sqlite:///{tmp_path / 's.db'}", tmp_path)
    assert len(stages) > 5


@pytest.mark.slow
def test_a_repeat_with_other_content_is_refused_with_its_line(tmp_path, monkeypatch, small_chunks):
    monkeypatch.setenv("PREFLAB_IMPORT_WORKER", "1")
    url = f"sqlite:///{tmp_path / 'r.db'}"
    engine = db.open_db(url)
    with transaction(engine) as s:
        repo.create_project(s, "p", kinds=["pairwise"])
    recs: list[Any] = [plain(i, i % 5) for i in range(900)]
    recs += [plain(i, 7) for i in range(0, 900, 2)]  # repeats of earlier chunks' items
    recs.append({"id": "itm_x", "prompt": "q3", "candidates": ["good 3", "bad 3"]})
    recs.append({"id": "itm_x", "prompt": "q4", "candidates": ["good 4", "bad 4"]})
    recs += [plain(i, 8) for i in range(1, 900, 2)]
    recs.append({"prompt": "q5", "chosen": "good 5", "rejected": "good 5", "labeler": "r9"})
    path = write(tmp_path / "r.jsonl", recs)
    with pytest.raises(ImportFailed) as failed:
        import_files(engine, "p", [path])
    assert failed.value.total == 2
    assert str(failed.value.problems[0]).startswith(
        f"{path}:1352: id: item 'itm_x' (another id of item 'itm_"
    )
    assert str(failed.value.problems[1]).startswith(f"{path}:1803: rejected: ")
    with transaction(engine) as s:
        assert repo.get_project(s, "p") is not None
    with engine.connect() as conn:
        assert conn.execute(select(ItemRow.pk)).first() is None  # nothing written
    engine.dispose()


if __name__ == "__main__":  # the digest with the importer on PYTHONPATH, for EXPECTED
    import sys
    import tempfile

    importer_worker.CHUNK, importer_worker.FIRST_CHUNK, importer_worker.HEAD = 500, 100, 200
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/d.db"
        print(imports(url, Path(tmp)), digest(url), file=sys.stdout)
