"""PostgreSQL lane: what "next" keeps locked while its transaction is open.

Every row lock is a heap write (and a WAL record) in PostgreSQL, and a locked pool row keeps
other raters' picks (``SKIP LOCKED``) and submits (the guarded store waits for it) off that item
until the lease's COMMIT. "Next" needs one pool row; it used to lock a batch of four.
"""

from __future__ import annotations

import hashlib

from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from .conftest import seed

NEXT = "/api/v1/projects/demo/assignments/next"
SUBMIT = "/api/v1/projects/demo/judgments"


def _free_pool_rows(engine) -> int:
    """Pool rows another transaction can lock right now."""
    with engine.begin() as conn:
        return conn.execute(
            text("SELECT count(*) FROM (SELECT pk FROM task_pool FOR UPDATE SKIP LOCKED) AS free")
        ).scalar_one()


def test_next_locks_one_pool_row_until_its_commit(pg_url) -> None:
    from preflab.server.app import create_app
    from preflab.server.exec.postgres import PgExecutor
    from preflab.server.flow import lane as flow_lane
    from preflab.store.models import utcnow

    s = seed(pg_url, raters=1, n_items=8, extra_roles=False)
    token = s.tokens["rater000"]
    h = {"Authorization": f"Bearer {token}"}
    app = create_app(pg_url)
    with TestClient(app) as c:  # a first label (status and rater rows): the lane's case next
        first = c.post(NEXT, headers=h).json()["task"]
        answer = {"kind": "pairwise", "winner": "a", "strength": 1}
        stored = c.post(
            SUBMIT, json={"assignment_id": first["assignment_id"], "judgment": answer}, headers=h
        )
        assert stored.status_code == 201
    app.state.db.dispose()
    engine = create_engine(pg_url)
    all_rows = _free_pool_rows(engine)
    ex = PgExecutor(engine.url)
    cur = ex.begin()
    try:
        out = flow_lane.run_next(
            flow_lane.Lane(ex, cur, utcnow()), hashlib.sha256(token.encode()).hexdigest(), "demo"
        )
        assert out["task"]["assignment_id"]
        assert ex.in_transaction(cur)  # the lease is not committed yet: its locks are held
        assert _free_pool_rows(engine) == all_rows - 1
    finally:
        ex.rollback(cur)
        ex.end(cur)
        ex.close()
    assert _free_pool_rows(engine) == all_rows
    engine.dispose()
