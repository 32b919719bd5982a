"""The verifiers as reward functions of RL trainers, each in the shape its framework calls.

Every sample names its task in a label: a JSON object of a task (see :mod:`.tasks`), or, for
math, the bare expected answer. Code and SQL tasks in labels use absolute paths.

* TRL ``GRPOTrainer(reward_funcs=[trl_reward_func])``: called as
  ``f(prompts=..., completions=..., completion_ids=..., **dataset_columns)``; the dataset has a
  ``verify_task`` column. Completions are text or conversational (the last message's content).
* verl ``custom_reward_function`` (``path=preflab/verify/adapters.py``, ``name=compute_score``):
  ``compute_score(data_source, solution_str, ground_truth, extra_info)``; the task is
  ``extra_info["verify_task"]`` when present, else ``ground_truth``.
* OpenRLHF ``--remote_rm_url path/to/adapters.py`` with ``--label_key verify_task``:
  ``reward_func(queries, prompts, labels)``, where a query is the prompt plus the response;
  returns ``{"rewards", "scores", "extra_logs"}`` as OpenRLHF's example does.
"""

from __future__ import annotations

# absolute imports only: verl and OpenRLHF load this file by its path, outside the package
import json
from collections.abc import Mapping
from typing import Any

from preflab.verify.dispatch import verify
from preflab.verify.tasks import MathTask, parse_task


def task_from_label(label: str | Mapping[str, Any], *, task_id: str = "sample"):
    """A task from a trainer's label: a task object (or its JSON), else a math answer."""
    if isinstance(label, Mapping):
        return parse_task({"task_id": task_id, **label})
    text = label.strip()
    if text.startswith("{"):
        return parse_task({"task_id": task_id, **json.loads(text)})
    return MathTask(task_id=task_id, kind="math", answer=text)


def _text(completion: Any) -> str:
    if isinstance(completion, list):  # conversational: [{"role": "assistant", "content": ...}]
        return str(completion[-1].get("content", "")) if completion else ""
    return str(completion)


def trl_reward_func(prompts: list, completions: list, verify_task: list, **kwargs) -> list[float]:
    """TRL reward function: one float per completion."""
    return [
        verify(task_from_label(label), _text(c)).reward
        for c, label in zip(completions, verify_task, strict=True)
    ]


trl_reward_func.__name__ = "preflab_verify"


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """verl custom reward function: a dict with ``score`` (verl logs the other keys).

    A row of preflab's ``verl`` export names its verifier in ``extra_info["verifier"]``
    (``preflab.verify:math``); a task of another kind is a data error, raised, never scored."""
    info = extra_info or {}
    task = task_from_label(info.get("verify_task") or ground_truth)
    named = info.get("verifier")
    if named and named != f"preflab.verify:{task.kind}":
        raise ValueError(
            f"{data_source}: extra_info.verifier is {named!r} but the task is a {task.kind} "
            "task; export the rows again with `preflab export --format verl`"
        )
    verdict = verify(task, solution_str)
    harness_ok = verdict.harness_sha256_verified is not False
    return {"score": verdict.reward, "harness_ok": float(harness_ok)}


def reward_func(
    queries: list[str], prompts: list[str], labels: list[Any], **kwargs
) -> dict[str, Any]:
    """OpenRLHF remote reward function (``--remote_rm_url`` pointing at this file)."""
    import torch

    rewards = []
    for query, prompt, label in zip(queries, prompts, labels, strict=True):
        response = query[len(prompt) :] if query.startswith(prompt) else query
        rewards.append(verify(task_from_label(label), response).reward)
    scores = torch.tensor(rewards, dtype=torch.float32)
    return {"rewards": scores, "scores": scores, "extra_logs": {"verifier_reward": scores}}
