"""Verifier routing in exports: what an oracle can check is scored by its verifier, not by people.

For an item the routing rule sends to a verifier (:func:`preflab.schema.routing.scored_by_verifier`:
``metadata.verifiable`` is code / sql / math and the project's ``policy.verifiable_to_raters`` is
off), the preference and reward labels come from the stored verdicts (``preflab verify project``
writes them to each candidate's ``metadata.verifier``; see :mod:`.truth` for where they are read):

* pairs: every candidate that passed beats every candidate that failed (strength 3, origin
  ``verifier``); candidates that both passed or both failed give no pair;
* thumbs (KTO): passed is a positive label, failed a negative one;
* rewards (``rollouts``): a verified candidate's reward is its verdict's (0 when it failed).

People's pairwise, ranking, rubric and thumb labels of such an item are not used (counted in
the manifest under gate ``routing``); their step labels and demonstrations are, and the truth gate
applies to everything. An item not verified yet gives no labels (counted: run ``preflab verify
project``). Verifier labels are one oracle's, not a vote, so the ``min_raters`` gate does not
apply to them.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...schema import Item, JudgmentBase
from .resolve import DropLog, ResolvedPair, ResolvedUnary
from .truth import verifier_block, verifier_failure

GATE = "routing"
VERIFIER_ORIGIN = "verifier"
#: judgment kinds that say which answer is better: the verifier's call on a routed item
PREFERENCE_KINDS = frozenset({"pairwise", "ranking", "rubric", "unary"})
PASS_OVER_FAIL = 3  # "much better": an answer that passes its tests against one that does not


def verifier_outcomes(item: Item) -> dict[str, bool]:
    """``{candidate_id: passed}`` for the candidates with a stored verdict."""
    out = {}
    for candidate in item.candidates:
        block = verifier_block(item, candidate.key)
        if block:
            out[candidate.key] = verifier_failure(block) is None
    return out


def verifier_reward(item: Item, candidate_id: str) -> float | None:
    """A candidate's reward from its stored verdict: 0 when it failed (any check, see
    :func:`.truth.verifier_failure`), else its ``terminal_reward``; ``None`` without a verdict."""
    block = verifier_block(item, candidate_id)
    if not block:
        return None
    if verifier_failure(block) is not None:
        return 0.0
    reward = block.get("terminal_reward")
    return (
        float(reward) if isinstance(reward, int | float) and not isinstance(reward, bool) else None
    )


def verifier_pairs(item: Item, drops: DropLog) -> list[ResolvedPair]:
    outcomes = verifier_outcomes(item)
    if not outcomes:
        drops.drop(
            GATE, "verifiable item not verified yet (run `preflab verify project`)", item.key
        )
        return []
    passed = sorted(c for c, ok in outcomes.items() if ok)
    failed = sorted(c for c, ok in outcomes.items() if not ok)
    return [
        ResolvedPair(item.key, good, bad, PASS_OVER_FAIL, 1, 1.0, (), origin=VERIFIER_ORIGIN)
        for good in passed
        for bad in failed
    ]


def verifier_unary(item: Item, drops: DropLog) -> list[ResolvedUnary]:
    outcomes = verifier_outcomes(item)
    if not outcomes:
        drops.drop(
            GATE, "verifiable item not verified yet (run `preflab verify project`)", item.key
        )
    return [
        ResolvedUnary(item.key, cid, ok, 1, 1.0, (), origin=VERIFIER_ORIGIN)
        for cid, ok in sorted(outcomes.items())
    ]


def without_people_preferences(
    effective: Sequence[tuple[int, JudgmentBase]], item_id: str, drops: DropLog
) -> list[tuple[int, JudgmentBase]]:
    """The ``(order, judgment)`` of a verifier-routed item that still count: all but preference labels."""
    kept = [(o, j) for o, j in effective if j.kind not in PREFERENCE_KINDS]
    if len(kept) < len(effective):
        drops.drop(
            GATE,
            "people's preference label on a verifiable item (its verifier scores it)",
            item_id,
            len(effective) - len(kept),
        )
    return kept
