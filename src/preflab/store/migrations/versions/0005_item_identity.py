"""One pair, one item: re-key items by the identity of :mod:`preflab.schema.identity` and merge
the items that are now the same.

Revision ID: 0005_item_identity
Revises: 0004_judgment_indexes
Create Date: 2026-11-30

Before this revision an item's derived id hashed its prompt as written and its candidates in the
order of the record, so the same pair judged in opposite directions (or written with NFD, a
trailing newline, a one-message chat) became several items. This data migration, per project:

- recognises derived ids by recomputing the previous rule (``content_hash({"prompt": messages,
  "candidates": [[id, body], ...]}, "itm_", 16)``, candidates in stored order; a candidate id
  ``content_hash(body, "cand_", 12)``); explicit ids are kept as they are;
- gives derived candidate ids and item ids their new value (:func:`candidate_key`,
  :func:`item_key`), and every item its new content hash (:func:`item_content`);
- merges the items that now share an id into the first imported one (lowest ``pk``): every
  judgment is re-pointed with its provenance, its candidate ids re-mapped, its canonical pair
  (``pair_lo``, ``pair_hi``, signed ``score``) recomputed from what the rater chose (an imported
  comparison, stored in sorted id order, stays sorted, its winner swapped with the order), and
  its content hash recomputed; a judgment that becomes identical to one already on the item (the
  same rater, the same verdict on the same pair written twice) is kept, excluded from exports
  with the reason, so nothing is counted twice and nothing is deleted;
- re-points the server's rows (task pool, pool domains, assignments, gold outcomes); the merged
  items' keys and metadata are kept in the surviving item's ``metadata.merged_items``.

The identity rule is imported (it exists once); the previous rule is spelled out here because it
is history. Downgrade keeps the merged items merged (the split was the bug).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from preflab.schema import content_hash, parse_judgment
from preflab.schema.identity import candidate_key, item_content, item_key
from preflab.store.rows import as_utc, judgment_rows

revision: str = "0005_item_identity"
down_revision: str | None = "0004_judgment_indexes"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")
TZ = sa.DateTime(timezone=True)

ITEMS = sa.table(
    "items",
    sa.column("pk"),
    sa.column("project_pk"),
    sa.column("item_key"),
    sa.column("content_hash"),
    sa.column("prompt", JSON),
    sa.column("domains", JSON),
    sa.column("reference"),
    sa.column("gold", JSON),
    sa.column("metadata", JSON),
)
CANDIDATES = sa.table(
    "candidates",
    sa.column("pk"),
    sa.column("item_pk"),
    sa.column("candidate_key"),
    sa.column("position"),
    sa.column("text"),
    sa.column("messages", JSON),
)
JUDGMENTS = sa.table(
    "judgments",
    sa.column("pk"),
    sa.column("item_pk"),
    sa.column("rater_pk"),
    sa.column("kind"),
    sa.column("body", JSON),
    sa.column("rationale"),
    sa.column("pair_lo"),
    sa.column("pair_hi"),
    sa.column("score"),
    sa.column("shown_order", JSON),
    sa.column("rubric_key"),
    sa.column("rubric_version"),
    sa.column("review_pass"),
    sa.column("source"),
    sa.column("started_at", TZ),
    sa.column("submitted_at", TZ),
    sa.column("telemetry", JSON),
    sa.column("idempotency_key"),
    sa.column("content_hash"),
    sa.column("excluded"),
    sa.column("exclusion_reason"),
    sa.column("batch_pk"),
)
RATERS = sa.table("raters", sa.column("pk"), sa.column("project_pk"), sa.column("rater_key"))
POOL = sa.table(
    "task_pool", sa.column("pk"), sa.column("item_pk"), sa.column("target"), sa.column("filled")
)
POOL_DOMAINS = sa.table(
    "task_pool_domains", sa.column("pk"), sa.column("item_pk"), sa.column("domain")
)
ASSIGNMENTS = sa.table(
    "assignments",
    sa.column("pk"),
    sa.column("item_pk"),
    sa.column("user_pk"),
    sa.column("shown_order", JSON),
)
GOLD_OUTCOMES = sa.table("gold_outcomes", sa.column("pk"), sa.column("item_pk"))


def _old_prompt(prompt: Any) -> list[Any]:
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt


def _body(c: Any) -> Any:
    return c.text if c.messages is None else c.messages


def _plan_item(item: Any, cands: list[Any]) -> tuple[str, str, dict[str, str]]:
    """``(new key, new content hash, {old candidate key: new})`` of one item."""
    old_derived = item.item_key == content_hash(
        {
            "prompt": _old_prompt(item.prompt),
            "candidates": [[c.candidate_key, _body(c)] for c in cands],
        },
        prefix="itm_",
        length=16,
    )
    remap: dict[str, str] = {}
    taken = {c.candidate_key for c in cands}
    for c in cands:
        if c.candidate_key == content_hash(_body(c), prefix="cand_", length=12):
            new = candidate_key(_body(c))
            # two answers of one item equal after normalisation: the later keeps its id
            if new != c.candidate_key and new not in taken:
                taken.discard(c.candidate_key)
                taken.add(new)
                remap[c.candidate_key] = new
    ids = [(remap.get(c.candidate_key, c.candidate_key), _body(c)) for c in cands]
    key = item_key(item.prompt, ids) if old_derived else item.item_key
    dump = {
        "prompt": item.prompt,
        "candidates": [
            {
                "id": i,
                "text": b if isinstance(b, str) else None,
                "messages": None if isinstance(b, str) else b,
            }
            for i, b in ids
        ],
        "domains": item.domains or [],
        "reference": item.reference,
        "gold": item.gold,
    }
    return key, content_hash(item_content(dump), length=64), remap


def _rename(value: Any, remap: dict[str, str]) -> Any:
    """``value`` with every string (and dict key) that is an old candidate id replaced."""
    if isinstance(value, str):
        return remap.get(value, value)
    if isinstance(value, list):
        return [_rename(v, remap) for v in value]
    if isinstance(value, dict):
        return {remap.get(k, k): _rename(v, remap) for k, v in value.items()}
    return value


def _imported_order(j: Any, body: dict[str, Any]) -> dict[str, Any]:
    """An imported comparison was stored in sorted candidate-id order (no order was shown to
    anyone): it stays sorted when its ids change, so re-importing its record finds it."""
    old = j.body.get("shown_order")
    a, b = body["shown_order"]
    if j.batch_pk is None or old != sorted(old) or a < b:
        return body
    winner = {"a": "b", "b": "a"}.get(body["winner"], body["winner"])
    return {**body, "shown_order": [b, a], "winner": winner}


def _canonical_pair(body: dict[str, Any]) -> tuple[str, str, int]:
    a, b = body["shown_order"]
    lo, hi = sorted((a, b))
    if body["winner"] == "tie":
        return lo, hi, 0
    chosen = a if body["winner"] == "a" else b
    return lo, hi, -body["strength"] if chosen == lo else body["strength"]


def _judgment_hash(j: Any, body: dict[str, Any], key: str, rater: str) -> str:
    prov = {
        "rater_id": rater,
        "rubric_id": j.rubric_key,
        "rubric_version": j.rubric_version,
        "review_pass": j.review_pass,
        "source": j.source,
        "started_at": as_utc(j.started_at),
        "submitted_at": as_utc(j.submitted_at),
        "telemetry": j.telemetry,
        "idempotency_key": j.idempotency_key,
    }
    data = {
        **body,
        "kind": j.kind,
        "item_id": key,
        "rationale": j.rationale,
        "provenance": {k: v for k, v in prov.items() if v is not None},
    }
    return judgment_rows(parse_judgment(data)).content_hash


def _by_pk(table: sa.TableClause, **columns: str) -> sa.Update:
    """``UPDATE table SET column = :b_column ... WHERE pk = :b_pk``, for executemany."""
    return (
        sa.update(table)
        .where(table.c.pk == sa.bindparam("b_pk"))
        .values({name: sa.bindparam(f"b_{name}") for name in columns})
    )


def _run(conn: sa.Connection, statement: sa.Executable, rows: list[dict[str, Any]]) -> None:
    if rows:
        conn.execute(statement, rows)


def _of_project(table: sa.TableClause, project_pk: int) -> sa.Select[Any]:
    """Rows of ``table`` (which has ``item_pk``) whose item is in the project (no long IN lists)."""
    return (
        sa.select(table)
        .join(ITEMS, ITEMS.c.pk == table.c.item_pk)
        .where(ITEMS.c.project_pk == project_pk)
    )


def _merge_project(conn: sa.Connection, project_pk: int) -> None:
    items = {
        r.pk: r for r in conn.execute(sa.select(ITEMS).where(ITEMS.c.project_pk == project_pk))
    }
    if not items:
        return
    cands: dict[int, list[Any]] = defaultdict(list)
    for c in conn.execute(
        _of_project(CANDIDATES, project_pk).order_by(CANDIDATES.c.item_pk, CANDIDATES.c.position)
    ):
        cands[c.item_pk].append(c)
    plans = {pk: _plan_item(item, cands[pk]) for pk, item in items.items()}
    groups: dict[str, list[int]] = defaultdict(list)
    for pk in sorted(items):
        groups[plans[pk][0]].append(pk)
    survivor = {pk: group[0] for group in groups.values() for pk in group}
    touched = {
        pk
        for pk, (key, _, remap) in plans.items()
        if key != items[pk].item_key or remap or survivor[pk] != pk
    }
    _move_judgments(conn, project_pk, plans, survivor, touched)
    _move_server_rows(conn, project_pk, plans, survivor)
    victims = [pk for pk in sorted(items) if survivor[pk] != pk]
    merged: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for pk in victims:
        merged[survivor[pk]].append(
            {"item_key": items[pk].item_key, "metadata": items[pk].metadata or {}}
        )
    delete = [{"b_pk": pk} for pk in victims]
    _run(conn, sa.delete(CANDIDATES).where(CANDIDATES.c.item_pk == sa.bindparam("b_pk")), delete)
    _run(conn, sa.delete(ITEMS).where(ITEMS.c.pk == sa.bindparam("b_pk")), delete)
    kept = [pk for pk in sorted(items) if survivor[pk] == pk]
    # two steps, so a new key never meets an old one on the unique (project, key) index
    _run(
        conn,
        _by_pk(ITEMS, item_key=""),
        [
            {"b_pk": pk, "b_item_key": f"~0005~{pk}"}
            for pk in kept
            if plans[pk][0] != items[pk].item_key
        ],
    )
    _run(
        conn,
        _by_pk(ITEMS, item_key="", content_hash=""),
        [{"b_pk": pk, "b_item_key": plans[pk][0], "b_content_hash": plans[pk][1]} for pk in kept],
    )
    metadata = []
    for pk in kept:
        if merged[pk]:
            meta = items[pk].metadata or {}
            metadata.append(
                {
                    "b_pk": pk,
                    "b_metadata": {
                        **meta,
                        "merged_items": [*meta.get("merged_items", []), *merged[pk]],
                    },
                }
            )
    _run(
        conn,
        sa.update(ITEMS)
        .where(ITEMS.c.pk == sa.bindparam("b_pk"))
        .values(metadata=sa.bindparam("b_metadata", type_=JSON)),
        metadata,
    )
    renamed = [
        (c.pk, plans[pk][2][c.candidate_key])
        for pk in kept
        for c in cands[pk]
        if c.candidate_key in plans[pk][2]
    ]
    _run(
        conn,
        _by_pk(CANDIDATES, candidate_key=""),
        [{"b_pk": c, "b_candidate_key": f"~0005~{c}"} for c, _ in renamed],
    )
    _run(
        conn,
        _by_pk(CANDIDATES, candidate_key=""),
        [{"b_pk": c, "b_candidate_key": key} for c, key in renamed],
    )


def _move_judgments(
    conn: sa.Connection,
    project_pk: int,
    plans: dict[int, Any],
    survivor: dict[int, int],
    touched: set[int],
) -> None:
    if not touched:
        return
    raters = dict(
        conn.execute(
            sa.select(RATERS.c.pk, RATERS.c.rater_key).where(RATERS.c.project_pk == project_pk)
        ).all()
    )
    targets = {survivor[pk] for pk in touched}
    rows, hashes = [], defaultdict(set)
    for j in conn.execute(_of_project(JUDGMENTS, project_pk).order_by(JUDGMENTS.c.pk)):
        if j.item_pk in touched:
            rows.append(j)
        elif j.item_pk in targets:
            hashes[j.item_pk].add(j.content_hash)
    updates = []
    for j in rows:
        key, _, remap = plans[j.item_pk]
        target = survivor[j.item_pk]
        body = _rename(j.body, remap)
        if j.kind == "pairwise":
            body = _imported_order(j, body)
        values: dict[str, Any] = {
            "b_pk": j.pk,
            "b_item_pk": target,
            "b_body": body,
            "b_shown_order": body["shown_order"]
            if j.kind == "pairwise"
            else _rename(j.shown_order, remap),
            "b_pair_lo": j.pair_lo,
            "b_pair_hi": j.pair_hi,
            "b_score": j.score,
            "b_excluded": j.excluded,
            "b_exclusion_reason": j.exclusion_reason,
        }
        if j.kind == "pairwise":
            values["b_pair_lo"], values["b_pair_hi"], values["b_score"] = _canonical_pair(body)
        digest = _judgment_hash(j, body, key, raters[j.rater_pk])
        if digest in hashes[target]:
            # the same judgment twice once the items are one: kept, but not counted twice
            values["b_excluded"] = True
            values["b_exclusion_reason"] = (
                f"duplicate after the item merge of migration 0005 "
                f"(same rater, same verdict; was content hash {j.content_hash})"
            )
            digest = hashlib.sha256(f"{digest}:duplicate:{j.pk}".encode()).hexdigest()
        hashes[target].add(digest)
        values["b_content_hash"] = digest
        updates.append(values)
    # a temporary hash first: the (item, content hash) index must not see two rows at once
    _run(
        conn,
        _by_pk(JUDGMENTS, content_hash=""),
        [{"b_pk": v["b_pk"], "b_content_hash": f"~0005~{v['b_pk']}"} for v in updates],
    )
    columns = [k[2:] for k in updates[0] if k != "b_pk"] if updates else []
    statement = (
        sa.update(JUDGMENTS)
        .where(JUDGMENTS.c.pk == sa.bindparam("b_pk"))
        .values({c: sa.bindparam(f"b_{c}", type_=JUDGMENTS.c[c].type) for c in columns})
    )
    _run(conn, statement, updates)


def _move_server_rows(
    conn: sa.Connection, project_pk: int, plans: dict[int, Any], survivor: dict[int, int]
) -> None:
    """Pool entries, pool domains, assignments and gold outcomes of merged items follow them."""
    moved = {pk for pk, target in survivor.items() if pk != target}
    assignments = conn.execute(_of_project(ASSIGNMENTS, project_pk)).all()
    _run(
        conn,
        sa.update(ASSIGNMENTS)
        .where(ASSIGNMENTS.c.pk == sa.bindparam("b_pk"))
        .values(shown_order=sa.bindparam("b_shown_order", type_=JSON)),
        [
            {"b_pk": a.pk, "b_shown_order": _rename(a.shown_order, plans[a.item_pk][2])}
            for a in assignments
            if plans[a.item_pk][2]
        ],
    )
    if not moved:
        return
    pool = {r.item_pk: r for r in conn.execute(_of_project(POOL, project_pk))}
    sums: dict[int, tuple[int, int]] = {}
    for victim in sorted(moved & pool.keys()):
        target = survivor[victim]
        base = sums.get(target) or (
            (pool[target].filled, pool[target].target) if target in pool else None
        )
        if base is None:  # the target had no entry: the victim's becomes its entry
            sums[target] = (pool[victim].filled, pool[victim].target)
            pool[target] = pool[victim]
            continue
        sums[target] = (base[0] + pool[victim].filled, max(base[1], pool[victim].target))
    delete_pool = [
        {"b_pk": pool[v].pk} for v in moved & pool.keys() if pool[survivor[v]].pk != pool[v].pk
    ]
    _run(conn, sa.delete(POOL).where(POOL.c.pk == sa.bindparam("b_pk")), delete_pool)
    _run(
        conn,
        _by_pk(POOL, item_pk="", filled="", target=""),
        [
            {"b_pk": pool[t].pk, "b_item_pk": t, "b_filled": f, "b_target": n}
            for t, (f, n) in sums.items()
        ],
    )
    domains: defaultdict[int, set[str]] = defaultdict(set)
    stale, repoint = [], []
    for d in sorted(
        conn.execute(_of_project(POOL_DOMAINS, project_pk)),
        key=lambda d: (d.item_pk in moved, d.pk),
    ):
        target = survivor[d.item_pk]
        if d.domain in domains[target]:
            stale.append({"b_pk": d.pk})
        else:
            domains[target].add(d.domain)
            if target != d.item_pk:
                repoint.append({"b_pk": d.pk, "b_item_pk": target})
    _run(conn, sa.delete(POOL_DOMAINS).where(POOL_DOMAINS.c.pk == sa.bindparam("b_pk")), stale)
    _run(conn, _by_pk(POOL_DOMAINS, item_pk=""), repoint)
    users: defaultdict[int, set[int]] = defaultdict(set)
    stale, repoint = [], []
    # a rater leased both halves: the lease of the merged-away half goes (its judgment stays)
    for a in sorted(assignments, key=lambda a: (a.item_pk in moved, a.pk)):
        target = survivor[a.item_pk]
        if a.user_pk in users[target]:
            stale.append({"b_pk": a.pk})
        else:
            users[target].add(a.user_pk)
            if target != a.item_pk:
                repoint.append({"b_pk": a.pk, "b_item_pk": target})
    _run(conn, sa.delete(ASSIGNMENTS).where(ASSIGNMENTS.c.pk == sa.bindparam("b_pk")), stale)
    _run(conn, _by_pk(ASSIGNMENTS, item_pk=""), repoint)
    _run(
        conn,
        _by_pk(GOLD_OUTCOMES, item_pk=""),
        [
            {"b_pk": g.pk, "b_item_pk": survivor[g.item_pk]}
            for g in conn.execute(_of_project(GOLD_OUTCOMES, project_pk))
            if g.item_pk in moved
        ],
    )


def upgrade() -> None:
    conn = op.get_bind()
    for project_pk in conn.execute(sa.text("SELECT pk FROM projects ORDER BY pk")).scalars():
        _merge_project(conn, project_pk)


def downgrade() -> None:
    """Nothing to undo in the schema; merged items stay merged (the split was the bug)."""
