"""The labelling flow's rare edges on the routes' executor (``exec/framework.py``): a caller
removed after the guard let them in, a rubric project without a rubric, a guarded write that
keeps losing its race."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from .conftest import seed, serve_by

NEXT = "/api/v1/projects/demo/assignments/next"
SUBMIT = "/api/v1/projects/demo/judgments"


@pytest.mark.parametrize("path", ["lane", "framework"])
def test_a_rubric_answer_without_a_rubric_is_a_422_that_says_so(db_url, monkeypatch, path):
    from preflab.server.app import create_app

    items = [
        {"id": f"item-{i}", "prompt": f"Q{i}?", "candidates": [{"id": "m", "text": f"A{i}"}]}
        for i in range(2)
    ]
    s = seed(db_url, raters=1, extra_roles=False, kinds=["rubric"], items=items)
    serve_by(monkeypatch, path)
    h = {"Authorization": f"Bearer {s.tokens['rater000']}"}
    app = create_app(db_url)
    with TestClient(app) as c:
        for _ in range(2):  # the second: no first label, no first contact left to hand on
            task = c.post(NEXT, headers=h).json()["task"]
            answer = {"kind": "rubric", "candidate_id": "m", "scores": {"helpfulness": 4}}
            body = {"assignment_id": task["assignment_id"], "judgment": answer}
            r = c.post(SUBMIT, json=body, headers=h)
            assert r.status_code == 422, r.text
            assert r.json()["errors"][0]["loc"] == ["body", "judgment", "scores"]
            assert "no rubric yet" in r.json()["errors"][0]["msg"]
            c.post(f"/api/v1/projects/demo/assignments/{task['assignment_id']}/release", headers=h)
    app.state.db.dispose()


def test_a_caller_removed_after_the_guard_gets_a_403_not_a_500(db_url) -> None:
    """The route's guard checked the membership; the flow reads the caller again in its own
    transaction and refuses when it is gone, for "next" and for "submit"."""
    from preflab.server.database import Database
    from preflab.server.errors import JudgingError
    from preflab.server.permissions import ProjectRef
    from preflab.server.routes.labelling import serve_next, serve_submit

    seed(db_url, raters=1, n_items=3, extra_roles=False)
    engine = create_engine(db_url)
    with engine.begin() as conn:
        user_pk = conn.execute(text("SELECT pk FROM users WHERE username = 'rater000'")).scalar()
        pk, kinds = conn.execute(text("SELECT pk, kinds FROM projects")).one()
    db = Database(db_url, pool_size=2, max_overflow=2)
    project = ProjectRef(pk, "demo", "demo", ["pairwise"], {}, None, None)
    task = serve_next(db, project, user_pk)["task"]
    assert task is not None
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM memberships WHERE user_pk = :u"), {"u": user_pk})
    with pytest.raises(JudgingError) as refused:
        serve_next(db, project, user_pk)
    assert refused.value.status == 403
    with pytest.raises(JudgingError) as refused:
        serve_submit(
            db,
            project,
            user_pk,
            "rater000",
            assignment_id=task["assignment_id"],
            judgment={"kind": "pairwise", "winner": "a", "strength": 1},
            idempotency_key=None,
            telemetry=None,
        )
    assert refused.value.status == 403
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM judgments")).scalar() == 0
    db.dispose()
    engine.dispose()


def test_a_lost_race_runs_the_flow_again_and_gives_up_with_a_409(tmp_path) -> None:
    from preflab.server.database import Database, init_schema
    from preflab.server.errors import JudgingError
    from preflab.server.exec.framework import ATTEMPTS, executor
    from preflab.server.flow.common import Changed
    from preflab.server.flow.lane import BEGIN

    url = f"sqlite:///{tmp_path / 'race.db'}"
    init_schema(url)
    db = Database(url, pool_size=2, max_overflow=2)
    runs: list[int] = []

    def losing(times: int):
        def make(lane):
            runs.append(1)
            yield (BEGIN,)
            if len(runs) <= times:
                raise Changed("changed since read")
            return "stored"

        return make

    assert executor(db).run(losing(ATTEMPTS - 1))[0] == "stored" and len(runs) == ATTEMPTS
    runs.clear()
    with pytest.raises(JudgingError) as refused:
        executor(db).run(losing(ATTEMPTS))
    assert refused.value.status == 409 and len(runs) == ATTEMPTS
    db.dispose()
