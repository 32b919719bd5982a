"""Issue 31: pages that fit a phone and a laptop. At 390 px the export page was 1,293 px wide (the
format select), the dashboard 827, the review queue 517, the rater's start page 621, the label
page 423, and "Log out" fell outside the header; at 1,366 px the export select and the users
table overflowed their cards. Every page, at both widths: nothing scrolls sideways, and no card's
content is wider than the card (a wide table scrolls inside its own box, which is allowed)."""

from __future__ import annotations

import pytest
from webui_helpers import build_site, login
from webui_items import pair_item

WIDTHS = (390, 1366)

#: the page's own overflow, then each card's: elements wider than their card, except inside a
#: box made to scroll sideways (a table or a pre in a card)
OVERFLOW = """() => {
  const doc = document.documentElement;
  const out = [];
  if (doc.scrollWidth > window.innerWidth + 1) out.push(`page ${doc.scrollWidth}px`);
  const header = document.querySelector("header");
  if (header) for (const el of header.querySelectorAll("a, button")) {
    const r = el.getBoundingClientRect();
    if (r.width && r.right > window.innerWidth + 1) out.push(`header: ${el.textContent.trim()}`);
  }
  for (const card of document.querySelectorAll(".card, section, form")) {
    const box = card.getBoundingClientRect();
    if (!box.width) continue;
    for (const el of card.querySelectorAll("*")) {
      if (el.closest("details:not([open])")) continue;
      let scroller = el.parentElement, inside = false;  // a box that scrolls sideways holds it
      while (scroller && scroller !== card) {
        const o = getComputedStyle(scroller).overflowX;
        if (o === "auto" || o === "scroll") { inside = true; break; }
        scroller = scroller.parentElement;
      }
      if (inside) continue;
      const r = el.getBoundingClientRect();
      if (r.width && r.right > box.right + 2) {
        out.push(`${el.tagName.toLowerCase()}${el.id ? "#" + el.id : ""} ${Math.round(r.right - box.right)}px past its ${card.tagName.toLowerCase()}`);
        break;
      }
    }
  }
  return out;
}"""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    s = build_site(
        tmp_path_factory.mktemp("widths"),
        {"root": True, "rita": False, "rev": False},
        [
            {
                "name": "wide",
                "title": "A project with a rather long title to see how it wraps on a phone",
                "kinds": ["pairwise"],
                "members": {"rita": "rater", "rev": "reviewer"},
                "policy": {"blind": False},
                "items": [
                    pair_item(f"w-{i}", f"Explain topic number {i} briefly.") for i in range(4)
                ],
            }
        ],
    )
    yield s
    s.server.stop()


PAGES = {
    "root": [
        "/",
        "/account",
        "/admin",
        "/admin/audit",
        "/admin/p/wide",
        "/admin/p/wide/import",
        "/admin/p/wide/dashboard",
        "/admin/p/wide/data",
        "/admin/p/wide/export",
        "/admin/p/wide/leaderboard",
        "/p/wide/review",
    ],
    "rita": ["/", "/p/wide", "/p/wide/label", "/account"],
    None: ["/login", "/reset/not-a-token"],
}


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("who", list(PAGES), ids=lambda w: w or "anonymous")
def test_no_page_is_wider_than_the_screen(site, new_page, who, width):
    page = new_page(site, width=width, height=900)
    if who is not None:
        login(page, who, next_path="/")
    problems = {}
    for path in PAGES[who]:
        page.goto(path)
        page.wait_for_load_state("networkidle")
        found = page.evaluate(OVERFLOW)
        if found:
            problems[path] = found
    if who == "rita":  # the label page with an item on it (two answers side by side)
        page.goto("/p/wide/label")
        if page.locator('[data-action="get-task"]').count():  # else the live lease is shown
            with page.expect_navigation():
                page.locator('[data-action="get-task"]').click()
        page.wait_for_load_state("networkidle")
        assert page.locator(".pair, .answers, [data-kind]").count(), "an item is shown"
        found = page.evaluate(OVERFLOW)
        if found:
            problems["label page with an item"] = found
    if who == "root":
        page.goto("/p/wide/review/item/w-0")
        page.wait_for_load_state("networkidle")
        found = page.evaluate(OVERFLOW)
        if found:
            problems["/p/wide/review/item/w-0"] = found
    assert not problems, f"at {width} px: {problems}"
