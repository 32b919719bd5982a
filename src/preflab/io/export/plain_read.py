"""A lean read of a project's stored rows for the export's rows path (issue 27, export CPU).

:func:`~preflab.store.repo.iter_raw_chunks` selects every judgment column (22 a row:
datetimes parsed, the JSON columns as text) for every item, though an item of plain pairwise
labels (:mod:`.columnar`) reads a few of them. :func:`lean_chunks` reads, per range of item
pks, the items and candidates as ``iter_raw_chunks`` does and each judgment's
:data:`LEAN_COLUMNS` only, through the driver's cursor (no SQLAlchemy row processing): the
body's shown order, winner and strength taken out in SQL as one small JSON array
(:func:`fields_sql`: one ``json_extract`` on SQLite, ``jsonb_build_array`` on PostgreSQL's
JSONB) and a flag computed in SQL (:func:`plain_sql`): the judgment is of kind ``pairwise``, of
a production pass (review pass 0 or 1), has no telemetry, rubric, judge or assist record, and
its body has the keys of :data:`PLAIN_BODY` only. The values (two strings shown, a winner
``a``, ``b`` or ``tie``, an integer or no strength: :func:`lean_values`), what needs the item's
labels together (no rater twice on a pair) and what the collector declines are checked in
Python (:func:`.columnar.plain_item`). An item any of whose judgments is not flagged, or that
:func:`.columnar.plain_item` or the collector declines, has its full rows read in one more
query per range (``JUDGMENT_COLUMNS``, ``item_pk IN (...)``) and is built into objects as before
(:func:`~preflab.store.repo.item_with_judgments`): the general path, unchanged.

Flagged in SQL with plain values means plain in Python too (:func:`python_plain`, the Python
condition a test holds them equal to on every twist of a body): a SQL ``NULL`` is ``None`` to the driver,
and ``IS NULL`` on a JSON column is false for a stored JSON ``null``, which only sends an item
to the full path. The item and candidate selects mirror ``iter_raw_chunks``' (the rows
:func:`~preflab.store.repo.item_with_judgments` reads): a column added there must be added
here (``tests/io/test_export_plain_pairwise.py`` holds the rows equal).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from itertools import groupby
from operator import itemgetter
from typing import Any

import orjson

from ...quality import text_stats as stored_text
from ...store.repo import ItemWithJudgments, RawSelects, item_pk_ranges, item_with_judgments

#: the columns of a lean judgment row, in order: ``fields`` the body's shown order, winner
#: and strength as one JSON array (SQLite: its text; PostgreSQL: parsed by the driver), taken
#: out in SQL; the last the SQL flag (1: plain as far as SQL tells, else 0)
LEAN_COLUMNS = (
    "pk",
    "item_pk",
    "fields",
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
#: positions in a lean judgment row
PK, ITEM, FIELDS, RATER, HASH, PASS, SOURCE, SUBMITTED = range(8)
GUIDELINE, BATCH, EXCLUDED, REASON, PLAIN = range(8, 13)

#: items per range of pks (``iter_raw_chunks``' default)
RANGE_ITEMS = 1_000

#: the stored body keys of a plain pairwise label
PLAIN_BODY = ("kind", "shown_order", "winner", "strength")
_loads = orjson.loads


def plain_sql(dialect: str) -> str:
    """The SQL flag of a judgment: 1 when it may be a plain pairwise label as far as its row
    says, else 0 (a NULL anywhere is 0). Its columns: kind ``pairwise``, a production pass
    (review pass 0 or 1), no telemetry, rubric, judge or assist record; its body: an object of
    the keys of :data:`PLAIN_BODY` only. The values (two strings shown, a winner ``a``, ``b``
    or ``tie``, a strength missing, ``null`` or an integer) are checked on the extracted
    ``fields`` in Python (:func:`lean_values`): one JSON parse in SQL for them all, where a
    ``json_type`` each cost one more parse of the body (SQLite). ``tests/io/
    test_export_plain_read.py`` holds the flag and :func:`lean_values` together equal to
    :func:`python_plain` on every twist."""
    columns = (
        "j.kind = 'pairwise' AND j.review_pass IN (0, 1) AND j.telemetry IS NULL"
        " AND j.rubric_key IS NULL AND j.judge IS NULL AND j.assisted_by IS NULL"
    )
    if dialect == "sqlite":
        keys = ", ".join(f"'$.{k}'" for k in PLAIN_BODY)
        # an array or a scalar body is not '{}' once the keys are removed
        body = f"json_remove(j.body, {keys}) = '{{}}'"
    else:
        keys = " - ".join(f"'{k}'" for k in PLAIN_BODY)
        body = (
            "CASE WHEN jsonb_typeof(j.body) = 'object'"
            f" THEN (j.body - {keys}) = '{{}}'::jsonb ELSE false END"
        )
    return f"CASE WHEN {columns} AND {body} THEN 1 ELSE 0 END"


def fields_sql(dialect: str) -> str:
    """The body's shown order, winner and strength as one JSON array (a missing key: null)."""
    if dialect == "sqlite":
        return "json_extract(j.body, '$.shown_order', '$.winner', '$.strength')"
    return "jsonb_build_array(j.body -> 'shown_order', j.body -> 'winner', j.body -> 'strength')"


