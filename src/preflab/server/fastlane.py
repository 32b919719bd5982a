"""The fast lane: the two hot endpoints on SQLite, served without the framework in the way.

A labelling session is a loop of two requests, ``POST /api/v1/projects/{project}/assignments/next``
and ``POST /api/v1/projects/{project}/judgments``. Through FastAPI each cost milliseconds of CPU
(routing, dependency injection, a worker-thread hop, pydantic, the ORM/Core layers). This pure
ASGI layer sits inside the app's middleware (so the body limit and the security headers still
apply) and serves the *common case* of those two requests directly:

* a bearer token (cookie sessions, with their CSRF check, go the ordinary way);
* a rater whose status in the project is ``qualified``;
* ``next``: a live lease to resume, or a production/gold item to lease;
* ``submit``: a plain pairwise judgment on the caller's live, unexpired production (or
  production gold: scored after the response, :func:`judging.defer_gold_scoring`) lease,
  with a fresh idempotency key.

Everything else — a bad or revoked token, a non-member, a missing project, a qualifying,
failed or suspended rater, an empty pool, a replay, gold scoring, an expired or foreign lease,
anything the cheap validation does not accept — is handed, untouched (the request body
replayed), to the FastAPI app, which answers it exactly as before. The lane never answers an
error itself, so every refusal is byte for byte the framework's.

The checks are the guard's (:mod:`preflab.server.permissions`): the token's hash, not revoked,
not expired, an active user, the project by name, the caller's membership with the ``rater``
role (``project.label``). They run on every request, in the same SQLite write transaction as
the work — nothing about a caller is cached, so a revoked token, a removed membership or a
suspension counts from the very next request, from any worker.

Transactions: SQLite ``BEGIN IMMEDIATE`` on a connection of the lane's own, on the event loop
thread (a few hundred µs of work; no thread hop). The lane only ever *tries* the locks: if
another thread of this process (the in-process write lock) or another process (SQLite's file
lock, ``busy_timeout`` 0 on this connection) is writing, the request goes to the framework,
which waits its turn as before. Durability is SQLite's: the answer is sent after ``COMMIT``
(WAL), so an acknowledged judgment survives ``kill -9`` of the server.

Statements are the Core statements of :mod:`preflab.server.assign` and
:mod:`preflab.server.judging`, compiled once for SQLite and run on the DBAPI connection; the
values written are produced by the same type processors SQLAlchemy uses (datetimes, JSON), so
the rows are the ones the Core path writes (``tests/server/test_fastlane.py`` holds them equal).
PostgreSQL is not served here: the lane passes every request through.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import random
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import anyio.to_thread
import orjson
from pydantic import TypeAdapter
from sqlalchemy import select

from ..store.models import ItemRow, Project, utcnow
from ..store.server_models import ApiToken, Assignment, Membership, RaterStatus, User
from . import assign, judging, permissions
from .exec import Busy, TracingCursor
from .exec.sqlite import SqliteExecutor
from .permissions import ProjectRef
from .policy import Policy, policy_of
from .wire import wire_problems

log = logging.getLogger(__name__)

#: Counters for tests and profiling: requests served here, and handed on (by reason).
STATS: dict[str, int] = {}

#: Called with each SQL statement the lane's connection runs (profiling); set before first use.
TRACE: Callable[[str], None] | None = None

_PREFIX = "/api/v1/projects/"
_NEXT, _SUBMIT = 1, 2
_RNG = random.SystemRandom()


def _count(key: str) -> None:
    STATS[key] = STATS.get(key, 0) + 1


# -- statements: each compiled once per backend ----------------------------------------------

_DT_JSON = TypeAdapter(datetime)


class _Sql:
    """A Core statement compiled once for one backend: SQL text + positional parameter names."""

    __slots__ = ("defaults", "names", "sql")

    def __init__(self, stmt, dialect) -> None:
        compiled = stmt.compile(dialect=dialect)
        self.sql = compiled.string
        self.names = tuple(compiled.positiontup)
        self.defaults = dict(compiled.params)

    def args(self, params: dict[str, Any]) -> list[Any]:
        d = self.defaults
        return [params[n] if n in params else d[n] for n in self.names]


_U, _T, _PJ, _M, _RS, _A = (
    User.__table__,
    ApiToken.__table__,
    Project.__table__,
    Membership.__table__,
    RaterStatus.__table__,
    Assignment.__table__,
)


def _auth_stmt(with_live: bool, lock: bool):
    """The guard's token check (permissions._BY_TOKEN), the project, the caller's role in it
    (permissions._PROJECT) and the rater's status, in one statement.

    ``with_live`` (SQLite): also the caller's live lease (assign._LIVE_LEASE), if any.
    ``lock`` (PostgreSQL): inner joins (the lane serves members with a status row only; the rest
    goes to the framework) and ``FOR UPDATE OF rater_status``: one rater's requests are
    serialised by this row, taken in the first round trip, as the Core and ORM paths do."""
    from sqlalchemy import and_, bindparam, or_

    cols = [
        _U.c.pk,
        _U.c.username,
        _PJ.c.pk,
        _PJ.c.name,
        _PJ.c.title,
        _PJ.c.kinds,
        _PJ.c.settings,
        _PJ.c.rubric_key,
        _PJ.c.rubric_version,
        _M.c.role,
        _RS.c.status,
        _U.c.is_admin,
    ]
    if with_live:
        cols.append(
            select(_A.c.pk)
            .where(
                _A.c.project_pk == _PJ.c.pk,
                _A.c.user_pk == _U.c.pk,
                _A.c.status == "active",
                _A.c.expires_at > bindparam("now"),
            )
            .limit(1)
            .scalar_subquery()
        )
    stmt = select(*cols).select_from(_T).join(_U, _U.c.pk == _T.c.user_pk)
    if lock:
        stmt = (
            stmt.join(_PJ, _PJ.c.name == bindparam("name"))
            .join(_M, and_(_M.c.project_pk == _PJ.c.pk, _M.c.user_pk == _U.c.pk))
            .join(_RS, and_(_RS.c.project_pk == _PJ.c.pk, _RS.c.user_pk == _U.c.pk))
        )
    else:
        stmt = (
            stmt.outerjoin(_PJ, _PJ.c.name == bindparam("name"))
            .outerjoin(_M, and_(_M.c.project_pk == _PJ.c.pk, _M.c.user_pk == _U.c.pk))
            .outerjoin(_RS, and_(_RS.c.project_pk == _PJ.c.pk, _RS.c.user_pk == _U.c.pk))
        )
    stmt = stmt.where(
        _T.c.token_hash == bindparam("hash"),
        _T.c.revoked_at.is_(None),
        or_(_T.c.expires_at.is_(None), _T.c.expires_at > bindparam("now")),
        _U.c.is_active.is_(True),
    )
    return stmt.with_for_update(of=_RS) if lock else stmt


class _Statements:
    """Every statement of the lane, compiled once for one executor's dialect."""

    def __init__(self, ex) -> None:
        def c(stmt) -> _Sql:
            return _Sql(stmt, ex.dialect)

        pg, m = ex.is_pg, ex.mark
        self.auth_next = c(_auth_stmt(not pg, pg))
        self.auth_submit = c(_auth_stmt(False, pg))
        self.live = c(assign._LIVE_LEASE)
        self.lease_by_pk = c(
            select(_A.c.lease_id, _A.c.item_pk, _A.c.role, _A.c.shown_order, _A.c.expires_at).where(
                _A.c.pk == assign.bindparam("a_pk")
            )
        )
        self.verified_domains = c(assign._VERIFIED_DOMAINS)
        self.done_count = c(assign._DONE_COUNT)
        self.item_view = c(assign._ITEM_VIEW)
        self.picks = {
            (role, match): c(
                assign._PICKS[(role, match, False)].add_columns(
                    select(ItemRow.__table__.c.content_hash)
                    .where(ItemRow.__table__.c.pk == assign._P.c.item_pk)
                    .scalar_subquery()
                )
            )
            for role in ("production", "gold")
            for match in ("any", "all")
        }
        self.lease = c(judging._LEASE)
        self.insert_lease = (
            "INSERT INTO assignments (lease_id, project_pk, item_pk, user_pk, role, status, shown_order, "
            f"settings_version, created_at, expires_at) VALUES ({m}, {m}, {m}, {m}, {m}, 'active', {m}, {m}, {m}, {m})"
        )
        self.close_lease = c(judging._CLOSE_LEASE)
        self.fill = c(judging._FILL)


