"""More raters where they disagree (``Policy.adaptive_overlap``; docs/extra-raters.md): what the
review queue and the dashboard read of it. The rule itself runs in the submit flow
(:func:`preflab.server.flow.lane.after_label`, :mod:`preflab.server.flow.extra`).

* :func:`waiting_items`: items whose extra label is due; the adjudication queue holds their
  low-agreement reason back until the label is in (the budget spent, or the labels agree);
* :func:`figures`: the dashboard's counts, one SQL aggregate over the pool rows (no labels read).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, case, func, select
from sqlalchemy.orm import Session

from ...schema.policy import Policy
from ...store.models import ItemRow
from ...store.server_models import PoolEntry

_P = PoolEntry


def waiting_items(session: Session, project_pk: int) -> set[str]:
    """Item ids with an extra label granted and not yet in (``extra_state`` ``waiting`` and a
    place still open)."""
    return set(
        session.scalars(
            select(ItemRow.item_key)
            .join(_P, _P.item_pk == ItemRow.pk)
            .where(
                _P.project_pk == project_pk,
                _P.role == "production",
                _P.extra_state == "waiting",
                _P.filled < _P.target,
            )
        )
    )


def figures(session: Session, project_pk: int, policy: Policy) -> dict[str, Any]:
    """Items that got extra raters, extra labels granted / spent / due and the budget left,
    items resolved by their extra labels (they agree now) vs sent to adjudication (the budget
    spent, still split), and items that agreed at k; one aggregate over the pool rows."""
    base = _P.target - _P.extra
    # labels beyond the item's k that are in, at most the extras granted
    beyond = case((_P.filled > base, _P.filled - base), else_=0)
    spent = case((beyond > _P.extra, _P.extra), else_=beyond)
    overlap = and_(_P.role == "production", base >= 2)

    def count(*cond: Any) -> Any:
        return func.coalesce(func.sum(case((and_(overlap, *cond), 1), else_=0)), 0)

    row = session.execute(
        select(
            count(),
            count(_P.extra > 0),
            func.coalesce(func.sum(case((overlap, _P.extra), else_=0)), 0),
            func.coalesce(func.sum(case((overlap, spent), else_=0)), 0),
            count(_P.extra > 0, _P.extra_state == "agreed"),
            count(_P.extra_state == "split"),
            count(_P.extra == 0, _P.extra_state == "agreed"),
            count(_P.extra_state == "waiting", _P.filled < _P.target),
        ).where(_P.project_pk == project_pk)
    ).one()
    items, extended, granted, spent_n, resolved, split, agreed_at_k, waiting = (int(v) for v in row)
    rule = policy.adaptive_overlap
    return {
        "enabled": rule.enabled,
        "max_extra": rule.max_extra,
        "overlap_items": items,
        "items_extended": extended,
        "extra_granted": granted,
        "extra_spent": spent_n,
        "extra_due": granted - spent_n,
        "budget_left": max(0, items * rule.max_extra - granted),
        "resolved_by_extra": resolved,
        "sent_to_adjudication": split,
        "agreed_at_k": agreed_at_k,
        "waiting": waiting,
    }
