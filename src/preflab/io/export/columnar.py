"""Pass 1 on the stored columns for an item of plain pairwise labels (issue 27, export CPU).

A streamed export (:mod:`.stream`) used to build every judgment of the project into a schema
object (a ``PairwiseJudgment`` and its ``Provenance``, :mod:`preflab.store.trusted`) only to
read a handful of fields back: the shown order, the winner and strength, the rater, the
review pass, the source, the batch. For an item whose stored labels are **plain pairwise**
that is all the export reads, so :func:`plain_item` takes them straight from the rows of
:func:`~preflab.store.repo.iter_raw_chunks` (:data:`~preflab.store.repo.JUDGMENT_COLUMNS`)
into a :class:`PlainItem`: the item built as before, each label a small :class:`PlainLabel`,
the votes as :func:`~.resolve.plain_pairwise` gives them. :meth:`.collector.Collector.read`
counts, filters and indexes it as it does the objects.

Plain, checked on the rows of the item (anything else is built into objects,
:func:`~preflab.store.repo.item_with_judgments`, and takes the general path unchanged):
every judgment is of kind ``pairwise``, of a production pass (review pass 0 or 1: no
adjudication), with no telemetry (the telemetry gate reads nothing), no rubric, judge or
assist record, and a body of ``shown_order``, ``winner`` and ``strength`` only (no critique
spans); among the labels the export keeps (not excluded, not AI unless ``include_ai``), no
rater has two on one canonical pair (no revision to resolve). The collector adds what needs
the item: no gold answer, not routed to a verifier (:meth:`.collector.Collector.read`), and
takes the path only for an export that resolves pairs and reads no judgment objects
(:attr:`.collector.Collector.plain_ok`). ``tests/io/test_export_plain_pairwise.py`` holds
every file equal to the general path's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import islice
from typing import Any

from sqlalchemy import DateTime
from sqlalchemy.dialects import sqlite

from ...schema import Item
from ...store.repo import ItemWithJudgments, item_with_judgments
from ...store.rows import as_utc
from . import plain_read
from .plain_read import lean_values
from .resolve import UNKNOWN_VOTE_STRENGTH, PairVote, ResolvedPair, plurality_pair


class PlainLabel:
    """One kept plain pairwise label, with the attributes the export reads of a
    ``PairwiseJudgment`` and of its provenance (the label index, the provenance columns, the
    agreement tally): ``label.provenance`` is the label itself."""

    __slots__ = (
        "item_id",
        "shown_order",
        "winner",
        "strength",
        "direction",
        "rater_id",
        "rater_hash",
        "review_pass",
        "source",
        "guideline_version",
        "unit",
    )
    kind = "pairwise"
    rubric_id = None
    rubric_version = None

    def __init__(
        self,
        item_id: str,
        shown_order: tuple[str, str],
        winner: str,
        strength: float | None,
        direction: int,
        rater_id: str,
        rater_hash: str | None,
        review_pass: int,
        source: str,
        guideline_version: int | None,
        unit: str,
    ) -> None:
        self.item_id = item_id
        self.shown_order = shown_order
        self.winner = winner
        self.strength = strength
        self.direction = direction
        self.rater_id = rater_id
        self.rater_hash = rater_hash
        self.review_pass = review_pass
        self.source = source
        self.guideline_version = guideline_version
        #: the agreement unit, ``pair_unit(item_id, *shown_order)``
        self.unit = unit

    @property
    def provenance(self) -> PlainLabel:
        return self

    def candidate_ids(self) -> list[str]:
        return list(self.shown_order)


class PlainItem:
    """An item of plain pairwise labels read from its rows (see the module docstring):
    ``item`` built as before; per stored judgment in pk order ``(label, pk, batch pk, excluded,
    exclusion reason)``; the kept labels' votes in :func:`~.resolve.plain_pairwise`'s order
    (computed by :meth:`.collector.Collector.read` once it knows which labels it keeps: here
    for the labels kept with and without AI ones). :meth:`full` builds the objects instead
    (from its full rows, read again: :mod:`.plain_read` reads the items the collector
    declines in full up front, so this is a fallback)."""

    __slots__ = ("item", "labels", "votes", "resolved", "_full", "kept", "dropped")

    def __init__(
        self,
        item: Item,
        labels: list[tuple[PlainLabel, int, int | None, bool, str | None]],
        votes: list[PairVote],
        resolved: list[ResolvedPair | str] | None = None,
        full: Callable[[], ItemWithJudgments] | None = None,
        kept: list[tuple[PlainLabel, int | None]] | None = None,
        dropped: list[tuple[str, str]] | None = None,
    ) -> None:
        self.item, self.labels, self.votes, self._full = item, labels, votes, full
        #: the labels the export keeps (not excluded, not AI unless ``include_ai``) with their
        #: batch pk, and the ``(gate, reason)`` of each label it sets aside, in label order
        self.kept: list[tuple[PlainLabel, int | None]] = kept if kept is not None else []
        self.dropped: list[tuple[str, str]] = dropped if dropped is not None else []
        #: with ``plurality``: each unit decided (:func:`~.resolve.plurality_pair`: the pair
        #: or the reason it drops) in the order :func:`~.resolve.aggregate_pairwise` meets
        #: them in ``votes``, which is then empty
        self.resolved = resolved

    def full(self) -> ItemWithJudgments:
        """The item and its judgments as schema objects (the general path)."""
        if self._full is None:
            raise RuntimeError("a plain item read without its full rows")
        return self._full()


def plain_item(
    row: Any,
    candidate_rows: list[Any],
    judgment_rows: list[Any],
    raw: bool,
    include_ai: bool,
    plurality: bool = False,
) -> PlainItem | None:
    """The item of an item row, its candidate rows and its lean judgment rows
    (:data:`.plain_read.LEAN_COLUMNS`, every one flagged plain in SQL: pairwise, a production
    pass, no telemetry, rubric, judge or assist record, a body of a shown order, winner and
    strength only: :func:`.plain_read.plain_sql`) as a :class:`PlainItem`, or None when its
    labels are not plain (a rater twice on a pair).
    With ``plurality`` its units are decided here (:attr:`PlainItem.resolved`), no vote built."""
    key = row[2]
    labels: list[tuple[PlainLabel, int, int | None, bool, str | None]] = []
    voted: list[tuple[tuple[str, str, str], Any, Any]] = []
    kept: list[tuple[PlainLabel, int | None]] = []
    dropped: list[tuple[str, str]] = []
    for (
        jpk,
        _item_pk,
        fields,
        rater_key,
        stored_hash,
        review_pass,
        source,
        submitted_at,
        guideline_version,
        jbatch_pk,
        excluded,
        exclusion_reason,
        _flag,
    ) in judgment_rows:
        values = lean_values(fields, raw)
        if values is None:  # not a plain label's values: the general path
            return None
        a, b, winner, strength = values
        lo, hi = (a, b) if a <= b else (b, a)
        direction = 0 if winner == "tie" else -1 if (a if winner == "a" else b) == lo else 1
        label = PlainLabel(
            key,
            (a, b),
            winner,
            strength,
            direction,
            rater_key,
            stored_hash,
            review_pass,
            source,
            guideline_version,
            f"{key}::{lo}|{hi}",
        )
        excluded = bool(excluded)  # SQLite's driver: 0 or 1
        labels.append((label, jpk, jbatch_pk, excluded, exclusion_reason))
        if excluded:
            dropped.append(("excluded", exclusion_reason or "excluded"))
            continue
        if source == "ai" and not include_ai:
            dropped.append(("source", "ai"))
            continue
        kept.append((label, jbatch_pk))
        score = (
            UNKNOWN_VOTE_STRENGTH * direction if strength is None else float(direction * strength)
        )
        if plurality:
            voted.append(((lo, hi, rater_key), score, stored_hash or rater_key))
            continue
        if submitted_at.__class__ is str:  # SQLite's stored text, as SQLAlchemy parses it
            submitted_at = _sqlite_datetime(submitted_at)
        vote = PairVote(
            key,
            lo,
            hi,
            rater_key,
            stored_hash or rater_key,
            score,
            "pairwise",
            review_pass,
            (review_pass, as_utc(submitted_at), jpk),
        )
        voted.append(((lo, hi, rater_key), vote, None))
    voted.sort(key=_first)
    for (k1, _, _), (k2, _, _) in zip(voted, voted[1:], strict=False):
        if k1 == k2:  # a rater with two labels on one pair: a revision, the general path
            return None
    built = item_with_judgments(row, candidate_rows, [], raw).item
    if not plurality:
        return PlainItem(built, labels, [v for _, v, _ in voted], None, None, kept, dropped)
    # aggregate_pairwise meets the units in vote order: sorted, each unit's votes together
    resolved: list[ResolvedPair | str] = []
    start = 0
    for end in range(1, len(voted) + 1):
        if end == len(voted) or voted[end][0][:2] != voted[start][0][:2]:
            lo, hi = voted[start][0][:2]
            unit = voted[start:end]
            resolved.append(plurality_pair(key, lo, hi, [v[1] for v in unit], [v[2] for v in unit]))
            start = end
    return PlainItem(built, labels, [], resolved, None, kept, dropped)


#: SQLAlchemy's SQLite ``DateTime`` result processor (its stored text to a ``datetime``)
_sqlite_datetime: Any = (
    DateTime().dialect_impl(sqlite.dialect()).result_processor(sqlite.dialect(), None)
)


def _first(pair: tuple[Any, ...]) -> Any:
    return pair[0]


def plain_chunks(
    session: Any,
    project: Any,
    size: int,
    include_ai: bool,
    after_chunk: Callable[[], None],
    declines: Callable[[Item], bool] = lambda item: False,
    plurality: bool = False,
) -> Iterator[list[ItemWithJudgments | PlainItem]]:
    """:func:`.stream.chunks` of ``size`` items read by :func:`.plain_read.read_items`: each
    item a :class:`PlainItem` when its labels are plain and ``declines`` (the collector's
    test) does not refuse it (with ``plurality``, the collector's aggregator, its units
    decided: :attr:`PlainItem.resolved`), else built from its full rows as
    :func:`~preflab.store.repo.iter_items_with_judgments` builds it."""

    def plain_of(row: Any, cands: list[Any], lean: list[Any], raw: bool) -> PlainItem | None:
        # a global: tests switch it off
        return plain_item(row, cands, lean, raw, include_ai, plurality)

    stream = plain_read.read_items(session, project, plain_of, declines)
    while chunk := list(islice(stream, size)):
        yield chunk
        del chunk
        after_chunk()
