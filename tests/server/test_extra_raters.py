"""More raters where they disagree (``Policy.adaptive_overlap``), through the server on both
databases and both submit paths: the k-th label of a split item opens one more place, given to
a rater who never had the item, up to ``max_extra``; the adjudication queue waits for it; the
dashboard's figures count it. Off (the default), nothing changes."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text

from .conftest import pairwise_item, seed
from .test_holes import app_client, bearer, submit_body

P = "/api/v1/projects/demo"


def policy(max_extra: int, k: int = 2) -> dict:
    return {
        "overlap_share": 1.0,
        "overlap_k": k,
        "randomise_order": False,  # "a" is candidate a: the test decides the sides
        "adaptive_overlap": {"max_extra": max_extra},
    }


def pool(url: str) -> tuple:
    engine = create_engine(url)
    with engine.connect() as conn:
        row = conn.execute(text("SELECT target, filled, extra, extra_state FROM task_pool")).one()
    engine.dispose()
    return tuple(row)


def label(c, token: str, winner: str) -> bool:
    """One next + submit by this rater; False when they get no task."""
    h = bearer(token)
    task = c.post(f"{P}/assignments/next", headers=h).json()["task"]
    if task is None:
        return False
    strength = 0 if winner == "tie" else 2
    s = c.post(
        f"{P}/judgments", json=submit_body(task, winner=winner, strength=strength), headers=h
    )
    assert s.status_code == 201, s.text
    return True


def queued(c, token: str) -> list[str]:
    r = c.get(f"{P}/review/queues", headers=bearer(token))
    assert r.status_code == 200, r.text
    return [
        e["item_id"]
        for e in r.json()["adjudication"]
        if any(x.startswith("low agreement") for x in e["reasons"])
    ]


@pytest.mark.parametrize("lane", [True, False], ids=["fast lane", "ORM path"])
def test_a_split_item_gets_extra_raters_until_it_agrees(db_url, monkeypatch, lane) -> None:
    s = seed(db_url, items=[pairwise_item(0)], raters=6, policy=policy(max_extra=2))
    tok = [s.tokens[f"rater{i:03d}"] for i in range(6)]
    with app_client(db_url, lane=lane, monkeypatch=monkeypatch) as c:
        assert label(c, tok[0], "a")
        assert pool(db_url) == (2, 1, 0, None)  # not full: the rule waits for k
        assert label(c, tok[1], "b")  # k = 2 labels, split 1-1: one more place
        assert pool(db_url) == (3, 2, 1, "waiting")
        assert queued(c, s.admin_token) == []  # held from adjudication while it waits
        assert label(c, tok[2], "a")  # 2-1: still below a 0.75 majority: the last extra place
        assert pool(db_url) == (4, 3, 2, "waiting")
        assert queued(c, s.admin_token) == []
        assert label(c, tok[3], "a")  # 3-1: agrees; resolved by its extra labels
        assert pool(db_url) == (4, 4, 2, "agreed")
        assert not label(c, tok[4], "b")  # full: nobody else gets it
        # no longer waiting: the usual rule applies (3-1 is below its entropy bar, but the
        # signed strengths -2, 2, -2, -2 spread 1.73 > 1.5: a senior looks at it)
        assert queued(c, s.admin_token) == ["item-00000"]
        figures = c.get(f"{P}/extra-raters", headers=bearer(s.admin_token))
        assert figures.status_code == 200, figures.text
        f = figures.json()
        assert (f["items_extended"], f["extra_granted"], f["extra_spent"], f["extra_due"]) == (
            1,
            2,
            2,
            0,
        )
        assert (f["resolved_by_extra"], f["sent_to_adjudication"], f["budget_left"]) == (1, 0, 0)


@pytest.mark.parametrize("lane", [True, False], ids=["fast lane", "ORM path"])
def test_the_budget_spent_the_item_goes_to_adjudication(db_url, monkeypatch, lane) -> None:
    s = seed(db_url, items=[pairwise_item(0)], raters=5, policy=policy(max_extra=1))
    tok = [s.tokens[f"rater{i:03d}"] for i in range(5)]
    with app_client(db_url, lane=lane, monkeypatch=monkeypatch) as c:
        assert label(c, tok[0], "a") and label(c, tok[1], "b")
        assert pool(db_url) == (3, 2, 1, "waiting")
        assert queued(c, s.admin_token) == []
        assert label(c, tok[2], "tie")  # a, b, tie: split, and the budget is spent
        assert pool(db_url) == (3, 3, 1, "split")
        assert not label(c, tok[3], "a")  # never more than k + max_extra labels
        assert queued(c, s.admin_token) == ["item-00000"]  # now the usual rule: adjudication
        f = c.get(f"{P}/extra-raters", headers=bearer(s.admin_token)).json()
        assert (f["resolved_by_extra"], f["sent_to_adjudication"], f["extra_spent"]) == (0, 1, 1)
        page = c.get("/admin/p/demo/dashboard", headers=bearer(s.admin_token))
        assert page.status_code == 200, page.text
        card = page.text[page.text.index('id="extra-raters"') :]
        assert "Up to 1 extra rater per overlap item" in card
        assert (
            '<th scope="row">Sent to adjudication (budget spent, still split)</th><td>1</td>'
            in card
        )


def test_agreement_at_k_and_off_by_default(db_url, monkeypatch) -> None:
    s = seed(db_url, items=[pairwise_item(0)], raters=3, policy=policy(max_extra=1))
    tok = [s.tokens[f"rater{i:03d}"] for i in range(3)]
    with app_client(db_url, monkeypatch=monkeypatch) as c:
        assert label(c, tok[0], "b") and label(c, tok[1], "b")
        assert pool(db_url) == (2, 2, 0, "agreed")  # agrees at k: no extra rater
        assert not label(c, tok[2], "a")
        f = c.get(f"{P}/extra-raters", headers=bearer(s.admin_token)).json()
        assert (f["agreed_at_k"], f["items_extended"]) == (1, 0)


def test_off_the_overlap_is_exactly_k(sqlite_url, monkeypatch) -> None:
    off = {k: v for k, v in policy(0).items() if k != "adaptive_overlap"}
    s = seed(sqlite_url, items=[pairwise_item(0)], raters=3, policy=off)
    tok = [s.tokens[f"rater{i:03d}"] for i in range(3)]
    with app_client(sqlite_url, monkeypatch=monkeypatch) as c:
        assert label(c, tok[0], "a") and label(c, tok[1], "b")
        assert pool(sqlite_url) == (2, 2, 0, None)  # split, but nothing asks for more
        assert not label(c, tok[2], "a")
        assert queued(c, s.admin_token) == ["item-00000"]
        page = c.get("/admin/p/demo/dashboard", headers=bearer(s.admin_token))
        assert page.status_code == 200 and 'id="extra-raters"' not in page.text  # off: no card


def test_max_extra_is_checked_against_k(db_url, monkeypatch) -> None:
    s = seed(db_url, items=[pairwise_item(0)], raters=1, policy=policy(max_extra=1))
    with app_client(db_url, monkeypatch=monkeypatch) as c:
        r = c.patch(
            f"{P}/settings",
            json={"policy": {"adaptive_overlap": {"max_extra": 3}}},
            headers=bearer(s.admin_token),
        )
        assert r.status_code == 422, r.text
        assert "max_extra 3 is more than overlap_k 2" in r.text
