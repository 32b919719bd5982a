"""A submitted ``criteria`` judgment (a rater's checklist) checked against its item's approved
criteria (:mod:`preflab.schema.criteria`): the hook :func:`.submit.build_judgment` calls, and the
read of the item's metadata the lane asks the framework for (the hot path holds no item row)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ...schema import CriteriaJudgment
from ...schema.criteria import criteria_judgment_problems
from ...store.models import ItemRow


def criteria_problems(judgment: CriteriaJudgment, meta: Any) -> list[dict[str, Any]]:
    """The judgment's problems as the submit's 422 field errors (``loc``, ``msg``)."""
    out = []
    for p in criteria_judgment_problems(judgment, meta if isinstance(meta, dict) else {}):
        field, _, msg = p.partition(": ")
        loc = ["body", "judgment", *field.split(".")]
        out.append({"loc": loc, "msg": msg, "type": "value_error"})
    return out


def item_meta(session: Session, project_pk: int, item_key: str) -> dict[str, Any]:
    """An item's metadata, by project and key (empty when the item is gone)."""
    meta = session.scalar(
        select(ItemRow.meta).where(ItemRow.project_pk == project_pk, ItemRow.item_key == item_key)
    )
    return dict(meta or {})
