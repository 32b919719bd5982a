"""Label resolution: which labels count when several raters (and passes) judged an item.

The policy, in the order it is applied to one item's judgments:

1. **Source.** ``source == "ai"`` labels never pass as human: dropped unless ``include_ai``
   (done by the caller, which logs the drop). ``ai_assisted`` labels are kept.
2. **Revisions.** Per ``(kind, unit, rater)`` only the latest label counts: the highest review
   pass, then the latest ``submitted_at`` (when every revision has one), then row order.
   Units: the canonical pair (pairwise), the item (ranking), the candidate (rubric, unary,
   steps), the item and author (demonstration). A review-pass (1) label by another rater is
   simply one more vote.
3. **Adjudication.** When any label of a unit comes from review pass 2 (adjudication), only
   pass-2 labels count for that unit; production and review labels are set aside entirely.
   For pairs the unit is the canonical candidate pair, whatever kind (pairwise judgment or
   ranking) the labels came from.
4. **One vote per rater and pair.** Rankings expand to induced pairs; a rater who voted on the
   same pair through several judgments keeps the latest vote (same order as step 2).
5. **Aggregation** (pluggable, :data:`PairAggregator`): the default
   :func:`aggregate_pairwise` takes the plurality over ``{first better, second better, tie}``.
   A shared top count drops the pair as ``no-majority``; a tie winning drops it as ``tie``.
   ``strength`` is the median strength of the winning side; ``agreement`` the winning share.

Rubric grades do not vote: each candidate's reward (:meth:`Rubric.reward`, weighted, vetoes
applied, verbosity penalty) is averaged over raters and every candidate pair of the item is
ordered by it (equal means: dropped as ``tie``); see :func:`rubric_pairs`.

Strength scale: 0..3 as in :class:`~preflab.schema.PairwiseJudgment` (1 slightly, 2 better,
3 much better). Induced ranking pairs have strength ``min(3, rank distance)``; rubric pairs
``min(3, 3 * reward difference)``.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any, Protocol

from ...quality.bias import length_in
from ...quality.bias import word_length as _quality_word_length
from ...schema import (
    DemonstrationJudgment,
    Item,
    JudgmentBase,
    PairwiseJudgment,
    RankingJudgment,
    Rubric,
    RubricJudgment,
    StepsJudgment,
    UnaryJudgment,
)

ADJUDICATION = 2

#: How a neutral (0) step verdict is exported in stepwise labels. PRM800K calls 0 "neutral":
#: reasonable but not advancing; it is not an error, so it becomes ``True`` (only -1 is an
#: error). Same choice as counting neutral steps as positive in Lightman et al. (2023) §2.
NEUTRAL_STEP_LABEL = True

LengthFn = Callable[[str], int]

#: Whitespace-separated words: the default length for gates and verbosity penalties (one
#: definition, shared with the quality engine's length-bias audit).
word_length = _quality_word_length


# -- the resolved records -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResolvedPair:
    """One exported preference: ``chosen_id`` beats ``rejected_id`` for ``item_id``."""

    item_id: str
    chosen_id: str
    rejected_id: str
    strength: float
    n_raters: int
    agreement: float | None
    rater_hashes: tuple[str, ...]
    #: which judgment kinds the votes came from: "pairwise", "ranking", "rubric" (joined by "+")
    origin: str = "pairwise"


@dataclass(frozen=True, slots=True)
class PairVote:
    """One rater's vote on a canonical pair ``lo < hi``; ``score`` < 0: ``lo`` better."""

    item_id: str
    lo: str
    hi: str
    rater: str
    rater_hash: str
    score: float
    origin: str
    review_pass: int
    order: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class ResolvedUnary:
    item_id: str
    candidate_id: str
    label: bool
    n_raters: int
    agreement: float
    rater_hashes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ResolvedSteps:
    item_id: str
    candidate_id: str
    steps: tuple[str, ...]
    labels: tuple[bool, ...]
    n_raters: int
    rater_hashes: tuple[str, ...]


