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

ITEMS = sa.table("items", sa.column("pk"), sa.column("project_pk"), sa.column("item_key"), sa.column("content_hash"),
                 sa.column("prompt", JSON), sa.column("domains", JSON), sa.column("reference"),
                 sa.column("gold", JSON), sa.column("metadata", JSON))
CANDIDATES = sa.table("candidates", sa.column("pk"), sa.column("item_pk"), sa.column("candidate_key"),
                      sa.column("position"), sa.column("text"), sa.column("messages", JSON))
JUDGMENTS = sa.table("judgments", sa.column("pk"), sa.column("item_pk"), sa.column("rater_pk"), sa.column("kind"),
                     sa.column("body", JSON), sa.column("rationale"), sa.column("pair_lo"), sa.column("pair_hi"),
                     sa.column("score"), sa.column("shown_order", JSON), sa.column("rubric_key"),
                     sa.column("rubric_version"), sa.column("review_pass"), sa.column("source"),
                     sa.column("started_at", TZ), sa.column("submitted_at", TZ), sa.column("telemetry", JSON),
                     sa.column("idempotency_key"), sa.column("content_hash"), sa.column("excluded"),
                     sa.column("exclusion_reason"), sa.column("batch_pk"))
RATERS = sa.table("raters", sa.column("pk"), sa.column("rater_key"))
POOL = sa.table("task_pool", sa.column("pk"), sa.column("item_pk"), sa.column("target"), sa.column("filled"))
POOL_DOMAINS = sa.table("task_pool_domains", sa.column("pk"), sa.column("item_pk"), sa.column("domain"))
ASSIGNMENTS = sa.table("assignments", sa.column("pk"), sa.column("item_pk"), sa.column("user_pk"),
                       sa.column("shown_order", JSON))
GOLD_OUTCOMES = sa.table("gold_outcomes", sa.column("pk"), sa.column("item_pk"))


def _old_prompt(prompt: Any) -> list[Any]:
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt


def _body(c: Any) -> Any:
    return c.text if c.messages is None else c.messages


def _plan_item(item: Any, cands: list[Any]) -> tuple[str, str, dict[str, str]]:
    """``(new key, new content hash, {old candidate key: new})`` of one item."""
    old_derived = item.item_key == content_hash(
        {"prompt": _old_prompt(item.prompt), "candidates": [[c.candidate_key, _body(c)] for c in cands]},
        prefix="itm_", length=16)
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
    dump = {"prompt": item.prompt, "candidates": [{"id": i, "text": b if isinstance(b, str) else None,
                                                   "messages": None if isinstance(b, str) else b} for i, b in ids],
            "domains": item.domains or [], "reference": item.reference, "gold": item.gold}
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
    prov = {"rater_id": rater, "rubric_id": j.rubric_key, "rubric_version": j.rubric_version,
            "review_pass": j.review_pass, "source": j.source, "started_at": as_utc(j.started_at),
            "submitted_at": as_utc(j.submitted_at), "telemetry": j.telemetry, "idempotency_key": j.idempotency_key}
    data = {**body, "kind": j.kind, "item_id": key, "rationale": j.rationale,
            "provenance": {k: v for k, v in prov.items() if v is not None}}
    return judgment_rows(parse_judgment(data)).content_hash


