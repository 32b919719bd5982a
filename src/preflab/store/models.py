"""SQLAlchemy 2 models: the database side of the wire formats.

Conventions: integer surrogate keys (``pk``) internally; the wire ids (``Item.id``,
``Candidate.id``, rater ids) are ``*_key`` columns unique within their parent. JSON columns
are JSONB on PostgreSQL. Every timestamp is timezone-aware UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

#: ``none_as_null``: Python ``None`` is stored as SQL NULL (not the JSON text ``null``), so
#: ``ItemRow.gold.is_(None)`` finds items without gold.
JSONType = JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")
PK = BigInteger().with_variant(Integer(), "sqlite")  # INTEGER PRIMARY KEY is the rowid on SQLite


def utcnow() -> datetime:
    return datetime.now(UTC)


NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map = {dict[str, Any]: JSONType, list[Any]: JSONType}


class Project(Base):
    __tablename__ = "projects"

    pk: Mapped[int] = mapped_column(PK, primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    title: Mapped[str] = mapped_column(String(300), default="")
    #: HMAC key for rater_hash; never exported.
    secret: Mapped[str] = mapped_column(String(128))
    kinds: Mapped[list[Any]] = mapped_column(default=list)
    settings: Mapped[dict[str, Any]] = mapped_column(default=dict)
    rubric_key: Mapped[str | None] = mapped_column(String(200))
    rubric_version: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class RubricVersion(Base):
    """An immutable rubric version; a change is a new row with version + 1."""

    __tablename__ = "rubric_versions"
    __table_args__ = (UniqueConstraint("project_pk", "rubric_key", "version"),)

    pk: Mapped[int] = mapped_column(PK, primary_key=True)
    project_pk: Mapped[int] = mapped_column(ForeignKey("projects.pk", ondelete="CASCADE"))
    rubric_key: Mapped[str] = mapped_column(String(200))
    version: Mapped[int] = mapped_column(Integer)
    content: Mapped[dict[str, Any]] = mapped_column()
    content_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ImportBatch(Base):
    __tablename__ = "import_batches"
    __table_args__ = (UniqueConstraint("project_pk", "content_hash"),)

    pk: Mapped[int] = mapped_column(PK, primary_key=True)
    project_pk: Mapped[int] = mapped_column(ForeignKey("projects.pk", ondelete="CASCADE"))
    #: SHA-256 over the imported files' bytes: re-importing the same files is a no-op.
    content_hash: Mapped[str] = mapped_column(String(64))
    sources: Mapped[list[Any]] = mapped_column(default=list)
    format: Mapped[str] = mapped_column(String(50))
    counts: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ItemRow(Base):
    __tablename__ = "items"
    __table_args__ = (
        UniqueConstraint("project_pk", "item_key"),
        # An item is its content: a record with another id finds it by content hash (0009).
        Index("ix_items_project_content", "project_pk", "content_hash"),
    )

    pk: Mapped[int] = mapped_column(PK, primary_key=True)
    project_pk: Mapped[int] = mapped_column(ForeignKey("projects.pk", ondelete="CASCADE"))
    item_key: Mapped[str] = mapped_column(String(200))
    content_hash: Mapped[str] = mapped_column(String(64))
    prompt: Mapped[Any] = mapped_column(JSONType)
    domains: Mapped[list[Any]] = mapped_column(default=list)
    reference: Mapped[str | None] = mapped_column(Text)
    gold: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSONType, default=dict)
    batch_pk: Mapped[int | None] = mapped_column(ForeignKey("import_batches.pk"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    candidates: Mapped[list[CandidateRow]] = relationship(
        back_populates="item", order_by="CandidateRow.position", cascade="all, delete-orphan"
    )


class ItemAlias(Base):
    """Another id a record gave an item that already existed with the same content (0009).

    A later record, or a judgment, that names the item by this id finds the item through it.
    """

    __tablename__ = "item_aliases"
    __table_args__ = (UniqueConstraint("project_pk", "alias_key"),)

    pk: Mapped[int] = mapped_column(PK, primary_key=True)
    project_pk: Mapped[int] = mapped_column(ForeignKey("projects.pk", ondelete="CASCADE"))
    alias_key: Mapped[str] = mapped_column(String(200))
    item_pk: Mapped[int] = mapped_column(ForeignKey("items.pk", ondelete="CASCADE"), index=True)


class CandidateRow(Base):
    __tablename__ = "candidates"
    __table_args__ = (UniqueConstraint("item_pk", "candidate_key"),)

    pk: Mapped[int] = mapped_column(PK, primary_key=True)
    item_pk: Mapped[int] = mapped_column(ForeignKey("items.pk", ondelete="CASCADE"))
    candidate_key: Mapped[str] = mapped_column(String(200))
    position: Mapped[int] = mapped_column(SmallInteger)
    text: Mapped[str | None] = mapped_column(Text)
    messages: Mapped[list[Any] | None] = mapped_column(JSONType)
    model: Mapped[str | None] = mapped_column(String(200))
    source: Mapped[str] = mapped_column(String(10), default="model")
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSONType, default=dict)

    item: Mapped[ItemRow] = relationship(back_populates="candidates")


class TextStatsVersion(Base):
    """What a :class:`CandidateTextStats` row was computed with (migration 0022): the version
    of the formatting features and word length (:data:`preflab.quality.text_stats.FEATURES_VERSION`)
    and the SHA-256 of the tokenizer its token counts are of ('' when none was installed).
    Each stats row names one by a small key, so a changed tokenizer or feature code never reads
    another's values: readers use a row only when its version is theirs."""

    __tablename__ = "text_stats_versions"
    __table_args__ = (UniqueConstraint("features_version", "tokenizer"),)

    pk: Mapped[int] = mapped_column(Integer, primary_key=True)
    features_version: Mapped[int] = mapped_column(SmallInteger)
    tokenizer: Mapped[str] = mapped_column(String(100))


