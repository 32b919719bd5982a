"""The task pool's ``filled`` is the number of the item's production labels, kept by the database
(``preflab.store.triggers``, migration 0012), on every path and both databases.

A production label: review pass 0, not a revision, not excluded. Submits (fast lane or ORM
path) count one; a revision counts nothing; a suspension takes the rater's labels off, once
each, the revision included; releasing a lease counts nothing. After any mix of these the
counter equals the labels it counts, and equals the submitted production leases whose label is
still in.
"""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import create_engine, select, text

from .conftest import seed
from .test_holes import app_client, bearer, submit_body

P = "/api/v1/projects/demo"
POLICY = {"overlap_share": 1.0, "overlap_k": 3, "min_alpha": 0.0}

COUNTS = """
SELECT p.item_pk, p.filled,
  (SELECT count(*) FROM judgments j WHERE j.item_pk = p.item_pk AND NOT j.excluded
     AND j.supersedes_pk IS NULL AND j.review_pass = 0) AS labels,
  (SELECT count(*) FROM assignments a JOIN judgments j ON j.pk = a.judgment_pk
     WHERE a.item_pk = p.item_pk AND a.status = 'submitted' AND NOT j.excluded) AS submitted
FROM task_pool p WHERE p.role = 'production' ORDER BY p.item_pk
"""


def _counts(url: str) -> list[tuple[int, int, int, int]]:
    engine = create_engine(url)
    with engine.connect() as conn:
        rows = [tuple(r) for r in conn.execute(text(COUNTS))]
    engine.dispose()
    return rows


def _label(c, h) -> int | None:
    """One next + submit; the judgment's id, or None when nothing is left."""
    r = c.post(f"{P}/assignments/next", headers=h)
    task = r.json().get("task")
    if task is None:
        return None
    s = c.post(f"{P}/judgments", json=submit_body(task), headers=h)
    assert s.status_code == 201, s.text
    return s.json()["judgment_id"]


def _suspend(db, username: str) -> None:
    from preflab.server.services import gold_scoring as judging
    from preflab.store.models import Project, utcnow
    from preflab.store.server_models import RaterStatus, User

    with db.writing() as s:
        project = s.scalar(select(Project).where(Project.name == "demo"))
        user = s.scalar(select(User).where(User.username == username))
        status = s.scalar(
            select(RaterStatus).where(
                RaterStatus.project_pk == project.pk, RaterStatus.user_pk == user.pk
            )
        )
        judging.suspend(s, project, user.pk, status, {"correct": 0, "n": 5, "bar": 0.8}, utcnow())


@pytest.mark.parametrize("lane", [True, False], ids=["fast lane", "ORM path"])
def test_filled_counts_production_labels_after_submits_revisions_and_a_suspension(
    db_url, monkeypatch, lane
) -> None:
    s = seed(db_url, n_items=6, raters=3, extra_roles=False, policy=POLICY)
    heads = {name: bearer(t) for name, t in sorted(s.tokens.items())}
    with app_client(db_url, lane=lane, monkeypatch=monkeypatch) as c:
        labels = {name: [_label(c, h) for _ in range(3)] for name, h in heads.items()}
        assert all(None not in ids for ids in labels.values())
        edit = c.post(  # rater001 revises a label: a new row, no new count
            f"{P}/judgments/{labels['rater001'][0]}/edit",
            json={
                "judgment": {"kind": "pairwise", "winner": "a", "strength": 1},
                "idempotency_key": uuid.uuid4().hex,
            },
            headers=heads["rater001"],
        )
        assert edit.status_code == 201, edit.text
        held = c.post(f"{P}/assignments/next", headers=heads["rater001"]).json()["task"]
        released = c.post(
            f"{P}/assignments/{held['assignment_id']}/release", headers=heads["rater001"]
        )
        assert released.status_code == 200, released.text
        before = _counts(db_url)
        assert sum(r[1] for r in before) == 9, "three raters, three labels each"
        _suspend(c.app.state.db, "rater001")  # original labels and the revision excluded
        after = _counts(db_url)
        assert sum(r[1] for r in after) == 6, "each of rater001's three labels off once"
        while _label(c, heads["rater002"]) is not None:  # the freed room is labelled again
            pass
        while _label(c, heads["rater000"]) is not None:
            pass
    final = _counts(db_url)
    assert all(filled == n == submitted for _, filled, n, submitted in final), final
    assert sum(r[1] for r in final) == 12, "two raters left, six items each"


