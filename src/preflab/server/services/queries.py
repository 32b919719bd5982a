"""Reads the REST routes answer with: accounts, tokens, credentials, projects, members, items,
settings history and export files. Each returns plain JSON-ready values in the shape of the
route's response model (:mod:`preflab.server.routes.models`); routes hold no queries."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ...store import repo
from ...store.models import ExportLog, ItemRow, JudgmentRow, Project, Rater
from ...store.repo import NotFound, item_from_row
from ...store.server_models import (
    ApiToken,
    Assignment,
    Credential,
    Membership,
    PoolEntry,
    RaterStatus,
    ReviewRequest,
    User,
)
from ..auth import get_user
from ..database import must_get
from ..flow.submit import current_rubric
from ..permissions import Actor, ProjectRef
from .projects import current_settings, settings_history


def user_out(u: User) -> dict[str, Any]:
    return {
        "username": u.username,
        "display_name": u.display_name,
        "email": u.email,
        "is_admin": u.is_admin,
        "is_active": u.is_active,
        "created_at": u.created_at.isoformat(),
    }


def users(session: Session) -> list[dict[str, Any]]:
    return [user_out(u) for u in session.scalars(select(User).order_by(User.username))]


def project_roles(session: Session, user_pk: int) -> dict[str, str]:
    """project name -> the user's role in it."""
    rows = session.execute(
        select(Project.name, Membership.role)
        .join(Membership, Membership.project_pk == Project.pk)
        .where(Membership.user_pk == user_pk)
    ).all()
    return {name: role for name, role in rows}


def api_tokens(session: Session, user_pk: int) -> list[dict[str, Any]]:
    """The user's API tokens, without the secret (only its prefix)."""
    rows = session.scalars(
        select(ApiToken).where(ApiToken.user_pk == user_pk).order_by(ApiToken.pk)
    )
    return [
        {
            "id": r.pk,
            "prefix": r.prefix,
            "name": r.name,
            "created_at": r.created_at.isoformat(),
            "revoked": r.revoked_at is not None,
        }
        for r in rows
    ]


