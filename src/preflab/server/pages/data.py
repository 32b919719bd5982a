"""Read-only helpers the pages need that the REST API does not expose as a function.

Nothing here decides anything: the statistics come from :mod:`preflab.quality` (``QUALITY
HOOK``); without it the dashboard shows what the server itself exposes.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ...store.models import ItemRow, JudgmentRow, utcnow
from ...store.server_models import Assignment, PoolEntry
from .. import snapshot
from ..permissions import ProjectRef
from ..services import leases as assign
from ..services import queries, review
from ..sql import POOL_OPEN, domain_ok
from . import plots
from .panels import svg_bars


def live_task(session: Session, project: ProjectRef, user_pk: int) -> dict[str, Any] | None:
    """The rater's live lease as the assignment engine shows it, or ``None`` (no side effect)."""
    lease = session.scalar(
        select(Assignment)
        .where(
            Assignment.project_pk == project.pk,
            Assignment.user_pk == user_pk,
            Assignment.status == "active",
            Assignment.expires_at > utcnow(),
        )
        .limit(1)
    )
    return None if lease is None else assign.task_payload(session, project, lease)


def item_metadata(session: Session, project: ProjectRef, item_key: str) -> dict[str, Any]:
    """An item's stored metadata (server side only: a rater's payload never carries it)."""
    from ...store.models import ItemRow

    return (
        session.scalar(
            select(ItemRow.meta).where(
                ItemRow.project_pk == project.pk, ItemRow.item_key == item_key
            )
        )
        or {}
    )


def project_progress(session: Session, project_pk: int, user_pk: int) -> dict[str, Any]:
    """Pool progress of the project and the caller's own count and standing."""
    target, filled = session.execute(
        select(
            func.coalesce(func.sum(PoolEntry.target), 0),
            func.coalesce(func.sum(PoolEntry.filled), 0),
        ).where(PoolEntry.project_pk == project_pk, PoolEntry.role == "production")
    ).one()
    mine = queries.my_status(session, project_pk, user_pk)  # their status and submitted count
    return {
        "target": int(target),
        "filled": int(min(filled, target)),
        "mine": int(mine["submitted"]),
        "status": mine["status"],
        "share": (filled / target) if target else 0.0,
    }


def label_progress(
    session: Session, project: ProjectRef, user_pk: int, web_session_pk: int | None, has_task: bool
) -> dict[str, Any]:
    """ "Item n of up to N" for this rater (open items the engine's rules would still hand them:
    not seen, domain allowed, not full) and how many they submitted in this login session."""
    from sqlalchemy import exists

    from ...schema.policy import settings_of
    from ...store.server_models import WebSession
    from ..auth import verified_domains

    policy = settings_of(project.settings).policy
    seen = exists().where(Assignment.item_pk == PoolEntry.item_pk, Assignment.user_pk == user_pk)
    # a count is one row: execute().scalar_one() says so (session.scalar is typed optional)
    remaining = session.execute(
        select(func.count())
        .select_from(PoolEntry)
        .where(
            PoolEntry.project_pk == project.pk,
            PoolEntry.role == "production",
            POOL_OPEN,
            ~seen,
            domain_ok(PoolEntry.item_pk, verified_domains(session, user_pk), policy.domain_match),
        )
    ).scalar_one()
    done = session.execute(
        select(func.count())
        .select_from(Assignment)
        .where(
            Assignment.project_pk == project.pk,
            Assignment.user_pk == user_pk,
            Assignment.status == "submitted",
            Assignment.role != "qualification",
        )
    ).scalar_one()
    started = (
        session.scalar(select(WebSession.created_at).where(WebSession.pk == web_session_pk))
        if web_session_pk
        else None
    )
    this_session = (
        0
        if started is None
        else session.execute(
            select(func.count())
            .select_from(Assignment)
            .where(
                Assignment.project_pk == project.pk,
                Assignment.user_pk == user_pk,
                Assignment.status == "submitted",
                Assignment.created_at >= started,
            )
        ).scalar_one()
    )
    current = 1 if has_task else 0
    return {
        "n": done + current,
        "of": done + current + int(remaining),
        "session": int(this_session),
    }


#: What the snapshot holds beside the statistics panels.
SNAPSHOT_EXTRAS = (
    "median_s",
    "median_s_sample",
    "held_out",
    "near_duplicate_pks",
    "counts",
    "excluded_judgments",
    "per_day",
)


