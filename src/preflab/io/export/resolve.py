"""Label resolution: which labels count when several raters (and passes) judged an item.

The policy, in the order it is applied to one item's judgments (steps 1-3 are the resolved
label set of :mod:`preflab.quality.labels`, shared with the quality report and dashboard):

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
4. **One vote per rater and pair, whatever the kind.** The unit is the canonical candidate
   pair: pairwise judgments, induced ranking pairs and rubric grades (a rater who graded both
   candidates votes for the better grade, :func:`compare_grades`) all vote on it; a rater who
   voted on the same pair through several judgments keeps the latest vote (same order as
   step 2). ``n_raters`` (and so ``min_raters``) counts these distinct raters.
5. **Aggregation** (pluggable, :data:`PairAggregator`): the default
   :func:`aggregate_pairwise` takes the plurality over ``{first better, second better, tie}``.
   A shared top count drops the pair as ``no-majority``; a tie winning drops it as ``tie``.
   ``strength`` is the median strength of the winning side; ``agreement`` the winning share.
   No aggregator breaks a tie by candidate order (see :mod:`.aggregators` for the models'
   margin).

**A veto is final.** Rubric grades compare lexicographically: an answer that failed a veto
loses to every answer that passed its vetoes (strength :data:`VETO_STRENGTH`), whatever the
scores and verbosity penalties; otherwise the reward (:meth:`Rubric.reward`, weighted,
verbosity penalty) decides. Two vetoed answers tie. Candidate pairs that no rater graded both
sides of (and nobody voted on otherwise) are ordered by the share of raters who passed the
answer's vetoes, then the mean reward (:func:`rubric_mean_pairs`).

Strength scale: 0..3 as in :class:`~preflab.schema.PairwiseJudgment` (1 slightly, 2 better,
3 much better). A vote of unknown strength counts for its side and not in the median; a pair
whose winning votes all lack a strength has ``strength=None`` (exports write no margin). Induced
ranking pairs have strength ``min(3, rank distance)``; rubric votes ``min(3, 3 * reward
difference)`` (3 when a veto decides).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Protocol

from ...quality.bias import length_in
from ...quality.bias import word_length as _quality_word_length
from ...quality.labels import (  # noqa: F401 - re-exported: the export's steps 1-3
    ADJUDICATION,
    counts_as_label,
    effective_judgments,
    revision_unit,
    submitted_at,
)
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
    #: ``None``: no winning vote said how much better
    strength: float | None
    n_raters: int
    agreement: float | None
    rater_hashes: tuple[str, ...]
    #: which judgment kinds the votes came from: "pairwise", "ranking", "rubric" (joined by "+")
    origin: str = "pairwise"


#: A vote's magnitude when its strength is unknown: ``±inf`` keeps the side (the sign) every
#: aggregator reads, and :func:`resolved_pair` leaves it out of the median strength.
UNKNOWN_VOTE_STRENGTH = math.inf


def _median_known(strengths: Sequence[float]) -> float | None:
    known = [s for s in strengths if math.isfinite(s)]
    return float(statistics.median(known)) if known else None


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
    #: "unary" (raters' thumbs) or "verifier" (a stored verdict, see :mod:`.routing`)
    origin: str = "unary"


@dataclass(frozen=True, slots=True)
class ResolvedSteps:
    item_id: str
    candidate_id: str
    steps: tuple[str, ...]
    labels: tuple[bool, ...]
    n_raters: int
    rater_hashes: tuple[str, ...]


#: The steps of an export in the order the whole-project pipeline runs them: reading each item,
#: aggregating the pairs of every item, then each gate over every row of one kind, then writing.
#: A streamed export runs them chunk by chunk; the drop log files each sample under its step,
#: so a gate's sample ids come out in the whole-project order either way.
DROP_PHASES = (
    "read",
    "aggregate",
    "truth",
    "min_raters.pairs",
    "min_raters.unary",
    "min_raters.steps",
    "spans.pairs",
    "length",
    "disagreement.pairs",
    "disagreement.unary",
    "rows",
)


@dataclass
class DropLog:
    """What a gate (or the aggregation) dropped and why: counts per reason, sample item ids.

    The samples are the first :attr:`sample_size` distinct items dropped, in the order of
    :data:`DROP_PHASES` (``phase``: the step now running), then of the items.
    """

    sample_size: int = 10
    counts: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    phased: dict[tuple[str, str], dict[int, list[str]]] = field(default_factory=dict)
    phase: int = 0

    def at(self, phase: str) -> None:
        """The step now dropping (one of :data:`DROP_PHASES`)."""
        self.phase = DROP_PHASES.index(phase)

    def drop(self, gate: str, reason: str, item_id: str, n: int = 1) -> None:
        self.counts[gate][reason] += n
        sample = self.phased.setdefault((gate, reason), {}).setdefault(self.phase, [])
        if len(sample) < self.sample_size and item_id not in sample:
            sample.append(item_id)

    def sample(self, gate: str, reason: str) -> list[str]:
        """The first :attr:`sample_size` distinct items, phase after phase."""
        out: list[str] = []
        for _, ids in sorted(self.phased.get((gate, reason), {}).items()):
            for item_id in ids:
                if len(out) < self.sample_size and item_id not in out:
                    out.append(item_id)
        return out

    def summary(self) -> dict[str, dict[str, Any]]:
        return {
            gate: {
                "dropped": sum(reasons.values()),
                "reasons": dict(sorted(reasons.items())),
                "sample_item_ids": {r: self.sample(gate, r) for r in sorted(reasons)},
            }
            for gate, reasons in sorted(self.counts.items())
        }


# -- steps 1-3: the resolved label set, shared with the quality report (one rule) -----------

_when = submitted_at


# -- step 4: votes --------------------------------------------------------------------------


def _hash(j: JudgmentBase) -> str:
    return j.provenance.rater_hash or j.provenance.rater_id


def pair_votes(
    labelled: Sequence[tuple[int, JudgmentBase]], extra: Iterable[PairVote] = ()
) -> list[PairVote]:
    """One vote per ``(pair, rater)`` from pairwise judgments, induced ranking pairs and ``extra``
    votes (rubric votes, :func:`rubric_votes`).

    Call on the output of :func:`effective_judgments` (``(row order, judgment)``). Applies the
    pass-2 override at the level of the canonical pair (an adjudicator's pairwise label
    overrides production rankings of the same pair); a rater who voted on a pair through
    several kinds keeps the latest vote.
    """
    if extra == ():  # the common case: pairwise labels only, one vote per pair and rater
        fast = _plain_pair_votes(labelled)
        if fast is not None:
            return fast
    votes: list[PairVote] = list(extra)
    for pos, j in labelled:
        if not isinstance(j, (PairwiseJudgment, RankingJudgment)):
            continue
        key = (int(j.provenance.review_pass), _when(j), pos)
        if isinstance(j, PairwiseJudgment):
            lo, hi = j.pair
            score = UNKNOWN_VOTE_STRENGTH * j.direction if j.score is None else float(j.score)
            votes.append(
                PairVote(
                    j.item_id,
                    lo,
                    hi,
                    j.provenance.rater_id,
                    _hash(j),
                    score,
                    "pairwise",
                    key[0],
                    key,
                )
            )
        else:
            rank = j.rank_of()
            for lo, hi, sign in j.induced_pairs():
                strength = min(3, abs(rank[lo] - rank[hi]))
                votes.append(
                    PairVote(
                        j.item_id,
                        lo,
                        hi,
                        j.provenance.rater_id,
                        _hash(j),
                        float(sign * strength),
                        "ranking",
                        key[0],
                        key,
                    )
                )
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
            out.append(
                max(group, key=lambda v: (v.order[0], v.order[1] if timed else 0, v.order[2]))
            )
    return out


def _plain_pair_votes(labelled: Sequence[tuple[int, JudgmentBase]]) -> list[PairVote] | None:
    """:func:`pair_votes` of labels that are all pairwise judgments of production passes with
    one label per ``(pair, rater)``: nothing to override or deduplicate, so the votes sorted by
    ``(lo, hi, rater)`` are exactly the general path's (pairs sorted, raters sorted within a
    pair). None when the labels are not of that shape (the caller takes the general path).
    Each vote's fields are those of the general path, the properties (``pair``,
    ``direction``, ``score``) read once each (``tests/io/test_export_pair_votes.py``)."""
    votes: list[PairVote] = []
    for pos, j in labelled:
        if j.__class__ is not PairwiseJudgment:
            return None
        prov = j.provenance
        review_pass = int(prov.review_pass)
        if review_pass >= ADJUDICATION:
            return None
        a, b = j.shown_order
        lo, hi = (a, b) if a <= b else (b, a)
        winner, strength = j.winner, j.strength
        direction = 0 if winner == "tie" else -1 if (a if winner == "a" else b) == lo else 1
        score = (
            UNKNOWN_VOTE_STRENGTH * direction if strength is None else float(direction * strength)
        )
        rater = prov.rater_id
        votes.append(
            PairVote(
                j.item_id,
                lo,
                hi,
                rater,
                prov.rater_hash or rater,
                score,
                "pairwise",
                review_pass,
                (review_pass, _when(j), pos),
            )
        )
    if len(votes) <= 1:
        return votes
    keyed = sorted(((v.lo, v.hi, v.rater), i) for i, v in enumerate(votes))
    for (k1, _), (k2, _) in zip(keyed, keyed[1:], strict=False):
        if k1 == k2:  # a rater with two labels on one pair: the general path chooses
            return None
    return [votes[i] for _, i in keyed]


def plain_pairwise(
    judgments: Sequence[JudgmentBase], order: Sequence[int]
) -> tuple[list[tuple[int, JudgmentBase]], list[PairVote]] | None:
    """``(effective_judgments(judgments, order), pair_votes(that))`` for one item whose labels
    are all pairwise judgments of production passes, one per ``(pair, rater)``: no label
    revises or overrides another, so the label set is every label in row order, and the votes
    are :func:`_plain_pair_votes`'. None for any other item (the caller takes the general
    steps; ``tests/io/test_export_pair_votes.py`` holds the two equal)."""
    labelled = sorted(zip(order, judgments, strict=True), key=itemgetter(0))
    votes = _plain_pair_votes(labelled)
    return None if votes is None else (labelled, votes)


# -- step 5: aggregation --------------------------------------------------------------------


class PairAggregator(Protocol):
    """Turns votes (of a whole project: model-based aggregators pool across items) into pairs.

    Units it cannot resolve are logged in ``drops`` under the gate ``"aggregation"``.
    """

    def __call__(
        self, votes: Iterable[PairVote], drops: DropLog | None = None
    ) -> list[ResolvedPair]: ...


def aggregate_pairwise(
    votes: Iterable[PairVote], drops: DropLog | None = None
) -> list[ResolvedPair]:
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


aggregate_pairwise.margin = "strict plurality: the winning side has more votes than any other side"  # type: ignore[attr-defined]


def plurality_pair(
    item_id: str, lo: str, hi: str, scores: Sequence[float], hashes: Sequence[str]
) -> ResolvedPair | str:
    """:func:`aggregate_pairwise`'s decision on one unit of pairwise votes (origin
    ``pairwise``) with these scores and rater hashes, in vote order: the pair, or the reason
    the unit is dropped (``no-majority``, ``tie``). The rows path (:mod:`.columnar`) decides a
    plain item's units with it, without a :class:`PairVote` each;
    ``tests/io/test_export_pair_votes.py`` holds it equal to :func:`aggregate_pairwise`."""
    sides: dict[int, list[float]] = {-1: [], 0: [], 1: []}
    for score in scores:
        sides[(score > 0) - (score < 0)].append(abs(score))
    counts = sorted(((len(s), side) for side, s in sides.items()), reverse=True)
    (top, side), (second, _) = counts[0], counts[1]
    if top == second:
        return "no-majority"
    if side == 0:
        return "tie"
    chosen, rejected = (lo, hi) if side < 0 else (hi, lo)
    return ResolvedPair(
        item_id=item_id,
        chosen_id=chosen,
        rejected_id=rejected,
        strength=_median_known(sides[side]),
        n_raters=len(scores),
        agreement=top / len(scores),
        rater_hashes=tuple(sorted(set(hashes))),
        origin="pairwise",
    )


def resolved_pair(
    item_id: str,
    lo: str,
    hi: str,
    side: int,
    votes: Sequence[PairVote],
    strengths: Sequence[float],
    agreement: float,
) -> ResolvedPair:
    """The exported pair for a unit an aggregator decided: ``side`` < 0 means ``lo`` won."""
    chosen, rejected = (lo, hi) if side < 0 else (hi, lo)
    return ResolvedPair(
        item_id=item_id,
        chosen_id=chosen,
        rejected_id=rejected,
        strength=_median_known(strengths),
        n_raters=len(votes),
        agreement=agreement,
        rater_hashes=tuple(sorted({v.rater_hash for v in votes})),
        origin="+".join(sorted({v.origin for v in votes})),
    )


# -- rubric grades --------------------------------------------------------------------------

RubricLookup = Callable[[str | None, int | None], Rubric | None]

#: Strength of a rubric vote decided by a veto (one answer passed its vetoes, the other did
#: not): "much better", whatever the scores, because a veto is final.
VETO_STRENGTH = 3.0


@dataclass(frozen=True, slots=True)
class Grade:
    """One rater's rubric grade of one candidate, ready to compare.

    Lexicographic: ``passed`` (no veto failed) first, then ``reward``
    (:meth:`Rubric.reward`: weighted, verbosity penalty applied; 0 when a veto failed).
    """

    passed: bool
    reward: float
    rater: str
    rater_hash: str
    review_pass: int
    order: tuple[Any, ...]


def compare_grades(a: Grade, b: Grade) -> float:
    """A rater's vote on ``a`` vs ``b`` from their grades: < 0 ``a`` better, 0 tie, > 0 ``b`` better.

    A vetoed answer loses to every passing answer with :data:`VETO_STRENGTH`, whatever the
    penalties; otherwise the strength is ``min(3, 3 * reward difference)``. Two vetoed answers
    tie (both rewards are 0).
    """
    if a.passed != b.passed:
        return -VETO_STRENGTH if a.passed else VETO_STRENGTH
    diff = b.reward - a.reward
    return math.copysign(min(3.0, 3.0 * abs(diff)), diff) if diff else 0.0


def rubric_grades(
    item: Item,
    labelled: Sequence[tuple[int, JudgmentBase]],
    rubric_for: RubricLookup,
    length_fn: LengthFn = word_length,
    drops: DropLog | None = None,
) -> dict[str, dict[str, Grade]]:
    """``{candidate: {rater: grade}}`` from rubric judgments (after :func:`effective_judgments`)."""
    grades: dict[str, dict[str, Grade]] = defaultdict(dict)
    for pos, j in labelled:
        if not isinstance(j, RubricJudgment):
            continue
        rubric = rubric_for(j.provenance.rubric_id, j.provenance.rubric_version)
        if rubric is None:
            if drops is not None:
                drops.drop("rubric", "unknown-rubric", item.key)
            continue
        problems = rubric.check_scores(j.scores, j.vetoes_failed)
        if problems:
            if drops is not None:
                drops.drop("rubric", "invalid-scores", item.key)
            continue
        length = None
        if rubric.verbosity_penalty is not None:
            text = item.candidate(j.candidate_id).as_text()
            # the rubric's declared unit, whatever the export measures in (issue 16 §1)
            length = length_in(rubric.verbosity_penalty.unit, length_fn)(text)
        review_pass = int(j.provenance.review_pass)
        grades[j.candidate_id][j.provenance.rater_id] = Grade(
            passed=not j.vetoes_failed,
            reward=rubric.reward(j.scores, j.vetoes_failed, length),
            rater=j.provenance.rater_id,
            rater_hash=_hash(j),
            review_pass=review_pass,
            order=(review_pass, _when(j), pos),
        )
    return grades


def rubric_votes(item_id: str, grades: dict[str, dict[str, Grade]]) -> list[PairVote]:
    """One vote per rater and candidate pair the rater graded both sides of (:func:`compare_grades`).

    A vote counts as the later of its two grades (for "latest vote per rater" across kinds)
    and as an adjudication only when both grades are.
    """
    votes = []
    ids = sorted(grades)
    for i, lo in enumerate(ids):
        for hi in ids[i + 1 :]:
            for rater in sorted(set(grades[lo]) & set(grades[hi])):
                a, b = grades[lo][rater], grades[hi][rater]
                later = a if _order_key(a.order, b.order) >= _order_key(b.order, a.order) else b
                votes.append(
                    PairVote(
                        item_id,
                        lo,
                        hi,
                        rater,
                        a.rater_hash,
                        compare_grades(a, b),
                        "rubric",
                        min(a.review_pass, b.review_pass),
                        later.order,
                    )
                )
    return votes


def _order_key(mine: tuple[Any, ...], other: tuple[Any, ...]) -> tuple[Any, ...]:
    """Sort key of ``mine`` against ``other``: times compared only when both have one."""
    timed = mine[1] is not None and other[1] is not None
    return (mine[0], mine[1] if timed else 0, mine[2])


def _mean_key(grades: dict[str, Grade]) -> tuple[float, float]:
    """A candidate's lexicographic key over raters: share that passed its vetoes, then mean reward."""
    values = list(grades.values())
    return (sum(g.passed for g in values) / len(values), statistics.fmean(g.reward for g in values))


