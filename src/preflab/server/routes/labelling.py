"""Labelling routes: the next task (a lease), submit, release and skip.

Handlers are thin: parse, run the engine, shape the answer. "Next" and "submit" are one flow
(:mod:`preflab.server.flow.lane`): the fast lane (:mod:`preflab.server.fastlane`) serves what it
can in front of these routes; these routes run the same flow after their guard, on the
framework's executor (:mod:`preflab.server.exec.framework`), for everything it hands on.
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field

from ...schema import Telemetry
from ...schema.policy import settings_of
from ..database import Database
from ..exec import framework
from ..flow.lane import Credential, run_next, run_submit
from ..flow.next import no_items
from ..permissions import ProjectCtx, ProjectRef, guard
from ..services import gold_scoring
from ..services import leases as assign
from ..services.projects import sync_pool
from ..services.skips import no_items_detail, skip_task
from ..wire import WireModel

router = APIRouter(prefix="/api/v1", tags=["labelling"])


def _ok(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type="application/json")


def _db(request: Request) -> Database:
    return request.app.state.db


# -- wire models ---------------------------------------------------------------------------------


class SubmitIn(WireModel):
    assignment_id: str = Field(min_length=1, max_length=64)
    judgment: dict[str, Any] = Field(description="A judgment body with 'kind' (no provenance).")
    telemetry: Telemetry | None = None
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=200)


class SkipIn(WireModel):
    """A skip: the reason's key and an optional note (wire rules: no NUL, issue 31)."""

    reason: str = Field(max_length=40)
    note: str = Field(default="", max_length=2000)


class NextTaskOut(BaseModel):
    """A task (``flow.next.task_payload``) or ``task: null`` with the reason."""

    task: dict[str, Any] | None = Field(
        description="assignment_id, project, phase, kinds, rubric, item (public view, in the "
        "shown order), shown_order, expires_at, settings_version"
    )
    resumed: bool | None = Field(default=None, description="true: the live lease came back")
    reason: str | None = Field(
        default=None,
        description="no_items, suspended, not_qualified, domain_required, limit_reached",
    )
    detail: str | None = None


class SubmitOut(BaseModel):
    judgment_id: int
    item_id: str
    kind: str
    created: bool
    replayed: bool
    submitted_at: str | None
    gold: dict[str, Any] | None = Field(
        default=None, description="qualification items only: correct, expected, explanation"
    )
    qualification: dict[str, Any] | None = None


class ReleaseOut(BaseModel):
    released: bool
    status: str | None = None
    reason: str | None = None


class SkipOut(BaseModel):
    skipped: bool
    reason: str
    flag: str


# -- routes --------------------------------------------------------------------------------------


def serve_next(db: Database, project: ProjectRef, user_pk: int) -> dict[str, Any]:
    """ "Next task" on the framework's executor; when nothing is left, items imported by another
    route may still lack pool rows: sync the pool once and look again."""
    ex = framework.executor(db)
    for attempt in range(2):
        out, _lane = ex.run(
            lambda lane: run_next(lane, Credential("user", None, user_pk=user_pk), project.name)
        )
        if out is not None:
            return out
        if attempt == 0:
            with db.writing() as session:
                if sync_pool(session, project.pk, settings_of(project.settings).policy) == 0:
                    break
    return no_items()


def serve_submit(
    db: Database,
    project: ProjectRef,
    user_pk: int,
    username: str,
    *,
    assignment_id: str,
    judgment: dict[str, Any],
    idempotency_key: str | None,
    telemetry: dict[str, Any] | None,
) -> dict[str, Any]:
    """ "Submit" on the framework's executor; production gold goes to the scorer after the
    commit (:func:`gold_scoring.after_submit`), as from the lane."""
    cred = Credential("user", None, user_pk=user_pk)
    out, lane = framework.executor(db).run(
        lambda lane: run_submit(
            lane,
            cred,
            project.name,
            assignment_id=assignment_id,
            judgment=judgment,
            idempotency_key=idempotency_key,
            telemetry=telemetry,
        )
    )
    for pool_role, judgment_pk in lane.after_commit:
        gold_scoring.after_submit(db, pool_role, judgment_pk)
    return out


@router.post("/projects/{project}/assignments/next", response_model=NextTaskOut)
def next_task(request: Request, project: str, ctx: ProjectCtx = guard("project.label")) -> Response:
    """The next task for the caller (a lease), or ``{"task": null, "reason": ...}``.

    While a lease is live the same task comes back (``resumed``: true)."""
    out = serve_next(_db(request), ctx.project, ctx.user.user_pk)
    if out.get("reason") == "no_items":  # say why when items wait for a credential
        with _db(request).reading() as s:
            detail = no_items_detail(s, ctx.project, ctx.user.user_pk) or out.get("detail")
        out = {**out, "detail": detail}
    return _ok(out)


@router.post("/projects/{project}/assignments/{assignment_id}/release", response_model=ReleaseOut)
def release_task(
    request: Request, project: str, assignment_id: str, ctx: ProjectCtx = guard("project.label")
) -> Response:
    out = assign.release(_db(request), ctx.project, ctx.user.user_pk, assignment_id)
    return _ok(out, 200 if out.get("reason") != "not_found" else 404)


@router.post(
    "/projects/{project}/judgments",
    response_model=SubmitOut,
    status_code=201,
    responses={200: {"model": SubmitOut, "description": "a retry: the first result again"}},
)
def submit_judgment(
    request: Request, project: str, body: SubmitIn, ctx: ProjectCtx = guard("project.label")
) -> Response:
    """Submit the judgment for a live assignment. Retries (same ``idempotency_key`` or the
    same assignment and answer) return the first result; nothing is stored twice."""
    telemetry = (
        body.telemetry.model_dump(mode="json", exclude_none=True) if body.telemetry else None
    )
    out = serve_submit(
        _db(request),
        ctx.project,
        ctx.user.user_pk,
        ctx.user.username,
        assignment_id=body.assignment_id,
        judgment=body.judgment,
        idempotency_key=body.idempotency_key or request.headers.get("idempotency-key") or None,
        telemetry=telemetry,
    )
    return _ok(out, 201 if out["created"] else 200)


@router.post("/projects/{project}/assignments/{assignment_id}/skip", response_model=SkipOut)
def post_skip(
    request: Request,
    project: str,
    assignment_id: str,
    body: SkipIn,
    ctx: ProjectCtx = guard("project.label"),
) -> Response:
    """Skip or flag the task you hold, with a reason (``unclear``, ``expertise``, ``broken``,
    ``harmful``, ``other`` + note). The item goes to another rater; reviewers see the flags."""
    out = skip_task(
        _db(request), ctx.project, ctx.user.user_pk, assignment_id, body.reason, body.note
    )
    return _ok(out)
