"""The audit log for site admins: who changed what, and when (:mod:`preflab.audit`)."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from ... import audit
from ..permissions import Ctx, guard
from . import models as m
from .common import db_of, ok

router = APIRouter(prefix="/api/v1")


@router.get("/audit", tags=["audit"], response_model=m.AuditPageOut)
def list_audit_events(
    request: Request,
    action: str | None = Query(default=None, max_length=60),
    actor: str | None = Query(default=None, max_length=200),
    since: datetime | None = Query(default=None, description="ISO 8601; without a zone, UTC"),
    before: int | None = Query(default=None, ge=1, le=2**63 - 1, description="page: older ids"),
    limit: int = Query(default=100, ge=1, le=1000),
    ctx: Ctx = guard("site.admin"),
) -> Response:
    """Audit events newest first; ``next_before`` pages back to older ones (``null``: no more)."""
    with db_of(request).reading() as s:
        events = audit.events(
            s, action=action, actor=actor, since=since, before=before, limit=limit
        )
    more = len(events) == limit
    return ok({"events": events, "next_before": events[-1]["id"] if more else None})
