"""kill -9 the server mid-load, restart: every acknowledged judgment is there, the database
is intact, and the leases of the dead run expire so their items are handed out again."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import create_engine, select, text

from preflab.store import normalise_url

from .conftest import Server, expire_now, pairwise_item, seed
from .test_concurrency import check_invariants, rater_loop

pytestmark = pytest.mark.slow  # kill -9 of loaded servers, twice
RATERS = 30


def integrity(url: str) -> None:
    engine = create_engine(normalise_url(url))
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            assert conn.execute(text("PRAGMA integrity_check")).scalar() == "ok"
            assert conn.execute(text("PRAGMA foreign_key_check")).fetchall() == []
        else:
            orphans = conn.execute(
                text(
                    "SELECT count(*) FROM judgments j LEFT JOIN items i ON i.pk = j.item_pk WHERE i.pk IS NULL"
                )
            ).scalar()
            orphans += conn.execute(
                text(
                    "SELECT count(*) FROM assignments a LEFT JOIN items i ON i.pk = a.item_pk WHERE i.pk IS NULL"
                )
            ).scalar()
            assert orphans == 0
            dup_keys = conn.execute(
                text(
                    "SELECT count(*) FROM (SELECT project_pk, rater_pk, idempotency_key FROM judgments "
                    "WHERE idempotency_key IS NOT NULL GROUP BY 1, 2, 3 HAVING count(*) > 1) d"
                )
            ).scalar()
            assert dup_keys == 0
            invalid = conn.execute(
                text("SELECT count(*) FROM pg_index WHERE NOT indisvalid")
            ).scalar()
            assert invalid == 0
    engine.dispose()


def crash_and_recover(url: str, tmp, workers: int) -> dict:
    from preflab.store.server_models import Assignment

    items = [pairwise_item(i) for i in range(40)]
    # one rater more than the load: it takes a lease and never submits, so the dead run surely
    # leaves a live lease behind (the load's own leases at the kill depend on timing)
    seeded = seed(
        url,
        project="load",
        items=items,
        raters=RATERS + 1,
        extra_roles=False,
        policy={"overlap_share": 0.5, "overlap_k": 3, "lease_seconds": 600},
    )
    server = Server(url, tmp=tmp, workers=workers).start()
    with server.client(seeded.tokens[f"rater{RATERS:03d}"]) as idle:
        abandoned = idle.post("/api/v1/projects/load/assignments/next").json()["task"]
    acked: dict[str, int] = {}
    errors: list = []
    threads = [
        threading.Thread(
            target=rater_loop,
            args=(server.base, seeded.tokens[f"rater{i:03d}"], acked, errors, i),
            daemon=True,
        )
        for i in range(RATERS)
    ]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while len(acked) < 25 and time.monotonic() < deadline:
        time.sleep(0.05)
    server.kill()  # SIGKILL to the whole server process group, mid-load
    for t in threads:
        t.join(timeout=60)
    assert len(acked) >= 25
    snapshot = dict(acked)  # what the clients saw acknowledged before the crash

    integrity(url)
    engine = create_engine(normalise_url(url))
    with engine.connect() as conn:
        dangling = set(
            conn.scalars(select(Assignment.lease_id).where(Assignment.status == "active"))
        )
    engine.dispose()
    assert abandoned["assignment_id"] in dangling

    # the dead run's leases run out (their expiry moved into the past rather than waiting for
    # it): their items must go back to the pool and reach their targets in the next run
    assert expire_now(url, Assignment, Assignment.lease_id.in_(dangling)) == len(dangling)
    server2 = Server(url, tmp=tmp, workers=workers).start()
    errors2: list = []
    threads = [
        threading.Thread(
            target=rater_loop,
            args=(server2.base, seeded.tokens[f"rater{i:03d}"], acked, errors2, 100 + i),
        )
        for i in range(RATERS)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    server2.kill()
    assert not errors2, errors2[:5]
    figures = check_invariants(
        url, acked, exact=False
    )  # every acknowledged judgment stored, none over k
    assert all(acked[k] == v for k, v in snapshot.items())
    assert not figures["under"], (
        f"items never handed out again: {list(figures['under'].items())[:5]}"
    )
    integrity(url)
    return figures


def test_kill_9_and_restart_sqlite(sqlite_url, tmp_path):
    figures = crash_and_recover(sqlite_url, tmp_path, workers=2)
    assert not figures["under"]


def test_kill_9_and_restart_postgres(pg_url, tmp_path):
    figures = crash_and_recover(pg_url, tmp_path, workers=4)
    assert not figures["under"]
