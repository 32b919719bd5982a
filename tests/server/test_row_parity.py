"""Row-level parity: the fast lane (SQLite or PostgreSQL executor) writes exactly the rows the
ORM path writes — assignments, judgments and the pool's counters — for the same scripted
sequence of requests. The ORM path (lane off) is the oracle.

Script: three raters, overlap items (k = 2) and single items, interleaved "next" and "submit"
requests, a resume, a release, and a replay; then the three tables are read back and compared
column by column (times, random ids, the random shown order and what is derived from them —
the content hash, the canonical pair and the score — are per-run values and left out).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from .conftest import seed, serve_by

# scripted runs on both executors and concurrent submits over two processes: `make test`
pytestmark = pytest.mark.slow

PER_RUN = (
    "created_at",
    "started_at",
    "submitted_at",
    "expires_at",
    "content_hash",
    "lease_id",
    "shown_order",
    "idempotency_key",
    "body",
    "pair_lo",
    "pair_hi",
    "score",
)
POLICY = {"overlap_share": 0.5, "overlap_k": 2, "randomise_order": True}
NEXT = "/api/v1/projects/demo/assignments/next"
SUBMIT = "/api/v1/projects/demo/judgments"


def _answer(kind: str, task: dict, i: int, note: str) -> dict:
    """Rater ``i``'s answer of ``kind`` to ``task`` (what each kind's rater would send)."""
    shown = task["shown_order"]
    if kind == "pairwise":
        return {"kind": "pairwise", "winner": "ab"[i % 2], "strength": 1 + i % 3, "rationale": note}
    if kind == "rubric":
        scores = {"helpfulness": 1 + i % 5, "accuracy": 1 + (i + 2) % 5}
        return {"kind": "rubric", "candidate_id": shown[0], "scores": scores, "rationale": note}
    if kind == "ranking":
        order = [[shown[1]], [shown[0]]] if i % 2 else [shown]  # a strict order, or a tie
        return {"kind": "ranking", "order": order, "rationale": note}
    return {"kind": "unary", "candidate_id": shown[0], "label": i % 2 == 0, "rationale": note}


def _script(
    c: TestClient, tokens: dict[str, str], kind: str, heads: dict[str, dict] | None = None
) -> list[tuple[int, str]]:
    """The requests, in order; returns (status, reason or kind) of each answer. ``heads``: each
    rater's credential headers (default: their bearer token)."""
    if heads is None:
        heads = {name: {"Authorization": f"Bearer {t}"} for name, t in sorted(tokens.items())}
    out: list[tuple[int, str]] = []
    held: dict[str, dict] = {}
    for round_ in range(4):
        for name, h in heads.items():  # everyone takes a task, then everyone answers it
            r = c.post(NEXT, headers=h)
            task = r.json().get("task")
            out.append((r.status_code, task["phase"] if task else r.json()["reason"]))
            if task:
                held[name] = task
        resumed = c.post(NEXT, headers=heads["rater000"])  # a live lease comes back
        out.append((resumed.status_code, str(resumed.json().get("resumed"))))
        for i, (name, h) in enumerate(heads.items()):
            task = held.pop(name, None)
            if task is None:
                continue
            if round_ == 1 and i == 2:  # one release instead of an answer
                rel = c.post(
                    f"/api/v1/projects/demo/assignments/{task['assignment_id']}/release", headers=h
                )
                out.append((rel.status_code, "released"))
                continue
            body = {
                "assignment_id": task["assignment_id"],
                "idempotency_key": uuid.uuid4().hex,
                "judgment": _answer(kind, task, i, f"round {round_} rater {name}"),
                "telemetry": {"active_ms": 1000 + i, "typed_chars": 20},
            }
            r = c.post(SUBMIT, json=body, headers=h)
            out.append((r.status_code, r.json().get("kind", "")))
            if round_ == 0 and i == 0:  # a retry with the same key: the first result, nothing new
                again = c.post(SUBMIT, json=body, headers=h)
                out.append((again.status_code, str(again.json().get("replayed"))))
    return out


def _tables(url: str) -> dict[str, list[dict]]:
    engine = create_engine(url)
    queries = {
        "assignments": "SELECT * FROM assignments ORDER BY pk",
        "judgments": "SELECT * FROM judgments ORDER BY pk",
        "task_pool": "SELECT pk, item_pk, role, filled, target FROM task_pool ORDER BY pk",
        "rater_status": "SELECT project_pk, user_pk, status FROM rater_status ORDER BY pk",
    }
    with engine.connect() as conn:
        out = {
            name: [
                {k: v for k, v in dict(r._mapping).items() if k not in PER_RUN}
                for r in conn.execute(text(sql))
            ]
            for name, sql in queries.items()
        }
    engine.dispose()
    return out


