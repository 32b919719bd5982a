"""The guessability check: does a task pay an answer that knows nothing?

A task whose verifier passes the empty answer, the prompt echoed back, a constant (``0``, ``1``,
``yes``, ``no``) or one of its own multiple-choice options (each option's text and its letter)
measures luck, not skill: its pass@k is inflated (a policy that always answers "B" gets
pass@1 = 1 on a task whose answer is B), and RL on it rewards the guess. Such tasks are
*flagged*; ``preflab verify rollouts`` leaves them out of pass@k and ``preflab advise`` out of the
GRPO list, and both report them with the trivial answer that passed.

Answers are given in the shape the verifier reads: for ``math`` both bare and in
``\\boxed{...}`` (the math verifier wants a marked final answer), for ``sql`` also as
``SELECT <constant>``.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .pool import Submission, verify_many
from .result import Verdict
from .tasks import AnyTask

CONSTANTS = ("0", "1", "yes", "no")


@dataclass(frozen=True)
class Guess:
    label: str
    answer: str


@dataclass
class GuessReport:
    #: task id -> the labels of the trivial answers that passed
    flagged: dict[str, list[str]] = field(default_factory=dict)
    checked: int = 0
    answers: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"checked": self.checked, "answers": self.answers, "flagged": self.flagged}


def _as_text(prompt: str | list[dict[str, Any]] | None) -> str:
    if prompt is None:
        return ""
    if isinstance(prompt, str):
        return prompt
    return "\n".join(str(m.get("content", "")) for m in prompt if isinstance(m, dict))


def trivial_answers(
    task: AnyTask,
    prompt: str | list[dict[str, Any]] | None = None,
    choices: Sequence[str] | None = None,
) -> list[Guess]:
    """Every trivial answer tried on ``task``, each once."""
    raw: list[Guess] = [Guess("empty", "")]
    text = _as_text(prompt)
    if text.strip():
        raw.append(Guess("prompt echoed", text))
    raw += [Guess(f"constant {c!r}", c) for c in CONSTANTS]
    for i, option in enumerate(choices or []):
        letter = string.ascii_uppercase[i] if i < 26 else str(i + 1)
        raw.append(Guess(f"option {letter}", option))
        raw.append(Guess(f"option letter {letter}", letter))
    out: list[Guess] = []
    for g in raw:
        out.append(g)
        if task.kind == "math" and g.answer.strip():
            out.append(Guess(f"{g.label} (boxed)", f"\\boxed{{{g.answer}}}"))
        if task.kind == "sql" and g.label.startswith("constant"):
            out.append(Guess(f"{g.label} (SELECT)", f"SELECT {g.answer}"))
    seen: set[str] = set()
    unique = []
    for g in out:
        if g.answer not in seen:
            seen.add(g.answer)
            unique.append(g)
    return unique


def check_guessability(
    tasks: Mapping[str, AnyTask],
    prompts: Mapping[str, str | list[dict[str, Any]] | None] | None = None,
    choices: Mapping[str, Sequence[str] | None] | None = None,
    *,
    workers: int = 1,
    on_done: Callable[[Verdict], None] | None = None,
) -> GuessReport:
    """Run every task's trivial answers through its verifier; flag the tasks any of them passes."""
    prompts = prompts or {}
    choices = choices or {}
    submissions: list[Submission] = []
    labels: list[str] = []
    for task_id, task in tasks.items():
        for g in trivial_answers(task, prompts.get(task_id), choices.get(task_id)):
            submissions.append(Submission(task_id, g.answer))
            labels.append(g.label)
    verdicts = verify_many(tasks, submissions, workers=workers, on_done=on_done)
    report = GuessReport(checked=len(tasks), answers=len(submissions))
    for sub, label, verdict in zip(submissions, labels, verdicts, strict=True):
        if verdict.passed:
            report.flagged.setdefault(sub.task_id, []).append(label)
    return report
