"""Issue 27 §2: the dashboard snapshot reads the per-rater figures with one streamed query of
columns and searches near-duplicate rationales once; its panels equal the pass it replaced
(:mod:`snapshot_oracle`) and the quality report's own search, on both databases."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from preflab.io.quality_source import accumulate_in
from preflab.quality.report import finish_report
from preflab.server import snapshot
from preflab.server.database import Database
from preflab.server.pages.panels import quality_panels
from preflab.server.services import review
from preflab.store import repo
from preflab.store.models import JudgmentRow, utcnow
from preflab.store.server_models import ReviewRequest, User

from . import snapshot_oracle
from .test_browse_snapshot import _judgment, _project, _ref


def _revise_and_decide(url: str) -> None:
    """A revision (its original stops counting) and a reviewer's decision on a held-out label."""
    db = Database(url, pool_size=2, max_overflow=2)
    with db.writing() as s:
        project = repo.get_project(s, "demo")
        revised = _judgment(5, 1, minutes=9)
        row, _ = repo.add_judgment(s, project, revised)
        old = s.scalar(
            select(JudgmentRow.pk)
            .where(JudgmentRow.pk < row.pk, JudgmentRow.rater_pk == row.rater_pk)
            .where(JudgmentRow.item_pk == row.item_pk)
        )
        row.supersedes_pk = old
        held = s.scalar(
            select(JudgmentRow.pk)
            .where(JudgmentRow.telemetry.is_not(None), JudgmentRow.excluded.is_(False))
            .order_by(JudgmentRow.pk)
        )
        admin = s.scalar(select(User.pk).order_by(User.pk))
        s.add(
            ReviewRequest(
                project_pk=project.pk,
                judgment_pk=held,
                reviewer_pk=admin,
                status="kept",
                note="checked",
                resolved_at=utcnow(),
            )
        )
    db.dispose()


@pytest.mark.slow
def test_snapshot_panels_equal_the_old_pass_and_the_report(db_url):
    _project(db_url)
    _revise_and_decide(db_url)
    db = Database(db_url, pool_size=2, max_overflow=2)
    project = _ref(db)
    with db.reading() as s:
        old = snapshot_oracle.rater_activity(s, project)
        new = snapshot.rater_activity(s, project)
        assert new == old
        assert old["near_duplicate_pks"] and any(old["held_out"].values())
        assert len(old["median_s"]) >= 4
        mark = snapshot.watermark(s, project.pk)
        panels = snapshot.compute_panels(s, project, mark)
        # the report with its own near-duplicate search
        acc = accumulate_in(s, project.name)
        chosen, rejected = acc.length_pairs()
        report = finish_report(acc)
        assert any(f["flag"] == "near_duplicate_rationale" for f in report["telemetry_flags"])
        expected = snapshot.jsonable(quality_panels(report, chosen, rejected))
        assert {k: panels[k] for k in expected} == expected
        assert json.dumps(panels, sort_keys=True, default=str)  # plain JSON, as stored
        for key, value in snapshot.jsonable(old).items():
            assert panels[key] == value
    db.dispose()


def test_decided_labels_are_not_held_out(db_url):
    """The reviewer's decision takes a label out of the held-out count (the export's rule)."""
    _project(db_url, n_items=15, raters=3)
    db = Database(db_url, pool_size=2, max_overflow=2)
    project = _ref(db)
    with db.reading() as s:
        before = snapshot.rater_activity(s, project)["held_out"]
        assert before["rater000"] >= 1
        assert review.telemetry_decisions(s, project.pk) == {}
    _revise_and_decide(db_url)
    with db.reading() as s:
        after = snapshot.rater_activity(s, project)["held_out"]
        assert after["rater000"] == before["rater000"] - 1
        assert after == snapshot_oracle.rater_activity(s, project)["held_out"]
    db.dispose()
