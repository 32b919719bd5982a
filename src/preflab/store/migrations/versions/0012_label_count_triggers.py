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

revision: str = "0012_label_count_triggers"
down_revision: str | None = "0011_audit_log"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: The DDL as of this revision, frozen here (``preflab.store.triggers`` may change later; a
#: change is a new migration). A test holds these equal to what the module creates today.
CREATE = {
    "sqlite": (
        "CREATE TRIGGER judgments_close_lease AFTER INSERT ON judgments FOR EACH ROW WHEN NEW.batch_pk IS NULL AND NEW.review_pass = 0 AND NEW.supersedes_pk IS NULL BEGIN UPDATE assignments SET status = 'submitted', judgment_pk = NEW.pk WHERE item_pk = NEW.item_pk AND status = 'active' AND user_pk = (SELECT user_pk FROM raters WHERE pk = NEW.rater_pk); END",
        "CREATE TRIGGER assignments_count_label AFTER UPDATE OF status ON assignments FOR EACH ROW WHEN OLD.status = 'active' AND NEW.status = 'submitted' BEGIN UPDATE task_pool SET filled = filled + 1 WHERE item_pk = NEW.item_pk AND role = 'production'; END",
        "CREATE TRIGGER judgments_exclusion_count AFTER UPDATE OF excluded ON judgments FOR EACH ROW WHEN OLD.excluded <> NEW.excluded AND NEW.supersedes_pk IS NULL AND NEW.review_pass = 0 BEGIN UPDATE task_pool SET filled = filled + CASE WHEN NEW.excluded THEN -1 ELSE 1 END WHERE item_pk = NEW.item_pk AND role = 'production'; END",
    ),
    "postgresql": (
        "CREATE OR REPLACE FUNCTION preflab_judgments_close_lease() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN UPDATE assignments SET status = 'submitted', judgment_pk = NEW.pk WHERE item_pk = NEW.item_pk AND status = 'active' AND user_pk = (SELECT user_pk FROM raters WHERE pk = NEW.rater_pk); RETURN NULL; END $$",
        "CREATE TRIGGER judgments_close_lease AFTER INSERT ON judgments FOR EACH ROW WHEN (NEW.batch_pk IS NULL AND NEW.review_pass = 0 AND NEW.supersedes_pk IS NULL) EXECUTE FUNCTION preflab_judgments_close_lease()",
        "CREATE OR REPLACE FUNCTION preflab_assignments_count_label() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN UPDATE task_pool SET filled = filled + 1 WHERE item_pk = NEW.item_pk AND role = 'production'; RETURN NULL; END $$",
        "CREATE TRIGGER assignments_count_label AFTER UPDATE OF status ON assignments FOR EACH ROW WHEN (OLD.status = 'active' AND NEW.status = 'submitted') EXECUTE FUNCTION preflab_assignments_count_label()",
        "CREATE OR REPLACE FUNCTION preflab_judgments_exclusion_count() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN UPDATE task_pool SET filled = filled + CASE WHEN NEW.excluded THEN -1 ELSE 1 END WHERE item_pk = NEW.item_pk AND role = 'production'; RETURN NULL; END $$",
        "CREATE TRIGGER judgments_exclusion_count AFTER UPDATE OF excluded ON judgments FOR EACH ROW WHEN (OLD.excluded <> NEW.excluded AND NEW.supersedes_pk IS NULL AND NEW.review_pass = 0) EXECUTE FUNCTION preflab_judgments_exclusion_count()",
    ),
}
DROP = {
    "sqlite": (
        "DROP TRIGGER IF EXISTS judgments_close_lease",
        "DROP TRIGGER IF EXISTS assignments_count_label",
        "DROP TRIGGER IF EXISTS judgments_exclusion_count",
    ),
    "postgresql": (
        "DROP TRIGGER IF EXISTS judgments_close_lease ON judgments",
        "DROP FUNCTION IF EXISTS preflab_judgments_close_lease()",
        "DROP TRIGGER IF EXISTS assignments_count_label ON assignments",
        "DROP FUNCTION IF EXISTS preflab_assignments_count_label()",
        "DROP TRIGGER IF EXISTS judgments_exclusion_count ON judgments",
        "DROP FUNCTION IF EXISTS preflab_judgments_exclusion_count()",
    ),
}

#: The count the triggers keep from now on, made right once for existing rows (before this
#: revision a suspension could take a revised label off twice): production labels, review
#: pass 0, not a revision, not excluded — the rule of ``server.services.projects.sync_pool``.
RECOUNT = (
    "UPDATE task_pool SET filled = (SELECT count(*) FROM judgments j "
    "WHERE j.item_pk = task_pool.item_pk AND j.review_pass = 0 "
    "AND j.supersedes_pk IS NULL AND j.excluded = false) WHERE role = 'production'"
)


def upgrade() -> None:
    for stmt in CREATE[op.get_bind().dialect.name]:
        op.execute(stmt)
    op.execute(RECOUNT)


def downgrade() -> None:
    for stmt in DROP[op.get_bind().dialect.name]:
        op.execute(stmt)