def rubric_mean_pairs(
    item_id: str,
    grades: dict[str, dict[str, Grade]],
    decided_elsewhere: AbstractSet[tuple[str, str]] = frozenset(),
    drops: DropLog | None = None,
) -> list[ResolvedPair]:
    """Pairs no rater graded both sides of, ordered by the candidates' grades over raters.

    Only for candidate pairs with no vote at all (``decided_elsewhere`` lists the pairs that
    have one): e.g. each candidate graded in its own task by other raters. Lexicographic like
    :func:`compare_grades`: the share of raters who passed the answer's vetoes first, then the
    mean reward; equal keys are dropped as ``tie``. ``agreement`` is ``None`` (no rater
    compared the two).
    """
    ids = sorted(grades)
    out = []
    for i, a in enumerate(ids):
        for b in ids[i + 1 :]:
            if (a, b) in decided_elsewhere:
                continue
            key_a, key_b = _mean_key(grades[a]), _mean_key(grades[b])
            if key_a == key_b:
                if drops is not None:
                    drops.drop("aggregation", "tie", item_id)
                continue
            chosen, rejected = (a, b) if key_a > key_b else (b, a)
            veto = key_a[0] != key_b[0]
            raters = {g.rater_hash for g in (*grades[a].values(), *grades[b].values())}
            out.append(
                ResolvedPair(
                    item_id=item_id,
                    chosen_id=chosen,
                    rejected_id=rejected,
                    strength=VETO_STRENGTH if veto else min(3.0, 3.0 * abs(key_a[1] - key_b[1])),
                    n_raters=len(raters),
                    agreement=None,
                    rater_hashes=tuple(sorted(raters)),
                    origin="rubric",
                )
            )
    return out


