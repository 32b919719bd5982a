"""Whether an item's reference may be used: the two-expert rule of
:mod:`preflab.schema.authorship`, decided here because agreement of two math answers is the math
verifier's call (``7/12`` and ``\\frac{7}{12}`` agree)."""

from __future__ import annotations

from typing import Any

from preflab.schema.authorship import ReferenceProvenance, ReferenceState

from .math_answer import verify_math
from .tasks import MathTask


def _normal(text: str) -> str:
    return " ".join(text.replace("$", "").split()).lower()


def answers_agree(a: str, b: str, route: str | None) -> bool:
    if _normal(a) == _normal(b):
        return True
    if route == "math":
        task = MathTask(task_id="reference", kind="math", answer=a)
        return verify_math(task, f"\\boxed{{{b}}}").passed
    return False


def reference_status(metadata: dict[str, Any] | None, reference: str | None) -> ReferenceState:
    """Where an item's reference stands (see the module docstring)."""
    raw = (metadata or {}).get("reference_provenance")
    if raw is None:
        return "unrecorded"
    prov = ReferenceProvenance.model_validate(raw)
    if not prov.require_two:
        return "single"
    if len(prov.authors) < 2:
        return "awaiting_second"
    route = (metadata or {}).get("verifiable")
    first, second = prov.authors[0].answer, prov.authors[1].answer
    if answers_agree(first, second, route if isinstance(route, str) else None):
        return "agreed"
    if prov.adjudicator is not None and reference:
        return "adjudicated"
    return "disagree"
