"""How the review queues read a project without loading it (issue 27): which judgments count
(:func:`not_revised`), the project's items in keyset-ordered chunks with their counting judgments
(:func:`item_chunks`), and the one comparison across the whole project, near-duplicate
rationales, from the rationales read as columns (:func:`near_duplicate_partners`).
:func:`preflab.server.services.review.review_queues` puts them together."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, fields
from typing import Any

from sqlalchemy import ColumnElement, exists, select
from sqlalchemy.orm import Session, aliased, selectinload

from ...quality.telemetry import TelemetrySettings, near_duplicate_pairs
from ...store.models import ItemRow, JudgmentRow, Rater

#: Items read per query (with their counting judgments, raters and answers).
CHUNK = 500


def not_revised() -> ColumnElement[bool]:
    """No other judgment revises this one: a probe of the partial ``supersedes_pk`` index per
    row (``active_judgments``' rule, without reading the project's revisions)."""
    newer = aliased(JudgmentRow)
    return ~exists().where(newer.supersedes_pk == JudgmentRow.pk)


def near_duplicate_partners(session: Session, project_pk: int) -> dict[int, list[int]]:
    """Judgment pk -> the pks of the judgments whose rationale it nearly duplicates (another
    rater's, anywhere in the project), ascending: :func:`preflab.server.services.review.telemetry_flags`' evidence
    over the counting judgments, from their rationales alone."""
    stmt = (
        select(JudgmentRow.pk, JudgmentRow.rationale, Rater.rater_key)
        .join(Rater, Rater.pk == JudgmentRow.rater_pk)
        .where(
            JudgmentRow.project_pk == project_pk,
            JudgmentRow.excluded.is_(False),
            JudgmentRow.rationale.is_not(None),
            not_revised(),
        )
        .order_by(JudgmentRow.pk)
        .execution_options(yield_per=5000)
    )
    pks: list[int] = []
    texts: list[str] = []
    owners: list[str] = []
    for pk, rationale, rater_key in session.execute(stmt):
        if rationale and len(rationale) >= 20:
            pks.append(pk)
            texts.append(rationale)
            owners.append(rater_key)
    cfg = TelemetrySettings()  # telemetry_flags' defaults, as the queue always used
    out: dict[int, list[int]] = defaultdict(list)
    for a, b, _sim in near_duplicate_pairs(
        texts, owners, cfg.min_jaccard, cfg.shingle, cfg.num_perm
    ):
        out[pks[a]].append(pks[b])
        out[pks[b]].append(pks[a])
    return {pk: sorted(set(others)) for pk, others in out.items()}


@dataclass(frozen=True, slots=True)
class RaterCols:
    """The rater columns a scanned judgment carries."""

    rater_key: str
    rater_hash: str


@dataclass(frozen=True, slots=True)
class ItemCols:
    """The item column a scanned judgment carries (its answers are loaded when needed)."""

    item_key: str


@dataclass(frozen=True, slots=True)
class ScanRow:
    """A counting judgment's columns, read as a row (no ORM object): the attributes of
    :class:`~preflab.store.models.JudgmentRow` that :func:`preflab.store.repo.judgment_from_row`
    and the review queues read, with ``rater`` and ``item`` as their columns."""

    pk: int
    item_pk: int
    kind: str
    body: dict[str, Any]
    rationale: str | None
    rubric_key: str | None
    rubric_version: int | None
    guideline_version: int | None
    review_pass: int
    source: str | None
    started_at: Any
    submitted_at: Any
    telemetry: dict[str, Any] | None
    idempotency_key: str | None
    judge: Any
    assisted_by: Any
    rater: RaterCols
    item: ItemCols


#: the judgment columns of :class:`ScanRow`, in its order (then the rater's and the item's)
_COLUMNS = [
    getattr(JudgmentRow, f.name) for f in fields(ScanRow) if f.name not in ("rater", "item")
]


def item_chunks(
    session: Session, project_pk: int
) -> Iterator[tuple[list[tuple[int, str]], list[ScanRow]]]:
    """The project's items (pk, id) ``CHUNK`` at a time in pk order, each chunk with its
    counting judgments (pk order) as :class:`ScanRow` (columns, no ORM object: loading and
    tracking objects was most of the queues' pass); :func:`item_answers` loads an item's
    answers when a judgment needs them."""
    dialect = session.get_bind().dialect.name
    # SQLite: `+0` keeps the planner on the primary key for the keyset (as the data browser)
    mine = ItemRow.project_pk + 0 if dialect == "sqlite" else ItemRow.project_pk
    last = 0
    while True:
        chunk = [
            (pk, key)
            for pk, key in session.execute(
                select(ItemRow.pk, ItemRow.item_key)
                .where(mine == project_pk, ItemRow.pk > last)
                .order_by(ItemRow.pk)
                .limit(CHUNK)
            )
        ]
        if not chunk:
            return
        last = chunk[-1][0]
        keys = dict(chunk)
        raters: dict[tuple[str, str], RaterCols] = {}
        rows: list[ScanRow] = []
        for *cols, rater_key, rater_hash in session.execute(
            select(*_COLUMNS, Rater.rater_key, Rater.rater_hash)
            .join(Rater, Rater.pk == JudgmentRow.rater_pk)
            .where(
                JudgmentRow.project_pk == project_pk,
                JudgmentRow.item_pk.in_(list(keys)),
                JudgmentRow.excluded.is_(False),
                not_revised(),
            )
            .order_by(JudgmentRow.pk)
        ):
            rater = raters.get((rater_key, rater_hash))
            if rater is None:
                rater = raters[(rater_key, rater_hash)] = RaterCols(rater_key, rater_hash)
            rows.append(ScanRow(*[*cols, rater, ItemCols(keys[cols[1]])]))
        yield chunk, rows


def item_answers(session: Session, item_pk: int) -> ItemRow:
    """An item with its answers (for the words a judgment's telemetry is measured against)."""
    item = session.get(ItemRow, item_pk, options=[selectinload(ItemRow.candidates)])
    assert item is not None  # a counting judgment's item
    return item
