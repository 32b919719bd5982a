"""Who wrote and who approved a verifiable task, a reference answer or a rubric, and which version.

Optional everywhere (data without them imports as before); when given they are validated
(non-empty identifiers, ``version >= 1``, an approver other than the author: approving one's own
work is no approval) and travel with what they describe: a task's fields are part of the task's
JSON (``verify rollouts`` reports, the ``verl`` export's ``extra_info.verify_task``), a rubric's are
in the export manifest and card, a reference's in the item's ``metadata.reference_provenance``.

**Two experts for a reference** (``metadata.reference_provenance``)::

    {"require_two": true, "version": 1, "approver": "lead",
     "authors": [{"author": "e1", "answer": "7/12"}, {"author": "e2", "answer": "\\\\frac{7}{12}"}],
     "adjudicator": null}

With ``require_two`` a reference counts only when two different experts wrote it independently
and their answers agree (equal after normalising whitespace, case and ``$``; for a math item,
equal as math, by the math verifier), or, when they disagree, once an ``adjudicator`` (neither
author) has set the item's ``reference`` to the adjudicated answer — the labels' rule: two
independent labels, disagreement goes to adjudication, the adjudicated value wins.
:func:`preflab.verify.references.reference_status` says which; an unsettled reference keeps its item out of RL exports.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .common import Identifier, StrictModel


class Authorship(StrictModel):
    author: Identifier | None = None
    approver: Identifier | None = None
    version: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _approver_is_someone_else(self) -> Authorship:
        check_approver(self.author, self.approver)
        return self


def check_approver(author: str | None, approver: str | None) -> None:
    if author is not None and approver is not None and author.strip() == approver.strip():
        raise ValueError(f"approver {approver!r} is the author: approval needs someone else")


class ReferenceAuthor(StrictModel):
    author: Identifier
    answer: str = Field(min_length=1)


class ReferenceProvenance(Authorship):
    require_two: bool = False
    authors: list[ReferenceAuthor] = Field(default_factory=list)
    adjudicator: Identifier | None = None

    @model_validator(mode="after")
    def _independent(self) -> ReferenceProvenance:
        names = [a.author for a in self.authors]
        if len(set(names)) != len(names):
            raise ValueError(f"authors must be different experts, got {names}")
        if self.adjudicator is not None and self.adjudicator in names:
            raise ValueError(f"adjudicator {self.adjudicator!r} wrote one of the answers")
        return self


ReferenceState = Literal[
    "unrecorded", "single", "agreed", "awaiting_second", "disagree", "adjudicated"
]
#: states whose reference may be used as ground truth
SETTLED = frozenset({"unrecorded", "single", "agreed", "adjudicated"})