# -- the judgment, validated and turned into its row without pydantic -----------------------------

_JUDGMENT_KEYS = frozenset({"kind", "winner", "strength", "rationale"})
_SUBMIT_KEYS = frozenset({"assignment_id", "judgment", "telemetry", "idempotency_key"})
_TEL_ORDER = (
    "iki_cv",
    "revision_ratio",
    "pasted_chars",
    "paste_count",
    "typed_chars",
    "active_ms",
    "focus_losses",
)
_TEL_FLOAT = frozenset({"iki_cv", "revision_ratio"})
_TEL_KEYS = frozenset(_TEL_ORDER)


class _Pass(Exception):
    """Not the common case: hand the request, untouched, to the FastAPI route."""


Fallback = judging._Fallback  # the engine's "not the common case: use the reference path"


def _ident(value: Any) -> bool:
    """Already a valid ``Identifier`` (a string of 1-200 characters, nothing to strip)."""
    return type(value) is str and 1 <= len(value) <= 200 and value == value.strip()


def telemetry_fast(raw: Any) -> dict[str, Any] | None:
    """``Telemetry.model_validate(raw).model_dump(mode="json", exclude_none=True)`` for plain
    values (ints where ints go, floats where floats go, all >= 0); raises ``_Pass`` otherwise."""
    if raw is None:
        return None
    if type(raw) is not dict:
        raise _Pass("telemetry")
    for k, v in raw.items():
        if k not in _TEL_KEYS:
            raise _Pass("telemetry")
        if v is None:
            continue
        if (type(v) is not (float if k in _TEL_FLOAT else int)) or v < 0:
            raise _Pass("telemetry")
    return {k: raw[k] for k in _TEL_ORDER if raw.get(k) is not None}


