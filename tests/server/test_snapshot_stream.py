"""Issue 27: the snapshot's process computes the panels and the review queues with one
near-duplicate search and one assessment of the held-out labels, spools the queues' entries as
they are computed (:class:`preflab.server.services.review_store.Spool`) and inserts them in
batches; what it stores equals the old computation (the panels of :func:`snapshot.compute_panels`,
the queues of :mod:`review_oracle`, whole), on a generated project with every kind of label and
on the review queues' project with every reason, on both databases."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

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


@pytest.mark.slow
def test_streamed_snapshot_equals_the_old_computation_every_kind(db_url, monkeypatch):
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
    db.dispose()


@pytest.mark.slow
def test_streamed_snapshot_equals_the_old_computation_every_reason(db_url, monkeypatch):
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
    db.dispose()


def test_the_spool_removes_its_file(tmp_path, monkeypatch):
    """A run that fails leaves no temporary file behind."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    with pytest.raises(RuntimeError), review_store.Spool("s") as spool:
        spool.adjudication({"item_id": "x", "reasons": ["r"], "adjudicated": False})
        raise RuntimeError("stopped")
    assert spool.file.closed
    assert list(tmp_path.iterdir()) == []
