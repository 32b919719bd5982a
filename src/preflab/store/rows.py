"""Column values of items, candidates and judgments, built once and shared.

:mod:`preflab.store.repo` turns them into ORM rows (single inserts: the server) and
:mod:`preflab.io.importer` into bulk ``executemany`` batches, so both write byte-identical rows
and compute identical content hashes.

Three ways in: from the pydantic wire models (:func:`item_rows`, :func:`judgment_rows`: every
shape, full validation); a fast path for the hot shapes of a bulk import
(:func:`text_item_rows`, :func:`pairwise_rows`: plain-text items, pairwise judgments) that skips
pydantic but produces exactly what the slow path would (a property test holds them equal); and
the leanest, :func:`pair_rows`, for the commonest record of all (a plain-text comparison: one
item with two candidates and one pairwise judgment), which builds no dicts at all (property
tests hold it equal to the other two).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from ..schema import Item, JudgmentBase, content_hash, dump_judgment
from ..schema.identity import candidate_key, item_content, item_key, normal_text
from ..schema.pairwise import (
    canonical_pair,
    hashed_form,
    judgment_content_hash,
    pairwise_body,
    pairwise_body_json,
    pairwise_hashed,
    plain_pair_content_hash,
)

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
    #: :func:`pair_key`'s answer once asked: ``(key or None, own candidate ids)``.
    pair: tuple[str | None, bool] | None = field(default=None, compare=False, repr=False)

    @property
    def candidate_keys(self) -> list[str]:
        return [c["candidate_key"] for c in self.candidates]


def pair_key(item: ItemRows) -> tuple[str | None, bool]:
    """The key the item's prompt and answers get in the shape without ids (a TRL row, a pair to
    label: :func:`~preflab.schema.identity.item_key` over the derived candidate ids), ``None``
    when that is the item's own key; and whether its candidates have ids of their own (not the
    derived ones).

    The importer keeps the key of an item with its own candidate ids as an alias of the item, so
    records of the same pair without them find it whichever comes first, and are refused
    (``docs/item-identity.md``)."""
    if item.pair is None:
        bodies = [c["text"] if c["text"] is not None else c["messages"] for c in item.candidates]
        derived = [candidate_key(b) for b in bodies]
        key = item_key(item.values["prompt"], zip(derived, bodies, strict=True))
        item.pair = (None if key == item.key else key, derived != item.candidate_keys)
    return item.pair


def derived_candidate_keys(item: ItemRows) -> set[str]:
    """The ids its candidates get without ids of their own."""
    return {
        candidate_key(c["text"] if c["text"] is not None else c["messages"])
        for c in item.candidates
    }


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
    #: What ``content_hash`` hashes (it names the item): :func:`rekeyed` recomputes it for another id.
    hashed: dict[str, Any] | None = field(default=None, compare=False, repr=False)


# -- items ------------------------------------------------------------------------------


def _item_rows_from_dump(data: dict[str, Any]) -> ItemRows:
    digest = content_hash(item_content(data), length=64)
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
    stripped = value.strip()
    if not 1 <= len(stripped) <= 200:
        raise ValueError(f"{where}: an id needs 1-200 characters, got {len(stripped)}")
    return stripped


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
    cands: list[dict[str, Any]] = [
        {
            "id": candidate_key(text) if cid is None else cid,
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
        item_id = item_key(prompt, [(c["id"], c["text"]) for c in cands])
    metadata = metadata or {}
    digest = content_hash(
        item_content(
            {"prompt": prompt, "candidates": cands, "domains": [], "reference": None, "gold": None}
        ),
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
    hashed = hashed_form(data)
    digest = judgment_content_hash(hashed)
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
        "guideline_version": prov.get("guideline_version"),
        "review_pass": int(prov.get("review_pass", 0)),
        "source": prov.get("source", "human"),
        "started_at": as_utc(started_at),
        "submitted_at": as_utc(submitted_at),
        "telemetry": prov.get("telemetry"),
        "idempotency_key": prov.get("idempotency_key"),
        "content_hash": digest,
    }
    if prov.get("judge") is not None:  # only a model judge's labels carry one (0016)
        values["judge"] = prov["judge"]
    if prov.get("assisted_by") is not None:  # only ai_assisted labels carry one (0018)
        values["assisted_by"] = prov["assisted_by"]
    rubric = None
    if kind == "pairwise":
        a, b = data["shown_order"]
        pair = canonical_pair(a, b, data["winner"], data.get("strength"))
        values.update(pair_lo=pair.lo, pair_hi=pair.hi, score=pair.score, shown_order=[a, b])
    elif kind == "rubric" and prov.get("rubric_id"):
        rubric = (
            prov["rubric_id"],
            prov.get("rubric_version"),
            data["scores"],
            data.get("vetoes_failed", []),
        )
    return JudgmentRows(
        item_key=data["item_id"],
        rater_key=prov["rater_id"],
        kind=kind,
        content_hash=digest,
        idempotency_key=prov.get("idempotency_key"),
        candidate_ids=candidate_ids,
        values=values,
        rubric=rubric,
        hashed=hashed,
    )


def rekeyed(judgment: JudgmentRows, item_key: str) -> JudgmentRows:
    """The same judgment of the item stored as ``item_key`` (a record named it by another id).

    Its content hash covers the item's id, so it is computed with the stored one: importing the
    record again finds the judgment and adds nothing.
    """
    if judgment.hashed is None:
        raise ValueError("a judgment built without its hashed content cannot be re-keyed")
    hashed = {**judgment.hashed, "item_id": item_key}
    digest = judgment_content_hash(hashed)
    return dataclasses.replace(
        judgment,
        item_key=item_key,
        content_hash=digest,
        values={**judgment.values, "content_hash": digest},
        hashed=hashed,
    )


def judgment_rows(judgment: JudgmentBase) -> JudgmentRows:
    """Rows of a validated judgment (its hash equals ``repo.judgment_content_hash``)."""
    prov = judgment.provenance
    if prov.started_at is not None or prov.submitted_at is not None:
        # Hash the UTC form: the same instant written with another offset (or read back from
        # SQLite, which keeps no offset) is the same judgment.
        prov = prov.model_copy(
            update={
                "started_at": as_utc(prov.started_at),
                "submitted_at": as_utc(prov.submitted_at),
            }
        )
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
    strength: int | None,
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
    if winner not in ("a", "b", "tie") or not (
        strength is None or isinstance(strength, int) and 0 <= strength <= 3
    ):
        raise ValueError(f"winner {winner!r} / strength {strength!r} out of range")
    if winner == "tie" and strength is None:
        raise ValueError("a tie has strength 0 (a tie's strength is never unknown)")
    if strength is not None and (winner == "tie") != (strength == 0):
        raise ValueError("winner 'tie' goes with strength 0, and strength 0 with 'tie'")
    if rationale is not None and len(rationale) > 20_000:
        raise ValueError("rationale: at most 20,000 characters")
    if source not in _SOURCES:
        raise ValueError(f"source must be one of {list(_SOURCES)}, got {source!r}")
    a, b = shown_order
    hashed = pairwise_hashed(
        item_key,
        (a, b),
        winner,
        strength,
        {"rater_id": rater_id, "review_pass": 0, "source": source},
        rationale,
    )
    digest = judgment_content_hash(hashed)
    return JudgmentRows(
        item_key=item_key,
        rater_key=rater_id,
        kind="pairwise",
        content_hash=digest,
        idempotency_key=None,
        candidate_ids=[a, b],
        values=pairwise_judgment_values(
            a, b, winner, strength, rationale=rationale, source=source, content_hash=digest
        ),
        hashed=hashed,
    )


def pairwise_judgment_values(
    a: str,
    b: str,
    winner: str,
    strength: int | None,
    *,
    rationale: str | None,
    source: str,
    content_hash: str,
    rubric_key: str | None = None,
    rubric_version: int | None = None,
    guideline_version: int | None = None,
    started_at: Any = None,
    submitted_at: Any = None,
    telemetry: dict[str, Any] | None = None,
    idempotency_key: str | None = None,
) -> dict[str, Any]:
    """The ``judgments`` columns of a pairwise judgment shown as ``a`` then ``b`` (canonical
    pair, signed score, body), for the importer and the server's lane alike."""
    pair = canonical_pair(a, b, winner, strength)
    return {
        "kind": "pairwise",
        "body": pairwise_body(a, b, winner, strength),
        "rationale": rationale,
        "pair_lo": pair.lo,
        "pair_hi": pair.hi,
        "score": pair.score,
        "shown_order": [a, b],
        "rubric_key": rubric_key,
        "rubric_version": rubric_version,
        "guideline_version": guideline_version,
        "review_pass": 0,
        "source": source,
        "started_at": started_at,
        "submitted_at": submitted_at,
        "telemetry": telemetry,
        "idempotency_key": idempotency_key,
        "content_hash": content_hash,
    }


