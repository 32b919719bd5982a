"""An item is its content, also when records carry ids (issue 17 section 1).

Revision ID: 0009_item_aliases
Revises: 0008_password_resets
Create Date: 2026-11-30

A record whose content equals an existing item's joins that item whatever its ``id``; the other
id is kept in ``item_aliases`` so that a later record or a judgment naming it finds the item. The
importer finds items by content hash, so ``items`` gets an index on ``(project_pk, content_hash)``.

Schema only: items that an older database holds twice under two explicit ids (equal content) are
not merged here; new records join the first of them (lowest ``pk``).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009_item_aliases"
down_revision: str | None = "0008_password_resets"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_index(
        "ix_items_project_content", "items", ["project_pk", "content_hash"], unique=False
    )
    op.create_table(
        "item_aliases",
        sa.Column("pk", PK, nullable=False),
        sa.Column("project_pk", PK, nullable=False),
        sa.Column("alias_key", sa.String(length=200), nullable=False),
        sa.Column("item_pk", PK, nullable=False),
        sa.ForeignKeyConstraint(
            ["project_pk"],
            ["projects.pk"],
            ondelete="CASCADE",
            name=op.f("fk_item_aliases_project_pk_projects"),
        ),
        sa.ForeignKeyConstraint(
            ["item_pk"],
            ["items.pk"],
            ondelete="CASCADE",
            name=op.f("fk_item_aliases_item_pk_items"),
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_item_aliases")),
        sa.UniqueConstraint("project_pk", "alias_key", name=op.f("uq_item_aliases_project_pk")),
    )
    op.create_index("ix_item_aliases_item_pk", "item_aliases", ["item_pk"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_item_aliases_item_pk", table_name="item_aliases")
    op.drop_table("item_aliases")
    op.drop_index("ix_items_project_content", table_name="items")
