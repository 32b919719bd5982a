"""Issue 11: project settings as a form (overlap, gold rate, domains, rationale, spot review),
with the raw policy JSON kept as an advanced view. The form sends only its fields; the server
merges them key by key into a new audited settings version."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from webui_helpers import build_site, login, shot


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    s = build_site(
        tmp_path_factory.mktemp("settings-site"),
        {"root": True},
        [
            {
                "name": "sf",
                "title": "Settings form",
                "kinds": ["pairwise", "unary"],
                "policy": {"overlap_share": 0.2, "qualification": {"n_items": 3}},
            }
        ],
    )
    yield s
    s.server.stop()


def _latest_policy(site) -> dict:
    with site.api() as c:
        history = c.get("/api/v1/projects/sf/settings/history").json()
    return history[-1]["after"]["policy"]


def test_an_admin_edits_the_policy_in_a_form_and_keeps_the_rest(site, new_page):
    page = new_page(site)
    login(page, "root", next_path="/admin/p/sf")
    form = page.locator("#policy-form")
    expect(page.locator("p", has_text="Kinds collected")).to_contain_text("pairwise")
    expect(form.locator("#pf-overlap-share")).to_have_value("0.2")
    expect(page.locator("#s-policy")).not_to_be_visible()  # the raw JSON is the advanced view
    form.locator("#pf-overlap-k").fill("3")
    form.locator("#pf-gold-rate").fill("0.1")
    form.locator("#pf-domains").fill("code, math")
    form.locator("#pf-domain-match").select_option("any")
    expect(form.locator("#pf-step-verdicts")).to_have_value("label")  # the default
    form.locator("#pf-step-verdicts").select_option("suggestion")
    form.locator('input[name="policy.blind"]').uncheck()
    form.locator("#pf-note").fill("three raters per overlap item")
    shot(page, "73-settings-form")
    with page.expect_navigation():
        form.locator("button[type=submit]").click()
    policy = _latest_policy(site)
    assert (
        policy["overlap_k"],
        policy["gold_rate"],
        policy["required_domains"],
        policy["domain_match"],
    ) == (3, 0.1, ["code", "math"], "any")
    assert policy["blind"] is False
    assert policy["imported_step_verdicts"] == "suggestion"
    assert (
        policy["overlap_share"] == 0.2 and policy["qualification"]["n_items"] == 3
    )  # untouched fields kept
    page.locator("details.advanced summary").click()
    expect(page.locator("#s-policy")).to_contain_text('"overlap_k": 3')
    expect(page.locator("#pf-overlap-k")).to_have_value("3")
    page.guard.assert_clean()


def test_a_bad_value_is_refused_with_the_field_named(site, new_page):
    page = new_page(site)
    login(page, "root", next_path="/admin/p/sf")
    form = page.locator("#policy-form")
    form.evaluate(
        "f => f.noValidate = true"
    )  # what a server check must catch even without the browser's
    form.locator("#pf-overlap-k").fill("1")
    form.locator("button[type=submit]").click()
    expect(form.locator(".error")).to_contain_text("overlap_k")
    assert _latest_policy(site)["overlap_k"] != 1
