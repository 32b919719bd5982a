"""Audits of model judges against the people of the same project (``preflab judge audit``, the
quality report's ``judges`` section; definitions and formulas in ``docs/judges.md``).

A *judge* is a model with a prompt template (``Provenance.judge``: ``model``, ``template@version``);
its labels are ``source: ai``. The *human* labels are ``source: human`` (``ai_assisted`` labels
saw a model's suggestion and are no reference), resolved as everywhere (latest label per rater
and unit, adjudication overrides; ``labels.resolve_labels``). Per judge:

* **agreement** per kind x dimension on the units both labelled: Krippendorff's alpha of
  (judge, human) value pairs, one pair per human label of a unit, with a percentile bootstrap
  interval over those pairs; beside it the human-human alpha on the same units (the ceiling a
  judge is measured against) and the raw share of equal pairs;
* **position consistency**: of the pairs asked in both orders, the share whose two verdicts name
  the same winner (ties included); and the share of one-order non-tie verdicts that chose the
  answer shown first;
* **length bias**: ``bias.length_bias`` (the report's audit, lengths in words) on the judge's
  non-tie labels, and on the humans' votes over the same pairs;
* **self-preference**: on pairs where exactly one answer's model is of the judge's family
  (:mod:`.family`) and people voted, ``delta = mean_p(j_p) - mean_p(h_p)`` with ``j_p`` 1 when
  the judge preferred its family's answer (0.5 a tie, 0 the other), ``h_p`` the mean of the
  same over the people's votes on pair ``p``; a percentile bootstrap over pairs.

Order-inconsistent verdicts are stored excluded: they count in position consistency and
nowhere else (never as a preference).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..schema import Item, JudgmentBase, PairwiseJudgment
from .agreement import krippendorff_alpha_ci
from .agreement.preference import level_for
from .bias import length_bias, word_length
from .family import model_family
from .labels import resolve_labels

CONFIDENCE = 0.95


def judge_key(j: JudgmentBase) -> str | None:
    """``model · template@version`` of a judge's label, ``None`` for any other label."""
    rec = j.provenance.judge
    if rec is None or j.provenance.source != "ai":
        return None
    return f"{rec.model} · {rec.template}@{rec.template_version}"


