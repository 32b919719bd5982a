"""Admin pages: projects, users, members, invitations, rubric versions, item imports with every
problem shown line by line, the dashboard."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect
from webui_helpers import PASSWORD, build_site, login, shot
from webui_items import RUBRIC, pair_item


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("admin-site")
    s = build_site(
        tmp,
        {"root": True, "alice": False},
        [
            {
                "name": "base",
                "title": "Existing",
                "kinds": ["pairwise"],
                "members": {"alice": "rater"},
                "policy": {"blind": False},
                "items": [
                    pair_item(f"b-{i}", f"Explain recursion briefly ({i}).") for i in range(3)
                ],
            }
        ],
    )
    yield s
    s.server.stop()


def jsonl(rows) -> bytes:
    return "\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows).encode()


def test_create_project_user_member_invite(site, new_page):
    page = new_page(site)
    login(page, "root", next_path="/admin")
    form = page.locator("#new-project")
    form.get_by_label("Name").fill("imp")
    form.get_by_label("Title").fill("Imported items")
    form.get_by_label("Guidelines").fill("Pick the **more helpful** answer.")
    with page.expect_navigation():
        form.get_by_role("button", name="Create project").click()
    expect(page.locator("table").first).to_contain_text("Imported items")

    user = page.locator("#new-user")
    user.get_by_label("Username").fill("carol")
    user.get_by_role("button", name="Create user").click()
    expect(page.locator("#new-user-result")).to_contain_text("password: ")
    shot(page, "40-admin")

    page.goto("/admin/p/imp")
    m = page.locator("#member-form")
    m.get_by_label("User").fill("carol")
    m.get_by_label("Role").select_option("rater")
    with page.expect_navigation():
        m.get_by_role("button", name="Add or change").click()
    expect(page.locator("table", has_text="carol")).to_contain_text("rater")

    page.locator("#invite-create").get_by_role("button", name="Create invitation link").click()
    link = page.locator("#invite-result")
    expect(link).to_contain_text("/invite/")
    url = link.inner_text().split("path: ")[1].split("\n")[0].strip()

    # rubric upload: a new version only when the content changes
    for n, title in enumerate(("Helpfulness", "Helpfulness (clarified)"), 1):
        page.locator("#rubric-file").set_input_files(
            files=[
                {
                    "name": "rubric.json",
                    "mimeType": "application/json",
                    "buffer": json.dumps({**RUBRIC, "title": title}).encode(),
                }
            ]
        )
        with page.expect_navigation():
            page.get_by_role("button", name="Upload rubric").click()
        expect(page.locator("main")).to_contain_text(f"helpfulness v{n}")
    shot(page, "41-admin-project")
    page.guard.assert_clean()

    guest = new_page(site)
    guest.goto(url)
    guest.get_by_label("Username").fill("dave")
    guest.get_by_label("Password").fill(PASSWORD)
    with guest.expect_navigation():
        guest.get_by_role("button", name="Create account").click()
    expect(guest.locator("main")).to_contain_text("Imported items")
    guest.guard.assert_clean()


def test_import_shows_every_problem_line_by_line_then_a_good_file(site, new_page):
    page = new_page(site)
    login(page, "root", next_path="/admin/p/base/import")
    good = [
        pair_item(f"n-{i}", f"A new question ({i}).") for i in range(3)
    ]  # new content: new items
    bad_rows = [
        good[0],
        "{not json",
        {"id": "n-x", "prompt": "p", "candidates": []},
        {"id": "n-y", "prompt": "p", "candidates": [{"id": "a"}]},
        good[1],
        {"prompt": 3, "candidates": [{"text": "t"}]},
    ]
    page.locator("#import-file").set_input_files(
        files=[{"name": "bad.jsonl", "mimeType": "application/json", "buffer": jsonl(bad_rows)}]
    )
    page.get_by_role("button", name="Import").click()
    result = page.locator("#import-result")
    expect(result).to_contain_text("Nothing was imported")
    problems = result.locator("ol.problems li")
    texts = problems.all_inner_texts()
    lines = sorted({int(t.split(":")[1].split()[0]) for t in texts})
    assert lines == [2, 3, 4, 6], texts
    assert all(t.startswith("bad.jsonl:") for t in texts)
    shot(page, "42-import-errors")
    with site.api() as c:
        assert not [
            i for i in c.get("/api/v1/projects/base/items").json() if i["id"].startswith("n-")
        ], "a failed import changes nothing"
    page.locator("#import-file").set_input_files(
        files=[{"name": "good.jsonl", "mimeType": "application/json", "buffer": jsonl(good)}]
    )
    page.get_by_role("button", name="Import").click()
    expect(result).to_contain_text("Items added: 3")
    shot(page, "43-import-ok")
    with site.api() as c:
        assert (
            len(
                [i for i in c.get("/api/v1/projects/base/items").json() if i["id"].startswith("n-")]
            )
            == 3
        )
    page.guard.console_errors = [e for e in page.guard.console_errors if "422" not in e]
    page.guard.assert_clean()


def test_dashboard(site, new_page):
    rater = new_page(site)
    login(rater, "alice", next_path="/p/base/label")
    with rater.expect_navigation():
        rater.locator('[data-action="get-task"]').click()
    rater.keyboard.press("3")
    rater.locator("#rationale").fill("A is a bit better.")
    with rater.expect_navigation():
        rater.keyboard.press("Control+Enter")
    page = new_page(site)
    login(page, "root", next_path="/admin/p/base/dashboard")
    expect(page.locator("table.raters")).to_contain_text("alice")
    expect(page.locator("main")).to_contain_text("judgments in the last 24 hours")
    # the Goodhart panels come from preflab.quality: position bias and length bias of the pair
    expect(page.locator("main")).to_contain_text("Position bias")
    expect(page.locator("main")).to_contain_text("Length bias")
    expect(page.locator("main")).to_contain_text("decided pairs with different lengths")
    shot(page, "44-dashboard")
    page.goto("/p/base/review")
    shot(page, "45-review-spot")
    page.guard.assert_clean()


def test_the_audit_log_page_filters_and_pages(site, new_page):
    """Issue 31: site admins read the audit log on a page linked from the admin area, filtered
    by action, actor and day, a hundred events a page (older ones behind a link)."""
    import httpx

    with httpx.Client(base_url=site.base, timeout=30) as c:
        csrf = c.post("/api/v1/auth/login", json={"username": "root", "password": PASSWORD}).json()[
            "csrf_token"
        ]
        for i in range(210):  # 105 deactivations: a second page of them
            r = c.patch(
                "/api/v1/users/alice",
                json={"is_active": i % 2 == 1},
                headers={"X-CSRF-Token": csrf},
            )
            assert r.status_code == 200, r.text
    page = new_page(site)
    login(page, "root", next_path="/admin")
    with page.expect_navigation():
        page.locator("#audit-link").click()
    rows = page.locator("#audit-table tbody tr")
    expect(rows).to_have_count(100)
    shot(page, "80-audit-log")
    page.locator("#af-action").select_option("user.deactivated")
    with page.expect_navigation():
        page.get_by_role("button", name="Filter").click()
    assert "action=user.deactivated" in page.url
    texts = rows.all_inner_texts()
    assert len(texts) == 100 and all("user.deactivated" in t for t in texts)
    first_ids = [int(t.split("\t")[0]) for t in texts]
    with page.expect_navigation():
        page.locator("#audit-older").click()
    older = [int(t.split("\t")[0]) for t in rows.all_inner_texts()]
    assert older and max(older) < min(first_ids), "the next page holds older events only"
    assert len(older) == 5, older
    assert all("user.deactivated" in t for t in rows.all_inner_texts()), "the filter is kept"
    page.locator("#af-actor").fill("nobody")
    with page.expect_navigation():
        page.get_by_role("button", name="Filter").click()
    expect(page.get_by_text("No events match.")).to_be_visible()
    page.guard.assert_clean()


def test_the_audit_log_page_is_for_site_admins_only(site, new_page):
    page = new_page(site)
    login(page, "alice", next_path="/")
    response = page.goto("/admin/audit")
    assert response is not None and response.status == 403
