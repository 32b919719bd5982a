"""``critiques``: the critique spans raters marked, one row per judgment and answer with spans.

Each row is one rater's critique of one answer (docs/critiques.md)::

    {"item_id", "candidate_id", "kind", "rater_hash", "source",
     "prompt": str, "answer": str,
     "spans": [{"start": int, "end": int, "category": str, "note": str}, ...]}

``answer`` is :meth:`preflab.schema.Candidate.as_text` of the candidate, the text the offsets
index: ``answer[start:end]`` (Python ``str`` slicing, code points, half-open) is the marked
stretch. ``prompt`` is :func:`preflab.schema.prompt_as_text`. Spans are in their stored order
(by offsets, then category and note). ``rater_hash`` and ``source`` are the judgment's, as in
``raw``; AI labels are left out unless ``include_ai`` (the gate of every format), excluded
judgments always. Judgments without spans give no row. Not training data: no gate of a training
format applies, and gold items are kept, as in ``raw``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from ...schema import SpannedJudgment, prompt_as_text
from .base import BATCH_ROWS, Batch, ExportData, Exporter, ExportOptions

NAMES = ["item_id", "candidate_id", "kind", "rater_hash", "source", "prompt", "answer", "spans"]

SPAN_TYPE = pa.list_(
    pa.struct(
        [
            ("start", pa.int64()),
            ("end", pa.int64()),
            ("category", pa.string()),
            ("note", pa.string()),
        ]
    )
)


class Critiques(Exporter):
    name = "critiques"
    description = "critique spans per rater and answer (prompt, answer, offsets, category, note)"
    needs = frozenset({"judgments"})
    one_pass = True
    training = False
    reference = "docs/critiques.md (offsets into the answer text, code points, half-open)"

    def schema(self, data: ExportData, options: ExportOptions) -> pa.Schema:
        string = ("item_id", "candidate_id", "kind", "rater_hash", "source", "prompt", "answer")
        return pa.schema([*((n, pa.string()) for n in string), ("spans", SPAN_TYPE)])

    def batches(self, data: ExportData, options: ExportOptions) -> Iterator[Batch]:
        batch: Batch = {n: [] for n in NAMES}
        prompts: dict[str, str] = {}
        for j in data.judgments:
            if not isinstance(j, SpannedJudgment) or not j.spans:
                continue
            item = data.items[j.item_id]
            if j.item_id not in prompts:
                prompts.clear()  # judgments come grouped by item: one prompt held at a time
                prompts[j.item_id] = prompt_as_text(item.prompt)
            by_answer: dict[str, list[dict[str, Any]]] = {}
            for s in j.spans:
                by_answer.setdefault(s.candidate_id, []).append(
                    {"start": s.start, "end": s.end, "category": s.category, "note": s.note}
                )
            prov = j.provenance
            for cand, spans in by_answer.items():
                batch["item_id"].append(j.item_id)
                batch["candidate_id"].append(cand)
                batch["kind"].append(j.kind)
                batch["rater_hash"].append(prov.rater_hash or "")
                batch["source"].append(prov.source)
                batch["prompt"].append(prompts[j.item_id])
                batch["answer"].append(item.candidate(cand).as_text())
                batch["spans"].append(spans)
            if len(batch["item_id"]) >= BATCH_ROWS:
                yield batch
                batch = {n: [] for n in NAMES}
        if batch["item_id"]:
            yield batch

    def usage(self, manifest: dict[str, Any]) -> list[str]:
        return [
            "## Reading the spans",
            "",
            "Offsets index the `answer` column as Python slices a `str` (Unicode code points, "
            "half-open):",
            "",
            "```python",
            "for row in ds:",
            "    for span in row['spans']:",
            "        marked = row['answer'][span['start'] : span['end']]",
            "```",
            "",
        ]
