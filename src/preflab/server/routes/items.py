"""Items and rubrics: list, read, import (JSON body or an uploaded file), rubric versions, and
the markdown preview every page's renderer gives."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from pydantic import Field
from starlette.concurrency import run_in_threadpool

from ... import audit
from ...store import repo
from ...store.models import Project
from ..database import must_get
from ..pages.render import markdown
from ..permissions import Ctx, ProjectCtx, guard
from ..services import files, projects, queries
from . import models as m
from .common import RubricIn, Strict, db_of, ok

router = APIRouter(prefix="/api/v1")


class ItemsIn(Strict):
    items: list[dict[str, Any]] = Field(min_length=1, max_length=5000)


class MarkdownIn(Strict):
    text: str = Field(max_length=100_000)


@router.get("/projects/{project}/items", tags=["items"], response_model=list[m.ItemSummaryOut])
def list_items(
    request: Request,
    project: str,
    after: int = Query(default=0, ge=0, le=2**62),
    limit: int = Query(default=100, ge=1, le=1000),
    ctx: ProjectCtx = guard("project.review"),
) -> Response:
    with db_of(request).reading() as s:
        return ok(queries.items_page(s, ctx.project.pk, after=after, limit=limit))


@router.get("/projects/{project}/items/{item_id}", tags=["items"], response_model=m.Item)
def get_item(
    request: Request, project: str, item_id: str, ctx: ProjectCtx = guard("project.review")
) -> Response:
    """The full item, gold and reference included (reviewers and admins only)."""
    with db_of(request).reading() as s:
        row = repo.get_item(s, must_get(s, Project, ctx.project.pk), item_id)
        return ok(repo.item_from_row(row).model_dump(mode="json"))


@router.post("/projects/{project}/items", tags=["items"], response_model=m.ImportSummaryOut)
def import_items(
    request: Request, project: str, body: ItemsIn, ctx: ProjectCtx = guard("project.manage")
) -> Response:
    """Import items (all or nothing, idempotent by content) and add them to the task pool."""
    summary = projects.import_items(db_of(request), ctx.project.name, body.items)
    _record_import(request, ctx, summary, source="api")
    return ok(summary)


def _record_import(request: Request, ctx: ProjectCtx, summary: dict[str, Any], source: str) -> None:
    """One ``items.imported`` event for an import that changed something (a repeat of the same
    file or items changes nothing and is not an event)."""
    if summary.get("already_imported"):
        return
    with db_of(request).writing() as s:
        details = audit.import_details(summary) | {"source": source}
        audit.record(s, ctx.user, "items.imported", audit.target(ctx.project.name), details)


@router.post(
    "/projects/{project}/items/file",
    tags=["items"],
    response_model=m.FileImportOut,
    responses={422: {"model": m.FileImportOut, "description": "every bad line; nothing imported"}},
)
async def post_items_file(
    request: Request,
    project: str,
    filename: str = Query(default="upload.jsonl", max_length=200),
    ctx: ProjectCtx = guard("project.manage"),
) -> Response:
    """Import an uploaded file (raw request body). 422 with every bad line when it fails."""
    raw = await request.body()
    out = await run_in_threadpool(
        files.import_file, db_of(request), ctx.project.name, filename, raw
    )
    if out["ok"]:
        await run_in_threadpool(_record_import, request, ctx, out, f"file:{filename}")
    return ok(out, 200 if out["ok"] else 422)


@router.get("/projects/{project}/rubric", tags=["rubrics"], response_model=m.Rubric)
def get_rubric(
    request: Request,
    project: str,
    version: int | None = Query(default=None, ge=1, le=10**6),
    ctx: ProjectCtx = guard("project.view"),
) -> Response:
    with db_of(request).reading() as s:
        rubric = queries.rubric(s, ctx.project, version)
        if rubric is None:
            return ok({"detail": "this project has no rubric (yet)"}, 404)
        return ok(rubric)


@router.get(
    "/projects/{project}/rubrics", tags=["rubrics"], response_model=list[m.RubricVersionOut]
)
def list_rubric_versions(
    request: Request, project: str, ctx: ProjectCtx = guard("project.view")
) -> Response:
    with db_of(request).reading() as s:
        return ok(files.rubric_versions(s, ctx.project.pk))


@router.post(
    "/projects/{project}/rubrics", tags=["rubrics"], status_code=201, response_model=m.RubricRef
)
def add_rubric(
    request: Request, project: str, body: RubricIn, ctx: ProjectCtx = guard("project.manage")
) -> Response:
    """Store a rubric; changed content becomes a new immutable version, made current."""
    return ok(_store_rubric(request, ctx, body), 201)


@router.post(
    "/projects/{project}/rubrics/file",
    tags=["rubrics"],
    status_code=201,
    response_model=m.RubricRef,
)
async def post_rubric_file(
    request: Request,
    project: str,
    filename: str = Query(default="rubric.yaml", max_length=200),
    ctx: ProjectCtx = guard("project.manage"),
) -> Response:
    """Upload a rubric as YAML or JSON; changed content becomes a new version."""
    raw = await request.body()
    # parsing and storing in a worker thread, as the sync routes do: the write transaction
    # takes SQLite's process-wide write lock, which must never block the event loop
    rubric = await run_in_threadpool(files.parse_rubric_file, filename, raw)
    return ok(await run_in_threadpool(_store_rubric, request, ctx, rubric), 201)


def _store_rubric(request: Request, ctx: ProjectCtx, rubric: m.Rubric) -> dict[str, Any]:
    with db_of(request).writing() as s:
        row = repo.add_rubric(s, must_get(s, Project, ctx.project.pk), rubric)
        return {"id": row.rubric_key, "version": row.version}


@router.post("/markdown/preview", tags=["labelling"], response_model=m.MarkdownOut)
def post_markdown_preview(body: MarkdownIn, ctx: Ctx = guard("authenticated")) -> Response:
    """The HTML a text renders to on every page (the same sanitising renderer as model answers),
    for the demonstration editor's preview."""
    return ok({"html": str(markdown(body.text))})
