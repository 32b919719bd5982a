"""Initial schema: projects, rubric versions, import batches, items, candidates, raters,
judgments, export log.

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-30

Types are spelled out here (not imported from ``models``) so this revision never changes
when the models do. ``PK`` is INTEGER on SQLite (the rowid alias) and BIGINT elsewhere.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001_initial"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "projects",
        sa.Column("pk", PK, nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("title", sa.String(length=300), nullable=False),
        sa.Column("secret", sa.String(length=128), nullable=False),
        sa.Column("kinds", JSON, nullable=False),
        sa.Column("settings", JSON, nullable=False),
        sa.Column("rubric_key", sa.String(length=200), nullable=True),
        sa.Column("rubric_version", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_projects")),
        sa.UniqueConstraint("name", name=op.f("uq_projects_name")),
    )
    op.create_table(
        "export_log",
        sa.Column("pk", PK, nullable=False),
        sa.Column("project_pk", PK, nullable=False),
        sa.Column("format", sa.String(length=50), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("manifest", JSON, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_pk"],
            ["projects.pk"],
            name=op.f("fk_export_log_project_pk_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_export_log")),
    )
    op.create_table(
        "import_batches",
        sa.Column("pk", PK, nullable=False),
        sa.Column("project_pk", PK, nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("sources", JSON, nullable=False),
        sa.Column("format", sa.String(length=50), nullable=False),
        sa.Column("counts", JSON, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_pk"],
            ["projects.pk"],
            name=op.f("fk_import_batches_project_pk_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_import_batches")),
        sa.UniqueConstraint(
            "project_pk", "content_hash", name=op.f("uq_import_batches_project_pk")
        ),
    )
    op.create_table(
        "raters",
        sa.Column("pk", PK, nullable=False),
        sa.Column("project_pk", PK, nullable=False),
        sa.Column("rater_key", sa.String(length=200), nullable=False),
        sa.Column("rater_hash", sa.String(length=100), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_pk"],
            ["projects.pk"],
            name=op.f("fk_raters_project_pk_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_raters")),
        sa.UniqueConstraint("project_pk", "rater_key", name=op.f("uq_raters_project_pk")),
    )
    op.create_table(
        "rubric_versions",
        sa.Column("pk", PK, nullable=False),
        sa.Column("project_pk", PK, nullable=False),
        sa.Column("rubric_key", sa.String(length=200), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("content", JSON, nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_pk"],
            ["projects.pk"],
            name=op.f("fk_rubric_versions_project_pk_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_rubric_versions")),
        sa.UniqueConstraint(
            "project_pk", "rubric_key", "version", name=op.f("uq_rubric_versions_project_pk")
        ),
    )
    op.create_table(
        "items",
        sa.Column("pk", PK, nullable=False),
        sa.Column("project_pk", PK, nullable=False),
        sa.Column("item_key", sa.String(length=200), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("prompt", JSON, nullable=False),
        sa.Column("domains", JSON, nullable=False),
        sa.Column("reference", sa.Text(), nullable=True),
        sa.Column("gold", JSON, nullable=True),
        sa.Column("metadata", JSON, nullable=False),
        sa.Column("batch_pk", PK, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["batch_pk"], ["import_batches.pk"], name=op.f("fk_items_batch_pk_import_batches")
        ),
        sa.ForeignKeyConstraint(
            ["project_pk"],
            ["projects.pk"],
            name=op.f("fk_items_project_pk_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_items")),
        sa.UniqueConstraint("project_pk", "item_key", name=op.f("uq_items_project_pk")),
    )
    op.create_table(
        "candidates",
        sa.Column("pk", PK, nullable=False),
        sa.Column("item_pk", PK, nullable=False),
        sa.Column("candidate_key", sa.String(length=200), nullable=False),
        sa.Column("position", sa.SmallInteger(), nullable=False),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column("messages", JSON, nullable=True),
        sa.Column("model", sa.String(length=200), nullable=True),
        sa.Column("source", sa.String(length=10), nullable=False),
        sa.Column("metadata", JSON, nullable=False),
        sa.ForeignKeyConstraint(
            ["item_pk"], ["items.pk"], name=op.f("fk_candidates_item_pk_items"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_candidates")),
        sa.UniqueConstraint("item_pk", "candidate_key", name=op.f("uq_candidates_item_pk")),
    )
    op.create_table(
        "judgments",
        sa.Column("pk", PK, nullable=False),
        sa.Column("project_pk", PK, nullable=False),
        sa.Column("item_pk", PK, nullable=False),
        sa.Column("rater_pk", PK, nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("body", JSON, nullable=False),
        sa.Column("rationale", sa.Text(), nullable=True),
        sa.Column("pair_lo", sa.String(length=200), nullable=True),
        sa.Column("pair_hi", sa.String(length=200), nullable=True),
        sa.Column("score", sa.SmallInteger(), nullable=True),
        sa.Column("shown_order", JSON, nullable=True),
        sa.Column("rubric_key", sa.String(length=200), nullable=True),
        sa.Column("rubric_version", sa.Integer(), nullable=True),
        sa.Column("review_pass", sa.SmallInteger(), nullable=False),
        sa.Column("source", sa.String(length=12), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("telemetry", JSON, nullable=True),
        sa.Column("idempotency_key", sa.String(length=200), nullable=True),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("batch_pk", PK, nullable=True),
        sa.Column("supersedes_pk", PK, nullable=True),
        sa.Column("excluded", sa.Boolean(), nullable=False),
        sa.Column("exclusion_reason", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["batch_pk"], ["import_batches.pk"], name=op.f("fk_judgments_batch_pk_import_batches")
        ),
        sa.ForeignKeyConstraint(
            ["item_pk"], ["items.pk"], name=op.f("fk_judgments_item_pk_items"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["project_pk"],
            ["projects.pk"],
            name=op.f("fk_judgments_project_pk_projects"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["rater_pk"], ["raters.pk"], name=op.f("fk_judgments_rater_pk_raters")
        ),
        sa.ForeignKeyConstraint(
            ["supersedes_pk"], ["judgments.pk"], name=op.f("fk_judgments_supersedes_pk_judgments")
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_judgments")),
        sa.UniqueConstraint("project_pk", "content_hash", name=op.f("uq_judgments_project_pk")),
    )
    with op.batch_alter_table("judgments", schema=None) as batch_op:
        batch_op.create_index("ix_judgments_project_item", ["project_pk", "item_pk"], unique=False)
        batch_op.create_index(
            "ix_judgments_project_rater", ["project_pk", "rater_pk"], unique=False
        )
        batch_op.create_index(
            "uq_judgments_project_idempotency", ["project_pk", "idempotency_key"], unique=True
        )


def downgrade() -> None:
    with op.batch_alter_table("judgments", schema=None) as batch_op:
        batch_op.drop_index("uq_judgments_project_idempotency")
        batch_op.drop_index("ix_judgments_project_rater")
        batch_op.drop_index("ix_judgments_project_item")

    op.drop_table("judgments")
    op.drop_table("candidates")
    op.drop_table("items")
    op.drop_table("rubric_versions")
    op.drop_table("raters")
    op.drop_table("import_batches")
    op.drop_table("export_log")
    op.drop_table("projects")