def _merge_project(conn: sa.Connection, project_pk: int) -> None:
    items = {r.pk: r for r in conn.execute(sa.select(ITEMS).where(ITEMS.c.project_pk == project_pk))}
    if not items:
        return
    cands: dict[int, list[Any]] = defaultdict(list)
    for c in conn.execute(sa.select(CANDIDATES).join(ITEMS, ITEMS.c.pk == CANDIDATES.c.item_pk)
                          .where(ITEMS.c.project_pk == project_pk).order_by(CANDIDATES.c.item_pk,
                                                                            CANDIDATES.c.position)):
        cands[c.item_pk].append(c)
    plans = {pk: _plan_item(item, cands[pk]) for pk, item in items.items()}
    groups: dict[str, list[int]] = defaultdict(list)
    for pk in sorted(items):
        groups[plans[pk][0]].append(pk)
    survivor = {pk: group[0] for group in groups.values() for pk in group}
    touched = {pk for pk, (key, _, remap) in plans.items()
               if key != items[pk].item_key or remap or survivor[pk] != pk}
    _move_judgments(conn, plans, survivor, touched)
    _move_server_rows(conn, plans, survivor)
    victims = [pk for pk in sorted(items) if survivor[pk] != pk]
    merged: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for pk in victims:
        merged[survivor[pk]].append({"item_key": items[pk].item_key, "metadata": items[pk].metadata or {}})
    if victims:
        conn.execute(sa.delete(CANDIDATES).where(CANDIDATES.c.item_pk.in_(victims)))
        conn.execute(sa.delete(ITEMS).where(ITEMS.c.pk.in_(victims)))
    kept = [pk for pk in sorted(items) if survivor[pk] == pk]
    # two steps, so a new key never meets an old one on the unique (project, key) index
    for pk in kept:
        if plans[pk][0] != items[pk].item_key:
            conn.execute(sa.update(ITEMS).where(ITEMS.c.pk == pk).values(item_key=f"~0005~{pk}"))
    for pk in kept:
        key, digest, remap = plans[pk]
        values: dict[str, Any] = {"item_key": key, "content_hash": digest}
        if merged[pk]:
            meta = items[pk].metadata or {}
            values["metadata"] = {**meta, "merged_items": [*meta.get("merged_items", []), *merged[pk]]}
        conn.execute(sa.update(ITEMS).where(ITEMS.c.pk == pk).values(**values))
        for c in cands[pk]:
            if c.candidate_key in remap:
                conn.execute(sa.update(CANDIDATES).where(CANDIDATES.c.pk == c.pk)
                             .values(candidate_key=f"~0005~{c.pk}"))
        for c in cands[pk]:
            if c.candidate_key in remap:
                conn.execute(sa.update(CANDIDATES).where(CANDIDATES.c.pk == c.pk)
                             .values(candidate_key=remap[c.candidate_key]))


def _move_judgments(conn: sa.Connection, plans: dict[int, Any], survivor: dict[int, int],
                    touched: set[int]) -> None:
    if not touched:
        return
    raters = dict(conn.execute(sa.select(RATERS.c.pk, RATERS.c.rater_key)).all())
    rows = conn.execute(sa.select(JUDGMENTS).where(JUDGMENTS.c.item_pk.in_(sorted(touched)))
                        .order_by(JUDGMENTS.c.pk)).all()
    targets = {survivor[pk] for pk in touched}
    hashes: dict[int, set[str]] = defaultdict(set)
    for pk, digest in conn.execute(sa.select(JUDGMENTS.c.item_pk, JUDGMENTS.c.content_hash)
                                   .where(JUDGMENTS.c.item_pk.in_(sorted(targets - touched)))):
        hashes[pk].add(digest)
    updates = []
    for j in rows:
        key, _, remap = plans[j.item_pk]
        target = survivor[j.item_pk]
        body = _rename(j.body, remap)
        if j.kind == "pairwise":
            body = _imported_order(j, body)
        values: dict[str, Any] = {"pk": j.pk, "item_pk": target, "body": body,
                                  "shown_order": body["shown_order"] if j.kind == "pairwise"
                                  else _rename(j.shown_order, remap),
                                  "pair_lo": j.pair_lo, "pair_hi": j.pair_hi, "score": j.score,
                                  "excluded": j.excluded, "exclusion_reason": j.exclusion_reason}
        if j.kind == "pairwise":
            values["pair_lo"], values["pair_hi"], values["score"] = _canonical_pair(body)
        digest = _judgment_hash(j, body, key, raters[j.rater_pk])
        if digest in hashes[target]:
            # the same judgment twice once the items are one: kept, but not counted twice
            values["excluded"] = True
            values["exclusion_reason"] = (f"duplicate after the item merge of migration 0005 "
                                          f"(same rater, same verdict; was content hash {j.content_hash})")
            digest = hashlib.sha256(f"{digest}:duplicate:{j.pk}".encode()).hexdigest()
        hashes[target].add(digest)
        values["content_hash"] = digest
        updates.append(values)
    # a temporary hash first: the (item, content hash) index must not see two rows at once
    for v in updates:
        conn.execute(sa.update(JUDGMENTS).where(JUDGMENTS.c.pk == v["pk"]).values(content_hash=f"~0005~{v['pk']}"))
    for v in updates:
        conn.execute(sa.update(JUDGMENTS).where(JUDGMENTS.c.pk == v["pk"])
                     .values(**{k: val for k, val in v.items() if k != "pk"}))


