"""The anchoring audit of AI assistance (issue 30 item 3; ``docs/judges.md``, "AI assistance").

Raters who see a judge's suggestion may copy it. Per suggesting judge and kind x dimension, the
audit sets three agreement rates side by side, each an exact share of label pairs with a Wilson
interval (95 %):

* **assisted vs suggestion**: of the ``ai_assisted`` labels that saw this judge's label
  (``provenance.assisted_by``), the share whose value on a unit equals the suggestion's;
* **unassisted vs judge**: of the ``human`` labels (no suggestion in view) on units the judge
  labelled, the share equal to the judge's (latest) label there: how often people agree with the
  judge *without* seeing it;
* **human vs human**: on units of the same kind x dimension labelled by two or more ``human``
  raters, the share of equal values over every pair of them (the people's own agreement, the
  reference an assisted rate is read against).

An assisted rate well above both others is anchoring: the suggestion, not the item, decided the
label. Each rater's latest label per unit counts (``label_rows`` in judgment order); the pairs
of one unit are not independent, so the intervals are a guide, narrower than a unit bootstrap.
Imported step suggestions (``origin: imported_step_verdicts``) are not judged here: they are no
stored label to compare with.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

from ..schema import JudgmentBase
from .gold import wilson_interval
from .html_parts import html_table

CONFIDENCE = 0.95

Key = tuple[str, str]  # (kind, dimension)


def _latest(js: Sequence[JudgmentBase]) -> dict[tuple[str, Key, str], float]:
    """``{(unit, (kind, dimension), rater): value}``: each rater's latest value (judgment order)."""
    out: dict[tuple[str, Key, str], float] = {}
    for j in js:
        for r in j.label_rows():
            out[(r.unit, (r.kind, r.dimension), r.rater)] = r.value
    return out


def _rate(agree: int, n: int) -> dict[str, Any]:
    low, high = wilson_interval(agree, n, CONFIDENCE)
    return {"agree": agree, "n": n, "rate": agree / n if n else None, "low": low, "high": high}


def anchoring_audit(
    judgments: Sequence[JudgmentBase], ids: Sequence[int | None]
) -> dict[str, Any] | None:
    """The audit over a project's labels (``ids``: each judgment's stored id, parallel, what
    ``assisted_by[].judgment_id`` points to); ``None`` when no label was made with a judge's
    suggestion in view. The labels of one item at a time are enough (a suggestion is a label
    of the same item): :class:`AnchoringTally` is this over a stream of items.

    >>> from preflab.schema import UnaryJudgment
    >>> def u(rater, label, source="human", **prov):
    ...     p = {"rater_id": rater, "source": source, **prov}
    ...     return UnaryJudgment(item_id="i", candidate_id="x", label=label, provenance=p)
    >>> seen = [{"origin": "judge", "content_hash": "h", "judgment_id": 1, "judge": "m"}]
    >>> js = [u("judge:m", True, "ai"), u("r1", True, "ai_assisted", assisted_by=seen),
    ...       u("r2", False), u("r3", False)]
    >>> out = anchoring_audit(js, [1, 2, 3, 4])
    >>> row = out["judges"][0]["rows"][0]
    >>> (row["assisted_vs_suggestion"]["rate"], row["unassisted_vs_judge"]["rate"],
    ...  row["human_vs_human"]["rate"])
    (1.0, 0.0, 1.0)
    """
    by_item: dict[str, tuple[list[JudgmentBase], list[int | None]]] = defaultdict(lambda: ([], []))
    for j, i in zip(judgments, ids, strict=True):
        by_item[j.item_id][0].append(j)
        by_item[j.item_id][1].append(i)
    tally = AnchoringTally()
    for js, item_ids in by_item.values():
        tally.add_item(js, item_ids)
    return tally.result()


def _cells() -> defaultdict[Key, list[int]]:
    return defaultdict(lambda: [0, 0])


