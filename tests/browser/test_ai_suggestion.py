"""AI assistance in the labelling UI (issue 30 item 3; docs/judges.md, "AI assistance"): in a
project that opts in (``policy.ai_assist``), the label page shows the judge's label on the item
with its rationale as inert text; the rater labels by keyboard, then by mouse, and each label is
stored ``ai_assisted`` with the suggestion it was made beside."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect
from webui_helpers import build_site, login, shot
from webui_items import OPEN

JUDGE = "judge-m1"
RATIONALE = "<img src=x onerror=alert(1)> A is <b>clearer</b>."


def _items() -> list[dict]:
    return [
        {
            "id": f"assist-{i}",
            "prompt": f"Question {i}: what is a closure?",
            "candidates": [
                {"id": "x", "text": f"Answer x to {i}: a function with its environment."},
                {"id": "y", "text": f"Answer y to {i}: see the docs."},
            ],
        }
        for i in range(2)
    ]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    from preflab.schema import JudgeRecord, PairwiseJudgment, Provenance
    from preflab.server.database import Database
    from preflab.store import repo

    s = build_site(
        tmp_path_factory.mktemp("ai-suggestion"),
        {"root": True, "alice": False},
        [
            {
                "name": "assist",
                "title": "Pairs with a judge's suggestion",
                "kinds": ["pairwise"],
                "policy": {**OPEN, "ai_assist": JUDGE},
                "members": {"alice": "rater"},
                "items": _items(),
            }
        ],
    )
    db = Database(s.server.db_url, pool_size=1, max_overflow=1)
    with db.writing() as session:
        project = repo.get_project(session, "assist")
        record = JudgeRecord(model=JUDGE, template="pairwise", template_version=1, endpoint="x")
        for item in _items():
            repo.add_judgment(
                session,
                project,
                PairwiseJudgment(
                    item_id=item["id"],
                    shown_order=("x", "y"),
                    winner="a",
                    strength=2,
                    rationale=RATIONALE,
                    provenance=Provenance(rater_id=f"judge:{JUDGE}", source="ai", judge=record),
                ),
            )
    db.dispose()
    yield s
    s.server.stop()


def _stored(site) -> tuple[dict[str, int], list[tuple[str, str, list | None]]]:
    """The judge's label pk per item, and alice's labels: (item, source, assisted_by)."""
    from sqlalchemy import select

    from preflab.server.database import Database
    from preflab.store.models import ItemRow, JudgmentRow, Rater

    db = Database(site.server.db_url, pool_size=1, max_overflow=1)
    with db.reading() as s:
        rows = s.execute(
            select(
                ItemRow.item_key,
                Rater.rater_key,
                JudgmentRow.pk,
                JudgmentRow.source,
                JudgmentRow.assisted_by,
            )
            .join(ItemRow, ItemRow.pk == JudgmentRow.item_pk)
            .join(Rater, Rater.pk == JudgmentRow.rater_pk)
            .order_by(JudgmentRow.pk)
        ).all()
    db.dispose()
    judged = {item: pk for item, rater, pk, _, _ in rows if rater == f"judge:{JUDGE}"}
    mine = [
        (item, source, assisted) for item, rater, _, source, assisted in rows if rater == "alice"
    ]
    return judged, mine


def _check_panel(page) -> str:
    """The suggestion is on the page as text; the answer it names, as the rater sees it."""
    panel = page.locator("#ai-suggestion")
    expect(panel).to_be_visible()
    expect(panel).to_contain_text("AI suggestion")
    expect(panel.locator(".suggestion-rationale")).to_have_text(RATIONALE)
    assert panel.locator("img, b").count() == 0, "the judge's rationale is never markup"
    side_a = page.locator(".answer.side-a").get_attribute("data-candidate")
    name = "A" if side_a == "x" else "B"  # the judge preferred x
    expect(panel).to_contain_text(f"Verdict: Answer {name} is better")
    return name


def test_the_suggestion_is_shown_and_labels_by_keyboard_and_mouse_are_ai_assisted(site, new_page):
    page = new_page(site)
    login(page, "alice", next_path="/p/assist/label")
    expect(page.locator('[data-action="get-task"]')).to_be_focused()
    with page.expect_navigation():
        page.keyboard.press("Enter")
    page.locator("#label-app").wait_for()
    _check_panel(page)
    shot(page, "70-label-ai-suggestion")
    page.keyboard.press("4")  # keyboard: a tie, whatever the judge said
    with page.expect_navigation():
        page.keyboard.press("Control+Enter")

    # the next task is on the page: the mouse this time
    page.locator("#label-app").wait_for()
    _check_panel(page)
    page.locator("label.scale-opt", has_text="B much better").click()
    with page.expect_navigation():
        page.get_by_role("button", name=re.compile("^Submit")).click()

    judged, mine = _stored(site)
    assert len(mine) == 2
    for item, source, assisted in mine:
        assert source == "ai_assisted"
        assert assisted is not None and len(assisted) == 1
        assert assisted[0]["origin"] == "judge" and assisted[0]["judge"] == JUDGE
        assert assisted[0]["judgment_id"] == judged[item], "the suggestion that was on screen"
    page.guard.assert_clean()


def _latest_policy(site) -> dict:
    with site.api() as c:
        history = c.get("/api/v1/projects/assist/settings/history").json()
    return history[-1]["after"]["policy"]


def test_an_admin_turns_assistance_on_and_off_in_the_project_form(site, new_page):
    page = new_page(site)
    login(page, "root", next_path="/admin/p/assist")
    form = page.locator("#policy-form")
    field = form.locator("#pf-ai-assist")
    expect(field).to_have_value(JUDGE)
    field.fill("")  # off
    with page.expect_navigation():
        form.locator("button[type=submit]").click()
    assert _latest_policy(site)["ai_assist"] is None
    expect(page.locator("#pf-ai-assist")).to_have_value("")
    page.locator("#pf-ai-assist").fill(JUDGE)  # on again, by the keyboard's Enter
    with page.expect_navigation():
        page.locator("#pf-ai-assist").press("Enter")
    assert _latest_policy(site)["ai_assist"] == JUDGE
    page.guard.assert_clean()
