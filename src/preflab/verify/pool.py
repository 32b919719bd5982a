"""Batches: solutions JSONL against tasks JSONL on a pool of worker processes.

Solutions file, one per line: ``{"task_id": ..., "completion": "model text"}`` or, for code,
``{"task_id": ..., "files": {"solution.py": "..."}}``; an optional ``solution_id`` is kept in
the results. Workers are processes (spawned, so no lock or thread of the parent is inherited):
each sandboxed run gets the worker's own uid. (Math and SQL are judged in their own killable
judge workers, :mod:`.worker`, from any thread.)
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .dispatch import verify
from .result import Verdict
from .tasks import TaskFileError, read_jsonl


@dataclass(frozen=True)
class Submission:
    task_id: str
    completion: str | Mapping[str, str]
    solution_id: str | None = None


def load_solutions(path: Path, known_tasks: Iterable[str]) -> list[Submission]:
    known, out, errors = set(known_tasks), [], []
    for number, row in read_jsonl(path):
        where = f"{path}:{number}"
        task_id = row.get("task_id")
        completion = row.get("completion", row.get("files"))
        if not isinstance(task_id, str) or task_id not in known:
            errors.append(f"{where}: task_id: {task_id!r} is not a task of the tasks file")
        elif not isinstance(completion, str | dict):
            errors.append(f"{where}: completion: give `completion` (text) or `files` (object)")
        else:
            out.append(Submission(task_id, completion, row.get("solution_id")))
    if errors:
        raise TaskFileError(
            "\n".join(errors) + "\nfix these lines and run again; nothing was verified"
        )
    return out


def default_workers() -> int:
    return max(1, min(8, (os.cpu_count() or 1)))


def verify_many(
    tasks: Mapping[str, Any],
    submissions: list[Submission],
    *,
    workers: int = 1,
    on_done: Callable[[Verdict], None] | None = None,
) -> list[Verdict]:
    """Verdicts in the order of ``submissions``; ``on_done`` runs as each one finishes."""
    results: list[Verdict | None] = [None] * len(submissions)
    if workers <= 1:
        return [
            _finish(verify(tasks[sub.task_id], sub.completion), sub, on_done) for sub in submissions
        ]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {
            pool.submit(verify, tasks[sub.task_id], sub.completion): k
            for k, sub in enumerate(submissions)
        }
        for future in as_completed(futures):
            k = futures[future]
            results[k] = _finish(future.result(), submissions[k], on_done)
    return [verdict for verdict in results if verdict is not None]  # every one is set by now


def _finish(verdict: Verdict, sub: Submission, on_done) -> Verdict:
    if on_done:
        on_done(verdict)
    return verdict


def result_row(verdict: Verdict, sub: Submission) -> dict[str, Any]:
    row = verdict.to_json()
    if sub.solution_id is not None:
        row["solution_id"] = sub.solution_id
    return row
