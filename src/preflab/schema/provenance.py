"""Provenance: who made a label, under which rubric, in which review pass, by what means."""

from __future__ import annotations

import hashlib
import hmac
import re
from datetime import datetime
from enum import IntEnum
from typing import Literal

from pydantic import Field

from .common import Identifier, StrictModel


class ReviewPass(IntEnum):
    """Which pass produced a label. Higher passes override lower ones in exports."""

    PRODUCTION = 0
    REVIEW = 1
    ADJUDICATION = 2


LabelSource = Literal["human", "ai", "ai_assisted"]


class Telemetry(StrictModel):
    """A summary of how a judgment was entered (never keystroke content)."""

    iki_cv: float | None = Field(
        default=None, ge=0, description="Coefficient of variation of inter-key intervals."
    )
    revision_ratio: float | None = Field(
        default=None, ge=0, description="Deleted characters / typed characters."
    )
    pasted_chars: int | None = Field(default=None, ge=0)
    paste_count: int | None = Field(default=None, ge=0)
    typed_chars: int | None = Field(default=None, ge=0)
    active_ms: int | None = Field(default=None, ge=0)
    focus_losses: int | None = Field(default=None, ge=0)
    untrusted_paste_chars: int | None = Field(
        default=None,
        ge=0,
        description="Characters pasted from outside the labelling environment (trajectories).",
    )


class JudgeVerdict(StrictModel):
    """One presentation order a judge was asked about a pair, and what it said."""

    shown_order: tuple[Identifier, Identifier]
    winner: Literal["a", "b", "tie"]
    strength: int = Field(ge=0, le=3)


class JudgeRecord(StrictModel):
    """How a model judge made an ``ai`` label (``preflab judge run``, ``docs/judges.md``).

    ``verdicts``: for a pairwise label, the judge's answer in each presentation order; a label
    whose orders disagree is ``outcome: "order_inconsistent"`` (stored excluded: never a
    preference).
    """

    model: str = Field(min_length=1, max_length=200)
    template: str = Field(min_length=1, max_length=100)
    template_version: int = Field(ge=1)
    endpoint: str = Field(max_length=500)
    outcome: Literal["ok", "order_inconsistent"] = "ok"
    verdicts: list[JudgeVerdict] | None = None


class AssistRecord(StrictModel):
    """A suggestion the server showed a rater beside the item (``docs/judges.md``, "AI
    assistance"); a label submitted with one in view is ``source: ai_assisted``.

    ``origin``: ``judge`` (a model judge's label: its judgment id and the judge's model) or
    ``imported_step_verdicts`` (an imported trajectory's step verdicts, taken as suggestions).
    ``content_hash``: what was shown (the judge label's content hash, or the hash of the
    imported verdicts), so a later change of the suggestion cannot rewrite what was seen.
    """

    origin: Literal["judge", "imported_step_verdicts"]
    content_hash: str = Field(min_length=1, max_length=64)
    judgment_id: int | None = Field(default=None, ge=1)
    judge: str | None = Field(default=None, max_length=200)


class Provenance(StrictModel):
    rater_id: Identifier
    rater_hash: str | None = Field(
        default=None, description="HMAC-SHA256 of rater_id with the project secret."
    )
    rubric_id: str | None = None
    rubric_version: int | None = Field(default=None, ge=1)
    guideline_version: int | None = Field(
        default=None,
        ge=1,
        description="Version of the project's guidelines the rater saw (the settings version).",
    )
    review_pass: ReviewPass = ReviewPass.PRODUCTION
    source: LabelSource = "human"
    started_at: datetime | None = None
    submitted_at: datetime | None = None
    telemetry: Telemetry | None = None
    idempotency_key: str | None = Field(default=None, max_length=200)
    #: set on labels a model judge made (``source: ai``): model, template and its version, endpoint
    judge: JudgeRecord | None = None
    #: set on ``ai_assisted`` labels: the suggestions the rater had in view when submitting
    assisted_by: list[AssistRecord] | None = None


HASHED_RATER = re.compile(r"^hmac_sha256:[0-9a-f]{64}$")


def rater_hash(rater_id: str, secret: str | bytes) -> str:
    """``hmac_sha256:<hex>`` of a rater id under a project secret: stable, not reversible.

    An id that is already such a hash (a pseudonymous raw export re-imported) is its own hash:
    hashing it again would hide nothing more, and the data would no longer re-export as written.
    """
    if HASHED_RATER.match(rater_id):
        return rater_id
    key = secret.encode() if isinstance(secret, str) else secret
    digest = hmac.new(key, rater_id.encode(), hashlib.sha256).hexdigest()
    return f"hmac_sha256:{digest}"
