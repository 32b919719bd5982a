"""Issue 11, dead end 4: when items are withheld for a domain credential, "no more items" says
how many, which credential, and what to do (claim it, or wait for an admin to verify it)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from webui_helpers import build_site, login, shot
from webui_items import OPEN, pair_item


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cred-site")
    code = [{**pair_item(f"code-{i}", f"Fix bug {i}."), "domains": ["code"]} for i in range(4)]
    s = build_site(
        tmp,
        {"root": True, "alice": False},
        [
            {
                "name": "mixed",
                "title": "Some items need code",
                "kinds": ["pairwise"],
                "policy": OPEN,
                "members": {"alice": "rater"},
                "items": [pair_item("plain-1"), *code],
            }
        ],
    )
    yield s
    s.server.stop()


def _ask_for_a_task(page) -> None:
    page.goto("/p/mixed/label")
    page.locator('[data-action="get-task"]').click()


def test_no_more_items_says_which_credential_unlocks_the_rest(site, new_page):
    page = new_page(site)
    login(page, "alice", next_path="/p/mixed/label")
    with page.expect_navigation():
        page.locator('[data-action="get-task"]').click()
    page.keyboard.press("4")
    with page.expect_navigation():
        page.keyboard.press("Control+Enter")  # plain-1 done; the four code items remain

    page.locator('[data-action="get-task"]').click()
    msg = page.locator("#no-task-message")
    expect(msg).to_contain_text('4 items need a verified "code" credential')
    expect(msg).to_contain_text("claim it on your Account page")
    # issue 31: no raw backticks or path; the Account page is a link
    assert "`" not in msg.inner_text() and "(/account)" not in msg.inner_text()
    expect(msg.locator('a[href="/account"]')).to_have_text("Account page")
    shot(page, "50-no-items-credential-needed")
    # issue 31: a project without qualification offers no "Qualification result"
    page.goto("/p/mixed")
    expect(page.locator(".badge.status-qualified")).to_be_visible()
    assert page.get_by_role("link", name="Qualification result").count() == 0

    page.goto("/account")
    page.locator("#claim-domain").fill("code")
    page.locator("#claim-evidence").fill("Ten years of Python.")
    with page.expect_navigation():
        page.get_by_role("button", name="Claim").click()
    _ask_for_a_task(page)
    expect(msg).to_contain_text(
        '4 items need a verified "code" credential: your claim waits for an admin to verify it'
    )
    page.guard.assert_clean()
