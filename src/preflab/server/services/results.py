"""What a rater is told about a stored judgment (its id, item, kind, replayed or not, and a
qualification answer's feedback), and the idempotency rule that finds the first of a retried
request (:func:`replay_of`): shared by submitting, revising and editing."""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import select
from sqlalchemy.orm import Session

from ...store.models import ItemRow, JudgmentRow, Rater
from ...store.server_models import Assignment, GoldOutcome, RaterStatus
from ..database import must_get
from ..errors import ServiceError
from ..flow.common import aware
from ..gold import expected_judgment, qualification_record


def judgment_result(
    session: Session,
    row: JudgmentRow,
    *,
    created: bool,
    status: RaterStatus | None = None,
    gold_possible: bool = True,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "judgment_id": row.pk,
        "item_id": must_get(session, ItemRow, row.item_pk).item_key,
        "kind": row.kind,
        "created": created,
        "replayed": not created,
        "submitted_at": aware(row.submitted_at).isoformat() if row.submitted_at else None,
    }
    outcome = (
        session.scalar(select(GoldOutcome).where(GoldOutcome.judgment_pk == row.pk))
        if gold_possible
        else None
    )
    if outcome is not None and outcome.phase == "qualification":
        item = must_get(session, ItemRow, row.item_pk)
        # a qualification outcome is only ever recorded for an item with gold
        expected = expected_judgment(item.item_key, cast(dict[str, Any], item.gold))
        body = expected.model_dump(
            mode="json",
            by_alias=True,
            exclude_none=True,
            exclude={"provenance", "item_id", "rationale"},
        )
        out["gold"] = {
            "correct": outcome.correct,
            "expected": body,
            "explanation": (item.gold or {}).get("explanation"),
            # the order an explanation's "response 1, 2 ..." refers to; the page maps it to the shown order
            "item_order": [c.candidate_key for c in item.candidates],
        }
        record = qualification_record(session, row.project_pk, outcome.user_pk)
        st = status or session.scalar(
            select(RaterStatus).where(
                RaterStatus.project_pk == row.project_pk, RaterStatus.user_pk == outcome.user_pk
            )
        )
        out["qualification"] = {
            "status": st.status if st else "qualifying",
            "answered": len(record),
            "correct": sum(record),
        }
    return out


def replay_of(
    session: Session,
    project_pk: int,
    username: str,
    key: str,
    data: dict[str, Any],
    *,
    lease_id: str | None = None,
    revises: int | None = None,
) -> JudgmentRow | None:
    """The judgment this rater stored under idempotency ``key`` if this request repeats it,
    ``None`` if the key is new to them (keys are per rater: another rater's equal key is not
    theirs, 0015); 409 if they used it for another request (another assignment or judgment, or
    a different answer): a retry must send the same body."""
    first = session.scalar(
        select(JudgmentRow)
        .join(Rater, Rater.pk == JudgmentRow.rater_pk)
        .where(
            JudgmentRow.project_pk == project_pk,
            Rater.rater_key == username,
            JudgmentRow.idempotency_key == key,
        )
    )
    if first is None:
        return None
    if lease_id is not None:
        same_target = (
            session.scalar(select(Assignment.lease_id).where(Assignment.judgment_pk == first.pk))
            == lease_id
        )
    else:
        same_target = first.supersedes_pk == revises
    if not same_target or not same_answer(first, data):
        raise ServiceError(
            409,
            f"idempotency key {key!r} was already used for a different submission; "
            "send the same body to get the first result again, or a fresh key for a new answer",
            [
                {
                    "loc": ["body", "idempotency_key"],
                    "msg": "already used with a different body",
                    "type": "idempotency_conflict",
                }
            ],
        )
    return first


def same_answer(row: JudgmentRow, data: dict[str, Any]) -> bool:
    body = {
        k: v for k, v in (data or {}).items() if k not in ("item_id", "rationale", "provenance")
    }
    stored = {k: v for k, v in row.body.items() if k in body}
    return stored == body and (data or {}).get("rationale") == row.rationale