def rubric_pairs(
    item: Item,
    judgments: Sequence[JudgmentBase],
    rubric_for: RubricLookup,
    length_fn: LengthFn = word_length,
    drops: DropLog | None = None,
    aggregator: PairAggregator | None = None,
) -> list[ResolvedPair]:
    """Rubric grades alone resolved into pairs (judgments after :func:`effective_judgments`).

    Each rater who graded both candidates votes (:func:`rubric_votes`), the votes are
    aggregated (plurality by default); pairs nobody graded both sides of follow
    :func:`rubric_mean_pairs`. The export pipeline instead pools these votes with pairwise and
    ranking votes of the same pair (:func:`item_pair_votes`).
    """
    grades = rubric_grades(item, list(enumerate(judgments)), rubric_for, length_fn, drops)
    votes = pair_votes([], rubric_votes(item.key, grades))
    resolved = list((aggregator or aggregate_pairwise)(votes, drops))
    voted = {(v.lo, v.hi) for v in votes}
    return resolved + rubric_mean_pairs(item.key, grades, voted, drops)


def item_pair_votes(
    item: Item,
    labelled: Sequence[tuple[int, JudgmentBase]],
    rubric_for: RubricLookup,
    length_fn: LengthFn = word_length,
    drops: DropLog | None = None,
) -> tuple[list[PairVote], list[ResolvedPair]]:
    """Every vote on the item's candidate pairs, whatever kind of label it came from.

    Pairwise judgments, induced ranking pairs and rubric grades (a rater who graded both
    candidates) are one unit per canonical pair with one vote per rater (:func:`pair_votes`).
    Returns ``(votes, pairs)``: ``pairs`` are the rubric-only pairs nobody voted on
    (:func:`rubric_mean_pairs`).
    """
    if not any(isinstance(j, RubricJudgment) for _, j in labelled):  # the common case: no grades
        return pair_votes(labelled), []
    grades = rubric_grades(item, labelled, rubric_for, length_fn, drops)
    votes = pair_votes(labelled, rubric_votes(item.key, grades))
    voted = {(v.lo, v.hi) for v in votes}
    return votes, rubric_mean_pairs(item.key, grades, voted, drops)