# -- the leanest path: a plain-text comparison ------------------------------------------------


class PairRows:
    """A plain-text item with two candidates and one pairwise judgment of it, as bare values.

    What :func:`text_item_rows` + :func:`pairwise_rows` would build for the same record (see
    :meth:`item_rows`, :meth:`judgment_rows`), without the dicts: a bulk import of millions of
    comparisons spends its time here. ``prompt_json`` is the prompt as its JSON column holds it.
    """

    __slots__ = (
        "item_key",
        "item_hash",
        "prompt",
        "prompt_json",
        "texts",
        "candidate_keys",
        "rater_key",
        "source",
        "winner",
        "strength",
        "score",
        "content_hash",
        "pair_lo",
        "pair_hi",
        "body_json",
        "shown_order_json",
    )

    def __init__(
        self,
        item_key: str,
        item_hash: str,
        prompt: str,
        prompt_json: str,
        texts: tuple[str, str],
        candidate_keys: tuple[str, str],
        rater_key: str,
        source: str,
        winner: str,
        strength: int | None,
        score: int | None,
        judgment_hash: str,
    ) -> None:
        self.item_key = item_key
        self.item_hash = item_hash
        self.prompt = prompt
        self.prompt_json = prompt_json
        self.texts = texts
        self.candidate_keys = candidate_keys
        self.rater_key = rater_key
        self.source = source
        self.winner = winner
        self.strength = strength
        self.score = score
        self.content_hash = judgment_hash
        # The pair in sorted candidate-id order (no order was shown to anyone), and the JSON
        # columns as orjson.dumps writes the values of judgment_rows() (ids need no escaping).
        a, b = candidate_keys
        self.pair_lo, self.pair_hi = lo, hi = (a, b) if a < b else (b, a)
        self.shown_order_json = f'["{lo}","{hi}"]'
        self.body_json = pairwise_body_json(lo, hi, winner, strength)

    @property
    def shown_order(self) -> tuple[str, str]:
        return self.pair_lo, self.pair_hi

    def state(self) -> tuple[Any, ...]:
        """Every attribute, in :attr:`__slots__` order: plain strings, ints and tuples of them, so
        ``marshal`` can carry it between processes (see :meth:`from_state`)."""
        return (
            self.item_key,
            self.item_hash,
            self.prompt,
            self.prompt_json,
            self.texts,
            self.candidate_keys,
            self.rater_key,
            self.source,
            self.winner,
            self.strength,
            self.score,
            self.content_hash,
            self.pair_lo,
            self.pair_hi,
            self.body_json,
            self.shown_order_json,
        )

    @classmethod
    def from_state(cls, state: Sequence[Any]) -> PairRows:
        """The object :meth:`state` describes, without recomputing anything."""
        obj = object.__new__(cls)
        (
            obj.item_key,
            obj.item_hash,
            obj.prompt,
            obj.prompt_json,
            obj.texts,
            obj.candidate_keys,
            obj.rater_key,
            obj.source,
            obj.winner,
            obj.strength,
            obj.score,
            obj.content_hash,
            obj.pair_lo,
            obj.pair_hi,
            obj.body_json,
            obj.shown_order_json,
        ) = state
        return obj

    def item_rows(self) -> ItemRows:
        """The same item as :func:`text_item_rows` builds it."""
        return ItemRows(
            key=self.item_key,
            content_hash=self.item_hash,
            values={
                "item_key": self.item_key,
                "content_hash": self.item_hash,
                "prompt": self.prompt,
                "domains": [],
                "reference": None,
                "gold": None,
                "meta": {},
            },
            candidates=[
                {
                    "candidate_key": key,
                    "position": i,
                    "text": text,
                    "messages": None,
                    "model": None,
                    "source": "model",
                    "meta": {},
                }
                for i, (key, text) in enumerate(zip(self.candidate_keys, self.texts, strict=True))
            ],
        )

    def judgment_rows(self) -> JudgmentRows:
        """The same judgment as :func:`pairwise_rows` builds it."""
        a, b = self.shown_order
        return JudgmentRows(
            item_key=self.item_key,
            rater_key=self.rater_key,
            kind="pairwise",
            content_hash=self.content_hash,
            idempotency_key=None,
            candidate_ids=[a, b],
            values={
                "kind": "pairwise",
                "body": pairwise_body(a, b, self.winner, self.strength),
                "rationale": None,
                "pair_lo": a,
                "pair_hi": b,
                "score": self.score,
                "shown_order": [a, b],
                "rubric_key": None,
                "rubric_version": None,
                "guideline_version": None,
                "review_pass": 0,
                "source": self.source,
                "started_at": None,
                "submitted_at": None,
                "telemetry": None,
                "idempotency_key": None,
                "content_hash": self.content_hash,
            },
            # what its content hash hashes, from the one rule (only re-keying needs it: not on the hot path)
            hashed=pairwise_rows(
                self.item_key, (a, b), self.winner, self.strength, self.rater_key, self.source
            ).hashed,
        )


