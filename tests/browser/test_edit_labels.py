"""Issue 11: a rater sees and edits her own recent labels until a reviewer has acted on them. The
project page offers "edit" beside each open label; the edit page shows her answer as she gave it;
submitting stores a new revision (the first answer stays, superseded). Once a reviewer sent the
label back, the edit is gone and the address says why."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from webui_helpers import build_site, login, shot
from webui_items import OPEN, RUBRIC, pair_item, single


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("edit-site")
    s = build_site(
        tmp,
        {"root": True, "alice": False},
        [
            {
                "name": "edits",
                "title": "Edit my labels",
                "kinds": ["pairwise"],
                "policy": {**OPEN, "overlap_share": 0.0, "randomise_order": False},
                "members": {"alice": "rater"},
                "items": [pair_item("p-1")],
            },
            {
                "name": "edits-rubric",
                "kinds": ["rubric"],
                "policy": OPEN,
                "members": {"alice": "rater"},
                "rubric": RUBRIC,
                "items": [single("r-1", "Water boils at 100 °C at sea level.", "Boiling point?")],
            },
        ],
    )
    yield s
    s.server.stop()


def _alice(site) -> list[dict]:
    return sorted(
        (j for j in site.judgments("edits") if j["rater"] == "alice"),
        key=lambda j: j["judgment_id"],
    )


def test_a_rater_edits_her_recent_label_until_a_reviewer_acts(site, new_page):
    page = new_page(site)
    login(page, "alice", next_path="/p/edits/label")
    page.locator('[data-action="get-task"]').click()
    page.locator("#label-app").wait_for()
    page.keyboard.press("7")  # B much better
    with page.expect_navigation():
        page.keyboard.press("Control+Enter")
    (first,) = _alice(site)
    assert first["body"]["winner"] == "b" and first["body"]["strength"] == 3

    page.goto("/p/edits")
    edit = page.locator(f'#my-recent a.edit-label[data-judgment="{first["judgment_id"]}"]')
    expect(edit).to_have_text("edit")
    shot(page, "61-project-recent-labels-editable")
    with page.expect_navigation():
        edit.click()
    expect(page.locator("#edit-note")).to_contain_text("new revision")
    expect(page.locator('input[name="pairwise"]:checked')).to_have_count(1)
    assert page.locator('input[name="pairwise"]:checked').get_attribute("data-winner") == "b"
    shot(page, "62-label-edit")
    page.keyboard.press("1")  # on reflection: A much better
    with page.expect_navigation():
        page.keyboard.press("Control+Enter")
    assert page.url.endswith("/p/edits")

    old, new = _alice(site)
    assert old["judgment_id"] == first["judgment_id"] and old["body"]["winner"] == "b"
    assert new["supersedes"] == old["judgment_id"] and new["body"]["winner"] == "a"
    recent = page.locator("#my-recent")
    expect(recent.locator(f'a.edit-label[data-judgment="{new["judgment_id"]}"]')).to_be_visible()
    expect(recent.locator(f'a.edit-label[data-judgment="{old["judgment_id"]}"]')).to_have_count(0)

    with site.api() as c:  # a reviewer (the site admin) sends the revision back
        r = c.post(
            f"/api/v1/projects/edits/judgments/{new['judgment_id']}/send-back",
            json={"note": "why A?"},
        )
        assert r.status_code == 201, r.text
    page.reload()
    expect(recent.locator(f'a.edit-label[data-judgment="{new["judgment_id"]}"]')).to_have_count(0)
    expect(recent).to_contain_text("sent back: revise")
    shot(page, "63-project-recent-labels-locked")
    response = page.goto(f"/p/edits/edit/{new['judgment_id']}")
    assert response.status == 409
    expect(page.locator("body")).to_contain_text("a reviewer sent it back")
    page.guard.console_errors = [e for e in page.guard.console_errors if "409" not in e]
    page.guard.assert_clean()


def test_the_edit_page_starts_from_her_rubric_scores(site, new_page):
    page = new_page(site)
    login(page, "alice", next_path="/p/edits-rubric/label")
    page.locator('[data-action="get-task"]').click()
    page.locator("#label-app").wait_for()
    for dim in ("correctness", "clarity", "safe"):
        page.locator(f'input[name="dim-{dim}"]').first.check()
    with page.expect_navigation():
        page.keyboard.press("Control+Enter")
    (first,) = [j for j in site.judgments("edits-rubric") if j["rater"] == "alice"]

    page.goto(f"/p/edits-rubric/edit/{first['judgment_id']}")
    for dim in ("correctness", "clarity", "safe"):
        expect(page.locator(f'input[name="dim-{dim}"]').first).to_be_checked()
    page.locator('input[name="dim-correctness"]').last.check()
    with page.expect_navigation():
        page.keyboard.press("Control+Enter")
    old, new = sorted(
        (j for j in site.judgments("edits-rubric") if j["rater"] == "alice"),
        key=lambda j: j["judgment_id"],
    )
    assert new["supersedes"] == old["judgment_id"]
    changed = {
        d for d in old["body"]["scores"] if old["body"]["scores"][d] != new["body"]["scores"][d]
    }
    assert changed == {"correctness"}, (old["body"], new["body"])
    page.guard.assert_clean()
