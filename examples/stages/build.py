"""Rebuilds this directory: ``python examples/stages/build.py``.

``tasks.jsonl``: the bundled verifiable tasks of ``examples/verify`` with the ``prompt`` a policy
is asked and a ``domain``, plus one multiple-choice task a constant answer passes (the
guessability check must flag it). ``answers.json``: the scripted policy of the in-process
OpenAI-compatible server (``python -m preflab.train.openai_stub --answers answers.json``): per
prompt eight answers, the correct solution of ``examples/verify/solutions.jsonl`` in ``m`` of
them, so the pass rate of every task is known: code is never solved (cold start), SQL mostly
solved, math mixed. Written by the preflab developers (Apache-2.0).
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
VERIFY = HERE.parent / "verify"

PROMPTS = {
    "code/fizzbuzz": "Write a Python function fizzbuzz(n) returning 'Fizz' for multiples of 3, "
    "'Buzz' for multiples of 5, 'FizzBuzz' for both, else str(n).",
    "code/palindrome": "Write a Python function is_palindrome(s) that ignores case and "
    "non-alphanumeric characters.",
    "code/merge": "Write a Python function merge(intervals) that merges overlapping or touching "
    "[start, end] intervals and returns them sorted.",
    "code/word_count": "Write a Python function top_words(text, k): the k most frequent words, "
    "case-insensitive, as (word, count) pairs, ties broken alphabetically.",
    "sql/revenue_by_country": "SQLite tables customers(id, name, country) and orders(id, "
    "customer_id, placed, total). Query the revenue per country, rounded to 2 decimals.",
    "sql/top_customer": "SQLite tables customers(id, name, country) and orders(id, customer_id, "
    "placed, total). Query the name of the customer with the highest total spend.",
    "sql/customers_without_orders": "SQLite tables customers(id, name, country) and orders(id, "
    "customer_id, placed, total). Query the names of customers without orders.",
    "sql/orders_per_month": "SQLite tables customers(id, name, country) and orders(id, "
    "customer_id, placed, total). Query the number of orders per month (YYYY-MM), by month.",
    "math/fraction": "What is 1/3 + 1/4? Put the final answer in \\boxed{}.",
    "math/surd": "What is the length of the diagonal of a rectangle with sides 3 and sqrt(3)? "
    "Put the final answer in \\boxed{}.",
    "math/interval": "Solve -4 < 2x <= 6. Give the interval after 'answer:'.",
    "math/decimal": "What is the area of a circle of radius 1? Put the final answer in \\boxed{}.",
}
#: correct answers among eight per task
CORRECT = {
    "code/fizzbuzz": 0,
    "code/palindrome": 0,
    "code/merge": 0,
    "code/word_count": 0,
    "sql/revenue_by_country": 6,
    "sql/top_customer": 4,
    "sql/customers_without_orders": 8,
    "sql/orders_per_month": 2,
    "math/fraction": 8,
    "math/surd": 0,
    "math/interval": 4,
    "math/decimal": 1,
}
CHOICE = {
    "task_id": "math/choice",
    "kind": "math",
    "answer": "1",
    "domain": "math",
    "prompt": "Which number is the identity of multiplication? (A) 0 (B) 1. "
    "Put the final answer in \\boxed{}.",
    "choices": ["0", "1"],
}


def main() -> None:
    solutions: dict[tuple[str, str], str] = {}
    for line in (VERIFY / "solutions.jsonl").read_text().splitlines():
        row = json.loads(line)
        if "completion" in row:
            solutions[(row["task_id"], row["solution_id"])] = row["completion"]
    rows, answers = [], {}
    for line in (VERIFY / "tasks.jsonl").read_text().splitlines():
        task = json.loads(line)
        tid = task["task_id"]
        if "fixture" in task:
            task["fixture"] = f"../verify/{task['fixture']}"
        task["prompt"] = PROMPTS[tid]
        task["domain"] = tid.split("/")[0]
        rows.append(task)
        m = CORRECT[tid]
        answers[PROMPTS[tid]] = [solutions[(tid, "correct")]] * m + [solutions[(tid, "wrong")]] * (
            8 - m
        )
    rows.append(CHOICE)
    answers[CHOICE["prompt"]] = ["\\boxed{0}"] * 6 + ["\\boxed{1}"] * 2
    (HERE / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (HERE / "answers.json").write_text(json.dumps(answers, indent=1) + "\n")


if __name__ == "__main__":
    main()