def _move_server_rows(conn: sa.Connection, plans: dict[int, Any], survivor: dict[int, int]) -> None:
    """Pool entries, pool domains, assignments and gold outcomes of merged items follow them."""
    for pk, (_, _, remap) in plans.items():
        if remap:
            for a in conn.execute(sa.select(ASSIGNMENTS.c.pk, ASSIGNMENTS.c.shown_order)
                                  .where(ASSIGNMENTS.c.item_pk == pk)):
                conn.execute(sa.update(ASSIGNMENTS).where(ASSIGNMENTS.c.pk == a.pk)
                             .values(shown_order=_rename(a.shown_order, remap)))
    for victim, target in sorted(survivor.items()):
        if victim == target:
            continue
        pool = {r.item_pk: r for r in conn.execute(sa.select(POOL).where(POOL.c.item_pk.in_([victim, target])))}
        if victim in pool and target in pool:
            conn.execute(sa.update(POOL).where(POOL.c.pk == pool[target].pk).values(
                filled=pool[target].filled + pool[victim].filled,
                target=max(pool[target].target, pool[victim].target)))
            conn.execute(sa.delete(POOL).where(POOL.c.pk == pool[victim].pk))
        elif victim in pool:
            conn.execute(sa.update(POOL).where(POOL.c.pk == pool[victim].pk).values(item_pk=target))
        have = set(conn.execute(sa.select(POOL_DOMAINS.c.domain).where(POOL_DOMAINS.c.item_pk == target)).scalars())
        conn.execute(sa.delete(POOL_DOMAINS).where(POOL_DOMAINS.c.item_pk == victim,
                                                   POOL_DOMAINS.c.domain.in_(sorted(have))))
        conn.execute(sa.update(POOL_DOMAINS).where(POOL_DOMAINS.c.item_pk == victim).values(item_pk=target))
        users = set(conn.execute(sa.select(ASSIGNMENTS.c.user_pk).where(ASSIGNMENTS.c.item_pk == target)).scalars())
        # a rater leased both halves: the lease of the merged-away half goes (its judgment stays)
        conn.execute(sa.delete(ASSIGNMENTS).where(ASSIGNMENTS.c.item_pk == victim,
                                                  ASSIGNMENTS.c.user_pk.in_(sorted(users))))
        conn.execute(sa.update(ASSIGNMENTS).where(ASSIGNMENTS.c.item_pk == victim).values(item_pk=target))
        conn.execute(sa.update(GOLD_OUTCOMES).where(GOLD_OUTCOMES.c.item_pk == victim).values(item_pk=target))


def upgrade() -> None:
    conn = op.get_bind()
    for project_pk in conn.execute(sa.text("SELECT pk FROM projects ORDER BY pk")).scalars():
        _merge_project(conn, project_pk)


def downgrade() -> None:
    """Nothing to undo in the schema; merged items stay merged (the split was the bug)."""
