"""Export jobs (:mod:`preflab.server.export_jobs`): an export run in a process of its own, with
progress, cancel and its files to download. For large projects: the synchronous ``POST
.../exports`` runs the exporter inside the request."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse, Response
from pydantic import Field

from ... import audit
from .. import export_jobs as jobs
from ..export_runner import Runner
from ..permissions import ProjectCtx, guard
from . import models as m
from .common import DbId, ExportIn, db_of, ok

router = APIRouter(prefix="/api/v1")


class ExportJobIn(ExportIn):
    """The options of ``preflab export`` (:class:`ExportIn`), its split and ``--kto-conflicts``,
    and why a forced export may go below the agreement floor."""

    split: str = Field(default="train", min_length=1, max_length=64, description="split name")
    kto_conflicts: Literal["drop", "keep"] | None = Field(
        default=None, description="trl-kto: a completion marked both ways: drop (default) or keep"
    )
    force_reason: str | None = Field(
        default=None,
        max_length=2000,
        description="required with force: why (kept with the job and in the audit log)",
    )


def _runner(request: Request) -> Runner:
    runner: Runner = request.app.state.export_jobs
    return runner


@router.post(
    "/projects/{project}/export-jobs",
    tags=["exports"],
    status_code=202,
    response_model=m.ExportJobOut,
)
def create_export_job(
    request: Request, project: str, body: ExportJobIn, ctx: ProjectCtx = guard("project.manage")
) -> Response:
    """Start an export in the background (the way for large projects); poll the job for its
    progress, then download its files. Options are checked as ``preflab export`` checks them."""
    with db_of(request).writing() as s:
        job = jobs.create_job(
            s,
            project_pk=ctx.project.pk,
            project_name=ctx.project.name,
            requested_by=ctx.user.user_pk,
            options=body.model_dump(mode="json"),
            exports_dir=request.app.state.config.exports_dir,
        )
        details = {"job_id": job.pk, "format": body.format, "force": body.force}
        if body.force:
            details["force_reason"] = job.options["force_reason"]
        audit.record(s, ctx.user, "export_job.created", audit.target(ctx.project.name), details)
        out = jobs.job_out(job, ctx.project.name, ctx.user.username)
    _runner(request).start(out["id"])
    return ok(out, 202)


@router.get("/projects/{project}/export-jobs", tags=["exports"], response_model=m.ExportJobPageOut)
def list_export_jobs(
    request: Request,
    project: str,
    before: int | None = Query(default=None, ge=1, le=2**63 - 1, description="page: older ids"),
    limit: int = Query(default=jobs.PAGE_LIMIT, ge=1, le=200),
    ctx: ProjectCtx = guard("project.manage"),
) -> Response:
    """The project's export jobs newest first; ``next_before`` pages back (``null``: no more)."""
    with db_of(request).reading() as s:
        found = jobs.list_jobs(s, ctx.project.pk, before=before, limit=limit)
        out = jobs.jobs_out(s, ctx.project.name, found)
    more = len(out) == limit
    return ok({"jobs": out, "next_before": out[-1]["id"] if more else None})


@router.get(
    "/projects/{project}/export-jobs/{job_id}", tags=["exports"], response_model=m.ExportJobOut
)
def get_export_job(
    request: Request, project: str, job_id: DbId, ctx: ProjectCtx = guard("project.manage")
) -> Response:
    with db_of(request).reading() as s:
        (out,) = jobs.jobs_out(s, ctx.project.name, [jobs.get_job(s, ctx.project.pk, job_id)])
    return ok(out)


@router.post(
    "/projects/{project}/export-jobs/{job_id}/cancel",
    tags=["exports"],
    status_code=202,
    response_model=m.ExportJobOut,
)
def cancel_export_job(
    request: Request, project: str, job_id: DbId, ctx: ProjectCtx = guard("project.manage")
) -> Response:
    """A queued job is cancelled at once; a running one stops within seconds (its process is
    ended if it does not stop by itself), leaving no directory. 409 for a finished job."""
    with db_of(request).writing() as s:
        job = jobs.get_job(s, ctx.project.pk, job_id)
        state = jobs.request_cancel(s, job)
        details = {"job_id": job.pk, "was": "queued" if state == "cancelled" else "running"}
        audit.record(s, ctx.user, "export_job.cancelled", audit.target(ctx.project.name), details)
    if state == "running":
        _runner(request).enforce_cancel(job_id)
    with db_of(request).reading() as s:
        (out,) = jobs.jobs_out(s, ctx.project.name, [jobs.get_job(s, ctx.project.pk, job_id)])
    return ok(out, 202)


@router.get(
    "/projects/{project}/export-jobs/{job_id}/files/{filename:path}",
    tags=["exports"],
    response_class=FileResponse,
    responses={
        200: {
            "description": "The file's bytes (an attachment).",
            "content": {
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}
            },
        }
    },
)
def export_job_file(
    request: Request,
    project: str,
    job_id: DbId,
    filename: str,
    ctx: ProjectCtx = guard("project.manage"),
) -> FileResponse:
    """A file of a finished job, by the name its manifest lists (``manifest.json`` too)."""
    with db_of(request).reading() as s:
        path = jobs.job_file(jobs.get_job(s, ctx.project.pk, job_id), filename)
    return FileResponse(
        path,
        media_type="application/octet-stream",
        filename=path.name,
        content_disposition_type="attachment",
    )
