"""Authorization matrix: every route of the app x every role, member and non-member.

The route table below is checked against the app's own routes, so a new endpoint without an
entry (or without a ``guard``) fails this test until someone decides who may call it.
"""

from __future__ import annotations

import json
import re

import pytest

from .conftest import pairwise_item, seed

ALL = {"root", "padmin", "reviewer", "rater000", "outsider", "anon"}
SIGNED_IN = ALL - {"anon"}
MEMBERS_AND_ROOT = {"root", "padmin", "reviewer", "rater000"}
STAFF = {"root", "padmin", "reviewer"}
ADMINS = {"root", "padmin"}

#: (method, path) -> (action, who may call it). ``root`` is a site admin and not a member.
EXPECTED = {
    ("GET", "/api/v1/health"): ("public", ALL),
    ("POST", "/api/v1/auth/login"): ("public", ALL),
    ("POST", "/api/v1/invites/{token}/accept"): ("public", ALL),
    ("POST", "/api/v1/auth/logout"): ("authenticated", SIGNED_IN),
    ("GET", "/api/v1/auth/me"): ("authenticated", SIGNED_IN),
    ("POST", "/api/v1/auth/tokens"): ("authenticated", SIGNED_IN),
    ("GET", "/api/v1/auth/tokens"): ("authenticated", SIGNED_IN),
    ("DELETE", "/api/v1/auth/tokens/{token_id}"): ("authenticated", SIGNED_IN),
    ("GET", "/api/v1/me/credentials"): ("authenticated", SIGNED_IN),
    ("POST", "/api/v1/me/credentials"): ("authenticated", SIGNED_IN),
    ("POST", "/api/v1/me/password"): ("authenticated", SIGNED_IN),
    ("POST", "/api/v1/password-resets/{token}"): ("public", ALL),
    ("POST", "/api/v1/users/{username}/reset-link"): ("site.admin", {"root"}),
    ("GET", "/api/v1/projects"): ("authenticated", SIGNED_IN),
    ("POST", "/api/v1/users"): ("site.admin", {"root"}),
    ("GET", "/api/v1/users"): ("site.admin", {"root"}),
    ("GET", "/api/v1/audit"): ("site.admin", {"root"}),
    ("PATCH", "/api/v1/users/{username}"): ("site.admin", {"root"}),
    ("GET", "/api/v1/users/{username}/credentials"): ("site.admin", {"root"}),
    ("POST", "/api/v1/users/{username}/credentials/{domain}/verify"): ("site.admin", {"root"}),
    ("POST", "/api/v1/projects"): ("site.admin", {"root"}),
    ("GET", "/api/v1/projects/{project}"): ("project.view", MEMBERS_AND_ROOT),
    ("GET", "/api/v1/projects/{project}/rubric"): ("project.view", MEMBERS_AND_ROOT),
    ("POST", "/api/v1/projects/{project}/assignments/next"): ("project.label", {"rater000"}),
    ("POST", "/api/v1/projects/{project}/assignments/{assignment_id}/release"): (
        "project.label",
        {"rater000"},
    ),
    ("POST", "/api/v1/projects/{project}/judgments"): ("project.label", {"rater000"}),
    ("GET", "/api/v1/projects/{project}/my/status"): ("project.label", {"rater000"}),
    ("GET", "/api/v1/projects/{project}/my/judgments"): ("project.label", {"rater000"}),
    ("GET", "/api/v1/projects/{project}/my/revisions"): ("project.label", {"rater000"}),
    ("POST", "/api/v1/projects/{project}/judgments/{judgment_id}/revise"): (
        "project.label",
        {"rater000"},
    ),
    ("POST", "/api/v1/projects/{project}/judgments/{judgment_id}/edit"): (
        "project.label",
        {"rater000"},
    ),
    ("GET", "/api/v1/projects/{project}/items"): ("project.review", STAFF),
    ("GET", "/api/v1/projects/{project}/items/{item_id}"): ("project.review", STAFF),
    ("GET", "/api/v1/projects/{project}/judgments"): ("project.review", STAFF),
    ("POST", "/api/v1/projects/{project}/judgments/{judgment_id}/send-back"): (
        "project.review",
        STAFF,
    ),
    ("GET", "/api/v1/projects/{project}/raters"): ("project.review", STAFF),
    ("GET", "/api/v1/projects/{project}/quality"): ("project.review", STAFF),
    ("GET", "/api/v1/projects/{project}/extra-raters"): ("project.review", STAFF),
    ("GET", "/api/v1/projects/{project}/members"): ("project.review", STAFF),
    ("PATCH", "/api/v1/projects/{project}/settings"): ("project.manage", ADMINS),
    ("GET", "/api/v1/projects/{project}/settings/history"): ("project.manage", ADMINS),
    ("PUT", "/api/v1/projects/{project}/members/{username}"): ("project.manage", ADMINS),
    ("DELETE", "/api/v1/projects/{project}/members/{username}"): ("project.manage", ADMINS),
    ("POST", "/api/v1/projects/{project}/invites"): ("project.manage", ADMINS),
    ("POST", "/api/v1/projects/{project}/rubrics"): ("project.manage", ADMINS),
    ("POST", "/api/v1/projects/{project}/items"): ("project.manage", ADMINS),
    ("POST", "/api/v1/projects/{project}/raters/{username}/reinstate"): ("project.manage", ADMINS),
    ("POST", "/api/v1/projects/{project}/exports"): ("project.manage", ADMINS),
    ("GET", "/api/v1/projects/{project}/exports/{export_id}/files/{filename}"): (
        "project.manage",
        ADMINS,
    ),
    # -- issue 27: exports as background jobs ------------------------------------------------------
    ("POST", "/api/v1/projects/{project}/export-jobs"): ("project.manage", ADMINS),
    ("GET", "/api/v1/projects/{project}/export-jobs"): ("project.manage", ADMINS),
    ("GET", "/api/v1/projects/{project}/export-jobs/{job_id}"): ("project.manage", ADMINS),
    ("POST", "/api/v1/projects/{project}/export-jobs/{job_id}/cancel"): ("project.manage", ADMINS),
    ("GET", "/api/v1/projects/{project}/export-jobs/{job_id}/files/{filename:path}"): (
        "project.manage",
        ADMINS,
    ),
    # -- webui branch: review/admin additions (preflab.server.webapi) and the pages -----------------
    ("GET", "/api/v1/projects/{project}/review/queues"): ("project.review", STAFF),
    ("GET", "/api/v1/projects/{project}/review/items/{item_id}"): ("project.review", STAFF),
    ("POST", "/api/v1/projects/{project}/items/{item_id}/adjudicate"): ("project.review", STAFF),
    ("POST", "/api/v1/projects/{project}/items/{item_id}/reference/adjudicate"): (
        "project.review",
        STAFF,
    ),
    ("POST", "/api/v1/projects/{project}/items/file"): ("project.manage", ADMINS),
    ("POST", "/api/v1/projects/{project}/rubrics/file"): ("project.manage", ADMINS),
    ("GET", "/api/v1/projects/{project}/rubrics"): ("project.view", MEMBERS_AND_ROOT),
    # -- issue 11 (h-webapp): demonstrations review, skip/flag, offline API docs ----------------------
    ("GET", "/api/v1/projects/{project}/demonstrations/pending"): ("project.review", STAFF),
    ("POST", "/api/v1/projects/{project}/demonstrations/{judgment_id}/review"): (
        "project.review",
        STAFF,
    ),
    ("POST", "/api/v1/projects/{project}/assignments/{assignment_id}/skip"): (
        "project.label",
        {"rater000"},
    ),
    ("GET", "/api/v1/projects/{project}/skips"): ("project.review", STAFF),
    # -- issue 28: a reviewer's decision on a label its telemetry flagged -------------------------
    ("POST", "/api/v1/projects/{project}/judgments/{judgment_id}/telemetry-review"): (
        "project.review",
        STAFF,
    ),
    ("GET", "/api/v1/docs"): ("public", ALL),
    ("POST", "/api/v1/markdown/preview"): ("authenticated", SIGNED_IN),
    ("GET", "/api/v1/projects/{project}/browse"): ("project.review", STAFF),
    ("GET", "/admin/p/{project}/data"): ("project.review", STAFF),
    ("GET", "/login"): ("public", ALL),
    ("GET", "/invite/{token}"): ("public", ALL),
    ("GET", "/reset/{token}"): ("public", ALL),
    ("GET", "/"): ("authenticated", SIGNED_IN),
    ("GET", "/account"): ("authenticated", SIGNED_IN),
    ("GET", "/p/{project}"): ("project.view", MEMBERS_AND_ROOT),
    ("GET", "/p/{project}/label"): ("project.label", {"rater000"}),
    ("GET", "/p/{project}/revise/{judgment_id}"): ("project.label", {"rater000"}),
    ("GET", "/p/{project}/edit/{judgment_id}"): ("project.label", {"rater000"}),
    ("GET", "/p/{project}/qualification"): ("project.label", {"rater000"}),
    ("GET", "/p/{project}/review"): ("project.review", STAFF),
    ("GET", "/p/{project}/review/item/{item_id}"): ("project.review", STAFF),
    ("GET", "/admin"): ("site.admin", {"root"}),
    ("GET", "/admin/audit"): ("site.admin", {"root"}),
    ("GET", "/admin/p/{project}"): ("project.manage", ADMINS),
    ("GET", "/admin/p/{project}/import"): ("project.manage", ADMINS),
    ("GET", "/admin/p/{project}/dashboard"): ("project.review", STAFF),
    ("GET", "/admin/p/{project}/export"): ("project.manage", ADMINS),
    ("GET", "/admin/p/{project}/leaderboard"): ("project.manage", ADMINS),
}

