"""An item's own criteria in the store (``metadata.criteria``, :mod:`preflab.schema.criteria`):
write a new version, approve it, read it. In the caller's transaction; the CLI
(``preflab criteria add / approve / show``) and any other writer call these."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from ..schema.criteria import METADATA_KEY, CriteriaSet, Criterion, item_criteria
from .models import Project
from .repo import StoreError, get_item, merge_metadata


def read_criteria(session: Session, project: Project, item_key: str) -> CriteriaSet | None:
    """The item's criteria set (any state), or ``None``."""
    return item_criteria(get_item(session, project, item_key).meta)


def add_criteria(
    session: Session,
    project: Project,
    item_key: str,
    criteria: Iterable[Criterion | dict[str, Any]],
    author: str,
) -> tuple[CriteriaSet, bool]:
    """Write ``criteria`` as the item's next version by ``author`` (unapproved: a new version
    resets approval); ``(set, created)``. The same criteria as the current version: nothing
    written, ``created`` False."""
    current = read_criteria(session, project, item_key)
    if current is None:
        new = CriteriaSet.model_validate(
            {"version": 1, "author": author, "criteria": list(criteria)}
        )
    else:
        new = current.revised(criteria, author)
        if new.criteria == current.criteria:
            return current, False
    merge_metadata(session, project, {item_key: {METADATA_KEY: new.as_json()}}, {})
    return new, True


def approve_criteria(
    session: Session,
    project: Project,
    item_key: str,
    approver: str,
    *,
    version: int | None = None,
    at: datetime | None = None,
) -> CriteriaSet:
    """Approve the item's current criteria (``version``, when given, must be it: one approves
    what one read). The approver must not be the author; approving again changes nothing."""
    current = read_criteria(session, project, item_key)
    if current is None:
        raise StoreError(f"item {item_key!r} has no criteria to approve (preflab criteria add)")
    if version is not None and version != current.version:
        raise StoreError(
            f"item {item_key!r}: criteria v{version} is not the current version "
            f"(v{current.version}); read it (preflab criteria show) and approve that"
        )
    if current.approved:
        return current
    try:
        approved = current.approve(approver, at=at)
    except ValueError as exc:
        raise StoreError(f"item {item_key!r}: {exc}") from None
    merge_metadata(session, project, {item_key: {METADATA_KEY: approved.as_json()}}, {})
    return approved
