"""Reward functions of ``preflab rl`` in TRL's shape: ``f(prompts, completions, **columns)``.

* :class:`VerifierReward`: each completion judged by its task's verifier
  (:func:`preflab.verify.pool.verify_many`, the sandboxes of ``docs/verify.md``): 1.0 when every
  check passes, else 0.0. The task comes from the dataset's ``task_id`` column (TRL passes a
  dataset's extra columns to reward functions, one value per completion).
* :func:`format_reward`: 1.0 when the completion has the shape its verifier reads — a marked
  final answer (``\\boxed{...}`` or an ``answer:`` line) for math, a fenced code block for code
  and stdio tasks, a fenced block or a ``SELECT``/``WITH`` statement for SQL — else 0.0. A small
  weight teaches the shape without paying for it more than for being right.
* :class:`LanguageDriftMonitor`: the share of letters outside the prompt's script
  (:mod:`.rl_monitors`); a reward function of weight 0, so TRL logs it per step
  (``rewards/language_drift/mean``) and in its completions table without it moving the policy.

``--reward rm`` uses the reward model alone (:meth:`.score.RewardScorer.reward_function`),
``verifier`` the verifier plus the format reward, ``mix`` all three; TRL sums them with
``reward_weights`` (``GRPOConfig``): ``r = w_v · verifier + w_f · format + w_rm · rm``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..verify.math_answer import extract_final_answer
from ..verify.pool import Submission, verify_many
from ..verify.tasks import AnyTask
from .data import as_text
from .rl_monitors import language_drift

FENCE = re.compile(r"```[^\n`]*\n.*?```", re.DOTALL)
SQL_STATEMENT = re.compile(r"^\s*(select|with)\b", re.IGNORECASE | re.MULTILINE)


def _text(value: Any) -> str:
    """A completion as text: TRL hands chat completions as a list of messages."""
    if isinstance(value, list):
        return "\n\n".join(str(m.get("content", "")) for m in value if isinstance(m, dict))
    return as_text(value)


def has_format(kind: str, completion: str) -> bool:
    """Whether ``completion`` has the shape the ``kind`` verifier reads (see the module doc)."""
    if kind == "math":
        return extract_final_answer(completion) is not None
    if kind in ("code", "stdio"):
        return FENCE.search(completion) is not None
    if kind == "sql":
        return FENCE.search(completion) is not None or SQL_STATEMENT.search(completion) is not None
    return bool(completion.strip())


class VerifierReward:
    """The verifier as a TRL reward function (``__name__`` ``verifier``)."""

    __name__ = "verifier"

    def __init__(self, tasks: Mapping[str, AnyTask], *, workers: int = 1) -> None:
        self.tasks = dict(tasks)
        self.workers = workers
        self.calls = 0

    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], task_id: Sequence[str], **_: Any
    ) -> list[float]:
        subs = [Submission(t, _text(c)) for t, c in zip(task_id, completions, strict=True)]
        self.calls += len(subs)
        verdicts = verify_many(self.tasks, subs, workers=self.workers)
        return [v.reward for v in verdicts]


def format_reward(tasks: Mapping[str, AnyTask]) -> Callable[..., list[float]]:
    def format_(
        prompts: Sequence[Any], completions: Sequence[Any], task_id: Sequence[str], **_: Any
    ) -> list[float]:
        return [
            1.0 if has_format(tasks[t].kind, _text(c)) else 0.0
            for t, c in zip(task_id, completions, strict=True)
        ]

    format_.__name__ = "format"
    return format_


class LanguageDriftMonitor:
    """Logged as a reward of weight 0: TRL records its mean per step, it moves nothing."""

    __name__ = "language_drift"

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **_: Any) -> list[float]:
        return [
            language_drift(_text(p), _text(c)) for p, c in zip(prompts, completions, strict=True)
        ]
