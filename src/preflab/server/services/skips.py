"""Why a rater gets no item, and skipping (or flagging) a task: the rules behind
``POST .../assignments/{id}/skip`` and the ``no_items`` detail of ``assignments/next``. These are
labelling rules; the other routes that once lived here moved by concern to
:mod:`preflab.server.routes` and their services to :mod:`preflab.server.services.review` and
:mod:`preflab.server.services.files`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import exists, select
from sqlalchemy.orm import Session, aliased

from ...schema.policy import settings_of
from ...store.server_models import (
    SKIP_REASONS,
    Assignment,
    Credential,
    ItemSkip,
    PoolDomain,
    PoolEntry,
)
from ..auth import verified_domains
from ..database import Database
from ..errors import ServiceError
from ..permissions import ProjectRef
from ..sql import POOL_OPEN, domain_ok
from .leases import release_lease

# -- why a rater gets no item ----------------------------------------------------------------------


def withheld_by_domain(session: Session, project: ProjectRef, user_pk: int) -> dict[str, int]:
    """Open production items this rater has not seen that the assignment engine's own domain
    rule (:func:`preflab.server.sql.domain_ok`) withholds: missing domain -> items."""
    policy = settings_of(project.settings).policy
    mine = verified_domains(session, user_pk)
    seen = exists().where(Assignment.item_pk == PoolEntry.item_pk, Assignment.user_pk == user_pk)
    needs = aliased(PoolDomain)  # the rule's own subqueries correlate on PoolDomain itself
    rows = session.execute(
        select(PoolEntry.item_pk, needs.domain)
        .join(needs, needs.item_pk == PoolEntry.item_pk)
        .where(
            PoolEntry.project_pk == project.pk,
            PoolEntry.role == "production",
            POOL_OPEN,
            ~seen,
            ~domain_ok(PoolEntry.item_pk, mine, policy.domain_match),
        )
    ).all()
    items: dict[str, set[int]] = defaultdict(set)
    for item_pk, domain in rows:
        if domain not in mine:
            items[domain].add(item_pk)
    return {d: len(pks) for d, pks in sorted(items.items())}


def no_items_detail(session: Session, project: ProjectRef, user_pk: int) -> str | None:
    """ "4 items need a verified "code" credential: claim it on your Account page", or ``None``
    when no item is withheld for a credential. Plain text (the label page turns "Account page"
    into a link to /account)."""
    withheld = withheld_by_domain(session, project, user_pk)
    if not withheld:
        return None
    claimed = set(
        session.scalars(
            select(Credential.domain).where(
                Credential.user_pk == user_pk, Credential.verified.is_(False)
            )
        )
    )
    parts = []
    for domain, n in withheld.items():
        what = f'{n} item{"s" if n != 1 else ""} need{"s" if n == 1 else ""} a verified "{domain}" credential'
        how = (
            "your claim waits for an admin to verify it"
            if domain in claimed
            else "claim it on your Account page"
        )
        parts.append(f"{what}: {how}")
    return "No more items for you right now. " + "; ".join(parts) + "."


# -- skip / flag an item ----------------------------------------------------------------------------


def skip_task(
    db: Database, project: ProjectRef, user_pk: int, lease_id: str, reason: str, note: str
) -> dict[str, Any]:
    """The rater gives the task back with a reason: the lease is released (the item goes to
    another rater; never again to this one) and the reason recorded, in one transaction."""
    if reason not in SKIP_REASONS:
        raise ServiceError(
            422,
            f"reason must be one of {list(SKIP_REASONS)}, not {reason!r}",
            [{"loc": ["body", "reason"], "msg": "unknown reason", "type": "value_error"}],
        )
    if reason == "other" and not note.strip():
        raise ServiceError(
            422,
            "say why in the note when the reason is 'other'",
            [
                {
                    "loc": ["body", "note"],
                    "msg": "required with reason 'other'",
                    "type": "value_error",
                }
            ],
        )
    with db.writing() as s:
        lease = release_lease(s, project, user_pk, lease_id)
        if lease is None or lease.status != "released" or lease.judgment_pk is not None:
            raise ServiceError(
                404 if lease is None else 409,
                "no live task of yours with this id"
                if lease is None
                else f"this task is {lease.status}; only a task you hold can be skipped",
            )
        s.add(
            ItemSkip(
                project_pk=project.pk,
                item_pk=lease.item_pk,
                user_pk=user_pk,
                reason=reason,
                note=note.strip(),
            )
        )
        return {"skipped": True, "reason": reason, "flag": SKIP_REASONS[reason]["flag"]}
