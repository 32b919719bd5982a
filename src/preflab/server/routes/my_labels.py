"""A rater's own labels under ``/api/v1``: their status, judgments and sent-back revisions,
revising a sent-back judgment, and editing their own recent label until a reviewer has acted on
it (issue 11). The rules are :mod:`preflab.server.services.revisions`.

Every route carries exactly one ``guard(action)`` (see :mod:`preflab.server.permissions`).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from ..permissions import ProjectCtx, guard
from ..services import queries, revisions
from . import models as m
from .common import DbId, ReviseIn, db_of, idempotency_key, ok

router = APIRouter(prefix="/api/v1")


def _telemetry(body: ReviseIn) -> dict[str, Any] | None:
    return body.telemetry.model_dump(mode="json", exclude_none=True) if body.telemetry else None


@router.get("/projects/{project}/my/status", tags=["labelling"], response_model=m.MyStatusOut)
def my_status(request: Request, project: str, ctx: ProjectCtx = guard("project.label")) -> Response:
    with db_of(request).reading() as s:
        return ok(queries.my_status(s, ctx.project.pk, ctx.user.user_pk))


@router.get(
    "/projects/{project}/my/judgments", tags=["labelling"], response_model=list[m.MyJudgmentOut]
)
def my_judgments(
    request: Request,
    project: str,
    after: int = Query(default=0, ge=0, le=2**62),
    limit: int = Query(default=100, ge=1, le=1000),
    ctx: ProjectCtx = guard("project.label"),
) -> Response:
    """The caller's own judgments (never anyone else's; no gold answers)."""
    with db_of(request).reading() as s:
        return ok(
            queries.my_judgments(s, ctx.project.pk, ctx.user.user_pk, after=after, limit=limit)
        )


@router.get(
    "/projects/{project}/my/revisions",
    tags=["labelling"],
    response_model=list[m.RevisionRequestOut],
)
def my_revisions(
    request: Request, project: str, ctx: ProjectCtx = guard("project.label")
) -> Response:
    """Judgments a reviewer sent back to the caller, with the note and the item as shown."""
    with db_of(request).reading() as s:
        return ok(queries.my_revision_requests(s, ctx.project.pk, ctx.user.user_pk))


@router.post(
    "/projects/{project}/judgments/{judgment_id}/revise",
    tags=["labelling"],
    response_model=m.JudgmentAckOut,
)
def revise_judgment(
    request: Request,
    project: str,
    judgment_id: DbId,
    body: ReviseIn,
    ctx: ProjectCtx = guard("project.label"),
) -> Response:
    """Revise a sent-back judgment: a new row that supersedes it (the old one is kept)."""
    out = revisions.revise(
        db_of(request),
        ctx.project,
        ctx.user.user_pk,
        ctx.user.username,
        judgment_id,
        body.judgment,
        idempotency_key=idempotency_key(request, body.idempotency_key),
        telemetry=_telemetry(body),
    )
    return ok(out, 201 if out["created"] else 200)


@router.post(
    "/projects/{project}/judgments/{judgment_id}/edit",
    tags=["labelling"],
    response_model=m.JudgmentAckOut,
)
def edit_judgment(
    request: Request,
    project: str,
    judgment_id: DbId,
    body: ReviseIn,
    ctx: ProjectCtx = guard("project.label"),
) -> Response:
    """Edit one of your own labels: a new revision that supersedes it (the old one is kept).
    409 once a reviewer has acted on it (sent back, decided, adjudicated or excluded)."""
    out = revisions.edit(
        db_of(request),
        ctx.project,
        ctx.user,
        judgment_id,
        body.judgment,
        idempotency_key=body.idempotency_key,
        telemetry=_telemetry(body),
    )
    return ok(out, 201 if out["created"] else 200)