class AnchoringTally:
    """The audit's counts, item by item (memory: a few counts per judge x kind x dimension).

    Every rate pairs labels of one unit, and a suggestion is a judge's label of the same item,
    so an item's labels are all one step needs; counts of every ``ai`` rater against people are
    kept and the ones of judges that made no suggestion dropped at :meth:`result`."""

    def __init__(self) -> None:
        #: judge name -> key -> [agree, n] of assisted labels against the suggestion they saw
        self.assisted: defaultdict[str, defaultdict[Key, list[int]]] = defaultdict(_cells)
        #: the judge's rater id -> the name the policy uses (judges that suggested something)
        self.judge_models: dict[str, str] = {}
        #: human vs human: [agree, n] over pairs of unassisted raters on one unit, per key
        self.hh: defaultdict[Key, list[int]] = _cells()
        #: ai rater id -> key -> [agree, n] of unassisted people against that rater's label
        self.hj: defaultdict[str, defaultdict[Key, list[int]]] = defaultdict(_cells)

    def add_item(self, judgments: Sequence[JudgmentBase], ids: Sequence[int | None]) -> None:
        """Count one item's labels (every label of the item, with their stored ids)."""
        by_id = {i: j for i, j in zip(ids, judgments, strict=True) if i is not None}
        latest_assisted: dict[tuple[str, int], JudgmentBase] = {}  # (rater, id) -> label
        for j in judgments:
            p = j.provenance
            if p.source != "ai_assisted" or not p.assisted_by:
                continue
            for rec in p.assisted_by:
                if rec.origin == "judge" and rec.judgment_id is not None:
                    latest_assisted[(p.rater_id, rec.judgment_id)] = j
        for (_, sid), j in latest_assisted.items():
            suggestion = by_id.get(sid)
            if suggestion is None:  # the judge's label is gone (deleted data): not countable
                continue
            rec = next(r for r in j.provenance.assisted_by or [] if r.judgment_id == sid)
            name = rec.judge or suggestion.provenance.rater_id
            self.judge_models[suggestion.provenance.rater_id] = name
            theirs = {(r.unit, r.kind, r.dimension): r.value for r in suggestion.label_rows()}
            for r in j.label_rows():
                value = theirs.get((r.unit, r.kind, r.dimension))
                if value is not None:
                    cell = self.assisted[name][(r.kind, r.dimension)]
                    cell[0] += value == r.value
                    cell[1] += 1
        human = _latest([j for j in judgments if j.provenance.source == "human"])
        per_unit: dict[tuple[str, Key], list[float]] = defaultdict(list)
        for (unit, key, _), v in human.items():
            per_unit[(unit, key)].append(v)
        for (_, key), values in per_unit.items():
            for a, b in combinations(values, 2):
                self.hh[key][0] += a == b
                self.hh[key][1] += 1
        judge_values = _latest([j for j in judgments if j.provenance.source == "ai"])
        for (unit, key, judge_rater), jv in judge_values.items():
            for hv in per_unit.get((unit, key), ()):
                self.hj[judge_rater][key][0] += hv == jv
                self.hj[judge_rater][key][1] += 1

    def result(self) -> dict[str, Any] | None:
        """The audit (``None`` when no label was made with a judge's suggestion in view)."""
        if not self.assisted:
            return None
        hj: defaultdict[str, defaultdict[Key, list[int]]] = defaultdict(_cells)
        for rater, name in self.judge_models.items():  # a judge's name may cover rater ids
            for key, (agree, n) in self.hj.get(rater, {}).items():
                hj[name][key][0] += agree
                hj[name][key][1] += n
        judges = []
        for name in sorted(self.assisted):
            rows = []
            for key in sorted(self.assisted[name]):
                rows.append(
                    {
                        "kind": key[0],
                        "dimension": key[1],
                        "assisted_vs_suggestion": _rate(*self.assisted[name][key]),
                        "unassisted_vs_judge": _rate(*hj[name][key]),
                        "human_vs_human": _rate(*self.hh[key]),
                    }
                )
            judges.append({"judge": name, "rows": rows})
        return {"confidence": CONFIDENCE, "judges": judges}


def anchoring_rows(section: Mapping[str, Any]) -> list[list[Any]]:
    """The audit as table rows (judge, kind, dimension, then each rate as ``k/n = r [lo, hi]``)."""

    def cell(rate: Mapping[str, Any]) -> str:
        if not rate["n"]:
            return "no pairs"
        return (
            f"{rate['agree']}/{rate['n']} = {rate['rate']:.3f} "
            f"[{rate['low']:.3f}, {rate['high']:.3f}]"
        )

    return [
        [
            j["judge"],
            r["kind"],
            r["dimension"],
            cell(r["assisted_vs_suggestion"]),
            cell(r["unassisted_vs_judge"]),
            cell(r["human_vs_human"]),
        ]
        for j in section["judges"]
        for r in j["rows"]
    ]


def anchoring_html(section: Mapping[str, Any]) -> str:
    """The audit's part of the quality report's HTML (every cell escaped by ``html_table``)."""
    return (
        "<h2>AI assistance: anchoring</h2><p>Labels made with a judge's suggestion in view "
        "(<code>ai_assisted</code>) against the suggestion, beside people without one against "
        "the same judge and against each other; shares of equal label pairs with 95 % Wilson "
        "intervals. An assisted rate well above both is anchoring.</p>"
        + html_table(
            [
                "judge",
                "kind",
                "dimension",
                "assisted = suggestion",
                "unassisted = judge",
                "human = human",
            ],
            anchoring_rows(section),
        )
    )
