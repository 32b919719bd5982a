"""Persistence API shared by the importer, the exporter, the CLI and the server.

Functions take an open :class:`~sqlalchemy.orm.Session` and never commit: the caller owns the
transaction (imports are all-or-nothing; see :func:`preflab.store.db.transaction`).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import Text, func, select, type_coerce
from sqlalchemy.orm import Session, selectinload

from ..quality import text_stats as stored_text
from ..schema import (
    JUDGMENT_KINDS,
    CriteriaJudgment,
    Item,
    JudgmentBase,
    Rubric,
    SpannedJudgment,
    parse_judgment,
    rater_hash,
)
from ..schema.criteria import criteria_judgment_problems
from ..schema.policy import stored_policy
from ..schema.spans import span_category_problems, span_offset_problems
from . import trusted
from .models import (
    CandidateRow,
    CandidateTextStats,
    ItemRow,
    JudgmentRow,
    Project,
    Rater,
    RubricVersion,
)
from .rows import ItemRows, JudgmentRows, as_utc, item_rows, judgment_rows
from .text_stats import current_versions

PROJECT_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,99}$")


class StoreError(Exception):
    """A request the store cannot honour; the message says what to do."""


class NotFound(StoreError):
    pass


class Conflict(StoreError):
    pass


# -- projects -----------------------------------------------------------------------------


def create_project(
    session: Session,
    name: str,
    *,
    title: str = "",
    kinds: Iterable[str] = ("pairwise",),
    settings: dict[str, Any] | None = None,
) -> Project:
    if not PROJECT_NAME.match(name):
        raise StoreError(
            f"project name {name!r}: use 1-100 lowercase letters, digits, '-', '_' or '.', "
            "starting with a letter or digit"
        )
    kinds = list(kinds)
    unknown = sorted(set(kinds) - set(JUDGMENT_KINDS))
    if unknown:
        raise StoreError(f"unknown judgment kinds {unknown}; choose from {sorted(JUDGMENT_KINDS)}")
    if session.scalar(select(Project).where(Project.name == name)) is not None:
        raise Conflict(f"project {name!r} already exists")
    project = Project(
        name=name,
        title=title or name,
        secret=secrets.token_hex(32),
        kinds=kinds,
        settings=settings or {},
    )
    session.add(project)
    session.flush()
    return project


def get_project(session: Session, name: str) -> Project:
    project = session.scalar(select(Project).where(Project.name == name))
    if project is None:
        names = session.scalars(select(Project.name).order_by(Project.name)).all()
        hint = (
            f"; projects: {', '.join(names)}"
            if names
            else "; create one with `preflab project create`"
        )
        raise NotFound(f"no project {name!r}{hint}")
    return project


def list_projects(session: Session) -> list[Project]:
    return list(session.scalars(select(Project).order_by(Project.name)))


# -- rubrics ------------------------------------------------------------------------------


def add_rubric(
    session: Session, project: Project, rubric: Rubric, *, make_current: bool = True
) -> RubricVersion:
    """Store a rubric. Same content as the latest version: returns it. Changed: a new version.

    Versions are immutable: the stored ``version`` number is assigned here, whatever the file says.
    """
    latest = session.scalar(
        select(RubricVersion)
        .where(RubricVersion.project_pk == project.pk, RubricVersion.rubric_key == rubric.id)
        .order_by(RubricVersion.version.desc())
        .limit(1)
    )
    digest = rubric.content_hash()
    if latest is not None and latest.content_hash == digest:
        row = latest
    else:
        version = 1 if latest is None else latest.version + 1
        stored = rubric.model_copy(update={"version": version})
        row = RubricVersion(
            project_pk=project.pk,
            rubric_key=rubric.id,
            version=version,
            content=stored.model_dump(mode="json"),
            content_hash=digest,
        )
        session.add(row)
        session.flush()
    if make_current:
        project.rubric_key, project.rubric_version = row.rubric_key, row.version
    return row


def get_rubric(
    session: Session, project: Project, key: str | None = None, version: int | None = None
) -> Rubric | None:
    key = key or project.rubric_key
    if key is None:
        return None
    stmt = select(RubricVersion).where(
        RubricVersion.project_pk == project.pk, RubricVersion.rubric_key == key
    )
    stmt = (
        stmt.where(RubricVersion.version == version)
        if version
        else stmt.order_by(RubricVersion.version.desc())
    )
    row = session.scalar(stmt.limit(1))
    return None if row is None else Rubric.model_validate(row.content)


# -- items --------------------------------------------------------------------------------


def item_row_from_item(
    project: Project, item: Item | ItemRows, batch_pk: int | None = None
) -> ItemRow:
    """An ORM row (with candidates) for an item; the bulk importer writes the same values."""
    rows = item if isinstance(item, ItemRows) else item_rows(item)
    row = ItemRow(project_pk=project.pk, batch_pk=batch_pk, **rows.values)
    row.candidates = [CandidateRow(**c) for c in rows.candidates]
    return row


def item_from_row(row: ItemRow) -> Item:
    return Item.model_validate(
        {
            "id": row.item_key,
            "prompt": row.prompt,
            "candidates": [
                {
                    "id": c.candidate_key,
                    **({"text": c.text} if c.messages is None else {"messages": c.messages}),
                    "model": c.model,
                    "source": c.source,
                    "metadata": c.meta or {},
                }
                for c in row.candidates
            ],
            "domains": row.domains or [],
            "reference": row.reference,
            "gold": row.gold,
            "metadata": row.meta or {},
        }
    )


def add_item(
    session: Session, project: Project, item: Item, batch_pk: int | None = None
) -> tuple[ItemRow, bool]:
    """Insert an item; ``(row, created)``. Same id and same content: no-op. Different content: :class:`Conflict`."""
    existing = session.scalar(
        select(ItemRow).where(ItemRow.project_pk == project.pk, ItemRow.item_key == item.id)
    )
    if existing is not None:
        if existing.content_hash != item.content_hash():
            raise Conflict(f"item {item.id!r} already exists with different content")
        return existing, False
    row = item_row_from_item(project, item, batch_pk)
    session.add(row)
    session.flush()
    return row, True


def get_item(session: Session, project: Project, item_key: str) -> ItemRow:
    row = session.scalar(
        select(ItemRow)
        .where(ItemRow.project_pk == project.pk, ItemRow.item_key == item_key)
        .options(selectinload(ItemRow.candidates))
    )
    if row is None:
        raise NotFound(f"project {project.name!r} has no item {item_key!r}")
    return row


def merge_metadata(
    session: Session,
    project: Project,
    items: dict[str, dict[str, Any]],
    candidates: dict[tuple[str, str], dict[str, Any]],
) -> None:
    """Set metadata keys of items (``{item_key: {key: value}}``) and of candidates
    (``{(item_key, candidate_key): {key: value}}``) in the caller's transaction.

    Derived annotations such as verifier verdicts: metadata is outside an item's content hash, so
    a re-import of the same file still finds the item unchanged. Raises :class:`NotFound` for an
    item or candidate the project does not have (the caller's transaction then changes nothing).
    """
    per_item: dict[str, dict[str, dict[str, Any]]] = {}
    for (item_key, cand_key), values in candidates.items():
        per_item.setdefault(item_key, {})[cand_key] = values
    for item_key in sorted(set(items) | set(per_item)):
        row = get_item(session, project, item_key)
        if item_key in items:
            row.meta = {
                **(row.meta or {}),
                **items[item_key],
            }  # a new dict: the JSON column sees the change
        by_key = {c.candidate_key: c for c in row.candidates}
        for cand_key, values in per_item.get(item_key, {}).items():
            if cand_key not in by_key:
                raise NotFound(
                    f"item {item_key!r} of project {project.name!r} has no candidate {cand_key!r}"
                )
            by_key[cand_key].meta = {**(by_key[cand_key].meta or {}), **values}
    session.flush()


# -- raters and judgments ----------------------------------------------------------------


def get_or_create_rater(session: Session, project: Project, rater_key: str) -> Rater:
    rater = session.scalar(
        select(Rater).where(Rater.project_pk == project.pk, Rater.rater_key == rater_key)
    )
    if rater is None:
        rater = Rater(
            project_pk=project.pk,
            rater_key=rater_key,
            rater_hash=rater_hash(rater_key, project.secret),
        )
        session.add(rater)
        session.flush()
    return rater


def judgment_content_hash(judgment: JudgmentBase) -> str:
    """Identity of a judgment for idempotent import: everything but the idempotency key."""
    return judgment_rows(judgment).content_hash


def judgment_row_from_judgment(
    project: Project,
    item_row: ItemRow,
    rater: Rater,
    judgment: JudgmentBase | JudgmentRows,
    batch_pk: int | None = None,
) -> JudgmentRow:
    """An ORM row for a judgment; the bulk importer writes the same values."""
    rows = judgment if isinstance(judgment, JudgmentRows) else judgment_rows(judgment)
    return JudgmentRow(
        project_pk=project.pk,
        item_pk=item_row.pk,
        rater_pk=rater.pk,
        batch_pk=batch_pk,
        **rows.values,
    )


def check_judgment_against_item(judgment: JudgmentBase, item: Item) -> list[str]:
    """``field: reason`` problems of a judgment about this item (unknown candidates ...)."""
    known = {c.id for c in item.candidates}
    problems = []
    for cid in judgment.candidate_ids():
        if cid not in known:
            problems.append(
                f"candidate {cid!r}: not a candidate of item {item.id!r} (has {sorted(known, key=str)})"
            )
    if isinstance(judgment, SpannedJudgment) and judgment.spans:
        lengths = {c.id: len(c.as_text()) for c in item.candidates if c.id is not None}
        problems += [f"{f}: {r}" for f, r in span_offset_problems(judgment.spans, lengths)]
    if isinstance(judgment, CriteriaJudgment):  # against the item's approved criteria
        problems += criteria_judgment_problems(judgment, item.metadata)
    return problems


def add_judgment(
    session: Session,
    project: Project,
    judgment: JudgmentBase,
    *,
    item_row: ItemRow | None = None,
    batch_pk: int | None = None,
    exclusion_reason: str | None = None,
) -> tuple[JudgmentRow, bool]:
    """Insert a judgment; ``(row, created)``. An identical judgment or idempotency key: the first row.

    ``exclusion_reason``: stored excluded from the start, with this reason (a model judge's
    order-inconsistent verdict: kept for audits, never a label)."""
    if judgment.kind not in project.kinds:
        raise StoreError(
            f"project {project.name!r} collects {project.kinds}, not {judgment.kind!r}"
        )
    item_row = item_row or get_item(session, project, judgment.item_id)
    key = judgment.provenance.idempotency_key
    if key is not None:
        existing = session.scalar(
            select(JudgmentRow).where(
                JudgmentRow.project_pk == project.pk, JudgmentRow.idempotency_key == key
            )
        )
        if existing is not None:
            return existing, False
    rows = judgment_rows(judgment)
    existing = session.scalar(
        select(JudgmentRow).where(
            JudgmentRow.item_pk == item_row.pk, JudgmentRow.content_hash == rows.content_hash
        )
    )
    if existing is not None:
        return existing, False
    problems = check_judgment_against_item(judgment, item_from_row(item_row))
    if isinstance(judgment, SpannedJudgment) and judgment.spans:
        categories = stored_policy(project.settings).span_categories
        problems += [f"{f}: {r}" for f, r in span_category_problems(judgment.spans, categories)]
    if problems:
        raise StoreError("; ".join(problems))
    rater = get_or_create_rater(session, project, judgment.provenance.rater_id)
    row = judgment_row_from_judgment(project, item_row, rater, rows, batch_pk)
    if exclusion_reason is not None:
        row.excluded, row.exclusion_reason = True, exclusion_reason
    session.add(row)
    session.flush()
    return row, True


def judgment_from_row(row: JudgmentRow, *, with_rater_hash: str | None = None) -> JudgmentBase:
    provenance: dict[str, Any] = {
        "rater_id": row.rater.rater_key,
        "rater_hash": with_rater_hash or row.rater.rater_hash,
        "rubric_id": row.rubric_key,
        "rubric_version": row.rubric_version,
        "guideline_version": row.guideline_version,
        "review_pass": row.review_pass,
        "source": row.source,
        "started_at": as_utc(row.started_at),
        "submitted_at": as_utc(row.submitted_at),
        "telemetry": row.telemetry,
        "idempotency_key": row.idempotency_key,
        "judge": row.judge,
        "assisted_by": row.assisted_by,
    }
    data = {
        **row.body,
        "kind": row.kind,
        "item_id": row.item.item_key,
        "rationale": row.rationale,
        "provenance": {k: v for k, v in provenance.items() if v is not None},
    }
    return parse_judgment(data)


@dataclass
class ItemWithJudgments:
    """An item and its judgments, as exporters and the quality report consume them."""

    item: Item
    judgments: list[JudgmentBase] = field(default_factory=list)
    #: parallel to ``judgments``: (judgment pk, batch pk, excluded, exclusion reason)
    meta: list[dict[str, Any]] = field(default_factory=list)
    batch_pk: int | None = None


@dataclass(slots=True)
class RawChunk:
    """One chunk of a project's stored rows, as SQL returns them, before any schema object.

    What :func:`iter_items_with_judgments` builds its objects from, for readers that need no
    objects (the columnar report and export paths): ``items`` are ``(pk, project_pk,
    item_key, prompt, domains, reference, gold, metadata, batch_pk)`` in pk order (this
    project's only); ``candidates[item_pk]`` are ``(candidate_key, text, messages, model,
    source, metadata)`` in position order; ``judgments[item_pk]`` are the
    :data:`JUDGMENT_COLUMNS` in judgment pk order. Every item of ``items`` has an entry (maybe
    empty) in both dicts. When ``raw_json`` is true (SQLite) the JSON columns are their stored
    text: read them with :func:`json_value`; on PostgreSQL the driver has parsed them.
    """

    items: list[Any]
    candidates: dict[int, list[Any]]
    judgments: dict[int, list[Any]]
    raw_json: bool


#: the columns of a :class:`RawChunk`'s judgment rows, in order
JUDGMENT_COLUMNS = (
    "pk",
    "item_pk",
    "kind",
    "body",
    "rationale",
    "rater_key",
    "rater_hash",
    "rubric_key",
    "rubric_version",
    "review_pass",
    "source",
    "started_at",
    "submitted_at",
    "telemetry",
    "idempotency_key",
    "guideline_version",
    "judge",
    "assisted_by",
    "batch_pk",
    "excluded",
    "exclusion_reason",
    "rater_pk",
)


class RawSelects:
    """The selects of :func:`iter_raw_chunks` for one session and project, and the reads of a
    range of item pks with them: shared by every reader of stored rows (this module's, the
    export's lean read ``io/export/plain_read.py``, the report's ``io/quality_read.py``), so
    the columns a :class:`RawChunk` holds are written once.

    Items and candidates are not filtered by project in SQL: with ``project_pk = ?`` SQLite's
    planner takes the ``(project_pk, item_key)`` index instead, reading and sorting every item
    of the project for each range (quadratic, as ``pk > last ORDER BY pk LIMIT n`` keyset
    pages are there). Rows of other projects' items inside a range are skipped here. Each
    candidate's stored text statistics come at the end of its row (NULL: not computed) and are
    put in the text statistics memo for the readers that measure texts
    (``quality/text_stats.py``).
    """

    def __init__(self, session: Session, project: Project, *, include_excluded: bool) -> None:
        self.project_pk = project.pk
        self.items, self.cands, self.judgments = (
            ItemRow.__table__.c,
            CandidateRow.__table__.c,
            JudgmentRow.__table__.c,
        )
        items, cands, judgments = self.items, self.cands, self.judgments
        raters = Rater.__table__.c
        # SQLite: the JSON columns read as their text and parsed by the caller
        # (``json_value``), not through SQLAlchemy's JSON result processor (two Python calls a
        # value around the same ``orjson.loads``; ~650,000 values per 100,000 judgments).
        # PostgreSQL's driver parses JSONB.
        self.raw = raw = session.get_bind().dialect.name == "sqlite"

        def json_col(col: Any) -> Any:
            return type_coerce(col, Text) if raw else col

        self.item = select(
            items.pk,
            items.project_pk,
            items.item_key,
            json_col(items.prompt),
            json_col(items.domains),
            items.reference,
            json_col(items.gold),
            json_col(items["metadata"]),
            items.batch_pk,
        ).order_by(items.pk)
        stats = CandidateTextStats.__table__
        self.cand = (
            select(
                cands.item_pk,
                cands.candidate_key,
                cands.text,
                json_col(cands.messages),
                cands.model,
                cands.source,
                json_col(cands["metadata"]),
                *(stats.c[name] for name in stored_text.STATS_COLUMNS),
            )
            .select_from(CandidateRow.__table__.outerjoin(stats, stats.c.candidate_pk == cands.pk))
            .order_by(cands.item_pk, cands.position)
        )
        self.versions = current_versions(session)
        judg = (
            select(
                judgments.pk,
                judgments.item_pk,
                judgments.kind,
                json_col(judgments.body),
                judgments.rationale,
                raters.rater_key,
                raters.rater_hash,
                judgments.rubric_key,
                judgments.rubric_version,
                judgments.review_pass,
                judgments.source,
                judgments.started_at,
                judgments.submitted_at,
                json_col(judgments.telemetry),
                judgments.idempotency_key,
                judgments.guideline_version,
                json_col(judgments.judge),
                json_col(judgments.assisted_by),
                judgments.batch_pk,
                judgments.excluded,
                judgments.exclusion_reason,
                judgments.rater_pk,
            )
            .join(Rater.__table__, raters.pk == judgments.rater_pk)
            # every writer sets a judgment's project to its item's: the (project_pk, item_pk) index
            .where(judgments.project_pk == project.pk)
            .order_by(judgments.pk)
        )
        self.judg = judg if include_excluded else judg.where(judgments.excluded.is_(False))

    def item_rows(self, session: Session, first: int, last: int) -> list[Any]:
        """The project's item rows with pks ``first..last``, in pk order."""
        pk = self.project_pk
        stmt = self.item.where(self.items.pk.between(first, last))
        return [r for r in session.execute(stmt).all() if r[1] == pk]

    def candidate_rows(
        self, session: Session, first: int, last: int, rows: list[Any]
    ) -> dict[int, list[Any]]:
        """The candidates of the items ``rows`` (whose pks are in ``first..last``) by item pk, in
        position order (:class:`RawChunk`'s six columns), their stored text statistics put in the
        memo."""
        candidates: dict[int, list[Any]] = {r[0]: [] for r in rows}
        cand_rows = session.execute(self.cand.where(self.cands.item_pk.between(first, last))).all()
        if self.versions:
            stored_text.MEMO.remember(cand_rows, self.versions, 2, 7)
        for cand in cand_rows:
            listed = candidates.get(cand[0])
            if listed is not None:
                listed.append(cand[1:7])  # the statistics are in the memo
        return candidates

    def judgment_rows(self, session: Session, stmt: Any, rows: list[Any]) -> dict[int, list[Any]]:
        """The rows of judgment select ``stmt`` (of a range) by item pk for the items ``rows``."""
        judged: dict[int, list[Any]] = {r[0]: [] for r in rows}
        for row in session.execute(stmt).all():
            listed = judged.get(row[1])
            # None: an item added to the range since the pks were read (SQLite: no snapshot)
            if listed is not None:
                listed.append(row)
        return judged

    def chunk(self, session: Session, first: int, last: int) -> RawChunk:
        """The :class:`RawChunk` of the project's items with pks ``first..last``."""
        rows = self.item_rows(session, first, last)
        candidates = self.candidate_rows(session, first, last, rows)
        stmt = self.judg.where(self.judgments.item_pk.between(first, last))
        return RawChunk(rows, candidates, self.judgment_rows(session, stmt, rows), self.raw)


def item_pk_ranges(session: Session, project: Project, size: int) -> Iterator[tuple[int, int]]:
    """The project's item pks as ranges ``(first, last)`` of ``size`` items, in pk order (the
    pks read once, streamed, through the ``(project_pk, item_key)`` index).

    Only the ranges are kept (two ints per ``size`` items), not the pks: holding every pk cost
    8 bytes an item (27 MB at 3.3M items, the 10M-judgment project; 270 MB at 100M), a part of
    an export's read that grew with the project. All ranges are read before the first
    is yielded, so the caller's chunk queries never interleave with this one's cursor (a server-
    side cursor on PostgreSQL, ``yield_per``)."""
    items = ItemRow.__table__.c
    stmt = select(items.pk).where(items.project_pk == project.pk).order_by(items.pk)
    ranges: list[tuple[int, int]] = []
    first = last = n = 0
    for pk in session.scalars(stmt, execution_options={"yield_per": 65_536}):
        if n % size == 0:
            if n:
                ranges.append((first, last))
            first = pk
        last = pk
        n += 1
    if n:
        ranges.append((first, last))
    yield from ranges


def iter_raw_chunks(
    session: Session, project: Project, *, include_excluded: bool = False, chunk: int = 1000
) -> Iterator[RawChunk]:
    """A project's items, candidates and judgments, ``chunk`` items at a time, as stored rows.

    Queries (:class:`RawSelects`): the project's item pks once (the ``(project_pk, item_key)``
    index), then per chunk of consecutive pks ``first..last`` three range scans: items by
    primary key, candidates by ``(item_pk, candidate_key)``, judgments (joined to raters) by
    ``(project_pk, item_pk)``. Each row of the table is read at most once. Reads happen in the
    caller's transaction (the exporter's PostgreSQL REPEATABLE READ snapshot).
    """
    selects = RawSelects(session, project, include_excluded=include_excluded)
    for first, last in item_pk_ranges(session, project, chunk):
        yield selects.chunk(session, first, last)


def iter_items_with_judgments(
    session: Session, project: Project, *, include_excluded: bool = False, chunk: int = 1000
) -> Iterator[ItemWithJudgments]:
    """Every item of a project with its judgments, in item order, ``chunk`` items at a time.

    Yields exactly what :func:`iter_items_with_judgments_validated` does, several times faster
    (an export of 10,000 items x 3 raters spent most of its time there): Core selects of just
    the needed columns (:func:`iter_raw_chunks`) instead of ORM rows, and the schema objects are
    built from the stored values without validating them again (:mod:`preflab.store.trusted`).
    """
    for part in iter_raw_chunks(session, project, include_excluded=include_excluded, chunk=chunk):
        raw = part.raw_json
        # popped as built and yielded: once the caller drops an item, nothing here keeps it
        # alive (the exporter and the report sweep the young generation between chunks; what a
        # paused generator still held was traversed there and promoted, ~24,000 objects a sweep)
        rows, part.items = part.items, []
        for row in rows:
            yield item_with_judgments(
                row, part.candidates.pop(row[0]), part.judgments.pop(row[0]), raw
            )


def item_with_judgments(
    row: Any, candidate_rows: list[Any], judgment_rows: list[Any], raw: bool
) -> ItemWithJudgments:
    """One item of a :class:`RawChunk` built into schema objects (what
    :func:`iter_items_with_judgments` yields for it): its item row, its candidate rows and its
    judgment rows (:data:`JUDGMENT_COLUMNS`), ``raw`` the chunk's ``raw_json``. The columnar
    report builds only the items it cannot read from the columns through this."""
    pk, _, key, prompt, domains, reference, gold, item_meta, batch_pk = row
    candidates = []
    for ckey, text, msgs, model, source, cmeta in candidate_rows:
        if raw:
            msgs, cmeta = _json(msgs), _json(cmeta)
        candidates.append(trusted.candidate(ckey, text, msgs, model, source, cmeta))
    js: list[JudgmentBase] = []
    meta: list[dict[str, Any]] = []
    for (
        jpk,
        _item_pk,
        kind,
        body,
        rationale,
        rater_key,
        stored_hash,
        rubric_key,
        rubric_version,
        review_pass,
        source,
        started_at,
        submitted_at,
        telemetry,
        idempotency_key,
        guideline_version,
        judge,
        assisted_by,
        jbatch_pk,
        excluded,
        exclusion_reason,
        _rater_pk,
    ) in judgment_rows:
        if raw:
            body, telemetry = _json(body), _json(telemetry)
            if judge is not None:
                judge = _json(judge)
            if assisted_by is not None:
                assisted_by = _json(assisted_by)
        prov = trusted.provenance(
            rater_key,
            stored_hash,
            rubric_key,
            rubric_version,
            review_pass,
            source,
            started_at,
            submitted_at,
            telemetry,
            idempotency_key,
            guideline_version,
            judge,
            assisted_by,
        )
        js.append(trusted.judgment(kind, body, key, rationale, prov))
        meta.append(
            {
                "pk": jpk,
                "batch_pk": jbatch_pk,
                "excluded": excluded,
                "exclusion_reason": exclusion_reason,
            }
        )
    if raw:
        prompt, domains = _json(prompt), _json(domains)
        gold, item_meta = _json(gold), _json(item_meta)
    return ItemWithJudgments(
        item=trusted.item(key, prompt, candidates, domains, reference, gold, item_meta),
        judgments=js,
        meta=meta,
        batch_pk=batch_pk,
    )


def json_value(value: Any) -> Any:
    """A :class:`RawChunk` JSON column's value, parsed when it is stored text (SQLite)."""
    return _json(value)


def _json(value: Any, _loads: Any = orjson.loads) -> Any:
    """A JSON column's stored text parsed, as SQLAlchemy's SQLite JSON type returns it: SQL
    NULL is ``None``, and a value SQLite holds as a number (numeric affinity) is returned as is."""
    return _loads(value) if value.__class__ is str else value


def iter_items_with_judgments_validated(
    session: Session, project: Project, *, include_excluded: bool = False, chunk: int = 500
) -> Iterator[ItemWithJudgments]:
    """:func:`iter_items_with_judgments` through ORM rows and full pydantic validation.

    The reference the fast reader is held equal to (``tests/store/test_fast_read.py``) and the
    "before" of ``benchmarks/bench_read.py``; several times slower.
    """
    last_pk = 0
    while True:
        rows = session.scalars(
            select(ItemRow)
            .where(ItemRow.project_pk == project.pk, ItemRow.pk > last_pk)
            .order_by(ItemRow.pk)
            .limit(chunk)
            .options(selectinload(ItemRow.candidates))
        ).all()
        if not rows:
            return
        last_pk = rows[-1].pk
        by_item: dict[int, list[JudgmentRow]] = {r.pk: [] for r in rows}
        jstmt = (
            select(JudgmentRow)
            .where(JudgmentRow.item_pk.in_(list(by_item)))
            .order_by(JudgmentRow.pk)
            .options(selectinload(JudgmentRow.rater), selectinload(JudgmentRow.item))
        )
        if not include_excluded:
            jstmt = jstmt.where(JudgmentRow.excluded.is_(False))
        for j in session.scalars(jstmt):
            by_item[j.item_pk].append(j)
        for r in rows:
            js = by_item[r.pk]
            yield ItemWithJudgments(
                item=item_from_row(r),
                judgments=[judgment_from_row(j) for j in js],
                meta=[
                    {
                        "pk": j.pk,
                        "batch_pk": j.batch_pk,
                        "excluded": j.excluded,
                        "exclusion_reason": j.exclusion_reason,
                    }
                    for j in js
                ],
                batch_pk=r.batch_pk,
            )


def project_counts(session: Session, project: Project) -> dict[str, Any]:
    """Counts for ``preflab status``: items, judgments per kind, per rater, per batch."""
    items = session.scalar(
        select(func.count()).select_from(ItemRow).where(ItemRow.project_pk == project.pk)
    )
    per_kind = dict(
        session.execute(
            select(JudgmentRow.kind, func.count())
            .where(JudgmentRow.project_pk == project.pk)
            .group_by(JudgmentRow.kind)
        ).all()
    )
    per_rater = dict(
        session.execute(
            select(Rater.rater_key, func.count())
            .join(JudgmentRow, JudgmentRow.rater_pk == Rater.pk)
            .where(JudgmentRow.project_pk == project.pk)
            .group_by(Rater.rater_key)
            .order_by(func.count().desc())
        ).all()
    )
    per_batch = {
        (str(k) if k is not None else "none"): v
        for k, v in session.execute(
            select(JudgmentRow.batch_pk, func.count())
            .where(JudgmentRow.project_pk == project.pk)
            .group_by(JudgmentRow.batch_pk)
        ).all()
    }
    per_source = dict(
        session.execute(
            select(JudgmentRow.source, func.count())
            .where(JudgmentRow.project_pk == project.pk)
            .group_by(JudgmentRow.source)
        ).all()
    )
    return {
        "project": project.name,
        "items": items,
        "judgments": sum(per_kind.values()),
        "per_kind": per_kind,
        "per_source": per_source,
        "per_rater": per_rater,
        "per_batch": per_batch,
        "raters": len(per_rater),
    }
