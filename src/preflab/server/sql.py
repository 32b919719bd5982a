"""Every statement of the labelling flow, built once and compiled once per backend.

The executors (:mod:`preflab.server.exec`) run these; the decisions on what they return are
:mod:`preflab.server.flow`. Round trips a cycle (next task + submit), both backends:

* next: the guard's check with the rater's status (locked on PostgreSQL; on SQLite with the
  live lease to resume) — on PostgreSQL the live lease or the candidates in one read after the
  lock — the candidate pick (room, domain match, never the same item twice, ``FOR UPDATE SKIP
  LOCKED``; on SQLite with the item's view) — the lease insert (on PostgreSQL only if the item
  still has room, counted under the pool row's lock);
* submit: the guard's check, the rater's status, the lease, its pool row, item and candidates,
  the caller's rater row and whether the idempotency key is taken, in **one** read; then the
  judgment stored by **one** guarded statement (:func:`guarded_store`, its own transaction),
  whose triggers close the lease and count the label (:mod:`preflab.store.triggers`).
"""

from __future__ import annotations

import typing
from typing import Any, Protocol

from sqlalchemy import (
    ColumnElement,
    Table,
    Text,
    and_,
    bindparam,
    cast,
    exists,
    func,
    or_,
    select,
    text,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler

from ..store.models import CandidateRow, ItemRow, JudgmentRow, Project, Rater, RubricVersion
from ..store.server_models import (
    ApiToken,
    Assignment,
    Credential,
    GoldOutcome,
    Membership,
    PoolDomain,
    PoolEntry,
    RaterStatus,
    User,
    WebSession,
)

_U, _T, _PJ, _M, _RS, _A = (
    User.__table__,
    ApiToken.__table__,
    Project.__table__,
    Membership.__table__,
    RaterStatus.__table__,
    Assignment.__table__,
)
_P, _PD, _I, _C, _CR = (
    PoolEntry.__table__,
    PoolDomain.__table__,
    ItemRow.__table__,
    CandidateRow.__table__,
    Credential.__table__,
)
_J, _R, _RV = JudgmentRow.__table__, Rater.__table__, RubricVersion.__table__
_GO = GoldOutcome.__table__
_W = WebSession.__table__


class Backend(Protocol):
    """What compiling needs to know of an executor."""

    is_pg: bool
    dialect: Dialect
    mark: str


class Compiled:
    """A Core statement compiled once for one backend: SQL text + positional parameter names."""

    __slots__ = ("defaults", "names", "sql")

    def __init__(self, stmt: ClauseElement, dialect: Dialect) -> None:
        compiled = stmt.compile(dialect=dialect)
        assert isinstance(compiled, SQLCompiler)  # a statement's compiler, not a DDL's
        self.sql = compiled.string
        assert compiled.positiontup is not None  # the executors' paramstyles are positional
        self.names = tuple(compiled.positiontup)
        # values fixed in the statement (a JSON path, a literal) as the driver must receive them:
        # the lane runs the SQL on the DBAPI cursor, past SQLAlchemy's bind processors
        self.defaults = {}
        for name, value in compiled.params.items():
            process = compiled.binds[name].type._cached_bind_processor(dialect)
            self.defaults[name] = process(value) if process and value is not None else value

    def args(self, params: dict[str, Any]) -> list[Any]:
        d = self.defaults
        return [params[n] if n in params else d[n] for n in self.names]


# -- the guard's check (permissions: token hash, not revoked, not expired, active user) ----------

#: Columns of the caller: user, project, role, rater status (positions used by flow.lane).
AUTH_COLS = (
    _U.c.pk.label("user_pk"),
    _U.c.username,
    _PJ.c.pk.label("project_pk"),
    _PJ.c.name,
    _PJ.c.title,
    cast(_PJ.c.kinds, Text).label("kinds"),  # as text on both backends: the memo key of the
    cast(_PJ.c.settings, Text).label("settings"),  # project's parsed values (flow.lane._project)
    _PJ.c.rubric_key,
    _PJ.c.rubric_version,
    _M.c.role,
    _RS.c.status.label("rater_status"),
    _U.c.is_admin,
)


def positions(stmt: Any) -> dict[str, int]:
    """Each column of ``stmt`` by name -> its position in a row (the executors return plain
    tuples: the flow reads them through these names, never through bare numbers)."""
    return {name: i for i, name in enumerate(stmt.selected_columns.keys())}


def span(at: dict[str, int], first: str, last: str) -> slice:
    """The columns ``first`` .. ``last`` of a row (by :func:`positions`), as a slice."""
    return slice(at[first], at[last] + 1)


#: How a caller authenticates: an API token (``Authorization: Bearer``) or a browser session
#: (the cookie; its CSRF token is read with the caller, the last column, and checked by
#: :func:`preflab.server.csrf.token_matches`): the fast lane's; the conditions are the guard's
#: (:mod:`preflab.server.permissions`: ``_BY_TOKEN``, ``_BY_SESSION``). ``user``: the guard
#: already authenticated the caller (the FastAPI routes run the same flow after it).
BY = ("token", "session", "user")


def _credential_ok(by: str):
    if by == "user":  # the guard authenticated the caller (the framework's routes)
        return and_(_U.c.pk == bindparam("user_pk"), _U.c.is_active.is_(True))
    if by == "session":
        return and_(
            _W.c.token_hash == bindparam("hash"),
            _W.c.revoked.is_(False),
            _W.c.expires_at > bindparam("now"),
            _U.c.is_active.is_(True),
        )
    return and_(
        _T.c.token_hash == bindparam("hash"),
        _T.c.revoked_at.is_(None),
        or_(_T.c.expires_at.is_(None), _T.c.expires_at > bindparam("now")),
        _U.c.is_active.is_(True),
    )


def _caller_joins(stmt, by: str):
    """Token, session or the guard's user (:data:`BY`) -> user -> project (by name) ->
    membership -> rater status (inner joins: a member with a status row; the framework's
    routes make a first contact's row before they read, the lane hands a first contact on);
    a session's CSRF token last."""
    if by == "user":
        stmt = stmt.select_from(_U)
    else:
        credential = _W if by == "session" else _T
        if by == "session":
            stmt = stmt.add_columns(_W.c.csrf_token)
        stmt = stmt.select_from(credential).join(_U, _U.c.pk == credential.c.user_pk)
    return (
        stmt.join(_PJ, _PJ.c.name == bindparam("name"))
        .join(_M, and_(_M.c.project_pk == _PJ.c.pk, _M.c.user_pk == _U.c.pk))
        .join(_RS, and_(_RS.c.project_pk == _PJ.c.pk, _RS.c.user_pk == _U.c.pk))
    )


def _live_lease_pk():
    return (
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


def auth_next(lock: bool, by: str = "token"):
    """The caller for "next". SQLite (``lock`` False): also the live lease to resume, with its
    item's content hash (the view cache's key), or NULLs (BEGIN IMMEDIATE: nothing changes
    before the next statement). PostgreSQL: ``FOR UPDATE OF rater_status`` serialises one
    rater's requests; the live lease is read after the lock (``LiveOrPick``)."""
    if lock:
        return (
            _caller_joins(select(*AUTH_COLS), by).where(_credential_ok(by)).with_for_update(of=_RS)
        )
    live, item = _A.alias("live"), _I.alias("live_item")
    cols = (
        live.c.lease_id.label("live_lease_id"),
        live.c.item_pk.label("live_item_pk"),
        live.c.role.label("live_role"),
        live.c.shown_order.label("live_shown_order"),
        live.c.expires_at.label("live_expires_at"),
        item.c.content_hash.label("live_content_hash"),
    )
    return (
        _caller_joins(select(*AUTH_COLS, *cols), by)
        .outerjoin(live, live.c.pk == _live_lease_pk())
        .outerjoin(item, item.c.pk == live.c.item_pk)
        .where(_credential_ok(by))
    )


def submit_read(by: str = "token"):
    """The caller, their status, the lease with its pool row, item and candidates (one row
    per candidate, in item order), the caller's rater row and whether the idempotency key is
    taken (:data:`BY`: how the caller authenticates). A plain read without locks or a
    transaction (autocommit, both backends): the store statement (:func:`guarded_store`) checks
    again (PostgreSQL: under its own locks)."""
    return (
        _caller_joins(
            select(
                *AUTH_COLS,
                _A.c.pk.label("a_pk"),
                _A.c.user_pk.label("a_user"),
                _A.c.item_pk,
                _A.c.status.label("a_status"),
                _A.c.shown_order,
                _A.c.created_at,
                _A.c.expires_at,
                _P.c.pk.label("pool_pk"),
                _P.c.role.label("pool_role"),
                _I.c.item_key,
                _C.c.candidate_key,
                _R.c.pk.label("rater_pk"),
                _R.c.user_pk.label("rater_user_pk"),
                select(_J.c.pk)
                .where(
                    _J.c.project_pk == _PJ.c.pk,
                    _J.c.rater_pk == _R.c.pk,  # keys are the rater's own (0015)
                    _J.c.idempotency_key == bindparam("idem"),
                )
                .scalar_subquery()
                .label("idem_pk"),
                _A.c.settings_version,  # the guidelines the rater saw: the judgment's guideline_version
                _I.c["metadata"]["kinds"].label("item_kinds"),  # the kinds the item takes, if any
                _A.c.suggestion,  # what the label page served with the lease (AI assistance, 0018)
            ),
            by,
        )
        .join(_A, and_(_A.c.project_pk == _PJ.c.pk, _A.c.lease_id == bindparam("lease_id")))
        .join(_P, _P.c.item_pk == _A.c.item_pk)
        .join(_I, _I.c.pk == _A.c.item_pk)
        .join(_C, _C.c.item_pk == _A.c.item_pk)
        .outerjoin(_R, and_(_R.c.project_pk == _PJ.c.pk, _R.c.rater_key == _U.c.username))
        .where(_credential_ok(by))
        .order_by(_C.c.position)
    )


# -- next task -----------------------------------------------------------------------------------

#: A live lease of this rater (resume it: one live lease per rater).
LIVE_LEASE = (
    select(_A.c.lease_id, _A.c.item_pk, _A.c.role, _A.c.shown_order, _A.c.expires_at)
    .where(
        _A.c.project_pk == bindparam("project_pk"),
        _A.c.user_pk == bindparam("user_pk"),
        _A.c.status == "active",
        _A.c.expires_at > bindparam("now"),
    )
    .limit(1)
)

#: One rubric version's content (versions are immutable: the lane caches them by version).
RUBRIC = select(_RV.c.content).where(
    _RV.c.project_pk == bindparam("project_pk"),
    _RV.c.rubric_key == bindparam("rubric_key"),
    _RV.c.version == bindparam("rubric_version"),
)


def status_insert(mark: str) -> str:
    """A first contact's status row (``qualifying``), made by the framework's routes before
    they read the caller; nothing when the row exists. Arguments: user pk, now, project name."""
    m = mark
    return (
        "INSERT INTO rater_status (project_pk, user_pk, status, reason, updated_at) "
        f"SELECT pk, {m}, 'qualifying', '', {m} FROM projects WHERE name = {m} "
        "ON CONFLICT (project_pk, user_pk) DO NOTHING"
    )


_MY_STATUS = and_(
    _RS.c.project_pk == bindparam("project_pk"), _RS.c.user_pk == bindparam("user_pk")
)

#: Why a rater is suspended (the refusal says it).
STATUS_REASON = select(_RS.c.reason).where(_MY_STATUS)

#: A new status with its reason (qualification decided when the set ran out, or not needed).
STATUS_UPDATE = (
    # typing.cast: a model's ``__table__`` is typed ``FromClause``; a declarative one is a Table
    typing.cast(Table, _RS)
    .update()
    .where(_MY_STATUS)
    .values(status=bindparam("status"), reason=bindparam("reason"), updated_at=bindparam("now"))
)

#: Whether the project has a qualification set at all.
HAS_QUALIFICATION = (
    select(_P.c.pk)
    .where(_P.c.project_pk == bindparam("project_pk"), _P.c.role == "qualification")
    .limit(1)
)

#: The rater's qualification answers so far, in order (``gold.qualification_record``).
QUALIFICATION_RECORD = (
    select(_GO.c.correct)
    .where(
        _GO.c.project_pk == bindparam("project_pk"),
        _GO.c.user_pk == bindparam("user_pk"),
        _GO.c.phase == "qualification",
    )
    .order_by(_GO.c.pk)
)

VERIFIED_DOMAINS = select(_CR.c.domain).where(
    _CR.c.user_pk == bindparam("user_pk"), _CR.c.verified.is_(True)
)

#: Submitted non-qualification items of this rater (``max_items_per_rater``).
DONE_COUNT = (
    select(func.count())
    .select_from(_A)
    .where(
        _A.c.project_pk == bindparam("project_pk"),
        _A.c.user_pk == bindparam("user_pk"),
        _A.c.role != "qualification",
        _A.c.status == "submitted",
    )
)

#: An item's public view: the item and its candidates (one row per candidate, in item order).
VIEW_COLS = (
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

#: The item and its candidates in one round trip.
ITEM_VIEW = (
    select(*VIEW_COLS)
    .join(_C, _C.c.item_pk == _I.c.pk)
    .where(_I.c.pk == bindparam("item_pk"))
    .order_by(_C.c.position)
)


#: An item still open for labels: the pool's partial index condition, spelled exactly (the one
#: place every query of open items takes it from).
POOL_OPEN = _P.c.filled < _P.c.target


def domain_ok(item_pk: Any, domains: Any, match: str) -> ColumnElement[bool]:
    """The domain rule, for the pool row whose item is ``item_pk``: an item with no domain is
    open to everyone; else ``domain_match`` ``any`` needs one of its domains among the rater's
    verified ``domains`` and ``all`` every one of them. ``domains`` is a subquery (the hot
    path's SQL) or a list (the ORM's reads)."""
    has_any = exists().where(_PD.c.item_pk == item_pk)
    if isinstance(domains, list | tuple) and not domains:
        return ~has_any
    if match == "any":
        return or_(~has_any, exists().where(_PD.c.item_pk == item_pk, _PD.c.domain.in_(domains)))
    return ~exists().where(_PD.c.item_pk == item_pk, _PD.c.domain.not_in(domains))


def pick(role: str, match: str, *, unless_live: bool = False):
    """The candidate query for one role: eligibility, counts and order in a single statement.

    * ``NOT EXISTS`` a lease of this rater on the item: never the same item twice (any status);
    * domains compared in SQL against the rater's verified credentials (``domain_match``
      ``any``: one shared domain; ``all``: every domain of the item);
    * production: submitted labels + live leases below the target (exact k); fuller items
      first so overlap items reach k;
    * ``FOR UPDATE OF task_pool SKIP LOCKED`` on PostgreSQL (no-op on SQLite, where BEGIN
      IMMEDIATE serialises writers): concurrent assigners skip each other's candidates.
    """
    item = _P.c.item_pk
    mine = select(_CR.c.domain).where(
        _CR.c.user_pk == bindparam("user_pk"), _CR.c.verified.is_(True)
    )
    live = (
        select(func.count())
        .select_from(_A)
        .where(_A.c.item_pk == item, _A.c.status == "active", _A.c.expires_at > bindparam("now"))
        .scalar_subquery()
    )
    content_hash = (
        select(_I.c.content_hash).where(_I.c.pk == item).scalar_subquery().label("content_hash")
    )
    stmt = select(_P.c.pk, _P.c.item_pk, _P.c.role, _P.c.filled, _P.c.target, content_hash).where(
        _P.c.project_pk == bindparam("project_pk"),
        _P.c.role == role,
        ~exists().where(_A.c.item_pk == item, _A.c.user_pk == bindparam("user_pk")),
        domain_ok(item, mine, match),
    )
    if unless_live:
        stmt = stmt.where(text("NOT EXISTS (SELECT 1 FROM live)"))
    if role == "production":
        stmt = stmt.where(POOL_OPEN, _P.c.filled + live < _P.c.target).order_by(
            _P.c.filled.desc(), _P.c.order_key.desc(), _P.c.pk.desc()
        )
    elif role == "qualification":  # the qualification set in its import order, for everyone
        stmt = stmt.order_by(_P.c.pk)
    else:
        stmt = stmt.order_by(_P.c.order_key.desc(), _P.c.pk.desc())
    return stmt.limit(bindparam("n")).with_for_update(skip_locked=True, of=_P)


def pick_viewed(role: str, match: str):
    """SQLite: :func:`pick` with the picked item's view (:data:`VIEW_COLS` after the pick's six
    columns, one row per candidate), so a view not yet cached costs no statement of its own.
    Under ``BEGIN IMMEDIATE`` the first candidate is leased, so SQLite picks one (``n`` = 1;
    with more, the rows come grouped by item, not in the pick's order)."""
    cand = pick(role, match).subquery("cand")
    return (
        select(*cand.c, *VIEW_COLS)
        .select_from(cand)
        .join(_I, _I.c.pk == cand.c.item_pk)
        .join(_C, _C.c.item_pk == cand.c.item_pk)
        .order_by(cand.c.pk, _C.c.position)
    )


class LiveOrPick:
    """PostgreSQL: the rater's live lease, or (when there is none) the first role's candidates,
    locked, with the first candidate's item view, in one round trip read after the status lock
    (one snapshot for all).

    Rows (:data:`VIEW_COLS` and the candidate's position after the first ten columns):
    ``("live", lease_id, item_pk, role, shown_order, expires_at, None, None, None, None, ...)``,
    ``("pick", None, item_pk, role, None, None, pool_pk, filled, target, content_hash, ...)``,
    ``("view", None, item_pk, None, ..., *VIEW_COLS, position)``, one per candidate of the first
    pick: the item the lease is most likely for, so a view not yet cached costs no round trip
    of its own (the pick is walked in the order the candidates come).
    """

    def __init__(self, role: str, match: str, dialect: Dialect) -> None:
        live, cand = (
            Compiled(LIVE_LEASE, dialect),
            Compiled(pick(role, match, unless_live=True), dialect),
        )
        nulls = ", ".join(
            str(cast(None, c.type).compile(dialect=dialect)) for c in (*VIEW_COLS, _C.c.position)
        )
        # the first candidate's item with its candidates (``first``: the CTE below)
        view = (
            select(text("'view', NULL"), _I.c.pk, text(", ".join(["NULL"] * 7)))
            .add_columns(*VIEW_COLS, _C.c.position)
            .join(_C, _C.c.item_pk == _I.c.pk)
            .where(_I.c.pk == text("(SELECT item_pk FROM first)"))
        )
        self.sql = (
            f"WITH live AS ({live.sql}), cand AS ({cand.sql}), "
            "first AS (SELECT item_pk FROM cand LIMIT 1) "
            "SELECT 'live', lease_id, item_pk, role, shown_order, expires_at, "
            f"NULL::integer, NULL::integer, NULL::integer, NULL::varchar, {nulls} FROM live "
            "UNION ALL SELECT 'pick', NULL, item_pk, role, NULL, NULL, pk, filled, target, "
            f"content_hash, {nulls} FROM cand "
            f"UNION ALL {view.compile(dialect=dialect)}"
        )
        self._parts = (live, cand)

    def args(self, params: dict[str, Any]) -> list[Any]:
        return [a for part in self._parts for a in part.args(params)]


_LEASE_COLS = (
    "lease_id, project_pk, item_pk, user_pk, role, status, shown_order, settings_version, "
    "created_at, expires_at"
)


def insert_lease(mark: str) -> str:
    m = mark
    return (
        f"INSERT INTO assignments ({_LEASE_COLS}) "
        f"VALUES ({m}, {m}, {m}, {m}, {m}, 'active', {m}, {m}, {m}, {m})"
    )


#: PostgreSQL READ COMMITTED: the candidate query's snapshot may predate a lease another host
#: committed just before this one locked the pool row, so the lease is inserted only if the
#: item still has room, counted in the insert's own (newer) snapshot under the row lock.
PG_LEASE_IF_ROOM = (
    f"INSERT INTO assignments ({_LEASE_COLS}) SELECT %s, %s, %s, %s, %s, 'active', %s, %s, %s, %s "
    "WHERE (SELECT filled FROM task_pool WHERE pk = %s) + (SELECT count(*) FROM assignments "
    "WHERE item_pk = %s AND status = 'active' AND expires_at > %s) < %s RETURNING pk"
)

# -- submit: the write ----------------------------------------------------------------------------


def guarded_store(mark: str, lock: str, returning: str) -> str:
    """The whole write of a submit in one statement, its own transaction (autocommit), on both
    backends: check that the rater is not suspended (``flow.submit.lease_refusal``'s rule) and the lease still the
    caller's, active and unexpired (PostgreSQL: locking status, lease and pool row, the ORM
    path's order, for the statement only), then insert the judgment. The insert's triggers
    (:mod:`preflab.store.triggers`) close the lease and count the label, inside the same
    statement. A lock waited for is re-checked on the newest row version (READ COMMITTED; on
    SQLite the statement runs under the database's write lock), so a suspension, an expiry or
    another submit that won the race leaves no row: nothing written, the framework answers.
    ``{columns}`` / ``{values}``: the judgment's (``flow.lane._judgment_values``), bound after
    the six guard parameters (project, user, lease, user, now, pool row). ``returning``: the
    new pk's clause on PostgreSQL; SQLite reads it from the connection instead (its
    ``RETURNING`` costs an internal trigger and a temporary table, a few µs a submit)."""
    m = mark
    return (  # the WITH inside the INSERT: Python's sqlite3 counts rows of INSERT... only
        "INSERT INTO judgments ({columns}) "
        f"WITH s AS (SELECT 1 FROM rater_status WHERE project_pk = {m} AND user_pk = {m} "
        f"AND status <> 'suspended'{lock}), "
        f"l AS (SELECT pk FROM assignments WHERE pk = {m} AND user_pk = {m} AND status = 'active' "
        f"AND expires_at > {m} AND EXISTS (SELECT 1 FROM s){lock}), "
        f"p AS (SELECT pk FROM task_pool WHERE pk = {m} AND EXISTS (SELECT 1 FROM l){lock}) "
        "SELECT {values} WHERE EXISTS (SELECT 1 FROM p)"
        f"{returning}"
    )


#: How each judgment column is bound (JSON and datetimes by the executor; NULLs left out: the
#: columns have no defaults; ``excluded`` and ``created_at`` get the model defaults).
JUDGMENT_JSON_COLS = frozenset({"body", "shown_order", "telemetry", "assisted_by"})
JUDGMENT_DT_COLS = frozenset({"started_at", "submitted_at"})


MATCHES = ("any", "all")


class Statements:
    """Every statement of the flow, compiled once for one backend."""

    def __init__(self, backend: Backend) -> None:
        def c(stmt: ClauseElement) -> Compiled:
            return Compiled(stmt, backend.dialect)

        self.auth_next = {by: c(auth_next(lock=backend.is_pg, by=by)) for by in BY}
        self.submit = {by: c(submit_read(by)) for by in BY}
        self.live = c(LIVE_LEASE)
        self.verified_domains = c(VERIFIED_DOMAINS)
        self.rubric = c(RUBRIC)
        self.done_count = c(DONE_COUNT)
        self.item_view = c(ITEM_VIEW)
        roles = ("production", "gold", "qualification")
        self.picks = {(role, match): c(pick(role, match)) for role in roles for match in MATCHES}
        if not backend.is_pg:
            self.picks_viewed = {
                (role, match): c(pick_viewed(role, match)) for role in roles for match in MATCHES
            }
        self.status_insert = status_insert(backend.mark)
        self.status_reason = c(STATUS_REASON)
        self.status_update = c(STATUS_UPDATE)
        self.has_qualification = c(HAS_QUALIFICATION)
        self.qualification_record = c(QUALIFICATION_RECORD)
        if backend.is_pg:
            self.live_or_pick = {
                (role, match): LiveOrPick(role, match, backend.dialect)
                for role in ("production", "gold")
                for match in MATCHES
            }
        self.insert_lease = insert_lease(backend.mark)
        self.guarded_store = (
            guarded_store(backend.mark, " FOR UPDATE", " RETURNING pk")
            if backend.is_pg
            else guarded_store(backend.mark, "", "")
        )


_COMPILED: dict[bool, Statements] = {}


def statements(backend: Backend) -> Statements:
    """The statements for this executor's backend, compiled on first use."""
    found = _COMPILED.get(backend.is_pg)
    if found is None:
        found = _COMPILED[backend.is_pg] = Statements(backend)
    return found