PARAMS = {
    "project": "demo",
    "username": "victim",
    "token": "bogus-invite",
    "token_id": "999999",
    "assignment_id": "asg_missing",
    "judgment_id": "999999",
    "item_id": "item-00000",
    "domain": "math",
    "export_id": "999999",
    "job_id": "999999",
    "filename": "x.jsonl",
}


def app_routes():
    from preflab.server import create_app

    app = create_app("sqlite:///unused-authz.db")
    from preflab.server.permissions import iter_api_routes

    out = {}
    for route in iter_api_routes(app.routes):
        actions = [getattr(d.call, "preflab_action", None) for d in route.dependant.dependencies]
        actions = [a for a in actions if a]
        for method in route.methods:
            out[(method, route.path)] = actions
    app.state.db.dispose()
    return out


def test_every_route_has_exactly_one_guard_and_a_rule():
    routes = app_routes()
    unguarded = sorted(k for k, a in routes.items() if len(a) != 1)
    assert not unguarded, f"routes without exactly one guard(...): {unguarded}"
    unknown = sorted(set(routes) - set(EXPECTED))
    assert not unknown, f"new routes: add them to EXPECTED with who may call them: {unknown}"
    stale = sorted(set(EXPECTED) - set(routes))
    assert not stale, f"EXPECTED lists routes the app no longer has: {stale}"
    wrong = {k: (routes[k][0], EXPECTED[k][0]) for k in routes if routes[k][0] != EXPECTED[k][0]}
    assert not wrong, f"guard action differs from the matrix: {wrong}"


