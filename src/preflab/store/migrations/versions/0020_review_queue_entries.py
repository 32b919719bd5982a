"""The review queues, materialised by the snapshot process (issue 27 item 2).

Revision ID: 0020_review_queue_entries
Revises: 0019_extra_raters
Create Date: 2026-12-02

``review_queue_entries``: one row per entry of a project's review queues (the adjudication queue,
spot review, labels held out by telemetry, weak signals per rater, pending demonstrations) in
each queue's order (``position``), written whole by the quality snapshot's process; the review
page and ``GET .../review/queues`` read one keyset page of it. ``quality_snapshots.review``: the
queues' counts and spot share (NULL until the first run that computes them).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from preflab.store.models import JSONType

revision: str = "0020_review_queue_entries"
down_revision: str | None = "0019_extra_raters"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.add_column("quality_snapshots", sa.Column("review", JSONType, nullable=True))
    op.create_table(
        "review_queue_entries",
        sa.Column("pk", PK, nullable=False),
        sa.Column("project_pk", PK, nullable=False),
        sa.Column("queue", sa.String(16), nullable=False),
        sa.Column("position", PK, nullable=False),
        sa.Column("item_key", sa.String(200), nullable=True),
        sa.Column("judgment_pk", PK, nullable=True),
        sa.Column("draw", sa.Float(), nullable=True),
        sa.Column("done", sa.Boolean(), nullable=False),
        # plain JSON on PostgreSQL too: an entry's keys keep their order
        sa.Column("entry", sa.JSON(none_as_null=True), nullable=False),
        sa.ForeignKeyConstraint(["project_pk"], ["projects.pk"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("pk"),
        sa.UniqueConstraint("project_pk", "queue", "position"),
    )


def downgrade() -> None:
    op.drop_table("review_queue_entries")
    # SQLite drops a column in place (3.35+) when no index or trigger names it: none does
    op.drop_column("quality_snapshots", "review")
