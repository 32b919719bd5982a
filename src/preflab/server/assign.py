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
import secrets
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import and_, exists, func, or_, select
from sqlalchemy.orm import Session

from ..schema import kinds_for_item
from ..store.models import ItemRow, utcnow
from ..store.repo import item_from_row
from ..store.server_models import Assignment, PoolDomain, PoolEntry, RaterStatus
from .auth import verified_domains
from .gold import qualification_record
from .permissions import ProjectRef
from .policy import Policy, settings_of
from .projects import insert_ignore, sync_pool
from .quality_adapter import final_qualification

#: How many candidate rows one pick locks at a time (PostgreSQL skips rows others hold).
PICK_BATCH = 4


def aware(dt: datetime) -> datetime:
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)


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
            if row.filled + live < row.target:
                return row
            tried.append(row.pk)
    return None


def task_payload(session: Session, project: ProjectRef, lease: Assignment) -> dict[str, Any]:
    """What the rater gets: the item's public view in the shown order. Gold looks the same."""
    row = session.get(ItemRow, lease.item_pk)
    view = item_from_row(row).public_view()
    by_id = {c["id"]: c for c in view["candidates"]}
    view["candidates"] = [by_id[c] for c in lease.shown_order]
    settings = project.settings or {}
    return {
        "assignment_id": lease.lease_id,
        "project": project.name,
        "phase": "qualification" if lease.role == "qualification" else "production",
        "kinds": kinds_for_item(project.kinds, len(view["candidates"]), view.get("kinds")),
        "rubric": {"id": project.rubric_key, "version": project.rubric_version}
        if project.rubric_key
        else None,
        "item": view,
        "shown_order": list(lease.shown_order),
        "expires_at": aware(lease.expires_at).isoformat(),
        "settings_version": int(settings.get("version", 1)),
    }


