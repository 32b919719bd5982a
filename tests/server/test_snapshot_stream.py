"""Issue 27: the snapshot's process computes the panels and the review queues with one
near-duplicate search and one assessment of the held-out labels, spools the queues' entries as
they are computed (:class:`preflab.server.services.review_store.Spool`) and inserts them in
batches; what it stores equals the old computation (the panels of :func:`snapshot.compute_panels`,
the queues of :mod:`review_oracle`, whole), on a generated project with every kind of label and
on the review queues' project with every reason, on both databases; with the near-duplicate
search's chunks and the adjudication keys' runs (both spilled to disk past a bound) splitting
the project and with the defaults (one chunk, one run in memory)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from preflab.quality import near_duplicate_index
from preflab.server import snapshot
from preflab.server.database import Database, init_schema
from preflab.server.services import review_scan, review_store
from preflab.store import repo
from preflab.store.server_models import QualitySnapshot, ReviewQueueEntry

from . import review_oracle, snapshot_oracle
from .test_browse_snapshot import _ref
from .test_review_queues_oracle import _project as queues_project


def _store_project(url: str) -> None:
    """The quality report's generated project with every kind of label (``tests/quality`` is
    not a package: its module is loaded by path)."""
    path = Path(__file__).parents[1] / "quality" / "test_report_streaming.py"
    spec = importlib.util.spec_from_file_location("_report_streaming_project", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.store_project(url)


def _spot_share(db: Database, name: str, share: float = 0.4) -> None:
    """Spot review drawn at a share a small project reaches whatever its secret."""
    with db.writing() as s:
        p = repo.get_project(s, name)
        settings = dict(p.settings or {})
        settings["policy"] = {**settings.get("policy", {}), "spot_review_share": share}
        p.settings = settings


def _plain(value: Any) -> Any:
    """As the JSON column gives it back (tuples as lists)."""
    return json.loads(json.dumps(value))


def _old(db: Database, name: str) -> tuple[dict[str, Any], dict[str, Any], list[tuple[Any, ...]]]:
    """The panels, the queues' summary and their rows as computed before the spool: the whole
    queues, then their entries."""
    project = _ref(db, name)
    with db.reading() as s:
        secret = repo.get_project(s, name).secret
        panels = snapshot.compute_panels(s, project, snapshot.watermark(s, project.pk))
        assert {k: panels[k] for k in ("median_s", "held_out", "near_duplicate_pks")} == (
            snapshot.jsonable(snapshot_oracle.rater_activity(s, project))
        )
        queues = review_oracle.review_queues(s, project)
    rows = [
        (
            e.queue,
            e.position,
            e.entry.get("item_id"),
            e.entry.get("judgment_id"),
            e.draw,
            e.done,
            _plain(e.entry),
        )
        for e in review_store.entries(queues, secret)
    ]
    return panels, review_store.summary(queues), sorted(rows, key=lambda r: r[:2])


def _stored(db: Database, project_pk: int) -> tuple[Any, Any, list[tuple[Any, ...]]]:
    with db.reading() as s:
        row = s.scalar(select(QualitySnapshot).where(QualitySnapshot.project_pk == project_pk))
        assert row is not None
        e = ReviewQueueEntry
        rows = [
            tuple(r)
            for r in s.execute(
                select(e.queue, e.position, e.item_key, e.judgment_pk, e.draw, e.done, e.entry)
                .where(e.project_pk == project_pk)
                .order_by(e.queue, e.position)
            )
        ]
        return row.panels, row.review, rows


def _same(db: Database, name: str) -> list[tuple[Any, ...]]:
    project = _ref(db, name)
    panels, summary, rows = _old(db, name)
    snap = snapshot.refresh(db.url, name, force=True)
    assert snap.panels is not None
    stored_panels, stored_summary, stored_rows = _stored(db, project.pk)
    assert stored_panels == _plain(panels)
    assert stored_summary == _plain(summary)
    assert stored_rows == rows
    return rows


def _spill(monkeypatch: pytest.MonkeyPatch, spill: bool) -> dict[str, int]:
    """Bounds that split this small project: the search's texts signed and spilled 5 at a time,
    the adjudication keys sorted into runs of 2 and merged. Answers the chunks and runs written
    (counted as the runs go)."""
    written = {"chunks": 0, "runs": 0}
    if not spill:
        return written
    monkeypatch.setattr(near_duplicate_index, "SPILL_CHUNK", 5)
    monkeypatch.setattr(review_store, "RUN", 2)
    for cls, name, what in (
        (near_duplicate_index.SpilledSearch, "_flush", "chunks"),
        (review_store.Spool, "_spill", "runs"),
    ):

        def counted(self: Any, _orig: Any = getattr(cls, name), _what: str = what) -> None:
            written[_what] += 1
            _orig(self)

        monkeypatch.setattr(cls, name, counted)
    return written


def _split(written: dict[str, int], spill: bool) -> None:
    """Each refresh (two in all) split the texts into more than one chunk and the keys into
    more than one run when spilling."""
    if spill:
        assert written["chunks"] > 2 and written["runs"] > 2, written


@pytest.mark.slow
@pytest.mark.parametrize("spill", [False, True], ids=["in-memory", "spilled"])
def test_streamed_snapshot_equals_the_old_computation_every_kind(db_url, monkeypatch, spill):
    written = _spill(monkeypatch, spill)
    init_schema(db_url)
    _store_project(db_url)
    db = Database(db_url, pool_size=2, max_overflow=2)
    _spot_share(db, "gen")
    # chunks and insert batches that split the project and the queues
    monkeypatch.setattr(review_scan, "CHUNK", 7)
    monkeypatch.setattr(review_store, "BATCH", 3)
    rows = _same(db, "gen")
    queues = {r[0] for r in rows}
    assert {"adjudication", "spot"} <= queues, queues
    with db.reading() as s:
        panels = s.scalar(select(QualitySnapshot.panels))
    assert panels["near_duplicate_pks"] and panels["median_s"]
    # a second run replaces the entries (no duplicate, no leftover)
    assert _same(db, "gen") == rows
    _split(written, spill)
    db.dispose()


@pytest.mark.slow
@pytest.mark.parametrize("spill", [False, True], ids=["in-memory", "spilled"])
def test_streamed_snapshot_equals_the_old_computation_every_reason(db_url, monkeypatch, spill):
    written = _spill(monkeypatch, spill)
    queues_project(db_url)
    db = Database(db_url, pool_size=2, max_overflow=2)
    _spot_share(db, "demo")
    monkeypatch.setattr(review_scan, "CHUNK", 4)
    monkeypatch.setattr(review_store, "BATCH", 2)
    rows = _same(db, "demo")
    queues = {r[0] for r in rows}
    assert {"adjudication", "spot", "held_out", "weak_by_rater"} <= queues, queues
    assert any(r[5] for r in rows)  # an adjudicated item, ranked after the open ones
    with db.reading() as s:
        held = s.scalar(select(QualitySnapshot.panels))["held_out"]
    assert any(held.values())
    _split(written, spill)
    db.dispose()


def test_the_spool_removes_its_file(tmp_path, monkeypatch):
    """A run that fails leaves no temporary file behind."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    with pytest.raises(RuntimeError), review_store.Spool("s") as spool:
        spool.adjudication({"item_id": "x", "reasons": ["r"], "adjudicated": False})
        raise RuntimeError("stopped")
    assert spool.file.closed and spool.runs.closed
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("run", [1, 2, 7, 1000])
def test_the_spools_runs_merge_to_the_sorted_order(monkeypatch, run):
    """The adjudication keys past ``RUN``: sorted runs on disk, merged to the very order one
    sort in memory gives (ties in reasons and item ids, adjudicated or not, runs of every
    length, a last run not full)."""
    import random

    monkeypatch.setattr(review_store, "RUN", run)
    monkeypatch.setattr(review_store, "RUN_BLOCK", 3)
    rng = random.Random(run)
    entries = [
        {
            "item_id": f"it{rng.randrange(40)}",
            "reasons": ["r"] * rng.randrange(1, 4),
            "adjudicated": rng.random() < 0.3,
        }
        for _ in range(257)
    ]
    with review_store.Spool("s") as spool:
        for e in entries:
            spool.adjudication(e)
            assert len(spool.ranked) < run  # the keys held are bounded
        summary = spool.finish(review_store.Tally([], 0, 0.0, {}), [])
        got = [(e.position, e.entry) for e in spool.rows() if e.queue == "adjudication"]
        assert bool(spool._run_starts) == (run < len(entries))
    order = sorted(
        range(len(entries)), key=lambda i: (review_store.adjudication_order(entries[i]), i)
    )
    assert got == [(rank, entries[i]) for rank, i in enumerate(order)]
    assert summary["counts"]["adjudication"] == len(entries)
