"""Idempotency keys are unique per rater, not per project.

Revision ID: 0015_idempotency_per_rater
Revises: 0014_quality_snapshots
Create Date: 2026-12-01

A client makes its own keys (the Python client: a UUID per submission; a web page: its own
counter), so two raters' keys may coincide: with one key space per project the second rater's
honest submission was refused with 409 (issue 31). The key now names one submission of one
rater (``project_pk, rater_pk, idempotency_key``, still partial: imported judgments carry none).
Plain ``CREATE/DROP INDEX``: no table rebuild, so the label-count triggers (0012) stay.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015_idempotency_per_rater"
down_revision: str | None = "0014_quality_snapshots"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

HAS_KEY = sa.text("idempotency_key IS NOT NULL")


def upgrade() -> None:
    op.drop_index("uq_judgments_project_idempotency", table_name="judgments")
    op.create_index(
        "uq_judgments_rater_idempotency",
        "judgments",
        ["project_pk", "rater_pk", "idempotency_key"],
        unique=True,
        sqlite_where=HAS_KEY,
        postgresql_where=HAS_KEY,
    )


def downgrade() -> None:
    op.drop_index("uq_judgments_rater_idempotency", table_name="judgments")
    op.create_index(
        "uq_judgments_project_idempotency",
        "judgments",
        ["project_pk", "idempotency_key"],
        unique=True,
        sqlite_where=HAS_KEY,
        postgresql_where=HAS_KEY,
    )
