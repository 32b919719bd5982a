"""The audit log: who changed what, and when.

:func:`record` writes one ``audit_events`` row in the caller's transaction (so the event and the
change commit or roll back together) and, once that transaction commits, emits it on the
``preflab.audit`` logger. Admins read the log with ``GET /api/v1/audit`` or
``preflab audit list``. Secrets never reach it: a detail whose key names a password, token
or secret is refused (:func:`record` raises), so a careless caller fails in tests, not in the log.

Actors: a username (with its account's id), ``cli:<os user>`` for the command line,
``system`` for the server's own decisions (a suspension for gold accuracy drift) and
``anonymous`` for a failed login.
"""

from __future__ import annotations

import getpass
import logging
from datetime import UTC, datetime
from typing import Any, Protocol

from sqlalchemy import Engine, event, inspect, select
from sqlalchemy.orm import Session

from .store.db import transaction
from .store.models import Project, utcnow
from .store.server_models import AuditEvent, RaterStatus, User

logger = logging.getLogger("preflab.audit")

SYSTEM = "system"
ANONYMOUS = "anonymous"

#: Every action the log records (``docs/cli.md`` lists them; a new one is added here).
ACTIONS: dict[str, str] = {
    "auth.login": "a user logged in (details: address, via)",
    "auth.login_failed": "a login was refused: wrong username or password (details: username, address)",
    "user.created": "an account was created",
    "user.deactivated": "an admin deactivated an account",
    "user.reactivated": "an admin reactivated an account",
    "user.admin_granted": "an account became a site admin",
    "user.admin_revoked": "an account stopped being a site admin",
    "user.password_reset": "an admin set a user's password (details: api_tokens_revoked)",
    "user.password_changed": "a user changed their own password",
    "user.reset_link_created": "an admin issued a password reset link",
    "user.reset_link_claimed": "a user set a new password with a reset link",
    "member.role_set": "a user's role in a project was set (details: role, before)",
    "member.removed": "a user was removed from a project (details: before)",
    "invite.created": "an invite to a project was issued (details: role, email)",
    "invite.accepted": "an invite was redeemed, creating the account",
    "rater.suspended": "a rater was suspended (details: reason)",
    "rater.reinstated": "a rater was reinstated (details: note)",
    "project.created": "a project was created",
    "project.settings_changed": "a project's settings changed (details: version, changed, note)",
    "items.imported": "items or judgments were imported (details: counts, files)",
    "project.exported": "a project was exported (details: format, out, counts; job_id, force_reason from an export job)",
    "export_job.created": "an export job was started from the web app (details: job_id, format, force, force_reason)",
    "export_job.cancelled": "an export job was cancelled (details: job_id, was)",
    "item.adjudicated": "a reviewer recorded an item's final label (details: judgment_id)",
    "item.reference_adjudicated": "a reviewer settled a reference two experts disagreed on (details: reference, replaced, note)",
    "demonstration.accepted": "a reviewer accepted a demonstration",
    "demonstration.rejected": "a reviewer rejected a demonstration (details: note)",
    "judgment.telemetry_kept": "a reviewer kept a label its telemetry flagged (details: flags, note)",
    "judgment.telemetry_excluded": "a reviewer excluded a label its telemetry flagged (details: flags, note)",
}

#: A detail whose key ends so is refused: the log is read by admins and shipped to log
#: collectors (``api_tokens_revoked`` is a fact, ``password`` or ``reset_token`` a secret).
SECRET_ENDINGS = ("password", "token", "secret")


class Who(Protocol):
    user_pk: int
    username: str


Actor = Who | User | str


def cli_actor() -> str:
    """The actor of a command-line change: ``cli:<os user>``."""
    return f"cli:{getpass.getuser()}"


def _actor_columns(actor: Actor) -> tuple[int | None, str]:
    if isinstance(actor, str):
        return None, actor
    if isinstance(actor, User):
        return actor.pk, actor.username
    return actor.user_pk, actor.username


def _check_details(details: dict[str, Any]) -> None:
    for key in details:
        if key.lower().endswith(SECRET_ENDINGS):
            raise ValueError(f"audit details: {key!r} looks like a secret; never log it")


def record(
    session: Session,
    actor: Actor,
    action: str,
    target: str = "",
    details: dict[str, Any] | None = None,
) -> AuditEvent:
    """Write one audit event in ``session``'s transaction; it is logged when that commits."""
    if action not in ACTIONS:
        raise ValueError(f"unknown audit action {action!r}: add it to preflab.audit.ACTIONS")
    details = dict(details or {})
    _check_details(details)
    actor_pk, actor_name = _actor_columns(actor)
    row = AuditEvent(
        at=utcnow(),
        actor_pk=actor_pk,
        actor=actor_name[:200],
        action=action,
        target=target[:300],
        details=details,
    )
    session.add(row)
    session.info.setdefault("audit_pending", []).append(row)
    return row


