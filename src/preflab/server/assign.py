"""The assignment engine: which item a rater labels next, under a lease.

Order of work for a rater: the qualification set (gold) until they pass; then production items
they never saw, matching their verified domains, preferring items already part-labelled (so
overlap items reach k), with production gold injected at the project rate and shaped exactly
like any other task.

Correctness under concurrency (many threads, many processes):

* every write runs in one transaction that first locks the rater's status row, so one rater's
  requests are serialised (one live lease at a time, never the same item twice — also a
  unique constraint on ``(item, user)``);
* an item's pool row is locked before its labels are counted and a lease is inserted:
  ``SELECT ... FOR UPDATE SKIP LOCKED`` on PostgreSQL (busy items are skipped, not waited for),
  ``BEGIN IMMEDIATE`` on SQLite (writers are serialised by the file lock);
* inside that lock, ``filled`` (submitted labels) + live leases is compared with the target,
  and a submission locks the same row before it checks its lease has not expired, so an
  expired lease handed to someone else can never land as a (k+1)-th label.
"""

from __future__ import annotations

import random
from datetime import datetime
from typing import Any

from sqlalchemy import and_, exists, func, or_, select
from sqlalchemy.orm import Session

from ..store.models import ItemRow, utcnow
from ..store.repo import item_from_row
from ..store.server_models import Assignment, PoolDomain, PoolEntry, RaterStatus
from .auth import verified_domains
from .database import Database
from .flow import next as rules
from .flow.common import aware
from .flow.next import PICK_BATCH
from .gold import qualification_record
from .permissions import ProjectRef
from .policy import Policy, settings_of
from .projects import insert_ignore, sync_pool
from .quality_adapter import final_qualification

__all__ = ["PICK_BATCH", "aware", "lock_rater_status", "next_task", "release", "task_payload"]


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
    return session.scalar(
        select(RaterStatus)
        .where(RaterStatus.project_pk == project_pk, RaterStatus.user_pk == user_pk)
        .with_for_update()
        .execution_options(populate_existing=True)
    )


def live_lease_count(item_pk_col, now: datetime):
    return (
        select(func.count())
        .select_from(Assignment)
        .where(
            Assignment.item_pk == item_pk_col,
            Assignment.status == "active",
            Assignment.expires_at > now,
        )
        .scalar_subquery()
    )


def _domain_filter(domains: list[str], match: str):
    has_any = exists().where(PoolDomain.item_pk == PoolEntry.item_pk)
    if match == "any":
        if not domains:
            return ~has_any
        return or_(
            ~has_any,
            exists().where(PoolDomain.item_pk == PoolEntry.item_pk, PoolDomain.domain.in_(domains)),
        )
    if not domains:
        return ~has_any
    return ~exists().where(
        PoolDomain.item_pk == PoolEntry.item_pk, PoolDomain.domain.not_in(domains)
    )


def _pick(
    session: Session,
    project_pk: int,
    user_pk: int,
    role: str,
    domains: list[str],
    policy: Policy,
    now: datetime,
) -> PoolEntry | None:
    """Lock and return one eligible pool row of ``role`` for this rater, or ``None``."""
    seen = exists().where(Assignment.item_pk == PoolEntry.item_pk, Assignment.user_pk == user_pk)
    stmt = select(PoolEntry).where(
        PoolEntry.project_pk == project_pk,
        PoolEntry.role == role,
        ~seen,
        _domain_filter(domains, policy.domain_match),
    )
    if role == "production":
        stmt = stmt.where(
            PoolEntry.filled < PoolEntry.target,
            PoolEntry.filled + live_lease_count(PoolEntry.item_pk, now) < PoolEntry.target,
        ).order_by(PoolEntry.filled.desc(), PoolEntry.order_key.desc(), PoolEntry.pk.desc())
    elif role == "qualification":
        stmt = stmt.order_by(PoolEntry.pk)
    else:
        stmt = stmt.order_by(PoolEntry.order_key.desc(), PoolEntry.pk.desc())
    tried: list[int] = []
    for _ in range(8):
        batch_stmt = stmt.where(PoolEntry.pk.not_in(tried)) if tried else stmt
        rows = session.scalars(
            batch_stmt.limit(PICK_BATCH)
            .with_for_update(skip_locked=True, of=PoolEntry)
            .execution_options(populate_existing=True)
        ).all()
        if not rows:
            return None
        for row in rows:
            if role != "production":
                return row
            # Recount now that the row is ours: the candidate query's snapshot may predate a
            # lease committed by another process just before we took the lock.
            live = session.scalar(
                select(func.count())
                .select_from(Assignment)
                .where(
                    Assignment.item_pk == row.item_pk,
                    Assignment.status == "active",
                    Assignment.expires_at > now,
                )
            )
            if rules.has_room(row.filled, live, row.target):
                return row
            tried.append(row.pk)
    return None


