"""Issue 27 §2: the review queues read the project item by item (keyset chunks of items) and
search near-duplicate rationales over columns, never loading the project; the answer equals the
queues computed from the whole project loaded at once (:mod:`review_oracle`), every reason
present, on both databases and with chunks that split the project."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sqlalchemy import func, select, update

from preflab.server.database import Database
from preflab.server.services import review, review_scan
from preflab.store import repo
from preflab.store.models import ItemRow, JudgmentRow, utcnow
from preflab.store.server_models import GoldOutcome, RaterStatus, ReviewRequest, User

from . import review_oracle
from .conftest import seed
from .test_browse_snapshot import _item, _judgment, _ref

T1 = "2026-11-21T10:00:00Z"
#: one weak signal (no deletion while typing): exported, shown to reviewers as evidence
WEAK_TEL = {"typed_chars": 400, "pasted_chars": 0, "revision_ratio": 0.0}


def _disputed(item: dict, first: str, second: str) -> dict:
    item["reference"] = first
    item["metadata"] = {
        "verifiable": "math",
        "verify_task": {"kind": "math", "answer": first},
        "reference_provenance": {
            "require_two": True,
            "authors": [
                {"author": "expert1", "answer": first},
                {"author": "reviewer", "answer": second},
            ],
        },
    }
    return item


def _project(url: str, n_items: int = 33, raters: int = 4) -> None:
    items = [_item(i) for i in range(n_items)]
    _disputed(items[2], "7/12", "5/12")  # labelled, and its reference disputed
    _disputed(items[n_items - 1], "3", "4")  # never labelled: queued for its reference alone
    seed(url, n_items=0, items=items, raters=raters)
    db = Database(url, pool_size=2, max_overflow=2)
    with db.writing() as s:
        project = repo.get_project(s, "demo")
        users = list(s.scalars(select(User).where(User.username.like("rater%"))))
        for user in users:
            s.add(RaterStatus(project_pk=project.pk, user_pk=user.pk, status="qualified"))
        for i in range(n_items - 3):
            for r in range(2 + i % (raters - 1)):
                extra = {"telemetry": WEAK_TEL} if (i + r) % 4 == 1 and i % 7 else {}
                repo.add_judgment(s, project, _judgment(i, r, **extra))
        repo.add_judgment(s, project, _judgment(3, 0, rater_id="reviewer", review_pass=2))
        first = s.scalar(select(func.min(JudgmentRow.pk)))
        s.execute(update(JudgmentRow).where(JudgmentRow.pk == first).values(excluded=True))
        # a revision: its original stops counting
        row, _ = repo.add_judgment(s, project, _judgment(8, 1, minutes=5))
        row.supersedes_pk = s.scalar(
            select(JudgmentRow.pk).where(
                JudgmentRow.item_pk == row.item_pk,
                JudgmentRow.rater_pk == row.rater_pk,
                JudgmentRow.pk < row.pk,
            )
        )
        pks = list(s.scalars(select(JudgmentRow.pk).order_by(JudgmentRow.pk)))
        item_of = dict(s.execute(select(JudgmentRow.pk, JudgmentRow.item_pk)).all())
        for pk in pks[4:40:9]:  # failed production gold on a few labels
            s.add(
                GoldOutcome(
                    project_pk=project.pk,
                    user_pk=users[0].pk,
                    item_pk=item_of[pk],
                    judgment_pk=pk,
                    phase="production",
                    correct=False,
                )
            )
        # two labels of one item sent back by a machine check, the later label first
        same_item = [pk for pk in pks if item_of[pk] == item_of[pks[20]]]
        for pk, note in ((same_item[-1], "step 3 is wrong\nmore"), (same_item[0], "")):
            s.add(ReviewRequest(project_pk=project.pk, judgment_pk=pk, note=note))
        # a reviewer kept one held-out label and one weakly flagged label
        admin = s.scalar(select(User.pk).order_by(User.pk))
        for pk in s.scalars(
            select(JudgmentRow.pk)
            .where(JudgmentRow.telemetry.is_not(None), JudgmentRow.excluded.is_(False))
            .order_by(JudgmentRow.pk)
            .limit(2)
        ):
            s.add(
                ReviewRequest(
                    project_pk=project.pk,
                    judgment_pk=pk,
                    reviewer_pk=admin,
                    status="kept",
                    note="checked",
                    resolved_at=utcnow(),
                )
            )
        assert s.scalar(select(func.count()).select_from(ItemRow)) == n_items
    db.dispose()


@pytest.mark.slow
def test_streamed_queues_equal_the_whole_project_queues(db_url, monkeypatch):
    _project(db_url)
    db = Database(db_url, pool_size=2, max_overflow=2)
    project = _ref(db)
    with db.reading() as s:
        for share in (0.0, 0.35, 1.0):
            old = review_oracle.review_queues(s, project, share=share)
            for chunk in (500, 4, 1):
                monkeypatch.setattr(review_scan, "CHUNK", chunk)
                assert review.review_queues(s, project, share=share) == old, (share, chunk)
        # every reason is there: the comparison compares something
        reasons = [r for e in old["adjudication"] for r in e["reasons"]]
        for needle in (
            "low agreement",
            "failed gold",
            "near_duplicate_rationale",
            "references disagree",
            "step 3 is wrong (judgment",
            "sent back (judgment",
        ):
            assert any(needle in r for r in reasons), needle
        assert any("like judgments" in r for r in reasons)
        assert any(e["adjudicated"] for e in old["adjudication"])
        assert any(e.get("evidence") for e in old["adjudication"])
        assert any(e["judgments"] == 0 for e in old["adjudication"])  # the unlabelled item
        tel = old["telemetry"]
        assert tel["held_out"] and tel["weak_by_rater"] and tel["decided"] == 2
        assert review_oracle.review_queues(s, project, share=0.35)["spot"]
    db.dispose()


def test_pending_demonstrations_equal_the_whole_project_read(db_url):
    """Pending demonstrations in one query: accepted, rejected and excluded ones left out, a
    decided one's revision neither pending nor counted twice; blind and not."""
    from preflab.schema import parse_judgment

    _project(db_url, n_items=12, raters=3)
    db = Database(db_url, pool_size=2, max_overflow=2)
    with db.writing() as s:
        project = repo.get_project(s, "demo")
        project.kinds = [*project.kinds, "demonstration"]
        pks = []
        for i in range(6):
            demo = parse_judgment(
                {
                    "kind": "demonstration",
                    "item_id": f"item-{i:05d}",
                    "text": f"An expert answer {i}.",
                    "provenance": {"rater_id": f"rater{i % 3:03d}", "submitted_at": T1},
                }
            )
            pks.append(repo.add_judgment(s, project, demo)[0].pk)
        review.decide_demonstration(s, project.pk, "rev", pks[1], "accepted", "")
        review.decide_demonstration(s, project.pk, "rev", pks[2], "rejected", "vague")
        s.execute(update(JudgmentRow).where(JudgmentRow.pk == pks[3]).values(excluded=True))
    project_ref = _ref(db)
    with db.reading() as s:
        new = review.pending_demonstrations(s, project_ref)
        assert new == review_oracle.pending_demonstrations(s, project_ref)
        assert [d["judgment_id"] for d in new] == [pks[0], pks[4], pks[5]]
        assert all(d["submitted_at"] for d in new)
        policy = {**project_ref.settings.get("policy", {}), "blind": False}
        open_project = replace(project_ref, settings={**project_ref.settings, "policy": policy})
        shown = review.pending_demonstrations(s, open_project)
        assert shown == review_oracle.pending_demonstrations(s, open_project)
        assert [d["rater"] for d in shown] == ["rater000", "rater001", "rater002"]
    db.dispose()
