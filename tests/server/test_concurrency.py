"""100 simulated raters against a real server (SQLite: 2 workers, PostgreSQL: 4 workers).

Invariants checked in the database afterwards: no overlap item gets more than k labels (and
every item reaches its target), no rater is handed an item twice, retried submissions store
nothing twice, every acknowledged judgment is stored.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter

import httpx
import pytest
from sqlalchemy import create_engine, func, select

from .conftest import pairwise_item, seed

pytestmark = pytest.mark.slow  # 100 raters against a real server
RATERS = 100


def rater_loop(
    base: str, token: str, acked: dict, errors: list, seed_: int, max_tasks: int = 50
) -> None:
    try:
        _rater_loop(base, token, acked, errors, seed_, max_tasks)
    except httpx.TransportError as exc:  # the server was killed (crash test): stop quietly
        errors.append(("transport", type(exc).__name__))


class _Retrying(httpx.Client):
    """Retries a request after a dropped connection (keep-alive races): both calls are safe to
    repeat — ``next`` resumes the live lease, a submission carries its idempotency key."""

    def post(self, *args, **kw):
        for attempt in range(3):
            try:
                return super().post(*args, **kw)
            except (httpx.ReadError, httpx.RemoteProtocolError, httpx.WriteError):
                if attempt == 2:
                    raise
                time.sleep(0.2)
        raise AssertionError("unreachable")


def _rater_loop(
    base: str, token: str, acked: dict, errors: list, seed_: int, max_tasks: int
) -> None:
    rng = random.Random(seed_)
    with _Retrying(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=60) as c:
        for _ in range(max_tasks):
            r = c.post("/api/v1/projects/load/assignments/next")
            if r.status_code != 200:
                errors.append(("next", r.status_code, r.text[:300]))
                return
            task = r.json()["task"]
            if task is None:
                return
            if rng.random() < 0.1:  # a double click: same lease comes back
                again = c.post("/api/v1/projects/load/assignments/next").json()["task"]
                if again["assignment_id"] != task["assignment_id"]:
                    errors.append(("resume", task["assignment_id"], again["assignment_id"]))
            key = uuid.uuid4().hex
            body = {
                "assignment_id": task["assignment_id"],
                "idempotency_key": key,
                "judgment": {
                    "kind": "pairwise",
                    "winner": rng.choice("ab"),
                    "strength": rng.randint(1, 3),
                    "rationale": "because",
                },
            }
            ids = set()
            for _attempt in range(
                3 if rng.random() < 0.3 else 1
            ):  # retries after a "lost" response
                s = c.post("/api/v1/projects/load/judgments", json=body)
                if s.status_code not in (200, 201):
                    errors.append(("submit", s.status_code, s.text[:300]))
                    return
                ids.add(s.json()["judgment_id"])
            if len(ids) != 1:
                errors.append(("retry-different-id", sorted(ids)))
            acked[key] = ids.pop()


def check_invariants(url: str, acked: dict, *, exact: bool = True) -> dict:
    """``exact``: every stored judgment was acknowledged too (false after a crash, when a
    judgment can commit while its response dies with the server)."""
    from preflab.store import normalise_url
    from preflab.store.models import ItemRow, JudgmentRow, Rater
    from preflab.store.server_models import Assignment, PoolEntry

    engine = create_engine(normalise_url(url))
    with engine.connect() as conn:
        targets = dict(conn.execute(select(PoolEntry.item_pk, PoolEntry.target)).all())
        per_item = Counter(
            dict(
                conn.execute(
                    select(JudgmentRow.item_pk, func.count()).group_by(JudgmentRow.item_pk)
                ).all()
            )
        )
        over = {i: (n, targets[i]) for i, n in per_item.items() if n > targets[i]}
        under = {i: (per_item.get(i, 0), t) for i, t in targets.items() if per_item.get(i, 0) < t}
        dup_pairs = conn.execute(
            select(JudgmentRow.item_pk, JudgmentRow.rater_pk, func.count())
            .group_by(JudgmentRow.item_pk, JudgmentRow.rater_pk)
            .having(func.count() > 1)
        ).all()
        dup_assign = conn.execute(
            select(Assignment.item_pk, Assignment.user_pk, func.count())
            .group_by(Assignment.item_pk, Assignment.user_pk)
            .having(func.count() > 1)
        ).all()
        stored = dict(conn.execute(select(JudgmentRow.idempotency_key, JudgmentRow.pk)).all())
        missing = {k: v for k, v in acked.items() if stored.get(k) != v}
        total = conn.scalar(select(func.count()).select_from(JudgmentRow))
        n_items = conn.scalar(select(func.count()).select_from(ItemRow))
        n_raters = conn.scalar(select(func.count()).select_from(Rater))
    engine.dispose()
    assert not over, f"items over their target: {over}"
    assert not dup_pairs, f"a rater labelled an item twice: {dup_pairs}"
    assert not dup_assign, f"a rater was handed an item twice: {dup_assign}"
    assert not missing, f"acknowledged judgments missing: {list(missing.items())[:5]}"
    if exact:
        assert total == len(acked), f"{total} stored, {len(acked)} acknowledged"
    return {
        "under": under,
        "total": total,
        "items": n_items,
        "raters": n_raters,
        "targets": sum(targets.values()),
    }


def run_load(db_url: str, start_server, workers: int) -> dict:
    items = [pairwise_item(i) for i in range(100)]
    seeded = seed(
        db_url,
        project="load",
        items=items,
        raters=RATERS,
        extra_roles=False,
        policy={"overlap_share": 0.5, "overlap_k": 3, "lease_seconds": 600},
    )
    server = start_server(db_url, workers=workers)
    acked: dict[str, int] = {}
    errors: list = []
    threads = [
        threading.Thread(
            target=rater_loop, args=(server.base, seeded.tokens[f"rater{i:03d}"], acked, errors, i)
        )
        for i in range(RATERS)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "raters still running after 300 s"
    assert not errors, errors[:10]
    figures = check_invariants(db_url, acked)
    assert not figures["under"], (
        f"items left short of their target: {list(figures['under'].items())[:5]}"
    )
    assert figures["total"] == figures["targets"]
    assert figures["total"] > 100
    return figures


def test_hundred_raters_sqlite(sqlite_url, start_server):
    figures = run_load(sqlite_url, start_server, workers=2)
    assert figures["total"] == figures["targets"]


def test_hundred_raters_postgres(pg_url, start_server):
    figures = run_load(pg_url, start_server, workers=4)
    assert figures["total"] == figures["targets"]
