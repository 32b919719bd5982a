"""Items to label: a prompt, one or more candidate answers, domain tags, hidden gold."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from .common import FieldProblem, Identifier, Message, Prompt, StrictModel, content_hash
from .criteria import CriteriaSet, approved_criteria
from .identity import candidate_key, identity, item_content, item_key
from .judgments import JudgmentBase, parse_judgment


def _set(identifier: str | None) -> str:
    if identifier is None:  # only a model built without validation (model_construct)
        raise ValueError("an id is set when an item or a candidate is validated")
    return identifier


class Candidate(StrictModel):
    """One answer to an item's prompt: plain ``text`` or a list of chat ``messages``."""

    id: Identifier | None = None
    text: str | None = None
    messages: list[Message] | None = None
    model: str | None = None
    source: Literal["model", "human"] = "model"
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_body_and_an_id(self) -> Candidate:
        if (self.text is None) == (self.messages is None):
            raise ValueError("a candidate needs exactly one of 'text' or 'messages'")
        if self.id is None:
            self.id = candidate_key(self.body_json())
        return self

    @property
    def key(self) -> str:
        """The candidate's id, typed ``str``: validation always sets it (``id`` is optional on
        input only, where the body's hash stands in for it).

        >>> Candidate(text="Paris").key == Candidate(text="Paris").id
        True
        """
        return _set(self.id)

    def body_json(self) -> Any:
        if self.text is not None:
            return self.text
        return [m.model_dump(mode="json") for m in self.messages or []]

    def as_text(self) -> str:
        """The answer as text: the content of its assistant turns for a message list."""
        if self.text is not None:
            return self.text
        return "\n\n".join(m.content for m in self.messages or [] if m.role == "assistant")


class GoldAnswer(StrictModel):
    """The expected judgment of a gold (qualification or honeypot) item. Never sent to raters."""

    judgment: dict[str, Any] = Field(
        description="The expected judgment body, in the shape of one judgment kind (with 'kind')."
    )
    explanation: str | None = None
    #: For ordinal answers: how far from the expected value still counts as correct.
    tolerance: float = 0.0

    def expected(self, item_id: str) -> JudgmentBase:
        """The expected judgment as a judgment of ``item_id``: the one parse the gold scoring, the
        exports and the quality report use, and the one :class:`Item` checks on validation (so
        whatever imports, scores)."""
        data = {**self.judgment, "item_id": item_id, "provenance": {"rater_id": "gold"}}
        return parse_judgment(data)


class Item(StrictModel):
    """A unit of work: one prompt and its candidate answers."""

    id: Identifier | None = None
    prompt: Prompt
    candidates: list[Candidate] = Field(min_length=1)
    domains: list[str] = Field(default_factory=list)
    reference: str | None = Field(
        default=None, description="Hidden reference answer (never shown to raters)."
    )
    gold: GoldAnswer | None = Field(
        default=None, description="Hidden expected judgment for qualification / honeypot items."
    )
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _ids(self) -> Item:
        ids = [c.id for c in self.candidates]
        if len(set(ids)) != len(ids):
            raise ValueError(f"candidate ids must be unique within an item, got {ids}")
        self.domains = sorted({d.strip().lower() for d in self.domains if d.strip()})
        if self.id is None:
            self.id = item_key(self.prompt, self._bodies())
        if self.gold is not None:
            self._check_gold(self.gold, ids)
        if "reference_provenance" in self.metadata:
            self._check_reference_provenance(self.metadata["reference_provenance"])
        if "criteria" in self.metadata:
            self._check_criteria(self.metadata["criteria"])
        return self

    @property
    def key(self) -> str:
        """The item's id, typed ``str``: validation always sets it (``id`` is optional on input
        only, where the content's hash stands in for it); the store calls it ``item_key``.

        >>> Item(id="q1", prompt="2+2?", candidates=[{"text": "4"}]).key
        'q1'
        """
        return _set(self.id)

    def _check_reference_provenance(self, raw: Any) -> None:
        """``metadata.reference_provenance`` (:mod:`.authorship`) is validated at import."""
        from .authorship import ReferenceProvenance

        try:
            ReferenceProvenance.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            raise FieldProblem(
                ("metadata", "reference_provenance", *first["loc"]), first["msg"]
            ) from None

    def _check_criteria(self, raw: Any) -> None:
        """``metadata.criteria`` (:mod:`.criteria`, the item's own rubric) is validated at import."""
        try:
            CriteriaSet.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            msg = str(first["msg"]).removeprefix("Value error, ")
            raise FieldProblem(("metadata", "criteria", *first["loc"]), msg) from None

    def _check_gold(self, gold: GoldAnswer, ids: list[str | None]) -> None:
        """The gold answer must be a judgment of this item (:meth:`GoldAnswer.expected`, what every
        reader of gold parses): a bad one is refused here, not at the first export."""
        try:
            expected = gold.expected(self.id or "")
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            # the union's tag (the kind) is the first part of the path
            where = tuple(first["loc"][1:] if len(first["loc"]) > 1 else first["loc"])
            raise FieldProblem(
                ("gold", "judgment", *where),
                f"{first['msg']} (a gold answer is a judgment of this item, with every field a "
                "rater's judgment of its kind needs)",
            ) from None
        unknown = [c for c in expected.candidate_ids() if c not in ids]
        if unknown:
            raise FieldProblem(
                ("gold", "judgment"),
                f"{unknown[0]!r} is not a candidate of the item (it has "
                f"{', '.join(str(i) for i in ids)})",
            )

    def _bodies(self) -> list[tuple[str, Any]]:
        return [(c.id or "", c.body_json()) for c in self.candidates]

    def content_key(self) -> dict[str, Any]:
        """What identifies an item's content: its default id hashes this (see :mod:`.identity`)."""
        return identity(self.prompt, self._bodies())

    def content_hash(self) -> str:
        """Hash of what a rater sees and grading uses, normalised (see :mod:`.identity`): the same
        pair written another way has the same hash, so importing it again adds nothing."""
        return content_hash(item_content(self.model_dump(mode="json", exclude={"id"})), length=64)

    def candidate(self, candidate_id: str) -> Candidate:
        for c in self.candidates:
            if c.id == candidate_id:
                return c
        raise KeyError(f"item {self.id!r} has no candidate {candidate_id!r}")

    def public_view(self) -> dict[str, Any]:
        """What a rater may see: no reference answer, no gold, no metadata but the declared kinds."""
        return {
            "id": self.id,
            "prompt": self.model_dump(mode="json")["prompt"],
            "candidates": [
                c.model_dump(mode="json", include={"id", "text", "messages"}, exclude_none=True)
                for c in self.candidates
            ],
            "domains": list(self.domains),
            # the kinds the item's author allows (``metadata.kinds``); harmless to show
            **({"kinds": list(self.metadata["kinds"])} if self.metadata.get("kinds") else {}),
            # the item's own approved criteria, what a rater's checklist grades (no secret)
            **self._public_criteria(),
        }

    def _public_criteria(self) -> dict[str, Any]:
        if "criteria" not in self.metadata:
            return {}
        found = approved_criteria(self.metadata)
        if found is None:
            return {}
        return {"criteria": {"version": found.version, "criteria": found.as_json()["criteria"]}}
