"""Telemetry gate of an export: only strong evidence keeps a label out (issue 28).

:func:`preflab.quality.telemetry.assess` is the one rule (the review queue and the dashboard
apply it too), with the project's ``policy.telemetry`` settings. A label is left out when its
telemetry is strong evidence: a pasted answer (an untrusted paste over
``max_untrusted_paste_chars`` that is most of what the rater wrote) or ``exclude_signals``
independent signals together (fewer when one is machine-regular typing). A weak flag — one
signal, such as a clean sentence typed without a deletion (``no_revision``) — never removes a
label: it is exported, counted in ``gates.telemetry.kept_weak`` and shown to reviewers as
evidence. A reviewer's decision settles a label either way: ``keep`` (the label is exported, counted
in ``gates.telemetry.kept_by_reviewer``) or ``exclude`` (the label is excluded, counted under the
``excluded`` gate). ``include_flagged`` keeps every label. How the thresholds were chosen:
docs/telemetry.md. ``near_duplicate_rationale`` compares raters with each other and stays a
finding for reviewers, not an export gate.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ...quality.bias import word_length
from ...quality.telemetry import TelemetrySettings, assess
from ...schema import Item, JudgmentBase
from ...schema.policy import Policy
from ...store.server_models import TELEMETRY_KEPT, ReviewRequest
from .resolve import DropLog

#: The rule in words, for the manifest and the card.
RULE = (
    "a label is left out only on strong evidence: a pasted answer, or several independent "
    "signals together; a weak flag (one signal) is exported and shown to reviewers; a "
    "reviewer's decision settles a label (docs/telemetry.md)"
)


def project_telemetry_settings(policy: Policy) -> TelemetrySettings:
    """The project's thresholds (``policy.telemetry``)."""
    return TelemetrySettings.of(policy.telemetry)


def kept_by_reviewers(session: Session, project_pk: int) -> set[int]:
    """Judgment pks whose telemetry a reviewer looked at and kept (``review_requests`` rows with
    status ``kept``; :func:`preflab.server.review.decide_telemetry`)."""
    return set(
        session.scalars(
            select(ReviewRequest.judgment_pk).where(
                ReviewRequest.project_pk == project_pk, ReviewRequest.status == TELEMETRY_KEPT
            )
        )
    )


@dataclass
class TelemetryCounts:
    """Labels with flags the export kept: weak ones by flag combination, and strong ones a
    reviewer kept, by reason."""

    kept_weak: Counter[str] = field(default_factory=Counter)
    kept_by_reviewer: Counter[str] = field(default_factory=Counter)

    def manifest(self, include_flagged: bool) -> dict[str, Any]:
        return {
            "rule": "include_flagged: every label kept" if include_flagged else RULE,
            "include_flagged": include_flagged,
            "kept_weak": dict(sorted(self.kept_weak.items())),
            "kept_by_reviewer": dict(sorted(self.kept_by_reviewer.items())),
        }


def telemetry_filter(
    settings: TelemetrySettings,
    drops: DropLog,
    counts: TelemetryCounts | None = None,
    kept_by_reviewer: Collection[int] = (),
) -> Callable[[Item, JudgmentBase, int | None], bool]:
    """``keep(item, judgment, pk)``: False (and the drop logged under ``telemetry``) when the
    judgment's telemetry is strong evidence and no reviewer kept it (``kept_by_reviewer``: the
    judgment pks a reviewer decided to keep)."""
    words: dict[tuple[str, str], int] = {}
    counts = counts if counts is not None else TelemetryCounts()

    def words_to_read(item: Item, j: JudgmentBase) -> int:
        total = 0
        for c in item.candidates:
            if c.id in j.candidate_ids():
                total += words.setdefault((item.key, c.key), word_length(c.as_text()))
        return total

    def keep(item: Item, j: JudgmentBase, pk: int | None = None) -> bool:
        tel = j.provenance.telemetry
        if tel is None:
            return True
        n_words = words_to_read(item, j) if tel.active_ms is not None else None
        found = assess(j, n_words, settings)
        if not found.flags:
            return True
        if not found.exclude:
            counts.kept_weak[found.reason] += 1
            return True
        if pk is not None and pk in kept_by_reviewer:
            counts.kept_by_reviewer[found.reason] += 1
            return True
        drops.drop("telemetry", found.reason, item.key)
        return False

    return keep
