"""Read-only helpers the pages need that the REST API does not expose as a function.

Nothing here decides anything: the statistics come from :mod:`preflab.quality` (``QUALITY
HOOK``); without it the dashboard shows what the server itself exposes.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from datetime import timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ...quality.labels import LABEL_SET_RULE, resolve_labels
from ...schema import PairwiseJudgment
from ...store.models import utcnow
from ...store.server_models import Assignment, PoolEntry
from .. import assign, queries, review
from ..permissions import ProjectRef
from . import plots


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

    from ...store.server_models import WebSession
    from ..assign import _domain_filter
    from ..auth import verified_domains
    from ..policy import settings_of

    policy = settings_of(project.settings).policy
    seen = exists().where(Assignment.item_pk == PoolEntry.item_pk, Assignment.user_pk == user_pk)
    remaining = session.scalar(
        select(func.count())
        .select_from(PoolEntry)
        .where(
            PoolEntry.project_pk == project.pk,
            PoolEntry.role == "production",
            PoolEntry.filled < PoolEntry.target,
            ~seen,
            _domain_filter(verified_domains(session, user_pk), policy.domain_match),
        )
    )
    done = session.scalar(
        select(func.count())
        .select_from(Assignment)
        .where(
            Assignment.project_pk == project.pk,
            Assignment.user_pk == user_pk,
            Assignment.status == "submitted",
            Assignment.role != "qualification",
        )
    )
    started = (
        session.scalar(select(WebSession.created_at).where(WebSession.pk == web_session_pk))
        if web_session_pk
        else None
    )
    this_session = (
        0
        if started is None
        else session.scalar(
            select(func.count())
            .select_from(Assignment)
            .where(
                Assignment.project_pk == project.pk,
                Assignment.user_pk == user_pk,
                Assignment.status == "submitted",
                Assignment.created_at >= started,
            )
        )
    )
    current = 1 if has_task else 0
    return {
        "n": done + current,
        "of": done + current + int(remaining),
        "session": int(this_session),
    }


def _svg_bars(
    values: list[tuple[str, float]],
    *,
    lo: float = 0.0,
    hi: float = 1.0,
    ref: float | None = None,
    width: int = 420,
    bar_h: int = 22,
) -> dict[str, Any]:
    """Geometry for a horizontal bar chart drawn by the template as inline SVG (no scripts)."""
    label_w, plot_w = 140, width - 150
    bars = []
    for i, (label, v) in enumerate(values):
        frac = 0.0 if v is None or math.isnan(v) else max(0.0, min(1.0, (v - lo) / (hi - lo)))
        bars.append(
            {
                "label": label,
                "value": v,
                "x": label_w,
                "y": 8 + i * (bar_h + 6),
                "w": round(frac * plot_w, 1),
                "h": bar_h,
            }
        )
    ref_x = None if ref is None else label_w + (ref - lo) / (hi - lo) * plot_w
    return {
        "bars": bars,
        "width": width,
        "height": 16 + len(values) * (bar_h + 6),
        "ref_x": ref_x,
        "label_w": label_w,
    }


def dashboard(session: Session, project: ProjectRef, quality_api: dict[str, Any]) -> dict[str, Any]:
    """Throughput, per-rater timing and flags, and the quality engine's panels when installed."""
    rows = review.active_judgments(session, project.pk)
    parsed = review.parsed_judgments(rows)
    # issue 28: only labels their telemetry keeps out of exports (strong evidence, no reviewer's
    # decision yet) count here; a weak flag (a clean sentence typed without a deletion) does not
    assessed = review.assessments(rows, parsed, review.telemetry_settings(project))
    decided = review.telemetry_decisions(session, project.pk)
    now = utcnow()
    per_day: Counter[str] = Counter()
    last_24h = 0
    times: dict[str, list[float]] = defaultdict(list)
    flag_count: Counter[str] = Counter()
    user_of_rater = {}
    for i, r in enumerate(rows):
        if r.review_pass != 0:
            continue
        if r.submitted_at is not None:
            sub = (
                r.submitted_at
                if r.submitted_at.tzinfo
                else r.submitted_at.replace(tzinfo=now.tzinfo)
            )
            per_day[sub.date().isoformat()] += 1
            if now - sub < timedelta(hours=24):
                last_24h += 1
            if r.started_at is not None:
                start = (
                    r.started_at if r.started_at.tzinfo else r.started_at.replace(tzinfo=now.tzinfo)
                )
                times[r.rater.rater_key].append((sub - start).total_seconds())
        a = assessed.get(i)
        held = a is not None and a.exclude and r.pk not in decided
        flag_count[r.rater.rater_key] += 1 if held else 0  # labels held out, not flags
        user_of_rater[r.rater.rater_key] = r.rater.user_pk
    days = sorted(per_day)[-14:]
    labels = resolve_labels([j for j in parsed if j is not None])
    per_rater = []
    for rater in quality_api.get("raters", []):
        name = rater["username"]
        t = times.get(name, [])
        per_rater.append(
            {
                **rater,
                "median_s": statistics.median(t) if t else None,
                "flags": flag_count.get(name, 0),
            }
        )
    out: dict[str, Any] = {
        "throughput": {
            "last_24h": last_24h,
            "per_day": [(d, per_day[d]) for d in days],
            "chart": _svg_bars([(d, per_day[d]) for d in days], hi=max([1, *per_day.values()])),
        },
        "per_rater": per_rater,
        # the labels the report and exports measure: one rule (preflab.quality.labels)
        "quality": _quality_panels(
            labels.judgments,
            {r.item.item_key: str(r.item.batch_pk or "none") for r in rows},
            _candidate_lengths(rows),
            label_set=labels.describe(),
        ),
    }
    out["plots"] = {
        "labels": plots.labels_over_time(out["throughput"]["per_day"]),
        "agreement": plots.agreement_intervals(out["quality"].get("agreement") or []),
        "accuracy": plots.accuracy_vs_volume(per_rater),
    }
    return out


