"""A lean read of a project's stored rows for the export's rows path (issue 27, export CPU).

:func:`~preflab.store.repo.iter_raw_chunks` selects every judgment column (22 a row:
datetimes parsed, the JSON columns as text) for every item, though an item of plain pairwise
labels (:mod:`.columnar`) reads 11 of them. :func:`lean_chunks` reads, per range of item pks,
the items and candidates as ``iter_raw_chunks`` does and each judgment's :data:`LEAN_COLUMNS`
only, with a flag computed in SQL (:func:`_plain_flag`): the judgment is of kind ``pairwise``,
of a production pass (review pass 0 or 1) and has no telemetry, rubric, judge or assist
record. Every other condition of a plain item (its body's keys, no rater twice on a pair, what
the collector declines) is checked in Python on the lean rows (:func:`.columnar.plain_item`).
An item any of whose judgments is not flagged, or that :func:`.columnar.plain_item` or the
collector declines, has its full rows read in one more query per range (:data:`FULL_COLUMNS`,
``item_pk IN (...)``) and is built into objects as before
(:func:`~preflab.store.repo.item_with_judgments`): the general path, unchanged.

Flagged in SQL means plain in Python too: a SQL ``NULL`` is ``None`` to the driver, and
``IS NULL`` on a JSON column is false for a stored JSON ``null``, which only sends an item to
the full path. The item and candidate selects mirror ``iter_raw_chunks``' (the rows
:func:`~preflab.store.repo.item_with_judgments` reads): a column added there must be added
here (``tests/io/test_export_plain_read.py`` holds the rows equal).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from sqlalchemy import Integer, Text, and_, case, select, type_coerce

from ...store import JudgmentRow, Rater
from ...store.repo import ItemWithJudgments, RawSelects, item_pk_ranges, item_with_judgments

#: the columns of a lean judgment row, in order (the last: the SQL flag, 1 or 0)
LEAN_COLUMNS = (
    "pk",
    "item_pk",
    "body",
    "rater_key",
    "rater_hash",
    "review_pass",
    "source",
    "submitted_at",
    "guideline_version",
    "batch_pk",
    "excluded",
    "exclusion_reason",
    "plain",
)

#: items per range of pks (``iter_raw_chunks``' default)
RANGE_ITEMS = 1_000


class Statements(RawSelects):
    """The selects of one export's session: items, candidates and full judgments as
    :func:`~preflab.store.repo.iter_raw_chunks` reads them (excluded labels included), and the
    lean judgments."""

    def __init__(self, session: Any, project: Any) -> None:
        super().__init__(session, project, include_excluded=True)
        judgments, raters = self.judgments, Rater.__table__.c
        raw = self.raw

        def json_col(col: Any) -> Any:
            return type_coerce(col, Text) if raw else col

        self.lean = (
            select(
                judgments.pk,
                judgments.item_pk,
                json_col(judgments.body),
                raters.rater_key,
                raters.rater_hash,
                judgments.review_pass,
                judgments.source,
                judgments.submitted_at,
                judgments.guideline_version,
                judgments.batch_pk,
                judgments.excluded,
                judgments.exclusion_reason,
                _plain_flag(judgments),
            )
            .select_from(
                JudgmentRow.__table__.join(Rater.__table__, raters.pk == judgments.rater_pk)
            )
            .where(judgments.project_pk == project.pk)
            .order_by(judgments.pk)
        )
        self.full = self.judg

    def full_rows(self, session: Any, item_pks: list[int]) -> dict[int, list[Any]]:
        """The full judgment rows (:data:`~preflab.store.repo.JUDGMENT_COLUMNS`) of
        ``item_pks``, per item in pk order."""
        out: dict[int, list[Any]] = {pk: [] for pk in item_pks}
        if item_pks:
            stmt = self.full.where(self.judgments.item_pk.in_(item_pks))
            for row in session.execute(stmt).all():
                out[row[1]].append(row)
        return out


def _plain_flag(judgments: Any) -> Any:
    """1 when a judgment may be a plain pairwise label as far as its columns say, else 0 (a
    NULL in ``kind`` or ``review_pass`` too)."""
    return case(
        (
            and_(
                judgments.kind == "pairwise",
                judgments.review_pass.in_((0, 1)),
                judgments.telemetry.is_(None),
                judgments.rubric_key.is_(None),
                judgments.judge.is_(None),
                judgments.assisted_by.is_(None),
            ),
            1,
        ),
        else_=0,
    ).cast(Integer)


#: one item of a range: ``(item row, candidate rows, lean judgment rows, all flagged)``
LeanItem = tuple[Any, list[Any], list[Any], bool]


def lean_chunks(
    session: Any, project: Any, statements: Statements | None = None, size: int = RANGE_ITEMS
) -> Iterator[list[LeanItem]]:
    """The project's items ``size`` pks at a time, in pk order, with their lean judgment rows
    (:data:`LEAN_COLUMNS`, excluded labels included), as ``iter_raw_chunks`` reads its ranges
    (three range scans a range; other projects' items in a range skipped)."""

    st = statements or Statements(session, project)
    for first, last in item_pk_ranges(session, project, size):
        rows = st.item_rows(session, first, last)
        candidates = st.candidate_rows(session, first, last, rows)
        stmt = st.lean.where(st.judgments.item_pk.between(first, last))
        judged = st.judgment_rows(session, stmt, rows)
        # every judgment of the item flagged plain in SQL (the flag is the rows' last column)
        flagged = {pk: all(r[12] for r in listed) for pk, listed in judged.items()}
        part = [(r, candidates[r[0]], judged[r[0]], flagged[r[0]]) for r in rows]
        del rows, candidates, judged, flagged  # the caller lets go of each item (read_items)
        yield part


def read_items(
    session: Any,
    project: Any,
    plain_of: Callable[[Any, list[Any], list[Any], bool], Any],
    declines: Callable[[Any], bool],
) -> Iterator[Any]:
    """Every item of the project in pk order: ``plain_of(row, candidates, lean rows, raw)``
    (:func:`.columnar.plain_item`'s value) when every judgment is flagged, that gives one and
    ``declines(its item)`` is false; else the item built from its full rows
    (:func:`~preflab.store.repo.item_with_judgments`)."""
    st = Statements(session, project)
    raw = st.raw
    for part in lean_chunks(session, project, st):
        out: list[Any] = []
        general: list[int] = []
        for row, cands, lean, flagged in part:
            plain = plain_of(row, cands, lean, raw) if flagged else None
            if plain is None or declines(plain.item):
                out.append(None)
                general.append(row[0])
            else:
                plain._full = partial(_refetch, session, st, row, cands)
                out.append(plain)
        full = st.full_rows(session, general)
        # each item let go once yielded: the export sweeps the young objects between two
        # chunks (stream._sweep), and those a range still held would be walked and kept
        for i, (row, cands, _, _) in enumerate(part):
            plain, out[i], part[i] = out[i], None, None  # type: ignore[call-overload]
            yield (
                plain
                if plain is not None
                else item_with_judgments(row, cands, full.pop(row[0]), raw)
            )


def _refetch(session: Any, st: Statements, row: Any, cands: list[Any]) -> ItemWithJudgments:
    return item_with_judgments(row, cands, st.full_rows(session, [row[0]])[row[0]], st.raw)
