"""Accounts and credentials: users, argon2 passwords, browser sessions, API tokens, invites,
login rate limiting and rater domain credentials.

Secrets at rest: passwords as argon2id hashes; session cookies, API tokens and invite tokens
as SHA-256 of a 256-bit random token (a database leak does not let anyone log in).
Functions take an open session and never commit (the caller owns the transaction).
"""

from __future__ import annotations

import hashlib
import re
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, timedelta

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError
from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from .. import audit
from ..store.models import Project, utcnow
from ..store.server_models import (
    PROJECT_ROLES,
    ApiToken,
    Credential,
    Invite,
    LoginAttempt,
    Membership,
    User,
    WebSession,
)
from .database import Database, must_get

USERNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,99}$")
DOMAIN = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,99}$")
MIN_PASSWORD = 10

_hasher = PasswordHasher()  # argon2id, library defaults (RFC 9106 second recommendation)


class AuthError(Exception):
    """Bad input for an account operation; the message says what to do."""

    status = 400


class NotAllowed(AuthError):
    status = 403


class BadCredentials(AuthError):
    status = 401


class Missing(AuthError):
    status = 404


class Taken(AuthError):
    status = 409


class Gone(AuthError):
    status = 410


class RateLimited(AuthError):
    status = 429

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def verify_password(stored: str | None, password: str) -> bool:
    if not stored:
        return False
    try:
        return _hasher.verify(stored, password)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def generate_password() -> str:
    """A random password for ``preflab user create`` (printed once, never stored in clear)."""
    return secrets.token_urlsafe(18)


def check_password_strength(password: str) -> None:
    if len(password) < MIN_PASSWORD:
        raise AuthError(f"password: use at least {MIN_PASSWORD} characters")
    if len(password) > 1000:
        raise AuthError("password: at most 1000 characters")


# -- users --------------------------------------------------------------------------------


def create_user(
    session: Session,
    username: str,
    *,
    password: str | None = None,
    is_admin: bool = False,
    display_name: str = "",
    email: str | None = None,
) -> tuple[User, str]:
    """Create an account; returns ``(user, password)``.

    There is no default password: without ``password`` one is generated and returned so the
    caller (the CLI) can print it once.
    """
    if not USERNAME.match(username):
        raise AuthError(
            f"username {username!r}: 1-100 letters, digits, '_', '.', '@' or '-', starting with a letter or digit"
        )
    if (
        session.scalar(select(User.pk).where(func.lower(User.username) == username.lower()))
        is not None
    ):
        raise Taken(f"user {username!r} already exists")
    password = password if password is not None else generate_password()
    check_password_strength(password)
    user = User(
        username=username,
        display_name=display_name or username,
        email=email,
        password_hash=hash_password(password),
        is_admin=is_admin,
    )
    session.add(user)
    session.flush()
    return user, password


def get_user(session: Session, username: str) -> User:
    user = session.scalar(select(User).where(User.username == username))
    if user is None:
        raise Missing(f"no user {username!r}")
    return user


def set_password(
    session: Session, user: User, password: str, *, keep_api_tokens: bool = False
) -> None:
    """A new password ends every browser session of the account and, unless
    ``keep_api_tokens``, revokes its API tokens: a reset after a suspected compromise must
    not leave a stolen token working."""
    check_password_strength(password)
    user.password_hash = hash_password(password)
    session.execute(update(WebSession).where(WebSession.user_pk == user.pk).values(revoked=True))
    if not keep_api_tokens:
        session.execute(
            update(ApiToken)
            .where(ApiToken.user_pk == user.pk, ApiToken.revoked_at.is_(None))
            .values(revoked_at=utcnow())
        )


def update_user(
    session: Session,
    user: User,
    *,
    is_active: bool | None = None,
    is_admin: bool | None = None,
    password: str | None = None,
    keep_api_tokens: bool = False,
) -> list[str]:
    """An admin's change to an account; returns what changed (``is_active``, ``is_admin``,
    ``password``), values equal to the current ones left out."""
    changed = []
    if is_active is not None and is_active != user.is_active:
        user.is_active = is_active
        changed.append("is_active")
    if is_admin is not None and is_admin != user.is_admin:
        user.is_admin = is_admin
        changed.append("is_admin")
    if password is not None:
        set_password(session, user, password, keep_api_tokens=keep_api_tokens)
        changed.append("password")
    return changed