def pairwise_values(
    judgment: dict[str, Any],
    *,
    item_key: str,
    shown_order: list[str],
    candidate_keys: list[str],
    username: str,
    rubric_key: str | None,
    rubric_version: int | None,
    started_at: datetime,
    submitted_at: datetime,
    guideline_version: int | None = None,
    idempotency_key: str | None,
    telemetry: dict[str, Any] | None,
    min_rationale_chars: int,
) -> dict[str, Any]:
    """``judgment_rows(build_judgment(...)).values`` for a plain pairwise judgment.

    Accepts only what the reference path would accept unchanged (raises ``_Pass`` for anything
    else, which then gets the reference path's own answer, errors included); the property test
    in ``tests/server/test_fastlane.py`` holds the two equal.
    """
    if not judgment.keys() <= _JUDGMENT_KEYS or judgment.get("kind") != "pairwise":
        raise _Pass("judgment shape")
    winner, strength = judgment.get("winner"), judgment.get("strength")
    if winner not in ("a", "b", "tie") or type(winner) is not str or type(strength) is not int:
        raise _Pass("judgment values")
    if not 0 <= strength <= 3 or (winner == "tie") != (strength == 0):
        raise _Pass("judgment values")
    rationale = judgment.get("rationale")
    if rationale is not None and (type(rationale) is not str or len(rationale) > 20_000):
        raise _Pass("rationale")
    if min_rationale_chars and len((rationale or "").strip()) < min_rationale_chars:
        raise _Pass("rationale")
    if (
        len(shown_order) != 2
        or not _ident(shown_order[0])
        or not _ident(shown_order[1])
        or shown_order[0] == shown_order[1]
        or shown_order[0] not in candidate_keys
        or shown_order[1] not in candidate_keys
    ):
        raise _Pass("shown order")
    if not _ident(item_key) or not _ident(username):
        raise _Pass("identifiers")
    if idempotency_key is not None and len(idempotency_key) > 200:
        raise _Pass("idempotency key")
    if rubric_key is not None and type(rubric_key) is not str:
        raise _Pass("rubric")
    if rubric_version is not None and (type(rubric_version) is not int or rubric_version < 1):
        raise _Pass("rubric")
    a, b = shown_order
    prov: dict[str, Any] = {"rater_id": username}
    if rubric_key is not None:
        prov["rubric_id"] = rubric_key
    if rubric_version is not None:
        prov["rubric_version"] = rubric_version
    if guideline_version:  # 0: not recorded (judging.build_judgment)
        prov["guideline_version"] = guideline_version
    prov["review_pass"] = 0
    prov["source"] = "human"
    prov["started_at"] = _DT_JSON.dump_python(started_at, mode="json")
    prov["submitted_at"] = _DT_JSON.dump_python(submitted_at, mode="json")
    if telemetry is not None:
        prov["telemetry"] = telemetry
    hashed: dict[str, Any] = {"item_id": item_key}
    if rationale is not None:
        hashed["rationale"] = rationale
    hashed["provenance"] = prov
    hashed["kind"] = "pairwise"
    hashed["shown_order"] = [a, b]
    hashed["winner"] = winner
    hashed["strength"] = strength
    digest = hashlib.sha256(orjson.dumps(hashed, option=orjson.OPT_SORT_KEYS)).hexdigest()[:64]
    lo, hi = (a, b) if a < b else (b, a)
    if winner == "tie":
        score = 0
    else:
        chosen = a if winner == "a" else b
        score = -strength if chosen == lo else strength
    return {
        "kind": "pairwise",
        "body": {"kind": "pairwise", "shown_order": [a, b], "winner": winner, "strength": strength},
        "rationale": rationale,
        "pair_lo": lo,
        "pair_hi": hi,
        "score": score,
        "shown_order": [a, b],
        "rubric_key": rubric_key,
        "rubric_version": rubric_version,
        "guideline_version": guideline_version or None,
        "review_pass": 0,
        "source": "human",
        "started_at": started_at,
        "submitted_at": submitted_at,
        "telemetry": telemetry,
        "idempotency_key": idempotency_key,
        "content_hash": digest,
    }


_JUDGMENT_COLS = (
    "kind",
    "rationale",
    "pair_lo",
    "pair_hi",
    "score",
    "rubric_key",
    "rubric_version",
    "guideline_version",
    "review_pass",
    "source",
    "idempotency_key",
    "content_hash",
)
_JSON_COLS = ("body", "shown_order", "telemetry")
_DT_COLS = ("started_at", "submitted_at")


