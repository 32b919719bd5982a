"""Verify a project's items: which task, which completions, and the blocks to store.

An item is verified when the routing rule (:mod:`preflab.schema.routing`) makes it verifiable
(``metadata.verifiable``: code / sql / math) or it is an imported trajectory with a task. Its
task is ``metadata.verify_task`` (a task object of :mod:`.tasks`; ``task_id`` defaults to the
item id, ``kind`` to the route; paths absolute, as in trainer labels) or, for a trajectory, the
record's own ``verify_task``; a math item without one uses its ``reference`` as the answer.

Each candidate's verdict becomes its ``metadata.verifier`` block; a trajectory's verdict fills the
record's ``verifier`` block (kept in the item's ``metadata.trajectory``). Those are the places the
export's truth gate and verifier routing read (:mod:`preflab.io.export.truth`). This module only
plans and interprets; reading and writing the store is the caller's (``preflab verify project``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from preflab.schema import Item
from preflab.schema.routing import verifiable_route, verify_task
from preflab.schema.trajectory import Trajectory

from .pool import Submission
from .result import Verdict, fill_verifier_block
from .tasks import MathTask, parse_task
from .trajectories import completion_of

TRAJECTORY_CANDIDATE = "trajectory"


@dataclass
class ProjectPlan:
    """What to verify: a task per item id, a submission per (item, candidate)."""

    tasks: dict[str, Any] = field(default_factory=dict)
    submissions: list[Submission] = field(default_factory=list)
    #: ``item_id: field: reason`` for every verifiable item whose task is unusable
    errors: list[str] = field(default_factory=list)
    #: trajectory records by item id (their verifier block is filled, not a candidate's)
    trajectories: dict[str, dict[str, Any]] = field(default_factory=dict)


def item_task(item: Item) -> Any | None:
    """The task of a verifiable item or a trajectory with one; ``None`` when there is nothing to
    verify. Raises ``ValueError``/``ValidationError`` for a task that is there but unusable."""
    route = verifiable_route(item)
    record = (item.metadata or {}).get("trajectory")
    data = verify_task(item)
    if (
        data is None
        and isinstance(record, Mapping)
        and isinstance(record.get("verify_task"), Mapping)
    ):
        data = dict(record["verify_task"])
    if data is not None:
        defaults = {"task_id": item.id, **({"kind": route} if route else {})}
        return parse_task({**defaults, **data})
    if route == "math" and item.reference:
        return MathTask(task_id=item.id, kind="math", answer=item.reference)
    if route is not None:
        raise ValueError(
            f"a {route} item needs metadata.verify_task"
            + (" (or a reference answer)" if route == "math" else "")
        )
    return None


def plan_project(items: Iterable[Item]) -> ProjectPlan:
    plan = ProjectPlan()
    for item in items:
        try:
            task = item_task(item)
        except (ValidationError, ValueError) as e:
            plan.errors.append(f"{item.id}: metadata.verify_task: {e}")
            continue
        if task is None:
            continue
        plan.tasks[item.key] = task
        record = (item.metadata or {}).get("trajectory")
        if isinstance(record, Mapping):
            plan.trajectories[item.key] = dict(record)
            trajectory = Trajectory.model_validate(record)
            plan.submissions.append(
                Submission(item.key, completion_of(trajectory), TRAJECTORY_CANDIDATE)
            )
            continue
        for candidate in item.candidates:
            plan.submissions.append(Submission(item.key, candidate.as_text(), candidate.key))
    return plan


@dataclass
class StoredVerdicts:
    """Metadata keys to write: ``{(item_id, candidate_id): {"verifier": block}}`` and
    ``{item_id: {"trajectory": record}}``."""

    candidates: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    items: dict[str, dict[str, Any]] = field(default_factory=dict)


def verdicts_to_store(plan: ProjectPlan, verdicts: list[Verdict]) -> StoredVerdicts:
    out = StoredVerdicts()
    for sub, verdict in zip(plan.submissions, verdicts, strict=True):
        if sub.task_id in plan.trajectories:
            trajectory = Trajectory.model_validate(plan.trajectories[sub.task_id])
            out.items[sub.task_id] = {"trajectory": fill_verifier_block(trajectory, verdict).dump()}
        else:
            block = {**verdict.verifier_block(), "reason": verdict.reason}
            assert sub.solution_id is not None  # plan_project names every candidate it submits
            out.candidates[(sub.task_id, sub.solution_id)] = {"verifier": block}
    return out
