"""Item skips and flags: a rater gives an item back with a reason (issue 11).

Revision ID: 0006_item_skips
Revises: 0005_item_identity
Create Date: 2026-11-30

One row per skip: who, which item, why (``preflab.store.server_models.SKIP_REASONS``), a note.
The lease itself is released as before; this table only keeps the reason, so skips can be
counted on the dashboard and flagged items listed for reviewers.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_item_skips"
down_revision: str | None = "0005_item_identity"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "item_skips",
        sa.Column("pk", PK, nullable=False),
        sa.Column("project_pk", PK, nullable=False),
        sa.Column("item_pk", PK, nullable=False),
        sa.Column("user_pk", PK, nullable=False),
        sa.Column("reason", sa.String(length=40), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["project_pk"], ["projects.pk"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["item_pk"], ["items.pk"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_pk"], ["users.pk"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("pk"),
    )
    op.create_index(
        "ix_item_skips_project_item", "item_skips", ["project_pk", "item_pk"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_item_skips_project_item", table_name="item_skips")
    op.drop_table("item_skips")
