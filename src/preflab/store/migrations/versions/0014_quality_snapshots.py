"""The dashboard's quality snapshot (issue 27: the web app never loads a project).

Revision ID: 0014_quality_snapshots
Revises: 0013_export_jobs
Create Date: 2026-12-01

One row per project: the statistics panels as JSON, when they were computed, the labels they
cover (count, highest judgment pk, highest review-request pk) and the claim of the process
computing the next one (``running_since``), so at most one runs per project. Two indexes on
judgments keep the dashboard's live figures bounded: ``(project_pk, submitted_at)`` for the
labels of the last 24 hours, and a partial index of ``supersedes_pk`` (revisions only) for
"not revised".
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from preflab.store.models import JSONType

revision: str = "0014_quality_snapshots"
down_revision: str | None = "0013_export_jobs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "quality_snapshots",
        sa.Column("pk", PK, nullable=False),
        sa.Column("project_pk", PK, nullable=False),
        sa.Column("panels", JSONType, nullable=True),
        sa.Column("computed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("labels", sa.Integer(), nullable=False),
        sa.Column("max_judgment_pk", sa.Integer(), nullable=False),
        sa.Column("max_review_pk", sa.Integer(), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=True),
        sa.Column("running_since", sa.DateTime(timezone=True), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["project_pk"], ["projects.pk"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("pk"),
        sa.UniqueConstraint("project_pk"),
    )
    op.create_index("ix_judgments_project_submitted", "judgments", ["project_pk", "submitted_at"])
    op.create_index(
        "ix_judgments_supersedes",
        "judgments",
        ["supersedes_pk"],
        sqlite_where=sa.text("supersedes_pk IS NOT NULL"),
        postgresql_where=sa.text("supersedes_pk IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_judgments_supersedes", table_name="judgments")
    op.drop_index("ix_judgments_project_submitted", table_name="judgments")
    op.drop_table("quality_snapshots")