def _insert_judgment(
    ex,
    project_pk: int,
    item_pk: int,
    rater_pk: int,
    values: dict[str, Any],
    now: datetime,
) -> tuple[str, list[Any]]:
    """``INSERT INTO judgments`` with what the Core insert binds (NULL columns left out: they
    have no defaults; ``excluded`` and ``created_at`` get the model defaults)."""
    names = ["project_pk", "item_pk", "rater_pk", "excluded", "created_at"]
    args: list[Any] = [project_pk, item_pk, rater_pk, ex.false(), ex.dt(now)]
    for col in _JUDGMENT_COLS:
        v = values[col]
        if v is not None:
            names.append(col)
            args.append(v)
    for col in _JSON_COLS:
        v = values[col]
        if v is not None:
            names.append(col)
            args.append(ex.json(v))
    for col in _DT_COLS:
        v = values[col]
        if v is not None:
            names.append(col)
            args.append(ex.dt(v))
    marks = ", ".join([ex.mark] * len(names))
    return f"INSERT INTO judgments ({', '.join(names)}) VALUES ({marks})", args


#: PostgreSQL: the judgment, the lease closed and the pool row counted in one statement (one
#: round trip instead of three; the rows locked by the lease query are released at COMMIT).
_PG_STORE = (
    "WITH j AS ({insert} RETURNING pk), "
    "a AS (UPDATE assignments SET status = 'submitted', judgment_pk = (SELECT pk FROM j) WHERE pk = %s), "
    "p AS (UPDATE task_pool SET filled = filled + CASE WHEN role = 'production' THEN 1 ELSE 0 END "
    "WHERE pk = %s) "
    "SELECT pk FROM j"
)


def _store_judgment(
    lane: Lane,
    project_pk: int,
    item_pk: int,
    rater_pk: int,
    values: dict[str, Any],
    a_pk: int,
    pool_pk: int,
) -> int:
    """Insert the judgment, close the lease, count the label on the pool row; the judgment's pk."""
    ex, cur, q = lane.ex, lane.cur, lane.sql
    insert, args = _insert_judgment(ex, project_pk, item_pk, rater_pk, values, lane.now)
    if ex.is_pg:
        return cur.execute(_PG_STORE.format(insert=insert), [*args, a_pk, pool_pk]).fetchone()[0]
    j_pk = ex.insert_returning_pk(cur, insert, args)
    cur.execute(q.close_lease.sql, q.close_lease.args({"a_pk": a_pk, "j_pk": j_pk}))
    cur.execute(q.fill.sql, q.fill.args({"p_pk": pool_pk}))
    return j_pk


# -- per-project derived values (keyed on the row's own content, read in the same query) ----------

_PROJECTS: dict[tuple, ProjectRef] = {}


def _project(
    ex,
    pk: int,
    name: str,
    title: str,
    kinds: Any,
    settings: Any,
    rubric_key: str | None,
    rubric_version: int | None,
) -> ProjectRef:
    """The guard's ``ProjectRef``, memoised on the row's content (read in the same query)."""
    if ex.is_pg:  # JSONB comes back parsed: key on its canonical text
        kinds, settings = (
            orjson.dumps(kinds, option=orjson.OPT_SORT_KEYS),
            orjson.dumps(settings, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS),
        )
    key = (pk, name, title, kinds, settings, rubric_key, rubric_version)
    ref = _PROJECTS.get(key)
    if ref is None:
        raw = orjson.loads(settings) if settings else {}
        ref = ProjectRef(
            pk,
            name,
            title,
            list(orjson.loads(kinds) if kinds else []),
            dict(raw or {}),
            rubric_key,
            rubric_version,
        )
        if len(_PROJECTS) > 256:
            _PROJECTS.clear()
        _PROJECTS[key] = ref
    return ref


def _item_view(
    lane: Lane, item_pk: int, content_hash: str | None
) -> tuple[dict[str, Any], list[str]]:
    """The item's public view and candidate ids; shares :data:`assign._VIEWS` (keyed on pk + hash)."""
    if content_hash is not None:
        hit = assign._VIEWS.get((item_pk, content_hash))
        if hit is not None:
            return hit
    q = lane.sql.item_view
    rows = lane.cur.execute(q.sql, q.args({"item_pk": item_pk})).fetchall()
    key = (item_pk, rows[0][1])
    hit = assign._VIEWS.get(key)
    if hit is not None:
        return hit
    from ..schema import Item

    j = lane.ex.load_json

    first = rows[0]
    item = Item.model_validate(
        {
            "id": first[0],
            "prompt": j(first[2]),
            "candidates": [
                {
                    "id": r[7],
                    **({"text": r[8]} if r[9] is None else {"messages": j(r[9])}),
                    "model": r[10],
                    "source": r[11],
                    "metadata": j(r[12]) or {},
                }
                for r in rows
            ],
            "domains": j(first[3]) or [],
            "reference": first[4],
            "gold": j(first[5]),
            "metadata": j(first[6]) or {},
        }
    )
    if len(assign._VIEWS) > 20_000:
        assign._VIEWS.clear()
    hit = assign._VIEWS[key] = (item.public_view(), [r[7] for r in rows])
    return hit


