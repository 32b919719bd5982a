"""The routing rule: what an executable oracle can check goes to a verifier, not to raters.

An item is *verifiable* when its ``metadata.verifiable`` names a route (``code``, ``sql``,
``math``); ``none`` or no key means people judge it. ``metadata.verify_task`` holds the task
the verifier runs (the JSON object of :mod:`preflab.verify.tasks`); a math item may instead
rely on its ``reference`` as the expected answer. Every consumer (exports, assignment) asks
these functions, so the rule exists once.
"""

from __future__ import annotations

import json
from typing import Any

from .item import Item

VERIFIABLE_ROUTES = ("code", "sql", "math")


def verifiable_route(item: Item) -> str | None:
    return route_of_metadata(item.metadata)


def route_of_metadata(metadata: dict[str, Any] | None) -> str | None:
    """The route from an item's metadata (the store keeps it as a JSON column)."""
    route = (metadata or {}).get("verifiable")
    return route if route in VERIFIABLE_ROUTES else None


def scored_by_verifier(metadata: dict[str, Any] | None, verifiable_to_raters: bool) -> bool:
    """The routing rule: a verifiable item is scored by its verifier, not by people, unless the
    project's policy sends verifiable items to raters too (``verifiable_to_raters``)."""
    return route_of_metadata(metadata) is not None and not verifiable_to_raters


def verify_task(item: Item) -> dict[str, Any] | None:
    task = (item.metadata or {}).get("verify_task")
    return task if isinstance(task, dict) else None


def rule_ground_truth(item: Item) -> str | None:
    """What a rule-based reward needs as ``ground_truth``: the math answer, or the task's JSON
    (code and SQL carry their tests or reference query)."""
    route, task = verifiable_route(item), verify_task(item)
    if route is None:
        return None
    if route == "math":
        answer = task.get("answer") if task else None
        return answer if isinstance(answer, str) else item.reference
    return json.dumps(task, sort_keys=True) if task else None
