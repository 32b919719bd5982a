"""Security: cookies, CSRF, login rate limit, session expiry, token revocation, invites,
SQL-injection strings stored as plain data."""

from __future__ import annotations

import httpx
import pytest

from .conftest import Server, expire_now, seed

PASSWORD = "correct horse battery staple"


@pytest.fixture(scope="module")
def sec(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("security")
    url = f"sqlite:///{tmp / 'sec.db'}"
    seeded = seed(url, n_items=3, raters=1)
    from preflab.server.auth import create_user, set_membership
    from preflab.server.database import Database
    from preflab.store import repo

    db = Database(url, pool_size=1, max_overflow=1)
    with db.writing() as s:
        alice, _ = create_user(s, "alice", password=PASSWORD)
        set_membership(s, repo.get_project(s, "demo"), alice, "rater")
        create_user(s, "mallory", password=PASSWORD)
    db.dispose()
    server = Server(url, tmp=tmp, args=["--session-hours", "2"]).start()
    yield server, seeded, url
    server.kill()


def login(server, username="alice", password=PASSWORD) -> tuple[httpx.Client, httpx.Response]:
    c = httpx.Client(base_url=server.base, timeout=30)
    return c, c.post("/api/v1/auth/login", json={"username": username, "password": password})


def test_login_sets_a_safe_cookie_and_csrf_is_required(sec):
    server, _, _ = sec
    c, r = login(server)
    assert r.status_code == 200
    cookie = r.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=lax" in cookie
    csrf = r.json()["csrf_token"]
    assert c.get("/api/v1/auth/me").json()["username"] == "alice"
    refused = c.post("/api/v1/auth/tokens", json={"name": "x"})
    assert refused.status_code == 403 and "CSRF" in refused.json()["detail"]
    wrong = c.post("/api/v1/auth/tokens", json={"name": "x"}, headers={"X-CSRF-Token": "nope"})
    assert wrong.status_code == 403
    made = c.post("/api/v1/auth/tokens", json={"name": "x"}, headers={"X-CSRF-Token": csrf})
    assert made.status_code == 201
    # a state change on a project route, too
    assert c.post("/api/v1/projects/demo/assignments/next").status_code == 403
    assert (
        c.post("/api/v1/projects/demo/assignments/next", headers={"X-CSRF-Token": csrf}).status_code
        == 200
    )
    # logout ends the server-side session: the old cookie no longer works
    old_cookie = c.cookies.get("preflab_session")
    assert c.post("/api/v1/auth/logout", headers={"X-CSRF-Token": csrf}).status_code == 200
    replay = httpx.get(server.base + "/api/v1/auth/me", cookies={"preflab_session": old_cookie})
    assert replay.status_code == 401
    c.close()


def test_bearer_requests_need_no_csrf(sec):
    server, seeded, _ = sec
    with server.client(seeded.tokens["rater000"]) as c:
        assert c.post("/api/v1/auth/tokens", json={"name": "script"}).status_code == 201


def test_session_expires(sec):
    from sqlalchemy import select

    from preflab.store.server_models import User, WebSession

    server, _, url = sec
    c, r = login(server)
    assert "max-age=7200" in r.headers["set-cookie"].lower()  # --session-hours 2
    assert c.get("/api/v1/auth/me").status_code == 200
    cookie = c.cookies.get("preflab_session")
    # two hours later (the session row's expiry moved into the past, rather than waiting):
    # the browser would drop the cookie (max-age); the server refuses it on its own clock too
    alice = select(User.pk).where(User.username == "alice").scalar_subquery()
    assert (
        expire_now(url, WebSession, WebSession.user_pk == alice, WebSession.revoked.is_(False)) >= 1
    )
    expired = httpx.get(server.base + "/api/v1/auth/me", cookies={"preflab_session": cookie})
    assert expired.status_code == 401 and "expired" in expired.json()["detail"]
    c.close()


def test_login_rate_limit_per_account_and_address(sec):
    server, _, _ = sec
    for _ in range(10):
        _, r = login(server, "mallory", "wrong password!")
        assert r.status_code == 401
    _, r = login(server, "mallory", PASSWORD)  # even the right password is refused now
    assert r.status_code == 429 and int(r.headers["retry-after"]) > 0
    _, other = login(server, "alice", PASSWORD)  # other accounts are not locked out
    assert other.status_code == 200


def test_unknown_user_and_wrong_password_look_the_same(sec):
    server, _, _ = sec
    _, a = login(server, "nobody-here", "whatever-password")
    _, b = login(server, "alice", "whatever-password")
    assert a.status_code == b.status_code == 401 and a.json() == b.json()


def test_token_revocation(sec):
    server, seeded, _ = sec
    with server.client(seeded.tokens["rater000"]) as c:
        made = c.post("/api/v1/auth/tokens", json={"name": "temp"}).json()
    assert made["token"].startswith("plt_")
    with server.client(made["token"]) as t:
        assert t.get("/api/v1/auth/me").status_code == 200
        assert t.delete(f"/api/v1/auth/tokens/{made['id']}").status_code == 200
        r = t.get("/api/v1/auth/me")
        assert r.status_code == 401 and "revoked" in r.json()["detail"]
    with server.client("plt_made-up") as t:
        assert t.get("/api/v1/auth/me").status_code == 401
    with server.client(seeded.tokens["outsider"]) as t:  # someone else's token id: not found
        assert t.delete(f"/api/v1/auth/tokens/{made['id']}").status_code == 404


def test_tokens_and_passwords_are_not_stored_in_clear(sec):
    server, seeded, url = sec
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.connect() as conn:
        dump = "\n".join(
            str(row)
            for t in ("api_tokens", "users", "web_sessions", "invites")
            for row in conn.execute(text(f"SELECT * FROM {t}"))
        )
    engine.dispose()
    assert seeded.admin_token not in dump and PASSWORD not in dump
    assert "$argon2id$" in dump


def test_invite_links_work_once_and_expire(sec):
    server, seeded, url = sec
    with server.client(seeded.tokens["padmin"]) as c:
        inv = c.post("/api/v1/projects/demo/invites", json={"role": "rater"}).json()
        late = c.post("/api/v1/projects/demo/invites", json={"role": "reviewer"}).json()
    anon = httpx.Client(base_url=server.base, timeout=30)
    ok = anon.post(inv["path"], json={"username": "newbie", "password": "a long enough password"})
    assert ok.status_code == 201
    again = anon.post(
        inv["path"], json={"username": "newbie2", "password": "a long enough password"}
    )
    assert again.status_code == 410
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.begin() as conn:  # age the second invite past its expiry
        conn.execute(
            text(
                "UPDATE invites SET expires_at = '2000-01-01 00:00:00.000000' WHERE role = 'reviewer'"
            )
        )
    engine.dispose()
    expired = anon.post(
        late["path"], json={"username": "latecomer", "password": "a long enough password"}
    )
    assert expired.status_code == 410 and "expired" in expired.json()["detail"]
    c, r = login(server, "newbie", "a long enough password")
    assert r.status_code == 200 and c.get("/api/v1/auth/me").json()["projects"] == {"demo": "rater"}
    c.close()
    anon.close()


INJECTIONS = [
    "'); DROP TABLE judgments; --",
    '" OR 1=1 --',
    "Robert'); DELETE FROM users WHERE ('1'='1",
]


def test_sql_injection_strings_are_plain_data(sec):
    server, seeded, _ = sec
    with server.client(seeded.tokens["rater000"]) as c:
        for text_ in INJECTIONS:
            assert (
                c.post(
                    "/api/v1/me/credentials", json={"domain": "law", "evidence": text_}
                ).status_code
                == 201
            )
        task = c.post("/api/v1/projects/demo/assignments/next").json()["task"]
        r = c.post(
            "/api/v1/projects/demo/judgments",
            json={
                "assignment_id": task["assignment_id"],
                "judgment": {
                    "kind": "pairwise",
                    "winner": "a",
                    "strength": 1,
                    "rationale": INJECTIONS[0],
                },
            },
        )
        assert r.status_code == 201
        assert c.get("/api/v1/projects/demo' OR '1'='1").status_code == 404
        assert (
            c.get("/api/v1/projects/demo/my/judgments", params={"after": "0 OR 1=1"}).status_code
            == 422
        )
        mine = c.get("/api/v1/projects/demo/my/judgments").json()
        assert mine[-1]["rationale"] == INJECTIONS[0]
        assert c.get("/api/v1/me/credentials").json()[0]["evidence"] == INJECTIONS[-1]
    with server.client(seeded.admin_token) as admin:
        bad = admin.post("/api/v1/users", json={"username": INJECTIONS[1]})
        assert bad.status_code == 400
        assert len(admin.get("/api/v1/users").json()) >= 6  # nobody was deleted
