"""Whether an overlap item's labels disagree enough to ask one more rater (issue 30 item 6).

The rule the server applies when the k-th (and each later) person's label lands on an overlap
item (``Policy.adaptive_overlap``, docs/extra-raters.md), per kind and per unit of the kind
(a pair of answers, one answer, the item's ranking), over the labels that fill the item's
places (people's production labels, not excluded, not revisions):

* **pairwise**: the largest share of one side among {first better, second better, tie} (the
  canonical pair's signed score; a tie is a side of its own, as the export's plurality counts
  it) is below ``pairwise_min_majority``;
* **unary**: the larger share of thumbs up or thumbs down is below ``unary_min_majority``;
* **ranking**: the largest share of one top choice (the first tier, as a set) is below
  ``ranking_min_top_share`` (the top choice is what a ranking is mostly used for, and a split
  there is the disagreement a reader of the ranking notices; a Kendall distance would also
  count swaps far down that matter little);
* **rubric**: some dimension's range (max - min) over one answer's scores exceeds
  ``rubric_max_range`` (the adjudication queue's ``max_rubric_spread``);
* **steps**: any step whose verdicts split among the raters who judged it, or a different first
  error (the adjudication queue's ``max_step_disagreement`` is 0: any split);
* **demonstration**: free text, never (a reviewer accepts or rejects it).

A unit needs two labels to disagree. Pure: values in, reasons out (the server reads the rows).

>>> from preflab.schema.policy import AdaptiveOverlap
>>> rule = AdaptiveOverlap(max_extra=2)
>>> votes = [Label("pairwise", {}, "a", "b", s) for s in (2, 1, -1)]
>>> disagreement(votes, rule)
['pairwise a|b: majority 0.67 < 0.75']
>>> disagreement(votes + [Label("pairwise", {}, "a", "b", 3)], rule)
[]
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from ..schema.policy import AdaptiveOverlap


class Label(NamedTuple):
    """One stored label as the rule reads it: its kind, its body (the wire fields) and, for a
    pairwise one, the canonical pair and signed score (``judgments.pair_lo/pair_hi/score``)."""

    kind: str
    body: Mapping[str, Any]
    pair_lo: str | None = None
    pair_hi: str | None = None
    score: int | None = None


def _sign(value: float) -> int:
    return int((value > 0) - (value < 0))


def majority_share(values: Sequence[Hashable]) -> float:
    """The largest share of one value (1.0 for no values).

    >>> majority_share(["a", "a", "b"])
    0.6666666666666666
    """
    if not values:
        return 1.0
    return max(Counter(values).values()) / len(values)


def _top(order: Any) -> frozenset[str] | None:
    if not isinstance(order, list) or not order or not isinstance(order[0], list):
        return None
    return frozenset(str(c) for c in order[0])


def _steps_split(verdicts: list[list[Any]]) -> bool:
    """Some step judged by two or more raters with different verdicts, or different first
    errors (verdicts stop at the first error: a shorter list is an earlier error)."""
    firsts = {v.index(-1) if -1 in v else None for v in verdicts}
    if len(firsts) > 1:
        return True
    width = max(len(v) for v in verdicts)
    for i in range(width):
        seen = {v[i] for v in verdicts if i < len(v)}
        if len(seen) > 1:
            return True
    return False


def disagreement(labels: Iterable[Label], rule: AdaptiveOverlap) -> list[str]:
    """Why these labels of one item disagree by ``rule`` (empty: they agree, or no unit has
    two labels); one reason per unit that disagrees, in a stable order."""
    sides: dict[tuple[str, str], list[int]] = defaultdict(list)
    thumbs: dict[str, list[bool]] = defaultdict(list)
    tops: list[frozenset[str]] = []
    scores: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    steps: dict[str, list[list[Any]]] = defaultdict(list)
    for lab in labels:
        body = lab.body or {}
        if lab.kind == "pairwise":
            if lab.pair_lo is not None and lab.pair_hi is not None and lab.score is not None:
                sides[(lab.pair_lo, lab.pair_hi)].append(_sign(lab.score))
        elif lab.kind == "unary":
            if isinstance(body.get("label"), bool):
                thumbs[str(body.get("candidate_id"))].append(body["label"])
        elif lab.kind == "ranking":
            top = _top(body.get("order"))
            if top is not None:
                tops.append(top)
        elif lab.kind == "rubric":
            per = scores[str(body.get("candidate_id"))]
            for dim, value in (body.get("scores") or {}).items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    per[str(dim)].append(float(value))
        elif lab.kind == "steps":
            verdicts = body.get("verdicts")
            if isinstance(verdicts, list) and verdicts:
                steps[str(body.get("candidate_id"))].append(list(verdicts))
    out = []
    for (lo, hi), votes in sorted(sides.items()):
        share = majority_share(votes)
        if len(votes) >= 2 and share < rule.pairwise_min_majority:
            out.append(f"pairwise {lo}|{hi}: majority {share:.2f} < {rule.pairwise_min_majority}")
    for cand, votes_ in sorted(thumbs.items()):
        share = majority_share(votes_)
        if len(votes_) >= 2 and share < rule.unary_min_majority:
            out.append(f"unary {cand}: thumbs {share:.2f} < {rule.unary_min_majority}")
    if len(tops) >= 2:
        share = majority_share(tops)
        if share < rule.ranking_min_top_share:
            out.append(f"ranking: top choice {share:.2f} < {rule.ranking_min_top_share}")
    for cand, dims in sorted(scores.items()):
        for dim, values in sorted(dims.items()):
            spread = max(values) - min(values)
            if len(values) >= 2 and spread > rule.rubric_max_range:
                out.append(f"rubric {cand} {dim}: range {spread:g} > {rule.rubric_max_range:g}")
    for cand, verdicts in sorted(steps.items()):
        if len(verdicts) >= 2 and _steps_split(verdicts):
            out.append(f"steps {cand}: verdicts split")
    return out
