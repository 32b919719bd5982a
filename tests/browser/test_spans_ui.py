"""Issue 30 item 4: a rater marks critique spans on the label page with the mouse and with the
keyboard; the stored offsets index the answer's raw text in code points (the answer has Markdown
emphasis, an HTML entity, inline code in a list and an emoji, two UTF-16 units in the browser)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from webui_helpers import build_site, login, shot
from webui_items import OPEN

ANSWER = "😀 **Bold** claim: Lyon &amp; Paris.\n\n- uses `a<b` here\n- done"
FIRST_LINE = ANSWER.split("\n")[0]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("spans-site")
    s = build_site(
        tmp,
        {"root": True, "alice": False},
        [
            {
                "name": "critiques",
                "title": "Critique spans",
                "kinds": ["pairwise"],
                "policy": {
                    **OPEN,
                    "overlap_share": 0.0,
                    "randomise_order": False,
                    "span_categories": ["factual_error", "style"],
                },
                "members": {"alice": "rater"},
                "items": [
                    {
                        "id": "s-1",
                        "prompt": "What is the capital of France?",
                        "candidates": [
                            {"id": "x", "text": ANSWER},
                            {"id": "y", "text": "Paris is the capital."},
                        ],
                    }
                ],
            }
        ],
    )
    yield s
    s.server.stop()


@pytest.fixture(scope="module")
def ranking_site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("spans-ranking-site")
    s = build_site(
        tmp,
        {"root": True, "alice": False},
        [
            {
                "name": "ranked",
                "kinds": ["ranking"],
                "policy": {
                    **OPEN,
                    "overlap_share": 0.0,
                    "randomise_order": False,
                    "span_categories": ["style"],
                },  # fmt: skip
                "members": {"alice": "rater"},
                "items": [
                    {
                        "id": "r-1",
                        "prompt": "Name a colour.",
                        "candidates": [
                            {"id": "c1", "text": "Red."},
                            {"id": "c2", "text": "*Blue*, **surely** green."},
                            {"id": "c3", "text": "Yellow."},
                        ],
                    }
                ],
            }
        ],
    )
    yield s
    s.server.stop()


def test_a_rater_marks_spans_with_keyboard_and_mouse(site, new_page):
    page = new_page(site)
    login(page, "alice", next_path="/p/critiques/label")
    page.locator('[data-action="get-task"]').click()
    page.locator("#label-app").wait_for()
    source = page.locator('.span-source[data-span-candidate="x"]')
    expect(source).to_be_visible()
    items = page.locator("#span-list li")

    # keyboard: focus the answer's text, move past the emoji and the space, extend over "Bold"
    page.select_option("#span-category", "style")
    page.fill("#span-note", "too <b>loud</b>")
    source.focus()
    for _ in range(2):
        page.keyboard.press("ArrowRight")
    for _ in range(4):
        page.keyboard.press("Shift+ArrowRight")
    expect(page.locator("#span-selection")).to_contain_text("Bold")
    page.keyboard.press("m")
    expect(items).to_have_count(1)

    # mouse: a triple click selects the first paragraph (emoji, emphasis, an entity)
    page.select_option("#span-category", "factual_error")
    page.fill("#span-note", "Paris, not Lyon")
    source.locator("p").first.click(click_count=3)
    page.locator('[data-action="mark-span"]').click()
    expect(items).to_have_count(2)

    # mouse: a double click on a word in a list item; then one marked by mistake and removed
    source.locator("li", has_text="here").get_by_text("here").dblclick()
    page.locator('[data-action="mark-span"]').click()
    expect(items).to_have_count(3)
    page.locator('.span-source[data-span-candidate="y"]').get_by_text("Paris is").dblclick()
    page.locator('[data-action="mark-span"]').click()
    expect(items).to_have_count(4)
    items.nth(3).get_by_role("button", name="Remove").click()
    expect(items).to_have_count(3)
    shot(page, "70-label-critique-spans")

    page.keyboard.press("4")  # a tie
    with page.expect_navigation():
        page.keyboard.press("Control+Enter")
    (j,) = [j for j in site.judgments("critiques") if j["rater"] == "alice"]
    got = {
        (s["candidate_id"], ANSWER[s["start"] : s["end"]], s["category"], s["note"])
        for s in j["body"]["spans"]
    }
    assert got == {
        ("x", "Bold", "style", "too <b>loud</b>"),
        ("x", FIRST_LINE, "factual_error", "Paris, not Lyon"),
        ("x", "here", "factual_error", ""),
    }
    page.guard.assert_clean()

    # a reviewer sees each span on the answer's raw text, with its category and note (inert)
    review = new_page(site)
    login(review, "root", next_path="/p/critiques/review/item/s-1")
    card = review.locator(f"#judgment-{j['judgment_id']}")
    marks = card.locator(".span-marks mark")
    expect(marks.first).to_be_visible()
    assert "Bold" in marks.all_text_contents()
    notes = card.locator(".span-notes li")
    expect(notes).to_have_count(3)
    expect(notes.filter(has_text="style")).to_contain_text("too <b>loud</b>")  # shown as text
    expect(card.locator(".span-notes b")).to_have_count(0)
    shot(review, "71-review-critique-spans")
    review.guard.assert_clean()


def test_a_word_in_a_ranking_answer_is_selected_not_dragged(ranking_site, new_page):
    page = new_page(ranking_site)
    login(page, "alice", next_path="/p/ranked/label")
    page.locator('[data-action="get-task"]').click()
    page.locator("#label-app").wait_for()
    source = page.locator('.span-source[data-span-candidate="c2"]')
    source.get_by_text("surely").dblclick()
    expect(page.locator("#span-selection")).to_contain_text("surely")
    page.locator('[data-action="mark-span"]').click()
    expect(page.locator("#span-list li")).to_have_count(1)
    with page.expect_navigation():
        page.keyboard.press("Control+Enter")
    (j,) = [j for j in ranking_site.judgments("ranked") if j["rater"] == "alice"]
    (span,) = j["body"]["spans"]
    text = "*Blue*, **surely** green."
    assert (span["candidate_id"], text[span["start"] : span["end"]]) == ("c2", "surely")
    page.guard.assert_clean()
