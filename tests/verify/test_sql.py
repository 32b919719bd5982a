"""SQL: a candidate query on a read-only copy of a SQLite fixture, result sets compared."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from preflab.verify import SqlTask, verify
from preflab.verify.digest import sha256_file


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    path = tmp_path / "shop.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript("""
            CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT, total REAL);
            INSERT INTO orders VALUES (1, 'ada', 10.5), (2, 'bob', 3.0), (3, 'ada', 4.5),
                                      (4, 'cy', 7.25);
        """)
    return path


def task(shop: Path, **kw) -> SqlTask:
    return SqlTask(
        task_id="spend",
        kind="sql",
        fixture=str(shop),
        **{"reference_query": "SELECT customer, SUM(total) FROM orders GROUP BY customer", **kw},
    )


def test_the_same_rows_in_another_order_pass_unless_order_matters(shop):
    query = "SELECT customer, SUM(total) AS s FROM orders GROUP BY customer ORDER BY s DESC"
    assert verify(task(shop), f"```sql\n{query};\n```").reward == 1.0
    ordered = task(
        shop,
        reference_query="SELECT customer, SUM(total) FROM orders "
        "GROUP BY customer ORDER BY customer",
        ordered=True,
    )
    assert verify(ordered, query).reward == 0.0


def test_a_different_result_fails(shop):
    verdict = verify(task(shop), "SELECT customer, MAX(total) FROM orders GROUP BY customer")
    assert verdict.reward == 0.0 and "differs" in verdict.reason


def test_duplicates_count(shop):
    multiset = task(shop, reference_query="SELECT customer FROM orders")
    assert verify(multiset, "SELECT DISTINCT customer FROM orders").reward == 0.0


def test_expected_rows_may_be_given_instead_of_a_reference_query(shop):
    given = SqlTask(task_id="n", kind="sql", fixture=str(shop), expected_rows=[[4]])
    assert verify(given, "SELECT COUNT(*) FROM orders").reward == 1.0


@pytest.mark.parametrize(
    "attack",
    [
        "DELETE FROM orders",
        "DROP TABLE orders",
        "UPDATE orders SET total = 0",
        "SELECT 1; DELETE FROM orders",
        "ATTACH DATABASE '/tmp/preflab-evil.sqlite' AS evil",
        "PRAGMA query_only = OFF",
        "SELECT load_extension('/tmp/evil')",
    ],
)
def test_writes_and_escapes_are_refused_and_the_fixture_is_untouched(shop, attack):
    before = sha256_file(shop)
    verdict = verify(task(shop), attack)
    assert verdict.reward == 0.0
    assert sha256_file(shop) == before
    assert not Path("/tmp/preflab-evil.sqlite").exists()


def test_a_runaway_query_is_stopped_at_the_deadline(shop):
    runaway = (
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
        "SELECT customer, SUM(total) FROM orders, (SELECT MAX(i) FROM n) GROUP BY customer"
    )
    verdict = verify(task(shop, timeout_s=1), runaway)
    assert verdict.reward == 0.0 and "interrupted" in verdict.reason
    assert verdict.wall_s < 5


# Hostile queries: each would cost the caller time or memory past the task's deadline on a
# connection in the caller's process (a progress handler runs between VM steps, never inside one
# function call); each scores 0, in time, and the memory it takes is not this process's.
N = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
HOSTILE = {
    # 4 x 900 MB in one expression: 126 s and 1.8 GB in the caller against a 5 s limit
    "randomblob": "SELECT " + " + ".join(["length(randomblob(900000000))"] * 4),
    "zeroblob as hex": "SELECT length(hex(zeroblob(1500000000)))",
    "printf width": "SELECT length(printf('%.*c', 2000000000, 'x'))",  # one call, ~15 s
    "nested replace": "SELECT length("
    + "replace(" * 6
    + "hex(zeroblob(1000000))"
    + ", '0', '0000000000')" * 6
    + ")",
    "doubling recursive CTE": "WITH RECURSIVE r(s) AS (SELECT hex(zeroblob(1000000)) "
    "UNION ALL SELECT s || s FROM r) SELECT max(length(s)) FROM r",
    "group_concat": N + "SELECT length(group_concat(hex(zeroblob(1000000)))) "
    "FROM (SELECT i FROM n LIMIT 100000)",
    "rows of blobs": N + "SELECT customer, zeroblob(10000000) FROM orders, "
    "(SELECT i FROM n LIMIT 5000)",
    "cartesian join": N + ", m AS (SELECT i FROM n LIMIT 2000) SELECT customer, SUM(total) "
    "FROM orders, m a, m b GROUP BY customer ORDER BY random()",
    "unbounded recursive CTE": N + "SELECT customer, SUM(total) FROM orders, "
    "(SELECT MAX(i) FROM n) GROUP BY customer",
    "deep nesting": "SELECT " + "abs(" * 5000 + "1" + ")" * 5000,
}


def peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.parametrize("query", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_query_scores_zero_by_the_deadline_in_bounded_memory(shop, query):
    limit = task(shop, timeout_s=2)
    verify(limit, "SELECT 1")  # a ready worker: its start is not the query's cost
    before, rss = sha256_file(shop), peak_rss_mb()
    started = time.monotonic()
    verdict = verify(limit, query)
    assert time.monotonic() - started < 2 + 3.0  # the limit, the kill's grace, a loaded machine
    assert verdict.reward == 0.0 and verdict.reason.startswith("query refused or failed: ")
    assert sha256_file(shop) == before
    assert peak_rss_mb() - rss < 200  # the worker's memory, capped, not this process's


@pytest.mark.parametrize(
    "query, reason",
    [
        (HOSTILE["randomblob"], "string or blob too big"),  # SQLite's length limit, at once
        (HOSTILE["printf width"], "killed: one SQLite call ran past the 2 s deadline"),
        (HOSTILE["unbounded recursive CTE"], "interrupted"),  # the progress handler
    ],
)
def test_each_limit_says_which_it_is(shop, query, reason):
    assert reason in verify(task(shop, timeout_s=2), query).reason


def test_the_judge_worker_is_replaced_after_a_kill(shop):
    assert "killed" in verify(task(shop, timeout_s=1), HOSTILE["printf width"]).reason
    query = "SELECT customer, SUM(total) FROM orders GROUP BY customer"
    assert verify(task(shop, timeout_s=1), query).reward == 1.0
