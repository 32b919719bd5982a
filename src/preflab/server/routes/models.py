"""Response models of the REST API: each route declares one (``response_model``), so the OpenAPI
document at ``/api/v1/openapi.json`` describes what every endpoint answers.

The routes answer with orjson (:func:`preflab.server.routes.common.ok`), so these models document
the answers; ``tests/server/test_routes.py`` checks real answers against them. Free-form values
(a judgment body, a manifest, a policy) are ``dict[str, Any]``: their own schemas live in
:mod:`preflab.schema` and ``docs/``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ...schema import Item, Rubric

__all__ = ["Item", "Rubric"]  # re-exported: the item and rubric routes answer with these


class Out(BaseModel):
    """A response body. Unknown keys are allowed so that adding a field never breaks a client."""

    model_config = ConfigDict(extra="allow")


# -- meta and auth ------------------------------------------------------------------------------


class HealthOut(Out):
    status: str


class LoginOut(Out):
    username: str
    is_admin: bool
    csrf_token: str
    expires_at: str


class LoggedOut(Out):
    logged_out: bool


class UserOut(Out):
    username: str
    display_name: str
    email: str | None
    is_admin: bool
    is_active: bool
    created_at: str


class UserCreatedOut(UserOut):
    password: str | None = Field(default=None, description="Only when it was generated.")


class MeOut(UserOut):
    projects: dict[str, str] = Field(description="project name -> your role")
    via: str
    csrf_token: str | None


class TokenCreatedOut(Out):
    id: int
    token: str = Field(description="Shown once; only its SHA-256 is stored.")
    prefix: str
    name: str
    expires_at: str | None


class TokenOut(Out):
    id: int
    prefix: str
    name: str
    created_at: str
    revoked: bool


class TokenRevokedOut(Out):
    id: int
    revoked: bool


class CredentialOut(Out):
    domain: str
    evidence: str
    verified: bool
    verified_at: str | None


class CredentialStateOut(Out):
    domain: str
    verified: bool


class PasswordChangedOut(Out):
    changed: bool
    api_tokens_revoked: bool
    next: str


class PasswordResetOut(Out):
    username: str
    changed: bool


class ResetLinkOut(Out):
    username: str
    path: str
    expires_in_hours: int


class MarkdownOut(Out):
    html: str


# -- projects -----------------------------------------------------------------------------------


class RubricRef(Out):
    id: str
    version: int


class ProjectOut(Out):
    name: str
    title: str
    kinds: list[str]
    role: str | None
    rubric: RubricRef | None
    guidelines: str
    settings_version: int
    policy: dict[str, Any] | None = Field(default=None, description="Admins and reviewers only.")


class SettingsChangedOut(ProjectOut):
    version: int


class SettingsVersionOut(Out):
    version: int
    changed_by: str | None
    changed_at: str
    before: dict[str, Any] | None
    after: dict[str, Any]
    note: str


class MemberOut(Out):
    username: str
    role: str


class MemberRemovedOut(Out):
    username: str
    removed: bool


class InviteOut(Out):
    token: str
    path: str
    role: str
    expires_at: str


class GoldFigures(Out):
    n: int
    correct: int
    accuracy: float | None
    wilson: list[float]


class RaterOut(Out):
    username: str
    status: str
    reason: str | None
    evidence: dict[str, Any] | None
    submitted: int
    gold: dict[str, GoldFigures]


class PoolFigures(Out):
    items: int
    target: int
    filled: int


class QualityOut(Out):
    counts: dict[str, Any]
    excluded_judgments: int
    pool: dict[str, PoolFigures]
    expired_leases: int
    raters: list[RaterOut]


class ExtraRatersOut(Out):
    """More raters where they disagree (``Policy.adaptive_overlap``; docs/extra-raters.md)."""

    enabled: bool
    max_extra: int
    overlap_items: int
    items_extended: int = Field(description="Overlap items that got at least one extra rater.")
    extra_granted: int
    extra_spent: int = Field(description="Extra labels in.")
    extra_due: int = Field(description="Extra labels granted and not in yet.")
    budget_left: int = Field(description="overlap items x max_extra - extra granted.")
    resolved_by_extra: int = Field(description="Items that agree after their extra labels.")
    sent_to_adjudication: int = Field(description="Budget spent, still split.")
    agreed_at_k: int
    waiting: int


class RaterStatusOut(Out):
    username: str
    status: str
    reason: str | None


class ExportOut(Out):
    export_id: int | None
    manifest: dict[str, Any] = Field(description="manifest.json: files, SHA-256, gates, counts")
    summary: list[str] = Field(
        default_factory=list,
        description="the manifest in words (rows, warnings, what each gate dropped), as the CLI prints it",
    )


class ExportJobFileOut(Out):
    name: str = Field(description="the file's path in the export, as the manifest lists it")
    sha256: str
    bytes: int
    url: str = Field(description="where to download it")


class ExportJobOut(Out):
    """An export job (:mod:`preflab.server.export_jobs`): its options, where it is, its end."""

    id: int
    project: str
    status: str = Field(description="queued, running, done, failed or cancelled")
    phase: str = Field(description="starting, collect, gates, write, then the status")
    done: int = Field(description="units done in this phase (items read while collecting)")
    total: int
    options: dict[str, Any] = Field(description="the export options asked for")
    requested_by: str | None
    out: str = Field(description="the export's folder name")
    export_id: int | None = Field(description="the export log id once done")
    summary: list[str] = Field(description="the manifest in words, once done")
    warnings: list[str]
    files: list[ExportJobFileOut] = Field(description="once done: every file, manifest.json too")
    error: str | None = Field(description="why it failed, in words")
    cancel_requested: bool
    created_at: str | None
    started_at: str | None
    finished_at: str | None
    heartbeat_at: str | None


class ExportJobPageOut(Out):
    jobs: list[ExportJobOut] = Field(description="newest first")
    next_before: int | None = Field(description="pass as ?before= for older jobs; null: no more")


# -- items and rubrics ---------------------------------------------------------------------------


class ItemSummaryOut(Out):
    pk: int
    id: str
    domains: list[str] | None
    gold: bool
    role: str | None
    target: int | None
    filled: int | None


class ImportSummaryOut(Out):
    """The importer's report (:class:`preflab.io.importer.ImportReport`) and the items pooled."""

    items_added: int = 0
    items_existing: int = 0
    judgments_added: int = 0
    already_imported: bool = False
    pooled: int


