"""The resolved label set: which of a project's judgments count, once, for every consumer.

The quality report, the dashboard and the exports all measure (or ship) the labels this
module selects, so a report describes exactly the labels an export was made from:

1. **Source.** ``source == "ai"`` labels never pass as human: left out unless ``include_ai``
   (:func:`counts_as_label`). ``ai_assisted`` labels are kept (and flagged where counted).
2. **Revisions.** Per ``(item, kind, unit, rater)`` only the latest label counts: the highest
   review pass, then the latest ``submitted_at`` (when every revision has one), then row order.
   Units: the canonical pair (pairwise), the item (ranking), the candidate (rubric, unary,
   steps), the item and author (demonstration). A rater who relabels a pair is one rater with
   one label. A review-pass (1) label by another rater is simply one more label.
3. **Adjudication.** When any label of a unit comes from review pass 2 (adjudication), only
   pass-2 labels count for that unit; production and review labels are set aside.

Judgments flagged as excluded never reach this module (the store leaves them out).

>>> from preflab.schema import UnaryJudgment
>>> up = lambda r, label, src="human": UnaryJudgment(item_id="i", candidate_id="a", label=label,
...                                                  provenance={"rater_id": r, "source": src})
>>> labels = resolve_labels([up("alice", True), up("alice", False), up("gpt-judge", True, "ai")])
>>> [(j.provenance.rater_id, j.label) for j in labels.judgments]
[('alice', False)]
>>> labels.describe()["set_aside"]
{'revised': 1, 'source-ai': 1}
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any

from ..schema import (
    DemonstrationJudgment,
    JudgmentBase,
    PairwiseJudgment,
    RubricJudgment,
    StepsJudgment,
    UnaryJudgment,
)

ADJUDICATION = 2

#: One sentence for reports and manifests: which labels count.
LABEL_SET_RULE = (
    "latest label per rater and unit (review pass, then submission time, then row order); "
    "adjudicated units: adjudication labels only; source 'ai' left out unless include_ai; "
    "excluded (flagged) judgments left out"
)


def counts_as_label(judgment: JudgmentBase, include_ai: bool = False) -> bool:
    """The source rule: an AI label never counts as a human one unless asked for."""
    return include_ai or judgment.provenance.source != "ai"


def submitted_at(judgment: JudgmentBase) -> datetime | None:
    """Submission time, naive times read as UTC (``None`` when unknown)."""
    ts = judgment.provenance.submitted_at
    if ts is not None and ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    return ts


def _latest(group: Sequence[tuple[int, JudgmentBase]]) -> tuple[int, JudgmentBase]:
    """The latest of one rater's labels on one unit: pass, then time (if all have one), then row."""
    timed = all(submitted_at(j) is not None for _, j in group)
    return max(
        group,
        key=lambda pj: (
            int(pj[1].provenance.review_pass),
            submitted_at(pj[1]) if timed else 0,
            pj[0],
        ),
    )


def revision_unit(judgment: JudgmentBase) -> tuple[str, ...]:
    """What a revision replaces (see the module docstring)."""
    if isinstance(judgment, PairwiseJudgment):
        return ("pair", *judgment.pair)
    if isinstance(judgment, (RubricJudgment, UnaryJudgment, StepsJudgment)):
        return ("candidate", judgment.candidate_id)
    return ("item",)


def effective_judgments(
    judgments: Sequence[JudgmentBase], order: Sequence[int] | None = None
) -> list[tuple[int, JudgmentBase]]:
    """Steps 2-3 for one item: latest label per ``(kind, unit, rater)``, then pass-2 override.

    ``order`` is each judgment's row order (database pk; by default its position). Returns
    ``(order, judgment)`` in row order. Demonstrations are never overridden across authors:
    each author's latest demonstration stays.
    """
    order = list(order) if order is not None else list(range(len(judgments)))
    groups: dict[tuple[Any, ...], list[tuple[int, JudgmentBase]]] = {}
    for pos, j in zip(order, judgments, strict=True):
        key = (j.kind, revision_unit(j), j.provenance.rater_id)
        group = groups.get(key)
        if group is None:
            groups[key] = [(pos, j)]
        else:
            group.append((pos, j))
    latest: list[tuple[int, JudgmentBase, tuple[Any, ...]]] = []  # (pos, judgment, (kind, unit))
    for key, group in groups.items():
        pos, j = (
            group[0] if len(group) == 1 else _latest(group)
        )  # mostly one label: no choice to make
        latest.append((pos, j, key[:2]))
    latest.sort(key=itemgetter(0))
    adjudicated = {
        unit
        for _, j, unit in latest
        if int(j.provenance.review_pass) >= ADJUDICATION
        and not isinstance(j, DemonstrationJudgment)
    }
    if not adjudicated:  # the common case
        return [(pos, j) for pos, j, _ in latest]
    return [
        (pos, j)
        for pos, j, unit in latest
        if isinstance(j, DemonstrationJudgment)
        or unit not in adjudicated
        or int(j.provenance.review_pass) >= ADJUDICATION
    ]


@dataclass
class LabelSet:
    """The judgments that count (in input order) and what was set aside, by reason."""

    judgments: list[JudgmentBase]
    include_ai: bool
    judgments_in: int
    set_aside: Counter[str] = field(default_factory=Counter)

    def describe(self) -> dict[str, Any]:
        """What a report prints about the labels it measured."""
        return {
            "rule": LABEL_SET_RULE,
            "include_ai": self.include_ai,
            "judgments_in": self.judgments_in,
            "judgments_used": len(self.judgments),
            "set_aside": dict(sorted(self.set_aside.items())),
        }


def resolve_labels(judgments: Iterable[JudgmentBase], include_ai: bool = False) -> LabelSet:
    """The resolved label set of judgments of any number of items (input order = row order)."""
    by_item: dict[str, list[tuple[int, JudgmentBase]]] = {}
    set_aside: Counter[str] = Counter()
    n_in = 0
    for pos, j in enumerate(judgments):
        n_in += 1
        if not counts_as_label(j, include_ai):
            set_aside["source-ai"] += 1
            continue
        by_item.setdefault(j.item_id, []).append((pos, j))
    kept: list[tuple[int, JudgmentBase]] = []
    for labelled in by_item.values():
        effective = effective_judgments([j for _, j in labelled], [pos for pos, _ in labelled])
        kept.extend(effective)
        _count_set_aside(labelled, effective, set_aside)
    kept.sort(key=itemgetter(0))
    return LabelSet([j for _, j in kept], include_ai, n_in, set_aside)


def _count_set_aside(
    labelled: Sequence[tuple[int, JudgmentBase]],
    effective: Sequence[tuple[int, JudgmentBase]],
    counts: Counter[str],
) -> None:
    """Why each label left out of ``effective`` was: a later label of its rater, or adjudication."""
    if len(effective) == len(labelled):
        return
    kept = {pos for pos, _ in effective}
    latest_per_rater = {
        (j.kind, revision_unit(j), j.provenance.rater_id) for pos, j in labelled if pos in kept
    }
    for pos, j in labelled:
        if pos in kept:
            continue
        key = (j.kind, revision_unit(j), j.provenance.rater_id)
        counts["revised" if key in latest_per_rater else "adjudicated"] += 1