@pytest.fixture(scope="module")
def matrix_server(tmp_path_factory):
    from .conftest import Server

    tmp = tmp_path_factory.mktemp("authz")
    url = f"sqlite:///{tmp / 'authz.db'}"
    items = [pairwise_item(i) for i in range(5)] + [
        pairwise_item(i, gold=-1, prefix="g") for i in range(5)
    ]
    seeded = seed(url, items=items, raters=2, policy={"gold_rate": 0.5})
    from preflab.server.auth import set_membership
    from preflab.server.database import Database
    from preflab.store import repo
    from preflab.store.server_models import User

    db = Database(url, pool_size=1, max_overflow=1)
    with db.writing() as s:
        victim = User(username="victim", display_name="victim")
        s.add(victim)
        s.flush()
        set_membership(s, repo.get_project(s, "demo"), victim, "rater")
    db.dispose()
    server = Server(url, tmp=tmp).start()
    yield server, seeded
    server.kill()


@pytest.mark.slow  # every route x every role
def test_matrix(matrix_server):
    server, seeded = matrix_server
    tokens = {"root": seeded.admin_token, **seeded.tokens}
    failures = []
    for (method, template), (_action, allowed) in sorted(EXPECTED.items()):
        path = re.sub(r"\{(\w+)(?::path)?\}", lambda m: PARAMS[m.group(1)], template)
        for who in sorted(ALL):
            with server.client(tokens.get(who)) as c:
                kw = {"json": {}} if method in ("POST", "PUT", "PATCH") else {}
                r = c.request(method, path, **kw)
            denied = r.headers.get("x-preflab-denied") == "1"
            if r.status_code >= 500:
                failures.append(f"{who} {method} {path}: {r.status_code} {r.text[:200]}")
            elif (who in allowed) == denied:
                failures.append(
                    f"{who} {method} {path}: {'denied' if denied else 'allowed'} ({r.status_code}) "
                    f"but the matrix says {'allowed' if who in allowed else 'denied'}"
                )
            elif denied and r.status_code not in (401, 403, 404):
                failures.append(f"{who} {method} {path}: denied with {r.status_code}")
    assert not failures, "\n".join(failures)


