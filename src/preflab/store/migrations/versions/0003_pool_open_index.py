"""Task pool: a partial index over open items in the assigner's order.

Revision ID: 0003_pool_open_index
Revises: 0002_server
Create Date: 2026-11-30

The assigner picks the fullest open item first (``filled DESC, order_key DESC, pk DESC``);
without this index every pick evaluated and sorted the whole pool inside the write lock.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003_pool_open_index"
down_revision: str | None = "0002_server"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_task_pool_open",
        "task_pool",
        ["project_pk", "role", "filled", "order_key", "pk"],
        unique=False,
        sqlite_where=sa.text("filled < target"),
        postgresql_where=sa.text("filled < target"),
    )


def downgrade() -> None:
    op.drop_index("ix_task_pool_open", table_name="task_pool")
