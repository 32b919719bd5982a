"""The labelling routes under ``/api/v1``: next task, release, submit, the caller's own status,
judgments and revisions, and revise. The other routes live by concern in
:mod:`preflab.server.routes` (auth, users, projects, items, review).

Every route carries exactly one ``guard(action)`` (see :mod:`preflab.server.permissions`).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from pydantic import Field

from ..schema import Telemetry
from . import judging, queries
from .permissions import Ctx, guard
from .routes import models as m
from .routes.common import DbId, Strict, db_of, idempotency_key, ok

__all__ = ["DbId", "Strict", "ok", "router"]

router = APIRouter(prefix="/api/v1")

_db = db_of
_idem = idempotency_key


class ReviseIn(Strict):
    judgment: dict[str, Any]
    telemetry: Telemetry | None = None
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=200)


@router.get("/projects/{project}/my/status", tags=["labelling"], response_model=m.MyStatusOut)
def my_status(request: Request, project: str, ctx: Ctx = guard("project.label")) -> Response:
    with _db(request).reading() as s:
        return ok(queries.my_status(s, ctx.project.pk, ctx.user.user_pk))


@router.get(
    "/projects/{project}/my/judgments", tags=["labelling"], response_model=list[m.MyJudgmentOut]
)
def my_judgments(
    request: Request,
    project: str,
    after: int = Query(default=0, ge=0, le=2**62),
    limit: int = Query(default=100, ge=1, le=1000),
    ctx: Ctx = guard("project.label"),
) -> Response:
    """The caller's own judgments (never anyone else's; no gold answers)."""
    with _db(request).reading() as s:
        return ok(
            queries.my_judgments(s, ctx.project.pk, ctx.user.user_pk, after=after, limit=limit)
        )


@router.get(
    "/projects/{project}/my/revisions",
    tags=["labelling"],
    response_model=list[m.RevisionRequestOut],
)
def my_revisions(request: Request, project: str, ctx: Ctx = guard("project.label")) -> Response:
    """Judgments a reviewer sent back to the caller, with the note and the item as shown."""
    with _db(request).reading() as s:
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
    ctx: Ctx = guard("project.label"),
) -> Response:
    """Revise a sent-back judgment: a new row that supersedes it (the old one is kept)."""
    telemetry = (
        body.telemetry.model_dump(mode="json", exclude_none=True) if body.telemetry else None
    )
    out = judging.revise(
        _db(request),
        ctx.project,
        ctx.user.user_pk,
        ctx.user.username,
        judgment_id,
        body.judgment,
        idempotency_key=_idem(request, body.idempotency_key),
        telemetry=telemetry,
    )
    return ok(out, 201 if out["created"] else 200)