# -- the work (called through assign.next_task_fast / judging._submit_fast with ``lane=``) --------


class Lane:
    """The lane's open SQLite write transaction and what the guard query found."""

    __slots__ = ("after_commit", "cur", "ex", "live_pk", "now", "now_s", "sql", "status")

    def __init__(
        self,
        ex,
        cur,
        now: datetime,
        status: str | None,
        live_pk: int | None,
        after_commit: list,
    ) -> None:
        self.ex, self.sql, self.cur, self.now, self.now_s = (
            ex,
            _statements(ex),
            cur,
            now,
            ex.dt(now),
        )
        self.status, self.live_pk = status, live_pk
        self.after_commit = after_commit  # (pool role, judgment pk) for judging.after_submit


def next_in_lane(lane: Lane, project: ProjectRef, user_pk: int) -> dict[str, Any]:
    """:func:`assign.next_task_fast` on the lane's transaction; ``Fallback`` for every case
    that function hands to :func:`assign.next_task` (the lane runs that one after rollback)."""
    if lane.status != "qualified":
        raise Fallback  # new, qualifying, failed or suspended: the reference path decides
    cur, now, now_s, ex, q = lane.cur, lane.now, lane.now_s, lane.ex, lane.sql
    params = {"project_pk": project.pk, "user_pk": user_pk, "now": now_s}
    if ex.is_pg:  # read after the status lock (READ COMMITTED: a fresh snapshot)
        live = cur.execute(q.live.sql, q.live.args(params)).fetchone()
    else:  # found by the auth statement (BEGIN IMMEDIATE: nothing changed since)
        live = (
            cur.execute(q.lease_by_pk.sql, (lane.live_pk,)).fetchone()
            if lane.live_pk is not None
            else None
        )
    if live is not None:  # resume: one live lease per rater
        lease_id, item_pk, role, shown, expires = live
        view, _ = _item_view(lane, item_pk, None)
        return {
            "task": assign._payload(
                project, view, lease_id, role, ex.load_json(shown), ex.load_dt(expires)
            ),
            "resumed": True,
        }
    policy = _project_policy(project)
    if policy.required_domains:
        domains = {
            r[0]
            for r in cur.execute(q.verified_domains.sql, q.verified_domains.args(params)).fetchall()
        }
        if set(policy.required_domains) - domains:
            raise Fallback  # the reference path explains which domains are missing
    if policy.max_items_per_rater is not None:
        done = cur.execute(q.done_count.sql, q.done_count.args(params)).fetchone()[0]
        if done >= policy.max_items_per_rater:
            raise Fallback
    roles = (
        ("gold", "production")
        if policy.gold_rate > 0 and _RNG.random() < policy.gold_rate
        else ("production",)
    )
    params["n"] = assign.PICK_BATCH if ex.is_pg else 1
    settings_version = int((project.settings or {}).get("version", 1))
    expires = now + timedelta(seconds=policy.lease_seconds)
    for role in roles:
        stmt = q.picks[(role, policy.domain_match)]
        rows = cur.execute(stmt.sql, stmt.args(params)).fetchall()
        for pool_pk, item_pk, entry_role, _filled, target, content_hash in rows:
            view, ids = _item_view(lane, item_pk, content_hash)
            ids = list(ids)
            if policy.randomise_order:
                _RNG.shuffle(ids)
            lease_id = "asg_" + secrets.token_urlsafe(16)
            values = [
                lease_id,
                project.pk,
                item_pk,
                user_pk,
                entry_role,
                ex.json(ids),
                settings_version,
                now_s,
                ex.dt(expires),
            ]
            if _insert_lease(lane, values, role, pool_pk, item_pk, target):
                return {"task": assign._payload(project, view, lease_id, entry_role, ids, expires)}
        if rows:
            raise Fallback  # every locked candidate filled up meanwhile: the framework tries further batches
    raise Fallback  # nothing found: the reference path syncs the pool and explains


#: PostgreSQL READ COMMITTED: the candidate query's snapshot may predate a lease another host
#: committed just before this one locked the pool row, so the lease is inserted only if the
#: item still has room, counted in the insert's own (newer) snapshot under the row lock.
_PG_LEASE_IF_ROOM = (
    "INSERT INTO assignments (lease_id, project_pk, item_pk, user_pk, role, status, shown_order, settings_version, "
    "created_at, expires_at) SELECT %s, %s, %s, %s, %s, 'active', %s, %s, %s, %s "
    "WHERE (SELECT filled FROM task_pool WHERE pk = %s) + (SELECT count(*) FROM assignments WHERE item_pk = %s "
    "AND status = 'active' AND expires_at > %s) < %s RETURNING pk"
)


