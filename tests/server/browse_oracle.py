"""The data browser as it was before issue 27 (every judgment of the project loaded, filtered in
Python, sliced by offset): the test oracle the keyset browser (:mod:`preflab.server.services.browse`) is
held equal to on small projects. Never served."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from preflab.schema import prompt_as_text
from preflab.server.permissions import ProjectRef
from preflab.server.policy import settings_of
from preflab.server.services.review import (
    active_judgments,
    assessments,
    disagreement_reasons,
    is_held_out,
    parsed_judgments,
    telemetry_decisions,
    telemetry_flags,
    telemetry_settings,
)
from preflab.store.models import ItemRow


def browse_items(
    session: Session,
    project: ProjectRef,
    *,
    kind: str | None = None,
    rater: str | None = None,
    domain: str | None = None,
    flagged: bool = False,
    disagreement: bool = False,
    q: str | None = None,
    offset: int = 0,
    limit: int = 50,
) -> dict[str, Any]:
    """Items with their counting labels, filtered by kind, rater, domain, telemetry flags,
    disagreement (the adjudication rule) and a text search over prompt and answers."""
    rows = active_judgments(session, project.pk)
    parsed = parsed_judgments(rows)
    flags = telemetry_flags(parsed)
    assessed = assessments(rows, parsed, telemetry_settings(project))
    decided = telemetry_decisions(session, project.pk)
    disagree = disagreement_reasons(parsed)
    blind = settings_of(project.settings).policy.blind
    per_item: dict[int, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        per_item[r.item_pk].append(i)
    stmt = (
        select(ItemRow)
        .where(ItemRow.project_pk == project.pk)
        .options(selectinload(ItemRow.candidates))
        .order_by(ItemRow.pk)
    )
    needle = (q or "").strip().lower()
    out = []
    for item in session.scalars(stmt):
        idx = per_item.get(item.pk, [])
        who = {i: rows[i].rater.rater_hash[:24] if blind else rows[i].rater.rater_key for i in idx}
        if kind and not any(rows[i].kind == kind for i in idx):
            continue
        if rater and rater not in who.values():
            continue
        if domain and domain not in (item.domains or []):
            continue
        if flagged and not any(flags.get(i) for i in idx):
            continue
        if disagreement and item.item_key not in disagree:
            continue
        if needle:
            text = (
                prompt_as_text(item.prompt) + " " + " ".join(c.text or "" for c in item.candidates)
            )
            if needle not in text.lower() and needle not in item.item_key.lower():
                continue
        out.append(
            {
                "item_id": item.item_key,
                "domains": item.domains or [],
                "answers": len(item.candidates),
                "labels": len(idx),
                "kinds": sorted({rows[i].kind for i in idx}),
                "raters": sorted(set(who.values())),
                "flags": sorted({f for i in idx for f in flags.get(i, {})}),
                # labels held out by their telemetry (strong evidence, no reviewer's decision)
                "held_out": sum(is_held_out(assessed.get(i), rows[i], decided) for i in idx),
                "disagreement": disagree.get(item.item_key, []),
            }
        )
    return {"total": len(out), "offset": offset, "items": out[offset : offset + limit]}
