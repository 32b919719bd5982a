"""Scoring a judgment against a gold item's expected answer."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..schema import GoldAnswer, JudgmentBase, PairwiseJudgment, parse_judgment
from ..store.server_models import GoldOutcome


def expected_judgment(item_id: str, gold: dict[str, Any]) -> JudgmentBase:
    answer = GoldAnswer.model_validate(gold)
    data = {**answer.judgment, "item_id": item_id, "provenance": {"rater_id": "gold"}}
    return parse_judgment(data)


def score_gold(judgment: JudgmentBase, item_id: str, gold: dict[str, Any]) -> bool | None:
    """Whether ``judgment`` matches the gold answer; ``None`` when the kind cannot be scored.

    Pairwise: the preferred candidate (or a tie) must match; strength counts only within
    ``tolerance`` when the gold sets one above 0. Other kinds: every label-table value of the
    expected answer must be matched within ``tolerance``.
    """
    answer = GoldAnswer.model_validate(gold)
    expected = expected_judgment(item_id, gold)
    if expected.kind != judgment.kind:
        return False
    if isinstance(judgment, PairwiseJudgment) and isinstance(expected, PairwiseJudgment):
        if expected.pair != judgment.pair:
            return False
        same_side = expected.direction == judgment.direction
        if answer.tolerance > 0 and expected.score is not None and judgment.score is not None:
            return same_side and abs(expected.score - judgment.score) <= answer.tolerance
        return same_side
    want = {(r.unit, r.dimension): r.value for r in expected.label_rows()}
    if not want:
        return None
    got = {(r.unit, r.dimension): r.value for r in judgment.label_rows()}
    return all(key in got and abs(got[key] - value) <= answer.tolerance for key, value in want.items())


def qualification_record(session: Session, project_pk: int, user_pk: int) -> list[bool]:
    """The rater's qualification answers so far, in order (correct or not)."""
    return list(session.scalars(
        select(GoldOutcome.correct).where(GoldOutcome.project_pk == project_pk, GoldOutcome.user_pk == user_pk,
                                          GoldOutcome.phase == "qualification").order_by(GoldOutcome.pk)
    ))
