"""Qualification on every path: the fast lane, the routes' executor and the ORM oracle
(``tests/server/oracle.py``) answer a qualification set alike — its tasks in order, each answer
scored at once with the expected judgment, a replay of an answer giving the first result, the
pass or fail decided when the evidence suffices or the set runs out, then production or the
refusal — and leave the same rater status, gold outcomes and labels.

Six raters of one project: two a path, one answering every qualification item right and one
answering every item wrong.
"""

from __future__ import annotations

import uuid

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from .conftest import PATHS, pairwise_item, seed, serve_by

pytestmark = pytest.mark.slow

NEXT = "/api/v1/projects/demo/assignments/next"
SUBMIT = "/api/v1/projects/demo/judgments"
POLICY = {
    "qualification": {"n_items": 4, "pass_bar": 0.75, "min_items": 3, "confidence": 0.6},
    "gold_rate": 0.0,
    "randomise_order": True,
}


def _answer(task: dict, right: bool) -> dict:
    """Every qualification item's gold says the first answer ("a") is better."""
    a_shown_first = task["shown_order"][0] == "a"
    winner = "a" if a_shown_first == right else "b"
    return {"kind": "pairwise", "winner": winner, "strength": 2, "rationale": "compared"}


def _shape_next(r) -> tuple:
    body = r.json()
    task = body.get("task")
    return (
        "next",
        r.status_code,
        task["phase"] if task else body.get("reason"),
        body.get("resumed"),
    )


def _shape_submit(r) -> tuple:
    body = r.json()
    gold, qual = body.get("gold") or {}, body.get("qualification") or {}
    return (
        "submit",
        r.status_code,
        body.get("created"),
        gold.get("correct"),
        (gold.get("expected") or {}).get("winner"),
        gold.get("explanation"),
        qual.get("status"),
        qual.get("answered"),
        qual.get("correct"),
    )


def _script(c: TestClient, token: str, right: bool) -> list[tuple]:
    h = {"Authorization": f"Bearer {token}"}
    out: list[tuple] = []
    production = 0
    for step in range(10):
        r = c.post(NEXT, headers=h)
        out.append(_shape_next(r))
        task = r.json().get("task")
        if task is None or production == 2:
            break
        if task["phase"] == "production":
            production += 1
        out.append(_shape_next(c.post(NEXT, headers=h)))  # the live lease comes back
        body = {
            "assignment_id": task["assignment_id"],
            "judgment": _answer(task, right),
            "idempotency_key": uuid.uuid4().hex,
        }
        out.append(_shape_submit(c.post(SUBMIT, headers=h, json=body)))
        if step == 0:  # a retry of the first answer: its first result again, nothing stored
            out.append(_shape_submit(c.post(SUBMIT, headers=h, json=body)))
            other = {**body, "judgment": _answer(task, not right)}
            out.append(_shape_submit(c.post(SUBMIT, headers=h, json=other)))  # 409
    return out


def _stored(url: str, user_pk: int) -> tuple:
    engine = create_engine(url)
    with engine.connect() as conn:
        status = conn.execute(
            text("SELECT status, reason FROM rater_status WHERE user_pk = :u"), {"u": user_pk}
        ).one()
        outcomes = conn.execute(
            text("SELECT phase, correct FROM gold_outcomes WHERE user_pk = :u ORDER BY pk"),
            {"u": user_pk},
        ).all()
        leases = conn.execute(
            text("SELECT role, status FROM assignments WHERE user_pk = :u ORDER BY pk"),
            {"u": user_pk},
        ).all()
        labels = conn.execute(
            text(
                "SELECT count(*) FROM judgments j JOIN raters r ON r.pk = j.rater_pk "
                "WHERE r.user_pk = :u"
            ),
            {"u": user_pk},
        ).scalar()
    engine.dispose()
    return tuple(status), [tuple(o) for o in outcomes], [tuple(x) for x in leases], labels


def test_qualification_is_the_same_on_every_path(db_url, monkeypatch) -> None:
    from preflab.server import fastlane
    from preflab.server.app import create_app

    items = [pairwise_item(i, gold=-1, qualification=True, prefix="q") for i in range(4)]
    items += [pairwise_item(i) for i in range(12)]
    seeded = seed(db_url, items=items, raters=6, policy=POLICY, extra_roles=False)
    engine = create_engine(db_url)
    with engine.connect() as conn:
        pks = dict(conn.execute(text("SELECT username, pk FROM users")).all())
    engine.dispose()
    answers: dict[tuple[str, bool], list[tuple]] = {}
    stored: dict[tuple[str, bool], tuple] = {}
    served: dict[str, int] = {}
    for i, name in enumerate(sorted(seeded.tokens)):
        path, right = PATHS[i // 2], i % 2 == 0
        serve_by(monkeypatch, path)
        fastlane.STATS.clear()
        app = create_app(db_url)
        with TestClient(app) as c:
            answers[(path, right)] = _script(c, seeded.tokens[name], right)
        served[path] = served.get(path, 0) + fastlane.STATS.get("served", 0)
        app.state.db.dispose()
        stored[(path, right)] = _stored(db_url, pks[name])
        monkeypatch.undo()

    for right in (True, False):
        lane, framework, oracle = (answers[(p, right)] for p in PATHS)
        assert lane == framework == oracle, (right, lane, framework, oracle)
        assert stored[("lane", right)] == stored[("framework", right)] == stored[("oracle", right)]
    # what the script shows: feedback with the expected answer, the decision, then production
    passed, failed = answers[("lane", True)], answers[("lane", False)]
    assert passed[2][:6] == ("submit", 201, True, True, "a", "answer A is correct")
    assert passed[3][:3] == ("submit", 200, False)  # the replay: the first result, not stored
    assert passed[4][:2] == ("submit", 409)  # the same key with another answer
    assert ("next", 200, "production", None) in passed
    assert stored[("lane", True)][0][0] == "qualified"
    assert failed[-1] == ("next", 200, "not_qualified", None)
    assert stored[("lane", False)][0][0] == "failed"
    assert all(phase == "qualification" for phase, _ in stored[("lane", False)][1])
    # the lane served the qualification tasks itself; answers went on to the routes
    assert served["lane"] >= 4 and served["framework"] == served["oracle"] == 0
