"""``trl-kto``: TRL's unpaired preference type for ``KTOTrainer``.

Format (TRL docs, unpaired preference: https://huggingface.co/docs/trl/dataset_formats#unpaired-preference):
``{"prompt": str | [messages], "completion": str | [assistant message], "label": bool}``.

Rows come from resolved thumbs (majority per candidate) and from resolved preference pairs
(chosen -> ``True``, rejected -> ``False``, as TRL's ``unpair_preference_dataset`` does), in
item order, thumbs first. A candidate in several pairs yields several rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from .base import (
    BATCH_ROWS,
    Batch,
    ExportData,
    Exporter,
    ExportOptions,
    TextCache,
    row_provenance_fields,
    text_type,
)
from .provenance import row_provenance


class TRLKTO(Exporter):
    name = "trl-kto"
    description = "TRL unpaired preference (prompt, completion, label): KTOTrainer"
    needs = frozenset({"pairs", "unary"})
    reference = "https://huggingface.co/docs/trl/dataset_formats#unpaired-preference"
    params = {"from_pairs": True, "from_unary": True}

    def schema(self, data: ExportData, options: ExportOptions) -> pa.Schema:
        t = text_type(data.conversational)
        fields = [("prompt", t), ("completion", t), ("label", pa.bool_())]
        return pa.schema(fields + row_provenance_fields(data, options))

    def _rows(
        self, data: ExportData, options: ExportOptions
    ) -> Iterator[tuple[str, str, bool, Any, set[str]]]:
        """``(item, candidate, label, resolved row, candidates the row is about)``."""
        units: dict[str, list[tuple[str, str, bool, Any, set[str]]]] = {}
        if self.param(options, "from_unary"):
            for u in data.unary:
                row = (u.item_id, u.candidate_id, u.label, u, {u.candidate_id})
                units.setdefault(u.item_id, []).append(row)
        if self.param(options, "from_pairs"):
            for p in data.pairs:
                rows = units.setdefault(p.item_id, [])
                both = {p.chosen_id, p.rejected_id}
                rows.append((p.item_id, p.chosen_id, True, p, both))
                rows.append((p.item_id, p.rejected_id, False, p, both))
        for item_id in data.items:
            yield from units.get(item_id, ())

    def batches(self, data: ExportData, options: ExportOptions) -> Iterator[Batch]:
        cache = TextCache(data.items, data.conversational)
        extra = [name for name, _ in row_provenance_fields(data, options)]
        names = ["prompt", "completion", "label", *extra]
        batch: Batch = {n: [] for n in names}
        for item_id, cand, label, row, about in self._rows(data, options):
            batch["prompt"].append(cache.prompt(item_id))
            batch["completion"].append(cache.completion(item_id, cand))
            batch["label"].append(label)
            if extra:
                provenance = row_provenance(row, data.label_index, about)
                for name in extra:
                    batch[name].append(provenance[name])
            if len(batch["label"]) >= BATCH_ROWS:
                yield batch
                batch = {n: [] for n in names}
        if batch["label"]:
            yield batch
