"""Wire-model objects from stored rows, without validating them again (the read fast path).

Everything in the database was written from validated models (:mod:`preflab.store.rows`
dumps them; its fast paths produce the same values), so reading it back through pydantic
validation re-checks what is already known to hold. Profiling an export showed that, with
the ORM, this was most of the time spent reading. Here the objects are put together
directly: the same ``__dict__``, fields-set and extras that ``model_validate`` produces for the
same input (``tests/store/test_fast_read.py`` holds the two paths equal on every kind).

Why not ``Model.model_construct``: it is the public way to do this, but it is a Python loop
over every field with alias lookups, measured at about twice the time of a full validation
for a judgment. :func:`construct` does what its last step does, for models that need nothing
more (no private attributes, no ``model_post_init``; checked at import time).

What validation would change is done here by hand, and only that: JSON lists that the models
hold as tuples (``shown_order``), nested models (messages, candidates, gold, provenance,
telemetry), the review pass as :class:`~preflab.schema.ReviewPass`, timestamps as aware UTC
(SQLite keeps no offset), and defaults for fields the stored form leaves out.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel

from ..schema import (
    JUDGMENT_KINDS,
    Candidate,
    GoldAnswer,
    Item,
    JudgmentBase,
    Message,
    PairwiseJudgment,
    Provenance,
    ReviewPass,
    Telemetry,
)
from ..schema.judgments import DemonstrationJudgment
from .rows import as_utc

M = TypeVar("M", bound=BaseModel)

_set = object.__setattr__  # pydantic models refuse plain attribute setting of these


def _defaults(cls: type[BaseModel]) -> dict[str, Callable[[], Any]]:
    """Per field in declaration order: a function returning its default (a fresh one for factories)."""
    out: dict[str, Callable[[], Any]] = {}
    for name, info in cls.model_fields.items():
        if info.is_required():
            out[name] = _required(cls, name)
        elif info.default_factory is not None:
            out[name] = info.default_factory  # type: ignore[assignment]
        else:
            default = info.default
            out[name] = lambda default=default: default
    return out


def _required(cls: type[BaseModel], name: str) -> Callable[[], Any]:
    def missing() -> Any:
        raise ValueError(f"stored {cls.__name__} lacks required field {name!r}")

    return missing


_TRUSTED = (Message, Candidate, GoldAnswer, Item, Telemetry, Provenance, *JUDGMENT_KINDS.values())
for _cls in _TRUSTED:
    # construct() sets __dict__ and friends only: a model that needs more cannot come through it.
    if _cls.__pydantic_post_init__ is not None or _cls.__private_attributes__ or _cls.__pydantic_root_model__:
        raise TypeError(f"{_cls.__name__} needs model_post_init or private attributes: construct() cannot build it")
_DEFAULTS = {cls: _defaults(cls) for cls in _TRUSTED}


def construct(cls: type[M], values: dict[str, Any], extra: dict[str, Any] | None = None) -> M:
    """``cls`` holding ``values`` (trusted): what validating ``{**values, **extra}`` would give.

    Fields missing from ``values`` get their defaults and, as with validation, are not in
    ``model_fields_set``. ``extra``: the extras of an ``extra="allow"`` model (a dict, maybe
    empty, for messages); ``None`` for the others, as validation leaves it.
    """
    fields = {name: values[name] if name in values else default() for name, default in _DEFAULTS[cls].items()}
    obj = cls.__new__(cls)
    _set(obj, "__dict__", fields)
    # validation counts extras as set too
    _set(obj, "__pydantic_fields_set__", set(values) | set(extra) if extra else set(values))
    _set(obj, "__pydantic_extra__", extra)
    _set(obj, "__pydantic_private__", None)
    return obj


# -- items ----------------------------------------------------------------------------------


def message(data: dict[str, Any]) -> Message:
    if len(data) == 2 and "role" in data and "content" in data:
        return construct(Message, data, {})
    extra = {k: v for k, v in data.items() if k not in ("role", "content")}
    return construct(Message, {"role": data["role"], "content": data["content"]}, extra)


def messages(data: list[dict[str, Any]] | None) -> list[Message] | None:
    return None if data is None else [message(m) for m in data]


def candidate(
    key: str, text: str | None, msgs: list[dict[str, Any]] | None, model: str | None, source: str,
    meta: dict[str, Any] | None,
) -> Candidate:
    """A candidate from its columns (as :func:`preflab.store.repo.item_from_row` reads them)."""
    values: dict[str, Any] = {"id": key}
    # the stored form has exactly one body; validation sees only that key (fields-set alike)
    if msgs is None:
        values["text"] = text
    else:
        values["messages"] = messages(msgs)
    values["model"] = model
    values["source"] = source
    values["metadata"] = meta or {}
    return construct(Candidate, values)


def item(
    key: str, prompt: Any, candidates: list[Candidate], domains: list[str] | None, reference: str | None,
    gold: dict[str, Any] | None, meta: dict[str, Any] | None,
) -> Item:
    """An item from its columns and its candidates (already in position order)."""
    return construct(Item, {
        "id": key,
        "prompt": prompt if isinstance(prompt, str) else messages(prompt),
        "candidates": candidates,
        # stored sorted, stripped and lower-cased: the validator's normalisation is a no-op
        "domains": domains or [],
        "reference": reference,
        "gold": None if gold is None else construct(GoldAnswer, gold),
        "metadata": meta or {},
    })


# -- judgments ------------------------------------------------------------------------------


def _pairwise(body: dict[str, Any]) -> dict[str, Any]:
    body["shown_order"] = tuple(body["shown_order"])  # a JSON list; the model holds a tuple
    return body


def _demonstration(body: dict[str, Any]) -> dict[str, Any]:
    if body.get("messages") is not None:
        body["messages"] = messages(body["messages"])
    return body


#: Kind-specific conversions of the stored body (a fresh dict, may be changed in place).
_BODY: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    PairwiseJudgment.kind: _pairwise,
    DemonstrationJudgment.kind: _demonstration,
}

_REVIEW_PASSES = {int(p): p for p in ReviewPass}


def provenance(
    rater_key: str, rater_hash: str | None, rubric_key: str | None, rubric_version: int | None, review_pass: int,
    source: str, started_at: datetime | None, submitted_at: datetime | None, telemetry: dict[str, Any] | None,
    idempotency_key: str | None,
) -> Provenance:
    values = {
        "rater_id": rater_key,
        "rater_hash": rater_hash,
        "rubric_id": rubric_key,
        "rubric_version": rubric_version,
        "review_pass": _REVIEW_PASSES[review_pass],
        "source": source,
        "started_at": as_utc(started_at),
        "submitted_at": as_utc(submitted_at),
        "telemetry": None if telemetry is None else construct(Telemetry, telemetry),
        "idempotency_key": idempotency_key,
    }
    # judgment_from_row leaves out None values before validating: not in fields-set either
    return construct(Provenance, {k: v for k, v in values.items() if v is not None})


def judgment(kind: str, body: dict[str, Any], item_key: str, rationale: str | None, prov: Provenance) -> JudgmentBase:
    """A judgment from its stored ``body`` (the kind's fields, ``kind`` included) and columns."""
    cls = JUDGMENT_KINDS[kind]
    values = {k: v for k, v in body.items() if k != "kind"}
    convert = _BODY.get(kind)
    if convert is not None:
        values = convert(values)
    values["type"] = kind  # the discriminator field, ``kind`` on the wire
    values["item_id"] = item_key
    values["rationale"] = rationale
    values["provenance"] = prov
    return construct(cls, values)
