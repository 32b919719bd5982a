"""Issue 11: a rater sees and edits their own recent labels until a reviewer has acted on them.

An edit is a new revision through the existing send-back → revise mechanism: the earlier
judgment stays, superseded, with its provenance; the export takes the latest revision only. Once
a reviewer acted (sent it back, adjudicated the item) the edit is refused with 409 and the reason.
On SQLite and PostgreSQL, through the app in-process."""

from __future__ import annotations

import uuid
from pathlib import Path

import orjson
import pytest
from sqlalchemy import func, select

from preflab.store.server_models import ReviewRequest

from .conftest import pairwise_item, seed
from .test_holes import app_client, bearer, submit_body

P = "/api/v1/projects/demo"


def _edit_body(winner: str, key: str | None = None, strength: int = 2) -> dict:
    return {
        "judgment": {
            "kind": "pairwise",
            "winner": winner,
            "strength": strength,
            "rationale": "on reflection",
        },
        "idempotency_key": key or uuid.uuid4().hex,
    }


@pytest.fixture
def labelled(db_url, monkeypatch):
    """A one-rater project (agreement floor off) where rater000 labelled one item (B better)."""
    s = seed(db_url, n_items=2, raters=2, policy={"overlap_share": 0.0, "min_alpha": 0.0})
    with app_client(db_url, monkeypatch=monkeypatch) as c:
        h = bearer(s.tokens["rater000"])
        task = c.post(f"{P}/assignments/next", headers=h).json()["task"]
        first = c.post(f"{P}/judgments", json=submit_body(task, winner="b"), headers=h)
        assert first.status_code == 201, first.text
        yield c, s, h, task, first.json()["judgment_id"]


def test_an_edit_is_a_new_revision_and_the_old_label_stays(labelled):
    c, _, h, task, jid = labelled
    key = uuid.uuid4().hex
    r = c.post(f"{P}/judgments/{jid}/edit", json=_edit_body("a", key), headers=h)
    assert r.status_code == 201, r.text
    new = r.json()["judgment_id"]
    assert new != jid
    again = c.post(f"{P}/judgments/{jid}/edit", json=_edit_body("a", key), headers=h)
    assert again.status_code == 200 and again.json()["replayed"] is True, "a retry is a replay"
    assert again.json()["judgment_id"] == new

    mine = {j["judgment_id"]: j for j in c.get(f"{P}/my/judgments", headers=h).json()}
    assert mine[jid]["body"]["winner"] == "b", "the first answer is kept, never overwritten"
    assert mine[new]["supersedes"] == jid and mine[new]["body"]["winner"] == "a"
    assert mine[new]["rationale"] == "on reflection"
    assert c.get(f"{P}/my/revisions", headers=h).json() == [], "no request is left open"

    stale = c.post(f"{P}/judgments/{jid}/edit", json=_edit_body("b"), headers=h)
    assert stale.status_code == 409 and f"latest revision, judgment {new}" in stale.json()["detail"]
    assert c.post(f"{P}/judgments/{new}/edit", json=_edit_body("b"), headers=h).status_code == 201


def test_a_refused_edit_changes_nothing(labelled):
    c, _, h, _, jid = labelled
    bad = c.post(f"{P}/judgments/{jid}/edit", json=_edit_body("a", strength=9), headers=h)
    assert bad.status_code == 422
    assert c.get(f"{P}/my/revisions", headers=h).json() == []
    assert [j["judgment_id"] for j in c.get(f"{P}/my/judgments", headers=h).json()] == [jid]
    assert c.post(f"{P}/judgments/{jid}/edit", json=_edit_body("a"), headers=h).status_code == 201


def test_only_your_own_labels_can_be_edited(labelled):
    c, s, _, _, jid = labelled
    other = bearer(s.tokens["rater001"])
    r = c.post(f"{P}/judgments/{jid}/edit", json=_edit_body("a"), headers=other)
    assert r.status_code == 404 and "of yours" in r.json()["detail"]


def test_editing_is_refused_once_a_reviewer_sent_the_label_back(labelled):
    c, s, h, _, jid = labelled
    reviewer = bearer(s.tokens["reviewer"])
    sent = c.post(
        f"{P}/judgments/{jid}/send-back", json={"note": "check B again"}, headers=reviewer
    )
    assert sent.status_code == 201
    r = c.post(f"{P}/judgments/{jid}/edit", json=_edit_body("a"), headers=h)
    assert r.status_code == 409
    assert "can no longer be edited: a reviewer sent it back" in r.json()["detail"]
    revised = c.post(
        f"{P}/judgments/{jid}/revise", json={"judgment": _edit_body("a")["judgment"]}, headers=h
    )
    assert revised.status_code == 201
    later = c.post(
        f"{P}/judgments/{revised.json()['judgment_id']}/edit", json=_edit_body("b"), headers=h
    )
    assert later.status_code == 409 and "reviewed" in later.json()["detail"]


def test_editing_is_refused_once_a_reviewer_adjudicated_the_item(labelled):
    c, s, h, task, jid = labelled
    reviewer = bearer(s.tokens["reviewer"])
    adj = c.post(
        f"{P}/items/{task['item']['id']}/adjudicate",
        json={
            "judgment": {
                "kind": "pairwise",
                "winner": "a",
                "strength": 1,
                "shown_order": ["a", "b"],
            },
            "note": "A is right",
        },
        headers=reviewer,
    )
    assert adj.status_code == 201, adj.text
    r = c.post(f"{P}/judgments/{jid}/edit", json=_edit_body("a"), headers=h)
    assert r.status_code == 409 and "adjudicated this item" in r.json()["detail"]


