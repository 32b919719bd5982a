"""Send back, revise, and a rater's edit of their own label (issue 11), each in one transaction.

A reviewer sends a judgment back (:func:`send_back`, an open review request with a note); the
rater revises it (:func:`revise`): a new row that supersedes the old one (kept, with its
provenance), the request resolved. Exports take each rater's latest revision.

An edit is the same mechanism, not a second one (:func:`edit`): the rater opens a review request
on their own judgment and stores the revision that resolves it, in one transaction (a crash
between the two leaves nothing). A label is closed to edits once a reviewer acted on it or
anything it revises: sent it back, decided it (a demonstration), adjudicated its item, or
excluded it; a qualification answer is closed too (the rater has seen the expected answer). A
production gold answer stays open like any other label, so that the refusal never tells a rater
which items are gold (it was scored on the first answer).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ...schema.policy import settings_of
from ...store import repo
from ...store.models import ItemRow, JudgmentRow, Project, Rater, utcnow
from ...store.server_models import TELEMETRY_DECISIONS, GoldOutcome, ReviewRequest
from ..database import Database, must_get
from ..errors import ServiceError
from ..flow.submit import build_judgment
from ..permissions import Actor, ProjectRef
from .leases import lock_rater_status
from .results import judgment_result, replay_of

#: The note of the review request a rater opens on their own label to edit it.
EDIT_NOTE = "edited by the rater"


def send_back(
    session: Session, project_pk: int, judgment_pk: int, reviewer_pk: int, note: str
) -> ReviewRequest:
    row = session.get(JudgmentRow, judgment_pk)
    if row is None or row.project_pk != project_pk:
        raise ServiceError(404, f"no judgment {judgment_pk} in this project")
    if (
        session.scalar(select(JudgmentRow.pk).where(JudgmentRow.supersedes_pk == judgment_pk))
        is not None
    ):
        raise ServiceError(409, "this judgment was already revised; send back the revision instead")
    if (
        session.scalar(
            select(ReviewRequest.pk).where(
                ReviewRequest.judgment_pk == judgment_pk, ReviewRequest.status == "open"
            )
        )
        is not None
    ):
        raise ServiceError(409, "this judgment is already waiting for a revision")
    req = ReviewRequest(
        project_pk=project_pk, judgment_pk=judgment_pk, reviewer_pk=reviewer_pk, note=note
    )
    session.add(req)
    session.flush()
    return req


def revise(
    db: Database,
    project_ref: ProjectRef,
    user_pk: int,
    username: str,
    judgment_pk: int,
    data: dict[str, Any],
    *,
    idempotency_key: str | None = None,
    telemetry: dict[str, Any] | None = None,
) -> dict[str, Any]:
    with db.writing() as session:
        return revise_in(
            session,
            project_ref,
            user_pk,
            username,
            judgment_pk,
            data,
            idempotency_key=idempotency_key,
            telemetry=telemetry,
        )


def revise_in(
    session: Session,
    project_ref: ProjectRef,
    user_pk: int,
    username: str,
    judgment_pk: int,
    data: dict[str, Any],
    *,
    idempotency_key: str | None = None,
    telemetry: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """:func:`revise` in the caller's transaction (an edit opens its request in the same one)."""
    project = must_get(session, Project, project_ref.pk)
    if idempotency_key:
        first = replay_of(session, project.pk, username, idempotency_key, data, revises=judgment_pk)
        if first is not None:
            return judgment_result(session, first, created=False)
    lock_rater_status(session, project.pk, user_pk, settings_of(project_ref.settings).policy)
    old = session.get(JudgmentRow, judgment_pk)
    if (
        old is None
        or old.project_pk != project.pk
        or must_get(session, Rater, old.rater_pk).user_pk != user_pk
    ):
        raise ServiceError(404, f"no judgment {judgment_pk} of yours in this project")
    req = session.scalar(
        select(ReviewRequest)
        .where(ReviewRequest.judgment_pk == judgment_pk, ReviewRequest.status == "open")
        .with_for_update()
    )
    if req is None:
        raise ServiceError(
            409,
            "this judgment was not sent back to you; only sent-back judgments can be revised",
        )
    item_row = must_get(session, ItemRow, old.item_pk)
    parsed = build_judgment(
        session,
        project,
        item_row,
        username,
        data,
        shown_order=old.shown_order,
        started_at=None,
        idempotency_key=idempotency_key,
        telemetry=telemetry,
        # a revision of a label made with a suggestion in view is still ai_assisted (the rule
        # of AI assistance, docs/judges.md): the record goes with it
        assisted_by=old.assisted_by,
    )
    row = repo.judgment_row_from_judgment(
        project, item_row, must_get(session, Rater, old.rater_pk), parsed
    )
    row.supersedes_pk = old.pk
    session.add(row)
    session.flush()
    req.status, req.revision_pk, req.resolved_at = "resolved", row.pk, utcnow()
    return judgment_result(session, row, created=True)


# -- a rater edits their own label ---------------------------------------------------------


def _chain(session: Session, row: JudgmentRow) -> list[JudgmentRow]:
    """The judgment and every earlier revision it supersedes, newest first."""
    out = [row]
    while out[-1].supersedes_pk is not None:
        out.append(must_get(session, JudgmentRow, out[-1].supersedes_pk))
    return out


