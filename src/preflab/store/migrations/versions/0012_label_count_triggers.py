"""The database keeps the pool's label count and closes the lease (issue 10: one rule, and a
submit is one statement on every path).

Revision ID: 0012_label_count_triggers
Revises: 0011_audit_log
Create Date: 2026-11-30

Three row triggers (``preflab.store.triggers``): a rater's label stored by the server closes
their lease on the item; a lease submitted counts a production label on the pool row; excluding
a production label (or including it again) takes it off (or puts it back on) the count. Rows an
import writes (with a batch) fire nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

from preflab.store import triggers

revision: str = "0012_label_count_triggers"
down_revision: str | None = "0011_audit_log"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    for stmt in triggers.create_statements(op.get_bind().dialect.name):
        op.execute(stmt)


def downgrade() -> None:
    for stmt in triggers.drop_statements(op.get_bind().dialect.name):
        op.execute(stmt)