#: the winners of a plain label
WINNERS = ("a", "b", "tie")


def lean_values(fields: Any, sqlite: bool) -> tuple[str, str, str, int | float | None] | None:
    """``(a, b, winner, strength)`` of a flagged lean row's ``fields``, or None when they are
    not a plain label's: ``shown_order`` two strings, the winner ``a``, ``b`` or ``tie``, the
    strength None (missing or ``null``) or an integer (PostgreSQL: or a float, parsed by the
    driver as in a whole body; SQLite writes a real back as text with 15 digits, so a float
    strength takes the full path there)."""
    if sqlite:
        fields = _loads(fields)
    order, winner, strength = fields
    if order.__class__ is not list or len(order) != 2:
        return None
    a, b = order
    if a.__class__ is not str or b.__class__ is not str or winner not in WINNERS:
        return None
    if strength is None or strength.__class__ is int:
        return a, b, winner, strength
    if strength.__class__ is float and not sqlite:
        return a, b, winner, strength
    return None


def python_plain(columns: dict[str, Any], body: Any, sqlite: bool) -> bool:
    """:func:`plain_sql`'s condition in Python, on a judgment's stored columns (by name) and
    its parsed body: the reference a test holds the SQL flag equal to."""
    if not (
        columns["kind"] == "pairwise"
        and columns["review_pass"] in (0, 1)
        and columns["telemetry"] is None
        and columns["rubric_key"] is None
        and columns["judge"] is None
        and columns["assisted_by"] is None
        and isinstance(body, dict)
        and set(body) <= set(PLAIN_BODY)
    ):
        return False
    order, strength = body.get("shown_order"), body.get("strength")
    numbers = (int,) if sqlite else (int, float)
    return (
        isinstance(order, list)
        and len(order) == 2
        and all(isinstance(x, str) for x in order)
        and body.get("winner") in ("a", "b", "tie")
        and (strength is None or (type(strength) in numbers))
    )


