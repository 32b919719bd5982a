"""``trl-preference``: TRL's preference type with an explicit prompt (DPO, ORPO, CPO, reward).

Format (TRL docs, "Dataset formats and types", preference type:
https://huggingface.co/docs/trl/dataset_formats#preference):

- standard: ``{"prompt": str, "chosen": str, "rejected": str}``
- conversational: ``{"prompt": [messages], "chosen": [one assistant message],
  "rejected": [one assistant message]}``

Conversational when any item's prompt is a message list, or when forced
(``ExportOptions.conversational``). Texts are exported verbatim: TRL's DPO trainer tokenizes
prompt and completion separately, the reward trainer concatenates them.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from .base import Batch, ExportData, Exporter, ExportOptions, pair_columns, text_type


class TRLPreference(Exporter):
    name = "trl-preference"
    description = "TRL preference (prompt, chosen, rejected): DPOTrainer, RewardTrainer, ORPO, CPO"
    needs = frozenset({"pairs"})
    reference = "https://huggingface.co/docs/trl/dataset_formats#preference"
    margin = False

    def schema(self, data: ExportData, options: ExportOptions) -> pa.Schema:
        t = text_type(data.conversational)
        fields = [("prompt", t), ("chosen", t), ("rejected", t)]
        if self.margin:
            fields.append(("margin", pa.float64()))
        return pa.schema(fields)

    def batches(self, data: ExportData, options: ExportOptions) -> Iterator[Batch]:
        return pair_columns(data, margin=self.margin)