def test_a_model_judges_labels_do_not_fill_the_overlap(db_url) -> None:
    """Labels stored before the item's pool row was made are counted into ``filled`` when it is
    made (``sync_pool``); a model judge's (``source: ai``, ``preflab judge run``) must not be: the
    item still goes to ``overlap_k`` people. A person's label, assisted or not, counts."""
    from preflab.schema import PairwiseJudgment
    from preflab.server.database import Database
    from preflab.server.services.projects import current_settings, sync_pool
    from preflab.store import repo
    from preflab.store.server_models import PoolEntry

    seed(db_url, n_items=2, raters=1, extra_roles=False, policy=POLICY)
    db = Database(db_url, pool_size=1, max_overflow=0)

    def label(rater: str, source: str) -> PairwiseJudgment:
        return PairwiseJudgment(
            item_id="item-00000",
            shown_order=("a", "b"),
            winner="a",
            strength=2,
            provenance={"rater_id": rater, "source": source},
        )

    with db.writing() as s:
        project = repo.get_project(s, "demo")
        for k in range(3):
            repo.add_judgment(s, project, label(f"judge:model-{k}", "ai"))
        repo.add_judgment(s, project, label("person-1", "human"))
        repo.add_judgment(s, project, label("person-2", "ai_assisted"))
        s.execute(PoolEntry.__table__.delete().where(PoolEntry.project_pk == project.pk))
        assert sync_pool(s, project.pk, current_settings(project).policy) == 2
    with db.reading() as s:
        filled = dict(s.execute(select(PoolEntry.item_pk, PoolEntry.filled)).all())
    db.dispose()
    assert sorted(filled.values()) == [0, 2], filled


def test_excluding_a_model_judges_label_moves_no_count(db_url) -> None:
    """The exclusion trigger (migration 0017) ignores ``source: ai`` labels: excluding a judge's
    label and including it again leaves ``filled`` as it was; a person's still moves it."""
    from sqlalchemy import update

    from preflab.schema import PairwiseJudgment
    from preflab.server.database import Database
    from preflab.server.services.projects import current_settings, sync_pool
    from preflab.store import repo
    from preflab.store.models import JudgmentRow
    from preflab.store.server_models import PoolEntry

    seed(db_url, n_items=1, raters=1, extra_roles=False, policy=POLICY)
    db = Database(db_url, pool_size=1, max_overflow=0)
    with db.writing() as s:
        project = repo.get_project(s, "demo")
        for rater, source in (("judge:m", "ai"), ("person", "human")):
            repo.add_judgment(
                s,
                project,
                PairwiseJudgment(
                    item_id="item-00000",
                    shown_order=("a", "b"),
                    winner="a",
                    strength=2,
                    provenance={"rater_id": rater, "source": source},
                ),
            )
        s.execute(PoolEntry.__table__.delete().where(PoolEntry.project_pk == project.pk))
        sync_pool(s, project.pk, current_settings(project).policy)

    def filled() -> int:
        with db.reading() as s:
            return s.scalar(select(PoolEntry.filled))

    def exclude(source: str, value: bool) -> None:
        with db.writing() as s:
            s.execute(
                update(JudgmentRow).where(JudgmentRow.source == source).values(excluded=value)
            )

    assert filled() == 1
    exclude("ai", True)
    assert filled() == 1
    exclude("ai", False)
    assert filled() == 1
    exclude("human", True)
    assert filled() == 0
    db.dispose()