def _browser_sessions(url: str, names: list[str]) -> dict[str, dict]:
    """A logged-in browser per rater: the session cookie and the CSRF header its page sends."""
    from datetime import timedelta

    from preflab.server.auth import create_web_session
    from preflab.store import transaction
    from preflab.store.db import open_db
    from preflab.store.server_models import User

    engine = open_db(url)
    heads = {}
    with transaction(engine) as s:
        for name in sorted(names):
            user = s.query(User).filter_by(username=name).one()
            cookie, row = create_web_session(s, user, ttl=timedelta(hours=1), ip=None)
            heads[name] = {"Cookie": f"preflab_session={cookie}", "X-CSRF-Token": row.csrf_token}
    engine.dispose()
    return heads


def _run(
    url: str,
    lane: bool,
    monkeypatch: pytest.MonkeyPatch,
    kind: str = "pairwise",
    browser: bool = False,
) -> tuple[list, dict, dict]:
    from preflab.server import fastlane
    from preflab.server.app import create_app

    serve_by(monkeypatch, "lane" if lane else "oracle")
    fastlane.STATS.clear()
    items = None
    if kind in ("unary", "rubric"):  # thumbs and grades: one answer an item
        items = [
            {
                "id": f"item-{i:05d}",
                "prompt": f"Question {i}?",
                "candidates": [{"id": "m", "text": f"A{i}"}],
            }
            for i in range(8)
        ]
    s = seed(url, raters=3, n_items=8, extra_roles=False, policy=POLICY, kinds=[kind], items=items)
    app = create_app(url)
    with TestClient(app) as c:
        if kind == "rubric":  # its current version is what both paths check the scores against
            rubric = {
                "id": "helpful",
                "version": 1,
                "dimensions": [
                    {"name": "helpfulness", "scale": "ordinal", "points": 5},
                    {"name": "accuracy", "scale": "ordinal", "points": 5},
                ],
            }
            put = c.post(
                "/api/v1/projects/demo/rubrics",
                json=rubric,
                headers={"Authorization": f"Bearer {s.admin_token}"},
            )
            assert put.status_code in (200, 201), put.text
        heads = _browser_sessions(url, list(s.tokens)) if browser else None
        answers = _script(c, s.tokens, kind, heads)
    app.state.db.dispose()
    return answers, _tables(url), dict(fastlane.STATS)


@pytest.fixture
def two_urls(request: pytest.FixtureRequest, tmp_path) -> Iterator[tuple[str, str]]:
    """Two fresh databases of one backend: the lane's and the oracle's."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'lane.db'}", f"sqlite:///{tmp_path / 'oracle.db'}"
        return
    lane_url = request.getfixturevalue("pg_url")
    engine = create_engine(lane_url.rsplit("/", 1)[0] + "/postgres", isolation_level="AUTOCOMMIT")
    name = f"preflab_oracle_{uuid.uuid4().hex[:12]}"
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield lane_url, lane_url.rsplit("/", 1)[0] + "/" + name
    finally:
        with engine.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        engine.dispose()


@pytest.mark.parametrize("kind", ["pairwise", "ranking", "unary", "rubric"])
@pytest.mark.parametrize("two_urls", ["sqlite", "postgres"], indirect=True)
def test_lane_and_orm_oracle_write_identical_rows(two_urls, kind, monkeypatch) -> None:
    """Every kind is the lane's common case (pairwise through its cheap equal of the shared
    validation, the others through that validation itself, ``build_judgment``; rubric scores
    against the project's current rubric version, read once per process)."""
    lane_url, oracle_url = two_urls
    lane_answers, lane_rows, lane_stats = _run(lane_url, True, monkeypatch, kind)
    oracle_answers, oracle_rows, oracle_stats = _run(oracle_url, False, monkeypatch, kind)
    # the lane served the script itself, the answers of every kind included (21 of 28 requests:
    # first contacts, first labels and the replay go to the ORM path), the oracle nothing
    assert lane_stats.get("served", 0) >= 20 and not oracle_stats.get("served"), lane_stats
    assert "pass:judgment shape" not in lane_stats
    assert lane_answers == oracle_answers
    assert (201, kind) in lane_answers and (200, "True") in lane_answers
    for table in ("assignments", "judgments", "task_pool", "rater_status"):
        assert lane_rows[table] == oracle_rows[table], table
    filled = [r["filled"] for r in lane_rows["task_pool"]]
    assert sum(filled) == sum(1 for a in lane_rows["assignments"] if a["status"] == "submitted")