def _insert_lease(
    lane: Lane, values: list[Any], role: str, pool_pk: int, item_pk: int, target: int
) -> bool:
    """Insert the lease; on PostgreSQL for a production item only if it still has room."""
    if not lane.ex.is_pg or role != "production":
        lane.cur.execute(lane.sql.insert_lease, values)
        return True
    return (
        lane.cur.execute(
            _PG_LEASE_IF_ROOM, [*values, pool_pk, item_pk, lane.now_s, target]
        ).fetchone()
        is not None
    )


def submit_in_lane(
    lane: Lane,
    project: ProjectRef,
    user_pk: int,
    username: str,
    *,
    assignment_id: str,
    judgment: dict[str, Any],
    idempotency_key: str | None,
    telemetry: dict[str, Any] | None,
) -> dict[str, Any]:
    """:func:`judging._submit_fast` on the lane's transaction (same checks, same rows)."""
    if lane.status != "qualified" or "pairwise" not in project.kinds:
        raise Fallback
    cur, now, ex, q = lane.cur, lane.now, lane.ex, lane.sql
    rows = cur.execute(
        q.lease.sql,
        q.lease.args(
            {
                "project_pk": project.pk,
                "lease_id": assignment_id,
                "username": username,
                "idem": idempotency_key,
            }
        ),
    ).fetchall()
    if not rows:
        raise Fallback
    (
        a_pk,
        a_user,
        item_pk,
        _role,
        status,
        shown,
        settings_version,
        created,
        expires,
        pool_pk,
        pool_role,
        item_key,
        _c,
        rater_pk,
        rater_user_pk,
        idem_pk,
    ) = rows[0]
    if (
        a_user != user_pk
        or status != "active"
        or pool_role not in judging.SCORED_LATER
        or idem_pk is not None
        or rater_pk is None
        or rater_user_pk is None
        or ex.load_dt(expires) <= now
    ):
        raise Fallback  # replays, expiry, gold, first label of a rater: the reference path
    try:
        values = pairwise_values(
            judgment,
            item_key=item_key,
            shown_order=ex.load_json(shown),
            candidate_keys=[r[12] for r in rows],
            username=username,
            rubric_key=project.rubric_key,
            rubric_version=project.rubric_version,
            guideline_version=settings_version,
            started_at=ex.load_dt(created),
            submitted_at=now,
            idempotency_key=idempotency_key,
            telemetry=telemetry,
            min_rationale_chars=_project_policy(project).min_rationale_chars,
        )
    except _Pass:
        raise Fallback from None  # full validation (and its field-by-field 422) on the reference path
    j_pk = _store_judgment(lane, project.pk, item_pk, rater_pk, values, a_pk, pool_pk)
    lane.after_commit.append((pool_role, j_pk))
    return {
        "judgment_id": j_pk,
        "item_id": item_key,
        "kind": "pairwise",
        "created": True,
        "replayed": False,
        "submitted_at": now.isoformat(),
    }