def next_task(
    db, project: ProjectRef, user_pk: int, *, rng: random.Random | None = None
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
    return {
        "task": None,
        "reason": "no_items",
        "detail": "no more items for you in this project right now",
    }


def _no_task(reason: str, detail: str) -> dict[str, Any]:
    return {"task": None, "reason": reason, "detail": detail}


def _next_task(
    session: Session, project: ProjectRef, user_pk: int, policy: Policy, rng: random.Random
) -> dict[str, Any] | None:
    now = utcnow()
    status = lock_rater_status(session, project.pk, user_pk, policy)
    if status.status == "suspended":
        return _no_task("suspended", f"you are suspended from this project: {status.reason}")
    if status.status == "failed":
        return _no_task("not_qualified", "you did not pass this project's qualification")
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
    missing = sorted(set(policy.required_domains) - set(domains))
    if missing:
        return _no_task("domain_required", f"this project needs verified credentials in {missing}")

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
                    return _no_task(
                        "not_qualified", "you did not pass this project's qualification"
                    )
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
        if done >= policy.max_items_per_rater:
            return _no_task(
                "limit_reached",
                f"you reached this project's limit of {policy.max_items_per_rater} items",
            )

    roles = (
        ["gold", "production"]
        if policy.gold_rate > 0 and rng.random() < policy.gold_rate
        else ["production"]
    )
    for role in roles:
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
    ids = [c.candidate_key for c in order]
    if policy.randomise_order:
        rng.shuffle(ids)
    lease = Assignment(
        lease_id="asg_" + secrets.token_urlsafe(16),
        project_pk=project.pk,
        item_pk=entry.item_pk,
        user_pk=user_pk,
        role=entry.role,
        status="active",
        shown_order=ids,
        settings_version=int((project.settings or {}).get("version", 1)),
        created_at=now,
        expires_at=now + timedelta(seconds=policy.lease_seconds),
    )
    session.add(lease)
    session.flush()
    return lease


def release(db, project: ProjectRef, user_pk: int, lease_id: str) -> dict[str, Any]:
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


# -- the hot path in SQLAlchemy Core -------------------------------------------------------------
#
# ``next_task`` above is the reference implementation (ORM). Most requests are a qualified
# rater asking for a production (or gold) task; ``next_task_fast`` serves those with a few
# prebuilt Core statements and hands every other case (new rater, qualification, suspended,
# empty pool, ...) to ``next_task``. Statements are built once at import with bind parameters,
# so a request pays neither statement construction nor ORM bookkeeping.

from sqlalchemy import bindparam, insert  # noqa: E402

from ..store.models import CandidateRow  # noqa: E402
from ..store.server_models import Credential  # noqa: E402
from .policy import policy_of  # noqa: E402

_A, _P, _PD = Assignment.__table__, PoolEntry.__table__, PoolDomain.__table__
_I, _C, _RS, _CR = (
    ItemRow.__table__,
    CandidateRow.__table__,
    RaterStatus.__table__,
    Credential.__table__,
)

#: The rater's status row, locked: serialises one rater's requests (PostgreSQL; on SQLite the
#: BEGIN IMMEDIATE of the write transaction already serialises every writer).
_LOCK_STATUS = (
    select(_RS.c.status)
    .where(_RS.c.project_pk == bindparam("project_pk"), _RS.c.user_pk == bindparam("user_pk"))
    .with_for_update()
)

#: A live lease of this rater (resume it: one live lease per rater).
_LIVE_LEASE = (
    select(_A.c.lease_id, _A.c.item_pk, _A.c.role, _A.c.shown_order, _A.c.expires_at)
    .where(
        _A.c.project_pk == bindparam("project_pk"),
        _A.c.user_pk == bindparam("user_pk"),
        _A.c.status == "active",
        _A.c.expires_at > bindparam("now"),
    )
    .limit(1)
)

_VERIFIED_DOMAINS = select(_CR.c.domain).where(
    _CR.c.user_pk == bindparam("user_pk"), _CR.c.verified.is_(True)
)

_DONE_COUNT = (
    select(func.count())
    .select_from(_A)
    .where(
        _A.c.project_pk == bindparam("project_pk"),
        _A.c.user_pk == bindparam("user_pk"),
        _A.c.role != "qualification",
        _A.c.status == "submitted",
    )
)

#: The item and its candidates in one round trip (one row per candidate, in item order).
_ITEM_VIEW = (
    select(
        _I.c.item_key,
        _I.c.content_hash,
        _I.c.prompt,
        _I.c.domains,
        _I.c.reference,
        _I.c.gold,
        _I.c["metadata"].label("meta"),
        _C.c.candidate_key,
        _C.c.text,
        _C.c.messages,
        _C.c.model,
        _C.c.source,
        _C.c["metadata"].label("cmeta"),
    )
    .join(_C, _C.c.item_pk == _I.c.pk)
    .where(_I.c.pk == bindparam("item_pk"))
    .order_by(_C.c.position)
)

_INSERT_LEASE = insert(_A)

#: Live leases of the locked candidates, counted again after the lock (PostgreSQL only).
_RECOUNT = (
    select(_A.c.item_pk, func.count())
    .where(
        _A.c.item_pk.in_(bindparam("item_pks", expanding=True)),
        _A.c.status == "active",
        _A.c.expires_at > bindparam("now"),
    )
    .group_by(_A.c.item_pk)
)


def _build_pick(role: str, match: str, retry: bool):
    """The candidate query for one role: eligibility, counts and order in a single statement.

    * ``NOT EXISTS`` a lease of this rater on the item: never the same item twice (any status);
    * domains compared in SQL against the rater's verified credentials (a subquery), so the
      credentials need no round trip of their own;
    * production: submitted labels + live leases below the target, as a correlated count —
      the exact-k rule; fuller items first so overlap items reach k;
    * ``FOR UPDATE OF task_pool SKIP LOCKED`` on PostgreSQL (no-op on SQLite, where BEGIN
      IMMEDIATE serialises writers): concurrent assigners skip each other's candidates.
    """
    item = _P.c.item_pk
    mine = select(_CR.c.domain).where(
        _CR.c.user_pk == bindparam("user_pk"), _CR.c.verified.is_(True)
    )
    has_any = exists().where(_PD.c.item_pk == item)
    if match == "any":
        domain_ok = or_(~has_any, exists().where(_PD.c.item_pk == item, _PD.c.domain.in_(mine)))
    else:
        domain_ok = ~exists().where(_PD.c.item_pk == item, _PD.c.domain.not_in(mine))
    live = (
        select(func.count())
        .select_from(_A)
        .where(_A.c.item_pk == item, _A.c.status == "active", _A.c.expires_at > bindparam("now"))
        .scalar_subquery()
    )
    stmt = select(_P.c.pk, _P.c.item_pk, _P.c.role, _P.c.filled, _P.c.target).where(
        _P.c.project_pk == bindparam("project_pk"),
        _P.c.role == role,
        ~exists().where(_A.c.item_pk == item, _A.c.user_pk == bindparam("user_pk")),
        domain_ok,
    )
    if role == "production":
        stmt = stmt.where(_P.c.filled < _P.c.target, _P.c.filled + live < _P.c.target).order_by(
            _P.c.filled.desc(), _P.c.order_key.desc(), _P.c.pk.desc()
        )
    else:
        stmt = stmt.order_by(_P.c.order_key.desc(), _P.c.pk.desc())
    if retry:
        stmt = stmt.where(_P.c.pk.not_in(bindparam("tried", expanding=True)))
    return stmt.limit(bindparam("n")).with_for_update(skip_locked=True, of=_P)


_PICKS = {
    (role, match, retry): _build_pick(role, match, retry)
    for role in ("production", "gold")
    for match in ("any", "all")
    for retry in (False, True)
}

#: Public views of items by (pk, content hash): items are immutable once imported (same id
#: with other content is refused), and the hash guards against a reused primary key.
_VIEWS: dict[tuple[int, str], tuple[dict[str, Any], list[str]]] = {}


def _item_view(conn, item_pk: int) -> tuple[dict[str, Any], list[str]]:
    rows = conn.execute(_ITEM_VIEW, {"item_pk": item_pk}).all()
    key = (item_pk, rows[0].content_hash)
    hit = _VIEWS.get(key)
    if hit is not None:
        return hit
    first = rows[0]
    from ..schema import Item

    item = Item.model_validate(
        {
            "id": first.item_key,
            "prompt": first.prompt,
            "candidates": [
                {
                    "id": r.candidate_key,
                    **({"text": r.text} if r.messages is None else {"messages": r.messages}),
                    "model": r.model,
                    "source": r.source,
                    "metadata": r.cmeta or {},
                }
                for r in rows
            ],
            "domains": first.domains or [],
            "reference": first.reference,
            "gold": first.gold,
            "metadata": first.meta or {},
        }
    )
    if len(_VIEWS) > 20_000:
        _VIEWS.clear()
    hit = _VIEWS[key] = (item.public_view(), [r.candidate_key for r in rows])
    return hit


def _payload(
    project: ProjectRef,
    view: dict[str, Any],
    lease_id: str,
    role: str,
    shown: list[str],
    expires_at: datetime,
) -> dict[str, Any]:
    """Same shape as :func:`task_payload`."""
    by_id = {c["id"]: c for c in view["candidates"]}
    settings = project.settings or {}
    return {
        "assignment_id": lease_id,
        "project": project.name,
        "phase": "qualification" if role == "qualification" else "production",
        "kinds": kinds_for_item(project.kinds, len(shown), view.get("kinds")),
        "rubric": {"id": project.rubric_key, "version": project.rubric_version}
        if project.rubric_key
        else None,
        "item": {**view, "candidates": [by_id[c] for c in shown]},
        "shown_order": list(shown),
        "expires_at": aware(expires_at).isoformat(),
        "settings_version": int(settings.get("version", 1)),
    }


def _pick_fast(conn, params: dict[str, Any], role: str, policy: Policy, is_pg: bool) -> Any:
    if not is_pg:
        # SQLite: BEGIN IMMEDIATE holds the write lock for the whole transaction, so the counts
        # in the candidate query are current; the first eligible row is the answer.
        return conn.execute(_PICKS[(role, policy.domain_match, False)], {**params, "n": 1}).first()
    tried: list[int] = []
    for _ in range(8):
        stmt = _PICKS[(role, policy.domain_match, bool(tried))]
        rows = conn.execute(stmt, {**params, "n": PICK_BATCH, "tried": tried}).all()
        if not rows:
            return None
        if role != "production":
            return rows[0]
        # PostgreSQL READ COMMITTED: the subquery's snapshot may predate a lease committed by
        # another worker just before we locked the row; recount the locked rows (one query).
        live = dict(
            conn.execute(
                _RECOUNT, {"item_pks": [r.item_pk for r in rows], "now": params["now"]}
            ).all()
        )
        for row in rows:
            if row.filled + live.get(row.item_pk, 0) < row.target:
                return row
            tried.append(row.pk)
    return None


def next_task_fast(
    db,
    project: ProjectRef,
    user_pk: int,
    *,
    rng: random.Random | None = None,
    lane=None,
) -> dict[str, Any]:
    """:func:`next_task` for the common case (a qualified rater); anything else goes there.

    ``lane``: called by :mod:`preflab.server.fastlane` inside its own SQLite transaction; the
    same decisions on the DBAPI connection, raising ``judging._Fallback`` where this function
    would call :func:`next_task` (the lane does that after its rollback)."""
    if lane is not None:
        from .fastlane import next_in_lane

        return next_in_lane(lane, project, user_pk)
    rng = rng or random.Random()
    policy = policy_of(project.settings)
    is_pg = not db.is_sqlite
    with db.write_conn() as conn:
        now = utcnow()
        params = {"project_pk": project.pk, "user_pk": user_pk, "now": now}
        status = conn.execute(_LOCK_STATUS, params).scalar()
        if status != "qualified":
            result = None  # new, qualifying, failed or suspended: the reference path decides
        else:
            live = conn.execute(_LIVE_LEASE, params).first()
            if live is not None:
                view, _ = _item_view(conn, live.item_pk)
                return {
                    "task": _payload(
                        project, view, live.lease_id, live.role, live.shown_order, live.expires_at
                    ),
                    "resumed": True,
                }
            result = _lease_fast(conn, project, user_pk, policy, params, rng, is_pg)
    if result is not None:
        return result
    return next_task(db, project, user_pk, rng=rng)


def _lease_fast(
    conn,
    project: ProjectRef,
    user_pk: int,
    policy: Policy,
    params: dict[str, Any],
    rng: random.Random,
    is_pg: bool,
) -> dict[str, Any] | None:
    if policy.required_domains:
        domains = set(conn.execute(_VERIFIED_DOMAINS, params).scalars())
        if set(policy.required_domains) - domains:
            return None  # the reference path explains which domains are missing
    if (
        policy.max_items_per_rater is not None
        and conn.execute(_DONE_COUNT, params).scalar() >= policy.max_items_per_rater
    ):
        return None
    roles = (
        ["gold", "production"]
        if policy.gold_rate > 0 and rng.random() < policy.gold_rate
        else ["production"]
    )
    for role in roles:
        entry = _pick_fast(conn, params, role, policy, is_pg)
        if entry is None:
            continue
        view, ids = _item_view(conn, entry.item_pk)
        ids = list(ids)
        if policy.randomise_order:
            rng.shuffle(ids)
        lease_id = "asg_" + secrets.token_urlsafe(16)
        now = params["now"]
        expires = now + timedelta(seconds=policy.lease_seconds)
        conn.execute(
            _INSERT_LEASE,
            {
                "lease_id": lease_id,
                "project_pk": project.pk,
                "item_pk": entry.item_pk,
                "user_pk": user_pk,
                "role": entry.role,
                "status": "active",
                "shown_order": ids,
                "settings_version": int((project.settings or {}).get("version", 1)),
                "created_at": now,
                "expires_at": expires,
            },
        )
        return {"task": _payload(project, view, lease_id, entry.role, ids, expires)}
    return None
