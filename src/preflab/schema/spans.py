"""Critique spans: a marked stretch of one answer with a category and a note (docs/critiques.md).

Offsets are into :meth:`preflab.schema.Candidate.as_text` of the candidate the span names (the
answer's text: its ``text``, or the content of its assistant turns joined by a blank line),
half-open (``text[start:end]`` is the marked stretch), ``0 <= start < end <= len(text)``, counted
in Unicode code points exactly as Python indexes a ``str`` (not UTF-8 bytes, not UTF-16 units),
over the raw text, not the markdown as rendered on screen: the page maps its selection back to
these offsets, so a span stays put whatever renders the markdown.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from pydantic import Field, field_validator, model_validator

from .common import Identifier, StrictModel

#: The longest note a span may carry, and the largest offset accepted (a 64-bit-safe bound far
#: beyond any answer; an offset past the answer's end is refused against the item).
MAX_NOTE_CHARS = 5000
MAX_OFFSET = 100_000_000
#: The most spans one judgment may carry.
MAX_SPANS = 500


class CritiqueSpan(StrictModel):
    """One marked stretch of a candidate answer.

    >>> s = CritiqueSpan(candidate_id="a", start=0, end=5, category="factual_error", note="no")
    >>> "Paris is big"[s.start : s.end]
    'Paris'
    >>> try:
    ...     CritiqueSpan(candidate_id="a", start=3, end=3, category="x")
    ... except ValueError as exc:
    ...     print(exc.errors()[0]["msg"])
    Value error, end (3) must be greater than start (3): a span marks at least one character
    """

    candidate_id: Identifier = Field(description="The answer the span marks.")
    start: int = Field(
        ge=0, le=MAX_OFFSET, description="First code point of the span in Candidate.as_text()."
    )
    end: int = Field(
        ge=1, le=MAX_OFFSET, description="One past the last code point (half-open, > start)."
    )
    category: Identifier = Field(description="One of the project's policy.span_categories.")
    note: str = Field(default="", max_length=MAX_NOTE_CHARS, description="The critique.")

    @field_validator("note")
    @classmethod
    def _no_nul(cls, v: str) -> str:
        if "\x00" in v:
            raise ValueError(
                "contains a NUL character (\\u0000), which cannot be stored; remove it"
            )
        return v

    @model_validator(mode="after")
    def _ordered(self) -> CritiqueSpan:
        if self.end <= self.start:
            raise ValueError(
                f"end ({self.end}) must be greater than start ({self.start}): "
                "a span marks at least one character"
            )
        return self

    def sort_key(self) -> tuple[str, int, int, str, str]:
        return (self.candidate_id, self.start, self.end, self.category, self.note)


def canonical_spans(spans: Sequence[CritiqueSpan] | None) -> list[CritiqueSpan] | None:
    """Spans in their one stored order (candidate, start, end, category, note); ``None`` for no
    spans (so a judgment without spans is stored, hashed and exported exactly as before). An exact
    duplicate is a ``ValueError``."""
    if not spans:
        return None
    ordered = sorted(spans, key=CritiqueSpan.sort_key)
    for prev, cur in zip(ordered, ordered[1:]):
        if prev.sort_key() == cur.sort_key():
            raise ValueError(
                f"the same span is given twice (candidate {cur.candidate_id!r}, "
                f"{cur.start}..{cur.end}, {cur.category!r}); give it once"
            )
    return ordered


def span_candidate_problems(
    spans: Sequence[CritiqueSpan], candidates: Collection[str]
) -> list[tuple[int, str]]:
    """``(index, reason)`` for each span on a candidate the judgment does not name."""
    return [
        (i, f"{s.candidate_id!r} is not an answer this judgment is about ({sorted(candidates)})")
        for i, s in enumerate(spans)
        if s.candidate_id not in candidates
    ]


def span_offset_problems(
    spans: Sequence[CritiqueSpan], lengths: Mapping[str, int]
) -> list[tuple[str, str]]:
    """``(field, reason)`` for each span past the end of its answer (``lengths``: candidate id ->
    ``len(Candidate.as_text())``; a candidate not in it is checked elsewhere)."""
    out = []
    for i, s in enumerate(spans):
        n = lengths.get(s.candidate_id)
        if n is not None and s.end > n:
            out.append(
                (
                    f"spans.{i}.end",
                    f"{s.end} is past the end of answer {s.candidate_id!r} ({n} characters); "
                    "offsets count code points of the answer's text",
                )
            )
    return out


def span_category_problems(
    spans: Sequence[CritiqueSpan], categories: Sequence[str]
) -> list[tuple[str, str]]:
    """``(field, reason)`` for each span whose category is not in the project's list."""
    if not spans:
        return []
    allowed = set(categories)
    if not allowed:
        return [
            (
                "spans",
                "this project takes no critique spans (policy.span_categories is empty); "
                "set the categories with `preflab project set` or leave the spans out",
            )
        ]
    return [
        (
            f"spans.{i}.category",
            f"{s.category!r} is not one of the project's span categories "
            f"({', '.join(categories)}); use one of them or add it to policy.span_categories",
        )
        for i, s in enumerate(spans)
        if s.category not in allowed
    ]
