"""More raters where they disagree (issue 30 item 6): the pool row's extra raters.

Revision ID: 0019_extra_raters
Revises: 0018_ai_assistance
Create Date: 2026-12-02

``task_pool.extra``: raters granted beyond the item's k because its labels disagreed
(``Policy.adaptive_overlap``; the target is k plus these), and ``task_pool.extra_state``: the
rule's last verdict on the full item (NULL, ``agreed``, ``waiting``, ``split``). Plain
``ADD COLUMN`` on both databases: no table rebuild, so the label-count triggers (0012, 0017) stay.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019_extra_raters"
down_revision: str | None = "0018_ai_assistance"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("task_pool", sa.Column("extra", sa.Integer(), nullable=False, server_default="0"))
    op.add_column("task_pool", sa.Column("extra_state", sa.String(8), nullable=True))


def downgrade() -> None:
    # SQLite drops a column in place (3.35+) when no index or trigger names it: none does
    op.drop_column("task_pool", "extra_state")
    op.drop_column("task_pool", "extra")
