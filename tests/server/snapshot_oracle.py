"""The dashboard snapshot's per-rater pass as it was before (every counting judgment read as an
ORM row with its rater and item, parsed, ``CHUNK`` at a time) and its own near-duplicate search:
the test oracle :func:`preflab.server.snapshot.rater_activity` is held equal to. Never served."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from preflab.quality.telemetry import TelemetrySettings, near_duplicate_pairs
from preflab.server.permissions import ProjectRef
from preflab.server.services import review
from preflab.store.models import ItemRow, JudgmentRow

CHUNK = 7  # small: the oracle walks several chunks on a test project


def _judgment_chunks(session: Session, project_pk: int) -> Iterator[list[JudgmentRow]]:
    last = 0
    while True:
        rows = list(
            session.scalars(
                select(JudgmentRow)
                .where(
                    JudgmentRow.project_pk == project_pk,
                    JudgmentRow.excluded.is_(False),
                    review.not_revised(),
                    JudgmentRow.pk > last,
                )
                .options(
                    selectinload(JudgmentRow.rater),
                    selectinload(JudgmentRow.item).selectinload(ItemRow.candidates),
                )
                .order_by(JudgmentRow.pk)
                .limit(CHUNK)
            )
        )
        if not rows:
            return
        yield rows
        last = rows[-1].pk


def rater_activity(session: Session, project: ProjectRef) -> dict[str, Any]:
    settings = review.telemetry_settings(project)
    decided = review.telemetry_decisions(session, project.pk)
    times: dict[str, list[float]] = defaultdict(list)
    held: dict[str, int] = defaultdict(int)
    with_text: list[tuple[int, str, str]] = []
    for rows in _judgment_chunks(session, project.pk):
        parsed = review.parsed_judgments(rows)
        assessed = review.assessments(rows, parsed, settings)
        for i, (r, j) in enumerate(zip(rows, parsed, strict=True)):
            if j is not None and j.rationale and len(j.rationale) >= 20:
                with_text.append((r.pk, j.rationale, j.provenance.rater_id))
            if r.review_pass != 0:
                continue
            key = r.rater.rater_key
            held[key] += 0
            if r.submitted_at is not None and r.started_at is not None:
                times[key].append((r.submitted_at - r.started_at).total_seconds())
            found = assessed.get(i)
            if found is not None and found.exclude and r.pk not in decided:
                held[key] += 1
    cfg = TelemetrySettings()
    dups: set[int] = set()
    for first, second, _sim in near_duplicate_pairs(
        [t for _, t, _ in with_text],
        [r for _, _, r in with_text],
        cfg.min_jaccard,
        cfg.shingle,
        cfg.num_perm,
    ):
        dups.update((with_text[first][0], with_text[second][0]))
    return {
        "median_s": {k: float(statistics.median(v)) for k, v in times.items()},
        "held_out": dict(held),
        "near_duplicate_pks": sorted(dups),
    }