def credentials(session: Session, user_pk: int) -> list[dict[str, Any]]:
    rows = session.scalars(
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


def project_out(p: Project, role: str | None, *, full: bool) -> dict[str, Any]:
    """A project as its members see it; ``full`` adds the policy (admins and reviewers)."""
    settings = current_settings(p)
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


def sees_policy(is_admin: bool, role: str | None) -> bool:
    return is_admin or role in ("admin", "reviewer")


def visible_projects(session: Session, user_pk: int, *, is_admin: bool) -> list[dict[str, Any]]:
    """The projects the user is a member of (every project for a site admin)."""
    stmt = select(Project, Membership.role).outerjoin(
        Membership, (Membership.project_pk == Project.pk) & (Membership.user_pk == user_pk)
    )
    if not is_admin:
        stmt = stmt.where(Membership.pk.is_not(None))
    rows = session.execute(stmt.order_by(Project.name)).all()
    return [project_out(p, role, full=sees_policy(is_admin, role)) for p, role in rows]


def members(session: Session, project_pk: int) -> list[dict[str, Any]]:
    rows = session.execute(
        select(User.username, Membership.role)
        .join(Membership, Membership.user_pk == User.pk)
        .where(Membership.project_pk == project_pk)
        .order_by(User.username)
    ).all()
    return [{"username": u, "role": r} for u, r in rows]


def settings_versions(session: Session, project_pk: int) -> list[dict[str, Any]]:
    """Every settings version with who changed it, when, and the values before and after."""
    names = dict(session.execute(select(User.pk, User.username)).all())
    return [
        {
            "version": v.version,
            "changed_by": names.get(v.changed_by) if v.changed_by is not None else None,
            "changed_at": v.changed_at.isoformat(),
            "before": v.before,
            "after": v.after,
            "note": v.note,
        }
        for v in settings_history(session, project_pk)
    ]


def items_page(
    session: Session, project_pk: int, *, after: int, limit: int
) -> list[dict[str, Any]]:
    """Items by row id with their pool role and progress (keyset pagination on ``pk``)."""
    rows = session.execute(
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
        .where(ItemRow.project_pk == project_pk, ItemRow.pk > after)
        .order_by(ItemRow.pk)
        .limit(limit)
    ).all()
    return [
        {
            "pk": pk,
            "id": key,
            "domains": domains,
            "gold": bool(gold),
            "role": role,
            "target": target,
            "filled": filled,
        }
        for pk, key, domains, gold, role, target, filled in rows
    ]


def export_file(session: Session, project: ProjectRef, export_id: int, filename: str) -> Path:
    """The path of one file of an export of this project, or ``NotFound`` (404) naming what is
    missing. A name that leaves the export's directory is not one of its files."""
    log = session.get(ExportLog, export_id)
    if log is None or log.project_pk != project.pk:
        raise NotFound(f"no export {export_id} in this project")
    base = Path(log.path).resolve()
    path = (base / filename).resolve()
    if base not in path.parents or not path.is_file():
        raise NotFound(f"export {export_id} has no file {filename!r}")
    return path


# -- the caller's own labelling record -------------------------------------------------------------


def my_status(session: Session, project_pk: int, user_pk: int) -> dict[str, Any]:
    """The rater's status in the project (``new`` before any task) and their submitted count."""
    st = session.scalar(
        select(RaterStatus).where(
            RaterStatus.project_pk == project_pk, RaterStatus.user_pk == user_pk
        )
    )
    done = session.scalar(
        select(func.count())
        .select_from(Assignment)
        .where(
            Assignment.project_pk == project_pk,
            Assignment.user_pk == user_pk,
            Assignment.status == "submitted",
        )
    )
    return {
        "status": st.status if st else "new",
        "reason": st.reason if st else "",
        "submitted": done,
    }


def my_judgments(
    session: Session, project_pk: int, user_pk: int, *, after: int, limit: int
) -> list[dict[str, Any]]:
    """The rater's own judgments by row id (never anyone else's; no gold answers)."""
    rows = session.execute(
        select(JudgmentRow, ItemRow.item_key)
        .join(ItemRow, ItemRow.pk == JudgmentRow.item_pk)
        .join(Rater, Rater.pk == JudgmentRow.rater_pk)
        .where(
            JudgmentRow.project_pk == project_pk,
            Rater.user_pk == user_pk,
            JudgmentRow.pk > after,
        )
        .order_by(JudgmentRow.pk)
        .limit(limit)
    ).all()
    return [
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


def my_revision_requests(session: Session, project_pk: int, user_pk: int) -> list[dict[str, Any]]:
    """Open send-backs of the rater's judgments, with the note and the item as the rater saw it
    (its public view: no gold)."""
    rows = session.execute(
        select(ReviewRequest, JudgmentRow)
        .join(JudgmentRow, JudgmentRow.pk == ReviewRequest.judgment_pk)
        .join(Rater, Rater.pk == JudgmentRow.rater_pk)
        .where(
            ReviewRequest.project_pk == project_pk,
            ReviewRequest.status == "open",
            Rater.user_pk == user_pk,
        )
        .order_by(ReviewRequest.pk)
    ).all()
    return [
        {
            "request_id": req.pk,
            "judgment_id": j.pk,
            "note": req.note,
            "item": item_from_row(must_get(session, ItemRow, j.item_pk)).public_view(),
            "shown_order": j.shown_order,
            "your_judgment": {**j.body, "rationale": j.rationale},
        }
        for req, j in rows
    ]


def me(session: Session, actor: Actor) -> dict[str, Any]:
    """The caller's account, their project roles, how they authenticated and their CSRF token."""
    user = session.get(User, actor.user_pk)
    if user is None:
        raise NotFound(f"no user {actor.username!r}")
    return {
        **user_out(user),
        "projects": project_roles(session, user.pk),
        "via": actor.via,
        "csrf_token": actor.csrf_token,
    }


def project(session: Session, ref: ProjectRef, role: str | None, actor: Actor) -> dict[str, Any]:
    """A project as its member sees it: the full policy for admins and reviewers only."""
    row = session.get(Project, ref.pk)
    if row is None:
        raise NotFound(f"no project {ref.name!r}")
    return project_out(row, role, full=sees_policy(actor.is_admin, role))


def rubric(session: Session, ref: ProjectRef, version: int | None = None) -> dict[str, Any] | None:
    """The project's rubric ``version``, or with none asked the current one (what raters are
    graded against, not the newest); ``None`` when there is none."""
    row = session.get(Project, ref.pk)
    if row is None:
        raise NotFound(f"no project {ref.name!r}")
    found = (
        repo.get_rubric(session, row, version=version) if version else current_rubric(session, row)
    )
    return None if found is None else found.model_dump(mode="json")


def user_credentials(session: Session, username: str) -> list[dict[str, Any]]:
    """A user's login credentials (site admins)."""
    return credentials(session, get_user(session, username).pk)
