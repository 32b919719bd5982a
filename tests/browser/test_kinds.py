"""Issue 11, dead ends 1 and 2: a project that collects several kinds offers each item only the
kinds it can take (pairwise exactly 2 answers, ranking at least 2, rubric/unary/steps exactly 1,
demonstration any, or what the item declares), keeps the rater's chosen kind from item to item,
and never ends on a bare server error."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect
from webui_helpers import build_site, login, shot
from webui_items import multi_kind_projects

EXPECTED_KINDS = {  # item -> the kinds the page may offer, in the project's order
    "one-1": ["rubric", "unary", "steps", "demonstration"],
    "two-1": ["pairwise", "ranking", "demonstration"],
    "three-1": ["ranking", "demonstration"],
    "two-declared": ["demonstration"],
}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("kinds-site")
    s = build_site(
        tmp,
        {"root": True, "alice": False, "bob": False},
        multi_kind_projects({"alice": "rater", "bob": "rater"}),
    )
    yield s
    s.server.stop()


def _task(page) -> dict:
    return json.loads(page.locator("#task-data").text_content())


def _offered(page) -> list[str]:
    tabs = page.locator("nav.kinds a")
    if tabs.count():
        return [a.inner_text() for a in tabs.all()]
    return [page.locator("#label-app").get_attribute("data-kind")]


def _fill(page, kind: str) -> None:
    """Enter a valid answer in the widget on screen."""
    if kind == "pairwise":
        page.keyboard.press("2")
    elif kind == "rubric":
        for dim in ("correctness", "clarity", "safe"):
            page.locator(f'input[name="dim-{dim}"]').first.check()
    elif kind == "unary":
        page.keyboard.press("+")
    elif kind == "steps":
        page.locator(".step").first.focus()
        page.keyboard.press("e")
    elif kind == "demonstration":
        page.locator("#demo-text").fill("My own answer.")
    # ranking: the shown order is a valid ranking as it stands


def _server_log(site) -> str:
    site.server.log.flush()
    return open(site.server.log.name).read()


def test_a_rater_labels_every_item_shape_of_a_multi_kind_project(site, new_page):
    page = new_page(site)
    login(page, "alice", next_path="/p/multi/label?kind=pairwise")
    expect(page.locator('[data-action="get-task"]')).to_be_focused()
    with page.expect_navigation():
        page.keyboard.press("Enter")
    labelled = {}
    for n in range(1, len(EXPECTED_KINDS) + 1):
        page.locator("#label-app").wait_for()
        expect(page.locator("#label-progress")).to_have_text(
            f"Item {n} of up to 4 · {n - 1} this session"
        )
        assert "kind=pairwise" in page.url, "the chosen kind survives the redirect to the next item"
        task = _task(page)
        item = task["item_id"]
        expected = EXPECTED_KINDS[item]
        assert _offered(page) == expected, f"{item} has {len(task['shown_order'])} answers"
        kind = page.locator("#label-app").get_attribute("data-kind")
        if "pairwise" in expected:
            assert kind == "pairwise"
            assert not page.locator("#kind-note").count()
        else:
            assert kind == expected[0]
            expect(page.locator("#kind-note")).to_contain_text("cannot be labelled as pairwise")
        shot(page, f"20-multi-{item}-{kind}")
        _fill(page, kind)
        with page.expect_navigation():
            page.keyboard.press("Control+Enter")
        labelled[item] = kind
    page.locator('[data-action="get-task"]').wait_for()
    assert "kind=pairwise" in page.url
    page.locator('[data-action="get-task"]').click()
    expect(page.locator("#no-task-message")).to_contain_text("no more items")

    stored = {j["item_id"]: j["kind"] for j in site.judgments("multi") if j["rater"] == "alice"}
    assert (
        stored
        == labelled
        == {
            "one-1": "rubric",
            "two-1": "pairwise",
            "three-1": "ranking",
            "two-declared": "demonstration",
        }
    )
    assert "Traceback" not in _server_log(site)
    page.guard.assert_clean()


def test_choosing_another_kind_on_an_item_that_can_take_it(site, new_page):
    page = new_page(site)
    login(page, "bob", next_path="/p/multi/label?kind=unary")
    page.locator('[data-action="get-task"]').click()
    page.locator("#label-app").wait_for()
    while _task(page)["item_id"] != "two-1":  # label the others as offered, until the pair comes
        _fill(page, page.locator("#label-app").get_attribute("data-kind"))
        with page.expect_navigation():
            page.keyboard.press("Control+Enter")
        page.locator("#label-app").wait_for()
    assert "kind=unary" in page.url
    with page.expect_navigation():
        page.locator("nav.kinds a", has_text="ranking").click()
    assert page.locator("#label-app").get_attribute("data-kind") == "ranking"
    with page.expect_navigation():
        page.keyboard.press("Control+Enter")
    (j,) = [j for j in site.judgments("multi", "two-1") if j["rater"] == "bob"]
    assert j["kind"] == "ranking"


def test_pairwise_is_never_offered_for_three_answers(site):
    """A three-answer item never reaches a pairwise-only project: the import refuses it, naming
    the line and the rule (it used to be imported and then offered as A/B with the third answer lost)."""
    from webui_items import three_item

    with site.api() as c:
        r = c.post("/api/v1/projects/pw3/items", json={"items": [three_item("three-only")]})
        assert r.status_code == 422, r.text
        body = r.json()
        assert "nothing was imported" in body["detail"]
        assert "items:1: candidates: item 'three-only' has 3 answer(s)" in json.dumps(body)
        assert "pairwise needs exactly 2 answers" in json.dumps(body)
        assert c.get("/api/v1/projects/pw3/items").json() == []
    # in a project that also collects rankings, the page offers ranking for it, never A/B
    assert "pairwise" not in EXPECTED_KINDS["three-1"]
