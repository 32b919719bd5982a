"""The routing rule (issue 13, section 2): items a verifier scores (``metadata.verifiable``)
are not sent to raters for labels, unless the project's policy says so."""

from __future__ import annotations

import pytest

from .conftest import pairwise_item, seed


def verifiable(i: int) -> dict:
    item = pairwise_item(i, prefix="code")
    item["metadata"] = {
        "verifiable": "code",
        "verify_task": {"task_id": f"t{i}", "kind": "math", "answer": "1"},
    }
    return item


def served_items(server, token: str, limit: int = 20) -> list[str]:
    seen = []
    with server.client(token) as c:
        for _ in range(limit):
            task = c.post("/api/v1/projects/demo/assignments/next").json()["task"]
            if task is None:
                break
            seen.append(task["item"]["id"])
            body = {
                "assignment_id": task["assignment_id"],
                "judgment": {"kind": "pairwise", "winner": "a", "strength": 1, "rationale": "ok"},
            }
            assert c.post("/api/v1/projects/demo/judgments", json=body).status_code == 201
    return seen


@pytest.mark.parametrize("to_raters", [False, True])
def test_verifiable_items_go_to_raters_only_when_the_project_says_so(
    db_url, start_server, to_raters
):
    items = [pairwise_item(i) for i in range(3)] + [verifiable(i) for i in range(3)]
    seeded = seed(
        db_url,
        items=items,
        raters=1,
        policy={"overlap_share": 0.0, "verifiable_to_raters": to_raters},
    )
    server = start_server(db_url)
    seen = served_items(server, seeded.tokens["rater000"])
    assert sorted(s for s in seen if s.startswith("item-")) == [
        "item-00000",
        "item-00001",
        "item-00002",
    ]
    assert sorted(s for s in seen if s.startswith("code-")) == (
        ["code-00000", "code-00001", "code-00002"] if to_raters else []
    )
