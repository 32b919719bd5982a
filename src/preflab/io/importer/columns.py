"""The rows the bulk writer inserts, by column name.

Each table's columns are a ``NamedTuple`` (:class:`ItemColumns`, :class:`CandidateColumns`,
:class:`JudgmentColumns`): the generic rows are built with keywords, the lean comparison rows
column by column (:func:`zip_columns`: a list per column, a constant once), which checks every
column is named exactly once and costs no more than positional tuples (a ``NamedTuple`` built
per row with keywords cost ~4 µs a judgment, more than writing it).

Values come ready for :meth:`.writer.Writer.insert` with ``processed=True``: JSON columns through
``json`` (:meth:`.writer.Writer.json`), timestamps through ``datetime``, constants through
``constant``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import repeat
from typing import Any, NamedTuple

from ...store.rows import ItemRows, JudgmentRows, PairRows


class ItemColumns(NamedTuple):
    pk: int
    project_pk: int
    item_key: str
    content_hash: str
    prompt: Any
    domains: Any
    reference: Any
    gold: Any
    metadata: Any
    batch_pk: int
    created_at: Any


class CandidateColumns(NamedTuple):
    item_pk: int
    candidate_key: str
    position: int
    text: str | None
    messages: Any
    model: str | None
    source: str
    metadata: Any


class JudgmentColumns(NamedTuple):
    project_pk: int
    item_pk: int
    rater_pk: int
    kind: str
    body: Any
    rationale: str | None
    pair_lo: str | None
    pair_hi: str | None
    score: int | None
    shown_order: Any
    rubric_key: str | None
    rubric_version: int | None
    guideline_version: int | None
    review_pass: int
    source: str
    started_at: Any
    submitted_at: Any
    telemetry: Any
    idempotency_key: str | None
    judge: Any
    assisted_by: Any
    content_hash: str
    batch_pk: int
    excluded: Any
    created_at: Any


def zip_columns(
    columns: type[NamedTuple], n: int, per_row: dict[str, Iterable[Any]], same: dict[str, Any]
) -> list[tuple[Any, ...]]:
    """``n`` rows in ``columns`` order from a list of values per column (``per_row``) and a value
    for every row (``same``); every column named once, or ``ValueError``."""
    named = [*per_row, *same]
    if sorted(named) != sorted(columns._fields):
        raise ValueError(
            f"{columns.__name__}: columns {sorted(named)} != {sorted(columns._fields)}"
        )
    values = [per_row[c] if c in per_row else repeat(same[c], n) for c in columns._fields]
    return list(zip(*values))


class RowBuilder:
    """Rows of one chunk for one project and import batch; ``json`` and ``datetime`` prepare
    values for the writer, ``now`` is the chunk's ``created_at`` (already a constant)."""

    def __init__(
        self,
        project_pk: int,
        batch_pk: int,
        json: Callable[[Any], Any],
        datetime: Callable[[Any], Any],
        now: Any,
        excluded: Any,
    ) -> None:
        self.project_pk, self.batch_pk = project_pk, batch_pk
        self.json, self.datetime, self.now, self.excluded = json, datetime, now, excluded
        self.empty_list, self.empty_dict = json([]), json({})

    # -- lean comparisons, column by column

    def pair_items(self, pks: list[int], pairs: list[PairRows]) -> list[tuple[Any, ...]]:
        return zip_columns(
            ItemColumns,
            len(pairs),
            per_row={
                "pk": pks,
                "item_key": [p.item_key for p in pairs],
                "content_hash": [p.item_hash for p in pairs],
                "prompt": [p.prompt_json for p in pairs],
            },
            same={
                "project_pk": self.project_pk,
                "domains": self.empty_list,
                "reference": None,
                "gold": None,
                "metadata": self.empty_dict,
                "batch_pk": self.batch_pk,
                "created_at": self.now,
            },
        )

    def pair_candidates(self, pks: list[int], pairs: list[PairRows]) -> list[tuple[Any, ...]]:
        """Two a comparison, in position order."""
        return zip_columns(
            CandidateColumns,
            2 * len(pairs),
            per_row={
                "item_pk": [pk for pk in pks for _ in (0, 1)],
                "candidate_key": [key for p in pairs for key in p.candidate_keys],
                "position": [0, 1] * len(pairs),
                "text": [text for p in pairs for text in p.texts],
            },
            same={"messages": None, "model": None, "source": "model", "metadata": self.empty_dict},
        )

    def pair_judgments(
        self, item_pks: list[int], rater_pks: list[int], pairs: list[PairRows]
    ) -> list[tuple[Any, ...]]:
        return zip_columns(
            JudgmentColumns,
            len(pairs),
            per_row={
                "item_pk": item_pks,
                "rater_pk": rater_pks,
                "body": [p.body_json for p in pairs],
                "pair_lo": [p.pair_lo for p in pairs],
                "pair_hi": [p.pair_hi for p in pairs],
                "score": [p.score for p in pairs],
                "shown_order": [p.shown_order_json for p in pairs],
                "source": [p.source for p in pairs],
                "content_hash": [p.content_hash for p in pairs],
            },
            same={
                "project_pk": self.project_pk,
                "kind": "pairwise",
                "rationale": None,
                "rubric_key": None,
                "rubric_version": None,
                "guideline_version": None,
                "review_pass": 0,
                "started_at": None,
                "submitted_at": None,
                "telemetry": None,
                "idempotency_key": None,
                "judge": None,
                "assisted_by": None,
                "batch_pk": self.batch_pk,
                "excluded": self.excluded,
                "created_at": self.now,
            },
        )

    # -- every other record, row by row

    def item(self, pk: int, item: ItemRows) -> ItemColumns:
        v, j = item.values, self.json
        return ItemColumns(
            pk=pk,
            project_pk=self.project_pk,
            item_key=item.key,
            content_hash=item.content_hash,
            prompt=j(v["prompt"]),
            domains=j(v["domains"]) if v["domains"] else self.empty_list,
            reference=v["reference"],
            gold=j(v["gold"]),
            metadata=j(v["meta"]) if v["meta"] else self.empty_dict,
            batch_pk=self.batch_pk,
            created_at=self.now,
        )

    def candidates(self, pk: int, item: ItemRows) -> list[CandidateColumns]:
        j = self.json
        return [
            CandidateColumns(
                item_pk=pk,
                candidate_key=c["candidate_key"],
                position=c["position"],
                text=c["text"],
                messages=j(c["messages"]),
                model=c["model"],
                source=c["source"],
                metadata=j(c["meta"]) if c["meta"] else self.empty_dict,
            )
            for c in item.candidates
        ]

    def judgment(self, item_pk: int, rater_pk: int, judgment: JudgmentRows) -> JudgmentColumns:
        v, j, dt = judgment.values, self.json, self.datetime
        return JudgmentColumns(
            project_pk=self.project_pk,
            item_pk=item_pk,
            rater_pk=rater_pk,
            kind=v["kind"],
            body=j(v["body"]),
            rationale=v["rationale"],
            pair_lo=v["pair_lo"],
            pair_hi=v["pair_hi"],
            score=v["score"],
            shown_order=j(v["shown_order"]),
            rubric_key=v["rubric_key"],
            rubric_version=v["rubric_version"],
            guideline_version=v["guideline_version"],
            review_pass=v["review_pass"],
            source=v["source"],
            started_at=dt(v["started_at"]),
            submitted_at=dt(v["submitted_at"]),
            telemetry=j(v["telemetry"]),
            idempotency_key=v["idempotency_key"],
            judge=j(v.get("judge")),
            assisted_by=j(v.get("assisted_by")),
            content_hash=v["content_hash"],
            batch_pk=self.batch_pk,
            excluded=self.excluded,
            created_at=self.now,
        )