def task_payload(session: Session, project: ProjectRef, lease: Assignment) -> dict[str, Any]:
    """What the rater gets (:func:`flow.next.task_payload`) for a lease loaded by the ORM."""
    view = item_from_row(session.get(ItemRow, lease.item_pk)).public_view()
    return rules.task_payload(
        project, view, lease.lease_id, lease.role, lease.shown_order, lease.expires_at
    )


def next_task(
    db: Database, project: ProjectRef, user_pk: int, *, rng: random.Random | None = None
) -> dict[str, Any]:
    """A task (a lease) for this rater, or ``{"task": None, "reason": ...}``."""
    rng = rng or random.Random()
    policy = settings_of(project.settings).policy
    for attempt in range(2):
        with db.writing() as session:
            result = _next_task(session, project, user_pk, policy, rng)
            if result is not None:
                return result
            # nothing found: items imported by another route may lack pool rows
            if attempt == 0 and sync_pool(session, project.pk, policy) == 0:
                break
    return rules.no_items()


def _next_task(
    session: Session, project: ProjectRef, user_pk: int, policy: Policy, rng: random.Random
) -> dict[str, Any] | None:
    now = utcnow()
    status = lock_rater_status(session, project.pk, user_pk, policy)
    refusal = rules.status_refusal(status.status, status.reason)
    if refusal is not None:
        return refusal
    live = session.scalar(
        select(Assignment)
        .where(
            Assignment.project_pk == project.pk,
            Assignment.user_pk == user_pk,
            Assignment.status == "active",
            Assignment.expires_at > now,
        )
        .limit(1)
    )
    if live is not None:  # resume: one live lease per rater
        return {"task": task_payload(session, project, live), "resumed": True}
    domains = verified_domains(session, user_pk)
    refusal = rules.domain_refusal(policy, domains)
    if refusal is not None:
        return refusal

    if status.status == "qualifying":
        if policy.qualification.n_items > 0:
            entry = _pick(session, project.pk, user_pk, "qualification", domains, policy, now)
            if entry is not None:
                return {
                    "task": task_payload(
                        session, project, _lease(session, project, user_pk, entry, policy, now, rng)
                    )
                }
            if _has_qualification_items(session, project.pk):
                record = qualification_record(session, project.pk, user_pk)
                q = policy.qualification
                decision = final_qualification(record, q.pass_bar, q.min_items)
                _set_status(
                    status,
                    "qualified" if decision == "pass" else "failed",
                    f"qualification set exhausted: {sum(record)}/{len(record)} correct",
                    now,
                )
                if decision != "pass":
                    return rules.status_refusal("failed", "")
            else:
                _set_status(status, "qualified", "project has no qualification items", now)
        else:
            _set_status(status, "qualified", "project needs no qualification", now)

    if policy.max_items_per_rater is not None:
        done = session.scalar(
            select(func.count())
            .select_from(Assignment)
            .where(
                Assignment.project_pk == project.pk,
                Assignment.user_pk == user_pk,
                Assignment.role != "qualification",
                Assignment.status == "submitted",
            )
        )
        refusal = rules.cap_refusal(policy, done)
        if refusal is not None:
            return refusal

    for role in rules.roles_to_try(policy, rng):
        entry = _pick(session, project.pk, user_pk, role, domains, policy, now)
        if entry is not None:
            return {
                "task": task_payload(
                    session, project, _lease(session, project, user_pk, entry, policy, now, rng)
                )
            }
    return None


def _has_qualification_items(session: Session, project_pk: int) -> bool:
    return (
        session.scalar(
            select(PoolEntry.pk)
            .where(PoolEntry.project_pk == project_pk, PoolEntry.role == "qualification")
            .limit(1)
        )
        is not None
    )


def _set_status(
    status: RaterStatus, value: str, reason: str, now: datetime, evidence: dict | None = None
) -> None:
    status.status, status.reason, status.updated_at = value, reason, now
    if evidence is not None:
        status.evidence = evidence


def _lease(
    session: Session,
    project: ProjectRef,
    user_pk: int,
    entry: PoolEntry,
    policy: Policy,
    now: datetime,
    rng: random.Random,
) -> Assignment:
    order = list(
        session.scalars(select(ItemRow).where(ItemRow.pk == entry.item_pk)).one().candidates
    )
    lease = Assignment(
        lease_id=rules.new_lease_id(),
        project_pk=project.pk,
        item_pk=entry.item_pk,
        user_pk=user_pk,
        role=entry.role,
        status="active",
        shown_order=rules.shown_order([c.candidate_key for c in order], policy, rng),
        settings_version=rules.settings_version(project),
        created_at=now,
        expires_at=rules.lease_expiry(now, policy),
    )
    session.add(lease)
    session.flush()
    return lease


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
    return session.scalar(
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