@dataclass
class DropLog:
    """What a gate (or the aggregation) dropped and why: counts per reason, sample item ids."""

    sample_size: int = 10
    counts: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    samples: dict[str, dict[str, list[str]]] = field(default_factory=lambda: defaultdict(dict))

    def drop(self, gate: str, reason: str, item_id: str, n: int = 1) -> None:
        self.counts[gate][reason] += n
        sample = self.samples[gate].setdefault(reason, [])
        if len(sample) < self.sample_size and item_id not in sample:
            sample.append(item_id)

    def summary(self) -> dict[str, dict[str, Any]]:
        return {
            gate: {
                "dropped": sum(reasons.values()),
                "reasons": dict(sorted(reasons.items())),
                "sample_item_ids": {r: list(self.samples[gate].get(r, [])) for r in sorted(reasons)},
            }
            for gate, reasons in sorted(self.counts.items())
        }


# -- steps 2 and 3: revisions and adjudication ---------------------------------------------


def _when(judgment: JudgmentBase) -> datetime | None:
    ts = judgment.provenance.submitted_at
    if ts is not None and ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    return ts


def _latest(group: Sequence[tuple[int, JudgmentBase]]) -> tuple[int, JudgmentBase]:
    """The latest of one rater's labels on one unit: pass, then time (if all have one), then row."""
    timed = all(_when(j) is not None for _, j in group)
    return max(
        group,
        key=lambda pj: (int(pj[1].provenance.review_pass), _when(pj[1]) if timed else 0, pj[0]),
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
        pos, j = group[0] if len(group) == 1 else _latest(group)  # mostly one label: no choice to make
        latest.append((pos, j, key[:2]))
    latest.sort(key=itemgetter(0))
    adjudicated = {
        unit
        for _, j, unit in latest
        if int(j.provenance.review_pass) >= ADJUDICATION and not isinstance(j, DemonstrationJudgment)
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


# -- step 4: votes --------------------------------------------------------------------------


def _hash(j: JudgmentBase) -> str:
    return j.provenance.rater_hash or j.provenance.rater_id


def pair_votes(labelled: Sequence[tuple[int, JudgmentBase]]) -> list[PairVote]:
    """One vote per ``(pair, rater)`` from pairwise judgments and induced ranking pairs.

    Call on the output of :func:`effective_judgments` (``(row order, judgment)``). Applies the
    pass-2 override at the level of the canonical pair (an adjudicator's pairwise label
    overrides production rankings of the same pair).
    """
    votes: list[PairVote] = []
    for pos, j in labelled:
        if not isinstance(j, (PairwiseJudgment, RankingJudgment)):
            continue
        key = (int(j.provenance.review_pass), _when(j), pos)
        if isinstance(j, PairwiseJudgment):
            lo, hi = j.pair
            votes.append(PairVote(j.item_id, lo, hi, j.provenance.rater_id, _hash(j), float(j.score),
                                  "pairwise", key[0], key))
        else:
            rank = j.rank_of()
            for lo, hi, sign in j.induced_pairs():
                strength = min(3, abs(rank[lo] - rank[hi]))
                votes.append(PairVote(j.item_id, lo, hi, j.provenance.rater_id, _hash(j),
                                      float(sign * strength), "ranking", key[0], key))
    if len(votes) <= 1:  # nothing to override or deduplicate
        return votes
    by_pair: dict[tuple[str, str], list[PairVote]] = defaultdict(list)
    for v in votes:
        by_pair[(v.lo, v.hi)].append(v)
    out: list[PairVote] = []
    for pair in sorted(by_pair):
        pv = by_pair[pair]
        if any(v.review_pass >= ADJUDICATION for v in pv):
            pv = [v for v in pv if v.review_pass >= ADJUDICATION]
        per_rater: dict[str, list[PairVote]] = defaultdict(list)
        for v in pv:
            per_rater[v.rater].append(v)
        for rater in sorted(per_rater):
            group = per_rater[rater]
            if len(group) == 1:  # the common case: one vote, nothing to choose
                out.append(group[0])
                continue
            timed = all(v.order[1] is not None for v in group)
            out.append(max(group, key=lambda v: (v.order[0], v.order[1] if timed else 0, v.order[2])))
    return out


# -- step 5: aggregation --------------------------------------------------------------------


class PairAggregator(Protocol):
    """Turns votes (of a whole project: model-based aggregators pool across items) into pairs.

    Units it cannot resolve are logged in ``drops`` under the gate ``"aggregation"``.
    """

    def __call__(self, votes: Iterable[PairVote], drops: DropLog | None = None) -> list[ResolvedPair]: ...


def aggregate_pairwise(votes: Iterable[PairVote], drops: DropLog | None = None) -> list[ResolvedPair]:
    """Plurality vote per pair over ``{lo better, hi better, tie}``; see the module docstring.

    >>> v = lambda r, s: PairVote("i", "a", "b", r, "h" + r, s, "pairwise", 0, (0, None, 0))
    >>> aggregate_pairwise([v("1", -2), v("2", -3), v("3", 1)])
    [ResolvedPair(item_id='i', chosen_id='a', rejected_id='b', strength=2.5, n_raters=3, agreement=0.6666666666666666, rater_hashes=('h1', 'h2', 'h3'), origin='pairwise')]
    """
    by_unit: dict[tuple[str, str, str], list[PairVote]] = {}
    for v in votes:
        by_unit.setdefault((v.item_id, v.lo, v.hi), []).append(v)
    out: list[ResolvedPair] = []
    for (item_id, lo, hi), vs in by_unit.items():
        sides: dict[int, list[float]] = {-1: [], 0: [], 1: []}
        for v in vs:
            sides[(v.score > 0) - (v.score < 0)].append(abs(v.score))
        counts = sorted(((len(s), side) for side, s in sides.items()), reverse=True)
        (top, side), (second, _) = counts[0], counts[1]
        if top == second:
            if drops is not None:
                drops.drop("aggregation", "no-majority", item_id)
            continue
        if side == 0:
            if drops is not None:
                drops.drop("aggregation", "tie", item_id)
            continue
        out.append(resolved_pair(item_id, lo, hi, side, vs, sides[side], agreement=top / len(vs)))
    return out


def resolved_pair(
    item_id: str, lo: str, hi: str, side: int, votes: Sequence[PairVote], strengths: Sequence[float], agreement: float
) -> ResolvedPair:
    """The exported pair for a unit an aggregator decided: ``side`` < 0 means ``lo`` won."""
    chosen, rejected = (lo, hi) if side < 0 else (hi, lo)
    return ResolvedPair(
        item_id=item_id,
        chosen_id=chosen,
        rejected_id=rejected,
        strength=float(statistics.median(strengths)),
        n_raters=len(votes),
        agreement=agreement,
        rater_hashes=tuple(sorted({v.rater_hash for v in votes})),
        origin="+".join(sorted({v.origin for v in votes})),
    )


# -- rubric grades --------------------------------------------------------------------------

RubricLookup = Callable[[str | None, int | None], Rubric | None]


def rubric_rewards(
    item: Item,
    judgments: Sequence[JudgmentBase],
    rubric_for: RubricLookup,
    length_fn: LengthFn = word_length,
    drops: DropLog | None = None,
) -> dict[str, dict[str, float]]:
    """``{candidate: {rater: reward}}`` from rubric judgments (after :func:`effective_judgments`)."""
    rewards: dict[str, dict[str, float]] = defaultdict(dict)
    for j in judgments:
        if not isinstance(j, RubricJudgment):
            continue
        rubric = rubric_for(j.provenance.rubric_id, j.provenance.rubric_version)
        if rubric is None:
            if drops is not None:
                drops.drop("rubric", "unknown-rubric", item.id)
            continue
        problems = rubric.check_scores(j.scores, j.vetoes_failed)
        if problems:
            if drops is not None:
                drops.drop("rubric", "invalid-scores", item.id)
            continue
        length = None
        if rubric.verbosity_penalty is not None:
            text = item.candidate(j.candidate_id).as_text()
            # the rubric's declared unit, whatever the export measures in (issue 16 §1)
            length = length_in(rubric.verbosity_penalty.unit, length_fn)(text)
        rewards[j.candidate_id][_hash(j)] = rubric.reward(j.scores, j.vetoes_failed, length)
    return rewards


def rubric_pairs(
    item: Item,
    judgments: Sequence[JudgmentBase],
    rubric_for: RubricLookup,
    length_fn: LengthFn = word_length,
    drops: DropLog | None = None,
) -> list[ResolvedPair]:
    """Candidate pairs ordered by mean rubric reward over raters; equal means are dropped.

    ``agreement``: among raters who graded both candidates, the share whose own rewards order
    the pair the same way (``None`` when no rater graded both).
    """
    rewards = rubric_rewards(item, judgments, rubric_for, length_fn, drops)
    ids = sorted(rewards)
    out = []
    for i, a in enumerate(ids):
        for b in ids[i + 1 :]:
            ra, rb = rewards[a], rewards[b]
            mean_a, mean_b = statistics.fmean(ra.values()), statistics.fmean(rb.values())
            if mean_a == mean_b:
                if drops is not None:
                    drops.drop("aggregation", "tie", item.id)
                continue
            chosen, rejected = (a, b) if mean_a > mean_b else (b, a)
            both = sorted(set(ra) & set(rb))
            sign = 1 if mean_a > mean_b else -1
            agree = [((ra[r] > rb[r]) - (ra[r] < rb[r])) == sign for r in both]
            raters = tuple(sorted(set(ra) | set(rb)))
            out.append(
                ResolvedPair(
                    item_id=item.id,
                    chosen_id=chosen,
                    rejected_id=rejected,
                    strength=min(3.0, 3.0 * abs(mean_a - mean_b)),
                    n_raters=len(raters),
                    agreement=(sum(agree) / len(agree)) if agree else None,
                    rater_hashes=raters,
                    origin="rubric",
                )
            )
    return out


# -- unary and steps ------------------------------------------------------------------------


def resolve_unary(judgments: Sequence[JudgmentBase], drops: DropLog | None = None) -> list[ResolvedUnary]:
    """Majority thumb per candidate (after :func:`effective_judgments`); an even split is dropped."""
    by_cand: dict[tuple[str, str], list[UnaryJudgment]] = defaultdict(list)
    for j in judgments:
        if isinstance(j, UnaryJudgment):
            by_cand[(j.item_id, j.candidate_id)].append(j)
    out = []
    for (item_id, cand), js in sorted(by_cand.items()):
        up = sum(j.label for j in js)
        down = len(js) - up
        if up == down:
            if drops is not None:
                drops.drop("aggregation", "no-majority", item_id)
            continue
        out.append(
            ResolvedUnary(item_id, cand, up > down, len(js), max(up, down) / len(js),
                          tuple(sorted({_hash(j) for j in js})))
        )
    return out


def resolve_steps(judgments: Sequence[JudgmentBase], drops: DropLog | None = None) -> list[ResolvedSteps]:
    """Step labels per candidate: per step the majority over raters who labelled it.

    Verdicts map by :func:`step_label`. Labels stop at the first step the majority calls wrong
    (up to and including the first error); an even split on a step drops the candidate as
    ``no-majority``; raters who split the answer into different steps: ``steps-differ``. With one
    rater this is exactly that rater's verdicts.
    """
    by_cand: dict[tuple[str, str], list[StepsJudgment]] = defaultdict(list)
    for j in judgments:
        if isinstance(j, StepsJudgment):
            by_cand[(j.item_id, j.candidate_id)].append(j)
    out = []
    for (item_id, cand), js in sorted(by_cand.items()):
        if len({tuple(j.steps) for j in js}) > 1:
            if drops is not None:
                drops.drop("aggregation", "steps-differ", item_id)
            continue
        labels: list[bool] = []
        for i in range(max(len(j.verdicts) for j in js)):
            votes = [step_label(j.verdicts[i]) for j in js if i < len(j.verdicts)]
            good = sum(votes)
            if good * 2 == len(votes):
                labels = []
                break
            labels.append(good * 2 > len(votes))
            if not labels[-1]:
                break
        if not labels:
            if drops is not None:
                drops.drop("aggregation", "no-majority", item_id)
            continue
        out.append(ResolvedSteps(item_id, cand, tuple(js[0].steps[: len(labels)]), tuple(labels), len(js),
                                 tuple(sorted({_hash(j) for j in js}))))
    return out


def step_label(verdict: int) -> bool:
    """+1 -> True, -1 -> False, 0 (neutral) -> :data:`NEUTRAL_STEP_LABEL`."""
    return NEUTRAL_STEP_LABEL if verdict == 0 else verdict > 0


def accepted_demonstrations(judgments: Sequence[JudgmentBase]) -> list[DemonstrationJudgment]:
    """Demonstrations whose latest status is ``accepted`` (after :func:`effective_judgments`)."""
    return [j for j in judgments if isinstance(j, DemonstrationJudgment) and j.status == "accepted"]
