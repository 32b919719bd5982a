"""Leases outside the labelling flow, and what the pages read of them.

"Next task" itself — the qualification set until a rater passes, then production items they
never saw, matching their verified domains, fuller overlap items first, production gold at the
project rate, exact k under concurrency — is :func:`preflab.server.flow.lane.run_next`, one flow
run by the fast lane and by the FastAPI route alike. Here: the rater's status row (created and
locked, for the ORM steps that need it), giving a task back, the domain rule as an ORM filter
(the pages' explanations) and a lease's task as the pages show it.

Concurrency, as in the flow: every write locks the rater's status row first, so one rater's
requests are serialised; a released lease's item is back in the pool at once.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, func, select
from sqlalchemy.orm import Session

from ...schema.policy import Policy, settings_of
from ...store.models import ItemRow, utcnow
from ...store.repo import item_from_row
from ...store.server_models import Assignment, RaterStatus
from ..database import Database, insert_ignore, must_get
from ..errors import ServiceError
from ..flow import next as rules
from ..permissions import ProjectRef

__all__ = ["lock_rater_status", "release", "task_payload"]


def lock_rater_status(
    session: Session, project_pk: int, user_pk: int, policy: Policy
) -> RaterStatus:
    """The rater's status row, created on first use and locked for this transaction."""
    row = session.scalar(
        select(RaterStatus)
        .where(RaterStatus.project_pk == project_pk, RaterStatus.user_pk == user_pk)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    if row is not None:
        return row
    insert_ignore(
        session,
        RaterStatus.__table__,
        [
            {
                "project_pk": project_pk,
                "user_pk": user_pk,
                "status": "qualifying",
                "reason": "",
                "updated_at": utcnow(),
            }
        ],
        ["project_pk", "user_pk"],
    )
    row = session.scalar(
        select(RaterStatus)
        .where(RaterStatus.project_pk == project_pk, RaterStatus.user_pk == user_pk)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    if row is None:  # inserted just above, or there already: only a concurrent delete
        raise ServiceError(404, f"user {user_pk} is no longer a rater of project {project_pk}")
    return row


def task_payload(session: Session, project: ProjectRef, lease: Assignment) -> dict[str, Any]:
    """What the rater gets (:func:`flow.next.task_payload`) for a lease loaded by the ORM."""
    view = item_from_row(must_get(session, ItemRow, lease.item_pk)).public_view()
    return rules.task_payload(
        project, view, lease.lease_id, lease.role, lease.shown_order, lease.expires_at
    )


def release(db: Database, project: ProjectRef, user_pk: int, lease_id: str) -> dict[str, Any]:
    """The rater gives a task back; its item returns to the pool at once."""
    with db.writing() as session:
        lease = release_lease(session, project, user_pk, lease_id)
        if lease is None:
            return {"released": False, "reason": "not_found"}
        return {"released": lease.status == "released", "status": lease.status}


def release_lease(
    session: Session, project: ProjectRef, user_pk: int, lease_id: str
) -> Assignment | None:
    """:func:`release` inside the caller's transaction (a skip records its reason in the same one)."""
    lock_rater_status(session, project.pk, user_pk, settings_of(project.settings).policy)
    lease = session.scalar(
        select(Assignment)
        .where(
            Assignment.lease_id == lease_id,
            Assignment.project_pk == project.pk,
            Assignment.user_pk == user_pk,
        )
        .with_for_update()
    )
    if lease is not None and lease.status == "active":
        lease.status = "released"
    return lease


def expired_leases(session: Session, project_pk: int) -> int:
    """How many leases ran past expiry without a submission (their items are back in the pool)."""
    return session.scalar(  # type: ignore[return-value]  # COUNT(*) is never NULL
        select(func.count())
        .select_from(Assignment)
        .where(
            and_(
                Assignment.project_pk == project_pk,
                Assignment.status == "active",
                Assignment.expires_at <= utcnow(),
            )
        )
    )