class Problem(Out):
    file: str
    line: int | None
    field: str
    reason: str
    text: str = Field(description="file:line: field: reason")


class FileImportOut(Out):
    """200 with ``ok`` true and the counts, or 422 with ``ok`` false and every problem."""

    ok: bool
    items_added: int | None = None
    items_existing: int | None = None
    judgments_added: int | None = None
    already_imported: bool | None = None
    formats: dict[str, int] | None = None
    pooled: int | None = None
    ai_labelers: dict[str, dict[str, Any]] | None = Field(
        default=None, description="labelers stored as AI, each with the rule and its judgments"
    )
    model_like_people: list[str] | None = Field(
        default=None, description="labelers with names like models' that no rule declared models"
    )
    notes: list[str] | None = Field(default=None, description="what the import did, in words")
    total: int | None = None
    problems: list[Problem] | None = None


class RubricVersionOut(Out):
    id: str
    version: int
    created_at: str | None
    dimensions: int


# -- review ---------------------------------------------------------------------------------------


class JudgmentOut(Out):
    judgment_id: int
    item_id: str
    kind: str
    body: dict[str, Any]
    rationale: str | None
    rater: str = Field(description="the rater's id, or a hash when the project is blind")
    review_pass: int
    source: str
    telemetry: dict[str, Any] | None
    excluded: bool
    exclusion_reason: str | None
    supersedes: int | None
    submitted_at: str | None


class SentBackOut(Out):
    request_id: int
    judgment_id: int
    status: str


class QueueEntry(Out):
    item_id: str
    reasons: list[str]
    judgments: int
    adjudicated: bool
    evidence: list[str] = Field(
        default_factory=list, description="weak telemetry signals of its labels (context)"
    )


class SpotEntry(Out):
    judgment_id: int
    item_id: str
    kind: str


class PendingDemonstration(Out):
    judgment_id: int
    item_id: str
    rater: str
    submitted_at: str | None


class HeldOutLabel(Out):
    """A label its telemetry keeps out of exports until a reviewer decides (issue 28)."""

    judgment_id: int
    item_id: str
    rater: str
    flags: list[str]
    why: str
    evidence: dict[str, dict[str, Any]]


class WeakSignalsOfRater(Out):
    """A rater's production labels and how many carry weak telemetry signals, by combination."""

    rater: str
    labels: int
    weak: int
    flags: dict[str, int]


class TelemetryReviewOut(Out):
    held_out: list[HeldOutLabel]
    weak_by_rater: list[WeakSignalsOfRater]
    decided: int


class ReviewQueueCounts(Out):
    """Every queue's size (the whole queue, not the page)."""

    adjudication: int
    adjudication_open: int
    spot: int
    held_out: int
    weak_by_rater: int
    demonstrations: int


