"""Site administration of accounts: create, list, change (activate, admin, password), domain
credentials verified, password reset links."""

from __future__ import annotations

from datetime import timedelta

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import Field

from ... import audit
from ...store.server_models import User
from .. import auth
from ..database import must_get
from ..permissions import Ctx, guard
from ..services import queries
from . import models as m
from .common import Strict, db_of, ok

router = APIRouter(prefix="/api/v1")


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


class VerifyIn(Strict):
    verified: bool = True


class ResetLinkIn(Strict):
    ttl_hours: int = Field(default=24, ge=1, le=24 * 7)


@router.post("/users", tags=["users"], status_code=201, response_model=m.UserCreatedOut)
def create_user(request: Request, body: UserCreateIn, ctx: Ctx = guard("site.admin")) -> Response:
    """Create an account. Without a password one is generated and returned once."""
    with db_of(request).writing() as s:
        user, password = auth.create_user(
            s,
            body.username,
            password=body.password,
            is_admin=body.is_admin,
            display_name=body.display_name,
            email=body.email,
        )
        audit.record(
            s, ctx.user, "user.created", f"user:{user.username}", {"is_admin": body.is_admin}
        )
        out = queries.user_out(user)
        if body.password is None:
            out["password"] = password
        return ok(out, 201)


@router.get("/users", tags=["users"], response_model=list[m.UserOut])
def list_users(request: Request, ctx: Ctx = guard("site.admin")) -> Response:
    with db_of(request).reading() as s:
        return ok(queries.users(s))


@router.patch("/users/{username}", tags=["users"], response_model=m.UserOut)
def patch_user(
    request: Request, username: str, body: UserPatchIn, ctx: Ctx = guard("site.admin")
) -> Response:
    with db_of(request).writing() as s:
        user = auth.get_user(s, username)
        changed = auth.update_user(
            s,
            user,
            is_active=body.is_active,
            is_admin=body.is_admin,
            password=body.password,
            keep_api_tokens=body.keep_api_tokens,
        )
        for what in changed:
            action, details = _user_change_event(what, user, body)
            audit.record(s, ctx.user, action, f"user:{user.username}", details)
        return ok(queries.user_out(user))


def _user_change_event(what: str, user: User, body: UserPatchIn) -> tuple[str, dict]:
    if what == "is_active":
        return ("user.reactivated" if user.is_active else "user.deactivated"), {}
    if what == "is_admin":
        return ("user.admin_granted" if user.is_admin else "user.admin_revoked"), {}
    return "user.password_reset", {"api_tokens_revoked": not body.keep_api_tokens}


@router.get("/users/{username}/credentials", tags=["users"], response_model=list[m.CredentialOut])
def user_credentials(request: Request, username: str, ctx: Ctx = guard("site.admin")) -> Response:
    with db_of(request).reading() as s:
        return ok(queries.user_credentials(s, username))


@router.post(
    "/users/{username}/credentials/{domain}/verify",
    tags=["users"],
    response_model=m.CredentialStateOut,
)
def verify_credential(
    request: Request, username: str, domain: str, body: VerifyIn, ctx: Ctx = guard("site.admin")
) -> Response:
    with db_of(request).writing() as s:
        row = auth.verify_credential(
            s,
            auth.get_user(s, username),
            domain,
            must_get(s, User, ctx.user.user_pk),
            body.verified,
        )
        return ok({"domain": row.domain, "verified": row.verified})


@router.post(
    "/users/{username}/reset-link", tags=["users"], status_code=201, response_model=m.ResetLinkOut
)
def create_reset_link(
    request: Request, username: str, body: ResetLinkIn, ctx: Ctx = guard("site.admin")
) -> Response:
    """A one-time password reset link for a user (shown once; hand it over yourself). The user
    sets a new password with it; that ends their sessions and revokes their API tokens."""
    with db_of(request).writing() as s:
        user = auth.get_user(s, username)
        token = auth.create_reset_link(
            s,
            user,
            created_by=must_get(s, User, ctx.user.user_pk),
            ttl=timedelta(hours=body.ttl_hours),
        )
        details = {"ttl_hours": body.ttl_hours}
        audit.record(s, ctx.user, "user.reset_link_created", f"user:{username}", details)
    return ok(
        {"username": username, "path": f"/reset/{token}", "expires_in_hours": body.ttl_hours}, 201
    )
