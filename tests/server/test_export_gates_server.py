"""Issue 16 through the server: a submitted judgment carries the guideline (settings) version its
assignment showed (§3), and the export API has the CLI's defaults: token-length parity on (§1)."""

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


def test_the_export_api_gates_length_in_tokens_by_default_and_null_turns_it_off(
    db_url, start_server
):
    seeded = seed(db_url, n_items=2, raters=1, policy={"overlap_share": 0.0, "min_alpha": 0})
    server = start_server(db_url)
    with server.client(seeded.tokens["rater000"]) as c:
        for _ in range(2):
            task = c.post("/api/v1/projects/demo/assignments/next").json()["task"]
            body = {
                "assignment_id": task["assignment_id"],
                "judgment": {"kind": "pairwise", "winner": "a", "strength": 2, "rationale": "ok"},
            }
            assert c.post("/api/v1/projects/demo/judgments", json=body).status_code == 201
    with server.client(seeded.admin_token) as admin:
        on = admin.post("/api/v1/projects/demo/exports", json={"format": "trl-preference"})
        off = admin.post(
            "/api/v1/projects/demo/exports",
            json={"format": "trl-preference", "length_gate": None, "provenance_columns": True},
        )
    assert on.status_code == 201 and off.status_code == 201, on.text + off.text
    gate = on.json()["manifest"]["gates"]["length_parity"]
    assert gate["enabled"] and gate["bounds"] == [0.85, 1.2]
    assert gate["length"].startswith("tokens of all-MiniLM-L6-v2")
    manifest = off.json()["manifest"]
    assert manifest["gates"]["length_parity"]["enabled"] is False
    assert "guideline_version" in manifest["schema"]
