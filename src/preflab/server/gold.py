"""Gold items on the server: the scoring rule lives in :mod:`preflab.quality.gold` (one rule for
the server, the report and exports) and is re-exported here; the rater's qualification record."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..quality.gold import expected_judgment, score_gold
from ..store.server_models import GoldOutcome

__all__ = ["expected_judgment", "qualification_record", "score_gold"]


def qualification_record(session: Session, project_pk: int, user_pk: int) -> list[bool]:
    """The rater's qualification answers so far, in order (correct or not)."""
    return list(
        session.scalars(
            select(GoldOutcome.correct)
            .where(
                GoldOutcome.project_pk == project_pk,
                GoldOutcome.user_pk == user_pk,
                GoldOutcome.phase == "qualification",
            )
            .order_by(GoldOutcome.pk)
        )
    )
