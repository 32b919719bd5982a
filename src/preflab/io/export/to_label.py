"""``to-label``: a project's unlabelled pairs as ``to_label.jsonl``, the shape people label from.

Rows ``{"id", "prompt", "answer_a", "answer_b"}``: every item with exactly two candidates and no
label left after the export's source filters (excluded labels do not count; AI labels do not
count unless ``include_ai``), in item order. The pair importer reads these rows back as the same
items. Candidates' models are not written: a file to label is blind. Items with another number
of candidates are left out and counted in the manifest (``not_two_candidates``), as are labelled
ones (``labelled``).

Prompts and answers are text, or message lists when the export is conversational (the project has
chat prompts, or ``--conversational``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from .base import Batch, ExportData, Exporter, ExportOptions, TextCache, chunked, text_type


class ToLabel(Exporter):
    name = "to-label"
    description = "unlabelled pairs to label: id, prompt, answer_a, answer_b (to_label.jsonl)"
    needs = frozenset({"judgments"})
    reference = "preflab pair format: {id, prompt, answer_a, answer_b}"

    def schema(self, data: ExportData, options: ExportOptions) -> pa.Schema:
        t = text_type(data.conversational)
        return pa.schema([("id", pa.string()), ("prompt", t), ("answer_a", t), ("answer_b", t)])

    def _unlabelled(self, data: ExportData) -> list[str]:
        labelled = {j.item_id for j in data.judgments}
        ids = []
        for item_id, item in data.items.items():
            if item_id in labelled:
                data.drops.drop("to_label", "labelled", item_id)
            elif len(item.candidates) != 2:
                data.drops.drop("to_label", "not_two_candidates", item_id)
            else:
                ids.append(item_id)
        return ids

    def batches(self, data: ExportData, options: ExportOptions) -> Iterator[Batch]:
        ids = self._unlabelled(data)
        text = TextCache(data.items, data.conversational)
        for rows in chunked(len(ids)):
            part = ids[rows.start : rows.stop]
            cands = [data.items[i].candidates for i in part]
            yield {
                "id": part,
                "prompt": [text.prompt(i) for i in part],
                "answer_a": [
                    text.completion(i, c[0].key) for i, c in zip(part, cands, strict=True)
                ],
                "answer_b": [
                    text.completion(i, c[1].key) for i, c in zip(part, cands, strict=True)
                ],
            }
