"""Issue 11, dead end 8: ``/api/v1/docs`` works without internet. Swagger UI's files come from
this server (the ``fastapi-offline`` package); the page asks no other host for anything."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from webui_helpers import build_site, shot


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    s = build_site(tmp_path_factory.mktemp("docs-site"), {"root": True}, [])
    yield s
    s.server.stop()


def test_swagger_ui_renders_from_local_assets_only(site, new_page):
    page = new_page(site)
    foreign_blocked = []
    page.route(
        lambda url: not url.startswith(site.base),
        lambda route: (foreign_blocked.append(route.request.url), route.abort()),
    )
    page.goto("/api/v1/docs")
    # Swagger UI parses and renders the whole OpenAPI document (every route and model) in the
    # page before the title appears: on a loaded 2-core CI box that took over expect's default
    # 5 s once, so the wait is that of a slow page, not a claim about speed
    expect(page.locator(".swagger-ui .info .title")).to_contain_text(
        "preflab collection server", timeout=30_000
    )
    expect(
        page.locator(
            ".opblock-summary-path", has_text="/api/v1/projects/{project}/assignments/next"
        )
    ).to_have_count(1)
    page.locator(".opblock-summary-path", has_text="/api/v1/auth/me").first.click()
    expect(page.locator(".opblock.is-open")).to_have_count(1)
    shot(page, "90-api-docs", full=False)
    assert foreign_blocked == [], "the docs page reached for another host"
    assert "cdn" not in page.content().lower()
    page.guard.assert_clean()