@pytest.mark.parametrize("two_urls", ["sqlite", "postgres"], indirect=True)
def test_lane_serves_browser_sessions_like_the_oracle(two_urls, monkeypatch) -> None:
    """The web page's raters (session cookie + CSRF header) are the lane's common case too,
    authenticated by the guard's conditions and CSRF rule; same rows as the ORM oracle."""
    lane_url, oracle_url = two_urls
    lane_answers, lane_rows, lane_stats = _run(lane_url, True, monkeypatch, browser=True)
    oracle_answers, oracle_rows, oracle_stats = _run(oracle_url, False, monkeypatch, browser=True)
    assert lane_stats.get("served", 0) >= 20 and not oracle_stats.get("served"), lane_stats
    assert lane_answers == oracle_answers
    for table in ("assignments", "judgments", "task_pool", "rater_status"):
        assert lane_rows[table] == oracle_rows[table], table


@pytest.mark.parametrize("csrf", [None, "not-the-token"], ids=["missing", "wrong"])
def test_a_session_without_its_csrf_token_is_refused_and_nothing_written(
    db_url, csrf, monkeypatch
) -> None:
    """A cross-site page can make the browser send the cookie but not the CSRF token: the lane
    hands such a request on and the guard answers 403; no lease, no label."""
    from preflab.server import fastlane
    from preflab.server.app import create_app

    monkeypatch.setattr(fastlane, "ENABLED", True)
    seed(db_url, raters=1, n_items=3, extra_roles=False)
    good = _browser_sessions(db_url, ["rater000"])["rater000"]
    bad = {"Cookie": good["Cookie"], **({"X-CSRF-Token": csrf} if csrf else {})}
    app = create_app(db_url)
    fastlane.STATS.clear()
    with TestClient(app) as c:
        task = c.post(NEXT, headers=good).json()["task"]  # the first contact (framework)
        answer = {"kind": "pairwise", "winner": "a", "strength": 1}
        body = {"assignment_id": task["assignment_id"], "judgment": answer}
        assert c.post(SUBMIT, json=body, headers=good).status_code == 201
        before = _tables(db_url)
        refused = [c.post(NEXT, headers=bad), c.post(SUBMIT, json=body, headers=bad)]
        assert [r.status_code for r in refused] == [403, 403], [r.text for r in refused]
        assert "CSRF" in refused[0].json()["detail"]
        assert _tables(db_url) == before
        assert fastlane.STATS.get("pass:csrf") == 2  # the lane saw them and handed them on
        assert c.post(NEXT, headers=good).status_code == 200  # the right token: served
    app.state.db.dispose()


def test_lane_refuses_a_kind_the_project_does_not_declare(tmp_path, monkeypatch) -> None:
    """A pairwise answer in a project that collects rankings only: 422 naming the kinds, and
    nothing written — the lane hands it on (flow.submit.kind_refusal) and the ORM path says why."""
    from preflab.server import fastlane
    from preflab.server.app import create_app

    url = f"sqlite:///{tmp_path / 'kinds.db'}"
    s = seed(url, raters=1, n_items=2, extra_roles=False, kinds=["ranking"])
    monkeypatch.setattr(fastlane, "ENABLED", True)
    fastlane.STATS.clear()
    h = {"Authorization": f"Bearer {s.tokens['rater000']}"}
    with TestClient(create_app(url)) as c:
        for _ in range(2):  # the second answer is the lane's common case, but for its kind
            task = c.post(NEXT, headers=h).json()["task"]
            body = {"assignment_id": task["assignment_id"], "idempotency_key": uuid.uuid4().hex}
            ranked = {"kind": "ranking", "order": [[c] for c in task["shown_order"]]}
            pair = {"kind": "pairwise", "winner": "a", "strength": 1}
            refused = c.post(SUBMIT, json={**body, "judgment": pair}, headers=h)
            assert refused.status_code == 422, refused.text
            assert "collects ['ranking']" in refused.json()["detail"]
            assert c.post(SUBMIT, json={**body, "judgment": ranked}, headers=h).status_code == 201
        c.app.state.db.dispose()
    assert _tables(url)["judgments"] and all(
        j["kind"] == "ranking" for j in _tables(url)["judgments"]
    )


