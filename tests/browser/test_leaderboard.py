"""The admin's leaderboard of a blind evaluation: ratings with intervals, pairs, domains; raters
are kept out (it names the models)."""

from __future__ import annotations

import json
import random

import pytest
from playwright.sync_api import expect
from webui_helpers import build_site, login, shot

MODELS = ["small-v1", "<i>mid-v2</i>", "large-v3"]  # one name that would be markup if not escaped


def human_eval_rows(n: int = 90, seed: int = 0) -> list[dict]:
    """Verdicts where a later model usually wins; a tie now and then; two domains."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        lo, hi = sorted(rng.sample(range(3), 2))
        first, second = (lo, hi) if rng.random() < 0.5 else (hi, lo)
        u = rng.random()
        better = hi if u < 0.65 else lo if u < 0.85 else None
        prefers = "tie" if better is None else "answer_1" if better == first else "answer_2"
        rows.append(
            {
                "prompt": f"Prompt {i}",
                "answer_1": f"answer {i} by #{first}",
                "answer_2": f"answer {i} by #{second}",
                "human_prefers": prefers,
                "model_1": MODELS[first],
                "model_2": MODELS[second],
                "labeler": f"rater-{i % 4}",
                "domains": ["code" if i % 3 else "math"],
            }
        )
    return rows


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("leaderboard-site")
    s = build_site(
        tmp,
        {"root": True, "alice": False},
        [
            {
                "name": "blind",
                "title": "v1 vs v2 vs v3",
                "kinds": ["pairwise"],
                "members": {"alice": "rater"},
            },
            {"name": "fresh", "title": "Not labelled yet", "kinds": ["pairwise"]},
        ],
    )
    body = "".join(json.dumps(r) + "\n" for r in human_eval_rows()).encode()
    with s.api() as api:
        r = api.post(
            "/api/v1/projects/blind/items/file",
            params={"filename": "human_eval.jsonl"},
            content=body,
        )
        assert r.status_code == 200, r.text
    yield s
    s.server.stop()


def test_admin_sees_ratings_with_intervals_pairs_and_domains(site, new_page):
    page = new_page(site)
    login(page, "root", next_path="/admin/p/blind/leaderboard")
    board = page.locator("table.leaderboard tbody tr")
    expect(board).to_have_count(3)
    names = [board.nth(i).locator("td").nth(1).inner_text() for i in range(3)]
    assert names == ["large-v3", "<i>mid-v2</i>", "small-v1"]  # escaped: shown as typed, best first
    for i in range(3):
        rating, ci = (
            board.nth(i).locator("td").nth(2).inner_text(),
            board.nth(i).locator("td").nth(3).inner_text(),
        )
        low, high = (float(x) for x in ci.split(" – "))
        assert low < float(rating) < high
    expect(page.locator("svg.leaderboard-plot line")).to_have_count(3)  # an interval bar per model
    expect(page.locator("#pairs tbody tr")).to_have_count(3)
    expect(page.locator("#domains h3")).to_have_count(2)
    expect(page.locator("#leaderboard")).to_contain_text("90 battles")
    page.guard.assert_clean()  # no script errors, nothing fetched from another host
    shot(page, "70-leaderboard")
    page.set_viewport_size({"width": 390, "height": 900})
    shot(page, "70-leaderboard-390")


def test_a_project_without_verdicts_says_so(site, new_page):
    page = new_page(site)
    login(page, "root", next_path="/admin/p/fresh/leaderboard")
    expect(page.locator("#no-verdicts")).to_contain_text("No verdicts on model pairs yet")
    page.guard.assert_clean()


def test_raters_cannot_open_it(site, new_page):
    page = new_page(site)
    login(page, "alice", next_path="/p/blind")
    response = page.goto("/admin/p/blind/leaderboard")
    assert response.status == 403
    assert "large-v3" not in page.content()
