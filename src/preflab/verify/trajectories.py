"""Verify RLHF-2026.11 trajectories and fill their ``verifier`` block.

A trajectory's task is the task whose ``task_id`` equals its ``trajectory_id``, or an inline
``verify_task`` object in the record (an extra key, kept). What is judged is the last assistant
turn: its ``tool_call.args.files`` (``{path: text}``) for code when present, else its
``content``, else its ``prm_steps`` texts joined. Trajectories without a task pass unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from preflab.schema.trajectory import Trajectory

from .dispatch import verify
from .result import fill_verifier_block
from .tasks import parse_task


def completion_of(trajectory: Trajectory) -> str | dict[str, str]:
    assistant = [t for t in trajectory.turns if t.role == "assistant"]
    if not assistant:
        return ""
    last = assistant[-1]
    files = last.tool_call.args.get("files") if last.tool_call else None
    if isinstance(files, dict) and all(isinstance(v, str) for v in files.values()):
        return files
    if last.content:
        return last.content
    return "\n\n".join(s.text for s in last.prm_steps or [])


def task_for(record: Mapping[str, Any], tasks: Mapping[Any, Any]):
    inline = record.get("verify_task")
    if isinstance(inline, Mapping):
        return parse_task(dict(inline))
    return tasks.get(record.get("trajectory_id"))


def verify_trajectory(
    record: dict[str, Any], tasks: Mapping[str, Any]
) -> tuple[dict[str, Any], Any]:
    """``(record with the verifier block filled, verdict)``; the record unchanged and ``None``
    when it has no task."""
    trajectory = Trajectory.model_validate(record)
    task = task_for(record, tasks)
    if task is None:
        return trajectory.dump(), None
    verdict = verify(task, completion_of(trajectory))
    return fill_verifier_block(trajectory, verdict).dump(), verdict
