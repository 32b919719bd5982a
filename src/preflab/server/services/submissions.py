"""The submit flow's session steps (:func:`preflab.server.flow.lane.run_submit`, the framework
executor's rare cases, in the flow's own transaction): the replays of a retried submission and
a first label's rater row. Submitting itself is the flow; a qualification answer's scoring is
:func:`preflab.server.services.gold_scoring.score_qualification`."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ...store import repo
from ...store.models import JudgmentRow, Project
from ...store.server_models import Assignment, User
from ..database import must_get
from ..errors import ServiceError
from .results import judgment_result, replay_of, same_answer


def replay_by_key(
    session: Session,
    project_name: str,
    user_pk: int,
    key: str,
    judgment: dict[str, Any],
    lease_id: str,
) -> dict[str, Any] | None:
    """The first result when this request repeats the one stored under idempotency ``key``;
    None when the key is new; 409 when it was used for another request."""
    project_pk = session.scalar(select(Project.pk).where(Project.name == project_name))
    username = session.scalar(select(User.username).where(User.pk == user_pk))
    if project_pk is None or username is None:  # removed since the caller was authenticated
        raise ServiceError(404, f"no project {project_name!r} or user {user_pk} any more")
    first = replay_of(session, project_pk, username, key, judgment, lease_id=lease_id)
    return None if first is None else judgment_result(session, first, created=False)


def replay_of_lease(
    session: Session, lease_pk: int, judgment: dict[str, Any]
) -> dict[str, Any] | None:
    """The first result when a submitted lease gets the same answer again, else None (the
    flow then refuses: 409)."""
    lease = must_get(session, Assignment, lease_pk)
    first = session.get(JudgmentRow, lease.judgment_pk) if lease.judgment_pk else None
    if first is not None and same_answer(first, judgment):
        return judgment_result(session, first, created=False)
    return None


def rater_pk_for(session: Session, project_pk: int, username: str, user_pk: int) -> int:
    """The caller's rater row in the project, made on their first label."""
    rater = repo.get_or_create_rater(session, must_get(session, Project, project_pk), username)
    if rater.user_pk is None:
        rater.user_pk = user_pk
    session.flush()
    return rater.pk
