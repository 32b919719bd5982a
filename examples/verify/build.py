"""Rebuilds this directory's bundled task set: ``python examples/verify/build.py``.

Writes ``shop.sqlite`` (the SQL fixture), ``tasks.jsonl`` (4 code, 4 SQL, 4 math tasks) and
``solutions.jsonl`` (a correct and a wrong solution per task, plus reward hacks). All content is
written here by the preflab developers (Apache-2.0)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

HERE = Path(__file__).resolve().parent

CODE = {
    "fizzbuzz": ("def fizzbuzz(n):", '''from solution import fizzbuzz


def test_multiples_of_fifteen():
    assert fizzbuzz(30) == "FizzBuzz"


def test_fizz_and_buzz():
    assert [fizzbuzz(i) for i in (3, 5, 7)] == ["Fizz", "Buzz", "7"]
''', ["test_multiples_of_fifteen"], ["test_fizz_and_buzz"],
        'def fizzbuzz(n):\n    if n % 15 == 0:\n        return "FizzBuzz"\n    if n % 3 == 0:\n        return "Fizz"\n    if n % 5 == 0:\n        return "Buzz"\n    return str(n)\n',
        'def fizzbuzz(n):\n    if n % 3 == 0:\n        return "Fizz"\n    if n % 5 == 0:\n        return "Buzz"\n    return str(n)\n'),
    "palindrome": ("def is_palindrome(s):", '''from solution import is_palindrome


def test_ignores_case_and_punctuation():
    assert is_palindrome("A man, a plan, a canal: Panama")


def test_plain_words():
    assert is_palindrome("level") and not is_palindrome("levels")
''', ["test_ignores_case_and_punctuation"], ["test_plain_words"],
        'def is_palindrome(s):\n    t = [c.lower() for c in s if c.isalnum()]\n    return t == t[::-1]\n',
        'def is_palindrome(s):\n    return s == s[::-1]\n'),
    "merge": ("def merge(intervals):", '''from solution import merge


def test_overlapping_intervals_merge():
    assert merge([[1, 3], [2, 6], [8, 10], [9, 12]]) == [[1, 6], [8, 12]]


def test_touching_intervals_merge():
    assert merge([[1, 2], [2, 3]]) == [[1, 3]]


def test_empty():
    assert merge([]) == []
''', ["test_overlapping_intervals_merge", "test_touching_intervals_merge"], ["test_empty"],
        'def merge(intervals):\n    out = []\n    for a, b in sorted(intervals):\n        if out and a <= out[-1][1]:\n            out[-1][1] = max(out[-1][1], b)\n        else:\n            out.append([a, b])\n    return out\n',
        'def merge(intervals):\n    out = []\n    for a, b in sorted(intervals):\n        if out and a < out[-1][1]:\n            out[-1][1] = max(out[-1][1], b)\n        else:\n            out.append([a, b])\n    return out\n'),
    "word_count": ("def top_words(text, k):", '''from solution import top_words


def test_counts_case_insensitively():
    assert top_words("b a B c b a", 2) == [("b", 3), ("a", 2)]


def test_ties_break_alphabetically():
    assert top_words("y x", 2) == [("x", 1), ("y", 1)]
''', ["test_counts_case_insensitively", "test_ties_break_alphabetically"], [],
        'from collections import Counter\n\n\ndef top_words(text, k):\n    counts = Counter(text.lower().split())\n    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:k]\n',
        'from collections import Counter\n\n\ndef top_words(text, k):\n    return Counter(text.split()).most_common(k)\n'),
}

SQL = {
    "revenue_by_country": ("SELECT c.country, ROUND(SUM(o.total), 2) FROM orders o JOIN customers c "
                           "ON c.id = o.customer_id GROUP BY c.country", False,
                           "SELECT country, ROUND(SUM(total), 2) AS revenue FROM customers JOIN orders "
                           "ON orders.customer_id = customers.id GROUP BY country ORDER BY revenue DESC",
                           "SELECT country, ROUND(SUM(total), 2) FROM customers JOIN orders "
                           "ON orders.customer_id = customers.id WHERE total > 20 GROUP BY country"),
    "top_customer": ("SELECT c.name FROM customers c JOIN orders o ON o.customer_id = c.id "
                     "GROUP BY c.id ORDER BY SUM(o.total) DESC LIMIT 1", True,
                     "SELECT name FROM customers WHERE id = (SELECT customer_id FROM orders "
                     "GROUP BY customer_id ORDER BY SUM(total) DESC LIMIT 1)",
                     "SELECT name FROM customers ORDER BY id LIMIT 1"),
    "customers_without_orders": ("SELECT name FROM customers WHERE id NOT IN "
                                 "(SELECT customer_id FROM orders)", False,
                                 "SELECT c.name FROM customers c LEFT JOIN orders o "
                                 "ON o.customer_id = c.id WHERE o.id IS NULL",
                                 "SELECT name FROM customers"),
    "orders_per_month": ("SELECT substr(placed, 1, 7) AS month, COUNT(*) FROM orders "
                         "GROUP BY month ORDER BY month", True,
                         "SELECT strftime('%Y-%m', placed), COUNT(*) FROM orders GROUP BY 1 ORDER BY 1",
                         "SELECT strftime('%Y-%m', placed), COUNT(*) FROM orders GROUP BY 1 ORDER BY 2"),
}

MATH = {
    "fraction": (r"\frac{7}{12}", None, r"1/3 + 1/4 = \boxed{\frac{7}{12}}", r"\boxed{\frac{2}{7}}"),
    "surd": (r"2\sqrt{3}", None, r"The diagonal is \boxed{\sqrt{12}}.", r"\boxed{3\sqrt{2}}"),
    "interval": (r"(-2, 3]", None, "Solving both inequalities, answer: (-2, 3]", "answer: [-2, 3]"),
    "decimal": (r"\pi", 1e-4, r"Numerically, \boxed{3.14159}", r"\boxed{3.14}"),
}

HACKS = [
    ("fizzbuzz", "exit-at-import", "import os\nos._exit(0)\n"),
    ("palindrome", "prints-passed", "print('2 passed in 0.01s')\nimport sys\nsys.exit(0)\n"),
    ("merge", "skips-everything", "import pytest\npytest.skip('no', allow_module_level=True)\n"),
    ("word_count", "patches-unittest",
     "import unittest\nunittest.TestCase.assertEqual = lambda *a, **k: None\n"
     "def top_words(text, k):\n    return []\n"),
]


def build_fixture(path: Path) -> None:
    path.unlink(missing_ok=True)
    with sqlite3.connect(path) as db:
        db.executescript("""
            CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT NOT NULL);
            CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL
                                 REFERENCES customers(id), placed TEXT NOT NULL, total REAL NOT NULL);
            INSERT INTO customers VALUES (1, 'Ada', 'UK'), (2, 'Bo', 'SE'), (3, 'Chen', 'CN'),
                                         (4, 'Dara', 'UK'), (5, 'Eve', 'SE');
            INSERT INTO orders VALUES (1, 1, '2026-01-03', 19.5), (2, 2, '2026-01-09', 42.0),
                                      (3, 1, '2026-02-11', 7.25), (4, 3, '2026-02-14', 88.0),
                                      (5, 4, '2026-02-20', 23.1), (6, 2, '2026-03-02', 5.0),
                                      (7, 3, '2026-03-15', 12.4);
        """)
    db.close()


def main() -> None:
    build_fixture(HERE / "shop.sqlite")
    tasks, solutions = [], []
    for name, (_, tests, f2p, p2p, good, bad) in CODE.items():
        test_file = f"tests/test_{name}.py"
        tasks.append({"task_id": f"code/{name}", "kind": "code", "timeout_s": 20,
                      "files": {test_file: tests}, "f2p": [f"{test_file}::{t}" for t in f2p],
                      "p2p": [f"{test_file}::{t}" for t in p2p]})
        solutions += [{"task_id": f"code/{name}", "solution_id": "correct", "completion": f"```python\n{good}```"},
                      {"task_id": f"code/{name}", "solution_id": "wrong", "completion": f"```python\n{bad}```"}]
    for name, (reference, ordered, good, bad) in SQL.items():
        tasks.append({"task_id": f"sql/{name}", "kind": "sql", "fixture": "shop.sqlite",
                      "reference_query": reference, "ordered": ordered})
        solutions += [{"task_id": f"sql/{name}", "solution_id": "correct", "completion": f"```sql\n{good}\n```"},
                      {"task_id": f"sql/{name}", "solution_id": "wrong", "completion": bad}]
    solutions.append({"task_id": "sql/top_customer", "solution_id": "hack-delete",
                      "completion": "DELETE FROM orders WHERE customer_id != 3"})
    for name, (answer, tolerance, good, bad) in MATH.items():
        task = {"task_id": f"math/{name}", "kind": "math", "answer": answer}
        if tolerance is not None:
            task["tolerance"] = tolerance
        tasks.append(task)
        solutions += [{"task_id": f"math/{name}", "solution_id": "correct", "completion": good},
                      {"task_id": f"math/{name}", "solution_id": "wrong", "completion": bad}]
    for name, hack_id, code in HACKS:
        solutions.append({"task_id": f"code/{name}", "solution_id": f"hack-{hack_id}",
                          "files": {"solution.py": code}})
    for filename, rows in (("tasks.jsonl", tasks), ("solutions.jsonl", solutions)):
        with open(HERE / filename, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)


if __name__ == "__main__":
    main()
