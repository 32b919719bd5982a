"""The rules of "next task", as decisions over values the caller has fetched.

Used by the flow (:func:`preflab.server.flow.lane.run_next`, on every executor) and by the
tests' ORM oracle; neither decides anything itself.
"""

from __future__ import annotations

import random
import secrets
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from ...schema import kinds_for_item
from ...schema.policy import Policy
from ..permissions import ProjectRef
from .common import aware

#: How many candidate rows one pick locks at a time (PostgreSQL skips rows others hold).
PICK_BATCH = 4


def no_task(reason: str, detail: str) -> dict[str, Any]:
    return {"task": None, "reason": reason, "detail": detail}


def no_items() -> dict[str, Any]:
    return no_task("no_items", "no more items for you in this project right now")


def status_refusal(status: str | None, reason: str) -> dict[str, Any] | None:
    """Suspended and failed raters get no task (new and qualifying ones go on to qualify)."""
    if status == "suspended":
        return no_task("suspended", f"you are suspended from this project: {reason}")
    if status == "failed":
        return no_task("not_qualified", "you did not pass this project's qualification")
    return None


def domain_refusal(policy: Policy, verified: Iterable[str]) -> dict[str, Any] | None:
    """The project's ``required_domains`` the rater has no verified credential in."""
    missing = sorted(set(policy.required_domains) - set(verified))
    if missing:
        return no_task("domain_required", f"this project needs verified credentials in {missing}")
    return None


def cap_refusal(policy: Policy, done: int) -> dict[str, Any] | None:
    """``max_items_per_rater``: submitted non-qualification items count."""
    cap = policy.max_items_per_rater
    if cap is not None and done >= cap:
        return no_task("limit_reached", f"you reached this project's limit of {cap} items")
    return None


def roles_to_try(policy: Policy, rng: random.Random) -> tuple[str, ...]:
    """Production gold at the project's rate (falling back to production), else production."""
    if policy.gold_rate > 0 and rng.random() < policy.gold_rate:
        return ("gold", "production")
    return ("production",)


def has_room(filled: int, live: int, target: int) -> bool:
    """Exact k: submitted labels plus live leases stay below the item's target."""
    return filled + live < target


def shown_order(candidate_ids: Sequence[str], policy: Policy, rng: random.Random) -> list[str]:
    """The order the rater sees the answers in (shuffled when the policy says so)."""
    ids = list(candidate_ids)
    if policy.randomise_order:
        rng.shuffle(ids)
    return ids


def new_lease_id() -> str:
    return "asg_" + secrets.token_urlsafe(16)


def lease_expiry(now: datetime, policy: Policy) -> datetime:
    return now + timedelta(seconds=policy.lease_seconds)


def settings_version(project: ProjectRef) -> int:
    return int((project.settings or {}).get("version", 1))


def task_payload(
    project: ProjectRef,
    view: dict[str, Any],
    lease_id: str,
    role: str,
    shown: Sequence[str],
    expires_at: datetime,
) -> dict[str, Any]:
    """What the rater gets: the item's public view in the shown order. Gold looks the same."""
    by_id = {c["id"]: c for c in view["candidates"]}
    return {
        "assignment_id": lease_id,
        "project": project.name,
        "phase": "qualification" if role == "qualification" else "production",
        "kinds": kinds_for_item(project.kinds, len(shown), view.get("kinds")),
        "rubric": {"id": project.rubric_key, "version": project.rubric_version}
        if project.rubric_key
        else None,
        "item": {**view, "candidates": [by_id[c] for c in shown]},
        "shown_order": list(shown),
        "expires_at": aware(expires_at).isoformat(),
        "settings_version": settings_version(project),
    }
