"""Per-candidate text statistics, computed once at write time (issue 27, export/report CPU).

Revision ID: 0022_candidate_text_stats
Revises: 0021_judgments_project_pk_index
Create Date: 2026-12-02

``candidate_text_stats`` (one row a candidate, keyed by its pk): the token count of its text
under the default tokenizer, its word length and the five formatting features the quality report
reads; ``text_stats_versions``: what a row was computed with (feature code version, tokenizer
SHA-256). A side table rather than columns of ``candidates``: see
:class:`preflab.store.models.CandidateTextStats`. Only tables are added: the rows of existing
databases are computed by ``preflab db text-stats`` (readers compute what has no row).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022_candidate_text_stats"
down_revision: str | None = "0021_judgments_project_pk_index"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "text_stats_versions",
        sa.Column("pk", sa.Integer(), nullable=False),
        sa.Column("features_version", sa.SmallInteger(), nullable=False),
        sa.Column("tokenizer", sa.String(length=100), nullable=False),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_text_stats_versions")),
        sa.UniqueConstraint(
            "features_version", "tokenizer", name=op.f("uq_text_stats_versions_features_version")
        ),
    )
    op.create_table(
        "candidate_text_stats",
        sa.Column("candidate_pk", PK, nullable=False),
        sa.Column("version_pk", sa.Integer(), nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=True),
        sa.Column("words", sa.Integer(), nullable=False),
        sa.Column("headers", sa.Integer(), nullable=False),
        sa.Column("bullets", sa.Integer(), nullable=False),
        sa.Column("bold", sa.Integer(), nullable=False),
        sa.Column("sycophancy", sa.Integer(), nullable=False),
        sa.Column("opening_validation", sa.SmallInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["candidate_pk"],
            ["candidates.pk"],
            name=op.f("fk_candidate_text_stats_candidate_pk_candidates"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["version_pk"],
            ["text_stats_versions.pk"],
            name=op.f("fk_candidate_text_stats_version_pk_text_stats_versions"),
        ),
        sa.PrimaryKeyConstraint("candidate_pk", name=op.f("pk_candidate_text_stats")),
    )


def downgrade() -> None:
    op.drop_table("candidate_text_stats")
    op.drop_table("text_stats_versions")
