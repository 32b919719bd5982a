"""Issue 11, dead end 5: in a project that takes imported ``prm_steps`` verdicts as suggestions
(``policy.imported_step_verdicts: suggestion``), the imported trajectory still reaches a rater;
the label page shows each imported verdict beside its step, and the rater's verdicts, not the
imported ones, are the label."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect
from webui_helpers import build_site, login, shot
from webui_items import OPEN

DATA = Path(__file__).resolve().parents[1] / "data" / "trajectory-rlhf-2026.11.json"
TRAJECTORY_ID = "traj_swe_prm_9041"  # two steps, both imported with verdict +1


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    from preflab.io.importer import import_files
    from preflab.server.database import Database

    tmp = tmp_path_factory.mktemp("step-suggestions")
    s = build_site(
        tmp,
        {"root": True, "alice": False},
        [
            {
                "name": "agent",
                "title": "Agent runs, imported verdicts to check",
                "kinds": ["steps"],
                "policy": {**OPEN, "imported_step_verdicts": "suggestion"},
                "members": {"alice": "rater"},
            }
        ],
    )
    db = Database(s.server.db_url, pool_size=1, max_overflow=1)
    import_files(db.write_engine, "agent", [DATA])
    db.dispose()
    yield s
    s.server.stop()


def test_a_rater_checks_imported_step_verdicts_and_her_verdicts_are_the_label(site, new_page):
    page = new_page(site)
    login(page, "alice", next_path="/p/agent/label")
    page.locator('[data-action="get-task"]').click()
    page.locator("#label-app").wait_for()
    expect(page.locator("#step-suggestions-note")).to_contain_text("suggestions")
    steps = page.locator("li.step")
    expect(steps).to_have_count(2)
    for i in range(2):
        expect(steps.nth(i).locator(".badge.suggestion")).to_have_text("suggested +1")
    assert page.locator("li.step input:checked").count() == 0, "a suggestion is not pre-filled"
    shot(page, "60-label-step-suggestions")

    steps.nth(1).focus()
    page.keyboard.press("e")  # she disagrees: the second step is wrong
    with page.expect_navigation():
        page.keyboard.press("Control+Enter")

    stored = [j for j in site.judgments("agent", TRAJECTORY_ID) if j["kind"] == "steps"]
    assert len(stored) == 1, "the imported verdicts were not stored as a label"
    assert stored[0]["rater"] == "alice"
    assert stored[0]["body"]["verdicts"] == [1, -1]

    # her own label stays hers to edit: the edit page shows her verdicts, not the suggestions
    page.goto("/p/agent")
    with page.expect_navigation():
        page.locator(f'a.edit-label[data-judgment="{stored[0]["judgment_id"]}"]').click()
    steps = page.locator("li.step")
    expect(steps.nth(0).locator('input[value="1"]')).to_be_checked()
    expect(steps.nth(1).locator('input[value="-1"]')).to_be_checked()
    steps.nth(0).focus()
    page.keyboard.press("0")
    with page.expect_navigation():
        page.keyboard.press("Control+Enter")
    latest = [j for j in site.judgments("agent", TRAJECTORY_ID) if j["kind"] == "steps"][-1]
    assert latest["supersedes"] == stored[0]["judgment_id"]
    assert latest["body"]["verdicts"] == [0, -1]
    page.guard.assert_clean()
