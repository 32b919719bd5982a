"""Issue 11, the first missing feature: a rater skips or flags an item with a reason; the item
goes to another rater (never back to this one); skips are counted on the dashboard and flagged
items listed for reviewers with their notes."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from webui_helpers import build_site, login, shot
from webui_items import OPEN, pair_item


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("skip-site")
    s = build_site(
        tmp,
        {"root": True, "alice": False, "bob": False, "rita": False},
        [
            {
                "name": "sk",
                "title": "Skips",
                "kinds": ["pairwise"],
                "policy": OPEN,
                "members": {"alice": "rater", "bob": "rater", "rita": "reviewer"},
                "items": [pair_item("sk-1"), pair_item("sk-2", "What is a monad?")],
            }
        ],
    )
    yield s
    s.server.stop()


def test_skip_with_a_reason_and_the_item_goes_to_someone_else(site, new_page):
    page = new_page(site)
    login(page, "alice", next_path="/p/sk/label?kind=pairwise")
    with page.expect_navigation():
        page.locator('[data-action="get-task"]').click()
    first = page.evaluate("JSON.parse(document.getElementById('task-data').textContent).item_id")
    page.keyboard.press("s")
    dialog = page.locator("#skip-dialog")
    expect(dialog).to_be_visible()
    dialog.get_by_label("Other (say why in the note)").check()
    dialog.get_by_role("button", name="Skip this item").click()
    expect(dialog.locator(".error")).to_contain_text("say why in the note")
    dialog.get_by_label("Broken item").check()
    dialog.locator("#skip-note").fill("Both answers are the same text.")
    shot(page, "75-skip-dialog", full=False)
    with page.expect_navigation():
        dialog.get_by_role("button", name="Skip this item").click()
    page.locator("#label-app").wait_for()
    assert "kind=pairwise" in page.url
    second = page.evaluate("JSON.parse(document.getElementById('task-data').textContent).item_id")
    assert second != first, "a skipped item never comes back to the same rater"
    assert not page.guard.page_errors and not page.guard.foreign
    assert (
        len(page.guard.console_errors) == 1 and "422" in page.guard.console_errors[0]
    )  # the refused "other"

    bob = new_page(site)
    login(bob, "bob", next_path="/p/sk/label")
    with bob.expect_navigation():
        bob.locator('[data-action="get-task"]').click()
    assert (
        bob.evaluate("JSON.parse(document.getElementById('task-data').textContent).item_id")
        == first
    )

    rita = new_page(site)
    login(rita, "rita", next_path="/p/sk/review")
    flagged = rita.locator("#flagged")
    expect(flagged).to_contain_text("1 skips")
    expect(flagged.locator("tr", has_text=first)).to_contain_text("broken ×1")
    expect(flagged.locator("tr", has_text=first)).to_contain_text(
        "alice: Both answers are the same text."
    )
    shot(rita, "76-review-flagged")
    rita.goto("/admin/p/sk/dashboard")
    expect(rita.locator("#skip-counts")).to_contain_text("Skipped: 1 (broken 1) · 1 items flagged")
    rita.guard.assert_clean()
