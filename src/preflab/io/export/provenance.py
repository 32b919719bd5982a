"""Where each exported row came from (issue 16 §3): ``source`` and the provenance columns.

* ``source`` is on every row whenever the labels the export used include AI or AI-assisted
  ones (``--include-ai``, or ``ai_assisted`` labels, which are kept by default): the sources of
  the labels behind the row, sorted and joined by ``+`` (``human``, ``ai``, ``ai_assisted+human``;
  ``verifier`` for a verifier's verdict). A trainer can then filter or weight them.
* ``--provenance-columns`` adds ``rater_hash`` (the raters' HMAC hashes), ``rubric_version``
  (``rubric_id@version`` of rubric labels) and ``guideline_version`` (the project settings
  versions the raters were shown), each a sorted list (a resolved row can have several raters).

The labels behind a row are those of its raters on its item that touch one of its candidates,
among the labels the export kept (after the source, exclusion and telemetry filters and
revisions). TRL's and OpenRLHF's loaders read the columns they need and ignore the others.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ...schema import JudgmentBase

SOURCE = "source"
PROVENANCE_FIELDS = [
    ("rater_hash", pa.list_(pa.string())),
    ("rubric_version", pa.list_(pa.string())),
    ("guideline_version", pa.list_(pa.int64())),
]


@dataclass
class LabelIndex:
    """The kept labels by ``(item, rater hash)``, to say which labels stand behind a row."""

    labels: dict[tuple[str, str], list[JudgmentBase]] = field(
        default_factory=lambda: defaultdict(list)
    )
    sources: set[str] = field(default_factory=set)

    def add(self, judgment: JudgmentBase) -> None:
        p = judgment.provenance
        self.labels[(judgment.item_id, p.rater_hash or p.rater_id)].append(judgment)
        self.sources.add(p.source)

    @property
    def mixed(self) -> bool:
        """AI or AI-assisted labels are among those used: every row says its source."""
        return bool(self.sources - {"human"})

    def behind(
        self, item_id: str, rater_hashes: Iterable[str], candidates: set[str]
    ) -> list[JudgmentBase]:
        return [
            j
            for h in rater_hashes
            for j in self.labels.get((item_id, h), ())
            if candidates & set(j.candidate_ids())
        ]


def row_provenance(row: Any, index: LabelIndex, candidates: set[str]) -> dict[str, Any]:
    """``source`` and the provenance columns of one resolved row (pair, thumb or steps)."""
    labels = index.behind(row.item_id, row.rater_hashes, candidates)
    sources: set[str] = {j.provenance.source for j in labels}
    if not sources and getattr(row, "origin", None) == "verifier":
        sources = {"verifier"}
    return {
        SOURCE: "+".join(sorted(sources)) or None,
        "rater_hash": sorted(set(row.rater_hashes)),
        "rubric_version": sorted(
            {
                f"{j.provenance.rubric_id}@{j.provenance.rubric_version}"
                for j in labels
                if j.provenance.rubric_id
            }
        ),
        "guideline_version": sorted(
            {j.provenance.guideline_version for j in labels if j.provenance.guideline_version}
        ),
    }


def judgment_provenance(judgment: JudgmentBase | None, source: str = "human") -> dict[str, Any]:
    """``source`` and the provenance columns of a row made from one label (a demonstration), or
    from no label at all (``None``: e.g. a human-written candidate answer, ``source``)."""
    if judgment is None:
        return {SOURCE: source, "rater_hash": [], "rubric_version": [], "guideline_version": []}
    p = judgment.provenance
    return {
        SOURCE: p.source,
        "rater_hash": [p.rater_hash or p.rater_id],
        "rubric_version": [f"{p.rubric_id}@{p.rubric_version}"] if p.rubric_id else [],
        "guideline_version": [p.guideline_version] if p.guideline_version else [],
    }


def provenance_fields(index: LabelIndex, with_columns: bool) -> list[tuple[str, pa.DataType]]:
    """The extra schema fields: ``source`` when sources are mixed, the rest when asked."""
    fields: list[tuple[str, pa.DataType]] = [(SOURCE, pa.string())] if index.mixed else []
    return fields + (PROVENANCE_FIELDS if with_columns else [])


def provenance_columns(
    rows: list[Any], candidates_of: Any, index: LabelIndex, names: list[str]
) -> dict[str, pa.Array]:
    """Columns ``names`` (from :func:`provenance_fields`) for ``rows``; ``candidates_of(row)``
    gives the candidate ids a row is about."""
    if not names:  # no column asked: nothing to look up
        return {}
    values = [row_provenance(r, index, candidates_of(r)) for r in rows]
    types = dict([(SOURCE, pa.string()), *PROVENANCE_FIELDS])
    return {n: pa.array([v[n] for v in values], type=types[n]) for n in names}
