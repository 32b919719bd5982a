"""Issue 27: no data-browser page, dashboard or review page reads the whole project.

The labels a request shows are the snapshot's count plus the judgments stored after its mark (a
range of the partial index ``ix_judgments_project_pk``, capped at ``SINCE_CAP``: "N+"); the
dashboard reads the panels without their near-duplicate pks; the data browser looks the page's
judgments up in that list in SQL.
"""

from __future__ import annotations

import re

import pytest
from sqlalchemy import func, select, text, update

from preflab.server import snapshot
from preflab.server.database import Database
from preflab.server.services import browse
from preflab.store import repo
from preflab.store.models import ItemRow, JudgmentRow
from preflab.store.server_models import QualitySnapshot

from .test_browse_snapshot import _as, _judgment, _project, _ref


def _add_labels(db: Database, items: range, rater: int = 3) -> None:
    with db.writing() as s:
        p = repo.get_project(s, "demo")
        for i in items:
            repo.add_judgment(s, p, _judgment(i, rater, minutes=5))


@pytest.mark.slow
def test_pages_count_no_judgment_of_a_large_project(db_url, app_for, monkeypatch):
    seeded = _project(db_url)
    monkeypatch.setenv("PREFLAB_SNAPSHOT_INLINE_LABELS", "0")
    started: list[str] = []
    monkeypatch.setattr(snapshot, "spawn", lambda url, name: started.append(name))
    db = Database(db_url, pool_size=2, max_overflow=2)
    project = _ref(db)
    snapshot.refresh(db_url, "demo")  # stored, with its mark: no request needs to start one
    with db.reading() as s:
        before = snapshot.watermark(s, project.pk)
        dups = set(snapshot.stored(s, project.pk).near_duplicates)
    assert dups, "the copied rationales are near duplicates"
    _add_labels(db, range(28, 31))  # three labels after the snapshot

    def whole_project(*_a, **_k):
        raise AssertionError("a request counted every judgment of the project")

    monkeypatch.setattr(snapshot, "watermark", whole_project)
    monkeypatch.setattr(repo, "project_counts", whole_project)
    c = app_for(db_url)
    h = _as(seeded.tokens["reviewer"])
    dash = re.sub(r"\s+", " ", c.get("/admin/p/demo/dashboard", headers=h).text)
    assert f"from {before.labels} judgments; 3 new since." in dash
    assert f"31 items (as of the snapshot) · {before.labels + 3} judgments ·" in dash
    flagged = c.get("/admin/p/demo/data?flagged=true", headers=h)
    assert flagged.status_code == 200 and "near_duplicate_rationale" in flagged.text
    assert "Near-duplicate rationales as of the quality snapshot computed at" in flagged.text
    api = c.get("/api/v1/projects/demo/browse?flagged=true&limit=500", headers=h).json()
    # the flag comes from the snapshot's list, looked up for the page's judgments in SQL
    with db.reading() as s:
        by_item = dict(
            s.execute(
                select(JudgmentRow.pk, JudgmentRow.item_pk).where(JudgmentRow.pk.in_(dups))
            ).all()
        )
        keys = set(s.scalars(select(ItemRow.item_key).where(ItemRow.pk.in_(by_item.values()))))
    shown = {it["item_id"] for it in api["items"] if "near_duplicate_rationale" in it["flags"]}
    assert shown == keys
    assert c.get("/p/demo/review", headers=h).status_code == 200
    assert started == [], "computed under 300 s ago: fresh, no refresh started"
    db.dispose()


@pytest.mark.slow
def test_labels_since_the_snapshot_are_counted_up_to_a_cap(db_url, app_for, monkeypatch):
    seeded = _project(db_url)
    monkeypatch.setenv("PREFLAB_SNAPSHOT_INLINE_LABELS", "0")
    monkeypatch.setattr(snapshot, "spawn", lambda url, name: None)
    db = Database(db_url, pool_size=2, max_overflow=2)
    project = _ref(db)
    snapshot.refresh(db_url, "demo")
    _add_labels(db, range(28, 31))
    with db.reading() as s:
        counted = snapshot.watermark(s, project.pk)
        mark = snapshot.stored(s, project.pk, 0).mark
        assert mark is not None
        assert snapshot.live_mark(s, project.pk, mark) == (counted, False)
        monkeypatch.setattr(snapshot, "SINCE_CAP", 2)
        live, capped = snapshot.live_mark(s, project.pk, mark)
        assert (
            capped
            and live.labels == mark.labels + 2
            and live.max_judgment_pk == (counted.max_judgment_pk)
        )
        # no snapshot yet (the claim's empty mark): the judgments counted up to the cap
        assert snapshot.live_mark(s, project.pk, snapshot.Watermark(0, 0, 0))[0].labels == 2
    c = app_for(db_url)
    dash = re.sub(
        r"\s+", " ", c.get("/admin/p/demo/dashboard", headers=_as(seeded.tokens["reviewer"])).text
    )
    assert f"from {mark.labels} judgments; 2+ new since." in dash
    assert f" · {mark.labels + 2}+ judgments ·" in dash
    db.dispose()


