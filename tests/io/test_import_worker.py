"""Large imports convert records in a second process: same rows, same problems, same failures.

``PREFLAB_IMPORT_WORKER=1|0`` forces the converting process on or off whatever the file size,
so every case here runs both ways and compares what ends up in the database.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from sqlalchemy import select

from preflab.io.importer import ImportFailed, ImportOptions, WorkerFailed, import_files
from preflab.io.importer import worker as importer_worker
from preflab.store import db, repo, transaction
from preflab.store.models import CandidateRow, ItemRow, JudgmentRow, Rater

FIXTURES = Path(__file__).resolve().parent.parent / "data"


def mixed_file(tmp_path: Path, n: int = 2500) -> Path:
    """Plain comparisons (the lean path) mixed with other shapes, a repeat and a chat prompt."""
    lines = []
    for i in range(n):
        lines.append(
            {
                "prompt": f"q{i}",
                "chosen": f"good {i}",
                "rejected": f"bad {i}",
                "labeler": f"r{i % 7}",
            }
        )
        if i % 100 == 0:
            lines.append({"prompt": f"rank {i}", "candidates": [f"x{i}", f"y{i}", f"z{i}"]})
            lines.append(
                {
                    "prompt": f"q{i}",
                    "chosen": f"good {i}",
                    "rejected": f"bad {i}",
                    "labeler": f"r{i % 7}",
                }
            )
            lines.append(
                {
                    "prompt": [{"role": "user", "content": f"chat {i}"}],
                    "chosen": [{"role": "assistant", "content": f"c{i}"}],
                    "rejected": [{"role": "assistant", "content": f"d{i}"}],
                }
            )
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in lines))
    return path


def snapshot(engine) -> dict[str, list[tuple]]:
    """Every row that matters, without surrogate keys or timestamps."""
    with engine.connect() as conn:
        items = conn.execute(
            select(ItemRow.item_key, ItemRow.content_hash, ItemRow.prompt).order_by(
                ItemRow.item_key
            )
        ).all()
        candidates = conn.execute(
            select(
                ItemRow.item_key,
                CandidateRow.candidate_key,
                CandidateRow.position,
                CandidateRow.text,
            )
            .join(ItemRow, ItemRow.pk == CandidateRow.item_pk)
            .order_by(ItemRow.item_key, CandidateRow.position)
        ).all()
        judgments = conn.execute(
            select(
                ItemRow.item_key,
                Rater.rater_key,
                JudgmentRow.kind,
                JudgmentRow.body,
                JudgmentRow.score,
                JudgmentRow.content_hash,
                JudgmentRow.rationale,
                JudgmentRow.idempotency_key,
            )
            .join(ItemRow, ItemRow.pk == JudgmentRow.item_pk)
            .join(Rater, Rater.pk == JudgmentRow.rater_pk)
            .order_by(JudgmentRow.content_hash)
        ).all()
    return {
        "items": [tuple(r) for r in items],
        "candidates": [tuple(r) for r in candidates],
        "judgments": [tuple(r) for r in judgments],
    }


def fresh(tmp_path: Path, name: str):
    engine = db.open_db(f"sqlite:///{tmp_path / name}")
    with transaction(engine) as s:
        repo.create_project(s, "p", kinds=["pairwise", "ranking"])
    return engine


@pytest.mark.parametrize("skip_invalid", [False, True])
def test_second_process_writes_what_the_first_would(tmp_path, monkeypatch, skip_invalid):
    path = mixed_file(tmp_path)
    reports, snaps = [], []
    for worker in ("0", "1"):
        monkeypatch.setenv("PREFLAB_IMPORT_WORKER", worker)
        monkeypatch.setattr(importer_worker, "HEAD", 100)  # the rest converted by the other
        engine = fresh(tmp_path, f"w{worker}.db")
        reports.append(import_files(engine, "p", [path], ImportOptions(skip_invalid=skip_invalid)))
        snaps.append(snapshot(engine))
        engine.dispose()
    (inline, child), (inline_rows, child_rows) = reports, snaps
    assert inline.items_added == child.items_added == 2500 + 25 * 2
    assert inline.judgments_added == child.judgments_added == 2500 + 25
    assert inline.judgments_existing == child.judgments_existing == 25
    assert inline.formats == child.formats
    assert inline_rows == child_rows
    assert len(child_rows["judgments"]) == 2525


def test_second_process_reports_the_same_problems_by_line(tmp_path, monkeypatch):
    path = mixed_file(tmp_path, n=300)
    with path.open("ab") as f:
        f.write(b'{"prompt": "q", "chosen": "same", "rejected": "same"}\n')
        f.write(b"{not json\n")
        f.write(b'{"prompt": "q", "chosen": "a", "rejected": "b", "strength": 9}\n')
    messages = []
    for worker in ("0", "1"):
        monkeypatch.setenv("PREFLAB_IMPORT_WORKER", worker)
        monkeypatch.setattr(importer_worker, "HEAD", 100)  # the rest converted by the other
        engine = fresh(tmp_path, f"bad{worker}.db")
        with pytest.raises(ImportFailed) as info:
            import_files(engine, "p", [path])
        assert snapshot(engine) == {"items": [], "candidates": [], "judgments": []}, (
            "nothing half-written"
        )
        engine.dispose()
        messages.append([str(p) for p in info.value.problems])
    assert messages[0] == messages[1]
    assert len(messages[1]) == 3
    assert messages[1][0].startswith(f"{path}:310: rejected:")


def test_a_failing_converter_fails_the_import_and_says_why(tmp_path):
    """The child raises (here: a format name it cannot know); the parent raises WorkerFailed."""
    path = mixed_file(tmp_path, n=10)
    with pytest.raises(WorkerFailed, match="unknown record format 'no-such-format'"):
        with importer_worker.worker_chunks(
            [path], ImportOptions(format="no-such-format"), None
        ) as chunks:
            list(chunks)


def test_the_second_process_is_used_for_large_files_and_a_free_core_only(tmp_path, monkeypatch):
    small = mixed_file(tmp_path, n=10)
    monkeypatch.delenv("PREFLAB_IMPORT_WORKER", raising=False)
    monkeypatch.setattr(importer_worker, "idle_cores", lambda: 1.0)
    assert importer_worker.use_worker([small]) is False  # too small to pay for a process
    monkeypatch.setattr(importer_worker, "PARALLEL_MIN_BYTES", small.stat().st_size)
    assert importer_worker.use_worker([small]) is True
    monkeypatch.setattr(importer_worker, "idle_cores", lambda: 0.3)
    assert importer_worker.use_worker([small]) is False  # no core to spare
    monkeypatch.setenv("PREFLAB_IMPORT_WORKER", "1")
    assert importer_worker.use_worker([small]) is True
    monkeypatch.setenv("PREFLAB_IMPORT_WORKER", "0")
    assert importer_worker.use_worker([small]) is False


def test_idle_cores_reads_the_machine():
    """A busy loop in this process takes most of one core: fewer idle cores than there are."""
    import threading

    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            pass

    cores = len(importer_worker.os.sched_getaffinity(0))
    quiet = importer_worker.idle_cores(0.2)
    worker = threading.Thread(target=spin)
    worker.start()
    try:
        busy = importer_worker.idle_cores(0.2)
    finally:
        stop.set()
        worker.join()
    assert 0.0 <= busy <= cores and 0.0 <= quiet <= cores
    if (
        cores == importer_worker.os.cpu_count()
    ):  # (a process pinned to some of the cores cannot tell which are idle)
        assert busy <= cores - 0.5, (busy, quiet)


def test_the_converting_process_starts_after_the_records_the_writer_converted(tmp_path):
    """``records(skip=n)`` (the converting process's start) yields what ``records()`` yields from
    its ``n``-th result on, across files and counting a line that cannot be read as a record."""
    from preflab.io.importer.convert import records

    first = mixed_file(tmp_path, n=30)
    with first.open("ab") as f:
        f.write(b"{not json\n")
    (tmp_path / "second").mkdir()
    second = mixed_file(tmp_path / "second", n=20)
    everything = [(r.file, r.line) for r in records([first, second], ImportOptions(), None)]
    for skip in (0, 1, 33, 34, len(everything) - 1, len(everything), len(everything) + 5):
        rest = records([first, second], ImportOptions(), None, skip=skip)
        assert [(r.file, r.line) for r in rest] == everything[skip:], skip


def test_an_import_that_stops_early_stops_the_converting_process(tmp_path, monkeypatch):
    """The converting process starts before the files are hashed; files imported before read
    nothing, and the process is ended rather than waited for."""
    monkeypatch.setenv("PREFLAB_IMPORT_WORKER", "1")
    started = []
    popen = importer_worker.subprocess.Popen

    def spy(*args, **kwargs):
        started.append(popen(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(importer_worker.subprocess, "Popen", spy)
    path = mixed_file(tmp_path, n=50)
    engine = fresh(tmp_path, "again.db")
    assert import_files(engine, "p", [path]).judgments_added == 51
    assert import_files(engine, "p", [path]).already_imported
    engine.dispose()
    finished, stopped = started
    assert finished.returncode == 0
    assert stopped.returncode == -9, "killed, not waited for"