# -- unary and steps ------------------------------------------------------------------------


def resolve_unary(
    judgments: Sequence[JudgmentBase], drops: DropLog | None = None
) -> list[ResolvedUnary]:
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
            ResolvedUnary(
                item_id,
                cand,
                up > down,
                len(js),
                max(up, down) / len(js),
                tuple(sorted({_hash(j) for j in js})),
            )
        )
    return out


def resolve_steps(
    judgments: Sequence[JudgmentBase], drops: DropLog | None = None
) -> list[ResolvedSteps]:
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
        out.append(
            ResolvedSteps(
                item_id,
                cand,
                tuple(js[0].steps[: len(labels)]),
                tuple(labels),
                len(js),
                tuple(sorted({_hash(j) for j in js})),
            )
        )
    return out


def step_label(verdict: int) -> bool:
    """+1 -> True, -1 -> False, 0 (neutral) -> :data:`NEUTRAL_STEP_LABEL`."""
    return NEUTRAL_STEP_LABEL if verdict == 0 else verdict > 0


def accepted_demonstrations(
    judgments: Sequence[JudgmentBase], drops: DropLog | None = None
) -> list[DemonstrationJudgment]:
    """Demonstrations whose latest status is ``accepted`` (after :func:`effective_judgments`);
    the others are counted in ``drops`` under ``demonstration_status`` as pending or rejected."""
    demos = [j for j in judgments if isinstance(j, DemonstrationJudgment)]
    if drops is not None:
        for j in demos:
            if j.status != "accepted":
                drops.drop("demonstration_status", j.status, j.item_id)
    return [j for j in demos if j.status == "accepted"]