class CandidateTextStats(Base):
    """The statistics of a candidate's text (its ``as_text()``), computed once when it is
    written (migration 0022; :mod:`preflab.io.text_stats`): its token count under the default
    tokenizer, its word length and the five formatting features of
    :func:`preflab.quality.bias.text_features`. No row: not computed yet (readers compute).

    A side table keyed by the candidate's pk, not columns of ``candidates``: filling a row
    never rewrites the candidate (its text, often on overflow pages in SQLite; a new tuple
    version in PostgreSQL), so the backfill of a 10M database appends ~25 bytes a candidate
    (SQLite's record of 9 small integers and the rowid) instead of rewriting gigabytes of
    text; a write path that does not know the table leaves the candidate correct, just
    uncomputed. The readers' cost is one primary-key probe a candidate row in the range scan
    they already make (:func:`preflab.store.repo.iter_raw_chunks`)."""

    __tablename__ = "candidate_text_stats"

    candidate_pk: Mapped[int] = mapped_column(
        PK, ForeignKey("candidates.pk", ondelete="CASCADE"), primary_key=True
    )
    version_pk: Mapped[int] = mapped_column(ForeignKey("text_stats_versions.pk"))
    tokens: Mapped[int | None] = mapped_column(Integer)
    words: Mapped[int] = mapped_column(Integer)
    headers: Mapped[int] = mapped_column(Integer)
    bullets: Mapped[int] = mapped_column(Integer)
    bold: Mapped[int] = mapped_column(Integer)
    sycophancy: Mapped[int] = mapped_column(Integer)
    opening_validation: Mapped[int] = mapped_column(SmallInteger)


class Rater(Base):
    """A rater identity within a project (the wire ``rater_id``)."""

    __tablename__ = "raters"
    __table_args__ = (UniqueConstraint("project_pk", "rater_key"),)

    pk: Mapped[int] = mapped_column(PK, primary_key=True)
    project_pk: Mapped[int] = mapped_column(ForeignKey("projects.pk", ondelete="CASCADE"))
    rater_key: Mapped[str] = mapped_column(String(200))
    rater_hash: Mapped[str] = mapped_column(String(100))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # -- server (migration 0002_server): the account behind this rater id, if any ----------
    user_pk: Mapped[int | None] = mapped_column(ForeignKey("users.pk", ondelete="SET NULL"))


