"""Tables of the collection server (``preflab serve``): accounts, memberships, sessions,
API tokens, invites, login attempts, domain credentials, project settings history, the
assignment engine's pool and leases, rater status, gold outcomes, review requests and the
web app's export jobs.

They share :class:`~preflab.store.models.Base`, so ``Base.metadata`` holds them too.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    event,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from . import triggers
from .models import PK, Base, JSONType, utcnow

#: Roles within a project. Site administrators (``User.is_admin``) may act as any of them.
PROJECT_ROLES = ("admin", "reviewer", "rater")


class User(Base):
    __tablename__ = "users"

    pk: Mapped[int] = mapped_column(PK, primary_key=True)
    username: Mapped[str] = mapped_column(String(100), unique=True)
    display_name: Mapped[str] = mapped_column(String(200), default="")
    email: Mapped[str | None] = mapped_column(String(320))
    #: argon2id hash; ``None`` until a password is set (invite not yet accepted).
    password_hash: Mapped[str | None] = mapped_column(String(200))
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    is_active: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Membership(Base):
    __tablename__ = "memberships"
    __table_args__ = (UniqueConstraint("project_pk", "user_pk"),)

    pk: Mapped[int] = mapped_column(PK, primary_key=True)
    project_pk: Mapped[int] = mapped_column(ForeignKey("projects.pk", ondelete="CASCADE"))
    user_pk: Mapped[int] = mapped_column(ForeignKey("users.pk", ondelete="CASCADE"), index=True)
    role: Mapped[str] = mapped_column(String(20))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class WebSession(Base):
    """A browser session: the cookie carries a random token, the row its SHA-256."""

    __tablename__ = "web_sessions"

    pk: Mapped[int] = mapped_column(PK, primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    user_pk: Mapped[int] = mapped_column(ForeignKey("users.pk", ondelete="CASCADE"), index=True)
    csrf_token: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)
    ip: Mapped[str | None] = mapped_column(String(64))


class ApiToken(Base):
    """A bearer token for scripts and the Python client; only its SHA-256 is stored."""

    __tablename__ = "api_tokens"

    pk: Mapped[int] = mapped_column(PK, primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    user_pk: Mapped[int] = mapped_column(ForeignKey("users.pk", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200), default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Invite(Base):
    """An invite link: a random token (only its SHA-256 stored) that expires."""

    __tablename__ = "invites"

    pk: Mapped[int] = mapped_column(PK, primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    project_pk: Mapped[int | None] = mapped_column(ForeignKey("projects.pk", ondelete="CASCADE"))
    role: Mapped[str] = mapped_column(String(20), default="rater")
    email: Mapped[str | None] = mapped_column(String(320))
    created_by: Mapped[int | None] = mapped_column(ForeignKey("users.pk", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    used_by: Mapped[int | None] = mapped_column(ForeignKey("users.pk", ondelete="SET NULL"))


class LoginAttempt(Base):
    """Failed logins, per account and client address: the rate limiter reads them."""

    __tablename__ = "login_attempts"
    __table_args__ = (Index("ix_login_attempts_key_at", "key", "at"),)

    pk: Mapped[int] = mapped_column(PK, primary_key=True)
    key: Mapped[str] = mapped_column(String(64))
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Credential(Base):
    """A rater's claimed domain expertise (``medicine``, ``law`` ...); counts once verified."""

    __tablename__ = "credentials"
    __table_args__ = (UniqueConstraint("user_pk", "domain"),)

    pk: Mapped[int] = mapped_column(PK, primary_key=True)
    user_pk: Mapped[int] = mapped_column(ForeignKey("users.pk", ondelete="CASCADE"))
    domain: Mapped[str] = mapped_column(String(100))
    evidence: Mapped[str] = mapped_column(Text, default="")
    verified: Mapped[bool] = mapped_column(Boolean, default=False)
    verified_by: Mapped[int | None] = mapped_column(ForeignKey("users.pk", ondelete="SET NULL"))
    verified_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class SettingsVersion(Base):
    """Every change of a project's settings: who, when, before and after."""

    __tablename__ = "project_settings_versions"
    __table_args__ = (UniqueConstraint("project_pk", "version"),)

    pk: Mapped[int] = mapped_column(PK, primary_key=True)
    project_pk: Mapped[int] = mapped_column(ForeignKey("projects.pk", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(Integer)
    changed_by: Mapped[int | None] = mapped_column(ForeignKey("users.pk", ondelete="SET NULL"))
    changed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    before: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    after: Mapped[dict[str, Any]] = mapped_column(JSONType)
    note: Mapped[str] = mapped_column(Text, default="")


class PoolEntry(Base):
    """An item as the assignment engine sees it: its role, label target and filled count.

    ``role``: ``production``, ``gold`` (production honeypot) or ``qualification``.
    The row is what concurrent assigners lock (``FOR UPDATE SKIP LOCKED`` on PostgreSQL).
    """

    __tablename__ = "task_pool"
    __table_args__ = (
        UniqueConstraint("item_pk"),
        Index("ix_task_pool_pick", "project_pk", "role", "filled"),
        # The assigner's candidate order (fuller first, then the pseudo-random order_key), over
        # open items only: the pick walks it and stops at the first eligible row instead of
        # sorting the whole pool (3.3 ms -> < 0.1 ms per pick at 2,500 items, and it stays flat
        # as items complete). Queries must spell the condition ``filled < target`` exactly.
        Index(
            "ix_task_pool_open",
            "project_pk",
            "role",
            "filled",
            "order_key",
            "pk",
            sqlite_where=text("filled < target"),
            postgresql_where=text("filled < target"),
        ),
    )

    pk: Mapped[int] = mapped_column(PK, primary_key=True)
    project_pk: Mapped[int] = mapped_column(ForeignKey("projects.pk", ondelete="CASCADE"))
    item_pk: Mapped[int] = mapped_column(ForeignKey("items.pk", ondelete="CASCADE"))
    role: Mapped[str] = mapped_column(String(20), default="production")
    target: Mapped[int] = mapped_column(Integer, default=1)
    filled: Mapped[int] = mapped_column(Integer, default=0)
    #: A stable pseudo-random order (from the item hash) so raters spread over the pool.
    order_key: Mapped[int] = mapped_column(Integer, default=0)
    #: Extra raters granted because the labels disagreed (``Policy.adaptive_overlap``; 0019):
    #: ``target`` is the item's k plus these. Raised only by one conditional ``UPDATE`` under
    #: the pool row's lock (``server.flow.extra``), never past the policy's ``max_extra``.
    extra: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    #: The adaptive rule's last verdict on the full item: NULL (never judged), ``agreed``,
    #: ``waiting`` (an extra label is due: held from adjudication) or ``split`` (the budget is
    #: spent and the labels still disagree: the usual adjudication rule applies).
    extra_state: Mapped[str | None] = mapped_column(String(8))


class PoolDomain(Base):
    """The domains an item requires (one row each), for portable SQL domain matching."""

    __tablename__ = "task_pool_domains"
    __table_args__ = (UniqueConstraint("item_pk", "domain"),)

    pk: Mapped[int] = mapped_column(PK, primary_key=True)
    item_pk: Mapped[int] = mapped_column(ForeignKey("items.pk", ondelete="CASCADE"))
    domain: Mapped[str] = mapped_column(String(100))


class Assignment(Base):
    """A lease of one item to one rater. A rater is never handed the same item twice.

    ``status``: ``active`` (live until ``expires_at``), ``submitted``, ``released``.
    An active lease past ``expires_at`` no longer counts and its item returns to the pool.
    """

    __tablename__ = "assignments"
    __table_args__ = (
        UniqueConstraint("item_pk", "user_pk"),
        Index("ix_assignments_item_status", "item_pk", "status"),
        Index("ix_assignments_user_status", "project_pk", "user_pk", "status"),
    )

    pk: Mapped[int] = mapped_column(PK, primary_key=True)
    lease_id: Mapped[str] = mapped_column(String(64), unique=True)
    project_pk: Mapped[int] = mapped_column(ForeignKey("projects.pk", ondelete="CASCADE"))
    item_pk: Mapped[int] = mapped_column(ForeignKey("items.pk", ondelete="CASCADE"))
    user_pk: Mapped[int] = mapped_column(ForeignKey("users.pk", ondelete="CASCADE"))
    role: Mapped[str] = mapped_column(String(20))
    status: Mapped[str] = mapped_column(String(12), default="active")
    shown_order: Mapped[list[Any]] = mapped_column(JSONType)
    settings_version: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    judgment_pk: Mapped[int | None] = mapped_column(ForeignKey("judgments.pk", ondelete="SET NULL"))
    #: the suggestions the label page served with this lease (``AssistRecord`` dicts; 0018), else
    #: NULL: a label submitted on it is ``ai_assisted`` and records them (``docs/judges.md``)
    suggestion: Mapped[list[Any] | None] = mapped_column(JSONType)


class RaterStatus(Base):
    """A rater's standing in a project: ``qualifying``, ``qualified``, ``failed``, ``suspended``."""

    __tablename__ = "rater_status"
    __table_args__ = (UniqueConstraint("project_pk", "user_pk"),)

    pk: Mapped[int] = mapped_column(PK, primary_key=True)
    project_pk: Mapped[int] = mapped_column(ForeignKey("projects.pk", ondelete="CASCADE"))
    user_pk: Mapped[int] = mapped_column(ForeignKey("users.pk", ondelete="CASCADE"))
    status: Mapped[str] = mapped_column(String(12), default="qualifying")
    reason: Mapped[str] = mapped_column(Text, default="")
    evidence: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class GoldOutcome(Base):
    """Whether a judgment of a gold item matched the expected answer (kept as evidence)."""

    __tablename__ = "gold_outcomes"
    __table_args__ = (Index("ix_gold_outcomes_rater", "project_pk", "user_pk", "phase"),)

    pk: Mapped[int] = mapped_column(PK, primary_key=True)
    project_pk: Mapped[int] = mapped_column(ForeignKey("projects.pk", ondelete="CASCADE"))
    user_pk: Mapped[int] = mapped_column(ForeignKey("users.pk", ondelete="CASCADE"))
    item_pk: Mapped[int] = mapped_column(ForeignKey("items.pk", ondelete="CASCADE"))
    judgment_pk: Mapped[int] = mapped_column(
        ForeignKey("judgments.pk", ondelete="CASCADE"), unique=True
    )
    phase: Mapped[str] = mapped_column(String(20))
    correct: Mapped[bool] = mapped_column(Boolean)
    score: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


#: ``review_requests.status`` of a reviewer's decision on a label its telemetry flagged
#: (issue 28): ``kept`` (exported, its flags cleared) or ``excluded`` (the label excluded too).
TELEMETRY_KEPT = "kept"
TELEMETRY_EXCLUDED = "excluded"
TELEMETRY_DECISIONS = (TELEMETRY_KEPT, TELEMETRY_EXCLUDED)


class ReviewRequest(Base):
    """A reviewer's action on one judgment, with a note. ``open``: sent back to its rater, until a
    revision resolves it (``resolved``) or the rater withdraws an edit (``withdrawn``). ``kept``
    / ``excluded`` (:data:`TELEMETRY_DECISIONS`): the reviewer decided a label its telemetry
    flagged (``resolved_at``: when)."""

    __tablename__ = "review_requests"

    pk: Mapped[int] = mapped_column(PK, primary_key=True)
    project_pk: Mapped[int] = mapped_column(ForeignKey("projects.pk", ondelete="CASCADE"))
    judgment_pk: Mapped[int] = mapped_column(
        ForeignKey("judgments.pk", ondelete="CASCADE"), index=True
    )
    reviewer_pk: Mapped[int | None] = mapped_column(ForeignKey("users.pk", ondelete="SET NULL"))
    note: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(12), default="open")
    revision_pk: Mapped[int | None] = mapped_column(ForeignKey("judgments.pk", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    resolved_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class ItemSkip(Base):
    """A rater skipped or flagged an item, with a reason (``SKIP_REASONS``); the lease is released
    and the item goes to another rater (a rater never gets the same item twice)."""

    __tablename__ = "item_skips"
    __table_args__ = (Index("ix_item_skips_project_item", "project_pk", "item_pk"),)

    pk: Mapped[int] = mapped_column(PK, primary_key=True)
    project_pk: Mapped[int] = mapped_column(ForeignKey("projects.pk", ondelete="CASCADE"))
    item_pk: Mapped[int] = mapped_column(ForeignKey("items.pk", ondelete="CASCADE"))
    user_pk: Mapped[int] = mapped_column(ForeignKey("users.pk", ondelete="CASCADE"))
    reason: Mapped[str] = mapped_column(String(40))
    note: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


#: why a rater skips an item; the flags (``flag: True``) ask a reviewer or admin to look at it
SKIP_REASONS: dict[str, dict[str, Any]] = {
    "unclear": {"label": "The task or the answers are unclear to me", "flag": False},
    "expertise": {"label": "I lack the expertise to judge this", "flag": False},
    "broken": {"label": "Broken item (answers missing, garbled or identical)", "flag": True},
    "harmful": {"label": "Harmful or unsafe content", "flag": True},
    "other": {"label": "Other (say why in the note)", "flag": False},
}


__all__ = [
    "PROJECT_ROLES",
    "SKIP_REASONS",
    "ItemSkip",
    "ApiToken",
    "Assignment",
    "EXPORT_JOB_STATES",
    "ExportJob",
    "Credential",
    "GoldOutcome",
    "Invite",
    "LoginAttempt",
    "Membership",
    "PoolDomain",
    "PoolEntry",
    "RaterStatus",
    "ReviewRequest",
    "SettingsVersion",
    "User",
    "WebSession",
]


class PasswordReset(Base):
    """A one-time password reset link an admin issues (no e-mail needed: the admin hands it over).
    Only the token's SHA-256 is stored; it is claimed once, before it expires, by a conditional
    ``UPDATE ... WHERE used_at IS NULL`` like an invite."""

    __tablename__ = "password_resets"

    pk: Mapped[int] = mapped_column(PK, primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    user_pk: Mapped[int] = mapped_column(ForeignKey("users.pk", ondelete="CASCADE"))
    created_by: Mapped[int | None] = mapped_column(ForeignKey("users.pk", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class AuditEvent(Base):
    """One state change that matters, with who and when (:mod:`preflab.audit`): logins and failed
    logins, role changes, suspensions, imports, exports, adjudications, settings changes.
    ``actor`` is a username, ``cli:<os user>``, ``system`` or ``anonymous``; ``actor_pk`` the
    account when there is one (kept as a name when the account is deleted)."""

    __tablename__ = "audit_events"
    __table_args__ = (Index("ix_audit_events_action_at", "action", "at"),)

    pk: Mapped[int] = mapped_column(PK, primary_key=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)
    actor_pk: Mapped[int | None] = mapped_column(ForeignKey("users.pk", ondelete="SET NULL"))
    actor: Mapped[str] = mapped_column(String(200))
    action: Mapped[str] = mapped_column(String(60))
    target: Mapped[str] = mapped_column(String(300), default="")
    details: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)


#: An export job's states: ``queued`` (waiting for its process), ``running`` (claimed by one),
#: then one of the final three.
EXPORT_JOB_STATES = ("queued", "running", "done", "failed", "cancelled")


class ExportJob(Base):
    """An export the web app runs in a process of its own (:mod:`preflab.server.export_jobs`).

    ``options`` are the request's export options (those of ``preflab export``, with
    ``force_reason`` when forced). The process claims the row with one ``UPDATE ... WHERE
    status = 'queued'`` (so one process runs it, whatever the number of server workers), writes
    ``phase`` / ``done_units`` / ``total_units`` and ``heartbeat_at`` as it goes, and ends it
    ``done`` (``result``: the export log id, files with SHA-256, the manifest's summary),
    ``failed`` (``error``) or ``cancelled``. A ``running`` row whose process is gone is made
    ``failed`` when a server starts: never silently lost."""

    __tablename__ = "export_jobs"
    __table_args__ = (
        Index("ix_export_jobs_project_pk", "project_pk", "pk"),
        Index("ix_export_jobs_status", "status"),
    )

    pk: Mapped[int] = mapped_column(PK, primary_key=True)
    project_pk: Mapped[int] = mapped_column(ForeignKey("projects.pk", ondelete="CASCADE"))
    requested_by: Mapped[int | None] = mapped_column(ForeignKey("users.pk", ondelete="SET NULL"))
    options: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    status: Mapped[str] = mapped_column(String(20), default="queued")
    phase: Mapped[str] = mapped_column(String(40), default="")
    done_units: Mapped[int] = mapped_column(Integer, default=0)
    total_units: Mapped[int] = mapped_column(Integer, default=0)
    out_dir: Mapped[str] = mapped_column(Text)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    error: Mapped[str | None] = mapped_column(Text)
    worker_pid: Mapped[int | None] = mapped_column(Integer)
    worker_host: Mapped[str | None] = mapped_column(String(255))
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    cancel_requested_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class QualitySnapshot(Base):
    """A project's dashboard statistics, computed by a separate process
    (:mod:`preflab.server.snapshot`), never inside a request: the panels as JSON, when they were
    computed and the labels they cover (count of counting labels, highest judgment pk, highest
    review-request pk: a reviewer's telemetry decision changes the figures without a new label).
    ``running_since`` is the claim of the process computing the next one (one at a time)."""

    __tablename__ = "quality_snapshots"

    pk: Mapped[int] = mapped_column(PK, primary_key=True)
    project_pk: Mapped[int] = mapped_column(
        ForeignKey("projects.pk", ondelete="CASCADE"), unique=True
    )
    panels: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    computed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    labels: Mapped[int] = mapped_column(Integer, default=0)
    max_judgment_pk: Mapped[int] = mapped_column(Integer, default=0)
    max_review_pk: Mapped[int] = mapped_column(Integer, default=0)
    seconds: Mapped[float | None] = mapped_column(Float)
    running_since: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    error: Mapped[str | None] = mapped_column(Text)
    #: the review queues' counts and spot share as of ``computed_at`` (``None``: not yet computed;
    #: their entries are :class:`ReviewQueueEntry` rows)
    review: Mapped[dict[str, Any] | None] = mapped_column(JSONType)


class ReviewQueueEntry(Base):
    """One entry of a project's review queues as the snapshot process computed them
    (:func:`preflab.server.services.review.review_queues`): ``queue`` is ``adjudication``,
    ``spot``, ``held_out``, ``weak_by_rater`` or ``demonstrations``; ``position`` its place in
    that queue's order (the rank for the adjudication queue and the raters, the judgment pk for
    the others: keyset pages read ``position > after``); ``draw`` a spot entry's pseudo-random
    number (a smaller share is a filter); ``done`` an adjudicated queue entry; ``entry`` the
    entry as the API answers it. Replaced whole, with ``quality_snapshots.review``, by each run."""

    __tablename__ = "review_queue_entries"
    __table_args__ = (UniqueConstraint("project_pk", "queue", "position"),)

    pk: Mapped[int] = mapped_column(PK, primary_key=True)
    project_pk: Mapped[int] = mapped_column(ForeignKey("projects.pk", ondelete="CASCADE"))
    queue: Mapped[str] = mapped_column(String(16))
    position: Mapped[int] = mapped_column(PK)
    item_key: Mapped[str | None] = mapped_column(String(200))
    judgment_pk: Mapped[int | None] = mapped_column(PK)
    draw: Mapped[float | None] = mapped_column(Float)
    done: Mapped[bool] = mapped_column(Boolean, default=False)
    #: plain JSON on PostgreSQL too (not JSONB): an entry's keys keep their order (a rater's
    #: weak flags in the order they first occur, a held-out label's evidence)
    entry: Mapped[dict[str, Any]] = mapped_column(JSON(none_as_null=True))


# The label counter and the lease close are kept by triggers (migration 0012); ``create_all``
# creates them too, so a schema made without Alembic counts the same way.
event.listen(Base.metadata, "after_create", triggers.create)
