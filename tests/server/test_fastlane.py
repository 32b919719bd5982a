"""The fast lane (preflab.server.fastlane): same answers, same rows, same refusals as the
framework path; revocation and membership changes count from the very next request."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, text

from .conftest import pairwise_item, seed, serve_by

RATIONALE = "B is right"


def _cycle(c: TestClient, h: dict, **judgment) -> tuple[dict, dict]:
    task = c.post("/api/v1/projects/demo/assignments/next", headers=h)
    assert task.status_code == 200, task.text
    t = task.json()["task"]
    body = {
        "assignment_id": t["assignment_id"],
        "idempotency_key": uuid.uuid4().hex,
        "judgment": {
            "kind": "pairwise",
            "winner": "b",
            "strength": 2,
            "rationale": RATIONALE,
            **judgment,
        },
        "telemetry": {"active_ms": 1200, "typed_chars": 10, "iki_cv": 0.5},
    }
    r = c.post("/api/v1/projects/demo/judgments", json=body, headers=h)
    assert r.status_code == 201, r.text
    return t, r.json()


def _rows(url: str) -> list[dict]:
    engine = create_engine(url)
    with engine.connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(text("SELECT * FROM judgments ORDER BY pk"))]
        leases = [
            dict(r._mapping) for r in conn.execute(text("SELECT * FROM assignments ORDER BY pk"))
        ]
    engine.dispose()
    return rows, leases


def _run(url: str, lane: bool, monkeypatch) -> tuple[list, list, dict]:
    from preflab.server import fastlane
    from preflab.server.app import create_app

    serve_by(monkeypatch, "lane" if lane else "oracle")
    fastlane.STATS.clear()
    s = seed(url, raters=1, n_items=6, extra_roles=False)
    app = create_app(url)
    h = {"Authorization": f"Bearer {s.tokens['rater000']}"}
    with TestClient(app) as c:
        for _ in range(4):
            _cycle(c, h)
        again = c.post("/api/v1/projects/demo/assignments/next", headers=h)
        resumed = c.post("/api/v1/projects/demo/assignments/next", headers=h)
        assert resumed.json()["resumed"] is True
        assert resumed.json()["task"]["assignment_id"] == again.json()["task"]["assignment_id"]
    stats = dict(fastlane.STATS)
    app.state.db.dispose()
    return (*_rows(url), stats, resumed)


def _comparable(rows: list[dict], drop: tuple[str, ...]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in drop} for r in rows]


def test_lane_writes_the_rows_the_oracle_writes(tmp_path, monkeypatch):
    fast_j, fast_a, stats, fast_resumed = _run(
        f"sqlite:///{tmp_path / 'fast.db'}", True, monkeypatch
    )
    slow_j, slow_a, slow_stats, slow_resumed = _run(
        f"sqlite:///{tmp_path / 'slow.db'}", False, monkeypatch
    )
    assert stats.get("served", 0) >= 6 and not slow_stats.get("served")
    assert len(fast_j) == len(slow_j) == 4
    # times, lease ids, hashes (they cover the times) and the random shown order differ per run
    drop = (
        "created_at",
        "started_at",
        "submitted_at",
        "content_hash",
        "lease_id",
        "expires_at",
        "shown_order",
        "idempotency_key",
        "body",
        "pair_lo",
        "pair_hi",
        "score",
    )
    assert _comparable(fast_j, drop) == _comparable(slow_j, drop)
    assert _comparable(fast_a, drop) == _comparable(slow_a, drop)
    for row in fast_j + fast_a:  # stored formats as SQLAlchemy writes them
        for col in ("created_at", "started_at", "submitted_at", "expires_at"):
            if col in row and row[col] is not None:
                assert isinstance(row[col], str) and len(row[col]) == 26 and row[col][10] == " "
    assert set(fast_resumed.headers) == set(slow_resumed.headers)
    assert (
        fast_resumed.headers["content-type"]
        == slow_resumed.headers["content-type"]
        == "application/json"
    )
    assert (
        fast_resumed.headers["content-security-policy"]
        == slow_resumed.headers["content-security-policy"]
    )
    assert list(fast_resumed.json()) == list(slow_resumed.json())
    assert list(fast_resumed.json()["task"]) == list(slow_resumed.json()["task"])


@pytest.mark.parametrize("via", ["next", "submit"])
def test_revoked_token_and_removed_membership_are_refused_on_the_next_request(tmp_path, via):
    from preflab.server import fastlane
    from preflab.server.app import create_app

    url = f"sqlite:///{tmp_path / 'revoke.db'}"
    s = seed(url, raters=2, n_items=10, extra_roles=True)
    app = create_app(url)
    with TestClient(app) as c:
        h = {"Authorization": f"Bearer {s.tokens['rater000']}"}
        admin = {"Authorization": f"Bearer {s.tokens['padmin']}"}
        _cycle(c, h)  # a new rater's first task and label take the reference path
        fastlane.STATS.clear()
        _cycle(c, h)
        assert (
            fastlane.STATS.get("served", 0) == 2
        )  # the lane answered (so the check below is the lane's)
        made = c.post("/api/v1/auth/tokens", json={"name": "tmp"}, headers=h).json()
        h2 = {"Authorization": f"Bearer {made['token']}"}
        t = c.post("/api/v1/projects/demo/assignments/next", headers=h2).json()["task"]
        assert c.delete(f"/api/v1/auth/tokens/{made['id']}", headers=h2).status_code == 200
        if via == "next":
            r = c.post("/api/v1/projects/demo/assignments/next", headers=h2)
        else:
            r = c.post(
                "/api/v1/projects/demo/judgments",
                headers=h2,
                json={
                    "assignment_id": t["assignment_id"],
                    "judgment": {"kind": "pairwise", "winner": "a", "strength": 1},
                },
            )
        assert r.status_code == 401 and "revoked" in r.json()["detail"]
        assert r.headers["www-authenticate"] == "Bearer"
        # membership removed: 404 on the very next request
        assert c.delete("/api/v1/projects/demo/members/rater000", headers=admin).status_code == 200
        r = c.post("/api/v1/projects/demo/assignments/next", headers=h)
        assert r.status_code == 404 and "not a member" in r.json()["detail"]
        # a reviewer may not label (403), through the lane's route as through the framework's
        r = c.post(
            "/api/v1/projects/demo/assignments/next",
            headers={"Authorization": f"Bearer {s.tokens['reviewer']}"},
        )
        assert r.status_code == 403
    app.state.db.dispose()


def test_lane_hands_odd_requests_to_the_framework(tmp_path):
    from preflab.server.app import create_app

    url = f"sqlite:///{tmp_path / 'odd.db'}"
    s = seed(url, raters=1, n_items=5, extra_roles=False, policy={"min_rationale_chars": 5})
    app = create_app(url)
    h = {"Authorization": f"Bearer {s.tokens['rater000']}"}
    with TestClient(app) as c:
        _cycle(c, h)
        t = c.post("/api/v1/projects/demo/assignments/next", headers=h).json()["task"]
        bad = c.post(
            "/api/v1/projects/demo/judgments",
            headers=h,
            json={
                "assignment_id": t["assignment_id"],
                "judgment": {"kind": "pairwise", "winner": "a", "strength": 0},
            },
        )
        assert bad.status_code == 422 and bad.json()["detail"] == "the judgment is not valid"
        short = c.post(
            "/api/v1/projects/demo/judgments",
            headers=h,
            json={
                "assignment_id": t["assignment_id"],
                "judgment": {"kind": "pairwise", "winner": "a", "strength": 1, "rationale": "ok"},
            },
        )
        assert short.status_code == 422 and short.json()["errors"][0]["loc"] == [
            "body",
            "judgment",
            "rationale",
        ]
        extra = c.post(
            "/api/v1/projects/demo/judgments",
            headers=h,
            json={"assignment_id": t["assignment_id"], "judgment": {}, "bogus": 1},
        )
        assert extra.status_code == 422 and extra.json()["detail"] == "invalid request"
        text_body = c.post(
            "/api/v1/projects/demo/judgments",
            headers={**h, "Content-Type": "text/plain"},
            content=b'{"assignment_id": "x", "judgment": {}}',
        )
        assert text_body.status_code == 422
        key = uuid.uuid4().hex
        body = {
            "assignment_id": t["assignment_id"],
            "idempotency_key": key,
            "judgment": {
                "kind": "pairwise",
                "winner": "a",
                "strength": 1,
                "rationale": "A is right",
            },
        }
        first = c.post("/api/v1/projects/demo/judgments", headers=h, json=body)
        replay = c.post("/api/v1/projects/demo/judgments", headers=h, json=body)
        assert first.status_code == 201 and replay.status_code == 200
        assert (
            replay.json()["judgment_id"] == first.json()["judgment_id"]
            and replay.json()["replayed"] is True
        )
    app.state.db.dispose()


# -- the judgment row without pydantic equals the one with ----------------------------------------

_ids = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=8)
_tel_int = st.one_of(st.none(), st.integers(0, 10**6), st.integers(-3, -1))
_tel = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {},
        optional={
            "active_ms": _tel_int,
            "typed_chars": _tel_int,
            "paste_count": _tel_int,
            "iki_cv": st.one_of(st.none(), st.floats(0, 10, allow_nan=False), st.integers(0, 3)),
            "focus_losses": _tel_int,
        },
    ),
)


@settings(max_examples=300, deadline=None)
@given(
    winner=st.sampled_from(["a", "b", "tie", "A", ""]),
    strength=st.one_of(st.integers(-1, 4), st.just(True), st.just(2.0)),
    rationale=st.one_of(st.none(), st.text(max_size=30), st.just("  padded  ")),
    shown=st.lists(_ids, min_size=2, max_size=2),
    item_key=_ids,
    username=_ids,
    idem=st.one_of(st.none(), st.text(min_size=1, max_size=5)),
    telemetry=_tel,
    rubric=st.sampled_from([(None, None), ("r1", 2)]),
    min_chars=st.sampled_from([0, 5]),
    micro=st.integers(0, 999_999),
    # the assignment's settings version (0: an assignment from before versions were recorded)
    guideline=st.sampled_from([None, 0, 3]),
)
def test_pairwise_values_match_the_pydantic_path(
    winner,
    strength,
    rationale,
    shown,
    item_key,
    username,
    idem,
    telemetry,
    rubric,
    min_chars,
    micro,
    guideline,
):
    from preflab.schema import Telemetry
    from preflab.server.errors import JudgingError
    from preflab.server.flow import NotCommon as _Pass
    from preflab.server.flow.submit import build_judgment, pairwise_values, telemetry_fast
    from preflab.server.permissions import ProjectRef
    from preflab.store.rows import judgment_rows

    project = ProjectRef(
        1,
        "p",
        "",
        ["pairwise"],
        {"version": 3, "policy": {"min_rationale_chars": min_chars}},
        *rubric,
    )
    judgment = {"kind": "pairwise", "winner": winner, "strength": strength}
    if rationale is not None:
        judgment["rationale"] = rationale
    started = datetime(2026, 1, 2, 3, 4, 5, micro, tzinfo=UTC)
    submitted = started + timedelta(seconds=30)
    # the telemetry as SubmitIn hands it on
    try:
        tel_ref = (
            Telemetry.model_validate(telemetry).model_dump(mode="json", exclude_none=True)
            if telemetry is not None
            else None
        )
        tel_ok = True
    except Exception:
        tel_ok = False
    try:
        tel_fast = telemetry_fast(telemetry)
    except _Pass:
        tel_fast = "pass"
    if tel_fast != "pass":
        assert tel_ok and tel_fast == tel_ref
    if not tel_ok:
        return
    try:
        ref = build_judgment(
            None,
            project,
            None,
            username,
            judgment,
            shown_order=list(shown),
            started_at=started,
            idempotency_key=idem,
            telemetry=tel_ref,
            item_key=item_key,
            candidate_keys=list(shown),
            guideline_version=guideline,
        )
        import preflab.server.services.gold_scoring as J

        ref_values = judgment_rows(ref).values
        ref_values.pop("submitted_at")
        del J
    except JudgingError:
        ref_values = None
    try:
        fast = pairwise_values(
            judgment,
            item_key=item_key,
            shown_order=list(shown),
            candidate_keys=list(shown),
            username=username,
            rubric_key=rubric[0],
            rubric_version=rubric[1],
            started_at=started,
            submitted_at=submitted,
            idempotency_key=idem,
            telemetry=tel_ref,
            min_rationale_chars=min_chars,
            guideline_version=guideline,
        )
    except _Pass:
        return  # the lane hands these to the reference path
    assert ref_values is not None, "the lane accepted what the reference path refuses"
    # submitted_at differs between the two calls (the reference path takes its own clock);
    # compare everything else, and the hash with the same submitted_at
    fast_sub = fast.pop("submitted_at")
    fast_hash, ref_hash = fast.pop("content_hash"), ref_values.pop("content_hash")
    assert fast == ref_values
    again = build_judgment(
        None,
        project,
        None,
        username,
        judgment,
        shown_order=list(shown),
        started_at=started,
        idempotency_key=idem,
        telemetry=tel_ref,
        item_key=item_key,
        candidate_keys=list(shown),
        guideline_version=guideline,
    )
    pinned = again.model_copy(
        update={"provenance": again.provenance.model_copy(update={"submitted_at": fast_sub})}
    )
    assert judgment_rows(pinned).values["content_hash"] == fast_hash
    assert ref_hash  # (the reference's own hash covers its own clock)


def test_lane_item_view_equals_the_orm_one(tmp_path):
    import sqlite3
    import threading

    from preflab.server.database import Database
    from preflab.server.exec.sqlite import SqliteExecutor
    from preflab.server.flow import lane as flow_lane
    from preflab.store.models import ItemRow
    from preflab.store.repo import item_from_row

    url = f"sqlite:///{tmp_path / 'views.db'}"
    items = [pairwise_item(0, gold=-1, domains=["law"]), pairwise_item(1)]
    items.append(
        {
            "id": "chat-1",
            "prompt": [{"role": "user", "content": "hi"}],
            "metadata": {"k": [1, 2]},
            "candidates": [
                {"id": "m", "messages": [{"role": "assistant", "content": "hello"}], "model": "x"},
                {"id": "n", "text": "yo", "metadata": {"z": 1}},
            ],
        }
    )
    seed(url, raters=1, items=items, extra_roles=False)
    db = Database(url, pool_size=1, max_overflow=1)
    conn = sqlite3.connect(db.engine.url.database)
    with db.reading() as s:
        for row in s.query(ItemRow).order_by(ItemRow.pk):
            orm = item_from_row(row).public_view()
            flow_lane.VIEWS.clear()
            ex = SqliteExecutor(conn, threading.Lock())
            lane = flow_lane.Lane(ex, datetime.now(UTC))
            view, ids = ex.run(flow_lane.item_view(lane, row.pk, None))
            assert view == orm and ids == [c["id"] for c in orm["candidates"]]
    conn.close()
    db.dispose()
