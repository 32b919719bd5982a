"""A rater logs in, passes qualification, and labels one item of every judgment kind with the
keyboard and one with the mouse; what is stored matches what was entered, shown order and
telemetry included."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect
from webui_helpers import build_site, login, shot
from webui_items import rater_projects

RATIONALE = "The first answer is correct and explains why."


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rater-site")
    s = build_site(
        tmp,
        {"root": True, "alice": False, "bob": False},
        rater_projects({"alice": "rater", "bob": "rater"}),
    )
    yield s
    s.server.stop()


def _mine(site, project: str, rater: str = "alice") -> list[dict]:
    return [j for j in site.judgments(project) if j["rater"] == rater]


def _get_task(page, project: str) -> None:
    """From the empty label page: Enter on the focused 'Get the next task' button."""
    page.goto(f"/p/{project}/label")
    expect(page.locator('[data-action="get-task"]')).to_be_focused()
    with page.expect_navigation():
        page.keyboard.press("Enter")
    page.locator("#label-app").wait_for()


def _type_rationale(page, text: str = RATIONALE) -> None:
    page.keyboard.press("r")  # jumps to the rationale box
    page.keyboard.type(text, delay=35)
    page.keyboard.press("Escape")  # leave nothing half-done; focus stays in the box
    page.locator("#rationale").evaluate("el => el.blur()")


def _submit_and_wait(page) -> None:
    with page.expect_navigation():
        page.keyboard.press("Control+Enter")


def _shown(page) -> list[str]:
    return [
        page.locator(".answer.side-a").get_attribute("data-candidate"),
        page.locator(".answer.side-b").get_attribute("data-candidate"),
    ]


def test_login_qualification_and_pairwise_with_the_keyboard(site, new_page):
    page = new_page(site)
    page.goto("/")
    assert "/login" in page.url
    shot(page, "01-login")
    login(page, "alice")
    page.locator("h1", has_text="Your projects").wait_for()
    shot(page, "02-projects")
    page.goto("/p/pw")
    shot(page, "03-project-guidelines")

    # qualification: two gold items, expected answer and explanation after each
    _get_task(page, "pw")
    for n in (1, 2):
        assert page.locator(".banner.qual").is_visible()
        shown = _shown(page)
        page.keyboard.press("1" if shown[0] == "good" else "7")
        assert page.locator('input[name="pairwise"]:checked').count() == 1
        _type_rationale(page)
        page.keyboard.press("Control+Enter")
        fb = page.locator("#feedback")
        fb.wait_for(state="visible")
        assert "Correct" in page.locator("#feedback-title").inner_text()
        assert (
            RATIONALE not in fb.inner_text()
        )  # the gold's explanation, not the rater's words echoed
        assert f"Qualification: {n} of {n} correct so far." in fb.inner_text()
        assert "the other answer is wrong" in fb.inner_text()  # the explanation
        assert "much better" in fb.inner_text()
        if n == 1:
            shot(page, "04-qualification-feedback")
        with page.expect_navigation():
            page.keyboard.press("Enter")
        if n == 1:
            page.locator("#label-app").wait_for()
    assert page.url.endswith("/p/pw/qualification")
    assert page.locator(".result.pass h2").inner_text() == "Passed"
    shot(page, "05-qualification-passed")

    # production: the 7-point scale by number key
    with page.expect_navigation():
        page.keyboard.press("Enter")  # "Start labelling" has the focus
    page.locator('[data-action="get-task"]').wait_for()
    with page.expect_navigation():
        page.keyboard.press("Enter")
    page.locator("#label-app").wait_for()
    assert not page.locator(".banner.qual").count()
    shown = _shown(page)
    page.keyboard.press("?")
    assert page.locator("#help").is_visible()
    shot(page, "06-guidelines-dialog", full=False)
    page.keyboard.press("Escape")
    page.keyboard.press("2")  # A better
    _type_rationale(page, "Answer A gives a definition and a runnable example, B only links away.")
    shot(page, "07-pairwise")
    _submit_and_wait(page)

    prod = [j for j in _mine(site, "pw") if not j["item_id"].startswith("qual-")]
    assert len(prod) == 1
    body, tel = prod[0]["body"], prod[0]["telemetry"]
    assert body["shown_order"] == shown, "the stored order is the order on screen"
    assert (body["winner"], body["strength"]) == ("a", 2)
    assert prod[0]["rationale"].startswith("Answer A gives a definition")
    assert tel["typed_chars"] >= 60 and "iki_cv" in tel and tel["iki_cv"] > 0
    assert tel["paste_count"] == 0 and tel["pasted_chars"] == 0
    assert tel["active_ms"] > 0
    quals = [j for j in _mine(site, "pw") if j["item_id"].startswith("qual-")]
    assert len(quals) == 2
    page.guard.assert_clean()


def test_pairwise_with_the_mouse_and_a_paste(site, new_page):
    page = new_page(site)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    login(page, "alice", next_path="/p/pw/label")
    # after her last submission the next task was leased already: it is on the page
    page.locator("#label-app").wait_for()
    shown = _shown(page)
    page.locator("label.scale-opt", has_text="B much better").click()
    page.locator("#rationale").click()
    pasted = "Copied from my notes: B is shorter."
    page.evaluate("t => navigator.clipboard.writeText(t)", pasted)
    page.keyboard.press("Control+V")
    assert page.locator("#rationale").input_value() == pasted
    page.locator("#rationale").press("End")
    page.keyboard.type(" ok", delay=40)
    with page.expect_navigation():
        page.get_by_role("button", name=re.compile("^Submit")).click()
    prod = [j for j in _mine(site, "pw") if not j["item_id"].startswith("qual-")]
    assert len(prod) == 2
    j = prod[-1]
    assert j["body"]["shown_order"] == shown
    assert (j["body"]["winner"], j["body"]["strength"]) == ("b", 3)
    assert j["rationale"] == pasted + " ok"
    assert j["telemetry"]["paste_count"] == 1
    assert j["telemetry"]["pasted_chars"] == len(pasted)
    assert j["telemetry"]["typed_chars"] == 3
    page.guard.assert_clean()


def test_every_other_kind_with_the_keyboard(site, new_page):
    page = new_page(site)
    login(page, "alice")

    # ranking: move the first answer down, tie the third with the one above
    _get_task(page, "rank")
    shown = [li.get_attribute("data-candidate") for li in page.locator(".rank-item").all()]
    page.locator(".rank-item").first.focus()
    page.keyboard.press("Alt+ArrowDown")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("t")
    shot(page, "08-ranking")
    _submit_and_wait(page)
    (j,) = _mine(site, "rank")
    assert j["body"]["order"] == [[shown[1]], [shown[0], shown[2]]]

    # rubric: radio groups with arrow keys, Tab to the next dimension, Space on the veto
    _get_task(page, "rub")
    page.locator('input[name="dim-correctness"]').first.focus()
    page.keyboard.press("Space")
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    page.keyboard.press("Tab")
    page.keyboard.press("Space")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("Tab")
    page.keyboard.press("Space")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("Tab")
    page.keyboard.press("Space")
    shot(page, "09-rubric")
    _submit_and_wait(page)
    (j,) = _mine(site, "rub")
    assert j["body"]["scores"] == {"correctness": 4, "clarity": 1, "safe": 1}
    assert j["body"]["vetoes_failed"] == ["factual_error"]
    assert j["body"]["candidate_id"] == "only"

    # unary: thumbs down with "-"
    _get_task(page, "una")
    page.keyboard.press("-")
    _type_rationale(page, "Canberra, not Sydney.")
    shot(page, "10-unary")
    _submit_and_wait(page)
    (j,) = _mine(site, "una")
    assert j["body"]["label"] is False and j["rationale"] == "Canberra, not Sydney."

    # steps: 0 on step 1, skip to step 3 and mark "first error here" (fills step 2 with +1)
    _get_task(page, "stp")
    steps = page.locator(".step")
    assert steps.count() == 4
    steps.first.focus()
    page.keyboard.press("0")
    page.keyboard.press("j")
    page.keyboard.press("e")
    assert page.locator(".step.after-error").count() == 1
    shot(page, "11-steps")
    _submit_and_wait(page)
    (j,) = _mine(site, "stp")
    assert j["body"]["verdicts"] == [0, 1, -1]
    assert j["body"]["steps"][2].startswith("Step 3: In 5 hours")

    # demonstration: the editor has the focus
    _get_task(page, "dem")
    haiku = "Maple leaves drifting\nthe river carries the red\nslowly out of sight"
    page.keyboard.type(haiku, delay=10)
    shot(page, "12-demonstration")
    _submit_and_wait(page)
    (j,) = _mine(site, "dem")
    assert j["body"]["text"] == haiku
    assert j["telemetry"]["typed_chars"] >= len(haiku) - 2

    # an agent trajectory: tool calls and tool output are collapsible and distinct
    _get_task(page, "agent")
    assert page.locator(".tool-call").count() == 2
    assert page.locator("details.turn-tool").count() == 2
    page.locator("details.turn-tool summary").first.click()
    page.locator(".tool-call summary").first.click()
    shot(page, "13-agent-trajectory")
    page.keyboard.press("4")  # tie
    _submit_and_wait(page)
    (j,) = _mine(site, "agent")
    assert (j["body"]["winner"], j["body"]["strength"]) == ("tie", 0)
    page.guard.assert_clean()


def test_ranking_by_drag_and_drop_and_a_narrow_screen(site, new_page):
    page = new_page(site, width=600, height=900)
    login(page, "bob")
    _get_task(page, "rank")
    items = page.locator(".rank-item")
    shown = [li.get_attribute("data-candidate") for li in items.all()]
    items.nth(2).locator(".rank-bar").drag_to(
        items.nth(0).locator(".rank-bar"), target_position={"x": 20, "y": 2}
    )
    order = [li.get_attribute("data-candidate") for li in page.locator(".rank-item").all()]
    assert order == [shown[2], shown[0], shown[1]]
    with page.expect_navigation():
        page.get_by_role("button", name=re.compile("^Submit")).click()
    (j,) = _mine(site, "rank", "bob")
    assert j["body"]["order"] == [[shown[2]], [shown[0]], [shown[1]]]

    _get_task(page, "agent")
    a, b = (
        page.locator(".answer.side-a").bounding_box(),
        page.locator(".answer.side-b").bounding_box(),
    )
    assert b["y"] > a["y"] + a["height"] - 1, "answers stack on a narrow screen"
    shot(page, "14-pairwise-narrow")
    page.guard.assert_clean()