class Statements(RawSelects):
    """The selects of one export's session: items, candidates and full judgments as
    :func:`~preflab.store.repo.iter_raw_chunks` reads them (excluded labels included), and the
    lean reads through the driver's cursor (no SQLAlchemy row processing): the same items and
    candidates as tuples, the lean judgments (:data:`LEAN_COLUMNS`)."""

    def __init__(self, session: Any, project: Any) -> None:
        super().__init__(session, project, include_excluded=True)
        self.full = self.judg
        dialect = session.get_bind().dialect.name
        self.sqlite = dialect == "sqlite"
        param = "?" if self.sqlite else "%s"
        self.item_sql = (
            "SELECT pk, project_pk, item_key, prompt, domains, reference, gold, metadata,"
            f" batch_pk FROM items WHERE pk BETWEEN {param} AND {param} ORDER BY pk"
        )
        stats = ", ".join(f"s.{name}" for name in stored_text.STATS_COLUMNS)
        self.cand_sql = (
            "SELECT c.item_pk, c.candidate_key, c.text, c.messages, c.model, c.source,"
            f" c.metadata, {stats} FROM candidates AS c"
            " LEFT JOIN candidate_text_stats AS s ON s.candidate_pk = c.pk"
            f" WHERE c.item_pk BETWEEN {param} AND {param} ORDER BY c.item_pk, c.position"
        )
        fields = fields_sql(dialect)
        # each item's judgments in pk order, in the (project_pk, item_pk) index's order
        self.lean_sql = (
            f"SELECT j.pk, j.item_pk, {fields}, r.rater_key, r.rater_hash, j.review_pass,"
            " j.source, j.submitted_at, j.guideline_version, j.batch_pk, j.excluded,"
            f" j.exclusion_reason, {plain_sql(dialect)}"
            " FROM judgments AS j JOIN raters AS r ON r.pk = j.rater_pk"
            f" WHERE j.project_pk = {param} AND j.item_pk BETWEEN {param} AND {param}"
            " ORDER BY j.item_pk, j.pk"
        )

    def full_rows(self, session: Any, item_pks: list[int]) -> dict[int, list[Any]]:
        """The full judgment rows (:data:`~preflab.store.repo.JUDGMENT_COLUMNS`) of
        ``item_pks``, per item in pk order."""
        out: dict[int, list[Any]] = {pk: [] for pk in item_pks}
        if item_pks:
            stmt = self.full.where(self.judgments.item_pk.in_(item_pks))
            for row in session.execute(stmt).all():
                out[row[1]].append(row)
        return out


#: one item of a range: ``(item row, candidate rows, lean judgment rows, all flagged)``
LeanItem = tuple[Any, list[Any], list[Any], bool]


def lean_chunks(
    session: Any, project: Any, statements: Statements | None = None, size: int = RANGE_ITEMS
) -> Iterator[list[LeanItem]]:
    """The project's items ``size`` pks at a time, in pk order, with their lean judgment rows
    (:data:`LEAN_COLUMNS`, excluded labels included), as ``iter_raw_chunks`` reads its ranges
    (three range scans a range; other projects' items in a range skipped), through the driver's
    cursor: the item and candidate rows are tuples of the values ``iter_raw_chunks``' rows
    hold."""

    st = statements or Statements(session, project)
    project_pk, versions = project.pk, st.versions
    get_item, get_plain = itemgetter(ITEM), itemgetter(PLAIN)
    cursor = session.connection().connection.dbapi_connection.cursor()
    try:
        for first, last in item_pk_ranges(session, project, size):
            cursor.execute(st.item_sql, (first, last))
            rows = [r for r in cursor.fetchall() if r[1] == project_pk]
            cursor.execute(st.cand_sql, (first, last))
            cand_rows = cursor.fetchall()
            if versions:
                stored_text.MEMO.remember(cand_rows, versions, 2, 7)
            candidates: dict[int, list[Any]] = {r[0]: [] for r in rows}
            for cand in cand_rows:
                listed = candidates.get(cand[0])
                if listed is not None:
                    listed.append(cand[1:7])  # the statistics are in the memo
            del cand_rows
            cursor.execute(st.lean_sql, (project_pk, first, last))
            judged: dict[int, list[Any]] = {r[0]: [] for r in rows}
            flagged: dict[int, bool] = {}
            # the rows come item by item (the index's order)
            for item_pk, group in groupby(cursor.fetchall(), get_item):
                listed = judged.get(item_pk)
                # None: an item added to the range since the pks were read (SQLite: no snapshot)
                if listed is not None:
                    listed.extend(group)
                    # every judgment of the item flagged plain in SQL
                    flagged[item_pk] = all(map(get_plain, listed))
            part = [(r, candidates[r[0]], judged[r[0]], flagged.get(r[0], True)) for r in rows]
            del rows, candidates, judged, flagged  # the caller lets go of each item (read_items)
            yield part
    finally:
        cursor.close()


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
