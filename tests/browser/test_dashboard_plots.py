"""Issue 11: plots on the dashboard, drawn server-side as inline SVG (no script, no CDN): labels
over time, agreement per batch with CIs, rater accuracy against volume, the length-bias curve;
and a link to the evaluation leaderboard."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import expect
from webui_helpers import PASSWORD, build_site, login, shot
from webui_items import OPEN, gold_item

SHORT, LONG = "Yes.", "Yes: a longer answer that explains why, with an example and a caveat."


def _pair(i: int) -> dict:
    """Half the items have the long answer under id ``a``, half under ``b`` (canonical values vary)."""
    a, b = (LONG, SHORT) if i % 2 else (SHORT, LONG)
    return {
        "id": f"p-{i}",
        "prompt": f"Question {i}?",
        "candidates": [{"id": "a", "text": a}, {"id": "b", "text": b}],
    }


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    s = build_site(
        tmp_path_factory.mktemp("plots-site"),
        {"root": True, "r1": False, "r2": False},
        [
            {
                "name": "plots",
                "title": "Plots",
                "kinds": ["pairwise"],
                "policy": {
                    **OPEN,
                    "qualification": {"n_items": 2, "min_items": 2, "pass_bar": 0.4},
                },
                "members": {"r1": "rater", "r2": "rater"},
                "items": [gold_item(1), gold_item(2), *[_pair(i) for i in range(6)]],
            }
        ],
    )
    for rater in ("r1", "r2"):
        _label_everything(s, rater)
    yield s
    s.server.stop()


def _label_everything(site, who: str) -> None:
    """Both raters prefer the right answer on gold and the longer answer elsewhere."""
    with httpx.Client(base_url=site.base, timeout=30) as c:
        csrf = c.post("/api/v1/auth/login", json={"username": who, "password": PASSWORD}).json()[
            "csrf_token"
        ]
        h = {"X-CSRF-Token": csrf}
        for _ in range(20):
            task = c.post("/api/v1/projects/plots/assignments/next", headers=h).json().get("task")
            if not task:
                return
            texts = {x["id"]: x["text"] for x in task["item"]["candidates"]}
            pick = "good" if "good" in texts else max(texts, key=lambda k: len(texts[k]))
            r = c.post(
                "/api/v1/projects/plots/judgments",
                headers=h,
                json={
                    "assignment_id": task["assignment_id"],
                    "judgment": {
                        "kind": "pairwise",
                        "shown_order": task["shown_order"],
                        "winner": "a" if task["shown_order"][0] == pick else "b",
                        "strength": 2,
                    },
                },
            )
            assert r.status_code == 201, r.text


def test_dashboard_draws_its_plots_inline_and_links_the_leaderboard(site, new_page):
    page = new_page(site)
    login(page, "root", next_path="/admin/p/plots/dashboard")
    # labels over time: one point per day, the last one the cumulative total (8 items x 2 raters)
    over_time = page.locator("svg#plot-labels-over-time")
    expect(over_time.locator("circle.plot-dot").last.locator("title")).to_contain_text(": 16")
    # agreement per batch with its CI whisker, and the reference lines
    agreement = page.locator("svg#plot-agreement")
    expect(agreement.locator(".plot-row")).to_have_count(
        page.locator("h3 + table tbody tr").count()
    )
    expect(agreement.locator(".plot-row title").first).to_contain_text("alpha 1.000")
    expect(agreement.locator("line.plot-ref")).to_have_count(2)
    # rater accuracy against volume: one point per rater with a Wilson whisker
    accuracy = page.locator("svg#plot-accuracy-volume")
    expect(accuracy.locator(".plot-point")).to_have_count(2)
    expect(accuracy.locator(".plot-point title").first).to_contain_text("100% of 2 gold")
    # the length-bias curve: always the longer answer, so the share chosen is 1 above 1:1 and 0 below
    curve = page.locator("svg#plot-length-bias")
    shares = curve.locator("circle.plot-dot title").evaluate_all(
        "els => els.map((e) => e.textContent)"
    )
    assert shares and all(("chosen 100%" in s) or ("chosen 0%" in s) for s in shares), shares
    expect(curve.locator("polyline.plot-fit")).to_have_count(1)
    # the leaderboard is one click away
    expect(page.locator("#leaderboard-link")).to_have_attribute(
        "href", "/admin/p/plots/leaderboard"
    )
    # which labels the panels measured (issue 11): 8 items x 2 raters, nothing set aside
    expect(page.locator("#label-set")).to_contain_text("Labels measured: 16 of 16 judgments")
    expect(page.locator("#label-set")).to_contain_text("latest label per rater and unit")
    shot(page, "74-dashboard-plots")
    # issue 31: every bar's value label lies inside its chart (a "24" at a full bar read "2"),
    # counts print as counts, and 16 pairs are too few for a logistic slope
    clipped = page.locator("svg.chart").evaluate_all(
        """charts => charts.flatMap((svg) => {
             const right = svg.getBoundingClientRect().right;
             return [...svg.querySelectorAll('text.chart-value')]
               .filter((t) => t.getBoundingClientRect().right > right + 0.5)
               .map((t) => t.textContent);
           })"""
    )
    assert clipped == [], clipped
    counts = page.locator(
        'svg.chart[aria-label="Pairs per chosen/rejected length ratio"] text.chart-value'
    )
    assert counts.count() and all(
        t.isdigit() for t in counts.evaluate_all("els => els.map((e) => e.textContent)")
    )
    expect(page.get_by_text("too few pairs for a logistic slope")).to_be_visible()
    with page.expect_navigation():
        page.locator("#leaderboard-link").click()
    expect(page.locator("h1")).to_be_visible()
    page.guard.assert_clean()


def test_export_options_in_the_ui_reach_the_manifest(site, new_page):
    """Issue 11: export options in the UI (aggregation, gates, provenance columns), the same as
    `preflab export`'s; every pair here has a 13:1 length ratio, so the length gate drops them all."""
    page = new_page(site)
    login(page, "root", next_path="/admin/p/plots/export")
    page.locator("#format").select_option("trl-preference")
    page.locator("details.export-options summary").click()
    page.locator("#ex-aggregation").select_option("dawid-skene")
    page.locator("#ex-min-raters").fill("2")
    page.locator("#ex-gate-on").check()
    shot(page, "75-export-options")
    page.get_by_role("button", name="Export").click()
    expect(page.locator("#export-result h3")).to_contain_text(
        "manifest", timeout=60_000
    )  # issue 27: a background job
    page.reload()
    href = (
        page.locator("#past-exports tbody tr")
        .first.locator("a", has_text="manifest.json")
        .get_attribute("href")
    )
    with site.api() as c:
        manifest = c.get(href).json()
    text = __import__("json").dumps(manifest)
    assert "dawid" in text.lower(), "the manifest names the aggregator chosen in the form"
    assert "0.85" in text and "1.2" in text, "the manifest records the length gate"
    assert '"min_raters": 2' in text, "the manifest records the fewest raters asked for"
    # a bad gate is refused by the server with what to do (the browser's own check switched off)
    page.locator("#export-form").evaluate("f => f.noValidate = true")
    page.locator("details.export-options summary").click()
    page.locator("#ex-gate-on").check()
    page.locator("#ex-gate-max").fill("0.9")
    page.get_by_role("button", name="Export").click()
    expect(page.locator("#export-result")).to_contain_text(
        "length_gate [0.85, 0.9]: need 0 < min <= 1 <= max"
    )


