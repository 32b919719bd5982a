"""Export jobs: an export started from the web app runs in a process of its own, with progress,
cancel and a restart rule (issue 27, item 3).

Revision ID: 0013_export_jobs
Revises: 0012_label_count_triggers
Create Date: 2026-12-01

``requested_by`` is set null when the account is deleted; a project's jobs go with it.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from preflab.store.models import JSONType

revision: str = "0013_export_jobs"
down_revision: str | None = "0012_label_count_triggers"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "export_jobs",
        sa.Column("pk", PK, nullable=False),
        sa.Column("project_pk", PK, nullable=False),
        sa.Column("requested_by", PK, nullable=True),
        sa.Column("options", JSONType, nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("phase", sa.String(length=40), nullable=False),
        sa.Column("done_units", sa.Integer(), nullable=False),
        sa.Column("total_units", sa.Integer(), nullable=False),
        sa.Column("out_dir", sa.Text(), nullable=False),
        sa.Column("result", JSONType, nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("worker_pid", sa.Integer(), nullable=True),
        sa.Column("worker_host", sa.String(length=255), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("cancel_requested_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["project_pk"], ["projects.pk"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["requested_by"], ["users.pk"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("pk"),
    )
    op.create_index("ix_export_jobs_project_pk", "export_jobs", ["project_pk", "pk"])
    op.create_index("ix_export_jobs_status", "export_jobs", ["status"])


def downgrade() -> None:
    op.drop_index("ix_export_jobs_status", table_name="export_jobs")
    op.drop_index("ix_export_jobs_project_pk", table_name="export_jobs")
    op.drop_table("export_jobs")
