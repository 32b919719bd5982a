"""AI assistance in the labelling UI (issue 30 item 3; ``docs/judges.md``, "AI assistance").

Revision ID: 0018_ai_assistance
Revises: 0017_ai_labels_not_counted
Create Date: 2026-12-02

``assignments.suggestion``: the suggestions the label page served with this lease (the server's
record, never the client's word): a list of ``{"origin", "content_hash", "judgment_id",
"judge"}``; NULL when none was shown. ``judgments.assisted_by``: the same list copied onto a label
submitted with them in view (``Provenance.assisted_by``, ``source: ai_assisted``); NULL on every
other label. Both nullable columns added in place (no table rebuild: the triggers of 0012 stay).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0018_ai_assistance"
down_revision: str | None = "0017_ai_labels_not_counted"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    json_type = sa.JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")
    op.add_column("assignments", sa.Column("suggestion", json_type, nullable=True))
    op.add_column("judgments", sa.Column("assisted_by", json_type, nullable=True))


def downgrade() -> None:
    op.drop_column("judgments", "assisted_by")
    op.drop_column("assignments", "suggestion")