class JudgmentRow(Base):
    """One judgment with its full provenance.

    ``body`` holds the kind-specific fields exactly as the wire format has them; the columns
    beside it (canonical pair, score, ...) are derived copies for querying.
    """

    __tablename__ = "judgments"
    __table_args__ = (
        # The content hash covers the item's id, so unique per item is unique per project; per
        # item, an import appends to this index instead of writing at a random place (0004).
        Index("uq_judgments_item_content", "item_pk", "content_hash", unique=True),
        Index("ix_judgments_project_item", "project_pk", "item_pk"),
        Index("ix_judgments_project_rater", "project_pk", "rater_pk"),
        # the dashboard's labels of the last 24 hours, a range of this index (0014)
        Index("ix_judgments_project_submitted", "project_pk", "submitted_at"),
        # a project's highest judgment pk and the judgments after a pk, a probe and a range; for
        # queries that say `pk IS NOT NULL` only (0021: SQLite's planner would take it for others)
        Index(
            "ix_judgments_project_pk",
            "project_pk",
            "pk",
            sqlite_where=text("pk IS NOT NULL"),
            postgresql_where=text("pk IS NOT NULL"),
        ),
        # "not revised" without reading every judgment: only revisions have an entry (0014)
        Index(
            "ix_judgments_supersedes",
            "supersedes_pk",
            sqlite_where=text("supersedes_pk IS NOT NULL"),
            postgresql_where=text("supersedes_pk IS NOT NULL"),
        ),
        # a client's key names one submission of one rater (0015; two raters may pick the same)
        Index(
            "uq_judgments_rater_idempotency",
            "project_pk",
            "rater_pk",
            "idempotency_key",
            unique=True,
            sqlite_where=text("idempotency_key IS NOT NULL"),
            postgresql_where=text("idempotency_key IS NOT NULL"),
        ),
    )

    pk: Mapped[int] = mapped_column(PK, primary_key=True)
    project_pk: Mapped[int] = mapped_column(ForeignKey("projects.pk", ondelete="CASCADE"))
    item_pk: Mapped[int] = mapped_column(ForeignKey("items.pk", ondelete="CASCADE"))
    rater_pk: Mapped[int] = mapped_column(ForeignKey("raters.pk"))
    kind: Mapped[str] = mapped_column(String(20))
    body: Mapped[dict[str, Any]] = mapped_column()
    rationale: Mapped[str | None] = mapped_column(Text)
    # canonical pairwise form (pairwise only)
    pair_lo: Mapped[str | None] = mapped_column(String(200))
    pair_hi: Mapped[str | None] = mapped_column(String(200))
    score: Mapped[int | None] = mapped_column(SmallInteger)
    shown_order: Mapped[list[Any] | None] = mapped_column(JSONType)
    # provenance
    rubric_key: Mapped[str | None] = mapped_column(String(200))
    rubric_version: Mapped[int | None] = mapped_column(Integer)
    #: The project settings (guidelines) version the rater saw (0010; None: not recorded).
    guideline_version: Mapped[int | None] = mapped_column(Integer)
    review_pass: Mapped[int] = mapped_column(SmallInteger, default=0)
    source: Mapped[str] = mapped_column(String(12), default="human")
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    submitted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    telemetry: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    idempotency_key: Mapped[str | None] = mapped_column(String(200))
    #: a model judge's record (``Provenance.judge``: model, template, endpoint; 0016), else NULL
    judge: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    #: the suggestions in view when an ``ai_assisted`` label was made (``Provenance.assisted_by``;
    #: 0018), else NULL
    assisted_by: Mapped[list[Any] | None] = mapped_column(JSONType)
    content_hash: Mapped[str] = mapped_column(String(64))
    batch_pk: Mapped[int | None] = mapped_column(ForeignKey("import_batches.pk"))
    #: The judgment this one revises (a revision is a new row; the old one is kept).
    supersedes_pk: Mapped[int | None] = mapped_column(ForeignKey("judgments.pk"))
    #: Excluded from exports (e.g. rater suspended for gold drift); the reason is kept.
    excluded: Mapped[bool] = mapped_column(Boolean, default=False)
    exclusion_reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    item: Mapped[ItemRow] = relationship()
    rater: Mapped[Rater] = relationship()


class ExportLog(Base):
    __tablename__ = "export_log"

    pk: Mapped[int] = mapped_column(PK, primary_key=True)
    project_pk: Mapped[int] = mapped_column(ForeignKey("projects.pk", ondelete="CASCADE"))
    format: Mapped[str] = mapped_column(String(50))
    path: Mapped[str] = mapped_column(Text)
    manifest: Mapped[dict[str, Any]] = mapped_column()
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


__all__ = [
    "Base",
    "CandidateRow",
    "ExportLog",
    "ImportBatch",
    "ItemRow",
    "JudgmentRow",
    "Project",
    "Rater",
    "RubricVersion",
    "utcnow",
]
