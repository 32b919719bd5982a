"""Issue 11: a change-password page for every user, and a password reset by an admin in the UI.
Both go through the one rule (``auth.set_password``): every browser session of the account ends
and, unless asked otherwise, its API tokens are revoked."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import expect
from webui_helpers import PASSWORD, build_site, login, shot

NEW_PASSWORD = "a-new-and-long-password"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    s = build_site(
        tmp_path_factory.mktemp("pw-site"), {"root": True, "alice": False, "bob": False}, []
    )
    yield s
    s.server.stop()


def _api_token(site, user: str, password: str) -> str:
    with httpx.Client(base_url=site.base, timeout=30) as c:
        csrf = c.post("/api/v1/auth/login", json={"username": user, "password": password}).json()[
            "csrf_token"
        ]
        r = c.post("/api/v1/auth/tokens", json={"name": "laptop"}, headers={"X-CSRF-Token": csrf})
        assert r.status_code == 201, r.text
        return r.json()["token"]


def _login_status(site, user: str, password: str) -> int:
    with httpx.Client(base_url=site.base, timeout=30) as c:
        return c.post(
            "/api/v1/auth/login", json={"username": user, "password": password}
        ).status_code


def _token_works(site, token: str) -> bool:
    with httpx.Client(base_url=site.base, timeout=30) as c:
        return (
            c.get("/api/v1/auth/me", headers={"Authorization": f"Bearer {token}"}).status_code
            == 200
        )


def test_a_user_changes_their_password_and_must_prove_the_current_one(site, new_page):
    token = _api_token(site, "alice", PASSWORD)
    page = new_page(site)
    login(page, "alice", next_path="/account")
    form = page.locator("#password-form")
    shot(page, "70-account-password")
    form.locator("#pw-current").fill("not-my-password")
    form.locator("#pw-new").fill(NEW_PASSWORD)
    form.locator("button[type=submit]").click()
    expect(form.locator(".error")).to_contain_text(
        "current_password: wrong password; nothing was changed"
    )
    assert _login_status(site, "alice", PASSWORD) == 200, "a wrong current password changes nothing"

    form.locator("#pw-current").fill(PASSWORD)
    with page.expect_navigation(url="**/login?next=**"):  # this session ended too: log in again
        form.locator("button[type=submit]").click()
    assert _login_status(site, "alice", PASSWORD) == 401
    assert _login_status(site, "alice", NEW_PASSWORD) == 200
    assert not _token_works(site, token), "API tokens are revoked by default"
    assert (
        not page.guard.page_errors and not page.guard.foreign
    )  # the 403 above is the one console error


def test_an_admin_resets_a_password_in_the_ui_which_revokes_api_tokens(site, new_page):
    token = _api_token(site, "bob", PASSWORD)
    page = new_page(site)
    login(page, "root", next_path="/admin")
    reset = page.locator('details.reset-password[data-user="bob"]')
    reset.locator("summary").click()
    reset.locator('input[name="password"]').fill(NEW_PASSWORD)
    shot(page, "71-admin-reset-password")
    reset.get_by_role("button", name="Set password").click()
    expect(reset.locator("pre.result").first).to_have_text("username: bob")
    assert _login_status(site, "bob", PASSWORD) == 401
    assert _login_status(site, "bob", NEW_PASSWORD) == 200
    assert not _token_works(site, token), "an admin reset revokes the user's API tokens by default"
    page.guard.assert_clean()


def test_an_admin_issued_reset_link_sets_a_password_once(site, new_page):
    admin = new_page(site)
    login(admin, "root", next_path="/admin")
    reset = admin.locator('details.reset-password[data-user="alice"]')
    reset.locator("summary").click()
    reset.locator("form.reset-link button").click()
    link = reset.locator(".reset-link-result")
    expect(link).to_contain_text("/reset/")
    url = link.inner_text().removeprefix("path: ").strip()
    admin.guard.assert_clean()

    user = new_page(site)  # the user, not logged in, opens the link the admin handed over
    user.goto(url)
    shot(user, "72-reset-link")
    user.locator("#reset-password").fill("short")
    user.locator("#reset-form button").click()
    expect(user.locator("#reset-form .error")).to_contain_text(
        "at least 10 characters"
    )  # the link is not used up
    user.locator("#reset-password").fill("reset-by-link-password")
    user.locator("#reset-form button").click()
    # issue 31: a sentence and a way to log in, not a raw `changed: true` block and the form again
    expect(user.locator("#reset-done")).to_be_visible()
    expect(user.locator("#reset-done")).to_contain_text("Your password is set")
    expect(user.locator("#reset-form")).to_be_hidden()
    assert "changed" not in user.locator("main").inner_text()
    assert _login_status(site, "alice", "reset-by-link-password") == 200
    # a used link says so when it is opened, before anyone types a password
    again_page = new_page(site)
    again_page.goto(url)
    expect(again_page.locator("#reset-gone")).to_contain_text("already used")
    assert again_page.locator("#reset-form").count() == 0
    # single use: a second claim of the same link is refused and changes nothing
    token = url.rsplit("/", 1)[1]
    with httpx.Client(base_url=site.base, timeout=30) as c:
        again = c.post(
            f"/api/v1/password-resets/{token}", json={"password": "yet-another-password"}
        )
        assert again.status_code == 410 and "already used" in again.json()["detail"]
        assert (
            c.post(
                "/api/v1/password-resets/not-a-token", json={"password": "yet-another-password"}
            ).status_code
            == 404
        )
    assert _login_status(site, "alice", "reset-by-link-password") == 200


def test_a_user_created_on_the_admin_page_appears_without_a_reload(site, new_page):
    """Issue 31: a user created on /admin appeared only after a reload."""
    page = new_page(site)
    login(page, "root", next_path="/admin")
    rows = page.locator("#users-table tbody tr")
    before = rows.count()
    page.locator("#nu-name").fill("carol")
    page.locator("#new-user button[type=submit]").click()
    expect(page.locator("#new-user-result")).to_contain_text("password: ")
    expect(rows).to_have_count(before + 1)
    expect(rows.last).to_contain_text("carol")
    page.guard.assert_clean()
