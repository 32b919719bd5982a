"""The label counter and the lease close, kept by the database itself (migration 0012).

One rule, so no path can count by hand or drift: the task pool's ``filled`` is the number of
the item's production labels (review pass 0, not a revision, not excluded, made by a person: a
model judge's ``source: ai`` label never takes a rater's place; migration 0017), counted when the
pool row is made (``server.services.projects.sync_pool``) and kept from then on by three triggers:

* ``judgments_close_lease``: a rater's label stored by the server (no import batch, review pass
  0, not a revision) closes that rater's active lease on the item (``status = 'submitted'``,
  ``judgment_pk``; unique per item and user). Imported rows carry a batch: the trigger's
  ``WHEN`` is false for them, so an import does no work per row beyond that test;
* ``assignments_count_label``: a lease going from ``active`` to ``submitted`` counts one label
  on the item's pool row if it is a production row (gold and qualification rows are never
  filled);
* ``judgments_exclusion_count``: excluding a person's production label (a suspension) takes it
  off the count; including it again puts it back. Revisions and review passes were never counted.

So a submit is one ``INSERT INTO judgments`` on every path (fast lane on SQLite and
PostgreSQL, the ORM path); the statements a trigger runs are part of the statement that fired
it (one round trip). ``Base.metadata.create_all`` creates them from this module (:func:`create`,
registered in ``server_models``); migration 0012 carries a frozen copy of the same DDL (a test
holds the two equal) and recounts existing pool rows once. A change to a trigger is a new
migration that drops and re-creates it.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class Trigger(NamedTuple):
    name: str
    table: str
    event: str  # AFTER ...
    when: str
    body: str  # statements run per row, each ending with ';'


TRIGGERS = (
    Trigger(
        "judgments_close_lease",
        "judgments",
        "AFTER INSERT",
        "NEW.batch_pk IS NULL AND NEW.review_pass = 0 AND NEW.supersedes_pk IS NULL",
        "UPDATE assignments SET status = 'submitted', judgment_pk = NEW.pk "
        "WHERE item_pk = NEW.item_pk AND status = 'active' "
        "AND user_pk = (SELECT user_pk FROM raters WHERE pk = NEW.rater_pk);",
    ),
    Trigger(
        "assignments_count_label",
        "assignments",
        "AFTER UPDATE OF status",
        "OLD.status = 'active' AND NEW.status = 'submitted'",
        "UPDATE task_pool SET filled = filled + 1 "
        "WHERE item_pk = NEW.item_pk AND role = 'production';",
    ),
    Trigger(
        "judgments_exclusion_count",
        "judgments",
        "AFTER UPDATE OF excluded",
        "OLD.excluded <> NEW.excluded AND NEW.supersedes_pk IS NULL AND NEW.review_pass = 0 "
        "AND NEW.source <> 'ai'",
        "UPDATE task_pool SET filled = filled + CASE WHEN NEW.excluded THEN -1 ELSE 1 END "
        "WHERE item_pk = NEW.item_pk AND role = 'production';",
    ),
)


def _function(t: Trigger) -> str:
    return f"preflab_{t.name}"


def create_statements(dialect: str) -> list[str]:
    """DDL creating every trigger (``dialect``: ``sqlite`` or ``postgresql``)."""
    if dialect == "sqlite":
        return [
            f"CREATE TRIGGER {t.name} {t.event} ON {t.table} FOR EACH ROW "
            f"WHEN {t.when} BEGIN {t.body} END"
            for t in TRIGGERS
        ]
    out = []
    for t in TRIGGERS:
        out.append(
            f"CREATE OR REPLACE FUNCTION {_function(t)}() RETURNS trigger LANGUAGE plpgsql "
            f"AS $$ BEGIN {t.body} RETURN NULL; END $$"
        )
        out.append(
            f"CREATE TRIGGER {t.name} {t.event} ON {t.table} FOR EACH ROW "
            f"WHEN ({t.when}) EXECUTE FUNCTION {_function(t)}()"
        )
    return out


def drop_statements(dialect: str) -> list[str]:
    if dialect == "sqlite":
        return [f"DROP TRIGGER IF EXISTS {t.name}" for t in TRIGGERS]
    out = []
    for t in TRIGGERS:
        out.append(f"DROP TRIGGER IF EXISTS {t.name} ON {t.table}")
        out.append(f"DROP FUNCTION IF EXISTS {_function(t)}()")
    return out


def create(target: Any, connection: Any, **kw: Any) -> None:
    """``Base.metadata``'s ``after_create`` hook: the triggers beside the tables (when this
    ``create_all`` made the judgments table; on an existing schema they exist already)."""
    if not any(t.name == "judgments" for t in kw.get("tables") or ()):
        return
    for stmt in create_statements(connection.dialect.name):
        connection.exec_driver_sql(stmt)
