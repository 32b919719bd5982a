"""The collection flow end to end through a real server: label, gold, qualification, review."""

from __future__ import annotations

import time

from .conftest import pairwise_item, seed


def answer(task: dict, winner: str = "a", strength: int = 2, **extra) -> dict:
    return {
        "assignment_id": task["assignment_id"],
        "judgment": {
            "kind": "pairwise",
            "winner": winner,
            "strength": strength if winner != "tie" else 0,
            "rationale": "clearer and correct",
            **extra,
        },
    }


def test_rater_labels_items_and_retries_are_idempotent(db_url, start_server):
    seeded = seed(db_url, n_items=5, raters=1, policy={"overlap_share": 0.0})
    server = start_server(db_url)
    with server.client(seeded.tokens["rater000"]) as c:
        seen = set()
        for _ in range(5):
            r = c.post("/api/v1/projects/demo/assignments/next")
            assert r.status_code == 200, r.text
            task = r.json()["task"]
            assert task is not None
            assert "gold" not in task["item"] and "reference" not in task["item"]
            assert task["item"]["id"] not in seen
            seen.add(task["item"]["id"])
            # resuming returns the same lease
            again = c.post("/api/v1/projects/demo/assignments/next").json()
            assert again["task"]["assignment_id"] == task["assignment_id"] and again["resumed"]
            body = {**answer(task), "idempotency_key": f"k-{task['assignment_id']}"}
            first = c.post("/api/v1/projects/demo/judgments", json=body)
            assert first.status_code == 201, first.text
            retry = c.post("/api/v1/projects/demo/judgments", json=body)
            assert (
                retry.status_code == 200
                and retry.json()["judgment_id"] == first.json()["judgment_id"]
            )
            # same lease, no key, same answer: also a replay
            replay = c.post("/api/v1/projects/demo/judgments", json=answer(task))
            assert (
                replay.status_code == 200
                and replay.json()["judgment_id"] == first.json()["judgment_id"]
            )
            other = c.post("/api/v1/projects/demo/judgments", json=answer(task, winner="b"))
            assert other.status_code == 409
        done = c.post("/api/v1/projects/demo/assignments/next").json()
        assert done["task"] is None and done["reason"] == "no_items"
    with server.client(seeded.admin_token) as admin:
        js = admin.get("/api/v1/projects/demo/judgments").json()
        assert len(js) == 5
        assert all(j["rater"].startswith("hmac_sha256:") for j in js)  # blind by default


def test_qualification_feedback_then_production_gold_is_silent(db_url, start_server):
    items = [pairwise_item(i, gold=-1, qualification=True, prefix="q") for i in range(4)]
    items += [pairwise_item(i, gold=-1, prefix="g") for i in range(3)]
    items += [pairwise_item(i) for i in range(30)]
    policy = {
        "qualification": {"n_items": 4, "pass_bar": 0.5, "min_items": 3, "confidence": 0.6},
        "gold_rate": 0.5,
        "randomise_order": True,
    }
    seeded = seed(db_url, items=items, raters=1, policy=policy)
    server = start_server(db_url)
    with server.client(seeded.tokens["rater000"]) as c:
        statuses = []
        for _ in range(4):
            task = c.post("/api/v1/projects/demo/assignments/next").json()["task"]
            if task["phase"] != "qualification":
                break
            # answer "a is better" in the rater's shown order terms
            winner = "a" if task["shown_order"][0] == "a" else "b"
            out = c.post("/api/v1/projects/demo/judgments", json=answer(task, winner=winner)).json()
            assert out["gold"]["correct"] is True
            assert out["gold"]["expected"]["winner"] in ("a", "b") and out["gold"]["explanation"]
            statuses.append(out["qualification"]["status"])
        assert statuses[-1] == "qualified"
        keys_prod, gold_seen = set(), 0
        for _ in range(40):
            r = c.post("/api/v1/projects/demo/assignments/next").json()
            task = r["task"]
            if task is None:
                break
            assert task["phase"] == "production"
            assert set(task) == {
                "assignment_id",
                "project",
                "phase",
                "kinds",
                "rubric",
                "item",
                "shown_order",
                "expires_at",
                "settings_version",
            }
            assert set(task["item"]) == {"id", "prompt", "candidates", "domains"}
            gold_seen += task["item"]["id"].startswith("g-")
            out = c.post("/api/v1/projects/demo/judgments", json=answer(task)).json()
            assert "gold" not in out and "qualification" not in out
            keys_prod.add(task["item"]["id"])
        # gold comes only mixed into production (never once production has run out); with 30
        # production items at rate 0.5 all three gold items are met long before that
        assert len(keys_prod) == 33 and gold_seen == 3


