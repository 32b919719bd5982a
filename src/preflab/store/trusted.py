"""Wire-model objects from stored rows, without validating them again (the read fast path).

Everything in the database was written from validated models (:mod:`preflab.store.rows`
dumps them; its fast paths produce the same values), so reading it back through pydantic
validation re-checks what is already known to hold. (Most of the old read path's time went to
ORM row loading and to the cyclic GC walking the growing heap; pydantic-core validation is a
few microseconds per judgment, and this saves that share.) Here the objects are put together
directly: the same ``__dict__``, fields-set and extras that ``model_validate`` produces for the
same input (``tests/store/test_fast_read.py`` holds the two paths equal on every kind).

Why not ``Model.model_construct``: it is the public way to do this, but it is a Python loop
over every field with alias lookups, measured at about twice the time of a full validation
for a judgment. :func:`_new` does what its last step does, for models that need nothing more
(no private attributes, no ``model_post_init``; checked at import time), and the builders
below write each model's fields out directly.

What validation would change is done here by hand, and only that: JSON lists that the models
hold as tuples (``shown_order``), nested models (messages, candidates, gold, provenance,
telemetry, critique spans), the review pass as :class:`~preflab.schema.ReviewPass`, timestamps as aware UTC
(SQLite keeps no offset), and defaults for fields the stored form leaves out.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar, cast

from pydantic import BaseModel

from ..schema import (
    JUDGMENT_KINDS,
    AssistRecord,
    Candidate,
    CritiqueSpan,
    GoldAnswer,
    Item,
    JudgeRecord,
    JudgmentBase,
    Message,
    Provenance,
    ReviewPass,
    Telemetry,
)
from .rows import as_utc

M = TypeVar("M", bound=BaseModel)

_set = object.__setattr__  # pydantic models refuse plain attribute setting of these


def _new(  # ``_set=_set``: a local name, four calls per object
    cls: type[M],
    fields: dict[str, Any],
    fields_set: set[str],
    extra: dict[str, Any] | None = None,
    _set: Callable[[object, str, Any], None] = _set,
) -> M:
    """``cls`` holding ``fields`` (every field, in declaration order), as validation leaves it:
    ``fields_set`` the fields the input had (extras included), ``extra`` the extras of an
    ``extra="allow"`` model (a dict, maybe empty) and ``None`` for the others."""
    obj = cls.__new__(cls)
    _set(obj, "__dict__", fields)
    _set(obj, "__pydantic_fields_set__", fields_set)
    _set(obj, "__pydantic_extra__", extra)
    _set(obj, "__pydantic_private__", None)
    return obj


_TRUSTED: tuple[type[BaseModel], ...] = (
    Message,
    Candidate,
    GoldAnswer,
    Item,
    Telemetry,
    Provenance,
    *JUDGMENT_KINDS.values(),
)
for _cls in _TRUSTED:
    # _new() sets __dict__ and friends only: a model that needs more cannot come through it.
    if (
        _cls.__pydantic_post_init__ is not None
        or _cls.__private_attributes__
        or _cls.__pydantic_root_model__
    ):
        raise TypeError(
            f"{_cls.__name__} needs model_post_init or private attributes: _new() cannot build it"
        )


def _defaults(
    cls: type[BaseModel], skip: tuple[str, ...] = ()
) -> tuple[tuple[str, Callable[[], Any]], ...]:
    """``(field, default)`` in declaration order; ``default()`` gives a fresh value (factories
    are called each time, as validation does) or raises for a required field."""
    out: list[tuple[str, Callable[[], Any]]] = []
    for name, info in cls.model_fields.items():
        if name in skip:
            continue
        if info.is_required():
            out.append((name, _required(cls, name)))
        elif info.default_factory is not None:
            if info.default_factory_takes_validated_data:
                raise TypeError(f"{cls.__name__}.{name}: a default factory that takes the data")
            out.append((name, cast(Callable[[], Any], info.default_factory)))
        else:
            out.append((name, _constant(info.default)))
    return tuple(out)


def _constant(value: Any) -> Callable[[], Any]:
    return lambda: value


def _required(cls: type[BaseModel], name: str) -> Callable[[], Any]:
    def missing() -> Any:
        raise ValueError(f"stored {cls.__name__} lacks required field {name!r}")

    return missing


def construct(cls: type[M], values: dict[str, Any]) -> M:
    """``cls`` from trusted ``values`` (a stored dump): what validating them would give.

    Missing fields get their defaults and, as with validation, are not in ``model_fields_set``.
    For small nested models read as JSON (gold answers, telemetry); the hot ones have their own
    builders below.
    """
    fields = {
        name: values[name] if name in values else default() for name, default in _DEFAULTS[cls]
    }
    return _new(cls, fields, set(values))


_DEFAULTS: dict[type[BaseModel], tuple[tuple[str, Callable[[], Any]], ...]] = {
    cls: _defaults(cls) for cls in (GoldAnswer, Telemetry, CritiqueSpan)
}


# -- items ----------------------------------------------------------------------------------


def message(data: dict[str, Any]) -> Message:
    if len(data) == 2:  # role and content only: the common case
        return _new(
            Message, {"role": data["role"], "content": data["content"]}, {"role", "content"}, {}
        )
    extra = {k: v for k, v in data.items() if k != "role" and k != "content"}
    return _new(Message, {"role": data["role"], "content": data["content"]}, set(data), extra)


def messages(data: list[dict[str, Any]] | None) -> list[Message] | None:
    return None if data is None else [message(m) for m in data]


def candidate(
    key: str,
    text: str | None,
    msgs: list[dict[str, Any]] | None,
    model: str | None,
    source: str,
    meta: dict[str, Any] | None,
) -> Candidate:
    """A candidate from its columns (as :func:`preflab.store.repo.item_from_row` reads them)."""
    # the stored form has exactly one body; item_from_row passes only that key to validation
    if msgs is None:
        fields: dict[str, Any] = {
            "id": key,
            "text": text,
            "messages": None,
            "model": model,
            "source": source,
            "metadata": meta or {},
        }
        return _new(Candidate, fields, {"id", "text", "model", "source", "metadata"})
    fields = {
        "id": key,
        "text": None,
        "messages": messages(msgs),
        "model": model,
        "source": source,
        "metadata": meta or {},
    }
    return _new(Candidate, fields, {"id", "messages", "model", "source", "metadata"})


_ITEM_FIELDS = frozenset(Item.model_fields)


def item(
    key: str,
    prompt: Any,
    candidates: list[Candidate],
    domains: list[str] | None,
    reference: str | None,
    gold: dict[str, Any] | None,
    meta: dict[str, Any] | None,
) -> Item:
    """An item from its columns and its candidates (already in position order)."""
    fields = {
        "id": key,
        "prompt": prompt if isinstance(prompt, str) else messages(prompt),
        "candidates": candidates,
        # stored sorted, stripped and lower-cased: the validator's normalisation is a no-op
        "domains": domains or [],
        "reference": reference,
        "gold": None if gold is None else construct(GoldAnswer, gold),
        "metadata": meta or {},
    }
    return _new(Item, fields, set(_ITEM_FIELDS))  # item_from_row passes every field


# -- judgments ------------------------------------------------------------------------------

_REVIEW_PASSES = {int(p): p for p in ReviewPass}


def provenance(
    rater_key: str,
    rater_hash: str | None,
    rubric_key: str | None,
    rubric_version: int | None,
    review_pass: int,
    source: str,
    started_at: datetime | None,
    submitted_at: datetime | None,
    telemetry: dict[str, Any] | None,
    idempotency_key: str | None,
    guideline_version: int | None = None,
    judge: dict[str, Any] | None = None,
    assisted_by: list[Any] | None = None,
) -> Provenance:
    fields = {
        "rater_id": rater_key,
        "rater_hash": rater_hash,
        "rubric_id": rubric_key,
        "rubric_version": rubric_version,
        "review_pass": _REVIEW_PASSES[review_pass],
        "source": source,
        "started_at": None if started_at is None else as_utc(started_at),
        "submitted_at": None if submitted_at is None else as_utc(submitted_at),
        "telemetry": None if telemetry is None else construct(Telemetry, telemetry),
        "idempotency_key": idempotency_key,
        "guideline_version": guideline_version,
        "judge": None if judge is None else JudgeRecord.model_validate(judge),
        "assisted_by": None
        if assisted_by is None
        else [AssistRecord.model_validate(a) for a in assisted_by],
    }
    # judgment_from_row leaves None values out of what it validates: not in fields-set either
    # (rater, hash, pass and source are NOT NULL columns; the rest is mostly NULL)
    fields_set = {"rater_id", "rater_hash", "review_pass", "source"}
    if rubric_key is not None:
        fields_set.add("rubric_id")
    if rubric_version is not None:
        fields_set.add("rubric_version")
    if started_at is not None:
        fields_set.add("started_at")
    if submitted_at is not None:
        fields_set.add("submitted_at")
    if telemetry is not None:
        fields_set.add("telemetry")
    if idempotency_key is not None:
        fields_set.add("idempotency_key")
    if guideline_version is not None:
        fields_set.add("guideline_version")
    if judge is not None:
        fields_set.add("judge")
    if assisted_by is not None:
        fields_set.add("assisted_by")
    return _new(Provenance, fields, fields_set)


_BASE_FIELDS = ("item_id", "rationale", "provenance", "type")
#: Per kind: its own fields (after the base ones), with defaults for those a stored body lacks.
_BODY_FIELDS = {kind: _defaults(cls, skip=_BASE_FIELDS) for kind, cls in JUDGMENT_KINDS.items()}


def judgment(
    kind: str, body: dict[str, Any], item_key: str, rationale: str | None, prov: Provenance
) -> JudgmentBase:
    """A judgment from its stored ``body`` (the kind's fields, ``kind`` included) and columns."""
    fields: dict[str, Any] = {
        "item_id": item_key,
        "rationale": rationale,
        "provenance": prov,
        "type": kind,
    }
    for name, default in _BODY_FIELDS[kind]:
        fields[name] = body[name] if name in body else default()
    if kind == "pairwise":
        fields["shown_order"] = tuple(fields["shown_order"])  # a JSON list; the model holds a tuple
    elif kind == "demonstration" and fields["messages"] is not None:
        fields["messages"] = messages(fields["messages"])
    if fields.get("spans") is not None:  # stored in their canonical order (critique spans)
        fields["spans"] = [construct(CritiqueSpan, span) for span in fields["spans"]]
    # validation sees the body's keys (``kind`` is the alias of ``type``) and the base fields
    fields_set = set(body)
    fields_set.discard("kind")
    fields_set.update(_BASE_FIELDS)
    return _new(JUDGMENT_KINDS[kind], fields, fields_set)
