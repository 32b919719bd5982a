"""Issue 27 item 3 in the browser: the export page starts an export job, follows its progress to
the end and offers its files; forcing asks why; a failed job says why.

Two raters: r1 prefers the plain answer everywhere, r2 on even items only, so agreement is below
the project's floor (an export needs force) and the odd items have no majority (dropped)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect
from webui_helpers import PASSWORD, build_site, login, shot
from webui_items import OPEN

N = 4
#: a job's process starts in a second or a few on a busy machine (the assertions' default is 5 s)
JOB_S = 60_000


def _pair(i: int) -> dict:
    return {
        "id": f"q-{i}",
        "prompt": f"Question {i}?",
        "candidates": [
            {"id": "a", "text": f"Answer {i}, said plainly."},
            {"id": "b", "text": f"Answer {i}, said otherwise."},
        ],
    }


def pick(rater: str, task: dict) -> str:
    odd = int(task["item"]["id"].split("-")[1]) % 2
    return "b" if rater == "r2" and odd else "a"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    s = build_site(
        tmp_path_factory.mktemp("export-jobs-site"),
        {"root": True, "r1": False, "r2": False},
        [
            {
                "name": "jobs",
                "title": "Jobs",
                "kinds": ["pairwise"],
                "policy": {**OPEN, "qualification": {"n_items": 0}},
                "members": {"r1": "rater", "r2": "rater"},
                "items": [_pair(i) for i in range(N)],
            }
        ],
    )
    for rater in ("r1", "r2"):
        with httpx.Client(base_url=s.base, timeout=30) as c:
            login = c.post("/api/v1/auth/login", json={"username": rater, "password": PASSWORD})
            h = {"X-CSRF-Token": login.json()["csrf_token"]}
            while task := c.post("/api/v1/projects/jobs/assignments/next", headers=h).json()[
                "task"
            ]:
                judgment = {
                    "kind": "pairwise",
                    "shown_order": task["shown_order"],
                    "winner": "a" if task["shown_order"][0] == pick(rater, task) else "b",
                    "strength": 2,
                }
                body = {"assignment_id": task["assignment_id"], "judgment": judgment}
                r = c.post("/api/v1/projects/jobs/judgments", headers=h, json=body)
                assert r.status_code == 201, r.text
    yield s
    s.server.stop()


def test_an_export_job_from_the_page_finishes_and_its_file_downloads(site, new_page, tmp_path):
    page = new_page(site)
    login(page, "root", next_path="/admin/p/jobs/export")
    expect(page.locator("#export-jobs")).to_contain_text("No export jobs yet.")
    page.locator("#format").select_option("trl-preference")
    page.locator("details.export-options summary").click()
    page.locator("#ex-gate-on").uncheck()
    page.locator("#ex-length-unit").select_option("words")
    reason = page.locator("#ex-force-reason")
    expect(reason).to_be_hidden()
    page.get_by_label("Force: write even when agreement", exact=False).check()
    expect(reason).to_be_visible()  # forcing asks why
    reason.fill("two raters only in this pilot")
    page.get_by_role("button", name="Export").click()
    row = page.locator("#export-jobs tbody tr").first
    expect(row.locator(".job-status")).to_have_text("done", timeout=JOB_S)
    expect(row).to_contain_text("forced: two raters only in this pilot")
    bar = row.locator("progress.job-progress")
    assert bar.get_attribute("max") == bar.get_attribute("value") == str(N)
    expect(row.locator(".job-phase")).to_contain_text(f"done {N}/{N}")
    result = page.locator("#export-result")
    expect(result.locator("h3")).to_contain_text("manifest")
    expect(result.locator(".export-summary")).to_contain_text(
        f"{N // 2} rows from {2 * N} judgments"
    )
    shot(page, "80-export-job-done")
    link = row.locator("a", has_text="train.jsonl")
    with page.expect_download() as download:
        link.click()
    saved = Path(download.value.path())
    rows = [json.loads(line) for line in saved.read_text().splitlines()]
    assert len(rows) == N // 2 and all(r["chosen"].endswith("said plainly.") for r in rows)
    with site.api() as c:
        assert c.get(link.get_attribute("href")).content == saved.read_bytes()
    # after a reload the table lists the job, done, with its files
    page.reload()
    expect(page.locator("#export-jobs tbody tr").first.locator(".job-status")).to_have_text("done")
    expect(page.locator("#export-jobs tbody tr").first.locator("a")).to_have_count(4)
    page.guard.assert_clean()


def test_a_failed_job_says_why_on_the_page(site, new_page):
    page = new_page(site)
    login(page, "root", next_path="/admin/p/jobs/export")
    page.locator("#format").select_option("trl-preference")
    page.locator("details.export-options summary").click()
    page.locator("#ex-gate-on").uncheck()
    page.get_by_role("button", name="Export").click()
    row = page.locator("#export-jobs tbody tr").first
    expect(row.locator(".job-status")).to_have_text("failed", timeout=JOB_S)
    expect(row.locator(".job-error")).to_contain_text("agreement below policy.min_alpha")
    expect(row.locator("a")).to_have_count(0)
    expect(page.locator("#export-result")).to_contain_text("Export failed: agreement below")
    page.guard.assert_clean()
