"""SQL: a candidate query on a read-only copy of a SQLite fixture, result sets compared."""

from __future__ import annotations

import sqlite3
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
