"""A rater edits their own recent labels until a reviewer has acted on them (issue 11).

An edit is the existing revision mechanism, not a second one: the rater opens a review request
on their own judgment (:func:`preflab.server.judging.send_back`, the requester being the rater)
and :func:`preflab.server.judging.revise` stores the new answer as a row that supersedes the old
one (kept, with its provenance); exports take each rater's latest revision. A label is closed to
edits once a reviewer acted on it or anything it revises: sent it back, decided it (a
demonstration), adjudicated its item, or excluded it; a qualification answer is closed too (the
rater has seen the expected answer). A production gold answer stays open like any other label,
so that the refusal never tells a rater which items are gold (it was scored on the first answer).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlalchemy import select
from sqlalchemy.orm import Session

from ...store.models import ItemRow, JudgmentRow, Rater
from ...store.server_models import TELEMETRY_DECISIONS, GoldOutcome, ReviewRequest
from .. import judging
from ..api import DbId, ReviseIn
from ..assign import lock_rater_status
from ..database import Database
from ..judging import JudgingError
from ..permissions import Ctx, guard
from ..policy import settings_of
from . import models as m
from .common import ok

router = APIRouter()

#: The note of the review request a rater opens on their own label to edit it.
EDIT_NOTE = "edited by the rater"


def _chain(session: Session, row: JudgmentRow) -> list[JudgmentRow]:
    """The judgment and every earlier revision it supersedes, newest first."""
    out = [row]
    while out[-1].supersedes_pk is not None:
        out.append(session.get(JudgmentRow, out[-1].supersedes_pk))
    return out


def closed_reason(session: Session, row: JudgmentRow, user_pk: int) -> str | None:
    """Why the rater ``user_pk`` may no longer edit ``row`` (their own judgment), or ``None``
    while it is open to edits."""
    later = session.scalar(select(JudgmentRow).where(JudgmentRow.supersedes_pk == row.pk))
    if later is not None:
        if session.get(Rater, later.rater_pk).user_pk != user_pk:
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
        or session.get(Rater, row.rater_pk).user_pk != user_pk
    ):
        raise JudgingError(404, f"no judgment {judgment_pk} of yours in this project")
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


def edit(db: Database, ctx: Ctx, judgment_pk: int, body: ReviseIn) -> dict[str, Any]:
    """Store a new revision of the rater's own label; the old one stays, superseded.

    One transaction: the rater's own review request on the label (409 saying why once a
    reviewer acted) and the revision that resolves it are stored together or not at all."""
    telemetry = (
        body.telemetry.model_dump(mode="json", exclude_none=True) if body.telemetry else None
    )
    project, user = ctx.project, ctx.user
    with db.writing() as s:
        if not _replayed_edit(s, project.pk, judgment_pk, body.idempotency_key):
            # the rater's status first, as every write of a rater's labels locks it first
            lock_rater_status(s, project.pk, user.user_pk, settings_of(project.settings).policy)
            row = own_judgment(s, project.pk, user.user_pk, judgment_pk)
            reason = closed_reason(s, row, user.user_pk)
            if reason is not None:
                raise JudgingError(409, f"judgment {judgment_pk} can no longer be edited: {reason}")
            judging.send_back(s, project.pk, judgment_pk, user.user_pk, EDIT_NOTE)
        return judging.revise_in(
            s,
            project,
            user.user_pk,
            user.username,
            judgment_pk,
            body.judgment,
            idempotency_key=body.idempotency_key,
            telemetry=telemetry,
        )


# -- routes --------------------------------------------------------------------------------------


@router.post(
    "/api/v1/projects/{project}/judgments/{judgment_id}/edit",
    tags=["labelling"],
    response_model=m.JudgmentAckOut,
)
def edit_judgment(
    request: Request,
    project: str,
    judgment_id: DbId,
    body: ReviseIn,
    ctx: Ctx = guard("project.label"),
) -> Response:
    """Edit one of your own labels: a new revision that supersedes it (the old one is kept).
    409 once a reviewer has acted on it (sent back, decided, adjudicated or excluded)."""
    out = edit(request.app.state.db, ctx, judgment_id, body)
    return ok(out, 201 if out["created"] else 200)


@router.get("/p/{project}/edit/{judgment_id}", include_in_schema=False)
def edit_page(
    request: Request, project: str, judgment_id: DbId, ctx: Ctx = guard("project.label")
) -> Response:
    from ...store.repo import item_from_row
    from ..pages.views import error_page, judgment_page

    with request.app.state.db.reading() as s:
        try:
            row = own_judgment(s, ctx.project.pk, ctx.user.user_pk, judgment_id)
        except JudgingError as exc:
            return error_page(request, exc.status, exc.message)
        reason = closed_reason(s, row, ctx.user.user_pk)
        if reason is not None:
            return error_page(
                request, 409, f"judgment {judgment_id} can no longer be edited: {reason}"
            )
        item = item_from_row(s.get(ItemRow, row.item_pk)).public_view()
        initial = {**row.body, "rationale": row.rationale}
        shown_order, kind = row.shown_order, row.kind
    return judgment_page(
        request,
        ctx,
        item=item,
        shown_order=shown_order,
        judgment_id=judgment_id,
        kind=kind,
        initial=initial,
        mode="edit",
        note=None,
    )
