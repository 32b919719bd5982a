"""The caller's own account: health, login and logout, API tokens, invites and password resets
redeemed, the caller's credentials and password."""

from __future__ import annotations

from datetime import timedelta

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import Field
from sqlalchemy import select

from ... import audit
from ...store.server_models import User
from .. import auth
from ..database import must_get
from ..permissions import SESSION_COOKIE, Ctx, guard
from ..services import queries
from . import models as m
from .common import DbId, Strict, client_ip, db_of, ok

router = APIRouter(prefix="/api/v1")


class LoginIn(Strict):
    username: str = Field(min_length=1, max_length=100)
    password: str = Field(min_length=1, max_length=1000)


class TokenIn(Strict):
    name: str = Field(default="", max_length=200)
    ttl_days: int | None = Field(default=None, ge=1, le=3650)


class InviteAcceptIn(Strict):
    username: str = Field(min_length=1, max_length=100)
    password: str = Field(min_length=1, max_length=1000)


class CredentialIn(Strict):
    domain: str = Field(min_length=1, max_length=100)
    evidence: str = Field(default="", max_length=5000)


class PasswordChangeIn(Strict):
    current_password: str = Field(min_length=1, max_length=1000)
    new_password: str = Field(min_length=1, max_length=1000)
    revoke_api_tokens: bool = Field(
        default=True, description="Also revoke your API tokens (as an admin reset does)."
    )


class ResetClaimIn(Strict):
    password: str = Field(min_length=1, max_length=1000)


# -- public ---------------------------------------------------------------------------------------


@router.get("/health", tags=["meta"], response_model=m.HealthOut)
def health(request: Request, ctx: Ctx = guard("public")) -> Response:
    with db_of(request).reading() as s:
        s.execute(select(1))
    return ok({"status": "ok"})


@router.post("/auth/login", tags=["auth"], response_model=m.LoginOut)
def login(request: Request, body: LoginIn, ctx: Ctx = guard("public")) -> Response:
    """Start a browser session: an HttpOnly, SameSite=Lax cookie, plus the CSRF token."""
    cfg = request.app.state.config
    db = db_of(request)
    ip = client_ip(request)
    try:
        user = auth.login(
            db, body.username, body.password, ip, cfg.login_limit, request.app.state.password_gate
        )
    except auth.BadCredentials:
        with db.writing() as s:  # the username and address, never the password
            details = {"username": body.username, "address": ip}
            audit.record(s, audit.ANONYMOUS, "auth.login_failed", f"user:{body.username}", details)
        raise
    with db.writing() as s:
        token, ws = auth.create_web_session(s, user, ttl=cfg.session_ttl, ip=ip)
        audit.record(s, user, "auth.login", f"user:{user.username}", {"address": ip})
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


@router.post("/invites/{token}/accept", tags=["auth"], status_code=201, response_model=m.UserOut)
def accept_invite(
    request: Request, token: str, body: InviteAcceptIn, ctx: Ctx = guard("public")
) -> Response:
    with db_of(request).writing() as s:
        user = auth.accept_invite(s, token, body.username, body.password)
        audit.record(s, user, "invite.accepted", f"user:{user.username}")
        return ok(queries.user_out(user), 201)


@router.post("/password-resets/{token}", tags=["auth"], response_model=m.PasswordResetOut)
def claim_reset_link(
    request: Request, token: str, body: ResetClaimIn, ctx: Ctx = guard("public")
) -> Response:
    """Set a new password with a reset link (single use, expiring)."""
    with db_of(request).writing() as s:
        user = auth.claim_reset_link(s, token, body.password)
        audit.record(s, user, "user.reset_link_claimed", f"user:{user.username}")
        return ok({"username": user.username, "changed": True})


# -- the caller's own account -----------------------------------------------------------------------


@router.post("/auth/logout", tags=["auth"], response_model=m.LoggedOut)
def logout(request: Request, ctx: Ctx = guard("authenticated")) -> Response:
    if ctx.user.session_pk is not None:
        with db_of(request).writing() as s:
            auth.end_web_session(s, ctx.user.session_pk)
    resp = ok({"logged_out": True})
    resp.delete_cookie(SESSION_COOKIE, path="/")
    return resp


@router.get("/auth/me", tags=["auth"], response_model=m.MeOut)
def me(request: Request, ctx: Ctx = guard("authenticated")) -> Response:
    with db_of(request).reading() as s:
        return ok(queries.me(s, ctx.user))


@router.post("/auth/tokens", tags=["auth"], status_code=201, response_model=m.TokenCreatedOut)
def create_token(request: Request, body: TokenIn, ctx: Ctx = guard("authenticated")) -> Response:
    """A new API token (shown once; only its SHA-256 is stored)."""
    with db_of(request).writing() as s:
        user = must_get(s, User, ctx.user.user_pk)
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


@router.get("/auth/tokens", tags=["auth"], response_model=list[m.TokenOut])
def list_tokens(request: Request, ctx: Ctx = guard("authenticated")) -> Response:
    with db_of(request).reading() as s:
        return ok(queries.api_tokens(s, ctx.user.user_pk))


@router.delete("/auth/tokens/{token_id}", tags=["auth"], response_model=m.TokenRevokedOut)
def revoke_token(request: Request, token_id: DbId, ctx: Ctx = guard("authenticated")) -> Response:
    with db_of(request).writing() as s:
        user = must_get(s, User, ctx.user.user_pk)
        row = auth.revoke_api_token(s, user, token_id, as_admin=ctx.user.is_admin)
        return ok({"id": row.pk, "revoked": True})


@router.get("/me/credentials", tags=["auth"], response_model=list[m.CredentialOut])
def my_credentials(request: Request, ctx: Ctx = guard("authenticated")) -> Response:
    with db_of(request).reading() as s:
        return ok(queries.credentials(s, ctx.user.user_pk))


@router.post("/me/credentials", tags=["auth"], status_code=201, response_model=m.CredentialStateOut)
def claim_credential(
    request: Request, body: CredentialIn, ctx: Ctx = guard("authenticated")
) -> Response:
    """Claim a domain (``medicine``, ``law``, ``math``, ``code`` ...); an admin verifies it."""
    with db_of(request).writing() as s:
        row = auth.claim_credential(
            s, must_get(s, User, ctx.user.user_pk), body.domain, body.evidence
        )
        return ok({"domain": row.domain, "verified": row.verified}, 201)


@router.post("/me/password", tags=["users"], response_model=m.PasswordChangedOut)
def change_my_password(
    request: Request, body: PasswordChangeIn, ctx: Ctx = guard("authenticated")
) -> Response:
    """Change your own password, proving the current one. Like an admin reset
    (:func:`preflab.server.auth.set_password`, the one rule) it ends every browser session of the
    account, this one too: log in again with the new password."""
    auth.change_own_password(
        db_of(request),
        request.app.state.password_gate,
        ctx.user.user_pk,
        body.current_password,
        body.new_password,
        revoke_api_tokens=body.revoke_api_tokens,
    )
    return ok(
        {
            "changed": True,
            "api_tokens_revoked": body.revoke_api_tokens,
            "next": "your sessions have ended: log in with the new password",
        }
    )