def test_the_dashboard_reads_the_panels_without_the_near_duplicate_list(db_url):
    _project(db_url, n_items=4)
    db = Database(db_url, pool_size=2, max_overflow=2)
    project = _ref(db)
    panels = {"zeta": 1, "near_duplicate_pks": [5, 9, 12], "alpha": {"x": 1.5, "y": [1, 2]}}
    with db.writing() as s:
        snapshot.claim(s, project.pk)
        s.execute(
            update(QualitySnapshot)
            .where(QualitySnapshot.project_pk == project.pk)
            .values(panels=panels, labels=3, max_judgment_pk=2)
        )
    with db.reading() as s:
        whole = snapshot.stored(s, project.pk, panels="all")
        shown = snapshot.stored(s, project.pk, panels="shown")
        bare = snapshot.stored(s, project.pk, panels="none")
        assert whole is not None and shown is not None and bare is not None
        assert whole.panels is not None and shown.panels is not None
        expected = {k: v for k, v in whole.panels.items() if k != "near_duplicate_pks"}
        assert shown.panels == expected and list(shown.panels) == list(expected)  # same order
        assert whole.near_duplicates == {5, 9, 12}
        assert bare.panels == {}, "stored panels, not read"
        assert snapshot.near_duplicates_among(s, project.pk, [1, 5, 12, 13]) == {5, 12}
        assert snapshot.near_duplicates_among(s, project.pk, []) == set()
        # labels now: the mark's 3 plus the judgments after pk 2
        later = s.scalar(select(func.count()).select_from(JudgmentRow).where(JudgmentRow.pk > 2))
        assert later and whole.labels_now == 3 + later
        assert whole.now is not None
        assert whole.now.max_judgment_pk == s.scalar(select(func.max(JudgmentRow.pk)))
    db.dispose()


def test_only_the_marks_use_the_partial_pk_index(sqlite_url):
    """SQLite's planner, without statistics, would read a whole project through a
    ``(project_pk, pk)`` index to spare a page's sort: the index is partial, and only the
    watermark's reads name its condition."""
    _project(sqlite_url, n_items=6)
    db = Database(sqlite_url, pool_size=2, max_overflow=2)
    project = _ref(db)
    with db.reading() as s:
        conn = s.connection()

        def plan(stmt) -> str:
            compiled = stmt.compile(conn, compile_kwargs={"literal_binds": True})
            rows = conn.execute(text(f"EXPLAIN QUERY PLAN {compiled}")).all()
            return " | ".join(str(r[-1]) for r in rows)

        highest = select(func.max(JudgmentRow.pk)).where(
            JudgmentRow.project_pk == project.pk, snapshot._INDEXED
        )
        assert "ix_judgments_project_pk" in plan(highest)
        # the live mark's and is_small's range: the index, in its order (no sort)
        for after_pk in (3, 0):
            after = plan(snapshot.judgments_after(project.pk, after_pk, 10))
            assert "ix_judgments_project_pk (project_pk=? AND pk>?)" in after
            assert "TEMP B-TREE" not in after
        page = browse._page_judgments(s, project.pk, [1, 2])  # runs; its plan below
        assert page
        page_stmt = (
            select(JudgmentRow.pk)
            .where(
                JudgmentRow.project_pk == project.pk,
                JudgmentRow.item_pk.in_([1, 2]),
                JudgmentRow.excluded.is_(False),
            )
            .order_by(JudgmentRow.pk)
        )
        assert "ix_judgments_project_pk" not in plan(page_stmt)
        assert "ix_judgments_project_item" in plan(page_stmt)
    db.dispose()