def throughput(session: Session, project_pk: int, snap: snapshot.Snapshot) -> dict[str, Any]:
    """Production labels (review pass 0, counting) per UTC day, the last 14 days that have any,
    and in the last 24 hours. Per day: the snapshot's days plus a ``GROUP BY`` over the
    judgments stored since it (a computed-now snapshot: all of them; none before a large
    project's first snapshot); last 24 hours: a range of the ``(project_pk, submitted_at)``
    index."""
    stored = (snap.panels or {}).get("per_day")
    if snap.inline:
        per_day = snapshot.labels_per_day(session, project_pk)
    elif stored is None or snap.mark is None:
        per_day = {}  # a large project's first snapshot is being computed
    else:
        per_day = dict(stored)
        for d, n in snapshot.labels_per_day(
            session, project_pk, after_pk=snap.mark.max_judgment_pk
        ).items():
            per_day[d] = per_day.get(d, 0) + n
    last_24h = session.scalar(
        select(func.count()).where(
            JudgmentRow.project_pk == project_pk,
            JudgmentRow.submitted_at > utcnow() - timedelta(hours=24),
            JudgmentRow.review_pass == 0,
            JudgmentRow.excluded.is_(False),
            review.not_revised(),
        )
    )
    days = sorted(per_day)[-14:]
    return {
        "last_24h": int(last_24h or 0),
        "per_day": [(d, per_day[d]) for d in days],
        "chart": svg_bars([(d, per_day[d]) for d in days], hi=max([1, *per_day.values()])),
    }


def snapshot_counts(
    session: Session, project: ProjectRef, snap: snapshot.Snapshot
) -> dict[str, Any]:
    """The progress panel's counts of a large project, none of them a scan of the project:
    judgments now (the snapshot's count plus those stored after its mark, up to
    :data:`snapshot.SINCE_CAP`: ``judgments_capped``), items, judgments per kind and excluded as of
    the snapshot (``items_as_of_snapshot``); before the first snapshot the items counted up to
    :data:`snapshot.SINCE_CAP` (``items_capped``), the rest ``None``."""
    panels = snap.panels or {}
    stored = panels.get("counts") or {}
    items, capped = stored.get("items"), False
    if items is None:
        some = select(ItemRow.pk).where(ItemRow.project_pk == project.pk)
        counted = session.execute(
            select(func.count()).select_from(some.limit(snapshot.SINCE_CAP + 1).subquery())
        ).scalar_one()
        items, capped = min(counted, snapshot.SINCE_CAP), counted > snapshot.SINCE_CAP
    return {
        "counts": {
            "items": int(items),
            "items_capped": capped,
            "items_as_of_snapshot": "items" in stored,
            "judgments": snap.labels_now,
            "judgments_capped": snap.labels_capped,
            "per_kind": stored.get("per_kind") or {},
        },
        "excluded_judgments": panels.get("excluded_judgments"),
    }


def dashboard(
    session: Session,
    project: ProjectRef,
    quality_api: dict[str, Any],
    snap: snapshot.Snapshot | None = None,
) -> dict[str, Any]:
    """Throughput (SQL aggregates), per-rater timing and held-out labels, and the quality
    engine's panels, from the quality snapshot ``snap`` (:mod:`preflab.server.snapshot`);
    without one, computed now (a caller outside the server, a test)."""
    if snap is None:
        snap = snapshot.compute_inline(session, project)
    panels = snap.panels or {}
    median_s = panels.get("median_s") or {}
    held_out = panels.get("held_out") or {}
    per_rater = [
        {
            **rater,
            "median_s": median_s.get(rater["username"]),
            # issue 28: only labels their telemetry keeps out of exports (strong evidence, no
            # reviewer's decision yet) count here; a weak flag does not
            "flags": held_out.get(rater["username"], 0),
        }
        for rater in quality_api.get("raters", [])
    ]
    quality = {k: v for k, v in panels.items() if k not in SNAPSHOT_EXTRAS}
    if snap.panels is None:
        quality = {"available": False, "computing": True}
    out: dict[str, Any] = {
        "throughput": throughput(session, project.pk, snap),
        "per_rater": per_rater,
        # the labels the report and exports measure: one rule (preflab.quality.labels)
        "quality": quality,
        "snapshot": snap,
    }
    out["plots"] = {
        "labels": plots.labels_over_time(out["throughput"]["per_day"]),
        "agreement": plots.agreement_intervals(out["quality"].get("agreement") or []),
        "accuracy": plots.accuracy_vs_volume(per_rater),
    }
    return out


def past_exports(session: Session, project_pk: int, limit: int = 20) -> list[dict[str, Any]]:
    """The project's exports, newest first, each with its manifest's summary lines and files."""
    from ...store.models import ExportLog

    try:
        from ...io.export.manifest import manifest_summary
    except ImportError:  # EXPORTER HOOK: the list still shows the files

        def manifest_summary(manifest: dict[str, Any]) -> list[str]:
            return []

    out = []
    for log in session.scalars(
        select(ExportLog)
        .where(ExportLog.project_pk == project_pk)
        .order_by(ExportLog.pk.desc())
        .limit(limit)
    ):
        manifest = log.manifest or {}
        try:
            summary = manifest_summary(manifest)
        except (KeyError, TypeError):  # an older manifest layout: show the files at least
            summary = []
        out.append(
            {
                "id": log.pk,
                "format": log.format,
                "created_at": log.created_at.isoformat(timespec="seconds"),
                "summary": summary,
                "files": sorted([*manifest.get("files", {}), "manifest.json"]),
            }
        )
    return out
