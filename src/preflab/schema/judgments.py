"""Judgment kinds. One class per kind, registered in :data:`JUDGMENT_KINDS`.

Every judgment reduces to rows of the long label table (see :class:`LabelRow`) that the
quality engine consumes; each kind says how in its ``label_rows`` method, so no other module
needs an ``if kind == ...`` ladder.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator, model_validator

from .common import FieldProblem, Identifier, Message, StrictModel
from .provenance import Provenance
from .spans import MAX_SPANS, CritiqueSpan, canonical_spans, span_candidate_problems


class LabelRow(BaseModel):
    """One row of the long label table ``(unit, rater, dimension, value)``.

    ``unit`` is what was labelled: an item, an item's candidate (``item::cand``), a candidate
    pair (``item::a|b``, sorted ids) or a step (``item::cand::step3``).
    """

    model_config = ConfigDict(frozen=True)

    item_id: str
    unit: str
    rater: str
    dimension: str
    value: float
    kind: str


def pair_unit(item_id: str, a: str, b: str) -> str:
    lo, hi = (a, b) if a <= b else (b, a)  # sorted((a, b)), without the list (hot path)
    return f"{item_id}::{lo}|{hi}"


class JudgmentBase(StrictModel):
    kind: ClassVar[str]
    #: how many candidate answers an item needs for this kind: ``(least, most)``, ``None`` = no limit
    candidates_needed: ClassVar[tuple[int, int | None]] = (1, 1)
    item_id: Identifier
    rationale: str | None = Field(default=None, max_length=20_000)
    provenance: Provenance

    def candidate_ids(self) -> list[str]:
        """Candidates this judgment refers to (checked against the item on import/submit)."""
        raise NotImplementedError

    def label_rows(self) -> list[LabelRow]:
        raise NotImplementedError

    def _row(self, unit: str, dimension: str, value: float) -> LabelRow:
        return LabelRow(
            item_id=self.item_id,
            unit=unit,
            rater=self.provenance.rater_id,
            dimension=dimension,
            value=float(value),
            kind=self.kind,
        )


class SpannedJudgment(JudgmentBase):
    """A kind that compares or grades answers, so it may carry critique spans on them
    (:mod:`.spans`): each on an answer the judgment names, kept in their canonical order (an
    exact duplicate refused); no spans is ``None``, left out of the stored form."""

    spans: list[CritiqueSpan] | None = Field(default=None, max_length=MAX_SPANS)

    @field_validator("spans")
    @classmethod
    def _canonical(cls, v: list[CritiqueSpan] | None) -> list[CritiqueSpan] | None:
        return canonical_spans(v)

    @model_validator(mode="after")
    def _spans_on_named_answers(self) -> SpannedJudgment:
        for i, reason in span_candidate_problems(self.spans or [], self.candidate_ids()):
            raise FieldProblem(("spans", i, "candidate_id"), reason)
        return self


#: the most criteria an item may carry (:mod:`.criteria`)
MAX_CRITERIA = 200

STRENGTH_NAMES = {0: "tie", 1: "slightly better", 2: "better", 3: "much better"}


class PairwiseJudgment(SpannedJudgment):
    """A vs B with a strength (0 tie, 1 slightly, 2 better, 3 much better), or ``None``:
    strength unknown (a source that records only the winner, e.g. PandaLM or hh-rlhf). An
    unknown strength stays unknown: it is never filled in, so no export invents a margin.

    ``shown_order`` is the order the rater saw: ``shown_order[0]`` was shown as A. The canonical
    form is :attr:`pair` (sorted candidate ids) with :attr:`score` in -3..3, negative meaning
    the first canonical candidate is better.

    >>> j = PairwiseJudgment(item_id="i", shown_order=("y", "x"), winner="a", strength=2,
    ...                      provenance={"rater_id": "r1"})
    >>> j.pair, j.score, j.chosen
    (('x', 'y'), 2, 'y')
    """

    kind: ClassVar[str] = "pairwise"
    candidates_needed: ClassVar[tuple[int, int | None]] = (2, 2)
    type: Literal["pairwise"] = Field(default="pairwise", alias="kind")
    shown_order: tuple[Identifier, Identifier]
    winner: Literal["a", "b", "tie"]
    #: ``None`` (left out of the wire form): the source did not say how much better
    strength: int | None = Field(default=None, ge=0, le=3)

    @model_validator(mode="after")
    def _consistent(self) -> PairwiseJudgment:
        if self.shown_order[0] == self.shown_order[1]:
            raise ValueError("shown_order must name two different candidates")
        if self.winner == "tie" and self.strength is None:
            raise ValueError("a tie has strength 0 (a tie's strength is never unknown)")
        if self.strength is not None and (self.winner == "tie") != (self.strength == 0):
            raise ValueError("winner 'tie' goes with strength 0, and strength 0 with 'tie'")
        return self

    @classmethod
    def from_canonical(
        cls,
        item_id: str,
        pair: tuple[str, str],
        score: int,
        provenance: Provenance | dict[str, Any],
        shown_order: tuple[str, str] | None = None,
        rationale: str | None = None,
    ) -> PairwiseJudgment:
        """Build from the stored form: sorted ``pair`` and signed ``score``."""
        lo, hi = sorted(pair)
        shown = tuple(shown_order) if shown_order else (lo, hi)
        if score == 0:
            winner = "tie"
        else:
            better = lo if score < 0 else hi
            winner = "a" if shown[0] == better else "b"
        return cls(
            item_id=item_id,
            shown_order=shown,
            winner=winner,
            strength=abs(int(score)),
            provenance=provenance,
            rationale=rationale,
        )

    @property
    def pair(self) -> tuple[str, str]:
        a, b = self.shown_order  # two candidates (validated); compared, not sorted (hot path)
        return (a, b) if a <= b else (b, a)

    @property
    def chosen(self) -> str | None:
        if self.winner == "tie":
            return None
        return self.shown_order[0] if self.winner == "a" else self.shown_order[1]

    @property
    def rejected(self) -> str | None:
        if self.winner == "tie":
            return None
        return self.shown_order[1] if self.winner == "a" else self.shown_order[0]

    @property
    def direction(self) -> int:
        """-1: ``pair[0]`` better, 1: ``pair[1]`` better, 0: tie (known even when the strength is not)."""
        winner = self.winner
        if winner == "tie":
            return 0
        a, b = self.shown_order
        chosen = a if winner == "a" else b
        return -1 if chosen == min(a, b) else 1

    @property
    def score(self) -> int | None:
        """Signed strength over the canonical pair: negative = ``pair[0]`` better; ``None`` when
        the strength is unknown (use :attr:`direction` for the winner)."""
        if self.strength is None:
            return None
        return self.direction * self.strength

    @property
    def first_shown_chosen(self) -> bool | None:
        return None if self.winner == "tie" else self.winner == "a"

    def candidate_ids(self) -> list[str]:
        return list(self.shown_order)

    def label_rows(self) -> list[LabelRow]:
        unit = pair_unit(self.item_id, *self.shown_order)
        direction = self.direction
        rows = [self._row(unit, "winner", direction)]
        if self.strength is not None:  # an unknown strength is no row, not a made-up value
            rows.append(self._row(unit, "strength", direction * self.strength))  # self.score
        return rows


class RankingJudgment(SpannedJudgment):
    """An order over N candidates, best first; each entry is a group of tied candidates.

    >>> j = RankingJudgment(item_id="i", order=[["b"], ["a", "c"]], provenance={"rater_id": "r"})
    >>> j.induced_pairs()
    [('a', 'b', 1), ('a', 'c', 0), ('b', 'c', -1)]
    """

    kind: ClassVar[str] = "ranking"
    candidates_needed: ClassVar[tuple[int, int | None]] = (2, None)
    type: Literal["ranking"] = Field(default="ranking", alias="kind")
    order: list[list[Identifier]] = Field(min_length=1)

    @model_validator(mode="after")
    def _groups(self) -> RankingJudgment:
        flat = [c for group in self.order for c in group]
        if any(len(g) == 0 for g in self.order):
            raise ValueError("a ranking group cannot be empty")
        if len(set(flat)) != len(flat):
            raise ValueError("a candidate appears more than once in the ranking")
        if len(flat) < 2:
            raise ValueError("a ranking needs at least two candidates")
        return self

    def rank_of(self) -> dict[str, int]:
        return {c: rank for rank, group in enumerate(self.order) for c in group}

    def induced_pairs(self) -> list[tuple[str, str, int]]:
        """``(lo, hi, sign)`` for every sorted pair: -1 lo better, 1 hi better, 0 tie."""
        rank = self.rank_of()
        ids = sorted(rank)
        out = []
        for i, lo in enumerate(ids):
            for hi in ids[i + 1 :]:
                diff = rank[lo] - rank[hi]
                out.append((lo, hi, (diff > 0) - (diff < 0)))
        return out

    def candidate_ids(self) -> list[str]:
        return [c for group in self.order for c in group]

    def label_rows(self) -> list[LabelRow]:
        return [
            self._row(pair_unit(self.item_id, lo, hi), "winner", sign)
            for lo, hi, sign in self.induced_pairs()
        ]


class RubricJudgment(SpannedJudgment):
    """A score per rubric dimension for one candidate, plus the veto criteria that failed."""

    kind: ClassVar[str] = "rubric"
    type: Literal["rubric"] = Field(default="rubric", alias="kind")
    candidate_id: Identifier
    scores: dict[str, float] = Field(min_length=1)
    vetoes_failed: list[str] = Field(default_factory=list)

    def candidate_ids(self) -> list[str]:
        return [self.candidate_id]

    def label_rows(self) -> list[LabelRow]:
        unit = f"{self.item_id}::{self.candidate_id}"
        return [self._row(unit, dim, value) for dim, value in sorted(self.scores.items())]


class UnaryJudgment(SpannedJudgment):
    """Thumbs up (``True``) or down (``False``) on one candidate (KTO data)."""

    kind: ClassVar[str] = "unary"
    type: Literal["unary"] = Field(default="unary", alias="kind")
    candidate_id: Identifier
    label: bool

    def candidate_ids(self) -> list[str]:
        return [self.candidate_id]

    def label_rows(self) -> list[LabelRow]:
        return [self._row(f"{self.item_id}::{self.candidate_id}", "thumb", int(self.label))]


class StepsJudgment(JudgmentBase):
    """Process labels: one candidate split into steps, a verdict per step in {+1, 0, -1}.

    Verdicts run up to and including the first error (-1); with no error, every step is labelled.
    """

    kind: ClassVar[str] = "steps"
    type: Literal["steps"] = Field(default="steps", alias="kind")
    candidate_id: Identifier
    steps: list[str] = Field(min_length=1)
    verdicts: list[Literal[-1, 0, 1]] = Field(min_length=1)

    @model_validator(mode="after")
    def _up_to_first_error(self) -> StepsJudgment:
        if len(self.verdicts) > len(self.steps):
            raise ValueError(f"{len(self.verdicts)} verdicts for {len(self.steps)} steps")
        if -1 in self.verdicts:
            first = self.verdicts.index(-1)
            if len(self.verdicts) != first + 1:
                raise ValueError(
                    f"verdicts stop at the first error (step {first + 1}); "
                    f"got {len(self.verdicts) - first - 1} more after it"
                )
        elif len(self.verdicts) != len(self.steps):
            raise ValueError("with no error (-1), every step needs a verdict")
        return self

    @property
    def first_error(self) -> int | None:
        """0-based index of the first wrong step, or ``None``."""
        return self.verdicts.index(-1) if -1 in self.verdicts else None

    def candidate_ids(self) -> list[str]:
        return [self.candidate_id]

    def label_rows(self) -> list[LabelRow]:
        unit = f"{self.item_id}::{self.candidate_id}"
        rows = [
            self._row(f"{unit}::step{i}", "step_verdict", v) for i, v in enumerate(self.verdicts)
        ]
        first = self.first_error
        rows.append(self._row(unit, "first_error", len(self.steps) if first is None else first))
        return rows


class CriteriaJudgment(SpannedJudgment):
    """Whether one candidate meets each of its item's criteria (the approved version
    ``criteria_version``, :mod:`.criteria`): a person's checklist or a judge's ``criteria`` template.

    Label rows: one per criterion, unit ``item::candidate``, dimension ``criterion:<id>``, value
    1 (met) or 0.
    """

    kind: ClassVar[str] = "criteria"
    type: Literal["criteria"] = Field(default="criteria", alias="kind")
    candidate_id: Identifier
    criteria_version: int = Field(ge=1)
    met: dict[Identifier, bool] = Field(min_length=1, max_length=MAX_CRITERIA)

    @field_validator("met")
    @classmethod
    def _sorted(cls, v: dict[str, bool]) -> dict[str, bool]:
        return dict(sorted(v.items()))

    def candidate_ids(self) -> list[str]:
        return [self.candidate_id]

    def label_rows(self) -> list[LabelRow]:
        unit = f"{self.item_id}::{self.candidate_id}"
        return [self._row(unit, f"criterion:{cid}", int(ok)) for cid, ok in self.met.items()]


class DemonstrationJudgment(JudgmentBase):
    """An expert-written answer (SFT data) with its review status."""

    kind: ClassVar[str] = "demonstration"
    candidates_needed: ClassVar[tuple[int, int | None]] = (0, None)
    type: Literal["demonstration"] = Field(default="demonstration", alias="kind")
    text: str | None = None
    messages: list[Message] | None = None
    status: Literal["pending", "accepted", "rejected"] = "pending"
    #: who decided the status, when, and why (set by a reviewer; only ``accepted`` reaches SFT)
    reviewed_by: str | None = None
    reviewed_at: datetime | None = None
    review_note: str | None = Field(default=None, max_length=5000)

    @model_validator(mode="after")
    def _one_body(self) -> DemonstrationJudgment:
        if (self.text is None) == (self.messages is None):
            raise ValueError("a demonstration needs exactly one of 'text' or 'messages'")
        return self

    def as_text(self) -> str:
        if self.text is not None:
            return self.text
        return "\n\n".join(m.content for m in self.messages or [] if m.role == "assistant")

    def candidate_ids(self) -> list[str]:
        return []

    def label_rows(self) -> list[LabelRow]:
        return []


JUDGMENT_KINDS: dict[str, type[JudgmentBase]] = {
    cls.kind: cls
    for cls in (
        PairwiseJudgment,
        RankingJudgment,
        RubricJudgment,
        UnaryJudgment,
        StepsJudgment,
        DemonstrationJudgment,
        CriteriaJudgment,
    )
}

Judgment = Annotated[
    PairwiseJudgment
    | RankingJudgment
    | RubricJudgment
    | UnaryJudgment
    | StepsJudgment
    | DemonstrationJudgment
    | CriteriaJudgment,
    Field(discriminator="type"),
]

_JUDGMENT_ADAPTER: TypeAdapter[JudgmentBase] = TypeAdapter(Judgment)


def parse_judgment(data: dict[str, Any]) -> JudgmentBase:
    """Validate a judgment dict (with a ``kind`` key) into its class."""
    return _JUDGMENT_ADAPTER.validate_python(data)


def kind_fits(kind: str, n_candidates: int) -> bool:
    """Whether an item with ``n_candidates`` answers can take a judgment of ``kind``
    (pairwise exactly 2, ranking at least 2, rubric/unary/steps exactly 1, demonstration any)."""
    least, most = JUDGMENT_KINDS[kind].candidates_needed
    return n_candidates >= least and (most is None or n_candidates <= most)


def describe_need(kind: str) -> str:
    """``'exactly 2 answers'`` and the like, for messages that say why a kind does not fit."""
    least, most = JUDGMENT_KINDS[kind].candidates_needed
    if most is None:
        return "any number of answers" if least == 0 else f"at least {least} answers"
    return f"exactly {least} answer{'s' if least != 1 else ''}"


def kinds_for_item(
    project_kinds: list[str], n_candidates: int, declared: list[str] | None = None
) -> list[str]:
    """The kinds an item can be labelled with, in the project's order: those the item declares
    (``metadata.kinds``; all of the project's when it declares none) that fit its number of
    candidate answers. The one rule shared by the label page and the submit check.

    >>> kinds_for_item(["pairwise", "ranking", "unary"], 3)
    ['ranking']
    >>> kinds_for_item(["pairwise", "ranking", "demonstration"], 2, declared=["pairwise"])
    ['pairwise']
    """
    wanted = set(declared) if declared else set(project_kinds)
    return [
        k
        for k in project_kinds
        if k in wanted and k in JUDGMENT_KINDS and kind_fits(k, n_candidates)
    ]


def unfit_item_reason(
    project_kinds: list[str], item_id: str, n_candidates: int, metadata: dict[str, Any] | None
) -> str | None:
    """Why no kind of the project can label this item (a one-answer item in a pairwise-only
    project would be handed to raters whose every submission is refused), or ``None`` when one
    can. The one rule of every import route: the CLI, a file upload and the items API.

    >>> unfit_item_reason(["pairwise"], "q1", 1, None)
    "item 'q1' has 1 answer(s), which no kind of this project fits (pairwise needs exactly 2 answers); fix the item or add a kind that fits it to the project"
    >>> unfit_item_reason(["pairwise", "unary"], "q1", 1, None) is None
    True
    """
    declared = (metadata or {}).get("kinds")
    if kinds_for_item(
        project_kinds, n_candidates, declared if isinstance(declared, list) else None
    ):
        return None
    need = "; ".join(f"{k} needs {describe_need(k)}" for k in project_kinds if k in JUDGMENT_KINDS)
    return (
        f"item {item_id!r} has {n_candidates} answer(s), which no kind of this project fits "
        f"({need}); fix the item or add a kind that fits it to the project"
    )


def dump_judgment(judgment: JudgmentBase) -> dict[str, Any]:
    """A judgment as a JSON-ready dict, ``kind`` first."""
    return judgment.model_dump(mode="json", by_alias=True, exclude_none=True)
