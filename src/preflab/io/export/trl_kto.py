"""``trl-kto``: TRL's unpaired preference type for ``KTOTrainer``.

Format (TRL docs, unpaired preference: https://huggingface.co/docs/trl/dataset_formats#unpaired-preference):
``{"prompt": str | [messages], "completion": str | [assistant message], "label": bool}``.

Rows come from resolved thumbs (majority per candidate) and from resolved preference pairs
(chosen -> ``True``, rejected -> ``False``, as TRL's ``unpair_preference_dataset`` does), in
item order, thumbs first. A candidate in several pairs yields several rows.

**Conflicts** (issue 28 section 7): a completion the rows mark both desirable and undesirable (the
middle answer of ``A > B > C``: chosen against C, rejected against A; or a thumbs-up answer that
lost a comparison). KTO reads every row as an absolute verdict on its completion, and the raters
gave none for this one: they only ranked it between others. Its rows would push the model both
ways, the net direction set by KTO's desirable/undesirable weights, not by people. So by default
(``params={"kto_conflicts": "drop"}``, CLI ``--kto-conflicts drop``) every row of such a completion
is left out; ``keep`` writes them as TRL's ``unpair_preference_dataset`` would. Either way the
manifest counts them (``format_notes.kto_conflicts``: completions, rows, mode) and a drop is in
``gates.kto_conflict``.
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
    ExportError,
    ExportOptions,
    TextCache,
    row_provenance_fields,
    text_type,
)
from .provenance import row_provenance

#: ``--kto-conflicts``: what to do with a completion marked both desirable and undesirable
KTO_CONFLICTS = ("drop", "keep")


def _conflicts(units: dict[str, list[Any]]) -> set[tuple[str, str]]:
    """``(item, candidate)`` of the completions whose rows carry both labels."""
    labels: dict[tuple[str, str], set[bool]] = {}
    for rows in units.values():
        for row in rows:
            labels.setdefault((row[0], row[1]), set()).add(row[2])
    return {key for key, seen in labels.items() if len(seen) == 2}


class TRLKTO(Exporter):
    name = "trl-kto"
    description = "TRL unpaired preference (prompt, completion, label): KTOTrainer"
    needs = frozenset({"pairs", "unary"})
    reference = "https://huggingface.co/docs/trl/dataset_formats#unpaired-preference"
    params = {"from_pairs": True, "from_unary": True, "kto_conflicts": "drop"}

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
        drop = self._mode(options) == "drop"
        conflicts = _conflicts(units)
        for item_id in data.items:
            for row in units.get(item_id, ()):
                if drop and (row[0], row[1]) in conflicts:
                    data.drops.drop("kto_conflict", "desirable-and-undesirable", item_id)
                    continue
                yield row

    def _mode(self, options: ExportOptions) -> str:
        mode = self.param(options, "kto_conflicts")
        if mode not in KTO_CONFLICTS:
            raise ExportError(
                f"--kto-conflicts {mode!r}: choose {' or '.join(KTO_CONFLICTS)} (a completion "
                "marked both desirable and undesirable: drop its rows, or keep them)"
            )
        return str(mode)

    def check_params(self, options: ExportOptions) -> None:
        super().check_params(options)
        self._mode(options)

    def notes(self, data: ExportData, options: ExportOptions) -> dict[str, Any]:
        units: dict[str, list[tuple[str, str, bool]]] = {}
        if self.param(options, "from_unary"):
            for u in data.unary:
                units.setdefault(u.item_id, []).append((u.item_id, u.candidate_id, u.label))
        if self.param(options, "from_pairs"):
            for p in data.pairs:
                units.setdefault(p.item_id, []).extend(
                    [(p.item_id, p.chosen_id, True), (p.item_id, p.rejected_id, False)]
                )
        conflicts = _conflicts(units)
        rows = sum((r[0], r[1]) in conflicts for rs in units.values() for r in rs)
        mode = self._mode(options)
        return {"kto_conflicts": {"completions": len(conflicts), "rows": rows, "mode": mode}}

    def note_counts(self, data: ExportData, options: ExportOptions) -> dict[str, Any]:
        # a conflict is one completion's: each chunk of items counts its own
        return self.notes(data, options)

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