class ReviewQueuesPage(Out):
    """Which page this is and where its entries come from (issue 27 item 2)."""

    status: str = Field(
        description="current: computed now (a small project); stored: the quality snapshot's "
        "queues as of computed_at, the page's items re-checked live; computing: none stored "
        "yet (a refresh runs); failed: the last run failed (error)"
    )
    computed_at: str | None
    refreshing_since: str | None
    labels_since: int = Field(description="labels stored since computed_at")
    error: str | None
    after: str | None = Field(description="the cursor this page starts after (none: the first)")
    limit: int = Field(description="entries of each queue per page (default 100, at most 1000)")
    next: str | None = Field(description="`after` of the next page; none: every queue is through")
    previous: str | None = Field(description="`after` of the page before; none: the first page")
    counts: ReviewQueueCounts | None


class ReviewQueuesOut(Out):
    """One page of each queue: ``limit`` entries after the cursor (``page``)."""

    adjudication: list[QueueEntry]
    spot: list[SpotEntry]
    spot_share: float
    demonstrations: list[PendingDemonstration]
    telemetry: TelemetryReviewOut
    page: ReviewQueuesPage


class ReviewedJudgment(Out):
    judgment_id: int
    kind: str
    body: dict[str, Any]
    rationale: str | None
    rater: str
    review_pass: int
    source: str
    telemetry: dict[str, Any]
    flags: list[str]
    telemetry_assessment: dict[str, Any] | None = Field(
        default=None,
        description="flags with evidence, strong (held out of exports) or weak, why, decision",
    )
    gold_correct: bool | None
    submitted_at: str | None
    shown_order: list[str] | None
    revision_of: int | None
    sent_back: dict[str, Any] | None
    label_rows: list[dict[str, Any]]


class ItemReviewOut(Out):
    item: dict[str, Any] = Field(description="the full item, gold and reference included")
    judgments: list[ReviewedJudgment]
    reasons: list[str]


class AdjudicationOut(Out):
    judgment_id: int
    item_id: str
    kind: str
    review_pass: int
    created: bool


class ReferenceAdjudicationOut(Out):
    item_id: str
    reference: str
    adjudicator: str
    status: str


class BrowseItem(Out):
    item_id: str
    domains: list[str]
    answers: int
    labels: int
    kinds: list[str]
    raters: list[str]
    flags: list[str]
    held_out: int = Field(
        default=0, description="labels held out by their telemetry, waiting for a reviewer"
    )
    disagreement: list[str]


class BrowseOut(Out):
    total: int | None = Field(
        description="matching items (SQL count); null when a per-item filter (flagged, "
        "disagreement, q) is on: the page scanned for them"
    )
    total_capped: bool = Field(
        default=False, description="more items match than `total` (counting stops at 10,000)"
    )
    after: int = Field(default=0, description="the item pk this page starts after")
    offset: int
    next_after: int | None = Field(
        default=None, description="pass as `after` for the next page; null at the end"
    )
    scanned: int = Field(default=0, description="items examined for this page")
    stopped: bool = Field(
        default=False, description="the scan budget ran out before the page filled"
    )
    items: list[BrowseItem]


class FlaggedItem(Out):
    item_id: str
    reasons: dict[str, int]
    notes: list[str]


class SkipSummaryOut(Out):
    total: int
    per_reason: dict[str, int]
    labels: dict[str, str]
    flagged: list[FlaggedItem]


class TelemetryDecisionOut(Out):
    judgment_id: int
    decision: str = Field(description="kept or excluded")
    flags: list[str]
    why: str
    by: str
    at: str


class DemonstrationDecisionOut(Out):
    judgment_id: int
    revision_of: int
    item_id: str
    status: str
    reviewed_by: str
    reviewed_at: str
    note: str | None


# -- the caller's own labelling record ------------------------------------------------------------


class MyStatusOut(Out):
    status: str
    reason: str | None
    submitted: int


class MyJudgmentOut(Out):
    judgment_id: int
    item_id: str
    kind: str
    body: dict[str, Any]
    rationale: str | None
    supersedes: int | None
    submitted_at: str | None


class RevisionRequestOut(Out):
    request_id: int
    judgment_id: int
    note: str
    item: dict[str, Any] = Field(description="the item as the rater saw it (no gold)")
    shown_order: list[str] | None
    your_judgment: dict[str, Any]


class JudgmentAckOut(Out):
    """A stored judgment (``created``) or the first result of a retry (``replayed``)."""

    judgment_id: int
    item_id: str
    kind: str
    created: bool
    replayed: bool
    submitted_at: str | None


# -- audit ------------------------------------------------------------------------------------------


class AuditEventOut(Out):
    id: int
    at: str
    actor: str = Field(description="a username, cli:<os user>, system or anonymous")
    actor_id: int | None
    action: str
    target: str
    details: dict[str, Any]


class AuditPageOut(Out):
    events: list[AuditEventOut]
    next_before: int | None = Field(
        description="pass as ?before= for older events; null at the end"
    )
