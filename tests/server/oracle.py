"""The ORM reference of "next task" and "submit": the test oracle, never served.

The server answers both requests with one flow (:mod:`preflab.server.flow.lane`), on the fast
lane's executors and on the FastAPI routes' (:mod:`preflab.server.exec.framework`). This module
keeps the earlier, independent implementation of the same rules with the ORM (issue 10:
"the ORM path survives, if at all, only as a test oracle"); the parity tests put it behind the
routes (:func:`install`) and compare what both write and answer, row by row. It decides with
the same rule functions (:mod:`preflab.server.flow.next`, :mod:`preflab.server.flow.submit`),
so what it checks independently is the *flow*: which statements run, in which order, under
which locks, and what is written.
"""

from __future__ import annotations

import random
from datetime import datetime
from typing import Any

from sqlalchemy import exists, func, select
from sqlalchemy.orm import Session

from preflab.server.auth import verified_domains
from preflab.server.database import Database
from preflab.server.flow import next as rules
from preflab.server.flow.next import PICK_BATCH
from preflab.server.flow.submit import build_judgment, judgment_columns, lease_refusal
from preflab.server.gold import qualification_record
from preflab.server.permissions import ProjectRef
from preflab.server.policy import Policy, settings_of
from preflab.server.quality_adapter import final_qualification
from preflab.server.services.gold_scoring import _score, defer_gold_scoring
from preflab.server.services.leases import lock_rater_status, task_payload
from preflab.server.services.projects import sync_pool
from preflab.server.services.results import judgment_result as _result
from preflab.server.services.results import replay_of as _replay_of
from preflab.server.services.results import same_answer as _same_answer
from preflab.server.sql import domain_ok
from preflab.store import repo
from preflab.store.models import ItemRow, JudgmentRow, Project, utcnow
from preflab.store.rows import judgment_rows
from preflab.store.server_models import Assignment, PoolEntry, RaterStatus

__all__ = ["install", "next_task", "submit"]


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


def install(monkeypatch) -> None:
    """Serve "next" and "submit" from this oracle (fast lane off, the routes' engine swapped)."""
    from preflab.server import fastlane
    from preflab.server.routes import labelling

    monkeypatch.setattr(fastlane, "ENABLED", False)
    monkeypatch.setattr(labelling, "serve_next", next_task)
    monkeypatch.setattr(labelling, "serve_submit", submit)


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
        domain_ok(PoolEntry.item_pk, domains, policy.domain_match),
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


def submit(
    db: Database,
    project_ref: ProjectRef,
    user_pk: int,
    username: str,
    *,
    assignment_id: str,
    judgment: dict[str, Any],
    idempotency_key: str | None = None,
    telemetry: dict[str, Any] | None = None,
) -> dict[str, Any]:
    policy = settings_of(project_ref.settings).policy
    deferred: list[int] = []
    out = _submit(
        db,
        project_ref,
        policy,
        user_pk,
        username,
        assignment_id,
        judgment,
        idempotency_key,
        telemetry,
        deferred,
    )
    for judgment_pk in deferred:  # after the commit: the scorer reads the committed row
        defer_gold_scoring(db, judgment_pk)
    return out


def _submit(
    db: Database,
    project_ref: ProjectRef,
    policy: Policy,
    user_pk: int,
    username: str,
    assignment_id: str,
    judgment: dict[str, Any],
    idempotency_key: str | None,
    telemetry: dict[str, Any] | None,
    deferred: list[int],
) -> dict[str, Any]:
    with db.writing() as session:
        project = session.get(Project, project_ref.pk)
        if idempotency_key:
            first = _replay_of(
                session, project.pk, username, idempotency_key, judgment, lease_id=assignment_id
            )
            if first is not None:
                return _result(session, first, created=False)
        status = lock_rater_status(session, project.pk, user_pk, policy)
        lease = session.scalar(
            select(Assignment)
            .where(Assignment.lease_id == assignment_id, Assignment.project_pk == project.pk)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
        found = lease is not None and lease.user_pk == user_pk
        if not found:
            raise lease_refusal(
                assignment_id,
                found=False,
                lease_status=None,
                rater_status=None,
                rater_reason="",
                expires_at=None,
                now=utcnow(),
            )
        pool = session.scalar(
            select(PoolEntry)
            .where(PoolEntry.item_pk == lease.item_pk)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
        item_row = session.get(ItemRow, lease.item_pk)
        if lease.status == "submitted":
            first = session.get(JudgmentRow, lease.judgment_pk)
            if first is not None and _same_answer(first, judgment):
                return _result(session, first, created=False)
        now = utcnow()
        refusal = lease_refusal(
            assignment_id,
            found=True,
            lease_status=lease.status,
            rater_status=status.status,
            rater_reason=status.reason,
            expires_at=lease.expires_at,
            now=now,
        )
        if refusal is not None:
            raise refusal
        parsed = build_judgment(
            session,
            project,
            item_row,
            username,
            judgment,
            shown_order=list(lease.shown_order),
            started_at=lease.created_at,
            idempotency_key=idempotency_key,
            telemetry=telemetry,
            guideline_version=lease.settings_version,
        )
        # validated above (kind, candidates, shown order, rubric); the unique constraints on
        # (project, idempotency key) and (project, content hash) still guard against doubles
        rater = repo.get_or_create_rater(session, project, username)
        if rater.user_pk is None:
            rater.user_pk = user_pk
        columns = judgment_columns(project.pk, item_row.pk, rater.pk, judgment_rows(parsed).values)
        row, created = JudgmentRow(**columns), True
        session.add(row)
        session.flush()
        # the insert closed the lease and counted the label (store.triggers): reload them
        session.expire(lease, ["status", "judgment_pk"])
        if pool is not None:
            session.expire(pool, ["filled"])
        if pool is not None and pool.role == "qualification" and item_row.gold:
            # qualification answers are explained at once (the rater knows these are tests)
            _score(session, project, policy, status, user_pk, item_row, row, parsed, pool.role, now)
        elif pool is not None and pool.role == "gold":
            deferred.append(row.pk)  # production gold: scored after the response, see below
        session.flush()
        return _result(
            session,
            row,
            created=created,
            status=status,
            gold_possible=pool is not None and pool.role == "qualification",
        )
