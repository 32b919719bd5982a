"""One rule, every path: the fast lane (SQLite executor or PostgreSQL executor) and the framework
path give identical outcomes for every policy variant × user state × database.

Each case runs three raters of one project through the same script: ``rater000`` through an
app whose fast lane is on, ``rater001`` through an app whose lane is off (the same flow on the
routes' executor, after the FastAPI guard), ``rater002`` through the ORM oracle
(``tests/server/oracle.py``). All first label two items (the second cycle is the lane's, which
the test checks), take a third task, then their account changes state; then all submit that
task and ask for the next one twice. Their answers must be equal, and match the expected
outcome of the state (a refusal names the reason).
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, insert, text

from .conftest import PATHS, seed, serve_by

# the policy x user state x database matrix (like the authorization matrix): `make test`
pytestmark = pytest.mark.slow

NEXT = "/api/v1/projects/demo/assignments/next"
SUBMIT = "/api/v1/projects/demo/judgments"

POLICIES = {
    "plain": {},
    # the rater's verified credential is withdrawn with the state change
    "required_domains": {"required_domains": ["law"]},
    # the held task is the rater's third: after it, the cap
    "max_items_per_rater": {"max_items_per_rater": 3},
}

#: state -> (SQL run against the rater's row, the expected (submit, next) status codes)
STATES = {
    "active": ("", (201, 200)),
    "deactivated": ("UPDATE users SET is_active = :false WHERE pk = :user_pk", (401, 401)),
    "removed": ("DELETE FROM memberships WHERE user_pk = :user_pk", (404, 404)),
    "suspended": (
        "UPDATE rater_status SET status = 'suspended', reason = 'drift' WHERE user_pk = :user_pk",
        (403, 200),
    ),
    "unqualified": (
        "UPDATE rater_status SET status = 'failed' WHERE user_pk = :user_pk",
        (201, 200),
    ),
    "expired_token": (
        "UPDATE api_tokens SET expires_at = :past WHERE user_pk = :user_pk",
        (401, 401),
    ),
}

#: What the second request (next) says, where it answers 200 without a task.
EXPECTED_REASON = {"suspended": "suspended", "unqualified": "not_qualified"}


def _judgment(task: dict) -> dict:
    return {
        "assignment_id": task["assignment_id"],
        "idempotency_key": uuid.uuid4().hex,
        "judgment": {"kind": "pairwise", "winner": "b", "strength": 2, "rationale": "B is right"},
        "telemetry": {"active_ms": 1200, "typed_chars": 10},
    }


def _shape(r) -> tuple:
    """The outcome of a response without what differs between two raters (ids, times)."""
    body = r.json()
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, str):
        detail = re.sub(r"asg_[\w-]+|\d{4}-\d\d-\d\dT[\d:.+]+", "<id>", detail)
    task = body.get("task") if isinstance(body, dict) else None
    return (
        r.status_code,
        detail,
        body.get("reason"),
        task is not None,
        body.get("resumed"),
        body.get("created"),
        body.get("replayed"),
    )


def _script(c: TestClient, token: str, apply_state) -> list[tuple]:
    h = {"Authorization": f"Bearer {token}"}
    for _ in range(2):
        task = c.post(NEXT, headers=h).json()["task"]
        assert c.post(SUBMIT, headers=h, json=_judgment(task)).status_code == 201
    held = c.post(NEXT, headers=h).json()["task"]
    apply_state()
    submitted = c.post(SUBMIT, headers=h, json=_judgment(held))
    return [_shape(submitted), _shape(c.post(NEXT, headers=h)), _shape(c.post(NEXT, headers=h))]


@pytest.mark.parametrize("state", list(STATES))
@pytest.mark.parametrize("policy", list(POLICIES))
def test_lane_framework_and_oracle_agree(db_url, monkeypatch, policy, state):
    from preflab.server import fastlane
    from preflab.server.app import create_app
    from preflab.store.server_models import Credential

    seeded = seed(db_url, raters=3, n_items=18, policy=POLICIES[policy], extra_roles=False)
    engine = create_engine(db_url)
    with engine.begin() as conn:
        pks = dict(conn.execute(text("SELECT username, pk FROM users")).all())
        if policy == "required_domains":
            for name in ("rater000", "rater001", "rater002"):
                conn.execute(
                    insert(Credential.__table__).values(
                        user_pk=pks[name], domain="law", verified=True
                    )
                )

    def state_of(name: str):
        def apply() -> None:
            with engine.begin() as conn:
                if policy == "required_domains":
                    conn.execute(
                        text("DELETE FROM credentials WHERE user_pk = :u"), {"u": pks[name]}
                    )
                if STATES[state][0]:
                    conn.execute(
                        text(STATES[state][0]),
                        {
                            "user_pk": pks[name],
                            "false": False,
                            "past": datetime.now(UTC) - timedelta(hours=1),
                        },
                    )

        return apply

    outcomes, served = {}, {}
    for name, path in zip(("rater000", "rater001", "rater002"), PATHS, strict=True):
        serve_by(monkeypatch, path)
        fastlane.STATS.clear()
        app = create_app(db_url)
        with TestClient(app) as c:
            outcomes[name] = _script(c, seeded.tokens[name], state_of(name))
        served[name] = fastlane.STATS.get("served", 0)
        app.state.db.dispose()
    engine.dispose()

    # the lane really ran, and only there
    assert served["rater000"] >= 2 and served["rater001"] == served["rater002"] == 0
    assert outcomes["rater000"] == outcomes["rater001"] == outcomes["rater002"]
    submit, after = outcomes["rater000"][0], outcomes["rater000"][1]
    expected_submit, expected_next = STATES[state][1]
    assert (submit[0], after[0]) == (expected_submit, expected_next)
    if state in EXPECTED_REASON:
        assert after[2] == EXPECTED_REASON[state] and after[3] is False
    elif state == "active" and policy == "required_domains":
        assert after[2] == "domain_required"
    elif state == "active" and policy == "max_items_per_rater":
        assert after[2] == "limit_reached"
    elif state == "active":
        assert after[3] is True  # a new task


@pytest.mark.parametrize("lane", [True, False], ids=["lane", "framework"])
def test_dead_postgres_connections_are_replaced_without_a_ping(pg_url, monkeypatch, lane):
    """No pre-ping per request: when PostgreSQL drops every connection of the app (a restart,
    an idle timeout), the next request still succeeds — the dead connection is retried."""
    from preflab.server import fastlane
    from preflab.server.app import create_app

    monkeypatch.setattr(fastlane, "ENABLED", lane)
    seeded = seed(pg_url, raters=1, n_items=6, extra_roles=False)
    app = create_app(pg_url)
    assert app.state.db.engine.pool._pre_ping is False
    h = {"Authorization": f"Bearer {seeded.tokens['rater000']}"}
    engine = create_engine(pg_url)
    with TestClient(app) as c:
        for _ in range(2):
            task = c.post(NEXT, headers=h).json()["task"]
            assert c.post(SUBMIT, headers=h, json=_judgment(task)).status_code == 201
        with engine.connect() as conn:
            killed = conn.execute(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            ).scalar()
        assert killed >= 1
        task = c.post(NEXT, headers=h)
        assert task.status_code == 200, task.text
        assert c.post(SUBMIT, headers=h, json=_judgment(task.json()["task"])).status_code == 201
    app.state.db.dispose()
    engine.dispose()
