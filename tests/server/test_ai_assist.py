"""AI assistance in the labelling UI (issue 30 item 3; docs/judges.md, "AI assistance"): the label
page shows a judge's label as a suggestion when the project opts in; the server records on the
lease what it showed, and the label submitted on that lease is ``source: ai_assisted`` with
``provenance.assisted_by``. Off, or on gold, nothing is shown and the label is as before."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from .conftest import pairwise_item, seed

JUDGE = "judge-model-1"
EVIL = "<script>alert('x')</script><b>bold</b>"


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _judge_label(url: str, item_id: str, winner: str = "a", rationale: str = EVIL) -> int:
    """A model judge's ``source: ai`` label on the item, stored as ``preflab judge run`` stores it."""
    from preflab.schema import JudgeRecord, PairwiseJudgment, Provenance
    from preflab.server.database import Database
    from preflab.store import repo

    db = Database(url, pool_size=1, max_overflow=1)
    with db.writing() as s:
        project = repo.get_project(s, "demo")
        assert project is not None
        row, _ = repo.add_judgment(
            s,
            project,
            PairwiseJudgment(
                item_id=item_id,
                shown_order=("a", "b"),
                winner=winner,
                strength=2,
                rationale=rationale,
                provenance=Provenance(
                    rater_id=f"judge:{JUDGE}",
                    source="ai",
                    judge=JudgeRecord(
                        model=JUDGE, template="pairwise", template_version=1, endpoint="http://x"
                    ),
                ),
            ),
        )
        pk = row.pk
    db.dispose()
    return pk


def _rows(url: str) -> list[Any]:
    from preflab.server.database import Database
    from preflab.store.models import JudgmentRow

    db = Database(url, pool_size=1, max_overflow=1)
    with db.reading() as s:
        rows = list(s.scalars(select(JudgmentRow).order_by(JudgmentRow.pk)))
        for r in rows:
            s.expunge(r)
    db.dispose()
    return rows


def _label_and_submit(
    c: TestClient, token: str, winner: str = "b"
) -> tuple[dict[str, Any], str, dict[str, Any]]:
    """Next task, the label page (as the browser shows it), then the submit (sent twice: the
    retry is the first answer again, not a second label): (task, page, answer)."""
    r = c.post("/api/v1/projects/demo/assignments/next", headers=_bearer(token))
    assert r.status_code in (200, 201), r.text
    task = r.json()["task"]
    page = c.get("/p/demo/label", headers=_bearer(token))
    assert page.status_code == 200, page.text
    body = {
        "assignment_id": task["assignment_id"],
        "idempotency_key": uuid.uuid4().hex,
        "judgment": {"kind": "pairwise", "winner": winner, "strength": 1, "rationale": "mine"},
    }
    r = c.post("/api/v1/projects/demo/judgments", json=body, headers=_bearer(token))
    assert r.status_code in (200, 201), r.text
    again = c.post("/api/v1/projects/demo/judgments", json=body, headers=_bearer(token))
    assert again.status_code == 200, again.text
    assert again.json()["judgment_id"] == r.json()["judgment_id"]
    return task, page.text, r.json()


@pytest.mark.parametrize("lane", [True, False])
def test_a_label_made_with_a_suggestion_in_view_is_ai_assisted(db_url, monkeypatch, lane):
    from preflab.server import fastlane
    from preflab.server.app import create_app
    from preflab.store.repo import judgment_from_row

    monkeypatch.setattr(fastlane, "ENABLED", lane)
    seeded = seed(db_url, n_items=1, raters=1, policy={"ai_assist": JUDGE})
    judge_pk = _judge_label(db_url, "item-00000")
    with TestClient(create_app(db_url)) as c:
        task, page, answer = _label_and_submit(c, seeded.tokens["rater000"])
    assert 'id="ai-suggestion"' in page
    assert EVIL not in page and "&lt;script&gt;" in page, "the judge's rationale is inert text"
    better = "A" if task["shown_order"][0] == "a" else "B"
    assert f"Verdict: Answer {better} is better" in page, "named as the rater sees the answers"
    mine = [r for r in _rows(db_url) if r.pk == answer["judgment_id"]]
    assert mine[0].source == "ai_assisted"
    judge_hash = next(r.content_hash for r in _rows(db_url) if r.pk == judge_pk)
    record = {
        "origin": "judge",
        "content_hash": judge_hash,
        "judgment_id": judge_pk,
        "judge": JUDGE,
    }
    assert mine[0].assisted_by == [record]
    from preflab.server.database import Database

    db = Database(db_url, pool_size=1, max_overflow=1)
    with db.reading() as s:
        from preflab.store.models import JudgmentRow

        wire = judgment_from_row(s.get(JudgmentRow, mine[0].pk))
    db.dispose()
    assert wire.provenance.source == "ai_assisted"
    assert [a.model_dump(exclude_none=True) for a in wire.provenance.assisted_by or []] == [record]


