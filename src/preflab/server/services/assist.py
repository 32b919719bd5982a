"""AI assistance in the labelling UI (issue 30 item 3; ``docs/judges.md``, "AI assistance").

A project opts in with ``policy.ai_assist`` (a judge's model): the label page shows that judge's
latest label on the item, with its rationale, as a suggestion. Imported step verdicts taken as
suggestions (``policy.imported_step_verdicts == "suggestion"``) follow the same rule.

The server decides provenance, never the client: :func:`served` reads what the page shows and
:func:`record` stores it on the rater's live lease (``assignments.suggestion``, migration 0018),
in a write transaction of the page's own, only when the lease does not hold it yet; the submit flow (``flow/lane.py: run_submit``) reads that record with the
lease and stores the label ``source: ai_assisted`` with ``provenance.assisted_by``. A label whose
lease served nothing is stored exactly as before.

Gold and qualification items never show a suggestion: they measure the rater alone (a rater who
copied a suggestion there would pass on the judge's accuracy, and gold answers are a check of the
person the export later trusts).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ...schema import content_hash
from ...schema.policy import Policy
from ...store.models import JudgmentRow, Rater
from ...store.server_models import Assignment

#: the only lease role that shows suggestions (gold and qualification test the rater alone)
ASSISTED_ROLE = "production"
#: ``AssistRecord.origin`` of imported step verdicts shown as suggestions
IMPORTED_STEPS = "imported_step_verdicts"


def judge_rater_key(model: str) -> str:
    """The rater id a judge's labels are stored under (``judge.runner.judge_rater``'s rule)."""
    return f"judge:{model}"


def _latest_judge_label(
    session: Session, project_pk: int, item_pk: int, model: str
) -> JudgmentRow | None:
    """The judge's latest label on the item that is a label (an excluded, order-inconsistent
    verdict is no preference and is not shown)."""
    return session.scalar(
        select(JudgmentRow)
        .join(Rater, Rater.pk == JudgmentRow.rater_pk)
        .where(
            JudgmentRow.project_pk == project_pk,
            JudgmentRow.item_pk == item_pk,
            JudgmentRow.source == "ai",
            JudgmentRow.excluded.is_(False),
            Rater.project_pk == project_pk,
            Rater.rater_key == judge_rater_key(model),
        )
        .order_by(JudgmentRow.pk.desc())
        .limit(1)
    )


def _names(shown: list[str]) -> dict[str, str]:
    """Answer names as the label page shows them (A/B for a pair, else 1, 2, ...)."""
    if len(shown) == 2:
        return {shown[0]: "A", shown[1]: "B"}
    return {cid: str(i + 1) for i, cid in enumerate(shown)}


def describe(row: JudgmentRow, shown: list[str]) -> dict[str, Any]:
    """What the page shows of a judge's label: its kind, lines of plain text (rendered escaped by
    the template, never as HTML) and its rationale."""
    names = _names(shown)

    def name(cid: str) -> str:
        return f"Answer {names.get(cid, cid)}"

    body, lines = row.body, []
    if row.kind == "pairwise":
        a, b = body["shown_order"]
        winner, strength = body["winner"], body.get("strength")
        if winner == "tie":
            lines.append("Verdict: a tie")
        else:
            better = a if winner == "a" else b
            words = {1: "slightly better", 2: "better", 3: "much better"}.get(
                strength or 0, "better"
            )
            lines.append(f"Verdict: {name(better)} is {words}")
        if strength is not None:
            lines.append(f"Strength: {strength} of 3")
    elif row.kind == "ranking":
        order = body["order"]
        lines.append("Ranking: " + " > ".join(" = ".join(name(c) for c in tier) for tier in order))
    elif row.kind == "rubric":
        lines.append(f"Grades of {name(body['candidate_id'])}:")
        lines += [f"{dim}: {score:g}" for dim, score in body["scores"].items()]
        if body.get("vetoes_failed"):
            lines.append("Vetoes failed: " + ", ".join(body["vetoes_failed"]))
    elif row.kind == "unary":
        lines.append(
            f"{name(body['candidate_id'])}: {'thumbs up' if body['label'] else 'thumbs down'}"
        )
    elif row.kind == "steps":
        marks = {1: "+1", 0: "0", -1: "−1"}
        lines.append(f"Step verdicts of {name(body['candidate_id'])}:")
        lines += [f"Step {i + 1}: {marks[v]}" for i, v in enumerate(body.get("verdicts") or [])]
    else:  # a demonstration: the judge's text is the suggestion
        lines.append(str(body.get("text") or ""))
    return {"kind": row.kind, "lines": lines, "rationale": row.rationale}


def served(
    session: Session,
    project_pk: int,
    policy: Policy,
    assignment_id: str,
    step_suggestions: dict[str, int] | None,
) -> tuple[dict[str, Any] | None, bool, list[dict[str, Any]] | None]:
    """What the label page shows with the rater's live lease: the judge's suggestion (``None``:
    none), whether the imported step suggestions may be shown, and the lease's suggestion record
    to store (:func:`record`; ``None``: it already holds what is shown). A read."""
    lease = session.scalar(
        select(Assignment).where(
            Assignment.project_pk == project_pk,
            Assignment.lease_id == assignment_id,
            Assignment.status == "active",
        )
    )
    if lease is None or lease.role != ASSISTED_ROLE:
        return None, False, None
    records: list[dict[str, Any]] = []
    shown_judge = None
    if policy.ai_assist:
        row = _latest_judge_label(session, project_pk, lease.item_pk, policy.ai_assist)
        if row is not None:
            shown_judge = describe(row, list(lease.shown_order or []))
            records.append(
                {
                    "origin": "judge",
                    "content_hash": row.content_hash,
                    "judgment_id": row.pk,
                    "judge": policy.ai_assist,
                }
            )
    if step_suggestions:
        records.append(
            {"origin": IMPORTED_STEPS, "content_hash": content_hash(step_suggestions, length=64)}
        )
    before = list(lease.suggestion or [])
    added = [r for r in records if r not in before]
    return shown_judge, True, (before + added if added else None)


def record(
    session: Session, project_pk: int, assignment_id: str, suggestion: list[dict[str, Any]]
) -> None:
    """Store on the live lease what its page showed (what :func:`served` returned), adding to
    what it holds, never removing: once a lease served a suggestion the rater saw it. A lease
    submitted or released meanwhile is left as it is (its label, if any, was made without)."""
    lease = session.scalar(
        select(Assignment)
        .where(
            Assignment.project_pk == project_pk,
            Assignment.lease_id == assignment_id,
            Assignment.status == "active",
        )
        .with_for_update()
    )
    if lease is not None:
        before = list(lease.suggestion or [])
        lease.suggestion = before + [r for r in suggestion if r not in before]
