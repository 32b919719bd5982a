"""``trl-stepwise``: TRL's stepwise supervision type (process reward models).

TRL 0.x trained process reward models on it with ``PRMTrainer``; the TRL release this project
checks against (1.16, ``TRL_CHECKED``) ships no PRM trainer (neither in ``trl`` nor in
``trl.experimental``), and the dataset card says so (``tests/consumers`` checks the installed TRL).

Format (TRL docs, stepwise supervision: https://huggingface.co/docs/trl/dataset_formats#stepwise-supervision):
``{"prompt": str, "completions": [str, ...], "labels": [bool, ...]}``, one label per step.

Steps run up to and including the first error (the last label is then ``False``). Verdict
mapping: +1 -> ``True``, -1 -> ``False``, 0 (neutral) -> ``True`` (not an error; see
:data:`.resolve.NEUTRAL_STEP_LABEL`). Several raters: majority per step (:func:`.resolve.resolve_steps`).
TRL documents this type in standard form only, so a chat prompt is flattened to text. A
trajectory gives one row per assistant turn carrying ``prm_steps``, the prompt holding every
prior turn (earlier assistant turns, tool calls and tool outputs included).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from ...schema.trajectory import Trajectory
from .base import (
    Batch,
    ExportData,
    Exporter,
    ExportOptions,
    chunked,
    prompt_value,
    row_provenance_fields,
)
from .provenance import row_provenance
from .trl_sft_agent import trajectory_step_rows
from .truth import TRAJECTORY_CANDIDATE

#: the TRL release the card was checked against (tests/io/test_export_card_consumers.py)
TRL_CHECKED = "1.16"


class TRLStepwise(Exporter):
    name = "trl-stepwise"
    description = "TRL stepwise supervision (prompt, completions, labels): process reward models"
    needs = frozenset({"steps"})
    reference = "https://huggingface.co/docs/trl/dataset_formats#stepwise-supervision"
    task_categories = ("token-classification",)

    def usage(self, manifest: dict[str, Any]) -> list[str]:
        return [
            f"## Training a process reward model (checked against TRL {TRL_CHECKED})",
            "",
            f"TRL {TRL_CHECKED} documents this dataset type (stepwise supervision) but ships no "
            "trainer for it: `PRMTrainer`, which read it, belonged to TRL 0.x releases and is gone "
            "from the current one. Train a token-classification model on `completions` / `labels` "
            "yourself (one label per step, the step's last token), or pin an older TRL that still "
            "has `PRMTrainer`.",
            "",
        ]

    def schema(self, data: ExportData, options: ExportOptions) -> pa.Schema:
        return pa.schema(
            [
                ("prompt", pa.string()),
                ("completions", pa.list_(pa.string())),
                ("labels", pa.list_(pa.bool_())),
                *row_provenance_fields(data, options),
            ]
        )

    def batches(self, data: ExportData, options: ExportOptions) -> Iterator[Batch]:
        extra = [name for name, _ in row_provenance_fields(data, options)]
        rows = [
            (*row, s) for s in data.steps for row in _rows(data, s)
        ]  # (prompt, steps, labels, resolved steps)
        for part in chunked(len(rows)):
            chunk = rows[part.start : part.stop]
            batch: Batch = {
                "prompt": [r[0] for r in chunk],
                "completions": [r[1] for r in chunk],
                "labels": [r[2] for r in chunk],
            }
            if extra:
                prov = [row_provenance(r[3], data.label_index, {r[3].candidate_id}) for r in chunk]
                for name in extra:
                    batch[name] = [p[name] for p in prov]
            yield batch


def _rows(data: ExportData, s) -> list[tuple[str, list[str], list[bool]]]:
    """A trajectory's steps give a row per assistant turn, with every prior turn as the prompt;
    other items one row with the item's prompt."""
    stored = data.items[s.item_id].metadata.get("trajectory")
    if s.candidate_id == TRAJECTORY_CANDIDATE and isinstance(stored, dict):
        return trajectory_step_rows(Trajectory.model_validate(stored), list(s.labels))
    return [(prompt_value(data.items[s.item_id].prompt, False), list(s.steps), list(s.labels))]
