"""Agreement on critique spans: character-level F1 between raters (docs/critiques.md).

A **unit** is one answer (item, candidate) that two or more raters marked (each with at least
one span on it, any category). For each category and each pair of those raters, with ``A`` and
``B`` the sets of character positions each marked with that category (the union of their spans
on the answer, so overlapping spans count each character once)::

    F1(A, B) = 2 |A ∩ B| / (|A| + |B|)

(the Dice coefficient; the F-measure of one rater's characters against the other's, symmetric).
A pair where neither marked the category says nothing about it and is skipped. The unit's score
for the category is the mean over the pairs that count; the report gives, per category, the mean
over units and the number of units. The F-measure is the agreement measure for span annotation
where chance-corrected ones are undefined (no fixed set of negatives): Hripcsak & Rothschild,
"Agreement, the F-measure, and reliability in information retrieval", JAMIA 12(3), 2005;
character-offset F1 is the measure of SemEval-2021 Task 5 (Toxic Spans Detection, Pavlopoulos et
al., 2021).

Folded item by item (:class:`SpanTally`: sums and counts per category; memory does not grow with
the project).

>>> a = [(0, 10)]; b = [(5, 15)]
>>> round(char_f1(a, b), 4)
0.5
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import combinations
from typing import Any

from ..schema import JudgmentBase, SpannedJudgment


def _positions(spans: Iterable[tuple[int, int]]) -> set[int]:
    out: set[int] = set()
    for start, end in spans:
        out.update(range(start, end))
    return out


def char_f1(a: Sequence[tuple[int, int]], b: Sequence[tuple[int, int]]) -> float | None:
    """Character-level F1 between two raters' spans (``(start, end)``, half-open) of one
    category on one answer; ``None`` when neither marked anything (the pair is skipped)."""
    pa, pb = _positions(a), _positions(b)
    if not pa and not pb:
        return None
    return 2 * len(pa & pb) / (len(pa) + len(pb))


def item_span_scores(judgments: Sequence[JudgmentBase]) -> tuple[int, list[tuple[str, float]]]:
    """The units (answers marked by 2+ raters) of one item's judgments, and ``(category, unit
    score)`` for each unit and each category some rater used on it."""
    # candidate -> rater -> category -> spans
    marks: dict[str, dict[str, dict[str, list[tuple[int, int]]]]] = {}
    for j in judgments:
        if not isinstance(j, SpannedJudgment) or not j.spans:
            continue
        for s in j.spans:
            per_rater = marks.setdefault(s.candidate_id, {})
            per_rater.setdefault(j.provenance.rater_id, {}).setdefault(s.category, []).append(
                (s.start, s.end)
            )
    out = []
    units = 0
    for cand in sorted(marks):
        raters = marks[cand]
        if len(raters) < 2:
            continue
        units += 1
        categories = sorted({c for per in raters.values() for c in per})
        for category in categories:
            scores = [
                f
                for r1, r2 in combinations(sorted(raters), 2)
                if (f := char_f1(raters[r1].get(category, []), raters[r2].get(category, [])))
                is not None
            ]
            out.append((category, sum(scores) / len(scores)))
    return units, out


class SpanTally:
    """Per-category sums of unit scores over the items folded in with :meth:`add`."""

    def __init__(self) -> None:
        self.any_spans = False
        self.judgments_with_spans = 0
        self.units = 0
        self.sums: dict[str, list[float]] = {}  # category -> [sum of unit scores, units]

    def add(self, judgments: Sequence[JudgmentBase]) -> None:
        """One item's judgments (the resolved label set)."""
        with_spans = sum(1 for j in judgments if isinstance(j, SpannedJudgment) and j.spans)
        if not with_spans:
            return
        self.any_spans = True
        self.judgments_with_spans += with_spans
        units, scores = item_span_scores(judgments)
        self.units += units
        for category, score in scores:
            total = self.sums.setdefault(category, [0.0, 0])
            total[0] += score
            total[1] += 1

    def result(self) -> dict[str, Any]:
        per = {
            c: {"units": int(n), "f1": s / n if n else None}
            for c, (s, n) in sorted(self.sums.items())
        }
        scored = sum(int(n) for _, n in self.sums.values())
        return {
            "measure": "character-level F1 (Dice) between raters, per category, mean over rater "
            "pairs then over answers marked by 2+ raters",
            "judgments_with_spans": self.judgments_with_spans,
            "units": self.units,
            #: the mean over every (unit, category) score
            "f1": sum(s for s, _ in self.sums.values()) / scored if scored else None,
            "by_category": per,
        }