def _rows(js: Sequence[JudgmentBase]) -> dict[tuple[str, str], dict[str, list[tuple[str, float]]]]:
    """``{(kind, dimension): {unit: [(rater, value), ...]}}``."""
    out: dict[tuple[str, str], dict[str, list[tuple[str, float]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for j in js:
        for r in j.label_rows():
            out[(r.kind, r.dimension)][r.unit].append((r.rater, r.value))
    return out


def _ci(units: list[str], values: list[float], level: Any, n_boot: int) -> dict[str, float]:
    ci = krippendorff_alpha_ci(
        np.asarray(units, dtype=object), np.asarray(values, dtype=float), level, n_boot=n_boot
    )
    return {"alpha": ci.estimate, "low": ci.low, "high": ci.high}


def _agreement(
    judge: Sequence[JudgmentBase], human: Sequence[JudgmentBase], n_boot: int
) -> list[dict[str, Any]]:
    judge_rows, human_rows = _rows(judge), _rows(human)
    out = []
    for (kind, dim), by_unit in sorted(judge_rows.items()):
        humans = human_rows.get((kind, dim), {})
        shared = sorted(u for u in by_unit if u in humans)
        pair_units: list[str] = []
        pair_values: list[float] = []
        equal = 0
        for u in shared:
            jv = by_unit[u][-1][1]
            for rater, hv in humans[u]:
                key = f"{u}\x1f{rater}"
                pair_units += [key, key]
                pair_values += [jv, hv]
                equal += jv == hv
        hh_units = [u for u in shared for _ in humans[u]]
        hh_values = [v for u in shared for _, v in humans[u]]
        level = level_for(dim, np.asarray(pair_values + hh_values, dtype=float))
        n_pairs = len(pair_units) // 2
        row: dict[str, Any] = {
            "kind": kind,
            "dimension": dim,
            "level": level,
            "n_units": len(shared),
            "n_pairs": n_pairs,
            "judge_human": _ci(pair_units, pair_values, level, n_boot) if n_pairs else None,
            "judge_human_equal_share": equal / n_pairs if n_pairs else None,
            "human_human": _ci(hh_units, hh_values, level, n_boot)
            if any(len(humans[u]) >= 2 for u in shared)
            else None,
            "n_units_two_humans": sum(1 for u in shared if len(humans[u]) >= 2),
        }
        out.append(row)
    return out


def _position(judge_all: Sequence[JudgmentBase]) -> dict[str, Any] | None:
    asked = [
        j
        for j in judge_all
        if isinstance(j, PairwiseJudgment)
        and j.provenance.judge is not None
        and j.provenance.judge.verdicts is not None
        and len(j.provenance.judge.verdicts) == 2
    ]
    if not asked:
        return None
    consistent = sum(
        1 for j in asked if j.provenance.judge is not None and j.provenance.judge.outcome == "ok"
    )
    first = non_tie = 0
    for j in asked:
        assert j.provenance.judge is not None and j.provenance.judge.verdicts is not None
        for v in j.provenance.judge.verdicts:
            if v.winner != "tie":
                non_tie += 1
                first += v.winner == "a"
    return {
        "pairs": len(asked),
        "consistent": consistent,
        "share_consistent": consistent / len(asked),
        "verdicts_non_tie": non_tie,
        "first_shown_share": first / non_tie if non_tie else None,
    }


def _lengths(items: Mapping[str, Item]) -> dict[tuple[str, str], int]:
    return {
        (iid, str(c.id)): word_length(c.as_text())
        for iid, it in items.items()
        for c in it.candidates
    }


def _length(
    pairs: Sequence[PairwiseJudgment], lens: Mapping[tuple[str, str], int]
) -> dict[str, Any] | None:
    ch, rj = [], []
    for j in pairs:
        if j.chosen is None or j.rejected is None:
            continue
        kc, kr = (j.item_id, j.chosen), (j.item_id, j.rejected)
        if kc in lens and kr in lens:
            ch.append(lens[kc])
            rj.append(lens[kr])
    if not ch:
        return None
    with np.errstate(invalid="ignore", divide="ignore"):  # a separable few pairs: no Wald interval
        return length_bias(ch, rj)


def _own_share(j: PairwiseJudgment, own: str) -> float:
    return 0.5 if j.chosen is None else float(j.chosen == own)


def self_preference(
    judge_pairs: Sequence[PairwiseJudgment],
    human_pairs: Sequence[PairwiseJudgment],
    items: Mapping[str, Item],
    family: str | None,
    families: Mapping[str, str] | None,
    n_boot: int,
    seed: int = 0,
) -> dict[str, Any] | None:
    """``delta = mean_p(j_p) - mean_p(h_p)`` over the pairs with exactly one answer of the
    judge's ``family`` and at least one human vote (see the module docstring)."""
    if family is None:
        return None
    own_of: dict[tuple[str, str, str], str] = {}
    for j in judge_pairs:
        item = items.get(j.item_id)
        if item is None:
            continue
        models = {str(c.id): c.model for c in item.candidates}
        mine = [c for c in j.pair if model_family(models.get(c), families) == family]
        if len(mine) == 1:
            own_of[(j.item_id, *j.pair)] = mine[0]
    humans: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for h in human_pairs:
        key = (h.item_id, *h.pair)
        if key in own_of:
            humans[key].append(_own_share(h, own_of[key]))
    jv, hv = [], []
    for j in judge_pairs:
        key = (j.item_id, *j.pair)
        if key in own_of and humans.get(key):
            jv.append(_own_share(j, own_of[key]))
            hv.append(float(np.mean(humans[key])))
    if not jv:
        return {"family": family, "pairs": 0}
    jarr, harr = np.asarray(jv), np.asarray(hv)
    delta = float(jarr.mean() - harr.mean())
    rng = np.random.default_rng(seed)
    n = len(jarr)
    boot = np.empty(n_boot)
    for b in range(n_boot):
        idx = rng.integers(0, n, n)
        boot[b] = jarr[idx].mean() - harr[idx].mean()
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(boot, [tail, 100 - tail]) if n_boot else (np.nan, np.nan)
    return {
        "family": family,
        "pairs": n,
        "judge_own_share": float(jarr.mean()),
        "human_own_share": float(harr.mean()),
        "delta": delta,
        "low": float(low),
        "high": float(high),
        "confidence": CONFIDENCE,
        "n_boot": n_boot,
    }


def judge_audit(
    items: Sequence[Item],
    judgments: Sequence[JudgmentBase],
    excluded: Sequence[bool],
    *,
    families: Mapping[str, str] | None = None,
    n_boot: int = 1000,
) -> dict[str, Any]:
    """The audit of every judge of a project (``judgments`` with their ``excluded`` flags)."""
    if len(judgments) != len(excluded):
        raise ValueError(f"{len(judgments)} judgments but {len(excluded)} excluded flags")
    by_id = {str(it.id): it for it in items}
    human_in = [
        j
        for j, x in zip(judgments, excluded, strict=True)
        if not x and j.provenance.source == "human"
    ]
    human = resolve_labels(human_in).judgments
    human_pairs = [j for j in human if isinstance(j, PairwiseJudgment)]
    lens = _lengths(by_id)
    grouped: dict[str, list[tuple[JudgmentBase, bool]]] = defaultdict(list)
    for j, x in zip(judgments, excluded, strict=True):
        key = judge_key(j)
        if key is not None:
            grouped[key].append((j, x))
    out = []
    for key, labelled in sorted(grouped.items()):
        rec = labelled[0][0].provenance.judge
        assert rec is not None
        kept = resolve_labels([j for j, x in labelled if not x], include_ai=True).judgments
        pairs = [j for j in kept if isinstance(j, PairwiseJudgment)]
        on_pairs = {(j.item_id, *j.pair) for j in pairs}
        family = model_family(rec.model, families)
        out.append(
            {
                "judge": key,
                "model": rec.model,
                "template": f"{rec.template}@{rec.template_version}",
                "family": family,
                "labels": len(kept),
                "order_inconsistent": sum(
                    1
                    for j, _ in labelled
                    if j.provenance.judge is not None
                    and j.provenance.judge.outcome == "order_inconsistent"
                ),
                "agreement": _agreement(kept, human, n_boot),
                "position_consistency": _position([j for j, _ in labelled]),
                "length_bias": _length(pairs, lens),
                "length_bias_humans_same_pairs": _length(
                    [h for h in human_pairs if (h.item_id, *h.pair) in on_pairs], lens
                ),
                "self_preference": self_preference(
                    pairs, human_pairs, by_id, family, families, n_boot
                )
                if pairs
                else None,
            }
        )
    section: dict[str, Any] = finite(
        {
            "judges": out,
            "human_sources": ["human"],
            "families": dict(families or {}),
            "confidence": CONFIDENCE,
            "n_boot": n_boot,
        }
    )
    return section


def finite(x: Any) -> Any:
    """JSON-ready: NaN and infinities as ``None`` (an undefined alpha), numpy scalars as Python."""
    if isinstance(x, float | np.floating):
        return float(x) if np.isfinite(x) else None
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, dict):
        return {str(k): finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [finite(v) for v in x]
    return x
