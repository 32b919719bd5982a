"""Issue 11, dead end 6: the adjudication queue names each flagged judgment once (grouped, with
the judgments it resembles). Issue 28: the dashboard counts labels held out by telemetry (strong
evidence) only; a near-duplicate rationale is a reason to review, not a held-out label."""

from __future__ import annotations

import re

import httpx
import pytest
from playwright.sync_api import expect
from webui_helpers import PASSWORD, build_site, login, shot
from webui_items import OPEN, pair_item

RATERS = ["r1", "r2", "r3", "r4"]
COPIED = "Answer A is clearly better because it explains the base case and gives runnable code."


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dup-site")
    s = build_site(
        tmp,
        {"root": True, "rita": False, **dict.fromkeys(RATERS, False)},
        [
            {
                "name": "dup",
                "title": "Copied rationales",
                "kinds": ["pairwise"],
                "policy": {**OPEN, "overlap_k": 4},
                "members": {"rita": "reviewer", **dict.fromkeys(RATERS, "rater")},
                "items": [pair_item("dup-1")],
            },
            {
                "name": "two",
                "title": "Two splits",
                "kinds": ["pairwise"],
                "policy": OPEN,
                "members": {"rita": "reviewer", "r1": "rater", "r2": "rater"},
                "items": [pair_item("split-1"), pair_item("split-2", "What is a monad?")],
            },
            {
                "name": "paste",
                "title": "Pasted answers",
                "kinds": ["pairwise"],
                "policy": {**OPEN, "overlap_share": 0.0},
                "members": {"rita": "reviewer", "r3": "rater"},
                "items": [pair_item("paste-1"), pair_item("paste-2", "What is a monad?")],
            },
        ],
    )
    yield s
    s.server.stop()


def _label_through_the_api(
    site,
    who: str,
    rationale: str,
    project: str = "dup",
    better: str | None = None,
    times: int = 1,
    telemetry: dict | None = None,
) -> None:
    with httpx.Client(base_url=site.base, timeout=30) as c:
        csrf = c.post("/api/v1/auth/login", json={"username": who, "password": PASSWORD}).json()[
            "csrf_token"
        ]
        h = {"X-CSRF-Token": csrf}
        for _ in range(times):
            task = c.post(f"/api/v1/projects/{project}/assignments/next", headers=h).json()["task"]
            winner = "a" if better is None or task["shown_order"][0] == better else "b"
            r = c.post(
                f"/api/v1/projects/{project}/judgments",
                headers=h,
                json={
                    "assignment_id": task["assignment_id"],
                    "judgment": {
                        "kind": "pairwise",
                        "shown_order": task["shown_order"],
                        "winner": winner,
                        "strength": 2,
                        "rationale": rationale,
                    },
                    **({"telemetry": telemetry} if telemetry else {}),
                },
            )
            assert r.status_code == 201, r.text


def test_each_copied_rationale_is_one_line_naming_the_others(site, new_page):
    for who in RATERS:  # four raters, one rationale: six matching pairs
        _label_through_the_api(site, who, COPIED)
    ids = sorted(j["judgment_id"] for j in site.judgments("dup"))

    page = new_page(site)
    login(page, "rita", next_path="/p/dup/review")
    reasons = page.locator("table.queue tr", has_text="dup-1").locator("ul.reasons li")
    texts = [t for t in reasons.all_inner_texts() if "near_duplicate_rationale" in t]
    shot(page, "70-adjudication-queue-grouped")
    assert len(texts) == len(RATERS), f"one line per judgment, not per pair: {texts}"
    for jid, text in zip(
        ids, sorted(texts, key=lambda t: int(re.search(r"judgment (\d+)", t)[1])), strict=True
    ):
        others = sorted(int(x) for x in re.findall(r"\d+", text.split("like judgments", 1)[1]))
        assert others == [o for o in ids if o != jid], text

    page.goto("/admin/p/dup/dashboard")
    expect(page.locator("table.raters th").nth(7)).to_have_text("Held out by telemetry")
    for who in RATERS:
        expect(page.locator(f"#rater-{who} td").nth(7)).to_have_text("0")  # exported, reviewed
    shot(page, "71-dashboard-held-out-labels")
    page.guard.assert_clean()


