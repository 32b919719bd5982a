"""``trl-kto``: TRL's unpaired preference type for ``KTOTrainer``.

Format (TRL docs, unpaired preference: https://huggingface.co/docs/trl/dataset_formats#unpaired-preference):
``{"prompt": str | [messages], "completion": str | [assistant message], "label": bool}``.

Rows come from resolved thumbs (majority per candidate) and from resolved preference pairs
(chosen -> ``True``, rejected -> ``False``, as TRL's ``unpair_preference_dataset`` does), in
item order, thumbs first. A candidate in several pairs yields several rows.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from .base import BATCH_ROWS, Batch, ExportData, Exporter, ExportOptions, TextCache, text_type


class TRLKTO(Exporter):
    name = "trl-kto"
    description = "TRL unpaired preference (prompt, completion, label): KTOTrainer"
    needs = frozenset({"pairs", "unary"})
    reference = "https://huggingface.co/docs/trl/dataset_formats#unpaired-preference"
    params = {"from_pairs": True, "from_unary": True}

    def schema(self, data: ExportData, options: ExportOptions) -> pa.Schema:
        t = text_type(data.conversational)
        return pa.schema([("prompt", t), ("completion", t), ("label", pa.bool_())])

    def _rows(self, data: ExportData, options: ExportOptions) -> Iterator[tuple[str, str, bool]]:
        units: dict[str, list[tuple[str, str, bool]]] = {}
        if self.param(options, "from_unary"):
            for u in data.unary:
                units.setdefault(u.item_id, []).append((u.item_id, u.candidate_id, u.label))
        if self.param(options, "from_pairs"):
            for p in data.pairs:
                rows = units.setdefault(p.item_id, [])
                rows.append((p.item_id, p.chosen_id, True))
                rows.append((p.item_id, p.rejected_id, False))
        for item_id in data.items:
            yield from units.get(item_id, ())

    def batches(self, data: ExportData, options: ExportOptions) -> Iterator[Batch]:
        cache = TextCache(data.items, data.conversational)
        batch: Batch = {"prompt": [], "completion": [], "label": []}
        for item_id, cand, label in self._rows(data, options):
            batch["prompt"].append(cache.prompt(item_id))
            batch["completion"].append(cache.completion(item_id, cand))
            batch["label"].append(label)
            if len(batch["label"]) >= BATCH_ROWS:
                yield batch
                batch = {"prompt": [], "completion": [], "label": []}
        if batch["label"]:
            yield batch