def test_rater_never_sees_gold_references_other_labels_or_exports(matrix_server):
    server, seeded = matrix_server
    other, me = server.client(seeded.tokens["rater001"]), server.client(seeded.tokens["rater000"])
    other_ids = []
    # the other rater labels three items (of 5 production + 5 gold), so some are left for me
    # whatever the gold scorer's timing (gold is scored after the response, issue 10 §3.7)
    for _ in range(3):
        task = other.post("/api/v1/projects/demo/assignments/next").json()["task"]
        if task is None:
            break
        r = other.post(
            "/api/v1/projects/demo/judgments",
            json={
                "assignment_id": task["assignment_id"],
                "judgment": {
                    "kind": "pairwise",
                    "winner": "b",
                    "strength": 3,
                    "rationale": "OTHER-RATER-RATIONALE",
                },
            },
        )
        other_ids.append(r.json()["judgment_id"])
    seen = []
    for _ in range(10):
        r = me.post("/api/v1/projects/demo/assignments/next")
        seen.append(r.text)
        task = r.json()["task"]
        if task is None:
            break
        r = me.post(
            "/api/v1/projects/demo/judgments",
            json={
                "assignment_id": task["assignment_id"],
                "judgment": {"kind": "pairwise", "winner": "a", "strength": 1, "rationale": "mine"},
            },
        )
        seen.append(r.text)
    for (method, template), (_a, allowed) in EXPECTED.items():
        if method == "GET" and "rater000" in allowed:
            seen.append(
                me.get(re.sub(r"\{(\w+)(?::path)?\}", lambda m: PARAMS[m.group(1)], template)).text
            )
    for forbidden in (
        "/api/v1/projects/demo/judgments",
        "/api/v1/projects/demo/items/g-00000",
        "/api/v1/projects/demo/quality",
    ):
        r = me.get(forbidden)
        assert r.status_code == 403
        seen.append(r.text)
    r = me.post("/api/v1/projects/demo/exports", json={"format": "jsonl"})
    assert r.status_code == 403
    blob = "\n".join(seen)
    assert "SECRET-REFERENCE" not in blob
    assert "is correct" not in blob  # gold explanations
    assert '"gold"' not in blob and '"reference"' not in blob and '"expected"' not in blob
    assert "OTHER-RATER-RATIONALE" not in blob and "rater001" not in blob
    mine = me.get("/api/v1/projects/demo/my/judgments").json()
    assert mine and not set(j["judgment_id"] for j in mine) & set(other_ids)
    assert all(json.dumps(j).find("OTHER-RATER") < 0 for j in mine)
    other.close()
    me.close()
