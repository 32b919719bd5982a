"""Review: the reviewer's list of judgments, send-back, the adjudication and spot-review queues,
one item under review, adjudication, the data browser, skips and demonstrations. The rules are
in :mod:`preflab.server.services.review` and :mod:`preflab.server.services.revisions`."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response
from pydantic import Field

from .. import snapshot
from ..permissions import ProjectCtx, guard
from ..services import browse, review_pages, revisions
from ..services import review as service
from ..services.browse import BrowseFilters
from . import models as m
from .common import DbId, Strict, db_of, idempotency_key, ok

router = APIRouter(prefix="/api/v1")


class NoteIn(Strict):
    note: str = Field(min_length=1, max_length=5000)


class AdjudicateIn(Strict):
    judgment: dict[str, Any]
    note: str = Field(min_length=1, max_length=5000)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=200)


class ReferenceAdjudicationIn(Strict):
    answer: str = Field(min_length=1, max_length=20_000)
    note: str = Field(min_length=1, max_length=5000)


class TelemetryDecisionIn(Strict):
    decision: str = Field(pattern="^(keep|exclude)$")
    note: str = Field(default="", max_length=5000)


class DemonstrationReviewIn(Strict):
    decision: str = Field(pattern="^(accepted|rejected)$")
    note: str = Field(default="", max_length=5000)


@router.get("/projects/{project}/judgments", tags=["review"], response_model=list[m.JudgmentOut])
def list_judgments(
    request: Request,
    project: str,
    after: int = Query(default=0, ge=0, le=2**62),
    limit: int = Query(default=100, ge=1, le=1000),
    item_id: str | None = Query(default=None, max_length=200),
    ctx: ProjectCtx = guard("project.review"),
) -> Response:
    """Judgments with provenance; raters appear as hashes when the project is blind."""
    with db_of(request).reading() as s:
        return ok(
            service.list_judgments(s, ctx.project, after=after, limit=limit, item_key=item_id)
        )


@router.post(
    "/projects/{project}/judgments/{judgment_id}/send-back",
    tags=["review"],
    status_code=201,
    response_model=m.SentBackOut,
)
def send_back(
    request: Request,
    project: str,
    judgment_id: DbId,
    body: NoteIn,
    ctx: ProjectCtx = guard("project.review"),
) -> Response:
    with db_of(request).writing() as s:
        req = revisions.send_back(s, ctx.project.pk, judgment_id, ctx.user.user_pk, body.note)
        return ok({"request_id": req.pk, "judgment_id": judgment_id, "status": req.status}, 201)


@router.post(
    "/projects/{project}/judgments/{judgment_id}/telemetry-review",
    tags=["review"],
    status_code=201,
    response_model=m.TelemetryDecisionOut,
)
def post_telemetry_review(
    request: Request,
    project: str,
    judgment_id: DbId,
    body: TelemetryDecisionIn,
    ctx: ProjectCtx = guard("project.review"),
) -> Response:
    """Decide a label its telemetry flagged: ``keep`` (exported whatever its flags) or
    ``exclude`` (a note is required). Issue 28; docs/telemetry.md."""
    out = service.decide_telemetry(
        db_of(request), ctx.project, ctx.user, judgment_id, body.decision, body.note
    )
    return ok(out, 201)


@router.get("/projects/{project}/review/queues", tags=["review"], response_model=m.ReviewQueuesOut)
def get_review_queues(
    request: Request,
    project: str,
    share: float | None = Query(default=None, ge=0, le=1),
    after: str | None = Query(default=None, min_length=1, max_length=200),
    limit: int = Query(default=review_pages.DEFAULT_LIMIT, ge=1, le=review_pages.MAX_LIMIT),
    ctx: ProjectCtx = guard("project.review"),
) -> Response:
    """One page of the review queues: the adjudication queue, spot review, the labels held out
    by telemetry, weak signals per rater and pending demonstrations, ``limit`` entries of each
    (default 100, at most 1000) after the cursor ``after`` (``page.next`` of the previous
    answer; none: the first page). A large project's queues come from the quality snapshot
    (``page.status`` ``stored``, ``page.computed_at``; ``computing`` until the first is stored),
    the page's items re-checked live; a small one's are computed now (``current``)."""
    return ok(
        review_pages.queues_page(db_of(request), ctx.project, after=after, limit=limit, share=share)
    )


@router.get(
    "/projects/{project}/review/items/{item_id}", tags=["review"], response_model=m.ItemReviewOut
)
def get_item_review(
    request: Request, project: str, item_id: str, ctx: ProjectCtx = guard("project.review")
) -> Response:
    with db_of(request).reading() as s:
        return ok(service.item_review(s, ctx.project, item_id))


@router.post(
    "/projects/{project}/items/{item_id}/adjudicate",
    tags=["review"],
    status_code=201,
    response_model=m.AdjudicationOut,
)
def post_adjudication(
    request: Request,
    project: str,
    item_id: str,
    body: AdjudicateIn,
    ctx: ProjectCtx = guard("project.review"),
) -> Response:
    """Record the item's final label (review pass 2) with a note."""
    out = service.adjudicate(
        db_of(request),
        ctx.project,
        ctx.user,
        item_id,
        body.judgment,
        body.note,
        idempotency_key(request, body.idempotency_key),
    )
    return ok(out, 201 if out["created"] else 200)


