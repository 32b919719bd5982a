"""The DPO floor's critique spans (``policy.require_spans``, docs/critiques.md, docs/gates.md).

With ``require_spans`` on, a resolved pair is exported only when one of its item's labels (the
resolved label set: AI labels only with ``--include-ai``, each rater's latest revision) marked a
critique span on the chosen or the rejected answer; the others are dropped and counted in the
manifest (``gates.spans``: ``no-critique-span``). The gate looks at one row at a time, with the
labels of its own item, so the in-memory and the streamed paths (a chunk holds whole items)
decide the same. Off (the default), nothing here runs: the files stay byte-identical.
"""

from __future__ import annotations

from ...schema import SpannedJudgment
from .base import ExportData

GATE = "spans"
REASON = "no-critique-span"


def spanned_answers(data: ExportData) -> set[tuple[str, str]]:
    """``(item, candidate)`` of every answer a label of ``data`` marked with a span."""
    return {
        (j.item_id, s.candidate_id)
        for j, _ in data.labels_with_batch
        if isinstance(j, SpannedJudgment) and j.spans
        for s in j.spans
    }


def spans_gate(data: ExportData) -> None:
    """Drop the pairs without a critique span on either answer (see the module doc)."""
    marked = spanned_answers(data)
    kept = []
    for p in data.pairs:
        if (p.item_id, p.chosen_id) in marked or (p.item_id, p.rejected_id) in marked:
            kept.append(p)
        else:
            data.drops.drop(GATE, REASON, p.item_id)
    data.pairs = kept
