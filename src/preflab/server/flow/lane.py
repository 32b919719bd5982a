"""The labelling flow: "next task" and "submit", every rule in its order, on any executor.

Fetch rows with the statements of :mod:`preflab.server.sql`, decide with :mod:`.next` and
:mod:`.submit` (and :func:`preflab.server.permissions.allowed`), write. Written once, run by
three executors: the fast lane's (:mod:`preflab.server.exec.sqlite`,
:mod:`preflab.server.exec.postgres`) in front of the FastAPI routes, and the routes' own
(:mod:`preflab.server.exec.framework`) after their guard.

The flow does no I/O itself ("sans-I/O"): :func:`run_next` and :func:`run_submit` are
generators that *yield* each statement as a request (:data:`ALL`, :data:`ONE`, :data:`EXEC`,
:data:`STORE` with the SQL and its arguments, :data:`BEGIN`, or a :data:`SESSION` step) and
receive its result. SQLite's lane executor drives them synchronously on its one connection
(:func:`preflab.server.exec.drive`), PostgreSQL's on the event loop with psycopg's asynchronous
connections (a round trip awaits the socket; no worker thread), the framework's in a worker
thread inside the app's write transaction.

Every case is here: a first contact (the routes make its status row), the qualification set
until the rater passes or fails, suspended, failed, domain and cap refusals, a live lease
resumed, production (and production gold) picked with exact k, a judgment of any kind
validated (a plain pairwise one through :func:`.submit.pairwise_values`, every other through
:func:`.submit.build_judgment`, a rubric one against the project's current rubric version)
and stored by one guarded write, replays, and a qualification answer scored at once. On the
lane, :class:`NotCommon` hands a request to the route (rolled back, always before anything is
written): a caller the guard must answer, a refusal (the route's error handler answers it),
a :data:`SESSION` step (the ORM work of a replay, a first label, a qualification answer), a
busy lock, or no item left. The caller comes with an API token, a browser session and its
CSRF header, or as the user the route's guard authenticated (:class:`Credential`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Generator, Sequence
from datetime import datetime
from typing import Any, NamedTuple, Protocol

import orjson

from ...quality.extra_raters import disagreement
from ...schema import Item, Rubric
from ...schema.policy import AdaptiveOverlap, Policy, policy_of
from ...store.models import Project
from ...store.rows import judgment_rows
from ..csrf import token_matches
from ..permissions import ProjectRef, allowed
from ..quality_adapter import final_qualification
from ..services import gold_scoring, submissions
from ..sql import (
    JUDGMENT_DT_COLS,
    JUDGMENT_JSON_COLS,
    PG_LEASE_IF_ROOM,
    Backend,
    Statements,
    auth_next,
    positions,
    span,
    submit_read,
)
from ..sql import statements as compiled_statements
from . import extra
from . import next as rules
from .common import Changed, NotCommon
from .criteria import item_meta
from .submit import (
    SCORED_LATER,
    ServiceError,
    build_judgment,
    current_rubric,
    judgment_columns,
    kind_refusal,
    lease_refusal,
    pairwise_values,
    read_answer_lengths,
)

_RNG = random.SystemRandom()

#: What a flow asks of its executor, yielded as ``(kind, sql, args)`` (``(BEGIN,)`` alone):
#: every row (a list), the first row (or None), nothing (a write without a result), the pk of
#: the judgment a guarded store inserted (or None when its guard stopped it), or the start of
#: a transaction.
ALL, ONE, EXEC, STORE, BEGIN = "all", "one", "exec", "store", "begin"

#: ``(SESSION, fn)``: a step only the framework's executor takes (:mod:`..exec.framework`):
#: ``fn(session)`` with the SQLAlchemy session of the flow's own transaction, for the ORM
#: work of the rare cases (a replay's first result, a qualification answer scored at once, a
#: first label's rater row). On the lane's executors the flow hands the request on instead
#: (:func:`_framework_step`), always before it has written anything.
SESSION = "session"

#: A running flow: yields requests, receives their results, returns the answer's body.
Flow = Generator[tuple, Any, Any]


class Executor(Backend, Protocol):
    """What the flow needs of an executor (:mod:`preflab.server.exec`): the backend's
    conventions for values (and its dialect and parameter mark, :class:`..sql.Backend`, for
    compiling the statements); the executor runs the requests the flow yields."""

    #: Rubric versions read, by (project pk, rubric key, version) (:func:`_rubric`).
    rubrics: dict[tuple[int, str, int], Rubric]

    def dt(self, value: datetime) -> Any: ...
    def json(self, value: Any) -> Any: ...
    def load_json(self, value: Any) -> Any: ...
    def load_dt(self, value: Any) -> datetime: ...
    def false(self) -> Any: ...


class Lane:
    """One request on an executor: its clock, its statements, what to do after the commit."""

    __slots__ = ("after_commit", "ex", "framework", "now", "now_s", "sql")

    def __init__(self, ex: Executor, now: datetime, *, framework: bool = False) -> None:
        self.ex, self.now = ex, now
        #: The executor answers :data:`SESSION` steps (the framework's, :mod:`..exec.framework`).
        self.framework = framework
        self.sql: Statements = compiled_statements(ex)
        self.now_s = ex.dt(now)
        #: (pool role, judgment pk) for :func:`preflab.server.services.gold_scoring.after_submit`.
        self.after_commit: list[tuple[str, int]] = []


# -- the caller ----------------------------------------------------------------------------------


class Credential(NamedTuple):
    """How the caller authenticated: ``by`` an API token or a browser session
    (:data:`preflab.server.sql.BY`), the SHA-256 of the token or the session cookie, and for a
    session the CSRF token its request sent (checked against the session's)."""

    by: str
    hash: str | None
    csrf: str | None = None
    #: ``by == "user"``: the user the framework's guard authenticated.
    user_pk: int | None = None


_PROJECTS: dict[tuple, tuple[ProjectRef, Policy]] = {}

#: The caller row's columns by name (:data:`preflab.server.sql.AUTH_COLS`; on SQLite "next"
#: adds the live lease, a session caller its CSRF token last) and the submit read's.
_CALLER = positions(auth_next(False, "token"))
_SUBMIT = positions(submit_read("token"))
_PROJECT_COLS = span(_CALLER, "project_pk", "rubric_version")
_LIVE_COLS = span(_CALLER, "live_lease_id", "live_content_hash")
_LEASE_COLS = span(_SUBMIT, "a_pk", "item_key")
_RATER_COLS = span(_SUBMIT, "rater_pk", "item_kinds")
_ROLE, _STATUS, _IS_ADMIN = _CALLER["role"], _CALLER["rater_status"], _CALLER["is_admin"]
_USER, _USERNAME = _CALLER["user_pk"], _CALLER["username"]
_LIVE_LEASE, _CANDIDATE = _CALLER["live_lease_id"], _SUBMIT["candidate_key"]
_SUGGESTION = _SUBMIT["suggestion"]


def _project(row: Sequence[Any]) -> tuple[ProjectRef, Policy]:
    """The guard's ``ProjectRef`` and its policy from the caller row, memoised on the row's own
    content (kinds and settings read as JSON text on both backends)."""
    key = tuple(row[_PROJECT_COLS])
    found = _PROJECTS.get(key)
    if found is None:
        pk, name, title, kinds, settings, rubric_key, rubric_version = key
        raw = orjson.loads(settings) if settings else {}
        kinds_list = list(orjson.loads(kinds) if kinds else [])
        ref = ProjectRef(pk, name, title, kinds_list, dict(raw or {}), rubric_key, rubric_version)
        if len(_PROJECTS) > 256:
            _PROJECTS.clear()
        found = _PROJECTS[key] = (ref, policy_of(ref.settings))
    return found


def _caller(row: Sequence[Any] | None, cred: Credential) -> tuple[int, str, ProjectRef, Policy]:
    """The guard's decision on the caller row (token or session, user, project, membership,
    status; a session's CSRF token last)."""
    if row is None or not allowed("project.label", is_admin=row[_IS_ADMIN], role=row[_ROLE]):
        if cred.by == "user":  # the guard let them in a moment ago: removed or deactivated since
            raise ServiceError(403, "you may not label in this project (any more)")
        raise NotCommon("auth")  # 401/403/404 or no status row yet: the guard says which
    if cred.by == "session" and not token_matches(cred.csrf, row[-1]):
        raise NotCommon("csrf")  # the framework's guard answers the 403
    return (row[_USER], row[_USERNAME], *_project(row))


def _framework_step(lane: Lane, why: str, fn: Callable[[Any], Any]) -> Flow:
    """``fn(session)`` on the framework's executor; on the lane's, hand the request on."""
    if not lane.framework:
        raise NotCommon(why)
    return (yield SESSION, fn)


def _first_contact(lane: Lane, cred: Credential, project_name: str) -> Flow:
    """The framework's routes make a first contact's status row (``qualifying``) before the
    caller is read; the lane's callers have one (else the caller read finds nobody)."""
    if cred.by == "user":
        yield EXEC, lane.sql.status_insert, [cred.user_pk, lane.now_s, project_name]


# -- item views ---------------------------------------------------------------------------------

#: Public views of items by (pk, content hash): items are immutable once imported (same id
#: with other content is refused), and the hash guards against a reused primary key.
VIEWS: dict[tuple[int, str], tuple[dict[str, Any], list[str]]] = {}


def item_view(
    lane: Lane, item_pk: int, content_hash: str | None, rows: list[Sequence[Any]] | None = None
) -> Flow:
    """The item's public view and candidate ids (cached on pk + content hash); ``rows``: the
    item's ``sql.VIEW_COLS`` when the pick brought them (SQLite), else they are read."""
    if content_hash is not None:
        hit = VIEWS.get((item_pk, content_hash))
        if hit is not None:
            return hit
    if not rows:
        q = lane.sql.item_view
        rows = yield ALL, q.sql, q.args({"item_pk": item_pk})
    key = (item_pk, rows[0][1])
    hit = VIEWS.get(key)
    if hit is not None:
        return hit
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
    if len(VIEWS) > 20_000:
        VIEWS.clear()
    hit = (item.public_view(), [r[7] for r in rows])
    if "criteria" not in hit[0]:  # criteria (metadata) change without the content hash
        VIEWS[key] = hit
    return hit


# -- next task ----------------------------------------------------------------------------------


def run_next(lane: Lane, cred: Credential, project_name: str) -> Flow:
    """ "Next task": a task, a refusal (``{"task": None, "reason": ...}``), or None when no item
    is left for the caller (the route syncs the pool and explains; the lane hands it on)."""
    ex, q = lane.ex, lane.sql
    yield (BEGIN,)  # PostgreSQL: the status lock is held until the lease is in
    yield from _first_contact(lane, cred, project_name)
    params = {"hash": cred.hash, "user_pk": cred.user_pk, "now": lane.now_s, "name": project_name}
    caller = q.auth_next[cred.by]
    row = yield ONE, caller.sql, caller.args(params)
    user_pk, _username, project, policy = _caller(row, cred)
    params = {"project_pk": project.pk, "user_pk": user_pk, "now": lane.now_s}
    # PostgreSQL locks a batch, not one row: one alone saved backend CPU for a single rater but
    # cost 10-30 % more CPU a cycle at 200 raters and 2 workers (issue 10; likely because a
    # candidate filled meanwhile then costs another pick).
    params["n"] = rules.PICK_BATCH if ex.is_pg else 1
    if row[_STATUS] != "qualified":  # qualifying, failed, suspended
        return (yield from _next_unqualified(lane, project, policy, user_pk, row[_STATUS], params))
    roles = rules.roles_to_try(policy, _RNG)
    views: dict[int, list[Sequence[Any]]] = {}  # view rows already read, by item
    picked = None
    if ex.is_pg:  # read after the status lock (READ COMMITTED: a fresh snapshot)
        refusal = yield from _domain_refusal(lane, policy, params)
        refusal = refusal or (yield from _cap_refusal(lane, policy, params))
        if refusal is not None:  # a live lease still comes back first
            live = yield ONE, q.live.sql, q.live.args(params)
            return refusal if live is None else (yield from _resume(lane, project, live))
        both = q.live_or_pick[(roles[0], policy.domain_match)]
        found = yield ALL, both.sql, both.args(params)
        live = found[0][1:6] if found and found[0][0] == "live" else None
        picked = [r[6:10] + (r[2], r[3]) for r in found if r[0] == "pick"]
        shown = sorted((r for r in found if r[0] == "view"), key=lambda r: r[-1])
        views = {shown[0][2]: [r[10:-1] for r in shown]} if shown else {}
    else:  # found by the caller statement (BEGIN IMMEDIATE: nothing changed since)
        live = row[_LIVE_COLS] if row[_LIVE_LEASE] is not None else None
    if live is not None:  # resume: one live lease per rater
        return (yield from _resume(lane, project, live))
    if picked is None:
        refusal = yield from _domain_refusal(lane, policy, params)
        refusal = refusal or (yield from _cap_refusal(lane, policy, params))
        if refusal is not None:
            return refusal
    return (yield from _produce(lane, project, policy, user_pk, roles, params, picked, views))


def _next_unqualified(
    lane: Lane,
    project: ProjectRef,
    policy: Policy,
    user_pk: int,
    status: str,
    params: dict[str, Any],
) -> Flow:
    """ "Next task" for a rater who is not (yet) qualified: suspended and failed raters are
    refused; a qualifying one gets the qualification set, in order, until it runs out (then
    the answers decide, :func:`..quality_adapter.final_qualification`) — or is qualified at
    once when the project has no qualification — and goes on to production."""
    q = lane.sql
    reason = ""
    if status == "suspended":
        reason = (yield ONE, q.status_reason.sql, q.status_reason.args(params))[0]
    refusal = rules.status_refusal(status, reason)
    if refusal is not None:
        return refusal
    live = yield ONE, q.live.sql, q.live.args(params)
    if live is not None:
        return (yield from _resume(lane, project, live))
    refusal = yield from _domain_refusal(lane, policy, params)
    if refusal is not None:
        return refusal
    if status == "qualifying":
        qual = policy.qualification
        if qual.n_items > 0:
            task = yield from _produce(lane, project, policy, user_pk, ("qualification",), params)
            if task is not None:
                return task
            if (yield ONE, q.has_qualification.sql, q.has_qualification.args(params)):
                found = yield ALL, q.qualification_record.sql, q.qualification_record.args(params)
                record = [bool(r[0]) for r in found]
                passed = final_qualification(record, qual.pass_bar, qual.min_items) == "pass"
                why = f"qualification set exhausted: {sum(record)}/{len(record)} correct"
                yield from _set_status(lane, params, "qualified" if passed else "failed", why)
                if not passed:
                    return rules.status_refusal("failed", "")
            else:
                yield from _set_status(
                    lane, params, "qualified", "project has no qualification items"
                )
        else:
            yield from _set_status(lane, params, "qualified", "project needs no qualification")
    refusal = yield from _cap_refusal(lane, policy, params)
    if refusal is not None:
        return refusal
    roles = rules.roles_to_try(policy, _RNG)
    return (yield from _produce(lane, project, policy, user_pk, roles, params))


def _set_status(lane: Lane, params: dict[str, Any], status: str, reason: str) -> Flow:
    q = lane.sql.status_update
    yield EXEC, q.sql, q.args({**params, "status": status, "reason": reason})


def _resume(lane: Lane, project: ProjectRef, live: Sequence[Any]) -> Flow:
    """The live lease again (one live lease per rater): ``(lease_id, item_pk, role,
    shown_order, expires_at[, content_hash])``."""
    ex = lane.ex
    lease_id, item_pk, role, shown, expires, *content_hash = live
    view, _ = yield from item_view(lane, item_pk, content_hash[0] if content_hash else None)
    shown, expires = ex.load_json(shown), ex.load_dt(expires)
    return {
        "task": rules.task_payload(project, view, lease_id, role, shown, expires),
        "resumed": True,
    }


#: Picks per role before giving up on it: on PostgreSQL a batch's candidates can all fill
#: meanwhile (another host's leases); each pick reads a newer snapshot, which leaves them out.
PICK_ATTEMPTS = 8


def _produce(
    lane: Lane,
    project: ProjectRef,
    policy: Policy,
    user_pk: int,
    roles: Sequence[str],
    params: dict[str, Any],
    picked: list[tuple] | None = None,
    views: dict[int, list[Sequence[Any]]] | None = None,
) -> Flow:
    """Lease the first candidate of the first role that has one (``picked``/``views``: the
    first role's candidates, already read); the task, or None."""
    for role in roles:
        for _ in range(PICK_ATTEMPTS):
            if picked is None:
                picked, views = yield from _pick(lane, role, policy.domain_match, params)
            if not picked:
                break
            for pool_pk, _filled, target, content_hash, item_pk, entry_role in picked:
                found = (views or {}).get(item_pk)
                view, ids = yield from item_view(lane, item_pk, content_hash, found)
                entry = (pool_pk, item_pk, entry_role, target)
                task = yield from _lease(lane, project, policy, user_pk, entry, view, ids)
                if task is not None:
                    return {"task": task}
            picked = None  # every candidate filled meanwhile (PostgreSQL): pick again
        picked = None
    return None


def _pick(lane: Lane, role: str, match: str, params: dict[str, Any]) -> Flow:
    """The candidates for one role, ``(pool_pk, filled, target, content_hash, item_pk, role)``
    each; on SQLite with their items' view rows by item (``sql.pick_viewed``: one statement)."""
    if lane.ex.is_pg:
        stmt = lane.sql.picks[(role, match)]
        rows = yield ALL, stmt.sql, stmt.args(params)
        return [(r[0], r[3], r[4], r[5], r[1], r[2]) for r in rows], {}
    stmt = lane.sql.picks_viewed[(role, match)]
    picked: list[tuple] = []
    views: dict[int, list[Sequence[Any]]] = {}
    for r in (yield ALL, stmt.sql, stmt.args(params)):
        if r[1] not in views:
            picked.append((r[0], r[3], r[4], r[5], r[1], r[2]))
            views[r[1]] = []
        views[r[1]].append(r[6:])
    return picked, views


def _domain_refusal(lane: Lane, policy: Policy, params: dict[str, Any]) -> Flow:
    """``required_domains`` the rater has no verified credential in (a refusal), or None."""
    if not policy.required_domains:
        return None
    q = lane.sql.verified_domains
    found = yield ALL, q.sql, q.args(params)
    return rules.domain_refusal(policy, [r[0] for r in found])


def _cap_refusal(lane: Lane, policy: Policy, params: dict[str, Any]) -> Flow:
    """``max_items_per_rater`` reached (a refusal), or None."""
    if policy.max_items_per_rater is None:
        return None
    q = lane.sql.done_count
    done = (yield ONE, q.sql, q.args(params))[0]
    return rules.cap_refusal(policy, done)


def _lease(
    lane: Lane,
    project: ProjectRef,
    policy: Policy,
    user_pk: int,
    entry: tuple[int, int, str, int],
    view: dict[str, Any],
    ids: list[str],
) -> Flow:
    """Insert the lease (on PostgreSQL a production one only if the item still has room); the
    task, or None when the item filled meanwhile."""
    pool_pk, item_pk, role, target = entry
    ex, now = lane.ex, lane.now
    shown = rules.shown_order(ids, policy, _RNG)
    lease_id, expires = rules.new_lease_id(), rules.lease_expiry(now, policy)
    values = [
        lease_id,
        project.pk,
        item_pk,
        user_pk,
        role,
        ex.json(shown),
        rules.settings_version(project),
        lane.now_s,
        ex.dt(expires),
    ]
    if ex.is_pg and role == "production":
        args = [*values, pool_pk, item_pk, lane.now_s, target]
        if (yield ONE, PG_LEASE_IF_ROOM, args) is None:
            return None
    else:
        yield EXEC, lane.sql.insert_lease, values
    return rules.task_payload(project, view, lease_id, role, shown, expires)


# -- submit --------------------------------------------------------------------------------------


def run_submit(
    lane: Lane,
    cred: Credential,
    project_name: str,
    *,
    assignment_id: str,
    judgment: dict[str, Any],
    idempotency_key: str | None,
    telemetry: dict[str, Any] | None,
) -> Flow:
    """ "Submit": the judgment stored (its answer), a replay's first answer, or a refusal
    (:class:`.submit.ServiceError`: 404, 409, 410, 403, 422). The lane hands a refusal on
    (the framework answers it), and so every step that needs the framework's session: a
    replay, a first label, a qualification answer (scored at once)."""
    ex, q, now = lane.ex, lane.sql, lane.now
    yield from _first_contact(lane, cred, project_name)
    params = {
        "hash": cred.hash,
        "user_pk": cred.user_pk,
        "now": lane.now_s,
        "name": project_name,
        "lease_id": assignment_id,
        "idem": idempotency_key,
    }
    read = q.submit[cred.by]
    rows = yield ALL, read.sql, read.args(params)
    if not rows and cred.by == "user":  # no such lease here, or the caller left since the guard
        caller = q.auth_next["user"]
        _caller((yield ONE, caller.sql, caller.args(params)), cred)  # 403 when they left
        guard_pk = cred.user_pk
        assert guard_pk is not None  # a "user" credential carries the guard's user
        if idempotency_key:
            first = yield from _framework_step(
                lane,
                "replay",
                lambda s: submissions.replay_by_key(
                    s, project_name, guard_pk, idempotency_key, judgment, assignment_id
                ),
            )
            if first is not None:
                return first
        raise _not_found(assignment_id, now)
    user_pk, username, project, policy = _caller(rows[0] if rows else None, cred)
    first_row = rows[0]
    (a_pk, a_user, item_pk, a_status, shown, created, expires, pool_pk, pool_role, item_key) = (
        first_row[_LEASE_COLS]
    )
    rater_pk, rater_user_pk, idem_pk, settings_version, item_kinds = first_row[_RATER_COLS]
    candidate_keys = [r[_CANDIDATE] for r in rows]
    if idem_pk is not None:  # the key was used: this request repeats that one, or 409
        assert idempotency_key is not None  # idem_pk: the judgment stored under the key sent
        first = yield from _framework_step(
            lane,
            "replay",
            lambda s: submissions.replay_by_key(
                s, project_name, user_pk, idempotency_key, judgment, assignment_id
            ),
        )
        if first is not None:
            return first
    if a_user != user_pk:
        raise _not_found(assignment_id, now)
    if a_status == "submitted":  # the same answer again: the first result
        first = yield from _framework_step(
            lane, "replay", lambda s: submissions.replay_of_lease(s, a_pk, judgment)
        )
        if first is not None:
            return first
    rater_status, reason = first_row[_STATUS], ""
    if rater_status == "suspended":
        mine = q.status_reason.args({"project_pk": project.pk, "user_pk": user_pk})
        reason = (yield ONE, q.status_reason.sql, mine)[0]
    refusal = lease_refusal(
        assignment_id,
        found=True,
        lease_status=a_status,
        rater_status=rater_status,
        rater_reason=reason,
        expires_at=ex.load_dt(expires),
        now=now,
    ) or kind_refusal(
        judgment.get("kind"), project.kinds, len(candidate_keys), ex.load_json(item_kinds)
    )
    if refusal is not None:
        raise refusal
    scored_now = pool_role not in SCORED_LATER  # a qualification answer: scored in the answer
    if scored_now and not lane.framework:
        raise NotCommon("qualification answer")  # before anything is written
    if rater_pk is None or rater_user_pk is None:  # a first label in this project
        rater_pk = yield from _framework_step(
            lane,
            "first label",
            lambda s: submissions.rater_pk_for(s, project.pk, username, user_pk),
        )
    values = parsed = None
    # the suggestions the server served with this lease (AI assistance): the label is ai_assisted
    assisted = ex.load_json(first_row[_SUGGESTION]) or None
    if judgment.get("kind") == "pairwise" and not scored_now and assisted is None:  # cheap equal
        try:
            values = pairwise_values(
                judgment,
                item_key=item_key,
                shown_order=ex.load_json(shown),
                candidate_keys=candidate_keys,
                username=username,
                rubric_key=project.rubric_key,
                rubric_version=project.rubric_version,
                guideline_version=settings_version,
                started_at=ex.load_dt(created),
                submitted_at=now,
                idempotency_key=idempotency_key,
                telemetry=telemetry,
                min_rationale_chars=policy.min_rationale_chars,
            )
        except NotCommon:
            if not lane.framework:
                raise
    if values is None:  # every other kind, and whatever the cheap one does not take
        parsed = yield from _validated(
            lane,
            project,
            judgment,
            item_key,
            candidate_keys,
            username,
            lease=(shown, created, settings_version),
            telemetry=telemetry,
            idempotency_key=idempotency_key,
            assisted_by=assisted,
        )
        values = judgment_rows(parsed).values
    columns = judgment_columns(project.pk, item_pk, rater_pk, values)
    adaptive = policy.adaptive_overlap.enabled and pool_role == "production"
    if adaptive:  # more raters where they disagree: the rule runs under the store's locks
        yield (BEGIN,)
    j_pk = yield from _store_judgment(lane, columns, user_pk, project.pk, a_pk, pool_pk)
    if adaptive:
        yield from after_label(lane, policy.adaptive_overlap, pool_pk, item_pk)
    if scored_now:
        return (
            yield (
                SESSION,
                lambda s: gold_scoring.score_qualification(
                    s, project.pk, user_pk, j_pk, parsed, now
                ),
            )
        )
    lane.after_commit.append((pool_role, j_pk))
    return {
        "judgment_id": j_pk,
        "item_id": item_key,
        "kind": values["kind"],
        "created": True,
        "replayed": False,
        "submitted_at": (values.get("submitted_at") or now).isoformat(),
    }


def after_label(lane: Lane, rule: AdaptiveOverlap, pool_pk: int, item_pk: int) -> Flow:
    """``Policy.adaptive_overlap`` after a production label is stored, in its transaction
    (:mod:`.extra`): on a full overlap item whose labels disagree, one more place while the
    budget lasts (a conditional ``UPDATE``), else the verdict recorded. The verdict, or None."""
    m = lane.ex.mark
    row = yield ONE, extra.POOL_ROW.format(m=m), [pool_pk]
    if row is None or not extra.needs_labels(*row[:3]):
        return None
    target, filled, n_extra, state = row
    rows = yield ALL, extra.LABELS.format(m=m), [item_pk]
    reasons = disagreement(extra.labels_of(rows, lane.ex.load_json), rule)
    verdict = extra.decide(n_extra, reasons, rule)
    if verdict.grant:
        yield EXEC, extra.GRANT.format(m=m), [pool_pk, rule.max_extra]
    elif verdict.state != state:
        yield EXEC, extra.STATE.format(m=m), [verdict.state, pool_pk]
    return verdict


def _not_found(assignment_id: str, now: datetime) -> ServiceError:
    found = lease_refusal(
        assignment_id,
        found=False,
        lease_status=None,
        rater_status=None,
        rater_reason="",
        expires_at=None,
        now=now,
    )
    assert found is not None
    return found


def _rubric(lane: Lane, key: tuple[int, str, int]) -> Flow:
    """The project's current rubric version, read once per executor (one database; a version
    is immutable once stored): ``Executor.rubrics`` by ``key``, (project pk, rubric key,
    version)."""
    cache = lane.ex.rubrics
    if key in cache:
        return cache[key]
    q = lane.sql.rubric
    params = {"project_pk": key[0], "rubric_key": key[1], "rubric_version": key[2]}
    row = yield ONE, q.sql, q.args(params)
    if row is None:
        return None  # the framework explains ("no rubric yet"); nothing cached
    if len(cache) > 1024:
        cache.clear()
    found = cache[key] = Rubric.model_validate(lane.ex.load_json(row[0]))
    return found


def _validated(
    lane: Lane,
    project: ProjectRef,
    judgment: dict[str, Any],
    item_key: str,
    candidate_keys: list[str],
    username: str,
    *,
    lease: tuple[Any, Any, int | None],
    telemetry: dict[str, Any] | None,
    idempotency_key: str | None,
    assisted_by: list[Any] | None = None,
) -> Flow:
    """The judgment through the one validation every submit path shares
    (:func:`.submit.build_judgment`; a refusal is its ``ServiceError``). ``lease``: its shown
    order, creation time and settings version, as read."""
    shown, created, settings_version = lease
    rubric: Any = None  # no rubric: build_judgment says "no rubric yet"
    if judgment.get("kind") == "rubric" and project.rubric_key:
        if project.rubric_version:
            rubric = yield from _rubric(
                lane, (project.pk, project.rubric_key, project.rubric_version)
            )
        else:  # a key without a version: the newest one, read by the session (never seen here)
            rubric = yield from _framework_step(
                lane, "rubric", lambda s: current_rubric(s, s.get(Project, project.pk))
            )
    meta: Any = None  # a checklist is checked against the item's criteria (metadata)
    if judgment.get("kind") == "criteria":
        meta = yield from _framework_step(
            lane, "criteria", lambda s: item_meta(s, project.pk, item_key)
        )
    lengths = None
    if judgment.get("spans"):  # critique spans: checked against the answers' texts, read here
        lengths = yield from _framework_step(
            lane, "spans", lambda s: read_answer_lengths(s, project.pk, item_key)
        )
    return build_judgment(
        None,
        project,  # type: ignore[arg-type]  # a ProjectRef: what build_judgment reads of it
        None,
        username,
        judgment,
        shown_order=list(lane.ex.load_json(shown) or []),
        started_at=lane.ex.load_dt(created),
        idempotency_key=idempotency_key,
        telemetry=telemetry,
        item_key=item_key,
        candidate_keys=candidate_keys,
        guideline_version=settings_version,
        rubric=rubric,
        assisted_by=assisted_by,
        item_meta=meta,
        answer_lengths=lengths,
    )


def _judgment_values(
    ex: Executor, columns: dict[str, Any], now: datetime
) -> tuple[list[str], list[Any]]:
    """The judgment's column names and bound values as the ORM binds them (NULL columns left
    out: they have no defaults; ``excluded`` and ``created_at`` get the model defaults)."""
    names = ["excluded", "created_at"]
    args: list[Any] = [ex.false(), ex.dt(now)]
    for col, v in columns.items():
        if v is None:
            continue
        names.append(col)
        if col in JUDGMENT_JSON_COLS:
            args.append(ex.json(v))
        elif col in JUDGMENT_DT_COLS:
            args.append(ex.dt(v))
        else:
            args.append(v)
    return names, args


def _store_judgment(
    lane: Lane, columns: dict[str, Any], user_pk: int, project_pk: int, a_pk: int, pool_pk: int
) -> Flow:
    """Store the judgment in one guarded statement (``sql.guarded_store``, its own transaction;
    the database closes the lease and counts the label); the judgment's pk."""
    ex = lane.ex
    names, args = _judgment_values(ex, columns, lane.now)
    sql = lane.sql.guarded_store.format(
        columns=", ".join(names), values=", ".join([ex.mark] * len(names))
    )
    guards = [project_pk, user_pk, a_pk, user_pk, lane.now_s, pool_pk]
    j_pk = yield STORE, sql, [*guards, *args]
    if j_pk is None:  # suspended, expired, submitted meanwhile: read again (the framework's
        raise Changed("changed since read")  # executor reruns the flow; the lane hands it on)
    return j_pk