def test_the_export_takes_the_latest_revision_only(labelled, db_url, tmp_path):
    from preflab.server.database import Database
    from preflab.server.services.projects import export_project

    c, _, h, task, jid = labelled
    assert c.post(f"{P}/judgments/{jid}/edit", json=_edit_body("a"), headers=h).status_code == 201
    db = Database(db_url, pool_size=1, max_overflow=1)
    try:
        _, manifest = export_project(db, "demo", "trl-preference", tmp_path / "out")
    finally:
        db.dispose()
    rows = [
        orjson.loads(line)
        for f in Path(tmp_path / "out").glob("*.jsonl")
        if f.name != "pair_metadata.jsonl"  # the side file rm eval reads, one line per row
        for line in f.read_bytes().splitlines()
    ]
    (row,) = rows
    answers = {c_["id"]: c_["text"] for c_ in task["item"]["candidates"]}
    first_shown, second_shown = task["shown_order"]  # winner "a": the answer shown first
    assert answers[first_shown] in str(row["chosen"]), "the edit, not the first answer"
    assert answers[second_shown] in str(row["rejected"])


def test_a_qualification_answer_is_not_edited_after_its_feedback(db_url, monkeypatch):
    items = [pairwise_item(i, gold=-1, prefix="qual", qualification=True) for i in range(2)]
    s = seed(
        db_url,
        items=[*items, pairwise_item(0)],
        raters=1,
        policy={"qualification": {"n_items": 2, "min_items": 2, "pass_bar": 0.5}},
    )
    h = bearer(s.tokens["rater000"])
    with app_client(db_url, monkeypatch=monkeypatch) as c:
        task = c.post(f"{P}/assignments/next", headers=h).json()["task"]
        assert task["phase"] == "qualification"
        body = submit_body(task, winner="a")
        body["judgment"]["shown_order"] = task["shown_order"]
        first = c.post(f"{P}/judgments", json=body, headers=h)
        assert first.status_code == 201 and "gold" in first.json(), "the rater saw the feedback"
        r = c.post(
            f"{P}/judgments/{first.json()['judgment_id']}/edit", json=_edit_body("b"), headers=h
        )
        assert (
            r.status_code == 409 and "qualification answers are scored once" in r.json()["detail"]
        )


def test_the_python_client_edits_and_says_why_it_cannot(labelled):
    from preflab.client import ApiError, Client

    c, s, h, _, jid = labelled
    client = Client("http://testserver")
    client._http, c.headers = c, {**c.headers, **h}  # the same in-process app, as the rater
    with client:
        new = client.edit("demo", jid, _edit_body("a")["judgment"])
        assert new["created"] and new["judgment_id"] != jid
        with pytest.raises(ApiError) as refused:
            client.edit("demo", jid, _edit_body("b")["judgment"])
    assert refused.value.status == 409 and "latest revision" in str(refused.value)


class _Crash(BaseException):
    """A crash mid-request (the process killed): no ``except Exception`` handler runs."""


def test_a_crash_between_the_steps_of_an_edit_leaves_nothing_and_a_later_edit_succeeds(
    labelled, db_url, monkeypatch
):
    """An edit opens the rater's own review request and stores the revision: one transaction,
    so a crash after the first step leaves no open request that refuses every later edit."""
    from preflab.server.services import revisions

    c, _, h, _, jid = labelled

    def crash(*args, **kwargs):
        raise _Crash

    db = c.app.state.db
    ctx = _rater_ctx(db, "rater000")
    with monkeypatch.context() as m:
        m.setattr(revisions, "build_judgment", crash)  # the revision's step, after the request
        with pytest.raises(_Crash):  # called here: a crash would stop the test client's loop
            revisions.edit(db, ctx.project, ctx.user, jid, _edit_body("a")["judgment"])
    assert c.get(f"{P}/my/revisions", headers=h).json() == []
    assert [j["judgment_id"] for j in c.get(f"{P}/my/judgments", headers=h).json()] == [jid]
    with db.reading() as s:
        requests = s.scalar(select(func.count()).select_from(ReviewRequest))
    assert requests == 0, f"{requests} review request(s) half-written by the crashed edit"
    later = c.post(f"{P}/judgments/{jid}/edit", json=_edit_body("a"), headers=h)
    assert later.status_code == 201, later.text


def _rater_ctx(db, username: str):
    """What the guard gives the edit route for ``username`` in project demo."""
    from preflab.server.permissions import Actor, Ctx, ProjectRef
    from preflab.store.models import Project
    from preflab.store.server_models import User

    with db.reading() as s:
        p = s.scalar(select(Project).where(Project.name == "demo"))
        user_pk = s.scalar(select(User.pk).where(User.username == username))
        ref = ProjectRef(
            p.pk,
            p.name,
            p.title,
            list(p.kinds or []),
            dict(p.settings or {}),
            p.rubric_key,
            p.rubric_version,
        )
    return Ctx("project.label", Actor(user_pk, username, False, "token"), ref, "rater")
