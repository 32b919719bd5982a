"""A model judge's record on its labels (``Provenance.judge``; issue 30).

Revision ID: 0016_judge_provenance
Revises: 0015_idempotency_per_rater
Create Date: 2026-12-01

``judgments.judge``: NULL for every label a person made; for a label of ``preflab judge run``
(``source: ai``) the model, the prompt template and its version, the endpoint, and for a pair
the verdict of each presentation order. A nullable column added in place (``ADD COLUMN``: no
table rebuild, so the label-count triggers of 0012 stay).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0016_judge_provenance"
down_revision: str | None = "0015_idempotency_per_rater"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    json_type = sa.JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")
    op.add_column("judgments", sa.Column("judge", json_type, nullable=True))


def downgrade() -> None:
    op.drop_column("judgments", "judge")  # SQLite >= 3.35 drops a column in place
