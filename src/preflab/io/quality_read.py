"""The quality report's lean read of a project (issue 27): only what the report's column path
folds, plainness decided in SQL, the full rows only for the items that are not plain.

:func:`iter_lean_chunks` reads a project in the chunks of item pks that
:func:`preflab.store.repo.iter_raw_chunks` reads (the same three range scans per chunk), but
through the driver's cursor (no SQLAlchemy row processing) and with a judgment's few fields the
report reads taken out of its body in SQL (``json_extract`` on SQLite, ``->>`` on PostgreSQL's
JSONB) instead of every body parsed in Python:

* an item: its key, whether it has gold, its import batch;
* a candidate: its key, its text (``None``: a message list) and its stored word length and
  formatting features (``None``: none stored of the current version; the text is ``''`` when
  they are, as nothing reads it then);
* a judgment (not excluded): whether it is **plain** (pairwise, no telemetry, not an
  adjudication, not by a model unless those count, no critique spans: what
  :mod:`preflab.quality.accumulate_columns` requires of each judgment), its rater, shown order,
  winner, strength, guideline version, rationale and the milliseconds from its start to its
  submission (``None`` unless both are known; computed exactly as ``as_utc(submitted) -
  as_utc(started)`` gives them);
* whether any judgment of the project, excluded or not, has a model judge or was assisted (what
  ``has_judge_labels`` and ``has_assisted_labels`` asked in two more scans of the table).

An item whose rows are not plain is built from its full rows (:meth:`LeanChunk.full`, the
chunk's rows as :func:`~preflab.store.repo.iter_raw_chunks` gives them, read once per chunk that
has such an item) and folded through ``add`` as before.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from operator import itemgetter
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from ..quality import text_stats as stored_text
from ..quality.labels import ADJUDICATION
from ..store.rows import as_utc
from ..store.text_stats import current_versions

#: a lean judgment (:func:`iter_lean_chunks`): rater, shown order ``a``, ``b``, winner,
#: strength (None: not given), guideline version, rationale, milliseconds taken (or None),
#: then what the reader used (item pk, flags, plain, the stored times)
LeanJudgment = tuple[Any, ...]

# positions in a lean judgment row past the first eight
_MS, _ITEM, _FLAGS, _PLAIN, _STARTED, _SUBMITTED = 7, 8, 9, 10, 11, 12
# judgment flags
JUDGE, ASSISTED, EXCLUDED = 1, 2, 4


def _judgment_sql(dialect: str, include_ai: bool) -> str:
    """The lean judgment query of a chunk: ``rater, a, b, winner, strength, guideline_version,
    rationale, times known, item_pk, flags, plain, started_at, submitted_at`` (the first eight a
    :data:`LeanJudgment` once the times are made milliseconds), in the order of the
    ``(project_pk, item_pk)`` index: each item's judgments in pk order (no sort). On SQLite the
    rater is its pk (``raters`` not joined: a B-tree look-up a judgment, ~1 s CPU at 1M
    judgments), made its key by :func:`_with_rater_keys`."""
    if dialect == "sqlite":
        spans = "json_type(j.body, '$.spans')"
        # a body that does not name spans has none (most: no JSON function called for them)
        no_spans = (
            f"(instr(j.body, '\"spans\"') = 0 OR {spans} IS NULL OR {spans} = 'null'"
            f" OR ({spans} = 'array' AND json_array_length(j.body, '$.spans') = 0))"
        )
        flags = "(j.judge IS NOT NULL) + 2 * (j.assisted_by IS NOT NULL) + 4 * (j.excluded != 0)"
        fields = (
            "json_extract(j.body, '$.shown_order[0]'), json_extract(j.body, '$.shown_order[1]'),"
            " json_extract(j.body, '$.winner'), json_extract(j.body, '$.strength')"
        )
        param = "?"
    else:
        spans = "j.body -> 'spans'"
        no_spans = f"({spans} IS NULL OR {spans} = 'null'::jsonb OR {spans} = '[]'::jsonb)"
        flags = (
            "(j.judge IS NOT NULL)::int + 2 * (j.assisted_by IS NOT NULL)::int"
            " + 4 * (j.excluded)::int"
        )
        # the strength as JSONB, which the driver parses as it parses a whole body (int or float)
        fields = (
            "j.body -> 'shown_order' ->> 0, j.body -> 'shown_order' ->> 1,"
            " j.body ->> 'winner', j.body -> 'strength'"
        )
        param = "%s"
    ai = "" if include_ai else " AND (j.source IS NULL OR j.source <> 'ai')"
    plain = (
        f"(j.kind = 'pairwise' AND j.telemetry IS NULL AND j.review_pass < {ADJUDICATION}"
        f"{ai} AND {no_spans})"
    )
    rater, join = (
        ("j.rater_pk", "")
        if dialect == "sqlite"
        else ("r.rater_key", " JOIN raters AS r ON r.pk = j.rater_pk")
    )
    return (
        f"SELECT {rater}, {fields}, j.guideline_version, j.rationale,"
        " CASE WHEN j.started_at IS NULL OR j.submitted_at IS NULL THEN NULL ELSE 1 END,"
        f" j.item_pk, {flags}, {plain}, j.started_at, j.submitted_at"
        f" FROM judgments AS j{join}"
        f" WHERE j.project_pk = {param} AND j.item_pk BETWEEN {param} AND {param}"
        " ORDER BY j.item_pk, j.pk"
    )


@dataclass(slots=True)
class LeanChunk:
    """One chunk of a project's items (:func:`iter_lean_chunks`).

    ``items``: ``(pk, item key, has gold, import batch pk)`` in pk order; ``candidates`` and
    ``judgments`` by item pk (every item has an entry in both): ``(key, text, stored)`` in
    position order (``stored``: ``(words, the five formatting features)`` stored for the text, a
    :data:`~preflab.quality.text_stats.Stats`' last two, the text then ``''``; or ``None``) and :data:`LeanJudgment` s in judgment pk order; ``plain``: the pks of the items whose
    every judgment is plain (item and candidates not checked here)."""

    items: list[Any]
    candidates: dict[int, list[Any]]
    judgments: dict[int, list[LeanJudgment]]
    not_plain: set[int]
    first: int
    last: int
    reads: FullReads
    _full: Any = field(default=None)

    def full(self) -> tuple[Any, dict[int, Any]]:
        """The chunk's full rows (a :class:`~preflab.store.repo.RawChunk`) and its item rows by
        pk, read once."""
        if self._full is None:
            raw = self.reads.chunk(self.first, self.last)
            self._full = (raw, {r[0]: r for r in raw.items})
        full: tuple[Any, dict[int, Any]] = self._full
        return full


class Flags:
    """Whether any judgment read (excluded ones too) had a model judge, was made with a
    suggestion in view; ``read``: whether the lean read was made (the flags are known)."""

    __slots__ = ("judge", "assisted", "read")

    def __init__(self) -> None:
        self.judge = False
        self.assisted = False
        self.read = False


def iter_lean_chunks(
    session: Session, project: Any, include_ai: bool, flags: Flags, *, chunk: int = 1000
) -> Iterator[LeanChunk]:
    """A project's items, ``chunk`` items at a time, as :class:`LeanChunk` s, read in the
    session's transaction; ``flags`` is set as the judgments go by."""
    from ..store.models import ItemRow, JudgmentRow

    bind = session.get_bind()
    dialect = bind.dialect.name
    sqlite = dialect == "sqlite"
    param = "?" if sqlite else "%s"
    item_sql = (
        "SELECT pk, project_pk, item_key, gold IS NULL, batch_pk FROM items"
        f" WHERE pk BETWEEN {param} AND {param} ORDER BY pk"
    )
    # each candidate's stored text statistics after its text (NULL: not computed): a plain
    # item's candidates carry them (the report's text features read them as TextFeatures.entry
    # reads them from the memo, quality/text_stats.py; the memo is not filled here)
    versions = current_versions(session)
    # the versions whose stored rows a reader takes (StatsMemo.remember's test)
    usable = {pk for pk, fingerprint in versions.items() if fingerprint is not None}
    stats = ", ".join(f"s.{name}" for name in stored_text.STATS_COLUMNS)
    # a text whose statistics are stored is not read ('' in its place): nothing the fold does
    # with a plain item's candidate reads it then (~0.15 s CPU a 100k judgments on SQLite)
    text_col = "c.text"
    if usable:
        in_list = ", ".join(str(int(pk)) for pk in sorted(usable))
        text_col = (
            f"CASE WHEN c.text IS NOT NULL AND s.version_pk IN ({in_list}) THEN '' ELSE c.text END"
        )
    cand_sql = (
        f"SELECT c.item_pk, c.candidate_key, {text_col}, {stats} FROM candidates c"
        " LEFT JOIN candidate_text_stats s ON s.candidate_pk = c.pk"
        f" WHERE c.item_pk BETWEEN {param} AND {param} ORDER BY c.item_pk, c.position"
    )
    reads = FullReads(session, project)
    rater_keys: dict[Any, Any] = {}  # SQLite: a rater's key by its pk (_with_rater_keys)
    judg_sql = _judgment_sql(dialect, include_ai)
    # the time columns: SQLite holds SQLAlchemy's text (parsed here as its DateTime type does)
    to_datetime = None
    if sqlite:
        to_datetime = (
            JudgmentRow.__table__.c.started_at.type.dialect_impl(bind.dialect)
        ).result_processor(bind.dialect, None)
    items_t = ItemRow.__table__.c
    all_pks = np.fromiter(
        session.scalars(
            select(items_t.pk).where(items_t.project_pk == project.pk).order_by(items_t.pk)
        ),
        dtype=np.int64,
    )
    get_item, get_flags, get_plain, get_ms = (
        itemgetter(_ITEM),
        itemgetter(_FLAGS),
        itemgetter(_PLAIN),
        itemgetter(_MS),
    )
    cursor = session.connection().connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        for start in range(0, len(all_pks), chunk):
            first = int(all_pks[start])
            last = int(all_pks[min(start + chunk, len(all_pks)) - 1])
            cursor.execute(item_sql, (first, last))
            rows = [(r[0], r[2], not r[3], r[4]) for r in cursor.fetchall() if r[1] == project.pk]
            candidates: dict[int, list[Any]] = {r[0]: [] for r in rows}
            cursor.execute(cand_sql, (first, last))
            cand_rows = cursor.fetchall()
            for r in cand_rows:
                listed = candidates.get(r[0])
                if listed is not None:
                    # (key, text, (words, features) when stored for the text, else None);
                    # the text '' when they are stored
                    text = r[2]
                    listed.append(
                        (r[1], text, (r[5], r[6:11]))
                        if text is not None and r[3] in usable
                        else (r[1], text, None)
                    )
            cursor.execute(judg_sql, (project.pk, first, last))
            judged_rows: list[Any] = list(cursor.fetchall())
            if sqlite and judged_rows:
                judged_rows = _with_rater_keys(cursor, judged_rows, rater_keys)
            # (C-level scans: most chunks have no flag, no time, every judgment plain)
            if any(map(get_flags, judged_rows)):
                for r in judged_rows:
                    if r[_FLAGS] & JUDGE:
                        flags.judge = True
                    if r[_FLAGS] & ASSISTED:
                        flags.assisted = True
                judged_rows = [r for r in judged_rows if not r[_FLAGS] & EXCLUDED]
            # the rows whose times are both known get their milliseconds (1 from SQL, else NULL)
            if any(map(get_ms, judged_rows)):
                timed = [k for k, r in enumerate(judged_rows) if r[_MS] is not None]
                times = _elapsed_ms([judged_rows[k] for k in timed], to_datetime)
                for k, ms in zip(timed, times):
                    r = judged_rows[k]
                    judged_rows[k] = (*r[:_MS], ms, *r[_ITEM:])
            judged: dict[int, list[LeanJudgment]] = {r[0]: [] for r in rows}
            not_plain: set[int] = set()
            # the rows come item by item (the index's order)
            for item_pk, group in groupby(judged_rows, get_item):
                listed = judged.get(item_pk)
                # None: an item added to the range since the pks were read (SQLite: no snapshot)
                if listed is None:
                    continue
                listed.extend(group)
                if not all(map(get_plain, listed)):
                    not_plain.add(item_pk)
            # the rows dropped before the chunk is folded: the fold's sweep of the youngest
            # generation (quality_source.SWEEP_ITEMS) then finds them freed, not alive
            del cand_rows, judged_rows
            yield LeanChunk(rows, candidates, judged, not_plain, first, last, reads)
    finally:
        cursor.close()


#: rater keys kept by pk across chunks (SQLite's lean read) before the cache is emptied
RATER_KEYS_BOUND = 100_000


def _with_rater_keys(cursor: Any, rows: list[Any], keys: dict[Any, Any]) -> list[Any]:
    """SQLite's lean judgment ``rows`` (the rater's pk first) with the rater's key in its
    place, as the join with ``raters`` gives them (a row whose rater is not there dropped);
    ``keys`` holds the keys read so far (the missing ones read here, by pk), emptied past
    :data:`RATER_KEYS_BOUND` (a project of one rater a label: production feedback)."""
    if len(keys) > RATER_KEYS_BOUND:
        keys.clear()
    cols = list(zip(*rows))
    missing = list(set(cols[0]).difference(keys))
    for start in range(0, len(missing), 500):
        some = missing[start : start + 500]
        marks = ", ".join("?" * len(some))
        cursor.execute(f"SELECT pk, rater_key FROM raters WHERE pk IN ({marks})", some)
        keys.update(cursor.fetchall())
    if missing and not keys.keys() >= set(missing):
        rows = [r for r in rows if r[0] in keys]
        if not rows:
            return []
        cols = list(zip(*rows))
    return list(zip(map(keys.__getitem__, cols[0]), *cols[1:]))


def _elapsed_ms(rows: Sequence[Any], to_datetime: Any) -> list[float]:
    """Per lean judgment row whose two times are known, the milliseconds from its start to its
    submission: ``(as_utc(submitted) - as_utc(started)).total_seconds() * 1000`` exactly
    (SQLite's stored text in SQLAlchemy's format in bulk with numpy: whole microseconds, whose
    float division by 1e6 is the correctly rounded quotient ``total_seconds`` gives; any other
    text through SQLAlchemy's processor, PostgreSQL's datetimes as they come)."""
    started = [r[_STARTED] for r in rows]
    submitted = [r[_SUBMITTED] for r in rows]
    if to_datetime is not None and all(map(_sqlalchemy_text, started + submitted)):
        us = np.array(submitted, "datetime64[us]") - np.array(started, "datetime64[us]")
        whole = us.astype(np.int64)
        if np.abs(whole).max(initial=0) < 2**53:
            ms: list[float] = (whole.astype(np.float64) / 1e6 * 1000).tolist()
            return ms
    out: list[float] = []
    for s, t in zip(started, submitted):
        if to_datetime is not None:
            s, t = to_datetime(s), to_datetime(t)
        out.append((as_utc(t) - as_utc(s)).total_seconds() * 1000)  # type: ignore[operator]
    return out


def _sqlalchemy_text(value: Any) -> bool:
    """Whether a stored time is the text SQLAlchemy's SQLite DateTime writes
    (``YYYY-MM-DD HH:MM:SS.ffffff``, naive: read as UTC)."""
    return (
        value.__class__ is str
        and len(value) == 26
        and value[4] == "-"
        and value[10] == " "
        and value[19] == "."
        and value[:4].isdigit()
    )


class FullReads:
    """The full rows of a chunk's items, read as :func:`~preflab.store.repo.iter_raw_chunks`
    reads them (excluded judgments left out) with selects made once, when a chunk first needs
    them (most chunks of a plain project never do)."""

    def __init__(self, session: Session, project: Any) -> None:
        self.session, self.project = session, project
        self._selects: Any = None

    def chunk(self, first: int, last: int) -> Any:
        """The :class:`~preflab.store.repo.RawChunk` of the items with pks ``first..last``."""
        from ..store.repo import RawSelects

        if self._selects is None:
            self._selects = RawSelects(self.session, self.project, include_excluded=False)
        return self._selects.chunk(self.session, first, last)