def change_own_password(
    db: Database,
    gate: PasswordGate,
    user_pk: int,
    current: str,
    new: str,
    *,
    revoke_api_tokens: bool = True,
) -> User:
    """The user changes their own password, proving the current one (checked outside the write
    transaction, in a slot of the login's concurrency cap). ``NotAllowed`` when it is wrong,
    ``Gone`` when the password changed meanwhile; then nothing changes."""
    with db.reading() as s:
        stored = must_get(s, User, user_pk).password_hash
    with gate.slot():
        right = verify_password(stored, current)
    if not right:
        raise NotAllowed("current_password: wrong password; nothing was changed")
    with db.writing() as s:
        user = must_get(s, User, user_pk)
        if user.password_hash != stored:
            raise Gone("the password was changed meanwhile; log in again")
        set_password(s, user, new, keep_api_tokens=not revoke_api_tokens)
        audit.record(
            s,
            user,
            "user.password_changed",
            f"user:{user.username}",
            {"api_tokens_revoked": revoke_api_tokens},
        )
        return user


# -- login and rate limiting -----------------------------------------------------------------


@dataclass
class LoginLimit:
    """Failed logins allowed per window, per username (whether or not the account exists) and
    per source address; ``concurrent``: password checks running at once in one process."""

    attempts: int = 10
    window_s: int = 60
    per_address: int = 30
    concurrent: int = 4


class PasswordGate:
    """Bounds the argon2 checks running at once in this process (each costs ~0.2 s of CPU and
    64 MiB): a login that finds every slot taken is refused with 429 at once, not queued."""

    def __init__(self, slots: int) -> None:
        self._slots = threading.BoundedSemaphore(max(1, slots))

    @contextmanager
    def slot(self) -> Iterator[None]:
        if not self._slots.acquire(blocking=False):
            raise RateLimited(
                "the server is busy checking other logins; try again in a second", retry_after=1
            )
        try:
            yield
        finally:
            self._slots.release()


def _user_key(username: str) -> str:
    return sha256(f"user|{username.lower()}")


def _address_key(ip: str) -> str:
    return sha256(f"addr|{ip}")


def login(
    db: Database, username: str, password: str, ip: str, limit: LoginLimit, gate: PasswordGate
) -> User:
    """The user for valid credentials, or ``BadCredentials`` / ``RateLimited``.

    Atomic across threads, workers and hosts: an attempt is first *recorded* (one row per
    username and one per address, committed), then the rows in the window are counted, and
    only then is the password checked. Of any number of concurrent attempts, the last one to
    commit sees all the others' rows, so at most ``attempts`` (``per_address``) are ever
    evaluated in a window. A refused attempt's rows are removed (it cost no hashing); a
    failed one's stay as the count; success clears the username's count.
    """
    now = utcnow()
    keys = (_user_key(username), _address_key(ip))
    with db.writing() as s:
        rows = [LoginAttempt(key=k, at=now) for k in keys]
        s.add_all(rows)
        s.flush()
        mine = [r.pk for r in rows]
        s.execute(delete(LoginAttempt).where(LoginAttempt.at < now - timedelta(days=1)))
    try:
        with db.reading() as s:
            since = now - timedelta(seconds=limit.window_s)
            per_user, per_address = (
                s.execute(
                    select(func.count())
                    .select_from(LoginAttempt)
                    .where(LoginAttempt.key == k, LoginAttempt.at > since)
                ).scalar_one()  # a count is one row (session.scalar is typed optional)
                for k in keys
            )
        if per_user > limit.attempts:
            raise RateLimited(
                f"too many failed logins for {username!r}; wait {limit.window_s} s",
                retry_after=limit.window_s,
            )
        if per_address > limit.per_address:
            raise RateLimited(
                f"too many failed logins from this address; wait {limit.window_s} s",
                retry_after=limit.window_s,
            )
        with gate.slot():  # the hashing runs outside any transaction (SQLite: no write lock held)
            with db.reading() as s:
                user = s.scalar(select(User).where(User.username == username))
                if user is not None:
                    s.expunge(user)  # keep its loaded values past the read's rollback
            # the dummy hash: the same time whether or not the user exists
            ok = verify_password(user.password_hash if user else _DUMMY_HASH, password)
            if not (ok and user is not None and user.is_active):
                raise BadCredentials("wrong username or password")
            assert user.password_hash is not None  # verify_password accepted it
            rehash = (
                hash_password(password) if _hasher.check_needs_rehash(user.password_hash) else None
            )
        with db.writing() as s:
            s.execute(
                delete(LoginAttempt).where(
                    (LoginAttempt.key == keys[0]) | (LoginAttempt.pk == mine[1])
                )
            )
            if rehash:
                s.execute(update(User).where(User.pk == user.pk).values(password_hash=rehash))
        return user
    except BadCredentials:
        raise  # the attempt's rows stay: they are the failure count
    except BaseException:
        with db.writing() as s:  # refused before any password check: it does not count
            s.execute(delete(LoginAttempt).where(LoginAttempt.pk.in_(mine)))
        raise


