"""Regression tests for the security holes of issue 10 section 3, each on SQLite and PostgreSQL
(``db_url``), through the real app in-process (``TestClient``) unless the hole needs sockets,
threads or a browser. Every test here failed before its fix."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from fastapi.testclient import TestClient

from .conftest import pairwise_item, seed

# races over HTTP (20 concurrent invites, 40 concurrent logins), timing comparisons: `make test`
pytestmark = pytest.mark.slow

PASSWORD = "correct horse battery staple"


@contextmanager
def app_client(
    url: str,
    *,
    lane: bool = True,
    config_changes: dict | None = None,
    monkeypatch: pytest.MonkeyPatch | None = None,
    **client_kw,
) -> Iterator[TestClient]:
    """The app on ``url`` in-process; ``lane`` turns the SQLite fast lane on or off."""
    from preflab.server import fastlane
    from preflab.server.app import ServerConfig, create_app

    if monkeypatch is not None:
        monkeypatch.setattr(fastlane, "ENABLED", lane)
    config = ServerConfig(db_url=url)
    for k, v in (config_changes or {}).items():
        setattr(config, k, v)
    app = create_app(config=config)
    try:
        with TestClient(app, **client_kw) as c:
            yield c
    finally:
        app.state.db.dispose()


def add_password_user(
    url: str, username: str, *, role: str | None = "rater", password: str = PASSWORD
) -> None:
    from preflab.server.auth import create_user, set_membership
    from preflab.server.database import Database
    from preflab.store import repo

    db = Database(url, pool_size=1, max_overflow=1)
    with db.writing() as s:
        user, _ = create_user(s, username, password=password)
        if role:
            set_membership(s, repo.get_project(s, "demo"), user, role)
    db.dispose()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def submit_body(task: dict, key: str | None = None, winner: str = "b", strength: int = 2) -> dict:
    return {
        "assignment_id": task["assignment_id"],
        "idempotency_key": key or uuid.uuid4().hex,
        "judgment": {
            "kind": "pairwise",
            "winner": winner,
            "strength": strength,
            "rationale": "because",
        },
    }


# -- 2. open redirect after login ---------------------------------------------------------------------

#: ``next`` values that must not leave the site (as the server receives them, percent-decoded).
OFFSITE = [
    "//evil.example/x",
    "/\\evil.example/x",
    "\\/evil.example",
    "/\\/evil.example",
    "/\t/evil.example",
    "/\n/evil.example",
    "/\r\n/evil.example",
    " /evil.example",
    "/ /evil.example",
    "https://evil.example/",
    "http:/evil.example",
    "javascript:alert(1)",
    "data:text/html,x",
    "evil.example",
    "///evil.example",
    "\x00/evil",
    "/\x00/evil.example",
    "//",
    "",
    None,
]
ONSITE = [
    "/",
    "/%5Cstays-here",
    "/p/demo/label",
    "/p/demo/label?kind=pairwise&auto=1",
    "/admin#users",
    "/p/caf%C3%A9",
]


@pytest.mark.parametrize("target", OFFSITE)
def test_next_off_the_site_becomes_the_home_page(target):
    from preflab.server.auth import safe_redirect_path

    assert safe_redirect_path(target) == "/"


@pytest.mark.parametrize("target", ONSITE)
def test_next_on_the_site_is_kept(target):
    from preflab.server.auth import safe_redirect_path

    assert safe_redirect_path(target) == target


def test_login_page_redirects_a_logged_in_user_only_within_the_site(db_url):
    seed(db_url, n_items=1, raters=0, extra_roles=False)
    add_password_user(db_url, "alice")
    with app_client(db_url, follow_redirects=False) as c:
        assert (
            c.post(
                "/api/v1/auth/login", json={"username": "alice", "password": PASSWORD}
            ).status_code
            == 200
        )
        for target in [t for t in OFFSITE if t is not None and "\x00" not in t]:
            r = c.get("/login", params={"next": target})
            assert r.status_code == 303 and r.headers["location"] == "/", target
        r = c.get("/login?next=/%5Cevil.example/x")  # the reported URL, exactly
        assert r.headers["location"] == "/"
        assert c.get("/login", params={"next": "/p/demo"}).headers["location"] == "/p/demo"


# -- 5. a password reset revokes API tokens -----------------------------------------------------------


def test_admin_password_reset_revokes_the_users_api_tokens(db_url):
    s = seed(db_url, n_items=1, raters=2)
    with app_client(db_url) as c:
        assert c.get("/api/v1/auth/me", headers=bearer(s.tokens["rater000"])).status_code == 200
        r = c.patch(
            "/api/v1/users/rater000",
            json={"password": "a brand new password"},
            headers=bearer(s.admin_token),
        )
        assert r.status_code == 200, r.text
        stale = c.get("/api/v1/auth/me", headers=bearer(s.tokens["rater000"]))
        assert stale.status_code == 401 and "revoked" in stale.json()["detail"]
        # the fast lane's token check sees it too
        assert (
            c.post(
                "/api/v1/projects/demo/assignments/next", headers=bearer(s.tokens["rater000"])
            ).status_code
            == 401
        )
        # explicit option: keep them
        r = c.patch(
            "/api/v1/users/rater001",
            json={"password": "another new password", "keep_api_tokens": True},
            headers=bearer(s.admin_token),
        )
        assert r.status_code == 200
        assert c.get("/api/v1/auth/me", headers=bearer(s.tokens["rater001"])).status_code == 200


# -- 6. an idempotency key reused with a different body ---------------------------------------------------


@pytest.mark.parametrize("lane", [True, False], ids=["lane", "no-lane"])
def test_idempotency_key_reused_with_another_answer_is_409(db_url, lane, monkeypatch):
    s = seed(db_url, n_items=4, raters=1, extra_roles=False, policy={"overlap_share": 0.0})
    h = bearer(s.tokens["rater000"])
    with app_client(db_url, lane=lane, monkeypatch=monkeypatch) as c:
        task = c.post("/api/v1/projects/demo/assignments/next", headers=h).json()["task"]
        key = uuid.uuid4().hex
        first = c.post("/api/v1/projects/demo/judgments", json=submit_body(task, key), headers=h)
        assert first.status_code == 201
        same = c.post("/api/v1/projects/demo/judgments", json=submit_body(task, key), headers=h)
        assert same.status_code == 200 and same.json()["replayed"] is True
        assert same.json()["judgment_id"] == first.json()["judgment_id"]
        other = c.post(
            "/api/v1/projects/demo/judgments", json=submit_body(task, key, winner="a"), headers=h
        )
        assert other.status_code == 409 and "different submission" in other.json()["detail"]
        # the same key for a different assignment is a different request too
        task2 = c.post("/api/v1/projects/demo/assignments/next", headers=h).json()["task"]
        moved = c.post("/api/v1/projects/demo/judgments", json=submit_body(task2, key), headers=h)
        assert moved.status_code == 409
        # nothing was stored by the refused requests; the second task is still open
        fresh = c.post("/api/v1/projects/demo/judgments", json=submit_body(task2), headers=h)
        assert fresh.status_code == 201
        mine = c.get("/api/v1/projects/demo/my/judgments", headers=h).json()
        assert [j["body"]["winner"] for j in mine] == ["b", "b"]


@pytest.mark.parametrize("lane", [True, False], ids=["lane", "no-lane"])
def test_two_raters_may_use_the_same_idempotency_key(db_url, lane, monkeypatch):
    """Issue 31: keys were project-wide, so a second rater whose client picked the same key got
    409 for an honest submission. A key is now a rater's own: both are stored, and each rater's
    retry still replays their own first answer."""
    s = seed(db_url, n_items=4, raters=2, extra_roles=False, policy={"overlap_share": 0.0})
    one, two = bearer(s.tokens["rater000"]), bearer(s.tokens["rater001"])
    key = "submission-1"  # e.g. a counter both clients start at 1
    with app_client(db_url, lane=lane, monkeypatch=monkeypatch) as c:
        t1 = c.post("/api/v1/projects/demo/assignments/next", headers=one).json()["task"]
        t2 = c.post("/api/v1/projects/demo/assignments/next", headers=two).json()["task"]
        a = c.post("/api/v1/projects/demo/judgments", json=submit_body(t1, key), headers=one)
        b = c.post("/api/v1/projects/demo/judgments", json=submit_body(t2, key), headers=two)
        assert (a.status_code, b.status_code) == (201, 201), (a.text, b.text)
        assert a.json()["judgment_id"] != b.json()["judgment_id"]
        again = c.post("/api/v1/projects/demo/judgments", json=submit_body(t2, key), headers=two)
        assert again.status_code == 200 and again.json()["judgment_id"] == b.json()["judgment_id"]
        other = c.post(
            "/api/v1/projects/demo/judgments", json=submit_body(t1, key, winner="a"), headers=one
        )
        assert other.status_code == 409, other.text  # still one key, one submission per rater


# -- 1. single-use secrets under concurrency ----------------------------------------------------------


def _invite(url: str) -> str:
    from preflab.server.auth import create_invite
    from preflab.server.database import Database
    from preflab.store import repo

    db = Database(url, pool_size=1, max_overflow=1)
    with db.writing() as s:
        token, _ = create_invite(s, repo.get_project(s, "demo"), role="rater", created_by=None)
    db.dispose()
    return token


def _accounts_and_members(url: str) -> tuple[int, int]:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.connect() as conn:
        users = conn.execute(
            text("SELECT count(*) FROM users WHERE username LIKE 'joiner%'")
        ).scalar()
        members = conn.execute(
            text(
                "SELECT count(*) FROM memberships m JOIN users u ON u.pk = m.user_pk "
                "WHERE u.username LIKE 'joiner%'"
            )
        ).scalar()
    engine.dispose()
    return users, members


def test_an_invite_is_redeemed_once_by_20_concurrent_threads(db_url, monkeypatch):
    """20 threads, each its own transaction, all holding the invite before anyone commits."""
    import threading

    from preflab.server import auth
    from preflab.server.database import Database

    seed(db_url, n_items=1, raters=0, extra_roles=False)
    token = _invite(db_url)

    def hash_slowly(password: str) -> str:  # widen the window between the check and the commit
        import time

        time.sleep(0.3)
        return "$argon2id$not-a-real-hash"

    monkeypatch.setattr(auth, "hash_password", hash_slowly)
    db = Database(db_url, pool_size=20, max_overflow=5)
    barrier, outcomes, lock = threading.Barrier(20), [], threading.Lock()

    def redeem(i: int) -> None:
        barrier.wait()
        try:
            with db.writing() as s:
                auth.accept_invite(s, token, f"joiner{i:02d}", "a long enough password")
            result = 201
        except auth.AuthError as exc:
            result = exc.status
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=redeem, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    db.dispose()
    assert sorted(outcomes) == [201] + [410] * 19
    assert _accounts_and_members(db_url) == (1, 1)


def test_an_invite_is_redeemed_once_over_http_by_20_concurrent_requests(db_url, start_server):
    import concurrent.futures

    import httpx

    seed(db_url, n_items=1, raters=0, extra_roles=False)
    token = _invite(db_url)
    server = start_server(db_url, workers=2)

    def redeem(i: int) -> int:
        r = httpx.post(
            f"{server.base}/api/v1/invites/{token}/accept",
            timeout=60,
            json={"username": f"joiner{i:02d}", "password": "a long enough password"},
        )
        return r.status_code

    with concurrent.futures.ThreadPoolExecutor(20) as pool:
        codes = sorted(pool.map(redeem, range(20)))
    assert codes == [201] + [410] * 19
    assert _accounts_and_members(db_url) == (1, 1)


# -- 3. NUL characters and out-of-range numbers are 422s naming the field ---------------------------------


def _refused(r, *loc) -> None:
    assert r.status_code == 422, (r.status_code, r.text)
    errors = r.json()["errors"]
    assert any(tuple(e["loc"][-len(loc) :]) == loc for e in errors), errors


@pytest.mark.parametrize("lane", [True, False], ids=["lane", "no-lane"])
def test_nul_and_huge_numbers_are_refused_where_they_arrive(db_url, lane, monkeypatch):
    s = seed(db_url, n_items=2, raters=1)
    rater, admin, reviewer = (
        bearer(s.tokens["rater000"]),
        bearer(s.admin_token),
        bearer(s.tokens["reviewer"]),
    )
    with app_client(db_url, lane=lane, monkeypatch=monkeypatch) as c:
        _refused(
            c.post("/api/v1/auth/login", json={"username": "ali\x00ce", "password": "x" * 12}),
            "username",
        )
        task = c.post("/api/v1/projects/demo/assignments/next", headers=rater).json()["task"]
        body = submit_body(task)
        body["judgment"]["rationale"] = "fine\x00print"
        _refused(
            c.post("/api/v1/projects/demo/judgments", json=body, headers=rater),
            "judgment",
            "rationale",
        )
        body = submit_body(task, key="key\x00one")
        _refused(
            c.post("/api/v1/projects/demo/judgments", json=body, headers=rater), "idempotency_key"
        )
        body = {**submit_body(task), "telemetry": {"active_ms": 2**70}}
        _refused(
            c.post("/api/v1/projects/demo/judgments", json=body, headers=rater),
            "telemetry",
            "active_ms",
        )
        # nothing was stored; the lease is still open and takes a clean answer
        assert (
            c.post(
                "/api/v1/projects/demo/judgments", json=submit_body(task), headers=rater
            ).status_code
            == 201
        )
        _refused(
            c.get("/api/v1/projects/demo/judgments?item_id=item%0000001", headers=reviewer),
            "item_id",
        )
        bad_item = {**pairwise_item(99), "prompt": "who\x00 wins?"}
        _refused(
            c.post("/api/v1/projects/demo/items", json={"items": [bad_item]}, headers=admin),
            "items",
            0,
            "prompt",
        )
        _refused(
            c.post(
                "/api/v1/projects/demo/items/file?filename=up%00load.jsonl",
                content=b"{}",
                headers=admin,
            ),
            "filename",
        )
        upload = b'{"id": "ok-1", "prompt": "fine", "candidates": [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}]}\n'
        upload += b'{"id": "bad-2", "prompt": "who\\u0000 wins?", "candidates": [{"id": "a", "text": "x"}]}\n'
        r = c.post(
            "/api/v1/projects/demo/items/file?filename=more.jsonl", content=upload, headers=admin
        )
        assert r.status_code == 422 and r.json()["problems"][0]["text"].startswith(
            "more.jsonl:2: prompt: contains a NUL"
        )
        _refused(
            c.get("/api/v1/projects/demo/exports/1/files/data%00.jsonl", headers=admin), "path"
        )
        _refused(
            c.patch("/api/v1/users/rater%00000", json={"is_active": True}, headers=admin), "path"
        )
        listed = c.get("/api/v1/projects/demo/items", headers=reviewer).json()
        assert len(listed) == 2  # the refused import stored nothing


# -- 4. login as a CPU drain ----------------------------------------------------------------------------------


def _config(**login) -> dict:
    from preflab.server.auth import LoginLimit

    return {"login_limit": LoginLimit(**login)}


def test_concurrent_wrong_passwords_are_evaluated_at_most_the_limit(db_url, monkeypatch):
    """40 threads try wrong passwords for one account at once: at most 10 are checked."""
    import threading

    from preflab.server import auth
    from preflab.server.database import Database

    seed(db_url, n_items=1, raters=0, extra_roles=False)
    add_password_user(db_url, "alice")
    checked = []

    def slow_verify(stored, password):  # a slow hash widens the race window
        import time

        checked.append(password)
        time.sleep(0.2)
        return False

    monkeypatch.setattr(auth, "verify_password", slow_verify)
    db = Database(db_url, pool_size=40, max_overflow=10)
    limit, gate = (
        auth.LoginLimit(attempts=10, per_address=1000, concurrent=64),
        auth.PasswordGate(64),
    )
    barrier, codes, lock = threading.Barrier(40), [], threading.Lock()

    def attempt(i: int) -> None:
        barrier.wait()
        try:
            auth.login(db, "alice", f"wrong password {i}", "10.0.0.1", limit, gate)
            code = 200
        except auth.AuthError as exc:
            code = exc.status
        with lock:
            codes.append(code)

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    db.dispose()
    assert len(checked) <= 10 and codes.count(401) == len(checked)
    assert codes.count(429) == 40 - len(checked)


def test_40_concurrent_wrong_passwords_over_http_are_not_all_evaluated(db_url, start_server):
    """The reported symptom, against a real server with two workers: 40 concurrent wrong
    passwords for one account were all checked (40 x 401). Now at most the limit (10) are."""
    import concurrent.futures

    import httpx

    seed(db_url, n_items=1, raters=0, extra_roles=False)
    add_password_user(db_url, "alice")
    server = start_server(db_url, workers=2)

    def attempt(i: int) -> int:
        return httpx.post(
            server.base + "/api/v1/auth/login",
            timeout=60,
            json={"username": "alice", "password": f"wrong password {i}"},
        ).status_code

    with concurrent.futures.ThreadPoolExecutor(40) as pool:
        codes = list(pool.map(attempt, range(40)))
    assert set(codes) <= {401, 429} and codes.count(401) <= 10, codes
    assert codes.count(429) >= 30


def test_unknown_usernames_and_addresses_are_rate_limited(db_url):
    seed(db_url, n_items=1, raters=0, extra_roles=False)
    cfg = _config(attempts=3, per_address=5, window_s=60)
    with app_client(db_url, config_changes=cfg) as c:
        codes = [
            c.post(
                "/api/v1/auth/login", json={"username": "ghost", "password": "x" * 12}
            ).status_code
            for _ in range(4)
        ]
        assert codes == [401, 401, 401, 429]  # the account does not exist: limited all the same
        # the same address trying other names: its own limit (5 failures per window)
        codes = [
            c.post(
                "/api/v1/auth/login", json={"username": f"ghost{i}", "password": "x" * 12}
            ).status_code
            for i in range(3)
        ]
        assert codes == [401, 401, 429]


def test_password_checks_beyond_the_concurrency_bound_get_429(db_url):
    seed(db_url, n_items=1, raters=0, extra_roles=False)
    add_password_user(db_url, "alice")
    with app_client(db_url, config_changes=_config(concurrent=1)) as c:
        gate = c.app.state.password_gate
        with gate.slot():  # another login is being checked right now
            busy = c.post("/api/v1/auth/login", json={"username": "alice", "password": PASSWORD})
        assert busy.status_code == 429 and busy.headers["retry-after"] == "1"
        # the refused attempt did not count as a failure, and the slot is free again
        assert (
            c.post(
                "/api/v1/auth/login", json={"username": "alice", "password": PASSWORD}
            ).status_code
            == 200
        )


def _session_ips(url: str) -> list[str]:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.connect() as conn:
        ips = [r[0] for r in conn.execute(text("SELECT ip FROM web_sessions ORDER BY pk"))]
    engine.dispose()
    return ips


def test_forwarded_headers_count_only_from_configured_proxies(db_url, start_server):
    import httpx

    seed(db_url, n_items=1, raters=0, extra_roles=False)
    add_password_user(db_url, "alice")
    spoof = {"X-Forwarded-For": "203.0.113.9", "X-Forwarded-Proto": "https"}
    direct = start_server(db_url)
    r = httpx.post(
        direct.base + "/api/v1/auth/login",
        json={"username": "alice", "password": PASSWORD},
        headers=spoof,
    )
    assert r.status_code == 200
    assert (
        "secure" not in r.headers["set-cookie"].lower()
        and "strict-transport-security" not in r.headers
    )
    behind_proxy = start_server(db_url, args=["--trusted-proxy", "127.0.0.1"])
    r = httpx.post(
        behind_proxy.base + "/api/v1/auth/login",
        json={"username": "alice", "password": PASSWORD},
        headers=spoof,
    )
    assert r.status_code == 200
    assert (
        "; secure" in r.headers["set-cookie"].lower()
        and "max-age=" in r.headers["strict-transport-security"]
    )
    assert _session_ips(db_url) == ["127.0.0.1", "203.0.113.9"]


# -- 8. HTTPS, slow clients, the docs page --------------------------------------------------------------------


def test_over_https_cookies_are_secure_and_hsts_is_sent(db_url):
    seed(db_url, n_items=1, raters=0, extra_roles=False)
    add_password_user(db_url, "alice")
    with app_client(db_url, base_url="https://testserver") as c:
        r = c.post("/api/v1/auth/login", json={"username": "alice", "password": PASSWORD})
        assert r.status_code == 200
        assert "; secure" in r.headers["set-cookie"].lower()
        assert r.headers["strict-transport-security"].startswith("max-age=")
        assert c.get("/api/v1/health").headers["strict-transport-security"]
    with app_client(db_url) as c:  # plain HTTP: no HSTS (a browser would ignore it anyway)
        assert "strict-transport-security" not in c.get("/api/v1/health").headers


def test_the_docs_page_has_a_content_security_policy(db_url):
    import base64
    import hashlib
    import re

    seed(db_url, n_items=1, raters=0, extra_roles=False)
    with app_client(db_url) as c:
        r = c.get("/api/v1/docs")
    assert r.status_code == 200 and "swagger" in r.text.lower()
    csp = r.headers["content-security-policy"]
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";") if d.strip())
    assert csp.startswith("default-src 'none'") and "frame-ancestors 'none'" in csp
    # scripts only from this server (Swagger UI's files, no CDN, no inline script); inline
    # *styles* are what Swagger UI's React components set, and carry no script
    assert directives["script-src"] == "'self'" and "http" not in csp
    for script in re.findall(
        r"<script>(.*?)</script>", r.text, flags=re.S
    ):  # each inline script allowed by hash
        digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in csp


def test_slow_clients_are_disconnected_when_their_headers_are_late(db_url, start_server):
    import socket
    import time

    import httpx

    seed(db_url, n_items=1, raters=0, extra_roles=False)
    server = start_server(db_url, args=["--header-timeout", "1"])
    socks = []
    for i in range(60):
        s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        if i % 3:  # a partial request head; every third connection sends nothing at all
            s.sendall(b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        socks.append(s)
    started = time.monotonic()
    for s in socks:
        s.settimeout(max(0.1, started + 6 - time.monotonic()))
        try:
            assert s.recv(1024) == b""  # closed by the server, nothing answered
        finally:
            s.close()
    assert time.monotonic() - started < 6
    # a client that sends its headers in time is served as before, also slowly within the bound
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        time.sleep(0.4)
        s.sendall(b"Connection: close\r\n\r\n")
        assert s.recv(1024).startswith(b"HTTP/1.1 200")
    assert httpx.get(server.base + "/api/v1/health").status_code == 200


# -- 9. an item no kind of the project fits -------------------------------------------------------------------


def _one_answer_item(i: int) -> dict:
    item = pairwise_item(i, prefix="solo")
    item["candidates"] = item["candidates"][:1]
    return item


def test_a_one_answer_item_is_refused_by_a_pairwise_project_at_import(db_url):
    s = seed(db_url, n_items=1, raters=1)
    admin = bearer(s.admin_token)
    with app_client(db_url) as c:
        r = c.post(
            "/api/v1/projects/demo/items",
            headers=admin,
            json={"items": [pairwise_item(7), _one_answer_item(8), pairwise_item(9)]},
        )
        assert r.status_code == 422, r.text
        (problem,) = r.json()["errors"]
        assert problem["loc"] == ["body", "items", 1, "candidates"]
        assert problem["msg"].startswith("items:2: candidates: item 'solo-00008' has 1 answer(s)")
        assert "pairwise needs exactly 2 answers" in problem["msg"]
        assert (
            len(c.get("/api/v1/projects/demo/items", headers=admin).json()) == 1
        )  # all or nothing


@pytest.mark.parametrize("lane", [True, False], ids=["lane", "no-lane"])
def test_a_one_answer_item_uploaded_as_a_file_is_refused_and_never_assigned(
    db_url, lane, monkeypatch
):
    s = seed(db_url, n_items=1, raters=1, extra_roles=False, policy={"overlap_share": 0.0})
    import orjson

    upload = b"\n".join(orjson.dumps(i) for i in [_one_answer_item(1), _one_answer_item(2)])
    rater = bearer(s.tokens["rater000"])
    with app_client(db_url, lane=lane, monkeypatch=monkeypatch) as c:
        r = c.post(
            "/api/v1/projects/demo/items/file?filename=more.jsonl",
            content=upload,
            headers=bearer(s.admin_token),
        )
        # issue 31: one check for every import route: the file upload refuses it too
        assert r.status_code == 422, r.text
        texts = [p["text"] for p in r.json()["problems"]]
        assert texts[0].startswith("more.jsonl:1: candidates: item 'solo-00001' has 1 answer(s)")
        assert "pairwise needs exactly 2 answers" in texts[0] and len(texts) == 2
        task = c.post("/api/v1/projects/demo/assignments/next", headers=rater).json()["task"]
        assert task["item"]["id"] == "item-00000"
        assert (
            c.post(
                "/api/v1/projects/demo/judgments", json=submit_body(task), headers=rater
            ).status_code
            == 201
        )
        after = c.post("/api/v1/projects/demo/assignments/next", headers=rater).json()
        assert after["task"] is None and after["reason"] == "no_items"


# -- 7. gold cannot be told apart by the time a submission takes -------------------------------------------------


def _submit_times(c: TestClient, h: dict, rounds: int) -> tuple[list[float], list[float]]:
    import time

    gold, production = [], []
    for _ in range(rounds):
        task = c.post("/api/v1/projects/demo/assignments/next", headers=h).json()["task"]
        if task is None:
            break
        body = submit_body(task)
        started = time.perf_counter()
        r = c.post("/api/v1/projects/demo/judgments", json=body, headers=h)
        elapsed = time.perf_counter() - started
        assert r.status_code == 201 and set(r.json()) == {
            "judgment_id",
            "item_id",
            "kind",
            "created",
            "replayed",
            "submitted_at",
        }
        (gold if task["item"]["id"].startswith("g-") else production).append(elapsed)
    return gold, production


@pytest.mark.parametrize("lane", [True, False], ids=["lane", "no-lane"])
def test_gold_and_production_submissions_take_the_same_time(db_url, lane, monkeypatch):
    """Medians of interleaved submissions: a gold item must not answer measurably slower
    (the issue measured 6.9 ms vs 1.6 ms). The bound is a ratio, not milliseconds."""
    import statistics

    from sqlalchemy import create_engine, text

    from preflab.server.services import gold_scoring as judging

    items = [pairwise_item(i, gold=-1, prefix="g") for i in range(80)] + [
        pairwise_item(i) for i in range(80)
    ]
    policy = {
        "gold_rate": 0.5,
        "qualification": {"n_items": 0},
        "overlap_share": 0.0,
        "drift": {"enabled": False},
    }
    s = seed(db_url, items=items, raters=1, extra_roles=False, policy=policy)
    h = bearer(s.tokens["rater000"])
    with app_client(db_url, lane=lane, monkeypatch=monkeypatch) as c:
        _submit_times(c, h, 6)  # warm up: the first label creates the rater row (another path)
        # before the fix gold took 2.3x (framework) to 11.9x (lane) as long; the band is wide
        # enough for a loaded 2-core CI box (0.65 seen) and still fails on a 2x difference. A
        # round outside it is measured once more: a burst of load on a shared box moved one
        # round to 1.94x (others 0.94-1.34x); a real difference shows in both rounds.
        ratios = []
        for _ in range(2):
            gold, production = _submit_times(c, h, 70)
            assert len(gold) >= 15 and len(production) >= 15
            ratios.append(statistics.median(gold) / statistics.median(production))
            if 0.5 < ratios[-1] < 1.6:
                break
        assert 0.5 < ratios[-1] < 1.6, ratios
        judging.wait_for_gold_scoring(c.app.state.db)
    engine = create_engine(db_url)  # every gold answer was still scored, after the response
    with engine.connect() as conn:
        scored = conn.execute(
            text("SELECT count(*) FROM gold_outcomes WHERE phase = 'production'")
        ).scalar()
        gold_labels = conn.execute(
            text("SELECT count(*) FROM assignments WHERE role = 'gold' AND status = 'submitted'")
        ).scalar()
    engine.dispose()
    assert scored == gold_labels >= len(gold)


# -- 2 (continued): the login page's script, in Chromium ----------------------------------------------------------

SCRIPT_PAYLOADS = [
    "/\\evil.example/x",
    "//evil.example/x",
    "/\t/evil.example/x",
    "https://evil.example/x",
    "javascript:location='https://evil.example/'",
]


@pytest.fixture
def chromium_page():
    import shutil

    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("Chromium not installed (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=exe,
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )

        def new_page(base: str, seen: list[str]):
            context = browser.new_context()
            page = context.new_page()

            def only_this_site(route) -> None:  # record and block every other host
                if route.request.url.startswith(base):
                    route.continue_()
                else:
                    seen.append(route.request.url)
                    route.abort()

            page.route("**/*", only_this_site)
            return page

        yield new_page
        browser.close()


def test_the_login_script_never_leaves_the_site(sqlite_url, start_server, chromium_page):
    seed(sqlite_url, n_items=1, raters=0, extra_roles=False)
    add_password_user(sqlite_url, "alice")
    server = start_server(sqlite_url)
    for query, planted in [
        ("?next=/%5Cevil.example/x", None),
        ("?next=/p/demo", None),
        *[("", p) for p in SCRIPT_PAYLOADS],
    ]:
        seen: list[str] = []
        page = chromium_page(server.base, seen)
        page.goto(server.base + "/login" + query)
        if planted is not None:  # the script's own check, whatever the page says
            page.evaluate(
                "next => { document.querySelector('#login-form').dataset.next = next; }", planted
            )
        page.fill("#username", "alice")
        page.fill("#password", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(lambda url: "/login" not in url, timeout=20_000)
        page.wait_for_load_state("load")
        assert page.url.startswith(server.base + "/"), (query, planted, page.url)
        assert seen == [], (query, planted, seen)
        if query == "?next=/p/demo":
            assert page.url.startswith(server.base + "/p/demo")
        page.context.close()


def test_gold_left_unscored_by_a_crash_is_scored_at_the_next_start(db_url, monkeypatch):
    from sqlalchemy import create_engine, text

    from preflab.server.services import gold_scoring as judging

    # production enough for every round: gold comes only mixed into production, so with as
    # many production items as gold ones a run met no gold before production ran out in ~0.4 %
    # of runs (seen in CI); now 0.5**24
    items = [pairwise_item(i, gold=-1, prefix="g") for i in range(8)] + [
        pairwise_item(i) for i in range(40)
    ]
    policy = {"gold_rate": 0.5, "qualification": {"n_items": 0}, "drift": {"enabled": False}}
    s = seed(db_url, items=items, raters=1, extra_roles=False, policy=policy)
    h = bearer(s.tokens["rater000"])
    monkeypatch.setattr(
        judging, "defer_gold_scoring", lambda db, pk: None
    )  # the process dies first
    with app_client(db_url) as c:
        n_gold = len(_submit_times(c, h, 24)[0])
    assert n_gold > 0
    monkeypatch.undo()
    engine = create_engine(db_url)

    def outcomes() -> int:
        with engine.connect() as conn:
            return conn.execute(text("SELECT count(*) FROM gold_outcomes")).scalar()

    assert outcomes() == 0
    with app_client(db_url) as c:  # start-up sweep
        judging.stop_gold_scorer(c.app.state.db)  # finishes the sweep it started with
    assert outcomes() == n_gold
    engine.dispose()
