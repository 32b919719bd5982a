"""Shared building blocks of the wire formats: messages, prompts, content hashes."""

from __future__ import annotations

import hashlib
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

Role = Literal["system", "user", "assistant", "tool"]

#: Identifiers travel through URLs, file names and SQL: keep them printable and bounded.
Identifier = Annotated[str, StringConstraints(min_length=1, max_length=200, strip_whitespace=True)]


class FieldProblem(ValueError):
    """A model validator's problem with one field (``field``: a dotted path), so a reader can
    report it as ``field: reason`` instead of a problem of the whole record."""

    def __init__(self, field: tuple[str | int, ...], reason: str) -> None:
        super().__init__(f"{'.'.join(str(p) for p in field)}: {reason}")
        self.field = field
        self.reason = reason


class StrictModel(BaseModel):
    """Base of every wire model: unknown fields are an error, not silently dropped."""

    model_config = ConfigDict(extra="forbid", frozen=False, populate_by_name=True)


class Message(BaseModel):
    """One chat message. Extra keys (``name``, ``tool_calls`` ...) are kept verbatim."""

    model_config = ConfigDict(extra="allow")

    role: Role
    content: str


Prompt = str | list[Message]


def canonical_json(value: Any) -> bytes:
    """Deterministic JSON bytes (sorted keys) used for content hashes."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def content_hash(value: Any, prefix: str = "", length: int = 16) -> str:
    """A stable short id from content: ``prefix + sha256(canonical_json(value))[:length]``."""
    digest = hashlib.sha256(canonical_json(value)).hexdigest()
    return f"{prefix}{digest[:length]}"


def prompt_as_messages(prompt: Prompt) -> list[dict[str, Any]]:
    """A prompt as a list of chat messages (a plain string becomes one user turn)."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    return [m.model_dump(mode="json") for m in prompt]


def prompt_as_text(prompt: Prompt) -> str:
    """A prompt flattened to text (for length audits and non-chat exports). A one-message user
    chat is its text, as it is the same prompt as that text (see :mod:`.identity`)."""
    if isinstance(prompt, str):
        return prompt
    if len(prompt) == 1 and prompt[0].role == "user":
        return prompt[0].content
    return "\n\n".join(f"{m.role}: {m.content}" for m in prompt)


Nonneg = Annotated[float, Field(ge=0)]
