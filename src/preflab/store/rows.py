"""Column values of items, candidates and judgments, built once and shared.

:mod:`preflab.store.repo` turns them into ORM rows (single inserts: the server) and
:mod:`preflab.io.importer` into bulk ``executemany`` batches, so both write byte-identical rows
and compute identical content hashes.

Two ways in: from the pydantic wire models (:func:`item_rows`, :func:`judgment_rows`: every
shape, full validation) and a fast path for the hot shapes of a bulk import
(:func:`text_item_rows`, :func:`pairwise_rows`: plain-text items, pairwise judgments) that skips
pydantic but produces exactly what the slow path would (a property test holds them equal).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..schema import Item, JudgmentBase, content_hash, dump_judgment

_BODY_EXCLUDE = {"item_id", "rationale", "provenance"}
_SOURCES = ("human", "ai", "ai_assisted")


def as_utc(value: datetime | None) -> datetime | None:
    """Aware UTC datetimes in and out (SQLite returns naive ones; naive input is taken as UTC)."""
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


@dataclass(slots=True)
class ItemRows:
    """An item's column values (ORM attribute names) and its candidates'."""

    key: str
    content_hash: str
    #: ``ItemRow`` attributes except ``pk``, ``project_pk``, ``batch_pk``, ``created_at``.
    values: dict[str, Any]
    #: ``CandidateRow`` attributes except ``pk`` and ``item_pk``, in position order.
    candidates: list[dict[str, Any]]

    @property
    def candidate_keys(self) -> list[str]:
        return [c["candidate_key"] for c in self.candidates]


@dataclass(slots=True)
class JudgmentRows:
    """A judgment's column values, plus what the importer needs to check it."""

    item_key: str
    rater_key: str
    kind: str
    content_hash: str
    idempotency_key: str | None
    candidate_ids: list[str]
    #: ``JudgmentRow`` attributes except ``pk``, ``project_pk``, ``item_pk``, ``rater_pk``,
    #: ``batch_pk``, ``created_at``.
    values: dict[str, Any]
    #: Rubric judgments: ``(rubric_key, rubric_version, scores, vetoes_failed)``.
    rubric: tuple[str, int | None, dict[str, float], list[str]] | None = field(default=None)


# -- items ------------------------------------------------------------------------------


def _item_rows_from_dump(data: dict[str, Any]) -> ItemRows:
    digest = content_hash({k: v for k, v in data.items() if k != "id"}, length=64)
    return ItemRows(
        key=data["id"],
        content_hash=digest,
        values={
            "item_key": data["id"],
            "content_hash": digest,
            "prompt": data["prompt"],
            "domains": data["domains"],
            "reference": data["reference"],
            "gold": data["gold"],
            "meta": data["metadata"],
        },
        candidates=[
            {
                "candidate_key": c["id"],
                "position": i,
                "text": c["text"],
                "messages": c["messages"],
                "model": c["model"],
                "source": c["source"],
                "meta": c["metadata"],
            }
            for i, c in enumerate(data["candidates"])
        ],
    )


def item_rows(item: Item) -> ItemRows:
    """Rows of a validated :class:`~preflab.schema.Item` (its hash equals ``item.content_hash()``)."""
    return _item_rows_from_dump(item.model_dump(mode="json"))


def check_identifier(value: Any, where: str) -> str:
    """The wire models' ``Identifier`` rule (a string, stripped, 1-200 characters) without pydantic."""
    if not isinstance(value, str):
        raise ValueError(f"{where}: expected a string, got {type(value).__name__}")
    value = value.strip()
    if not 1 <= len(value) <= 200:
        raise ValueError(f"{where}: an id needs 1-200 characters, got {len(value)}")
    return value


def text_item_rows(
    prompt: str,
    candidates: list[tuple[str | None, str, str | None]],
    metadata: dict[str, Any] | None = None,
    item_id: str | None = None,
) -> ItemRows:
    """Fast path for ``Item(prompt=<str>, candidates=[{id?, text, model?}, ...], metadata=...)``.

    ``candidates`` are ``(id or None, text, model or None)``; ids must already satisfy
    :func:`check_identifier`. Raises ``ValueError`` where the model would (duplicate candidate ids).
    """
    cands = [
        {
            "id": content_hash(text, prefix="cand_", length=12) if cid is None else cid,
            "text": text,
            "messages": None,
            "model": model,
            "source": "model",
            "metadata": {},
        }
        for cid, text, model in candidates
    ]
    ids = [c["id"] for c in cands]
    if len(set(ids)) != len(ids):
        raise ValueError(f"candidate ids must be unique within an item, got {ids}")
    if item_id is None:
        key = {"prompt": [{"role": "user", "content": prompt}], "candidates": [[c["id"], c["text"]] for c in cands]}
        item_id = content_hash(key, prefix="itm_", length=16)
    metadata = metadata or {}
    digest = content_hash(
        {"prompt": prompt, "candidates": cands, "domains": [], "reference": None, "gold": None, "metadata": metadata},
        length=64,
    )
    return ItemRows(
        key=item_id,
        content_hash=digest,
        values={
            "item_key": item_id,
            "content_hash": digest,
            "prompt": prompt,
            "domains": [],
            "reference": None,
            "gold": None,
            "meta": metadata,
        },
        candidates=[
            {
                "candidate_key": c["id"],
                "position": i,
                "text": c["text"],
                "messages": None,
                "model": c["model"],
                "source": "model",
                "meta": {},
            }
            for i, c in enumerate(cands)
        ],
    )


