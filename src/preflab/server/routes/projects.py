"""Projects: create and list, settings and their history, members and invites, raters and
quality figures, reinstatement, exports and their files."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, Response
from pydantic import Field
from sqlalchemy import select

from ... import audit
from ...schema.policy import Policy, settings_of
from ...store.models import Project, utcnow
from ...store.server_models import User
from .. import auth
from ..database import must_get
from ..errors import ServiceError
from ..permissions import Ctx, ProjectCtx, guard
from ..services import extra_raters, gold_scoring, projects, queries, review
from . import models as m
from .common import DbId, ExportIn, Strict, db_of, ok

router = APIRouter(prefix="/api/v1")


class ProjectCreateIn(Strict):
    name: str = Field(min_length=1, max_length=100)
    title: str = Field(default="", max_length=300)
    kinds: list[str] = Field(default_factory=lambda: ["pairwise"], min_length=1, max_length=10)
    guidelines: str = Field(default="", max_length=200_000)
    policy: Policy = Field(default_factory=Policy)


class SettingsPatchIn(Strict):
    title: str | None = Field(default=None, max_length=300)
    guidelines: str | None = Field(default=None, max_length=200_000)
    policy: dict[str, Any] | None = None
    note: str = Field(default="", max_length=2000)


class MemberIn(Strict):
    role: str = Field(description="admin, reviewer or rater")


class InviteIn(Strict):
    role: str = "rater"
    email: str | None = Field(default=None, max_length=320)
    ttl_hours: int = Field(default=72, ge=1, le=24 * 90)


class NoteIn(Strict):
    note: str = Field(min_length=1, max_length=5000)


@router.get("/projects", tags=["projects"], response_model=list[m.ProjectOut])
def list_projects(request: Request, ctx: Ctx = guard("authenticated")) -> Response:
    with db_of(request).reading() as s:
        return ok(queries.visible_projects(s, ctx.user.user_pk, is_admin=ctx.user.is_admin))


@router.post("/projects", tags=["projects"], status_code=201, response_model=m.ProjectOut)
def create_project(
    request: Request, body: ProjectCreateIn, ctx: Ctx = guard("site.admin")
) -> Response:
    with db_of(request).writing() as s:
        p = projects.create_project(
            s,
            body.name,
            title=body.title,
            kinds=body.kinds,
            guidelines=body.guidelines,
            policy=body.policy,
            created_by=ctx.user.user_pk,
        )
        audit.record(s, ctx.user, "project.created", audit.target(p.name), {"kinds": p.kinds})
        return ok(queries.project_out(p, None, full=True), 201)


@router.get("/projects/{project}", tags=["projects"], response_model=m.ProjectOut)
def get_project(
    request: Request, project: str, ctx: ProjectCtx = guard("project.view")
) -> Response:
    """Guidelines, kinds and rubric for everyone; the full policy for admins and reviewers."""
    with db_of(request).reading() as s:
        return ok(queries.project(s, ctx.project, ctx.role, ctx.user))


@router.patch(
    "/projects/{project}/settings", tags=["projects"], response_model=m.SettingsChangedOut
)
def patch_settings(
    request: Request, project: str, body: SettingsPatchIn, ctx: ProjectCtx = guard("project.manage")
) -> Response:
    """Change title, guidelines or policy (merged key by key); each change is a new audited version."""
    changes = body.model_dump(exclude_none=True, exclude={"note"})
    with db_of(request).writing() as s:
        p = s.scalar(select(Project).where(Project.pk == ctx.project.pk).with_for_update())
        if p is None:  # deleted since the guard read it
            raise ServiceError(404, f"no project {ctx.project.name!r}")
        version, _ = projects.update_settings(
            s, p, changes, changed_by=ctx.user.user_pk, note=body.note
        )
        details = {"version": version, "changed": sorted(changes), "note": body.note}
        audit.record(s, ctx.user, "project.settings_changed", audit.target(p.name), details)
        return ok({"version": version, **queries.project_out(p, ctx.role, full=True)})


@router.get(
    "/projects/{project}/settings/history",
    tags=["projects"],
    response_model=list[m.SettingsVersionOut],
)
def settings_history(
    request: Request, project: str, ctx: ProjectCtx = guard("project.manage")
) -> Response:
    with db_of(request).reading() as s:
        return ok(queries.settings_versions(s, ctx.project.pk))


@router.get("/projects/{project}/members", tags=["projects"], response_model=list[m.MemberOut])
def list_members(
    request: Request, project: str, ctx: ProjectCtx = guard("project.review")
) -> Response:
    with db_of(request).reading() as s:
        return ok(queries.members(s, ctx.project.pk))


@router.put("/projects/{project}/members/{username}", tags=["projects"], response_model=m.MemberOut)
def put_member(
    request: Request,
    project: str,
    username: str,
    body: MemberIn,
    ctx: ProjectCtx = guard("project.manage"),
) -> Response:
    with db_of(request).writing() as s:
        user = auth.get_user(s, username)
        before = queries.project_roles(s, user.pk).get(ctx.project.name)
        membership = auth.set_membership(s, must_get(s, Project, ctx.project.pk), user, body.role)
        details = {"role": membership.role, "before": before}
        where = audit.target(ctx.project.name, user=username)
        audit.record(s, ctx.user, "member.role_set", where, details)
        return ok({"username": username, "role": membership.role})


@router.delete(
    "/projects/{project}/members/{username}",
    tags=["projects"],
    response_model=m.MemberRemovedOut,
)
def delete_member(
    request: Request, project: str, username: str, ctx: ProjectCtx = guard("project.manage")
) -> Response:
    with db_of(request).writing() as s:
        user = auth.get_user(s, username)
        before = queries.project_roles(s, user.pk).get(ctx.project.name)
        auth.remove_membership(s, must_get(s, Project, ctx.project.pk), user)
        where = audit.target(ctx.project.name, user=username)
        audit.record(s, ctx.user, "member.removed", where, {"before": before})
        return ok({"username": username, "removed": True})


@router.post(
    "/projects/{project}/invites", tags=["projects"], status_code=201, response_model=m.InviteOut
)
def create_invite(
    request: Request, project: str, body: InviteIn, ctx: ProjectCtx = guard("project.manage")
) -> Response:
    """An invite link that expires; the token is shown once (only its hash is stored)."""
    with db_of(request).writing() as s:
        token, row = auth.create_invite(
            s,
            must_get(s, Project, ctx.project.pk),
            role=body.role,
            created_by=must_get(s, User, ctx.user.user_pk),
            ttl=timedelta(hours=body.ttl_hours),
            email=body.email,
        )
        details = {"role": row.role, "email": body.email, "ttl_hours": body.ttl_hours}
        audit.record(s, ctx.user, "invite.created", audit.target(ctx.project.name), details)
        return ok(
            {
                "token": token,
                "path": f"/api/v1/invites/{token}/accept",
                "role": row.role,
                "expires_at": row.expires_at.isoformat(),
            },
            201,
        )


@router.get("/projects/{project}/raters", tags=["quality"], response_model=list[m.RaterOut])
def list_raters(
    request: Request, project: str, ctx: ProjectCtx = guard("project.review")
) -> Response:
    with db_of(request).reading() as s:
        return ok(review.rater_figures(s, ctx.project))


@router.get("/projects/{project}/quality", tags=["quality"], response_model=m.QualityOut)
def quality(request: Request, project: str, ctx: ProjectCtx = guard("project.review")) -> Response:
    """Counts, pool progress, gold accuracy per rater (Wilson intervals), suspensions."""
    with db_of(request).reading() as s:
        return ok(review.quality_summary(s, ctx.project))


@router.get("/projects/{project}/extra-raters", tags=["quality"], response_model=m.ExtraRatersOut)
def extra_raters_figures(
    request: Request, project: str, ctx: ProjectCtx = guard("project.review")
) -> Response:
    """More raters where they disagree: items extended, extra labels spent and due, items
    resolved by them vs sent to adjudication (SQL aggregates over the pool)."""
    with db_of(request).reading() as s:
        policy = settings_of(ctx.project.settings).policy
        return ok(extra_raters.figures(s, ctx.project.pk, policy))


@router.post(
    "/projects/{project}/raters/{username}/reinstate",
    tags=["quality"],
    response_model=m.RaterStatusOut,
)
def reinstate(
    request: Request,
    project: str,
    username: str,
    body: NoteIn,
    ctx: ProjectCtx = guard("project.manage"),
) -> Response:
    with db_of(request).writing() as s:
        st = gold_scoring.reinstate(s, ctx.project.pk, auth.get_user(s, username).pk, body.note)
        where = audit.target(ctx.project.name, user=username)
        audit.record(s, ctx.user, "rater.reinstated", where, {"note": body.note})
        return ok({"username": username, "status": st.status, "reason": st.reason})


@router.post(
    "/projects/{project}/exports", tags=["exports"], status_code=201, response_model=m.ExportOut
)
def export(
    request: Request, project: str, body: ExportIn, ctx: ProjectCtx = guard("project.manage")
) -> Response:
    """Run the exporter inside the request; the manifest (files, SHA-256, gates) comes back.

    For large projects use ``POST /api/v1/projects/{project}/export-jobs``: the export runs in a
    process of its own, with progress, cancel and its files to download (this route stays for
    scripts of small projects)."""
    out_dir = (
        request.app.state.config.exports_dir
        / ctx.project.name
        / utcnow().strftime("%Y%m%dT%H%M%S%f")
    ).resolve()
    db = db_of(request)
    options = body.model_dump(exclude={"format", "require_reference", "data_source"})
    params: dict[str, Any] = {}  # verl's, as `preflab export` passes them
    if body.require_reference:
        params["require_reference"] = True
    if body.data_source is not None:
        params["data_source"] = body.data_source
    export_id, manifest = projects.export_project(
        db, ctx.project.name, body.format, out_dir, **options, params=params
    )
    with db.writing() as s:
        details = audit.export_details(body.format, out_dir, manifest) | {"export_id": export_id}
        audit.record(s, ctx.user, "project.exported", audit.target(ctx.project.name), details)
    from ...io.export.manifest import manifest_summary

    summary = manifest_summary(manifest)
    return ok({"export_id": export_id, "manifest": manifest, "summary": summary}, 201)


@router.get(
    "/projects/{project}/exports/{export_id}/files/{filename}",
    tags=["exports"],
    response_class=FileResponse,
    responses={
        200: {
            "description": "The file's bytes.",
            "content": {
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}
            },
        }
    },
)
def export_file(
    request: Request,
    project: str,
    export_id: DbId,
    filename: str,
    ctx: ProjectCtx = guard("project.manage"),
) -> FileResponse:
    with db_of(request).reading() as s:
        path = queries.export_file(s, ctx.project, export_id, filename)
    return FileResponse(path)
