"""The quality snapshot: a project's dashboard statistics, computed outside the web request.

The panels (agreement with CIs, agreement with consensus, position and length bias, the label
set they measured) are the quality report's figures, streamed from the database in memory that
does not grow with the project (:func:`preflab.io.quality_source.accumulate_in`) and drawn by
:func:`preflab.server.pages.panels.quality_panels`; beside them, per rater, the median time
(every time while the project's production labels with times number at most
``Bounds.times``, 500,000; above it the raters share that budget and
``median_s_sample`` names the raters whose median is a sample's,
:class:`~preflab.quality.accumulate.SharedReservoirs`) and the labels held out by telemetry, and the judgments whose rationale nearly duplicates
another's (the data browser's ``near_duplicate_rationale`` flag, a comparison across the whole
project). One row per project in ``quality_snapshots`` holds them as JSON with the time they were
computed and the labels they cover (:class:`Watermark`). The same run computes the review queues
(:func:`.services.review.review_queues`) and stores them whole, in one transaction with the
panels (``review_queue_entries``, counts in ``quality_snapshots.review``): the review page reads
one page of them (:mod:`.services.review_pages`).

Freshness: a request never computes a large project's statistics. It shows the stored snapshot and
starts ``python -m preflab.server.snapshot PROJECT`` (a separate process) when there is none yet,
or when it is older than ``PREFLAB_SNAPSHOT_MAX_AGE_S`` (300 s) *and* the labels changed since
(a judgment stored, a revision among them, or a review decision). At most one runs per
project: the request claims the row with one conditional ``UPDATE`` (``running_since``); a claim
older than :data:`CLAIM_TIMEOUT` counts as a crashed run. A project of at most
``PREFLAB_SNAPSHOT_INLINE_LABELS`` (2,000) judgments is computed in the request instead
(always current; its cost is bounded by that limit, not by the project).

``preflab quality snapshot PROJECT`` refreshes it by hand.
"""

from __future__ import annotations

