"""Unknown preference strength is stored as unknown, not as 2 (issue 15).

Revision ID: 0007_unknown_strength
Revises: 0006_item_skips
Create Date: 2026-11-30

Before this revision, a comparison whose source records no strength (PandaLM, hh-rlhf, the
``human_eval`` verdicts, a comparison record without ``strength``/``margin``) was stored with
strength 2 ("better"), and every export turned it into a margin of 2.0. Now such a judgment has
no ``strength`` in its body and a NULL ``score``.

Which stored rows can be told apart: a judgment's import batch records the record formats it
held (``import_batches.format``, comma-joined). A pairwise judgment with strength 2 whose batch
held only formats that never carry a strength (``pandalm``, ``hh-rlhf``, ``human_eval``) got
its 2 from the importer, so it is rewritten: strength removed, ``score`` NULL, content hash
recomputed (the hash covers the body). Everything else is kept as it is, because it cannot be
told: a ``comparison`` record may have said ``"strength": 2`` itself, a batch that mixed formats
does not say which judgment came from which, and labels from the web app always carry the
rater's strength. To drop invented strengths from such data, import the source files again into
a new project. Downgrade writes the old default (2) back into the rows this revision changed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from preflab.schema import parse_judgment
from preflab.store.rows import as_utc, judgment_rows

revision: str = "0007_unknown_strength"
down_revision: str | None = "0006_item_skips"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: record formats whose sources record no preference strength (the importer used to write 2)
NO_STRENGTH_FORMATS = frozenset({"pandalm", "hh-rlhf", "human_eval"})
OLD_DEFAULT = 2

JSON = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")
TZ = sa.DateTime(timezone=True)
BATCHES = sa.table("import_batches", sa.column("pk"), sa.column("format"))
ITEMS = sa.table("items", sa.column("pk"), sa.column("item_key"))
RATERS = sa.table("raters", sa.column("pk"), sa.column("rater_key"))
JUDGMENTS = sa.table(
    "judgments",
    sa.column("pk"),
    sa.column("item_pk"),
    sa.column("rater_pk"),
    sa.column("kind"),
    sa.column("body", JSON),
    sa.column("rationale"),
    sa.column("pair_lo"),
    sa.column("score"),
    sa.column("rubric_key"),
    sa.column("rubric_version"),
    sa.column("review_pass"),
    sa.column("source"),
    sa.column("started_at", TZ),
    sa.column("submitted_at", TZ),
    sa.column("telemetry", JSON),
    sa.column("idempotency_key"),
    sa.column("content_hash"),
    sa.column("batch_pk"),
)


def upgrade() -> None:
    _rewrite(
        lambda body: body.get("strength") == OLD_DEFAULT and body.get("winner") != "tie",
        lambda body: {k: v for k, v in body.items() if k != "strength"},
    )


def downgrade() -> None:
    _rewrite(lambda body: "strength" not in body, lambda body: {**body, "strength": OLD_DEFAULT})


def _rewrite(
    applies: Callable[[dict[str, Any]], bool],
    change: Callable[[dict[str, Any]], dict[str, Any]],
) -> None:
    conn = op.get_bind()
    batches = [
        pk
        for pk, fmt in conn.execute(sa.select(BATCHES.c.pk, BATCHES.c.format))
        if fmt and set(fmt.split(",")) <= NO_STRENGTH_FORMATS
    ]
    if not batches:
        return
    query = (
        sa.select(JUDGMENTS, ITEMS.c.item_key, RATERS.c.rater_key)
        .join(ITEMS, ITEMS.c.pk == JUDGMENTS.c.item_pk)
        .join(RATERS, RATERS.c.pk == JUDGMENTS.c.rater_pk)
        .where(JUDGMENTS.c.kind == "pairwise", JUDGMENTS.c.batch_pk.in_(batches))
    )
    updates = []
    for j in conn.execute(query):
        if not applies(j.body):
            continue
        rows = judgment_rows(parse_judgment(_wire_form(j, change(j.body))))
        updates.append(
            {
                "b_pk": j.pk,
                "b_body": rows.values["body"],
                "b_score": rows.values["score"],
                "b_content_hash": rows.content_hash,
            }
        )
    if updates:
        conn.execute(
            sa.update(JUDGMENTS)
            .where(JUDGMENTS.c.pk == sa.bindparam("b_pk"))
            .values(
                body=sa.bindparam("b_body", type_=JSON),
                score=sa.bindparam("b_score"),
                content_hash=sa.bindparam("b_content_hash"),
            ),
            updates,
        )


def _wire_form(j: Any, body: dict[str, Any]) -> dict[str, Any]:
    """The judgment as it was imported (its hash is the importer's), with ``body`` changed."""
    prov = {
        "rater_id": j.rater_key,
        "rubric_id": j.rubric_key,
        "rubric_version": j.rubric_version,
        "review_pass": j.review_pass,
        "source": j.source,
        "started_at": as_utc(j.started_at),
        "submitted_at": as_utc(j.submitted_at),
        "telemetry": j.telemetry,
        "idempotency_key": j.idempotency_key,
    }
    return {
        **body,
        "kind": j.kind,
        "item_id": j.item_key,
        "rationale": j.rationale,
        "provenance": {k: v for k, v in prov.items() if v is not None},
    }
