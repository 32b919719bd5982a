"""``trl-sft``: supervised fine-tuning data for TRL's ``SFTTrainer``.

Formats (TRL docs: https://huggingface.co/docs/trl/dataset_formats#language-modeling and
#prompt-completion): conversational ``{"messages": [...prompt turns, assistant answer]}``, or
standard ``{"prompt": str, "completion": str}``.

Rows: accepted demonstrations (latest status per author), and, with
``params={"human_candidates": True}``, candidates written by people (``source == "human"``).

Who accepted each demonstration (issue 28 section 7): a reviewer of the project (``reviewed_by``,
set by the review queue, or named by the imported record), or nobody here: a demonstration
imported with ``"status": "accepted"`` and no ``reviewed_by`` was accepted by the file it came
from. Such rows are kept (importing finished SFT data is a use of the importer) but never pass as
reviewed: the manifest counts them (``format_notes.accepted_by``: ``reviewer`` / ``import``) and
the dataset card says how many rows no reviewer here accepted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from ...schema import JudgmentBase
from .base import (
    MESSAGES,
    Batch,
    ExportData,
    Exporter,
    ExportOptions,
    chunked,
    prompt_value,
    row_provenance_fields,
)
from .provenance import judgment_provenance
from .truth import GATE, candidate_failure


class TRLSFT(Exporter):
    name = "trl-sft"
    description = (
        "TRL SFT (messages, or prompt/completion) from accepted demonstrations: SFTTrainer"
    )
    needs = frozenset({"demonstrations"})
    reference = "https://huggingface.co/docs/trl/dataset_formats#language-modeling"
    params = {"human_candidates": False}

    def schema(self, data: ExportData, options: ExportOptions) -> pa.Schema:
        extra = row_provenance_fields(data, options)
        if data.conversational:
            return pa.schema([("messages", MESSAGES), *extra])
        return pa.schema([("prompt", pa.string()), ("completion", pa.string()), *extra])

    def _answers(self, data: ExportData, options: ExportOptions) -> list[tuple[str, Any]]:
        """``(item_id, answer)`` where an answer is a demonstration or a candidate."""
        by_item: dict[str, list[Any]] = {}
        for demo in data.demonstrations:
            by_item.setdefault(demo.item_id, []).append(demo)
        if self.param(options, "human_candidates"):
            for item in data.items.values():
                for cand in item.candidates:
                    if cand.source != "human":
                        continue
                    if reason := candidate_failure(item, cand.key):  # the truth gate
                        data.drops.drop(GATE, f"SFT answer: {reason}", item.key)
                        continue
                    by_item.setdefault(item.key, []).append(cand)
        return [(item_id, a) for item_id in data.items for a in by_item.get(item_id, ())]

    def notes(self, data: ExportData, options: ExportOptions) -> dict[str, Any]:
        by_import = sum(d.reviewed_by is None for d in data.demonstrations)
        return {
            "accepted_by": {
                "reviewer": len(data.demonstrations) - by_import,
                "import": by_import,
            }
        }

    def note_counts(self, data: ExportData, options: ExportOptions) -> dict[str, Any]:
        return self.notes(data, options)

    def usage(self, manifest: dict[str, Any]) -> list[str]:
        accepted = manifest.get("format_notes", {}).get("accepted_by") or {}
        if not accepted.get("import"):
            return []
        return [
            "## Review",
            "",
            f"**{accepted['import']} of {accepted['import'] + accepted['reviewer']} demonstrations "
            "were accepted by the file they were imported from (`accepted_by: import`), not by a "
            "reviewer of this project.** Review them in the queue, or leave them out, before "
            "training on them.",
            "",
        ]

    def batches(self, data: ExportData, options: ExportOptions) -> Iterator[Batch]:
        answers = self._answers(data, options)
        extra = [name for name, _ in row_provenance_fields(data, options)]
        for rows in chunked(len(answers)):
            part = answers[rows.start : rows.stop]
            if data.conversational:
                batch: Batch = {
                    "messages": [_conversation(data, item_id, a) for item_id, a in part]
                }
            else:
                batch = {
                    "prompt": [
                        prompt_value(data.items[item_id].prompt, False) for item_id, _ in part
                    ],
                    "completion": [a.as_text() for _, a in part],
                }
            if extra:
                # a demonstration is a label; a human-written candidate is no one's label
                prov = [
                    judgment_provenance(a if isinstance(a, JudgmentBase) else None) for _, a in part
                ]
                for name in extra:
                    batch[name] = [p[name] for p in prov]
            yield batch


def _conversation(data: ExportData, item_id: str, answer: Any) -> list[dict[str, str]]:
    turns = list(prompt_value(data.items[item_id].prompt, True))
    if answer.messages is not None:
        turns.extend({"role": m.role, "content": m.content} for m in answer.messages)
    else:
        turns.append({"role": "assistant", "content": answer.text})
    return turns
