"""A model judge's labels never fill a rater's place in the overlap (issue 30).

Revision ID: 0017_ai_labels_not_counted
Revises: 0016_judge_provenance
Create Date: 2026-12-01

The task pool's ``filled`` counts a person's production labels only: ``sync_pool`` leaves out
``source: ai`` labels (``preflab judge run``) when it makes a pool row, and the trigger that takes
an excluded label off the count (``judgments_exclusion_count``, 0012) now ignores them too, so
excluding or re-including a judge's label moves nothing. Existing counters are recounted once by
that rule (a pool row made after a judge ran counted its labels).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0017_ai_labels_not_counted"
down_revision: str | None = "0016_judge_provenance"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BODY = (
    "UPDATE task_pool SET filled = filled + CASE WHEN NEW.excluded THEN -1 ELSE 1 END "
    "WHERE item_pk = NEW.item_pk AND role = 'production';"
)
_WHEN = {
    # 0012's condition, then this revision's
    "before": "OLD.excluded <> NEW.excluded AND NEW.supersedes_pk IS NULL AND NEW.review_pass = 0",
    "after": "OLD.excluded <> NEW.excluded AND NEW.supersedes_pk IS NULL AND NEW.review_pass = 0 "
    "AND NEW.source <> 'ai'",
}


def _create(dialect: str, when: str) -> list[str]:
    """The exclusion trigger's DDL as of this revision (frozen here: ``preflab.store.triggers``
    may change later; a test holds the two equal)."""
    if dialect == "sqlite":
        return [
            "CREATE TRIGGER judgments_exclusion_count AFTER UPDATE OF excluded ON judgments "
            f"FOR EACH ROW WHEN {when} BEGIN {_BODY} END"
        ]
    return [
        "CREATE OR REPLACE FUNCTION preflab_judgments_exclusion_count() RETURNS trigger "
        f"LANGUAGE plpgsql AS $$ BEGIN {_BODY} RETURN NULL; END $$",
        "CREATE TRIGGER judgments_exclusion_count AFTER UPDATE OF excluded ON judgments "
        f"FOR EACH ROW WHEN ({when}) EXECUTE FUNCTION preflab_judgments_exclusion_count()",
    ]


DROP = {
    "sqlite": ["DROP TRIGGER IF EXISTS judgments_exclusion_count"],
    # the function stays: the new trigger runs the same body
    "postgresql": ["DROP TRIGGER IF EXISTS judgments_exclusion_count ON judgments"],
}
CREATE = {d: _create(d, _WHEN["after"]) for d in ("sqlite", "postgresql")}

#: ``filled`` made right once by the rule from now on: a person's production labels.
RECOUNT = (
    "UPDATE task_pool SET filled = (SELECT count(*) FROM judgments j "
    "WHERE j.item_pk = task_pool.item_pk AND j.review_pass = 0 "
    "AND j.supersedes_pk IS NULL AND j.excluded = false AND j.source <> 'ai') "
    "WHERE role = 'production'"
)


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    for stmt in [*DROP[dialect], *CREATE[dialect]]:
        op.execute(stmt)
    op.execute(RECOUNT)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    for stmt in [*DROP[dialect], *_create(dialect, _WHEN["before"])]:
        op.execute(stmt)
