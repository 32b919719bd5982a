"""Per-item rubrics (issue 30 item 5) on the label page: an item's approved criteria as a
checklist (templates/_criteria.html, static/criteria.js); the ticks become the judgment's
``met``, the criteria text stays inert."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from webui_helpers import PageGuard, build_site, login, shot

CRITERIA = {
    "version": 2,
    "author": "dr_a",
    "approved_by": "dr_b",
    "approved_at": "2026-12-01T10:00:00Z",
    "criteria": [
        {"id": "dose", "text": "States the adult dose", "weight": 3, "must_have": True},
        {"id": "doctor", "text": "Says when to see a <img src=x onerror=alert(1)> doctor"},
    ],
}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("criteria-site")
    s = build_site(
        tmp,
        {"root": True, "alice": False},
        [
            {
                "name": "crit",
                "title": "Criteria",
                "kinds": ["criteria"],
                "policy": {"blind": False, "overlap_share": 0.0},
                "members": {"alice": "rater"},
                "items": [
                    {
                        "id": "q1",
                        "prompt": "How do I take X?",
                        "candidates": [{"id": "c", "text": "500 mg twice a day."}],
                        "metadata": {"criteria": CRITERIA},
                    }
                ],
            }
        ],
    )
    yield s
    s.server.stop()


def test_a_rater_ticks_the_criteria_met(site, new_page):
    page = new_page(site)
    guard = PageGuard(page, site.server.base)
    login(page, "alice", next_path="/p/crit/label")
    with page.expect_navigation():
        page.locator('[data-action="get-task"]').click()
    box = page.locator("#criteria")
    expect(box).to_be_visible()
    expect(box.locator("legend")).to_contain_text("Criteria v2")
    expect(box.locator(".must-have")).to_have_count(1)
    expect(box).to_contain_text("<img src=x onerror=alert(1)> doctor")  # shown as text
    shot(page, "60-criteria-checklist")
    page.locator('input[data-criterion="dose"]').check()
    with page.expect_navigation():
        page.keyboard.press("Control+Enter")
    (j,) = site.judgments("crit", "q1")
    assert j["kind"] == "criteria"
    body = j["body"]
    assert body["met"] == {"doctor": False, "dose": True}
    assert body["criteria_version"] == 2
    guard.assert_clean()
