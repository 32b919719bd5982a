"""A judgment's content hash, and a pairwise judgment's canonical form: the one rule.

Every writer (the importer's three row builders in :mod:`preflab.store.rows`, the server) stores
a pairwise judgment in canonical candidate order (sorted ids: ``pair_lo``, ``pair_hi``) with a
signed strength ``score`` (negative: the first of the sorted pair better, 0: a tie, ``None``: the
strength is unknown), and identifies any judgment by the SHA-256 of its wire form's canonical
JSON without what does not make it another judgment (:data:`UNHASHED_PROVENANCE`).

The hashes are stored in databases (``judgments.content_hash``, unique per item) and make
imports idempotent: the fields they cover are frozen (``tests/schema/test_pairwise_hash.py``);
changing them needs a migration that rehashes every stored judgment.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from .common import content_hash

#: Provenance fields left out of a judgment's content hash: the idempotency key names a
#: delivery, not a judgment, and the rater hash is derived from the rater id (already hashed).
UNHASHED_PROVENANCE = frozenset({"idempotency_key", "rater_hash"})

#: The top-level fields of a pairwise judgment's wire form, all covered by its content hash
#: (``rationale``, ``strength`` and ``spans`` only when present; ``provenance`` less
#: UNHASHED_PROVENANCE). ``spans`` (critique spans) came later: a judgment without spans leaves
#: them out of its wire form, so its hash is what it always was and no stored hash changes.
PAIRWISE_HASHED_FIELDS = frozenset(
    {"item_id", "kind", "shown_order", "winner", "strength", "rationale", "provenance", "spans"}
)


def hashed_form(dump: dict[str, Any]) -> dict[str, Any]:
    """What a judgment's content hash covers: its wire form (``dump_judgment``) without
    :data:`UNHASHED_PROVENANCE`."""
    prov = dump["provenance"]
    return {
        **dump,
        "provenance": {k: v for k, v in prov.items() if k not in UNHASHED_PROVENANCE},
    }


def judgment_content_hash(hashed: dict[str, Any]) -> str:
    """The content hash of a judgment's :func:`hashed_form` (64 hex digits)."""
    return content_hash(hashed, length=64)


def pairwise_hashed(
    item_id: str,
    shown_order: tuple[str, str] | list[str],
    winner: str,
    strength: int | None,
    provenance: dict[str, Any],
    rationale: str | None = None,
) -> dict[str, Any]:
    """The :func:`hashed_form` of a pairwise judgment from its parts (``provenance`` already
    without :data:`UNHASHED_PROVENANCE`): what the wire form holds, an unknown strength and a
    missing rationale left out as ``dump_judgment`` leaves them out."""
    hashed: dict[str, Any] = {
        "item_id": item_id,
        "provenance": provenance,
        "kind": "pairwise",
        "shown_order": [shown_order[0], shown_order[1]],
        "winner": winner,
    }
    if strength is not None:
        hashed["strength"] = strength
    if rationale is not None:
        hashed["rationale"] = rationale
    return hashed


@dataclass(frozen=True, slots=True)
class CanonicalPair:
    """A pairwise judgment as stored: the candidates in sorted order and the signed strength."""

    lo: str
    hi: str
    #: negative: ``lo`` better; 0: a tie; ``None``: better by an unknown amount (see the body)
    score: int | None


def canonical_pair(a: str, b: str, winner: str, strength: int | None) -> CanonicalPair:
    """The stored form of "``a`` and ``b`` shown in that order, ``winner`` (``a``/``b``/``tie``)
    better by ``strength``"."""
    lo, hi = (a, b) if a < b else (b, a)
    if winner == "tie":
        return CanonicalPair(lo, hi, 0)
    if strength is None:
        return CanonicalPair(lo, hi, None)
    chosen = a if winner == "a" else b
    return CanonicalPair(lo, hi, -strength if chosen == lo else strength)


def pairwise_body(a: str, b: str, winner: str, strength: int | None) -> dict[str, Any]:
    """The ``body`` column of a pairwise judgment (an unknown strength left out)."""
    body: dict[str, Any] = {"kind": "pairwise", "shown_order": [a, b], "winner": winner}
    if strength is not None:
        body["strength"] = strength
    return body


def pairwise_body_json(a: str, b: str, winner: str, strength: int | None) -> str:
    """:func:`pairwise_body` as ``orjson.dumps`` writes it, for ids that need no JSON escaping
    (the importer's derived ``cand_`` ids)."""
    return f'{{"kind":"pairwise","shown_order":["{a}","{b}"],"winner":"{winner}"{_json_strength(strength)}}}'


def plain_pair_content_hash(
    item_key: bytes,
    rater_json: bytes,
    source: bytes,
    lo: bytes,
    hi: bytes,
    winner: bytes,
    strength: int | None,
) -> str:
    """:func:`judgment_content_hash` of :func:`pairwise_hashed` for an imported comparison shown
    in sorted order (``provenance = {rater_id, review_pass: 0, source}``, no rationale),
    assembled from bytes: the importer's hot path (a test holds the two equal). ``rater_json``
    is the rater id's JSON; the other values need no escaping (derived ids, a source name)."""
    return hashlib.sha256(
        b'{"item_id":"%s","kind":"pairwise","provenance":{"rater_id":%s,"review_pass":0,"source":"%s"},'
        b'"shown_order":["%s","%s"]%s,"winner":"%s"}'
        % (item_key, rater_json, source, lo, hi, _json_strength(strength).encode(), winner)
    ).hexdigest()


def _json_strength(strength: int | None) -> str:
    """``,"strength":N`` as the canonical JSON has it; nothing for an unknown strength."""
    return "" if strength is None else f',"strength":{strength}'
