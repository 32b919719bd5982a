"""One-time password reset links an admin issues (issue 11: password reset by the user).

Revision ID: 0008_password_resets
Revises: 0007_unknown_strength
Create Date: 2026-11-30

Only the token's SHA-256 is stored; ``used_at`` is set by the one conditional UPDATE that claims it.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008_password_resets"
down_revision: str | None = "0007_unknown_strength"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "password_resets",
        sa.Column("pk", PK, nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("user_pk", PK, nullable=False),
        sa.Column("created_by", PK, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["user_pk"], ["users.pk"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["created_by"], ["users.pk"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("pk"),
        sa.UniqueConstraint("token_hash"),
    )


def downgrade() -> None:
    op.drop_table("password_resets")
