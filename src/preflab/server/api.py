"""REST API under ``/api/v1``. Handlers are thin: parse, call the engine, shape the answer.

Every route carries exactly one ``guard(action)`` (see :mod:`preflab.server.permissions`).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

import orjson
from fastapi import APIRouter, Body, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import FileResponse, Response
from pydantic import Field, ValidationError, model_validator
from sqlalchemy import func, select

from ..schema import Rubric, Telemetry
from ..store import repo
from ..store.models import ExportLog, ItemRow, JudgmentRow, Project, Rater, utcnow
from ..store.server_models import (
    ApiToken,
    Assignment,
    Credential,
    GoldOutcome,
    Membership,
    PoolEntry,
    RaterStatus,
    ReviewRequest,
    User,
)
from . import assign, auth, judging, projects
from .permissions import SESSION_COOKIE, Ctx, guard
from .policy import Policy
from .quality_adapter import wilson_interval
from .wire import WireModel, check_wire

router = APIRouter(prefix="/api/v1")

#: A row id in a path: bounded to a signed 64-bit integer (a larger one overflowed the SQLite
#: driver into a 500 instead of a 422; found by the schemathesis fuzz test).
DbId = Annotated[int, PathParam(ge=1, le=2**63 - 1)]


def ok(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type="application/json")


#: Every request body: unknown fields refused, and the wire rules (no NUL, 64-bit integers,
#: finite numbers) checked anywhere in the body before the fields (preflab.server.wire).
Strict = WireModel


class RubricIn(Rubric):
    """A rubric body under the same wire rules."""

    @model_validator(mode="before")
    @classmethod
    def _wire_rules(cls, data: Any) -> Any:  # noqa: ANN401
        check_wire(data, "Rubric")
        return data


# -- request bodies -------------------------------------------------------------------------------


class LoginIn(Strict):
    username: str = Field(min_length=1, max_length=100)
    password: str = Field(min_length=1, max_length=1000)


class TokenIn(Strict):
    name: str = Field(default="", max_length=200)
    ttl_days: int | None = Field(default=None, ge=1, le=3650)


class UserCreateIn(Strict):
    username: str = Field(min_length=1, max_length=100)
    password: str | None = Field(
        default=None, max_length=1000, description="Omit to have one generated."
    )
    is_admin: bool = False
    display_name: str = Field(default="", max_length=200)
    email: str | None = Field(default=None, max_length=320)


class UserPatchIn(Strict):
    is_active: bool | None = None
    is_admin: bool | None = None
    password: str | None = Field(default=None, max_length=1000)
    keep_api_tokens: bool = Field(
        default=False,
        description="With a new password: leave the user's API tokens "
        "valid (by default a password reset revokes them).",
    )


class CredentialIn(Strict):
    domain: str = Field(min_length=1, max_length=100)
    evidence: str = Field(default="", max_length=5000)


class VerifyIn(Strict):
    verified: bool = True


class ProjectCreateIn(Strict):
    name: str = Field(min_length=1, max_length=100)
    title: str = Field(default="", max_length=300)
    kinds: list[str] = Field(default_factory=lambda: ["pairwise"], min_length=1, max_length=10)
    guidelines: str = Field(default="", max_length=200_000)
    policy: Policy = Field(default_factory=Policy)


class SettingsPatchIn(Strict):
    title: str | None = Field(default=None, max_length=300)
    guidelines: str | None = Field(default=None, max_length=200_000)
    policy: dict[str, Any] | None = None
    note: str = Field(default="", max_length=2000)


class MemberIn(Strict):
    role: str = Field(description="admin, reviewer or rater")


class InviteIn(Strict):
    role: str = "rater"
    email: str | None = Field(default=None, max_length=320)
    ttl_hours: int = Field(default=72, ge=1, le=24 * 90)


class InviteAcceptIn(Strict):
    username: str = Field(min_length=1, max_length=100)
    password: str = Field(min_length=1, max_length=1000)


class ItemsIn(Strict):
    items: list[dict[str, Any]] = Field(min_length=1, max_length=5000)


class ReviseIn(Strict):
    judgment: dict[str, Any]
    telemetry: Telemetry | None = None
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=200)


class NoteIn(Strict):
    note: str = Field(min_length=1, max_length=5000)


class ExportIn(Strict):
    format: str = Field(
        default="raw",
        min_length=1,
        max_length=50,
        description="trl-preference, trl-reward, trl-kto, trl-sft, trl-stepwise, openrlhf, verl, raw",
    )
    # the options of `preflab export` (preflab.io.export.ExportOptions), same defaults
    aggregation: str = Field(
        default="majority", max_length=40, description="majority or dawid-skene"
    )
    length_gate: tuple[float, float] | None = Field(
        default=None, description="[min, max] chosen/rejected length ratio"
    )
    length_unit: Literal["words", "chars"] = "words"
    min_raters: int = Field(default=1, ge=1, le=100)
    include_ai: bool = False
    include_gold: bool = False
    include_rater_ids: bool = Field(
        default=False, description="raw export: rater ids instead of HMAC hashes"
    )


# -- helpers ------------------------------------------------------------------------------------


def _db(request: Request):  # noqa: ANN202
    return request.app.state.db


def _client_ip(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def _user_out(u: User) -> dict[str, Any]:
    return {
        "username": u.username,
        "display_name": u.display_name,
        "email": u.email,
        "is_admin": u.is_admin,
        "is_active": u.is_active,
        "created_at": u.created_at.isoformat(),
    }


def _project_out(p: Project, role: str | None, *, full: bool) -> dict[str, Any]:
    settings = projects.current_settings(p)
    out = {
        "name": p.name,
        "title": p.title,
        "kinds": p.kinds,
        "role": role,
        "rubric": {"id": p.rubric_key, "version": p.rubric_version} if p.rubric_key else None,
        "guidelines": settings.guidelines,
        "settings_version": int((p.settings or {}).get("version", 1)),
    }
    if full:
        out["policy"] = settings.policy.model_dump(mode="json")
    return out


def _idem(request: Request, body_key: str | None) -> str | None:
    return body_key or request.headers.get("idempotency-key") or None


# -- public ---------------------------------------------------------------------------------------


@router.get("/health", tags=["meta"])
def health(request: Request, ctx: Ctx = guard("public")) -> dict:
    with _db(request).reading() as s:
        s.execute(select(1))
    return {"status": "ok"}


@router.post("/auth/login", tags=["auth"])
def login(request: Request, body: LoginIn, ctx: Ctx = guard("public")) -> Response:
    """Start a browser session: an HttpOnly, SameSite=Lax cookie, plus the CSRF token."""
    cfg = request.app.state.config
    user = auth.login(
        _db(request),
        body.username,
        body.password,
        _client_ip(request),
        cfg.login_limit,
        request.app.state.password_gate,
    )
    with _db(request).writing() as s:
        token, ws = auth.create_web_session(s, user, ttl=cfg.session_ttl, ip=_client_ip(request))
        data = {
            "username": user.username,
            "is_admin": user.is_admin,
            "csrf_token": ws.csrf_token,
            "expires_at": ws.expires_at.isoformat(),
        }
    resp = ok(data)
    resp.set_cookie(
        SESSION_COOKIE,
        token,
        max_age=int(cfg.session_ttl.total_seconds()),
        httponly=True,
        samesite="lax",
        path="/",
    )  # Secure: transport.TransportSecurity (HTTPS or configured)
    return resp


@router.post("/invites/{token}/accept", tags=["auth"], status_code=201)
def accept_invite(
    request: Request, token: str, body: InviteAcceptIn, ctx: Ctx = guard("public")
) -> Response:
    with _db(request).writing() as s:
        user = auth.accept_invite(s, token, body.username, body.password)
        return ok(_user_out(user), 201)


# -- the caller's own account -----------------------------------------------------------------------


@router.post("/auth/logout", tags=["auth"])
def logout(request: Request, ctx: Ctx = guard("authenticated")) -> Response:
    if ctx.user.session_pk is not None:
        with _db(request).writing() as s:
            auth.end_web_session(s, ctx.user.session_pk)
    resp = ok({"logged_out": True})
    resp.delete_cookie(SESSION_COOKIE, path="/")
    return resp


@router.get("/auth/me", tags=["auth"])
def me(request: Request, ctx: Ctx = guard("authenticated")) -> Response:
    with _db(request).reading() as s:
        user = s.get(User, ctx.user.user_pk)
        roles = dict(
            s.execute(
                select(Project.name, Membership.role)
                .join(Membership, Membership.project_pk == Project.pk)
                .where(Membership.user_pk == user.pk)
            ).all()
        )
        return ok(
            {
                **_user_out(user),
                "projects": roles,
                "via": ctx.user.via,
                "csrf_token": ctx.user.csrf_token,
            }
        )


@router.post("/auth/tokens", tags=["auth"], status_code=201)
def create_token(request: Request, body: TokenIn, ctx: Ctx = guard("authenticated")) -> Response:
    """A new API token (shown once; only its SHA-256 is stored)."""
    with _db(request).writing() as s:
        user = s.get(User, ctx.user.user_pk)
        ttl = timedelta(days=body.ttl_days) if body.ttl_days else None
        token, row = auth.create_api_token(s, user, name=body.name, ttl=ttl)
        return ok(
            {
                "id": row.pk,
                "token": token,
                "prefix": row.prefix,
                "name": row.name,
                "expires_at": row.expires_at.isoformat() if row.expires_at else None,
            },
            201,
        )


@router.get("/auth/tokens", tags=["auth"])
def list_tokens(request: Request, ctx: Ctx = guard("authenticated")) -> Response:
    with _db(request).reading() as s:
        rows = s.scalars(
            select(ApiToken).where(ApiToken.user_pk == ctx.user.user_pk).order_by(ApiToken.pk)
        )
        return ok(
            [
                {
                    "id": r.pk,
                    "prefix": r.prefix,
                    "name": r.name,
                    "created_at": r.created_at.isoformat(),
                    "revoked": r.revoked_at is not None,
                }
                for r in rows
            ]
        )


@router.delete("/auth/tokens/{token_id}", tags=["auth"])
def revoke_token(request: Request, token_id: DbId, ctx: Ctx = guard("authenticated")) -> Response:
    with _db(request).writing() as s:
        user = s.get(User, ctx.user.user_pk)
        row = auth.revoke_api_token(s, user, token_id, as_admin=ctx.user.is_admin)
        return ok({"id": row.pk, "revoked": True})


@router.get("/me/credentials", tags=["auth"])
def my_credentials(request: Request, ctx: Ctx = guard("authenticated")) -> Response:
    with _db(request).reading() as s:
        return ok(_credentials(s, ctx.user.user_pk))


@router.post("/me/credentials", tags=["auth"], status_code=201)
def claim_credential(
    request: Request, body: CredentialIn, ctx: Ctx = guard("authenticated")
) -> Response:
    """Claim a domain (``medicine``, ``law``, ``math``, ``code`` ...); an admin verifies it."""
    with _db(request).writing() as s:
        row = auth.claim_credential(s, s.get(User, ctx.user.user_pk), body.domain, body.evidence)
        return ok({"domain": row.domain, "verified": row.verified}, 201)


def _credentials(s, user_pk: int) -> list[dict[str, Any]]:  # noqa: ANN001
    rows = s.scalars(
        select(Credential).where(Credential.user_pk == user_pk).order_by(Credential.domain)
    )
    return [
        {
            "domain": r.domain,
            "evidence": r.evidence,
            "verified": r.verified,
            "verified_at": r.verified_at.isoformat() if r.verified_at else None,
        }
        for r in rows
    ]


@router.get("/projects", tags=["projects"])
def list_projects(request: Request, ctx: Ctx = guard("authenticated")) -> Response:
    with _db(request).reading() as s:
        stmt = select(Project, Membership.role).outerjoin(
            Membership,
            (Membership.project_pk == Project.pk) & (Membership.user_pk == ctx.user.user_pk),
        )
        if not ctx.user.is_admin:
            stmt = stmt.where(Membership.pk.is_not(None))
        rows = s.execute(stmt.order_by(Project.name)).all()
        return ok(
            [
                _project_out(p, role, full=ctx.user.is_admin or role in ("admin", "reviewer"))
                for p, role in rows
            ]
        )


# -- site administration ---------------------------------------------------------------------------


@router.post("/users", tags=["users"], status_code=201)
def create_user(request: Request, body: UserCreateIn, ctx: Ctx = guard("site.admin")) -> Response:
    """Create an account. Without a password one is generated and returned once."""
    with _db(request).writing() as s:
        user, password = auth.create_user(
            s,
            body.username,
            password=body.password,
            is_admin=body.is_admin,
            display_name=body.display_name,
            email=body.email,
        )
        out = _user_out(user)
        if body.password is None:
            out["password"] = password
        return ok(out, 201)


@router.get("/users", tags=["users"])
def list_users(request: Request, ctx: Ctx = guard("site.admin")) -> Response:
    with _db(request).reading() as s:
        return ok([_user_out(u) for u in s.scalars(select(User).order_by(User.username))])


@router.patch("/users/{username}", tags=["users"])
def patch_user(
    request: Request, username: str, body: UserPatchIn, ctx: Ctx = guard("site.admin")
) -> Response:
    with _db(request).writing() as s:
        user = auth.get_user(s, username)
        if body.is_active is not None:
            user.is_active = body.is_active
        if body.is_admin is not None:
            user.is_admin = body.is_admin
        if body.password is not None:
            auth.set_password(s, user, body.password, keep_api_tokens=body.keep_api_tokens)
        return ok(_user_out(user))


@router.get("/users/{username}/credentials", tags=["users"])
def user_credentials(request: Request, username: str, ctx: Ctx = guard("site.admin")) -> Response:
    with _db(request).reading() as s:
        return ok(_credentials(s, auth.get_user(s, username).pk))


@router.post("/users/{username}/credentials/{domain}/verify", tags=["users"])
def verify_credential(
    request: Request, username: str, domain: str, body: VerifyIn, ctx: Ctx = guard("site.admin")
) -> Response:
    with _db(request).writing() as s:
        row = auth.verify_credential(
            s, auth.get_user(s, username), domain, s.get(User, ctx.user.user_pk), body.verified
        )
        return ok({"domain": row.domain, "verified": row.verified})


@router.post("/projects", tags=["projects"], status_code=201)
def create_project(
    request: Request, body: ProjectCreateIn, ctx: Ctx = guard("site.admin")
) -> Response:
    with _db(request).writing() as s:
        p = projects.create_project(
            s,
            body.name,
            title=body.title,
            kinds=body.kinds,
            guidelines=body.guidelines,
            policy=body.policy,
            created_by=ctx.user.user_pk,
        )
        return ok(_project_out(p, None, full=True), 201)


# -- project: any member -----------------------------------------------------------------------------


@router.get("/projects/{project}", tags=["projects"])
def get_project(request: Request, project: str, ctx: Ctx = guard("project.view")) -> Response:
    """Guidelines, kinds and rubric for everyone; the full policy for admins and reviewers."""
    with _db(request).reading() as s:
        p = s.get(Project, ctx.project.pk)
        return ok(
            _project_out(p, ctx.role, full=ctx.user.is_admin or ctx.role in ("admin", "reviewer"))
        )


@router.get("/projects/{project}/rubric", tags=["rubrics"])
def get_rubric(
    request: Request,
    project: str,
    version: int | None = Query(default=None, ge=1, le=10**6),
    ctx: Ctx = guard("project.view"),
) -> Response:
    with _db(request).reading() as s:
        p = s.get(Project, ctx.project.pk)
        rubric = repo.get_rubric(s, p, version=version)
        if rubric is None:
            return ok({"detail": "this project has no rubric (yet)"}, 404)
        return ok(rubric.model_dump(mode="json"))


# -- project: raters ------------------------------------------------------------------------------------


# next task, release, submit: preflab.server.routes.labelling


@router.get("/projects/{project}/my/status", tags=["labelling"])
def my_status(request: Request, project: str, ctx: Ctx = guard("project.label")) -> Response:
    with _db(request).reading() as s:
        st = s.scalar(
            select(RaterStatus).where(
                RaterStatus.project_pk == ctx.project.pk, RaterStatus.user_pk == ctx.user.user_pk
            )
        )
        done = s.scalar(
            select(func.count())
            .select_from(Assignment)
            .where(
                Assignment.project_pk == ctx.project.pk,
                Assignment.user_pk == ctx.user.user_pk,
                Assignment.status == "submitted",
            )
        )
        return ok(
            {
                "status": st.status if st else "new",
                "reason": st.reason if st else "",
                "submitted": done,
            }
        )


@router.get("/projects/{project}/my/judgments", tags=["labelling"])
def my_judgments(
    request: Request,
    project: str,
    after: int = Query(default=0, ge=0, le=2**62),
    limit: int = Query(default=100, ge=1, le=1000),
    ctx: Ctx = guard("project.label"),
) -> Response:
    """The caller's own judgments (never anyone else's; no gold answers)."""
    with _db(request).reading() as s:
        rows = s.execute(
            select(JudgmentRow, ItemRow.item_key)
            .join(ItemRow, ItemRow.pk == JudgmentRow.item_pk)
            .join(Rater, Rater.pk == JudgmentRow.rater_pk)
            .where(
                JudgmentRow.project_pk == ctx.project.pk,
                Rater.user_pk == ctx.user.user_pk,
                JudgmentRow.pk > after,
            )
            .order_by(JudgmentRow.pk)
            .limit(limit)
        ).all()
        return ok(
            [
                {
                    "judgment_id": j.pk,
                    "item_id": key,
                    "kind": j.kind,
                    "body": j.body,
                    "rationale": j.rationale,
                    "supersedes": j.supersedes_pk,
                    "submitted_at": j.submitted_at.isoformat() if j.submitted_at else None,
                }
                for j, key in rows
            ]
        )


@router.get("/projects/{project}/my/revisions", tags=["labelling"])
def my_revisions(request: Request, project: str, ctx: Ctx = guard("project.label")) -> Response:
    """Judgments a reviewer sent back to the caller, with the note and the item as shown."""
    from ..store.repo import item_from_row

    with _db(request).reading() as s:
        rows = s.execute(
            select(ReviewRequest, JudgmentRow)
            .join(JudgmentRow, JudgmentRow.pk == ReviewRequest.judgment_pk)
            .join(Rater, Rater.pk == JudgmentRow.rater_pk)
            .where(
                ReviewRequest.project_pk == ctx.project.pk,
                ReviewRequest.status == "open",
                Rater.user_pk == ctx.user.user_pk,
            )
            .order_by(ReviewRequest.pk)
        ).all()
        out = []
        for req, j in rows:
            view = item_from_row(s.get(ItemRow, j.item_pk)).public_view()
            out.append(
                {
                    "request_id": req.pk,
                    "judgment_id": j.pk,
                    "note": req.note,
                    "item": view,
                    "shown_order": j.shown_order,
                    "your_judgment": {**j.body, "rationale": j.rationale},
                }
            )
        return ok(out)


@router.post("/projects/{project}/judgments/{judgment_id}/revise", tags=["labelling"])
def revise_judgment(
    request: Request,
    project: str,
    judgment_id: DbId,
    body: ReviseIn,
    ctx: Ctx = guard("project.label"),
) -> Response:
    """Revise a sent-back judgment: a new row that supersedes it (the old one is kept)."""
    telemetry = (
        body.telemetry.model_dump(mode="json", exclude_none=True) if body.telemetry else None
    )
    out = judging.revise(
        _db(request),
        ctx.project,
        ctx.user.user_pk,
        ctx.user.username,
        judgment_id,
        body.judgment,
        idempotency_key=_idem(request, body.idempotency_key),
        telemetry=telemetry,
    )
    return ok(out, 201 if out["created"] else 200)


# -- project: reviewers ----------------------------------------------------------------------------------


@router.get("/projects/{project}/items", tags=["items"])
def list_items(
    request: Request,
    project: str,
    after: int = Query(default=0, ge=0, le=2**62),
    limit: int = Query(default=100, ge=1, le=1000),
    ctx: Ctx = guard("project.review"),
) -> Response:
    with _db(request).reading() as s:
        rows = s.execute(
            select(
                ItemRow.pk,
                ItemRow.item_key,
                ItemRow.domains,
                ItemRow.gold.is_not(None),
                PoolEntry.role,
                PoolEntry.target,
                PoolEntry.filled,
            )
            .outerjoin(PoolEntry, PoolEntry.item_pk == ItemRow.pk)
            .where(ItemRow.project_pk == ctx.project.pk, ItemRow.pk > after)
            .order_by(ItemRow.pk)
            .limit(limit)
        ).all()
        return ok(
            [
                {
                    "pk": r[0],
                    "id": r[1],
                    "domains": r[2],
                    "gold": bool(r[3]),
                    "role": r[4],
                    "target": r[5],
                    "filled": r[6],
                }
                for r in rows
            ]
        )


@router.get("/projects/{project}/items/{item_id}", tags=["items"])
def get_item(
    request: Request, project: str, item_id: str, ctx: Ctx = guard("project.review")
) -> Response:
    """The full item, gold and reference included (reviewers and admins only)."""
    with _db(request).reading() as s:
        row = repo.get_item(s, s.get(Project, ctx.project.pk), item_id)
        return ok(repo.item_from_row(row).model_dump(mode="json"))


@router.get("/projects/{project}/judgments", tags=["review"])
def list_judgments(
    request: Request,
    project: str,
    after: int = Query(default=0, ge=0, le=2**62),
    limit: int = Query(default=100, ge=1, le=1000),
    item_id: str | None = Query(default=None, max_length=200),
    ctx: Ctx = guard("project.review"),
) -> Response:
    """Judgments with provenance; raters appear as hashes when the project is blind."""
    blind = projects.settings_of(ctx.project.settings).policy.blind
    with _db(request).reading() as s:
        stmt = (
            select(JudgmentRow, ItemRow.item_key, Rater.rater_key, Rater.rater_hash)
            .join(ItemRow, ItemRow.pk == JudgmentRow.item_pk)
            .join(Rater, Rater.pk == JudgmentRow.rater_pk)
            .where(JudgmentRow.project_pk == ctx.project.pk, JudgmentRow.pk > after)
        )
        if item_id is not None:
            stmt = stmt.where(ItemRow.item_key == item_id)
        rows = s.execute(stmt.order_by(JudgmentRow.pk).limit(limit)).all()
        return ok(
            [
                {
                    "judgment_id": j.pk,
                    "item_id": key,
                    "kind": j.kind,
                    "body": j.body,
                    "rationale": j.rationale,
                    "rater": rhash if blind else rkey,
                    "review_pass": j.review_pass,
                    "source": j.source,
                    "telemetry": j.telemetry,
                    "excluded": j.excluded,
                    "exclusion_reason": j.exclusion_reason,
                    "supersedes": j.supersedes_pk,
                    "submitted_at": j.submitted_at.isoformat() if j.submitted_at else None,
                }
                for j, key, rkey, rhash in rows
            ]
        )


@router.post(
    "/projects/{project}/judgments/{judgment_id}/send-back", tags=["review"], status_code=201
)
def send_back(
    request: Request,
    project: str,
    judgment_id: DbId,
    body: NoteIn,
    ctx: Ctx = guard("project.review"),
) -> Response:
    with _db(request).writing() as s:
        req = judging.send_back(s, ctx.project.pk, judgment_id, ctx.user.user_pk, body.note)
        return ok({"request_id": req.pk, "judgment_id": judgment_id, "status": req.status}, 201)


@router.get("/projects/{project}/raters", tags=["quality"])
def list_raters(request: Request, project: str, ctx: Ctx = guard("project.review")) -> Response:
    with _db(request).reading() as s:
        return ok(_rater_figures(s, ctx))


def _rater_figures(s, ctx: Ctx) -> list[dict[str, Any]]:  # noqa: ANN001
    q = projects.settings_of(ctx.project.settings).policy.qualification
    rows = s.execute(
        select(RaterStatus, User.username)
        .join(User, User.pk == RaterStatus.user_pk)
        .where(RaterStatus.project_pk == ctx.project.pk)
        .order_by(User.username)
    ).all()
    out = []
    for st, username in rows:
        gold = s.execute(
            select(GoldOutcome.phase, GoldOutcome.correct).where(
                GoldOutcome.project_pk == ctx.project.pk, GoldOutcome.user_pk == st.user_pk
            )
        ).all()
        figures = {}
        for phase in ("qualification", "production"):
            outcomes = [c for p, c in gold if p == phase]
            lo, hi = wilson_interval(sum(outcomes), len(outcomes), q.confidence)
            figures[phase] = {
                "n": len(outcomes),
                "correct": sum(outcomes),
                "accuracy": (sum(outcomes) / len(outcomes)) if outcomes else None,
                "wilson": [lo, hi],
            }
        submitted = s.scalar(
            select(func.count())
            .select_from(Assignment)
            .where(
                Assignment.project_pk == ctx.project.pk,
                Assignment.user_pk == st.user_pk,
                Assignment.status == "submitted",
            )
        )
        out.append(
            {
                "username": username,
                "status": st.status,
                "reason": st.reason,
                "evidence": st.evidence,
                "submitted": submitted,
                "gold": figures,
            }
        )
    return out


@router.get("/projects/{project}/quality", tags=["quality"])
def quality(request: Request, project: str, ctx: Ctx = guard("project.review")) -> Response:
    """Counts, pool progress, gold accuracy per rater (Wilson intervals), suspensions."""
    with _db(request).reading() as s:
        p = s.get(Project, ctx.project.pk)
        counts = repo.project_counts(s, p)
        pool = s.execute(
            select(
                PoolEntry.role, func.count(), func.sum(PoolEntry.target), func.sum(PoolEntry.filled)
            )
            .where(PoolEntry.project_pk == p.pk)
            .group_by(PoolEntry.role)
        ).all()
        excluded = s.scalar(
            select(func.count())
            .select_from(JudgmentRow)
            .where(JudgmentRow.project_pk == p.pk, JudgmentRow.excluded.is_(True))
        )
        return ok(
            {
                "counts": counts,
                "excluded_judgments": excluded,
                "pool": {
                    r: {"items": n, "target": int(t or 0), "filled": int(f or 0)}
                    for r, n, t, f in pool
                },
                "expired_leases": assign.expired_leases(s, p.pk),
                "raters": _rater_figures(s, ctx),
            }
        )


@router.get("/projects/{project}/members", tags=["projects"])
def list_members(request: Request, project: str, ctx: Ctx = guard("project.review")) -> Response:
    with _db(request).reading() as s:
        rows = s.execute(
            select(User.username, Membership.role)
            .join(Membership, Membership.user_pk == User.pk)
            .where(Membership.project_pk == ctx.project.pk)
            .order_by(User.username)
        ).all()
        return ok([{"username": u, "role": r} for u, r in rows])


# -- project: admins -------------------------------------------------------------------------------------------


@router.patch("/projects/{project}/settings", tags=["projects"])
def patch_settings(
    request: Request, project: str, body: SettingsPatchIn, ctx: Ctx = guard("project.manage")
) -> Response:
    """Change title, guidelines or policy (merged key by key); each change is a new audited version."""
    changes = body.model_dump(exclude_none=True, exclude={"note"})
    with _db(request).writing() as s:
        p = s.scalar(select(Project).where(Project.pk == ctx.project.pk).with_for_update())
        version, after = projects.update_settings(
            s, p, changes, changed_by=ctx.user.user_pk, note=body.note
        )
        return ok({"version": version, **_project_out(p, ctx.role, full=True)})


@router.get("/projects/{project}/settings/history", tags=["projects"])
def settings_history(
    request: Request, project: str, ctx: Ctx = guard("project.manage")
) -> Response:
    with _db(request).reading() as s:
        names = dict(s.execute(select(User.pk, User.username)).all())
        return ok(
            [
                {
                    "version": v.version,
                    "changed_by": names.get(v.changed_by),
                    "changed_at": v.changed_at.isoformat(),
                    "before": v.before,
                    "after": v.after,
                    "note": v.note,
                }
                for v in projects.settings_history(s, ctx.project.pk)
            ]
        )


@router.put("/projects/{project}/members/{username}", tags=["projects"])
def put_member(
    request: Request,
    project: str,
    username: str,
    body: MemberIn,
    ctx: Ctx = guard("project.manage"),
) -> Response:
    with _db(request).writing() as s:
        m = auth.set_membership(
            s, s.get(Project, ctx.project.pk), auth.get_user(s, username), body.role
        )
        return ok({"username": username, "role": m.role})


@router.delete("/projects/{project}/members/{username}", tags=["projects"])
def delete_member(
    request: Request, project: str, username: str, ctx: Ctx = guard("project.manage")
) -> Response:
    with _db(request).writing() as s:
        auth.remove_membership(s, s.get(Project, ctx.project.pk), auth.get_user(s, username))
        return ok({"username": username, "removed": True})


@router.post("/projects/{project}/invites", tags=["projects"], status_code=201)
def create_invite(
    request: Request, project: str, body: InviteIn, ctx: Ctx = guard("project.manage")
) -> Response:
    """An invite link that expires; the token is shown once (only its hash is stored)."""
    with _db(request).writing() as s:
        token, row = auth.create_invite(
            s,
            s.get(Project, ctx.project.pk),
            role=body.role,
            created_by=s.get(User, ctx.user.user_pk),
            ttl=timedelta(hours=body.ttl_hours),
            email=body.email,
        )
        return ok(
            {
                "token": token,
                "path": f"/api/v1/invites/{token}/accept",
                "role": row.role,
                "expires_at": row.expires_at.isoformat(),
            },
            201,
        )


@router.post("/projects/{project}/rubrics", tags=["rubrics"], status_code=201)
def add_rubric(
    request: Request, project: str, body: RubricIn, ctx: Ctx = guard("project.manage")
) -> Response:
    """Store a rubric; changed content becomes a new immutable version, made current."""
    with _db(request).writing() as s:
        row = repo.add_rubric(s, s.get(Project, ctx.project.pk), body)
        return ok({"id": row.rubric_key, "version": row.version}, 201)


@router.post("/projects/{project}/items", tags=["items"])
def import_items(
    request: Request, project: str, body: ItemsIn, ctx: Ctx = guard("project.manage")
) -> Response:
    """Import items (all or nothing, idempotent by content) and add them to the task pool."""
    return ok(projects.import_items(_db(request), ctx.project.name, body.items))


@router.post("/projects/{project}/raters/{username}/reinstate", tags=["quality"])
def reinstate(
    request: Request, project: str, username: str, body: NoteIn, ctx: Ctx = guard("project.manage")
) -> Response:
    with _db(request).writing() as s:
        st = judging.reinstate(s, ctx.project.pk, auth.get_user(s, username).pk, body.note)
        return ok({"username": username, "status": st.status, "reason": st.reason})


@router.post("/projects/{project}/exports", tags=["exports"], status_code=201)
def export(
    request: Request, project: str, body: ExportIn, ctx: Ctx = guard("project.manage")
) -> Response:
    """Run the exporter; the manifest (files, SHA-256, gates) comes back."""
    out_dir = (
        request.app.state.config.exports_dir
        / ctx.project.name
        / utcnow().strftime("%Y%m%dT%H%M%S%f")
    ).resolve()
    export_id, manifest = projects.export_project(
        _db(request), ctx.project.name, body.format, out_dir, **body.model_dump(exclude={"format"})
    )
    return ok({"export_id": export_id, "manifest": manifest}, 201)


@router.get("/projects/{project}/exports/{export_id}/files/{filename}", tags=["exports"])
def export_file(
    request: Request,
    project: str,
    export_id: DbId,
    filename: str,
    ctx: Ctx = guard("project.manage"),
) -> Response:
    with _db(request).reading() as s:
        log = s.get(ExportLog, export_id)
        if log is None or log.project_pk != ctx.project.pk:
            return ok({"detail": f"no export {export_id} in this project"}, 404)
        base = Path(log.path).resolve()
    path = (base / filename).resolve()
    if base not in path.parents or not path.is_file():
        return ok({"detail": f"export {export_id} has no file {filename!r}"}, 404)
    return FileResponse(path)


# make FastAPI's Body import used (OpenAPI examples hook later)
_ = Body
_ = ValidationError
