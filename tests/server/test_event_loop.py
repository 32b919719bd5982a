"""No database transaction runs on the event loop (issue 32): an ``async`` route that opened
one would take SQLite's process-wide write lock (a ``threading.Lock``) on the loop, and every
other request of the process would wait behind the upload. The upload routes read the body
asynchronously and do their database work in a worker thread, like the sync routes."""

from __future__ import annotations

import asyncio
from contextlib import contextmanager

import yaml

from preflab.server.database import Database

from .conftest import seed
from .test_holes import app_client, bearer

P = "/api/v1/projects/demo"


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def test_the_upload_routes_open_no_transaction_on_the_event_loop(sqlite_url, monkeypatch):
    s = seed(sqlite_url, n_items=1)
    opened: list[tuple[str, bool]] = []
    for name in ("reading", "writing"):
        original = getattr(Database, name)

        def spy(self, _original=original, _name=name):
            @contextmanager
            def wrapped():
                opened.append((_name, _on_event_loop()))
                with _original(self) as session:
                    yield session

            return wrapped()

        monkeypatch.setattr(Database, name, spy)
    rubric = {
        "id": "helpful",
        "version": 1,
        "dimensions": [{"name": "helpfulness", "scale": "ordinal", "points": 5}],
    }
    with app_client(sqlite_url, monkeypatch=monkeypatch) as c:
        h = bearer(s.tokens["padmin"])
        opened.clear()  # the app's start-up runs on the loop before it serves anything
        r = c.post(
            f"{P}/rubrics/file?filename=rubric.yaml", content=yaml.safe_dump(rubric), headers=h
        )
        assert r.status_code == 201, r.text
        assert r.json()["version"] == 1
        opened_by_rubric = list(opened)
        item = '{"id": "up-1", "prompt": "p", "candidates": [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}]}\n'
        r = c.post(f"{P}/items/file?filename=items.jsonl", content=item, headers=h)
        assert r.status_code == 200, r.text
    assert ("writing", False) in opened_by_rubric, "the rubric upload stores its rubric"
    assert [o for o in opened if o[1]] == [], f"transactions on the event loop: {opened}"
