"""The judge's structured replies, parsed strictly.

A reply is one JSON object, the whole message (surrounding white space allowed), or one fenced
```` ```json ```` block that is the whole message (a common habit of chat models). Anything else,
a field missing or out of range, or an unknown field, is *malformed*: the runner asks again
(bounded) and then records a failure with this module's reason. Nothing is ever guessed from
prose.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

_FENCE = re.compile(r"\A```(?:json)?\s*\n(?P<body>.*)\n```\Z", re.DOTALL)


class Malformed(ValueError):
    """A reply that is not the JSON object its template asks for (the message says why)."""


class _Reply(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    rationale: str = Field(default="", max_length=20_000)


class SpanReply(BaseModel):
    """A critique span as a judge gives it (templates ``pairwise@2``, ``unary@2``): the marked
    text quoted exactly, the answer it is in (``A``/``B``; a unary reply's one answer needs
    none), a category and a note. The runner finds the quote in the answer (exact match only)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    answer: Literal["A", "B"] | None = None
    quote: str = Field(min_length=1, max_length=5000)
    category: str = Field(min_length=1, max_length=200)
    note: str = Field(default="", max_length=5000)


class _Spanned(_Reply):
    spans: list[SpanReply] = Field(default_factory=list, max_length=500)


class PairwiseReply(_Spanned):
    winner: Literal["A", "B", "tie"]
    strength: int = Field(ge=0, le=3)

    @model_validator(mode="after")
    def _tie_is_zero(self) -> PairwiseReply:
        if (self.winner == "tie") != (self.strength == 0):
            raise ValueError("winner 'tie' goes with strength 0, and strength 0 with 'tie'")
        return self


class ScoreReply(_Reply):
    score: float


class UnaryReply(_Spanned):
    acceptable: bool


class StepsReply(_Reply):
    verdicts: list[Literal[-1, 0, 1]] = Field(min_length=1)


class CriteriaReply(_Reply):
    """``met``: every criterion id of the request, true or false (the runner checks the ids)."""

    met: dict[str, bool] = Field(min_length=1)


REPLIES: dict[str, type[_Reply]] = {
    "pairwise": PairwiseReply,
    "rubric": ScoreReply,
    "unary": UnaryReply,
    "steps": StepsReply,
    "criteria": CriteriaReply,
}


def parse_reply(text: str, kind: str) -> dict[str, Any]:
    """The reply's fields (validated for ``kind``), or :class:`Malformed`."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group("body").strip()
    try:
        data = json.loads(body)
    except json.JSONDecodeError as e:
        raise Malformed(f"not a JSON object: {e.msg} at char {e.pos}: {text[:120]!r}") from None
    if not isinstance(data, dict):
        raise Malformed(f"not a JSON object: {text[:120]!r}")
    if kind == "rubric" and type(data.get("score")) is int:  # not a bool, which is an int too
        data["score"] = float(data["score"])  # strict mode: an integer grade is a number too
    try:
        reply = REPLIES[kind].model_validate(data).model_dump()
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(map(str, err['loc'])) or '(reply)'}: {err['msg']}" for err in e.errors()
        )
        raise Malformed(problems) from None
    if not reply.get("spans"):
        reply.pop("spans", None)  # no spans: the reply as before spans existed (its cache line too)
    return reply