def closed_reason(session: Session, row: JudgmentRow, user_pk: int) -> str | None:
    """Why the rater ``user_pk`` may no longer edit ``row`` (their own judgment), or ``None``
    while it is open to edits."""
    later = session.scalar(select(JudgmentRow).where(JudgmentRow.supersedes_pk == row.pk))
    if later is not None:
        if must_get(session, Rater, later.rater_pk).user_pk != user_pk:
            return f"a reviewer already decided it (judgment {later.pk})"
        return f"it was revised already: edit the latest revision, judgment {later.pk}"
    if row.review_pass != 0:
        return "only production labels can be edited"
    chain = _chain(session, row)
    pks = [j.pk for j in chain]
    if any(j.excluded for j in chain):
        return "a reviewer excluded it" + (
            f" ({row.exclusion_reason})" if row.exclusion_reason else ""
        )
    if row.kind == "demonstration" and (row.body or {}).get("status", "pending") != "pending":
        return f"a reviewer {(row.body or {}).get('status')} it"
    sent_back = session.scalar(
        select(ReviewRequest.status).where(
            ReviewRequest.judgment_pk.in_(pks),
            ReviewRequest.reviewer_pk.is_distinct_from(user_pk),
            ReviewRequest.status.not_in(
                TELEMETRY_DECISIONS
            ),  # a telemetry decision sends nothing back
        )
    )
    if sent_back == "open":
        return "a reviewer sent it back: revise it from the project page, with the reviewer's note"
    if sent_back is not None:
        return "a reviewer sent it back before and reviewed the revision"
    adjudicated = session.scalar(
        select(JudgmentRow.pk).where(
            JudgmentRow.item_pk == row.item_pk,
            JudgmentRow.review_pass == 2,
            JudgmentRow.excluded.is_(False),
        )
    )
    if adjudicated is not None:
        return f"a reviewer adjudicated this item (judgment {adjudicated})"
    qualification = select(GoldOutcome.pk).where(
        GoldOutcome.judgment_pk.in_(pks), GoldOutcome.phase == "qualification"
    )
    if session.scalar(qualification) is not None:  # she saw the expected answer after it
        return "qualification answers are scored once"
    # production gold is not named: which items are gold never reaches a rater
    return None


def own_judgment(session: Session, project_pk: int, user_pk: int, judgment_pk: int) -> JudgmentRow:
    row = session.get(JudgmentRow, judgment_pk)
    if (
        row is None
        or row.project_pk != project_pk
        or must_get(session, Rater, row.rater_pk).user_pk != user_pk
    ):
        raise ServiceError(404, f"no judgment {judgment_pk} of yours in this project")
    return row


def editable(
    session: Session, project_pk: int, user_pk: int, judgment_pks: list[int]
) -> dict[int, str | None]:
    """For each of the rater's judgments: ``None`` when they may edit it, else why not."""
    return {
        pk: closed_reason(session, own_judgment(session, project_pk, user_pk, pk), user_pk)
        for pk in judgment_pks
    }


def _replayed_edit(session: Session, project_pk: int, judgment_pk: int, key: str | None) -> bool:
    """True when ``key`` already stored an edit of this judgment (revise answers the replay)."""
    if not key:
        return False
    return (
        session.scalar(
            select(JudgmentRow.pk).where(
                JudgmentRow.project_pk == project_pk,
                JudgmentRow.idempotency_key == key,
                JudgmentRow.supersedes_pk == judgment_pk,
            )
        )
        is not None
    )


def edit(
    db: Database,
    project: ProjectRef,
    user: Actor,
    judgment_pk: int,
    judgment: dict[str, Any],
    *,
    idempotency_key: str | None = None,
    telemetry: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Store a new revision of the rater's own label; the old one stays, superseded.

    One transaction: the rater's own review request on the label (409 saying why once a
    reviewer acted) and the revision that resolves it are stored together or not at all."""
    with db.writing() as s:
        if not _replayed_edit(s, project.pk, judgment_pk, idempotency_key):
            # the rater's status first, as every write of a rater's labels locks it first
            lock_rater_status(s, project.pk, user.user_pk, settings_of(project.settings).policy)
            row = own_judgment(s, project.pk, user.user_pk, judgment_pk)
            reason = closed_reason(s, row, user.user_pk)
            if reason is not None:
                raise ServiceError(409, f"judgment {judgment_pk} can no longer be edited: {reason}")
            send_back(s, project.pk, judgment_pk, user.user_pk, EDIT_NOTE)
        return revise_in(
            s,
            project,
            user.user_pk,
            user.username,
            judgment_pk,
            judgment,
            idempotency_key=idempotency_key,
            telemetry=telemetry,
        )


def label_to_edit(
    session: Session, project_pk: int, user_pk: int, judgment_pk: int
) -> dict[str, Any]:
    """The rater's own label as the edit page shows it (the item as raters see it, the order
    they saw, the answer to start from); 404 when not theirs, 409 saying why once closed."""
    row = own_judgment(session, project_pk, user_pk, judgment_pk)
    reason = closed_reason(session, row, user_pk)
    if reason is not None:
        raise ServiceError(409, f"judgment {judgment_pk} can no longer be edited: {reason}")
    item = must_get(session, ItemRow, row.item_pk)
    return {
        "item": repo.item_from_row(item).public_view(),
        "initial": {**row.body, "rationale": row.rationale},
        "shown_order": row.shown_order,
        "kind": row.kind,
    }
