"""Issue 30 item 4: the web submit takes critique spans, checked against the item's answers (code
points of ``Candidate.as_text()``) and the project's categories; a refusal names each span as
``spans.N.field`` in the order sent. Both executors (the lane hands spans to the framework)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from .conftest import seed, serve_by

NEXT = "/api/v1/projects/demo/assignments/next"
SUBMIT = "/api/v1/projects/demo/judgments"
TEXT = "😀 **Lyon** is the capital."  # 26 code points (27 UTF-16 units)
ITEMS = [
    {
        "id": f"s-{i}",
        "prompt": f"Capital of France? ({i})",
        "candidates": [{"id": "x", "text": TEXT}, {"id": "y", "text": "Paris."}],
    }
    for i in range(3)
]
POLICY = {"span_categories": ["factual_error", "style"], "overlap_share": 0.0}


def _pairwise(task: dict, spans: list[dict]) -> dict:
    return {
        "assignment_id": task["assignment_id"],
        "judgment": {
            "kind": "pairwise",
            "shown_order": task["shown_order"],
            "winner": "tie",
            "strength": 0,
            "spans": spans,
        },
    }


@pytest.mark.parametrize("path", ["lane", "framework"])
def test_spans_are_stored_and_refused_by_field(db_url, monkeypatch, path) -> None:
    from preflab.server.app import create_app

    s = seed(db_url, raters=1, extra_roles=False, items=ITEMS, policy=POLICY)
    serve_by(monkeypatch, path)
    h = {"Authorization": f"Bearer {s.tokens['rater000']}"}
    admin = {"Authorization": f"Bearer {s.admin_token}"}
    app = create_app(db_url)
    with TestClient(app) as c:
        task = c.post(NEXT, headers=h).json()["task"]
        bad = [
            {"candidate_id": "x", "start": 2, "end": 10, "category": "style"},
            {"candidate_id": "x", "start": 0, "end": len(TEXT) + 1, "category": "factual_error"},
            {"candidate_id": "y", "start": 0, "end": 2, "category": "typo"},
        ]
        r = c.post(SUBMIT, json=_pairwise(task, bad), headers=h)
        assert r.status_code == 422, r.text
        errors = {tuple(e["loc"][2:]): e["msg"] for e in r.json()["errors"]}
        assert set(errors) == {("spans", "1", "end"), ("spans", "2", "category")}
        assert "past the end of answer 'x' (26 characters)" in errors[("spans", "1", "end")]
        assert (
            "'typo' is not one of the project's span categories"
            in errors[("spans", "2", "category")]
        )

        good = [
            {
                "candidate_id": "x",
                "start": 4,
                "end": 8,
                "category": "factual_error",
                "note": "Paris",
            },
            {"candidate_id": "x", "start": 0, "end": len(TEXT), "category": "style"},
        ]
        r = c.post(SUBMIT, json=_pairwise(task, good), headers=h)
        assert r.status_code == 201, r.text
        (j,) = c.get("/api/v1/projects/demo/judgments", headers=admin).json()
        stored = j["body"]["spans"]
        assert [TEXT[sp["start"] : sp["end"]] for sp in stored] == [TEXT, "Lyon"]  # canonical order
        assert stored[1]["note"] == "Paris"

        nxt = c.post(NEXT, headers=h).json()  # a span on an answer not judged
        assert nxt["task"], nxt
        task = nxt["task"]
        wrong = [{"candidate_id": "z", "start": 0, "end": 1, "category": "style"}]
        r = c.post(SUBMIT, json=_pairwise(task, wrong), headers=h)
        assert r.status_code == 422
        # a schema error carries the kind (the judgment union's tag), as every field's does
        assert r.json()["errors"][0]["loc"][-3:] == ["spans", "0", "candidate_id"]
    app.state.db.dispose()


def test_a_project_without_categories_refuses_spans(db_url) -> None:
    from preflab.server.app import create_app

    s = seed(db_url, raters=1, extra_roles=False, items=ITEMS, policy={"overlap_share": 0.0})
    h = {"Authorization": f"Bearer {s.tokens['rater000']}"}
    admin = {"Authorization": f"Bearer {s.admin_token}"}
    app = create_app(db_url)
    with TestClient(app) as c:
        task = c.post(NEXT, headers=h).json()["task"]
        span = [{"candidate_id": "x", "start": 0, "end": 1, "category": "style"}]
        r = c.post(SUBMIT, json=_pairwise(task, span), headers=h)
        assert r.status_code == 422
        assert r.json()["errors"][0]["loc"][2:] == ["spans"]
        assert "takes no critique spans" in r.json()["errors"][0]["msg"]
        r = c.post(SUBMIT, json=_pairwise(task, []), headers=h)  # no spans: as before
        assert r.status_code == 201, r.text
        (j,) = c.get("/api/v1/projects/demo/judgments", headers=admin).json()
        assert "spans" not in j["body"]
    app.state.db.dispose()