import argparse
import gc
import logging
import math
import os
import subprocess
import sys
import threading
import time
from array import array
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import (
    BigInteger,
    String,
    cast,
    func,
    literal,
    or_,
    select,
    true,
    type_coerce,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, selectinload

from ..io.quality_source import accumulate_in
from ..quality.accumulate import Bounds, ReportAccumulator, SharedReservoirs
from ..quality.near_duplicate_index import NearDuplicateIndex, SpilledSearch
from ..quality.report import finish_report
from ..quality.telemetry import TelemetrySettings
from ..settings import get_settings
from ..store import repo
from ..store.models import ItemRow, JSONType, JudgmentRow, Project, Rater, utcnow
from ..store.server_models import QualitySnapshot, ReviewRequest
from .database import Database
from .pages.panels import quality_panels
from .permissions import ProjectRef
from .services import review, review_store

log = logging.getLogger(__name__)

#: A claim older than this is a run that died (killed, out of memory): the next request may claim.
CLAIM_TIMEOUT = timedelta(hours=1)
#: Judgments read per query by the per-rater pass (keyset on the judgment pk).
CHUNK = 2000


@dataclass(frozen=True)
class Watermark:
    """What a snapshot covers: the project's stored judgments, the highest judgment pk and the
    highest review-request pk. Index-only reads; an exclusion alone (a rater suspended) changes
    none of them and shows at the next refresh a new label or review decision triggers."""

    labels: int
    max_judgment_pk: int
    max_review_pk: int


def watermark(session: Session, project_pk: int) -> Watermark:
    """The project's watermark, its judgments counted (an index scan: O(project)); the snapshot's
    process reads it before computing. A request reads :func:`live_mark` instead."""
    labels = session.scalar(
        select(func.count()).select_from(JudgmentRow).where(JudgmentRow.project_pk == project_pk)
    )
    max_pk, max_review = _highest(session, project_pk)
    return Watermark(int(labels or 0), max_pk, max_review)


#: The condition of ``ix_judgments_project_pk`` (partial, so that only these reads use it).
_INDEXED = JudgmentRow.pk.is_not(None)


def _highest(session: Session, project_pk: int) -> tuple[int, int]:
    """The highest judgment pk (one probe of ``ix_judgments_project_pk``, migration 0021) and
    review-request pk."""
    max_pk = session.scalar(
        select(func.max(JudgmentRow.pk)).where(JudgmentRow.project_pk == project_pk, _INDEXED)
    )
    max_review = session.scalar(
        select(func.max(ReviewRequest.pk)).where(ReviewRequest.project_pk == project_pk)
    )
    return int(max_pk or 0), int(max_review or 0)


#: Judgments stored after a snapshot's mark that a request counts at most ("N+ new since").
SINCE_CAP = 100_000


def is_small(session: Session, project_pk: int) -> bool:
    """At most ``PREFLAB_SNAPSHOT_INLINE_LABELS`` judgments (counted up to one more: bounded)."""
    limit = get_settings().snapshot_inline_labels
    some = judgments_after(project_pk, 0, limit + 1)
    return session.execute(select(func.count()).select_from(some.subquery())).scalar_one() <= limit


def judgments_after(project_pk: int, after_pk: int, limit: int) -> Any:
    """The pks of the project's first ``limit`` judgments after ``after_pk``, in pk order: a
    range of ``ix_judgments_project_pk`` (its condition named), read from its start. The
    ``ORDER BY`` leaves a planner no cheaper plan than that range: without it PostgreSQL chose a
    sequential scan with a ``LIMIT`` on a table autovacuum had not reached yet (a fresh
    10M import), which reads every other project's judgments stored before this one's."""
    return (
        select(JudgmentRow.pk)
        .where(JudgmentRow.project_pk == project_pk, _INDEXED, JudgmentRow.pk > after_pk)
        .order_by(JudgmentRow.pk)
        .limit(limit)
    )


def live_mark(session: Session, project_pk: int, since: Watermark) -> tuple[Watermark, bool]:
    """The project's watermark now, counted from a stored one (``since``, a snapshot's): its
    labels plus the judgments stored after its highest pk, a range of ``ix_judgments_project_pk``
    read up to :data:`SINCE_CAP` (the flag: more were there). Judgments are never deleted and get
    increasing pks, so on SQLite this is the count :func:`watermark` reads by scanning the
    project. On PostgreSQL a judgment whose transaction committed after the snapshot read its
    mark, with a lower pk than the mark's highest, is not counted until the next snapshot."""
    max_pk, max_review = _highest(session, project_pk)
    new = 0
    if max_pk > since.max_judgment_pk:
        after = judgments_after(project_pk, since.max_judgment_pk, SINCE_CAP + 1)
        new = session.execute(select(func.count()).select_from(after.subquery())).scalar_one()
    return Watermark(since.labels + min(new, SINCE_CAP), max_pk, max_review), new > SINCE_CAP


def utc_day(session: Session, at: Any) -> Any:
    """``YYYY-MM-DD`` of a timestamp column in UTC, in SQL."""
    if session.get_bind().dialect.name == "postgresql":
        return func.to_char(func.timezone("UTC", at), "YYYY-MM-DD")
    return func.substr(at, 1, 10)  # SQLite keeps the UTC wall time as text


def labels_per_day(
    session: Session, project_pk: int, after_pk: int = 0, upto_pk: int | None = None
) -> dict[str, int]:
    """Production labels (review pass 0, counting) per UTC day of submission, of judgments with
    pk in ``(after_pk, upto_pk]`` (a rowid range: O(those judgments))."""
    day = utc_day(session, JudgmentRow.submitted_at)
    stmt = (
        select(day, func.count())
        .where(
            JudgmentRow.pk > after_pk,
            JudgmentRow.project_pk == project_pk,
            JudgmentRow.review_pass == 0,
            JudgmentRow.excluded.is_(False),
            JudgmentRow.submitted_at.is_not(None),
            review.not_revised(),
        )
        .group_by(day)
    )
    if upto_pk is not None:
        stmt = stmt.where(JudgmentRow.pk <= upto_pk)
    if after_pk:  # a request's "since the snapshot": a range of ix_judgments_project_pk
        stmt = stmt.where(_INDEXED)
    return {str(d): int(n) for d, n in session.execute(stmt)}


@dataclass
class Snapshot:
    """What the dashboard shows: the panels (``None`` while none was computed yet), when and over
    how many labels they were computed, the labels now, and a refresh under way."""

    panels: dict[str, Any] | None
    computed_at: datetime | None
    labels: int
    labels_now: int
    refreshing_since: datetime | None = None
    error: str | None = None
    inline: bool = False
    #: the labels it covers (``None``: computed now, or none stored yet)
    mark: Watermark | None = None
    #: the review queues' counts and spot share (``None``: not computed with these panels);
    #: their entries are in ``review_queue_entries`` (:mod:`.services.review_store`)
    review: dict[str, Any] | None = None
    #: ``labels_now`` counted up to :data:`SINCE_CAP` after the mark: there are more
    labels_capped: bool = False
    #: the project's watermark when this was read (:func:`live_mark`; ``None``: not read)
    now: Watermark | None = None

    @property
    def labels_since(self) -> int:
        """Counting labels added since (never negative: exclusions take labels off)."""
        return max(0, self.labels_now - self.labels)

    @property
    def near_duplicates(self) -> set[int]:
        """Judgment pks flagged ``near_duplicate_rationale`` when the snapshot was computed."""
        return set((self.panels or {}).get("near_duplicate_pks") or [])


# -- computing ----------------------------------------------------------------------------------


def jsonable(value: Any) -> Any:
    """Plain JSON: numpy scalars as Python numbers, NaN and infinities as ``None`` (PostgreSQL's
    JSONB refuses NaN; the pages print ``None`` as '—'), tuples as lists."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and not isinstance(value, str | bytes):
        value = value.item()  # numpy scalar
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _activity_rows(session: Session, project_pk: int) -> Iterator[Any]:
    """The project's counting judgments (:func:`review.active_judgments`' rule) in pk order, the
    columns the per-rater pass reads (no ORM object, no parsing): one query, streamed."""
    stmt = (
        select(
            JudgmentRow.pk,
            JudgmentRow.review_pass,
            JudgmentRow.started_at,
            JudgmentRow.submitted_at,
            JudgmentRow.telemetry,
            JudgmentRow.rationale,
            Rater.rater_key,
        )
        .join(Rater, Rater.pk == JudgmentRow.rater_pk)
        .where(
            JudgmentRow.project_pk == project_pk,
            JudgmentRow.excluded.is_(False),
            review.not_revised(),
        )
        .order_by(JudgmentRow.pk)
        .execution_options(yield_per=CHUNK)
    )
    yield from session.execute(stmt)


def _held_out(
    session: Session,
    pks: list[int],
    settings: TelemetrySettings,
    decided: dict[int, Any],
) -> list[str]:
    """The rater key of each of these judgments (production labels with telemetry) that its
    telemetry holds out (the export's rule, no reviewer's decision): read whole, as the review
    pages read them, ``CHUNK`` at a time."""
    out: list[str] = []
    for start in range(0, len(pks), CHUNK):
        rows = list(
            session.scalars(
                select(JudgmentRow)
                .where(JudgmentRow.pk.in_(pks[start : start + CHUNK]))
                .options(
                    selectinload(JudgmentRow.rater),
                    selectinload(JudgmentRow.item).selectinload(ItemRow.candidates),
                )
                .order_by(JudgmentRow.pk)
            )
        )
        parsed = review.parsed_judgments(rows)
        for i, found in review.assessments(rows, parsed, settings).items():
            if found.exclude and rows[i].pk not in decided:
                out.append(rows[i].rater.rater_key)
        session.expunge_all()  # keep the identity map to one chunk
    return out


def activity(
    session: Session, project: ProjectRef | Project
) -> tuple[dict[str, Any], NearDuplicateIndex]:
    """:func:`rater_activity`, and its near-duplicate search (for the report's flags)."""
    out, index, _partners = _activity(session, project, held_out=True)
    return out, index


def _activity(
    session: Session, project: ProjectRef | Project, *, held_out: bool
) -> tuple[dict[str, Any], NearDuplicateIndex, dict[int, list[int]]]:
    """:func:`activity`, and the search's pairs as the review queues read them (judgment pk ->
    the pks it nearly duplicates, :func:`.services.review_scan.near_duplicate_partners`' answer:
    the same rationales, owners and order). ``held_out=False``: every rater's held-out count is
    0, the caller adds them (the review queues' pass assesses the same labels)."""
    settings = review.telemetry_settings(project)
    decided = review.telemetry_decisions(session, project.pk) if held_out else {}
    bounds = Bounds()  # the report's: one budget of active times shared by the raters
    times = SharedReservoirs(bounds.times, bounds.times_per_rater)
    held: dict[str, int] = {}
    with_telemetry: list[int] = []
    cfg = TelemetrySettings()  # the data browser's flags use the engine's defaults, as before
    pks = array("q")
    # every counting rationale searched, held on disk (not in memory) until the search ends
    with SpilledSearch(cfg.min_jaccard, cfg.shingle, cfg.num_perm) as search:
        for pk, review_pass, started, submitted, telemetry, rationale, key in _activity_rows(
            session, project.pk
        ):
            if rationale and len(rationale) >= 20:
                pks.append(pk)
                search.add(key, rationale)
            if review_pass != 0:
                continue
            held.setdefault(key, 0)
            if submitted is not None and started is not None:
                times.add(key, (submitted - started).total_seconds())
            if telemetry is not None and held_out:
                with_telemetry.append(pk)
        index = search.index()
    for key in _held_out(session, with_telemetry, settings, decided):
        held[key] += 1
    dups: set[int] = set()
    partners: dict[int, set[int]] = defaultdict(set)
    for first, second, _sim in index.found:
        dups.update((pks[first], pks[second]))
        partners[pks[first]].add(pks[second])
        partners[pks[second]].add(pks[first])
    out: dict[str, Any] = {
        "median_s": {k: _median(r.items) for k, r in times.by_key.items()},
        "held_out": held,
        "near_duplicate_pks": sorted(dups),
    }
    sampled = {
        k: {"labels": len(r.items), "of": r.seen} for k, r in times.by_key.items() if r.sampled
    }
    if sampled:  # past the budget: these raters' medians are a sample's (none below it)
        out["median_s_sample"] = sampled
    return out, index, {pk: sorted(others) for pk, others in partners.items()}


def rater_activity(session: Session, project: ProjectRef | Project) -> dict[str, Any]:
    """Per rater (``rater_key``): the median seconds from start to submission of their production
    labels and the labels held out by telemetry (the export's rule, no reviewer's decision); and
    the judgment pks whose rationale nearly duplicates another's anywhere in the project (the rule
    of :func:`preflab.quality.telemetry_flags`). One streamed query of the counting judgments'
    columns (no ORM object); only the production labels with telemetry are read whole (their
    assessment needs the judgment and its item's answers), ``CHUNK`` at a time."""
    return activity(session, project)[0]


def _median(values: Sequence[float]) -> float:
    import statistics

    return float(statistics.median(values))


def compute_panels(
    session: Session, project: ProjectRef | Project, mark: Watermark
) -> dict[str, Any]:
    """The snapshot's panels: the quality report streamed in ``session`` (memory that does not
    grow with the project, the figures ``preflab quality report`` prints), and
    :func:`rater_activity`."""
    per_rater, searched = activity(session, project)
    return _panels(session, project, mark, per_rater, searched)


def compute_snapshot(
    session: Session, project: ProjectRef | Project, mark: Watermark, spool: review_store.Spool
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The panels (:func:`compute_panels`) and the review queues (into ``spool``, the entries
    :func:`.services.review.review_queues` gives, as they are computed) with their
    :func:`.services.review_store.summary`: one near-duplicate search for the three of them (the
    per-rater figures, the report's flags, the queue's reasons), and the labels held out by
    telemetry assessed once, in the queues' pass."""
    per_rater, searched, partners = _activity(session, project, held_out=False)
    tally = review.scan_queues(session, project, spool, partners=partners)
    del partners
    held = per_rater["held_out"]
    for key, n in tally.held_by_rater.items():
        held[key] += n
    summary = spool.finish(tally, review.pending_demonstrations(session, project))
    del tally
    gc.collect()  # its cycles freed before the report's accumulator grows
    return _panels(session, project, mark, per_rater, searched), summary


def _panels(
    session: Session,
    project: ProjectRef | Project,
    mark: Watermark,
    per_rater: dict[str, Any],
    searched: NearDuplicateIndex,
) -> dict[str, Any]:
    panels = _report_panels(accumulate_in(session, project.name), searched)
    del searched
    project_row = session.get(Project, project.pk)
    assert project_row is not None
    excluded = session.scalar(
        select(func.count())
        .select_from(JudgmentRow)
        .where(JudgmentRow.project_pk == project.pk, JudgmentRow.excluded.is_(True))
    )
    return jsonable(
        {
            **panels,
            **per_rater,
            # the dashboard's progress figures and throughput, as of the watermark
            "counts": repo.project_counts(session, project_row),
            "excluded_judgments": int(excluded or 0),
            "per_day": labels_per_day(session, project.pk, upto_pk=mark.max_judgment_pk),
        }
    )


def _report_panels(acc: ReportAccumulator, searched: NearDuplicateIndex) -> dict[str, Any]:
    """The panels of a fed accumulator (pass the only reference: this drops it), its
    near-duplicate flags read from ``searched`` (its rationales are among those searched): the
    report finished, then only the decided pairs' length columns (int64 numpy, the length
    chart's) kept of the accumulator while the panels are drawn (the accumulator, ~300 MB at
    1M judgments, is gone by then)."""
    acc.pair_search = searched.pairs
    report = finish_report(acc)
    chosen, rejected = acc.length_columns()
    del acc
    return quality_panels(report, chosen, rejected)


def compute_inline(session: Session, project: ProjectRef | Project) -> Snapshot:
    """The panels of a small project, computed now in ``session``'s database (not stored)."""
    mark = watermark(session, project.pk)
    panels = compute_panels(session, project, mark)
    return Snapshot(panels, utcnow(), mark.labels, mark.labels, inline=True)


# -- storing and claiming -------------------------------------------------------------------------


def _insert_missing(session: Session, project_pk: int) -> None:
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    session.execute(
        insert(QualitySnapshot)
        .values(project_pk=project_pk, labels=0, max_judgment_pk=0, max_review_pk=0)
        .on_conflict_do_nothing(index_elements=["project_pk"])
    )


def claim(session: Session, project_pk: int, *, force: bool = False) -> bool:
    """Claim the next refresh of the project's snapshot (one conditional ``UPDATE``): true when
    this caller won it, false while another run holds a live claim (``force`` takes it anyway)."""
    _insert_missing(session, project_pk)
    now = utcnow()
    stmt = update(QualitySnapshot).where(QualitySnapshot.project_pk == project_pk)
    if not force:
        stmt = stmt.where(
            or_(
                QualitySnapshot.running_since.is_(None),
                QualitySnapshot.running_since < now - CLAIM_TIMEOUT,
            )
        )
    result = session.execute(
        stmt.values(running_since=now), execution_options={"synchronize_session": False}
    )
    return bool(getattr(result, "rowcount", 0) == 1)


def _as_utc(t: datetime | None) -> datetime | None:
    return None if t is None else (t if t.tzinfo else t.replace(tzinfo=UTC))


#: What :func:`stored` reads of the panels: all of them; all but the near-duplicate judgment pks
#: (``shown``: the dashboard, which does not show them, and they grow with the project); or none
#: (``none``: a page that needs the freshness only; ``{}`` stands for stored panels).
PanelsRead = Literal["all", "shown", "none"]

_DUPS = "near_duplicate_pks"


def _panels_column(session: Session, panels: PanelsRead) -> Any:
    col = QualitySnapshot.panels
    if panels == "none":
        return col.is_not(None)
    if panels == "shown":  # the key removed in SQL: its list never reaches Python
        if session.get_bind().dialect.name == "postgresql":
            return type_coerce(col.op("-")(literal(_DUPS, String)), JSONType)
        return type_coerce(func.json_remove(col, f"$.{_DUPS}"), JSONType)
    return col


def stored(
    session: Session, project_pk: int, labels_now: int | None = None, *, panels: PanelsRead = "all"
) -> Snapshot | None:
    """The project's stored snapshot (a claim past :data:`CLAIM_TIMEOUT` reads as no refresh).
    ``labels_now``: the project's labels now; ``None``: counted from the row's mark
    (:func:`live_mark`: bounded, what a request does)."""
    row = session.execute(
        select(
            _panels_column(session, panels),
            QualitySnapshot.computed_at,
            QualitySnapshot.labels,
            QualitySnapshot.max_judgment_pk,
            QualitySnapshot.max_review_pk,
            QualitySnapshot.running_since,
            QualitySnapshot.error,
            QualitySnapshot.review,
        ).where(QualitySnapshot.project_pk == project_pk)
    ).one_or_none()
    if row is None:
        return None
    found, computed_at, labels, max_pk, max_review, running, error, queues = row
    if panels == "none":
        found = {} if found else None
    running = _as_utc(running)
    if running is not None and running < utcnow() - CLAIM_TIMEOUT:
        running = None
    mark = Watermark(labels, max_pk, max_review)
    now, capped = None, False
    if labels_now is None:
        now, capped = live_mark(session, project_pk, mark)
        labels_now = now.labels
    return Snapshot(
        found,
        _as_utc(computed_at),
        labels,
        labels_now,
        running,
        error,
        mark=mark,
        review=queues,
        labels_capped=capped,
        now=now,
    )


def near_duplicates_among(session: Session, project_pk: int, pks: Sequence[int]) -> set[int]:
    """Which of these judgment pks the stored snapshot flags ``near_duplicate_rationale``: its
    list is searched in SQL (SQLite's ``json_each``, PostgreSQL's ``jsonb_array_elements_text``),
    only the matches come back."""
    if not pks:
        return set()
    col = QualitySnapshot.panels
    if session.get_bind().dialect.name == "postgresql":
        each = func.jsonb_array_elements_text(col[_DUPS]).table_valued("value")
        value: Any = cast(each.c.value, BigInteger)
    else:
        each = func.json_each(col, f"$.{_DUPS}").table_valued("value")
        value = each.c.value
    rows = session.scalars(
        select(value)
        .select_from(QualitySnapshot)
        .join(each, true())  # the function reads the row's panels (LATERAL)
        .where(QualitySnapshot.project_pk == project_pk, value.in_(list(pks)))
    )
    return {int(pk) for pk in rows}


def refresh(url: str, project_name: str, *, claimed: bool = False, force: bool = False) -> Snapshot:
    """Compute and store the project's snapshot (the separate process's work). Claims the row
    first unless the caller (the dashboard request) already did; raises :class:`RuntimeError`
    when another run holds it. A failure is recorded on the row (the page shows it) and raised."""
    get_project = repo.get_project
    db = Database(url, pool_size=2, max_overflow=0)
    try:
        with db.writing() as s:
            project_pk = get_project(s, project_name).pk
            if not claimed and not claim(s, project_pk, force=force):
                raise RuntimeError(
                    f"{project_name}: a snapshot is being computed already; "
                    "wait for it, or pass --force"
                )
        started = time.monotonic()
        with review_store.Spool(None) as spool:
            try:
                with db.reading() as s:
                    project = get_project(s, project_name)
                    spool.secret = project.secret  # each spot entry's draw
                    mark = watermark(s, project.pk)  # before reading: later labels are "since"
                    # the panels and the review queues over the same labels (the review page
                    # reads a page of them), the queues spooled as they are computed
                    panels, queue_summary = compute_snapshot(s, project, mark, spool)
            except Exception as exc:
                with db.writing() as s:
                    s.execute(
                        update(QualitySnapshot)
                        .where(QualitySnapshot.project_pk == project_pk)
                        .values(running_since=None, error=f"{type(exc).__name__}: {exc}")
                    )
                raise
            with db.writing() as s:
                review_store.replace(s, project_pk, spool.rows())
                s.execute(
                    update(QualitySnapshot)
                    .where(QualitySnapshot.project_pk == project_pk)
                    .values(
                        review=queue_summary,
                        panels=panels,
                        computed_at=utcnow(),
                        labels=mark.labels,
                        max_judgment_pk=mark.max_judgment_pk,
                        max_review_pk=mark.max_review_pk,
                        seconds=time.monotonic() - started,
                        running_since=None,
                        error=None,
                    )
                )
                out = stored(s, project_pk, mark.labels)
        assert out is not None
        return out
    finally:
        db.dispose()


# -- what a request does ----------------------------------------------------------------------------


def spawn(url: str, project_name: str) -> subprocess.Popen[bytes]:
    """Start ``python -m preflab.server.snapshot PROJECT --claimed`` detached from the request
    (the database URL through its environment, not its command line); a thread reaps it."""
    # the child imports this very preflab, whether installed or run from a checkout
    root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH")
    env = {
        **os.environ,
        "PREFLAB_DB": url,
        "PYTHONPATH": root if not path else root + os.pathsep + path,
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "preflab.server.snapshot", project_name, "--claimed"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    threading.Thread(target=proc.wait, name="snapshot-reaper", daemon=True).start()
    return proc


def current(
    db: Database,
    project: ProjectRef,
    *,
    start: Callable[[str, str], Any] | None = None,
    mark: Watermark | None = None,
    panels: PanelsRead = "all",
) -> Snapshot:
    """The snapshot a page shows, never computing a large project in the request: the stored one,
    after starting a refresh (``start``, default :func:`spawn`) when it is missing or stale (the
    rule in this module's docstring); a small project's, computed now. ``mark``: the project's
    :func:`watermark`, when the caller has just read it (else the labels are counted from the
    stored mark, :func:`live_mark`). ``panels``: what to read of the stored panels
    (:data:`PanelsRead`). Every read is bounded: an index probe or a capped range."""
    settings = get_settings()
    with db.reading() as s:
        small = (
            is_small(s, project.pk)
            if mark is None
            else mark.labels <= settings.snapshot_inline_labels
        )
        if small:
            return compute_inline(s, project)
        snap = stored(s, project.pk, None if mark is None else mark.labels, panels=panels)
    if snap is not None:
        now = mark or snap.now
        assert now is not None  # read by stored() when no mark was given
        if snap.refreshing_since is not None or not is_stale(
            snap, now, settings.snapshot_max_age_s
        ):
            return snap
    with db.writing() as s:
        won = claim(s, project.pk)
    if won:
        (start or spawn)(db.url, project.name)
    with db.reading() as s:
        out = stored(s, project.pk, None if mark is None else mark.labels, panels=panels)
    assert out is not None  # the claim inserted the row
    return out


def is_stale(snap: Snapshot, mark: Watermark, max_age_s: float) -> bool:
    """None computed yet (and the last run did not fail on these very labels), or older than
    ``max_age_s`` with labels changed since."""
    if snap.panels is None or snap.review is None:  # (a snapshot stored before the queues were)
        return not (snap.error and snap.mark == mark)  # a failure is shown, not retried in a loop
    if snap.mark == mark or snap.computed_at is None:
        return False
    return (utcnow() - snap.computed_at).total_seconds() > max_age_s


def near_duplicates(
    db: Database, project: ProjectRef
) -> tuple[set[int] | Callable[[Session, Sequence[int]], set[int]], Snapshot | None]:
    """The judgment pks the data browser flags ``near_duplicate_rationale`` and the snapshot they
    come from: for a small project the set, computed now (the snapshot ``None``: current); else a
    lookup of a page's judgment pks in the stored snapshot (:func:`near_duplicates_among`), its
    panels not read."""
    with db.reading() as s:
        if is_small(s, project.pk):
            return set(rater_activity(s, project)["near_duplicate_pks"]), None
    snap = current(db, project, panels="none")

    def among(session: Session, pks: Sequence[int]) -> set[int]:
        return near_duplicates_among(session, project.pk, pks)

    return among, snap


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m preflab.server.snapshot",
        description="Compute and store a project's quality snapshot (the dashboard's statistics).",
    )
    parser.add_argument("project")
    parser.add_argument("--db", help="database URL (default: $PREFLAB_DB)")
    parser.add_argument("--claimed", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--force", action="store_true", help="take over a running claim")
    args = parser.parse_args(argv)
    url = args.db or get_settings().db
    try:
        snap = refresh(url, args.project, claimed=args.claimed, force=args.force)
    except Exception as exc:  # the row says what failed; so does the exit status
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{args.project}: snapshot of {snap.labels} labels computed at {snap.computed_at}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
