"""Issue 11, dead end 3: demonstrations reach ``trl-sft``. Raters write them in the browser; a
reviewer accepts or rejects each with a note (web UI, REST API, CLI), stored with who and when;
``trl-sft`` exports the accepted ones and its manifest says why the others were left out."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from playwright.sync_api import expect
from webui_helpers import SRC, build_site, login, shot
from webui_items import OPEN, single

TEXTS = {
    "alice": "Maple leaves drifting\nthe river carries the red\nslowly out of sight",
    "bob": "Autumn is a season.",
}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("demo-site")
    s = build_site(
        tmp,
        {"root": True, "alice": False, "bob": False, "rita": False},
        [
            {
                "name": "dem",
                "title": "Demonstrations",
                "kinds": ["demonstration"],
                "policy": {**OPEN, "overlap_k": 3},
                "members": {"alice": "rater", "bob": "rater", "rita": "reviewer"},
                "items": [single("haiku", "idk", "Write a haiku about autumn.")],
            }
        ],
    )
    s.tmp = tmp
    yield s
    s.server.stop()


def _write_demo(new_page, site, who: str) -> None:
    page = new_page(site)
    login(page, who, next_path="/p/dem/label")
    with page.expect_navigation():
        page.locator('[data-action="get-task"]').click()
    if who == "alice":  # the editor previews Markdown with the pages' own sanitising renderer
        page.locator("#demo-text").fill("A **bold** start <script>alert(1)</script>")
        expect(page.locator("#demo-preview strong")).to_have_text("bold")
        expect(page.locator("#demo-preview")).to_contain_text("<script>alert(1)</script>")
        assert page.locator("#demo-preview script").count() == 0
        shot(page, "39-demonstration-editor-preview")
    page.locator("#demo-text").fill(TEXTS[who])
    with page.expect_navigation():
        page.keyboard.press("Control+Enter")
    page.guard.assert_clean()


def _cli(site, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "preflab.cli", *args, "--db", f"sqlite:///{site.tmp / 'web.db'}"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
        timeout=120,
    )


def _export(site, out) -> dict:
    # Playwright's fill() enters a whole text at once, without a deletion: a weak telemetry signal
    # that no longer removes a label (issue 28, tests/io/test_export_telemetry_gate.py); the option
    # keeps this test about demonstrations whatever the telemetry rule
    r = _cli(
        site,
        "export",
        "dem",
        "--format",
        "trl-sft",
        "--out",
        str(out),
        "--include-flagged",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _rows(out) -> list[dict]:
    return [
        json.loads(line)
        for p in out.glob("*.jsonl")
        for line in p.read_text().splitlines()
        if line.strip()
    ]


def test_demonstrations_from_the_editor_to_trl_sft(site, new_page, tmp_path):
    for who in TEXTS:
        _write_demo(new_page, site, who)
    before = _export(site, tmp_path / "before")
    assert _rows(tmp_path / "before") == [], (
        "nothing is exported while every demonstration is pending"
    )
    assert before["gates"]["demonstration_status"]["reasons"] == {"pending": 2}

    page = new_page(site)
    login(page, "rita", next_path="/p/dem/review")
    expect(page.locator("#demo-queue h2")).to_contain_text("2 pending")
    shot(page, "40-review-demonstrations-queue")
    with page.expect_navigation():
        page.locator("#demo-queue a").first.click()
    bob_form = page.locator("article.judgment", has_text="Autumn is a season").locator(
        "form.demo-review"
    )
    bob_form.get_by_role("button", name="Reject").click()
    expect(bob_form.locator(".error")).to_contain_text("write a note")
    bob_form.locator('input[name="note"]').fill("Not a haiku: one line, no 5-7-5.")
    with page.expect_navigation():
        bob_form.get_by_role("button", name="Reject").click()
    alice_card = page.locator("article.judgment", has_text="Maple leaves")
    with page.expect_navigation():
        alice_card.get_by_role("button", name="Accept").click()
    expect(page.locator("article.judgment", has_text="Maple leaves")).to_contain_text("accepted")
    expect(page.locator("article.judgment", has_text="Maple leaves")).to_contain_text("by rita")
    expect(page.locator("article.judgment", has_text="Autumn is a season")).to_contain_text(
        "rejected"
    )
    expect(page.locator("article.judgment", has_text="Autumn is a season")).to_contain_text(
        "Not a haiku"
    )
    shot(page, "41-review-demonstrations-decided")
    page.guard.assert_clean()

    stored = {j["rater"]: j for j in site.judgments("dem")}
    assert (
        stored["alice"]["body"]["status"] == "accepted"
        and stored["alice"]["body"]["reviewed_by"] == "rita"
    )
    assert stored["alice"]["body"]["reviewed_at"]
    assert stored["bob"]["body"]["review_note"] == "Not a haiku: one line, no 5-7-5."

    after = _export(site, tmp_path / "after")
    rows = _rows(tmp_path / "after")
    assert rows == [{"prompt": "Write a haiku about autumn.", "completion": TEXTS["alice"]}]
    assert after["gates"]["demonstration_status"]["reasons"] == {"rejected": 1}


def test_the_api_and_the_cli_review_demonstrations_too(site, new_page):
    with site.api() as c:
        pending = c.get("/api/v1/projects/dem/demonstrations/pending").json()
    # the browser test above decided both; a decided demonstration cannot be decided again
    assert pending == []
    *older, alice = [j for j in site.judgments("dem") if j["rater"] == "alice"]
    assert alice["supersedes"] == older[-1]["judgment_id"], (
        "the decision is a revision; the original row stays"
    )
    with site.api() as c:
        again = c.post(
            f"/api/v1/projects/dem/demonstrations/{older[-1]['judgment_id']}/review",
            json={"decision": "rejected", "note": "changed my mind"},
        )
        assert again.status_code == 409 and "already reviewed" in again.json()["detail"]
        bad = c.post(
            f"/api/v1/projects/dem/demonstrations/{alice['judgment_id']}/review",
            json={"decision": "rejected", "note": " "},
        )
        assert bad.status_code == 422 and "needs a note" in bad.json()["detail"]
        flipped = c.post(
            f"/api/v1/projects/dem/demonstrations/{alice['judgment_id']}/review",
            json={"decision": "rejected", "note": "a second look: the last line is 6 syllables"},
        )
        assert flipped.status_code == 201 and flipped.json()["reviewed_by"] == "root"

    no_note = _cli(
        site,
        "demonstrations",
        "reject",
        "dem",
        str(flipped.json()["judgment_id"]),
        "--reviewer",
        "ops",
    )
    assert no_note.returncode == 2 and "Missing option '--note'" in no_note.stderr
    ok = _cli(
        site,
        "demonstrations",
        "accept",
        "dem",
        str(flipped.json()["judgment_id"]),
        "--reviewer",
        "ops",
        "--note",
        "6 syllables is fine for this set",
    )
    assert ok.returncode == 0, ok.stderr
    assert "accepted by ops" in ok.stdout
    latest = [j for j in site.judgments("dem") if j["rater"] == "alice"][-1]
    assert (latest["body"]["status"], latest["body"]["reviewed_by"]) == ("accepted", "ops")
    missing = _cli(site, "demonstrations", "accept", "dem", "999999", "--reviewer", "ops")
    assert missing.returncode == 2 and "no demonstration 999999" in missing.stderr
