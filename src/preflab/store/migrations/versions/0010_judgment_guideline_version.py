"""The guideline version a rater saw, on each judgment (issue 16 section 3).

Revision ID: 0010_judgment_guideline_version
Revises: 0009_item_aliases
Create Date: 2026-11-30

Until now only a server assignment recorded the project settings version (``settings_version``)
the rater was shown; a judgment kept nothing, so agreement could not be broken down by guideline
version and exports could not say which guidelines a label followed. ``judgments.guideline_version``
is written by the server at submit (the assignment's ``settings_version``) and by imports from the
record's ``provenance.guideline_version``. Existing rows stay NULL (not recorded).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010_judgment_guideline_version"
down_revision: str | None = "0009_item_aliases"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("judgments") as batch:
        batch.add_column(sa.Column("guideline_version", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("judgments") as batch:
        batch.drop_column("guideline_version")