# -- judgments ----------------------------------------------------------------------------


def _judgment_rows_from_dump(
    data: dict[str, Any],
    *,
    candidate_ids: list[str],
    started_at: datetime | None = None,
    submitted_at: datetime | None = None,
) -> JudgmentRows:
    prov = data["provenance"]
    hashed = {**data, "provenance": {k: v for k, v in prov.items() if k not in ("idempotency_key", "rater_hash")}}
    digest = content_hash(hashed, length=64)
    kind = data["kind"]
    values: dict[str, Any] = {
        "kind": kind,
        "body": {k: v for k, v in data.items() if k not in _BODY_EXCLUDE},
        "rationale": data.get("rationale"),
        "pair_lo": None,
        "pair_hi": None,
        "score": None,
        "shown_order": None,
        "rubric_key": prov.get("rubric_id"),
        "rubric_version": prov.get("rubric_version"),
        "review_pass": int(prov.get("review_pass", 0)),
        "source": prov.get("source", "human"),
        "started_at": as_utc(started_at),
        "submitted_at": as_utc(submitted_at),
        "telemetry": prov.get("telemetry"),
        "idempotency_key": prov.get("idempotency_key"),
        "content_hash": digest,
    }
    rubric = None
    if kind == "pairwise":
        a, b = data["shown_order"]
        lo, hi = sorted((a, b))
        winner = data["winner"]
        if winner == "tie":
            score = 0
        else:
            chosen = a if winner == "a" else b
            score = -data["strength"] if chosen == lo else data["strength"]
        values.update(pair_lo=lo, pair_hi=hi, score=score, shown_order=[a, b])
    elif kind == "rubric" and prov.get("rubric_id"):
        rubric = (prov["rubric_id"], prov.get("rubric_version"), data["scores"], data.get("vetoes_failed", []))
    return JudgmentRows(
        item_key=data["item_id"],
        rater_key=prov["rater_id"],
        kind=kind,
        content_hash=digest,
        idempotency_key=prov.get("idempotency_key"),
        candidate_ids=candidate_ids,
        values=values,
        rubric=rubric,
    )


def judgment_rows(judgment: JudgmentBase) -> JudgmentRows:
    """Rows of a validated judgment (its hash equals ``repo.judgment_content_hash``)."""
    prov = judgment.provenance
    if prov.started_at is not None or prov.submitted_at is not None:
        # Hash the UTC form: the same instant written with another offset (or read back from
        # SQLite, which keeps no offset) is the same judgment.
        prov = prov.model_copy(update={"started_at": as_utc(prov.started_at), "submitted_at": as_utc(prov.submitted_at)})
        judgment = judgment.model_copy(update={"provenance": prov})
    return _judgment_rows_from_dump(
        dump_judgment(judgment),
        candidate_ids=judgment.candidate_ids(),
        started_at=prov.started_at,
        submitted_at=prov.submitted_at,
    )


def pairwise_rows(
    item_key: str,
    shown_order: tuple[str, str],
    winner: str,
    strength: int,
    rater_id: str,
    source: str = "human",
    rationale: str | None = None,
) -> JudgmentRows:
    """Fast path for ``PairwiseJudgment(item_id, shown_order, winner, strength, provenance={rater_id, source})``.

    The arguments must already be valid (ids per :func:`check_identifier`); the cheap
    consistency rules of the model are checked here and raise ``ValueError``.
    """
    if shown_order[0] == shown_order[1]:
        raise ValueError("shown_order must name two different candidates")
    if winner not in ("a", "b", "tie") or not (isinstance(strength, int) and 0 <= strength <= 3):
        raise ValueError(f"winner {winner!r} / strength {strength!r} out of range")
    if (winner == "tie") != (strength == 0):
        raise ValueError("winner 'tie' goes with strength 0, and strength 0 with 'tie'")
    if rationale is not None and len(rationale) > 20_000:
        raise ValueError("rationale: at most 20,000 characters")
    if source not in _SOURCES:
        raise ValueError(f"source must be one of {list(_SOURCES)}, got {source!r}")
    a, b = shown_order
    hashed: dict[str, Any] = {
        "item_id": item_key,
        "provenance": {"rater_id": rater_id, "review_pass": 0, "source": source},
        "kind": "pairwise",
        "shown_order": [a, b],
        "winner": winner,
        "strength": strength,
    }
    if rationale is not None:
        hashed["rationale"] = rationale
    digest = content_hash(hashed, length=64)
    if winner == "tie":
        score = 0
    else:
        chosen = a if winner == "a" else b
        score = -strength if chosen == min(a, b) else strength
    return JudgmentRows(
        item_key=item_key,
        rater_key=rater_id,
        kind="pairwise",
        content_hash=digest,
        idempotency_key=None,
        candidate_ids=[a, b],
        values={
            "kind": "pairwise",
            "body": {"kind": "pairwise", "shown_order": [a, b], "winner": winner, "strength": strength},
            "rationale": rationale,
            "pair_lo": min(a, b),
            "pair_hi": max(a, b),
            "score": score,
            "shown_order": [a, b],
            "rubric_key": None,
            "rubric_version": None,
            "review_pass": 0,
            "source": source,
            "started_at": None,
            "submitted_at": None,
            "telemetry": None,
            "idempotency_key": None,
            "content_hash": digest,
        },
    )