def test_after_a_final_label_the_reviewer_lands_on_the_next_open_item(site, new_page):
    _label_through_the_api(site, "r1", "x explains recursion properly.", "two", better="x", times=2)
    _label_through_the_api(
        site, "r2", "y is shorter and links a source.", "two", better="y", times=2
    )
    page = new_page(site)
    login(page, "rita", next_path="/p/two/review")
    with page.expect_navigation():
        page.locator("table.queue a").first.click()
    first = page.locator("#review-item").get_attribute("data-item")
    other = ({"split-1", "split-2"} - {first}).pop()
    expect(page.locator("#next-item")).to_contain_text(other)
    page.locator("body").click(position={"x": 5, "y": 300})
    page.keyboard.press("4")  # a tie, with the keyboard
    page.locator("#adjudicate-note").fill("Both are acceptable for this guideline.")
    page.locator("#adjudicate-note").evaluate("el => el.blur()")
    with page.expect_navigation():
        page.keyboard.press("Control+Enter")
    assert page.locator("#review-item").get_attribute("data-item") == other
    expect(page.locator("#next-item")).to_have_count(
        0
    )  # the first one is adjudicated: nothing else open
    shot(page, "72-review-next-item")
    with page.expect_navigation():
        page.keyboard.press("q")
    assert page.url.endswith("/p/two/review")
    page.guard.assert_clean()


def test_the_data_browser_filters_items_by_disagreement_flags_and_text(site, new_page):
    if not site.judgments("dup"):  # run alone: label as the tests above do
        for who in RATERS:
            _label_through_the_api(site, who, COPIED)
    if not site.judgments("two"):
        _label_through_the_api(
            site, "r1", "x explains recursion properly.", "two", better="x", times=2
        )
        _label_through_the_api(
            site, "r2", "y is shorter and links a source.", "two", better="y", times=2
        )
    page = new_page(site)
    login(page, "rita", next_path="/admin/p/two/data")
    expect(page.locator("#data-count")).to_have_text("2 items")
    page.locator("#f-q").fill("monad")
    with page.expect_navigation():
        page.get_by_role("button", name="Filter").click()
    expect(page.locator("#data-table tbody tr")).to_have_count(1)
    expect(page.locator("#data-table tbody tr")).to_have_attribute("data-item", "split-2")
    expect(page.locator("#data-table tbody tr")).to_contain_text("r1, r2")
    shot(page, "73-data-browser")
    page.goto("/admin/p/dup/data?flagged=true")
    expect(page.locator("#data-table tbody tr")).to_contain_text("near_duplicate_rationale")
    page.goto("/admin/p/dup/data?kind=pairwise&rater=nobody")
    expect(page.locator("#data-count")).to_have_text("0 items")
    page.guard.assert_clean()


PASTED = "The first answer is better because " + "it is accurate and complete. " * 20


def test_a_reviewer_keeps_or_excludes_labels_held_out_by_telemetry(site, new_page):
    """Issue 28: labels whose telemetry is strong evidence (a pasted answer) wait on the review
    page with their evidence; Keep and Exclude (with a note) settle them."""
    tel = {"pasted_chars": len(PASTED), "untrusted_paste_chars": len(PASTED), "paste_count": 1}
    _label_through_the_api(site, "r3", PASTED, "paste", times=2, telemetry=tel)
    page = new_page(site)
    login(page, "rita", next_path="/p/paste/review")
    rows = page.locator("#telemetry table.queue tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.first).to_contain_text("pasted answer")
    expect(rows.first).to_contain_text(f"untrusted_paste_chars {len(PASTED)}")
    shot(page, "77-held-out-by-telemetry")
    with page.expect_navigation():
        rows.first.get_by_role("button", name="Keep").click()
    expect(rows).to_have_count(1)
    rows.first.get_by_role("button", name="Exclude").click()
    expect(rows.first.locator(".error")).to_contain_text("write a note")
    rows.first.locator("input[name=decision_note]").fill("a model's answer, pasted")
    with page.expect_navigation():
        rows.first.get_by_role("button", name="Exclude").click()
    expect(page.locator("#telemetry")).to_contain_text("No label is held out by its telemetry")
    expect(page.locator("#telemetry")).to_contain_text("2 label(s) decided by a reviewer")
    decided = {j["excluded"] for j in site.judgments("paste")}
    assert decided == {True, False}, "one kept, one excluded"
    page.guard.assert_clean()