def test_drift_suspends_and_excludes(db_url, start_server):
    # production enough for every round (gold comes only mixed into production): with 12 of
    # each, fewer than the 4 gold answers the rule needs came before production ran out in
    # ~2 % of runs; now ~1e-4
    items = [pairwise_item(i, gold=-1, prefix="g") for i in range(12)] + [
        pairwise_item(i) for i in range(40)
    ]
    policy = {
        "gold_rate": 0.5,
        "drift": {"window": 6, "min_items": 4, "bar": 0.7, "confidence": 0.8},
    }
    seeded = seed(db_url, items=items, raters=1, policy=policy)
    server = start_server(db_url)
    with server.client(seeded.tokens["rater000"]) as c:
        suspended = False
        for _ in range(24):
            r = c.post("/api/v1/projects/demo/assignments/next").json()
            if r["task"] is None:
                suspended = r["reason"] == "suspended"
                break
            task = r["task"]
            wrong = "b" if task["shown_order"][0] == "a" else "a"  # always contradict gold
            c.post("/api/v1/projects/demo/judgments", json=answer(task, winner=wrong))
        # production gold is scored after the response (judging.defer_gold_scoring, within ~1 s)
        deadline = time.monotonic() + 10
        while not suspended and time.monotonic() < deadline:
            suspended = c.get("/api/v1/projects/demo/my/status").json()["status"] == "suspended"
            time.sleep(0.1)
        assert suspended
        refused = c.post("/api/v1/projects/demo/assignments/next").json()
        assert refused["task"] is None and refused["reason"] == "suspended"
    with server.client(seeded.tokens["reviewer"]) as rv:
        raters = rv.get("/api/v1/projects/demo/raters").json()
        assert raters[0]["status"] == "suspended" and raters[0]["evidence"]["rule"]
        js = rv.get("/api/v1/projects/demo/judgments").json()
        assert js and all(j["excluded"] and "suspended" in j["exclusion_reason"] for j in js)


def test_send_back_and_revise(db_url, start_server):
    seeded = seed(db_url, n_items=2, raters=1)
    server = start_server(db_url)
    rater, reviewer = (
        server.client(seeded.tokens["rater000"]),
        server.client(seeded.tokens["reviewer"]),
    )
    task = rater.post("/api/v1/projects/demo/assignments/next").json()["task"]
    jid = rater.post("/api/v1/projects/demo/judgments", json=answer(task)).json()["judgment_id"]
    assert (
        rater.post(
            f"/api/v1/projects/demo/judgments/{jid}/revise",
            json={"judgment": answer(task)["judgment"]},
        ).status_code
        == 409
    )
    r = reviewer.post(
        f"/api/v1/projects/demo/judgments/{jid}/send-back", json={"note": "check the math"}
    )
    assert r.status_code == 201
    pending = rater.get("/api/v1/projects/demo/my/revisions").json()
    assert pending[0]["note"] == "check the math" and pending[0]["judgment_id"] == jid
    r = rater.post(
        f"/api/v1/projects/demo/judgments/{jid}/revise",
        json={"judgment": answer(task, winner="b")["judgment"], "idempotency_key": "rev-1"},
    )
    assert r.status_code == 201, r.text
    again = rater.post(
        f"/api/v1/projects/demo/judgments/{jid}/revise",
        json={"judgment": answer(task, winner="b")["judgment"], "idempotency_key": "rev-1"},
    )
    assert again.status_code == 200 and again.json()["judgment_id"] == r.json()["judgment_id"]
    js = reviewer.get("/api/v1/projects/demo/judgments").json()
    assert len(js) == 2 and js[1]["supersedes"] == jid
    assert rater.get("/api/v1/projects/demo/my/revisions").json() == []
    rater.close()
    reviewer.close()
