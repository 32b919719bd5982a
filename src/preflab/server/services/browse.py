"""The data browser: a project's items a page at a time, without loading the project.

Pages go by item pk (keyset: ``after=<pk>``, the next page starts after the last item shown).
The filters ``kind``, ``rater`` and ``domain`` are SQL (``EXISTS`` over the item's counting
judgments, the item's domain list); ``q`` narrows in SQL (``LIKE`` over the item id, the
prompt's stored JSON and the answers' text, for a needle of printable ASCII without ``"`` or
``\\``) and is then checked on the page's rows with the rule it always had (case-insensitive, in
the prompt as text, the answers or the item id). The facts a row shows (labels, kinds, raters,
telemetry flags, labels held out, disagreement reasons) are computed for the page's items only:
one query for their judgments (with raters and candidates), the rules of
:mod:`preflab.server.services.review`. The ``near_duplicate_rationale`` flag compares rationales across
the whole project: it comes from the quality snapshot (:mod:`preflab.server.snapshot`), whose
list of flagged judgments is searched in SQL for the page's judgments only.

``flagged``, ``disagreement`` and ``q`` depend on those per-item facts: the browser then reads
items in keyset order ``SCAN_CHUNK`` at a time until the page is full or ``SCAN_BUDGET`` items
were examined, and shows what it found with a link to continue scanning from where it stopped.
The total is a SQL ``count`` when every filter is SQL; otherwise there is none ("more").
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import Query
from sqlalchemy import ColumnElement, Text, and_, cast, exists, func, literal, select, type_coerce
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Session, selectinload

from ...quality.telemetry import TelemetrySettings, judgment_flags
from ...schema import prompt_as_text
from ...schema.policy import settings_of
from ...store.models import CandidateRow, ItemRow, JudgmentRow, Rater
from ..permissions import ProjectRef
from . import review

#: The total counts matches up to this many ("10000+" beyond).
COUNT_CAP = 10_000
#: Items read per query while scanning for a per-item filter.
SCAN_CHUNK = 200
#: Items a scanning page examines at most before it stops and offers to continue.
SCAN_BUDGET = 1500


@dataclass(frozen=True)
class Filters:
    kind: str | None = None
    rater: str | None = None
    domain: str | None = None
    flagged: bool = False
    disagreement: bool = False
    q: str | None = None

    @property
    def needle(self) -> str:
        return (self.q or "").strip().lower()

    @property
    def scanning(self) -> bool:
        """A filter checked per item in Python (the page scans; there is no total)."""
        return self.flagged or self.disagreement or bool(self.needle)


def _counting(project_pk: int) -> ColumnElement[bool]:
    """The judgment counts: not excluded, not replaced by a revision (:func:`review.active_judgments`)."""
    return and_(
        JudgmentRow.project_pk == project_pk,
        JudgmentRow.excluded.is_(False),
        review.not_revised(),
    )


def _like_safe(needle: str) -> bool:
    """A needle the SQL ``LIKE`` narrowing may use: printable ASCII (SQLite folds ASCII case
    only) and nothing JSON escapes in the stored prompt."""
    return needle.isascii() and needle.isprintable() and '"' not in needle and "\\" not in needle


def _sql_filters(session: Session, project: ProjectRef, f: Filters) -> list[ColumnElement[bool]]:
    dialect = session.get_bind().dialect.name
    out: list[ColumnElement[bool]] = []
    if dialect == "sqlite":
        # `+project_pk`: keep SQLite on the primary key for `pk > ? ORDER BY pk LIMIT n`, not the
        # (project_pk, item_key) index, which would read and sort every item of the project
        out.append(ItemRow.project_pk + 0 == project.pk)
    else:
        out.append(ItemRow.project_pk == project.pk)
    counting = _counting(project.pk)
    if f.kind:
        out.append(
            exists().where(JudgmentRow.item_pk == ItemRow.pk, counting, JudgmentRow.kind == f.kind)
        )
    if f.rater:
        blind = settings_of(project.settings).policy.blind
        who = (
            func.substr(Rater.rater_hash, 1, 24) == f.rater if blind else Rater.rater_key == f.rater
        )
        raters = select(Rater.pk).where(Rater.project_pk == project.pk, who)
        # uncorrelated: the rater's labels once (the (project_pk, rater_pk) index), not a probe
        # per item that a planner may run over that index for every item
        labelled = select(JudgmentRow.item_pk).where(counting, JudgmentRow.rater_pk.in_(raters))
        out.append(ItemRow.pk.in_(labelled))
    if f.domain:
        if dialect == "postgresql":
            out.append(type_coerce(ItemRow.domains, JSONB).contains([f.domain]))
        else:
            each = func.json_each(ItemRow.domains).table_valued("value")
            out.append(exists(select(literal(1)).select_from(each).where(each.c.value == f.domain)))
    needle = f.needle
    if needle and _like_safe(needle):
        pattern = "%" + needle.replace("!", "!!").replace("%", "!%").replace("_", "!_") + "%"

        def like(col: Any) -> ColumnElement[bool]:
            return func.lower(col).like(pattern, escape="!")

        out.append(
            like(ItemRow.item_key)
            | like(cast(ItemRow.prompt, Text))
            | exists().where(CandidateRow.item_pk == ItemRow.pk, like(CandidateRow.text))
        )
    return out


def _page_judgments(session: Session, project_pk: int, item_pks: list[int]) -> list[JudgmentRow]:
    """The counting judgments of these items, oldest first, with raters and candidates."""
    return list(
        session.scalars(
            select(JudgmentRow)
            .where(
                JudgmentRow.project_pk == project_pk,
                JudgmentRow.item_pk.in_(item_pks),
                JudgmentRow.excluded.is_(False),
                review.not_revised(),
            )
            .options(
                selectinload(JudgmentRow.rater),
                selectinload(JudgmentRow.item).selectinload(ItemRow.candidates),
            )
            .order_by(JudgmentRow.pk)
        )
    )


#: The judgment pks flagged ``near_duplicate_rationale``: a set, or a lookup of some pks (the
#: stored snapshot's, :func:`preflab.server.snapshot.near_duplicates_among`).
NearDuplicates = Collection[int] | Callable[[Session, Sequence[int]], set[int]]


def item_facts(
    session: Session, project: ProjectRef, items: list[ItemRow], near_duplicates: NearDuplicates
) -> list[dict[str, Any]]:
    """The browser's row of each item, from its judgments only (the page's, one query)."""
    if not items:
        return []
    rows = _page_judgments(session, project.pk, [i.pk for i in items])
    if callable(near_duplicates):
        near_duplicates = near_duplicates(session, [r.pk for r in rows])
    parsed = review.parsed_judgments(rows)
    assessed = review.assessments(rows, parsed, review.telemetry_settings(project))
    decided = review.telemetry_decisions(session, project.pk, [r.pk for r in rows])
    disagree = review.disagreement_reasons(parsed)
    cfg = TelemetrySettings()
    blind = settings_of(project.settings).policy.blind
    per_item: dict[int, list[int]] = defaultdict(list)
    flags: dict[int, set[str]] = {}
    for i, (r, j) in enumerate(zip(rows, parsed, strict=True)):
        per_item[r.item_pk].append(i)
        found = {name for name, _ in judgment_flags(j, None, cfg)} if j is not None else set()
        if r.pk in near_duplicates:
            found.add("near_duplicate_rationale")
        flags[i] = found
    out = []
    for item in items:
        idx = per_item.get(item.pk, [])
        who = {i: rows[i].rater.rater_hash[:24] if blind else rows[i].rater.rater_key for i in idx}
        out.append(
            {
                "item_id": item.item_key,
                "domains": item.domains or [],
                "answers": len(item.candidates),
                "labels": len(idx),
                "kinds": sorted({rows[i].kind for i in idx}),
                "raters": sorted(set(who.values())),
                "flags": sorted({f for i in idx for f in flags[i]}),
                # labels held out by their telemetry (strong evidence, no reviewer's decision)
                "held_out": sum(review.is_held_out(assessed.get(i), rows[i], decided) for i in idx),
                "disagreement": disagree.get(item.item_key, []),
            }
        )
    return out


def _keeps(row: dict[str, Any], item: ItemRow, f: Filters) -> bool:
    """The per-item filters, by the rules the browser always had."""
    if f.flagged and not row["flags"]:
        return False
    if f.disagreement and not row["disagreement"]:
        return False
    needle = f.needle
    if needle:
        text = prompt_as_text(item.prompt) + " " + " ".join(c.text or "" for c in item.candidates)
        if needle not in text.lower() and needle not in item.item_key.lower():
            return False
    return True


def browse(
    session: Session,
    project: ProjectRef,
    filters: Filters,
    *,
    after: int = 0,
    offset: int = 0,
    limit: int = 50,
    near_duplicates: NearDuplicates = frozenset(),
    budget: int = SCAN_BUDGET,
) -> dict[str, Any]:
    """One page of items after item pk ``after``: ``items``, ``total`` (``None`` when a per-item
    filter is on), ``next_after`` (the pk to continue from, ``None`` at the end), ``scanned``
    (items examined) and ``stopped`` (the scan budget ran out before the page filled).

    ``offset`` (older links and API clients) skips that many matching items first: SQL
    ``OFFSET`` when every filter is SQL, else counted by the scan (within its budget)."""
    where = _sql_filters(session, project, filters)
    base = select(ItemRow).where(*where).options(selectinload(ItemRow.candidates))
    dups = near_duplicates if callable(near_duplicates) else set(near_duplicates)
    found: list[dict[str, Any]] = []
    cursor, scanned, stopped, more, skip = after, 0, False, False, offset
    if not filters.scanning:
        chunk = list(
            session.scalars(
                base.where(ItemRow.pk > after).order_by(ItemRow.pk).offset(offset).limit(limit + 1)
            )
        )
        more = len(chunk) > limit
        chunk = chunk[:limit]
        found = item_facts(session, project, chunk, dups)
        scanned = len(chunk)
        cursor = chunk[-1].pk if chunk else after
    else:
        while len(found) < limit:
            if scanned >= budget:
                stopped = more = True
                break
            size = min(SCAN_CHUNK, budget - scanned)
            chunk = list(
                session.scalars(base.where(ItemRow.pk > cursor).order_by(ItemRow.pk).limit(size))
            )
            if not chunk:
                break
            rows = item_facts(session, project, chunk, dups)
            for item, row in zip(chunk, rows, strict=True):
                scanned += 1
                cursor = item.pk
                if not _keeps(row, item, filters):
                    continue
                if skip:
                    skip -= 1
                else:
                    found.append(row)
                    if len(found) == limit:
                        break
            if len(found) == limit:
                # is there anything after? (a page that ends the list has no next link)
                more = (
                    session.scalar(select(ItemRow.pk).where(*where, ItemRow.pk > cursor).limit(1))
                    is not None
                )
                break
            if len(chunk) < size:
                break
    total, capped = None, False
    if not filters.scanning:
        # counted up to COUNT_CAP + 1 matches: a count stays bounded when most items match
        matches = select(ItemRow.pk).where(*where).limit(COUNT_CAP + 1).subquery()
        total = session.scalar(select(func.count()).select_from(matches))
        if total is not None and total > COUNT_CAP:
            total, capped = COUNT_CAP, True
    return {
        "items": found,
        "total": total,
        "total_capped": capped,
        "after": after,
        "offset": offset,
        "next_after": cursor if more else None,
        "scanned": scanned,
        "stopped": stopped,
    }


@dataclass
class BrowseFilters:
    """The data browser's filters, as query parameters (the API and the admin's data page)."""

    kind: str | None = Query(default=None, max_length=40)
    rater: str | None = Query(default=None, max_length=200)
    domain: str | None = Query(default=None, max_length=100)
    flagged: bool = False
    disagreement: bool = False
    q: str | None = Query(default=None, max_length=200)
