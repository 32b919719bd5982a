"""``preflab serve --demo``: a ready PandaLM project and demo accounts with generated passwords."""

from __future__ import annotations

from playwright.sync_api import expect
from webui_helpers import Server, Site, login, shot


def test_demo_project_is_ready_to_label(tmp_path, new_page):
    from preflab.server.webdemo import build_demo

    url = f"sqlite:///{tmp_path / 'demo.db'}"
    demo = build_demo(url, n_items=10, n_qualification=3)
    assert demo["qualification"] == 3 and demo["items"] == 13
    assert set(demo["passwords"]) == {"admin", "reviewer", "rater1", "rater2"}
    server = Server(url, tmp_path).start()
    try:
        site = Site(server=server, admin_token="")
        page = new_page(site)
        login(page, "rater1", demo["passwords"]["rater1"], next_path="/p/pandalm-demo/label")
        with page.expect_navigation():
            page.locator('[data-action="get-task"]').click()
        expect(page.locator(".banner.qual")).to_be_visible()
        expect(page.locator(".answer")).to_have_count(2)
        shot(page, "50-demo-label")
        page.guard.assert_clean()
    finally:
        server.stop()