def test_concurrent_submits_of_one_lease_store_one_judgment(db_url, start_server) -> None:
    """Twelve submits of one lease at once, each with its own key and answer, on two server
    processes: exactly one is stored (201) and counted once on the pool row; the others get
    the framework's refusal (409: already submitted with another answer). On PostgreSQL the
    lane's read takes no lock; its one guarded write re-checks the lease under the locks."""
    import threading

    s = seed(db_url, raters=1, n_items=3, extra_roles=False)
    hosts = [start_server(db_url, workers=1), start_server(db_url, workers=1)]
    token = s.tokens["rater000"]
    with hosts[0].client(token) as c:  # a first label (the rater row), then the raced task
        first = c.post(NEXT).json()["task"]
        answer = {"kind": "pairwise", "winner": "a", "strength": 1}
        c.post(SUBMIT, json={"assignment_id": first["assignment_id"], "judgment": answer})
        task = c.post(NEXT).json()["task"]
    codes: list[int] = []
    start = threading.Barrier(12)

    def submit(i: int) -> None:
        body = {
            "assignment_id": task["assignment_id"],
            "idempotency_key": f"race-{i}",
            "judgment": {
                "kind": "pairwise",
                "winner": "ab"[i % 2],
                "strength": 1 + i % 3,
                "rationale": f"answer {i}",  # every body differs: no replay among them
            },
        }
        with hosts[i % 2].client(token) as c:
            start.wait()
            codes.append(c.post(SUBMIT, json=body).status_code)

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(codes).count(201) == 1 and set(codes) <= {201, 409}, codes
    rows = _tables(db_url)
    assert len(rows["judgments"]) == 2
    assert sum(r["filled"] for r in rows["task_pool"]) == 2


@pytest.mark.parametrize(
    "meanwhile",
    [
        "UPDATE rater_status SET status = 'suspended', reason = 'drift'",
        "UPDATE assignments SET status = 'released' WHERE status = 'active'",
        "UPDATE assignments SET expires_at = now() - interval '1 second' WHERE status = 'active'",
    ],
    ids=["suspended", "released", "expired"],
)
def test_pg_guarded_write_stores_nothing_when_the_lease_changed_after_the_read(
    pg_url, monkeypatch, meanwhile: str
) -> None:
    """PostgreSQL: the submit's read takes no lock; a change committed between the read and the
    write (here: inside the decision step) makes the one guarded write store nothing."""
    import hashlib

    from preflab.server.exec.postgres import PgExecutor
    from preflab.server.flow import NotCommon
    from preflab.server.flow import lane as flow_lane
    from preflab.store.models import utcnow

    s = seed(pg_url, raters=1, n_items=3, extra_roles=False)
    token = s.tokens["rater000"]
    h = {"Authorization": f"Bearer {token}"}
    from preflab.server.app import create_app

    app = create_app(pg_url)
    with TestClient(app) as c:  # a first label (the rater row), then the task to race
        first = c.post(NEXT, headers=h).json()["task"]
        answer = {"kind": "pairwise", "winner": "a", "strength": 1}
        c.post(
            SUBMIT, json={"assignment_id": first["assignment_id"], "judgment": answer}, headers=h
        )
        task = c.post(NEXT, headers=h).json()["task"]
    app.state.db.dispose()
    engine = create_engine(pg_url)
    decide = flow_lane.pairwise_values

    def change_then_decide(*args, **kwargs):
        with engine.begin() as conn:  # another request, committed between read and write
            conn.execute(text(meanwhile))
        return decide(*args, **kwargs)

    monkeypatch.setattr(flow_lane, "pairwise_values", change_then_decide)
    ex = PgExecutor(engine.url)
    flow = flow_lane.run_submit(
        flow_lane.Lane(ex, utcnow()),
        flow_lane.Credential("token", hashlib.sha256(token.encode()).hexdigest()),
        "demo",
        assignment_id=task["assignment_id"],
        judgment={"kind": "pairwise", "winner": "b", "strength": 2},
        idempotency_key="k-race",
        telemetry=None,
    )
    with pytest.raises(NotCommon, match="changed since read"):
        asyncio.run(ex.run(flow))
    ex.close()
    engine.dispose()
    rows = _tables(pg_url)
    assert len(rows["judgments"]) == 1  # only the first label
    assert sum(r["filled"] for r in rows["task_pool"]) == 1