def parse_submit(
    body: bytes, header_idem: str | None
) -> tuple[str, dict[str, Any], dict[str, Any] | None, str | None]:
    """``SubmitIn`` for plain values (``_Pass`` for anything the model might treat otherwise)."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise _Pass("body") from None
    if type(data) is not dict or not data.keys() <= _SUBMIT_KEYS:
        raise _Pass("body")
    if wire_problems(data):
        raise _Pass("wire rules")  # the framework's models answer the 422, field by field
    lease_id, judgment = data.get("assignment_id"), data.get("judgment")
    if type(lease_id) is not str or not 1 <= len(lease_id) <= 64 or type(judgment) is not dict:
        raise _Pass("body")
    idem = data.get("idempotency_key")
    if idem is not None and (type(idem) is not str or not 1 <= len(idem) <= 200):
        raise _Pass("body")
    telemetry = telemetry_fast(data.get("telemetry"))
    return lease_id, judgment, telemetry, idem or header_idem or None


# -- ASGI ------------------------------------------------------------------------------------------


def _connect(path: str, *, busy_ms: int = 0) -> sqlite3.Connection:
    from ..store.db import _sqlite_pragmas

    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    _sqlite_pragmas(conn, None)
    conn.execute(f"PRAGMA busy_timeout={int(busy_ms)}")
    return conn


class _Checkpointer(threading.Thread):
    """Checkpoints the WAL off the event loop.

    A committing connection normally runs the checkpoint itself once the WAL passes 1,000
    pages, and with ``synchronous=NORMAL`` a checkpoint fsyncs: milliseconds of stall on the
    event loop every hundred or so commits. The lane's connection has auto-checkpoints off
    and this thread runs ``wal_checkpoint(PASSIVE)`` (which never blocks writers or readers)
    on its own connection a few times a second while there are new commits. Durability does
    not depend on it: a committed transaction is in the WAL before the answer is sent.
    """

    def __init__(self, path: str, period_s: float = 0.2) -> None:
        super().__init__(name="preflab-wal-checkpoint", daemon=True)
        self.path, self.period_s = path, period_s
        self.dirty = threading.Event()

    def run(self) -> None:
        conn = _connect(self.path, busy_ms=1000)
        while True:
            self.dirty.wait()
            time.sleep(self.period_s)
            self.dirty.clear()
            try:
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            except sqlite3.Error:  # busy or the like: try again on the next round
                self.dirty.set()


class _Shared:
    """Per process: the lane's executor (SQLite: its connection, the app's write lock and the
    checkpointer; PostgreSQL: a psycopg connection of its own)."""

    def __init__(self, get_db: Callable[[], Any]) -> None:
        self.get_db = get_db
        self.enabled: bool | None = None
        self.ex = None

    def executor(self):
        if self.enabled is None:
            db = self.get_db()
            self.enabled = ENABLED and (
                db.is_sqlite or (PG_ENABLED and db.engine.dialect.driver == "psycopg")
            )
            if self.enabled:
                self.db = db
                if db.is_sqlite:
                    self.ex = self._sqlite(db)
                else:  # psycopg is an optional dependency (the postgres extra)
                    from .exec.postgres import PgExecutor

                    self.ex = PgExecutor(db.engine.url)
        return self.ex

    def slots(self) -> anyio.Semaphore:
        """As many requests in flight as the PostgreSQL executor has connections."""
        if getattr(self, "_slots", None) is None:
            self._slots = anyio.Semaphore(self.ex.pool_size)
        return self._slots

    def _sqlite(self, db) -> SqliteExecutor:
        path = db.engine.url.database
        conn = _connect(path)  # busy_timeout 0: never wait on the event loop, hand on
        conn.execute("PRAGMA wal_autocheckpoint=0")
        if TRACE is not None:
            conn.set_trace_callback(TRACE)
        self.checkpointer = _Checkpointer(path)
        self.checkpointer.start()
        return SqliteExecutor(conn, db.write_lock)


_STATEMENTS: dict[bool, _Statements] = {}


def _statements(ex) -> _Statements:
    """The lane's statements for this executor's backend, compiled on first use."""
    found = _STATEMENTS.get(ex.is_pg)
    if found is None:
        found = _STATEMENTS[ex.is_pg] = _Statements(ex)
    return found


#: Off switch (tests compare the lane with the framework path; profiling).
ENABLED = True
#: The lane on PostgreSQL (psycopg); off: PostgreSQL requests take the framework path.
PG_ENABLED = True


class LaneEndpoint:
    """The ASGI endpoint of one hot route, placed before the FastAPI route of the same path.

    Runs inside the app's exception handling: an error raised by the engine functions is
    answered by the app's handlers exactly as for the FastAPI route."""

    def __init__(self, shared: _Shared, kind: int, route) -> None:
        self.shared, self.kind, self.route = shared, kind, route

    async def _framework(self, scope, receive, send) -> None:
        scope["endpoint"], scope["route"] = self.route.endpoint, self.route
        await self.route.handle(scope, receive, send)

    async def __call__(self, scope, receive, send) -> None:
        auth = ctype = idem_h = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                if auth is None:
                    auth = value
            elif name == b"content-type":
                if ctype is None:
                    ctype = value
            elif name == b"idempotency-key" and idem_h is None:
                idem_h = value
        shared = self.shared
        if auth is None or shared.executor() is None:
            _count("pass:no bearer or not sqlite")
            return await self._framework(
                scope, receive, send
            )  # cookie sessions (CSRF), anonymous, PostgreSQL
        scheme, _, token = auth.decode("latin-1").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return await self._framework(scope, receive, send)
        token_hash = hashlib.sha256(token.encode()).hexdigest()
        project_name = scope["path_params"]["project"]
        submit = None
        if self.kind == _SUBMIT:
            body = b""
            more = True
            while more:
                message = await receive()
                if message["type"] != "http.request":
                    return  # the client went away (or the body limit answered 413)
                body += message.get("body", b"")
                more = message.get("more_body", False)
            try:
                if ctype is not None and ctype.lower() != b"application/json":
                    raise _Pass("content type")
                submit = parse_submit(
                    body, idem_h.decode("latin-1") if idem_h is not None else None
                )
            except _Pass as why:
                _count(f"pass:{why}")
                return await self._framework(scope, _replay(body, receive), send)
            receive = _replay(body, receive)
        try:
            if shared.ex.is_pg:  # network round trips: in a worker thread, one per lane connection
                async with shared.slots():  # wait for a free connection (never a framework detour)
                    out = await anyio.to_thread.run_sync(
                        self._run, token_hash, project_name, submit
                    )
            else:  # a few hundred µs of local work: on the event loop, no thread hop
                out = self._run(token_hash, project_name, submit)
        except _Pass as why:
            _count(f"pass:{why}")
            return await self._framework(scope, receive, send)
        except _Reference as ref:
            _count("reference")
            out = await anyio.to_thread.run_sync(ref.call)
        else:
            _count("served")
        body = orjson.dumps(out)
        status = 200 if self.kind == _NEXT else (201 if out["created"] else 200)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-length", str(len(body)).encode()),
                    (b"content-type", b"application/json"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    def _run(self, token_hash: str, project_name: str, submit) -> dict[str, Any]:
        shared = self.shared
        ex = shared.ex
        try:
            raw = cur = ex.begin()
        except Busy as why:
            raise _Pass(str(why)) from None
        try:
            if ex.is_pg and TRACE is not None:
                cur = TracingCursor(raw, TRACE)
            after_commit: list = []
            out = self._work(ex, cur, token_hash, project_name, submit, after_commit)
            if ex.is_pg and TRACE is not None:
                TRACE("COMMIT")
            ex.commit(raw)
        except BaseException as exc:
            ex.rollback(raw)
            ex.end(raw)
            if isinstance(exc, ex.errors):
                # A driver error on the lane's own connection (a lock timeout, a dead
                # connection): nothing was committed; the framework redoes the request.
                log.warning("fast lane: handing a request on after %r", exc)
                raise _Pass(f"{type(exc).__module__.split('.')[0]} {type(exc).__name__}") from None
            raise
        ex.end(raw)
        if not ex.is_pg:
            shared.checkpointer.dirty.set()
        for pool_role, judgment_pk in after_commit:
            judging.after_submit(shared.db, pool_role, judgment_pk)
        return out

    def _work(
        self,
        ex,
        cur,
        token_hash: str,
        project_name: str,
        submit,
        after_commit: list,
    ) -> dict[str, Any]:
        db = self.shared.db
        now = utcnow()
        q = _statements(ex)
        stmt = q.auth_next if self.kind == _NEXT else q.auth_submit
        row = cur.execute(
            stmt.sql, stmt.args({"hash": token_hash, "now": ex.dt(now), "name": project_name})
        ).fetchone()
        if row is None:
            raise _Pass(
                "auth"
            )  # 401 (or on PostgreSQL also 403/404, no status row): the framework says why
        if row[2] is None or not permissions.allowed(
            "project.label", is_admin=row[11], role=row[9]
        ):
            raise _Pass(
                "not a rater here"
            )  # 404, or 403 (e.g. a site admin without the rater role)
        user_pk, username = row[0], row[1]
        project = _project(ex, *row[2:9])
        live_pk = row[12] if self.kind == _NEXT and not ex.is_pg else None
        lane = Lane(ex, cur, now, row[10], live_pk, after_commit)
        if self.kind == _NEXT:
            try:
                return assign.next_task_fast(db, project, user_pk, lane=lane)
            except Fallback:
                raise _Reference(assign.next_task, db, project, user_pk) from None
        assignment_id, judgment, telemetry, idem = submit
        kwargs = {
            "assignment_id": assignment_id,
            "judgment": judgment,
            "idempotency_key": idem,
            "telemetry": telemetry,
        }
        if judgment.get("kind") == "rubric":  # as judging.submit: rubric checks need the ORM
            raise _Reference(judging.submit_reference, db, project, user_pk, username, **kwargs)
        try:
            return judging._submit_fast(db, project, user_pk, username, lane=lane, **kwargs)
        except Fallback:
            raise _Reference(
                judging.submit_reference, db, project, user_pk, username, **kwargs
            ) from None


class _Reference(Exception):
    """Roll back, then run the reference implementation (ORM) in a worker thread."""

    def __init__(self, fn, *args, **kwargs) -> None:
        super().__init__(fn.__name__)
        self.call = functools.partial(fn, *args, **kwargs)


def install(app) -> None:
    """Put the lane in front of the two hot FastAPI routes (same paths, POST only)."""
    from starlette.routing import Route

    shared = _Shared(lambda: app.state.db)
    routes = {(r.path, m): r for r in _api_routes(app) for m in r.methods}
    lanes = []
    for path, kind in (
        (_PREFIX + "{project}/assignments/next", _NEXT),
        (_PREFIX + "{project}/judgments", _SUBMIT),
    ):
        route = routes[(path, "POST")]
        lanes.append(
            Route(
                path, LaneEndpoint(shared, kind, route), methods=["POST"], include_in_schema=False
            )
        )
    app.router.routes[0:0] = lanes


def _api_routes(app):
    from .permissions import iter_api_routes

    return list(iter_api_routes(app.router.routes))


def _project_policy(project: ProjectRef) -> Policy:
    return policy_of(project.settings)


def _replay(body: bytes, receive):
    """A ``receive`` that hands out the already-read body once, then defers to the server's."""
    sent = False

    async def replay():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