def pair_rows(
    prompt: str, chosen: str, rejected: str, rater_id: str, strength: int | None, source: str
) -> PairRows:
    """Leanest path for a plain-text comparison: ``prompt`` with candidates ``chosen`` (better by
    ``strength``, 1-3, or ``None``: by an unknown amount) and ``rejected``, shown in sorted candidate-id order, judged by ``rater_id``.

    Equals ``text_item_rows(prompt, [(None, chosen, None), (None, rejected, None)])`` and the
    :func:`pairwise_rows` of its judgment. The arguments must already be valid (``chosen !=
    rejected``, ``rater_id`` per :func:`check_identifier`, ``source`` one of the sources).

    Why it is fast: each string is serialised once (``orjson.dumps`` of a string is its canonical
    JSON), and the canonical JSON of the hashed objects is assembled from those bytes around
    constant keys in sorted order instead of building dicts and serialising them again. The
    identifiers spliced in unquoted (``cand_``/``itm_`` + hex) need no escaping.
    """
    sha256, dumps = hashlib.sha256, orjson.dumps
    pj, cj, rj = dumps(prompt), dumps(chosen), dumps(rejected)
    # The identity uses the normalised texts (preflab.schema.identity); most are normal already,
    # and then their JSON is the one just made.
    np_, nc, nr = normal_text(prompt), normal_text(chosen), normal_text(rejected)
    npj = pj if np_ is prompt else dumps(np_)
    ncj = cj if nc is chosen else dumps(nc)
    nrj = rj if nr is rejected else dumps(nr)
    c0 = "cand_" + sha256(ncj).hexdigest()[:12]
    c1 = "cand_" + sha256(nrj).hexdigest()[:12]
    if c0 == c1:
        raise ValueError("'chosen' and 'rejected' are the same answer (after normalisation)")
    b0, b1 = c0.encode(), c1.encode()
    # Candidates in sorted id order: the identity is the set of answers, not their order.
    (k0, j0), (k1, j1) = ((b0, ncj), (b1, nrj)) if c0 < c1 else ((b1, nrj), (b0, ncj))
    # content_hash(identity(prompt, candidates)): {"prompt": [user message], "candidates": [[id, text], ...]}
    item_key_ = (
        "itm_"
        + sha256(
            b'{"candidates":[["%s",%s],["%s",%s]],"prompt":[{"content":%s,"role":"user"}]}'
            % (k0, j0, k1, j1, npj)
        ).hexdigest()[:16]
    )
    # content_hash(item_content(dump)) (Item.content_hash)
    item_hash = sha256(
        b'{"candidates":[{"body":%s,"id":"%s"},{"body":%s,"id":"%s"}],'
        b'"domains":[],"gold":null,"prompt":[{"content":%s,"role":"user"}],"reference":null}'
        % (j0, k0, j1, k1, npj)
    ).hexdigest()
    if c0 < c1:
        lo, hi, winner, direction = b0, b1, b"a", -1
    else:
        lo, hi, winner, direction = b1, b0, b"b", 1
    score = None if strength is None else direction * strength  # canonical_pair(...).score
    judgment_hash = plain_pair_content_hash(
        item_key_.encode(), dumps(rater_id), source.encode(), lo, hi, winner, strength
    )
    return PairRows(
        item_key_,
        item_hash,
        prompt,
        pj.decode(),
        (chosen, rejected),
        (c0, c1),
        rater_id,
        source,
        winner.decode(),
        strength,
        score,
        judgment_hash,
    )