def test_the_export_form_sends_the_clis_options_and_shows_warnings(site, new_page):
    """Issue 28: the export page offers what `preflab export` offers (telemetry-held labels,
    agreement floor and force, disagreement, file format, rows, verl's options), and an export
    that holds nothing says so in words on the page."""
    page = new_page(site)
    login(page, "root", next_path="/admin/p/plots/export")
    page.locator("#format").select_option("trl-preference")
    page.locator("details.export-options summary").click()
    page.locator("#ex-file-format").select_option("parquet")
    page.locator("#ex-conversational").select_option("true")
    page.get_by_label("Include labels held out by their telemetry", exact=False).check()
    page.locator("#ex-min-alpha").fill("0.5")
    page.get_by_label("Force: write even when agreement", exact=False).check()
    # issue 27: a forced export says why (kept with the job and in the audit log)
    page.locator("#ex-force-reason").fill("the pilot's two raters; adjudication follows")
    page.locator("#ex-drop-disagreement").fill("0.75")
    page.locator("#ex-gate-on").check()  # every pair has a 13:1 length ratio: all dropped
    shot(page, "76-export-options-issue-28")
    page.get_by_role("button", name="Export").click()
    result = page.locator("#export-result")
    expect(result.locator("h3")).to_contain_text(
        "manifest", timeout=60_000
    )  # issue 27: a background job
    expect(result.locator(".export-warning")).to_contain_text(
        "Warning: This export has 0 rows: gate length_parity dropped 6"
    )
    manifest = __import__("json").loads(result.locator("pre").inner_text())
    assert manifest["options"]["file_format"] == "parquet"
    assert manifest["conversational"] is True
    assert manifest["gates"]["telemetry"]["include_flagged"] is True
    assert manifest["agreement"]["min_alpha"] == 0.5
    page.reload()
    expect(page.locator("#past-exports tbody tr").first).to_contain_text(
        "WARNING: This export has 0 rows"
    )
    page.guard.assert_clean()
