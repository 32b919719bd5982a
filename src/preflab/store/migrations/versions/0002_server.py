"""Collection server: users, memberships, sessions, API tokens, invites, login attempts,
domain credentials, settings history, task pool, assignments (leases), rater status, gold
outcomes, review requests; ``raters.user_pk``.

Revision ID: 0002_server
Revises: 0001_initial
Create Date: 2026-11-30

Types are spelled out here (not imported from ``models``) so this revision never changes
when the models do.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002_server"
down_revision: str | None = "0001_initial"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")
PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "login_attempts",
        sa.Column("pk", PK, nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_login_attempts")),
    )
    with op.batch_alter_table("login_attempts", schema=None) as batch_op:
        batch_op.create_index("ix_login_attempts_key_at", ["key", "at"], unique=False)

    op.create_table(
        "users",
        sa.Column("pk", PK, nullable=False),
        sa.Column("username", sa.String(length=100), nullable=False),
        sa.Column("display_name", sa.String(length=200), nullable=False),
        sa.Column("email", sa.String(length=320), nullable=True),
        sa.Column("password_hash", sa.String(length=200), nullable=True),
        sa.Column("is_admin", sa.Boolean(), nullable=False),
        sa.Column("is_active", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_users")),
        sa.UniqueConstraint("username", name=op.f("uq_users_username")),
    )
    op.create_table(
        "api_tokens",
        sa.Column("pk", PK, nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("user_pk", PK, nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_pk"], ["users.pk"], name=op.f("fk_api_tokens_user_pk_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_api_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_api_tokens_token_hash")),
    )
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_api_tokens_user_pk"), ["user_pk"], unique=False)

    op.create_table(
        "credentials",
        sa.Column("pk", PK, nullable=False),
        sa.Column("user_pk", PK, nullable=False),
        sa.Column("domain", sa.String(length=100), nullable=False),
        sa.Column("evidence", sa.Text(), nullable=False),
        sa.Column("verified", sa.Boolean(), nullable=False),
        sa.Column("verified_by", PK, nullable=True),
        sa.Column("verified_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_pk"], ["users.pk"], name=op.f("fk_credentials_user_pk_users"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["verified_by"],
            ["users.pk"],
            name=op.f("fk_credentials_verified_by_users"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_credentials")),
        sa.UniqueConstraint("user_pk", "domain", name=op.f("uq_credentials_user_pk")),
    )
    op.create_table(
        "invites",
        sa.Column("pk", PK, nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("project_pk", PK, nullable=True),
        sa.Column("role", sa.String(length=20), nullable=False),
        sa.Column("email", sa.String(length=320), nullable=True),
        sa.Column("created_by", PK, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("used_by", PK, nullable=True),
        sa.ForeignKeyConstraint(
            ["created_by"],
            ["users.pk"],
            name=op.f("fk_invites_created_by_users"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["project_pk"],
            ["projects.pk"],
            name=op.f("fk_invites_project_pk_projects"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["used_by"], ["users.pk"], name=op.f("fk_invites_used_by_users"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_invites")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_invites_token_hash")),
    )
    op.create_table(
        "memberships",
        sa.Column("pk", PK, nullable=False),
        sa.Column("project_pk", PK, nullable=False),
        sa.Column("user_pk", PK, nullable=False),
        sa.Column("role", sa.String(length=20), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_pk"],
            ["projects.pk"],
            name=op.f("fk_memberships_project_pk_projects"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_pk"], ["users.pk"], name=op.f("fk_memberships_user_pk_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_memberships")),
        sa.UniqueConstraint("project_pk", "user_pk", name=op.f("uq_memberships_project_pk")),
    )
    with op.batch_alter_table("memberships", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_memberships_user_pk"), ["user_pk"], unique=False)

    op.create_table(
        "project_settings_versions",
        sa.Column("pk", PK, nullable=False),
        sa.Column("project_pk", PK, nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("changed_by", PK, nullable=True),
        sa.Column("changed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("before", JSON, nullable=True),
        sa.Column("after", JSON, nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["changed_by"],
            ["users.pk"],
            name=op.f("fk_project_settings_versions_changed_by_users"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["project_pk"],
            ["projects.pk"],
            name=op.f("fk_project_settings_versions_project_pk_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_project_settings_versions")),
        sa.UniqueConstraint(
            "project_pk", "version", name=op.f("uq_project_settings_versions_project_pk")
        ),
    )
    op.create_table(
        "rater_status",
        sa.Column("pk", PK, nullable=False),
        sa.Column("project_pk", PK, nullable=False),
        sa.Column("user_pk", PK, nullable=False),
        sa.Column("status", sa.String(length=12), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("evidence", JSON, nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_pk"],
            ["projects.pk"],
            name=op.f("fk_rater_status_project_pk_projects"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_pk"],
            ["users.pk"],
            name=op.f("fk_rater_status_user_pk_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_rater_status")),
        sa.UniqueConstraint("project_pk", "user_pk", name=op.f("uq_rater_status_project_pk")),
    )
    op.create_table(
        "web_sessions",
        sa.Column("pk", PK, nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("user_pk", PK, nullable=False),
        sa.Column("csrf_token", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked", sa.Boolean(), nullable=False),
        sa.Column("ip", sa.String(length=64), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_pk"],
            ["users.pk"],
            name=op.f("fk_web_sessions_user_pk_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_web_sessions")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_web_sessions_token_hash")),
    )
    with op.batch_alter_table("web_sessions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_web_sessions_user_pk"), ["user_pk"], unique=False)

    op.create_table(
        "task_pool",
        sa.Column("pk", PK, nullable=False),
        sa.Column("project_pk", PK, nullable=False),
        sa.Column("item_pk", PK, nullable=False),
        sa.Column("role", sa.String(length=20), nullable=False),
        sa.Column("target", sa.Integer(), nullable=False),
        sa.Column("filled", sa.Integer(), nullable=False),
        sa.Column("order_key", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["item_pk"], ["items.pk"], name=op.f("fk_task_pool_item_pk_items"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["project_pk"],
            ["projects.pk"],
            name=op.f("fk_task_pool_project_pk_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_task_pool")),
        sa.UniqueConstraint("item_pk", name=op.f("uq_task_pool_item_pk")),
    )
    with op.batch_alter_table("task_pool", schema=None) as batch_op:
        batch_op.create_index("ix_task_pool_pick", ["project_pk", "role", "filled"], unique=False)

    op.create_table(
        "task_pool_domains",
        sa.Column("pk", PK, nullable=False),
        sa.Column("item_pk", PK, nullable=False),
        sa.Column("domain", sa.String(length=100), nullable=False),
        sa.ForeignKeyConstraint(
            ["item_pk"],
            ["items.pk"],
            name=op.f("fk_task_pool_domains_item_pk_items"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_task_pool_domains")),
        sa.UniqueConstraint("item_pk", "domain", name=op.f("uq_task_pool_domains_item_pk")),
    )
    op.create_table(
        "assignments",
        sa.Column("pk", PK, nullable=False),
        sa.Column("lease_id", sa.String(length=64), nullable=False),
        sa.Column("project_pk", PK, nullable=False),
        sa.Column("item_pk", PK, nullable=False),
        sa.Column("user_pk", PK, nullable=False),
        sa.Column("role", sa.String(length=20), nullable=False),
        sa.Column("status", sa.String(length=12), nullable=False),
        sa.Column("shown_order", JSON, nullable=False),
        sa.Column("settings_version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("judgment_pk", PK, nullable=True),
        sa.ForeignKeyConstraint(
            ["item_pk"], ["items.pk"], name=op.f("fk_assignments_item_pk_items"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["judgment_pk"],
            ["judgments.pk"],
            name=op.f("fk_assignments_judgment_pk_judgments"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["project_pk"],
            ["projects.pk"],
            name=op.f("fk_assignments_project_pk_projects"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_pk"], ["users.pk"], name=op.f("fk_assignments_user_pk_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_assignments")),
        sa.UniqueConstraint("item_pk", "user_pk", name=op.f("uq_assignments_item_pk")),
        sa.UniqueConstraint("lease_id", name=op.f("uq_assignments_lease_id")),
    )
    with op.batch_alter_table("assignments", schema=None) as batch_op:
        batch_op.create_index("ix_assignments_item_status", ["item_pk", "status"], unique=False)
        batch_op.create_index(
            "ix_assignments_user_status", ["project_pk", "user_pk", "status"], unique=False
        )

    op.create_table(
        "gold_outcomes",
        sa.Column("pk", PK, nullable=False),
        sa.Column("project_pk", PK, nullable=False),
        sa.Column("user_pk", PK, nullable=False),
        sa.Column("item_pk", PK, nullable=False),
        sa.Column("judgment_pk", PK, nullable=False),
        sa.Column("phase", sa.String(length=20), nullable=False),
        sa.Column("correct", sa.Boolean(), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["item_pk"],
            ["items.pk"],
            name=op.f("fk_gold_outcomes_item_pk_items"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["judgment_pk"],
            ["judgments.pk"],
            name=op.f("fk_gold_outcomes_judgment_pk_judgments"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["project_pk"],
            ["projects.pk"],
            name=op.f("fk_gold_outcomes_project_pk_projects"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_pk"],
            ["users.pk"],
            name=op.f("fk_gold_outcomes_user_pk_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_gold_outcomes")),
        sa.UniqueConstraint("judgment_pk", name=op.f("uq_gold_outcomes_judgment_pk")),
    )
    with op.batch_alter_table("gold_outcomes", schema=None) as batch_op:
        batch_op.create_index(
            "ix_gold_outcomes_rater", ["project_pk", "user_pk", "phase"], unique=False
        )

    op.create_table(
        "review_requests",
        sa.Column("pk", PK, nullable=False),
        sa.Column("project_pk", PK, nullable=False),
        sa.Column("judgment_pk", PK, nullable=False),
        sa.Column("reviewer_pk", PK, nullable=True),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=12), nullable=False),
        sa.Column("revision_pk", PK, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["judgment_pk"],
            ["judgments.pk"],
            name=op.f("fk_review_requests_judgment_pk_judgments"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["project_pk"],
            ["projects.pk"],
            name=op.f("fk_review_requests_project_pk_projects"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["reviewer_pk"],
            ["users.pk"],
            name=op.f("fk_review_requests_reviewer_pk_users"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["revision_pk"],
            ["judgments.pk"],
            name=op.f("fk_review_requests_revision_pk_judgments"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_review_requests")),
    )
    with op.batch_alter_table("review_requests", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_review_requests_judgment_pk"), ["judgment_pk"], unique=False
        )

    with op.batch_alter_table("raters", schema=None) as batch_op:
        batch_op.add_column(sa.Column("user_pk", PK, nullable=True))
        batch_op.create_foreign_key(
            batch_op.f("fk_raters_user_pk_users"), "users", ["user_pk"], ["pk"], ondelete="SET NULL"
        )


def downgrade() -> None:
    with op.batch_alter_table("raters", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_raters_user_pk_users"), type_="foreignkey")
        batch_op.drop_column("user_pk")

    with op.batch_alter_table("review_requests", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_review_requests_judgment_pk"))

    op.drop_table("review_requests")
    with op.batch_alter_table("gold_outcomes", schema=None) as batch_op:
        batch_op.drop_index("ix_gold_outcomes_rater")

    op.drop_table("gold_outcomes")
    with op.batch_alter_table("assignments", schema=None) as batch_op:
        batch_op.drop_index("ix_assignments_user_status")
        batch_op.drop_index("ix_assignments_item_status")

    op.drop_table("assignments")
    op.drop_table("task_pool_domains")
    with op.batch_alter_table("task_pool", schema=None) as batch_op:
        batch_op.drop_index("ix_task_pool_pick")

    op.drop_table("task_pool")
    with op.batch_alter_table("web_sessions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_web_sessions_user_pk"))

    op.drop_table("web_sessions")
    op.drop_table("rater_status")
    op.drop_table("project_settings_versions")
    with op.batch_alter_table("memberships", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_memberships_user_pk"))

    op.drop_table("memberships")
    op.drop_table("invites")
    op.drop_table("credentials")
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_api_tokens_user_pk"))

    op.drop_table("api_tokens")
    op.drop_table("users")
    with op.batch_alter_table("login_attempts", schema=None) as batch_op:
        batch_op.drop_index("ix_login_attempts_key_at")

    op.drop_table("login_attempts")