@pytest.mark.parametrize("lane", [True, False], ids=["lane", "framework"])
def test_an_item_that_declares_its_kinds_refuses_the_others(db_url, lane, monkeypatch) -> None:
    """A project collecting pairwise and demonstrations; each item says which it takes
    (``metadata.kinds``). The task offers only those, and a submit of another kind is a 422
    naming the item's kinds on either path (the lane reads the item's kinds with the lease and
    hands a mismatch on); nothing is written for it."""
    from preflab.server import fastlane
    from preflab.server.app import create_app

    from .conftest import pairwise_item

    # a prefix of their own: the lane caches item views by (pk, content hash) per process
    items = [pairwise_item(0, prefix="kinds"), pairwise_item(1, prefix="kinds")]
    items[0]["metadata"] = {"kinds": ["demonstration"]}
    items[1]["metadata"] = {"kinds": ["pairwise"]}
    s = seed(db_url, raters=1, items=items, extra_roles=False, kinds=["pairwise", "demonstration"])
    monkeypatch.setattr(fastlane, "ENABLED", lane)
    h = {"Authorization": f"Bearer {s.tokens['rater000']}"}
    pair = {"kind": "pairwise", "winner": "a", "strength": 1, "rationale": "A is right."}
    demo = {"kind": "demonstration", "text": "A better answer, written out.", "rationale": "x"}
    stored = []
    with TestClient(create_app(db_url)) as c:
        for _ in range(2):
            task = c.post(NEXT, headers=h).json()["task"]
            takes = task["kinds"]
            wrong, right = (demo, pair) if takes == ["pairwise"] else (pair, demo)
            body = {"assignment_id": task["assignment_id"], "idempotency_key": uuid.uuid4().hex}
            refused = c.post(SUBMIT, json={**body, "judgment": wrong}, headers=h)
            assert refused.status_code == 422, refused.text
            assert f"this item takes {takes}" in refused.json()["detail"]
            ok = c.post(SUBMIT, json={**body, "judgment": right}, headers=h)
            assert ok.status_code == 201, ok.text
            stored.append((task["item"]["id"], right["kind"]))
        c.app.state.db.dispose()
    assert sorted(stored) == [("kinds-00000", "demonstration"), ("kinds-00001", "pairwise")]
    assert sorted((j["kind"]) for j in _tables(db_url)["judgments"]) == [
        "demonstration",
        "pairwise",
    ]


@pytest.mark.parametrize("lane", [True, False], ids=["lane", "framework"])
def test_rubric_scores_are_checked_against_the_current_version_not_the_newest(
    db_url, lane, monkeypatch
) -> None:
    """A rubric version stored without becoming current (an import brings one) does not change
    what raters are graded against: both paths check the scores against the project's current
    version, the one the judgment's provenance records. Before, the ORM path read the newest
    version of the key (here: a 422 for a dimension v2 dropped) while recording v1."""
    from preflab.schema import Rubric
    from preflab.server import fastlane
    from preflab.server.app import create_app
    from preflab.store import repo, transaction
    from preflab.store.db import open_db
    from preflab.store.models import Project

    monkeypatch.setattr(fastlane, "ENABLED", lane)
    items = [
        {"id": f"item-{i}", "prompt": f"Q{i}?", "candidates": [{"id": "m", "text": f"A{i}"}]}
        for i in range(3)
    ]
    s = seed(db_url, raters=1, n_items=3, extra_roles=False, kinds=["rubric"], items=items)
    v1 = {
        "id": "helpful",
        "version": 1,
        "dimensions": [{"name": "helpfulness", "scale": "ordinal", "points": 5}],
    }
    v2 = {
        "id": "helpful",
        "version": 2,
        "dimensions": [{"name": "accuracy", "scale": "ordinal", "points": 5}],
    }
    h = {"Authorization": f"Bearer {s.tokens['rater000']}"}
    app = create_app(db_url)
    with TestClient(app) as c:
        admin = {"Authorization": f"Bearer {s.admin_token}"}
        assert c.post("/api/v1/projects/demo/rubrics", json=v1, headers=admin).status_code < 300
        engine = open_db(db_url)
        with transaction(engine) as session:  # v2 stored, v1 stays current
            project = session.query(Project).filter_by(name="demo").one()
            repo.add_rubric(session, project, Rubric.model_validate(v2), make_current=False)
        engine.dispose()
        shown = c.get("/api/v1/projects/demo/rubric", headers=h).json()  # what the page shows
        assert [d["name"] for d in shown["dimensions"]] == ["helpfulness"]
        for _ in range(2):  # the second is the lane's common case (the first makes the rater)
            task = c.post(NEXT, headers=h).json()["task"]
            answer = {"kind": "rubric", "candidate_id": "m", "scores": {"helpfulness": 4}}
            r = c.post(
                SUBMIT, json={"assignment_id": task["assignment_id"], "judgment": answer}, headers=h
            )
            assert r.status_code == 201, r.text
    app.state.db.dispose()
    rows = _tables(db_url)["judgments"]
    assert [(j["rubric_key"], j["rubric_version"]) for j in rows] == [("helpful", 1)] * 2