def record_in(
    engine: Engine, actor: Actor, action: str, target: str = "", details: dict | None = None
) -> None:
    """:func:`record` in a transaction of its own (the CLI, after a change it made elsewhere)."""
    with transaction(engine) as session:
        record(session, actor, action, target, details)


def as_dict(row: AuditEvent) -> dict[str, Any]:
    return {
        "id": row.pk,
        "at": row.at.isoformat(),
        "actor": row.actor,
        "actor_id": row.actor_pk,
        "action": row.action,
        "target": row.target,
        "details": row.details or {},
    }


@event.listens_for(Session, "after_commit")
def _emit_committed(session: Session) -> None:
    for row in session.info.pop("audit_pending", []):
        logger.info(
            "%s %s by %s",
            row.action,
            row.target,
            row.actor,
            extra={"audit": as_dict(row)},
        )


@event.listens_for(Session, "after_rollback")
def _forget_rolled_back(session: Session) -> None:
    session.info.pop("audit_pending", None)


# -- suspensions: decided by the server's judging rules ---------------------------------------------


@event.listens_for(Session, "before_flush")
def _record_suspensions(session: Session, flush_context: object, instances: object) -> None:
    """A rater status that becomes ``suspended`` in this flush is one ``rater.suspended`` event
    by ``system``. The judging rules decide suspensions (:func:`preflab.server.services.gold_scoring.suspend`);
    watching the row here records every path that writes it through the ORM."""
    for obj in list(session.dirty) + list(session.new):
        if not isinstance(obj, RaterStatus) or obj.status != "suspended":
            continue
        history = inspect(obj).attrs.status.history
        if "suspended" not in (history.added or ()) or "suspended" in (history.deleted or ()):
            continue
        with session.no_autoflush:
            user = session.get(User, obj.user_pk)
            project = session.get(Project, obj.project_pk)
        record(
            session,
            SYSTEM,
            "rater.suspended",
            target(
                project.name if project else obj.project_pk, user=user.username if user else None
            ),
            {"reason": obj.reason},
        )


def target(project: str | int | None = None, **parts: object) -> str:
    """``project:p/user:alice`` style targets: the project first, then the named parts."""
    bits = [f"project:{project}"] if project is not None else []
    bits += [f"{k}:{v}" for k, v in parts.items() if v is not None]
    return "/".join(bits)


# -- reading ----------------------------------------------------------------------------------------


def events(
    session: Session,
    *,
    action: str | None = None,
    actor: str | None = None,
    since: datetime | None = None,
    before: int | None = None,
    limit: int = 100,
) -> list[dict[str, Any]]:
    """Events newest first, filtered by action, actor name and time; ``before`` (an event id)
    pages back through older ones."""
    stmt = select(AuditEvent)
    if since is not None:
        since = as_utc(since)
    if action:
        stmt = stmt.where(AuditEvent.action == action)
    if actor:
        stmt = stmt.where(AuditEvent.actor == actor)
    if since is not None:
        stmt = stmt.where(AuditEvent.at >= since)
    if before is not None:
        stmt = stmt.where(AuditEvent.pk < before)
    rows = session.scalars(stmt.order_by(AuditEvent.pk.desc()).limit(limit))
    return [as_dict(r) for r in rows]


# -- details shared by the CLI and the server -------------------------------------------------------

IMPORT_COUNTS = ("items_added", "items_existing", "judgments_added", "judgments_existing")


def import_details(report: Any) -> dict[str, Any]:
    """The counts of an import (an ``ImportReport`` or the server's summary of one)."""
    data = report if isinstance(report, dict) else vars(report)
    out = {k: data[k] for k in IMPORT_COUNTS if k in data}
    if "pooled" in data:
        out["pooled"] = data["pooled"]
    return out


def export_details(fmt: str, out: Any, manifest: dict[str, Any]) -> dict[str, Any]:
    """The format, where it went and how many rows (the manifest holds the rest)."""
    counts = manifest.get("counts") or {}
    return {"format": fmt, "out": str(out), "rows_out": counts.get("rows_out")}


def as_utc(moment: datetime) -> datetime:
    """A time without a zone is UTC (as every stored time is)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def parse_since(text: str) -> datetime:
    """``2026-11-30``, ``2026-11-30T18:00`` or with an offset; without one, UTC."""
    try:
        return as_utc(datetime.fromisoformat(text))
    except ValueError:
        raise ValueError(
            f"since: {text!r} is not an ISO 8601 date or time, e.g. 2026-11-30 or 2026-11-30T18:00"
        ) from None
