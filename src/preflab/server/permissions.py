"""Who may do what: one rule table, one FastAPI dependency.

Every route declares its action with ``Depends(guard("project.review"))`` (or
``guard("public")``); ``guard`` authenticates the caller (bearer token or session cookie +
CSRF), loads the project named in the path and the caller's membership, and refuses with
401/403/404 before the handler runs. ``tests/server/test_authz_matrix.py`` walks the app's
routes: a route without a guard fails the suite.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fastapi import Depends, HTTPException, Request
from sqlalchemy import and_, bindparam, or_, select
from sqlalchemy.exc import DBAPIError

from ..store.models import Project, utcnow
from ..store.server_models import ApiToken, Membership, User, WebSession
from .auth import sha256
from .csrf import csrf_ok

SESSION_COOKIE = "preflab_session"

#: action -> project roles allowed (site admins pass every action except ``project.label``,
#: which needs a rater membership: labels belong to a rater with a qualification record).
RULES: dict[str, frozenset[str] | None] = {
    "public": None,
    "authenticated": frozenset(),
    "site.admin": frozenset(),
    "project.view": frozenset({"admin", "reviewer", "rater"}),
    "project.label": frozenset({"rater"}),
    "project.review": frozenset({"admin", "reviewer"}),
    "project.manage": frozenset({"admin"}),
}

DENIED_HEADER = {"X-Preflab-Denied": "1"}


@dataclass
class Actor:
    user_pk: int
    username: str
    is_admin: bool
    via: str  # "token" | "session"
    session_pk: int | None = None
    csrf_token: str | None = None


@dataclass
class ProjectRef:
    """The project a request is about, as loaded by the guard (a plain snapshot)."""

    pk: int
    name: str
    title: str
    kinds: list[str]
    settings: dict[str, Any]
    rubric_key: str | None
    rubric_version: int | None


@dataclass
class Ctx:
    action: str
    actor: Actor | None
    project: ProjectRef | None = None
    role: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def user(self) -> Actor:
        assert self.actor is not None
        return self.actor


@dataclass
class ProjectCtx(Ctx):
    """The context of a project action (``project.*``): the guard loaded the project, so it is
    never ``None`` here (annotate a route's ``ctx`` with it for those actions)."""

    project: ProjectRef


def _deny(status: int, detail: str) -> HTTPException:
    headers = dict(DENIED_HEADER)
    if status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    return HTTPException(status_code=status, detail=detail, headers=headers)


# Prebuilt Core statements: the guard runs on every request, and building an ORM query per
# request cost more CPU than running it. One statement per step, all bound by parameters.
_U, _T, _W = User.__table__, ApiToken.__table__, WebSession.__table__
_PJ, _M = Project.__table__, Membership.__table__

_BY_TOKEN = (
    select(_U.c.pk, _U.c.username, _U.c.is_admin)
    .join(_T, _T.c.user_pk == _U.c.pk)
    .where(
        _T.c.token_hash == bindparam("hash"),
        _T.c.revoked_at.is_(None),
        or_(_T.c.expires_at.is_(None), _T.c.expires_at > bindparam("now")),
        _U.c.is_active.is_(True),
    )
)

_BY_SESSION = (
    select(_U.c.pk, _U.c.username, _U.c.is_admin, _W.c.pk.label("spk"), _W.c.csrf_token)
    .join(_W, _W.c.user_pk == _U.c.pk)
    .where(
        _W.c.token_hash == bindparam("hash"),
        _W.c.revoked.is_(False),
        _W.c.expires_at > bindparam("now"),
        _U.c.is_active.is_(True),
    )
)

#: The project and the caller's role in it in one query (outer join: admins need no membership).
_PROJECT = (
    select(
        _PJ.c.pk,
        _PJ.c.name,
        _PJ.c.title,
        _PJ.c.kinds,
        _PJ.c.settings,
        _PJ.c.rubric_key,
        _PJ.c.rubric_version,
        _M.c.role,
    )
    .outerjoin(_M, and_(_M.c.project_pk == _PJ.c.pk, _M.c.user_pk == bindparam("user_pk")))
    .where(_PJ.c.name == bindparam("name"))
)


def _authenticate(request: Request, conn) -> Actor | None:
    now = utcnow()
    auth = request.headers.get("authorization")
    if auth:
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise _deny(
                401,
                "use 'Authorization: Bearer <token>' (create one with POST /api/v1/auth/tokens)",
            )
        row = conn.execute(_BY_TOKEN, {"hash": sha256(token.strip()), "now": now}).first()
        if row is None:
            raise _deny(401, "invalid, expired or revoked API token")
        return Actor(row.pk, row.username, row.is_admin, "token")
    cookie = request.cookies.get(SESSION_COOKIE)
    if cookie:
        row = conn.execute(_BY_SESSION, {"hash": sha256(cookie), "now": now}).first()
        if row is None:
            raise _deny(401, "your session has expired or ended; log in again")
        actor = Actor(row.pk, row.username, row.is_admin, "session", row.spk, row.csrf_token)
        if not csrf_ok(request, row.csrf_token):
            raise _deny(
                403,
                "missing or wrong CSRF token: send the X-CSRF-Token header from /api/v1/auth/me",
            )
        return actor
    return None


def _load_project(conn, name: str, user_pk: int) -> tuple[ProjectRef | None, str | None]:
    p = conn.execute(_PROJECT, {"name": name, "user_pk": user_pk}).first()
    if p is None:
        return None, None
    ref = ProjectRef(
        p.pk,
        p.name,
        p.title,
        list(p.kinds or []),
        dict(p.settings or {}),
        p.rubric_key,
        p.rubric_version,
    )
    return ref, p.role


def allowed(action: str, *, is_admin: bool, role: str | None) -> bool:
    """The rule table as a function (the authorization matrix test uses it too)."""
    rule = RULES[action]
    if rule is None:
        return True
    if action == "authenticated":
        return True
    if action == "site.admin":
        return is_admin
    if action == "project.label":
        return role in rule
    return is_admin or role in rule


def guard(action: str):
    """The dependency every route uses: authenticate, load the project, check the rule."""
    if action not in RULES:
        raise ValueError(f"unknown action {action!r}; add it to permissions.RULES")

    def dependency(request: Request) -> Ctx:
        try:
            return check(request)
        except DBAPIError as exc:
            if not exc.connection_invalidated:
                raise
            # a pooled connection was dead (server restart, idle timeout): the pool has been
            # invalidated, so this retry and the route's own statements get fresh connections
            return check(request)

    def check(request: Request) -> Ctx:
        db = request.app.state.db
        with db.read_conn() as conn:
            actor = _authenticate(request, conn)
            if RULES[action] is None:
                return Ctx(action, actor)
            if actor is None:
                raise _deny(401, "log in first, or send 'Authorization: Bearer <token>'")
            ctx = Ctx(action, actor)
            if action.startswith("project."):
                name = request.path_params.get("project")
                project, role = _load_project(conn, name, actor.user_pk) if name else (None, None)
                if project is None or (role is None and not actor.is_admin):
                    raise _deny(404, f"no project {name!r}, or you are not a member of it")
                ctx = ProjectCtx(action, actor, project, role)
            if not allowed(action, is_admin=actor.is_admin, role=ctx.role):
                need = (
                    "a site admin"
                    if action == "site.admin"
                    else f"one of the roles {sorted(RULES[action] or ())}"
                )
                raise _deny(403, f"{action}: needs {need} (you are {ctx.role or 'not a member'})")
            return ctx

    dependency.preflab_action = action  # type: ignore[attr-defined]
    return Depends(dependency)


def iter_api_routes(routes):
    """Every APIRoute of an app, also inside included routers (FastAPI >= 0.1xx wraps them)."""
    from fastapi.routing import APIRoute

    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from iter_api_routes(inner.routes)


def route_action(route) -> str | None:
    actions = [getattr(d.call, "preflab_action", None) for d in route.dependant.dependencies]
    actions = [a for a in actions if a]
    return actions[0] if len(actions) == 1 else None
