"""A rater's checklist of an item's own criteria (judgment kind ``criteria``) through a real
server: the task shows the approved criteria, a submission is checked against them (the fast lane
hands the item's metadata read to the framework), and the label page renders the checklist."""

from __future__ import annotations

import re

from .conftest import seed

CRITERIA = {
    "version": 3,
    "author": "dr_a",
    "approved_by": "dr_b",
    "approved_at": "2026-12-01T10:00:00Z",
    "criteria": [
        {"id": "dose", "text": "States the adult dose", "weight": 3, "must_have": True},
        {"id": "doctor", "text": "Says when to see a <b>doctor</b>", "weight": 1},
    ],
}


def test_a_checklist_is_graded_against_the_item_s_approved_criteria(db_url, start_server):
    items = [
        {
            "id": "q1",
            "prompt": "How do I take X?",
            "candidates": [{"id": "c", "text": "500 mg twice a day"}],
            "metadata": {"criteria": CRITERIA},
        }
    ]
    seeded = seed(db_url, items=items, raters=1, kinds=["criteria"])
    server = start_server(db_url)
    with server.client(seeded.tokens["rater000"]) as c:
        task = c.post("/api/v1/projects/demo/assignments/next").json()["task"]
        assert task["item"]["criteria"] == {
            "version": 3,
            "criteria": [
                {"id": "dose", "text": "States the adult dose", "weight": 3.0, "must_have": True},
                {"id": "doctor", "text": "Says when to see a <b>doctor</b>", "weight": 1.0,
                 "must_have": False},
            ],
        }  # fmt: skip

        def submit(met: dict, version: int = 3):
            judgment = {"kind": "criteria", "candidate_id": "c", "criteria_version": version,
                        "met": met}  # fmt: skip
            return c.post(
                "/api/v1/projects/demo/judgments",
                json={"assignment_id": task["assignment_id"], "judgment": judgment},
            )

        missing = submit({"dose": True})
        assert missing.status_code == 422, missing.text
        assert "missing" in missing.text and "doctor" in missing.text
        stale = submit({"dose": True, "doctor": False}, version=2)
        assert stale.status_code == 422 and "approved version 3" in stale.text
        page = c.get("/p/demo/label?kind=criteria")
        assert page.status_code == 200
        html = page.text
        assert 'id="criteria"' in html and 'data-version="3"' in html
        assert len(re.findall(r'name="criterion" value="(dose|doctor)"', html)) == 2
        assert "must-have" in html and "/static/criteria.js" in html
        assert "<b>doctor</b>" not in html and "&lt;b&gt;doctor&lt;/b&gt;" in html  # inert
        ok = submit({"dose": True, "doctor": False})
        assert ok.status_code == 201, ok.text
    with server.client(seeded.admin_token) as admin:
        (j,) = admin.get("/api/v1/projects/demo/judgments").json()
        assert j["kind"] == "criteria"
