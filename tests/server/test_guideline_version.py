"""Issue 16 §3: a judgment submitted through the server carries the guideline (settings)
version its assignment showed the rater, on every submit path (the first label of a rater goes
the reference path, later ones the fast paths)."""

from __future__ import annotations

from sqlalchemy import create_engine, select

from preflab.store.models import JudgmentRow

from .conftest import seed


def test_a_submitted_judgment_carries_the_guideline_version_the_assignment_showed(
    db_url, start_server
):
    seeded = seed(db_url, n_items=6, raters=1, policy={"overlap_share": 0.0})
    server = start_server(db_url)
    with server.client(seeded.admin_token) as admin:
        r = admin.patch(
            "/api/v1/projects/demo/settings",
            json={"guidelines": "# Be careful\n\nPrefer the correct answer.", "note": "v2"},
        )
        assert r.status_code == 200, r.text
    shown = []
    with server.client(seeded.tokens["rater000"]) as c:
        for _ in range(4):
            task = c.post("/api/v1/projects/demo/assignments/next").json()["task"]
            shown.append(task["settings_version"])
            body = {
                "assignment_id": task["assignment_id"],
                "judgment": {"kind": "pairwise", "winner": "a", "strength": 2, "rationale": "ok"},
            }
            assert c.post("/api/v1/projects/demo/judgments", json=body).status_code == 201
    assert shown == [2, 2, 2, 2]  # the change above made version 2
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            stored = conn.scalars(
                select(JudgmentRow.guideline_version).order_by(JudgmentRow.pk)
            ).all()
    finally:
        engine.dispose()
    assert stored == [2, 2, 2, 2]
