"""Two server processes on two ports (standing in for two hosts) against one PostgreSQL:
200 raters split between them, every item labelled by k = 3 raters. Never more than k labels
on an item, no rater twice on an item, every acknowledged judgment stored, every item full
(issue 10 §2). Both hosts serve the hot path through the PostgreSQL fast lane."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import create_engine, text

from .conftest import pairwise_item, seed
from .test_concurrency import check_invariants, rater_loop

# two server processes, 200 raters: `make test`
pytestmark = pytest.mark.slow

RATERS = 200


def test_two_hosts_one_postgres_never_more_than_k(pg_url, start_server):
    items = [pairwise_item(i) for i in range(80)]
    seeded = seed(
        pg_url,
        project="load",
        items=items,
        raters=RATERS,
        extra_roles=False,
        policy={"overlap_share": 1.0, "overlap_k": 3, "lease_seconds": 600},
    )
    hosts = [start_server(pg_url, workers=1), start_server(pg_url, workers=1)]
    acked: dict[str, int] = {}
    errors: list = []
    threads = [
        threading.Thread(
            target=rater_loop,
            args=(hosts[i % 2].base, seeded.tokens[f"rater{i:03d}"], acked, errors, i, 10),
        )
        for i in range(RATERS)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=400)
    assert not any(t.is_alive() for t in threads), "raters still running after 400 s"
    assert not errors, errors[:10]
    engine = create_engine(pg_url)
    with engine.connect() as conn:  # both hosts' lanes hold their connections open
        lane_conns = conn.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND application_name = 'preflab-lane'"
            )
        ).scalar()
    engine.dispose()
    assert lane_conns >= 2
    figures = check_invariants(pg_url, acked)  # never > k, no doubles, nothing acknowledged lost
    assert figures["targets"] == 3 * len(items)
    assert not figures["under"], f"items left short of k: {list(figures['under'].items())[:5]}"
    assert figures["total"] == figures["targets"]
