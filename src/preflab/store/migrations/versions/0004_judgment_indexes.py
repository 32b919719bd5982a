"""Judgment indexes that bulk imports can append to.

Revision ID: 0004_judgment_indexes
Revises: 0003_pool_open_index
Create Date: 2026-11-30

- A judgment's content hash is unique per *item* (``item_pk, content_hash``), not per project:
  the hash covers the item's id, so the two rules admit the same rows, but an import adds its
  judgments to new items in ``item_pk`` order, so the index is appended to instead of written at
  a random place per row (a 64-character random key).
- The idempotency-key index is partial (``WHERE idempotency_key IS NOT NULL``): keys are only
  ever looked up by value, and imported judgments have none, so they no longer add entries.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004_judgment_indexes"
down_revision: str | None = "0003_pool_open_index"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

HAS_KEY = sa.text("idempotency_key IS NOT NULL")


def upgrade() -> None:
    with op.batch_alter_table("judgments", schema=None) as batch_op:
        batch_op.drop_constraint("uq_judgments_project_pk", type_="unique")
        batch_op.drop_index("uq_judgments_project_idempotency")
        batch_op.create_index("uq_judgments_item_content", ["item_pk", "content_hash"], unique=True)
        batch_op.create_index(
            "uq_judgments_project_idempotency",
            ["project_pk", "idempotency_key"],
            unique=True,
            sqlite_where=HAS_KEY,
            postgresql_where=HAS_KEY,
        )


def downgrade() -> None:
    with op.batch_alter_table("judgments", schema=None) as batch_op:
        batch_op.drop_index("uq_judgments_project_idempotency")
        batch_op.drop_index("uq_judgments_item_content")
        batch_op.create_index(
            "uq_judgments_project_idempotency", ["project_pk", "idempotency_key"], unique=True
        )
        batch_op.create_unique_constraint("uq_judgments_project_pk", ["project_pk", "content_hash"])
