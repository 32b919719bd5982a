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

import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from .base import (
    Batch,
    ExportData,
    Exporter,
    ExportOptions,
    pair_columns,
    row_provenance_fields,
    text_type,
)

#: one row per data row, same order: what ``rm eval`` stratifies by (TRL never reads this file)
PAIR_METADATA = "pair_metadata.jsonl"


class TRLPreference(Exporter):
    name = "trl-preference"
    description = "TRL preference (prompt, chosen, rejected): DPOTrainer, RewardTrainer, ORPO, CPO"
    needs = frozenset({"pairs"})
    reference = "https://huggingface.co/docs/trl/dataset_formats#preference"
    rows_in_pass_1 = True
    #: ``margin`` column: ``None`` never; ``"any"`` when any pair has a known strength (null
    #: in the others); ``"all"`` only when every pair has one (see :meth:`margin_written`)
    margin: str | None = None
    #: why a partly known margin is written or left out (manifest ``format_notes.margin``)
    margin_rule = ""

    @staticmethod
    def pair_tally(data: ExportData) -> tuple[int, int]:
        """``(pairs with a known strength, pairs)`` of the whole export."""
        if data.pair_tally is not None:
            return data.pair_tally
        return sum(p.strength is not None for p in data.pairs), len(data.pairs)

    def margin_written(self, data: ExportData) -> bool:
        known, total = self.pair_tally(data)
        if self.margin == "all":
            return bool(total) and known == total
        return self.margin == "any" and known > 0

    def schema(self, data: ExportData, options: ExportOptions) -> pa.Schema:
        t = text_type(data.conversational)
        fields = [("prompt", t), ("chosen", t), ("rejected", t)]
        if self.margin_written(data):
            fields.append(("margin", pa.float64()))
        return pa.schema(fields + row_provenance_fields(data, options))

    def batches(self, data: ExportData, options: ExportOptions) -> Iterator[Batch]:
        extra = [name for name, _ in row_provenance_fields(data, options)]
        return pair_columns(data, margin=self.margin_written(data), extra=extra)

    def chunk_rows(self, data: ExportData, options: ExportOptions) -> Iterator[Batch]:
        """Pass 1's rows of a chunk (:meth:`.Exporter.chunk_rows`): the ``margin`` column
        whenever the format may write one (whether it does is known at the end), ``source``
        and the provenance columns as the chunk's label sources ask."""
        extra = [name for name, _ in row_provenance_fields(data, options)]
        return pair_columns(data, margin=self.margin is not None, extra=extra)

    def side_files(self, data: ExportData, options: ExportOptions) -> dict[str, bytes]:
        """``pair_metadata.jsonl``: item id, domain tags, raters and agreement of each row.

        A side file, not columns: TRL's trainers would carry unknown columns into their
        collators, and the rows stay exactly TRL's documented shape.
        """
        lines = (
            json.dumps(
                {
                    "item_id": p.item_id,
                    "domains": list(data.items[p.item_id].domains),
                    "n_raters": p.n_raters,
                    "agreement": p.agreement,
                },
                ensure_ascii=False,
            )
            + "\n"
            for p in data.pairs
        )
        return {PAIR_METADATA: "".join(lines).encode()}

    def notes(self, data: ExportData, options: ExportOptions) -> dict[str, Any]:
        if self.margin is None:
            return {}
        known, total = self.pair_tally(data)
        written = self.margin_written(data)
        if written and known == total:
            why = "every row has a strength given by its raters"
        elif written:
            why = f"{total - known} rows have no known strength: their margin is null. {self.margin_rule}"
        elif known == 0:
            why = "no row has a known strength (the sources record only the winner): no margin is invented"
        else:
            why = f"{total - known} rows have no known strength. {self.margin_rule}"
        return {
            "margin": {
                "written": written,
                "rows_with_margin": known if written else 0,
                "rows_with_known_strength": known,
                "rows": total,
                "why": why,
            }
        }

    def margin_card_lines(self, manifest: dict[str, Any]) -> list[str]:
        info = manifest.get("format_notes", {}).get("margin")
        if not info:
            return []
        return [
            # one count from one source (issue 31): the rows whose raters gave a strength,
            # whether or not this format writes the column
            f"Margin: {info['rows_with_known_strength']} of {info['rows']} rows carry a real margin "
            f"(the raters' median strength, 1..3); column `margin` "
            f"{'written' if info['written'] else 'left out'}: {info['why']}",
            "",
        ]