_DUMMY_HASH = _hasher.hash("not-a-real-password-" + secrets.token_hex(8))


# -- where to go after login ----------------------------------------------------------------------


def safe_redirect_path(target: str | None) -> str:
    r"""``target`` if it is a path on this site, else ``/`` (no open redirect after login).

    Browsers read ``\`` as ``/`` and drop tabs and newlines from URLs, so ``/\evil.example``
    or ``/<TAB>/evil.example`` would leave the site although neither starts with ``//``. Only
    a single ``/`` followed by printable ASCII other than ``\`` passes; ``static/app.js``
    applies the same rule before it navigates.
    """
    if not target or not target.startswith("/") or target[1:2] == "/":
        return "/"
    if any(not 0x21 <= ord(ch) <= 0x7E or ch == "\\" for ch in target):
        return "/"
    return target


# -- browser sessions -----------------------------------------------------------------------


def create_web_session(
    session: Session, user: User, *, ttl: timedelta, ip: str | None
) -> tuple[str, WebSession]:
    """A new session; returns the cookie value (only its hash is stored) and the row."""
    token = secrets.token_urlsafe(32)
    row = WebSession(
        token_hash=sha256(token),
        user_pk=user.pk,
        csrf_token=secrets.token_urlsafe(32),
        expires_at=utcnow() + ttl,
        ip=ip,
    )
    session.add(row)
    session.flush()
    return token, row


def end_web_session(session: Session, session_pk: int) -> None:
    row = session.get(WebSession, session_pk)
    if row is not None:
        row.revoked = True


# -- API tokens -----------------------------------------------------------------------------

TOKEN_PREFIX = "plt_"