def test_the_api_alone_shows_no_suggestion_and_the_label_stays_human(db_url):
    """A client that never loads the label page was shown nothing: its label is human, stored
    byte for byte as before (no assisted_by, the same content hash as without the feature)."""
    from preflab.server.app import create_app

    seeded = seed(db_url, n_items=1, raters=1, policy={"ai_assist": JUDGE})
    _judge_label(db_url, "item-00000")
    token = seeded.tokens["rater000"]
    with TestClient(create_app(db_url)) as c:
        task = c.post("/api/v1/projects/demo/assignments/next", headers=_bearer(token)).json()[
            "task"
        ]
        assert "suggestion" not in task and "judge" not in str(task)
        r = c.post(
            "/api/v1/projects/demo/judgments",
            json={
                "assignment_id": task["assignment_id"],
                "judgment": {"kind": "pairwise", "winner": "b", "strength": 1},
            },
            headers=_bearer(token),
        )
        assert r.status_code in (200, 201), r.text
    mine = next(row for row in _rows(db_url) if row.pk == r.json()["judgment_id"])
    assert mine.source == "human" and mine.assisted_by is None


def test_no_suggestion_when_the_project_did_not_opt_in(db_url):
    from preflab.server.app import create_app

    seeded = seed(db_url, n_items=1, raters=1)
    _judge_label(db_url, "item-00000")
    with TestClient(create_app(db_url)) as c:
        _, page, answer = _label_and_submit(c, seeded.tokens["rater000"])
    assert 'id="ai-suggestion"' not in page
    mine = next(row for row in _rows(db_url) if row.pk == answer["judgment_id"])
    assert mine.source == "human" and mine.assisted_by is None


def test_no_suggestion_on_a_gold_item(db_url):
    """Gold tests the rater alone: the judge's label on a gold (here qualification) item is never
    shown (the rule is "production leases only", so production gold is the same)."""
    from preflab.server.app import create_app

    items = [pairwise_item(0, gold=-1, qualification=True, prefix="q")] + [pairwise_item(1)]
    qualification = {"n_items": 1, "pass_bar": 0.5, "min_items": 1, "confidence": 0.6}
    policy = {"ai_assist": JUDGE, "qualification": qualification}
    seeded = seed(db_url, items=items, raters=1, policy=policy)
    _judge_label(db_url, "q-00000")
    from preflab.server.database import Database
    from preflab.store.server_models import Assignment

    with TestClient(create_app(db_url)) as c:
        _, page, answer = _label_and_submit(c, seeded.tokens["rater000"])
    db = Database(db_url, pool_size=1, max_overflow=1)
    with db.reading() as s:
        lease = s.scalar(select(Assignment))
        assert lease is not None and lease.role != "production"
        assert lease.suggestion is None
    db.dispose()
    assert 'id="ai-suggestion"' not in page
    mine = next(row for row in _rows(db_url) if row.pk == answer["judgment_id"])
    assert mine.source == "human" and mine.assisted_by is None


def test_an_edit_of_an_assisted_label_stays_assisted(db_url):
    from preflab.server.app import create_app

    seeded = seed(db_url, n_items=1, raters=1, policy={"ai_assist": JUDGE})
    _judge_label(db_url, "item-00000")
    token = seeded.tokens["rater000"]
    with TestClient(create_app(db_url)) as c:
        _, _, answer = _label_and_submit(c, token)
        first = answer["judgment_id"]
        r = c.post(
            f"/api/v1/projects/demo/judgments/{first}/edit",
            json={"judgment": {"kind": "pairwise", "winner": "a", "strength": 2}},
            headers=_bearer(token),
        )
        assert r.status_code in (200, 201), r.text
    rows = {row.pk: row for row in _rows(db_url)}
    edited = rows[r.json()["judgment_id"]]
    assert edited.supersedes_pk == first
    assert edited.source == "ai_assisted" and edited.assisted_by == rows[first].assisted_by


def test_imported_step_suggestions_follow_the_same_rule(db_url):
    """A trajectory whose imported step verdicts are suggestions: the rater who saw them on the
    label page made an ai_assisted label that names the imported verdicts."""
    from preflab.io.importer import import_files
    from preflab.server.app import create_app
    from preflab.server.database import Database

    data = Path(__file__).resolve().parents[1] / "data"
    seeded = seed(
        db_url, items=[], kinds=["steps"], raters=1, policy={"imported_step_verdicts": "suggestion"}
    )
    db = Database(db_url, pool_size=1, max_overflow=1)
    import_files(db.write_engine, seeded.project, [data / "trajectory-rlhf-2026.11.json"])
    db.dispose()
    token = seeded.tokens["rater000"]
    with TestClient(create_app(db_url)) as c:
        task = c.post("/api/v1/projects/demo/assignments/next", headers=_bearer(token)).json()[
            "task"
        ]
        page = c.get("/p/demo/label", headers=_bearer(token))
        assert "suggested +1" in page.text
        r = c.post(
            "/api/v1/projects/demo/judgments",
            json={
                "assignment_id": task["assignment_id"],
                "judgment": {
                    "kind": "steps",
                    "candidate_id": task["item"]["candidates"][0]["id"],
                    "steps": ["1", "2"],
                    "verdicts": [1, -1],
                },
            },
            headers=_bearer(token),
        )
        assert r.status_code in (200, 201), r.text
    mine = next(row for row in _rows(db_url) if row.pk == r.json()["judgment_id"])
    assert mine.source == "ai_assisted"
    (record,) = mine.assisted_by
    assert record["origin"] == "imported_step_verdicts" and len(record["content_hash"]) == 64
