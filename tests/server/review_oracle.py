"""The review queues as they were before issue 27 (every counting judgment of the project loaded
at once, flags computed over the whole project): the test oracle the streamed queues
(:mod:`preflab.server.services.review_queues`) are held equal to on small projects. Never served."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from preflab.schema import ReviewPass
from preflab.schema.policy import settings_of
from preflab.server.database import must_get
from preflab.server.permissions import ProjectRef
from preflab.server.services import extra_raters, review
from preflab.server.services.review import (
    active_judgments,
    assessments,
    disagreement_reasons,
    is_held_out,
    parsed_judgments,
    reference_disagreements,
    telemetry_decisions,
    telemetry_flags,
    telemetry_settings,
)
from preflab.store.models import Project
from preflab.store.server_models import GoldOutcome, ReviewRequest


def review_queues(
    session: Session, project: ProjectRef, *, share: float | None = None
) -> dict[str, Any]:
    """The adjudication queue (low agreement, failed gold, near-duplicate rationales), the
    labels held out by telemetry waiting for a reviewer's decision, weak telemetry signals per
    rater, and the spot-review queue (a stable pseudo-random ``share`` of the other production
    judgments).

    A weak telemetry flag (one signal, such as a clean sentence typed without a deletion) does
    not queue its item: most honest labels carry one, and a queue of them hides what needs a
    reviewer. A reviewer sees weak flags where they help: per rater (a pattern over many
    labels), on the item page with their evidence, and beside the other reasons of a queued item.
    """
    p = must_get(session, Project, project.pk)
    policy = settings_of(project.settings).policy
    share = policy.spot_review_share if share is None else share
    rows = active_judgments(session, project.pk)
    parsed = parsed_judgments(rows)
    flags = telemetry_flags(parsed)
    assessed = assessments(rows, parsed, telemetry_settings(project))
    decided = telemetry_decisions(session, project.pk)
    blind = policy.blind
    disagree = disagreement_reasons(parsed)
    for item_id in extra_raters.waiting_items(session, project.pk):
        disagree.pop(item_id, None)  # one more rater first (Policy.adaptive_overlap)
    failed_gold = set(
        session.scalars(
            select(GoldOutcome.judgment_pk).where(
                GoldOutcome.project_pk == project.pk,
                GoldOutcome.correct.is_(False),
                GoldOutcome.phase == "production",
            )
        )
    )
    adjudicated = {r.item.item_key for r in rows if r.review_pass == int(ReviewPass.ADJUDICATION)}
    queue: dict[str, dict[str, Any]] = {}

    def entry(item_id: str) -> dict[str, Any]:
        return queue.setdefault(
            item_id,
            {
                "item_id": item_id,
                "reasons": [],
                "judgments": 0,
                "adjudicated": item_id in adjudicated,
            },
        )

    for item_id, reasons in disagree.items():
        entry(item_id)["reasons"] += reasons
    flagged_pks = set()
    for i, row in enumerate(rows):
        key = row.item.item_key
        if row.pk in failed_gold:
            entry(key)["reasons"].append(f"failed gold (judgment {row.pk})")
            flagged_pks.add(row.pk)
        # a cross-rater finding (not the rater's own telemetry): still a reason to look
        others = flags.get(i, {}).get("near_duplicate_rationale")
        if others is not None:
            like = f", like judgment{'s' if len(others) > 1 else ''} " + ", ".join(
                str(rows[o].pk) for o in others
            )
            entry(key)["reasons"].append(
                f"telemetry: near_duplicate_rationale (judgment {row.pk}{like})"
            )
            flagged_pks.add(row.pk)
    # references two experts wrote that disagree (issue 29): adjudicate the reference
    for item_key, reason in reference_disagreements(session, project.pk).items():
        entry(item_key)["reasons"].append(reason)
    # labels a machine check sent back (no reviewer: ``preflab verify steps --send-back``)
    by_pk = {r.pk: r for r in rows}
    for req in session.scalars(
        select(ReviewRequest).where(
            ReviewRequest.project_pk == project.pk,
            ReviewRequest.status == "open",
            ReviewRequest.reviewer_pk.is_(None),
        )
    ):
        sent = by_pk.get(req.judgment_pk)
        if sent is not None:
            first = req.note.splitlines()[0] if req.note else "sent back"
            entry(sent.item.item_key)["reasons"].append(f"{first} (judgment {sent.pk})")
            flagged_pks.add(sent.pk)
    held_out = []
    weak_by_rater: dict[str, dict[str, Any]] = {}
    for i, row in enumerate(rows):
        a = assessed.get(i)
        if row.review_pass != 0:
            continue
        who = row.rater.rater_hash[:24] if blind else row.rater.rater_key
        per = weak_by_rater.setdefault(who, {"rater": who, "labels": 0, "weak": 0, "flags": {}})
        per["labels"] += 1
        if row.item.item_key in adjudicated:  # the final label replaced the raters' labels
            continue
        if is_held_out(a, row, decided):
            held_out.append(
                {
                    "judgment_id": row.pk,
                    "item_id": row.item.item_key,
                    "rater": who,
                    "flags": a.names,
                    "why": a.why,
                    "evidence": {n: e for n, e in a.flags},
                }
            )
            flagged_pks.add(row.pk)
        elif a is not None and a.weak and row.pk not in decided:
            per["weak"] += 1
            per["flags"][a.reason] = per["flags"].get(a.reason, 0) + 1
    weak_rows = sorted(
        (r for r in weak_by_rater.values() if r["weak"]),
        key=lambda r: (-r["weak"] / r["labels"], r["rater"]),
    )
    counts: dict[str, int] = defaultdict(int)
    for r in rows:
        if r.review_pass == 0:
            counts[r.item.item_key] += 1
    for item_id, e in queue.items():
        e["judgments"] = counts.get(item_id, 0)
    # weak telemetry flags as context of items queued for another reason
    for i, row in enumerate(rows):
        a = assessed.get(i)
        key = row.item.item_key
        if key in queue and a is not None and a.weak and row.pk not in decided:
            queue[key].setdefault("evidence", []).append(
                f"weak telemetry signals on judgment {row.pk} (exported): {', '.join(a.names)}"
            )
    ordered = sorted(
        queue.values(), key=lambda e: (e["adjudicated"], -len(e["reasons"]), e["item_id"])
    )
    spot = []
    for r in rows:
        if r.review_pass != 0 or r.pk in flagged_pks or r.item.item_key in queue:
            continue
        if review.unit_hash(p.secret, r.pk) < share:
            spot.append({"judgment_id": r.pk, "item_id": r.item.item_key, "kind": r.kind})
    return {
        "adjudication": ordered,
        "spot": spot,
        "spot_share": share,
        "demonstrations": review.pending_demonstrations(session, project),
        "telemetry": {
            "held_out": held_out,
            "weak_by_rater": weak_rows,
            "decided": len(decided),
        },
    }


def pending_demonstrations(session: Session, project: ProjectRef) -> list[dict[str, Any]]:
    """The pending demonstrations as they were read before: every counting judgment loaded."""
    blind = settings_of(project.settings).policy.blind
    return [
        {
            "judgment_id": r.pk,
            "item_id": r.item.item_key,
            "rater": r.rater.rater_hash[:24] if blind else r.rater.rater_key,
            "submitted_at": r.submitted_at.isoformat() if r.submitted_at else None,
        }
        for r in active_judgments(session, project.pk)
        if r.kind == "demonstration" and (r.body or {}).get("status", "pending") == "pending"
    ]
