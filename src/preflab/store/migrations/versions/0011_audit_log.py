"""The audit log: one row per state change that matters (issue 14: logging with an audit log).

Revision ID: 0011_audit_log
Revises: 0010_judgment_guideline_version
Create Date: 2026-11-30

``actor_pk`` is set null when the account is deleted; ``actor`` keeps the name.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from preflab.store.models import JSONType

revision: str = "0011_audit_log"
down_revision: str | None = "0010_judgment_guideline_version"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "audit_events",
        sa.Column("pk", PK, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor_pk", PK, nullable=True),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("action", sa.String(length=60), nullable=False),
        sa.Column("target", sa.String(length=300), nullable=False),
        sa.Column("details", JSONType, nullable=False),
        sa.ForeignKeyConstraint(["actor_pk"], ["users.pk"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("pk"),
    )
    op.create_index("ix_audit_events_at", "audit_events", ["at"])
    op.create_index("ix_audit_events_action_at", "audit_events", ["action", "at"])


def downgrade() -> None:
    op.drop_index("ix_audit_events_action_at", table_name="audit_events")
    op.drop_index("ix_audit_events_at", table_name="audit_events")
    op.drop_table("audit_events")