def _candidate_lengths(rows: list[Any]) -> dict[tuple[str, str], int]:
    """Length in words of every candidate the judgments refer to (for the length-bias panel)."""
    from ...quality.bias import word_length

    out: dict[tuple[str, str], int] = {}
    for r in rows:
        for c in r.item.candidates:
            key = (r.item.item_key, c.candidate_key)
            if key not in out:
                text = (
                    c.text
                    if c.text is not None
                    else " ".join(
                        m.get("content", "")
                        for m in (c.messages or [])
                        if m.get("role") == "assistant"
                    )
                )
                out[key] = word_length(text)
    return out


def _quality_panels(
    judgments: list[Any],
    batch_of: dict[str, str],
    lengths: dict[tuple[str, str], int] | None = None,
    label_set: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Agreement per batch and dimension with CIs, agreement with consensus, length and position
    bias, from :mod:`preflab.quality`; ``label_set`` says which labels they measured
    (:meth:`preflab.quality.labels.LabelSet.describe`), printed on the dashboard."""
    from ... import quality as q

    table_cls = q.LabelTable
    out: dict[str, Any] = {
        "available": True,
        "agreement": [],
        "consensus": {},
        "position": None,
        "length": None,
        "label_set": label_set or {"rule": LABEL_SET_RULE},
    }
    try:
        table = table_cls.from_judgments(judgments, batches=batch_of)
        for batch, kind, dim in table.groups():
            sub = table.select(kind=kind, dimension=dim, batch=batch)
            level = "ordinal" if dim in ("strength", "first_error") else "nominal"
            ci = q.krippendorff_alpha_ci(sub.units, sub.values, level=level, n_boot=200)
            out["agreement"].append(
                {
                    "batch": batch,
                    "kind": kind,
                    "dimension": dim,
                    "alpha": ci.estimate,
                    "low": ci.low,
                    "high": ci.high,
                    "labels": len(sub),
                }
            )
        main = (
            table.select(dimension="winner")
            if "winner" in set(table.dimensions.tolist())
            else table
        )
        if len(main):
            out["consensus"] = q.leave_one_out_agreement(main.units, main.raters, main.values)
        pairwise = [j for j in judgments if isinstance(j, PairwiseJudgment)]
        if pairwise:
            pb = q.position_bias(pairwise)
            out["position"] = {
                **pb,
                "chart": _svg_bars(
                    [(r, v["share"]) for r, v in pb["per_rater"].items()]
                    + [("overall", pb["overall"]["share"])],
                    ref=0.5,
                ),
            }
            decided = [j for j in pairwise if j.chosen is not None]
            if lengths and decided:
                chosen = [lengths.get((j.item_id, j.chosen), 0) for j in decided]
                rejected = [lengths.get((j.item_id, j.rejected), 0) for j in decided]
                lb = q.length_bias(chosen, rejected)
                hist = lb.get("ratio_histogram") or []
                edges = [2 ** (-3 + 0.25 * k) for k in range(len(hist) + 1)]
                # Coarse bins (x0.25 .. x8) keep the chart readable; the JSON API has the full detail.
                coarse = [
                    (f"x{edges[k]:.2g}-{edges[k + 4]:.2g}", sum(hist[k : k + 4]))
                    for k in range(0, len(hist), 4)
                ]
                out["length"] = {
                    **lb,
                    "chart": _svg_bars(coarse, hi=max([1, *(v for _, v in coarse)])),
                    "curve": plots.length_bias_curve(chosen, rejected, lb.get("logistic")),
                }
    except Exception as exc:  # a panel failing must not take the dashboard down
        out["error"] = f"{type(exc).__name__}: {exc}"
    return out


def past_exports(session: Session, project_pk: int, limit: int = 20) -> list[dict[str, Any]]:
    """The project's exports, newest first, each with its manifest's summary lines and files."""
    from ...store.models import ExportLog

    try:
        from ...io.export.manifest import manifest_summary
    except ImportError:  # EXPORTER HOOK: the list still shows the files

        def manifest_summary(_manifest: dict[str, Any]) -> list[str]:
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