@router.post(
    "/projects/{project}/items/{item_id}/reference/adjudicate",
    tags=["review"],
    response_model=m.ReferenceAdjudicationOut,
)
def post_reference_adjudication(
    request: Request,
    project: str,
    item_id: str,
    body: ReferenceAdjudicationIn,
    ctx: ProjectCtx = guard("project.review"),
) -> Response:
    """Settle a reference two experts disagreed on: the answer, the reviewer as adjudicator."""
    return ok(
        service.adjudicate_reference(
            db_of(request), ctx.project, ctx.user, item_id, body.answer, body.note
        )
    )


@router.get("/projects/{project}/browse", tags=["review"], response_model=m.BrowseOut)
def get_browse(
    request: Request,
    project: str,
    filters: BrowseFilters = Depends(),
    after: int = Query(default=0, ge=0, le=2**62, description="item pk the page starts after"),
    offset: int = Query(default=0, ge=0, le=10**9),
    limit: int = Query(default=50, ge=1, le=500),
    ctx: ProjectCtx = guard("project.review"),
) -> Response:
    """Items and their labels, filtered, a page at a time (the admin's data browser): keyset
    pages (``after`` = the previous page's ``next_after``); ``offset`` still skips matches."""
    db = db_of(request)
    dups, _snap = snapshot.near_duplicates(db, ctx.project)
    with db.reading() as s:
        return ok(
            browse.browse(
                s,
                ctx.project,
                browse.Filters(**asdict(filters)),
                after=after,
                offset=offset,
                limit=limit,
                near_duplicates=dups,
            )
        )


@router.get("/projects/{project}/skips", tags=["review"], response_model=m.SkipSummaryOut)
def get_skips(
    request: Request, project: str, ctx: ProjectCtx = guard("project.review")
) -> Response:
    """Skips per reason and the items raters flagged."""
    with db_of(request).reading() as s:
        return ok(service.skip_summary(s, ctx.project))


@router.get(
    "/projects/{project}/demonstrations/pending",
    tags=["review"],
    response_model=list[m.PendingDemonstration],
)
def get_pending_demonstrations(
    request: Request, project: str, ctx: ProjectCtx = guard("project.review")
) -> Response:
    """Demonstrations waiting for a reviewer's decision."""
    with db_of(request).reading() as s:
        return ok(service.pending_demonstrations(s, ctx.project))


@router.post(
    "/projects/{project}/demonstrations/{judgment_id}/review",
    tags=["review"],
    status_code=201,
    response_model=m.DemonstrationDecisionOut,
)
def post_demonstration_review(
    request: Request,
    project: str,
    judgment_id: DbId,
    body: DemonstrationReviewIn,
    ctx: ProjectCtx = guard("project.review"),
) -> Response:
    """Accept or reject a demonstration (a note is required to reject). Stored as a revision with
    the reviewer and the time; only accepted demonstrations are exported by ``trl-sft``."""
    out = service.review_demonstration(
        db_of(request), ctx.project, ctx.user, judgment_id, body.decision, body.note
    )
    return ok(out, 201)
