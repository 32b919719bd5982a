"""``preflab verify rollouts TASKS ROLLOUTS``: score sampled rollouts with the verifiers, then
pass@k per task, per domain and overall (:mod:`.passk`), leaving out guessable tasks
(:mod:`.guess`).

Tasks rows may carry what sampling and reporting need beside the task itself — ``prompt``,
``domain``, ``choices`` (multiple-choice options) — so one file can feed ``preflab sample`` and
this command; they are read here and never reach the verifier. A rollout names its task with
``metadata.task_id`` (what ``preflab sample`` writes) or a top-level ``task_id``; its answer is
``response`` (or ``completion``). A task's **domain** is the task row's ``domain``, else the
rollouts' first ``domains`` entry, else the task's ``kind``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .guess import GuessReport, check_guessability
from .passk import DEFAULT_KS, TaskCounts, summarise
from .pool import Submission, verify_many
from .result import Verdict
from .tasks import AnyTask, TaskFileError, _errors, parse_task, read_jsonl

#: keys of a tasks row that describe the task for sampling and reports, not for the verifier
META_KEYS = ("prompt", "domain", "choices")


@dataclass
class TaskMeta:
    prompt: str | list[dict[str, Any]] | None = None
    domain: str | None = None
    choices: list[str] | None = None


def load_tasks_with_meta(path: Path) -> tuple[dict[str, AnyTask], dict[str, TaskMeta]]:
    """:func:`preflab.verify.tasks.load_tasks`, with ``prompt``, ``domain`` and ``choices``
    allowed on a row and returned beside the tasks."""
    tasks: dict[str, AnyTask] = {}
    meta: dict[str, TaskMeta] = {}
    errors: list[str] = []
    for number, data in read_jsonl(path):
        where = f"{path}:{number}"
        extra = {k: data.pop(k) for k in META_KEYS if k in data}
        domain, choices = extra.get("domain"), extra.get("choices")
        if domain is not None and not isinstance(domain, str):
            errors.append(f"{where}: domain: expected a string")
            continue
        if choices is not None and not (
            isinstance(choices, list) and all(isinstance(c, str) for c in choices)
        ):
            errors.append(f"{where}: choices: expected a list of strings")
            continue
        try:
            task = parse_task(data, base_dir=path.parent)
        except (ValidationError, ValueError) as e:
            errors.extend(_errors(where, e))
            continue
        if task.task_id in tasks:
            errors.append(f"{where}: task_id: duplicate task id {task.task_id!r}")
        tasks[task.task_id] = task
        meta[task.task_id] = TaskMeta(extra.get("prompt"), domain, choices)
    if errors:
        raise TaskFileError(
            "\n".join(errors) + "\nfix these lines and run again; nothing was verified"
        )
    return tasks, meta


@dataclass
class Rollout:
    line: int
    task_id: str
    completion: str
    row: dict[str, Any]


def read_rollouts(path: Path, tasks: dict[str, AnyTask]) -> list[Rollout]:
    out, errors = [], []
    for number, row in read_jsonl(path):
        where = f"{path}:{number}"
        meta: dict[str, Any] = row["metadata"] if isinstance(row.get("metadata"), dict) else {}
        task_id = meta.get("task_id", row.get("task_id"))
        text = row.get("response", row.get("completion"))
        if not isinstance(task_id, str):
            errors.append(f"{where}: metadata.task_id: missing (the task this answer is for)")
        elif task_id not in tasks:
            errors.append(f"{where}: metadata.task_id: {task_id!r} is not a task of the tasks file")
        elif not isinstance(text, str):
            errors.append(f"{where}: response: expected the answer's text")
        else:
            out.append(Rollout(number, task_id, text, row))
    if errors:
        raise TaskFileError(
            "\n".join(errors[:50]) + "\nfix these lines and run again; nothing was verified"
        )
    return out


@dataclass
class RolloutsResult:
    scored: list[dict[str, Any]]
    report: dict[str, Any]
    verdicts: list[Verdict] = field(default_factory=list)


def _domain(task: AnyTask, meta: TaskMeta | None, rollouts: Sequence[Rollout]) -> str:
    if meta is not None and meta.domain:
        return meta.domain
    for r in rollouts:
        domains = r.row.get("domains")
        if isinstance(domains, list) and domains and isinstance(domains[0], str):
            return domains[0]
    return task.kind


def score_rollouts(
    tasks: dict[str, AnyTask],
    meta: dict[str, TaskMeta],
    rollouts: Sequence[Rollout],
    *,
    ks: Sequence[int] = DEFAULT_KS,
    resamples: int = 1000,
    seed: int = 0,
    workers: int = 1,
    guess: bool = True,
    on_done: Callable[[Verdict], None] | None = None,
) -> RolloutsResult:
    """Verify every rollout; pass@k over the tasks that have rollouts and are not guessable."""
    started = time.monotonic()
    submissions = [Submission(r.task_id, r.completion) for r in rollouts]
    verdicts = verify_many(tasks, submissions, workers=workers, on_done=on_done)
    verify_s = time.monotonic() - started

    by_task: dict[str, list[Rollout]] = {}
    rewards: dict[str, list[float]] = {}
    for r, v in zip(rollouts, verdicts, strict=True):
        by_task.setdefault(r.task_id, []).append(r)
        rewards.setdefault(r.task_id, []).append(v.reward)
    domains = {tid: _domain(tasks[tid], meta.get(tid), rs) for tid, rs in by_task.items()}

    guessed = GuessReport()
    if guess:
        sampled = {tid: tasks[tid] for tid in by_task}
        prompts: dict[str, str | list[dict[str, Any]] | None] = {}
        choices: dict[str, Any] = {}
        for tid, rs in by_task.items():
            m: TaskMeta = meta.get(tid) or TaskMeta()
            prompts[tid] = m.prompt if m.prompt is not None else rs[0].row.get("prompt")
            row_meta = rs[0].row.get("metadata") or {}
            choices[tid] = m.choices if m.choices is not None else row_meta.get("choices")
        guessed = check_guessability(sampled, prompts, choices, workers=workers)

    counts = [
        TaskCounts(tid, domains[tid], len(values), sum(1 for x in values if x > 0))
        for tid, values in rewards.items()
        if tid not in guessed.flagged
    ]
    summary = summarise(counts, ks, resamples=resamples, seed=seed)
    prompts_out = {}
    for tid, rs in by_task.items():
        given = meta.get(tid)
        prompts_out[tid] = (
            given.prompt
            if given is not None and given.prompt is not None
            else rs[0].row.get("prompt")
        )
    # per-task details the advisor needs (every task, the guessable ones marked)
    for tid, values in rewards.items():
        entry = summary["tasks"].setdefault(
            tid, {"domain": domains[tid], "n": len(values), "c": sum(1 for x in values if x > 0)}
        )
        entry["kind"] = tasks[tid].kind
        entry["prompt"] = prompts_out[tid]
        entry["rewards"] = values
        entry["guessable"] = guessed.flagged.get(tid, [])
        if tasks[tid].provenance():  # who wrote and approved the task, which version
            entry["provenance"] = tasks[tid].provenance()
        first = by_task[tid][0]
        entry["draft"] = first.completion  # the policy's own attempt (a demonstration's draft)
        entry["model"] = first.row.get("model")

    scored = []
    for r, v in zip(rollouts, verdicts, strict=True):
        row = dict(r.row)
        row["reward"] = v.reward
        meta_out = dict(row.get("metadata") or {})
        meta_out.setdefault("task_id", r.task_id)
        meta_out["verdict"] = {"passed": v.passed, "reason": v.reason, "kind": v.kind}
        row["metadata"] = meta_out
        scored.append(row)

    report = {
        **summary,
        "rollouts": len(rollouts),
        "passed": sum(v.passed for v in verdicts),
        "verify_s": round(verify_s, 3),
        "rollouts_per_s": round(len(rollouts) / verify_s, 1) if verify_s > 0 else None,
        "guessability": {**guessed.as_dict(), "enabled": guess},
        "excluded_from_pass_at_k": sorted(guessed.flagged),
    }
    return RolloutsResult(scored, report, list(verdicts))
