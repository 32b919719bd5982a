"""Issue 11, dead end 7: qualification feedback speaks of what the rater saw. The author's
explanation numbers answers in the item's own order ("response 2"); the rater saw them shuffled
as A and B, so the feedback maps one to the other and marks the expected answer on screen."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from webui_helpers import build_site, login, shot
from webui_items import OPEN

GOLD = {
    "id": "q-1",
    "prompt": "What is 2 + 2?",
    "candidates": [
        {"id": "wrong", "text": "2 + 2 = 5."},
        {"id": "right", "text": "2 + 2 = **4**."},
    ],
    "gold": {
        "judgment": {
            "kind": "pairwise",
            "shown_order": ["wrong", "right"],
            "winner": "b",
            "strength": 3,
        },
        "explanation": "Response 2 is correct; response 1 is off by one.",
    },
    "metadata": {"qualification": True},
}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("qual-site")
    s = build_site(
        tmp,
        {"root": True, "alice": False},
        [
            {
                "name": "q",
                "title": "Qualification",
                "kinds": ["pairwise"],
                "policy": {
                    **OPEN,
                    "qualification": {"n_items": 1, "min_items": 1, "pass_bar": 0.5},
                },
                "members": {"alice": "rater"},
                "items": [
                    GOLD,
                    {
                        "id": "p-1",
                        "prompt": "x",
                        "candidates": [{"id": "a", "text": "a"}, {"id": "b", "text": "b"}],
                    },
                ],
            }
        ],
    )
    yield s
    s.server.stop()


def test_feedback_maps_the_explanation_to_the_answers_as_shown(site, new_page):
    page = new_page(site)
    login(page, "alice", next_path="/p/q/label")
    with page.expect_navigation():
        page.locator('[data-action="get-task"]').click()
    seen = {
        page.locator(".answer.side-a").get_attribute("data-candidate"): "A",
        page.locator(".answer.side-b").get_attribute("data-candidate"): "B",
    }
    page.keyboard.press("4")  # a tie: wrong, so the feedback matters
    page.keyboard.press("Control+Enter")
    fb = page.locator("#feedback")
    fb.wait_for(state="visible")
    shot(page, "80-qualification-feedback-mapped")
    expect(fb).to_contain_text(f"Expected: Answer {seen['right']} much better")
    expect(fb).to_contain_text("Response 2 is correct")
    expect(fb.locator(".order-legend")).to_have_text(
        "In this explanation, response 1, 2 … count in the item's own order: "
        f"response 1 is the answer you saw as {seen['wrong']}; response 2 is the answer you saw as {seen['right']}."
    )
    expect(page.locator(".answer.expected-answer")).to_have_attribute("data-candidate", "right")
    page.guard.assert_clean()
