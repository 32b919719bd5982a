"""``trl-stepwise``: TRL's stepwise supervision type (process reward models, ``PRMTrainer``).

Format (TRL docs, stepwise supervision: https://huggingface.co/docs/trl/dataset_formats#stepwise-supervision):
``{"prompt": str, "completions": [str, ...], "labels": [bool, ...]}``, one label per step.

Steps run up to and including the first error (the last label is then ``False``). Verdict
mapping: +1 -> ``True``, -1 -> ``False``, 0 (neutral) -> ``True`` (not an error; see
:data:`.resolve.NEUTRAL_STEP_LABEL`). Several raters: majority per step (:func:`.resolve.resolve_steps`).
TRL documents this type in standard form only, so a chat prompt is flattened to text.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from .base import Batch, ExportData, Exporter, ExportOptions, chunked, prompt_value


class TRLStepwise(Exporter):
    name = "trl-stepwise"
    description = "TRL stepwise supervision (prompt, completions, labels): PRMTrainer"
    needs = frozenset({"steps"})
    reference = "https://huggingface.co/docs/trl/dataset_formats#stepwise-supervision"
    task_categories = ("token-classification",)

    def schema(self, data: ExportData, options: ExportOptions) -> pa.Schema:
        return pa.schema(
            [("prompt", pa.string()), ("completions", pa.list_(pa.string())), ("labels", pa.list_(pa.bool_()))]
        )

    def batches(self, data: ExportData, options: ExportOptions) -> Iterator[Batch]:
        for rows in chunked(len(data.steps)):
            steps = data.steps[rows.start : rows.stop]
            yield {
                "prompt": [prompt_value(data.items[s.item_id].prompt, False) for s in steps],
                "completions": [list(s.steps) for s in steps],
                "labels": [list(s.labels) for s in steps],
            }
