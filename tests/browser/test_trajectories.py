"""Issue 11, dead end 5: agent trajectories on the label and review pages show each tool call
(name and arguments) and each tool output turn, distinct from the model's text, and mark the
turns a trainer does not learn from (``loss_mask`` 0)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from webui_helpers import build_site, login, shot
from webui_items import OPEN

TRAJECTORY_ITEM = {  # RLHF-2026.11 turns as candidate messages: tool_call {name, args}, loss_mask per turn
    "id": "traj-1",
    "prompt": [{"role": "user", "content": "How many Python files are there?"}],
    "candidates": [
        {"id": "run-a", "messages": [
            {"role": "assistant", "content": "Let me look.", "loss_mask": 1,
             "tool_call": {"name": "shell", "args": {"cmd": "find . -name '*.py' | wc -l"}}},
            {"role": "tool", "name": "shell", "content": "2\n", "loss_mask": 0},
            {"role": "assistant", "content": "Hmm, maybe 3? Let me recount.", "loss_mask": 0},
            {"role": "assistant", "content": "There are **2** Python files.", "loss_mask": 1},
        ]},
        {"id": "run-b", "messages": [{"role": "assistant", "content": "Probably 5.", "loss_mask": 1}]},
    ],
}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("traj-site")
    s = build_site(tmp, {"root": True, "alice": False, "rita": False}, [
        {"name": "traj", "title": "Agent runs", "kinds": ["pairwise"], "policy": {**OPEN, "spot_review_share": 1.0},
         "members": {"alice": "rater", "rita": "reviewer"}, "items": [TRAJECTORY_ITEM]}])
    yield s
    s.server.stop()


def _check_run_a(page) -> None:  # noqa: ANN001
    run = page.locator('.answer[data-candidate="run-a"]').first
    call = run.locator(".tool-call")
    expect(call.locator(".tool-name")).to_have_text("shell")
    expect(call.locator(".tool-args")).to_contain_text("\"cmd\": \"find . -name '*.py' | wc -l\"")
    output = run.locator("details.turn-tool")
    expect(output).to_have_count(1)
    expect(output.locator("summary")).to_contain_text("tool output · shell")
    assert output.evaluate("el => getComputedStyle(el).borderTopStyle") == "dashed", "tool turns look unlike model text"
    masked = run.locator(".turn.masked")
    expect(masked).to_have_count(2)  # the tool output and the discarded guess
    expect(masked.nth(1)).to_contain_text("Hmm, maybe 3?")
    expect(masked.nth(1).locator(".loss-masked")).to_have_text("masked · not trained on")
    expect(run.locator(".turn-assistant:not(.masked)")).to_have_count(2)


def test_label_and_review_pages_show_tool_calls_outputs_and_masked_turns(site, new_page):
    page = new_page(site)
    login(page, "alice", next_path="/p/traj/label")
    with page.expect_navigation():
        page.locator('[data-action="get-task"]').click()
    _check_run_a(page)
    shot(page, "60-trajectory-label")
    page.keyboard.press("4")
    with page.expect_navigation():
        page.keyboard.press("Control+Enter")
    page.guard.assert_clean()

    review = new_page(site)
    login(review, "rita", next_path="/p/traj/review/item/traj-1")
    _check_run_a(review)
    shot(review, "61-trajectory-review")
    review.guard.assert_clean()