def create_api_token(
    session: Session, user: User, *, name: str = "", ttl: timedelta | None = None
) -> tuple[str, ApiToken]:
    """A new bearer token; the clear value is returned once and never stored."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = ApiToken(
        token_hash=sha256(token),
        prefix=token[:12],
        user_pk=user.pk,
        name=name,
        expires_at=(utcnow() + ttl) if ttl else None,
    )
    session.add(row)
    session.flush()
    return token, row


def revoke_api_token(
    session: Session, user: User, token_pk: int, *, as_admin: bool = False
) -> ApiToken:
    row = session.get(ApiToken, token_pk)
    if row is None or (row.user_pk != user.pk and not as_admin):
        raise Missing(f"no API token {token_pk} of yours")
    if row.revoked_at is None:
        row.revoked_at = utcnow()
    return row


# -- memberships and invites ------------------------------------------------------------------


def check_role(role: str) -> str:
    if role not in PROJECT_ROLES:
        raise AuthError(f"role {role!r}: choose one of {', '.join(PROJECT_ROLES)}")
    return role


def set_membership(session: Session, project: Project, user: User, role: str) -> Membership:
    check_role(role)
    row = session.scalar(
        select(Membership).where(Membership.project_pk == project.pk, Membership.user_pk == user.pk)
    )
    if row is None:
        row = Membership(project_pk=project.pk, user_pk=user.pk, role=role)
        session.add(row)
    else:
        row.role = role
    session.flush()
    return row


def remove_membership(session: Session, project: Project, user: User) -> None:
    session.execute(
        delete(Membership).where(Membership.project_pk == project.pk, Membership.user_pk == user.pk)
    )


def create_invite(
    session: Session,
    project: Project | None,
    *,
    role: str = "rater",
    created_by: User | None,
    ttl: timedelta = timedelta(days=7),
    email: str | None = None,
) -> tuple[str, Invite]:
    check_role(role)
    token = secrets.token_urlsafe(32)
    row = Invite(
        token_hash=sha256(token),
        project_pk=project.pk if project else None,
        role=role,
        email=email,
        created_by=created_by.pk if created_by else None,
        expires_at=utcnow() + ttl,
    )
    session.add(row)
    session.flush()
    return token, row


def accept_invite(session: Session, token: str, username: str, password: str) -> User:
    """Redeem an invite: creates the account and the project membership, once, before expiry.

    The invite is claimed by one conditional ``UPDATE ... WHERE used_at IS NULL``: of any
    number of concurrent redemptions (any worker, any host) exactly one changes the row; the
    others change nothing and get 410. A failure later (the username is taken) rolls the
    claim back with the rest of the transaction.
    """
    now = utcnow()
    claimed = session.execute(
        update(Invite)
        .where(
            Invite.token_hash == sha256(token), Invite.used_at.is_(None), Invite.expires_at > now
        )
        .values(used_at=now)
        .returning(Invite.pk, Invite.project_pk, Invite.role, Invite.email)
    ).first()
    if claimed is None:
        row = session.scalar(select(Invite).where(Invite.token_hash == sha256(token)))
        if row is None:
            raise Missing("unknown invite link; ask a project admin for a new one")
        if row.used_at is not None:
            raise Gone("this invite link was already used; ask a project admin for a new one")
        raise Gone("this invite link has expired; ask a project admin for a new one")
    user, _ = create_user(session, username, password=password, email=claimed.email)
    if claimed.project_pk is not None:
        set_membership(session, must_get(session, Project, claimed.project_pk), user, claimed.role)
    session.execute(update(Invite).where(Invite.pk == claimed.pk).values(used_by=user.pk))
    return user


# -- domain credentials -------------------------------------------------------------------------


def claim_credential(session: Session, user: User, domain: str, evidence: str = "") -> Credential:
    domain = domain.strip().lower()
    if not DOMAIN.match(domain):
        raise AuthError(f"domain {domain!r}: lowercase letters, digits, '_', '.', '-'")
    row = session.scalar(
        select(Credential).where(Credential.user_pk == user.pk, Credential.domain == domain)
    )
    if row is None:
        row = Credential(user_pk=user.pk, domain=domain, evidence=evidence)
        session.add(row)
    else:
        row.evidence = evidence or row.evidence
    session.flush()
    return row


def verify_credential(
    session: Session, user: User, domain: str, verifier: User, verified: bool = True
) -> Credential:
    row = session.scalar(
        select(Credential).where(Credential.user_pk == user.pk, Credential.domain == domain)
    )
    if row is None:
        raise Missing(f"user {user.username!r} has not claimed the domain {domain!r}")
    row.verified = verified
    row.verified_by = verifier.pk if verified else None
    row.verified_at = utcnow() if verified else None
    return row


def verified_domains(session: Session, user_pk: int) -> list[str]:
    return sorted(
        session.scalars(
            select(Credential.domain).where(
                Credential.user_pk == user_pk, Credential.verified.is_(True)
            )
        )
    )


# -- password reset links -----------------------------------------------------------------------


def create_reset_link(
    session: Session, user: User, *, created_by: User | None, ttl: timedelta = timedelta(hours=24)
) -> str:
    """A one-time reset token for ``user`` (an admin hands the link over; no e-mail needed).
    Issuing one revokes the user's earlier unused links (they expire now): only the newest
    link handed over can set a password."""
    from ..store.server_models import PasswordReset

    now = utcnow()
    session.execute(
        update(PasswordReset)
        .where(
            PasswordReset.user_pk == user.pk,
            PasswordReset.used_at.is_(None),
            PasswordReset.expires_at > now,
        )
        .values(expires_at=now)
    )
    token = secrets.token_urlsafe(32)
    session.add(
        PasswordReset(
            token_hash=sha256(token),
            user_pk=user.pk,
            created_by=created_by.pk if created_by else None,
            expires_at=utcnow() + ttl,
        )
    )
    session.flush()
    return token


def reset_link_state(session: Session, token: str) -> str:
    """``usable``, ``used``, ``expired`` (or replaced by a newer link) or ``unknown``: what the
    reset page shows before anyone types a password (nothing is claimed)."""
    from ..store.server_models import PasswordReset

    row = session.scalar(select(PasswordReset).where(PasswordReset.token_hash == sha256(token)))
    if row is None:
        return "unknown"
    if row.used_at is not None:
        return "used"
    expires = row.expires_at if row.expires_at.tzinfo else row.expires_at.replace(tzinfo=UTC)
    return "usable" if expires > utcnow() else "expired"


def claim_reset_link(session: Session, token: str, password: str) -> User:
    """Set a new password with a reset link, once, before expiry. Claimed like an invite: of any
    number of concurrent claims one conditional UPDATE wins, the others get 410; the new password
    goes through :func:`set_password` (sessions end, API tokens revoked)."""
    from ..store.server_models import PasswordReset

    check_password_strength(
        password
    )  # before the claim: a too-short password does not use the link up
    now = utcnow()
    claimed = session.execute(
        update(PasswordReset)
        .where(
            PasswordReset.token_hash == sha256(token),
            PasswordReset.used_at.is_(None),
            PasswordReset.expires_at > now,
        )
        .values(used_at=now)
        .returning(PasswordReset.user_pk)
    ).first()
    if claimed is None:
        row = session.scalar(select(PasswordReset).where(PasswordReset.token_hash == sha256(token)))
        if row is None:
            raise Missing("unknown reset link; ask an admin for a new one")
        why = (
            "was already used"
            if row.used_at is not None
            else "has expired or was replaced by a newer link"
        )
        raise Gone(f"this reset link {why}; ask an admin for a new one")
    user = must_get(session, User, claimed.user_pk)
    set_password(session, user, password)
    return user
