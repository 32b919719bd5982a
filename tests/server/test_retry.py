"""Retryable database errors: the server answers 503 + Retry-After, the client retries with the
same idempotency key, and nothing is stored twice."""

from __future__ import annotations

import sqlite3

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, func, select
from sqlalchemy.exc import OperationalError

from .conftest import seed


def _locked() -> OperationalError:
    return OperationalError(
        "INSERT INTO judgments ...", {}, sqlite3.OperationalError("database is locked")
    )


class _FailFirst:
    """Wrap a function so its first ``n`` calls raise a retryable database error."""

    def __init__(self, fn, n: int, exc=_locked) -> None:
        self.fn, self.left, self.exc, self.calls = fn, n, exc, 0

    def __call__(self, *a, **kw):
        self.calls += 1
        if self.left > 0:
            self.left -= 1
            raise self.exc()
        return self.fn(*a, **kw)


def _client(app, token: str):
    from preflab.client import Client

    c = Client("http://testserver", token)
    c._http = TestClient(
        app, base_url="http://testserver", headers={"Authorization": f"Bearer {token}"}
    )
    return c


def test_db_error_kinds() -> None:
    psycopg = pytest.importorskip("psycopg")
    from preflab.server.app import db_error_kind

    assert (
        db_error_kind(OperationalError("x", {}, psycopg.errors.SerializationFailure("s")))
        == "serialization failure"
    )
    assert (
        db_error_kind(OperationalError("x", {}, psycopg.errors.DeadlockDetected("d"))) == "deadlock"
    )
    assert db_error_kind(_locked()) == "database is locked"


def test_503_and_client_retry(tmp_path, monkeypatch) -> None:
    from preflab import client as client_mod
    from preflab.server import fastlane
    from preflab.server.app import create_app
    from preflab.server.routes import labelling

    # the framework path's 503: the lane (which hands driver errors to it) is off here
    monkeypatch.setattr(fastlane, "ENABLED", False)

    url = f"sqlite:///{tmp_path / 'retry.db'}"
    s = seed(url, raters=1, n_items=5, extra_roles=False)
    token = s.tokens["rater000"]
    app = create_app(url)
    waits: list[float] = []
    monkeypatch.setattr(client_mod.time, "sleep", waits.append)
    with TestClient(app) as http:
        h = {"Authorization": f"Bearer {token}"}
        # the next-task call fails once: the client retries it and gets a task
        monkeypatch.setattr(labelling, "serve_next", _FailFirst(labelling.serve_next, 1))
        r = http.post("/api/v1/projects/demo/assignments/next", headers=h)
        assert r.status_code == 503 and r.headers["retry-after"] == "1"
        assert "database is locked" in r.json()["detail"] and "INSERT" not in r.json()["detail"]
        c = _client(app, token)
        task = c.next_task("demo")
        assert task is not None and not waits  # the live lease came back; no retry needed now
        judgment = {"kind": "pairwise", "winner": "a", "strength": 2}

        # the submission fails twice: answered 503 + Retry-After, then retried with the same key
        flaky = _FailFirst(labelling.serve_submit, 2)
        monkeypatch.setattr(labelling, "serve_submit", flaky)
        out = c.submit(
            "demo", task["assignment_id"], judgment, rationale="A is right", idempotency_key="k-1"
        )
        assert out["created"] is True and flaky.calls == 3
        assert len(waits) == 2 and all(
            0.5 <= w <= 1.0 for w in waits
        )  # Retry-After: 1, with jitter
        again = c.submit(
            "demo", task["assignment_id"], judgment, rationale="A is right", idempotency_key="k-1"
        )
        assert again["judgment_id"] == out["judgment_id"] and again["created"] is False

        # a write not marked safe to repeat is not retried: the caller sees the 503
        monkeypatch.setattr(labelling, "serve_next", _FailFirst(labelling.serve_next, 1))
        with pytest.raises(client_mod.ApiError) as err:
            c.request("POST", "/projects/demo/assignments/next")
        assert err.value.status == 503 and err.value.retry_after == 1.0

        # retries are bounded: a database that stays busy ends in the 503
        monkeypatch.setattr(labelling, "serve_next", _FailFirst(labelling.serve_next, 100))
        waits.clear()
        with pytest.raises(client_mod.ApiError) as err:
            c.next_task("demo")
        assert err.value.status == 503 and len(waits) == c.retries
    app.state.db.dispose()

    engine = create_engine(url)
    with engine.connect() as conn:
        from preflab.store.models import JudgmentRow

        assert conn.execute(select(func.count()).select_from(JudgmentRow)).scalar() == 1
    engine.dispose()
