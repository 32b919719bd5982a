"""Blindness through the real server: raters label an evaluation project over the REST API and the
pages, and no response they get ever names a model; the report then counts their verdicts."""

from __future__ import annotations

from pathlib import Path

from preflab.evaluate.create import create_evaluation
from preflab.evaluate.outputs import read_all_outputs
from preflab.evaluate.report import build_report, load_verdicts
from preflab.store import make_engine

from .conftest import V1, seed

SECRET = "acme-secret"  # in both model names, in no answer text


def _make_evaluation(db_url: str, two_models: tuple[Path, Path]) -> None:
    from preflab.server.auth import get_user, set_membership
    from preflab.server.database import Database
    from preflab.store import repo

    engine = make_engine(db_url)
    create_evaluation(
        engine,
        "blind",
        read_all_outputs([(None, p) for p in two_models]),
        seed=0,
        raters_per_item=2,
    )
    engine.dispose()
    db = Database(db_url, pool_size=2, max_overflow=2)
    with db.writing() as s:
        project = repo.get_project(s, "blind")
        for name in ("rater000", "rater001"):
            set_membership(s, project, get_user(s, name), "rater")
        set_membership(s, project, get_user(s, "reviewer"), "reviewer")
    db.dispose()


def _prefer_better(task: dict) -> dict:
    """A rater who prefers the answer marked BETTER (v2's, except on one prompt where v2 = v1)."""
    texts = [c["text"] for c in task["item"]["candidates"]]
    winner = "a" if texts[0].startswith("BETTER") else "b"
    return {
        "assignment_id": task["assignment_id"],
        "judgment": {
            "kind": "pairwise",
            "winner": winner,
            "strength": 2,
            "rationale": "more complete",
        },
    }


def test_raters_never_see_model_names_and_the_report_counts_their_verdicts(
    db_url, start_server, two_models
):
    seeded = seed(db_url, items=[], raters=2)
    _make_evaluation(db_url, two_models)
    server = start_server(db_url)
    seen: list[str] = []  # every body a rater received
    judgment_ids = []
    for name in ("rater000", "rater001"):
        with server.client(seeded.tokens[name]) as c:
            seen.append(c.get("/p/blind/label", headers={"Accept": "text/html"}).text)
            while True:
                r = c.post("/api/v1/projects/blind/assignments/next")
                assert r.status_code == 200, r.text
                seen.append(r.text)
                task = r.json()["task"]
                if task is None:
                    assert r.json()["reason"] == "no_items", r.text
                    break
                seen.append(c.get("/p/blind/label", headers={"Accept": "text/html"}).text)
                done = c.post("/api/v1/projects/blind/judgments", json=_prefer_better(task))
                assert done.status_code == 201, done.text
                seen.append(done.text)
                judgment_ids.append((name, done.json()["judgment_id"]))
            for path in (
                "/api/v1/projects",
                "/api/v1/projects/blind",
                "/api/v1/projects/blind/my/status",
                "/api/v1/projects/blind/my/judgments",
                "/p/blind",
                "/",
            ):
                seen.append(c.get(path, headers={"Accept": "text/html"}).text)
    # a reviewer sends one verdict back: the revision view is a rater's view too
    name, jid = judgment_ids[0]
    with server.client(seeded.tokens["reviewer"]) as reviewer:
        assert (
            reviewer.post(
                f"/api/v1/projects/blind/judgments/{jid}/send-back", json={"note": "look again"}
            ).status_code
            == 201
        )
    with server.client(seeded.tokens[name]) as c:
        revisions = c.get("/api/v1/projects/blind/my/revisions")
        assert revisions.status_code == 200 and len(revisions.json()) == 1
        seen.append(revisions.text)
        seen.append(c.get(f"/p/blind/revise/{jid}", headers={"Accept": "text/html"}).text)

    assert len(judgment_ids) == 22  # 11 items x 2 raters each
    assert sum("BETTER" in body for body in seen) >= 22  # the answers did reach the raters ...
    leaks = [body[:200] for body in seen if SECRET in body]
    assert leaks == []  # ... and never which model wrote them

    engine = make_engine(db_url)
    report = build_report(load_verdicts(engine, "blind"), rounds=100)
    engine.dispose()
    assert report["battles"] == 22 and report["items"] == 11 and report["raters"] == 2
    (pair,) = report["pairs"]
    assert (pair["model_1"], pair["wins"]["count"], pair["losses"]["count"]) == (V1, 0, 22)
    assert report["ratings"]["identifiable"] is False  # v2 won every battle: no finite rating
